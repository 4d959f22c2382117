/*
 * scheduler — when each pool is looked at and when it may refill (brief §5):
 * the tick, each pool's check (a pre-encoded LLEN, or the full
 * idpool_status, less often for idle pools: the decisions are core/cadence),
 * the epoch sweep after every (re)connect, the consumption rate, the refill
 * slots (at most MAX_REFILLS pools refill at once; the others wait in a
 * FIFO: core/slots), and the renewal of locks held while a pool waits for
 * MySQL or for the push connection. Writes pool->sched and pool->seen.
 */
#ifndef IDPOOL_SCHEDULER_H
#define IDPOOL_SCHEDULER_H

#include <event2/event.h>

struct health;
struct node;
struct nodemap;
struct pool;
struct pools;
struct sched;

struct sched_env {
    const char *prefix;  /* key prefix: the epoch sweep SCANs keys_scan_pattern() */
    struct nodemap *map; /* a pool is checked on its node's main connection, under its epoch */
    struct pools *pools;
    struct health *health;
    /* A pool below its low-water mark got a refill slot: take its lock. */
    void (*start)(struct pool *p, void *arg);
    /* A renewal of the pool's lock landed while its push waited in line (PUSHQ) for it. */
    void (*renewed)(struct pool *p, void *arg);
    void *arg;
};

struct sched *sched_new(struct event_base *base, const struct sched_env *env, int tick_ms,
                        int reload_ms, int lock_ttl_ms);
void sched_free(struct sched *s);
void sched_configure(struct sched *s, int tick_ms, int reload_ms, int lock_ttl_ms);

/*
 * Node n's main connection is ready again (validated under its epoch):
 * sweep every pool on that node (SCAN, whatever MySQL knows and whatever
 * state a pool is in) and check every pool now.
 */
void sched_node_ready(struct sched *s, struct node *n);
/*
 * Issuer-only instance (refill = off): rows are still loaded (the ID API
 * needs them), but no pool is checked, swept, locked or refilled.
 */
void sched_passive(struct sched *s);
/* Stop the timers and start nothing new. */
void sched_stop(struct sched *s);

/* The pool's refill is over (it is idle): its slot goes to the next in line. */
void sched_release(struct sched *s, struct pool *p);
/* The pool's lock was taken or renewed just now. */
void sched_locked(struct pool *p);
/* 1 when a pool waits for a refill slot (a refill then does not go on under its lock). */
int sched_waiters(const struct sched *s);
/*
 * idpool_epoch (a check, the sweep) or the fence (a push) discarded the
 * pool, written under an earlier epoch: counted and logged, with the epoch
 * now when the caller knows it (NULL: not said).
 */
void sched_discarded(struct pool *p, const char *epoch);

#endif
