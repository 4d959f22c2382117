/*
 * api — the ID issuer (brief §11): GET or POST /v1/ids/{key}[?count=N] with
 * "Authorization: Bearer <token>", on a listener of its own (api-addr).
 *
 *   200  {"app":"user","ids":["1000001","1000003"]} (IDs as strings), or
 *        one ID per line with "Accept: text/plain"; up to N IDs: fewer
 *        only when the pool ran short or the rate limit was reached
 *   400  IDPOOL_BADARG bad count, parameter or percent-escape in them;
 *        IDPOOL_LIMIT count above max_size_per_times; IDPOOL_BADREQUEST a
 *        bad percent-escape in the path (paths and queries are
 *        percent-decoded: httpreq_path_split, apireq_count)
 *   401  IDPOOL_AUTH no or unknown token (WWW-Authenticate: Bearer); each
 *        is counted and logged (one line per burst, the peer's address,
 *        never the token)
 *   403  IDPOOL_FORBIDDEN the token is not for this application
 *   404  IDPOOL_NOAPP unknown or not served application (for a token that
 *        may see it); IDPOOL_NOTFOUND another path
 *   405  IDPOOL_METHOD another method (Allow: GET, POST)
 *   406  IDPOOL_NOTACCEPTABLE an Accept header that allows neither
 *        application/json nor text/plain (apireq_accept: q-values weighed)
 *   429  IDPOOL_RATE max_size_per_second reached (Retry-After)
 *   503  IDPOOL_EMPTY pool dry, IDPOOL_EPOCH not yet re-validated,
 *        IDPOOL_UNAVAILABLE Redis unreachable or refusing, no limits in
 *        meta yet, or the tokens not read yet (MySQL unreachable since the
 *        start: a valid token is not refused as unknown) (Retry-After)
 *   and, from the HTTP server (apihttp.h): 411, 413, 431, 505 as
 *   IDPOOL_BADREQUEST, the connection closed
 *
 * Each application has a small buffer of IDs taken from its pool through
 * idpool_take (so the limits and the epoch check hold, inside Redis, across
 * every issuer and direct client), refilled ahead of need on a Redis
 * connection of its own. An ID leaves the buffer for exactly one response;
 * IDs buffered when the process dies are gaps, never reissued.
 */
#ifndef IDPOOL_API_H
#define IDPOOL_API_H

#include <stdint.h>

#include <event2/event.h>

#include "config.h"
#include "status.h"

struct access;
struct nodemap;
struct pools;

struct api;

/* Why an authentication failed (struct api_stats' auth_failures). */
enum api_auth {
    API_AUTH_MISSING, /* no Authorization: Bearer, or a malformed one */
    API_AUTH_UNKNOWN, /* a token that is unknown or revoked */
    API_AUTH_N
};

/* Counters for /metrics. */
struct api_stats {
    uint64_t requests[15];              /* by status, in API_CODES order */
    uint64_t auth_failures[API_AUTH_N]; /* by enum api_auth */
    uint64_t ids;                       /* IDs handed out */
    uint64_t takes;                     /* idpool_take calls (buffer fills) */
    uint64_t taken;                     /* IDs they brought */
    uint64_t buffered;                  /* IDs in the buffers now */
    uint64_t closes[HTTP_CLOSE_COUNT];  /* connections its server closed, by reason */
};

/* The status codes counted, in struct api_stats order. */
#define API_CODES                                                                                  \
    {                                                                                              \
        200, 400, 401, 403, 404, 405, 429, 500, 503, 408, 411, 413, 431, 505, 406                  \
    }

/*
 * Serve on cfg->api_host:cfg->api_port (nowhere when api_addr is empty).
 * Rows come from `pools`, tokens from `access`; takes go to the "redis-api"
 * connection of the key's node in `map` (made with NODEMAP_API when
 * api_addr is set). NULL with an error logged.
 */
struct api *api_new(struct event_base *base, const struct config *cfg, struct pools *pools,
                    struct access *access, struct nodemap *map) __attribute__((warn_unused_result));
/*
 * Answer every waiting request (503) and close the listener and its
 * connections; takes still in flight are answered NULL (by nodemap_free)
 * and ignored. Before the map is freed; NULL ok.
 */
void api_stop(struct api *a);
/* api_stop, then free the applications; after the map; NULL ok. */
void api_free(struct api *a);

/*
 * api-buffer and api-access-log (SIGHUP, also when the new configuration was
 * rejected: cfg is then the current one, and the access log is reopened for
 * logrotate).
 */
void api_configure(struct api *a, const struct config *cfg);

void api_get_stats(const struct api *a, struct api_stats *out);

#endif
