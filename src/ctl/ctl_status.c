/*
 * ctl_status — `idpoolctl status`.
 *
 * status asks the daemon first (GET /v1/apps on http_addr, through libcurl
 * with one overall deadline), because only the daemon knows
 * the consumption rate and its own alerts. When no daemon answers it reads
 * Redis (LLEN, the alert:* fields of meta) and MySQL (the rows) directly and
 * says so in a footer: status is most needed exactly when the daemon is down.
 * */
#include "ctl_status.h"

#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "app.h"
#include "ctl_rows.h"
#include "runway.h"

#define HTTP_TIMEOUT_MS 2000
#define HTTP_MAX_BODY   (64u << 20)

/* A reply's body as it arrives. */
struct body {
    char *buf; /* heap, NUL-terminated */
    size_t len;
    int too_large; /* more than HTTP_MAX_BODY: the transfer was stopped */
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    struct body *b = arg;
    size_t add = size * n;
    char *nb;

    if (add > HTTP_MAX_BODY - b->len) {
        b->too_large = 1;
        return 0; /* stops the transfer: CURLE_WRITE_ERROR */
    }
    nb = realloc(b->buf, b->len + add + 1);
    if (!nb)
        ctl_oom();
    b->buf = nb;
    memcpy(b->buf + b->len, data, add);
    b->len += add;
    b->buf[b->len] = '\0';
    return add;
}

/* What went wrong, in the words idpoolctl has always used where there are some. */
static void http_error(CURL *h, CURLcode rc, const struct body *b, const char *curl_err, char *err,
                       size_t errlen)
{
    long os_errno = 0;

    if (b->too_large) {
        snprintf(err, errlen, "reply larger than %u bytes", HTTP_MAX_BODY);
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        snprintf(err, errlen, "timed out");
    } else if (rc == CURLE_COULDNT_CONNECT &&
               curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK && os_errno) {
        snprintf(err, errlen, "%s", strerror((int)os_errno));
    } else if (rc == CURLE_GOT_NOTHING || rc == CURLE_WEIRD_SERVER_REPLY ||
               rc == CURLE_UNSUPPORTED_PROTOCOL) {
        snprintf(err, errlen, "not an HTTP reply");
    } else {
        snprintf(err, errlen, "%s", curl_err[0] ? curl_err : curl_easy_strerror(rc));
    }
}

/*
 * GET http://host:port/path with libcurl (no proxy, no redirect, HTTP
 * only), within one overall timeout. On success (0) *status holds the HTTP
 * status and *body the body (heap, NUL-terminated). -1 with err on any
 * failure to talk HTTP with the server.
 */
static int http_get(const char *host, int port, const char *path, int timeout_ms, int *status,
                    char **body, char *err, size_t errlen)
{
    char url[512], curl_err[CURL_ERROR_SIZE] = "";
    struct body b = {NULL, 0, 0};
    struct curl_slist *hdrs = NULL;
    long code = 0;
    CURLcode rc;
    CURL *h;

    *body = NULL;
    snprintf(url, sizeof(url), "http://%s%s%s:%d%s", strchr(host, ':') ? "[" : "", host,
             strchr(host, ':') ? "]" : "", port, path);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(h = curl_easy_init()))
        ctl_oom();
    hdrs = curl_slist_append(NULL, "Accept: application/json");
    if (!hdrs)
        ctl_oom();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* the daemon's own address: never via a proxy */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "idpoolctl");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
    rc = curl_easy_perform(h);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK)
        http_error(h, rc, &b, curl_err, err, errlen);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    curl_global_cleanup();
    if (rc != CURLE_OK) {
        free(b.buf);
        return -1;
    }
    *status = (int)code;
    *body = b.buf ? b.buf : strdup("");
    if (!*body)
        ctl_oom();
    return 0;
}

/* ------------------------------------------------------------------ status */

