#include "runway.h"

#include <stdio.h>

#include "app.h"

double runway_pool_s(int len_known, uint64_t len, double rate, int stale)
{
    if (!len_known || stale || rate != rate)
        return RUNWAY_UNKNOWN;
    if (!(rate > 0))
        return RUNWAY_NEVER;
    return (double)len / rate;
}

double runway_growth_per_day(const struct runway_ledger *l)
{
    if (!l->known)
        return RUNWAY_UNKNOWN;
    if (!l->in_window || l->elapsed_ms < RUNWAY_MIN_SPAN_MS || l->top <= l->first_lo)
        return 0;
    return (double)(l->top - l->first_lo) * RUNWAY_DAY_MS / (double)l->elapsed_ms;
}

uint64_t runway_ceiling(const struct app_cfg *c)
{
    return app_ceiling(c); /* max_id + 1, or 2^63-1 without one */
}

uint64_t runway_space_left(const struct app_cfg *c, const struct runway_ledger *l)
{
    uint64_t ceiling = runway_ceiling(c), used = c->start_offset;

    if (c->current_offset > used)
        used = c->current_offset;
    if (l && l->known && l->top > used)
        used = l->top;
    return used < ceiling ? ceiling - used : 0;
}

double runway_space_days(uint64_t left, double growth_per_day)
{
    if (left == 0)
        return 0;
    if (growth_per_day != growth_per_day)
        return RUNWAY_UNKNOWN;
    if (!(growth_per_day > 0))
        return RUNWAY_NEVER;
    return (double)left / growth_per_day;
}

const char *runway_human(double s, char *buf, unsigned len)
{
    if (s != s || isinf(s) || s < 0)
        snprintf(buf, len, "-");
    else if (s < 60)
        snprintf(buf, len, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, len, "%.0fm", s / 60);
    else if (s < 86400)
        snprintf(buf, len, "%.1fh", s / 3600);
    else if (s < 86400 * 10)
        snprintf(buf, len, "%.1fd", s / 86400);
    else if (s < 86400 * 1e9)
        snprintf(buf, len, "%.0fd", s / 86400);
    else
        snprintf(buf, len, "%.1ed", s / 86400);
    return buf;
}
