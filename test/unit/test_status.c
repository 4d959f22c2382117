/*
 * Unit tests of the status renderers, /metrics (metrics.c) and the JSON of
 * /v1/apps and /healthz (statusjson.c), from a fake status source. When
 * promtool is installed the rendered metrics also go through
 * `promtool check metrics`; IDPOOL_METRICS_SAMPLE=FILE keeps a copy.
 */
#include <stdlib.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "metrics.h"
#include "runway.h"
#include "sbuf.h"
#include "statusjson.h"
#include "unit.h"

#define BIG_NEXT 9223372036854775000ULL

/* ---- the fake source ---- */

struct fake {
    struct app_cfg user_cfg, order_cfg, gone_cfg;
    struct app_view apps[4]; /* deliberately not in key order */
    size_t napps;
    struct daemon_view d;
};

static void fake_each(void *ctx, status_app_fn *fn, void *arg)
{
    struct fake *f = ctx;

    for (size_t i = 0; i < f->napps; i++)
        fn(&f->apps[i], arg);
}

static int fake_one(void *ctx, const char *key, status_app_fn *fn, void *arg)
{
    struct fake *f = ctx;

    for (size_t i = 0; i < f->napps; i++) {
        if (strcmp(f->apps[i].key, key) == 0) {
            fn(&f->apps[i], arg);
            return 0;
        }
    }
    return -1;
}

static void fake_daemon(void *ctx, struct daemon_view *out)
{
    *out = ((struct fake *)ctx)->d;
}

static struct app_cfg cfg_of(const char *key, enum app_type type)
{
    struct app_cfg c;

    memset(&c, 0, sizeof(c));
    strcpy(c.key, key);
    strcpy(c.name, "the \"name\"");
    c.id = 1;
    c.type = type;
    c.start_offset = 1000;
    c.step = 1000;
    c.current_offset = BIG_NEXT + 7;
    c.per_take = 1000;
    c.per_second = 5000;
    c.min_percent = 80;
    c.interval_ms = 100;
    c.max_pool = 300000;
    c.low_water = 240000;
    c.delta = 4;
    c.remainder = 1;
    c.increment_max = 3;
    snprintf(c.id_space, sizeof(c.id_space), "%s", "orders");
    return c;
}

static void fake_init(struct fake *f)
{
    struct app_view *v;

    memset(f, 0, sizeof(*f));
    f->user_cfg = cfg_of("user", APP_MONOTONIC);
    f->order_cfg = cfg_of("order", APP_TREND);
    f->order_cfg.max_pool = 10000;
    f->order_cfg.low_water = 8000;
    f->gone_cfg = cfg_of("gone", APP_MONOTONIC);

    /* Served, monotonic, a lease near the top of the ID space, one alert. */
    v = &f->apps[f->napps++];
    v->key = "user";
    v->node = "10.0.0.1:7000";
    v->cfg = &f->user_cfg;
    v->id = 3;
    v->served = 1;
    v->len_known = 1;
    v->pool_len = 225000;
    v->fill_pct = 75.0;
    v->rate = 1234.5678;
    v->lease_known = 1;
    v->lease.next = BIG_NEXT;
    v->lease.hi = BIG_NEXT + 800;
    v->lease_remaining = 800;
    v->c.pushed = 123456789012ULL;
    v->c.refills = 42;
    v->c.lock_busy = 3;
    v->c.fenced = 1;
    v->c.leases = 17;
    v->c.discards = 2;
    v->c.underflows = 5;
    v->c.refused_limit = 6;
    v->c.refused_rate = 7;
    v->c.refused_epoch = 8;
    v->c.taken = 99;
    v->last_refill_unix_ms = 1717243200250ULL; /* 2024-06-01T12:00:00.250Z */
    v->last_error = "redis: timeout";
    v->alerts[ALERT_LOW] = 1;
    v->runway_pool_s = 182.254;
    v->runway_space_days = 1200.5;
    v->growth_per_day = 1e6;
    v->space_left = BIG_NEXT;

    /* Invalid: a key with characters to escape and a cut UTF-8 character; cfg unusable. */
    v = &f->apps[f->napps++];
    v->key = "bad\"key\\x\ny\xc3";
    v->cfg = NULL;
    v->id = 9;
    v->invalid = "application 'bad' (id 9): step: must be 1..1000000, got 0";
    v->alerts[ALERT_INVALID_CONFIG] = 1;

    /* Served, trend, pool length not known yet, a prefetched lease, never refilled. */
    v = &f->apps[f->napps++];
    v->key = "order";
    v->cfg = &f->order_cfg;
    v->id = 4;
    v->served = 1;
    v->rate = 0.1 + 0.2; /* not exact in binary: the float formatting */
    v->lease_known = 1;
    v->lease.next = 5000;
    v->lease.hi = 6000;
    v->lease.nlo = 6000;
    v->lease.nhi = 9000;
    v->lease_remaining = 4000;
    v->reserve_lo = 20000; /* a failover reserve held */
    v->reserve_hi = 26000;
    v->c.reserve_used = 1;
    v->runway_pool_s = RUNWAY_UNKNOWN;   /* length unknown */
    v->runway_space_days = RUNWAY_NEVER; /* no growth measured */
    v->growth_per_day = 0;
    v->space_left = 0;

    /* Soft-deleted. */
    v = &f->apps[f->napps++];
    v->key = "gone";
    v->cfg = &f->gone_cfg;
    v->id = 5;
    v->deleted = 1;
    v->runway_pool_s = RUNWAY_NEVER;       /* nothing consumed */
    v->runway_space_days = RUNWAY_UNKNOWN; /* ledger not read */
    v->growth_per_day = RUNWAY_UNKNOWN;

    f->d.version = "0.1.0";
    f->d.instance = "host\"a\\b";
    f->d.started_unix_ms = 1717243000500ULL;
    f->d.redis_up = 1;
    f->d.mysql_up = 1;
    f->d.rows_loaded = 1;
    f->d.redis_errors = 4;
    f->d.redis_reconnects = 2;
    f->d.mysql_errors = 1;
    f->d.mysql_reconnects = 1;
    f->d.apps_served = 2;
    f->d.apps_invalid = 1;
    f->d.apps_deleted = 1;
    /* 0.001: 1, 0.0025: 2, 0.01: 5, 0.5: 1, +Inf: 3 */
    f->d.refill_latency[0] = 1;
    f->d.refill_latency[1] = 2;
    f->d.refill_latency[3] = 5;
    f->d.refill_latency[8] = 1;
    f->d.refill_latency[STATUS_NLATENCY] = 3;
    f->d.refill_latency_count = 12;
    f->d.refill_latency_sum = 10.125;
}

