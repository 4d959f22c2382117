#include "http.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "clock.h"
#include "log.h"

#define HTTP_BACKLOG 511

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
    struct http_conn *hnext; /* next in its by_bev bucket */
    struct http *h;
    struct bufferevent *bev;         /* evhttp's; our reference only until conn_setup */
    struct evhttp_connection *evcon; /* set by conn_setup */
    struct event *setup;             /* conn_setup, run right after evhttp's accept */
    evutil_socket_t fd;              /* the socket, known from conn_setup on */
    const void *hash_bev;            /* its key in by_bev (the bufferevent), kept after setup */
    uint64_t deadline_ms;            /* the next request must be complete by then */
    int expired;                     /* shut down by the deadline */
};

struct http {
    struct evhttp *evh; /* NULL when the server listens nowhere */
    const char *name;   /* "http", "api" (static) */
    void (*handler)(struct evhttp_request *req, void *arg);
    void *arg;
    char addr[NI_MAXHOST + 8]; /* the bound address, for logs */
    struct event_base *base;
    struct evconnlistener *listener;
    TAILQ_HEAD(, http_conn) conns;
    struct http_conn **by_bev; /* the connections by bufferevent: a request finds its own */
    size_t nbuckets;           /* a power of two */
    int nconns, max_conns;
    int timeout_ms;       /* http-timeout-ms */
    int paused;           /* not accepting: 1 at the limit, 2 after an accept error */
    struct event *resume; /* accepts again after an accept error */
    struct event *sweep;  /* closed connections, deadlines: every SWEEP_MS */
    struct http_burst limit_log, accept_log, expired_log;
};

const char *http_method_name(enum evhttp_cmd_type m)
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
 * evhttp 2.1 would send a body even for HEAD (and without Content-Length,
 * which breaks keep-alive), so for HEAD only the headers go out, with the
 * Content-Length GET would have.
 */
void http_reply(struct evhttp_request *req, int code, const char *reason, const char *ctype,
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
    log_debug("http: %s %s -> %d", http_method_name(evhttp_request_get_command(req)),
              evhttp_request_get_uri(req), code);
    evhttp_send_reply(req, code, reason, NULL);
}

/* --- connections: the limit, the deadline, accept errors ----------------- */

/* 1 when a burst entry should be logged now (then `n` says how many since the last one). */
int http_burst_due(struct http_burst *b, uint64_t *n)
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

static size_t bev_bucket(const struct http *h, const void *bev)
{
    return ((uintptr_t)bev >> 4) & (h->nbuckets - 1);
}

static void conn_drop(struct http *h, struct http_conn *c)
{
    if (c->hash_bev) {
        struct http_conn **pp = &h->by_bev[bev_bucket(h, c->hash_bev)];
        while (*pp && *pp != c)
            pp = &(*pp)->hnext;
        if (*pp)
            *pp = c->hnext;
    }
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
    c->hash_bev = c->bev;
    {
        size_t b = bev_bucket(h, c->bev);
        c->hnext = h->by_bev[b];
        h->by_bev[b] = c;
    }
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
        if (http_burst_due(&h->expired_log, &n))
            log_info("%s: closed %" PRIu64 " connection(s) that sent no complete request "
                     "within %d ms (http-timeout-ms)",
                     h->name, n, h->timeout_ms);
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
        if (http_burst_due(&h->limit_log, &n))
            log_warn("%s: %d connections open (%s-max-connections): more wait in the listen "
                     "backlog until one closes (%" PRIu64 " time(s) since the last message)",
                     h->name, h->nconns, h->name, n);
    }
    return c->bev;
}

/* A request arrived whole: the next one has the full deadline again. */
static void conn_request(struct http *h, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    const void *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    struct http_conn *c;

    for (c = bev ? h->by_bev[bev_bucket(h, bev)] : NULL; c; c = c->hnext) {
        if (c->evcon == evcon) {
            c->deadline_ms = clock_ms() + (uint64_t)h->timeout_ms;
            return;
        }
    }
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct http *h = arg;

    conn_request(h, req);
    h->handler(req, h->arg);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    accept_resume(arg);
}

/*
 * The listener's error callback gets evhttp's argument, not ours: the
 * servers of this process, by listener (the status server, the ID API).
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
    if (http_burst_due(&h->accept_log, &n))
        log_warn("%s: cannot accept connections on %s: %s (%" PRIu64
                 " time(s) since the last message); pausing %d ms",
                 h->name, h->addr, evutil_socket_error_to_string(err), n, ACCEPT_PAUSE_MS);
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
int http_fit_fd_limit(const char *name, int want)
{
    static rlim_t granted; /* to the servers set up before this one */
    struct rlimit rl;
    rlim_t need = (rlim_t)want + HTTP_FD_RESERVE + granted;
    int fit = want;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        goto out;
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
        rl.rlim_cur = need;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            goto out;
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    fit = rl.rlim_cur > HTTP_FD_RESERVE + granted + 1
              ? (int)(rl.rlim_cur - HTTP_FD_RESERVE - granted)
              : 1;
    log_warn("%s: the file limit (%llu descriptors) leaves room for %d connections; "
             "%s-max-connections %d lowered to %d (raise LimitNOFILE / ulimit -n)",
             name, (unsigned long long)rl.rlim_cur, fit, name, want, fit);
