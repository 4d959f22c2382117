/*
 * metrics — the Prometheus text exposition (format 0.0.4) of the daemon's
 * status views (status.h), for GET /metrics. Pure: renders into a memory
 * buffer, no sockets, so it is unit-tested with a fake status source.
 *
 * Every metric is defined once, in the lists below (twemproxy nc_stats.h
 * style); the renderer and the /v1/apps counters are generated from them.
 * The names are an interface: the Prometheus rules in deploy/ use them.
 */
#ifndef IDPOOL_METRICS_H
#define IDPOOL_METRICS_H

#include <stddef.h>

#include "status.h"

/*
 * Process-wide metrics: X(id, name, type, help, shape, labels, value)
 *   type    COUNTER | GAUGE | HISTOGRAM
 *   shape   ONE:   one series, with `labels` (label pairs as text, "" for none);
 *           BUILD: one series labelled version="..." and instance="...";
 *           SENT:  as ONE, only when the daemon follows Redis Sentinel (d->sentinel);
 *           CLUS:  as ONE, only on a Redis Cluster (d->cluster);
 *           NODES: one series per primary of a Cluster (d->nodes), labelled
 *                  node="host:port"; `value` reads `nv` (const struct node_view *);
 *           HIST:  the refill latency histogram (buckets STATUS_LATENCY_BUCKETS,
 *                  from d->refill_latency[] and d->refill_latency_sum; `value` is
 *                  the _count, which is also the +Inf bucket)
 *   value   read from `d` (const struct daemon_view *): U(x) an integer, F(x) a float
 * Entries with the same name must be adjacent: they are one family (help and
 * type of the first).
 */