/* One line of the status table, whatever its source. */
struct status_line {
    char key[260];
    char state[16];   /* served | deleted | invalid */
    char type[16];    /* monotonic | trend | - */
    long long length; /* -1: unknown */
    int unread;       /* its Redis server could not be read */
    int stale;        /* idpoold cannot reach its Redis: length as last seen, rate unknown */
    double fill;      /* < 0: unknown */
    double rate;      /* < 0: unknown */
    double pool_s;    /* runway: seconds until the pool runs dry; < 0: none (NAN: unknown) */
    double space_s;   /* runway: seconds until the ID space is exhausted; < 0: none */
    cJSON *alerts;    /* array of strings (owned) */
    char reason[APP_ERR_MAX];
};

/* A JSON number or decimal string as a double; def when absent or null. */
static double jnum(const cJSON *o, const char *name, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

    if (cJSON_IsNumber(v))
        return v->valuedouble;
    if (cJSON_IsString(v) && v->valuestring[0])
        return strtod(v->valuestring, NULL);
    return def;
}

/* Lines from the daemon's /v1/apps array. 0, or -1 when the document is not what we expect. */
static int lines_from_daemon(const cJSON *arr, struct status_line **out, size_t *n)
{
    const cJSON *app;
    size_t i = 0;

    if (!cJSON_IsArray(arr))
        return -1;
    *n = (size_t)cJSON_GetArraySize(arr);
    *out = ctl_xcalloc(*n, sizeof(**out));
    cJSON_ArrayForEach(app, arr)
    {
        struct status_line *l = &(*out)[i++];
        const cJSON *key = cJSON_GetObjectItemCaseSensitive(app, "key");
        const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(app, "config");
        const cJSON *pool = cJSON_GetObjectItemCaseSensitive(app, "pool");
        const cJSON *inv = cJSON_GetObjectItemCaseSensitive(app, "invalid");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(cfg, "type");
        const cJSON *alerts = cJSON_GetObjectItemCaseSensitive(app, "alerts"), *a;

        if (!cJSON_IsObject(app) || !cJSON_IsString(key))
            return -1;
        snprintf(l->key, sizeof(l->key), "%s", key->valuestring);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(app, "deleted")))
            snprintf(l->state, sizeof(l->state), "deleted");
        else if ((cJSON_IsString(inv) && inv->valuestring[0]) || cJSON_IsTrue(inv))
            snprintf(l->state, sizeof(l->state), "invalid");
        else
            snprintf(l->state, sizeof(l->state), "served");
        if (cJSON_IsString(inv))
            snprintf(l->reason, sizeof(l->reason), "%s", inv->valuestring);
        if (cJSON_IsString(type))
            snprintf(l->type, sizeof(l->type), "%s", type->valuestring);
        else if (cJSON_IsNumber(type))
            snprintf(l->type, sizeof(l->type), "%s",
                     type->valueint == APP_TREND ? "trend" : "monotonic");
        else
            snprintf(l->type, sizeof(l->type), "-");
        l->length = (long long)jnum(pool, "length", -1);
        l->fill = jnum(pool, "fill_pct", -1);
        l->rate = jnum(app, "rate_ids_per_s", -1);
        l->stale = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pool, "stale"));
        {
            const cJSON *rw = cJSON_GetObjectItemCaseSensitive(app, "runway");
            double d = jnum(rw, "id_space_days", -1);

            l->pool_s = jnum(rw, "pool_s", -1);
            l->space_s = d >= 0 ? d * 86400 : -1;
        }
        l->alerts = ctl_jcheck(cJSON_CreateArray());
        cJSON_ArrayForEach(a, alerts)
        {
            const cJSON *name = a;
            if (cJSON_IsObject(a)) {
                name = cJSON_GetObjectItemCaseSensitive(a, "alert");
                if (!name)
                    name = cJSON_GetObjectItemCaseSensitive(a, "kind");
            }
            if (cJSON_IsString(name))
                cJSON_AddItemToArray(l->alerts, ctl_jcheck(cJSON_CreateString(name->valuestring)));
        }
    }
    return 0;
}

