/*
 * rng — the PRNG of ID generation (xoshiro256**): gaps between monotonic
 * IDs, the shuffle of trend blocks, lock tokens. Pure logic but for seeding
 * from the OS; unit-tested in test/unit/test_gen.c.
 */
#ifndef IDPOOL_RNG_H
#define IDPOOL_RNG_H

#include <stdint.h>

/* xoshiro256** PRNG. */
struct rng {
    uint64_t s[4];
};

/* Seed from getrandom(2); falls back to time and pid only if that fails. */
void rng_seed_os(struct rng *r);
/* Deterministic seed, for tests. */
void rng_seed(struct rng *r, uint64_t seed);
uint64_t rng_next(struct rng *r);
/* Uniform in [0, n), n > 0, without modulo bias. */
uint64_t rng_below(struct rng *r, uint64_t n);

#endif
