/*
 * issuer — libidpool's takes from an ID issuer over HTTP/1.1 (docs/api.md):
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
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "httpresp.h"

#define ERRCODE_N 64 /* an error code's length, at most */

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait for fd to be readable (POLLIN) or writable until deadline: 0, or -1 (timed out). */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = mono_ms();
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
static int tls_wait(struct env *e, int err, uint64_t deadline)
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
static int tls_step(struct env *e, enum tls_op op, void *buf, int n, int *err)
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
static int issuer_connect(struct env *e, const struct idpool_options *o, struct take_result *r)
{
    uint64_t deadline = mono_ms() + o->io_timeout_ms;
    struct addrinfo hints = {0}, *ai = NULL, *p;
    char port[8];
    int rc, one = 1, soerr = 0, err, ok;
    long v;
    const char *vs = NULL;
    socklen_t sl = sizeof(soerr);

    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%d", e->iurl.port);
    rc = getaddrinfo(e->iurl.host, port, &hints, &ai);
    if (rc != 0) {
        take_msg(r, e, "cannot resolve: %s", gai_strerror(rc));
        return -1;
    }
    for (p = ai; p; p = p->ai_next) {
        e->fd = socket(p->ai_family, p->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (e->fd < 0)
            continue;
        env_sock(e, e->fd);
        if (connect(e->fd, p->ai_addr, p->ai_addrlen) == 0 ||
            (errno == EINPROGRESS && wait_fd(e->fd, POLLOUT, deadline) == 0 &&
             getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0))
            break;
        if (soerr)
            errno = soerr;
        else if (mono_ms() >= deadline)
            errno = ETIMEDOUT;
        env_close(e);
    }
    freeaddrinfo(ai);
    if (e->fd < 0) {
        take_msg(r, e, "cannot connect: %s", strerror(errno));
        return -1;
    }
    setsockopt(e->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (!e->iurl.tls)
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
            take_msg(r, e, "TLS setup (CAs%s%s): %s", o->ca_file ? " from " : "",
                     o->ca_file ? o->ca_file : "", tls_errstr());
            return -1;
        }
    }
    env_tls_lock();
    e->ssl = SSL_new(e->tls);
    ok = e->ssl && SSL_set_fd(e->ssl, e->fd) == 1 && SSL_set1_host(e->ssl, e->iurl.host) == 1;
    if (ok) {
        unsigned char a[16];
        if (inet_pton(AF_INET, e->iurl.host, a) != 1 && inet_pton(AF_INET6, e->iurl.host, a) != 1)
            SSL_set_tlsext_host_name(e->ssl, e->iurl.host); /* SNI: names only */
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
        take_msg(r, e, "TLS: certificate not verified: %s", vs);
    else
        take_msg(r, e, "TLS handshake: %s", mono_ms() >= deadline ? "timed out" : tls_errstr());
    ERR_clear_error();
    env_close(e);
    return -1;
}

/* Send n bytes by the deadline: 0, or -1. */
static int send_all(struct env *e, const char *p, size_t n, uint64_t deadline)
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
static ssize_t recv_some(struct env *e, char *buf, size_t n, uint64_t deadline)
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
static int read_answer(struct env *e, struct httpresp *h, uint64_t deadline, struct take_result *r)
{
    size_t have = 0, want = 0;
    const char *why = NULL;

    for (;;) {
        ssize_t k;
        if (want == 0 && have) {
            enum httpresp_status st = httpresp_parse(e->buf, have, h, &why);
            if (st == HTTPRESP_BAD) {
                take_msg(r, e, "a bad HTTP answer: %s", why);
                return -1;
            }
            if (st == HTTPRESP_DONE) {
                if (!h->has_length) {
                    take_msg(r, e, "an HTTP answer without Content-Length");
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
                take_msg(r, e, "out of memory");
                return -1;
            }
            e->buf = b;
            e->cap = cap;
        }
        k = recv_some(e, e->buf + have, (want ? want : e->cap) - have, deadline);
        if (k == 0 && have == 0)
            return 1;
        if (k <= 0) {
            take_msg(r, e, "%s",
                     k == 0                  ? "connection closed mid-answer"
                     : mono_ms() >= deadline ? "timed out waiting for the answer"
                                             : "read failed");
            return -1;
        }
        have += (size_t)k;
    }
}

/* An answer other than 200: the refusal it carries. */
static enum take_outcome refused(struct env *e, const struct httpresp *h, const char *body,
                                 size_t len, unsigned count, struct take_result *r)
{
    char code[ERRCODE_N], msg[200], text[ERRCODE_N + 201];
    enum take_outcome out;

    if (httpresp_error(body, len, code, sizeof(code), msg, sizeof(msg)) < 0) {
        take_msg(r, e, "HTTP %d without an idpool error body (not an issuer?)", h->status);
        return T_DOWN;
    }
    for (char *p = code; *p; p++) /* they end up in messages and logs: one printable line */
        if ((unsigned char)*p < ' ' || *p == 0x7f)
            *p = '?';
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < ' ' || *p == 0x7f)
            *p = '?';
    take_msg(r, e, "%d %s: %s", h->status, code, msg);
    snprintf(text, sizeof(text), "%s %s", code, msg);
    out = env_refusal(text, count, r);
    if ((out == T_EPOCH || out == T_RATE) && strstr(msg, "retry in ") == NULL &&
        h->retry_after_s >= 0)
        r->hint_ms = (uint64_t)h->retry_after_s * 1000u;
    return out;
}

enum take_outcome issuer_take(struct env *e, const struct idpool_options *o, const char *key,
                              unsigned count, uint64_t now, struct take_result *r)
{
    char req[1024], host[HOSTPORT_STR_MAX];
    struct httpresp h;
    uint64_t deadline;
    int n, reused, rc;
    long k;

    if (e->fd < 0 && now < e->down_until_ms) {
        r->skipped = 1;
        take_msg(r, e, "down, next try in %llu ms", (unsigned long long)(e->down_until_ms - now));
        return T_DOWN;
    }
    n = snprintf(req, sizeof(req),
                 "GET %s/v1/ids/%s?count=%u HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                 "Accept: text/plain\r\nUser-Agent: libidpool/0\r\n\r\n",
                 e->iurl.prefix, key, count,
                 hostport_str(host, sizeof(host), e->iurl.host, e->iurl.port), e->iurl.token);
    if (n < 0 || (size_t)n >= sizeof(req)) {
        take_msg(r, e, "the request is too long (token or prefix)");
        return T_DOWN;
    }
    for (;;) {
        reused = e->fd >= 0;
        if (!reused && issuer_connect(e, o, r) < 0)
            goto down;
        deadline = mono_ms() + o->io_timeout_ms;
        if (send_all(e, req, (size_t)n, deadline) < 0) {
            if (reused) { /* the server closed it meanwhile: once more, afresh */
                env_close(e);
                continue;
            }
            take_msg(r, e, "send failed: %s", strerror(errno));
            goto down;
        }
        rc = read_answer(e, &h, deadline, r);
        if (rc == 1 && reused) {
            env_close(e);
            continue;
        }
        if (rc != 0) {
            if (rc == 1)
                take_msg(r, e, "connection closed without an answer");
            goto down;
        }
        break;
    }
    e->backoff_ms = 0;
    if (!h.keep_alive)
        env_close(e);
    if (h.status != 200) {
        enum take_outcome out =
            refused(e, &h, e->buf + h.head_len, (size_t)h.content_length, count, r);
        if (out == T_DOWN)
            env_fail(e);
        return out;
    }
    r->ids = malloc((count ? count : 1) * sizeof(*r->ids));
    if (r->ids == NULL) {
        take_msg(r, e, "out of memory");
        return T_DOWN;
    }
    k = httpresp_ids(e->buf + h.head_len, (size_t)h.content_length, r->ids, count);
    if (k < 0) { /* taken from the pool but unreadable: those IDs are gaps */
        take_msg(r, e, "the 200 answer is not a list of IDs (one per line, at most %u)", count);
        env_fail(e);
        return T_DOWN;
    }
    r->n = (size_t)k;
    if (k == 0)
        take_msg(r, e, "a 200 answer with no IDs");
    return k ? T_IDS : T_DRY;
down:
    env_fail(e);
    return T_DOWN;
}
