/*
 * status — read-only views of the daemon's state, for the HTTP status
 * server, /metrics and idpoolctl. The refill loop fills them in; consumers
 * only read them, on the event loop thread, inside the callback.
 */
#ifndef IDPOOL_STATUS_H
#define IDPOOL_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "app.h"
#include "gen.h"

/* Refill latency histogram bucket upper bounds, seconds (+Inf is implicit). */
#define STATUS_LATENCY_BUCKETS(X)                                                                  \
    X(0.001) X(0.0025) X(0.005) X(0.01) X(0.025) X(0.05) X(0.1) X(0.25) X(0.5) X(1.0) X(2.5)
#define STATUS_NLATENCY 11

/*
 * Per-application counters, each declared once here:
 *   C(arg, id, metric name, help, labels)
 * The daemon's per-pool storage, the status view, the "counters" object of
 * /v1/apps (keyed by id) and the /metrics series (COUNTER, labelled app=...
 * plus `labels`) are all generated from this list. Entries with the same
 * metric name are one family (help of the first) and must be adjacent.
 */
#define APP_COUNTERS(C, arg)                                                                       \
    C(arg, pushed, "idpool_ids_pushed_total", "IDs pushed into the pool by this daemon.", "")      \
    C(arg, refills, "idpool_refills_total", "Successful refills by this daemon.", "")              \
    C(arg, lock_busy, "idpool_lock_contention_total",                                              \
      "Refills skipped because another instance held the lock.", "")                               \
    C(arg, fenced, "idpool_fenced_pushes_total",                                                   \
      "Pushes rejected by the fence (a stale refiller).", "")                                      \
    C(arg, leases, "idpool_leases_total", "Lease reservations in MySQL by this daemon.", "")       \
    C(arg, reserve_used, "idpool_failover_reserve_used_total",                                     \
      "Refills from this daemon's failover reserve while MySQL could not lease.", "")              \
    C(arg, discards, "idpool_pool_discards_total",                                                 \
      "Pools discarded after a Redis restart or failover (epoch change).", "")                     \
    C(arg, underflows, "idpool_underflows_total", "Short or empty takes and empty pool checks.",   \
      "")                                                                                          \
    C(arg, refused_limit, "idpool_takes_refused_total",                                            \
      "Takes refused by idpool_take: limit (count > max_size_per_times), rate "                    \
      "(max_size_per_second) or epoch (pool not yet re-validated after a Redis restart).",         \
      "reason=\"limit\"")                                                                          \
    C(arg, refused_rate, "idpool_takes_refused_total", "", "reason=\"rate\"")                      \
    C(arg, refused_epoch, "idpool_takes_refused_total", "", "reason=\"epoch\"")                    \
    C(arg, taken, "idpool_ids_taken_total", "IDs granted by idpool_take.", "")

/* The counters of one application (underflows..taken are read from meta: all daemons). */
struct app_counters {
#define APP_COUNTER_FIELD(arg, id, name, help, labels) uint64_t id;
    APP_COUNTERS(APP_COUNTER_FIELD, _)
#undef APP_COUNTER_FIELD
};

/* One application, as the daemon sees it now. */
struct app_view {
    const char *key;           /* entity_key */
    const char *node;          /* "host:port" of the Redis node that serves it; NULL: none */
    const struct app_cfg *cfg; /* the row in force (valid rows; for invalid ones only key/id) */
    int64_t id;                /* row id */
    int served;                /* 1: refilled; 0: soft-deleted or invalid */
    int deleted;               /* soft-deleted */
    const char *invalid;       /* validation error, or NULL */
    int len_known;             /* pool_len was observed */
    uint64_t pool_len;         /* LLEN at the last check */
    double fill_pct;           /* pool_len / max_pool_size x 100 */
    double rate;               /* consumption, IDs/s, smoothed */
    int stale;                 /* its Redis node is unreachable: pool_len and rate as last seen */
    int lease_known;           /* lease was read from meta */
    struct gen_state lease;    /* current (next, hi) and prefetched (nlo, nhi) lease */
    uint64_t lease_remaining;  /* ID space left in the leases: (hi - next) + (nhi - nlo) */
    uint64_t reserve_lo;       /* this daemon's failover reserve [reserve_lo, reserve_hi) */
    uint64_t reserve_hi;       /* (plan.h); 0: none held */
    struct app_counters c;     /* the counters (APP_COUNTERS) */
    uint64_t last_refill_unix_ms; /* wall clock of the last successful refill, 0 = never */
    const char *last_error;       /* last refill problem, NULL when fine */
    int alerts[ALERT_COUNT];      /* 1 = firing */
    int bad_key;                  /* the row's key cannot name a pool: cfg is NULL, only key (as
                                     stored), id and the error are known; no metrics series */
    /* runway (runway.h): +Inf never, NaN unknown */
    double runway_pool_s;     /* seconds until the pool runs dry at `rate` */
    double runway_space_days; /* days until the ID space is exhausted at `growth_per_day` */
    double growth_per_day;    /* the lease ledger's growth, IDs a day (0: none measured) */
    uint64_t space_left;      /* IDs (offsets) left below the ceiling (valid rows) */
};

