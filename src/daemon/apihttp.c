#include "apihttp.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <event2/listener.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "accessline.h"
#include "accesslog.h"
#include "clock.h"
#include "http.h"
#include "httpreq.h"
#include "log.h"
#include "status.h"
#include "takereply.h"
#include "url.h"

#define HEAD_MAX        8192  /* bytes of a request head */
#define OUT_MAX         65536 /* bytes of answers waiting for a peer before it is read no more */
#define SWEEP_MS        100   /* deadline precision */
#define ACCEPT_PAUSE_MS 1000  /* after an accept error (EMFILE...) */
#define ACCEPT_BATCH    64    /* accepts at most, then one loop turn of reading (see on_accept) */
#define CTYPE_JSON      "application/json"

/*
 * Where a connection is, for its deadline: what it must do by then, and
 * what its closing is counted as when it does not.
 */
enum phase {
    P_HEAD,  /* a request head is due: http-head-timeout-ms from accept or its first byte */
    P_BODY,  /* the head is in, the body is due: http-timeout-ms from the head */
    P_IDLE,  /* answered, nothing new yet: http-timeout-ms from the answer */
    P_WRITE, /* answers wait for the peer to read them: http-timeout-ms from the block */
};

/* The connections of one peer address (for the per-address limit). */
struct peer {
    struct peer *next;      /* in its bucket */
    unsigned char addr[16]; /* IPv4 (4 bytes) or IPv6 (16) */
    unsigned len;
    int n; /* connections open */
};

/* One connection: its request buffer, its pending output, its state. */
struct conn {
    TAILQ_ENTRY(conn) link; /* in srv->conns, least recently answered first */
    struct apihttp *srv;
    evutil_socket_t fd;
    SSL *ssl;          /* NULL: plain */
    struct event *rev; /* readable (persistent); armed while `reading` */
    struct event *wev; /* writable: only while output is pending */
    struct peer *peer; /* its address's count, or NULL (not IP) */
    char *in;          /* HEAD_MAX + max_body bytes, made at the first byte (NULL before) */
    size_t in_len;     /* bytes in `in` */
    char *out;         /* pending output (heap): out[out_off..out_len) */
    size_t out_len, out_off, out_cap;
    struct httpreq head;  /* the current request's head, once parsed */
    int parsed;           /* head is valid (its body may still be arriving) */
    int busy;             /* the handler has the request: not answered yet */
    int in_process;       /* process() is running (frees wait for it) */
    int close_after;      /* close once the output is written */
    int dead;             /* the peer is gone or failed: free when not busy */
    int continue_sent;    /* "100 Continue" sent for this request */
    int reading;          /* rev is armed (see conn_read_update) */
    int write_wants_read; /* a TLS write waits for the socket to be readable */
    int head_req;         /* the current request is HEAD: no body in its answer */
    int plain_on_tls;     /* plain HTTP came to the TLS port: read as such, answered 400 */
    int keep_alive;       /* the current request keeps the connection */
    enum phase phase;     /* what is due by deadline_ms */
    uint64_t deadline_ms; /* see enum phase; not while busy */
    uint64_t since_us;    /* the current request began (its first byte, or the accept) */
    char user[APIHTTP_USER_MAX + 1]; /* who the handler says sent it (access log), or "" */
    struct sockaddr_storage sa;      /* the peer, for logs */
    socklen_t salen;
    struct apihttp_req req;
    char peer_name[INET6_ADDRSTRLEN + 10]; /* req.peer */
};

struct apihttp {
    struct event_base *base;
    const char *name;
    void (*handler)(struct apihttp_req *req, void *arg);
    void *arg;
    size_t max_body;
    int timeout_ms, head_timeout_ms;
    int max_conns, nconns, max_per_addr;
    int paused; /* not accepting: 1 at the limit with every connection busy, 2 after an accept
                   error, 3 for a loop turn after a batch of accepts */
    int accept_batch, batch_accepts; /* accepts per loop turn at most; so far in this one */
    SSL_CTX *tls;
    struct evconnlistener *listener;
    struct event *resume, *sweep;
    TAILQ_HEAD(, conn) conns;
    struct peer **peers;  /* by address hash */
    size_t npeer_buckets; /* a power of two */
    char addr[300];
    uint64_t closes[HTTP_CLOSE_COUNT]; /* closed on our own, by reason */
    uint64_t refused[600];             /* requests refused here (not parsed), by status */
    struct http_burst close_log[HTTP_CLOSE_COUNT];
    struct http_burst accept_log;
    struct http_burst plain_log; /* plain HTTP to the TLS port */
    struct accesslog *alog;      /* a line per answer, or NULL */
};

