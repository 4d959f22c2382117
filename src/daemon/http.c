#include "http.h"

#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "log.h"
#include "metrics.h"
#include "sbuf.h"
#include "statusjson.h"

#define HTTP_TIMEOUT_S   10    /* idle or slow clients are dropped after this */
#define HTTP_MAX_HEADERS 8192  /* bytes */
#define HTTP_MAX_BODY    65536 /* bytes; no route reads a body */
#define HTTP_BACKLOG     64
#define HTTP_ALLOW       "GET, HEAD"
#define CTYPE_JSON       "application/json"
#define CTYPE_PROMETHEUS "text/plain; version=0.0.4; charset=utf-8"

struct http {
    struct evhttp *evh;        /* NULL when HTTP is disabled */
    struct status_source src;  /* where the views come from */
    char addr[NI_MAXHOST + 8]; /* the bound address, for logs */
};

enum route { R_NONE, R_METRICS, R_HEALTHZ, R_APPS, R_APP };

static const char *method_name(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_HEAD:
        return "HEAD";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_OPTIONS:
        return "OPTIONS";
    case EVHTTP_REQ_TRACE:
        return "TRACE";
    case EVHTTP_REQ_CONNECT:
        return "CONNECT";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    }
    return "?";
}

static void free_body(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free((void *)data);
}

/*
 * Send `body` (heap, taken over: freed when written; NULL = out of memory,
 * answered 500) with status `code`. evhttp 2.1 would send a body even for
 * HEAD (and without Content-Length, which breaks keep-alive), so for HEAD
 * only the headers go out, with the Content-Length GET would have.
 */
static void reply(struct evhttp_request *req, int code, const char *reason, const char *ctype,
                  char *body)
{
    static const char oom[] = "{\"error\":\"out of memory\"}\n";
    struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);
    struct evbuffer *out = evhttp_request_get_output_buffer(req);
    int head = evhttp_request_get_command(req) == EVHTTP_REQ_HEAD;
    int json = strcmp(ctype, CTYPE_JSON) == 0; /* JSON bodies end with a newline */
    size_t len;
    char clen[24];

    if (body == NULL) {
        code = 500;
        reason = "Internal Server Error";
        ctype = CTYPE_JSON;
        len = sizeof(oom) - 1;
        if (!head)
            evbuffer_add_reference(out, oom, len, NULL, NULL);
    } else {
        len = strlen(body) + (size_t)json;
        if (head)
            free(body);
        else if (evbuffer_add_reference(out, body, len - (size_t)json, free_body, NULL) < 0)
            free(body);
        else if (json)
            evbuffer_add(out, "\n", 1);
    }
    evhttp_add_header(hdr, "Content-Type", ctype);
    evhttp_add_header(hdr, "Cache-Control", "no-store");
    if (head) {
        snprintf(clen, sizeof(clen), "%zu", len);
        evhttp_add_header(hdr, "Content-Length", clen);
    }
    log_debug("http: %s %s -> %d", method_name(evhttp_request_get_command(req)),
              evhttp_request_get_uri(req), code);
    evhttp_send_reply(req, code, reason, NULL);
}

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

static void reply_405(struct evhttp_request *req, const char *path)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", HTTP_ALLOW);
    reply(req, 405, "Method Not Allowed", CTYPE_JSON,
          error_json("method not allowed", path, "allow", HTTP_ALLOW));
}

/* Which route `path` (percent-decoded) is; for R_APP, *key points into path. */
static enum route route_of(const char *path, const char **key)
{
    static const char apps[] = "/v1/apps/";

    if (strcmp(path, "/metrics") == 0)
        return R_METRICS;
    if (strcmp(path, "/healthz") == 0)
        return R_HEALTHZ;
    if (strcmp(path, "/v1/apps") == 0)
        return R_APPS;
    if (strncmp(path, apps, sizeof(apps) - 1) == 0 && path[sizeof(apps) - 1] != '\0') {
        *key = path + sizeof(apps) - 1;
        return R_APP;
    }
    return R_NONE;
}

static void serve_metrics(struct http *h, struct evhttp_request *req)
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
    reply(req, 200, "OK", CTYPE_PROMETHEUS, text);
}

static void serve_healthz(struct http *h, struct evhttp_request *req)
{
    int healthy = 0;
    char *text = statusjson_health(&h->src, &healthy);

    if (healthy)
        reply(req, 200, "OK", CTYPE_JSON, text);
    else
        reply(req, 503, "Service Unavailable", CTYPE_JSON, text);
}

static void serve_apps(struct http *h, struct evhttp_request *req, const char *path,
                       const char *key)
{
    char *text = NULL;

    switch (statusjson_apps(&h->src, key, &text)) {
    case STATUSJSON_OK:
        reply(req, 200, "OK", CTYPE_JSON, text);
        break;
    case STATUSJSON_NOT_FOUND:
        reply(req, 404, "Not Found", CTYPE_JSON,
              error_json("unknown application", path, "key", key));
        break;
    case STATUSJSON_ERROR:
        reply(req, 500, "Internal Server Error", CTYPE_JSON, NULL);
        break;
    }
}

