/*
 * store_jobs — what each MySQL job does on the worker's connection (the
 * worker itself is store.c): load the application rows, load the API
 * tokens and Redis users, reserve a lease (brief §4: compare-and-set of
 * current_offset with version + 1 and an application_lease row, in one
 * transaction; an unknown commit outcome is a gap, never used).
 */
#include "store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define RESERVE_RETRIES 8

/* --- worker: jobs ---------------------------------------------------------- */

void job_load(struct store *s, struct job *j)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    size_t cap;

    if (q(s, j, "SELECT " APP_ROW_COLUMNS " FROM application ORDER BY id") < 0)
        return;
    if ((res = q_result(s, j)) == NULL)
        return;
    cap = (size_t)mysql_num_rows(res);
    j->rows = calloc(cap ? cap : 1, sizeof(*j->rows));
    if (!j->rows) {
        mysql_free_result(res);
        set_err(j, STORE_NOMEM, "out of memory loading %zu rows", cap);
        return;
    }
    while ((row = mysql_fetch_row(res)) && j->nrows < cap)
        app_row_from_text(&j->rows[j->nrows++], row, mysql_fetch_lengths(res));
    mysql_free_result(res);
    j->status = STORE_OK;
}

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

void job_auth(struct store *s, struct job *j)
{
    struct store_auth *a = calloc(1, sizeof(*a));
    void *rows;

    if (a == NULL) {
        set_err(j, STORE_NOMEM, "out of memory");
        return;
    }
    j->auth = a;
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
static int leased_max(struct store *s, struct job *j, const char *qkey, int64_t *out)
{
    char sql[512];

    snprintf(sql, sizeof(sql),
             "SELECT GREATEST((SELECT COALESCE(MAX(hi), 0) FROM application_lease "
             "WHERE application_id = %" PRId64 "), (SELECT COALESCE(MAX(hi), 0) "
             "FROM application_lease WHERE entity_key = '%s'))",
             j->app_id, qkey);
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
             j->app_id);
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
void job_reserve(struct store *s, struct job *j)
{
    char sql[1536];
    char inst[2 * 255 + 1], qkey[2 * APP_KEY_MAX + 1];

    mysql_real_escape_string(s->conn, inst, s->instance, (unsigned long)strnlen(s->instance, 255));
    mysql_real_escape_string(s->conn, qkey, j->key, (unsigned long)strlen(j->key));
    for (int attempt = 0; attempt < RESERVE_RETRIES; attempt++) {
        int64_t app[3], leased = 0;
        uint64_t cur, lo, hi, maxhi;
        int rc;

        if (q(s, j, "START TRANSACTION") < 0)
            return;
        snprintf(sql, sizeof(sql),
                 "SELECT current_offset, start_offset, version FROM application "
                 "WHERE id = %" PRId64 " AND entity_key = '%s'",
                 j->app_id, qkey);
        rc = q_ints(s, j, sql, app, 3);
        if (rc != 0) {
            if (rc > 0) {
                set_err(j, STORE_GONE, "application id %" PRId64 " with key '%s' no longer exists",
                        j->app_id, j->key);
                (void)q(s, j, "ROLLBACK");
                j->status = STORE_GONE;
            }
            return;
        }
        if (leased_max(s, j, qkey, &leased) < 0)
            return;
        cur = app[0] > 0 ? (uint64_t)app[0] : 0;
        maxhi = leased > 0 ? (uint64_t)leased : 0;
        lo = max3(cur, maxhi, app[1] > 0 ? (uint64_t)app[1] : 0);
        if (j->floor > lo)
            lo = j->floor;
        if (lo >= (uint64_t)INT64_MAX) {
            (void)q(s, j, "ROLLBACK");
            set_err(j, STORE_EXHAUSTED,
                    "ID space exhausted: current_offset %" PRIu64 " has reached 2^63-1", lo);
            return;
        }
        hi = lo + (j->span < (uint64_t)INT64_MAX - lo ? j->span : (uint64_t)INT64_MAX - lo);
        snprintf(sql, sizeof(sql),
                 "UPDATE application SET current_offset = %" PRIu64 ", version = version + 1 "
                 "WHERE id = %" PRId64 " AND current_offset = %" PRId64 " AND version = %" PRId64
                 " AND entity_key = '%s'",
                 hi, j->app_id, app[0], app[2], qkey);
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
                     j->app_id, lo, hi, inst);
        else
            snprintf(sql, sizeof(sql),
                     "INSERT INTO application_lease (application_id, lo, hi, instance, entity_key) "
                     "VALUES (%" PRId64 ", %" PRIu64 ", %" PRIu64 ", '%s', '%s')",
                     j->app_id, lo, hi, inst, qkey);
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
        j->lease.lo = lo;
        j->lease.hi = hi;
        j->lease.seen_offset = cur;
        j->lease.max_leased = maxhi > j->floor ? maxhi : j->floor;
        j->lease.regression = cur < j->lease.max_leased;
        j->lease.version = app[2] + 1;
        j->status = STORE_OK;
        return;
    }
    set_err(j, STORE_CONTENDED, "current_offset kept changing under %d reservation attempts",
            RESERVE_RETRIES);
}
