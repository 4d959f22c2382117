/*
 * http — what the daemon's HTTP servers (apihttp.h: the ID API and the
 * status server) share: the listening socket, a file limit that fits their
 * connections, burst-limited logging, and the path of a request target.
 */
#ifndef IDPOOL_HTTP_H
#define IDPOOL_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define CTYPE_JSON "application/json"

/* Trouble that can come in bursts: logged once per 10 s, with a count. */
struct http_burst {
    uint64_t last_ms; /* last logged */
    uint64_t n;       /* occurrences since */
};
/* Count one; 1 when it should be logged now (*n: how many since the last time). */
int http_burst_due(struct http_burst *b, uint64_t *n);

/* Raise the soft file limit to the hard one (at start; logged). */
void http_raise_fd_limit(void);

/*
 * Connections a server may keep (`want`, or fewer, with a warning) so that
 * the servers set up so far and 32 descriptors for Redis, MySQL and the rest
 * fit under the file limit (raised to fit when allowed).
 */
int http_fit_fd_limit(const char *name, int want);

/* libevent's own messages (event_set_log_callback), into the log; a burst once. */
void http_libevent_log(int severity, const char *msg);

/*
 * A listening, non-blocking socket on the first address of host:port, or -1
 * with an error logged; the address ("[::1]:80") is written to addr.
 */
int http_listen(const char *name, const char *host, int port, char *addr, size_t addrlen);

/*
 * The path of a request target as sent, without query or fragment (heap,
 * NULL when out of memory), also of an absolute-form target
 * ("http://host/v1/ids/user" -> "/v1/ids/user"); "" for a target that is not
 * a path (CONNECT's host:port). Not evhttp_uri_get_path(), which parses
 * "//metrics" as an authority.
 */
char *http_target_path(const char *target);

#endif
