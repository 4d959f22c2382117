/*
 * Unit tests of idspace.c: where the ID lattices of two applications of one
 * shared ID space meet (CRT), checked against brute force on small values
 * and on exact cases near 2^63 and 2^64; and the static check of two rows.
 */
#include "app.h"
#include "idspace.h"
#include "unit.h"

#define TOP ((uint64_t)INT64_MAX) /* 2^63 - 1 */

/* The first common ID by brute force (never 0: no ID is), or UINT64_MAX. */
static uint64_t brute(uint64_t d1, uint64_t r1, uint64_t d2, uint64_t r2, uint64_t lo, uint64_t hi)
{
    for (uint64_t x = lo ? lo : 1; x < hi; x++)
        if (x % d1 == r1 && x % d2 == r2)
            return x;
    return UINT64_MAX;
}

static uint64_t first(uint64_t d1, uint64_t r1, uint64_t d2, uint64_t r2, uint64_t lo, uint64_t hi)
{
    uint64_t x = 0;

    return idspace_first_common(d1, r1, d2, r2, lo, hi, &x) ? x : UINT64_MAX;
}

static void test_small_exhaustive(void)
{
    for (uint64_t d1 = 1; d1 <= 12; d1++)
        for (uint64_t d2 = 1; d2 <= 12; d2++)
            for (uint64_t r1 = 0; r1 < d1; r1++)
                for (uint64_t r2 = 0; r2 < d2; r2++)
                    for (uint64_t lo = 0; lo < 40; lo += 7) {
                        uint64_t hi = lo + 30, want = brute(d1, r1, d2, r2, lo, hi);
                        CHECK_EQ_U64(first(d1, r1, d2, r2, lo, hi), want);
                        CHECK(idspace_lattices_meet(d1, r1, d2, r2) ==
                              (brute(d1, r1, d2, r2, 1, d1 * d2 + 1) != UINT64_MAX));
                    }
}

static void test_cases(void)
{
    /* delta 2: remainders 0 and 1 never meet, wherever */
    CHECK(!idspace_lattices_meet(2, 0, 2, 1));
    CHECK_EQ_U64(first(2, 0, 2, 1, 0, TOP), UINT64_MAX);
    /* delta 2 r0 and delta 3 r0 meet at the multiples of 6 */
    CHECK(idspace_lattices_meet(2, 0, 3, 0));
    CHECK_EQ_U64(first(2, 0, 3, 0, 1, 100), 6);
    CHECK_EQ_U64(first(2, 0, 3, 0, 7, 100), 12);
    CHECK_EQ_U64(first(2, 0, 3, 0, 7, 12), UINT64_MAX); /* hi is exclusive */
    CHECK_EQ_U64(first(2, 0, 3, 0, 12, 13), 12);        /* lo is inclusive */
    /* delta 4 r1 and delta 6 r3: gcd 2, both odd: meet at 9 (mod 12) */
    CHECK_EQ_U64(first(4, 1, 6, 3, 0, 100), 9);
    CHECK_EQ_U64(first(4, 1, 6, 3, 10, 100), 21);
    /* delta 4 r1 and delta 6 r2: gcd 2, odd vs even: never */
    CHECK(!idspace_lattices_meet(4, 1, 6, 2));
    /* the same lattice meets everywhere; delta 1 meets every lattice */
    CHECK_EQ_U64(first(5, 3, 5, 3, 100, 200), 103);
    CHECK_EQ_U64(first(1, 0, 7, 6, 100, 200), 104);
    CHECK_EQ_U64(first(7, 6, 1, 0, 100, 200), 104);
    /* empty or reversed ranges, and bad arguments */
    CHECK_EQ_U64(first(1, 0, 1, 0, 5, 5), UINT64_MAX);
    CHECK_EQ_U64(first(1, 0, 1, 0, 6, 5), UINT64_MAX);
    CHECK(!idspace_lattices_meet(0, 0, 1, 0));
    CHECK(!idspace_lattices_meet(2, 2, 2, 0)); /* remainder not below delta */
}