static struct status_source source_of(struct fake *f)
{
    struct status_source s = {f, fake_each, fake_one, fake_daemon};

    return s;
}

static char *render(struct fake *f)
{
    struct status_source src = source_of(f);
    struct sbuf b;
    int rc;

    sbuf_init(&b);
    rc = metrics_render(&src, &b);
    CHECK(rc == 0);
    return sbuf_detach(&b);
}

/* Number of lines of text equal to line. */
static int count_lines(const char *text, const char *line)
{
    size_t n = strlen(line);
    int count = 0;

    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);

        if (len == n && memcmp(p, line, n) == 0)
            count++;
        p = eol ? eol + 1 : NULL;
    }
    return count;
}

#define CHECK_LINE(text, line)                                                                     \
    do {                                                                                           \
        int c_ = count_lines(text, line);                                                          \
        unit_checks++;                                                                             \
        if (c_ != 1) {                                                                             \
            unit_failures++;                                                                       \
            fprintf(stderr, "%s:%d: line '%s' found %d times\n", __FILE__, __LINE__, line, c_);    \
        }                                                                                          \
    } while (0)

#define CHECK_NO(text, needle)                                                                     \
    do {                                                                                           \
        unit_checks++;                                                                             \
        if (strstr(text, needle)) {                                                                \
            unit_failures++;                                                                       \
            fprintf(stderr, "%s:%d: unexpected '%s'\n", __FILE__, __LINE__, needle);               \
        }                                                                                          \
    } while (0)

/* ---- /metrics ---- */

