#include "gen.h"

#include <string.h>

int gen_add_lease(struct gen_state *st, uint64_t lo, uint64_t hi)
{
    if (gen_has_next(st) || hi <= lo || lo < gen_floor(st))
        return -1;
    st->nlo = lo;
    st->nhi = hi;
    return 0;
}

uint64_t gen_floor(const struct gen_state *st)
{
    uint64_t f = st->next;

    if (st->hi > f)
        f = st->hi;
    if (st->nhi > f)
        f = st->nhi;
    return f;
}

uint64_t gen_remaining(const struct gen_state *st)
{
    uint64_t span = st->hi > st->next ? st->hi - st->next : 0;

    if (gen_has_next(st))
        span += st->nhi - st->nlo;
    return span;
}

/* Smallest x >= v with x % delta == rem; 0 with *ok = 0 on overflow. */
static uint64_t align_up(uint64_t v, uint64_t delta, uint64_t rem, int *ok)
{
    uint64_t x = v - v % delta + rem;

    *ok = 1;
    if (x < v) {
        if (x > UINT64_MAX - delta) {
            *ok = 0;
            return 0;
        }
        x += delta;
    }
    return x;
}

/* Move to the prefetched lease; 0 when there is none. */
static int lease_roll(struct gen_state *st)
{
    if (!gen_has_next(st))
        return 0;
    st->next = st->nlo;
    st->hi = st->nhi;
    st->nlo = st->nhi = 0;
    return 1;
}

/*
 * The first ID the current lease can give after `next` with `extra` more
 * strides of delta, or 0 with *ok = 0 when it does not fit below hi. Never
 * below start_offset, never 0 (APP_ID_MIN: with remainder 0 the first ID is
 * delta). Everything stays below hi <= 2^63-1, so uint64 arithmetic cannot
 * wrap once the bounds are checked.
 */
static uint64_t lease_pick(const struct app_cfg *cfg, const struct gen_state *st, uint64_t extra,
                           int *ok)
{
    uint64_t from = st->next > cfg->start_offset ? st->next : cfg->start_offset;
    uint64_t x;

    if (from < APP_ID_MIN)
        from = APP_ID_MIN;

    *ok = 0;
    if (from >= st->hi)
        return 0;
    x = align_up(from, cfg->delta, cfg->remainder, ok);
    if (!*ok || x >= st->hi || (st->hi - x - 1) / cfg->delta < extra) {
        *ok = 0;
        return 0;
    }
    return x + extra * cfg->delta;
}

static size_t draw_monotonic(const struct app_cfg *cfg, struct gen_state *st, struct rng *r,
                             uint64_t *out, size_t n)
{
    size_t got = 0;

    while (got < n) {
        int ok;
        uint64_t gap = cfg->increment_max > 1 ? rng_below(r, cfg->increment_max) : 0;
        uint64_t id = lease_pick(cfg, st, gap, &ok);

        if (!ok) {
            /* The rest of this lease is a gap; continue in the next one. */
            st->next = st->hi;
            if (!lease_roll(st))
                break;
            continue;
        }
        out[got++] = id;
        st->next = id + 1;
    }
    return got;
}

static size_t draw_trend(const struct app_cfg *cfg, struct gen_state *st, struct rng *r,
                         uint64_t *out, size_t n)
{
    size_t got = 0;

    while (n - got >= cfg->step) {
        int ok;
        uint64_t first, last = lease_pick(cfg, st, cfg->step - 1, &ok);
        uint64_t *blk = out + got;

        if (!ok) {
            /* A block never straddles two leases: it must stay contiguous. */
            st->next = st->hi;
            if (!lease_roll(st))
                break;
            continue;
        }
        first = last - (cfg->step - 1) * cfg->delta;
        for (uint64_t i = 0; i < cfg->step; i++)
            blk[i] = first + i * cfg->delta;
        /* Fisher-Yates. */
        for (uint64_t i = cfg->step - 1; i > 0; i--) {
            uint64_t j = rng_below(r, i + 1), t = blk[i];
            blk[i] = blk[j];
            blk[j] = t;
        }
        got += cfg->step;
        st->next = last + 1;
    }
    return got;
}

size_t gen_draw(const struct app_cfg *cfg, struct gen_state *st, struct rng *r, uint64_t *out,
                size_t n)
{
    if (cfg->type == APP_TREND)
        return draw_trend(cfg, st, r, out, n);
    return draw_monotonic(cfg, st, r, out, n);
}
