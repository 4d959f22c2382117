/*
 * Unit tests of idpoolctl verify's arithmetic (ledgercheck.c): the first ID
 * of a lattice, the first ID two lattices share (CRT, near 2^63 and with an
 * lcm past 2^64), what is wrong with a lease, the sweep over leases sorted
 * by lo, and the pool's IDs covered by leases. Each result is checked
 * against a brute force where one is feasible.
 */
#include "ledgercheck.h"
#include "unit.h"

#define MAX63 ((uint64_t)INT64_MAX)

static struct lc_lattice lat(uint64_t d, uint64_t r, uint64_t s)
{
    struct lc_lattice l = {1, d, r, s};
    return l;
}

static struct lc_lease lease(int env, int64_t id, int64_t lo, int64_t hi, struct lc_lattice l)
{
    struct lc_lease x;

    memset(&x, 0, sizeof(x));
    x.env = env;
    x.id = id;
    x.lo = lo;
    x.hi = hi;
    x.lat = l;
    snprintf(x.instance, sizeof(x.instance), "i%d", env);
    return x;
}

static void test_align(void)
{
    struct lc_lattice l = lat(7, 3, 0);
    uint64_t x = 0;

    CHECK(lc_align(&l, 0, &x) == 0 && x == 3);
    CHECK(lc_align(&l, 3, &x) == 0 && x == 3);
    CHECK(lc_align(&l, 4, &x) == 0 && x == 10);
    l = lat(1, 0, 0);
    CHECK(lc_align(&l, UINT64_MAX, &x) == 0 && x == UINT64_MAX);
    l = lat(10, 9, 0);
    CHECK(lc_align(&l, UINT64_MAX, &x) == -1); /* 18446744073709551619 > 2^64-1 */
    l = lat(MAX63, MAX63 - 1, 0);
    CHECK(lc_align(&l, MAX63, &x) == 0 && x == 2 * MAX63 - 1);
}

/* The first common ID by brute force over [from, to). */
static int brute(const struct lc_lattice *a, const struct lc_lattice *b, uint64_t from, uint64_t to,
                 uint64_t *out)
{
    for (uint64_t x = from; x < to; x++)
        if (x >= 1 && x >= a->start && x >= b->start && x % a->delta == a->remainder &&
            x % b->delta == b->remainder) {
            *out = x;
            return 0;
        }
    return -1;
}

static void test_common_brute(void)
{
    int bad = 0;

    for (uint64_t da = 1; da <= 12; da++)
        for (uint64_t db = 1; db <= 12; db++)
            for (uint64_t ra = 0; ra < da; ra++)
                for (uint64_t rb = 0; rb < db; rb++)
                    for (uint64_t from = 0; from < 9; from += 4) {
                        struct lc_lattice a = lat(da, ra, 0), b = lat(db, rb, from % 3);
                        uint64_t x = 0, y = 0;
                        int g = lc_common(&a, &b, from, 200, &x), w = brute(&a, &b, from, 200, &y);

                        if (g != w || (g == 0 && x != y))
                            bad++;
                    }
    CHECK(bad == 0);
}

static void test_common(void)
{
    struct lc_lattice a = lat(2, 0, 0), b = lat(3, 0, 0), c = lat(2, 1, 0);
    struct lc_lattice unknown = {0, 0, 0, 0};
    uint64_t x = 0;

    CHECK(lc_common(&a, &b, 0, 100, &x) == 0 && x == 6); /* never 0 */
    CHECK(lc_common(&a, &b, 7, 100, &x) == 0 && x == 12);
    CHECK(lc_common(&a, &b, 7, 12, &x) == -1);         /* 12 is past the overlap */
    CHECK(lc_common(&a, &c, 0, UINT64_MAX, &x) == -1); /* distinct remainders of one delta */
    CHECK(lc_common(&a, &a, 5, 6, &x) == -1);
    CHECK(lc_common(&a, &a, 5, 7, &x) == 0 && x == 6);
    CHECK(lc_common(&unknown, &c, 10, 20, &x) == 0 && x == 11); /* unknown: every ID */
    /* start_offset of either lattice bounds the IDs from below. */
    b = lat(3, 0, 100);
    CHECK(lc_common(&a, &b, 0, 1000, &x) == 0 && x == 102);
    /* Lattices of coprime deltas near 2^63: their lcm passes 2^64. */
    a = lat(MAX63, 5, 0);
    b = lat(MAX63 - 1, 5, 0);
    CHECK(lc_common(&a, &b, 1, UINT64_MAX, &x) == 0 && x == 5);
    CHECK(lc_common(&a, &b, 6, UINT64_MAX, &x) == -1); /* next is 5 + lcm, past 2^64 */
    a = lat(MAX63, MAX63 - 1, 0);
    b = lat(2, 0, 0);
    /* x = MAX63 - 1 (mod MAX63), even: MAX63 - 1 itself. */
    CHECK(lc_common(&a, &b, 1, MAX63, &x) == 0 && x == MAX63 - 1);
    b = lat(2, 1, 0);
    CHECK(lc_common(&a, &b, 1, MAX63, &x) == -1);
    CHECK(lc_common(&a, &b, 1, UINT64_MAX, &x) == 0 && x == 2 * MAX63 - 1);
    /* Same delta and remainder just below 2^63. */
    a = lat(1000, 807, 0);
    CHECK(lc_common(&a, &a, MAX63 - 1000, MAX63, &x) == 0 && x == MAX63 - 1000);
    CHECK(x % 1000 == 807);
    /* A big even delta with a small odd one, crossing the gcd rule. */
    a = lat(1ULL << 62, 3, 0);
    b = lat(6, 3, 0);
    CHECK(lc_common(&a, &b, 1, MAX63, &x) == 0 && x == 3);
    CHECK(lc_common(&a, &b, 4, MAX63, &x) == -1); /* the next one, 3 + lcm, passes 2^63 */
    CHECK(lc_common(&a, &b, 4, UINT64_MAX, &x) == 0 && x == 3 * (1ULL << 62) + 3);
    CHECK(x % 6 == 3 && x % (1ULL << 62) == 3);
}

