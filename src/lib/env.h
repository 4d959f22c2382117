/*
 * env — libidpool's environments: where a take goes, and what came back.
 * An environment is a Redis (redis://, FCALL idpool_take) or an ID issuer
 * (http[s]://, GET /v1/ids/{key}?count=N). Both answer the same way to the
 * client: IDs, or a refusal it acts on (client.c). Used by the client's
 * background thread only: blocking I/O, bounded by io_timeout_ms.
 */
#ifndef IDPOOL_LIB_ENV_H
#define IDPOOL_LIB_ENV_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include "idpool.h"
#include "takereply.h"
#include "url.h"

/* One take's result; its outcome (takereply.h) is returned beside it. */
struct take_result {
    uint64_t *ids; /* T_IDS: heap, ids[0..n), freed by the caller */
    size_t n;
    uint64_t hint_ms; /* T_EPOCH, T_RATE: ask again after this */
    unsigned limit;   /* T_LIMIT: max_size_per_times */
    char msg[256];    /* what went wrong, naming the environment (not T_IDS) */
    int skipped;      /* T_DOWN without a try: the environment is backing off */
};

struct env {
    int http; /* an issuer; else a Redis */
    char name[300];
    uint64_t down_until_ms; /* not tried before this after a failure */
    unsigned backoff_ms;
    struct redis_url rurl;
    redisContext *rc;
    struct issuer_url iurl;
    int fd; /* the issuer connection, or -1 */
    /*
     * The connection's socket (either transport), -1 when none: set as soon
     * as it exists, cleared before it is closed, read by a forked child
     * (env_forget), so the child closes its copy of the parent's socket and
     * never another descriptor. Atomic: the background thread writes it.
     */
    int sock;
    SSL_CTX *tls;
    SSL *ssl;
    char *buf; /* the issuer's answer */
    size_t cap;
};

/* When e may be tried again: 0 when it has a connection or is not backing off. */
static inline uint64_t env_retry_at(const struct env *e)
{
    return e->rc || e->fd >= 0 ? 0 : e->down_until_ms;
}

/* Parse url into e (nothing connected). 0, or -1 with a message in err. */
int env_init(struct env *e, const char *url, char *err, size_t errlen);
void env_free(struct env *e);

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
}

/*
 * The transports: one take of `count` IDs of application `key` from e,
 * (re)connecting as needed, r zeroed by the caller; now is CLOCK_MONOTONIC
 * ms. redisenv.c: FCALL idpool_take on the Redis keys k_pool and k_meta.
 * issuer.c: GET {prefix}/v1/ids/{key}?count=N.
 */
enum take_outcome redis_take(struct env *e, const struct idpool_options *o, const char *k_pool,
                             const char *k_meta, unsigned count, uint64_t now,
                             struct take_result *r);
enum take_outcome issuer_take(struct env *e, const struct idpool_options *o, const char *key,
                              unsigned count, uint64_t now, struct take_result *r);

#endif
