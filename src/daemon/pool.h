/*
 * pool — the registry of applications, one struct pool each: the row being
 * served, the pool's state in the refill cycle, and what the other modules
 * keep about it, each in its own member that only that module writes:
 *
 *   sched   when to look at the pool, its refill slot (scheduler.c)
 *   seen    what the last check read in Redis (scheduler.c)
 *   health  alert tracks and the last problem (health.c)
 *   run     the refill in progress: lock, batch, push job (refill.c, lease.c)
 *   reserve the failover reserve this daemon holds (lease.c)
 *   c       the counters (APP_COUNTERS; incremented by whoever counts)
 *   ledger  the lease ledger's growth, for the runway (pool.c)
 *
 * The pool module loads rows (store_load), applies them (new, changed,
 * soft-deleted, invalid, removed), changes states (pool_set_state, the one
 * door) and renders the status views for HTTP and /metrics.
 */
#ifndef IDPOOL_POOL_H
#define IDPOOL_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "app.h"
#include "gen.h"
#include "plan.h"
#include "poolstate.h"
#include "push.h"
#include "rds.h" /* RDS_EPOCH_MAX */
#include "runway.h"
#include "slots.h"
#include "status.h"

struct health;
struct node;
struct nodemap;
struct pools;
struct sched;
struct store;

/* scheduler.c */
struct pool_sched {
    uint64_t due_ms;                /* next check */
    uint64_t check_ms;              /* when the last check was sent */
    uint64_t status_due_ms;         /* next full idpool_status read */
    int busy;                       /* the pool length changed at the last check */
    char epoch_seen[RDS_EPOCH_MAX]; /* Redis epoch the pool was last checked against */
    struct slot_entry slot;         /* a refill slot held (lock phase to idle), or in line */
    unsigned renewing;              /* lock renewals in flight (a push waits for them) */
    uint64_t renewed_ms;            /* when the lock was taken or last renewed */
    struct sched *owner;            /* the scheduler (for its Redis callbacks) */
};

/* scheduler.c: from the last check */
struct pool_seen {
    int len_known;                              /* len is valid */
    uint64_t len;                               /* pool length */
    int counters_known;                         /* the meta counters were read at least once */
    int lease_known;                            /* lease is valid */
    struct gen_state lease;                     /* leases as last read or written */
    uint64_t rate_pushed, rate_len, rate_at_ms; /* the previous rate sample */
    double rate;                                /* consumption, IDs/s, smoothed */
};

/* health.c */
struct pool_health {
    struct alert_track alert[ALERT_COUNT];
    unsigned unsynced;      /* 1 << kind: fired while Redis was unreachable */
    char *msg[ALERT_COUNT]; /* message of each firing alert (heap), for a later sync */
    char *last_err;         /* last refill problem, logged once per change (heap) */
    uint64_t last_ok_ms;    /* last time the pool was fine or got IDs (0: never) */
    int low_checks;         /* status reads in a row below low water (0..2) */
    uint64_t rebuild_ms;    /* first check that found meta without an epoch (0: not now) */
    int space_exhausted;    /* the last reservation found no ID space left */
    int lease_conflict;     /* the last reservation met another application of its id_space */
    uint64_t conflict_ms;   /* when (reservations are tried again at most once a second) */
    int adopted;            /* the alert states in meta were read (once per process) */
};

/* refill.c and lease.c: the refill in progress */
struct pool_run {
    struct node *node;        /* the node of its lock: every command of the refill goes there */
    unsigned node_gen;        /* node->generation when the lock was taken */
    char token[33];           /* random lock token of this acquisition */
    int locked;               /* SET NX succeeded */
    int lock_step, lock_sent; /* replies seen / commands sent in the lock phase */
    int lock_err;             /* a lock-phase reply was missing or wrong */
    uint64_t start_ms;        /* lock taken: for the refill latency histogram */
    unsigned continued;       /* refills in a row under this lock */
    uint64_t len;             /* pool length under the lock */
    int unfinished;           /* the last refill was cut short: the next check finishes it */
    char *expected;           /* meta next as read, verbatim (heap; NULL = no meta) */
    int reserve_split;        /* the reservation in flight is twice as large: keep half */
    struct plan_batch batch;  /* the IDs of this refill */
    struct push_job job;      /* their push */
};

/*
 * lease.c: the failover reserve (plan.h): [lo, hi) reserved in MySQL by
 * this daemon and never written to any Redis; hi 0: none held.
 */
struct pool_reserve {
    uint64_t lo, hi;
};