/* Lines from MySQL rows and Redis directly. 0 or an exit code (reported). */
static int lines_direct(struct ctl *c, struct status_line **out, size_t *n)
{
    struct ctl_row *rows = NULL;
    struct ctl_pool *pools = NULL;
    const char **keys = NULL;
    size_t nrows = 0, nk = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = ctl_db_open(c)) != 0 || (rc = ctl_rows_load(c, NULL, 0, &rows, &nrows)) != 0)
        return rc;
    if ((rc = ctl_redis_open(c)) != 0)
        goto done;
    keys = ctl_xcalloc(nrows, sizeof(*keys));
    pools = ctl_xcalloc(nrows, sizeof(*pools));
    /* A key that cannot name Redis keys has no pool to look at. */
    for (size_t i = 0; i < nrows; i++)
        if (app_key_valid(rows[i].key))
            keys[nk++] = rows[i].key;
    if ((rc = ctl_pools_read(c, keys, nk, pools, 1)) != 0)
        goto done;
    *out = ctl_xcalloc(nrows, sizeof(**out));
    *n = nrows;
    for (size_t i = 0, k = 0; i < nrows; i++) {
        struct ctl_row *r = &rows[i];
        struct status_line *l = &(*out)[i];
        struct ctl_pool *p = app_key_valid(r->key) ? &pools[k++] : NULL;

        snprintf(l->key, sizeof(l->key), "%s", r->key);
        snprintf(l->state, sizeof(l->state), "%s", ctl_row_state(r));
        if (!r->valid)
            snprintf(l->reason, sizeof(l->reason), "%s", r->error);
        snprintf(l->type, sizeof(l->type), "%s",
                 r->valid ? (r->cfg.type == APP_TREND ? "trend" : "monotonic") : "-");
        l->length = p ? p->length : -1;
        l->unread = p && p->unread;
        l->fill = (p && r->valid && r->cfg.max_pool)
                      ? 100.0 * (double)p->length / (double)r->cfg.max_pool
                      : -1;
        l->rate = -1;
        l->pool_s = l->space_s = -1;
        if (p) {
            l->alerts = p->alerts;
            p->alerts = NULL;
        } else {
            l->alerts = ctl_jcheck(cJSON_CreateArray());
        }
    }
done:
    for (size_t i = 0; pools && i < nk; i++)
        ctl_pool_free(&pools[i]);
    free(pools);
    free(keys);
    free(rows);
    return rc;
}

static void lines_free(struct status_line *l, size_t n)
{
    for (size_t i = 0; l && i < n; i++)
        cJSON_Delete(l[i].alerts);
    free(l);
}

