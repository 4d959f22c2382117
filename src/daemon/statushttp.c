#include "statushttp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "apihttp.h"
#include "http.h"
#include "httpreq.h"
#include "log.h"
#include "metrics.h"
#include "sbuf.h"
#include "status_page.h"
#include "statusjson.h"
#include "text.h"

#define HTTP_MAX_BODY    65536 /* bytes; no route reads a body */
#define HTTP_ALLOW       "GET, HEAD"
#define ALLOW_HEADER     "Allow: " HTTP_ALLOW "\r\n"
#define CTYPE_PROMETHEUS "text/plain; version=0.0.4; charset=utf-8"
#define CTYPE_HTML       "text/html; charset=utf-8"
/* The page's own policy (its inline style and script by hash), no sniffing, no framing. */
#define PAGE_HEADERS                                                                               \
    "Content-Security-Policy: " STATUS_PAGE_CSP "\r\n"                                             \
    "X-Content-Type-Options: nosniff\r\n"                                                          \
    "Referrer-Policy: no-referrer\r\n"

struct statushttp {
    struct apihttp *srv;
    char *allowed_hosts;      /* http-allowed-hosts, or NULL */
    struct status_source src; /* where the views come from */
};

enum route { R_NONE, R_PAGE, R_METRICS, R_HEALTHZ, R_APPS, R_APP };

/* s with invalid UTF-8 replaced (request text is untrusted), heap; NULL when out of memory. */
static char *utf8_clean(const char *s)
{
    struct sbuf b;

    sbuf_init(&b);
    sbuf_put_utf8(&b, s);
    return sbuf_detach(&b);
}

/* {"error": msg, "path": path[, name: value]} as a heap string, NULL when out of memory. */
static char *error_json(const char *msg, const char *path, const char *name, const char *value)
{
    cJSON *o = cJSON_CreateObject();
    char *text = NULL, *p = utf8_clean(path), *v = name ? utf8_clean(value) : NULL;

    if (o && p && cJSON_AddStringToObject(o, "error", msg) &&
        cJSON_AddStringToObject(o, "path", p) &&
        (name == NULL || (v && cJSON_AddStringToObject(o, name, v))))
        text = cJSON_PrintUnformatted(o);
    free(p);
    free(v);
    cJSON_Delete(o);
    return text;
}

/*
 * Answer `req` with `body` (heap, freed here; NULL = out of memory: 500).
 * A JSON body gets a final newline.
 */
static void reply(struct apihttp_req *req, int code, const char *ctype, const char *headers,
                  char *body)
{
    static const char oom[] = "{\"error\":\"out of memory\"}\n";
    size_t len = body ? strlen(body) : 0;

    if (body && strcmp(ctype, CTYPE_JSON) == 0) {
        char *b = realloc(body, len + 2);
        if (b == NULL)
            free(body);
        body = b;
        if (body) {
            body[len++] = '\n';
            body[len] = '\0';
        }
    }
    if (body == NULL) {
        code = 500;
        ctype = CTYPE_JSON;
        headers = NULL;
    }
    log_debug("http: %s %s -> %d", req->method, req->target, code);
    apihttp_reply(req, code, ctype, headers, body ? body : oom, body ? len : sizeof(oom) - 1);
    free(body);
}

static void reply_405(struct apihttp_req *req, const char *path)
{
    reply(req, 405, CTYPE_JSON, ALLOW_HEADER,
          error_json("method not allowed", path, "allow", HTTP_ALLOW));
}

/* Which route the path's segments are; for R_APP, *key is the last (decoded) segment. */
static enum route route_of(const struct httpreq_path *p, const char **key)
{
    if (p->n == 1 && p->len[0] == 0)
        return R_PAGE;
    if (p->n == 1 && strcmp(p->seg[0], "metrics") == 0)
        return R_METRICS;
    if (p->n == 1 && strcmp(p->seg[0], "healthz") == 0)
        return R_HEALTHZ;
    if (p->n < 2 || strcmp(p->seg[0], "v1") != 0 || strcmp(p->seg[1], "apps") != 0)
        return R_NONE;
    if (p->n == 2)
        return R_APPS;
    if (p->n == 3 && p->len[2] > 0) {
        *key = p->seg[2];
        return R_APP;
    }
    return R_NONE;
}

/* The status page (status.html, compiled in): the same bytes every time. */
static void serve_page(struct apihttp_req *req)
{
    static const char page[] = STATUS_PAGE_HTML;

    log_debug("http: %s %s -> 200", req->method, req->target);
    apihttp_reply(req, 200, CTYPE_HTML, PAGE_HEADERS, page, sizeof(page) - 1);
}

static void serve_metrics(struct statushttp *h, struct apihttp_req *req)
{
    struct sbuf b;
    char *text;

    sbuf_init(&b);
    if (metrics_render(&h->src, &b) < 0) {
        sbuf_free(&b);
        text = NULL;
    } else {
        text = sbuf_detach(&b);
    }
    reply(req, 200, CTYPE_PROMETHEUS, NULL, text);
}

