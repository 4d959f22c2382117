/*
 * check_order — M across consumers ("cross_order"): a request sent after
 * another one completed, by whichever consumer, got larger IDs. The
 * non-empty records kept by the first pass are merged into t_send and
 * t_recv order and swept once.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static const struct rec *sort_base; /* the records cmp_idx_* look at */

static int cmp_idx_send(const void *pa, const void *pb)
{
    const struct rec *a = &sort_base[*(const uint32_t *)pa];
    const struct rec *b = &sort_base[*(const uint32_t *)pb];
    return (a->t_send > b->t_send) - (a->t_send < b->t_send);
}

static int cmp_idx_recv(const void *pa, const void *pb)
{
    const struct rec *a = &sort_base[*(const uint32_t *)pa];
    const struct rec *b = &sort_base[*(const uint32_t *)pb];
    return (a->t_recv > b->t_recv) - (a->t_recv < b->t_recv);
}

/* One log's records in key order, for the merge. */
struct run {
    uint64_t key;  /* key of the head record */
    uint32_t *idx; /* sorted record indices, or NULL: the records are in order */
    size_t next;   /* next position in the run */
    size_t end;    /* end of the run */
    size_t base;   /* index of the run's first record */
};

static uint64_t rec_key(const struct rec *r, bool by_recv)
{
    return by_recv ? r->t_recv : r->t_send;
}

static uint32_t run_head(const struct run *ru)
{
    return ru->idx ? ru->idx[ru->next] : (uint32_t)(ru->base + ru->next);
}

/* Heap order of runs: smaller head key first, then lower log index. */
static bool run_less(const struct run *runs, size_t a, size_t b)
{
    return runs[a].key < runs[b].key || (runs[a].key == runs[b].key && a < b);
}

static void heap_down(const struct run *runs, size_t *heap, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && run_less(runs, heap[l], heap[m]))
            m = l;
        if (l + 1 < n && run_less(runs, heap[l + 1], heap[m]))
            m = l + 1;
        if (m == i)
            return;
        size_t t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

/*
 * Fills out with the record indices in t_send (or t_recv) order. Each log's
 * records are contiguous and normally already in order (a consumer waits for
 * each reply); a log that is not is sorted on its own. The logs are then
 * merged with a heap: O(n log logs), and no copy of the records.
 */
__attribute__((warn_unused_result)) static int order_records(struct check *c, bool by_recv,
                                                             uint32_t *out)
{
    size_t k = c->o.nlogs, n = 0, nheap = 0;
    struct run *runs = calloc(k, sizeof *runs);
    size_t *heap = calloc(k, sizeof *heap);
    int rc = -1;

    if (!runs || !heap)
        goto out;
    for (size_t f = 0; f < k; f++) {
        struct run *ru = &runs[f];
        const struct logfile *lf = &c->files[f];
        ru->base = lf->rec_first;
        ru->end = lf->rec_end - lf->rec_first;
        for (size_t i = lf->rec_first + 1; i < lf->rec_end; i++) {
            if (rec_key(&c->recs[i], by_recv) < rec_key(&c->recs[i - 1], by_recv)) {
                ru->idx = malloc(ru->end * sizeof *ru->idx);
                if (!ru->idx)
                    goto out;
                for (size_t j = 0; j < ru->end; j++)
                    ru->idx[j] = (uint32_t)(ru->base + j);
                sort_base = c->recs;
                qsort(ru->idx, ru->end, sizeof *ru->idx, by_recv ? cmp_idx_recv : cmp_idx_send);
                break;
            }
        }
        if (ru->end) {
            ru->key = rec_key(&c->recs[run_head(ru)], by_recv);
            heap[nheap++] = f;
        }
    }
    for (size_t i = nheap; i-- > 0;)
        heap_down(runs, heap, nheap, i);
    while (nheap) {
        struct run *ru = &runs[heap[0]];
        out[n++] = run_head(ru);
        if (++ru->next == ru->end)
            heap[0] = heap[--nheap];
        else
            ru->key = rec_key(&c->recs[run_head(ru)], by_recv);
        heap_down(runs, heap, nheap, 0);
    }
    rc = 0;
out:
    if (rc < 0)
        fprintf(stderr, "idpool-check: out of memory\n");
    for (size_t f = 0; runs && f < k; f++)
        free(runs[f].idx);
    free(runs);
    free(heap);
    return rc;
}

/* The largest ID seen, with the consumer and record it came from. */
struct best {
    bool set;
    uint64_t max;
    uint32_t file;
    size_t rec;
};

/*
 * M across consumers: if request a completed (t_recv) before request b was
 * sent (t_send), the server served a first, so every ID of b must be above
 * every ID of a. Records are swept in t_send order while the completed ones
 * (t_recv order) feed a running maximum; two maxima from different consumers
 * are kept so that a consumer is compared with the others only (its own
 * order is checked in the first pass). O(n log n) at worst.
 */
int cross_check(struct check *c)
{
    struct result *r = &c->r;
    size_t n = c->nrecs, j = 0;
    struct best b1 = {0}, b2 = {0}; /* b2: best of the consumers other than b1's */
    uint64_t t0 = t0_of(c);

    if (n < 2)
        return 0;
    if (n > UINT32_MAX) {
        fprintf(stderr, "idpool-check: too many records\n");
        return -1;
    }
    uint32_t *by_send = malloc(n * sizeof *by_send);
    uint32_t *by_recv = malloc(n * sizeof *by_recv);
    if (!by_send || !by_recv)
        fprintf(stderr, "idpool-check: out of memory\n");
    if (!by_send || !by_recv || order_records(c, false, by_send) < 0 ||
        order_records(c, true, by_recv) < 0) {
        free(by_send);
        free(by_recv);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const struct rec *b = &c->recs[by_send[i]];
        while (j < n && c->recs[by_recv[j]].t_recv < b->t_send) {
            const struct rec *a = &c->recs[by_recv[j]];
            struct best nb = {true, a->hi, a->file, by_recv[j]};
            if (b1.set && a->file == b1.file) {
                if (a->hi > b1.max)
                    b1 = nb;
            } else if (!b1.set || a->hi > b1.max) {
                b2 = b1;
                b1 = nb;
            } else if (!b2.set || a->hi > b2.max) {
                b2 = nb;
            }
            j++;
        }
        const struct best *cmp = b1.set && b1.file != b->file ? &b1 : &b2;
        if (cmp->set && b->lo <= cmp->max) {
            const struct rec *a = &c->recs[cmp->rec];
            r->cross_order++;
            add_example(r->ex_cross, &r->n_ex_cross,
                        "%s: request sent at +%.3f ms got id %" PRIu64 " <= id %" PRIu64
                        " of %s, received at +%.3f ms",
                        c->files[b->file].path, rel_ms(b->t_send, t0), b->lo, cmp->max,
                        c->files[a->file].path, rel_ms(a->t_recv, t0));
        }
    }
    free(by_send);
    free(by_recv);
    return 0;
}
