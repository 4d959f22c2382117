/*
 * http — the status server (libevent evhttp) on IDPOOL_HTTP_ADDR (brief §7):
 *
 *   GET /metrics         Prometheus text exposition 0.0.4 (metrics.h)
 *   GET /healthz         200 {"status":"ok",...} when Redis and MySQL are up and
 *                        the application rows are loaded, else 503 with "reasons"
 *   GET /v1/apps         every application, a JSON array sorted by key
 *   GET /v1/apps/{key}   one application, or 404           (statusjson.h)
 *
 * HEAD is allowed wherever GET is; another method on one of these paths gets
 * 405 with an Allow header; any other path gets 404. Error bodies are JSON:
 * {"error":"...",...}. Requests are served on the event loop thread, so the
 * status views are read consistently inside each request.
 */
#ifndef IDPOOL_HTTP_H
#define IDPOOL_HTTP_H

#include <event2/event.h>

#include "config.h"
#include "status.h"

struct http;

/*
 * Listen on cfg->http_host:cfg->http_port (an IPv4 or IPv6 literal, or a
 * host name: its first address). When cfg->http_addr is empty, HTTP is
 * disabled: the result is a valid server that listens nowhere (http_free it
 * as usual), so the caller needs no special case. NULL, with an error
 * logged, when the address cannot be resolved or bound, or out of memory.
 *
 * cfg is only read here (a reload cannot move the listener). *src is
 * copied; src->ctx must stay valid until http_free().
 */
struct http *http_new(struct event_base *base, const struct config *cfg,
                      const struct status_source *src) __attribute__((warn_unused_result));

/* Close the listener and every open connection; NULL is a no-op. */
void http_free(struct http *h);

#endif
