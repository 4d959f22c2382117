/*
 * Unit tests of the refill's pure decisions (plan.c) and of the pool state
 * machine (poolstate.c): batch size, lease sizing, meta parsing, drawing a
 * batch across leases, chunk splitting, allowed transitions.
 */
#include <stdint.h>
#include <stdlib.h>

#include "plan.h"
#include "poolstate.h"
#include "unit.h"

static struct app_cfg cfg_of(enum app_type type, uint64_t step, uint64_t max_pool, uint64_t lw)
{
    struct app_cfg c;

    memset(&c, 0, sizeof(c));
    strcpy(c.key, "t");
    c.type = type;
    c.step = step;
    c.max_pool = max_pool;
    c.low_water = lw;
    c.delta = 1;
    c.increment_max = 1;
    return c;
}

static void test_due(void)
{
    struct app_cfg c = cfg_of(APP_MONOTONIC, 1000, 10000, 5000);

    CHECK(plan_due(&c, 4999, 0));  /* below the mark */
    CHECK(!plan_due(&c, 5000, 0)); /* at it: nothing to do */
    CHECK(!plan_due(&c, 9999, 0));
    /* a refill cut short (fenced part-way) is finished above the mark too ... */
    CHECK(plan_due(&c, 6000, 1));
    CHECK(plan_due(&c, 9000, 1)); /* a step of room */
    /* ... but not without a step of room, nor over capacity (the row shrank) */
    CHECK(!plan_due(&c, 9001, 1));
    CHECK(!plan_due(&c, 10000, 1));
    CHECK(!plan_due(&c, 20000, 1));
}

static void test_want(void)
{
    struct app_cfg c = cfg_of(APP_MONOTONIC, 1000, 10000, 8000);

    CHECK_EQ_U64(plan_want(&c, 0), 10000);    /* the room, in whole steps */
    CHECK_EQ_U64(plan_want(&c, 7999), 2000);  /* 2001 of room: 2 steps */
    CHECK_EQ_U64(plan_want(&c, 9500), 1000);  /* less than a step of room: one step */
    CHECK_EQ_U64(plan_want(&c, 20000), 1000); /* over capacity (row shrank): one step */
    c.max_pool = 5000000;
    CHECK_EQ_U64(plan_want(&c, 0), PLAN_MAX_IDS / 1000 * 1000); /* capped, whole steps */
    c.step = 1000000;
    c.max_pool = 4000000;
    CHECK_EQ_U64(plan_want(&c, 0), 1000000); /* the cap is at least one step */
}

static void test_lease_size(void)
{
    struct app_cfg c = cfg_of(APP_MONOTONIC, 1000, 300000, 240000);

    CHECK_EQ_U64(plan_lease_ids(&c, 0), 300000);       /* at least a full pool */
    CHECK_EQ_U64(plan_lease_ids(&c, 100000), 6000000); /* 60 s of demand */
    CHECK_EQ_U64(plan_lease_ids(&c, 1e12), PLAN_LEASE_MAX_IDS);
    CHECK_EQ_U64(plan_lease_span(&c, 0), app_span_for(&c, 300000));
    c.delta = 1000;
    c.increment_max = 1000000;
    /* 300000 x 1e9 > 2^48: a pool's worth still fits, so the floor is a full pool */
    CHECK_EQ_U64(plan_lease_span(&c, 1e9), app_span_for(&c, 300000));
    c.increment_max = 1;
    CHECK_EQ_U64(plan_lease_span(&c, 1e12),
                 app_span_for(&c, PLAN_LEASE_MAX_IDS) < PLAN_LEASE_MAX_SPAN
                     ? app_span_for(&c, PLAN_LEASE_MAX_IDS)
                     : PLAN_LEASE_MAX_SPAN);
}

