/*
 * store_jobs — the store's jobs, one table entry each (struct job_ops: run
 * on the worker's connection, deliver on the loop, free), with the public
 * call that queues it: load the application rows (store_load), load the
 * API tokens and Redis users (store_auth), reserve a lease (store_reserve;
 * brief §4: compare-and-set of current_offset with version + 1 and an
 * application_lease row, in one transaction; an unknown commit outcome is a
 * gap, never used), read the lease ledger's growth for the runway
 * (store_ledger). The worker itself is store.c.
 */
#include "store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define RESERVE_RETRIES 8

/* --- load: the application rows -------------------------------------------- */

struct load_job {
    struct job job;
    store_load_fn *fn;
    void *arg;
    struct app_row *rows; /* heap array */
    size_t nrows;
};

static void load_run(struct store *s, struct job *j)
{
    struct load_job *lj = job_of(j, struct load_job);
    MYSQL_RES *res;
    MYSQL_ROW row;
    size_t cap;

    if (q(s, j, "SELECT " APP_ROW_COLUMNS " FROM application ORDER BY id") < 0)
        return;
    if ((res = q_result(s, j)) == NULL)
        return;
    cap = (size_t)mysql_num_rows(res);
    lj->rows = calloc(cap ? cap : 1, sizeof(*lj->rows));
    if (!lj->rows) {
        mysql_free_result(res);
        set_err(j, STORE_NOMEM, "out of memory loading %zu rows", cap);
        return;
    }
    while ((row = mysql_fetch_row(res)) && lj->nrows < cap)
        app_row_from_text(&lj->rows[lj->nrows++], row, mysql_fetch_lengths(res));
    mysql_free_result(res);
    j->status = STORE_OK;
}

static void load_deliver(struct job *j)
{
    struct load_job *lj = job_of(j, struct load_job);

    lj->fn(lj->arg, j->status, lj->rows, lj->nrows, j->err);
}

static void load_free(struct job *j)
{
    struct load_job *lj = job_of(j, struct load_job);

    free(lj->rows);
    free(lj);
}

static const struct job_ops load_ops = {load_run, load_deliver, load_free, 1};

int store_load(struct store *s, store_load_fn *fn, void *arg)
{
    struct load_job *lj = calloc(1, sizeof(*lj));

    if (!lj)
        return -1;
    lj->job.ops = &load_ops;
    lj->fn = fn;
    lj->arg = arg;
    store_queue(s, &lj->job);
    return 0;
}

/* --- ledger: how fast each application's leases grow (runway.h) ---------- */

struct ledger_job {
    struct job job;
    store_ledger_fn *fn;
    void *arg;
    struct store_growth *g; /* heap array, by app_id */
    size_t n;
};

static void ledger_run(struct store *s, struct job *j)
{
    struct ledger_job *lj = job_of(j, struct ledger_job);
    MYSQL_RES *res;
    MYSQL_ROW row;
    size_t cap;

    /* The ledger is not worth waiting for: a table lock on application_lease
     * (LOCK TABLES, an ALTER) would hold this worker, and the row loads and
     * reservations queued behind it, for as long as it lasts (t_kill9 saw a
     * new row go unseen). A second: then it fails, is retried later
     * (LEDGER_RETRY_MS), and the connection is made again. */
    if (q(s, j, "SET SESSION lock_wait_timeout = 1") < 0 || q(s, j, runway_ledger_sql) < 0)
        return;
    if ((res = q_result(s, j)) == NULL)
        return;
    if (q(s, j, "SET SESSION lock_wait_timeout = DEFAULT") < 0) {
        mysql_free_result(res);
        return;
    }
    cap = (size_t)mysql_num_rows(res);
    lj->g = calloc(cap ? cap : 1, sizeof(*lj->g));
    if (!lj->g) {
        mysql_free_result(res);
        set_err(j, STORE_NOMEM, "out of memory reading the ledger of %zu applications", cap);
        return;
    }
    while ((row = mysql_fetch_row(res)) && lj->n < cap && mysql_num_fields(res) == 4) {
        int64_t id = row[0] ? strtoll(row[0], NULL, 10) : 0;
        long long top = row[1] ? strtoll(row[1], NULL, 10) : 0;
        long long lo = row[2] ? strtoll(row[2], NULL, 10) : 0;
        long long us = row[3] ? strtoll(row[3], NULL, 10) : 0;
        struct store_growth *g;

        if (lj->n && lj->g[lj->n - 1].app_id == id)
            continue; /* another lease of the same millisecond, with a higher lo */
        g = &lj->g[lj->n++];
        g->app_id = id;
        g->l.known = 1;
        g->l.top = top > 0 ? (uint64_t)top : 0;
        g->l.in_window = row[2] != NULL && row[3] != NULL;
        g->l.first_lo = lo > 0 ? (uint64_t)lo : 0;
        g->l.elapsed_ms = us > 0 ? (uint64_t)us / 1000 : 0;
    }
    mysql_free_result(res);
    j->status = STORE_OK;
}

