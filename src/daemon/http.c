#include "http.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "sbuf.h"
#include "statusjson.h"

#define HTTP_MAX_HEADERS 8192  /* bytes */
#define HTTP_MAX_BODY    65536 /* bytes; no route reads a body */
#define HTTP_BACKLOG     64
#define HTTP_ALLOW       "GET, HEAD"
#define CTYPE_JSON       "application/json"
#define CTYPE_PROMETHEUS "text/plain; version=0.0.4; charset=utf-8"

#define HTTP_FD_RESERVE 32    /* descriptors kept for Redis, MySQL, the webhook and the rest */
#define ACCEPT_PAUSE_MS 1000  /* after an accept error (EMFILE...), accept again this much later */
#define LOG_EVERY_MS    10000 /* a burst of the same trouble is logged once per this */
#define SWEEP_MS        100   /* how often connections are looked at (deadline precision) */

/*
 * One connection, from accept to close. evhttp owns it; we learn of it in
 * its bevcb (conn_new) and of its end through its close callback, set once
 * evhttp has finished creating it (conn_setup). That counts the
 * connections, and lets a deadline of our own close one that has not sent a
 * whole request in time, however slowly it trickles bytes (evhttp's
 * timeouts restart with every byte).
 */
struct http_conn {
    TAILQ_ENTRY(http_conn) link;
    struct http *h;
    struct bufferevent *bev;         /* evhttp's; our reference only until conn_setup */
    struct evhttp_connection *evcon; /* set by conn_setup */
    struct event *setup;             /* conn_setup, run right after evhttp's accept */
    evutil_socket_t fd;              /* the socket, known from conn_setup on */
    uint64_t deadline_ms;            /* the next request must be complete by then */
    int expired;                     /* shut down by the deadline */
};

/* Trouble that can come in bursts: logged once per LOG_EVERY_MS, with a count. */
struct burst {
    uint64_t last_ms; /* last logged */
    uint64_t n;       /* occurrences since */
};

struct http {
    struct evhttp *evh;        /* NULL when HTTP is disabled */
    struct status_source src;  /* where the views come from */
    char addr[NI_MAXHOST + 8]; /* the bound address, for logs */
    struct event_base *base;
    struct evconnlistener *listener;
    TAILQ_HEAD(, http_conn) conns;
    int nconns, max_conns;
    int timeout_ms;       /* http-timeout-ms */
    int paused;           /* not accepting: 1 at the limit, 2 after an accept error */
    struct event *resume; /* accepts again after an accept error */
    struct event *sweep;  /* closed connections, deadlines: every SWEEP_MS */
    struct burst limit_log, accept_log, expired_log;
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

/* --- connections: the limit, the deadline, accept errors ----------------- */

/* 1 when a burst entry should be logged now (then `n` says how many since the last one). */
static int burst_due(struct burst *b, uint64_t *n)
{
    uint64_t now = clock_ms();

    b->n++;
    if (b->last_ms && now - b->last_ms < LOG_EVERY_MS)
        return 0;
    *n = b->n;
    b->n = 0;
    b->last_ms = now;
    return 1;
}

static void accept_pause(struct http *h, int why)
{
    if (!h->listener || h->paused)
        return;
    evconnlistener_disable(h->listener);
    h->paused = why;
}

static void accept_resume(struct http *h)
{
    if (!h->listener || !h->paused || h->nconns >= h->max_conns)
        return;
    evconnlistener_enable(h->listener);
    h->paused = 0;
}

static void conn_drop(struct http *h, struct http_conn *c)
{
    TAILQ_REMOVE(&h->conns, c, link);
    h->nconns--;
    if (c->setup)
        event_free(c->setup);
    free(c);
    if (h->paused == 1)
        accept_resume(h);
}

/* evhttp frees the connection (its fd is still open): forget it. */
static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct http_conn *c = arg;

    (void)evcon;
    conn_drop(c->h, c);
}

/*
 * Right after evhttp's accept callback: the connection exists (its
 * bufferevent's callback argument), or evhttp already freed it on an error
 * path (callbacks cleared; our reference kept the memory valid).
 */
