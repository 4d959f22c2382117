/*
 * statushttp — the status server on IDPOOL_HTTP_ADDR (brief §7):
 *
 *   GET /                the status page (status.html): HTML that shows every
 *                        application from /v1/apps, refreshing itself, and
 *                        one application's details at /#app=KEY
 *   GET /metrics         Prometheus text exposition 0.0.4 (metrics.h)
 *   GET /healthz         200 {"status":"ok",...} when Redis and MySQL are up and
 *                        the application rows are loaded, else 503 with "reasons"
 *   GET /v1/apps         every application, a JSON array sorted by key
 *   GET /v1/apps/{key}   one application, or 404           (statusjson.h)
 *
 * Served by apihttp.h (its limits and deadlines). HEAD is allowed wherever
 * GET is; another method on one of these paths gets 405 with an Allow
 * header; any other path gets 404. Error bodies are JSON:
 * {"error":"...",...}. A request whose Host is neither an IP address nor
 * localhost nor a name of http-allowed-hosts gets 403 on any path (DNS
 * rebinding). Requests are served on the event loop thread, so the
 * status views are read consistently inside each request.
 */
#ifndef IDPOOL_STATUSHTTP_H
#define IDPOOL_STATUSHTTP_H

#include <stdint.h>

#include <event2/event.h>

#include "config.h"
#include "status.h"

struct statushttp;

/*
 * Listen on cfg->http_host:cfg->http_port; an empty http address turns the
 * server off (a valid object that listens nowhere). NULL, with an error
 * logged, when the address cannot be resolved or bound. *src is copied;
 * src->ctx must stay valid until statushttp_free().
 */
struct statushttp *statushttp_new(struct event_base *base, const struct config *cfg,
                                  const struct status_source *src)
    __attribute__((warn_unused_result));
void statushttp_free(struct statushttp *h);
/* Take http-allowed-hosts from cfg (start, SIGHUP); 0, or -1 (out of memory: unchanged). */
int statushttp_configure(struct statushttp *h, const struct config *cfg)
    __attribute__((warn_unused_result));

/* Connections the server closed on its own, by reason (zeros for NULL). */
void statushttp_get_closes(const struct statushttp *h, uint64_t out[HTTP_CLOSE_COUNT]);

#endif
