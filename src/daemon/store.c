#define _GNU_SOURCE /* pipe2 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mysql.h>

#include "clock.h"
#include "log.h"
#include "url.h"

#define BACKOFF_MIN_MS  100
#define BACKOFF_MAX_MS  5000
#define RESERVE_RETRIES 8
#define SESSION_IDLE_S  10   /* the server ends a session idle this long (wait_timeout) */
#define IDLE_TRX_S      2    /* MariaDB: and a write transaction idle this long */
#define KEEPALIVE_MS    3000 /* an idle connection is pinged this often */
#define STR_(x)         #x
#define STR(x)          STR_(x)
#define JOIN_TIMEOUT_MS 300 /* at shutdown, how long to wait for the worker */

enum job_kind { JOB_LOAD, JOB_RESERVE, JOB_AUTH };

struct job {
    enum job_kind kind;
    struct job *next;
    void *fn;  /* store_load_fn or store_reserve_fn */
    void *arg; /* caller's argument */
    /* in (reserve) */
    int64_t app_id;
    uint64_t span;
    uint64_t floor;
    /* out */
    enum store_err status; /* STORE_OK, or what went wrong (err says more) */
    char err[STORE_ERR_MAX];
    unsigned sql_errno;   /* the server's error number, 0 if none */
    struct app_row *rows; /* load: heap array */
    size_t nrows;
    struct store_lease lease;
    struct store_auth *auth; /* auth: heap, handed to the callback */
};

struct store {
    struct event_base *base;
    char *host, *user, *password, *db, *instance; /* connection settings (heap) */
    int port;
    unsigned timeout_s; /* connect/read/write timeout, whole seconds */
    pthread_t thread;   /* the worker */
    int thread_started;
    pthread_mutex_t mu; /* guards the queues, stopping and active_fd */
    pthread_cond_t cv;  /* signals new work or stop */
    struct job *todo, *todo_tail;
    struct job *done, *done_tail;
    int stopping;
    int active_fd;         /* socket of the open connection, -1 if none */
    int pipefd[2];         /* worker -> loop: "jobs done" */
    struct event *done_ev; /* reads pipefd[0] */
    unsigned pending;      /* loop thread: jobs queued and not yet delivered */
    /* worker thread only */
    MYSQL *conn;
    uint64_t retry_at_ms; /* no connect attempt before this */
    int backoff_ms;
    int failures; /* consecutive connect failures */
    char last_err[STORE_ERR_MAX];
    int ever_connected;
    uint64_t used_ms; /* the connection's last statement or ping */
    /* counters, written by the worker, read by the loop */
    _Atomic uint64_t errors, reconnects;
    _Atomic int up;
    _Atomic int schema_missing; /* the last job found no database or table */
};

/* MySQL's numbers for a missing database and a missing table. */
#define ER_BAD_DB      1049
#define ER_NO_SUCH_TAB 1146