static void ledger_deliver(struct job *j)
{
    struct ledger_job *lj = job_of(j, struct ledger_job);

    lj->fn(lj->arg, j->status, j->status == STORE_OK ? lj->g : NULL, lj->n, j->err);
}

static void ledger_free(struct job *j)
{
    struct ledger_job *lj = job_of(j, struct ledger_job);

    free(lj->g);
    free(lj);
}

static const struct job_ops ledger_ops = {ledger_run, ledger_deliver, ledger_free, 0};

int store_ledger(struct store *s, store_ledger_fn *fn, void *arg)
{
    struct ledger_job *lj = calloc(1, sizeof(*lj));

    if (!lj)
        return -1;
    lj->job.ops = &ledger_ops;
    lj->fn = fn;
    lj->arg = arg;
    store_queue(s, &lj->job);
    return 0;
}

/* --- auth: the API tokens and the Redis users ------------------------------ */

struct auth_job {
    struct job job;
    store_auth_fn *fn;
    void *arg;
    struct store_auth *auth; /* heap, handed to the callback */
};

/*
 * Rows of one auth query into *rows (heap) through `take`, which returns 0
 * to keep a row, 1 to skip it (malformed), -1 when out of memory. A missing
 * table reads as no rows with *missing set. 0, or -1 with j's error set.
 */
static int auth_query(struct store *s, struct job *j, const char *sql, size_t size, void **rows,
                      size_t *n, int *missing, int (*take)(void *row, MYSQL_ROW r, void *ctx),
                      void *ctx)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    size_t cap;

    if (mysql_query(s->conn, sql) != 0) {
        if (mysql_errno(s->conn) == ER_NO_SUCH_TAB) {
            *missing = 1;
            return 0;
        }
        sql_err(s, j, s->conn);
        conn_close(s);
        return -1;
    }
    if ((res = q_result(s, j)) == NULL)
        return -1;
    cap = (size_t)mysql_num_rows(res);
    *rows = calloc(cap ? cap : 1, size);
    if (*rows == NULL) {
        mysql_free_result(res);
        set_err(j, STORE_NOMEM, "out of memory loading %zu rows", cap);
        return -1;
    }
    while ((row = mysql_fetch_row(res)) && *n < cap) {
        int rc = take((char *)*rows + *n * size, row, ctx);
        if (rc < 0) {
            mysql_free_result(res);
            set_err(j, STORE_NOMEM, "out of memory loading %zu rows", cap);
            return -1;
        }
        if (rc == 0)
            (*n)++;
    }
    mysql_free_result(res);
    return 0;
}

