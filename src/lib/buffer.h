/*
 * buffer — the pure parts of libidpool's buffers: a growable ring of IDs,
 * and the rule for how many IDs a take asks for. No I/O, no locks (the
 * caller holds the application's lock); unit-tested in test/unit/test_buffer.c.
 */
#ifndef IDPOOL_LIB_BUFFER_H
#define IDPOOL_LIB_BUFFER_H

#include <stddef.h>
#include <stdint.h>

/* IDs in arrival order. */
struct ring {
    uint64_t *v;
    size_t cap; /* a power of two, or 0 */
    size_t head, n;
};

/* Append n IDs (grows as needed): 0, or -1 when out of memory (nothing appended). */
int ring_push(struct ring *r, const uint64_t *ids, size_t n) __attribute__((warn_unused_result));
/* Move up to n IDs from the head into out; returns how many. */
size_t ring_pop(struct ring *r, uint64_t *out, size_t n);
void ring_free(struct ring *r);

/*
 * How many IDs the next take asks for: enough for target_ms of the
 * measured demand (rate, IDs/s), at least twice the previous batch when a
 * caller had to wait for IDs since the last take (hungry: the buffer ran
 * out before the refill came), clamped to [min, max]. A take is sent below
 * low_water_ids(), so a steady consumer never waits.
 */
unsigned batch_next(unsigned prev, double rate, unsigned target_ms, unsigned min, unsigned max,
                    int hungry);

/*
 * Below how many buffered IDs a take is sent: target_ms of the measured
 * demand (at most LOW_WATER_MAX IDs), and never less than one batch or the
 * `buffer` option. Above max_batch per target_ms the buffer is brought up
 * by several takes in a row: a fast consumer finds it as deep as a slow
 * one, in time.
 */
#define LOW_WATER_MAX 1000000u
size_t low_water_ids(unsigned batch, unsigned buffer, double rate, unsigned target_ms);

/* Demand as an exponentially weighted rate: `ids` consumed over `ms` milliseconds. */
double rate_update(double rate, uint64_t ids, uint64_t ms);

#endif
