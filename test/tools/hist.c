/* hist — a log-linear histogram (see hist.h). */
#include "hist.h"

#include <math.h>
#include <stdlib.h>

struct hist *hist_new(unsigned linear_bits, unsigned sub_bits, unsigned top_bits)
{
    unsigned n = HIST_BUCKETS(linear_bits, sub_bits, top_bits);
    struct hist *h = calloc(1, sizeof *h + n * sizeof h->n[0]);

    if (h != NULL) {
        h->linear_bits = linear_bits;
        h->sub_bits = sub_bits;
        h->nbuckets = n;
    }
    return h;
}

/* Bucket i's smallest value, and its width. */
static uint64_t bucket(const struct hist *h, unsigned i, uint64_t *width)
{
    unsigned lin = 1u << h->linear_bits, k, sub;

    if (i < lin) {
        *width = 1;
        return i;
    }
    k = h->linear_bits + ((i - lin) >> h->sub_bits);
    sub = (i - lin) & ((1u << h->sub_bits) - 1);
    *width = 1ULL << (k - h->sub_bits);
    return (1ULL << k) + (uint64_t)sub * *width;
}

uint64_t hist_lo(const struct hist *h, unsigned i)
{
    uint64_t w;

    return bucket(h, i, &w);
}

uint64_t hist_hi(const struct hist *h, unsigned i)
{
    uint64_t w, lo = bucket(h, i, &w);

    return lo + (w - 1);
}

void hist_merge(struct hist *into, const struct hist *h)
{
    for (unsigned i = 0; i < h->nbuckets; i++)
        into->n[i] += h->n[i];
    if (h->max > into->max)
        into->max = h->max;
}

uint64_t hist_total(const struct hist *h)
{
    uint64_t t = 0;

    for (unsigned i = 0; i < h->nbuckets; i++)
        t += h->n[i];
    return t;
}

uint64_t hist_quantile(const struct hist *h, double q)
{
    uint64_t total = hist_total(h), target, cum = 0, hi;
    unsigned i;

    if (total == 0)
        return 0;
    target = (uint64_t)ceil(q * (double)total);
    if (target < 1)
        target = 1;
    for (i = 0; i < h->nbuckets; i++) {
        cum += h->n[i];
        if (cum >= target)
            break;
    }
    if (i == h->nbuckets)
        i = h->nbuckets - 1;
    hi = hist_hi(h, i);
    return hi < h->max ? hi : h->max;
}

uint64_t hist_above(const struct hist *h, uint64_t v)
{
    uint64_t k = 0;

    for (unsigned i = hist_index(h, v); i < h->nbuckets; i++)
        k += h->n[i];
    return k;
}
