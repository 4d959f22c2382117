/*
 * check_leases — L on the lease side: the leases read (--leases), sorted,
 * counted when one overlaps an earlier one and merged for the membership
 * walk (check_unique.c); the leased IDs never popped; --gap between
 * neighbours inside one lease and --gap-all; --current-offset on lease ends.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int cmp_range(const void *pa, const void *pb)
{
    const struct range *a = pa, *b = pb;
    if (a->lo != b->lo)
        return a->lo < b->lo ? -1 : 1;
    return (a->hi > b->hi) - (a->hi < b->hi);
}

/* Reads --leases: lines "lo hi" (further columns ignored), [lo, hi). */
int leases_load(struct check *c)
{
    char *line = NULL;
    size_t len = 0, cap = 0, lineno = 0;
    int rc = -1;
    FILE *f = open_text(c->o.leases);

    if (!f)
        return -1;
    while (getline(&line, &len, f) > 0) {
        struct range rg;
        lineno++;
        if (skip_line(line))
            continue;
        if (two_numbers(line, &rg.lo, &rg.hi) < 0 || rg.lo > rg.hi) {
            fprintf(stderr, "idpool-check: %s:%zu: expected \"lo hi\" with lo <= hi\n", c->o.leases,
                    lineno);
            goto out;
        }
        if (grow(&c->leases, &cap, c->nleases + 1, sizeof *c->leases) < 0)
            goto out;
        c->leases[c->nleases++] = rg;
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

/*
 * L, lease side: sorts the leases, counts those overlapping an earlier one
 * and builds their union for the membership walk.
 */
int leases_check(struct check *c)
{
    struct result *r = &c->r;
    uint64_t reach = 0;

    r->leases = c->nleases;
    qsort(c->leases, c->nleases, sizeof *c->leases, cmp_range);
    c->merged = calloc(c->nleases ? c->nleases : 1, sizeof *c->merged);
    if (!c->merged)
        return -1;
    for (size_t i = 0; i < c->nleases; i++) {
        struct range rg = c->leases[i];
        if (rg.lo == rg.hi)
            continue;
        if (i > 0 && rg.lo < reach) {
            r->lease_overlaps++;
            add_example(r->ex_lease, &r->n_ex_lease,
                        "lease [%" PRIu64 ", %" PRIu64
                        ") overlaps an earlier one reaching %" PRIu64,
                        rg.lo, rg.hi, reach);
        }
        if (rg.hi > reach)
            reach = rg.hi;
        if (c->o.has_cur && rg.hi > c->o.cur) {
            r->above_offset++;
            add_example(r->ex_more, &r->n_ex_more,
                        "lease [%" PRIu64 ", %" PRIu64 ") ends above current_offset %" PRIu64,
                        rg.lo, rg.hi, c->o.cur);
        }
        if (c->nmerged && rg.lo <= c->merged[c->nmerged - 1].hi) {
            if (rg.hi > c->merged[c->nmerged - 1].hi)
                c->merged[c->nmerged - 1].hi = rg.hi;
        } else {
            c->merged[c->nmerged++] = rg;
        }
    }
    return 0;
}

/* Number of x in [0, n) with x % delta == remainder. */
static uint64_t valid_below(uint64_t n, uint64_t delta, uint64_t rem)
{
    return n / delta + (n % delta > rem ? 1 : 0);
}

/* The index of the lease holding id, or SIZE_MAX; *j moves up with id. */
size_t lease_of(const struct check *c, size_t *j, uint64_t id)
{
    while (*j + 1 < c->nleases && c->leases[*j + 1].lo <= id)
        (*j)++;
    if (*j < c->nleases && c->leases[*j].lo <= id && id < c->leases[*j].hi)
        return *j;
    return SIZE_MAX;
}

/*
 * --gap: distinct sorted neighbours prev < id. Inside one lease the
 * generator stepped from prev to id by k x delta with k drawn from
 * [1, increment_max]: k must lie in [gap_lo, gap_hi].
 */
void gap_check(struct check *c, uint64_t prev, size_t lease_prev, uint64_t id, size_t lease)
{
    const struct opts *o = &c->o;
    struct result *r = &c->r;
    uint64_t d = id - prev, k = d / o->delta;

    if (lease == SIZE_MAX || lease != lease_prev)
        return;
    if (d % o->delta || k < o->gap_lo || k > o->gap_hi) {
        r->bad_gaps++;
        add_example(r->ex_more, &r->n_ex_more,
                    "gap %" PRIu64 " -> %" PRIu64 " (%" PRIu64 " = %.2f x delta) outside [%" PRIu64
                    ", %" PRIu64 "] x delta inside one lease",
                    prev, id, d, (double)d / (double)o->delta, o->gap_lo, o->gap_hi);
    } else if (c->gap_seen) {
        c->gap_seen[k - o->gap_lo] = true;
    }
}

/* Valid IDs (x % delta == remainder) inside the union of the leases. */
uint64_t leases_valid(const struct check *c)
{
    const struct opts *o = &c->o;
    uint64_t valid = 0;

    for (size_t k = 0; k < c->nmerged; k++)
        valid += valid_below(c->merged[k].hi, o->delta, o->remainder) -
                 valid_below(c->merged[k].lo, o->delta, o->remainder);
    return valid;
}

/* --gap-all: counts the multiples of [gap_lo, gap_hi] never seen inside a lease. */
void gaps_missing(struct check *c)
{
    const struct opts *o = &c->o;
    struct result *r = &c->r;
    uint64_t first = 0;

    for (uint64_t k = 0; k <= o->gap_hi - o->gap_lo; k++) {
        if (c->gap_seen[k])
            continue;
        if (!r->gap_missing++)
            first = o->gap_lo + k;
    }
    if (r->gap_missing)
        add_example(r->ex_more, &r->n_ex_more,
                    "%" PRIu64 " multiples of delta in [%" PRIu64 ", %" PRIu64
                    "] never occur inside a lease, e.g. %" PRIu64,
                    r->gap_missing, o->gap_lo, o->gap_hi, first);
}
