#include "metrics.h"

#include "sbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the metric definitions, from the lists in metrics.h ---- */

enum metric_type { MT_COUNTER, MT_GAUGE, MT_HISTOGRAM };
static const char *const type_names[] = {"counter", "gauge", "histogram"};

enum metric_shape { SH_ONE, SH_BUILD, SH_HIST, SH_ALERTS, SH_SENT, SH_CLUS, SH_NODES };

/* One sample value: integers are printed exactly, floats in shortest form. */
struct mval {
    int is_float;
    uint64_t u;
    double f;
};

#define U(x)     ((struct mval){0, (uint64_t)(x), 0.0})
#define F(x)     ((struct mval){1, 0, (double)(x)})
#define VALID(v) ((v)->invalid == NULL && (v)->cfg != NULL)

struct metric_def {
    const char *name;
    enum metric_type type;
    const char *help;
    enum metric_shape shape;
    const char *labels; /* fixed label pairs, "" for none */
};

enum {
#define X(id, name, type, help, shape, labels, value) MD_##id,
    METRICS_DAEMON(X)
#undef X
        MD_COUNT
};

enum {
#define X(id, name, type, help, shape, labels, when, value) MA_##id,
    METRICS_APP(X)
#undef X
        MA_COUNT
};

static const struct metric_def daemon_defs[MD_COUNT] = {
#define X(id, name, type, help, shape, labels, value) {name, MT_##type, help, SH_##shape, labels},
    METRICS_DAEMON(X)
#undef X
};

static const struct metric_def app_defs[MA_COUNT] = {
#define X(id, name, type, help, shape, labels, when, value)                                        \
    {name, MT_##type, help, SH_##shape, labels},
    METRICS_APP(X)
#undef X
};

static const char *const alert_names[ALERT_COUNT] = {
#define X(id, name) name,
    ALERT_KINDS(X)
#undef X
};

/* Histogram bucket bounds as written in STATUS_LATENCY_BUCKETS. */
static const char *const latency_le[STATUS_NLATENCY] = {
#define X(b) #b,
    STATUS_LATENCY_BUCKETS(X)
#undef X
};

/* nv: the node of a NODES series (NULL for the others, which do not read it). */
static struct mval daemon_value(int id, const struct daemon_view *d, const struct node_view *nv)
{
    (void)nv;
    switch (id) {
#define X(id, name, type, help, shape, labels, value)                                              \
    case MD_##id:                                                                                  \
        return value;
        METRICS_DAEMON(X)
#undef X
    }
    return U(0);
}

static int app_has(int id, const struct app_view *v)
{
    switch (id) {
#define X(id, name, type, help, shape, labels, when, value)                                        \
    case MA_##id:                                                                                  \
        return (when);
        METRICS_APP(X)
#undef X
    }
    return 0;
}

/* Only called when app_has(id, v): `when` guards what `value` dereferences. */
static struct mval app_value(int id, const struct app_view *v, int k)
{
    (void)k;
    switch (id) {
#define X(id, name, type, help, shape, labels, when, value)                                        \
    case MA_##id:                                                                                  \
        return value;
        METRICS_APP(X)
#undef X
    }
    return U(0);
}

/* ---- rendering ---- */

/* A float in the shortest form that reads back exactly; NaN and +-Inf as Prometheus spells them. */
static void put_float(struct sbuf *b, double x)
{
    char buf[40];

    if (isnan(x)) {
        sbuf_puts(b, "NaN");
        return;
    }
    if (isinf(x)) {
        sbuf_puts(b, x > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    sbuf_puts(b, buf);
}

static void put_value(struct sbuf *b, struct mval v)
{
    if (v.is_float)
        put_float(b, v.f);
    else
        sbuf_printf(b, "%llu", (unsigned long long)v.u);
}

/* "# HELP" text: backslash and newline escaped. */
static void put_help(struct sbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            sbuf_puts(b, "\\\\");
        else if (*s == '\n')
            sbuf_puts(b, "\\n");
        else
            sbuf_append(b, s, 1);
    }
}

static void render_histogram(struct sbuf *b, const char *name, const struct daemon_view *d)
{
    uint64_t count = d->refill_latency_count, cum = 0;

    for (int i = 0; i < STATUS_NLATENCY; i++) {
        cum += d->refill_latency[i];
        /* Clamped, so buckets never exceed +Inf even if the view is inconsistent. */
        sbuf_printf(b, "%s_bucket{le=\"%s\"} %llu\n", name, latency_le[i],
                    (unsigned long long)(cum < count ? cum : count));
    }
    sbuf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)count);
    sbuf_printf(b, "%s_sum ", name);
    put_float(b, d->refill_latency_sum);
    sbuf_printf(b, "\n%s_count %llu\n", name, (unsigned long long)count);
}