/* Near the top of the ID space: no wrap, and 128-bit products exact. */
static void test_large(void)
{
    uint64_t p = 4294967291ULL, q = 4294967279ULL; /* the largest primes below 2^32 */
    uint64_t lcm = p * q;                          /* about 2^64 - 2^34: overflows int64 */

    /* coprime deltas of 2^32 scale: one common ID below 2^64, the CRT solution */
    {
        uint64_t x = first(p, 5, q, 7, 0, UINT64_MAX);
        CHECK(x != UINT64_MAX);
        CHECK_EQ_U64(x % p, 5);
        CHECK_EQ_U64(x % q, 7);
        CHECK(x < lcm);
    }
    /* the one common ID of (p, 0) and (q, 0) in [1, 2^64) is lcm: above 2^63 */
    CHECK_EQ_U64(first(p, 0, q, 0, 1, TOP), UINT64_MAX);
    CHECK_EQ_U64(first(p, 0, q, 0, 1, UINT64_MAX), lcm);
    /* a lo near 2^63: rounding up to the next multiple of lcm would overflow 64 bits */
    CHECK_EQ_U64(first(p, 0, q, 0, TOP - 10, TOP), UINT64_MAX);
    /* delta 2^32, the last IDs below 2^63 */
    CHECK_EQ_U64(first(4294967296ULL, 4294967295ULL, 1, 0, TOP - 4294967295ULL, TOP + 1), TOP);
    CHECK_EQ_U64(first(4294967296ULL, 4294967295ULL, 1, 0, TOP - 4294967296ULL, TOP),
                 TOP - 4294967296ULL);
    CHECK_EQ_U64(first(2, 1, 2, 1, TOP - 1, TOP + 1), TOP);
    CHECK_EQ_U64(first(2, 0, 3, 0, TOP - 100, TOP), (TOP - 100) / 6 * 6 + 6);
    CHECK_EQ_U64(first(2, 0, 2, 1, TOP - 100, TOP), UINT64_MAX);
}

static struct app_cfg row(int64_t id, const char *space, uint64_t d, uint64_t r, uint64_t start,
                          uint64_t cur)
{
    struct app_cfg c;

    memset(&c, 0, sizeof(c));
    c.id = id;
    snprintf(c.key, sizeof(c.key), "app%" PRId64, id);
    snprintf(c.id_space, sizeof(c.id_space), "%s", space);
    c.delta = d;
    c.remainder = r;
    c.start_offset = start;
    c.current_offset = cur;
    return c;
}

static void test_rows(void)
{
    struct app_cfg a = row(1, "orders", 2, 0, 1, 5001), b = row(2, "orders", 2, 1, 1, 3001);
    uint64_t x = 0;

    CHECK(!idspace_rows_meet(&a, &b, &x)); /* r0 and r1: never */
    b.remainder = 0;
    CHECK(idspace_rows_meet(&a, &b, &x) && x == 2); /* ID 0 is never used: from 1 */
    CHECK(idspace_rows_meet(&b, &a, &x) && x == 2);
    /* the same row, or their own spaces: nothing to check */
    CHECK(!idspace_rows_meet(&a, &a, &x));
    snprintf(a.id_space, sizeof(a.id_space), "%s", "");
    snprintf(b.id_space, sizeof(b.id_space), "%s", "");
    CHECK(!idspace_rows_meet(&a, &b, &x));
    snprintf(a.id_space, sizeof(a.id_space), "%s", "orders");
    snprintf(b.id_space, sizeof(b.id_space), "%s", "other");
    CHECK(!idspace_rows_meet(&a, &b, &x));
    /* one space, one lattice, used ranges apart: fine until a lease would meet */
    snprintf(b.id_space, sizeof(b.id_space), "%s", "orders");
    b.start_offset = 1000000;
    b.current_offset = 1002000;
    CHECK(!idspace_rows_meet(&a, &b, &x));
    /* a row that never leased has used nothing */
    b.start_offset = 10;
    b.current_offset = 0;
    CHECK(!idspace_rows_meet(&a, &b, &x));
    /* overlapping from b's start: the first even ID at or above it */
    b.start_offset = 4001;
    b.current_offset = 6000;
    CHECK(idspace_rows_meet(&a, &b, &x) && x == 4002);
}

int main(void)
{
    RUN(test_small_exhaustive);
    RUN(test_cases);
    RUN(test_large);
    RUN(test_rows);
    return unit_done();
}
