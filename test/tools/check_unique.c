/*
 * check_unique — U over the sorted IDs: every ID popped sorted in place
 * (MSD radix sort, no second array), one walk that counts extra pops,
 * gaps and, with --leases, IDs in no lease; then the logs re-read for the
 * duplicated IDs only, to tell duplicates from exposed pops (--exposure)
 * and to find the examples' pops.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void insertion_sort(uint64_t *a, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t v = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

/*
 * In-place MSD radix sort (American flag sort), 8-bit digits from bit shift
 * down: no second array, so sorting costs no memory beyond the IDs.
 */
static void radix_sort(uint64_t *a, size_t n, int shift)
{
    size_t count[256], start[256], next[256];

    while (n > 48) {
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++)
            count[(a[i] >> shift) & 0xff]++;
        size_t sum = 0;
        int full = -1;
        for (int b = 0; b < 256; b++) {
            start[b] = next[b] = sum;
            sum += count[b];
            if (count[b] == n)
                full = b;
        }
        if (full < 0) {
            for (int b = 0; b < 256; b++) {
                size_t end = start[b] + count[b];
                while (next[b] < end) {
                    uint64_t v = a[next[b]];
                    unsigned d = (v >> shift) & 0xff;
                    while (d != (unsigned)b) {
                        uint64_t t = a[next[d]];
                        a[next[d]++] = v;
                        v = t;
                        d = (v >> shift) & 0xff;
                    }
                    a[next[b]++] = v;
                }
            }
        }
        if (shift == 0)
            return;
        if (full >= 0) { /* every key shares this digit: go to the next one */
            shift -= 8;
            continue;
        }
        for (int b = 0; b < 256; b++)
            if (count[b] > 1)
                radix_sort(a + start[b], count[b], shift - 8);
        return;
    }
    insertion_sort(a, n);
}

/* Sorts the IDs, starting at the highest byte in which they differ. */
void sort_ids(uint64_t *a, size_t n)
{
    if (n < 2)
        return;
    uint64_t mn = a[0], mx = a[0];
    for (size_t i = 1; i < n; i++) {
        if (a[i] < mn)
            mn = a[i];
        if (a[i] > mx)
            mx = a[i];
    }
    uint64_t diff = mn ^ mx;
    if (!diff)
        return;
    int top = 63 - __builtin_clzll(diff);
    radix_sort(a, n, top / 8 * 8);
}

/*
 * U, gaps and L over the sorted IDs in one walk: counts extra pops, collects
 * the duplicated IDs, counts gaps, checks each ID against the union of the
 * leases, and the options --gap and --current-offset.
 */
int walk_sorted(struct check *c)
{
    const struct opts *o = &c->o;
    struct result *r = &c->r;
    const uint64_t *a = c->ids;
    size_t n = c->nids, j = 0, cap = 0, jl = 0, lease_prev = SIZE_MAX;
    uint64_t leased_popped = 0;

    for (size_t i = 0; i < n; i++) {
        uint64_t id = a[i];
        bool repeat = i > 0 && a[i - 1] == id;

        if (repeat) {
            if (!c->ndups || c->dups[c->ndups - 1].id != id) {
                if (grow(&c->dups, &cap, c->ndups + 1, sizeof *c->dups) < 0)
                    return -1;
                c->dups[c->ndups++] = (struct dup){.id = id, .min_send = UINT64_MAX};
            }
        } else {
            r->distinct++;
            if (i > 0 && id - a[i - 1] > o->delta)
                r->gaps++;
            if (o->has_gap) {
                size_t lease = lease_of(c, &jl, id);
                if (i > 0)
                    gap_check(c, a[i - 1], lease_prev, id, lease);
                lease_prev = lease;
            }
            if (o->has_cur && id >= o->cur) {
                r->above_offset++;
                add_example(r->ex_more, &r->n_ex_more,
                            "id %" PRIu64 " is not below current_offset %" PRIu64, id, o->cur);
            }
        }
        if (o->leases) {
            while (j < c->nmerged && c->merged[j].hi <= id)
                j++;
            if (j < c->nmerged && c->merged[j].lo <= id) {
                if (!repeat && id % o->delta == o->remainder)
                    leased_popped++;
            } else {
                r->unleased++;
                if (!repeat)
                    add_example(r->ex_lease, &r->n_ex_lease, "id %" PRIu64 " is in no lease", id);
            }
        }
    }
    if (o->leases) {
        r->has_missing = true;
        r->missing_leased = leases_valid(c) - leased_popped;
    }
    if (c->gap_seen)
        gaps_missing(c);
    return 0;
}