static void set_err(struct job *j, enum store_err kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(struct job *j, enum store_err kind, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(j->err, sizeof(j->err), fmt, ap);
    va_end(ap);
    j->status = kind;
}

/* --- worker: connection ---------------------------------------------------- */

static void conn_close(struct store *s)
{
    if (!s->conn)
        return;
    pthread_mutex_lock(&s->mu);
    s->active_fd = -1;
    pthread_mutex_unlock(&s->mu);
    mysql_close(s->conn);
    s->conn = NULL;
}

/*
 * Ping an idle connection, so that the server's wait_timeout ends only the
 * sessions of daemons that stopped running; a connection the server already
 * ended is closed here (the next job reconnects, without an error).
 */
static void conn_keepalive(struct store *s)
{
    if (mysql_ping(s->conn) != 0) {
        log_info("mysql: the idle connection was closed by the server (%s); reconnecting on "
                 "the next job",
                 mysql_error(s->conn));
        conn_close(s);
    }
    s->used_ms = clock_ms();
}

/* Open the connection if needed, honouring the backoff. 0 or -1 (j->err). */
static int conn_open(struct store *s, struct job *j)
{
    char hp[HOSTPORT_STR_MAX];
    MYSQL *m;
    unsigned proto = MYSQL_PROTOCOL_TCP;
    my_bool no = 0;
    uint64_t now = clock_ms();

    if (s->conn)
        return 0;
    if (now < s->retry_at_ms) {
        /* No countdown in the text: callers log each distinct message once. */
        set_err(j, STORE_DOWN, "cannot connect to MySQL: %s", s->last_err);
        return -1;
    }
    m = mysql_init(NULL);
    if (!m) {
        set_err(j, STORE_NOMEM, "mysql_init: out of memory");
        return -1;
    }
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &s->timeout_s);
    mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &s->timeout_s);
    mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &s->timeout_s);
    mysql_options(m, MYSQL_OPT_PROTOCOL, &proto);
    mysql_options(m, MYSQL_OPT_RECONNECT, &no);
    /* Reservations need fresh reads on retry: READ COMMITTED (brief §9). */
    mysql_options(m, MYSQL_INIT_COMMAND, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
    if (!mysql_real_connect(m, s->host, s->user, s->password, s->db, (unsigned)s->port, NULL, 0)) {
        j->sql_errno = mysql_errno(m);
        snprintf(s->last_err, sizeof(s->last_err), "%s%s", mysql_error(m),
                 j->sql_errno == ER_BAD_DB ? " (create the database and load sql/schema.sql)" : "");
        mysql_close(m);
        s->failures++;
        s->retry_at_ms = now + (uint64_t)s->backoff_ms;
        s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
        if (s->failures == 1 || s->failures % 20 == 0)
            log_warn("mysql: cannot connect to %s/%s: %s (attempt %d, retrying with backoff)",
                     hostport_str(hp, sizeof(hp), s->host, s->port), s->db, s->last_err,
                     s->failures);
        set_err(j, STORE_DOWN, "cannot connect to MySQL: %s", s->last_err);
        return -1;
    }
    /*
     * A daemon stopped inside a reservation (SIGSTOP, a frozen VM) holds the
     * application row's lock. The server must end its session within
     * seconds, so that the other daemons can reserve; the stopped one finds
     * its connection gone and never uses that range. MariaDB ends a write
     * transaction idle for IDLE_TRX_S; on both MariaDB and MySQL 8 the
     * session ends after SESSION_IDLE_S without a statement (wait_timeout),
     * and the worker pings an idle connection every KEEPALIVE_MS so that a
     * daemon that runs keeps its session.
     */
    if (mysql_query(m, "SET SESSION wait_timeout = " STR(SESSION_IDLE_S)) != 0)
        log_warn("mysql: cannot set wait_timeout (%s): a frozen daemon may hold a row lock "
                 "for the server's default wait_timeout",
                 mysql_error(m));
    if (mysql_query(m, "SET SESSION idle_write_transaction_timeout = " STR(IDLE_TRX_S)) != 0)
        log_debug("mysql: idle_write_transaction_timeout not set (not MariaDB?): %s",
                  mysql_error(m));
    if (s->failures)
        log_info("mysql: connected to %s/%s, recovered after %d failed attempts",
                 hostport_str(hp, sizeof(hp), s->host, s->port), s->db, s->failures);
    else
        log_info("mysql: connected to %s/%s", hostport_str(hp, sizeof(hp), s->host, s->port),
                 s->db);
    s->failures = 0;
    s->backoff_ms = BACKOFF_MIN_MS;
    s->conn = m;
    s->used_ms = clock_ms();
    if (s->ever_connected)
        s->reconnects++;
    s->ever_connected = 1;
    pthread_mutex_lock(&s->mu);
    s->active_fd = (int)mysql_get_socket(m);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Record the connection's error in j (with a hint when the schema is missing). */
static void sql_err(struct store *s, struct job *j, MYSQL *m)
{
    j->sql_errno = mysql_errno(m);
    set_err(j, STORE_SQL, "MySQL error %u: %s%s", j->sql_errno, mysql_error(m),
            j->sql_errno == ER_BAD_DB || j->sql_errno == ER_NO_SUCH_TAB
                ? " (the schema is not loaded: load sql/schema.sql)"
                : "");
    (void)s;
}

/* Run one statement; on error record it, drop the connection, return -1. */
static int q(struct store *s, struct job *j, const char *sql)
{
    if (mysql_query(s->conn, sql) == 0)
        return 0;
    sql_err(s, j, s->conn);
    conn_close(s);
    return -1;
}

/* Run a query returning one row of integer columns into out[]. 1 row: 0; none: 1; error: -1. */
static int q_ints(struct store *s, struct job *j, const char *sql, int64_t *out, unsigned ncols)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc = 1;

    if (q(s, j, sql) < 0)
        return -1;
    res = mysql_store_result(s->conn);
    if (!res) {
        sql_err(s, j, s->conn);
        conn_close(s);
        return -1;
    }
    row = mysql_fetch_row(res);
    if (row && mysql_num_fields(res) == ncols) {
        for (unsigned i = 0; i < ncols; i++)
            out[i] = row[i] ? strtoll(row[i], NULL, 10) : 0;
        rc = 0;
    }
    mysql_free_result(res);
    return rc;
}

