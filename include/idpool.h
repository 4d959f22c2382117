/*
 * idpool.h — libidpool, the in-process client of idpool.
 *
 * A client takes IDs from one or more *environments* in preference order
 * (each an independent idpool deployment: its own Redis and MySQL, rows with
 * the same keys and a different `remainder` of the same `delta`, so that
 * their IDs never collide). A background thread keeps a buffer per
 * application filled from the environments, so `idpool_next()` is a read
 * from memory: no call waits for Redis while the buffer holds IDs.
 *
 * Two names not to confuse: `idpool_take` is the Redis Function in the
 * environment (src/idpool.lua) that the background thread calls, with
 * FCALL, to bring a batch of IDs into the buffer; `idpool_next()` and
 * `idpool_next_n()` are this library's calls that hand IDs out of the
 * buffer to the caller. No function of this header is called idpool_take.
 *
 *   struct idpool_client *c;
 *   char err[256];
 *   const char *envs[] = {"redis://10.0.0.1:6379/0", "redis://10.1.0.1:6379/0"};
 *   if (idpool_client_new(envs, 2, NULL, &c, err, sizeof(err)) != IDPOOL_OK)
 *       die(err);
 *   struct idpool_app *user;
 *   if (idpool_app_get(c, "user", &user) != IDPOOL_OK)
 *       die("bad key");
 *   uint64_t id;
 *   enum idpool_rc rc = idpool_next(user, &id);  // IDPOOL_OK, or an error below
 *   ...
 *   idpool_client_free(c);
 *
 * Guarantees: an ID is returned at most once by all clients of all
 * processes together (it left its pool through the Redis Function
 * idpool_take, which never serves a pool not re-validated after a Redis
 * restart, rollback or failover); never a made-up ID. For a monotonic
 * application the IDs one thread gets from one environment increase; order
 * is NOT kept across a failover to another environment, nor between
 * threads. IDs in a buffer when the process exits are gaps.
 *
 * Thread safety: every function may be called from any thread, except that
 * idpool_client_free() must not run concurrently with other calls on the
 * same client. Each thread keeps a small block of IDs per application, so
 * the common path takes no lock shared between threads.
 *
 * fork(): a client may be used on both sides of a fork() (the pre-fork
 * server's pattern: create the client, fork the workers). In the child
 * every client starts empty: the IDs buffered in the parent (the shared
 * buffers and the forking thread's blocks) are the parent's alone, the
 * child never reads or writes the parent's connections (it closes its
 * copies of their sockets), its counters start at zero, and its own
 * background thread and connections are made by its first call that needs
 * IDs. Handled by pthread_atfork, so fork() through the C library (not a
 * raw clone(2) system call); fork waits for the client's locks and for
 * libidpool's OpenSSL step in progress, none held across a wait for the
 * network. A connection being opened at the instant of the fork may stay
 * open, unused, in the child until it exits.
 *
 * Link with `pkg-config --libs idpool`. Stable ABI within a major version
 * (soname libidpool.so.0): structs given by the caller start with their
 * size, so fields are only ever added at the end. Every function that can
 * fail returns an enum idpool_rc. (Before release the soname-0 API was
 * changed once: idpool_app() became idpool_app_get(), idpool_take()
 * became idpool_next_n() with the buffer before its length; see the
 * README, "Changes in the C API".)
 */
#ifndef IDPOOL_H
#define IDPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define IDPOOL_API __attribute__((visibility("default")))
#else
#define IDPOOL_API
#endif

/* What every call that can fail returns: IDPOOL_OK (0), or one of these (negative). */
enum idpool_rc {
    IDPOOL_OK = 0,
    IDPOOL_EINVAL = -1,    /* a bad argument (NULL, a bad key, n == 0) */
    IDPOOL_ENOMEM = -2,    /* out of memory */
    IDPOOL_ETIMEDOUT = -3, /* no environment supplied IDs within timeout_ms */
    IDPOOL_ENOAPP = -4,    /* no environment serves this application (IDPOOL_NOAPP everywhere) */
    IDPOOL_ECLOSED = -5,   /* the client is being freed */
};

/* Options; start from idpool_options_init(). Zero fields mean the default. */
struct idpool_options {
    size_t size;            /* sizeof(struct idpool_options), set by idpool_options_init */
    unsigned timeout_ms;    /* how long one idpool_next/_next_n call may wait, in all (1000) */
    unsigned io_timeout_ms; /* connect and command timeout per environment (500) */
    unsigned failover_ms;   /* an environment that supplies nothing this long is left (500) */
    unsigned failback_ms;   /* how often a more preferred environment is tried again (1000) */
    unsigned target_ms;     /* the buffer aims at this much demand (500) */
    unsigned min_batch;     /* IDs per take from an environment at least (100) */
    unsigned max_batch;     /* ... at most (1000; also the row's max_size_per_times) */
    const char *key_prefix; /* Redis key prefix ("idpool") */
    unsigned buffer;        /* IDs kept buffered at least, however low the demand (0: a batch) */
    const char *ca_file;    /* https issuers: trusted CAs, PEM (NULL: the system's) */
};

/*
 * All defaults, and size set to the caller's sizeof(struct idpool_options):
 * inline so that a program built against an older header tells a newer
 * library which fields it has.
 */
static inline void idpool_options_init(struct idpool_options *o)
{
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
}

struct idpool_client;
struct idpool_app;

