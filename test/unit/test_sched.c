/*
 * Unit tests of the scheduler's pure decisions: which check a pool gets at
 * a tick and when (cadence.c: the epoch first, the sweep's turn, idle
 * pools looked at less often) and the refill slots (slots.c: a cap, a
 * FIFO line, a waiter that no longer wants its slot).
 */
#include <stdint.h>

#include "cadence.h"
#include "slots.h"
#include "unit.h"

/* A served, idle pool due for a plain check at t=1000 on its epoch. */
static struct cadence_pool due_pool(void)
{
    struct cadence_pool p = {
        .now = 1000,
        .due_ms = 1000,
        .status_due_ms = 2000,
        .idle = 1,
        .live = 1,
    };
    return p;
}

static void test_check(void)
{
    struct cadence_pool p = due_pool();

    CHECK(cadence_check(&p) == CADENCE_LLEN);
    p.status_due_ms = 1000; /* the counters are due too */
    CHECK(cadence_check(&p) == CADENCE_STATUS);
    p = due_pool();
    p.now = 999; /* not due */
    CHECK(cadence_check(&p) == CADENCE_NONE);
    p = due_pool();
    p.idle = 0; /* a refill (or a check) in flight */
    CHECK(cadence_check(&p) == CADENCE_NONE);
    p = due_pool();
    p.dead = 1;
    CHECK(cadence_check(&p) == CADENCE_NONE);
    p = due_pool();
    p.waiting = 1; /* in line for a slot: its check waits too */
    CHECK(cadence_check(&p) == CADENCE_NONE);
    /* a row not served is still checked (clients may pop it), with the whole status */
    p = due_pool();
    p.live = 0;
    CHECK(cadence_check(&p) == CADENCE_STATUS);
    p.now = p.due_ms - 1;
    CHECK(cadence_check(&p) == CADENCE_NONE);
}

static void test_epoch(void)
{
    struct cadence_pool p = due_pool();

    /* a pool not checked against this epoch: idpool_epoch at once, due or not ... */
    p.epoch_due = 1;
    p.now = 10;
    CHECK(cadence_check(&p) == CADENCE_EPOCH);
    /* ... and even when its row is not served (clients may still pop it) */
    p.live = 0;
    CHECK(cadence_check(&p) == CADENCE_EPOCH);
    /* but not twice: the sweep's idpool_epoch is on its way */
    p.sweeping = 1;
    CHECK(cadence_check(&p) == CADENCE_NONE);
    /* the sweep does not hold up a pool already checked against this epoch */
    p = due_pool();
    p.sweeping = 1;
    CHECK(cadence_check(&p) == CADENCE_LLEN);
    /* nor does the epoch jump the line, a refill in flight or a removed row */
    p = due_pool();
    p.epoch_due = 1;
    p.waiting = 1;
    CHECK(cadence_check(&p) == CADENCE_NONE);
    p.waiting = 0;
    p.idle = 0;
    CHECK(cadence_check(&p) == CADENCE_NONE);
    p.idle = 1;
    p.dead = 1;
    CHECK(cadence_check(&p) == CADENCE_NONE);
    /* after the epoch comes the status (the sweep may have emptied the pool) */
    p.dead = 0;
    CHECK(cadence_check(&p) == CADENCE_EPOCH);
}

static void test_cadence(void)
{
    /* busy: the length changed, or was not known, or the pool is consumed */
    CHECK(cadence_busy(0, 0, 0, 0));
    CHECK(cadence_busy(1, 10, 9, 0));
    CHECK(!cadence_busy(1, 10, 10, 0));
    CHECK(!cadence_busy(1, 10, 10, 0.99));
    CHECK(cadence_busy(1, 10, 10, 1.0));
    /* a busy pool every interval, an idle one every CADENCE_IDLE_CHECK_MS ... */
    CHECK_EQ_U64(cadence_next_check(1000, 100, 1), 1100);
    CHECK_EQ_U64(cadence_next_check(1000, 100, 0), 1000 + CADENCE_IDLE_CHECK_MS);
    /* ... or its interval when that is longer */
    CHECK_EQ_U64(cadence_next_check(1000, 2000, 0), 3000);
    CHECK_EQ_U64(cadence_next_check(1000, 2000, 1), 3000);
    /* the counters: every interval while alerting, else by busy or idle */
    CHECK_EQ_U64(cadence_next_status(1000, 100, 1, 0), 1100);
    CHECK_EQ_U64(cadence_next_status(1000, 100, 1, 1), 1100);
    CHECK_EQ_U64(cadence_next_status(1000, 100, 0, 1), 1000 + CADENCE_STATUS_MS);
    CHECK_EQ_U64(cadence_next_status(1000, 100, 0, 0), 1000 + CADENCE_IDLE_STATUS_MS);
}

static void test_slots(void)
{
    struct slots q;
    struct slot_entry e[5] = {{0}};

    slots_init(&q, 2);
    CHECK(!slots_waiters(&q));
    CHECK(slots_request(&q, &e[0]) == 1);
    CHECK(slots_request(&q, &e[1]) == 1);
    CHECK(e[0].holding && e[1].holding && !e[0].waiting);
    /* full: the next ones wait, in order */
    CHECK(slots_request(&q, &e[2]) == 0);
    CHECK(slots_request(&q, &e[3]) == 0);
    CHECK(slots_request(&q, &e[4]) == 0);
    CHECK(e[2].waiting && !e[2].holding);
    CHECK(slots_waiters(&q));
    CHECK(slots_next(&q) == NULL); /* no slot free: nobody leaves the line */
    /* releasing what one does not hold changes nothing */
    CHECK(slots_release(&q, &e[2]) == 0);
    CHECK(slots_next(&q) == NULL);
    CHECK_EQ_U64(q.busy, 2);
    /* a slot freed: the oldest waiter leaves the line, holding nothing yet ... */
    CHECK(slots_release(&q, &e[0]) == 1);
    CHECK(!e[0].holding);
    CHECK(slots_next(&q) == &e[2]);
    CHECK(!e[2].waiting && !e[2].holding);
    /* ... and takes it by asking again */
    CHECK(slots_request(&q, &e[2]) == 1);
    CHECK(slots_next(&q) == NULL);
    /* a waiter that no longer wants a slot leaves it to the next in line */
    CHECK(slots_release(&q, &e[1]) == 1);
    CHECK(slots_next(&q) == &e[3]); /* not asking again */
    CHECK(slots_next(&q) == &e[4]);
    CHECK(slots_request(&q, &e[4]) == 1);
    CHECK(!slots_waiters(&q));
    CHECK(slots_next(&q) == NULL);
    CHECK_EQ_U64(q.busy, 2);
    /* the one that left may ask again: at the end of the line */
    CHECK(slots_request(&q, &e[3]) == 0);
    CHECK(slots_release(&q, &e[2]) == 1);
    CHECK(slots_next(&q) == &e[3]);
}

int main(void)
{
    RUN(test_check);
    RUN(test_epoch);
    RUN(test_cadence);
    RUN(test_slots);
    return unit_done();
}