static void conn_free(struct conn *c);
static void process(struct conn *c);
static void on_read(evutil_socket_t fd, short what, void *arg);

/* --- output ------------------------------------------------------------- */

/* "Tue, 24 Nov 2026 20:17:48 GMT", formatted once a second. */
static const char *http_date(void)
{
    static char buf[40];
    static time_t last;
    time_t now = time(NULL);
    struct tm tm;

    if (now != last && gmtime_r(&now, &tm)) {
        strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        last = now;
    }
    return buf;
}

static const char *reason_of(int code)
{
    switch (code) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    }
    return "Internal Server Error";
}

static int out_reserve(struct conn *c, size_t more)
{
    size_t cap = c->out_cap ? c->out_cap : 1024, need;
    char *p;

    if (c->out_off > 0) { /* what was written goes: the buffer holds what waits */
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    need = c->out_len + more;
    if (need <= c->out_cap)
        return 0;
    while (cap < need)
        cap *= 2;
    p = realloc(c->out, cap);
    if (p == NULL)
        return -1;
    c->out = p;
    c->out_cap = cap;
    return 0;
}

static void out_put(struct conn *c, const char *s, size_t n)
{
    memcpy(c->out + c->out_len, s, n);
    c->out_len += n;
}

/* One transport write: bytes written, 0 would block, -1 failed. */
static ssize_t conn_send(struct conn *c, const char *p, size_t n, int *want_read)
{
    *want_read = 0;
    if (c->ssl) {
        int r = SSL_write(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
        if (r > 0)
            return r;
        switch (SSL_get_error(c->ssl, r)) {
        case SSL_ERROR_WANT_WRITE:
            return 0;
        case SSL_ERROR_WANT_READ:
            *want_read = 1;
            return 0;
        }
        ERR_clear_error();
        return -1;
    }
    for (;;) {
        ssize_t r = send(c->fd, p, n, MSG_NOSIGNAL);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
}

/*
 * The one place that arms or disarms the read event. A connection reads
 * unless it is dead or closing, answers wait for the peer to read them (it
 * would only queue more; and a readable socket left unread makes the loop
 * spin), or the buffer is full of pipelined requests behind one that is
 * being answered. A TLS write that waits for a read reads.
 */
static void conn_read_update(struct conn *c)
{
    size_t cap = HEAD_MAX + c->srv->max_body;
    int want = !c->dead && !c->close_after && (c->out_len == c->out_off || c->write_wants_read) &&
               !(c->busy && c->in_len >= cap);

    if (want == c->reading)
        return;
    if (want)
        event_add(c->rev, NULL);
    else
        event_del(c->rev);
    c->reading = want;
}

/* The phase the connection's input puts it in, with a deadline from now (see enum phase). */
static void conn_rephase(struct conn *c)
{
    struct apihttp *s = c->srv;

    c->phase = c->parsed ? P_BODY : c->in_len > 0 ? P_HEAD : P_IDLE;
    c->deadline_ms =
        clock_ms() + (uint64_t)(c->phase == P_HEAD ? s->head_timeout_ms : s->timeout_ms);
}

/*
 * Write what is pending; the write event waits for the rest, and reading
 * stops meanwhile. A connection that is to close (or failed) is freed once
 * written, unless a request or process() still holds it: 1 when it was
 * freed (the caller must not touch it again), else 0.
 */
static int flush(struct conn *c)
{
    int want_read = 0;

    while (c->out_off < c->out_len) {
        ssize_t n = conn_send(c, c->out + c->out_off, c->out_len - c->out_off, &want_read);
        if (n < 0) {
            c->dead = 1;
            break;
        }
        if (n == 0) {
            c->write_wants_read = want_read;
            if (!want_read) {
                event_add(c->wev, NULL);
                if (c->phase != P_WRITE) {
                    c->phase = P_WRITE;
                    c->deadline_ms = clock_ms() + (uint64_t)c->srv->timeout_ms;
                }
            }
            conn_read_update(c);
            return 0;
        }
        c->out_off += (size_t)n;
    }
    c->out_off = c->out_len = 0;
    c->write_wants_read = 0;
    event_del(c->wev);
    if ((c->close_after || c->dead) && !c->busy && !c->in_process) {
        conn_free(c);
        return 1;
    }
    if (c->phase == P_WRITE)
        conn_rephase(c);
    conn_read_update(c);
    return 0;
}

/* The access log's line for the current request's answer (the head's strings while parsed). */
static void log_answer(struct conn *c, int code, size_t len)
{
    struct timeval tv;
    struct accessline e = {
        .peer = c->peer_name,
        .method = c->parsed ? c->head.method : NULL,
        .target = c->parsed ? c->head.target : NULL,
        .status = code,
        .bytes = len,
        .duration_us = clock_us() - c->since_us,
        .user = c->user,
    };

    gettimeofday(&tv, NULL);
    e.time_ms = (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
    accesslog_write(c->srv->alog, &e);
    c->user[0] = '\0';
}

/* Queue an answer (head and body) for the current request; not yet written. */
static int queue_answer(struct conn *c, int code, const char *ctype, const char *headers,
                        const char *body, size_t len)
{
    char head[512];
    int n;
    size_t hl = headers ? strlen(headers) : 0;
    const char *conn_hdr = !c->keep_alive       ? "Connection: close\r\n"
                           : c->head.minor == 0 ? "Connection: keep-alive\r\n"
                                                : "";

    n = snprintf(head, sizeof(head),
                 "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Type: %s\r\nCache-Control: no-store\r\n"
                 "Content-Length: %zu\r\n%s",
                 code, reason_of(code), http_date(), ctype, len, conn_hdr);
    if (n < 0 || (size_t)n >= sizeof(head))
        return -1;
    if (c->head_req)
        len = 0;
    if (c->srv->alog)
        log_answer(c, code, len);
    if (out_reserve(c, (size_t)n + hl + 2 + len) < 0)
        return -1;
    out_put(c, head, (size_t)n);
    if (hl)
        out_put(c, headers, hl);
    out_put(c, "\r\n", 2);
    if (len)
        out_put(c, body, len);
    return 0;
}

/*
 * Refuse what cannot be parsed: a JSON error, then close. A request in
 * plain HTTP to the TLS port, whatever it was, gets nginx's 400 in plain
 * text instead (the client reads no JSON error it did not expect to be
 * HTTP). 1 when c was freed.
 */
static int refuse(struct conn *c, int code, const char *msg)
{
    static const char plain[] = "The plain HTTP request was sent to HTTPS port\n";
    char body[256];
    int n = snprintf(body, sizeof(body), "{\"error\":\"%s\",\"message\":\"%s\"}\n",
                     takereply_name(TR_BADREQUEST), msg);
    const char *ctype = CTYPE_JSON;

    c->keep_alive = 0;
    c->close_after = 1;
    c->in_len = 0;
    if (c->plain_on_tls) {
        uint64_t k;

        code = 400;
        ctype = "text/plain; charset=utf-8";
        n = snprintf(body, sizeof(body), "%s", plain);
        if (http_burst_due(&c->srv->plain_log, &k))
            log_info("%s: plain HTTP from %s to the TLS port, answered 400; %" PRIu64
                     " such since the last message",
                     c->srv->name, c->peer_name, k);
    }
    if (code >= 0 && code < (int)(sizeof(c->srv->refused) / sizeof(c->srv->refused[0])))
        c->srv->refused[code]++;
    if (queue_answer(c, code, ctype, NULL, body, (size_t)n) < 0)
        c->dead = 1;
    return flush(c);
}

void apihttp_reply(struct apihttp_req *req, int code, const char *ctype, const char *headers,
                   const char *body, size_t len)
{
    struct conn *c = (struct conn *)((char *)req - offsetof(struct conn, req));
    struct apihttp *s = c->srv;
    size_t used = c->head.head_len + c->head.content_length;

    c->busy = 0;
    c->continue_sent = 0;
    if (c->dead) {
        c->parsed = 0;
        if (!c->in_process)
            conn_free(c);
        return;
    }
    if (queue_answer(c, code, ctype, headers, body, len) < 0)
        c->dead = 1;
    c->parsed = 0;
    /* The request's bytes go; pipelined ones move up (the next one begins now). */
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    c->since_us = clock_us();
    if (!c->keep_alive)
        c->close_after = 1;
    conn_rephase(c);
    TAILQ_REMOVE(&s->conns, c, link); /* the most recently answered: evicted last */
    TAILQ_INSERT_TAIL(&s->conns, c, link);
    if (flush(c))
        return;
    /* Answered later than asked (IDs from Redis): the next pipelined request now. */
    if (!c->in_process && !c->dead && !c->close_after && c->in_len > 0 && c->out_len == 0)
        process(c);
}

/* --- input -------------------------------------------------------------- */

/*
 * Handle the requests in the buffer, in order, one at a time, while the
 * answers already queued stay under OUT_MAX (the rest wait until the peer
 * reads them).
 */
static void process(struct conn *c)
{
    struct apihttp *s = c->srv;

    c->in_process = 1;
    while (!c->busy && !c->close_after && !c->dead && c->out_len - c->out_off <= OUT_MAX) {
        int code = 0;
        const char *err = NULL;

        if (!c->parsed) {
            enum httpreq_status st =
                httpreq_parse(c->in, c->in_len, HEAD_MAX, &c->head, &code, &err);
            if (st == HTTPREQ_MORE)
                break;
            if (st == HTTPREQ_BAD) {
                (void)refuse(c, code, err);
                break;
            }
            c->parsed = 1;
            c->keep_alive = c->head.keep_alive;
            c->head_req = strcmp(c->head.method, "HEAD") == 0;
            if (c->head.content_length > s->max_body) {
                (void)refuse(c, 413, "request body too large");
                break;
            }
        }
        if (c->in_len < c->head.head_len + c->head.content_length) {
            if (c->phase != P_BODY)
                conn_rephase(c); /* the body is due now */
            if (c->head.expect_continue && !c->continue_sent) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                c->continue_sent = 1;
                if (out_reserve(c, sizeof(cont) - 1) == 0) {
                    out_put(c, cont, sizeof(cont) - 1);
                    (void)flush(c);
                }
            }
            break;
        }
        if (c->plain_on_tls) { /* the whole request is in: answered without a reset */
            (void)refuse(c, 400, NULL);
            break;
        }
        c->busy = 1;
        c->req.method = c->head.method;
        c->req.target = c->head.target;
        c->req.authz = c->head.authz;
        c->req.accept = c->head.accept;
        c->req.ctype = c->head.ctype;
        c->req.host = c->head.host;
        c->req.body = c->in + c->head.head_len;
        c->req.body_len = (size_t)c->head.content_length;
        s->handler(&c->req, s->arg); /* may answer at once */
    }
    c->in_process = 0;
    if (!c->busy && (c->dead || (c->close_after && c->out_len == c->out_off)))
        conn_free(c);
    else
        conn_read_update(c);
}

/* One transport read into the buffer: bytes, 0 at the end, -1 would block, -2 failed. */
static ssize_t conn_recv(struct conn *c, char *p, size_t n)
{
    if (c->ssl) {
        int r = SSL_read(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
        if (r > 0)
            return r;
        switch (SSL_get_error(c->ssl, r)) {
        case SSL_ERROR_WANT_READ:
            return -1;
        case SSL_ERROR_WANT_WRITE:
            event_add(c->wev, NULL); /* the handshake needs to write */
            return -1;
        case SSL_ERROR_ZERO_RETURN:
            return 0;
        }
        ERR_clear_error();
        return -2;
    }
    for (;;) {
        ssize_t r = recv(c->fd, p, n, 0);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
    }
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    size_t cap = HEAD_MAX + c->srv->max_body;

    (void)fd;
    (void)what;
    if (c->out_len > c->out_off) { /* a TLS write waiting for a read */
        if (flush(c) || c->out_len > c->out_off)
            return;
    }
    if (c->in == NULL) { /* made for the first bytes: an idle connection costs no buffer */
        char b;
        ssize_t r = recv(c->fd, &b, 1, MSG_PEEK);

        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        /*
         * A TLS connection starts with a handshake record (0x16; an SSLv2
         * hello has the high bit set). Anything else is read as plain
         * HTTP, to be answered so (refuse) rather than with a reset, as
         * nginx does.
         */
        if (r == 1 && c->ssl && (unsigned char)b != 0x16 && !((unsigned char)b & 0x80)) {
            SSL_free(c->ssl);
            c->ssl = NULL;
            c->plain_on_tls = 1;
        }
        if ((c->in = malloc(cap)) == NULL) {
            c->dead = 1;
            conn_read_update(c);
            if (!c->busy)
                conn_free(c);
            return;
        }
    }
    for (;;) {
        ssize_t n;

        if (c->in_len >= cap) {
            if (!c->busy) /* a whole head and body fit: this is not a request */
                break;
            conn_read_update(c); /* pipelined requests wait until this one is answered */
            return;
        }
        n = conn_recv(c, c->in + c->in_len, cap - c->in_len);
        if (n == -1)
            break;
        if (n <= 0) { /* end of stream, or an error: nothing more to answer to */
            c->dead = 1;
            conn_read_update(c);
            event_del(c->wev);
            if (!c->busy)
                conn_free(c);
            return;
        }
        c->in_len += (size_t)n;
        if (c->phase == P_IDLE && !c->busy) {
            conn_rephase(c); /* the first byte of the next request: its head is due */
            c->since_us = clock_us();
        }
        if (!c->ssl || SSL_pending(c->ssl) == 0)
            break;
    }
    if (!c->busy)
        process(c);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;

    (void)fd;
    (void)what;
    if (c->out_len > c->out_off) {
        if (flush(c))
            return;
        /* Drained: pipelined requests held back while the peer did not read. */
        if (c->out_len == 0 && !c->busy && !c->in_process && !c->dead && !c->close_after &&
            c->in_len > 0)
            process(c);
    } else if (c->ssl) { /* the handshake wanted to write */
        on_read(fd, EV_READ, c);
    }
}

/* --- connections -------------------------------------------------------- */

static const char *const close_names[] = {
#define CLOSE_NAME(arg, id, help) #id,
    HTTP_CLOSES(CLOSE_NAME, _)
#undef CLOSE_NAME
};
static const char *const close_help[] = {
#define CLOSE_HELP(arg, id, help) help,
    HTTP_CLOSES(CLOSE_HELP, _)
#undef CLOSE_HELP
};

/*
 * Count a connection closed on our own (`why`), and say so once per burst
 * and reason, with the last peer's address.
 */
static void count_close(struct apihttp *s, enum http_close why, const struct sockaddr *sa,
                        socklen_t salen)
{
    char host[NI_MAXHOST], port[NI_MAXSERV];
    uint64_t n;

    s->closes[why]++;
    if (!http_burst_due(&s->close_log[why], &n))
        return;
    if (getnameinfo(sa, salen, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(host, sizeof(host), "?"), snprintf(port, sizeof(port), "?");
    if (why == HTTP_CLOSE_per_address)
        log_warn("%s: refused a connection from %s port %s: that address has %d connections open "
                 "(%s-max-connections-per-address); %" PRIu64 " refused since the last message",
                 s->name, host, port, s->max_per_addr, s->name, n);
    else if (why == HTTP_CLOSE_evicted || why == HTTP_CLOSE_limit)
        log_warn("%s: closed a connection from %s port %s: %s (%d, %s-max-connections); %" PRIu64
                 " such since the last message",
                 s->name, host, port, close_help[why], s->max_conns, s->name, n);
    else
        log_info("%s: closed a connection from %s port %s: %s (%s); %" PRIu64
                 " such since the last message",
                 s->name, host, port, close_help[why], close_names[why], n);
}

/* The address bytes of an IP peer (*len 4 or 16), or NULL. */
static const unsigned char *sa_bytes(const struct sockaddr *sa, unsigned *len)
{
    if (sa->sa_family == AF_INET) {
        *len = 4;
        return (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
    }
    if (sa->sa_family == AF_INET6) {
        *len = 16;
        return (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    }
    return NULL;
}

static struct peer **peer_slot(struct apihttp *s, const unsigned char *a, unsigned len)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    struct peer **pp;

    for (unsigned i = 0; i < len; i++)
        h = (h ^ a[i]) * 16777619u;
    for (pp = &s->peers[h & (s->npeer_buckets - 1)]; *pp; pp = &(*pp)->next)
        if ((*pp)->len == len && memcmp((*pp)->addr, a, len) == 0)
            break;
    return pp;
}

/* The count of sa's address, made when new (n 0); NULL when not IP or out of memory. */
static struct peer *peer_get(struct apihttp *s, const struct sockaddr *sa)
{
    unsigned len;
    const unsigned char *a = sa_bytes(sa, &len);
    struct peer **pp, *p;

    if (a == NULL || s->peers == NULL)
        return NULL;
    pp = peer_slot(s, a, len);
    if (*pp)
        return *pp;
    if ((p = calloc(1, sizeof(*p))) == NULL)
        return NULL;
    memcpy(p->addr, a, len);
    p->len = len;
    *pp = p;
    return p;
}

/* One connection of p fewer; p goes with its last. */
static void peer_put(struct apihttp *s, struct peer *p)
{
    struct peer **pp;

    if (p == NULL || --p->n > 0)
        return;
    pp = peer_slot(s, p->addr, p->len);
    *pp = p->next;
    free(p);
}

static void accept_pause(struct apihttp *s, int why)
{
    if (s->listener && !s->paused) {
        evconnlistener_disable(s->listener);
        s->paused = why;
    }
}

/* Accept again; paused at the limit (every connection busy), only once one went. */
static void accept_resume(struct apihttp *s)
{
    if (!s->listener || !s->paused || (s->paused == 1 && s->nconns >= s->max_conns))
        return;
    evconnlistener_enable(s->listener);
    s->paused = 0;
}

static void conn_free(struct conn *c)
{
    struct apihttp *s = c->srv;

    TAILQ_REMOVE(&s->conns, c, link);
    s->nconns--;
    peer_put(s, c->peer);
    if (c->rev)
        event_free(c->rev);
    if (c->wev)
        event_free(c->wev);
    if (c->ssl)
        SSL_free(c->ssl);
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
    if (s->paused == 1)
        accept_resume(s);
}

/*
 * At the connection limit: close the least recently answered connection
 * that is not waiting for its answer (an idle one, or one still sending its
 * request), so that a new peer always gets in. 0 when every one is busy.
 */
static int conn_evict(struct apihttp *s)
{
    struct conn *c;

    TAILQ_FOREACH(c, &s->conns, link)
    {
        if (!c->busy && !c->in_process) {
            count_close(s, HTTP_CLOSE_evicted, (struct sockaddr *)&c->sa, c->salen);
            conn_free(c);
            return 1;
        }
    }
    return 0;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
    struct apihttp *s = arg;
    struct peer *p = peer_get(s, sa);
    struct conn *c;
    int one = 1;

    (void)l;
    if (p && p->n >= s->max_per_addr) {
        close(fd);
        count_close(s, HTTP_CLOSE_per_address, sa, (socklen_t)salen);
        return;
    }
    if (p)
        p->n++; /* the new connection's from here on (an eviction must not free p) */
    if (s->nconns >= s->max_conns && !conn_evict(s)) {
        close(fd);
        count_close(s, HTTP_CLOSE_limit, sa, (socklen_t)salen);
        accept_pause(s, 1); /* until an answer frees one */
        peer_put(s, p);
        return;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        peer_put(s, p);
        return;
    }
    {
        char host[INET6_ADDRSTRLEN], port[8];

        if (getnameinfo(sa, (socklen_t)salen, host, sizeof(host), port, sizeof(port),
                        NI_NUMERICHOST | NI_NUMERICSERV) == 0)
            hostport_str(c->peer_name, sizeof(c->peer_name), host, atoi(port));
        else
            snprintf(c->peer_name, sizeof(c->peer_name), "?");
        c->req.peer = c->peer_name;
    }
    c->srv = s;
    c->fd = fd;
    c->peer = p;
    memcpy(&c->sa, sa, (size_t)salen < sizeof(c->sa) ? (size_t)salen : sizeof(c->sa));
    c->salen = (socklen_t)salen;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* answers go out whole */
    c->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, on_read, c);
    c->wev = event_new(s->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
    if (s->tls && (c->ssl = SSL_new(s->tls)) != NULL) {
        SSL_set_fd(c->ssl, fd);
        SSL_set_accept_state(c->ssl);
    }
    TAILQ_INSERT_TAIL(&s->conns, c, link);
    s->nconns++;
    if (!c->rev || !c->wev || (s->tls && !c->ssl) || event_add(c->rev, NULL) < 0) {
        conn_free(c);
        return;
    }
    c->reading = 1;
    c->phase = P_HEAD; /* from the accept, not from a first byte */
    c->deadline_ms = clock_ms() + (uint64_t)s->head_timeout_ms;
    c->since_us = clock_us();
    /*
     * libevent accepts until the backlog is empty: under a flood of new
     * connections, each of which makes room by closing the least recently
     * active one, a connection accepted early in the batch would be closed
     * before its request is read. So after a batch (a quarter of the limit
     * at most) the loop turns once, reading, before it accepts again.
     */
    if (++s->batch_accepts >= s->accept_batch && !s->paused) {
        struct timeval next_turn = {0, 0};

        accept_pause(s, 3);
        evtimer_add(s->resume, &next_turn);
    }
    on_read(fd, EV_READ, c); /* a request sent with the handshake is answered now */
}

static void on_accept_error(struct evconnlistener *l, void *arg)
{
    struct apihttp *s = arg;
    int err = EVUTIL_SOCKET_ERROR();
    struct timeval tv = {ACCEPT_PAUSE_MS / 1000, (ACCEPT_PAUSE_MS % 1000) * 1000};
    uint64_t n;

    (void)l;
    if (http_burst_due(&s->accept_log, &n))
        log_warn("%s: cannot accept connections on %s: %s (%" PRIu64
                 " time(s) since the last message); pausing %d ms",
                 s->name, s->addr, evutil_socket_error_to_string(err), n, ACCEPT_PAUSE_MS);
    if (!s->paused) {
        accept_pause(s, 2);
        evtimer_add(s->resume, &tv);
    }
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct apihttp *s = arg;

    (void)fd;
    (void)what;
    s->batch_accepts = 0;
    accept_resume(s);
}

/*
 * Every SWEEP_MS: close the connections past their deadline (not those
 * being answered). One whose request is due gets a 408 first: it sent
 * part of one, or it is new and sent nothing (a slow client is told, as
 * RFC 9110 15.5.9 has it; but not while its TLS handshake is unfinished,
 * when nothing can be said). A kept-alive connection idle between
 * requests is closed without one: a 408 there could cross the client's
 * next request and be read as its answer.
 */
static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    static const enum http_close why[] = {
        [P_HEAD] = HTTP_CLOSE_head_timeout,
        [P_BODY] = HTTP_CLOSE_body_timeout,
        [P_IDLE] = HTTP_CLOSE_idle_timeout,
        [P_WRITE] = HTTP_CLOSE_write_timeout,
    };
    struct apihttp *s = arg;
    struct conn *c, *next;
    uint64_t now = clock_ms();

    (void)fd;
    (void)what;
    for (c = TAILQ_FIRST(&s->conns); c; c = next) {
        next = TAILQ_NEXT(c, link);
        if (c->busy || now < c->deadline_ms)
            continue;
        count_close(s, why[c->phase], (struct sockaddr *)&c->sa, c->salen);
        if ((c->phase == P_HEAD || c->phase == P_BODY) &&
            (c->in_len > 0 || !c->ssl || SSL_is_init_finished(c->ssl)) &&
            refuse(c, 408, "the request did not arrive in time"))
            continue; /* written, and freed */
        conn_free(c); /* whatever could not be written at once is dropped */
    }
}

/* --- TLS ---------------------------------------------------------------- */

/* The OpenSSL error queue as one line (the last error), emptied. */
static const char *tls_error(char *buf, size_t len)
{
    unsigned long e = ERR_peek_last_error();

    if (e == 0)
        snprintf(buf, len, "unknown error");
    else
        ERR_error_string_n(e, buf, len);
    ERR_clear_error();
    return buf;
}

/* A server context from PEM files (TLS 1.2 and later); NULL with an error logged. */
static SSL_CTX *tls_context(const char *name, const char *cert, const char *key)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    char err[256];
    int loaded;

    if (ctx == NULL) {
        log_error("%s: cannot set up TLS: %s", name, tls_error(err, sizeof(err)));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        log_error("%s: cannot load the TLS certificate chain %s (api-tls-cert): %s", name, cert,
                  tls_error(err, sizeof(err)));
        goto fail;
    }
    /*
     * A key that is not the certificate's: refused while loading (same type),
     * or loaded beside it and refused by the check (another type).
     */
    loaded = SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1;
    if (!loaded || SSL_CTX_check_private_key(ctx) != 1) {
        unsigned long e = ERR_peek_last_error();

        if (loaded ||
            (ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH))
            log_error("%s: the TLS private key %s (api-tls-key) does not match the certificate %s "
                      "(api-tls-cert): %s",
                      name, key, cert, tls_error(err, sizeof(err)));
        else
            log_error("%s: cannot load the TLS private key %s (api-tls-key): %s", name, key,
                      tls_error(err, sizeof(err)));
        goto fail;
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

/* --- lifecycle ---------------------------------------------------------- */

struct apihttp *apihttp_new(struct event_base *base, const struct apihttp_opts *o)
{
    struct apihttp *s = calloc(1, sizeof(*s));
    struct timeval sw = {0, SWEEP_MS * 1000};
    int fd;

    if (s == NULL)
        return NULL;
    s->base = base;
    s->name = o->name;
    s->handler = o->handler;
    s->arg = o->arg;
    s->max_body = o->max_body;
    s->timeout_ms = o->timeout_ms;
    s->head_timeout_ms = o->head_timeout_ms;
    s->max_per_addr = o->max_per_addr;
    TAILQ_INIT(&s->conns);
    if (o->host == NULL || o->host[0] == '\0') {
        log_info("%s: disabled (empty %s address)", o->name, o->name);
        return s;
    }
    if (o->tls_cert && (s->tls = tls_context(o->name, o->tls_cert, o->tls_key)) == NULL)
        goto fail;
    s->max_conns = http_fit_fd_limit(o->name, o->max_conns);
    s->accept_batch = s->max_conns / 4 < 1              ? 1
                      : s->max_conns / 4 > ACCEPT_BATCH ? ACCEPT_BATCH
                                                        : s->max_conns / 4;
    for (s->npeer_buckets = 16; s->npeer_buckets < (size_t)s->max_conns; s->npeer_buckets *= 2)
        ;
    s->peers = calloc(s->npeer_buckets, sizeof(*s->peers));
    s->resume = evtimer_new(base, on_resume, s);
    s->sweep = event_new(base, -1, EV_PERSIST, on_sweep, s);
    if (!s->resume || !s->sweep || !s->peers) {
        log_error("%s: out of memory", o->name);
        goto fail;
    }
    fd = http_listen(o->name, o->host, o->port, s->addr, sizeof(s->addr));
    if (fd < 0)
        goto fail;
    /* Backlog 0: fd already listens with http_listen's backlog (-1 would listen(fd, 128) again). */
    s->listener = evconnlistener_new(base, on_accept, s, LEV_OPT_CLOSE_ON_FREE, 0, fd);
    if (s->listener == NULL) {
        log_error("%s: cannot accept connections on %s", o->name, s->addr);
        close(fd);
        goto fail;
    }
    evconnlistener_set_error_cb(s->listener, on_accept_error);
    event_add(s->sweep, &sw);
    log_info("%s: listening on %s%s (%s)", o->name, s->tls ? "https://" : "", s->addr, o->routes);
    return s;
fail:
    apihttp_free(s);
    return NULL;
}

void apihttp_free(struct apihttp *s)
{
    if (s == NULL)
        return;
    while (!TAILQ_EMPTY(&s->conns))
        conn_free(TAILQ_FIRST(&s->conns));
    if (s->listener)
        evconnlistener_free(s->listener);
    if (s->resume)
        event_free(s->resume);
    if (s->sweep)
        event_free(s->sweep);
    if (s->tls)
        SSL_CTX_free(s->tls);
    free(s->peers);
    free(s);
}

void apihttp_set_access_log(struct apihttp *s, struct accesslog *l)
{
    if (s)
        s->alog = l;
}

void apihttp_req_user(struct apihttp_req *req, const char *name)
{
    struct conn *c = (struct conn *)((char *)req - offsetof(struct conn, req));

    snprintf(c->user, sizeof(c->user), "%s", name);
}

void apihttp_get_closes(const struct apihttp *s, uint64_t out[HTTP_CLOSE_COUNT])
{
    for (int i = 0; i < HTTP_CLOSE_COUNT; i++)
        out[i] = s ? s->closes[i] : 0;
}

uint64_t apihttp_refused(const struct apihttp *s, int code)
{
    if (!s || code < 0 || code >= (int)(sizeof(s->refused) / sizeof(s->refused[0])))
        return 0;
    return s->refused[code];
}
