/*
 * resolve — the blocking way to a Sentinel set's primary, for every program
 * that follows one without an event loop (libidpool's Redis environments,
 * idpoolctl, idpool-load). Redis' "Sentinel client spec": ask the sentinels
 * in turn, each with a short bound, for the master's address
 * (SENTINEL get-master-addr-by-name); the one that answered moves to the
 * front; now and then add the sentinels it knows (SENTINEL sentinels); and
 * on the data connection, confirm with ROLE that the address is a master
 * before anything is written there. The replies are read by core/sentinel.
 * Errors name the sentinels tried and the last error, never a password.
 */
#ifndef IDPOOL_RESOLVE_H
#define IDPOOL_RESOLVE_H

#include <stddef.h>
#include <stdint.h>

#include "sentinel.h"

struct redisContext;

#define RESOLVE_SENTINEL_MS 300   /* the most one sentinel is given (connect, AUTH, query) */
#define RESOLVE_REFRESH_MS  60000 /* SENTINEL sentinels is merged at most this often */

/* A socket of the resolver: fd while open, then -1 before it is closed. */
typedef void resolve_fd_fn(void *arg, int fd);

/* What a follower of one Sentinel set keeps between resolutions. */
struct resolver {
    const struct redis_url *url; /* the redis-sentinel:// URL (not owned) */
    struct sentinel_set set;     /* the sentinels, in the order to try them */
    uint64_t refreshed_ms;       /* CLOCK_MONOTONIC ms of the last merge; 0: never */
    resolve_fd_fn *fd_fn;        /* NULL, or told of each socket (libidpool's fork safety) */
    void *fd_arg;
};

/* r for u (REDIS_SENTINEL): 0, or -1 when u is not a Sentinel URL. */
int resolve_init(struct resolver *r, const struct redis_url *u, resolve_fd_fn *fd_fn, void *arg)
    __attribute__((warn_unused_result));

/*
 * The primary's address as the first sentinel that answers names it: the
 * sentinels in r's order, each bounded by min(timeout_ms,
 * RESOLVE_SENTINEL_MS) for connect, AUTH (the URL's sentinel_user and
 * sentinel_password) and the query, the whole by timeout_ms. The one that
 * answered moves to the front; at most every RESOLVE_REFRESH_MS the
 * sentinels it knows are added. 0, or -1 with err naming the sentinels
 * tried and the last error.
 */
int resolve_primary(struct resolver *r, int timeout_ms, char *host, size_t hostlen, int *port,
                    char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * ROLE on c, the data connection: 0 when the server is a master, else -1
 * with err saying what it is ("a replica, not the master") or why ROLE
 * failed. Nothing is written to a server before this said 0.
 */
int resolve_check_master(struct redisContext *c, char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
