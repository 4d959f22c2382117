/*
 * route — the blocking way to a Redis Cluster's primaries, for every
 * program that routes by slot without an event loop (libidpool's Cluster
 * environments, idpoolctl, idpool-load); the daemon's is node_cluster.
 *
 *   - the slot table is read with CLUSTER SLOTS (core/cluster.h reads the
 *     reply) from the primaries it names, the connected ones first and
 *     from a random one, then the seed nodes of the URL: at most
 *     ROUTE_ASK_MAX nodes a read, each bounded; when due only (none yet, a
 *     MOVED or a failure wanted one at least a second ago, 10 s passed:
 *     cluster_refresh_due), so that a thousand clients never flood a node
 *     with it; a table that owns no slot is not taken;
 *   - one connection per node (AUTH as the URL says), opened when first
 *     needed; a node whose connection failed is not connected again
 *     before its back-off (ROUTE_BACKOFF_MIN_MS doubling to
 *     ROUTE_BACKOFF_MAX_MS); a node the table no longer names is
 *     disconnected;
 *   - route_command sends one command where its key's slot lives and
 *     follows what Cluster answers: MOVED (the slot patched at once, a
 *     read of the table wanted, sent again on the new owner), ASK
 *     (ASKING and the command pipelined on the target's connection, the
 *     table unchanged), TRYAGAIN and CLUSTERDOWN (sent again after
 *     ROUTE_RETRY_MIN_MS doubling to ROUTE_RETRY_MAX_MS) — each of them
 *     means the command did not run — until the caller's deadline, at most
 *     ROUTE_REDIRECTS_MAX redirections. A command whose reply was lost
 *     (a timeout, a connection error) is never sent again: whether it ran
 *     is unknown, and a take sent twice may lose the IDs the first one
 *     popped.
 *
 * Every connect and command is bounded by the smaller of io_ms and what is
 * left before the caller's deadline (CLOCK_MONOTONIC ms, clock.h). Not
 * thread-safe: one thread at a time uses a router.
 */
#ifndef IDPOOL_ROUTE_H
#define IDPOOL_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "url.h"

struct redisContext;
struct redisReply;

#define ROUTE_NODES_MAX      (CLUSTER_NODES_MAX + REDIS_HOSTS_MAX) /* nodes a router keeps */
#define ROUTE_ASK_MAX        3   /* nodes asked for the table per read */
#define ROUTE_REDIRECTS_MAX  5   /* MOVED and ASK followed per command */
#define ROUTE_RETRY_MIN_MS   20  /* TRYAGAIN, CLUSTERDOWN: the first wait ... */
#define ROUTE_RETRY_MAX_MS   500 /* ... doubling up to this */
#define ROUTE_BACKOFF_MIN_MS 100 /* a node whose connection failed: no connect before this ... */
/* ... doubling up to this: a read of the table (at most one a second) may name another node */
#define ROUTE_BACKOFF_MAX_MS CLUSTER_REFRESH_MIN_MS

/* A socket of node `node` (< ROUTE_NODES_MAX): fd while open, then -1 before it is closed. */
typedef void route_fd_fn(void *arg, size_t node, int fd);

struct router;

/*
 * A router for u (a redis-cluster:// URL, not copied: it must outlive the
 * router), nothing connected yet; io_ms bounds each connect and command;
 * fd_fn (or NULL) is told of every socket (libidpool's fork safety). NULL
 * when u is not a Cluster URL or out of memory.
 */
struct router *route_new(const struct redis_url *u, unsigned io_ms, route_fd_fn *fd_fn, void *arg);
/* Close every connection and free r. NULL is a no-op. */
void route_free(struct router *r);
/* Close every connection (no back-off): the next use connects again. */
void route_close(struct router *r);
/* 1 when r holds a connection to any node. */
int route_connected(const struct router *r);

/*
 * Read the slot table when it is due (see above; at once when r has none).
 * 0 when r has a table (the one in use is kept when the read failed), -1
 * when it has none, with err naming the nodes asked and the last error.
 */
int route_sync(struct router *r, uint64_t deadline_ms, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The primary of key's slot in the table in use: 0, or -1 (no table, or no owner). */
int route_addr(const struct router *r, const char *key, struct cluster_addr *out)
    __attribute__((warn_unused_result));

/* A MOVED seen by the caller (idpool-load's own connections): the slot patched, a read wanted. */
void route_moved(struct router *r, unsigned slot, const struct cluster_addr *to);
/*
 * The caller's own connection to a primary of the table failed (refused,
 * lost): that primary may be gone in a failover, so a read is wanted (the
 * next route_sync reads when due, at most one a second).
 */
void route_want(struct router *r);

/*
 * The primaries that own slots in the table in use: how many, and the
 * address of the i-th.
 */
size_t route_primaries(const struct router *r);
const struct cluster_addr *route_primary(const struct router *r, size_t i);

/*
 * The connection to the i-th primary (route_primaries), or to the primary
 * of key's slot, opened as needed: NULL with err saying why (no owner,
 * backing off, cannot connect, AUTH refused). Valid until the next call
 * on r; the caller sends on it with redisCommand and the like.
 */
struct redisContext *route_primary_conn(struct router *r, size_t i, uint64_t deadline_ms, char *err,
                                        size_t errlen);
struct redisContext *route_key_conn(struct router *r, const char *key, uint64_t deadline_ms,
                                    char *err, size_t errlen);

/* What one routed command met on its way: for counters and messages. */
struct route_trip {
    unsigned moved;               /* MOVED followed */
    unsigned asked;               /* ASK followed */
    unsigned retried;             /* TRYAGAIN and CLUSTERDOWN waited out */
    int node;                     /* the node sent to last (route_fail), -1: none */
    char where[HOSTPORT_STR_MAX]; /* its address, "" when none */
};

enum route_rc {
    ROUTE_REPLY,  /* *reply is the command's own answer (an error reply of its own, maybe) */
    ROUTE_UNSENT, /* it did not run (no table, no owner, no connection, refused as not run until
                     the deadline, too many redirections): it may be sent again */
    ROUTE_LOST,   /* sent and no reply came: whether it ran is unknown; never send it again */
};

/*
 * Send argv (argc words, lens their lengths) where key's slot lives,
 * following redirections and waiting out TRYAGAIN and CLUSTERDOWN until
 * deadline_ms (see above); the table is read first when due. *reply is
 * the caller's to free (ROUTE_REPLY), else NULL with err naming the node.
 */
enum route_rc route_command(struct router *r, const char *key, int argc, const char **argv,
                            const size_t *lens, uint64_t deadline_ms, struct redisReply **reply,
                            struct route_trip *trip, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The caller found node's answer wrong (a refusal not of Cluster): close it and back off. */
void route_fail(struct router *r, int node);

/*
 * When a command for key may be tried (CLOCK_MONOTONIC ms; <= now: now):
 * at once when its primary is connected or not backing off, else when its
 * back-off ends or the table may be read again, whichever comes first.
 */
uint64_t route_retry_at(const struct router *r, const char *key, uint64_t now_ms);

#endif
