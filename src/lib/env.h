/*
 * env — libidpool's environments: where a take goes, and what came back.
 * An environment is reached by a transport, one file each behind struct
 * env_ops (seatd's seat_impl, hiredis' redisContextFuncs): redisenv.c
 * (redis://, redis-sentinel://: FCALL idpool_take), clusterenv.c
 * (redis-cluster://: the same, where the key's slot lives) and issuer.c
 * (http[s]://, GET /v1/ids/{key}?count=N), listed in env.c's
 * transports[]; a new kind of
 * environment is a new file and a row there. Every transport answers the
 * same way: IDs, or a refusal the client acts on (takereply.h, failover.h).
 * Used by the client's background thread only: blocking I/O, bounded by
 * io_timeout_ms.
 */
#ifndef IDPOOL_LIB_ENV_H
#define IDPOOL_LIB_ENV_H

#include <stddef.h>
#include <stdint.h>

#include <unistd.h>

#include "idpool.h"
#include "takereply.h"

/* One take's result; its outcome (takereply.h) is returned beside it. */
struct take_result {
    uint64_t *ids; /* T_IDS: heap, ids[0..n), freed by the caller */
    size_t n;
    uint64_t hint_ms; /* T_EPOCH, T_RATE: ask again after this */
    unsigned limit;   /* T_LIMIT: max_size_per_times */
    char msg[256];    /* what went wrong, naming the environment (not T_IDS) */
    int skipped;      /* T_DOWN without a try: the environment is backing off */
    /* A Cluster's answers on the way (any outcome): */
    unsigned moved;   /* MOVED followed */
    unsigned asked;   /* ASK followed */
    unsigned retried; /* TRYAGAIN and CLUSTERDOWN waited out */
};

/* What one take asks for: `count` IDs of application `key`. */
struct take_req {
    const struct idpool_options *o;
    const char *key;
    const char *k_pool, *k_meta; /* its Redis keys */
    unsigned count;
};

struct env;

/* A transport: how takes reach one kind of environment. */
struct env_ops {
    const char *const *schemes; /* the URL schemes it serves ("redis://"), NULL-terminated */
    const char *usage;          /* its URL's form, for error messages */
    /* A new environment of url (nothing connected): NULL with a message in err. */
    struct env *(*open)(const char *url, char *err, size_t errlen);
    /*
     * One take (e is not backing off), (re)connecting as needed; on a
     * failure that is not a refusal, env_fail(e). r is zeroed.
     */
    enum take_outcome (*take)(struct env *e, const struct take_req *q, struct take_result *r);
    int (*connected)(const struct env *e); /* e holds a connection */
    void (*close)(struct env *e);          /* close e's connection (no back-off) */
    void (*free)(struct env *e);           /* e and all it holds (closed first) */
    /*
     * Optional (a transport with a connection per server: a Cluster's):
     * when a take of key may be tried (CLOCK_MONOTONIC ms; <= now: now),
     * instead of e's own back-off while it holds no connection; and in a
     * forked child, close the child's copies of the sockets that
     * struct env's one sock cannot name (see env_forget).
     */
    uint64_t (*retry_at)(const struct env *e, const char *key);
    void (*forget)(struct env *e);
};

/* What every environment has; each transport's struct begins with it. */
struct env {
    const struct env_ops *ops;
    char name[300];         /* host:port, in messages */
    uint64_t down_until_ms; /* not tried before this after a failure */
    unsigned backoff_ms;
    /*
     * The connection's socket (any transport), -1 when none: set as soon
     * as it exists, cleared before it is closed, read by a forked child
     * (env_forget), so the child closes its copy of the parent's socket and
     * never another descriptor. Atomic: the background thread writes it.
     */
    int sock;
};

/* The transports (env.c's transports[] lists them). */
extern const struct env_ops redis_env_ops, cluster_env_ops, issuer_env_ops;

/* A new environment of url, by the transport of its scheme: NULL with a message in err. */
struct env *env_new(const char *url, char *err, size_t errlen);
/* For the transports' open: e's common part, named host:port. */
void env_base(struct env *e, const struct env_ops *ops, const char *host, int port);
void env_free(struct env *e);

/*
 * One take from e, r zeroed here; now is CLOCK_MONOTONIC ms. T_DOWN with
 * r->skipped, without a try, while e is backing off.
 */
enum take_outcome env_take(struct env *e, const struct take_req *q, uint64_t now,
                           struct take_result *r);

/*
 * When a take of key (its pool's Redis key) from e may be tried again: 0
 * when e has a connection (a Cluster: to the key's primary) or is not
 * backing off.
 */
uint64_t env_retry_at(const struct env *e, const char *key);

/*
 * What a refusal "IDPOOL_<CODE> <message>" (idpool_take's error reply, or
 * an issuer's error code and message joined by a space) means to a client
 * (takereply.h's table); hint_ms and limit are read from the message.
 * Anything not ours is T_DOWN.
 */
enum take_outcome env_refusal(const char *text, unsigned count, struct take_result *r);
/* For the transports: r->msg = "<e's name>: <fmt...>". */
void take_msg(struct take_result *r, const struct env *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*
 * For the transports: close e's connection and back off before the next
 * try, counted from now (not from the take's start: a timeout may have
 * used up the whole back-off).
 */
void env_fail(struct env *e);
/* Close e's connection, whichever transport (no back-off). */
void env_close(struct env *e);

struct redisReply;
/*
 * For the Redis transports: what idpool_take's reply y means (IDs into r,
 * or a refusal read by env_refusal; anything else T_DOWN), r->msg saying
 * what, after node (the server that answered, or NULL). Closes nothing:
 * the transport decides what a T_DOWN closes.
 */
enum take_outcome redis_take_reply(const struct env *e, const char *node, const struct take_req *q,
                                   const struct redisReply *y, struct take_result *r);

/*
 * Held around every OpenSSL call of the issuer transport, never across a
 * wait for the network (its sockets are non-blocking), and by the fork
 * handlers across fork(): no thread of libidpool is inside OpenSSL when a
 * child is made (OpenSSL keeps locks of its own that fork would copy held,
 * and the child's thread calls OpenSSL again).
 */
void env_tls_lock(void);
void env_tls_unlock(void);

/* e's connection's socket is now fd (-1: none); see struct env's sock. */
static inline void env_sock(struct env *e, int fd)
{
    __atomic_store_n(&e->sock, fd, __ATOMIC_SEQ_CST);
}

/*
 * In a forked child: close the child's copy of e's socket, touching nothing
 * else of e (the parent's thread may have been inside hiredis or OpenSSL at
 * the fork: e's objects are left as they are, never used again). A socket
 * being connected at the instant of the fork may stay open in the child
 * until it exits; it is never read or written.
 */
static inline void env_forget(struct env *e)
{
    int fd = __atomic_exchange_n(&e->sock, -1, __ATOMIC_SEQ_CST);

    if (fd >= 0)
        close(fd);
    if (e->ops->forget)
        e->ops->forget(e);
}

#endif