static void test_metrics_per_app(void)
{
    struct fake f;
    char *m;

    fake_init(&f);
    m = render(&f);
    if (!m)
        return;
    CHECK_LINE(m, "idpool_pool_length{app=\"user\"} 225000");
    CHECK_LINE(m, "idpool_pool_capacity{app=\"user\"} 300000");
    CHECK_LINE(m, "idpool_pool_low_water{app=\"user\"} 240000");
    CHECK_LINE(m, "idpool_pool_fill_ratio{app=\"user\"} 0.75");
    CHECK_LINE(m, "idpool_consumption_ids_per_second{app=\"user\"} 1234.5678");
    CHECK_LINE(m, "idpool_lease_remaining{app=\"user\"} 800");
    CHECK_LINE(m, "idpool_ids_pushed_total{app=\"user\"} 123456789012");
    CHECK_LINE(m, "idpool_refills_total{app=\"user\"} 42");
    CHECK_LINE(m, "idpool_lock_contention_total{app=\"user\"} 3");
    CHECK_LINE(m, "idpool_fenced_pushes_total{app=\"user\"} 1");
    CHECK_LINE(m, "idpool_leases_total{app=\"user\"} 17");
    CHECK_LINE(m, "idpool_pool_discards_total{app=\"user\"} 2");
    CHECK_LINE(m, "idpool_underflows_total{app=\"user\"} 5");
    CHECK_LINE(m, "idpool_takes_refused_total{app=\"user\",reason=\"limit\"} 6");
    CHECK_LINE(m, "idpool_takes_refused_total{app=\"user\",reason=\"rate\"} 7");
    CHECK_LINE(m, "idpool_takes_refused_total{app=\"user\",reason=\"epoch\"} 8");
    CHECK_LINE(m, "idpool_ids_taken_total{app=\"user\"} 99");
    CHECK_LINE(m, "idpool_last_refill_timestamp_seconds{app=\"user\"} 1717243200.25");
    CHECK_LINE(m, "idpool_app_served{app=\"user\"} 1");
    CHECK_LINE(m, "idpool_alert_firing{app=\"user\",alert=\"low\"} 1");
    CHECK_LINE(m, "idpool_alert_firing{app=\"user\",alert=\"underflow\"} 0");
    CHECK_LINE(m, "idpool_alert_firing{app=\"user\",alert=\"id_space_exhaustion\"} 0");
    CHECK_LINE(m, "# TYPE idpool_pool_runway_seconds gauge");
    CHECK_LINE(m, "# TYPE idpool_id_space_runway_seconds gauge");
    CHECK_LINE(m, "idpool_pool_runway_seconds{app=\"user\"} 182.254");
    CHECK_LINE(m, "idpool_id_space_runway_seconds{app=\"user\"} 103723200");
    /* unknown: no series; never: +Inf */
    CHECK_NO(m, "idpool_pool_runway_seconds{app=\"order\"}");
    CHECK_LINE(m, "idpool_id_space_runway_seconds{app=\"order\"} +Inf");
    CHECK_LINE(m, "idpool_pool_runway_seconds{app=\"gone\"} +Inf");
    CHECK_NO(m, "idpool_id_space_runway_seconds{app=\"gone\"}");
    CHECK_NO(m, "idpool_pool_runway_seconds{app=\"bad");

    /* Pool length unknown: no length or fill ratio; never refilled: no timestamp. */
    CHECK_NO(m, "idpool_pool_length{app=\"order\"}");
    CHECK_NO(m, "idpool_pool_fill_ratio{app=\"order\"}");
    CHECK_NO(m, "idpool_last_refill_timestamp_seconds{app=\"order\"}");
    CHECK_LINE(m, "idpool_pool_capacity{app=\"order\"} 10000");
    CHECK_LINE(m, "idpool_consumption_ids_per_second{app=\"order\"} 0.30000000000000004");
    CHECK_LINE(m, "idpool_lease_remaining{app=\"order\"} 4000");
    CHECK_LINE(m, "idpool_failover_reserve_ids{app=\"order\"} 6000");
    CHECK_LINE(m, "idpool_failover_reserve_used_total{app=\"order\"} 1");
    CHECK_LINE(m, "idpool_failover_reserve_ids{app=\"user\"} 0");

    /* Soft-deleted: served 0, the rest still reported. */
    CHECK_LINE(m, "idpool_app_served{app=\"gone\"} 0");
    CHECK_LINE(m, "idpool_pool_capacity{app=\"gone\"} 300000");

    /* Invalid: only app_served and the alerts; the key escaped and made valid UTF-8. */
    CHECK_LINE(m, "idpool_app_served{app=\"bad\\\"key\\\\x\\ny\xef\xbf\xbd\"} 0");
    CHECK_LINE(m, "idpool_alert_firing{app=\"bad\\\"key\\\\x\\ny\xef\xbf\xbd\","
                  "alert=\"invalid_config\"} 1");
    CHECK_LINE(m, "idpool_alert_firing{app=\"bad\\\"key\\\\x\\ny\xef\xbf\xbd\",alert=\"low\"} 0");
    {
        int n = 0;
        const char *p = m;

        while ((p = strstr(p, "{app=\"bad")) != NULL) {
            n++;
            p++;
        }
        CHECK(n == 1 + ALERT_COUNT);
    }
    free(m);
}