static void test_prefetch(void)
{
    struct gen_state st = {.next = 100, .hi = 1100};

    CHECK(plan_should_prefetch(&st, 4000));  /* 1000 left < 2000 */
    CHECK(!plan_should_prefetch(&st, 2000)); /* 1000 left, not below half */
    st.nlo = 2000;
    st.nhi = 3000;
    CHECK(!plan_should_prefetch(&st, 1000000)); /* one is already held */
}

/* The failover reserve: which pools keep one, when it may refill, where a reservation splits. */
static void test_reserve(void)
{
    CHECK(!plan_reserve_kept(PLAN_RESERVE_OFF, APP_TREND));
    CHECK(plan_reserve_kept(PLAN_RESERVE_TREND, APP_TREND));
    CHECK(!plan_reserve_kept(PLAN_RESERVE_TREND, APP_MONOTONIC));
    CHECK(plan_reserve_kept(PLAN_RESERVE_ALL, APP_MONOTONIC));
    /* trend: whenever leasing failed, meta or not */
    CHECK(plan_reserve_usable(PLAN_RESERVE_TREND, APP_TREND, 1, 500));
    CHECK(plan_reserve_usable(PLAN_RESERVE_TREND, APP_TREND, 0, 0));
    CHECK(!plan_reserve_usable(PLAN_RESERVE_OFF, APP_TREND, 0, 0));
    /* monotonic: only a pool that starts over, and only under `all` */
    CHECK(!plan_reserve_usable(PLAN_RESERVE_TREND, APP_MONOTONIC, 0, 0));
    CHECK(plan_reserve_usable(PLAN_RESERVE_ALL, APP_MONOTONIC, 0, 0));
    CHECK(!plan_reserve_usable(PLAN_RESERVE_ALL, APP_MONOTONIC, 1, 0));
    CHECK(!plan_reserve_usable(PLAN_RESERVE_ALL, APP_MONOTONIC, 0, 7));
    CHECK_EQ_U64(plan_reserve_split(1000, 3000), 2000);
    CHECK_EQ_U64(plan_reserve_split(1000, 1003), 1001);
    CHECK_EQ_U64(plan_reserve_split(0, UINT64_MAX), UINT64_MAX / 2);
}

static enum plan_meta_result parse(const char *const *kv, size_t n, struct gen_state *st,
                                   struct plan_meta *m)
{
    plan_meta_init(m);
    for (size_t i = 0; i + 1 < n; i += 2)
        plan_meta_field(m, kv[i], strlen(kv[i]), kv[i + 1], strlen(kv[i + 1]));
    return plan_meta_end(m, st);
}

static void test_meta(void)
{
    struct gen_state st;
    struct plan_meta m;
    const char *ok[] = {"pushed", "5", "next", "1000", "hi", "2000", "nlo", "3000", "nhi", "4000"};
    const char *none[] = {"pushed", "5", "per_take", "10"};
    const char *bad_num[] = {"next", "1000", "hi", "20x0"};
    const char *backwards[] = {"next", "3000", "hi", "2000"};
    const char *overlap[] = {"next", "1000", "hi", "2000", "nlo", "1500", "nhi", "4000"};
    const char *empty_next[] = {"next", "4000", "hi", "5000", "nlo", "6000", "nhi", "6000"};
    const char *huge[] = {"next", "18446744073709551616", "hi", "1"};

    CHECK(parse(ok, 10, &st, &m) == PLAN_META_OK);
    CHECK(st.next == 1000 && st.hi == 2000 && st.nlo == 3000 && st.nhi == 4000);
    CHECK(m.have_next && m.next_len == 4 && memcmp(m.next, "1000", 4) == 0);
    CHECK(parse(none, 4, &st, &m) == PLAN_META_NONE && st.next == 0 && st.hi == 0);
    CHECK(parse(bad_num, 4, &st, &m) == PLAN_META_CORRUPT && st.hi == 0);
    CHECK(parse(backwards, 4, &st, &m) == PLAN_META_CORRUPT);
    CHECK(parse(overlap, 8, &st, &m) == PLAN_META_CORRUPT);
    CHECK(parse(empty_next, 8, &st, &m) == PLAN_META_CORRUPT); /* nhi <= nlo */
    /* the verbatim next is kept even when it does not parse (the fence compares text) */
    CHECK(parse(huge, 4, &st, &m) == PLAN_META_CORRUPT && m.next_len == 20);
}

