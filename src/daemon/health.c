#include "health.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "alerts.h"
#include "clock.h"
#include "log.h"
#include "pool.h"
#include "node.h"
#include "runway.h"
#include "store.h"

struct health {
    struct alerts *alerts;
    struct nodemap *map; /* is the meta's node reachable (else an alert is synced later) */
    int stall_ms;        /* 'stalled' after this long without IDs for a needy pool */
    int resolve_ms;      /* an alert resolves after its condition is clear this long */
    int warn_days;       /* id_space_exhaustion below this ID-space runway, days (0: off) */
};

struct health *health_new(struct alerts *alerts, struct nodemap *map, int stall_ms, int resolve_ms,
                          int warn_days)
{
    struct health *h = calloc(1, sizeof(*h));

    if (!h)
        return NULL;
    h->alerts = alerts;
    h->map = map;
    health_configure(h, stall_ms, resolve_ms, warn_days);
    return h;
}

void health_free(struct health *h)
{
    free(h);
}

void health_configure(struct health *h, int stall_ms, int resolve_ms, int warn_days)
{
    h->stall_ms = stall_ms;
    h->resolve_ms = resolve_ms;
    h->warn_days = warn_days;
}

void health_pool_free(struct pool *p)
{
    for (int k = 0; k < ALERT_COUNT; k++)
        free(p->health.msg[k]);
    free(p->health.last_err);
}

void health_problem(struct pool *p, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!p->health.last_err || strcmp(p->health.last_err, msg) != 0) {
        log_warn("app=%s %s", p->cfg.key, msg);
        free(p->health.last_err);
        p->health.last_err = strdup(msg);
    }
}

void health_refilled(struct health *h, struct pool *p)
{
    (void)h;
    p->health.last_ok_ms = clock_ms();
    if (p->health.last_err) {
        log_info("app=%s refilling again (was: %s)", p->cfg.key, p->health.last_err);
        free(p->health.last_err);
        p->health.last_err = NULL;
    }
}

/* What an operator wants to read when an alert resolves. */
static void resolve_message(const struct pool *p, enum alert_kind kind, char *buf, size_t len)
{
    switch (kind) {
    case ALERT_UNDERFLOW:
        snprintf(buf, len, "pool holds IDs again (%" PRIu64 ") and takes are served in full",
                 p->seen.len);
        break;
    case ALERT_LOW:
        snprintf(buf, len, "pool back at or above its low-water mark (%" PRIu64 " >= %" PRIu64 ")",
                 p->seen.len, p->cfg.low_water);
        break;
    case ALERT_STALLED:
        snprintf(buf, len, "refilling again");
        break;
    case ALERT_OFFSET_REGRESSION:
        snprintf(buf, len, "current_offset is above every reserved lease again");
        break;
    case ALERT_INVALID_CONFIG:
        snprintf(buf, len, p->deleted ? "row soft-deleted" : "row fixed; served again");
        break;
    case ALERT_ID_SPACE_CONFLICT:
        snprintf(buf, len,
                 p->deleted ? "row soft-deleted"
                            : "its IDs no longer meet another application's of its id_space");
        break;
    case ALERT_ID_SPACE_EXHAUSTION:
        snprintf(buf, len,
                 "the ID space lasts again: offsets below 90%% of 2^63-1, space left, and no "
                 "runway below id-space-warn-days");
        break;
    default:
        snprintf(buf, len, "condition cleared");
        break;
    }
}

/*
 * Feed one observation of an alert condition; on a transition, announce it
 * (alerts.c dedups across daemons through meta). fire_after_ms: how long the
 * condition must hold; it resolves after alert-resolve-ms clear.
 */