/* --- worker: jobs ---------------------------------------------------------- */

static void job_load(struct store *s, struct job *j)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    size_t cap;

    if (q(s, j, "SELECT " APP_ROW_COLUMNS " FROM application ORDER BY id") < 0)
        return;
    res = mysql_store_result(s->conn);
    if (!res) {
        sql_err(s, j, s->conn);
        conn_close(s);
        return;
    }
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
    res = mysql_store_result(s->conn);
    if (!res) {
        sql_err(s, j, s->conn);
        conn_close(s);
        return -1;
    }
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

static void job_auth(struct store *s, struct job *j)
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
 * The write-ahead reservation (brief §4.1): in one READ COMMITTED
 * transaction, read current_offset, version and the highest leased hi,
 * choose lo above current_offset, that hi, start_offset and the caller's
 * floor, move current_offset to hi by compare-and-set on current_offset
 * AND version, record the lease, commit. Every reservation bumps version,
 * so a reservation whose reads went stale (another one committed between
 * its reads and its UPDATE, even if an operator then wrote the old
 * current_offset back: ABA) matches no row and retries from fresh reads:
 * leases never overlap (L). No row lock is held across the reads, so a
 * reserver that stops between them holds nothing another daemon waits for.
 * A failed commit is never reported as success.
 */
