/* Unit tests of the generator: invariants M and A on generated batches. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "gen.h"
#include "resp.h"
#include "unit.h"

static struct app_cfg mono_cfg(uint64_t delta, uint64_t rem, uint64_t inc_max, uint64_t start)
{
    struct app_cfg c;

    memset(&c, 0, sizeof(c));
    strcpy(c.key, "t");
    c.type = APP_MONOTONIC;
    c.step = 1000;
    c.delta = delta;
    c.remainder = rem;
    c.increment_max = inc_max;
    c.start_offset = start;
    c.max_pool = 60000;
    return c;
}

static void test_rng_bounds_and_spread(void)
{
    struct rng r;
    unsigned hist[10] = {0};

    rng_seed(&r, 42);
    for (int i = 0; i < 100000; i++) {
        uint64_t v = rng_below(&r, 10);
        CHECK(v < 10);
        if (v < 10)
            hist[v]++;
    }
    /* Each bucket expects 10000; a broken generator is far off. */
    for (int i = 0; i < 10; i++)
        CHECK(hist[i] > 9000 && hist[i] < 11000);
    CHECK_EQ_U64(rng_below(&r, 1), 0);
}

static void test_rng_seeds(void)
{
    struct rng a, b, c;

    rng_seed(&a, 7);
    rng_seed(&b, 7);
    CHECK_EQ_U64(rng_next(&a), rng_next(&b));
    rng_seed_os(&a);
    rng_seed_os(&c);
    CHECK(rng_next(&a) != rng_next(&c));
}

static void test_monotonic_gaps_and_remainder(void)
{
    struct app_cfg c = mono_cfg(7, 3, 5, 1000);
    struct gen_state st = {.next = 0, .hi = 0};
    struct rng r;
    static uint64_t out[20000];
    size_t n;
    int gaps_seen[6] = {0};

    rng_seed(&r, 1);
    CHECK(gen_add_lease(&st, 500, 1000000) == 0);
    n = gen_draw(&c, &st, &r, out, 20000);
    CHECK_EQ_U64(n, 20000);
    CHECK(out[0] >= 1000); /* start_offset above the lease start */
    for (size_t i = 0; i < n; i++) {
        CHECK(out[i] % 7 == 3);
        CHECK(out[i] < 1000000);
        if (i) {
            uint64_t g = (out[i] - out[i - 1]) / 7;
            CHECK(out[i] > out[i - 1]);
            CHECK((out[i] - out[i - 1]) % 7 == 0);
            CHECK(g >= 1 && g <= 5);
            if (g >= 1 && g <= 5)
                gaps_seen[g]++;
        }
    }
    for (int g = 1; g <= 5; g++)
        CHECK(gaps_seen[g] > 0); /* gaps really are random over the range */
    CHECK(st.next == out[n - 1] + 1);
}

static void test_monotonic_rolls_over_and_runs_out(void)
{
    struct app_cfg c = mono_cfg(1, 0, 1, 0);
    struct gen_state st = {.next = 10, .hi = 15};
    struct rng r;
    uint64_t out[100];
    size_t n;

    rng_seed(&r, 2);
    CHECK(gen_add_lease(&st, 100, 103) == 0);
    CHECK(gen_add_lease(&st, 200, 300) == -1); /* only one prefetched lease */
    n = gen_draw(&c, &st, &r, out, 100);
    CHECK_EQ_U64(n, 8); /* 10..14 then 100..102 */
    CHECK_EQ_U64(out[0], 10);
    CHECK_EQ_U64(out[4], 14);
    CHECK_EQ_U64(out[5], 100);
    CHECK_EQ_U64(out[7], 102);
    CHECK(!gen_has_next(&st));
    CHECK_EQ_U64(gen_remaining(&st), 0);
    /* A new lease below the state would break M: refused. */
    CHECK(gen_add_lease(&st, 50, 60) == -1);
    CHECK(gen_add_lease(&st, 103, 110) == 0);
    n = gen_draw(&c, &st, &r, out, 100);
    CHECK_EQ_U64(n, 7);
    CHECK_EQ_U64(out[0], 103);
}