static void test_bad(void)
{
    struct lc_lease l = lease(0, 1, 10, 20, lat(2, 0, 0));
    struct lc_lattice p;

    CHECK(lc_lease_bad(&l) == LC_GOOD);
    l.hi = 10;
    CHECK(lc_lease_bad(&l) == LC_BAD_RANGE);
    l = lease(0, 1, -5, 20, lat(2, 0, 0));
    CHECK(lc_lease_bad(&l) == LC_BAD_RANGE);
    l = lease(0, 1, 10, 20, lat(0, 0, 0));
    CHECK(lc_lease_bad(&l) == LC_BAD_DELTA);
    l = lease(0, 1, 10, 20, lat(2, 2, 0));
    CHECK(lc_lease_bad(&l) == LC_BAD_REMAINDER);
    l = lease(0, 1, 10, 20, lat(2, 0, 11));
    CHECK(lc_lease_bad(&l) == LC_BAD_START);
    CHECK(lc_lattice_parse(&p, NULL, NULL, NULL) == 0 && !p.known);
    l.lat = p;
    CHECK(lc_lease_bad(&l) == LC_GOOD); /* unknown: not checked */
    CHECK(lc_lattice_parse(&p, "3", "1", "1") == 0 && p.known && p.delta == 3);
    CHECK(lc_lattice_parse(&p, "-3", "1", "1") == 0);
    l.lat = p;
    CHECK(lc_lease_bad(&l) == LC_BAD_DELTA);
    CHECK(lc_lattice_parse(&p, "2", "-1", "1") == 0);
    l.lat = p;
    CHECK(lc_lease_bad(&l) == LC_BAD_REMAINDER);
    CHECK(lc_lattice_parse(&p, "2x", "1", "1") == -1);
    CHECK(strcmp(lc_bad_text(LC_BAD_START), "lo below start_offset") == 0);
}

struct seen {
    int n, kinds[8];
    int64_t a[8], b[8];
    uint64_t first[8];
    int has[8];
};

static void on_conflict(void *arg, const struct lc_conflict *c)
{
    struct seen *s = arg;

    if (s->n < 8) {
        s->kinds[s->n] = c->kind;
        s->a[s->n] = c->a->id;
        s->b[s->n] = c->b->id;
        s->first[s->n] = c->first;
        s->has[s->n] = c->has_first;
    }
    s->n++;
}

