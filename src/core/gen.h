/*
 * gen — ID generation from leases, with the PRNG of rng.h. Pure logic: no
 * I/O, unit-tested without servers.
 *
 * A lease is a range [lo, hi) of ID space reserved in MySQL. The refiller
 * carries the state of the current lease and at most one prefetched lease
 * (struct gen_state, mirrored in the Redis meta hash) and draws IDs from it:
 *
 *   monotonic: each ID = previous + g x delta, g uniform in [1, increment_max]
 *              (the first ID of a lease is the first value >= lo with the
 *              right remainder, plus a random gap);
 *   trend:     blocks of `step` consecutive IDs (stride delta), each block
 *              entirely inside one lease, Fisher-Yates shuffled.
 *
 * Every generated ID is >= the state's `next`, < its lease's hi, >= the
 * application's start_offset, never 0 (APP_ID_MIN), and % delta ==
 * remainder. `next` only grows.
 */
#ifndef IDPOOL_GEN_H
#define IDPOOL_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "rng.h"

/* Progress of one application: the Redis meta hash, parsed. */
struct gen_state {
    uint64_t next; /* every ID pushed so far is < next; the next ID is >= next */
    uint64_t hi;   /* end (exclusive) of the current lease; next == hi: exhausted */
    uint64_t nlo;  /* prefetched lease [nlo, nhi), nhi == 0 when none */
    uint64_t nhi;
};

/* 1 when the state holds a prefetched lease. */
static inline int gen_has_next(const struct gen_state *st)
{
    return st->nhi != 0;
}

/*
 * Add a freshly reserved lease [lo, hi) (lo >= every bound already in st):
 * it becomes the current lease when the current one cannot yield another
 * ID, else the prefetched one. Returns 0, or -1 when st already holds a
 * prefetched lease or lo is below the state (the caller's bug: never use it).
 */
int gen_add_lease(struct gen_state *st, uint64_t lo, uint64_t hi)
    __attribute__((warn_unused_result));

/* The lowest bound a new lease must start at: max(next, hi, nhi). */
uint64_t gen_floor(const struct gen_state *st);

/* How much ID space is left: (hi - next) + (nhi - nlo). */
uint64_t gen_remaining(const struct gen_state *st);

/*
 * Draw up to `n` IDs for `cfg` from *st into out[], advancing *st (rolling
 * over to the prefetched lease when the current one runs out). Trend draws
 * whole blocks of cfg->step only, so n should be a multiple of step.
 * Returns how many IDs were drawn; fewer than n means the leases ran out:
 * add a lease and call again for the rest.
 */
size_t gen_draw(const struct app_cfg *cfg, struct gen_state *st, struct rng *r, uint64_t *out,
                size_t n);

#endif