static void test_trend_blocks(void)
{
    struct app_cfg c = mono_cfg(3, 1, 1, 0);
    struct gen_state st = {0};
    struct rng r;
    static uint64_t out[5000];
    static uint64_t sorted[1000];
    size_t n;
    int shuffled = 0;

    c.type = APP_TREND;
    c.step = 1000;
    rng_seed(&r, 3);
    /* Room for exactly 2 blocks of 1000 with stride 3 in the first lease. */
    CHECK(gen_add_lease(&st, 0, 6005) == 0);
    n = gen_draw(&c, &st, &r, out, 5000);
    CHECK_EQ_U64(n, 2000);
    for (int b = 0; b < 2; b++) {
        uint64_t lo = UINT64_MAX, hi = 0;
        memcpy(sorted, out + b * 1000, sizeof(sorted));
        for (int i = 0; i < 1000; i++) {
            CHECK(sorted[i] % 3 == 1);
            if (sorted[i] < lo)
                lo = sorted[i];
            if (sorted[i] > hi)
                hi = sorted[i];
            if (i && sorted[i] < sorted[i - 1])
                shuffled = 1;
        }
        /* 1000 distinct values, stride 3, span 999 strides: a permutation of a block. */
        CHECK_EQ_U64(hi - lo, 999 * 3);
        CHECK(hi < 6005);
    }
    CHECK(shuffled);
    /* Blocks do not overlap: the second starts above the first. */
    {
        uint64_t max0 = 0, min1 = UINT64_MAX;
        for (int i = 0; i < 1000; i++) {
            if (out[i] > max0)
                max0 = out[i];
            if (out[1000 + i] < min1)
                min1 = out[1000 + i];
        }
        CHECK(min1 > max0);
    }
    /* The tail (6001..6004) cannot hold a block: next lease needed, no straddling. */
    CHECK(gen_add_lease(&st, 10000, 20000) == 0);
    n = gen_draw(&c, &st, &r, out, 1000);
    CHECK_EQ_U64(n, 1000);
    for (int i = 0; i < 1000; i++)
        CHECK(out[i] >= 10000 && out[i] < 20000);
}

static void test_near_id_space_end(void)
{
    struct app_cfg c = mono_cfg(1, 0, 1, 0);
    struct gen_state st = {0};
    struct rng r;
    uint64_t out[200];
    size_t n;

    rng_seed(&r, 4);
    CHECK(gen_add_lease(&st, (uint64_t)INT64_MAX - 100, (uint64_t)INT64_MAX) == 0);
    n = gen_draw(&c, &st, &r, out, 200);
    CHECK_EQ_U64(n, 100);
    CHECK_EQ_U64(out[99], (uint64_t)INT64_MAX - 1);
    CHECK_EQ_U64(gen_floor(&st), (uint64_t)INT64_MAX);
}

/* A pool's first IDs from a lease [lo, hi), by type, delta and remainder. */
static size_t draw_from(struct app_cfg *c, uint64_t lo, uint64_t hi, uint64_t *out, size_t n)
{
    struct gen_state st = {0};
    struct rng r;

    rng_seed(&r, 5);
    CHECK(gen_add_lease(&st, lo, hi) == 0);
    return gen_draw(c, &st, &r, out, n);
}

/*
 * ID 0 is never handed out (MySQL AUTO_INCREMENT and ORMs read 0 as "none"),
 * even with an explicit start_offset 0 and a lease from 0: the first ID is
 * the first >= 1 with the remainder (delta when the remainder is 0).
 */
