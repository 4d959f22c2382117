#include "runway.h"

#include <stdio.h>

#include "app.h"

/*
 * One statement, a few index reads per application whatever the ledger's
 * length (2 million leases of 100 applications: about 1300 reads, 10 ms):
 * MAX(hi) per application_id and MIN(created_at) of the window per
 * application_id are loose index scans ("Using index for group-by") of
 * ix_app_hi (application_id, hi) and ix_app_created (application_id,
 * created_at), and the lease at that created_at one lookup of the latter.
 * (A subquery per application row reads every older lease instead: MariaDB
 * uses only the application_id part of the index in a dependent subquery.)
 * Leases created in the same millisecond: the lowest lo comes first. The
 * age is measured by MySQL's clock, the one that wrote created_at, both in
 * UTC (the session's time zone, store.c: the DATETIME is a wall clock time,
 * which summer time would shift by an hour between a write and a read).
 */
#define LEDGER_STR(x)  #x
#define LEDGER_XSTR(x) LEDGER_STR(x)

const char runway_ledger_sql[] =
    "SELECT t.application_id, t.top, f.lo, TIMESTAMPDIFF(MICROSECOND, f.created_at, NOW(3)) "
    "FROM (SELECT application_id, MAX(hi) AS top FROM application_lease "
    "GROUP BY application_id) t "
    "LEFT JOIN (SELECT application_id, MIN(created_at) AS c FROM application_lease "
    "WHERE created_at >= NOW(3) - INTERVAL " LEDGER_XSTR(
        RUNWAY_WINDOW_DAYS) " DAY "
                            "GROUP BY application_id) w ON w.application_id = t.application_id "
                            "LEFT JOIN application_lease f ON f.application_id = w.application_id "
                            "AND f.created_at = w.c "
                            "ORDER BY t.application_id, f.lo";

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
