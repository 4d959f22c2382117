/*
 * store — MySQL/MariaDB, off the event loop. One worker thread owns the
 * connection and runs jobs in order; results come back to the libevent loop
 * through a pipe, so callbacks run on the loop thread. The connection is
 * (re)opened on demand with timeouts and backoff; an outage fails jobs
 * quickly instead of blocking the loop.
 *
 * Reservation is the write-ahead step of the design (brief §4): a range
 * [lo, hi) is reserved by compare-and-set on application.current_offset,
 * with version + 1 and an application_lease row, in one transaction. A
 * reservation whose commit outcome is unknown is reported as failed: its
 * range is never used (it becomes a gap).
 */
#ifndef IDPOOL_STORE_H
#define IDPOOL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "app.h"
#include "config.h"
#include "runway.h"
#include "token.h"

#define STORE_ERR_MAX 256

struct store;

/* A reserved lease. */
struct store_lease {
    uint64_t lo, hi;      /* the range [lo, hi), recorded in application_lease */
    uint64_t seen_offset; /* current_offset before the reservation */
    uint64_t max_leased;  /* highest hi ever recorded for the row or its key (or in Redis) */
    int regression;       /* 1: current_offset was below what was already reserved */
    int64_t version;      /* application.version after the reservation */
};

/* What a job came to: the kind decides, the message (err) is for the log. */
enum store_err {
    STORE_OK = 0,
    STORE_DOWN,           /* cannot connect to MySQL (backing off) */
    STORE_SQL,            /* a query failed, or the connection was lost */
    STORE_NOMEM,          /* out of memory */
    STORE_GONE,           /* the application row no longer exists */
    STORE_EXHAUSTED,      /* reserve: no ID space left below 2^63-1 (or above max_id) */
    STORE_UNKNOWN_COMMIT, /* reserve: the commit's outcome is unknown; the range is a gap */
    STORE_CONTENDED,      /* reserve: current_offset kept changing under every attempt */
    STORE_CONFLICT,       /* reserve: the lease would meet another application of its id_space */
};

/* Called on the loop thread; err is "" with STORE_OK. */
typedef void store_load_fn(void *arg, enum store_err st, const struct app_row *rows, size_t n,
                           const char *err);
typedef void store_reserve_fn(void *arg, enum store_err st, const struct store_lease *lease,
                              const char *err);

struct store *store_new(struct event_base *base, const struct config *cfg);
/*
 * Stop the worker: queued jobs are dropped without callbacks, a query in
 * progress is cut off by shutting its socket down. Then free.
 */
void store_free(struct store *s);

/* Read every row of `application`. 0, or -1 if the job cannot be queued. */
int store_load(struct store *s, store_load_fn *fn, void *arg) __attribute__((warn_unused_result));

/*
 * Reserve `span` units of ID space for application cfg->id, whose row has
 * entity_key cfg->key (else STORE_GONE), at or above max(current_offset,
 * start_offset (the row's now and cfg's), floor, the hi of every lease
 * recorded for the row or for the key). The lease is recorded with the
 * lattice the caller generates its IDs on (cfg's delta, remainder and
 * start_offset), for idpoolctl verify. `floor` is what Redis knows was
 * already leased; it protects uniqueness even if an operator lowers
 * current_offset (the higher value is written back). The key's leases
 * outlive its row: a row deleted and added again under the same key starts
 * above them, whatever it says.
 *
 * A row with an id_space: no lease whose IDs (of the row's lattice, and of
 * cfg's when it differs) meet the IDs of a lease of another application of
 * the space (of that row's current lattice): STORE_CONFLICT, err naming
 * both, the space, the other's lease and the first ID in both.
 */
int store_reserve(struct store *s, const struct app_cfg *cfg, uint64_t span, uint64_t floor,
                  store_reserve_fn *fn, void *arg) __attribute__((warn_unused_result));

/* One application's part of the lease ledger (store_ledger). */
struct store_growth {
    int64_t app_id;         /* application.id */
    struct runway_ledger l; /* known = 1 */
};

/* Called on the loop thread; g sorted by app_id, NULL unless STORE_OK. */
typedef void store_ledger_fn(void *arg, enum store_err st, const struct store_growth *g, size_t n,
                             const char *err);

/*
 * Read the lease ledger's growth of every application that has leases
 * (runway.h): the highest hi leased, and the first lease of the last
 * RUNWAY_WINDOW_DAYS days (its lo, and how long ago it was created). A few
 * index reads per application (application_lease ix_app_hi and
 * ix_app_created), whatever the ledger's length. An application without
 * leases is not in the result.
 */
int store_ledger(struct store *s, store_ledger_fn *fn, void *arg)
    __attribute__((warn_unused_result));

/* An active API token (api_token, revoked_at NULL). */
struct store_token {
    char name[TOKEN_NAME_MAX + 1];
    char hash[TOKEN_HASH_LEN + 1]; /* hex SHA-256 */
    char *apps;                    /* "user,order" or "*" (heap) */
};

/* A Redis user of a direct client (redis_user). */
struct store_grant {
    char key[APP_KEY_MAX + 1];
    char hash[TOKEN_HASH_LEN + 1]; /* hex SHA-256 of the password */
    int revoked;                   /* revoked_at is set: delete the user */
};

/* What store_auth() read; free with store_auth_free(). */
struct store_auth {
    struct store_token *tokens;
    size_t ntokens;
    struct store_grant *grants;
    size_t ngrants;
    int tokens_missing; /* no api_token table (schema older than this daemon) */
    int grants_missing; /* no redis_user table */
    size_t skipped;     /* rows with a malformed name, key or hash (not used) */
};

/* auth is owned by the callback (store_auth_free); NULL unless STORE_OK. */
typedef void store_auth_fn(void *arg, enum store_err st, struct store_auth *auth, const char *err);

/*
 * Read the active API tokens and the Redis users. A missing table is not an
 * error (the schema predates them): it reads as empty, flagged in the result.
 */
int store_auth(struct store *s, store_auth_fn *fn, void *arg) __attribute__((warn_unused_result));
void store_auth_free(struct store_auth *a);

/* Counters for /metrics and /healthz. */
struct store_stats {
    uint64_t errors;     /* failed jobs */
    uint64_t reconnects; /* connections opened after a previous one was lost */
    int up;              /* the last job succeeded */
    int schema_missing;  /* the last job failed: no such database or table */
    /* the privilege MySQL refused the last time ("SELECT denied on idpool.api_token"), "" if none
     */
    char denied[STORE_ERR_MAX];
};
void store_get_stats(const struct store *s, struct store_stats *out);

/* Jobs queued or running. */
unsigned store_pending(const struct store *s);

#endif
