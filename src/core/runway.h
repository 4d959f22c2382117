/*
 * runway — how long an application lasts (issue 23): the seconds until its
 * pool runs dry at the current consumption rate, and the days until its ID
 * space is exhausted at the rate its leases have grown. Pure arithmetic on
 * what the daemon read (the pool's length and rate, a summary of the lease
 * ledger), unit-tested without servers.
 *
 * A runway is a double: finite and >= 0; RUNWAY_NEVER (+Inf) when nothing
 * is consumed or no growth was measured; RUNWAY_UNKNOWN (NaN) when the
 * numbers are missing or stale. /v1/apps shows both of the latter as null,
 * /metrics shows +Inf and leaves an unknown one out.
 */
#ifndef IDPOOL_RUNWAY_H
#define IDPOOL_RUNWAY_H

#include <math.h>
#include <stdint.h>

struct app_cfg;

#define RUNWAY_NEVER   ((double)INFINITY)
#define RUNWAY_UNKNOWN ((double)NAN)

/* The ledger's growth is measured over its last RUNWAY_WINDOW_DAYS days (or since its first
 * lease, if younger), and only once that span is at least RUNWAY_MIN_SPAN_MS long. */
#define RUNWAY_WINDOW_DAYS 7
#define RUNWAY_MIN_SPAN_MS 3600000 /* an hour: the first lease reserves ahead of use */
#define RUNWAY_DAY_MS      86400000.0

/*
 * The statement that reads the lease ledger (the daemon's MySQL worker,
 * store_jobs.c): per application_id, MAX(hi), and lo and the age in
 * microseconds of the window's first lease; ordered by application_id.
 * One text, so that t_runway EXPLAINs what the daemon runs (idpool-sql).
 */
extern const char runway_ledger_sql[];

/* What one read of the lease ledger (application_lease) found for one application. */
struct runway_ledger {
    int known;           /* the ledger was read for this application */
    uint64_t top;        /* highest hi ever leased (0: no lease) */
    int in_window;       /* a lease was created within the window */
    uint64_t first_lo;   /* lo of the window's first lease */
    uint64_t elapsed_ms; /* from that lease's created_at to the read */
};

/*
 * Seconds until a pool of len IDs runs dry at rate IDs/s: len / rate;
 * RUNWAY_NEVER when nothing is consumed (rate <= 0), RUNWAY_UNKNOWN when
 * the length is unknown or stale (its Redis is unreachable).
 */
double runway_pool_s(int len_known, uint64_t len, double rate, int stale);

/*
 * The ledger's growth, IDs (offsets) a day: (top - first_lo) over
 * elapsed_ms. RUNWAY_UNKNOWN when the ledger was not read; 0 when no growth
 * was measured (no lease in the window, a span shorter than
 * RUNWAY_MIN_SPAN_MS, top not above first_lo).
 */
double runway_growth_per_day(const struct runway_ledger *l);

/*
 * The end (exclusive) of the IDs c may ever get: max_id + 1, or 2^63-1
 * when the row has none (app_ceiling).
 */
uint64_t runway_ceiling(const struct app_cfg *c);

/*
 * IDs (offsets) left below the ceiling: ceiling - max(start_offset,
 * current_offset, the ledger's top); 0 once the ceiling is reached or passed.
 */
uint64_t runway_space_left(const struct app_cfg *c, const struct runway_ledger *l);

/*
 * Days until `left` IDs are used up growing by growth_per_day: 0 when none
 * is left (whatever the growth), RUNWAY_NEVER when nothing grows (growth
 * 0), RUNWAY_UNKNOWN when the growth is unknown.
 */
double runway_space_days(uint64_t left, double growth_per_day);

/*
 * Human units for a column: "42s", "18m", "3.2h", "4.5d", "1200d", "-" for
 * unknown or never; buf of at least 16 bytes.
 */
const char *runway_human(double seconds, char *buf, unsigned len);

#endif
