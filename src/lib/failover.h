/*
 * failover — which environment an application's takes go to, and when it
 * is looked at again: the decision of libidpool's background thread
 * (client.c's service), apart from its locks, buffers and network. Pure:
 * time is passed in (CLOCK_MONOTONIC ms, never 0), nothing is read from
 * elsewhere but through failover_opts.
 *
 * Environments are tried in preference order. A take that brings nothing
 * for failover_ms (pool dry, not re-validated) or fails outright
 * (connection lost, IDPOOL_NOAPP) moves the application to the next
 * environment (wrapping); every failback_ms a more preferred one is tried
 * again, in order, and taken back when it supplies IDs. IDPOOL_RATE is
 * waited out where it was said: another environment's budget is not a way
 * around the limit.
 */
#ifndef IDPOOL_LIB_FAILOVER_H
#define IDPOOL_LIB_FAILOVER_H

#include <stdint.h>

#include "takereply.h"

#define IDLE_WAKE_MS   100  /* an application is looked at least this often */
#define DRY_RETRY_MS   20   /* a dry pool is asked again after this */
#define NOAPP_RETRY_MS 1000 /* every environment said IDPOOL_NOAPP: asked again after this */

/* One application's route. Zeroed: environment 0, nothing to wait for. */
struct failover {
    int env;                 /* environment takes go to */
    uint64_t retry_at_ms;    /* no take before this (a refusal's hint) */
    uint64_t trouble_ms;     /* env has supplied nothing since (0: fine) */
    uint64_t failback_at_ms; /* when a more preferred environment is tried again */
    unsigned noapp;          /* environments that answered IDPOOL_NOAPP (bit per index) */
};

struct failover_opts {
    unsigned nenv;        /* environments, 1..32 */
    uint64_t failover_ms; /* dry or not re-validated this long: the next environment */
    uint64_t failback_ms; /* a more preferred environment is tried again after this */
    /*
     * When environment i may be tried again (0: now) for this application
     * (a Cluster's primaries back off one by one): a down one backs off.
     */
    uint64_t (*retry_at)(int i, void *arg);
    void *arg;
};

/* Before a take: whether to take now, and from where. */
struct failover_plan {
    int take;      /* 1: take now from `from`; 0: look again at `wake` */
    int from;      /* the (first) environment to take from */
    int back;      /* a failback: from 0 up to the current environment, in order */
    uint64_t wake; /* take == 0: when to look again */
};

/* What to do after a take. */
struct failover_step {
    uint64_t wake; /* when to look at the application again (now: at once) */
    int failover;  /* moved to the next environment */
    int failback;  /* moved back to a more preferred one */
};

/*
 * Whether to take now: when `low` (the buffer is below its low water, or a
 * caller waits) and no refusal's wait runs, or when a failback is due.
 */
struct failover_plan failover_plan(const struct failover *f, uint64_t now, int low);

/*
 * During a failback: the environment to try after e answered out, or -1
 * (IDs came, or no more preferred one is left).
 */
int failover_next(const struct failover *f, const struct failover_plan *p, int e,
                  enum take_outcome out);

/*
 * After the take planned by p: environment e answered out (hint_ms: the
 * wait of T_EPOCH and T_RATE). Updates f; returns what to do.
 */
struct failover_step failover_after(struct failover *f, const struct failover_opts *o,
                                    const struct failover_plan *p, uint64_t now, int e,
                                    enum take_outcome out, uint64_t hint_ms);

/* Every environment answered IDPOOL_NOAPP: callers fail at once. */
static inline int failover_nowhere(const struct failover *f, unsigned nenv)
{
    return f->noapp && (unsigned)__builtin_popcount(f->noapp) >= nenv;
}

#endif
