/*
 * check_first — idpool-check's first pass, over every record in input
 * order: collects the IDs, checks A (range and arithmetic) and each
 * consumer's own order (M, "order"), counts empty pops, keeps the records
 * the cross-consumer sweep needs (check_order.c), and does --blocks and
 * --dump.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int cmp_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

/*
 * --blocks: checks the group of STEP IDs just completed in c->blk: a run
 * with stride delta once sorted, not handed out in sorted order (a refill
 * shuffles each block), and above the group before (blocks never overlap).
 */
static void block_check(struct check *c, const struct logfile *lf)
{
    const struct opts *o = &c->o;
    struct result *r = &c->r;
    size_t n = (size_t)o->blocks;
    uint64_t *srt = c->blk_tmp;
    const char *why = NULL;
    bool asc = true, desc = true;

    memcpy(srt, c->blk, n * sizeof *srt);
    qsort(srt, n, sizeof *srt, cmp_u64);
    for (size_t i = 1; i < n; i++) {
        if (srt[i] == srt[i - 1] && !why)
            why = "repeats an ID";
        else if (srt[i] - srt[i - 1] != o->delta && !why)
            why = "is not a run with stride delta";
        asc = asc && c->blk[i] > c->blk[i - 1];
        desc = desc && c->blk[i] < c->blk[i - 1];
    }
    if (!why && n >= 8 && (asc || desc))
        why = "is not shuffled";
    if (!why && c->cur.have_top && srt[0] <= c->cur.top)
        why = "is not above the group before";
    if (why) {
        r->bad_blocks++;
        add_example(r->ex_more, &r->n_ex_more,
                    "%s: group of %zu at ID #%" PRIu64 " (%" PRIu64 "..%" PRIu64 ") %s", lf->path,
                    n, c->cur.blk_first, srt[0], srt[n - 1], why);
    }
    c->cur.have_top = true;
    c->cur.top = srt[n - 1];
}

/* --blocks: adds IDs of the log in pop order, checking each full group. */
static void blocks_add(struct check *c, const struct logfile *lf, const uint64_t *ids,
                       uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        if (c->cur.nblk == 0)
            c->cur.blk_first = lf->ids - count + i;
        c->blk[c->cur.nblk++] = ids[i];
        if (c->cur.nblk == c->o.blocks) {
            block_check(c, lf);
            c->cur.nblk = 0;
        }
    }
}

/* --dump: the IDs, one decimal per line. */
static void dump_ids(struct check *c, const uint64_t *ids, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        fprintf(c->dump, "%" PRIu64 "\n", ids[i]);
}

/*
 * First pass: collects the IDs, checks A and per-consumer order, counts empty
 * pops and keeps what the cross-consumer sweep needs.
 */
void pass_load(struct check *c, uint32_t file, uint64_t offset, uint64_t t_send, uint64_t t_recv,
               const uint64_t *ids, uint32_t count)
{
    struct logfile *lf = &c->files[file];
    struct result *r = &c->r;
    const struct opts *o = &c->o;

    lf->records++;
    lf->ids += count;
    r->records++;
    if (c->dump)
        dump_ids(c, ids, count);
    if (o->blocks)
        blocks_add(c, lf, ids, count);
    if (!lf->is_list) {
        if (!r->has_t_first || t_send < r->t_first)
            r->t_first = t_send;
        if (!r->has_t_first || t_recv > r->t_last)
            r->t_last = t_recv;
        r->has_t_first = true;
    }

    if (count == 0) {
        lf->empties++;
        r->empty_pops++;
        if (!c->cur.in_empty) {
            c->cur.in_empty = true;
            c->cur.empty_from = t_send;
        }
        if (t_recv - c->cur.empty_from > lf->longest_empty)
            lf->longest_empty = t_recv - c->cur.empty_from;
        return;
    }
    c->cur.in_empty = false;

    if (c->oom || grow(&c->ids, &c->cap_ids, c->nids + count, sizeof *c->ids) < 0) {
        c->oom = true;
        return;
    }
    memcpy(c->ids + c->nids, ids, (size_t)count * sizeof *ids);
    c->nids += count;

    uint64_t lo = UINT64_MAX, hi = 0;
    bool order_bad = false;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t id = ids[i];
        if (id < lo)
            lo = id;
        if (id > hi)
            hi = id;
        if (id < o->start_offset || id >= ID_LIMIT || id % o->delta != o->remainder) {
            r->arith++;
            add_example(r->ex_arith, &r->n_ex_arith, "%s %s %" PRIu64 ": id %" PRIu64 " (%s)",
                        lf->path, unit(lf), offset, id,
                        id >= ID_LIMIT         ? ">= 2^63"
                        : id < o->start_offset ? "below start_offset"
                                               : "id % delta != remainder");
        }
        if (o->monotonic) {
            if (c->cur.have_max && id <= c->cur.max) {
                if (!order_bad)
                    add_example(r->ex_order, &r->n_ex_order,
                                "%s %s %" PRIu64 ": id %" PRIu64 " after %" PRIu64, lf->path,
                                unit(lf), offset, id, c->cur.max);
                order_bad = true;
            }
            if (!c->cur.have_max || id > c->cur.max)
                c->cur.max = id;
            c->cur.have_max = true;
        }
    }
    if (order_bad)
        r->order++;
    if (o->monotonic && !lf->is_list) {
        if (grow(&c->recs, &c->cap_recs, c->nrecs + 1, sizeof *c->recs) < 0) {
            c->oom = true;
            return;
        }
        c->recs[c->nrecs++] = (struct rec){t_send, t_recv, lo, hi, file};
    }
}
