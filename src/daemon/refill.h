/*
 * refill — the refill loop as main() sees it (design brief §5): builds the
 * registry of pools (pool.c), the scheduler that checks them every tick
 * (scheduler.c), a fenced pusher per node (push.c) and the alert conditions
 * (health.c), and sequences each refill: lock -> plan -> reserve -> push ->
 * prefetch -> continue or unlock (see refill.c and docs/architecture.md).
 *
 * Rows are re-read every reload interval and on refill_reload() (SIGHUP).
 */
#ifndef IDPOOL_REFILL_H
#define IDPOOL_REFILL_H

#include <event2/event.h>

#include "alerts.h"
#include "config.h"
#include "status.h"
#include "store.h"

struct node;
struct nodemap;
struct pools;
struct refill;

/* map: the Redis nodes (checks, locks, leases on a node's main connection; pushes on its own). */
struct refill *refill_new(struct event_base *base, const struct config *cfg, struct nodemap *map,
                          struct store *store, struct alerts *alerts);
void refill_free(struct refill *rf);

/* The registry of pools (the ID API looks rows up in it). */
struct pools *refill_pools(struct refill *rf);

/* Re-read application rows now (SIGHUP); the number of that load (pools_reread). */
uint64_t refill_reload(struct refill *rf);

/* Apply the settings that can change without a restart (tick, reload, lock TTL). */
void refill_configure(struct refill *rf, const struct config *cfg);

/* Views of every application and of the daemon, for HTTP and /metrics. */
void refill_status_source(struct refill *rf, struct status_source *out);

/* Node n's main connection became ready (1) or was lost (0). */
void refill_node_state(struct refill *rf, struct node *n, int ready);

/*
 * Stop starting new work; when everything in flight has finished and every
 * lock this daemon holds is released, call done(arg) (from the event loop).
 */
void refill_shutdown(struct refill *rf, void (*done)(void *), void *arg);

#endif
