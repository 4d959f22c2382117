#include "idspace.h"

#include <string.h>

#include "app.h"

typedef unsigned __int128 u128;

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The inverse of a modulo m (gcd(a, m) == 1, m >= 1), in [0, m). */
static uint64_t inverse(uint64_t a, uint64_t m)
{
    __int128 t = 0, nt = 1, r = (__int128)m, nr = (__int128)(a % m);

    while (nr != 0) {
        __int128 qt = r / nr, x;
        x = t - qt * nt;
        t = nt;
        nt = x;
        x = r - qt * nr;
        r = nr;
        nr = x;
    }
    if (t < 0)
        t += (__int128)m;
    return (uint64_t)t;
}

int idspace_lattices_meet(uint64_t d1, uint64_t r1, uint64_t d2, uint64_t r2)
{
    uint64_t g;

    if (d1 == 0 || d2 == 0 || r1 >= d1 || r2 >= d2)
        return 0;
    g = gcd64(d1, d2);
    return r1 % g == r2 % g;
}

int idspace_first_common(uint64_t d1, uint64_t r1, uint64_t d2, uint64_t r2, uint64_t lo,
                         uint64_t hi, uint64_t *first)
{
    uint64_t g, m2, diff, t;
    u128 lcm, x0, x;

    if (lo >= hi || !idspace_lattices_meet(d1, r1, d2, r2))
        return 0;
    g = gcd64(d1, d2);
    m2 = d2 / g;
    lcm = (u128)(d1 / g) * d2;
    /* x0 = r1 + d1 * t with d1 * t ≡ r2 - r1 (mod d2): t ≡ ((r2 - r1) / g) * inv(d1 / g) (mod m2)
     */
    diff = r2 >= r1 ? (r2 - r1) / g % m2 : (m2 - (r1 - r2) / g % m2) % m2;
    t = (uint64_t)((u128)diff * inverse((d1 / g) % m2, m2) % m2);
    x0 = (u128)r1 + (u128)d1 * t; /* < lcm: the least non-negative common ID */
    x = x0;
    if ((u128)lo > x0)
        x = x0 + ((u128)lo - x0 + lcm - 1) / lcm * lcm;
    if (x >= (u128)hi)
        return 0;
    *first = (uint64_t)x;
    return 1;
}

int idspace_rows_meet(const struct app_cfg *a, const struct app_cfg *b, uint64_t *first)
{
    uint64_t alo = a->start_offset > APP_ID_MIN ? a->start_offset : APP_ID_MIN;
    uint64_t blo = b->start_offset > APP_ID_MIN ? b->start_offset : APP_ID_MIN;
    uint64_t lo = alo > blo ? alo : blo;
    uint64_t hi = a->current_offset < b->current_offset ? a->current_offset : b->current_offset;

    if (a->id == b->id || a->id_space[0] == '\0' || strcmp(a->id_space, b->id_space) != 0)
        return 0;
    return idspace_first_common(a->delta, a->remainder, b->delta, b->remainder, lo, hi, first);
}
