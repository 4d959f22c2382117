/*
 * lease — a pool's ID space (brief §4.1, §4.5): the progress kept in meta
 * (next, hi and the prefetched nlo/nhi), the size of the next lease, its
 * write-ahead reservation in MySQL, and storing a prefetched lease in meta.
 * A reservation for a batch and a prefetch share one success path
 * (lease_got): counted, alerts, the lease added to the batch's state.
 * The failover reserve (plan.h) is kept and spent here too.
 */
#ifndef IDPOOL_LEASE_H
#define IDPOOL_LEASE_H

#include <stdint.h>

#include <hiredis/hiredis.h>

#include "plan.h"
#include "rds.h"
#include "store.h"

struct health;
struct pool;
struct pools;

/* What leases need of the rest of the daemon. */
struct lease_ctx {
    struct store *store;
    struct health *health;
    struct pools *pools; /* told when MySQL works again */
    enum plan_reserve_mode reserve;
};

/*
 * Read the progress in meta (an HGETALL reply) into the refill: the batch
 * starts from it, and the fence expects meta's next verbatim. Unusable
 * progress is logged; the batch then starts from a fresh lease.
 */
void lease_read_meta(struct pool *p, const redisReply *reply);

/* The ID space a new lease of this pool should cover (plan_lease_span at its rate). */
uint64_t lease_span(const struct pool *p);

/*
 * Reserve at least `span` above everything the batch's state has seen
 * (twice that when the pool should keep a failover reserve and holds none,
 * or one less than half of `span`: lease_got keeps the upper half). 0, or
 * -1 (fn not called).
 */
int lease_reserve(const struct lease_ctx *lc, struct pool *p, uint64_t span, store_reserve_fn *fn)
    __attribute__((warn_unused_result));

/*
 * The outcome of a reservation, for a batch or a prefetch (`what` begins
 * the log line of a failure): on success counted, alerts updated, and the lease added to
 * the batch's state (0); on failure logged, ID-space exhaustion alerted (-1).
 */
int lease_got(const struct lease_ctx *lc, struct pool *p, const char *what, enum store_err st,
              const struct store_lease *lease, const char *err) __attribute__((warn_unused_result));

/*
 * A lease reserved for a refill that lost its Redis node before it wrote
 * anything: kept whole as the pool's failover reserve when the pool should
 * have one and holds none, or a smaller one (0), else -1 (the lease is a gap).
 */
int lease_keep(const struct lease_ctx *lc, struct pool *p, const struct store_lease *lease);

/*
 * A reservation failed (st): refill from the failover reserve instead, when
 * MySQL could not lease (unreachable, a lost connection, an unknown commit,
 * contention), the pool holds one and may use it now (plan_reserve_usable).
 * The reserve replaces the batch's spent lease state and is forgotten at
 * once: it is used once, whatever the push does. 0, or -1 (nothing done).
 */
int lease_use_reserve(const struct lease_ctx *lc, struct pool *p, enum store_err st);

/*
 * Store the batch's state (a prefetched lease) in meta through the fence,
 * without IDs, on the main connection of the refill's node, under its epoch.
 */
int lease_install(struct pool *p, rds_reply_fn *fn) __attribute__((warn_unused_result));

#endif
