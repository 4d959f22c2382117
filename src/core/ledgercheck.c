#include "ledgercheck.h"

#include <stdlib.h>
#include <string.h>

#include "text.h"

typedef unsigned __int128 u128;
typedef __int128 i128;

/* Every ID (an unknown lattice: nothing is known to exclude any ID). */
static const struct lc_lattice every = {1, 1, 0, 0};

static const struct lc_lattice *known_or_every(const struct lc_lattice *l)
{
    return l->known ? l : &every;
}

int lc_align(const struct lc_lattice *l, uint64_t from, uint64_t *out)
{
    u128 x = (u128)from - from % l->delta + l->remainder;

    if (x < from)
        x += l->delta;
    if (x > UINT64_MAX)
        return -1;
    *out = (uint64_t)x;
    return 0;
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The inverse of a modulo m (gcd(a, m) == 1, m >= 1), in [0, m). */
static uint64_t inverse(uint64_t a, uint64_t m)
{
    i128 r0 = m, r1 = a % m, t0 = 0, t1 = 1;

    while (r1 != 0) {
        i128 qt = r0 / r1, t;

        t = r0 - qt * r1;
        r0 = r1;
        r1 = t;
        t = t0 - qt * t1;
        t0 = t1;
        t1 = t;
    }
    t0 %= (i128)m;
    if (t0 < 0)
        t0 += m;
    return (uint64_t)t0;
}

int lc_meet(const struct lc_lattice *a, const struct lc_lattice *b)
{
    uint64_t g = gcd64(a->delta, b->delta);

    return a->remainder % g == b->remainder % g;
}

int lc_common(const struct lc_lattice *a, const struct lc_lattice *b, uint64_t from, uint64_t to,
              uint64_t *out)
{
    const struct lc_lattice *x = known_or_every(a), *y = known_or_every(b);
    uint64_t g, dy, k;
    u128 lcm, x0, first;
    i128 diff;

    if (x->start > from)
        from = x->start;
    if (y->start > from)
        from = y->start;
    if (from < 1)
        from = 1; /* ID 0 is never handed out */
    if (from >= to)
        return -1;
    if (!lc_meet(x, y))
        return -1;
    g = gcd64(x->delta, y->delta);
    /* x0 = rx + dx * k with dx * k = ry - rx (mod dy): dividing by g, k = diff * inv (mod dy/g). */
    dy = y->delta / g;
    diff = ((i128)y->remainder - (i128)x->remainder) / (i128)g;
    diff %= (i128)dy;
    if (diff < 0)
        diff += dy;
    k = (uint64_t)(((u128)diff * inverse(x->delta / g, dy)) % dy);
    x0 = (u128)x->remainder + (u128)x->delta * k; /* < dx * dy / g = lcm < 2^128 */
    lcm = (u128)x->delta * dy;
    first = x0;
    if (first < from)
        first = x0 + ((u128)from - x0 + lcm - 1) / lcm * lcm; /* < from + lcm: no wrap */
    if (first >= to)
        return -1;
    *out = (uint64_t)first;
    return 0;
}

enum lc_bad lc_lease_bad(const struct lc_lease *l)
{
    if (l->lo < 0 || l->hi <= l->lo)
        return LC_BAD_RANGE;
    if (!l->lat.known)
        return LC_GOOD;
    if (l->lat.delta < 1 || l->lat.delta > INT64_MAX)
        return LC_BAD_DELTA;
    if (l->lat.remainder >= l->lat.delta)
        return LC_BAD_REMAINDER;
    if (l->lat.start > INT64_MAX || (uint64_t)l->lo < l->lat.start)
        return LC_BAD_START;
    return LC_GOOD;
}

const char *lc_bad_text(enum lc_bad b)
{
    switch (b) {
    case LC_GOOD:
        return "good";
    case LC_BAD_RANGE:
        return "empty or negative range";
    case LC_BAD_DELTA:
        return "delta below 1";
    case LC_BAD_REMAINDER:
        return "remainder not in [0, delta)";
    case LC_BAD_START:
        return "lo below start_offset";
    }
    return "?";
}

/* A decimal int64 as uint64 (a negative one wraps to a huge value). */
static int parse_col(const char *s, uint64_t *out)
{
    long long v;

    if (!s || text_int(s, strlen(s), INT64_MIN, INT64_MAX, &v) < 0)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

int lc_lattice_parse(struct lc_lattice *l, const char *delta, const char *remainder,
                     const char *start)
{
    memset(l, 0, sizeof(*l));
    if (!delta && !remainder && !start)
        return 0;
    /* One NULL of three is not what idpoold writes: read it as 0, which lc_lease_bad names. */
    if ((delta && parse_col(delta, &l->delta) < 0) ||
        (remainder && parse_col(remainder, &l->remainder) < 0) ||
        (start && parse_col(start, &l->start) < 0))
        return -1;
    l->known = 1;
    return 0;
}

void lc_sweep_init(struct lc_sweep *s, lc_conflict_fn *fn, void *arg)
{
    memset(s, 0, sizeof(*s));
    s->fn = fn;
    s->arg = arg;
}

void lc_sweep_reset(struct lc_sweep *s)
{
    s->nact = 0;
}

/* Copy l into the window, its strings by their length only (most are short). */
static void keep(struct lc_lease *dst, const struct lc_lease *l)
{
    size_t ni = strnlen(l->instance, sizeof(l->instance) - 1);
    size_t nc = strnlen(l->created, sizeof(l->created) - 1);

    memcpy(dst, l, offsetof(struct lc_lease, instance));
    memcpy(dst->instance, l->instance, ni);
    dst->instance[ni] = '\0';
    memcpy(dst->created, l->created, nc);
    dst->created[nc] = '\0';
}

int lc_sweep_add(struct lc_sweep *s, const struct lc_lease *l)
{
    size_t keepn = 0;

    /* Leases that end at or before l starts can meet no later lease either. */
    for (size_t i = 0; i < s->nact; i++)
        if (s->act[i].hi > l->lo) {
            if (keepn != i)
                s->act[keepn] = s->act[i];
            keepn++;
        }
    s->nact = keepn;
    for (size_t i = 0; i < s->nact; i++) {
        const struct lc_lease *a = &s->act[i];
        uint64_t from = (uint64_t)l->lo, to = (uint64_t)(a->hi < l->hi ? a->hi : l->hi);
        struct lc_conflict c = {LC_OVERLAP, a, l, 0, 0};

        if (a->env == l->env) {
            /* Never two leases of one key over one range, whatever their lattices. */
            c.has_first = lc_common(&a->lat, &l->lat, from, to, &c.first) == 0;
            s->fn(s->arg, &c);
        } else if (!a->lat.known || !l->lat.known) {
            s->pairs_unchecked++;
        } else if (lc_common(&a->lat, &l->lat, from, to, &c.first) == 0) {
            c.kind = LC_SHARED;
            c.has_first = 1;
            s->fn(s->arg, &c);
        }
    }
    if (s->nact == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        struct lc_lease *n = realloc(s->act, cap * sizeof(*n));

        if (!n)
            return -1;
        s->act = n;
        s->cap = cap;
    }
    keep(&s->act[s->nact++], l);
    return 0;
}

void lc_sweep_free(struct lc_sweep *s)
{
    free(s->act);
    s->act = NULL;
    s->nact = s->cap = 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

int lc_pool_set(struct lc_pool *p, uint64_t *ids, size_t n)
{
    lc_pool_free(p);
    p->hit = calloc(n ? n : 1, 1);
    if (!p->hit) {
        free(ids);
        return -1;
    }
    qsort(ids, n, sizeof(*ids), cmp_u64);
    p->ids = ids;
    p->n = n;
    return 0;
}

void lc_pool_cover(struct lc_pool *p, const struct lc_lease *l)
{
    const struct lc_lattice *lat = known_or_every(&l->lat);
    uint64_t from = (uint64_t)l->lo, to = (uint64_t)l->hi;
    size_t lo = 0, hi = p->n;

    if (lat->start > from)
        from = lat->start;
    if (from < 1)
        from = 1;
    while (lo < hi) { /* the first ID >= from */
        size_t mid = lo + (hi - lo) / 2;
        if (p->ids[mid] < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < p->n && p->ids[i] < to; i++)
        if (p->ids[i] % lat->delta == lat->remainder)
            p->hit[i] = 1;
}

void lc_pool_free(struct lc_pool *p)
{
    free(p->ids);
    free(p->hit);
    memset(p, 0, sizeof(*p));
}