static void conn_setup(evutil_socket_t fd, short what, void *arg)
{
    struct http_conn *c = arg;
    struct http *h = c->h;
    bufferevent_data_cb r, w;
    bufferevent_event_cb e;
    void *cbarg = NULL;

    (void)fd;
    (void)what;
    bufferevent_getcb(c->bev, &r, &w, &e, &cbarg);
    if (r == NULL && w == NULL && e == NULL) {
        /* evhttp freed it on an error path, or never took it (out of memory) */
        bufferevent_disable(c->bev, EV_READ | EV_WRITE);
        if (bufferevent_decref(c->bev) == 0)
            bufferevent_free(c->bev);
        conn_drop(h, c);
        return;
    }
    c->evcon = cbarg;
    c->fd = bufferevent_getfd(c->bev);
    evhttp_connection_set_closecb(c->evcon, on_conn_close, c);
    bufferevent_decref(c->bev); /* evhttp's alone from now on */
    c->bev = NULL;
    event_free(c->setup);
    c->setup = NULL;
}

/*
 * Every SWEEP_MS: shut down connections past their deadline (evhttp then
 * sees the end of the stream and frees them).
 */
static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    struct http *h = arg;
    struct http_conn *c;
    uint64_t now = clock_ms(), expired = 0, n;

    (void)fd;
    (void)what;
    TAILQ_FOREACH(c, &h->conns, link)
    {
        if (c->evcon && !c->expired && now >= c->deadline_ms) {
            c->expired = 1;
            expired++;
            if (c->fd >= 0)
                shutdown(c->fd, SHUT_RDWR);
        }
    }
    while (expired--)
        if (burst_due(&h->expired_log, &n))
            log_info("http: closed %" PRIu64 " connection(s) that sent no complete request "
                     "within %d ms (http-timeout-ms)",
                     n, h->timeout_ms);
}

/* evhttp's bevcb: the bufferevent of each accepted connection, counted. */
static struct bufferevent *conn_new(struct event_base *base, void *arg)
{
    struct http *h = arg;
    struct http_conn *c = calloc(1, sizeof(*c));
    uint64_t n;

    if (c == NULL)
        return NULL; /* evhttp makes its own: served, not counted */
    c->h = h;
    c->fd = -1;
    c->bev = bufferevent_socket_new(base, -1, 0); /* the fd is evhttp's to close */
    c->setup = event_new(base, -1, 0, conn_setup, c);
    if (c->bev == NULL || c->setup == NULL) {
        if (c->bev)
            bufferevent_free(c->bev);
        if (c->setup)
            event_free(c->setup);
        free(c);
        return NULL;
    }
    bufferevent_incref(c->bev);
    event_active(c->setup, EV_TIMEOUT, 1);
    c->deadline_ms = clock_ms() + (uint64_t)h->timeout_ms;
    TAILQ_INSERT_TAIL(&h->conns, c, link);
    h->nconns++;
    if (h->nconns >= h->max_conns) {
        accept_pause(h, 1);
        if (burst_due(&h->limit_log, &n))
            log_warn("http: %d connections open (http-max-connections): more wait in the listen "
                     "backlog until one closes (%" PRIu64 " time(s) since the last message)",
                     h->nconns, n);
    }
    return c->bev;
}

/* A request arrived whole: the next one has the full deadline again. */
static void conn_request(struct http *h, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct http_conn *c;

    TAILQ_FOREACH(c, &h->conns, link)
    {
        if (c->evcon == evcon) {
            c->deadline_ms = clock_ms() + (uint64_t)h->timeout_ms;
            return;
        }
    }
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    accept_resume(arg);
}

/*
 * The listener's error callback gets evhttp's argument, not ours: the
 * servers of this process, by listener (the status server; the ID API's
 * will be a second one).
 */
#define MAX_SERVERS 4
static struct {
    struct evconnlistener *l;
    struct http *h;
} servers[MAX_SERVERS];