#define METRICS_DAEMON(X)                                                                          \
    X(build_info, "idpool_build_info", GAUGE,                                                      \
      "Always 1; the labels give the idpoold version and instance name.", BUILD, "", U(1))         \
    X(start_time, "idpool_start_time_seconds", GAUGE, "When idpoold started, Unix time.", ONE, "", \
      F((double)d->started_unix_ms / 1000.0))                                                      \
    X(redis_up, "idpool_redis_up", GAUGE, "1 when the Redis connection is ready.", ONE, "",        \
      U(d->redis_up != 0))                                                                         \
    X(mysql_up, "idpool_mysql_up", GAUGE, "1 when the last MySQL job succeeded.", ONE, "",         \
      U(d->mysql_up != 0))                                                                         \
    X(redis_errors, "idpool_redis_errors_total", COUNTER,                                          \
      "Failed Redis commands and lost connections.", ONE, "", U(d->redis_errors))                  \
    X(redis_reconnects, "idpool_redis_reconnects_total", COUNTER,                                  \
      "Successful Redis reconnects after the first connect.", ONE, "", U(d->redis_reconnects))     \
    X(redis_failovers, "idpool_redis_failovers_total", COUNTER,                                    \
      "Times the sentinels named another primary, which idpoold then followed.", SENT, "",         \
      U(d->redis_failovers))                                                                       \
    X(sentinel_up, "idpool_sentinel_up", GAUGE,                                                    \
      "1 when the last question to the sentinels got an answer.", SENT, "",                        \
      U(d->sentinel_up != 0))                                                                      \
    X(sentinel_errors, "idpool_sentinel_errors_total", COUNTER,                                    \
      "Questions to one sentinel that failed (no answer in time, an error, an unknown master).",   \
      SENT, "", U(d->sentinel_errors))                                                             \
    X(node_up, "idpool_redis_node_up", GAUGE,                                                      \
      "1 when the connection to a primary of the Redis Cluster is ready, by node.", NODES, "",     \
      U(nv->up != 0))                                                                              \
    X(node_slots, "idpool_redis_node_slots", GAUGE,                                                \
      "Slots a primary of the Redis Cluster serves in the slot table in use, by node.", NODES, "", \
      U(nv->slots))                                                                                \
    X(cluster_unowned, "idpool_cluster_slots_unowned", GAUGE,                                      \
      "Slots of the Redis Cluster that no primary serves in the slot table in use.", CLUS, "",     \
      U(d->cluster_unowned))                                                                       \
    X(cluster_refreshes, "idpool_cluster_refreshes_total", COUNTER,                                \
      "Slot tables of the Redis Cluster read (CLUSTER SLOTS).", CLUS, "", U(d->cluster_refreshes)) \
    X(cluster_moved, "idpool_cluster_redirects_total", COUNTER,                                    \
      "Redirections and refusals of the Redis Cluster seen, by kind.", CLUS, "kind=\"moved\"",     \
      U(d->cluster_moved))                                                                         \
    X(cluster_asks, "idpool_cluster_redirects_total", COUNTER, "", CLUS, "kind=\"ask\"",           \
      U(d->cluster_asks))                                                                          \
    X(cluster_tryagains, "idpool_cluster_redirects_total", COUNTER, "", CLUS, "kind=\"tryagain\"", \
      U(d->cluster_tryagains))                                                                     \
    X(cluster_downs, "idpool_cluster_redirects_total", COUNTER, "", CLUS, "kind=\"clusterdown\"",  \
      U(d->cluster_downs))                                                                         \
    X(mysql_errors, "idpool_mysql_errors_total", COUNTER, "Failed MySQL jobs.", ONE, "",           \
      U(d->mysql_errors))                                                                          \
    X(mysql_reconnects, "idpool_mysql_reconnects_total", COUNTER,                                  \
      "Successful MySQL reconnects after the first connect.", ONE, "", U(d->mysql_reconnects))     \
    X(apps_served, "idpool_applications", GAUGE,                                                   \
      "Application rows by state: served, invalid (not served) or soft-deleted.", ONE,             \
      "state=\"served\"", U(d->apps_served))                                                       \
    X(apps_invalid, "idpool_applications", GAUGE, "", ONE, "state=\"invalid\"",                    \
      U(d->apps_invalid))                                                                          \
    X(apps_deleted, "idpool_applications", GAUGE, "", ONE, "state=\"deleted\"",                    \
      U(d->apps_deleted))                                                                          \
    X(refill_duration, "idpool_refill_duration_seconds", HISTOGRAM,                                \
      "How long refills took, seconds.", HIST, "", U(d->refill_latency_count))                     \
    X(api_requests_200, "idpool_api_requests_total", COUNTER,                                      \
      "Answers of the ID API, by HTTP status.", ONE, "code=\"200\"", U(d->api_requests[0]))        \
    X(api_requests_400, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"400\"",             \
      U(d->api_requests[1]))                                                                       \
    X(api_requests_401, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"401\"",             \
      U(d->api_requests[2]))                                                                       \
    X(api_requests_403, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"403\"",             \
      U(d->api_requests[3]))                                                                       \
    X(api_requests_404, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"404\"",             \
      U(d->api_requests[4]))                                                                       \
    X(api_requests_405, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"405\"",             \
      U(d->api_requests[5]))                                                                       \
    X(api_requests_406, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"406\"",             \
      U(d->api_requests[14]))                                                                      \
    X(api_requests_429, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"429\"",             \
      U(d->api_requests[6]))                                                                       \
    X(api_requests_500, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"500\"",             \
      U(d->api_requests[7]))                                                                       \
    X(api_requests_503, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"503\"",             \
      U(d->api_requests[8]))                                                                       \
    X(api_requests_408, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"408\"",             \
      U(d->api_requests[9]))                                                                       \
    X(api_requests_411, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"411\"",             \
      U(d->api_requests[10]))                                                                      \
    X(api_requests_413, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"413\"",             \
      U(d->api_requests[11]))                                                                      \
    X(api_requests_431, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"431\"",             \
      U(d->api_requests[12]))                                                                      \
    X(api_requests_505, "idpool_api_requests_total", COUNTER, "", ONE, "code=\"505\"",             \
      U(d->api_requests[13]))                                                                      \
    X(api_ids, "idpool_api_ids_total", COUNTER, "IDs handed out by the ID API.", ONE, "",          \
      U(d->api_ids))                                                                               \
    X(api_takes, "idpool_api_takes_total", COUNTER,                                                \
      "idpool_take calls that filled the ID API's buffers.", ONE, "", U(d->api_takes))             \
    X(api_buffered, "idpool_api_buffered_ids", GAUGE,                                              \
      "IDs in the ID API's buffers (gaps if the process dies).", ONE, "", U(d->api_buffered))      \
    X(api_tokens, "idpool_api_tokens", GAUGE, "Active API tokens loaded.", ONE, "",                \
      U(d->api_tokens))                                                                            \
    X(api_no_token, "idpool_api_auth_failures_total", COUNTER,                                     \
      "Failed authentications of the ID API (401), by reason.", ONE, "reason=\"missing\"",         \
      U(d->api_no_token))                                                                          \
    X(api_bad_token, "idpool_api_auth_failures_total", COUNTER, "", ONE, "reason=\"unknown\"",     \
      U(d->api_bad_token))                                                                         \
    HTTP_CLOSES(METRICS_HTTP_CLOSE_STATUS, X)                                                      \
    HTTP_CLOSES(METRICS_HTTP_CLOSE_API, X)
#define METRICS_HTTP_CLOSE_HELP                                                                    \
    "Connections an HTTP server closed on its own, by server (http: status, api: ID API) and "     \
    "reason."