static void test_draw_monotonic(void)
{
    struct app_cfg c = cfg_of(APP_MONOTONIC, 1000, 10000, 8000);
    struct gen_state st = {.next = 1, .hi = 2501}; /* from 1: ID 0 is never drawn */
    struct plan_batch b;
    struct rng r;

    memset(&b, 0, sizeof(b));
    rng_seed(&r, 7);
    CHECK(plan_batch_start(&b, &st, 4000) == 0);
    CHECK(plan_batch_draw(&b, &c, &r, 1000) == PLAN_DRAW_SHORT); /* the lease holds 2500 */
    CHECK_EQ_U64(b.nids, 2500);
    CHECK(gen_add_lease(&b.st, 10000, 20000) == 0);
    CHECK(plan_batch_draw(&b, &c, &r, 1000) == PLAN_DRAW_DONE);
    CHECK_EQ_U64(b.nids, 4000);
    for (size_t i = 1; i < b.nids; i++)
        CHECK(b.ids[i] > b.ids[i - 1]);
    CHECK(b.ids[2500] >= 10000);
    /* every draw records the state after its IDs: the last one is the batch's */
    CHECK(b.ndraws >= 4);
    CHECK_EQ_U64(b.draws[b.ndraws - 1].after.next, b.st.next);
    CHECK(plan_batch_split(&b, 300) == 0);
    {
        size_t sum = 0;
        for (size_t k = 0; k < b.nchunks; k++) {
            CHECK(b.chunks[k].n > 0 && b.chunks[k].n <= 300);
            CHECK_EQ_U64(b.chunks[k].off, sum); /* contiguous, in order */
            sum += b.chunks[k].n;
            /* a chunk's meta is at or past its last ID */
            CHECK(b.chunks[k].after.next > b.ids[b.chunks[k].off + b.chunks[k].n - 1]);
        }
        CHECK_EQ_U64(sum, 4000);
    }
    /* a new batch continues from the state the last one left */
    {
        uint64_t last = b.ids[b.nids - 1];
        CHECK(plan_batch_start(&b, &b.st, 1000) == 0);
        CHECK(plan_batch_draw(&b, &c, &r, 1000) == PLAN_DRAW_DONE);
        CHECK(b.ids[0] > last);
    }
    plan_batch_free(&b);
    CHECK(b.ids == NULL && b.nids == 0);
}

static void test_draw_trend(void)
{
    struct app_cfg c = cfg_of(APP_TREND, 400, 10000, 8000);
    struct gen_state st = {.next = 0, .hi = 1000000};
    struct plan_batch b;
    struct rng r;

    memset(&b, 0, sizeof(b));
    rng_seed(&r, 9);
    /* small blocks: several whole blocks per chunk (1000 / 400 -> 800 per draw) */
    CHECK(plan_batch_start(&b, &st, 2000) == 0);
    CHECK(plan_batch_draw(&b, &c, &r, 1000) == PLAN_DRAW_DONE);
    CHECK_EQ_U64(b.nids, 2000);
    for (size_t d = 0; d < b.ndraws; d++)
        CHECK(b.draws[d].n % 400 == 0);
    /* blocks larger than a chunk: one block per draw, split into several chunks */
    c.step = 2500;
    CHECK(plan_batch_start(&b, &b.st, 5000) == 0);
    CHECK(plan_batch_draw(&b, &c, &r, 1000) == PLAN_DRAW_DONE);
    CHECK_EQ_U64(b.ndraws, 2);
    CHECK(plan_batch_split(&b, 1000) == 0);
    CHECK_EQ_U64(b.nchunks, 6); /* 1000 + 1000 + 500 per block */
    CHECK_EQ_U64(b.chunks[2].n, 500);
    /* all chunks of a block carry the block's final state */
    CHECK_EQ_U64(b.chunks[0].after.next, b.chunks[2].after.next);
    CHECK(b.chunks[3].after.next > b.chunks[2].after.next);
    /* a short lease ends the batch on a whole block */
    {
        struct gen_state small = {.next = b.st.next, .hi = b.st.next + 3000};
        CHECK(plan_batch_start(&b, &small, 5000) == 0);
        CHECK(plan_batch_draw(&b, &c, &r, 1000) == PLAN_DRAW_SHORT);
        CHECK_EQ_U64(b.nids, 2500);
    }
    plan_batch_free(&b);
}