static void test_never_zero(void)
{
    struct app_cfg c = mono_cfg(1, 0, 1, 0);
    static uint64_t out[4000];
    uint64_t lo_seen;
    size_t n;

    n = draw_from(&c, 0, 10, out, 100);
    CHECK_EQ_U64(n, 9); /* 1..9: 0 is skipped, a gap */
    CHECK_EQ_U64(out[0], 1);
    CHECK_EQ_U64(out[8], 9);

    c = mono_cfg(5, 0, 1, 0);
    n = draw_from(&c, 0, 100, out, 100);
    CHECK_EQ_U64(n, 19); /* 5, 10, ..., 95 */
    CHECK_EQ_U64(out[0], 5);
    c = mono_cfg(5, 3, 1, 0); /* a remainder > 0 was never at 0: 3 stays first */
    n = draw_from(&c, 0, 100, out, 100);
    CHECK_EQ_U64(out[0], 3);
    CHECK_EQ_U64(n, 20);

    /* Random gaps: whatever the first gap, nothing at 0. */
    c = mono_cfg(4, 0, 3, 0);
    for (uint64_t seed = 0; seed < 200; seed++) {
        struct gen_state st = {0};
        struct rng r;
        rng_seed(&r, seed);
        CHECK(gen_add_lease(&st, 0, 1000) == 0);
        n = gen_draw(&c, &st, &r, out, 10);
        CHECK(n == 10 && out[0] >= 4 && out[0] % 4 == 0);
    }

    /* Only 0 fits in the lease: nothing is drawn, the next lease is needed. */
    c = mono_cfg(1, 0, 1, 0);
    CHECK_EQ_U64(draw_from(&c, 0, 1, out, 10), 0);

    /* Trend: the first block starts at 1 (delta 1) or at delta (remainder 0). */
    c = mono_cfg(1, 0, 1, 0);
    c.type = APP_TREND;
    c.step = 10;
    n = draw_from(&c, 0, 21, out, 30);
    CHECK_EQ_U64(n, 20); /* {1..10} {11..20}; a third block does not fit */
    lo_seen = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        lo_seen = out[i] < lo_seen ? out[i] : lo_seen;
    CHECK_EQ_U64(lo_seen, 1);
    c.delta = 4;
    n = draw_from(&c, 0, 1000, out, 10);
    CHECK_EQ_U64(n, 10);
    lo_seen = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        lo_seen = out[i] < lo_seen ? out[i] : lo_seen;
    CHECK_EQ_U64(lo_seen, 4);

    /* A lease of app_span_for(count) from 0 still holds count IDs. */
    c = mono_cfg(7, 0, 1, 0);
    CHECK_EQ_U64(draw_from(&c, 0, app_span_for(&c, 1000), out, 1000), 1000);
    CHECK(out[0] == 7);
    c = mono_cfg(1, 0, 1, 0);
    c.type = APP_TREND;
    c.step = 1000;
    CHECK_EQ_U64(draw_from(&c, 0, app_span_for(&c, 4000), out, 4000), 4000);
    for (size_t i = 0; i < 4000; i++)
        CHECK(out[i] != 0);
}

static void test_fmt_parse(void)
{
    char buf[21];
    uint64_t v;
    const uint64_t cases[] = {0, 9, 10, 1234567890123ULL, (uint64_t)INT64_MAX, UINT64_MAX};

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = u64_fmt(cases[i], buf);
        CHECK(u64_parse(buf, n, &v) == 0);
        CHECK_EQ_U64(v, cases[i]);
    }
    /* every digit count, at both ends, against printf */
    for (uint64_t p10 = 1, k = 0; k < 20; k++, p10 *= 10) {
        const uint64_t vs[3] = {p10 - 1, p10, p10 + 7};
        for (int j = 0; j < 3; j++) {
            char want[32];
            int wn = snprintf(want, sizeof(want), "%" PRIu64, vs[j]);
            size_t n = u64_fmt(vs[j], buf);
            CHECK(n == (size_t)wn && memcmp(buf, want, n) == 0);
        }
    }
    CHECK_EQ_U64(u64_fmt(UINT64_MAX, buf), 20);
    CHECK(memcmp(buf, "18446744073709551615", 20) == 0);
    CHECK(u64_parse("18446744073709551616", 20, &v) == -1);
    CHECK(u64_parse("", 0, &v) == -1);
    CHECK(u64_parse("12a", 3, &v) == -1);
    CHECK(u64_parse("-1", 2, &v) == -1);
}

static void test_resp_rpush(void)
{
    const uint64_t ids[] = {0, 42, UINT64_MAX};
    const char want[] = "*5\r\n$5\r\nRPUSH\r\n$11\r\nidpool:{a}p\r\n$1\r\n0\r\n$2\r\n42\r\n"
                        "$20\r\n18446744073709551615\r\n";
    char buf[RESP_RPUSH_MAX(11, 3)];
    size_t n = resp_rpush(buf, "idpool:{a}p", 11, ids, 3);

    CHECK_EQ_U64(n, sizeof(want) - 1);
    CHECK(memcmp(buf, want, n) == 0);
    /* no IDs: still a well-formed command (Redis rejects it, nothing else does) */
    n = resp_rpush(buf, "k", 1, ids, 0);
    CHECK(n == 22 && memcmp(buf, "*2\r\n$5\r\nRPUSH\r\n$1\r\nk\r\n", 22) == 0);
}

int main(void)
{
    RUN(test_rng_bounds_and_spread);
    RUN(test_rng_seeds);
    RUN(test_monotonic_gaps_and_remainder);
    RUN(test_monotonic_rolls_over_and_runs_out);
    RUN(test_trend_blocks);
    RUN(test_near_id_space_end);
    RUN(test_never_zero);
    RUN(test_fmt_parse);
    RUN(test_resp_rpush);
    return unit_done();
}