/* The dup entry of id, or NULL. */
static struct dup *dup_find(struct check *c, uint64_t id)
{
    size_t lo = 0, hi = c->ndups;

    if (!c->ndups || id < c->dups[0].id || id > c->dups[c->ndups - 1].id)
        return NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->dups[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->ndups && c->dups[lo].id == id ? &c->dups[lo] : NULL;
}

/* Second pass: for each duplicated ID, its pops, the earliest t_send and the pops in the window. */
static void pass_dups(struct check *c, uint32_t file, uint64_t offset, uint64_t t_send,
                      uint64_t t_recv, const uint64_t *ids, uint32_t count)
{
    uint32_t kind = c->files[file].kind;

    (void)offset, (void)t_recv;
    for (uint32_t i = 0; i < count; i++) {
        struct dup *d = dup_find(c, ids[i]);
        if (!d)
            continue;
        d->n++;
        if (t_send < d->min_send) {
            d->min_send = t_send;
            d->min_kind = kind;
        }
        if (in_window(&c->o, t_send)) {
            d->in_window++;
            d->in_window_kind[kind]++;
        }
    }
}

/* Pops of d sent inside the exposure window, not counting the legitimate (earliest) one. */
static uint64_t dup_exposed(const struct check *c, const struct dup *d)
{
    return d->in_window - (in_window(&c->o, d->min_send) ? 1 : 0);
}

/* Third pass: the first pop and one later pop of each example duplicate. */
static void pass_examples(struct check *c, uint32_t file, uint64_t offset, uint64_t t_send,
                          uint64_t t_recv, const uint64_t *ids, uint32_t count)
{
    struct result *r = &c->r;
    struct pop p = {true, file, offset, t_send, t_recv};

    for (uint32_t i = 0; i < count; i++) {
        for (size_t k = 0; k < r->n_ex_dup; k++) {
            struct dup_example *ex = &r->ex_dup[k];
            const struct dup *d = &c->dups[ex->dup];
            if (d->id != ids[i])
                continue;
            if (!ex->first.set && t_send == d->min_send)
                ex->first = p;
            else if (in_window(&c->o, t_send) == ex->exposed &&
                     (!ex->again.set || t_send < ex->again.t_send))
                ex->again = p;
        }
    }
}

/* U: splits the extra pops into duplicates and exposed and picks the examples. */
int dups_classify(struct check *c)
{
    struct result *r = &c->r;

    if (!c->ndups)
        return 0;
    for (uint32_t f = 0; f < c->o.nlogs; f++)
        if (input_scan(c, f, pass_dups) < 0)
            return -1;
    for (int want_exposed = 0; want_exposed < 2; want_exposed++) {
        for (size_t k = 0; k < c->ndups; k++) {
            const struct dup *d = &c->dups[k];
            uint64_t exposed = dup_exposed(c, d);
            if (!want_exposed) {
                r->exposed += exposed;
                r->duplicates += d->n - 1 - exposed;
                for (uint32_t kind = 0; kind < POPLOG_KINDS; kind++)
                    r->exposed_kind[kind] +=
                        d->in_window_kind[kind] -
                        (kind == d->min_kind && in_window(&c->o, d->min_send) ? 1 : 0);
            }
            bool fits = want_exposed ? exposed > 0 : d->n - 1 - exposed > 0;
            if (fits && r->n_ex_dup < MAX_EXAMPLES)
                r->ex_dup[r->n_ex_dup++] =
                    (struct dup_example){.dup = k, .exposed = want_exposed != 0};
        }
    }
    for (uint32_t f = 0; f < c->o.nlogs; f++)
        if (input_scan(c, f, pass_examples) < 0)
            return -1;
    return 0;
}