static void render_daemon_series(struct sbuf *b, int id, const struct daemon_view *d)
{
    const struct metric_def *m = &daemon_defs[id];

    switch (m->shape) {
    case SH_HIST:
        render_histogram(b, m->name, d);
        return;
    case SH_SENT:
        if (!d->sentinel) /* no series: a family without series is left out */
            return;
        sbuf_printf(b, "%s ", m->name);
        break;
    case SH_CLUS:
        if (!d->cluster)
            return;
        sbuf_puts(b, m->name);
        if (m->labels[0])
            sbuf_printf(b, "{%s}", m->labels);
        sbuf_puts(b, " ");
        break;
    case SH_NODES:
        for (size_t i = 0; d->cluster && i < d->nnodes; i++) {
            sbuf_printf(b, "%s{node=\"", m->name);
            sbuf_put_label(b, d->nodes[i].addr);
            sbuf_puts(b, "\"} ");
            put_value(b, daemon_value(id, d, &d->nodes[i]));
            sbuf_puts(b, "\n");
        }
        return;
    case SH_BUILD:
        sbuf_printf(b, "%s{version=\"", m->name);
        sbuf_put_label(b, d->version);
        sbuf_puts(b, "\",instance=\"");
        sbuf_put_label(b, d->instance);
        sbuf_puts(b, "\"} ");
        break;
    default:
        sbuf_puts(b, m->name);
        if (m->labels[0])
            sbuf_printf(b, "{%s}", m->labels);
        sbuf_puts(b, " ");
        break;
    }
    put_value(b, daemon_value(id, d, NULL));
    sbuf_puts(b, "\n");
}

/* each_app callback: append this application's series to the buffer of each metric. */
static void render_app_series(const struct app_view *v, void *arg)
{
    struct sbuf *series = arg;

    if (v->bad_key) /* counted in idpool_applications{state="invalid"}; no series of its own */
        return;
    for (int id = 0; id < MA_COUNT; id++) {
        const struct metric_def *m = &app_defs[id];
        struct sbuf *b = &series[id];

        if (!app_has(id, v))
            continue;
        for (int k = 0; k < (m->shape == SH_ALERTS ? ALERT_COUNT : 1); k++) {
            sbuf_printf(b, "%s{app=\"", m->name);
            sbuf_put_label(b, v->key);
            sbuf_puts(b, "\"");
            if (m->shape == SH_ALERTS)
                sbuf_printf(b, ",alert=\"%s\"", alert_names[k]);
            if (m->labels[0])
                sbuf_printf(b, ",%s", m->labels);
            sbuf_puts(b, "} ");
            put_value(b, app_value(id, v, k));
            sbuf_puts(b, "\n");
        }
    }
}

/*
 * Append the families of defs[0..n) with their series: adjacent entries of
 * one name form one family, so each family gets exactly one HELP and TYPE
 * line and its series are never interleaved with another family's.
 */
static void put_families(struct sbuf *out, const struct metric_def *defs, struct sbuf *series,
                         int n)
{
    for (int i = 0, j; i < n; i = j) {
        size_t len = 0;

        for (j = i; j < n && strcmp(defs[j].name, defs[i].name) == 0; j++)
            len += series[j].len;
        if (len == 0)
            continue;
        sbuf_printf(out, "# HELP %s ", defs[i].name);
        put_help(out, defs[i].help);
        sbuf_printf(out, "\n# TYPE %s %s\n", defs[i].name, type_names[defs[i].type]);
        for (int k = i; k < j; k++)
            if (series[k].len)
                sbuf_append(out, series[k].p, series[k].len);
    }
}

int metrics_render(const struct status_source *src, struct sbuf *out)
{
    struct daemon_view d;
    struct sbuf dseries[MD_COUNT], aseries[MA_COUNT];
    int failed = 0;

    memset(&d, 0, sizeof(d));
    src->daemon(src->ctx, &d);
    for (int i = 0; i < MD_COUNT; i++) {
        sbuf_init(&dseries[i]);
        render_daemon_series(&dseries[i], i, &d);
    }
    for (int i = 0; i < MA_COUNT; i++)
        sbuf_init(&aseries[i]);
    src->each_app(src->ctx, render_app_series, aseries);

    put_families(out, daemon_defs, dseries, MD_COUNT);
    put_families(out, app_defs, aseries, MA_COUNT);

    for (int i = 0; i < MD_COUNT; i++) {
        failed |= dseries[i].failed;
        sbuf_free(&dseries[i]);
    }
    for (int i = 0; i < MA_COUNT; i++) {
        failed |= aseries[i].failed;
        sbuf_free(&aseries[i]);
    }
    return failed || out->failed ? -1 : 0;
}