struct pool {
    struct pools *reg;
    struct app_cfg cfg;     /* validated row being served */
    struct app_cfg new_cfg; /* newer row, applied when idle */
    int has_new_cfg;
    char *k_pool, *k_meta, *k_lock; /* Redis keys (heap) */
    char *llen_cmd;                 /* LLEN pool, RESP-encoded (heap) */
    size_t llen_len;
    enum pool_state state;  /* pool_set_state() only */
    int live;               /* served: present, not deleted, valid */
    int dead;               /* gone from the table: freed when idle */
    int deleted;            /* soft-deleted row */
    int mark;               /* reload sweep mark */
    char *bad;              /* current validation error, or id_space conflict (heap) */
    int conflict;           /* bad is an id_space conflict of the rows, not a broken rule */
    int space_warned;       /* the ID-space warning was logged for this row */
    int memory_warned;      /* the pool-memory warning was logged for this row */
    unsigned side_calls;    /* renewals, limit syncs in flight (the pool is not freed meanwhile) */
    uint64_t live_since_ms; /* when it became served */
    int checked;            /* its first refill cycle is over (pool_checked; readiness) */
    uint64_t last_refill_unix_ms;
    struct pool_sched sched;
    struct pool_seen seen;
    struct pool_health health;
    struct pool_run run;
    struct pool_reserve reserve;
    struct app_counters c;
    struct runway_ledger ledger; /* the lease ledger's growth as last read (pool.c) */
};

/* What the rest of the daemon tells the registry. */
struct pools_env {
    struct store *store;
    struct health *health;
    struct nodemap *map; /* side calls (limits) on the main connection of the meta's node */
    int tick_ms;         /* default check interval of rows with interval = 0 */
    int pool_memory_mb;  /* pool_memory fires for a full pool above this (pools_set_memory) */
    /* A pool went idle (slots, pending stop); called by pool_set_state. */
    void (*on_idle)(struct pool *p, void *arg);
    /* The rows were (re)loaded or failed to load. */
    void (*on_loaded)(void *arg);
    void *arg;
};

struct pools *pools_new(const char *prefix, const struct pools_env *env);
void pools_free(struct pools *reg);
void pools_set_tick(struct pools *reg, int tick_ms);
/* pool-memory-mb, for the rows (re)loaded from now on. */
void pools_set_memory(struct pools *reg, int pool_memory_mb);

/* The `arg` of the registry's environment (the refill loop that owns the pools). */
void *pool_owner(const struct pool *p);

/* Every pool, in no particular order (dead ones included until swept). */
size_t pools_count(const struct pools *reg);
struct pool *pools_at(const struct pools *reg, size_t i);
/* The pool of `key`, or NULL. */
struct pool *pools_find(struct pools *reg, const char *key);

/*
 * Re-read the rows now (no-op while a load is in flight or stopping), and
 * the lease ledger's growth for the runway with them when it was last read
 * a minute ago or more (or never, or pools_reload_ledger asked).
 */
void pools_reload(struct pools *reg);
/*
 * Re-read the rows now, also when a load is in flight: then once more when
 * it ends (its rows may predate the call). Returns the number of the load
 * that reads them as of now: the view's rows_loads reaches it once that
 * load ended, whether it succeeded or not (SIGHUP: READY=1 after
 * RELOADING=1).
 */
uint64_t pools_reread(struct pools *reg);
/* Read the ledger with the next reload whatever its age (SIGHUP). */
void pools_reload_ledger(struct pools *reg);
/* A MySQL job succeeded: if loading rows had failed, load them now. */
void pools_mysql_back(struct pools *reg);
/* Stop loading rows. */
void pools_stop(struct pools *reg);
/* No pool has anything in flight and no load is running. */
int pools_quiet(const struct pools *reg);
/* Free pools that left the table once nothing of theirs is in flight. */
void pools_sweep(struct pools *reg);

/*
 * Write the row's limits to meta for idpool_take (per_take, per_second), or
 * remove them (NULL, NULL) when the row is not served, so that takes answer
 * IDPOOL_NOAPP. A side call: its error is logged.
 */
void pool_limits(struct pool *p, const char *per_take, const char *per_second);

/*
 * The pool's first refill cycle is over: a check saw it at or above its
 * low-water mark, or a refill of it ran under its lock and ended, whatever
 * came of it (a pool that cannot be refilled raises its alerts; it does not
 * hold back the daemon's readiness). A lock another daemon held does not
 * count: the next check looks again.
 */
void pool_checked(struct pool *p);

/* The one door for state changes; entering IDLE ends the refill (batch freed, new row applied). */
void pool_set_state(struct pool *p, enum pool_state to);

/* The views of every application, for HTTP and /metrics (daemon view: filled by the caller). */
void pools_each_view(struct pools *reg, status_app_fn *fn, void *arg);
/* One application by key (a row whose key cannot name a pool too); -1 when there is none. */
int pools_one_view(struct pools *reg, const char *key, status_app_fn *fn, void *arg);
/*
 * The registry's part of the daemon view: served / invalid / soft-deleted
 * rows, whether rows were loaded and how many loads ended, served pools not
 * checked yet, alerts firing.
 */
void pools_tally(const struct pools *reg, struct daemon_view *out);

#endif
