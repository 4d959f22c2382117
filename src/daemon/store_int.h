/*
 * store_int — what the two halves of the store module share, and nothing
 * else includes: the job and store structs, and the worker's helpers.
 * store.c is the worker (its thread, queue, connection and back-off, the
 * loop side), which runs and delivers any job through its ops;
 * store_jobs.c is the jobs (load the rows, the credentials, reserve a
 * lease): each kind's request, its work on the worker's connection and its
 * delivery. store.c calls nothing of store_jobs.c by name.
 */
#ifndef IDPOOL_STORE_INT_H
#define IDPOOL_STORE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <mysql.h>

#include "store.h"

struct job;

/*
 * What one kind of job does (store_jobs.c has a table entry per kind): the
 * worker knows jobs only through it, so a new kind is one entry and its
 * functions, not a branch in the worker.
 */
struct job_ops {
    /* Worker thread, on the open connection: do the work, set status (and err). */
    void (*run)(struct store *s, struct job *j);
    /* Loop thread: hand the outcome to the caller's callback. */
    void (*deliver)(struct job *j);
    /* Free the job and what it holds, delivered or dropped at exit. */
    void (*free)(struct job *j);
    /*
     * 1: the outcome is the store's health (up, schema_missing); 0: only a
     * failure counts (a job that reads fine while `application` is missing).
     */
    int health;
};

/*
 * The part of a job the worker handles: each kind's struct (store_jobs.c)
 * has it as its member `job` and its own input, output and typed callback.
 */
struct job {
    const struct job_ops *ops;   /* its kind's table entry */
    struct job *next;            /* in the todo or done queue */
    enum store_err status;       /* STORE_OK, or what went wrong (err says more) */
    char err[2 * STORE_ERR_MAX]; /* an id_space conflict names two applications and a space */
    unsigned sql_errno;          /* the server's error number, 0 if none */
};

/* The kind's struct of a job: job_of(j, struct load_job). */
#define job_of(j, type) ((type *)(void *)((char *)(j)-offsetof(type, job)))

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
    uint64_t used_ms;     /* the connection's last statement or ping */
    int lease_unkeyed;    /* application_lease has no entity_key column (older schema) */
    int lease_nolattice;  /* ... nor delta, remainder, start_offset (older schema) */
    unsigned app_missing; /* APP_OPTIONAL_COLUMNS the application table lacks (older schema) */
    /* counters, written by the worker, read by the loop */
    _Atomic uint64_t errors, reconnects;
    _Atomic int up;
    _Atomic int schema_missing; /* the last job found no database or table */
    /* the last privilege MySQL refused (sqlerr_denied_text), "" when none; under mu */
    char denied[STORE_ERR_MAX];
    const struct job_ops *denied_by; /* the kind of job refused: its next success clears it */
};

/* MySQL's numbers for a missing database, column and table. */
#define ER_BAD_DB        1049
#define ER_BAD_FIELD_ERR 1054
#define ER_NO_SUCH_TAB   1146
/* ... and for a lock wait that timed out, and a deadlock (the transaction is rolled back). */
#define ER_LOCK_WAIT 1205
#define ER_DEADLOCK  1213

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

/* Hand a job to the worker (store.c); it runs, is delivered and freed through j->ops. */
void store_queue(struct store *s, struct job *j);

#endif
