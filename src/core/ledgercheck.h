/*
 * ledgercheck — the arithmetic of idpoolctl verify: which IDs a lease of
 * the ledger (application_lease) can have handed out, whether two leases
 * can share an ID, and a sweep over one application's leases (of every
 * environment, sorted by lo) that finds every pair that does. Pure: no I/O,
 * unit-tested without servers (test/unit/test_ledgercheck.c).
 *
 * A lease [lo, hi) taken on the lattice (delta, remainder, start_offset)
 * can hold exactly the IDs x with max(lo, start_offset, 1) <= x < hi and
 * x % delta == remainder (gen.c: never below start_offset, never 0). Two
 * such sets meet iff the ranges overlap and x = r1 (mod d1), x = r2 (mod d2)
 * has a solution there: r1 = r2 (mod gcd(d1, d2)), the first one found by
 * the Chinese remainder theorem in 128-bit arithmetic (lcm(d1, d2) may pass
 * 2^64).
 */
#ifndef IDPOOL_LEDGERCHECK_H
#define IDPOOL_LEDGERCHECK_H

#include <stddef.h>
#include <stdint.h>

/* The IDs a lease may hold: x % delta == remainder, x >= start (and >= 1). */
struct lc_lattice {
    int known;          /* 0: recorded before the ledger had the columns (NULL) */
    uint64_t delta;     /* >= 1 when valid */
    uint64_t remainder; /* < delta when valid */
    uint64_t start;     /* start_offset */
};

/* One row of application_lease, as verify reads it. */
struct lc_lease {
    int env;               /* which environment's ledger (0, 1, ...) */
    int64_t id;            /* application_lease.id */
    int64_t app_id;        /* application_id */
    int64_t lo, hi;        /* [lo, hi), as stored (signed columns) */
    struct lc_lattice lat; /* the lattice it was taken on */
    char instance[256];    /* the idpoold that took it */
    char created[32];      /* created_at, as MySQL prints it */
};

/*
 * The first ID at or above `from` that is on lattice l, or -1 when it does
 * not exist below 2^64 (*out untouched). l must be valid (delta >= 1,
 * remainder < delta).
 */
int lc_align(const struct lc_lattice *l, uint64_t from, uint64_t *out)
    __attribute__((warn_unused_result));

/* 1 when the valid lattices a and b have an ID in common at all (start aside). */
int lc_meet(const struct lc_lattice *a, const struct lc_lattice *b);

/*
 * The first ID x with from <= x < to that is on both lattices a and b (an
 * unknown lattice counts as every ID, start 0), into *out: 0, or -1 when
 * there is none. Both must be valid.
 */
int lc_common(const struct lc_lattice *a, const struct lc_lattice *b, uint64_t from, uint64_t to,
              uint64_t *out) __attribute__((warn_unused_result));

/* What is wrong with one lease on its own. */
enum lc_bad {
    LC_GOOD = 0,
    LC_BAD_RANGE,     /* lo < 0 or hi <= lo */
    LC_BAD_DELTA,     /* delta < 1 */
    LC_BAD_REMAINDER, /* remainder >= delta (or < 0) */
    LC_BAD_START,     /* lo < start_offset (or start_offset < 0) */
};

/* The lease's fault, LC_GOOD when none; a short phrase for each (static). */
enum lc_bad lc_lease_bad(const struct lc_lease *l);
const char *lc_bad_text(enum lc_bad b);

/*
 * Read a lattice from the three columns' text (NULL: SQL NULL). All NULL is
 * unknown; a negative value is kept as a huge one, which lc_lease_bad then
 * names. 0, or -1 when a value is not a decimal integer.
 */
int lc_lattice_parse(struct lc_lattice *l, const char *delta, const char *remainder,
                     const char *start) __attribute__((warn_unused_result));

/* Two leases that may have handed out one ID. */
enum lc_kind {
    LC_OVERLAP, /* one environment: the ranges overlap (the ledger must never allow it) */
    LC_SHARED,  /* two environments: the ranges overlap and the lattices share an ID */
};

struct lc_conflict {
    enum lc_kind kind;
    const struct lc_lease *a, *b; /* a.lo <= b.lo; valid during the callback only */
    int has_first;                /* 0: the ranges overlap but no ID is on both lattices */
    uint64_t first;               /* the first ID both leases may hold */
};

typedef void lc_conflict_fn(void *arg, const struct lc_conflict *c);

/*
 * The sweep over one application's leases of every environment, fed in
 * order of lo: keeps the leases whose range reaches past the last lo (the
 * active window; memory is bounded by it, not by the ledger) and compares
 * each new lease with them.
 */
struct lc_sweep {
    struct lc_lease *act; /* active window (heap) */
    size_t nact, cap;
    lc_conflict_fn *fn;
    void *arg;
    uint64_t pairs_unchecked; /* leases of two environments overlap, a lattice unknown */
};

void lc_sweep_init(struct lc_sweep *s, lc_conflict_fn *fn, void *arg);
/* Start another application (or another environment's unkeyed leases). */
void lc_sweep_reset(struct lc_sweep *s);
/*
 * The next lease (lo >= every lo fed since the reset; leases failing
 * lc_lease_bad are the caller's to report and are not fed). Calls fn for
 * each conflict with a lease of the window. 0, or -1 out of memory.
 */
int lc_sweep_add(struct lc_sweep *s, const struct lc_lease *l) __attribute__((warn_unused_result));
void lc_sweep_free(struct lc_sweep *s);

/*
 * The IDs of one pool (one application in one environment), sorted, and
 * which of them a lease of theirs covers (on its lattice).
 */
struct lc_pool {
    uint64_t *ids;      /* sorted ascending (heap) */
    unsigned char *hit; /* hit[i]: ids[i] is in a lease (heap) */
    size_t n;
};

/* Take ids[n] (heap, owned from now on), sort them. 0, or -1 out of memory. */
int lc_pool_set(struct lc_pool *p, uint64_t *ids, size_t n) __attribute__((warn_unused_result));
/* Mark the IDs lease l may hold (a valid lease). */
void lc_pool_cover(struct lc_pool *p, const struct lc_lease *l);
void lc_pool_free(struct lc_pool *p);

#endif
