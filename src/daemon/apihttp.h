/*
 * apihttp — the daemon's HTTP/1.1 server, for the ID API and the status
 * server: keep-alive connections on the libevent loop, read into one fixed
 * buffer per connection, the head parsed in place (httpreq.h), each answer
 * written with one write(2) (or SSL_write) as soon as it is ready. evhttp
 * costs about twice nginx's CPU per request (header lists on the heap,
 * printf-formatted headers, a read event toggled and a write deferred to
 * the next loop turn per request); this path costs about what nginx does,
 * which the API's throughput goal needs (BENCHMARKS.md). libevent 2.1's
 * evhttp also cannot limit connections per address or make room at its
 * limit, which the status server needs (docs/operations.md).
 *
 * One request per connection is handled at a time; pipelined requests wait
 * in the buffer, answered in order. The handler answers at once or later
 * (apihttp_reply), e.g. when IDs arrive from Redis. Limits: a head of 8 KiB
 * (431), a body of max_body bytes (413), Content-Length only (411 for
 * Transfer-Encoding), HTTP/1.0 and 1.1 (505); each refused with a JSON
 * error and the connection closed. TLS (OpenSSL, TLS 1.2+) when cert and
 * key are set; a connection whose first byte cannot start a TLS handshake
 * is read as plain HTTP and answered nginx's plain-text 400 ("The plain
 * HTTP request was sent to HTTPS port").
 *
 * Who is held up by whom (each closing counted by reason, HTTP_CLOSES in
 * status.h, and logged once per burst with the peer's address):
 *  - a request head must be whole within head_timeout_ms of the accept (or
 *    of its first byte, on a kept-alive connection), its body within
 *    timeout_ms of the head: else 408 and close (also on a new connection
 *    that sent nothing, once its TLS handshake, if any, is done); an idle
 *    kept-alive connection is closed timeout_ms after its last answer,
 *    without a 408 (it could cross the client's next request);
 *  - a peer that does not read its answers is not read from either (no
 *    more than 64 KiB of answers wait), and is closed timeout_ms later;
 *  - at most max_per_addr connections per peer address (more are closed at
 *    accept);
 *  - at max_conns, a new connection closes the least recently answered one
 *    that is not waiting for its answer: idle and slow peers cannot keep a
 *    new one out.
 */
#ifndef IDPOOL_APIHTTP_H
#define IDPOOL_APIHTTP_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "status.h"

struct accesslog;
struct apihttp;

#define APIHTTP_USER_MAX 64 /* bytes of a name given to apihttp_req_user */

/* A request, valid until it is answered. Strings are NUL-terminated. */
struct apihttp_req {
    const char *method; /* "GET", "POST", ... */
    const char *target; /* as sent: "/v1/ids/user?count=5" */
    const char *authz;  /* Authorization, or NULL */
    const char *accept; /* Accept, or NULL */
    const char *ctype;  /* Content-Type, or NULL */
    const char *host;   /* Host, or NULL */
    const char *body;   /* body_len bytes (not terminated) */
    size_t body_len;
    const char *peer; /* the client's address, "host:port" or "[v6]:port" (for the log) */
};

struct apihttp_opts {
    const char *name;   /* "api", "http": prefix of its log lines and of its settings */
    const char *routes; /* for the "listening" log line: "/v1/ids/{key}" */
    const char *host;   /* NULL or "": listen nowhere */
    int port;
    int max_conns;       /* connections at most (lowered to fit the file limit) */
    int max_per_addr;    /* connections from one peer address at most (>= 1) */
    int timeout_ms;      /* body after its head; idle after an answer; unread answers */
    int head_timeout_ms; /* a request head after the accept or its first byte */
    size_t max_body;
    const char *tls_cert, *tls_key; /* PEM files, or NULL */
    void (*handler)(struct apihttp_req *req, void *arg);
    void *arg;
};

/* NULL with an error logged (address, TLS files, memory). */
struct apihttp *apihttp_new(struct event_base *base, const struct apihttp_opts *o)
    __attribute__((warn_unused_result));
/* Closes every connection; requests not answered yet must have been answered before. */
void apihttp_free(struct apihttp *s);

/*
 * Answer `req`: status `code`, Content-Type `ctype`, extra header lines
 * (`headers`: "Name: value\r\n"..., or NULL) and `len` bytes of body (not
 * sent for HEAD). Written at once; the request is gone afterwards.
 */
void apihttp_reply(struct apihttp_req *req, int code, const char *ctype, const char *headers,
                   const char *body, size_t len);

/*
 * Write a line to l (NULL: none) for every answer from now on, those the
 * server gives itself (400, 408, ...) included; the caller keeps l alive
 * (and sets NULL before freeing it). s NULL ok.
 */
void apihttp_set_access_log(struct apihttp *s, struct accesslog *l);
/* Who sent req, for its access log line (a token's name: never a secret); at most APIHTTP_USER_MAX
 * bytes kept. */
void apihttp_req_user(struct apihttp_req *req, const char *name);

/* Connections closed by the server on its own so far, by reason (zeros for NULL). */
void apihttp_get_closes(const struct apihttp *s, uint64_t out[HTTP_CLOSE_COUNT]);
/*
 * Requests the server answered itself with status code, never handed to the
 * owner (malformed 400, 408, 411, 413, 431, 505), so far (0 for NULL).
 */
uint64_t apihttp_refused(const struct apihttp *s, int code);

#endif
