#define _GNU_SOURCE /* pipe2 */
#include "store_int.h"

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
#include "sqlerr.h"
#include "url.h"

#define BACKOFF_MIN_MS  100
#define BACKOFF_MAX_MS  5000
#define SESSION_IDLE_S  10   /* the server ends a session idle this long (wait_timeout) */
#define IDLE_TRX_S      2    /* MariaDB: and a write transaction idle this long */
#define KEEPALIVE_MS    3000 /* an idle connection is pinged this often */
#define STR_(x)         #x
#define STR(x)          STR_(x)
#define JOIN_TIMEOUT_MS 1000 /* at shutdown, how long to wait for the worker */

/*
 * A store whose worker did not stop in time at exit: still in use by that
 * thread, so never freed, and referenced here so that it is not a leak
 * (LeakSanitizer reported it on loaded machines, failing the test).
 */
static struct store *abandoned;

void set_err(struct job *j, enum store_err kind, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(j->err, sizeof(j->err), fmt, ap);
    va_end(ap);
    j->status = kind;
}

/* --- worker: connection ---------------------------------------------------- */

void conn_close(struct store *s)
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
    /*
     * UTC: application_lease.created_at (DATETIME, DEFAULT CURRENT_TIMESTAMP(3))
     * is written by this session and read back by the ledger's age (NOW(3)).
     * In a zone with summer time both are wall clock times, and a lease of
     * before the change was an hour too old or young (the runway's growth).
     */
    mysql_options(m, MYSQL_INIT_COMMAND, "SET SESSION time_zone = '+00:00'");
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

/*
 * After job j: a privilege refused is recorded (its own health reason) and
 * 1 returned; a success of the kind of job that was refused clears it.
 * Wrong credentials (1045) count as MySQL down as well: no connection.
 */
static int job_denied(struct store *s, struct job *j)
{
    char text[STORE_ERR_MAX];

    if (j->status == STORE_OK) {
        if (j->ops == s->denied_by) {
            pthread_mutex_lock(&s->mu);
            s->denied[0] = '\0';
            s->denied_by = NULL;
            pthread_mutex_unlock(&s->mu);
        }
        return 0;
    }
    if (!sqlerr_denied(j->sql_errno))
        return 0;
    sqlerr_denied_text(j->sql_errno, j->err, s->db, text, sizeof(text));
    pthread_mutex_lock(&s->mu);
    if (strcmp(s->denied, text) != 0)
        log_warn("mysql: %s: grant it to the daemon's MySQL user (docs/operations.md)", text);
    memcpy(s->denied, text, sizeof(text));
    s->denied_by = j->ops;
    pthread_mutex_unlock(&s->mu);
    if (j->sql_errno == SQLERR_ACCESS_DENIED)
        s->up = 0;
    else
        s->up = 1; /* it answered */
    return 1;
}

/* Record the connection's error in j (with a hint when the schema is missing). */
void sql_err(struct store *s, struct job *j, MYSQL *m)
{
    j->sql_errno = mysql_errno(m);
    set_err(j, STORE_SQL, "MySQL error %u: %s%s", j->sql_errno, mysql_error(m),
            j->sql_errno == ER_BAD_DB || j->sql_errno == ER_NO_SUCH_TAB
                ? " (the schema is not loaded: load sql/schema.sql)"
                : "");
    (void)s;
}

/* Run one statement; on error record it, drop the connection, return -1. */
int q(struct store *s, struct job *j, const char *sql)
{
    if (mysql_query(s->conn, sql) == 0)
        return 0;
    sql_err(s, j, s->conn);
    conn_close(s);
    return -1;
}

/* The last statement's result, or NULL with the error recorded and the connection dropped. */
MYSQL_RES *q_result(struct store *s, struct job *j)
{
    MYSQL_RES *res = mysql_store_result(s->conn);

    if (res == NULL) {
        sql_err(s, j, s->conn);
        conn_close(s);
    }
    return res;
}

/* Run a query returning one row of integer columns into out[]. 1 row: 0; none: 1; error: -1. */
int q_ints(struct store *s, struct job *j, const char *sql, int64_t *out, unsigned ncols)
{
    if (q(s, j, sql) < 0)
        return -1;
    return q_result_ints(s, j, out, ncols);
}

int q_result_ints(struct store *s, struct job *j, int64_t *out, unsigned ncols)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc = 1;

    if ((res = q_result(s, j)) == NULL)
        return -1;
    row = mysql_fetch_row(res);
    if (row && mysql_num_fields(res) == ncols) {
        for (unsigned i = 0; i < ncols; i++)
            out[i] = row[i] ? strtoll(row[i], NULL, 10) : 0;
        rc = 0;
    }
    mysql_free_result(res);
    return rc;
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
        if (conn_open(s, j) == 0)
            j->ops->run(s, j);

        s->used_ms = clock_ms();
        if (j->status != STORE_OK)
            s->errors++;
        if (job_denied(s, j))
            goto delivered; /* MySQL answered: a grant is missing, it is not down */
        /*
         * Health follows the refill's own jobs (ops->health): tokens and
         * users read fine while `application` is missing (and they tolerate
         * missing tables), so they would hide it. A job skipped during the
         * connect backoff (no error number) changes nothing.
         */
        if (j->ops->health)
            s->up = j->status == STORE_OK;
        else if (j->status != STORE_OK)
            s->up = 0;
        if (!j->ops->health)
            ;
        else if (j->status == STORE_OK)
            s->schema_missing = 0;
        else if (j->sql_errno != 0)
            s->schema_missing = j->sql_errno == ER_BAD_DB || j->sql_errno == ER_NO_SUCH_TAB;
    delivered:
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
        j->ops->deliver(j);
        j->ops->free(j);
    }
}

void store_queue(struct store *s, struct job *j)
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
}

void store_get_stats(const struct store *s, struct store_stats *out)
{
    out->errors = s->errors;
    out->reconnects = s->reconnects;
    out->up = s->up;
    out->schema_missing = s->schema_missing;
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    memcpy(out->denied, s->denied, sizeof(out->denied));
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
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
            abandoned = s;
            return;
        }
        mysql_library_end();
    }
    while ((j = s->todo)) {
        s->todo = j->next;
        j->ops->free(j);
    }
    while ((j = s->done)) {
        s->done = j->next;
        j->ops->free(j);
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
