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

#include "idspace.h"
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

/*
 * The SELECT of every row, into j's result. The columns a schema older than
 * this idpoold lacks (APP_OPTIONAL_COLUMNS) are read as their defaults and
 * said once; they are tried again with every load (loading sql/schema.sql
 * again takes effect without a restart). 0, or -1 with j's error set.
 */
static int load_query(struct store *s, struct job *j)
{
    unsigned missing = 0, bit, was = s->app_missing;
    char cols[1024], sql[1280];

    for (;;) {
        snprintf(sql, sizeof(sql), "SELECT %s FROM application ORDER BY id",
                 app_row_columns(missing, 0, cols, sizeof(cols)));
        if (mysql_query(s->conn, sql) == 0)
            break;
        bit =
            mysql_errno(s->conn) == ER_BAD_FIELD_ERR ? app_missing_column(mysql_error(s->conn)) : 0;
        if (!bit || (missing & bit)) {
            sql_err(s, j, s->conn);
            conn_close(s);
            return -1;
        }
        missing |= bit;
    }
    s->app_missing = missing;
    for (size_t i = 0; i < APP_NCOLUMNS && i < 32; i++) {
        bit = 1u << i;
        if ((missing & bit) && !(was & bit))
            log_warn("mysql: application has no column %s (the schema is older than this "
                     "idpoold): %s; load sql/schema.sql again",
                     app_columns[i].name, app_missing_means(bit));
        else if (!(missing & bit) && (was & bit))
            log_info("mysql: application.%s is there: read from now on", app_columns[i].name);
    }
    return 0;
}

