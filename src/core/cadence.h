/*
 * cadence — when the scheduler looks at a pool and what it sends, decided
 * without I/O (scheduler.c does the sending). Every check is a plain LLEN,
 * sent pre-encoded; the full idpool_status (counters for metrics and
 * alerts, limits, the consumption rate) is read less often. A pool whose
 * length did not change since the last look is idle: checked every
 * CADENCE_IDLE_CHECK_MS instead of every interval, its status read every
 * CADENCE_IDLE_STATUS_MS. Any change of length (pops, takes) makes it busy
 * again at once, so a burst waits at most CADENCE_IDLE_CHECK_MS.
 *
 * A pool whose row is not served (soft-deleted, invalid) is still looked
 * at, never refilled: clients may pop it, and what the status shows of it
 * must be its length now, not the last one seen while it was served. Its
 * checks come every CADENCE_IDLE_CHECK_MS at the most (an invalid row's
 * interval means nothing), each one a full idpool_status (which also
 * removes the limits from its meta).
 *
 * The epoch: the first look at a pool on a Redis process whose epoch it was
 * not checked against runs idpool_epoch first, at once and even if the row
 * is not served (clients may still pop), unless the sweep after a
 * (re)connect is on its way to do it.
 */
#ifndef IDPOOL_CADENCE_H
#define IDPOOL_CADENCE_H

#include <stdint.h>

#define CADENCE_IDLE_CHECK_MS  500
#define CADENCE_STATUS_MS      1000
#define CADENCE_IDLE_STATUS_MS 5000

/* What the scheduler knows of one pool at a tick. */
struct cadence_pool {
    uint64_t now;           /* the tick's time, ms */
    uint64_t due_ms;        /* next check */
    uint64_t status_due_ms; /* next idpool_status */
    int epoch_due;          /* not checked against the connection's epoch */
    int sweeping;           /* the epoch sweep (its SCAN or its idpool_epoch calls) is running */
    int waiting;            /* in line for a refill slot */
    int idle;               /* in state idle (nothing of the refill cycle in flight) */
    int live;               /* served: present, not deleted, valid */
    int dead;               /* gone from the table */
};

enum cadence_check {
    CADENCE_NONE = 0, /* not now */
    CADENCE_LLEN,     /* the pool's length */
    CADENCE_STATUS,   /* idpool_status */
    CADENCE_EPOCH,    /* idpool_epoch, then idpool_status */
};

/* The check to send for a pool at this tick. */
enum cadence_check cadence_check(const struct cadence_pool *p);

/*
 * After a check that read the length `len`: the pool is busy when its
 * length changed (or was not known) or it is consumed at 1 ID/s or more.
 */
int cadence_busy(int len_known, uint64_t seen_len, uint64_t len, double rate);

/* The next check of a pool checked at check_ms: every interval if busy, else less often. */
uint64_t cadence_next_check(uint64_t check_ms, uint64_t interval_ms, int busy);

/*
 * The next idpool_status read after one at check_ms: every interval while
 * an alert fires or waits (or meta reports an underflow), every
 * CADENCE_STATUS_MS when busy, else every CADENCE_IDLE_STATUS_MS.
 */
uint64_t cadence_next_status(uint64_t check_ms, uint64_t interval_ms, int alerting, int busy);

#endif