out:
    granted += (rlim_t)fit;
    return fit;
}

/* libevent's own messages, into the daemon's log; a burst once. */
static void on_libevent_log(int severity, const char *msg)
{
    static struct http_burst b;
    uint64_t n;

    if (severity < EVENT_LOG_WARN || !http_burst_due(&b, &n))
        return;
    log_warn("libevent: %s (%" PRIu64 " message(s) since the last one)", msg, n);
}

char *http_target_path(struct evhttp_request *req)
{
    const char *t = evhttp_request_get_uri(req);
    size_t n;

    /* The absolute form (RFC 7230 5.3.2), which a server must accept: the path after the authority.
     */
    if (t && (strncasecmp(t, "http://", 7) == 0 || strncasecmp(t, "https://", 8) == 0)) {
        t = strchr(t + (t[4] == ':' ? 7 : 8), '/');
        if (t == NULL)
            return strdup("/");
    }
    if (t == NULL || t[0] != '/')
        return strdup("");
    n = strcspn(t, "?#");
    return strndup(t, n);
}

/*
 * A listening, non-blocking socket on the first address of host:port;
 * -1 with an error logged. The address is written to addr for logs.
 */
int http_listen(const char *name, const char *host, int port, char *addr, size_t addrlen)
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
        log_error("%s: cannot resolve '%s': %s", name, host, gai_strerror(rc));
        return -1;
    }
    if (getnameinfo(res->ai_addr, res->ai_addrlen, hbuf, sizeof(hbuf), NULL, 0, NI_NUMERICHOST) ==
        0)
        snprintf(addr, addrlen, res->ai_family == AF_INET6 ? "[%s]:%d" : "%s:%d", hbuf, port);
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, HTTP_BACKLOG) < 0) {
        log_error("%s: cannot listen on %s: %s", name, addr, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

struct http *http_new(struct event_base *base, const struct http_opts *o)
{
    struct http *h = calloc(1, sizeof(*h));
    struct evhttp_bound_socket *bound;
    int fd = -1;

    if (h == NULL) {
        log_error("%s: out of memory", o->name);
        return NULL;
    }
    h->name = o->name;
    h->handler = o->handler;
    h->arg = o->arg;
    h->base = base;
    TAILQ_INIT(&h->conns);
    event_set_log_callback(on_libevent_log);
    if (o->host == NULL || o->host[0] == '\0') {
        log_info("%s: disabled (empty %s address)", o->name, o->name);
        return h;
    }
    h->evh = evhttp_new(base);
    if (h->evh == NULL) {
        log_error("%s: cannot create the HTTP server", o->name);
        goto fail;
    }
    h->timeout_ms = o->timeout_ms;
    h->max_conns = http_fit_fd_limit(o->name, o->max_conns);
    for (h->nbuckets = 16; h->nbuckets < (size_t)h->max_conns * 2; h->nbuckets *= 2)
        ;
    h->by_bev = calloc(h->nbuckets, sizeof(*h->by_bev));
    h->resume = evtimer_new(base, on_resume, h);
    h->sweep = event_new(base, -1, EV_PERSIST, on_sweep, h);
    if (h->by_bev == NULL || h->resume == NULL || h->sweep == NULL) {
        log_error("%s: out of memory", o->name);
        goto fail;
    }
    {
        struct timeval tv = {h->timeout_ms / 1000, (h->timeout_ms % 1000) * 1000};
        struct timeval sw = {0, SWEEP_MS * 1000};

        evhttp_set_timeout_tv(h->evh, &tv); /* idle, and between bytes */
        event_add(h->sweep, &sw);
    }
    evhttp_set_bevcb(h->evh, conn_new, h);
    evhttp_set_max_headers_size(h->evh, o->max_headers);
    evhttp_set_max_body_size(h->evh, o->max_body);
    /*
     * Every method reaches the handler, so that it can answer 405 with Allow:
     * also methods libevent does not know (FOO, PROPFIND), which it parses as
     * a private "unknown" type and would otherwise answer 501 with HTML.
     */
    evhttp_set_allowed_methods(h->evh, UINT16_MAX);
    evhttp_set_gencb(h->evh, on_request, h);
    fd = http_listen(o->name, o->host, o->port, h->addr, sizeof(h->addr));
    if (fd < 0)
        goto fail;
    /* From here on the bound socket owns fd and closes it in evhttp_free(). */
    bound = evhttp_accept_socket_with_handle(h->evh, fd);
    if (bound == NULL) {
        log_error("%s: cannot accept connections on %s", o->name, h->addr);
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
    log_info("%s: listening on %s (%s)", o->name, h->addr, o->routes);
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
    free(h->by_bev);
    free(h);
}
