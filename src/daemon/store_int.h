/*
 * store_int — what the two halves of the store module share, and nothing
 * else includes: the job and store structs, and the worker's helpers.
 * store.c is the worker (its thread, queues, connection and back-off, the
 * loop side); store_jobs.c is what each job does on the worker's
 * connection (load the rows, the credentials, reserve a lease).
 */
#ifndef IDPOOL_STORE_INT_H
#define IDPOOL_STORE_INT_H

#include <pthread.h>
#include <stdint.h>

#include <mysql.h>

#include "store.h"

enum job_kind { JOB_LOAD, JOB_RESERVE, JOB_AUTH };

struct job {
    enum job_kind kind;
    struct job *next;
    void *fn;  /* store_load_fn or store_reserve_fn */
    void *arg; /* caller's argument */
    /* in (reserve) */
    int64_t app_id;
    char key[APP_KEY_MAX + 1]; /* the row's entity_key: the pool the lease is for */
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
    uint64_t used_ms;  /* the connection's last statement or ping */
    int lease_unkeyed; /* application_lease has no entity_key column (older schema) */
    /* counters, written by the worker, read by the loop */
    _Atomic uint64_t errors, reconnects;
    _Atomic int up;
    _Atomic int schema_missing; /* the last job found no database or table */
};

/* MySQL's numbers for a missing database, column and table. */
#define ER_BAD_DB        1049
#define ER_BAD_FIELD_ERR 1054
#define ER_NO_SUCH_TAB   1146

/* Record a job's failure: its kind, and a message for the log. */
void set_err(struct job *j, enum store_err kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The worker's connection (store.c); the worker thread only. */
void conn_close(struct store *s);
/* Record the connection's error in j (with a hint when the schema is missing). */
void sql_err(struct store *s, struct job *j, MYSQL *m);
/* Run one statement; on error record it, drop the connection, return -1. */
int q(struct store *s, struct job *j, const char *sql);
/* The last statement's result, or NULL with the error recorded and the connection dropped. */
MYSQL_RES *q_result(struct store *s, struct job *j);
/* One row of integer columns into out[]: 0; no row: 1; error: -1. */
int q_ints(struct store *s, struct job *j, const char *sql, int64_t *out, unsigned ncols);
/* The same for the statement just run (mysql_query() returned 0). */
int q_result_ints(struct store *s, struct job *j, int64_t *out, unsigned ncols);

/* The jobs (store_jobs.c), run by the worker on its open connection. */
void job_load(struct store *s, struct job *j);
void job_auth(struct store *s, struct job *j);
void job_reserve(struct store *s, struct job *j);

#endif