static void test_metrics_process(void)
{
    struct fake f;
    char *m;

    fake_init(&f);
    m = render(&f);
    if (!m)
        return;
    CHECK_LINE(m, "idpool_build_info{version=\"0.1.0\",instance=\"host\\\"a\\\\b\"} 1");
    CHECK_LINE(m, "idpool_start_time_seconds 1717243000.5");
    CHECK_LINE(m, "idpool_redis_up 1");
    CHECK_LINE(m, "idpool_mysql_up 1");
    CHECK_LINE(m, "idpool_redis_errors_total 4");
    CHECK_LINE(m, "idpool_redis_reconnects_total 2");
    CHECK_LINE(m, "idpool_mysql_errors_total 1");
    CHECK_LINE(m, "idpool_mysql_reconnects_total 1");
    CHECK_LINE(m, "idpool_applications{state=\"served\"} 2");
    CHECK_LINE(m, "idpool_applications{state=\"invalid\"} 1");
    CHECK_LINE(m, "idpool_applications{state=\"deleted\"} 1");
    CHECK_LINE(m, "# TYPE idpool_refill_duration_seconds histogram");
    /* Cumulative buckets; +Inf == _count. */
    CHECK_LINE(m, "idpool_refill_duration_seconds_bucket{le=\"0.001\"} 1");
    CHECK_LINE(m, "idpool_refill_duration_seconds_bucket{le=\"0.0025\"} 3");
    CHECK_LINE(m, "idpool_refill_duration_seconds_bucket{le=\"0.005\"} 3");
    CHECK_LINE(m, "idpool_refill_duration_seconds_bucket{le=\"0.01\"} 8");
    CHECK_LINE(m, "idpool_refill_duration_seconds_bucket{le=\"0.25\"} 8");
    CHECK_LINE(m, "idpool_refill_duration_seconds_bucket{le=\"0.5\"} 9");
    CHECK_LINE(m, "idpool_refill_duration_seconds_bucket{le=\"2.5\"} 9");
    CHECK_LINE(m, "idpool_refill_duration_seconds_bucket{le=\"+Inf\"} 12");
    CHECK_LINE(m, "idpool_refill_duration_seconds_sum 10.125");
    CHECK_LINE(m, "idpool_refill_duration_seconds_count 12");
    /* redis://: the Sentinel families are left out, HELP and TYPE too */
    CHECK_NO(m, "idpool_sentinel_");
    CHECK_NO(m, "idpool_redis_failovers_total");
    free(m);
}

/* The family of a sample line: its name without a histogram suffix. */
static void family_of(const char *line, size_t len, char *out, size_t outlen)
{
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    size_t n = strcspn(line, "{ ");

    if (n > len)
        n = len;
    if (n >= outlen)
        n = outlen - 1;
    memcpy(out, line, n);
    out[n] = '\0';
    if (strncmp(out, "idpool_refill_duration_seconds", 30) == 0)
        for (size_t i = 0; i < 3; i++) {
            size_t sl = strlen(suffixes[i]);
            if (n > sl && strcmp(out + n - sl, suffixes[i]) == 0)
                out[n - sl] = '\0';
        }
}

/*
 * Structure: every family has exactly one HELP then one TYPE line, directly
 * before its samples, and its samples are not interleaved with another's.
 */
static void check_structure(const char *m)
{
    char seen[64][64], cur[64] = "", fam[64];
    int nseen = 0, state = 0; /* 0: expect HELP, 1: expect TYPE, 2: in samples */

    for (const char *p = m; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);

        CHECK(eol != NULL); /* the text ends with a newline */
        if (strncmp(p, "# HELP ", 7) == 0) {
            family_of(p + 7, len - 7, fam, sizeof(fam));
            for (int i = 0; i < nseen; i++)
                CHECK(strcmp(seen[i], fam) != 0);
            if (nseen < 64)
                strcpy(seen[nseen++], fam);
            strcpy(cur, fam);
            CHECK(state != 1);
            state = 1;
        } else if (strncmp(p, "# TYPE ", 7) == 0) {
            family_of(p + 7, len - 7, fam, sizeof(fam));
            CHECK(state == 1 && strcmp(fam, cur) == 0);
            state = 2;
        } else {
            family_of(p, len, fam, sizeof(fam));
            CHECK(state == 2);
            if (strcmp(fam, cur) != 0)
                fprintf(stderr, "sample of %s inside family %s\n", fam, cur);
            CHECK(strcmp(fam, cur) == 0);
        }
        if (!eol)
            break;
        p = eol + 1;
    }
    CHECK(nseen > 0);
}

static void test_metrics_structure(void)
{
    struct fake f;
    char *m;

    fake_init(&f);
    m = render(&f);
    if (!m)
        return;
    check_structure(m);
    CHECK(count_lines(m, "# TYPE idpool_takes_refused_total counter") == 1);
    CHECK(count_lines(m, "# TYPE idpool_alert_firing gauge") == 1);
    CHECK(count_lines(m, "# TYPE idpool_applications gauge") == 1);
    free(m);

    /* No applications: the process-wide families only. */
    f.napps = 0;
    m = render(&f);
    if (!m)
        return;
    check_structure(m);
    CHECK_LINE(m, "idpool_redis_up 1");
    CHECK_NO(m, "app=");
    CHECK_NO(m, "idpool_pool_length");
    free(m);
}