#define METRICS_HTTP_CLOSE_STATUS(X, id, help)                                                     \
    X(http_close_##id, "idpool_http_connections_closed_total", COUNTER, METRICS_HTTP_CLOSE_HELP,   \
      ONE, "server=\"http\",reason=\"" #id "\"", U(d->http_closes[0][HTTP_CLOSE_##id]))
#define METRICS_HTTP_CLOSE_API(X, id, help)                                                        \
    X(api_close_##id, "idpool_http_connections_closed_total", COUNTER, METRICS_HTTP_CLOSE_HELP,    \
      ONE, "server=\"api\",reason=\"" #id "\"", U(d->http_closes[1][HTTP_CLOSE_##id]))

/*
 * Per-application metrics, labelled app="<entity_key>":
 * X(id, name, type, help, shape, labels, when, value)
 *   shape   ONE, or ALERTS: one series per alert kind (ALERT_KINDS), labelled
 *           alert="<name>", with `k` the kind
 *   when    whether the application has the series; VALID(v): the row is
 *           valid (an invalid row has only app_served and the alerts)
 *   value   read from `v` (const struct app_view *): U(x) an integer, F(x) a float
 * The counters come from APP_COUNTERS (status.h); the ids of the COUNTER
 * entries are the keys of "counters" in /v1/apps.
 */
#define METRICS_APP_COUNTER(X, id, name, help, labels)                                             \
    X(id, name, COUNTER, help, ONE, labels, VALID(v), U(v->c.id))
#define METRICS_APP(X)                                                                             \
    X(pool_length, "idpool_pool_length", GAUGE, "IDs in the pool at the last check.", ONE, "",     \
      VALID(v) && v->len_known, U(v->pool_len))                                                    \
    X(pool_capacity, "idpool_pool_capacity", GAUGE, "Pool capacity (max_pool_size).", ONE, "",     \
      VALID(v), U(v->cfg->max_pool))                                                               \
    X(pool_low_water, "idpool_pool_low_water", GAUGE,                                              \
      "The pool is refilled when it holds fewer IDs than this.", ONE, "", VALID(v),                \
      U(v->cfg->low_water))                                                                        \
    X(pool_fill_ratio, "idpool_pool_fill_ratio", GAUGE,                                            \
      "Pool length / capacity at the last check, 0..1.", ONE, "", VALID(v) && v->len_known,        \
      F(v->fill_pct / 100.0))                                                                      \
    X(rate, "idpool_consumption_ids_per_second", GAUGE, "IDs taken per second, smoothed.", ONE,    \
      "", VALID(v), F(v->rate))                                                                    \
    X(lease_remaining, "idpool_lease_remaining", GAUGE,                                            \
      "ID space left in the current and prefetched leases.", ONE, "", VALID(v) && v->lease_known,  \
      U(v->lease_remaining))                                                                       \
    X(pool_runway, "idpool_pool_runway_seconds", GAUGE,                                            \
      "Seconds until the pool runs dry at the current consumption rate (+Inf: nothing is "         \
      "consumed).",                                                                                \
      ONE, "", VALID(v) && !isnan(v->runway_pool_s), F(v->runway_pool_s))                          \
    X(space_runway, "idpool_id_space_runway_seconds", GAUGE,                                       \
      "Seconds until the ID space is exhausted at the rate the leases grew over the last "         \
      "7 days (+Inf: no growth measured).",                                                        \
      ONE, "", VALID(v) && !isnan(v->runway_space_days), F(v->runway_space_days * 86400.0))        \
    X(reserve, "idpool_failover_reserve_ids", GAUGE,                                               \
      "ID space in this daemon's failover reserve (0: none held).", ONE, "", VALID(v),             \
      U(v->reserve_hi - v->reserve_lo))                                                            \
    APP_COUNTERS(METRICS_APP_COUNTER, X)                                                           \
    X(last_refill, "idpool_last_refill_timestamp_seconds", GAUGE,                                  \
      "When the last successful refill ended, Unix time.", ONE, "",                                \
      VALID(v) && v->last_refill_unix_ms != 0, F((double)v->last_refill_unix_ms / 1000.0))         \
    X(served, "idpool_app_served", GAUGE,                                                          \
      "1 when the application is refilled, 0 when soft-deleted or invalid.", ONE, "", 1,           \
      U(v->served != 0))                                                                           \
    X(alert_firing, "idpool_alert_firing", GAUGE, "1 while the alert is firing.", ALERTS, "", 1,   \
      U(v->alerts[k] != 0))

struct sbuf;

/*
 * Render the whole /metrics text from src (one daemon() call, one
 * each_app() pass), appending to out. Families without series are left
 * out. Returns 0, or -1 when out of memory (out then holds partial text).
 */
int metrics_render(const struct status_source *src, struct sbuf *out)
    __attribute__((warn_unused_result));

#endif
