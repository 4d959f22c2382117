/*
 * apihttp — the ID API's HTTP/1.1 server: keep-alive connections on the
 * libevent loop, read into one fixed buffer per connection, the head parsed
 * in place (httpreq.h), each answer written with one write(2) (or
 * SSL_write) as soon as it is ready. evhttp costs about twice nginx's CPU
 * per request (header lists on the heap, printf-formatted headers, a read
 * event toggled and a write deferred to the next loop turn per request);
 * this path costs about what nginx does, which the API's throughput goal
 * needs (BENCHMARKS.md). The status server stays on evhttp (http.h).
 *
 * One request per connection is handled at a time; pipelined requests wait
 * in the buffer, answered in order. The handler answers at once or later
 * (apihttp_reply), e.g. when IDs arrive from Redis. Limits: a head of 8 KiB
 * (431), a body of max_body bytes (413), Content-Length only (411 for
 * Transfer-Encoding), HTTP/1.0 and 1.1 (505); each refused with a JSON
 * error and the connection closed. A connection must send a whole request
 * within timeout_ms of connecting or of its previous answer, and an idle
 * one is closed after it. TLS (OpenSSL, TLS 1.2+) when cert and key are set.
 */
#ifndef IDPOOL_APIHTTP_H
#define IDPOOL_APIHTTP_H

#include <stddef.h>

#include <event2/event.h>

struct apihttp;

/* A request, valid until it is answered. Strings are NUL-terminated. */
struct apihttp_req {
    const char *method; /* "GET", "POST", ... */
    const char *target; /* as sent: "/v1/ids/user?count=5" */
    const char *authz;  /* Authorization, or NULL */
    const char *accept; /* Accept, or NULL */
    const char *ctype;  /* Content-Type, or NULL */
    const char *body;   /* body_len bytes (not terminated) */
    size_t body_len;
    const char *peer; /* the client's address, "host:port" or "[v6]:port" (for the log) */
};

struct apihttp_opts {
    const char *name; /* "api": prefix of its log lines and of its -max-connections setting */
    const char *host; /* NULL or "": listen nowhere */
    int port;
    int max_conns;
    int timeout_ms;
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

#endif
