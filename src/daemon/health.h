/*
 * health — each pool's alerts (brief §7): the conditions, observed at every
 * check, each alert's hysteresis (alert.c) and its message, firing and
 * resolving through alerts.c. Writes only pool->health. Also the pool's
 * last refill problem, logged once per change.
 *
 * The conditions:
 *   underflow           the pool ran dry, or takes got short replies (meta)
 *   low                 still below low water at two status reads in a row
 *   stalled             below low water and nothing pushed for stall-ms
 *   offset_regression   a reservation found current_offset lowered
 *   invalid_config      the row breaks a rule
 *   id_space_exhaustion the ID space is nearly or wholly used up, or runs out
 *                       within id-space-warn-days at the ledger's growth
 *   id_space_conflict   the row's IDs can meet those of another application of
 *                       its id_space: at load (the ranges they used), or a
 *                       reservation refused (the next lease meets a lease)
 */
#ifndef IDPOOL_HEALTH_H
#define IDPOOL_HEALTH_H

#include <stdint.h>

struct alerts;
struct app_cfg;
struct health;
struct nodemap;
struct pool;
struct store_lease;

/*
 * map: is the node of a pool's meta reachable (else a firing alert is synced
 * later). warn_days: id-space-warn-days (0: no runway condition).
 */
struct health *health_new(struct alerts *alerts, struct nodemap *map, int stall_ms, int resolve_ms,
                          int warn_days);
void health_free(struct health *h);
void health_configure(struct health *h, int stall_ms, int resolve_ms, int warn_days);
/* Free what a pool's health holds (messages). */
void health_pool_free(struct pool *p);

/*
 * A problem of a check or a refill: logged once per distinct message, shown
 * in the status views. Fires no alert (the conditions of health_check do).
 */
void health_problem(struct pool *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A refill succeeded: log the recovery from the last problem. */
void health_refilled(struct health *h, struct pool *p);

/*
 * One check's status read of a served pool (counters and length in
 * pool->seen). rebuilding: its meta holds no epoch, i.e. no refill wrote it
 * since a daemon discarded it (a restart, a failover) or ever: an empty
 * pool then is being refilled, not run dry, and neither underflow nor low
 * fires for stall-ms (after that they do, and stalled too).
 */
void health_check(struct health *h, struct pool *p, uint64_t prev_underflows, int underflow_in_meta,
                  int rebuilding);
/* A check saw the pool of a served row at or above its low-water mark. */
void health_pool_ok(struct pool *p);
/*
 * The row has just become served (new, fixed, restored): its pool is
 * filling, not underflowing, until a check first sees it at its mark.
 */
void health_served(struct pool *p);
/*
 * The pool cannot be looked at (`why`: Redis is unreachable, its checks
 * fail): a served pool stalls once nothing was pushed for stall-ms.
 */
void health_unreachable(struct health *h, struct pool *p, uint64_t now_ms, const char *why);
/* An alert fires or waits to fire or resolve (the status is then read every interval). */
int health_pending(const struct pool *p);

/* A lease was reserved: offset_regression, and the ID space is not exhausted. */
void health_leased(struct health *h, struct pool *p, const struct store_lease *lease);
/* A reservation found no ID space left. */
void health_exhausted(struct health *h, struct pool *p, const char *why);
/*
 * A reservation was refused: its lease would meet another application of
 * the row's id_space (why names both). Resolves once a lease is reserved.
 */
void health_conflict(struct health *h, struct pool *p, const char *why);

/* The ledger's growth (pool->ledger) was read: id_space_exhaustion of a served row. */
void health_space(struct health *h, struct pool *p);

/* The row as applied: invalid (err), soft-deleted, valid (the new cfg), or removed. */
void health_row_invalid(struct health *h, struct pool *p, const char *err);
/* Valid, but not served: its IDs can meet another row's of its id_space (err). */
void health_row_conflict(struct health *h, struct pool *p, const char *err);
void health_row_deleted(struct health *h, struct pool *p);
void health_row_valid(struct health *h, struct pool *p, const struct app_cfg *cfg,
                      const char *memory);
void health_row_removed(struct health *h, struct pool *p);

/*
 * The alert states found in meta (1 << kind: "firing"), read once when this
 * process first looks at the pool: an alert another instance fired and left
 * (it stopped, or was killed) is taken over as firing, so that it resolves,
 * announced once, when its condition is clear.
 */
void health_adopt(struct health *h, struct pool *p, unsigned firing_in_meta);

/* Redis is back: alerts announced while it was unreachable reach pub/sub and meta. */
void health_resync(struct health *h, struct pool *p);

#endif