static int take_token(void *out, MYSQL_ROW r, void *ctx)
{
    struct store_token *t = out;
    struct store_auth *a = ctx;

    if (!r[0] || !r[1] || !r[2] || !token_name_valid(r[0]) || !token_hash_valid(r[1])) {
        a->skipped++;
        return 1;
    }
    snprintf(t->name, sizeof(t->name), "%s", r[0]);
    snprintf(t->hash, sizeof(t->hash), "%s", r[1]);
    t->apps = strdup(r[2]);
    return t->apps ? 0 : -1;
}

static int take_grant(void *out, MYSQL_ROW r, void *ctx)
{
    struct store_grant *g = out;
    struct store_auth *a = ctx;

    if (!r[0] || !r[1] || !app_key_valid(r[0]) || !token_hash_valid(r[1])) {
        a->skipped++;
        return 1;
    }
    snprintf(g->key, sizeof(g->key), "%s", r[0]);
    snprintf(g->hash, sizeof(g->hash), "%s", r[1]);
    g->revoked = r[2] && strcmp(r[2], "1") == 0;
    return 0;
}

static void auth_run(struct store *s, struct job *j)
{
    struct auth_job *aj = job_of(j, struct auth_job);
    struct store_auth *a = calloc(1, sizeof(*a));
    void *rows;

    if (a == NULL) {
        set_err(j, STORE_NOMEM, "out of memory");
        return;
    }
    aj->auth = a;
    rows = NULL;
    if (auth_query(s, j, "SELECT name, token_sha256, apps FROM api_token WHERE revoked_at IS NULL",
                   sizeof(struct store_token), &rows, &a->ntokens, &a->tokens_missing, take_token,
                   a) < 0) {
        a->tokens = rows;
        return;
    }
    a->tokens = rows;
    rows = NULL;
    if (auth_query(s, j,
                   "SELECT entity_key, password_sha256, revoked_at IS NOT NULL FROM redis_user "
                   "ORDER BY entity_key",
                   sizeof(struct store_grant), &rows, &a->ngrants, &a->grants_missing, take_grant,
                   a) < 0) {
        a->grants = rows;
        return;
    }
    a->grants = rows;
    j->status = STORE_OK;
}

static void auth_deliver(struct job *j)
{
    struct auth_job *aj = job_of(j, struct auth_job);
    struct store_auth *a = j->status == STORE_OK ? aj->auth : NULL;

    if (a)
        aj->auth = NULL; /* the callback's now */
    aj->fn(aj->arg, j->status, a, j->err);
}

static void auth_free(struct job *j)
{
    struct auth_job *aj = job_of(j, struct auth_job);

    store_auth_free(aj->auth);
    free(aj);
}

/* Not the store's health: tokens and users read fine while `application` is missing. */
static const struct job_ops auth_ops = {auth_run, auth_deliver, auth_free, 0};

int store_auth(struct store *s, store_auth_fn *fn, void *arg)
{
    struct auth_job *aj = calloc(1, sizeof(*aj));

    if (!aj)
        return -1;
    aj->job.ops = &auth_ops;
    aj->fn = fn;
    aj->arg = arg;
    store_queue(s, &aj->job);
    return 0;
}

void store_auth_free(struct store_auth *a)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < a->ntokens; i++)
        free(a->tokens[i].apps);
    free(a->tokens);
    free(a->grants);
    free(a);
}

/* --- reserve: a lease ------------------------------------------------------ */

struct reserve_job {
    struct job job;
    store_reserve_fn *fn;
    void *arg;
    int64_t app_id;
    char key[APP_KEY_MAX + 1]; /* the row's entity_key: the pool the lease is for */
    uint64_t span;
    uint64_t floor;
    struct store_lease lease; /* out */
};

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a > b ? a : b;
    return m > c ? m : c;
}

/*
 * The highest hi recorded for the job's row or for its key, into *out:
 * 0, or -1 with j's error set. Leases are found by key as well as by row,
 * so that the history of a key outlives its row: a row deleted and added
 * again under the key (a new id) starts above everything the key ever had.
 * A schema older than application_lease.entity_key has only the row's
 * leases: that is said once, s->lease_unkeyed tells the caller to record
 * the lease without its key, and the column is tried again each time.
 */