/*
 * A client for environments envs[0..n) in preference order, each either
 *   redis://[[user]:password@]host[:port][/db]   a Redis (the background thread
 *                                                 calls FCALL idpool_take), or
 *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master
 *                                                 the primary a Sentinel set names
 *                                                 (asked at every reconnect; ROLE
 *                                                 must say master; a lost take is
 *                                                 never sent again), or
 *   redis-cluster://[[user]:password@]host[:port][,host[:port]...]
 *                                                 a Redis Cluster from its seed
 *                                                 nodes: each take goes to the
 *                                                 primary of its keys' slot (a
 *                                                 connection per primary; the slot
 *                                                 table from CLUSTER SLOTS; MOVED,
 *                                                 ASK, TRYAGAIN and CLUSTERDOWN
 *                                                 followed within io_timeout_ms; a
 *                                                 lost take never sent again), or
 *   http[s]://TOKEN@host[:port][/prefix]          an ID issuer (idpoold --api,
 *                                                 GET /v1/ids/{key}?count=N with
 *                                                 the token; https verified).
 * Nothing is connected yet
 * (the background thread connects when an application is first used).
 * IDPOOL_OK with *out set, or an error with a message in err (naming the
 * environment and what is wrong).
 */
IDPOOL_API enum idpool_rc idpool_client_new(const char *const *envs, size_t n,
                                            const struct idpool_options *opts,
                                            struct idpool_client **out, char *err, size_t errlen);

/* Stop the background thread, close the connections, free everything. NULL is a no-op. */
IDPOOL_API void idpool_client_free(struct idpool_client *c);

/*
 * The handle of application `key` into *out (created at the first call; the
 * same pointer afterwards), valid until idpool_client_free(). IDPOOL_OK;
 * IDPOOL_EINVAL when c or out is NULL or key is not a valid application key
 * ([A-Za-z0-9_.-]{1,64}); IDPOOL_ENOMEM. *out is set only on IDPOOL_OK.
 */
IDPOOL_API enum idpool_rc idpool_app_get(struct idpool_client *c, const char *key,
                                         struct idpool_app **out);

/* One ID into *id. Waits at most timeout_ms when the buffer is empty. */
IDPOOL_API enum idpool_rc idpool_next(struct idpool_app *a, uint64_t *id);

/*
 * n IDs into ids[0..n), from the buffer (as read(2): the buffer, then its
 * length). *got says how many: all n unless an error is returned, in which
 * case the ones handed out so far are in ids[0..*got). Waits at most
 * timeout_ms in all, however many times the buffer runs empty before n IDs
 * came (IDPOOL_ETIMEDOUT then). IDPOOL_EINVAL for n == 0 or a NULL pointer.
 * Not the Redis Function idpool_take: that fills the buffer, this empties it.
 */
IDPOOL_API enum idpool_rc idpool_next_n(struct idpool_app *a, uint64_t *ids, size_t n, size_t *got);

/* Counters of one application (since the client was created; in a forked child, since the fork). */
struct idpool_stats {
    size_t size;            /* sizeof(struct idpool_stats): set by the caller */
    uint64_t blocks;        /* blocks of IDs handed to threads from the buffer */
    uint64_t waits;         /* calls that found the buffer empty and waited */
    uint64_t timeouts;      /* calls that gave up after timeout_ms */
    uint64_t takes;         /* takes from an environment (FCALL idpool_take, or an issuer's
                               GET) that brought IDs into the buffer */
    uint64_t taken;         /* IDs they brought */
    uint64_t refused_epoch; /* IDPOOL_EPOCH replies (pool not yet re-validated) */
    uint64_t refused_rate;  /* IDPOOL_RATE replies */
    uint64_t empty;         /* takes that found the pool dry */
    uint64_t errors;        /* connection errors, timeouts, unexpected replies */
    uint64_t failovers;     /* moves to a less preferred environment */
    uint64_t failbacks;     /* moves back to a more preferred one */
    uint64_t buffered;      /* IDs in the shared buffer now (not counting threads' blocks) */
    int env;                /* the environment takes go to now (index into envs) */
    unsigned batch;         /* IDs per take now */
    /* A Redis Cluster environment's answers (0 with the others): */
    uint64_t moved; /* MOVED redirections followed (a slot moved: a failover, a reshard) */
    uint64_t asked; /* ASK redirections followed (a slot being migrated) */
    uint64_t cluster_retries; /* TRYAGAIN and CLUSTERDOWN answers waited out and sent again */
};

/* Fill *out (whose size field the caller set) with a's counters. */
IDPOOL_API void idpool_app_stats(struct idpool_app *a, struct idpool_stats *out);

/*
 * What a's last refusal or failure said, naming the environment
 * ("environment 1 (10.0.0.2:8080: 401 IDPOOL_AUTH: unknown or revoked
 * token)"), into buf (truncated to len); "" when none yet. Returns its
 * length. Useful after IDPOOL_ETIMEDOUT or IDPOOL_ENOAPP.
 */
IDPOOL_API size_t idpool_app_last_error(struct idpool_app *a, char *buf, size_t len);

/*
 * What environment `env` (an index into the client's environments) said
 * when it last refused or failed a's take, in the form of
 * idpool_app_last_error, into buf (truncated to len); "" when it has
 * supplied IDs since, was never tried, or env is out of range. Returns its
 * length. After IDPOOL_ETIMEDOUT with every environment down, each one's
 * reason.
 */
IDPOOL_API size_t idpool_app_env_error(struct idpool_app *a, size_t env, char *buf, size_t len);

/* "timed out: no environment supplied IDs in time", ...; "unknown error" for a value not listed. */
IDPOOL_API const char *idpool_strerror(enum idpool_rc rc);

#ifdef __cplusplus
}
#endif

#endif