/* Run text through `promtool check metrics` when promtool is installed. */
static int promtool_check(const char *text, const char *label)
{
    char path[] = "/tmp/idpool-metrics-XXXXXX", cmd[256];
    FILE *fp;
    int fd, rc;

    if (access("/usr/bin/promtool", X_OK) != 0) {
        printf("skip promtool check (%s): /usr/bin/promtool not installed\n", label);
        return 0;
    }
    fd = mkstemp(path);
    if (fd < 0 || (fp = fdopen(fd, "w")) == NULL)
        return -1;
    fputs(text, fp);
    fclose(fp);
    snprintf(cmd, sizeof(cmd), "/usr/bin/promtool check metrics < %s", path);
    rc = system(cmd);
    unlink(path);
    if (rc != 0)
        fprintf(stderr, "promtool check metrics failed on the %s sample\n", label);
    else
        printf("promtool check metrics (%s sample): ok\n", label);
    return rc == 0 ? 0 : -1;
}

static void test_metrics_promtool(void)
{
    struct fake f;
    char *m;
    const char *keep = getenv("IDPOOL_METRICS_SAMPLE");

    fake_init(&f);
    m = render(&f);
    if (!m)
        return;
    CHECK(promtool_check(m, "full") == 0);
    if (keep) {
        FILE *fp = fopen(keep, "w");
        if (fp) {
            fputs(m, fp);
            fclose(fp);
        }
    }
    free(m);
    f.napps = 0;
    m = render(&f);
    if (!m)
        return;
    CHECK(promtool_check(m, "no applications") == 0);
    free(m);
}

static void test_sbuf(void)
{
    struct sbuf b;
    char *s;
    char big[1000];

    sbuf_init(&b);
    s = sbuf_detach(&b);
    CHECK(s && strcmp(s, "") == 0);
    free(s);

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 50; i++)
        sbuf_printf(&b, "%d:%s;", i, big);
    CHECK_EQ_U64(b.len, 50 * (sizeof(big) - 1 + 2) + 10 * 1 + 40 * 2);
    CHECK(b.p[b.len] == '\0');
    sbuf_free(&b);

    sbuf_put_utf8(&b, "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 bad:\x80\xc0\xaf\xed\xa0\x80!");
    CHECK(strcmp(b.p, "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 bad:"
                      "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                      "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd!") == 0);
    sbuf_free(&b);
}

/* ---- JSON ---- */

static const char *jstr(const cJSON *o, const char *name)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));
}

static double jnum(const cJSON *o, const char *name)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);

    return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

static int jnull(const cJSON *o, const char *name)
{
    return cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, name));
}

static int jtrue(const cJSON *o, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, name));
}

static cJSON *apps_doc(struct fake *f, const char *key, enum statusjson_result want)
{
    struct status_source src = source_of(f);
    char *text = NULL;
    cJSON *doc;

    CHECK(statusjson_apps(&src, key, &text) == want);
    if (want != STATUSJSON_OK) {
        CHECK(text == NULL);
        return NULL;
    }
    doc = cJSON_Parse(text);
    CHECK(doc != NULL);
    free(text);
    return doc;
}

