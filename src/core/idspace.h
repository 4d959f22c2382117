/*
 * idspace — applications that share one ID space (application.id_space):
 * where the ID lattices of two of them meet. Pure logic: no I/O.
 *
 * An application's IDs are the lattice x ≡ remainder (mod delta). Two
 * lattices meet iff r1 ≡ r2 (mod gcd(d1, d2)); then their common IDs are
 * one lattice again, of period lcm(d1, d2) (up to 2^64: computed in
 * 128 bits), found by the Chinese remainder theorem.
 */
#ifndef IDPOOL_IDSPACE_H
#define IDPOOL_IDSPACE_H

#include <stdint.h>

struct app_cfg;

/*
 * The first ID x in [lo, hi) with x % d1 == r1 and x % d2 == r2, into
 * *first: 1; none: 0. d1, d2 >= 1, r1 < d1, r2 < d2 (else 0). Exact for
 * every 64-bit input.
 */
int idspace_first_common(uint64_t d1, uint64_t r1, uint64_t d2, uint64_t r2, uint64_t lo,
                         uint64_t hi, uint64_t *first);

/* 1 when the lattices of (d1, r1) and (d2, r2) have any ID in common. */
int idspace_lattices_meet(uint64_t d1, uint64_t r1, uint64_t d2, uint64_t r2);

/*
 * The static check of two rows at load: a and b name the same non-empty
 * id_space, are different rows, and the ranges they have used,
 * [max(start_offset, 1), current_offset), overlap in an ID of both
 * lattices (their current delta and remainder). Then *first is the
 * lowest such ID: 1; else 0. A row's pool draws its next IDs from leases
 * inside its used range with the row's current lattice, so such a pair can
 * hand out one ID twice without another reservation.
 */
int idspace_rows_meet(const struct app_cfg *a, const struct app_cfg *b, uint64_t *first);

#endif