static void status_print(struct ctl *c, const struct status_line *l, size_t n, const char *source,
                         const char *note)
{
    static const char *const hdr[] = {"KEY",    "STATE",  "TYPE",     "POOL",  "FILL",
                                      "RATE/S", "RUNWAY", "ID-SPACE", "ALERTS"};
    struct ctl_table *t;

    if (c->json) {
        cJSON *doc = ctl_jcheck(cJSON_CreateObject()), *arr;

        ctl_jcheck(cJSON_AddStringToObject(doc, "source", source));
        ctl_jcheck(cJSON_AddStringToObject(doc, "note", note));
        arr = ctl_jcheck(cJSON_AddArrayToObject(doc, "apps"));
        for (size_t i = 0; i < n; i++) {
            cJSON *o = ctl_jcheck(cJSON_CreateObject());
            ctl_jcheck(cJSON_AddStringToObject(o, "key", l[i].key));
            ctl_jcheck(cJSON_AddStringToObject(o, "state", l[i].state));
            if (l[i].reason[0])
                ctl_jcheck(cJSON_AddStringToObject(o, "error", l[i].reason));
            ctl_jcheck(cJSON_AddStringToObject(o, "type", l[i].type));
            if (l[i].length >= 0)
                ctl_json_i64(o, "pool_length", l[i].length);
            else
                ctl_jcheck(cJSON_AddNullToObject(o, "pool_length"));
            if (l[i].unread)
                ctl_jcheck(cJSON_AddTrueToObject(o, "pool_unread"));
            if (l[i].stale)
                ctl_jcheck(cJSON_AddTrueToObject(o, "pool_stale"));
            if (l[i].fill >= 0)
                ctl_jcheck(cJSON_AddNumberToObject(o, "fill_pct", l[i].fill));
            else
                ctl_jcheck(cJSON_AddNullToObject(o, "fill_pct"));
            if (l[i].rate >= 0)
                ctl_jcheck(cJSON_AddNumberToObject(o, "rate_ids_per_s", l[i].rate));
            else
                ctl_jcheck(cJSON_AddNullToObject(o, "rate_ids_per_s"));
            {
                cJSON *rw = ctl_jcheck(cJSON_AddObjectToObject(o, "runway"));
                if (l[i].pool_s >= 0)
                    ctl_jcheck(cJSON_AddNumberToObject(rw, "pool_s", l[i].pool_s));
                else
                    ctl_jcheck(cJSON_AddNullToObject(rw, "pool_s"));
                if (l[i].space_s >= 0)
                    ctl_jcheck(cJSON_AddNumberToObject(rw, "id_space_days", l[i].space_s / 86400));
                else
                    ctl_jcheck(cJSON_AddNullToObject(rw, "id_space_days"));
            }
            cJSON_AddItemToObject(o, "alerts", ctl_jcheck(cJSON_Duplicate(l[i].alerts, 1)));
            cJSON_AddItemToArray(arr, o);
        }
        ctl_json_print(c, doc);
        return;
    }
    t = ctl_table_new(9, hdr);
    for (size_t i = 0; i < n; i++) {
        char key[260], len[24], fill[32], rate[32], pool_s[32], space[32], alerts[256] = "";
        const char *cells[9];
        const cJSON *a;

        cJSON_ArrayForEach(a, l[i].alerts)
        {
            size_t used = strlen(alerts);
            snprintf(alerts + used, sizeof(alerts) - used, "%s%s", used ? "," : "", a->valuestring);
        }
        if (l[i].length >= 0)
            snprintf(len, sizeof(len), "%lld", l[i].length);
        else
            snprintf(len, sizeof(len), "%s", l[i].unread ? "?" : "-");
        if (l[i].fill >= 0)
            snprintf(fill, sizeof(fill), "%.1f%%", l[i].fill);
        else
            snprintf(fill, sizeof(fill), "-");
        if (l[i].rate >= 0)
            snprintf(rate, sizeof(rate), "%.1f", l[i].rate);
        else
            snprintf(rate, sizeof(rate), "?");
        cells[0] = ctl_printable(l[i].key, key, sizeof(key));
        cells[1] = strcmp(l[i].state, "invalid") == 0 ? "INVALID" : l[i].state;
        cells[2] = l[i].type;
        cells[3] = len;
        cells[4] = fill;
        cells[5] = rate;
        cells[6] = runway_human(l[i].pool_s, pool_s, sizeof(pool_s));
        cells[7] = runway_human(l[i].space_s, space, sizeof(space));
        cells[8] = alerts[0] ? alerts : "-";
        ctl_table_add(t, cells);
    }
    ctl_table_print(t, stdout);
    if (n == 0)
        printf("(no applications)\n");
    printf("-- %s\n", note);
    ctl_table_free(t);
}

