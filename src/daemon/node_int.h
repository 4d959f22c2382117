/*
 * node_int.h — what a kind of node map needs of node.c (node.c and the
 * kinds' files only, as store_int.h is for the store).
 */
#ifndef IDPOOL_NODE_INT_H
#define IDPOOL_NODE_INT_H

#include "dns.h"
#include "node.h"

/* One kind of node map: a row of kinds[] in node.c. */
struct nodemap_ops {
    enum redis_kind kind; /* of the URL it serves */
    const char *name;     /* "standalone", "sentinel" */
    /* Make the map's nodes and start connecting; 0, or -1 (out of memory). */
    int (*open)(struct nodemap *m, const struct config *cfg);
    struct node *(*for_key)(struct nodemap *m, const char *key);
    /* Whether n serves keys now (a Cluster node owns a slot); NULL: every node does. */
    int (*serves)(const struct nodemap *m, const struct node *n);
    /* n's main connection became ready or was lost (before the owner hears it); NULL: no matter. */
    void (*state)(struct nodemap *m, struct node *n, int ready);
    /* node_error for this kind; NULL: every error is NODE_ERR_OTHER. */
    enum node_err (*error)(struct nodemap *m, struct node *n, const redisReply *reply,
                           struct node **to);
    /* Its part of the status view (status.h); NULL when it has none. */
    void (*view)(const struct nodemap *m, struct daemon_view *out);
    /* Free what open made besides the nodes; NULL when nothing. */
    void (*close)(struct nodemap *m);
};

struct nodemap {
    const struct nodemap_ops *ops;
    struct event_base *base;
    unsigned flags;      /* NODEMAP_WRITER, NODEMAP_API */
    int timeout_ms;      /* the connections': the config's, then nodemap_set_timeout's */
    struct node **nodes; /* by node id */
    size_t nnodes;
    node_state_fn *on_state; /* the owner's */
    void *arg;
    void *impl; /* the kind's own state */
};

/*
 * A node on cfg's Redis server, with its connections made in the order of
 * their names in the log: "redis", "redis-push", then "redis-api". NULL
 * when out of memory.
 */
struct node *node_add(struct nodemap *m, const struct config *cfg);

/*
 * A control connection of a map (to a sentinel, to a Cluster node asked for
 * its slot table) at host:port, on m's event loop (host numeric: a name is
 * looked up first, off the loop, by dns_lookup; hiredis would block on it): DATA is its ac->data,
 * the callbacks are set, and AUTH is queued when PASSWORD (USER may be
 * NULL): its error, if any, is what the next command answers (NOAUTH,
 * WRONGPASS). NULL with the reason in WHY.
 */
redisAsyncContext *node_control_connect(struct nodemap *m, const char *host, int port,
                                        const char *user, const char *password,
                                        redisConnectCallback *on_connect,
                                        redisDisconnectCallback *on_disconnect, void *data,
                                        char *why, size_t whylen);

/* Close *ACP if open and forget it: its pending callbacks run with NULL replies. */
void node_control_close(redisAsyncContext **acp);

/*
 * Where a control connection goes: host looked up off the loop (dns.c).
 * 0: ip (DNS_IP_MAX bytes) holds the address; 1: pending, fn gets it
 * later, and the attempt's timer ev is armed for timeout_ms (it covers
 * the lookup; cancel *req when it fires); -1: why.
 */
int node_control_lookup(struct nodemap *m, const char *host, dns_fn *fn, void *arg,
                        struct dns_req **req, struct event *ev, int timeout_ms, char *ip, char *why,
                        size_t whylen) __attribute__((warn_unused_result));

/* The Sentinel kind (node_sentinel.c) and the Cluster kind (node_cluster.c). */
extern const struct nodemap_ops sentinel_map_ops;
extern const struct nodemap_ops cluster_map_ops;

#endif