static void job_reserve(struct store *s, struct job *j)
{
    char sql[1024];
    char inst[2 * 255 + 1];

    mysql_real_escape_string(s->conn, inst, s->instance, (unsigned long)strnlen(s->instance, 255));
    for (int attempt = 0; attempt < RESERVE_RETRIES; attempt++) {
        int64_t app[3], leased = 0;
        uint64_t cur, lo, hi, maxhi;
        int rc;

        if (q(s, j, "START TRANSACTION") < 0)
            return;
        snprintf(
            sql, sizeof(sql),
            "SELECT current_offset, start_offset, version FROM application WHERE id = %" PRId64,
            j->app_id);
        rc = q_ints(s, j, sql, app, 3);
        if (rc != 0) {
            if (rc > 0) {
                set_err(j, STORE_GONE, "application id %" PRId64 " no longer exists", j->app_id);
                (void)q(s, j, "ROLLBACK");
                j->status = STORE_GONE;
            }
            return;
        }
        snprintf(
            sql, sizeof(sql),
            "SELECT COALESCE(MAX(hi), 0) FROM application_lease WHERE application_id = %" PRId64,
            j->app_id);
        if (q_ints(s, j, sql, &leased, 1) < 0)
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
                 "WHERE id = %" PRId64 " AND current_offset = %" PRId64 " AND version = %" PRId64,
                 hi, j->app_id, app[0], app[2]);
        if (q(s, j, sql) < 0)
            return;
        if (mysql_affected_rows(s->conn) != 1) {
            /* Someone reserved (or edited the row) under us: re-read and try again. */
            if (q(s, j, "ROLLBACK") < 0)
                return;
            continue;
        }
        snprintf(sql, sizeof(sql),
                 "INSERT INTO application_lease (application_id, lo, hi, instance) "
                 "VALUES (%" PRId64 ", %" PRIu64 ", %" PRIu64 ", '%s')",
                 j->app_id, lo, hi, inst);
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

static void *worker(void *arg)
{
    struct store *s = arg;

    mysql_thread_init();
    for (;;) {
        struct job *j;
        char byte = 'x';

        pthread_mutex_lock(&s->mu);
        while (!s->todo && !s->stopping) {
            if (s->conn && clock_ms() - s->used_ms >= KEEPALIVE_MS) {
                pthread_mutex_unlock(&s->mu);
                conn_keepalive(s);
                pthread_mutex_lock(&s->mu);
                continue;
            }
            if (s->conn) {
                struct timespec ts;
                uint64_t at = s->used_ms + KEEPALIVE_MS;
                ts.tv_sec = (time_t)(at / 1000);
                ts.tv_nsec = (long)(at % 1000) * 1000000L;
                pthread_cond_timedwait(&s->cv, &s->mu, &ts);
            } else {
                pthread_cond_wait(&s->cv, &s->mu);
            }
        }
        if (s->stopping) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        j = s->todo;
        s->todo = j->next;
        if (!s->todo)
            s->todo_tail = NULL;
        pthread_mutex_unlock(&s->mu);

        j->next = NULL;
        j->status = STORE_SQL;
        j->err[0] = '\0';
        /* Keep-alives were missed (the process was stopped): the server may have ended the session.
         */
        if (s->conn && clock_ms() - s->used_ms >= 2 * KEEPALIVE_MS)
            conn_keepalive(s);
        if (conn_open(s, j) == 0) {
            if (j->kind == JOB_LOAD)
                job_load(s, j);
            else if (j->kind == JOB_AUTH)
                job_auth(s, j);
            else
                job_reserve(s, j);
        }

        s->used_ms = clock_ms();
        if (j->status != STORE_OK)
            s->errors++;
        /*
         * Health follows the refill's own jobs: tokens and users read fine
         * while `application` is missing (and they tolerate missing tables),
         * so they would hide it. A job skipped during the connect backoff (no
         * error number) changes nothing.
         */
        if (j->kind != JOB_AUTH)
            s->up = j->status == STORE_OK;
        else if (j->status != STORE_OK)
            s->up = 0;
        if (j->kind == JOB_AUTH)
            ;
        else if (j->status == STORE_OK)
            s->schema_missing = 0;
        else if (j->sql_errno != 0)
            s->schema_missing = j->sql_errno == ER_BAD_DB || j->sql_errno == ER_NO_SUCH_TAB;
        pthread_mutex_lock(&s->mu);
        if (s->done_tail)
            s->done_tail->next = j;
        else
            s->done = j;
        s->done_tail = j;
        pthread_mutex_unlock(&s->mu);
        while (write(s->pipefd[1], &byte, 1) < 0 && errno == EINTR)
            ;
    }
    conn_close(s);
    mysql_thread_end();
    return NULL;
}

/* --- loop thread ------------------------------------------------------------ */

static void job_free(struct job *j)
{
    store_auth_free(j->auth);
    free(j->rows);
    free(j);
}

/* Deliver finished jobs to their callbacks, on the loop thread. */
static void on_done(evutil_socket_t fd, short what, void *arg)
{
    struct store *s = arg;
    struct job *list;
    char buf[64];

    (void)what;
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    pthread_mutex_lock(&s->mu);
    list = s->done;
    s->done = s->done_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    while (list) {
        struct job *j = list;
        list = j->next;
        s->pending--;
        if (j->kind == JOB_LOAD) {
            ((store_load_fn *)j->fn)(j->arg, j->status, j->rows, j->nrows, j->err);
        } else if (j->kind == JOB_AUTH) {
            struct store_auth *a = j->status == STORE_OK ? j->auth : NULL;
            if (a)
                j->auth = NULL;
            ((store_auth_fn *)j->fn)(j->arg, j->status, a, j->err);
        } else {
            ((store_reserve_fn *)j->fn)(j->arg, j->status, &j->lease, j->err);
        }
        job_free(j);
    }
}

static int store_queue(struct store *s, struct job *j)
{
    pthread_mutex_lock(&s->mu);
    if (s->todo_tail)
        s->todo_tail->next = j;
    else
        s->todo = j;
    s->todo_tail = j;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    s->pending++;
    return 0;
}

/* A job with no input: queued, or -1 when out of memory. */
static int queue_plain(struct store *s, enum job_kind kind, void *fn, void *arg)
{
    struct job *j = calloc(1, sizeof(*j));

    if (!j)
        return -1;
    j->kind = kind;
    j->fn = fn;
    j->arg = arg;
    return store_queue(s, j);
}

int store_load(struct store *s, store_load_fn *fn, void *arg)
{
    return queue_plain(s, JOB_LOAD, (void *)fn, arg);
}

int store_auth(struct store *s, store_auth_fn *fn, void *arg)
{
    return queue_plain(s, JOB_AUTH, (void *)fn, arg);
}

int store_reserve(struct store *s, int64_t app_id, uint64_t span, uint64_t floor,
                  store_reserve_fn *fn, void *arg)
{
    struct job *j = calloc(1, sizeof(*j));

    if (!j)
        return -1;
    j->kind = JOB_RESERVE;
    j->fn = (void *)fn;
    j->arg = arg;
    j->app_id = app_id;
    j->span = span;
    j->floor = floor;
    return store_queue(s, j);
}

void store_get_stats(const struct store *s, struct store_stats *out)
{
    out->errors = s->errors;
    out->reconnects = s->reconnects;
    out->up = s->up;
    out->schema_missing = s->schema_missing;
}

unsigned store_pending(const struct store *s)
{
    return s->pending;
}

struct store *store_new(struct event_base *base, const struct config *cfg)
{
    struct store *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->base = base;
    s->pipefd[0] = s->pipefd[1] = -1;
    s->active_fd = -1;
    s->host = strdup(cfg->mysql.host);
    s->user = strdup(cfg->mysql.user);
    s->password = cfg->mysql.password ? strdup(cfg->mysql.password) : NULL;
    s->db = strdup(cfg->mysql.db);
    s->instance = strdup(cfg->instance);
    s->port = cfg->mysql.port;
    s->timeout_s = (unsigned)((cfg->mysql_timeout_ms + 999) / 1000);
    s->backoff_ms = BACKOFF_MIN_MS;
    pthread_mutex_init(&s->mu, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* keep-alive waits */
        pthread_cond_init(&s->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (!s->host || !s->user || !s->db || !s->instance || pipe2(s->pipefd, O_CLOEXEC) < 0 ||
        fcntl(s->pipefd[0], F_SETFL, O_NONBLOCK) < 0)
        goto fail;
    s->done_ev = event_new(base, s->pipefd[0], EV_READ | EV_PERSIST, on_done, s);
    if (!s->done_ev || event_add(s->done_ev, NULL) < 0)
        goto fail;
    if (mysql_library_init(0, NULL, NULL) != 0)
        goto fail;
    if (pthread_create(&s->thread, NULL, worker, s) != 0)
        goto fail;
    s->thread_started = 1;
    return s;
fail:
    store_free(s);
    return NULL;
}

/* Join the worker, waiting at most JOIN_TIMEOUT_MS; 0 or -1. */
static int store_join(struct store *s)
{
    struct timespec deadline;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += (JOIN_TIMEOUT_MS % 1000) * 1000000L;
    deadline.tv_sec += JOIN_TIMEOUT_MS / 1000 + deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    return pthread_timedjoin_np(s->thread, NULL, &deadline) == 0 ? 0 : -1;
}

void store_free(struct store *s)
{
    struct job *j;

    if (!s)
        return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stopping = 1;
        /* Cut off a query in progress; its outcome is unknown and unused. */
        if (s->active_fd >= 0)
            shutdown(s->active_fd, SHUT_RDWR);
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (store_join(s) != 0) {
            /* Stuck in a connect with no socket to cut: do not hold up the exit
             * for the connect timeout; the worker still uses *s, so keep it. */
            log_warn("mysql: worker still busy after %d ms (connecting?); exiting without it",
                     JOIN_TIMEOUT_MS);
            return;
        }
        mysql_library_end();
    }
    while ((j = s->todo)) {
        s->todo = j->next;
        job_free(j);
    }
    while ((j = s->done)) {
        s->done = j->next;
        job_free(j);
    }
    if (s->done_ev)
        event_free(s->done_ev);
    if (s->pipefd[0] >= 0)
        close(s->pipefd[0]);
    if (s->pipefd[1] >= 0)
        close(s->pipefd[1]);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->host);
    free(s->user);
    free(s->password);
    free(s->db);
    free(s->instance);
    free(s);
}
