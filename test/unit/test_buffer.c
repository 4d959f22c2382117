/* libidpool's pure parts (src/lib/buffer.c): the ring and the batch rule. */
#include <stdint.h>
#include <stdlib.h>

#include "buffer.h"
#include "text.h"
#include "unit.h"

static void test_ring(void)
{
    struct ring r = {0};
    uint64_t in[300], out[300];
    size_t n;

    for (int i = 0; i < 300; i++)
        in[i] = 1000 + (uint64_t)i;
    CHECK_EQ_U64(ring_pop(&r, out, 5), 0); /* empty */
    CHECK(ring_push(&r, in, 50) == 0);
    CHECK_EQ_U64(ring_pop(&r, out, 20), 20);
    CHECK_EQ_U64(out[0], 1000);
    CHECK_EQ_U64(out[19], 1019);
    /* wraps and grows, keeping arrival order */
    CHECK(ring_push(&r, in + 50, 250) == 0);
    CHECK_EQ_U64(r.n, 280);
    n = ring_pop(&r, out, 300);
    CHECK_EQ_U64(n, 280);
    for (size_t i = 0; i < n; i++)
        CHECK_EQ_U64(out[i], 1020 + i);
    CHECK_EQ_U64(r.n, 0);
    /* many small pushes and pops around the wrap point */
    for (int round = 0; round < 1000; round++) {
        CHECK(ring_push(&r, in, 7) == 0);
        CHECK_EQ_U64(ring_pop(&r, out, 7), 7);
        CHECK_EQ_U64(out[6], 1006);
    }
    ring_free(&r);
    CHECK(r.v == NULL && r.cap == 0);
}

static void test_batch(void)
{
    /* demand x target, clamped */
    CHECK_EQ_U64(batch_next(100, 0, 500, 100, 1000, 0), 100);    /* idle: min */
    CHECK_EQ_U64(batch_next(100, 1000, 500, 100, 1000, 0), 500); /* 1000/s x 0.5 s */
    CHECK_EQ_U64(batch_next(100, 1e9, 500, 100, 1000, 0), 1000); /* max */
    /* a caller waited: at least twice the previous one */
    CHECK_EQ_U64(batch_next(100, 0, 500, 100, 1000, 1), 200);
    CHECK_EQ_U64(batch_next(600, 0, 500, 100, 1000, 1), 1000);
    CHECK_EQ_U64(batch_next(200, 2000, 500, 100, 1000, 1), 1000); /* demand says more */
    /* the hunger doubling fades once the demand is known and callers are fed */
    CHECK_EQ_U64(batch_next(800, 400, 500, 100, 1000, 0), 200);
}

static void test_low_water(void)
{
    CHECK_EQ_U64(low_water_ids(100, 0, 0, 500), 100);          /* idle: one batch */
    CHECK_EQ_U64(low_water_ids(100, 5000, 0, 500), 5000);      /* the buffer option */
    CHECK_EQ_U64(low_water_ids(1000, 0, 500000, 500), 250000); /* 0.5 s of 500k/s: takes */
    CHECK_EQ_U64(low_water_ids(1000, 300000, 500000, 500), 300000);
    CHECK_EQ_U64(low_water_ids(1000, 0, 1e12, 500), LOW_WATER_MAX); /* capped */
    CHECK_EQ_U64(low_water_ids(1000, 0, 1000, 500), 1000);          /* below a batch */
}

static void test_rate(void)
{
    double r = rate_update(0, 1000, 1000); /* 1000 IDs in 1 s */

    CHECK(r > 999 && r < 1001);
    r = rate_update(r, 0, 100); /* a quiet 0.1 s weighs 10 % */
    CHECK(r > 899 && r < 901);
    CHECK(rate_update(r, 5, 0) == r); /* no time passed: unchanged */
    r = rate_update(r, 0, 5000);      /* 5 s of nothing: 0 */
    CHECK(r == 0);
}

static void test_retry_hint(void)
{
    CHECK_EQ_U64((uint64_t)text_retry_ms("IDPOOL_RATE max_size_per_second 20 reached (17 granted "
                                         "this second); retry in 636 ms",
                                         1000),
                 636);
    CHECK_EQ_U64((uint64_t)text_retry_ms("IDPOOL_EPOCH pool not yet re-validated ...; retry in "
                                         "200 ms",
                                         5),
                 200);
    CHECK_EQ_U64((uint64_t)text_retry_ms("IDPOOL_LIMIT count 5 exceeds", 7), 7); /* none */
    CHECK_EQ_U64((uint64_t)text_retry_ms("retry in 0 ms", 7), 7);
    CHECK_EQ_U64((uint64_t)text_retry_ms("retry in 60000 ms", 7), 7);
    CHECK_EQ_U64((uint64_t)text_retry_ms("retry in soon", 7), 7);
}

int main(void)
{
    RUN(test_ring);
    RUN(test_batch);
    RUN(test_low_water);
    RUN(test_rate);
    RUN(test_retry_hint);
    return unit_done();
}
