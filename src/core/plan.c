#include "plan.h"

#include <stdlib.h>
#include <string.h>

#include "resp.h"

uint64_t plan_want(const struct app_cfg *cfg, uint64_t len)
{
    uint64_t room = cfg->max_pool > len ? cfg->max_pool - len : 0;
    uint64_t want = room / cfg->step * cfg->step;
    uint64_t cap = PLAN_MAX_IDS / cfg->step * cfg->step;

    if (want < cfg->step)
        want = cfg->step;
    if (cap < cfg->step)
        cap = cfg->step;
    return want > cap ? cap : want;
}

int plan_due(const struct app_cfg *cfg, uint64_t len, int unfinished)
{
    if (len < cfg->low_water)
        return 1;
    return unfinished && len < cfg->max_pool && cfg->max_pool - len >= cfg->step;
}

uint64_t plan_lease_ids(const struct app_cfg *cfg, double rate)
{
    uint64_t min = cfg->max_pool > cfg->step ? cfg->max_pool : cfg->step;
    double want = rate * PLAN_LEASE_SECONDS;

    if (want < (double)min)
        return min;
    if (want > (double)PLAN_LEASE_MAX_IDS)
        return PLAN_LEASE_MAX_IDS;
    return (uint64_t)want;
}

uint64_t plan_lease_span(const struct app_cfg *cfg, double rate)
{
    uint64_t span = app_span_for(cfg, plan_lease_ids(cfg, rate));
    uint64_t floor = app_span_for(cfg, cfg->max_pool);
    uint64_t cap = floor > PLAN_LEASE_MAX_SPAN ? floor : PLAN_LEASE_MAX_SPAN;

    return span < cap ? span : cap;
}

int plan_should_prefetch(const struct gen_state *st, uint64_t span)
{
    return !gen_has_next(st) && gen_remaining(st) < span / 2;
}

/* --- meta ---------------------------------------------------------------- */

void plan_meta_init(struct plan_meta *m)
{
    memset(m, 0, sizeof(*m));
}

void plan_meta_field(struct plan_meta *m, const char *f, size_t flen, const char *v, size_t vlen)
{
    static const char *const names[4] = {"next", "hi", "nlo", "nhi"};
    uint64_t *dst[4] = {&m->st.next, &m->st.hi, &m->st.nlo, &m->st.nhi};

    for (int k = 0; k < 4; k++) {
        if (flen != strlen(names[k]) || memcmp(f, names[k], flen) != 0)
            continue;
        if (u64_parse(v, vlen, dst[k]) != 0)
            m->bad = 1;
        if (k == 0) {
            /* Kept verbatim, however long: the fence compares it byte for byte. */
            m->have_next = 1;
            m->next = v;
            m->next_len = vlen;
        }
    }
}

enum plan_meta_result plan_meta_end(struct plan_meta *m, struct gen_state *st)
{
    const struct gen_state *p = &m->st;

    memset(st, 0, sizeof(*st));
    if (!m->have_next)
        return PLAN_META_NONE;
    if (m->bad || p->hi < p->next || (gen_has_next(p) && (p->nlo < p->hi || p->nhi <= p->nlo)))
        return PLAN_META_CORRUPT; /* MySQL knows what was leased: start from a fresh lease */
    *st = *p;
    return PLAN_META_OK;
}

/* --- batches ------------------------------------------------------------- */

int plan_batch_start(struct plan_batch *b, const struct gen_state *st, size_t want)
{
    struct gen_state from = *st; /* st may be b->st */

    free(b->ids);
    b->ids = malloc((want ? want : 1) * sizeof(*b->ids));
    b->st = from;
    b->nids = b->ndraws = b->nchunks = 0;
    b->want = b->ids ? want : 0;
    return b->ids ? 0 : -1;
}

static int draw_record(struct plan_batch *b, size_t off, size_t n)
{
    if (b->ndraws == b->drawcap) {
        size_t cap = b->drawcap ? b->drawcap * 2 : 64;
        struct plan_chunk *c = realloc(b->draws, cap * sizeof(*c));
        if (!c)
            return -1;
        b->draws = c;
        b->drawcap = cap;
    }
    b->draws[b->ndraws].off = off;
    b->draws[b->ndraws].n = n;
    b->draws[b->ndraws].after = b->st;
    b->ndraws++;
    return 0;
}

enum plan_draw_result plan_batch_draw(struct plan_batch *b, const struct app_cfg *cfg,
                                      struct rng *rng, size_t chunk)
{
    uint64_t step = cfg->step;

    while (b->nids < b->want) {
        size_t left = b->want - b->nids, unit, got;

        if (cfg->type == APP_TREND)
            unit = step >= chunk ? step : (chunk / step) * step;
        else
            unit = chunk;
        if (unit > left)
            unit = cfg->type == APP_TREND ? left / step * step : left;
        if (unit == 0)
            break;
        got = gen_draw(cfg, &b->st, rng, b->ids + b->nids, unit);
        if (got && draw_record(b, b->nids, got) < 0)
            return PLAN_DRAW_NOMEM;
        b->nids += got;
        if (got < unit)
            return PLAN_DRAW_SHORT;
    }
    return PLAN_DRAW_DONE;
}

int plan_batch_split(struct plan_batch *b, size_t chunk)
{
    size_t n = 0;

    for (size_t d = 0; d < b->ndraws; d++)
        n += (b->draws[d].n + chunk - 1) / chunk;
    if (n > b->chunkcap) {
        struct plan_chunk *p = realloc(b->chunks, n * sizeof(*p));
        if (!p)
            return -1;
        b->chunks = p;
        b->chunkcap = n;
    }
    b->nchunks = 0;
    for (size_t d = 0; d < b->ndraws; d++)
        for (size_t off = 0; off < b->draws[d].n; off += chunk) {
            struct plan_chunk *k = &b->chunks[b->nchunks++];
            k->off = b->draws[d].off + off;
            k->n = b->draws[d].n - off < chunk ? b->draws[d].n - off : chunk;
            k->after = b->draws[d].after;
        }
    return 0;
}

void plan_batch_free(struct plan_batch *b)
{
    free(b->ids);
    free(b->draws);
    free(b->chunks);
    memset(b, 0, sizeof(*b));
}

int plan_reserve_kept(enum plan_reserve_mode mode, enum app_type type)
{
    return mode == PLAN_RESERVE_ALL || (mode == PLAN_RESERVE_TREND && type == APP_TREND);
}

int plan_reserve_usable(enum plan_reserve_mode mode, enum app_type type, int have_meta,
                        uint64_t len)
{
    if (!plan_reserve_kept(mode, type))
        return 0;
    return type == APP_TREND || (!have_meta && len == 0);
}

uint64_t plan_reserve_split(uint64_t lo, uint64_t hi)
{
    return lo + (hi - lo) / 2;
}
