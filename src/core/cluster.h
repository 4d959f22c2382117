/*
 * cluster — what Redis Cluster says, for every program that routes by slot
 * (the daemon on its event loop; libidpool, idpoolctl and idpool-load
 * blocking): the slot table read from CLUSTER SLOTS, the redirections
 * (MOVED, ASK) and refusals (TRYAGAIN, CLUSTERDOWN) of an error reply, and
 * when to ask for the table again (one refresh at a time, at most one a
 * second: refresh storms are the most reported failure of cluster
 * clients). Pure: no I/O. A key's slot is keys_slot (keys.h).
 */
#ifndef IDPOOL_CLUSTER_H
#define IDPOOL_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "keys.h" /* KEYS_SLOTS */

struct redisReply;

#define CLUSTER_NODES_MAX 256     /* primaries a table may name */
#define CLUSTER_NO_OWNER  0xffffu /* owner[] of a slot no primary serves */

/* One node's address (no heap: tables are copied freely). */
struct cluster_addr {
    char host[256]; /* without brackets */
    int port;
};

/* Which primary serves each slot. */
struct cluster_table {
    struct cluster_addr primary[CLUSTER_NODES_MAX]; /* in the order CLUSTER SLOTS named them */
    size_t nprimaries;
    uint16_t owner[KEYS_SLOTS]; /* index into primary[], or CLUSTER_NO_OWNER */
    size_t unowned;             /* slots with no owner */
};

/* An empty table: no primary, every slot CLUSTER_NO_OWNER. */
void cluster_table_init(struct cluster_table *t);

/*
 * Read a CLUSTER SLOTS reply (an array of [start, end, [host, port, id, ...],
 * replica...]) into t; the replicas are not read. A primary's host that is
 * nil (Redis 7: cluster-preferred-endpoint-type unknown-endpoint) or ""
 * (a node that does not know its own address yet) means the node that was
 * asked: `asked` (its host). "?" (announced hostnames, none set) names no
 * address: that range's slots are left without an owner. 0, or -1 with a
 * message in err (not an array, a range out of 0..16383 or reversed, a
 * malformed node, more than CLUSTER_NODES_MAX primaries); t is then
 * unchanged. Ranges that overlap: the later one wins (Redis never sends
 * them; a hand-made reply might).
 */
int cluster_table_read(struct cluster_table *t, const struct redisReply *slots, const char *asked,
                       char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * Index of the primary at host:port in t, adding it when absent (MOVED to
 * a node the table does not know yet); -1 when the table is full, or host is
 * no host name or address that fits struct cluster_addr.
 */
int cluster_table_node(struct cluster_table *t, const char *host, int port)
    __attribute__((warn_unused_result));

/*
 * A MOVED: slot (< KEYS_SLOTS) lives at host:port now, the primary added
 * when absent (cluster_table_node) and the count of unowned slots kept.
 * The primary's index, or -1 (the table is full, or no host): t is then
 * unchanged.
 */
int cluster_table_move(struct cluster_table *t, unsigned slot, const char *host, int port)
    __attribute__((warn_unused_result));

/* What an error reply means to a router. */
enum cluster_error {
    CLUSTER_ERR_OTHER = 0, /* not a cluster error: the command's own */
    CLUSTER_MOVED,         /* "MOVED <slot> <host>:<port>": the slot lives there now */
    CLUSTER_ASK,           /* "ASK <slot> <host>:<port>": this once, ASKING + the command there */
    CLUSTER_TRYAGAIN,      /* "TRYAGAIN ...": a multi-key command on a migrating slot */
    CLUSTER_DOWN,          /* "CLUSTERDOWN ...": the cluster cannot serve (the slot or all) */
};

/*
 * Classify an error reply's text (without the leading '-'). MOVED and ASK
 * give the slot and the address ("host:port", the last ':' splits, so an
 * IPv6 address comes as Redis writes it, without brackets, or with them; an
 * empty host means the node that answered: `asked`); *slot and *to are
 * written for those two only. A MOVED or ASK that cannot be read is
 * CLUSTER_ERR_OTHER.
 */
enum cluster_error cluster_error_read(const char *err, size_t len, const char *asked, int *slot,
                                      struct cluster_addr *to);

/*
 * When to read the table again: on a MOVED, a connection error or timeout,
 * a slot with no owner, and on a slow periodic timer; one read at a time,
 * at most one per CLUSTER_REFRESH_MIN_MS (and every CLUSTER_REFRESH_MAX_MS
 * anyway). A zeroed struct has sent none.
 */
#define CLUSTER_REFRESH_MIN_MS 1000
#define CLUSTER_REFRESH_MAX_MS 10000

struct cluster_refresh {
    uint64_t sent;    /* reads sent so far */
    uint64_t last_ms; /* when the last read was sent (when sent > 0) */
    int in_flight;    /* a read is in flight */
    int wanted;       /* something asked for a read since the last one was sent */
};

/* Something saw the table may be stale (MOVED, error, no owner). */
void cluster_refresh_want(struct cluster_refresh *r);
/*
 * Whether to send a read now (then marks it in flight and sent at now):
 * none in flight, and either none sent yet, or wanted and
 * CLUSTER_REFRESH_MIN_MS since the last, or CLUSTER_REFRESH_MAX_MS since
 * the last. Else 0, and *wait_ms (when not NULL) says in how long to ask
 * again (-1: a read is in flight).
 */
int cluster_refresh_due(struct cluster_refresh *r, uint64_t now_ms, int64_t *wait_ms);
/* The read in flight answered or failed. */
void cluster_refresh_done(struct cluster_refresh *r);

#endif