static void test_json_list(void)
{
    struct fake f;
    cJSON *doc, *user, *order, *bad, *gone, *x;

    fake_init(&f);
    doc = apps_doc(&f, NULL, STATUSJSON_OK);
    if (!doc)
        return;
    CHECK(cJSON_IsArray(doc));
    CHECK(cJSON_GetArraySize(doc) == 4);
    /* Sorted by key although the source gave another order. */
    bad = cJSON_GetArrayItem(doc, 0);
    gone = cJSON_GetArrayItem(doc, 1);
    order = cJSON_GetArrayItem(doc, 2);
    user = cJSON_GetArrayItem(doc, 3);
    CHECK(strcmp(jstr(bad, "key"), "bad\"key\\x\ny\xef\xbf\xbd") == 0);
    CHECK(strcmp(jstr(gone, "key"), "gone") == 0);
    CHECK(strcmp(jstr(order, "key"), "order") == 0);
    CHECK(strcmp(jstr(user, "key"), "user") == 0);
    CHECK(strcmp(jstr(user, "node"), "10.0.0.1:7000") == 0);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(order, "node")));

    /* user */
    CHECK(jnum(user, "id") == 3);
    CHECK(jtrue(user, "served") && !jtrue(user, "deleted") && jnull(user, "invalid"));
    x = cJSON_GetObjectItemCaseSensitive(user, "config");
    CHECK(strcmp(jstr(x, "type"), "monotonic") == 0);
    CHECK(strcmp(jstr(x, "name"), "the \"name\"") == 0);
    CHECK(strcmp(jstr(x, "start_offset"), "1000") == 0);
    CHECK(strcmp(jstr(x, "current_offset"), "9223372036854775007") == 0);
    CHECK(jnum(x, "step") == 1000 && jnum(x, "max_pool_size") == 300000);
    CHECK(jnum(x, "low_water") == 240000 && jnum(x, "min_size_percent") == 80);
    CHECK(jnum(x, "max_size_per_times") == 1000 && jnum(x, "max_size_per_second") == 5000);
    CHECK(jnum(x, "interval_ms") == 100 && jnum(x, "delta") == 4);
    CHECK(jnum(x, "remainder") == 1 && jnum(x, "increment_max") == 3);
    CHECK(strcmp(jstr(x, "id_space"), "orders") == 0);
    x = cJSON_GetObjectItemCaseSensitive(user, "pool");
    CHECK(jnum(x, "length") == 225000 && jnum(x, "fill_pct") == 75);
    CHECK(jnum(user, "rate_ids_per_s") == 1234.57);
    x = cJSON_GetObjectItemCaseSensitive(user, "lease");
    CHECK(strcmp(jstr(x, "next"), "9223372036854775000") == 0);
    CHECK(strcmp(jstr(x, "hi"), "9223372036854775800") == 0);
    CHECK(jnull(x, "next_lo") && jnull(x, "next_hi"));
    CHECK(strcmp(jstr(x, "remaining"), "800") == 0);
    x = cJSON_GetObjectItemCaseSensitive(user, "runway");
    CHECK(jnum(x, "pool_s") == 182.25 && jnum(x, "id_space_days") == 1200.5);
    CHECK(strcmp(jstr(x, "id_space_left"), "9223372036854775000") == 0);
    CHECK(jnum(x, "growth_ids_per_day") == 1e6);
    x = cJSON_GetObjectItemCaseSensitive(user, "counters");
    CHECK(cJSON_GetArraySize(x) == 12);
    CHECK(jnum(x, "reserve_used") == 0 && jnull(user, "failover_reserve"));
    CHECK(jnum(x, "pushed") == 123456789012.0 && jnum(x, "refills") == 42);
    CHECK(jnum(x, "lock_busy") == 3 && jnum(x, "fenced") == 1 && jnum(x, "leases") == 17);
    CHECK(jnum(x, "discards") == 2 && jnum(x, "underflows") == 5);
    CHECK(jnum(x, "refused_limit") == 6 && jnum(x, "refused_rate") == 7);
    CHECK(jnum(x, "taken") == 99 && jnum(x, "refused_epoch") == 8);
    CHECK(strcmp(jstr(user, "last_refill"), "2024-06-01T12:00:00.250Z") == 0);
    CHECK(strcmp(jstr(user, "last_error"), "redis: timeout") == 0);
    x = cJSON_GetObjectItemCaseSensitive(user, "alerts");
    CHECK(cJSON_GetArraySize(x) == 1 &&
          strcmp(cJSON_GetStringValue(cJSON_GetArrayItem(x, 0)), "low") == 0);

    /* order: trend, unknown length, a prefetched lease, never refilled */
    x = cJSON_GetObjectItemCaseSensitive(order, "config");
    CHECK(strcmp(jstr(x, "type"), "trend") == 0);
    x = cJSON_GetObjectItemCaseSensitive(order, "pool");
    CHECK(jnull(x, "length") && jnull(x, "fill_pct"));
    CHECK(jnum(order, "rate_ids_per_s") == 0.3);
    x = cJSON_GetObjectItemCaseSensitive(order, "lease");
    CHECK(strcmp(jstr(x, "next_lo"), "6000") == 0 && strcmp(jstr(x, "next_hi"), "9000") == 0);
    x = cJSON_GetObjectItemCaseSensitive(order, "failover_reserve");
    CHECK(strcmp(jstr(x, "lo"), "20000") == 0 && strcmp(jstr(x, "hi"), "26000") == 0);
    CHECK(jnum(cJSON_GetObjectItemCaseSensitive(order, "counters"), "reserve_used") == 1);
    CHECK(jnull(order, "last_refill") && jnull(order, "last_error"));
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(order, "alerts")) == 0);
    /* runway: unknown and never are both null; the ceiling reached: 0 left */
    x = cJSON_GetObjectItemCaseSensitive(order, "runway");
    CHECK(jnull(x, "pool_s") && jnull(x, "id_space_days"));
    CHECK(strcmp(jstr(x, "id_space_left"), "0") == 0 && jnum(x, "growth_ids_per_day") == 0);

    /* invalid */
    CHECK(!jtrue(bad, "served"));
    CHECK(strcmp(jstr(bad, "invalid"), f.apps[1].invalid) == 0);
    CHECK(jnull(bad, "config") && jnull(bad, "lease"));
    x = cJSON_GetObjectItemCaseSensitive(bad, "runway");
    CHECK(jnull(x, "pool_s") && jnull(x, "id_space_days") && jnull(x, "id_space_left"));
    x = cJSON_GetObjectItemCaseSensitive(bad, "alerts");
    CHECK(cJSON_GetArraySize(x) == 1 &&
          strcmp(cJSON_GetStringValue(cJSON_GetArrayItem(x, 0)), "invalid_config") == 0);

    /* soft-deleted */
    CHECK(!jtrue(gone, "served") && jtrue(gone, "deleted"));
    CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(gone, "config")));
    x = cJSON_GetObjectItemCaseSensitive(gone, "runway");
    CHECK(jnull(x, "pool_s") && jnull(x, "id_space_days") && jnull(x, "growth_ids_per_day"));
    cJSON_Delete(doc);

    /* No applications: an empty array. */
    f.napps = 0;
    doc = apps_doc(&f, NULL, STATUSJSON_OK);
    CHECK(cJSON_IsArray(doc) && cJSON_GetArraySize(doc) == 0);
    cJSON_Delete(doc);
}

