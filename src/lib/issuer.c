/*
 * issuer — libidpool's transport to an ID issuer (http[s]://), HTTP/1.1 (docs/api.md):
 * GET {prefix}/v1/ids/{key}?count=N with the token, Accept: text/plain (one
 * ID per line), on a kept-alive connection; https with OpenSSL, the peer
 * verified against the system's CAs (or the ca_file option) and the host
 * name. Every step is bounded by io_timeout_ms (non-blocking socket, poll).
 * IDs the issuer sent that never arrive (a connection cut mid-answer) are
 * gaps: the issuer hands each ID out once, whether or not it is read.
 */
#include "env.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "clock.h"
#include "httpresp.h"
#include "url.h"

#define ERRCODE_N 64 /* an error code's length, at most */

/* An issuer environment. */
struct issuer_env {
    struct env env; /* first: a struct env * is a struct issuer_env * */
    struct issuer_url url;
    int fd; /* the connection, or -1 */
    SSL_CTX *tls;
    SSL *ssl;
    char *buf; /* the answer */
    size_t cap;
};

static struct issuer_env *issuer_of(struct env *e)
{
    return (struct issuer_env *)e;
}

/* Wait for fd to be readable (POLLIN) or writable until deadline: 0, or -1 (timed out). */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = clock_ms();
        struct pollfd p = {fd, events, 0};
        int rc;

        if (now >= deadline)
            return -1;
        rc = poll(&p, 1, (int)(deadline - now));
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

/* An OpenSSL step's WANT_READ/WANT_WRITE (err) waited for; 1 to call again, 0 done/failed. */
static int tls_wait(struct issuer_env *e, int err, uint64_t deadline)
{
    if (err == SSL_ERROR_WANT_READ)
        return wait_fd(e->fd, POLLIN, deadline) == 0;
    if (err == SSL_ERROR_WANT_WRITE)
        return wait_fd(e->fd, POLLOUT, deadline) == 0;
    return 0;
}

enum tls_op { TLS_CONNECT, TLS_READ, TLS_WRITE };

/*
 * One step of the handshake, a read or a write, under the TLS lock (env.h):
 * its return value, and in *err what SSL_get_error says of it.
 */
static int tls_step(struct issuer_env *e, enum tls_op op, void *buf, int n, int *err)
{
    int rc;

    env_tls_lock();
    rc = op == TLS_CONNECT ? SSL_connect(e->ssl)
         : op == TLS_READ  ? SSL_read(e->ssl, buf, n)
                           : SSL_write(e->ssl, buf, n);
    *err = rc > 0 ? SSL_ERROR_NONE : SSL_get_error(e->ssl, rc);
    env_tls_unlock();
    return rc;
}

static const char *tls_errstr(void)
{
    unsigned long e = ERR_get_error();
    static __thread char buf[160];

    if (e == 0)
        return "connection closed";
    env_tls_lock();
    ERR_error_string_n(e, buf, sizeof(buf));
    env_tls_unlock();
    ERR_clear_error();
    return buf;
}