/*
 * The path of the request target as sent, without query or fragment (heap).
 * Not evhttp_uri_get_path(): it parses "//metrics" as an authority
 * ("metrics") with an empty path. A CONNECT's "host:port" has no path: "".
 */
static char *target_path(struct evhttp_request *req)
{
    const char *t = evhttp_request_get_uri(req);
    size_t n;

    if (t == NULL || t[0] != '/')
        return strdup("");
    n = strcspn(t, "?#");
    return strndup(t, n);
}

/* Every request: only GET and HEAD exist (405 for any other method, on any path); then route on
 * the decoded path. */
static void on_request(struct evhttp_request *req, void *arg)
{
    struct http *h = arg;
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    const char *key = NULL;
    char *raw = target_path(req), *path = NULL;
    size_t len = 0;
    enum route r;

    if (raw != NULL && method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD) {
        reply_405(req, raw);
        free(raw);
        return;
    }
    path = raw ? evhttp_uridecode(raw, 0, &len) : NULL;
    if (path == NULL) {
        reply(req, 500, "Internal Server Error", CTYPE_JSON, NULL);
        free(raw);
        return;
    }
    /* A %00 would cut the path short: such a path names nothing. */
    r = strlen(path) == len ? route_of(path, &key) : R_NONE;
    if (r == R_NONE)
        reply(req, 404, "Not Found", CTYPE_JSON, error_json("not found", raw, NULL, NULL));
    else if (r == R_METRICS)
        serve_metrics(h, req);
    else if (r == R_HEALTHZ)
        serve_healthz(h, req);
    else
        serve_apps(h, req, raw, r == R_APP ? key : NULL);
    free(path);
    free(raw);
}

/*
 * A listening, non-blocking socket on the first address of host:port;
 * -1 with an error logged. The address is written to addr for logs.
 */
static int listen_on(const char *host, int port, char *addr, size_t addrlen)
{
    struct addrinfo hints, *res = NULL;
    char portstr[16], hbuf[NI_MAXHOST];
    int fd = -1, one = 1, rc;

    snprintf(addr, addrlen, "%s:%d", host, port);
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(portstr, sizeof(portstr), "%d", port);
    rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0) {
        log_error("http: cannot resolve '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    if (getnameinfo(res->ai_addr, res->ai_addrlen, hbuf, sizeof(hbuf), NULL, 0, NI_NUMERICHOST) ==
        0)
        snprintf(addr, addrlen, res->ai_family == AF_INET6 ? "[%s]:%d" : "%s:%d", hbuf, port);
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, HTTP_BACKLOG) < 0) {
        log_error("http: cannot listen on %s: %s", addr, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

struct http *http_new(struct event_base *base, const struct config *cfg,
                      const struct status_source *src)
{
    struct http *h = calloc(1, sizeof(*h));
    int fd = -1;

    if (h == NULL) {
        log_error("http: out of memory");
        return NULL;
    }
    h->src = *src;
    if (cfg->http_addr == NULL || cfg->http_addr[0] == '\0') {
        log_info("http: disabled (empty http address)");
        return h;
    }
    h->evh = evhttp_new(base);
    if (h->evh == NULL) {
        log_error("http: cannot create the HTTP server");
        goto fail;
    }
    evhttp_set_timeout(h->evh, HTTP_TIMEOUT_S);
    evhttp_set_max_headers_size(h->evh, HTTP_MAX_HEADERS);
    evhttp_set_max_body_size(h->evh, HTTP_MAX_BODY);
    /*
     * Every method reaches on_request, so that it can answer 405 with Allow:
     * also methods libevent does not know (FOO, PROPFIND), which it parses as
     * a private "unknown" type and would otherwise answer 501 with HTML.
     */
    evhttp_set_allowed_methods(h->evh, UINT16_MAX);
    evhttp_set_gencb(h->evh, on_request, h);
    fd = listen_on(cfg->http_host, cfg->http_port, h->addr, sizeof(h->addr));
    if (fd < 0)
        goto fail;
    /* From here on the bound socket owns fd and closes it in evhttp_free(). */
    if (evhttp_accept_socket_with_handle(h->evh, fd) == NULL) {
        log_error("http: cannot accept connections on %s", h->addr);
        close(fd);
        goto fail;
    }
    log_info("http: listening on %s (/metrics, /healthz, /v1/apps)", h->addr);
    return h;
fail:
    http_free(h);
    return NULL;
}

void http_free(struct http *h)
{
    if (h == NULL)
        return;
    if (h->evh)
        evhttp_free(h->evh);
    free(h);
}