static void test_sweep(void)
{
    struct lc_sweep sw;
    struct seen s;
    struct lc_lease ls[] = {
        lease(0, 1, 1, 100, lat(2, 0, 1)),     lease(1, 2, 1, 100, lat(2, 1, 1)),
        lease(0, 3, 100, 200, lat(2, 0, 1)),   lease(1, 4, 150, 300, lat(3, 0, 1)),
        lease(0, 5, 190, 250, lat(2, 1, 1)),   lease(0, 6, 1000, 2000, lat(2, 0, 1)),
        lease(1, 7, 1999, 3000, lat(2, 0, 1)),
    };

    memset(&s, 0, sizeof(s));
    lc_sweep_init(&sw, on_conflict, &s);
    for (size_t i = 0; i < sizeof(ls) / sizeof(ls[0]); i++)
        CHECK(lc_sweep_add(&sw, &ls[i]) == 0);
    CHECK(s.n == 3);
    /* 4 (delta 3) meets 3 (delta 2, r 0) in [150, 200): first multiple of 6 is 150. */
    CHECK(s.kinds[0] == LC_SHARED && s.a[0] == 3 && s.b[0] == 4 && s.first[0] == 150);
    /* 5 overlaps 3 in one environment: the ranges alone are a conflict (lattices disjoint). */
    CHECK(s.kinds[1] == LC_OVERLAP && s.a[1] == 3 && s.b[1] == 5 && !s.has[1]);
    /* 5 (r 1 of 2) meets 4 (r 0 of 3) in [190, 250): x = 3 (mod 6), first 195. */
    CHECK(s.kinds[2] == LC_SHARED && s.a[2] == 4 && s.b[2] == 5 && s.first[2] == 195);
    /* 1 and 2: distinct remainders; 6 and 7 overlap on [1999, 2000), odd: nothing shared. */
    CHECK(sw.pairs_unchecked == 0);
    CHECK(sw.nact <= 3); /* the window, not the ledger */

    /* An unknown lattice across environments is counted, not judged. */
    lc_sweep_reset(&sw);
    memset(&s, 0, sizeof(s));
    {
        struct lc_lattice unk = {0, 0, 0, 0};
        struct lc_lease x = lease(0, 10, 1, 100, unk), y = lease(1, 11, 50, 60, lat(2, 1, 0));
        struct lc_lease z = lease(0, 12, 99, 120, lat(2, 1, 0));

        CHECK(lc_sweep_add(&sw, &x) == 0 && lc_sweep_add(&sw, &y) == 0);
        CHECK(s.n == 0 && sw.pairs_unchecked == 1);
        /* One environment: unknown counts as every ID; first in both is 99. */
        CHECK(lc_sweep_add(&sw, &z) == 0);
        CHECK(s.n == 1 && s.kinds[0] == LC_OVERLAP && s.has[0] && s.first[0] == 99);
    }
    lc_sweep_free(&sw);
}

static void test_sweep_first_2000(void)
{
    struct lc_sweep sw;
    struct seen s;
    struct lc_lease a = lease(0, 1, 1000, 2001, lat(2, 0, 1));
    struct lc_lease b = lease(1, 2, 1999, 3000, lat(2, 0, 1));

    memset(&s, 0, sizeof(s));
    lc_sweep_init(&sw, on_conflict, &s);
    CHECK(lc_sweep_add(&sw, &a) == 0 && lc_sweep_add(&sw, &b) == 0);
    CHECK(s.n == 1 && s.first[0] == 2000);
    /* Touching ranges do not overlap. */
    lc_sweep_reset(&sw);
    memset(&s, 0, sizeof(s));
    a = lease(0, 1, 1000, 2000, lat(1, 0, 0));
    b = lease(0, 2, 2000, 3000, lat(1, 0, 0));
    CHECK(lc_sweep_add(&sw, &a) == 0 && lc_sweep_add(&sw, &b) == 0);
    CHECK(s.n == 0);
    lc_sweep_free(&sw);
}

static void test_pool(void)
{
    struct lc_pool p;
    uint64_t *ids = malloc(6 * sizeof(*ids));
    struct lc_lease a = lease(0, 1, 0, 10, lat(2, 0, 4)), b = lease(0, 2, 20, 30, lat(1, 0, 0));

    memset(&p, 0, sizeof(p));
    ids[0] = 25;
    ids[1] = 2; /* below start_offset 4 */
    ids[2] = 6;
    ids[3] = 7;  /* off the lattice */
    ids[4] = 10; /* hi is exclusive */
    ids[5] = 0;
    CHECK(lc_pool_set(&p, ids, 6) == 0);
    lc_pool_cover(&p, &a);
    lc_pool_cover(&p, &b);
    CHECK(p.ids[0] == 0 && !p.hit[0]); /* 0 never */
    CHECK(p.ids[1] == 2 && !p.hit[1]);
    CHECK(p.ids[2] == 6 && p.hit[2]);
    CHECK(p.ids[3] == 7 && !p.hit[3]);
    CHECK(p.ids[4] == 10 && !p.hit[4]);
    CHECK(p.ids[5] == 25 && p.hit[5]);
    lc_pool_free(&p);
}

int main(void)
{
    RUN(test_align);
    RUN(test_common_brute);
    RUN(test_common);
    RUN(test_bad);
    RUN(test_sweep);
    RUN(test_sweep_first_2000);
    RUN(test_pool);
    return unit_done();
}
