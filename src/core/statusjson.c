#include "statusjson.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"
#include "runway.h"
#include "sbuf.h"

/*
 * The cJSON add functions return NULL when out of memory (and accept a NULL
 * object); the helpers below record that in *bad, and the caller discards
 * the whole document at the end instead of checking every call.
 */

static void add_item(cJSON *o, const char *name, cJSON *item, int *bad)
{
    if (item == NULL || !cJSON_AddItemToObject(o, name, item)) {
        cJSON_Delete(item);
        *bad = 1;
    }
}

static void add_num(cJSON *o, const char *name, double x, int *bad)
{
    if (!cJSON_AddNumberToObject(o, name, x))
        *bad = 1;
}

static void add_bool(cJSON *o, const char *name, int x, int *bad)
{
    if (!cJSON_AddBoolToObject(o, name, x))
        *bad = 1;
}

static void add_null(cJSON *o, const char *name, int *bad)
{
    if (!cJSON_AddNullToObject(o, name))
        *bad = 1;
}

/* A string (made valid UTF-8), or null for NULL. */
static void add_str(cJSON *o, const char *name, const char *s, int *bad)
{
    struct sbuf b;
    char *clean;

    if (s == NULL) {
        add_null(o, name, bad);
        return;
    }
    sbuf_init(&b);
    sbuf_put_utf8(&b, s);
    clean = sbuf_detach(&b);
    if (clean == NULL || !cJSON_AddStringToObject(o, name, clean))
        *bad = 1;
    free(clean);
}

static void push_str(cJSON *a, const char *s, int *bad)
{
    cJSON *item = cJSON_CreateString(s);

    if (item == NULL || !cJSON_AddItemToArray(a, item)) {
        cJSON_Delete(item);
        *bad = 1;
    }
}

/* A 64-bit value as a decimal string: exact, unlike a JSON number above 2^53. */
static void add_u64str(cJSON *o, const char *name, uint64_t x, int *bad)
{
    char buf[24];

    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)x);
    if (!cJSON_AddStringToObject(o, name, buf))
        *bad = 1;
}

/* Rounded to 2 decimals for people; x >= 0. */
static double round2(double x)
{
    if (!(x >= 0) || x > 1e15)
        return x;
    return (double)(uint64_t)(x * 100.0 + 0.5) / 100.0;
}

/* Unix milliseconds as RFC 3339 UTC with milliseconds, e.g. 2024-06-01T12:00:00.250Z. */
static void add_time(cJSON *o, const char *name, uint64_t unix_ms, int *bad)
{
    char buf[48];
    time_t sec = (time_t)(unix_ms / 1000);
    struct tm tm;
    size_t n;

    if (unix_ms == 0 || gmtime_r(&sec, &tm) == NULL ||
        (n = strftime(buf, sizeof(buf) - 6, "%Y-%m-%dT%H:%M:%S", &tm)) == 0) {
        add_null(o, name, bad);
        return;
    }
    snprintf(buf + n, sizeof(buf) - n, ".%03uZ", (unsigned)(unix_ms % 1000));
    if (!cJSON_AddStringToObject(o, name, buf))
        *bad = 1;
}

/* A finite number (rounded to 2 decimals), or null for +Inf (never) and NaN (unknown). */
static void add_finite(cJSON *o, const char *name, double x, int *bad)
{
    if (isfinite(x))
        add_num(o, name, round2(x), bad);
    else
        add_null(o, name, bad);
}

static cJSON *config_json(const struct app_cfg *c, int *bad)
{
    cJSON *o = cJSON_CreateObject();

    add_str(o, "name", c->name, bad);
    if (!cJSON_AddStringToObject(o, "type", c->type == APP_TREND ? "trend" : "monotonic"))
        *bad = 1;
    add_u64str(o, "start_offset", c->start_offset, bad);
    add_u64str(o, "current_offset", c->current_offset, bad);
    add_num(o, "step", (double)c->step, bad);
    add_num(o, "max_pool_size", (double)c->max_pool, bad);
    add_num(o, "low_water", (double)c->low_water, bad);
    add_num(o, "min_size_percent", (double)c->min_percent, bad);
    add_num(o, "max_size_per_times", (double)c->per_take, bad);
    add_num(o, "max_size_per_second", (double)c->per_second, bad);
    add_num(o, "interval_ms", (double)c->interval_ms, bad);
    add_num(o, "delta", (double)c->delta, bad);
    add_num(o, "remainder", (double)c->remainder, bad);
    add_num(o, "increment_max", (double)c->increment_max, bad);
    /* the ceiling, a decimal string as IDs are; null: none below 2^63-1 */
    if (c->max_id != 0)
        add_u64str(o, "max_id", c->max_id, bad);
    else
        add_null(o, "max_id", bad);
    add_str(o, "id_space", c->id_space, bad); /* "": its own */
    return o;
}