static void load_run(struct store *s, struct job *j)
{
    struct load_job *lj = job_of(j, struct load_job);
    MYSQL_RES *res;
    MYSQL_ROW row;
    size_t cap;

    if (load_query(s, j) < 0)
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
    char key[APP_KEY_MAX + 1];        /* the row's entity_key: the pool the lease is for */
    uint64_t delta, remainder, start; /* the lattice the caller generates on (its row copy) */
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

/* --- the shared ID space of a reservation (application.id_space) ---------- */

#define SPACE_PAGE 64 /* leases of another application read at a time */

/* An ID lattice: x % d == r. */
struct lattice {
    uint64_t d, r;
};

/* A lease of another application of the space that a reservation would meet. */
struct space_hit {
    uint64_t lo, hi; /* the lease */
    uint64_t first;  /* the first ID in both */
    uint64_t d, r;   /* the lattice the lease was judged by */
};

/* A lattice as a row holds it (delta 0 means 1); an invalid one meets nothing. */
static struct lattice lattice_of(const char *delta, const char *remainder)
{
    long long d = delta ? strtoll(delta, NULL, 10) : 0,
              r = remainder ? strtoll(remainder, NULL, 10) : 0;

    if (d == 0)
        d = 1;
    if (d < 0 || r < 0)
        return (struct lattice){1, 1}; /* r >= d: meets nothing (the row is not served) */
    return (struct lattice){(uint64_t)d, (uint64_t)r};
}

/*
 * A failed statement of the check: a deadlock or a lock wait timeout (two
 * reservations of one space waiting for each other's lease) is -2, to retry
 * the transaction; anything else is recorded, the connection dropped: -1.
 */
static int space_sql_err(struct store *s, struct job *j)
{
    unsigned e = mysql_errno(s->conn);

    if (e == ER_DEADLOCK || e == ER_LOCK_WAIT)
        return -2;
    sql_err(s, j, s->conn);
    conn_close(s);
    return -1;
}

/*
 * Whether [lo, hi) in lattices a[0..na) meets a lease of the other
 * application (escaped key qkey, row id other, lattice b): its leases are
 * read in pages in hi order from the first that ends above lo, until one
 * begins at or above hi (the leases of one key never overlap). By key: the
 * leases of every row the key had; on a schema without
 * application_lease.entity_key, by row. A locking read: a lease that
 * another reservation inserted and has not committed is waited for, and
 * each reservation inserts its own lease before it checks, so two of one
 * space cannot both pass unseen by each other (when each waits for the
 * other, MySQL ends one as a deadlock: it retries). A wait lasts at most
 * mysql-timeout-ms, the connection's read timeout (then the reservation
 * fails and is tried again). 1 (*hit), 0, -1 error, -2 retry.
 */
static int space_leases(struct store *s, struct job *j, const struct lattice *a, int na,
                        uint64_t lo, uint64_t hi, const char *qkey, int64_t other, struct lattice b,
                        struct space_hit *hit)
{
    char sql[512];
    uint64_t after = lo;
    /* each lease judged by the lattice it recorded, else by the row's now */
    const char *lat = s->lease_nolattice ? "" : ", delta, remainder";

    for (;;) {
        MYSQL_RES *res;
        MYSQL_ROW row;
        int n = 0, done = 0, found = 0;

        if (s->lease_unkeyed)
            snprintf(sql, sizeof(sql),
                     "SELECT lo, hi%s FROM application_lease WHERE application_id = %" PRId64
                     " AND hi > %" PRIu64 " ORDER BY hi LIMIT %d LOCK IN SHARE MODE",
                     lat, other, after, SPACE_PAGE);
        else
            snprintf(
                sql, sizeof(sql),
                "SELECT lo, hi%s FROM application_lease WHERE entity_key = '%s' AND hi > %" PRIu64
                " ORDER BY hi LIMIT %d LOCK IN SHARE MODE",
                lat, qkey, after, SPACE_PAGE);
        if (mysql_query(s->conn, sql) != 0)
            return space_sql_err(s, j);
        if ((res = q_result(s, j)) == NULL)
            return -1;
        while (!done && !found && (row = mysql_fetch_row(res))) {
            long long llo = row[0] ? strtoll(row[0], NULL, 10) : 0;
            long long lhi = row[1] ? strtoll(row[1], NULL, 10) : 0;
            uint64_t l_lo = llo > 0 ? (uint64_t)llo : 0, l_hi = lhi > 0 ? (uint64_t)lhi : 0;
            uint64_t olo = l_lo > lo ? l_lo : lo, ohi = l_hi < hi ? l_hi : hi;
            struct lattice lb = b;

            if (!s->lease_nolattice && row[2] && row[3])
                lb = lattice_of(row[2], row[3]);

            n++;
            if (l_hi > after)
                after = l_hi;
            if (l_lo >= hi) {
                done = 1;
                break;
            }
            for (int i = 0; i < na; i++) {
                uint64_t x;
                if (idspace_first_common(a[i].d, a[i].r, lb.d, lb.r, olo, ohi, &x) &&
                    (!found || x < hit->first)) {
                    *hit = (struct space_hit){l_lo, l_hi, x, lb.d, lb.r};
                    found = 1;
                }
            }
        }
        mysql_free_result(res);
        if (found)
            return 1;
        if (done || n < SPACE_PAGE)
            return 0;
    }
}

/*
 * The check of a reservation of [lo, hi) for a row with an id_space, in its
 * open transaction after its lease was inserted: against every lease of
 * every other application of the space (soft-deleted ones too: their IDs
 * were handed out) whose current lattice can meet the row's (or the pool's,
 * r->delta/remainder, when the row changed since the daemon loaded it).
 * Applications whose lattices never meet (same delta, other remainder) cost
 * no lease read. 0 clear, 1 conflict (STORE_CONFLICT, err names both), -1
 * error, -2 retry.
 *
 * Each lease of the other application is judged by the lattice it recorded
 * (application_lease.delta, remainder), one from before the columns by the
 * row's current one; an application whose current lattice cannot meet the
 * row's is skipped only when the ledger records no lattices (else its
 * history is read: its remainder may have been changed).
 */
static int space_check(struct store *s, struct reserve_job *r, uint64_t lo, uint64_t hi)
{
    struct job *j = &r->job;
    char sql[512], space[APP_KEY_MAX + 1], qspace[2 * APP_KEY_MAX + 1];
    struct lattice a[2];
    MYSQL_RES *res;
    MYSQL_ROW row;
    int na = 0, rc = 0;

    if (s->app_missing & (1u << APP_COL_id_space))
        return 0; /* the row loader said so: every application in its own space */
    snprintf(sql, sizeof(sql),
             "SELECT id_space, delta, remainder FROM application WHERE id = %" PRId64, r->app_id);
    if (mysql_query(s->conn, sql) != 0) {
        if (mysql_errno(s->conn) == ER_BAD_FIELD_ERR)
            return 0; /* the schema went back: the next row load says so */
        return space_sql_err(s, j);
    }
    if ((res = q_result(s, j)) == NULL)
        return -1;
    row = mysql_fetch_row(res);
    if (!row || !row[0] || !row[0][0] || mysql_num_fields(res) != 3) {
        mysql_free_result(res);
        return 0;
    }
    app_copy_col(space, sizeof(space), row[0], mysql_fetch_lengths(res)[0]);
    a[na++] = lattice_of(row[1], row[2]);
    mysql_free_result(res);
    if (r->delta != a[0].d || r->remainder != a[0].r)
        a[na++] = (struct lattice){r->delta, r->remainder};
    mysql_real_escape_string(s->conn, qspace, space, (unsigned long)strlen(space));
    /* BINARY: spaces compare as keys do, byte for byte (idpoold's own check is strcmp) */
    snprintf(sql, sizeof(sql),
             "SELECT id, entity_key, delta, remainder FROM application "
             "WHERE id_space = BINARY '%s' AND id <> %" PRId64 " ORDER BY id",
             qspace, r->app_id);
    if (mysql_query(s->conn, sql) != 0)
        return space_sql_err(s, j);
    if ((res = q_result(s, j)) == NULL)
        return -1;
    while (rc == 0 && (row = mysql_fetch_row(res))) {
        int64_t other = row[0] ? strtoll(row[0], NULL, 10) : 0;
        char key[APP_KEY_MAX + 1], okey[2 * APP_KEY_MAX + 1];
        struct lattice b = lattice_of(row[2], row[3]);
        struct space_hit hit;
        int meet = 0;

        for (int i = 0; i < na; i++)
            meet |= idspace_lattices_meet(a[i].d, a[i].r, b.d, b.r);
        if (!meet && s->lease_nolattice)
            continue;
        app_copy_col(key, sizeof(key), row[1], mysql_fetch_lengths(res)[1]);
        mysql_real_escape_string(s->conn, okey, key, (unsigned long)strlen(key));
        rc = space_leases(s, j, a, na, lo, hi, okey, other, b, &hit);
        if (rc == 1)
            set_err(j, STORE_CONFLICT,
                    "id_space_conflict: id_space '%s': the next lease [%" PRIu64 ", %" PRIu64
                    ") of '%s' (id %" PRId64 ", delta %" PRIu64 " remainder %" PRIu64
                    ") meets lease [%" PRIu64 ", %" PRIu64 ") of '%s' (id %" PRId64
                    ", delta %" PRIu64 " remainder %" PRIu64 ") at ID %" PRIu64
                    ", in both: refused; not served until their IDs no longer meet",
                    space, lo, hi, r->key, r->app_id, a[0].d, a[0].r, hit.lo, hit.hi, key, other,
                    hit.d, hit.r, hit.first);
    }
    mysql_free_result(res);
    return rc;
}

/*
 * Record the lease [lo, hi) of r in the ledger, inside the reservation's
 * transaction: 0, or -1 with j's error set. With its key (unless the schema
 * is older than the column) and the lattice its IDs are generated on
 * (delta, remainder, start_offset: idpoolctl verify checks the lease
 * against them). A schema without the lattice columns is said once and the
 * lease recorded without them; the columns are tried again each time, as
 * the key is (a failed statement leaves the transaction open).
 */
static int lease_insert(struct store *s, struct reserve_job *r, uint64_t lo, uint64_t hi,
                        const char *inst, const char *qkey)
{
    struct job *j = &r->job;
    char sql[1024], keycol[32] = "", keyval[2 * APP_KEY_MAX + 8] = "";

    if (!s->lease_unkeyed) {
        snprintf(keycol, sizeof(keycol), ", entity_key");
        snprintf(keyval, sizeof(keyval), ", '%s'", qkey);
    }
    snprintf(sql, sizeof(sql),
             "INSERT INTO application_lease (application_id, lo, hi, instance%s, delta, "
             "remainder, start_offset) VALUES (%" PRId64 ", %" PRIu64 ", %" PRIu64
             ", '%s'%s, %" PRIu64 ", %" PRIu64 ", %" PRIu64 ")",
             keycol, r->app_id, lo, hi, inst, keyval, r->delta, r->remainder, r->start);
    if (mysql_query(s->conn, sql) == 0) {
        if (s->lease_nolattice)
            log_info("mysql: application_lease.delta, remainder and start_offset are there: "
                     "leases are recorded with their lattice from now on");
        s->lease_nolattice = 0;
        return 0;
    }
    if (mysql_errno(s->conn) != ER_BAD_FIELD_ERR) {
        sql_err(s, j, s->conn);
        conn_close(s);
        return -1;
    }
    if (!s->lease_nolattice)
        log_warn("mysql: application_lease has no columns delta, remainder, start_offset (the "
                 "schema is older than this idpoold): leases are recorded without the lattice "
                 "of their IDs, which idpoolctl verify then cannot check; load sql/schema.sql "
                 "again");
    s->lease_nolattice = 1;
    snprintf(sql, sizeof(sql),
             "INSERT INTO application_lease (application_id, lo, hi, instance%s) "
             "VALUES (%" PRId64 ", %" PRIu64 ", %" PRIu64 ", '%s'%s)",
             keycol, r->app_id, lo, hi, inst, keyval);
    return q(s, j, sql) < 0 ? -1 : 0;
}

/*
 * The write-ahead reservation (brief §4.1): in one READ COMMITTED
 * transaction, read current_offset, version, max_id and the highest leased
 * hi of the row and of its key, choose lo above current_offset, that hi,
 * start_offset and the caller's floor, end the lease at max_id + 1 at the
 * latest (none left above max_id: STORE_EXHAUSTED), move current_offset
 * to hi by compare-and-set on current_offset AND version (and the key,
 * which names the pool the lease is for, and max_id, so that a ceiling
 * lowered meanwhile is read again), record the lease with its key, commit. Every
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
        int64_t app[4], leased = 0;
        uint64_t cur, lo, hi, maxhi, end = (uint64_t)INT64_MAX;
        char same_max[40] = "";
        int rc;

        if (q(s, j, "START TRANSACTION") < 0)
            return;
        snprintf(sql, sizeof(sql),
                 "SELECT current_offset, start_offset, version, %s FROM application "
                 "WHERE id = %" PRId64 " AND entity_key = '%s'",
                 (s->app_missing & (1u << APP_COL_max_id)) ? "0" : "max_id", r->app_id, qkey);
        rc = q_ints(s, j, sql, app, 4);
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
        if (r->start > lo) /* the row's start_offset was lowered since the caller read it */
            lo = r->start;
        if (app[3] > 0 && app[3] < INT64_MAX)
            end = (uint64_t)app[3] + 1;
        if (!(s->app_missing & (1u << APP_COL_max_id)))
            snprintf(same_max, sizeof(same_max), " AND max_id = %" PRId64, app[3]);
        if (lo >= end) {
            (void)q(s, j, "ROLLBACK");
            if (end < (uint64_t)INT64_MAX)
                set_err(j, STORE_EXHAUSTED,
                        "ID space exhausted: the next lease would start at %" PRIu64
                        ", above max_id %" PRId64,
                        lo, app[3]);
            else
                set_err(j, STORE_EXHAUSTED,
                        "ID space exhausted: current_offset %" PRIu64 " has reached 2^63-1", lo);
            return;
        }
        hi = lo + (r->span < end - lo ? r->span : end - lo);
        snprintf(sql, sizeof(sql),
                 "UPDATE application SET current_offset = %" PRIu64 ", version = version + 1 "
                 "WHERE id = %" PRId64 " AND current_offset = %" PRId64 " AND version = %" PRId64
                 " AND entity_key = '%s'%s",
                 hi, r->app_id, app[0], app[2], qkey, same_max);
        if (q(s, j, sql) < 0)
            return;
        if (mysql_affected_rows(s->conn) != 1) {
            /* Someone reserved (or edited the row) under us: re-read and try again. */
            if (q(s, j, "ROLLBACK") < 0)
                return;
            continue;
        }
        if (lease_insert(s, r, lo, hi, inst, qkey) < 0)
            return;
        rc = space_check(s, r, lo, hi);
        if (rc == -2) { /* waited for another reservation of the space: try again */
            if (q(s, j, "ROLLBACK") < 0)
                return;
            continue;
        }
        if (rc == 1) {
            log_debug("app=%s %s", r->key, j->err);
            if (mysql_query(s->conn, "ROLLBACK") != 0)
                conn_close(s);
            j->status = STORE_CONFLICT;
            return;
        }
        if (rc < 0)
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

int store_reserve(struct store *s, const struct app_cfg *cfg, uint64_t span, uint64_t floor,
                  store_reserve_fn *fn, void *arg)
{
    struct reserve_job *r;

    if (!app_key_valid(cfg->key))
        return -1;
    if (!(r = calloc(1, sizeof(*r))))
        return -1;
    memcpy(r->key, cfg->key, strlen(cfg->key) + 1); /* valid: <= APP_KEY_MAX bytes */
    r->job.ops = &reserve_ops;
    r->fn = fn;
    r->arg = arg;
    r->app_id = cfg->id;
    r->delta = cfg->delta;
    r->remainder = cfg->remainder;
    r->start = cfg->start_offset;
    r->span = span;
    r->floor = floor;
    store_queue(s, &r->job);
    return 0;
}
