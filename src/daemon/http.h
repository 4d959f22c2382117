/*
 * http — an HTTP server (libevent evhttp) on one listener, with what evhttp
 * lacks: a connection limit that fits the file limit, a deadline for each
 * request however slowly its bytes trickle in, a pause after accept errors.
 * It serves the status server (statushttp.c: /metrics, /healthz, /v1/apps);
 * the ID API has a leaner server of its own (apihttp.c), which shares the
 * helpers at the end of this header.
 *
 * Requests are served on the event loop thread. The helpers below answer
 * one: a body with a Content-Type (HEAD gets the headers only), and the
 * request target's path.
 */
#ifndef IDPOOL_HTTP_H
#define IDPOOL_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/http.h>

#define CTYPE_JSON "application/json"

struct http;

/* What a server is. */
struct http_opts {
    const char *name;   /* "http", "api": prefix of its log lines */
    const char *routes; /* for the "listening" log line: "/metrics, /healthz, /v1/apps" */
    const char *host;   /* an IPv4 or IPv6 literal, or a host name (its first address) */
    int port;           /* host NULL or "": the server listens nowhere */
    int max_conns;      /* connections at most (lowered to fit the file limit) */
    int timeout_ms;     /* each request must be whole within this long; idle close */
    size_t max_headers; /* bytes */
    size_t max_body;    /* bytes */
    void (*handler)(struct evhttp_request *req, void *arg); /* every request, any method */
    void *arg;
};

/*
 * Listen as `o` says. With no host the result is a valid server that
 * listens nowhere (http_free it as usual), so the caller needs no special
 * case. NULL, with an error logged, when the address cannot be resolved or
 * bound, or out of memory.
 */
struct http *http_new(struct event_base *base, const struct http_opts *o)
    __attribute__((warn_unused_result));

/* Close the listener and every open connection; NULL is a no-op. */
void http_free(struct http *h);

/*
 * Answer `req` with status `code` and `body` (heap, taken over: freed when
 * written; NULL = out of memory, answered 500). A JSON body gets a final
 * newline. HEAD gets the headers and the Content-Length GET would have.
 */
void http_reply(struct evhttp_request *req, int code, const char *reason, const char *ctype,
                char *body);

/* Trouble that can come in bursts: logged once per 10 s, with a count. */
struct http_burst {
    uint64_t last_ms; /* last logged */
    uint64_t n;       /* occurrences since */
};
/* Count one; 1 when it should be logged now (*n: how many since the last time). */
int http_burst_due(struct http_burst *b, uint64_t *n);

/*
 * Connections a server may keep (`want`, or fewer, with a warning) so that
 * the servers set up so far and 32 descriptors for Redis, MySQL and the rest
 * fit under the file limit (raised to fit when allowed).
 */
int http_fit_fd_limit(const char *name, int want);

/*
 * A listening, non-blocking socket on the first address of host:port, or -1
 * with an error logged; the address ("[::1]:80") is written to addr.
 */
int http_listen(const char *name, const char *host, int port, char *addr, size_t addrlen);

/* "GET", "POST", ... */
const char *http_method_name(enum evhttp_cmd_type m);

/*
 * The path of the request target as sent, without query or fragment (heap,
 * NULL when out of memory), also of an absolute-form target
 * ("http://host/v1/ids/user" -> "/v1/ids/user"); "" for a target that is not
 * a path (CONNECT's host:port). Not evhttp_uri_get_path(), which parses
 * "//metrics" as an authority.
 */
char *http_target_path(struct evhttp_request *req);

#endif