/*
 * Connections the HTTP servers (the status server, the ID API) close on
 * their own, by reason: C(arg, id, help). Counted per server
 * (idpool_http_connections_closed_total{server,reason}).
 */
#define HTTP_CLOSES(C, arg)                                                                        \
    C(arg, per_address, "its address already had the most connections allowed")                    \
    C(arg, evicted, "the least recently active, closed to make room at the connection limit")      \
    C(arg, limit, "at the connection limit, with every connection waiting for its answer")         \
    C(arg, head_timeout, "no complete request head within http-head-timeout-ms")                   \
    C(arg, body_timeout, "no complete body within http-timeout-ms of its head")                    \
    C(arg, idle_timeout, "idle for http-timeout-ms after an answer")                               \
    C(arg, write_timeout, "did not read its answers within http-timeout-ms")

enum http_close {
#define HTTP_CLOSE_ENUM(arg, id, help) HTTP_CLOSE_##id,
    HTTP_CLOSES(HTTP_CLOSE_ENUM, _)
#undef HTTP_CLOSE_ENUM
        HTTP_CLOSE_COUNT
};

/* The daemon as a whole. */
/* One primary of a Redis Cluster, as the daemon sees it. */
struct node_view {
    char addr[288]; /* "host:port" */
    int up;         /* its main connection is ready */
    size_t slots;   /* slots it serves in the table in use */
};

struct daemon_view {
    const char *version;
    const char *instance;
    uint64_t started_unix_ms;
    int redis_up;              /* connection ready */
    int mysql_up;              /* last MySQL job succeeded */
    int mysql_schema_missing;  /* MySQL answers, but the database or a table is missing */
    char mysql_denied[256];    /* a privilege MySQL refused ("SELECT denied on idpool.x"), or "" */
    int rows_loaded;           /* application rows loaded at least once */
    uint64_t redis_errors;     /* failed commands and lost connections */
    uint64_t redis_reconnects; /* successful (re)connects after the first */
    uint64_t mysql_errors;     /* failed jobs */
    uint64_t mysql_reconnects; /* successful (re)connects after the first */
    /* Redis Sentinel (redis-sentinel://); zero and NULL with redis:// */
    int sentinel;             /* the primary is found through the sentinels */
    int sentinel_up;          /* the last question to the sentinels got an answer */
    const char *redis_master; /* the primary's name as the sentinels know it */
    char redis_primary[288];  /* "host:port" the sentinels name ("" before an answer) */
    uint64_t redis_failovers; /* times the sentinels named another primary */
    uint64_t sentinel_errors; /* questions to one sentinel that failed */
    /* Redis Cluster (redis-cluster://); zero and NULL with the other kinds */
    int cluster;                   /* the nodes are the primaries of a cluster's slot table */
    size_t cluster_unowned;        /* slots no primary serves in the table in use */
    uint64_t cluster_refreshes;    /* slot tables read (CLUSTER SLOTS) */
    uint64_t cluster_moved;        /* MOVED replies seen */
    uint64_t cluster_asks;         /* ASK replies seen */
    uint64_t cluster_tryagains;    /* TRYAGAIN replies seen */
    uint64_t cluster_downs;        /* CLUSTERDOWN replies seen */
    const struct node_view *nodes; /* the primaries serving slots; valid during the call */
    size_t nnodes;
    size_t apps_served, apps_invalid, apps_deleted;
    size_t apps_unchecked; /* served rows whose first refill cycle is not over (pool.h) */
    size_t alerts_firing;  /* alerts firing, all applications together */
    uint64_t rows_loads;   /* loads of the application rows that ended, failed ones too */
    int api_tokens_loaded; /* the ID API's tokens were read at least once */
    uint64_t refill_latency[STATUS_NLATENCY + 1]; /* non-cumulative counts; last = +Inf */
    double refill_latency_sum;                    /* seconds */
    uint64_t refill_latency_count;
    /* the ID API (zero when it is off) */
    uint64_t api_requests[15]; /* answers by status: 200 400 401 403 404 405 429 500 503
                                  408 411 413 431 505 406 (api.h API_CODES) */
    uint64_t api_ids;          /* IDs handed out */
    uint64_t api_takes;        /* idpool_take calls filling the buffers */
    uint64_t api_buffered;     /* IDs in the buffers now */
    uint64_t api_tokens;       /* active tokens loaded */
    uint64_t api_no_token;     /* 401s: no or a malformed Authorization: Bearer */
    uint64_t api_bad_token;    /* 401s: an unknown or revoked token */
    uint64_t http_closes[2][HTTP_CLOSE_COUNT]; /* closed by the server: [0] status, [1] API */
};

typedef void status_app_fn(const struct app_view *v, void *arg);

/* Where views come from (implemented by the refill loop; a fake in unit tests). */
struct status_source {
    void *ctx;
    void (*each_app)(void *ctx, status_app_fn *fn, void *arg);                /* sorted by key */
    int (*one_app)(void *ctx, const char *key, status_app_fn *fn, void *arg); /* 0 or -1 unknown */
    void (*daemon)(void *ctx, struct daemon_view *out);
};

#endif