/*
 * accept() failed (out of descriptors, of memory): stop accepting for a
 * while rather than spin on the error, and say so once per burst.
 */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
    struct http *h = NULL;
    int err = EVUTIL_SOCKET_ERROR();
    struct timeval tv = {ACCEPT_PAUSE_MS / 1000, (ACCEPT_PAUSE_MS % 1000) * 1000};
    uint64_t n;

    (void)arg;
    for (int i = 0; i < MAX_SERVERS && !h; i++)
        if (servers[i].l == l)
            h = servers[i].h;
    if (h == NULL)
        return;
    if (burst_due(&h->accept_log, &n))
        log_warn("http: cannot accept connections on %s: %s (%" PRIu64
                 " time(s) since the last message); pausing %d ms",
                 h->addr, evutil_socket_error_to_string(err), n, ACCEPT_PAUSE_MS);
    if (h->paused)
        return;
    accept_pause(h, 2);
    evtimer_add(h->resume, &tv);
}

/*
 * Connections must leave HTTP_FD_RESERVE descriptors to the rest of the
 * daemon: raise the soft file limit if needed (and allowed), else take
 * fewer connections.
 */
static int fit_fd_limit(int want)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)want + HTTP_FD_RESERVE;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return want;
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
        rl.rlim_cur = need;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            return want;
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    {
        int fit = rl.rlim_cur > HTTP_FD_RESERVE + 1 ? (int)(rl.rlim_cur - HTTP_FD_RESERVE) : 1;
        log_warn("http: the file limit (%llu descriptors) leaves room for %d status connections; "
                 "http-max-connections %d lowered to %d (raise LimitNOFILE / ulimit -n)",
                 (unsigned long long)rl.rlim_cur, fit, want, fit);
        return fit;
    }
}

/* libevent's own messages, into the daemon's log; a burst once. */
static void on_libevent_log(int severity, const char *msg)
{
    static struct burst b;
    uint64_t n;

    if (severity < EVENT_LOG_WARN || !burst_due(&b, &n))
        return;
    log_warn("libevent: %s (%" PRIu64 " message(s) since the last one)", msg, n);
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

    conn_request(h, req);
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
    struct evhttp_bound_socket *bound;
    int fd = -1;

    if (h == NULL) {
        log_error("http: out of memory");
        return NULL;
    }
    h->src = *src;
    h->base = base;
    TAILQ_INIT(&h->conns);
    event_set_log_callback(on_libevent_log);
    if (cfg->http_addr == NULL || cfg->http_addr[0] == '\0') {
        log_info("http: disabled (empty http address)");
        return h;
    }
    h->evh = evhttp_new(base);
    if (h->evh == NULL) {
        log_error("http: cannot create the HTTP server");
        goto fail;
    }
    h->timeout_ms = cfg->http_timeout_ms;
    h->max_conns = fit_fd_limit(cfg->http_max_conns);
    h->resume = evtimer_new(base, on_resume, h);
    h->sweep = event_new(base, -1, EV_PERSIST, on_sweep, h);
    if (h->resume == NULL || h->sweep == NULL) {
        log_error("http: out of memory");
        goto fail;
    }
    {
        struct timeval tv = {h->timeout_ms / 1000, (h->timeout_ms % 1000) * 1000};
        struct timeval sw = {0, SWEEP_MS * 1000};

        evhttp_set_timeout_tv(h->evh, &tv); /* idle, and between bytes */
        event_add(h->sweep, &sw);
    }
    evhttp_set_bevcb(h->evh, conn_new, h);
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
    bound = evhttp_accept_socket_with_handle(h->evh, fd);
    if (bound == NULL) {
        log_error("http: cannot accept connections on %s", h->addr);
        close(fd);
        goto fail;
    }
    h->listener = evhttp_bound_socket_get_listener(bound);
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (servers[i].l == NULL) {
            servers[i].l = h->listener;
            servers[i].h = h;
            evconnlistener_set_error_cb(h->listener, on_accept_error);
            break;
        }
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
    for (int i = 0; i < MAX_SERVERS; i++)
        if (servers[i].h == h)
            servers[i].l = NULL, servers[i].h = NULL;
    h->listener = NULL; /* freed by evhttp_free */
    if (h->evh)
        evhttp_free(h->evh); /* closes every connection: on_conn_close for each */
    while (!TAILQ_EMPTY(&h->conns)) {
        struct http_conn *c = TAILQ_FIRST(&h->conns); /* not set up yet */

        if (c->bev)
            bufferevent_decref(c->bev);
        conn_drop(h, c);
    }
    if (h->resume)
        event_free(h->resume);
    if (h->sweep)
        event_free(h->sweep);
    free(h);
}
