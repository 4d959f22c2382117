#include "idspace.h"

#include <string.h>

#include "app.h"
#include "ledgercheck.h"

/* (d, r) as ledgercheck's lattice: every ID from 1 on (no start_offset here). */
static int lattice(uint64_t d, uint64_t r, struct lc_lattice *l)
{
    if (d == 0 || r >= d)
        return 0;
    *l = (struct lc_lattice){1, d, r, 0};
    return 1;
}

int idspace_lattices_meet(uint64_t d1, uint64_t r1, uint64_t d2, uint64_t r2)
{
    struct lc_lattice a, b;

    return lattice(d1, r1, &a) && lattice(d2, r2, &b) && lc_meet(&a, &b);
}

int idspace_first_common(uint64_t d1, uint64_t r1, uint64_t d2, uint64_t r2, uint64_t lo,
                         uint64_t hi, uint64_t *first)
{
    struct lc_lattice a, b;

    return lattice(d1, r1, &a) && lattice(d2, r2, &b) && lc_common(&a, &b, lo, hi, first) == 0;
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