/* A row whose key cannot name a pool: listed in /v1/apps with its error, no /metrics series. */
static void test_bad_key_row(void)
{
    struct fake f;
    cJSON *doc, *bad;
    char *m;

    fake_init(&f);
    f.apps[1].bad_key = 1; /* "bad\"key...", invalid, cfg NULL */
    m = render(&f);
    if (m) {
        CHECK_NO(m, "app=\"bad");
        CHECK(strstr(m, "idpool_pool_length{app=\"user\"}") != NULL);
        free(m);
    }
    doc = apps_doc(&f, NULL, STATUSJSON_OK);
    if (!doc)
        return;
    CHECK(cJSON_GetArraySize(doc) == 4);
    bad = cJSON_GetArrayItem(doc, 0);
    CHECK(strncmp(jstr(bad, "key"), "bad", 3) == 0);
    CHECK(strstr(jstr(bad, "invalid"), "step: must be") != NULL);
    CHECK(!jtrue(bad, "served"));
    cJSON_Delete(doc);
}

static void test_json_one(void)
{
    struct fake f;
    cJSON *doc;

    fake_init(&f);
    doc = apps_doc(&f, "order", STATUSJSON_OK);
    CHECK(cJSON_IsObject(doc));
    CHECK(strcmp(jstr(doc, "key"), "order") == 0);
    CHECK(jnum(doc, "id") == 4);
    cJSON_Delete(doc);
    apps_doc(&f, "nosuch", STATUSJSON_NOT_FOUND);
}

static void test_json_health(void)
{
    struct fake f;
    struct status_source src;
    cJSON *doc, *r;
    char *text;
    int healthy = -1;

    fake_init(&f);
    src = source_of(&f);
    text = statusjson_health(&src, &healthy);
    CHECK(healthy == 1);
    doc = cJSON_Parse(text);
    CHECK(strcmp(jstr(doc, "status"), "ok") == 0);
    CHECK(cJSON_GetObjectItemCaseSensitive(doc, "reasons") == NULL);
    CHECK(strcmp(jstr(doc, "version"), "0.1.0") == 0);
    CHECK(jnum(cJSON_GetObjectItemCaseSensitive(doc, "apps"), "invalid") == 1);
    CHECK(cJSON_GetObjectItemCaseSensitive(doc, "sentinel") == NULL); /* redis:// */
    cJSON_Delete(doc);
    free(text);

    f.d.redis_up = 0;
    f.d.rows_loaded = 0;
    text = statusjson_health(&src, &healthy);
    CHECK(healthy == 0);
    CHECK_STR_CONTAINS(text, "\"status\":\"unavailable\"");
    CHECK_STR_CONTAINS(text, "\"reasons\":[\"redis down\",\"application rows not loaded\"]");
    doc = cJSON_Parse(text);
    r = cJSON_GetObjectItemCaseSensitive(doc, "reasons");
    CHECK(cJSON_GetArraySize(r) == 2);
    cJSON_Delete(doc);
    free(text);
}

