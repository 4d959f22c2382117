/*
 * node — the daemon's Redis side above one connection. A node is one Redis
 * server with the daemon's connections to it (rds.h): the main one
 * ("redis": checks, locks, leases, the library, ACL users), the pushes'
 * ("redis-push") and, with the ID API on, the API's takes ("redis-api").
 * Each connection keeps its own handshake, validation and epoch.
 *
 * A node map answers "which node serves this key". Modules hold the map,
 * never a connection. Standalone (redis://) is a map of one node; another
 * kind of map (Sentinel, Cluster) is a new row of kinds[] in node.c.
 */
#ifndef IDPOOL_NODE_H
#define IDPOOL_NODE_H

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "config.h"

struct daemon_view;
struct nodemap;
struct rds;
struct rds_stats;

enum {
    NODEMAP_WRITER = 1, /* refill = on: main and push validate and follow the epoch */
    NODEMAP_API = 2,    /* api-addr set: each node gets a "redis-api" connection */
};

struct node {
    struct nodemap *map; /* owner */
    unsigned id;         /* index in the map; never reused while the map lives */
    struct rds *main;    /* "redis": checks, locks, leases, sweep, library, ACL users */
    struct rds *push;    /* "redis-push": the fenced pushes */
    struct rds *api;     /* "redis-api": the ID API's takes; NULL when the API is off */
    unsigned generation; /* +1 each time main becomes ready: a refill whose lock was taken under
                            an older one stops (hiredis-cluster's route_version) */
    char addr[HOSTPORT_STR_MAX]; /* "host:port" of its server, for the status ("" unknown) */
};

/* A node's main connection became ready (ready = 1) or was lost (0). */
typedef void node_state_fn(struct node *n, int ready, void *arg);

/* flags: NODEMAP_WRITER, NODEMAP_API. Connects at once; NULL when out of memory. */
struct nodemap *nodemap_new(struct event_base *base, const struct config *cfg, unsigned flags,
                            node_state_fn *on_state, void *arg) __attribute__((warn_unused_result));
/* Drops every connection (pending callbacks get NULL replies) and frees; NULL ok. */
void nodemap_free(struct nodemap *m);

/*
 * The node that serves key (a pool, meta, lock or any other key); NULL when
 * none does now (a Cluster slot without an owner: the map asks again).
 */
struct node *nodemap_for_key(struct nodemap *m, const char *key);
/* Every primary in turn: the first after prev (NULL: the first one); NULL after the last. */
struct node *nodemap_next_primary(const struct nodemap *m, const struct node *prev);
/* What an error reply says of where a key lives (Redis Cluster; NODE_ERR_OTHER elsewhere). */
enum node_err {
    NODE_ERR_OTHER = 0, /* not about the key's place: the command's own error */
    NODE_ERR_MOVED,     /* the slot lives on another node now (the map knows it already) */
    NODE_ERR_ASK,       /* this once on another node: ASKING, then the command there */
    NODE_ERR_TRYAGAIN,  /* the slot is being migrated and the keys are split: soon */
    NODE_ERR_DOWN,      /* CLUSTERDOWN: the cluster cannot serve the slot now */
};
/*
 * Read an error reply that a connection of node n got; for MOVED and ASK,
 * *to is the node named (made when the map had none there; NULL when out
 * of memory or the map is not a Cluster's).
 */
enum node_err node_error(struct node *n, const redisReply *reply, struct node **to);
/* Its main connection is ready (connected, handshake done, validated on a writer); NULL: 0. */
int node_ready(const struct node *n);
/* The map's part of the status view: how the primary is found (status.h). */
void nodemap_view(const struct nodemap *m, struct daemon_view *out);
/* The epoch its main connection validated (rds_epoch: "" before that, and on a non-writer). */
const char *node_epoch(const struct node *n);
/* A function of the library failed on one of its connections: look at it (rds_check_library). */
void node_check_library(struct node *n);
/* Change every connection's command timeout (config reload). */
void nodemap_set_timeout(struct nodemap *m, int timeout_ms);
/* Every primary's main and push connections are ready (the status' redis_up). */
int nodemap_ready(const struct nodemap *m);
/* The counters of every node's main and push connections, summed (the API's are not counted). */
void nodemap_stats(const struct nodemap *m, struct rds_stats *sum);

/*
 * What a module keeps per node lives in a table of pointers by node id:
 * grow *table (a pointer to the table, of *len entries of `size` bytes)
 * so that n->id is in it, the new entries NULL. 0, or -1 when out of memory.
 */
int node_table_fit(void *table, size_t *len, size_t size, const struct node *n)
    __attribute__((warn_unused_result));

#endif