static int leased_max(struct store *s, struct reserve_job *r, const char *qkey, int64_t *out)
{
    struct job *j = &r->job;
    char sql[512];

    snprintf(sql, sizeof(sql),
             "SELECT GREATEST((SELECT COALESCE(MAX(hi), 0) FROM application_lease "
             "WHERE application_id = %" PRId64 "), (SELECT COALESCE(MAX(hi), 0) "
             "FROM application_lease WHERE entity_key = '%s'))",
             r->app_id, qkey);
    if (mysql_query(s->conn, sql) == 0) {
        if (s->lease_unkeyed)
            log_info("mysql: application_lease.entity_key is there: leases are found and "
                     "recorded by key as well as by row from now on");
        s->lease_unkeyed = 0;
        return q_result_ints(s, j, out, 1) < 0 ? -1 : 0;
    }
    if (mysql_errno(s->conn) != ER_BAD_FIELD_ERR) {
        sql_err(s, j, s->conn);
        conn_close(s);
        return -1;
    }
    if (!s->lease_unkeyed)
        log_warn("mysql: application_lease has no column entity_key (the schema is older than "
                 "this idpoold): leases are found by row only, and a row deleted and added again "
                 "under the same key can hand out its IDs again; load sql/schema.sql again");
    s->lease_unkeyed = 1;
    snprintf(sql, sizeof(sql),
             "SELECT COALESCE(MAX(hi), 0) FROM application_lease WHERE application_id = %" PRId64,
             r->app_id);
    return q_ints(s, j, sql, out, 1) < 0 ? -1 : 0;
}

/*
 * The write-ahead reservation (brief §4.1): in one READ COMMITTED
 * transaction, read current_offset, version and the highest leased hi of
 * the row and of its key, choose lo above current_offset, that hi,
 * start_offset and the caller's floor, move current_offset to hi by
 * compare-and-set on current_offset AND version (and the key, which names
 * the pool the lease is for), record the lease with its key, commit. Every
 * reservation bumps version, so a reservation whose reads went stale
 * (another one committed between its reads and its UPDATE, even if an
 * operator then wrote the old current_offset back: ABA) matches no row and
 * retries from fresh reads: leases never overlap (L). No row lock is held
 * across the reads, so a reserver that stops between them holds nothing
 * another daemon waits for. A failed commit is never reported as success.
 */