/* redis-sentinel://: the Sentinel families, in /metrics and /healthz. */
static void test_sentinel_view(void)
{
    struct fake f;
    struct status_source src;
    cJSON *doc, *s;
    char *m, *text;
    int healthy = -1;

    fake_init(&f);
    f.d.sentinel = 1;
    f.d.sentinel_up = 1;
    f.d.redis_master = "idpool";
    snprintf(f.d.redis_primary, sizeof(f.d.redis_primary), "10.0.0.2:6379");
    f.d.redis_failovers = 2;
    f.d.sentinel_errors = 7;
    m = render(&f);
    if (!m)
        return;
    CHECK_LINE(m, "# TYPE idpool_sentinel_up gauge");
    CHECK_LINE(m, "idpool_sentinel_up 1");
    CHECK_LINE(m, "# TYPE idpool_redis_failovers_total counter");
    CHECK_LINE(m, "idpool_redis_failovers_total 2");
    CHECK_LINE(m, "idpool_sentinel_errors_total 7");
    free(m);

    src = source_of(&f);
    text = statusjson_health(&src, &healthy);
    CHECK(healthy == 1);
    doc = cJSON_Parse(text);
    s = cJSON_GetObjectItemCaseSensitive(doc, "sentinel");
    CHECK(s != NULL);
    CHECK(strcmp(jstr(s, "master"), "idpool") == 0);
    CHECK(strcmp(jstr(s, "primary"), "10.0.0.2:6379") == 0);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "up")));
    CHECK(jnum(s, "failovers") == 2);
    cJSON_Delete(doc);
    free(text);

    /* Redis down and no sentinel answers: both reasons; no primary known yet: null */
    f.d.redis_up = 0;
    f.d.sentinel_up = 0;
    f.d.redis_primary[0] = '\0';
    text = statusjson_health(&src, &healthy);
    CHECK(healthy == 0);
    CHECK_STR_CONTAINS(text, "\"reasons\":[\"redis down\",\"no sentinel answers\"]");
    CHECK_STR_CONTAINS(text, "\"primary\":null");
    free(text);
}

/* redis-cluster://: the Cluster families, one series per primary, and /healthz's "cluster". */
static void test_cluster_view(void)
{
    static const struct node_view nodes[] = {{"10.0.0.1:7000", 1, 5461}, {"[::1]:7001", 0, 5462}};
    struct fake f;
    struct status_source src;
    cJSON *doc, *c, *n;
    char *m, *text;
    int healthy = -1;

    fake_init(&f);
    m = render(&f);
    if (m)
        CHECK_NO(m, "idpool_cluster_"); /* redis://: no Cluster families */
    free(m);
    f.d.cluster = 1;
    f.d.nodes = nodes;
    f.d.nnodes = 2;
    f.d.cluster_unowned = 5461;
    f.d.cluster_refreshes = 4;
    f.d.cluster_moved = 3;
    f.d.cluster_downs = 1;
    m = render(&f);
    if (!m)
        return;
    CHECK_LINE(m, "# TYPE idpool_redis_node_up gauge");
    CHECK_LINE(m, "idpool_redis_node_up{node=\"10.0.0.1:7000\"} 1");
    CHECK_LINE(m, "idpool_redis_node_up{node=\"[::1]:7001\"} 0");
    CHECK_LINE(m, "idpool_redis_node_slots{node=\"[::1]:7001\"} 5462");
    CHECK_LINE(m, "idpool_cluster_slots_unowned 5461");
    CHECK_LINE(m, "idpool_cluster_refreshes_total 4");
    CHECK_LINE(m, "# TYPE idpool_cluster_redirects_total counter");
    CHECK_LINE(m, "idpool_cluster_redirects_total{kind=\"moved\"} 3");
    CHECK_LINE(m, "idpool_cluster_redirects_total{kind=\"ask\"} 0");
    CHECK_LINE(m, "idpool_cluster_redirects_total{kind=\"clusterdown\"} 1");
    free(m);

    src = source_of(&f);
    f.d.redis_up = 0;
    text = statusjson_health(&src, &healthy);
    CHECK(healthy == 0);
    CHECK_STR_CONTAINS(text, "\"reasons\":[\"redis down\",\"redis node [::1]:7001 down\","
                             "\"5461 cluster slots without a primary\"]");
    doc = cJSON_Parse(text);
    c = cJSON_GetObjectItemCaseSensitive(doc, "cluster");
    CHECK(c != NULL);
    CHECK(jnum(c, "slots_unowned") == 5461 && jnum(c, "refreshes") == 4);
    CHECK(jnum(cJSON_GetObjectItemCaseSensitive(c, "redirects"), "moved") == 3);
    n = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c, "nodes"), 1);
    CHECK(n != NULL && strcmp(jstr(n, "node"), "[::1]:7001") == 0 && jnum(n, "slots") == 5462);
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(n, "up")));
    cJSON_Delete(doc);
    free(text);
}

int main(void)
{
    RUN(test_sbuf);
    RUN(test_metrics_per_app);
    RUN(test_metrics_process);
    RUN(test_metrics_structure);
    RUN(test_metrics_promtool);
    RUN(test_json_list);
    RUN(test_json_one);
    RUN(test_bad_key_row);
    RUN(test_json_health);
    RUN(test_sentinel_view);
    RUN(test_cluster_view);
    return unit_done();
}
