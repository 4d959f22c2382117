/*
 * ctl_rows — what idpoolctl reads and shows: rows of `application`
 * (validated with the daemon's rules, rendered column by column from
 * app_columns[]) and, per application, the pool and meta in Redis. Shared by
 * `apps` and `status`.
 */
#ifndef IDPOOL_CTL_ROWS_H
#define IDPOOL_CTL_ROWS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "app.h"
#include "ctl_common.h"

/* One row of `application` as idpoolctl sees it. */
struct ctl_row {
    struct app_row row; /* as read (entity_key/entity_name possibly cut) */
    char key[260];      /* entity_key in full, for display (VARCHAR(64) utf8mb4) */
    char name[1024];    /* entity_name in full (VARCHAR(255) utf8mb4) */
    /* the TIME columns (create_time, update_time) as MySQL prints them, in APP_COLUMNS order */
    char time[APP_NCOLUMNS - APP_ROW_NCOLUMNS][32];
    int valid;               /* app_validate() accepted it */
    struct app_cfg cfg;      /* defaults resolved, when valid */
    char error[APP_ERR_MAX]; /* app_validate()'s message, when not */
};

/*
 * Read rows into *rows (heap, free()) and *n: all of them sorted by key
 * (key NULL), or the one whose entity_key is exactly `key` (locked FOR
 * UPDATE when for_update, inside the caller's transaction). Each row is
 * validated with the configured tick. 0, or CTL_ERROR after reporting.
 */
int ctl_rows_load(struct ctl *c, const char *key, int for_update, struct ctl_row **rows, size_t *n)
    __attribute__((warn_unused_result));

/*
 * Read the one row whose entity_key is `key` into *out (FOR UPDATE when
 * for_update); an unknown key is reported. 0, or an exit code.
 */
int ctl_row_load(struct ctl *c, const char *key, int for_update, struct ctl_row *out)
    __attribute__((warn_unused_result));

/*
 * The i-th column (i < APP_NCOLUMNS) as `apps show` and the JSON of a row
 * list them: the row's own columns in table order, then its state and
 * audit columns (deleted_at, then the times MySQL sets).
 */
const struct app_column *ctl_row_column(size_t i);

/* A column's stored value as text (buf: 24 bytes); the value in force of a valid row's ("" when
 * none). */
const char *ctl_row_text(const struct ctl_row *r, const struct app_column *col, char *buf);
const char *ctl_row_in_force(const struct ctl_row *r, const struct app_column *col, char *buf);

/* "monotonic", "trend", or NULL for another increasing_type. */
const char *ctl_type_name(int64_t type);

/* The row as a JSON object (columns, resolved values, validation). */
cJSON *ctl_row_json(const struct ctl_row *r);

/*
 * The row of a command whose one argument is KEY (apps show, enable,
 * disable): argv parsed (only --json and --help), the settings loaded,
 * MySQL opened and the row read into *out; *key is the argument. 0, or an
 * exit code (CTL_HELP for --help).
 */
int ctl_row_arg(struct ctl *c, int argc, char **argv, const char **key, struct ctl_row *out)
    __attribute__((warn_unused_result));

/* "served", "deleted" or "invalid" (a soft-deleted row is "deleted" even if invalid). */
const char *ctl_row_state(const struct ctl_row *r);

/* The validation error without its "application 'KEY' (id N): " prefix. */
const char *ctl_row_reason(const struct ctl_row *r);

/* What Redis holds for one application. */
struct ctl_pool {
    long long length; /* LLEN of the pool; -1 when unread */
    cJSON *meta;      /* the meta hash: object of field -> string ({} when absent) */
    cJSON *alerts;    /* array of the alert kinds firing in meta */
    int unread;       /* its server could not be read (ctl_pools_read's partial) */
};

/*
 * Read pool length and meta of n applications in one pipeline. 0, or
 * CTL_ERROR after reporting. With partial (a Cluster with a primary down),
 * a server that cannot be read is reported once (not tried again for its
 * other applications), its applications are marked unread and the others
 * read: 0 then.
 */
int ctl_pools_read(struct ctl *c, const char *const *keys, size_t n, struct ctl_pool *out,
                   int partial) __attribute__((warn_unused_result));
void ctl_pool_free(struct ctl_pool *p);

#endif