static void reserve_run(struct store *s, struct job *j)
{
    struct reserve_job *r = job_of(j, struct reserve_job);
    char sql[1536];
    char inst[2 * 255 + 1], qkey[2 * APP_KEY_MAX + 1];

    mysql_real_escape_string(s->conn, inst, s->instance, (unsigned long)strnlen(s->instance, 255));
    mysql_real_escape_string(s->conn, qkey, r->key, (unsigned long)strlen(r->key));
    for (int attempt = 0; attempt < RESERVE_RETRIES; attempt++) {
        int64_t app[3], leased = 0;
        uint64_t cur, lo, hi, maxhi;
        int rc;

        if (q(s, j, "START TRANSACTION") < 0)
            return;
        snprintf(sql, sizeof(sql),
                 "SELECT current_offset, start_offset, version FROM application "
                 "WHERE id = %" PRId64 " AND entity_key = '%s'",
                 r->app_id, qkey);
        rc = q_ints(s, j, sql, app, 3);
        if (rc != 0) {
            if (rc > 0) {
                set_err(j, STORE_GONE, "application id %" PRId64 " with key '%s' no longer exists",
                        r->app_id, r->key);
                (void)q(s, j, "ROLLBACK");
                j->status = STORE_GONE;
            }
            return;
        }
        if (leased_max(s, r, qkey, &leased) < 0)
            return;
        cur = app[0] > 0 ? (uint64_t)app[0] : 0;
        maxhi = leased > 0 ? (uint64_t)leased : 0;
        lo = max3(cur, maxhi, app[1] > 0 ? (uint64_t)app[1] : 0);
        if (r->floor > lo)
            lo = r->floor;
        if (lo >= (uint64_t)INT64_MAX) {
            (void)q(s, j, "ROLLBACK");
            set_err(j, STORE_EXHAUSTED,
                    "ID space exhausted: current_offset %" PRIu64 " has reached 2^63-1", lo);
            return;
        }
        hi = lo + (r->span < (uint64_t)INT64_MAX - lo ? r->span : (uint64_t)INT64_MAX - lo);
        snprintf(sql, sizeof(sql),
                 "UPDATE application SET current_offset = %" PRIu64 ", version = version + 1 "
                 "WHERE id = %" PRId64 " AND current_offset = %" PRId64 " AND version = %" PRId64
                 " AND entity_key = '%s'",
                 hi, r->app_id, app[0], app[2], qkey);
        if (q(s, j, sql) < 0)
            return;
        if (mysql_affected_rows(s->conn) != 1) {
            /* Someone reserved (or edited the row) under us: re-read and try again. */
            if (q(s, j, "ROLLBACK") < 0)
                return;
            continue;
        }
        if (s->lease_unkeyed)
            snprintf(sql, sizeof(sql),
                     "INSERT INTO application_lease (application_id, lo, hi, instance) "
                     "VALUES (%" PRId64 ", %" PRIu64 ", %" PRIu64 ", '%s')",
                     r->app_id, lo, hi, inst);
        else
            snprintf(sql, sizeof(sql),
                     "INSERT INTO application_lease (application_id, lo, hi, instance, entity_key) "
                     "VALUES (%" PRId64 ", %" PRIu64 ", %" PRIu64 ", '%s', '%s')",
                     r->app_id, lo, hi, inst, qkey);
        if (q(s, j, sql) < 0)
            return;
        if (mysql_commit(s->conn) != 0) {
            /* Outcome unknown: never use this range (brief §4.1). */
            set_err(j, STORE_UNKNOWN_COMMIT,
                    "commit of lease [%" PRIu64 ", %" PRIu64 ") failed (%s); range discarded", lo,
                    hi, mysql_error(s->conn));
            conn_close(s);
            return;
        }
        r->lease.lo = lo;
        r->lease.hi = hi;
        r->lease.seen_offset = cur;
        r->lease.max_leased = maxhi > r->floor ? maxhi : r->floor;
        r->lease.regression = cur < r->lease.max_leased;
        r->lease.version = app[2] + 1;
        j->status = STORE_OK;
        return;
    }
    set_err(j, STORE_CONTENDED, "current_offset kept changing under %d reservation attempts",
            RESERVE_RETRIES);
}

static void reserve_deliver(struct job *j)
{
    struct reserve_job *r = job_of(j, struct reserve_job);

    r->fn(r->arg, j->status, &r->lease, j->err);
}

static void reserve_free(struct job *j)
{
    free(job_of(j, struct reserve_job));
}

static const struct job_ops reserve_ops = {reserve_run, reserve_deliver, reserve_free, 1};

int store_reserve(struct store *s, int64_t app_id, const char *key, uint64_t span, uint64_t floor,
                  store_reserve_fn *fn, void *arg)
{
    struct reserve_job *r;

    if (!app_key_valid(key))
        return -1;
    if (!(r = calloc(1, sizeof(*r))))
        return -1;
    memcpy(r->key, key, strlen(key) + 1); /* valid: <= APP_KEY_MAX bytes */
    r->job.ops = &reserve_ops;
    r->fn = fn;
    r->arg = arg;
    r->app_id = app_id;
    r->span = span;
    r->floor = floor;
    store_queue(s, &r->job);
    return 0;
}
