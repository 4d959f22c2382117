/*
 * hist — a log-linear histogram of the test tools' latencies (idpool-load
 * in microseconds, idpool-clientbench in nanoseconds): one bucket per value
 * below 2^linear_bits, then 2^sub_bits buckets per power of two up to
 * 2^top_bits (anything above lands in the last bucket); the maximum is
 * exact. Adding is two shifts and an increment: cheap enough for a hot path.
 */
#ifndef IDPOOL_HIST_H
#define IDPOOL_HIST_H

#include <stdint.h>

/* The buckets of a histogram of this shape. */
#define HIST_BUCKETS(linear_bits, sub_bits, top_bits)                                              \
    ((1u << (linear_bits)) + (((top_bits) - (linear_bits)) << (sub_bits)))

struct hist {
    unsigned linear_bits; /* exact below 2^linear_bits */
    unsigned sub_bits;    /* then 2^sub_bits buckets per power of two */
    unsigned nbuckets;    /* HIST_BUCKETS(linear_bits, sub_bits, top_bits) */
    uint64_t max;         /* the largest value added */
    uint64_t n[];         /* values per bucket */
};

/* A zeroed histogram of that shape (sub_bits < linear_bits < top_bits <= 64); NULL: no memory. */
struct hist *hist_new(unsigned linear_bits, unsigned sub_bits, unsigned top_bits);

/* The bucket of value v. */
static inline unsigned hist_index(const struct hist *h, uint64_t v)
{
    unsigned k, i;

    if (v < (1ULL << h->linear_bits))
        return (unsigned)v;
    k = 63u - (unsigned)__builtin_clzll(v); /* >= linear_bits */
    i = (1u << h->linear_bits) + ((k - h->linear_bits) << h->sub_bits) +
        (unsigned)((v >> (k - h->sub_bits)) & ((1u << h->sub_bits) - 1));
    return i < h->nbuckets ? i : h->nbuckets - 1;
}

static inline void hist_add(struct hist *h, uint64_t v)
{
    h->n[hist_index(h, v)]++;
    if (v > h->max)
        h->max = v;
}

/* The smallest and the largest value of bucket i. */
uint64_t hist_lo(const struct hist *h, unsigned i);
uint64_t hist_hi(const struct hist *h, unsigned i);

/* Adds the counts and the maximum of h (of the same shape) to into. */
void hist_merge(struct hist *into, const struct hist *h);

/* Values added. */
uint64_t hist_total(const struct hist *h);

/*
 * The q-quantile (nearest rank): the largest value of the bucket holding
 * the ceil(q x total)-th value, never above the maximum; 0 when empty.
 */
uint64_t hist_quantile(const struct hist *h, double q);

/* Values at or above v (counted from v's bucket). */
uint64_t hist_above(const struct hist *h, uint64_t v);

#endif