static cJSON *lease_json(const struct app_view *v, int *bad)
{
    cJSON *o = cJSON_CreateObject();

    add_u64str(o, "next", v->lease.next, bad);
    add_u64str(o, "hi", v->lease.hi, bad);
    if (gen_has_next(&v->lease)) {
        add_u64str(o, "next_lo", v->lease.nlo, bad);
        add_u64str(o, "next_hi", v->lease.nhi, bad);
    } else {
        add_null(o, "next_lo", bad);
        add_null(o, "next_hi", bad);
    }
    add_u64str(o, "remaining", v->lease_remaining, bad);
    return o;
}

/* Counters: the COUNTER entries of METRICS_APP, keyed by their ids. */
#define U(x)                 ((double)(x))
#define F(x)                 ((double)(x))
#define VALID(v)             ((v)->invalid == NULL && (v)->cfg != NULL)
#define IS_COUNTER_COUNTER   1
#define IS_COUNTER_GAUGE     0
#define IS_COUNTER_HISTOGRAM 0

static cJSON *counters_json(const struct app_view *v, int *bad)
{
    cJSON *o = cJSON_CreateObject();
    const int k = 0; /* for the per-alert entries, which are not counters */

    (void)k;
#define X(id, name, type, help, shape, labels, when, value)                                        \
    if (IS_COUNTER_##type)                                                                         \
        add_num(o, #id, value, bad);
    METRICS_APP(X)
#undef X
    return o;
}

static cJSON *alerts_json(const struct app_view *v, int *bad)
{
    static const char *const names[ALERT_COUNT] = {
#define X(id, name) name,
        ALERT_KINDS(X)
#undef X
    };
    cJSON *a = cJSON_CreateArray();

    for (int k = 0; k < ALERT_COUNT; k++)
        if (v->alerts[k])
            push_str(a, names[k], bad);
    return a;
}

/*
 * How long the application lasts (runway.h): pool_s and id_space_days, null
 * when nothing is consumed or grows, or the numbers are unknown or stale;
 * with what they come from, the ID space left (a string: it exceeds 2^53)
 * and the ledger's growth a day.
 */
static cJSON *runway_json(const struct app_view *v, int *bad)
{
    cJSON *o = cJSON_CreateObject();

    if (!VALID(v)) {
        add_null(o, "pool_s", bad);
        add_null(o, "id_space_days", bad);
        add_null(o, "id_space_left", bad);
        add_null(o, "growth_ids_per_day", bad);
        return o;
    }
    add_finite(o, "pool_s", v->runway_pool_s, bad);
    add_finite(o, "id_space_days", v->runway_space_days, bad);
    add_u64str(o, "id_space_left", v->space_left, bad);
    add_finite(o, "growth_ids_per_day", v->growth_per_day, bad);
    return o;
}

cJSON *statusjson_app(const struct app_view *v)
{
    cJSON *o = cJSON_CreateObject(), *pool;
    int bad = 0;

    if (o == NULL)
        return NULL;
    add_str(o, "key", v->key, &bad);
    add_num(o, "id", (double)v->id, &bad);
    add_str(o, "node", v->node, &bad);
    add_bool(o, "served", v->served, &bad);
    add_bool(o, "deleted", v->deleted, &bad);
    add_str(o, "invalid", v->invalid, &bad);
    /* An invalid row's cfg may be unusable (status.h). */
    if (VALID(v))
        add_item(o, "config", config_json(v->cfg, &bad), &bad);
    else
        add_null(o, "config", &bad);

    pool = cJSON_CreateObject();
    if (v->len_known) {
        add_num(pool, "length", (double)v->pool_len, &bad);
        add_num(pool, "fill_pct", round2(v->fill_pct), &bad);
    } else {
        add_null(pool, "length", &bad);
        add_null(pool, "fill_pct", &bad);
    }
    /* Redis unreachable: the length is the last one seen, the rate unknown (not frozen) */
    add_bool(pool, "stale", v->stale, &bad);
    add_item(o, "pool", pool, &bad);
    if (v->stale)
        add_null(o, "rate_ids_per_s", &bad);
    else
        add_num(o, "rate_ids_per_s", round2(v->rate), &bad);
    if (v->lease_known)
        add_item(o, "lease", lease_json(v, &bad), &bad);
    else
        add_null(o, "lease", &bad);
    if (v->reserve_hi) {
        cJSON *r = cJSON_CreateObject();
        add_u64str(r, "lo", v->reserve_lo, &bad);
        add_u64str(r, "hi", v->reserve_hi, &bad);
        add_item(o, "failover_reserve", r, &bad);
    } else {
        add_null(o, "failover_reserve", &bad);
    }
    add_item(o, "runway", runway_json(v, &bad), &bad);
    add_item(o, "counters", counters_json(v, &bad), &bad);
    add_time(o, "last_refill", v->last_refill_unix_ms, &bad);
    add_str(o, "last_error", v->last_error, &bad);
    add_item(o, "alerts", alerts_json(v, &bad), &bad);
    if (bad) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Application objects collected in one each_app pass, then sorted by key. */
struct collect {
    cJSON **items;
    size_t n, cap;
    int bad;
};

static void collect_app(const struct app_view *v, void *arg)
{
    struct collect *c = arg;
    cJSON *o;

    if (c->bad)
        return;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        cJSON **items = realloc(c->items, cap * sizeof(*items));

        if (items == NULL) {
            c->bad = 1;
            return;
        }
        c->items = items;
        c->cap = cap;
    }
    o = statusjson_app(v);
    if (o == NULL) {
        c->bad = 1;
        return;
    }
    c->items[c->n++] = o;
}

static int by_key(const void *a, const void *b)
{
    const char *x =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(*(cJSON *const *)a, "key"));
    const char *y =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(*(cJSON *const *)b, "key"));

    return strcmp(x ? x : "", y ? y : "");
}