static void test_states(void)
{
    int n = 0;

    /* the refill cycle, as refill.c walks it */
    CHECK(pool_state_allowed(POOL_IDLE, POOL_CHECK));
    CHECK(pool_state_allowed(POOL_CHECK, POOL_LOCK));
    CHECK(pool_state_allowed(POOL_LOCK, POOL_RESERVE));
    CHECK(pool_state_allowed(POOL_RESERVE, POOL_PUSHQ));
    CHECK(pool_state_allowed(POOL_PUSHQ, POOL_PUSH));
    CHECK(pool_state_allowed(POOL_PUSH, POOL_PREFETCH));
    CHECK(pool_state_allowed(POOL_PREFETCH, POOL_INSTALL));
    CHECK(pool_state_allowed(POOL_INSTALL, POOL_LOCK)); /* continue under the lock */
    CHECK(pool_state_allowed(POOL_PUSH, POOL_UNLOCK));
    CHECK(pool_state_allowed(POOL_UNLOCK, POOL_IDLE));
    CHECK(pool_state_allowed(POOL_IDLE, POOL_LOCK)); /* a waiting pool gets a slot */
    /* never: a push without a lock phase, leaving a lock without unlocking it */
    CHECK(!pool_state_allowed(POOL_IDLE, POOL_PUSH));
    CHECK(!pool_state_allowed(POOL_CHECK, POOL_PUSHQ));
    CHECK(!pool_state_allowed(POOL_PUSH, POOL_IDLE));
    CHECK(!pool_state_allowed(POOL_RESERVE, POOL_IDLE));
    CHECK(!pool_state_allowed(POOL_PREFETCH, POOL_IDLE));
    CHECK(!pool_state_allowed(POOL_PUSHQ, POOL_UNLOCK)); /* a queued push always runs */
    CHECK(!pool_state_allowed(POOL_UNLOCK, POOL_LOCK));
    CHECK(!pool_state_allowed(POOL_IDLE, POOL_IDLE));
    CHECK(!pool_state_allowed(POOL_NSTATES, POOL_IDLE));
    /* every state but IDLE and CHECK leads to UNLOCK or IDLE eventually; count the edges */
    for (int f = 0; f < POOL_NSTATES; f++)
        for (int t = 0; t < POOL_NSTATES; t++)
            n += pool_state_allowed((enum pool_state)f, (enum pool_state)t);
    CHECK_EQ_U64((uint64_t)n, 20);
    CHECK(strcmp(pool_state_name(POOL_PUSHQ), "push-queue") == 0);
    CHECK(strcmp(pool_state_name(POOL_NSTATES), "?") == 0);
}

int main(void)
{
    RUN(test_due);
    RUN(test_want);
    RUN(test_lease_size);
    RUN(test_prefetch);
    RUN(test_reserve);
    RUN(test_meta);
    RUN(test_draw_monotonic);
    RUN(test_draw_trend);
    RUN(test_states);
    return unit_done();
}
