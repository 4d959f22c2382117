/*
 * rds — one Redis connection of a node (node.h), which has three, each told
 * apart by its flags: the main one (RDS_MAIN: checks, locks, leases, the
 * library; a writer when refilling), the pushes' ("redis-push": a writer
 * when refilling) and the ID API's ("redis-api": takes only). Each is
 * hiredis async on the libevent loop, with what hiredis 0.14 lacks: a
 * connect timeout, a command timeout (a connection whose oldest
 * outstanding command is older than the timeout is dropped, failing every
 * pending command with a NULL reply), and reconnection with exponential
 * backoff.
 *
 * After connecting it runs a handshake (AUTH, SELECT, INFO for the server's
 * role, run_id and master_replid, a maxmemory-policy check, the idpool
 * library loaded where missing or older, and on a writer's connection
 * idpool_validate for the epoch) and only then reports itself ready.
 * Commands are refused while the connection is not ready. A writer's
 * connection that learns that the library's state is new (a refused write,
 * or the validated epoch read every second) reconnects and validates again.
 */
#ifndef IDPOOL_RDS_H
#define IDPOOL_RDS_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "config.h"

struct rds;

/* reply is NULL when the connection failed or was dropped. */
typedef void rds_reply_fn(struct rds *r, redisReply *reply, void *arg);

/* Called when the connection becomes ready (ready = 1) or is lost (0). */
typedef void rds_state_fn(struct rds *r, int ready, void *arg);

/* The longest epoch: "run_id:master_replid:nonce" (40 + 1 + 40 + 1 + 32) and a margin. */
#define RDS_EPOCH_MAX 160

enum {
    RDS_MAIN = 1,   /* the daemon's main connection ("redis" in the log, checks the
                       maxmemory-policy, loads the library); else "redis-push" */
    RDS_WRITER = 2, /* writes pools: validates the server and follows its epoch */
};

/* flags: RDS_MAIN, RDS_WRITER, or 0 (a connection that only takes). */
struct rds *rds_new(struct event_base *base, const struct config *cfg, unsigned flags,
                    rds_state_fn *on_state, void *arg);
/* Name the connection in the log ("redis-api"); name is static. */
void rds_set_name(struct rds *r, const char *name);

/*
 * Where to connect now, for a server whose address can move (a Sentinel
 * node: the primary the sentinels name) or that may serve nothing for a
 * while (a Cluster node that owns no slot). RDS_TARGET_AT with host (the
 * target's, copied) and port set; RDS_TARGET_UNKNOWN: not known yet, the
 * connection waits for rds_retarget; RDS_TARGET_PARKED: as UNKNOWN, and a
 * connection made is dropped. since_ms: the answer must come from a
 * question asked at or after it (the connection's loss, so that every
 * reconnect asks again); 0: any answer.
 */
enum { RDS_TARGET_AT = 0, RDS_TARGET_UNKNOWN = 1, RDS_TARGET_PARKED = 2 };
typedef int rds_target_fn(struct rds *r, uint64_t since_ms, const char **host, int *port,
                          void *arg);
/* Follow fn instead of the configured address; before the event loop runs. */
void rds_set_target(struct rds *r, rds_target_fn *fn, void *arg);
/*
 * The target has a new answer: a connection waiting for one connects, one
 * to another address is dropped (pending callbacks get NULL) and made to
 * the new one. Runs from the event loop, never inside the caller.
 */
void rds_retarget(struct rds *r);
/*
 * The server answers on another connection of the node: this one, if it
 * waits out a backoff, connects now (from the event loop) with the backoff
 * reset. After a failover the push connection, refused while the main one
 * reset the promoted server's library, would otherwise wait up to 1 s.
 */
void rds_kick(struct rds *r);
/*
 * Every error reply the connection receives goes to fn first, in any
 * state, before the command's own callback (a Cluster node map learns
 * MOVED and CLUSTERDOWN there). fn must not free the connection.
 */
typedef void rds_error_fn(struct rds *r, const redisReply *reply, void *arg);
void rds_set_on_error(struct rds *r, rds_error_fn *fn, void *arg);
/*
 * A slot the server serves (a Cluster node), or -1 (the default: one
 * server): a key the connection writes of its own (the marker of a
 * promoted server) is made to hash there.
 */
void rds_set_slot(struct rds *r, int slot);
/* "host:port" it connects to now (HOSTPORT_STR_MAX). */
void rds_where(const struct rds *r, char *buf, size_t size);
/* Drops the connection (pending callbacks get NULL) and frees everything. */
void rds_free(struct rds *r);

int rds_ready(const struct rds *r);
/*
 * A writer's epoch, as idpool_validate answered it ("" before the handshake
 * and on other connections): "run_id:master_replid:nonce", new whenever the
 * function library's state is new (a restart, a failover, a reload or a
 * restore into the process). Stored in each meta hash, so that pools written
 * under another one are refused to takes and discarded.
 */
const char *rds_epoch(const struct rds *r);
/* Write what is queued to the socket now, without waiting for the event loop. */
void rds_flush(struct rds *r);
/* Number of commands sent and not yet answered. */
unsigned rds_outstanding(const struct rds *r);
/*
 * The owner has a MULTI open (1) or closed it (0): the connection's own
 * probes wait, or they would be queued inside the transaction.
 */
void rds_in_multi(struct rds *r, int open);
/*
 * Send ASKING ahead of each command of the owner's (not inside a MULTI it
 * opened: the flag lasts to EXEC) while on: the connection follows a Cluster
 * slot being migrated to this server (node_cluster.c). Harmless for any
 * other command: a slot the server owns ignores it, one it neither owns nor
 * imports answers MOVED as without it.
 */
void rds_set_asking(struct rds *r, int on);
int rds_asking(const struct rds *r);
/*
 * A function of the library failed to run (on another connection): look at
 * the loaded library and load ours if it is missing or older (at most once
 * a second; the main connection only).
 */
void rds_check_library(struct rds *r);
/* Change the command timeout (config reload). */
void rds_set_timeout(struct rds *r, int timeout_ms);

/* Send a command; 0, or -1 (not ready / out of memory: fn is not called). */
int rds_command(struct rds *r, rds_reply_fn *fn, void *arg, const char *fmt, ...)
    __attribute__((warn_unused_result));
/* Send a command already encoded in RESP (cheapest: nothing to format). */
int rds_command_resp(struct rds *r, rds_reply_fn *fn, void *arg, const char *cmd, size_t len)
    __attribute__((warn_unused_result));
int rds_command_argv(struct rds *r, rds_reply_fn *fn, void *arg, int argc, const char **argv,
                     const size_t *argvlen) __attribute__((warn_unused_result));

/* Connection counters for /metrics. */
struct rds_stats {
    uint64_t errors;     /* failed connection attempts and lost connections */
    uint64_t reconnects; /* times the connection became ready again after a loss */
};
void rds_get_stats(const struct rds *r, struct rds_stats *out);

/* "ERR ..." text of an error reply, or a fixed string for NULL/other types. */
const char *rds_errstr(const redisReply *reply);

#endif