/* The Redis Cluster's part of /healthz: the slot table in use and each primary. */
static cJSON *cluster_json(const struct daemon_view *d, int *bad)
{
    cJSON *c = cJSON_CreateObject(), *r, *nodes;

    add_num(c, "slots_unowned", (double)d->cluster_unowned, bad);
    add_num(c, "refreshes", (double)d->cluster_refreshes, bad);
    r = cJSON_CreateObject();
    add_num(r, "moved", (double)d->cluster_moved, bad);
    add_num(r, "ask", (double)d->cluster_asks, bad);
    add_num(r, "tryagain", (double)d->cluster_tryagains, bad);
    add_num(r, "clusterdown", (double)d->cluster_downs, bad);
    add_item(c, "redirects", r, bad);
    nodes = cJSON_CreateArray();
    for (size_t i = 0; i < d->nnodes; i++) {
        cJSON *n = cJSON_CreateObject();
        add_str(n, "node", d->nodes[i].addr, bad);
        add_bool(n, "up", d->nodes[i].up, bad);
        add_num(n, "slots", (double)d->nodes[i].slots, bad);
        if (n == NULL || !cJSON_AddItemToArray(nodes, n)) {
            cJSON_Delete(n);
            *bad = 1;
        }
    }
    add_item(c, "nodes", nodes, bad);
    return c;
}

/* The one_app callback: the object, or NULL (out of memory). */
static void one_app(const struct app_view *v, void *arg)
{
    *(cJSON **)arg = statusjson_app(v);
}

enum statusjson_result statusjson_apps(const struct status_source *src, const char *key, char **out)
{
    cJSON *doc = NULL;