/* Connect (TCP, then TLS when https) within io_timeout_ms: 0, or -1 with r->msg. */
static int issuer_connect(struct issuer_env *e, const struct idpool_options *o,
                          struct take_result *r)
{
    uint64_t deadline = clock_ms() + o->io_timeout_ms;
    struct addrinfo hints = {0}, *ai = NULL, *p;
    char port[8];
    int rc, one = 1, soerr = 0, err, ok;
    long v;
    const char *vs = NULL;
    socklen_t sl = sizeof(soerr);

    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%d", e->url.port);
    rc = getaddrinfo(e->url.host, port, &hints, &ai);
    if (rc != 0) {
        take_msg(r, &e->env, "cannot resolve: %s", gai_strerror(rc));
        return -1;
    }
    for (p = ai; p; p = p->ai_next) {
        e->fd = socket(p->ai_family, p->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (e->fd < 0)
            continue;
        env_sock(&e->env, e->fd);
        if (connect(e->fd, p->ai_addr, p->ai_addrlen) == 0 ||
            (errno == EINPROGRESS && wait_fd(e->fd, POLLOUT, deadline) == 0 &&
             getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0))
            break;
        if (soerr)
            errno = soerr;
        else if (clock_ms() >= deadline)
            errno = ETIMEDOUT;
        env_close(&e->env);
    }
    freeaddrinfo(ai);
    if (e->fd < 0) {
        take_msg(r, &e->env, "cannot connect: %s", strerror(errno));
        return -1;
    }
    setsockopt(e->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (!e->url.tls)
        return 0;
    if (e->tls == NULL) {
        env_tls_lock();
        e->tls = SSL_CTX_new(TLS_client_method());
        ok = e->tls && (o->ca_file ? SSL_CTX_load_verify_locations(e->tls, o->ca_file, NULL)
                                   : SSL_CTX_set_default_verify_paths(e->tls)) == 1;
        if (ok) {
            SSL_CTX_set_verify(e->tls, SSL_VERIFY_PEER, NULL);
            SSL_CTX_set_min_proto_version(e->tls, TLS1_2_VERSION);
        } else if (e->tls) {
            SSL_CTX_free(e->tls);
            e->tls = NULL;
        }
        env_tls_unlock();
        if (!ok) {
            take_msg(r, &e->env, "TLS setup (CAs%s%s): %s", o->ca_file ? " from " : "",
                     o->ca_file ? o->ca_file : "", tls_errstr());
            return -1;
        }
    }
    env_tls_lock();
    e->ssl = SSL_new(e->tls);
    ok = e->ssl && SSL_set_fd(e->ssl, e->fd) == 1 && SSL_set1_host(e->ssl, e->url.host) == 1;
    if (ok) {
        unsigned char a[16];
        if (inet_pton(AF_INET, e->url.host, a) != 1 && inet_pton(AF_INET6, e->url.host, a) != 1)
            SSL_set_tlsext_host_name(e->ssl, e->url.host); /* SNI: names only */
    }
    env_tls_unlock();
    if (!ok)
        goto tls_fail;
    while (tls_step(e, TLS_CONNECT, NULL, 0, &err) != 1)
        if (!tls_wait(e, err, deadline))
            goto tls_fail;
    return 0;
tls_fail:
    if (e->ssl) {
        env_tls_lock();
        v = SSL_get_verify_result(e->ssl);
        vs = v != X509_V_OK ? X509_verify_cert_error_string(v) : NULL;
        env_tls_unlock();
    }
    if (vs)
        take_msg(r, &e->env, "TLS: certificate not verified: %s", vs);
    else
        take_msg(r, &e->env, "TLS handshake: %s",
                 clock_ms() >= deadline ? "timed out" : tls_errstr());
    ERR_clear_error();
    env_close(&e->env);
    return -1;
}

/* Send n bytes by the deadline: 0, or -1. */
static int send_all(struct issuer_env *e, const char *p, size_t n, uint64_t deadline)
{
    while (n) {
        ssize_t k;
        if (e->ssl) {
            int err, rc = tls_step(e, TLS_WRITE, (void *)p, (int)n, &err);
            if (rc <= 0) {
                if (tls_wait(e, err, deadline))
                    continue;
                return -1;
            }
            k = rc;
        } else {
            k = send(e->fd, p, n, MSG_NOSIGNAL);
            if (k < 0) {
                if ((errno == EAGAIN || errno == EINTR) && wait_fd(e->fd, POLLOUT, deadline) == 0)
                    continue;
                return -1;
            }
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Read some bytes into buf[0..n) by the deadline: their number, 0 at EOF, -1 on error. */
static ssize_t recv_some(struct issuer_env *e, char *buf, size_t n, uint64_t deadline)
{
    for (;;) {
        ssize_t k;
        if (e->ssl) {
            int err, rc = tls_step(e, TLS_READ, buf, (int)n, &err);
            if (rc > 0)
                return rc;
            if (err == SSL_ERROR_ZERO_RETURN)
                return 0;
            if (!tls_wait(e, err, deadline))
                return -1;
            continue;
        }
        k = recv(e->fd, buf, n, 0);
        if (k >= 0)
            return k;
        if ((errno != EAGAIN && errno != EINTR) || wait_fd(e->fd, POLLIN, deadline) < 0)
            return -1;
    }
}

/*
 * Read one answer into e->buf: the head parsed into *h, the body at
 * e->buf + h->head_len. 0; 1 when the connection was closed before any
 * byte came (a kept-alive connection the server had closed); -1 with
 * r->msg.
 */
static int read_answer(struct issuer_env *e, struct httpresp *h, uint64_t deadline,
                       struct take_result *r)
{
    size_t have = 0, want = 0;
    const char *why = NULL;

    for (;;) {
        ssize_t k;
        if (want == 0 && have) {
            enum httpresp_status st = httpresp_parse(e->buf, have, h, &why);
            if (st == HTTPRESP_BAD) {
                take_msg(r, &e->env, "a bad HTTP answer: %s", why);
                return -1;
            }
            if (st == HTTPRESP_DONE) {
                if (!h->has_length) {
                    take_msg(r, &e->env, "an HTTP answer without Content-Length");
                    return -1;
                }
                want = h->head_len + (size_t)h->content_length;
            }
        }
        if (want && have >= want)
            return 0;
        if (e->cap < (want ? want : have + 4096)) {
            size_t cap = want ? want : have + 4096;
            char *b = realloc(e->buf, cap);
            if (b == NULL) {
                take_msg(r, &e->env, "out of memory");
                return -1;
            }
            e->buf = b;
            e->cap = cap;
        }
        k = recv_some(e, e->buf + have, (want ? want : e->cap) - have, deadline);
        if (k == 0 && have == 0)
            return 1;
        if (k <= 0) {
            take_msg(r, &e->env, "%s",
                     k == 0                   ? "connection closed mid-answer"
                     : clock_ms() >= deadline ? "timed out waiting for the answer"
                                              : "read failed");
            return -1;
        }
        have += (size_t)k;
    }
}

/* An answer other than 200: the refusal it carries. */
static enum take_outcome refused(struct issuer_env *e, const struct httpresp *h, const char *body,
                                 size_t len, unsigned count, struct take_result *r)
{
    char code[ERRCODE_N], msg[200], text[ERRCODE_N + 201];
    enum take_outcome out;

    if (httpresp_error(body, len, code, sizeof(code), msg, sizeof(msg)) < 0) {
        take_msg(r, &e->env, "HTTP %d without an idpool error body (not an issuer?)", h->status);
        return T_DOWN;
    }
    for (char *p = code; *p; p++) /* they end up in messages and logs: one printable line */
        if ((unsigned char)*p < ' ' || *p == 0x7f)
            *p = '?';
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < ' ' || *p == 0x7f)
            *p = '?';
    take_msg(r, &e->env, "%d %s: %s", h->status, code, msg);
    snprintf(text, sizeof(text), "%s %s", code, msg);
    out = env_refusal(text, count, r);
    if ((out == T_EPOCH || out == T_RATE) && strstr(msg, "retry in ") == NULL &&
        h->retry_after_s >= 0)
        r->hint_ms = (uint64_t)h->retry_after_s * 1000u;
    return out;
}

static enum take_outcome issuer_take(struct env *base, const struct take_req *q,
                                     struct take_result *r)
{
    struct issuer_env *e = issuer_of(base);
    const struct idpool_options *o = q->o;
    unsigned count = q->count;
    char req[1024], host[HOSTPORT_STR_MAX];
    struct httpresp h;
    uint64_t deadline;
    int n, reused, rc;
    long k;

    n = snprintf(req, sizeof(req),
                 "GET %s/v1/ids/%s?count=%u HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                 "Accept: text/plain\r\nUser-Agent: libidpool/0\r\n\r\n",
                 e->url.prefix, q->key, count,
                 hostport_str(host, sizeof(host), e->url.host, e->url.port), e->url.token);
    if (n < 0 || (size_t)n >= sizeof(req)) {
        take_msg(r, &e->env, "the request is too long (token or prefix)");
        return T_DOWN;
    }
    for (;;) {
        reused = e->fd >= 0;
        if (!reused && issuer_connect(e, o, r) < 0)
            goto down;
        deadline = clock_ms() + o->io_timeout_ms;
        if (send_all(e, req, (size_t)n, deadline) < 0) {
            if (reused) { /* the server closed it meanwhile: once more, afresh */
                env_close(&e->env);
                continue;
            }
            take_msg(r, &e->env, "send failed: %s", strerror(errno));
            goto down;
        }
        rc = read_answer(e, &h, deadline, r);
        if (rc == 1 && reused) {
            env_close(&e->env);
            continue;
        }
        if (rc != 0) {
            if (rc == 1)
                take_msg(r, &e->env, "connection closed without an answer");
            goto down;
        }
        break;
    }
    e->env.backoff_ms = 0;
    if (!h.keep_alive)
        env_close(&e->env);
    if (h.status != 200) {
        enum take_outcome out =
            refused(e, &h, e->buf + h.head_len, (size_t)h.content_length, count, r);
        if (out == T_DOWN)
            env_fail(&e->env);
        return out;
    }
    r->ids = malloc((count ? count : 1) * sizeof(*r->ids));
    if (r->ids == NULL) {
        take_msg(r, &e->env, "out of memory");
        return T_DOWN;
    }
    k = httpresp_ids(e->buf + h.head_len, (size_t)h.content_length, r->ids, count);
    if (k < 0) { /* taken from the pool but unreadable: those IDs are gaps */
        take_msg(r, &e->env, "the 200 answer is not a list of IDs (one per line, at most %u)",
                 count);
        env_fail(&e->env);
        return T_DOWN;
    }
    r->n = (size_t)k;
    if (k == 0)
        take_msg(r, &e->env, "a 200 answer with no IDs");
    return k ? T_IDS : T_DRY;
down:
    env_fail(&e->env);
    return T_DOWN;
}

static struct env *issuer_open(const char *url, char *err, size_t errlen)
{
    struct issuer_env *x = calloc(1, sizeof(*x));

    if (x == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    x->fd = -1;
    if (issuer_url_parse(url, &x->url, err, errlen) < 0) {
        free(x);
        return NULL;
    }
    if (x->url.token == NULL) {
        issuer_url_free(&x->url);
        free(x);
        snprintf(err, errlen, "an issuer needs a token: http[s]://TOKEN@host[:port]");
        return NULL;
    }
    env_base(&x->env, &issuer_env_ops, x->url.host, x->url.port);
    return &x->env;
}

static int issuer_connected(const struct env *e)
{
    return ((const struct issuer_env *)e)->fd >= 0;
}

static void issuer_close(struct env *base)
{
    struct issuer_env *e = issuer_of(base);

    if (e->ssl) {
        env_tls_lock();
        SSL_free(e->ssl); /* no close_notify: the socket may be dead, and it would block */
        env_tls_unlock();
        e->ssl = NULL;
    }
    if (e->fd >= 0) {
        close(e->fd);
        e->fd = -1;
    }
}

static void issuer_free(struct env *base)
{
    struct issuer_env *e = issuer_of(base);

    if (e->tls) {
        env_tls_lock();
        SSL_CTX_free(e->tls);
        env_tls_unlock();
    }
    free(e->buf);
    issuer_url_free(&e->url);
    free(e);
}

static const char *const issuer_schemes[] = {"http://", "https://", NULL};

const struct env_ops issuer_env_ops = {
    .schemes = issuer_schemes,
    .usage = "http[s]://TOKEN@host[:port][/prefix]",
    .open = issuer_open,
    .take = issuer_take,
    .connected = issuer_connected,
    .close = issuer_close,
    .free = issuer_free,
};