static void observe(struct health *h, struct pool *p, enum alert_kind kind, int cond,
                    uint64_t fire_after_ms, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static void observe(struct health *h, struct pool *p, enum alert_kind kind, int cond,
                    uint64_t fire_after_ms, const char *fmt, ...)
{
    struct pool_health *ph = &p->health;
    enum alert_change ch =
        alert_observe(&ph->alert[kind], cond, clock_ms(), fire_after_ms, (uint64_t)h->resolve_ms);
    char msg[384], *extra = NULL;
    cJSON *x;
    va_list ap;

    if (ch == ALERT_NONE)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* The pool's state goes along with the event (sizes are far below 2^53). */
    if (p->seen.len_known && (x = cJSON_CreateObject())) {
        cJSON_AddNumberToObject(x, "pool_length", (double)p->seen.len);
        cJSON_AddNumberToObject(x, "low_water", (double)p->cfg.low_water);
        cJSON_AddNumberToObject(x, "max_pool_size", (double)p->cfg.max_pool);
        extra = cJSON_PrintUnformatted(x);
        cJSON_Delete(x);
    }
    if (ch == ALERT_RESOLVE)
        resolve_message(p, kind, msg, sizeof(msg));
    free(ph->msg[kind]);
    ph->msg[kind] = ch == ALERT_FIRE ? strdup(msg) : NULL;
    if (ch == ALERT_FIRE && !node_ready(nodemap_for_key(h->map, p->k_meta)))
        ph->unsynced |= 1u << kind;
    else
        ph->unsynced &= ~(1u << kind);
    alerts_emit(h->alerts, p->cfg.key, p->k_meta, kind, ch == ALERT_FIRE, msg, extra);
    cJSON_free(extra);
}

/* Since when the pool has had no reason to stall: last healthy, or since served. */
static uint64_t ok_since(const struct pool *p)
{
    return p->health.last_ok_ms > p->live_since_ms ? p->health.last_ok_ms : p->live_since_ms;
}

void health_pool_ok(struct pool *p)
{
    p->health.last_ok_ms = clock_ms(); /* for 'stalled': the pool was fine until now */
    p->health.low_checks = 0;
}

void health_served(struct pool *p)
{
    p->health.last_ok_ms = 0; /* underflow and low watch a pool once it was full */
    p->health.low_checks = 0;
}

void health_check(struct health *h, struct pool *p, uint64_t prev_underflows, int underflow_in_meta,
                  int rebuilding)
{
    struct pool_health *ph = &p->health;
    uint64_t now = clock_ms(), len = p->seen.len, lw = p->cfg.low_water;
    uint64_t ref = ok_since(p);
    int new_underflows = p->seen.counters_known && p->c.underflows > prev_underflows;
    int grace;

    if (!rebuilding)
        ph->rebuild_ms = 0;
    else if (!ph->rebuild_ms)
        ph->rebuild_ms = now;
    /* a pool discarded and being refilled is not dry: no page unless that takes past stall-ms */
    grace = ph->rebuild_ms && now - ph->rebuild_ms < (uint64_t)h->stall_ms;

    if (len >= lw) {
        ph->last_ok_ms = now;
        ph->low_checks = 0;
    } else if (ph->low_checks < 2) {
        ph->low_checks++;
    }
    observe(h, p, ALERT_UNDERFLOW,
            !grace && ((ph->last_ok_ms && len == 0) || new_underflows ||
                       (underflow_in_meta && !ph->alert[ALERT_UNDERFLOW].firing)),
            0, "pool ran dry: %s (pool %" PRIu64 ", low water %" PRIu64 ")",
            new_underflows ? "takes got short or empty replies" : "the pool is empty", len, lw);
    /* Low at two status reads in a row, i.e. still low after the refill the first one
     * started: one check landing in the dip before a refill is not a shortage. */
    observe(h, p, ALERT_LOW, !grace && ph->last_ok_ms && ph->low_checks >= 2,
            1000 + 2 * p->cfg.interval_ms,
            "pool stays below its low-water mark after refilling: %" PRIu64 " < %" PRIu64
            " (refill cannot keep up with consumption)",
            len, lw);
    /* A check interval longer than stall-ms must not look like a stall by itself. */
    observe(h, p, ALERT_STALLED, len < lw && now - ref > (uint64_t)h->stall_ms + p->cfg.interval_ms,
            0,
            "no IDs pushed for %" PRIu64 " ms while the pool needs them (%" PRIu64
            " < low water %" PRIu64 ")%s%s",
            now - ref, len, lw, ph->last_err ? ": " : "", ph->last_err ? ph->last_err : "");
    observe(h, p, ALERT_OFFSET_REGRESSION, 0, 0, "-");
    observe(h, p, ALERT_ID_SPACE_CONFLICT, ph->lease_conflict, 0, "-");
}

void health_unreachable(struct health *h, struct pool *p, uint64_t now_ms, const char *why)
{
    uint64_t ref = ok_since(p);

    observe(h, p, ALERT_STALLED, now_ms - ref > (uint64_t)h->stall_ms, 0,
            "no IDs pushed for %" PRIu64 " ms: %s", now_ms - ref, why);
}

int health_pending(const struct pool *p)
{
    for (int k = 0; k < ALERT_COUNT; k++)
        if (p->health.alert[k].firing || p->health.alert[k].cond)
            return 1;
    return 0;
}

void health_leased(struct health *h, struct pool *p, const struct store_lease *lease)
{
    p->health.space_exhausted = 0;
    if (p->health.lease_conflict)
        log_info("app=%s id_space: a lease was reserved again (its IDs no longer meet another "
                 "application's)",
                 p->cfg.key);
    p->health.lease_conflict = 0;
    if (!lease->regression)
        return;
    observe(h, p, ALERT_OFFSET_REGRESSION, 1, 0,
            "current_offset %" PRIu64 " is below the %" PRIu64
            " already reserved; kept the higher value",
            lease->seen_offset, lease->max_leased);
    log_warn("app=%s offset_regression: current_offset %" PRIu64 " is below the %" PRIu64
             " already reserved; kept the higher value",
             p->cfg.key, lease->seen_offset, lease->max_leased);
}

void health_exhausted(struct health *h, struct pool *p, const char *why)
{
    p->health.space_exhausted = 1;
    observe(h, p, ALERT_ID_SPACE_EXHAUSTION, 1, 0, "%s", why);
}

/* The pool-health alerts of an application that is not served: nothing to watch. */
static void pool_alerts_idle(struct health *h, struct pool *p)
{
    observe(h, p, ALERT_UNDERFLOW, 0, 0, "-");
    observe(h, p, ALERT_LOW, 0, 0, "-");
    observe(h, p, ALERT_STALLED, 0, 0, "-");
}

void health_conflict(struct health *h, struct pool *p, const char *why)
{
    p->health.lease_conflict = 1;
    p->health.conflict_ms = clock_ms();
    observe(h, p, ALERT_ID_SPACE_CONFLICT, 1, 0, "%s", why);
}

void health_row_invalid(struct health *h, struct pool *p, const char *err)
{
    pool_alerts_idle(h, p);
    p->health.lease_conflict = 0;
    observe(h, p, ALERT_ID_SPACE_CONFLICT, 0, 0, "-");
    observe(h, p, ALERT_INVALID_CONFIG, 1, 0, "%s", err);
}

void health_row_conflict(struct health *h, struct pool *p, const char *err)
{
    pool_alerts_idle(h, p);
    observe(h, p, ALERT_INVALID_CONFIG, 0, 0, "-");
    observe(h, p, ALERT_ID_SPACE_CONFLICT, 1, 0, "%s", err);
}

void health_row_deleted(struct health *h, struct pool *p)
{
    pool_alerts_idle(h, p);
    p->health.lease_conflict = 0;
    observe(h, p, ALERT_INVALID_CONFIG, 0, 0, "-");
    observe(h, p, ALERT_ID_SPACE_CONFLICT, 0, 0, "-");
}

/*
 * id_space_exhaustion of a served row: its offset is near the end of the ID
 * space, a reservation found none left, or at the rate its leases grew the
 * space runs out within id-space-warn-days (runway.h).
 */
static void space_observe(struct health *h, struct pool *p, const struct app_cfg *cfg)
{
    uint64_t left = runway_space_left(cfg, &p->ledger);
    double growth = runway_growth_per_day(&p->ledger), days = runway_space_days(left, growth);
    int soon = h->warn_days > 0 && days == days && days < (double)h->warn_days;
    char ceiling[48];

    app_ceiling_text(cfg, ceiling, sizeof(ceiling));
    if (cfg->space_warning || p->health.space_exhausted || !soon)
        observe(h, p, ALERT_ID_SPACE_EXHAUSTION,
                cfg->space_warning || p->health.space_exhausted || soon, 0,
                "%s %" PRIu64 " is above 90%% of %s or leaves less than one full pool below "
                "it: the ID space will run out",
                cfg->space_field, cfg->space_base, ceiling);
    else
        observe(h, p, ALERT_ID_SPACE_EXHAUSTION, 1, 0,
                "the ID space runs out in about %.1f days at the rate the leases grew over the "
                "last %d days (%.0f IDs a day, %" PRIu64 " left up to %s): below "
                "id-space-warn-days %d",
                days, RUNWAY_WINDOW_DAYS, growth, left, ceiling, h->warn_days);
}

void health_row_valid(struct health *h, struct pool *p, const struct app_cfg *cfg,
                      const char *memory)
{
    observe(h, p, ALERT_INVALID_CONFIG, 0, 0, "-");
    observe(h, p, ALERT_ID_SPACE_CONFLICT, p->health.lease_conflict, 0, "-");
    observe(h, p, ALERT_POOL_MEMORY, memory != NULL, 0, "%s", memory ? memory : "-");
    space_observe(h, p, cfg);
}

void health_space(struct health *h, struct pool *p)
{
    space_observe(h, p, &p->cfg);
}

void health_adopt(struct health *h, struct pool *p, unsigned firing_in_meta)
{
    struct pool_health *ph = &p->health;
    uint64_t now = clock_ms();

    (void)h;
    ph->adopted = 1;
    for (int k = 0; k < ALERT_COUNT; k++) {
        struct alert_track *t = &ph->alert[k];
        if (!(firing_in_meta & (1u << k)) || t->firing)
            continue;
        /* as if it fired here: it resolves after alert-resolve-ms with its condition clear */
        t->firing = 1;
        t->cond = 1;
        t->since_ms = now;
        free(ph->msg[k]);
        ph->msg[k] = strdup("firing in meta when this instance started (adopted)");
        log_info("app=%s alert %s found firing in meta (left by another instance): adopted; "
                 "resolved here once its condition is clear",
                 p->cfg.key, alert_name((enum alert_kind)k));
    }
}

/* Resolve every firing alert at once (the row is gone). */
void health_row_removed(struct health *h, struct pool *p)
{
    for (int k = 0; k < ALERT_COUNT; k++) {
        struct alert_track *t = &p->health.alert[k];
        if (!t->firing)
            continue;
        t->firing = 0;
        t->cond = 0;
        alerts_emit(h->alerts, p->cfg.key, p->k_meta, (enum alert_kind)k, 0,
                    "application row removed from the table", NULL);
    }
}

void health_resync(struct health *h, struct pool *p)
{
    struct pool_health *ph = &p->health;

    for (int k = 0; k < ALERT_COUNT; k++)
        if ((ph->unsynced & (1u << k)) && ph->alert[k].firing)
            alerts_sync(h->alerts, p->cfg.key, p->k_meta, (enum alert_kind)k,
                        ph->msg[k] ? ph->msg[k] : "");
    ph->unsynced = 0;
}