static void serve_healthz(struct statushttp *h, struct apihttp_req *req)
{
    int healthy = 0;
    char *text = statusjson_health(&h->src, &healthy);

    if (healthy)
        reply(req, 200, CTYPE_JSON, NULL, text);
    else
        reply(req, 503, CTYPE_JSON, NULL, text);
}

static void serve_apps(struct statushttp *h, struct apihttp_req *req, const char *path,
                       const char *key)
{
    char *text = NULL;

    switch (statusjson_apps(&h->src, key, &text)) {
    case STATUSJSON_OK:
        reply(req, 200, CTYPE_JSON, NULL, text);
        break;
    case STATUSJSON_NOT_FOUND:
        reply(req, 404, CTYPE_JSON, NULL, error_json("unknown application", path, "key", key));
        break;
    case STATUSJSON_ERROR:
        reply(req, 500, CTYPE_JSON, NULL, NULL);
        break;
    }
}

/*
 * Every request: only GET and HEAD exist (405 for any other method, on any
 * path); then route on the path's percent-decoded segments (400 for a bad
 * escape).
 */
static void on_request(struct apihttp_req *req, void *arg)
{
    struct statushttp *h = arg;
    const char *key = NULL;
    char *raw = http_target_path(req->target), *buf = NULL;
    struct httpreq_path p;
    enum route r = R_NONE;

    /* a name we were not told of: a browser's page of another site (DNS rebinding) */
    if (raw != NULL && !httpreq_host_allowed(req->host, h->allowed_hosts)) {
        reply(req, 403, CTYPE_JSON, NULL,
              error_json("this server answers requests to an IP address, localhost or a name "
                         "in http-allowed-hosts only",
                         raw, "host", req->host));
        free(raw);
        return;
    }
    if (raw != NULL && strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
        reply_405(req, raw);
        free(raw);
        return;
    }
    buf = raw ? malloc(strlen(raw) + 1) : NULL;
    if (buf == NULL) {
        reply(req, 500, CTYPE_JSON, NULL, NULL);
        free(raw);
        return;
    }
    switch (httpreq_path_split(raw, strlen(raw), buf, &p)) {
    case HTTPREQ_PATH_BAD:
        reply(req, 400, CTYPE_JSON, NULL,
              error_json("bad percent-escape in the path (" TEXT_PCT_HINT ")", raw, NULL, NULL));
        break;
    case HTTPREQ_PATH_OK:
        r = route_of(&p, &key);
        /* fall through */
    case HTTPREQ_PATH_NONE:
        if (r == R_NONE)
            reply(req, 404, CTYPE_JSON, NULL, error_json("not found", raw, NULL, NULL));
        else if (r == R_PAGE)
            serve_page(req);
        else if (r == R_METRICS)
            serve_metrics(h, req);
        else if (r == R_HEALTHZ)
            serve_healthz(h, req);
        else
            serve_apps(h, req, raw, r == R_APP ? key : NULL);
        break;
    }
    free(buf);
    free(raw);
}

struct statushttp *statushttp_new(struct event_base *base, const struct config *cfg,
                                  const struct status_source *src)
{
    struct statushttp *h = calloc(1, sizeof(*h));
    struct apihttp_opts o = {
        .name = "http",
        .routes = "/ (status page), /metrics, /healthz, /v1/apps",
        .host = cfg->http_host,
        .port = cfg->http_port,
        .max_conns = cfg->http_max_conns,
        .max_per_addr = cfg->http_max_per_addr,
        .timeout_ms = cfg->http_timeout_ms,
        .head_timeout_ms = cfg->http_head_timeout_ms,
        .max_body = HTTP_MAX_BODY,
        .handler = on_request,
    };

    if (h == NULL)
        return NULL;
    h->src = *src;
    o.arg = h;
    if (statushttp_configure(h, cfg) != 0) {
        free(h);
        return NULL;
    }
    if (cfg->http_addr == NULL || cfg->http_addr[0] == '\0')
        o.host = NULL;
    h->srv = apihttp_new(base, &o);
    if (h->srv == NULL) {
        free(h->allowed_hosts);
        free(h);
        return NULL;
    }
    return h;
}

int statushttp_configure(struct statushttp *h, const struct config *cfg)
{
    const char *list = cfg->http_allowed_hosts ? cfg->http_allowed_hosts : "";
    const char *own = cfg->http_host ? cfg->http_host : "";
    size_t n = strlen(list) + strlen(own) + 2;
    char *allowed;

    if (h == NULL)
        return 0;
    /* the name the server listens on (--http idpool.internal:9471) is allowed too */
    if (!(allowed = malloc(n)))
        return -1;
    snprintf(allowed, n, "%s,%s", list, own);
    free(h->allowed_hosts);
    h->allowed_hosts = allowed;
    return 0;
}

void statushttp_get_closes(const struct statushttp *h, uint64_t out[HTTP_CLOSE_COUNT])
{
    apihttp_get_closes(h ? h->srv : NULL, out);
}

void statushttp_free(struct statushttp *h)
{
    if (h == NULL)
        return;
    apihttp_free(h->srv);
    free(h->allowed_hosts);
    free(h);
}