int ctl_status(struct ctl *c, int argc, char **argv)
{
    struct status_line *lines = NULL;
    size_t n = 0, unread = 0, stale = 0;
    char *pos[1], *body = NULL, err[256], where[300], note[700];
    int npos, rc, status = 0;
    cJSON *doc;

    rc = ctl_opts_parse(c, argc, argv, NULL, NULL, NULL, pos, 0, &npos);
    if (rc != 0)
        return rc;
    if ((rc = ctl_setup(c)) != 0)
        return rc;
    if (c->cfg.http_addr[0] == '\0') {
        snprintf(note, sizeof(note),
                 "read from Redis and MySQL directly: the daemon's HTTP address is disabled "
                 "(--http ''); rate unknown");
    } else {
        snprintf(where, sizeof(where), strchr(c->cfg.http_host, ':') ? "[%s]:%d" : "%s:%d",
                 c->cfg.http_host, c->cfg.http_port);
        if (http_get(c->cfg.http_host, c->cfg.http_port, "/v1/apps", HTTP_TIMEOUT_MS, &status,
                     &body, err, sizeof(err)) != 0) {
            snprintf(note, sizeof(note),
                     "no idpoold answered at http://%s (%s): read from Redis and MySQL directly; "
                     "rate unknown",
                     where, err);
        } else if (status != 200) {
            snprintf(note, sizeof(note),
                     "idpoold at http://%s answered /v1/apps with HTTP %d: read from Redis and "
                     "MySQL directly; rate unknown",
                     where, status);
        } else if (!(doc = cJSON_Parse(body)) || lines_from_daemon(doc, &lines, &n) != 0) {
            cJSON_Delete(doc);
            lines_free(lines, n);
            lines = NULL;
            n = 0;
            snprintf(note, sizeof(note),
                     "idpoold at http://%s sent an unexpected /v1/apps document: read from Redis "
                     "and MySQL directly; rate unknown",
                     where);
        } else {
            cJSON_Delete(doc);
            free(body);
            snprintf(note, sizeof(note), "from idpoold at http://%s/v1/apps", where);
            for (size_t i = 0; i < n; i++)
                stale += lines[i].stale;
            if (stale)
                snprintf(note + strlen(note), sizeof(note) - strlen(note),
                         "; %zu pool%s as last seen, rate '?': idpoold cannot reach %s Redis",
                         stale, stale == 1 ? "" : "s", stale == 1 ? "its" : "their");
            status_print(c, lines, n, "daemon", note);
            lines_free(lines, n);
            return 0;
        }
        free(body);
    }
    if ((rc = lines_direct(c, &lines, &n)) != 0)
        return rc;
    if (c->cfg.redis.kind != REDIS_STANDALONE) /* which servers the pools were read from */
        snprintf(note + strlen(note), sizeof(note) - strlen(note), "; %s", c->rds_where);
    for (size_t i = 0; i < n; i++)
        unread += lines[i].unread;
    if (unread) /* the servers were named on stderr */
        snprintf(note + strlen(note), sizeof(note) - strlen(note),
                 "; %zu pool%s unknown ('?'): %s Redis server could not be read", unread,
                 unread == 1 ? "" : "s", unread == 1 ? "its" : "their");
    status_print(c, lines, n, "direct", note);
    lines_free(lines, n);
    return 0;
}

/* -------------------------------------------------------------------- help */

const char ctl_status_help[] =
    "Usage: %s [global options] status [--json]\n"
    "\n"
    "What the service is doing, one line per application: KEY, STATE (served, deleted,\n"
    "INVALID), TYPE, POOL (IDs in the pool), FILL (%% of max_pool_size), RATE/S\n"
    "(consumption, IDs per second, smoothed), RUNWAY (until the pool runs dry at that\n"
    "rate), ID-SPACE (until the ID space is exhausted at the rate the leases grew over\n"
    "the last 7 days; s, m, h, d; '-' when nothing is consumed or grows, or unknown)\n"
    "and the ALERTS firing.\n"
    "\n"
    "It asks idpoold (GET /v1/apps on --http / IDPOOL_HTTP_ADDR, 2 s timeout). When no\n"
    "daemon answers it reads Redis and MySQL directly (the rate is then unknown, '?')\n"
    "and the footer line says so; on a Redis Cluster with a primary unreachable, its\n"
    "applications' POOL is '?' and the node is named on stderr. Exit 1 only when\n"
    "neither source can be read.\n";