    *out = NULL;
    if (key != NULL) {
        if (src->one_app(src->ctx, key, one_app, &doc) < 0)
            return STATUSJSON_NOT_FOUND;
    } else {
        struct collect c = {NULL, 0, 0, 0};

        src->each_app(src->ctx, collect_app, &c);
        /* each_app promises key order; sort anyway, it is cheap. */
        if (!c.bad && c.n > 1)
            qsort(c.items, c.n, sizeof(*c.items), by_key);
        doc = c.bad ? NULL : cJSON_CreateArray();
        for (size_t i = 0; i < c.n; i++) {
            if (doc == NULL || !cJSON_AddItemToArray(doc, c.items[i])) {
                cJSON_Delete(c.items[i]);
                cJSON_Delete(doc);
                doc = NULL;
            }
        }
        free(c.items);
    }
    if (doc == NULL)
        return STATUSJSON_ERROR;
    *out = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    return *out ? STATUSJSON_OK : STATUSJSON_ERROR;
}

char *statusjson_health(const struct status_source *src, int *healthy)
{
    struct daemon_view d;
    cJSON *o = cJSON_CreateObject(), *apps, *reasons;
    char *text = NULL;
    int bad = 0;

    memset(&d, 0, sizeof(d));
    src->daemon(src->ctx, &d);
    *healthy = d.redis_up && d.mysql_up && d.rows_loaded && !d.mysql_denied[0];
    if (o == NULL)
        return NULL;
    if (!cJSON_AddStringToObject(o, "status", *healthy ? "ok" : "unavailable"))
        bad = 1;
    if (!*healthy) {
        reasons = cJSON_AddArrayToObject(o, "reasons");
        if (reasons == NULL)
            bad = 1;
        if (!d.redis_up)
            push_str(reasons, "redis down", &bad);
        if (!d.redis_up && d.sentinel && !d.sentinel_up)
            push_str(reasons, "no sentinel answers", &bad);
        for (size_t i = 0; !d.redis_up && d.cluster && i < d.nnodes; i++) {
            char why[sizeof(d.nodes[i].addr) + 32];
            if (d.nodes[i].up)
                continue;
            snprintf(why, sizeof(why), "redis node %s down", d.nodes[i].addr);
            push_str(reasons, why, &bad);
        }
        if (d.cluster && d.cluster_unowned) {
            char why[64];
            snprintf(why, sizeof(why), "%zu cluster slots without a primary", d.cluster_unowned);
            push_str(reasons, why, &bad);
        }
        if (!d.mysql_up)
            push_str(reasons,
                     d.mysql_schema_missing ? "mysql schema not loaded: load sql/schema.sql"
                                            : "mysql down",
                     &bad);
        if (d.mysql_denied[0]) { /* its own reason: MySQL is up, a grant is missing */
            char why[sizeof(d.mysql_denied) + 8];
            snprintf(why, sizeof(why), "mysql: %s", d.mysql_denied);
            push_str(reasons, why, &bad);
        }
        if (!d.rows_loaded)
            push_str(reasons, "application rows not loaded", &bad);
    }
    add_str(o, "version", d.version, &bad);
    add_str(o, "instance", d.instance, &bad);
    add_bool(o, "redis_up", d.redis_up, &bad);
    if (d.sentinel) {
        cJSON *s = cJSON_AddObjectToObject(o, "sentinel");
        bad |= s == NULL;
        add_str(s, "master", d.redis_master, &bad);
        add_str(s, "primary", d.redis_primary[0] ? d.redis_primary : NULL, &bad);
        add_bool(s, "up", d.sentinel_up, &bad);
        add_num(s, "failovers", (double)d.redis_failovers, &bad);
    }
    if (d.cluster)
        add_item(o, "cluster", cluster_json(&d, &bad), &bad);
    add_bool(o, "mysql_up", d.mysql_up, &bad);
    add_bool(o, "rows_loaded", d.rows_loaded, &bad);
    apps = cJSON_AddObjectToObject(o, "apps");
    add_num(apps, "served", (double)d.apps_served, &bad);
    add_num(apps, "invalid", (double)d.apps_invalid, &bad);
    add_num(apps, "deleted", (double)d.apps_deleted, &bad);
    add_time(o, "started", d.started_unix_ms, &bad);
    if (!bad)
        text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}
