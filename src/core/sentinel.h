/*
 * sentinel — what the Redis Sentinel protocol says, for every program that
 * follows a primary through the sentinels (the daemon on its event loop,
 * libidpool, idpoolctl and idpool-load blocking): the list of sentinels in
 * the order to try them, and the replies that matter read from hiredis'
 * redisReply: SENTINEL get-master-addr-by-name, SENTINEL sentinels, ROLE,
 * and the +switch-master message. Redis' "Sentinel client spec" is the
 * model: try the sentinels in turn, move the one that answered to the
 * front, add the ones it knows, and confirm ROLE on the address it gave.
 * Pure: no I/O.
 */
#ifndef IDPOOL_SENTINEL_H
#define IDPOOL_SENTINEL_H

#include <stddef.h>

#include "url.h"

struct redisReply;

/* One sentinel's address (no heap: sets are copied freely). */
struct sentinel_addr {
    char host[256]; /* without brackets */
    int port;
};

/* The sentinels, in the order to try them. */
struct sentinel_set {
    struct sentinel_addr a[REDIS_HOSTS_MAX];
    size_t n;
};

/* The set of a redis-sentinel:// URL's sentinels, in its order: 0, or -1 (not a Sentinel URL). */
int sentinel_set_init(struct sentinel_set *s, const struct redis_url *u);

/* Move a[i] to the front, the others keeping their order (the one that answered). */
void sentinel_set_promote(struct sentinel_set *s, size_t i);

/*
 * Add the sentinels a SENTINEL sentinels reply names (an array of maps,
 * each a flat array of field, value: "ip", "port", ...) that the set does
 * not hold yet, at its end, up to REDIS_HOSTS_MAX; entries without a
 * usable ip and port are skipped. Returns how many were added.
 */
size_t sentinel_set_merge(struct sentinel_set *s, const struct redisReply *sentinels);

/* What SENTINEL get-master-addr-by-name answered. */
enum sentinel_answer {
    SENTINEL_ADDR = 0,     /* the primary's address: host, port set */
    SENTINEL_UNKNOWN = 1,  /* nil: this sentinel does not know the master's name */
    SENTINEL_INVALID = -1, /* an error reply or a reply that makes no sense */
};
enum sentinel_answer sentinel_master_reply(const struct redisReply *r, char *host, size_t hostlen,
                                           int *port);

/*
 * A +switch-master message "<name> <old ip> <old port> <new ip> <new
 * port>": 0 with the new address when it is about master, else -1.
 */
int sentinel_switch_msg(const char *msg, const char *master, char *host, size_t hostlen, int *port);

/* What ROLE says the server is. */
enum sentinel_role {
    ROLE_UNKNOWN = 0, /* an error, or a reply that makes no sense */
    ROLE_MASTER,
    ROLE_REPLICA, /* "slave" */
    ROLE_SENTINEL,
};
enum sentinel_role sentinel_role_reply(const struct redisReply *r);
/* "master", "replica", "sentinel", "unknown". */
const char *sentinel_role_name(enum sentinel_role role);

#endif
