/*
 * ctl_apps — `idpoolctl apps ...`: list, show, add, set, disable and enable
 * rows of the MySQL `application` table. Every row is judged by
 * app_validate(), the daemon's own rules, so idpoolctl and idpoold always
 * agree on what is served; writes are validated before they are made.
 */
#ifndef IDPOOL_CTL_APPS_H
#define IDPOOL_CTL_APPS_H

#include <stddef.h>
#include <stdio.h>

#include "app.h"
#include "ctl_common.h"

/* One row of `application` as idpoolctl sees it. */
struct ctl_row {
    struct app_row row;      /* as read (entity_key/entity_name possibly cut) */
    char key[260];           /* entity_key in full, for display (VARCHAR(64) utf8mb4) */
    char name[1024];         /* entity_name in full (VARCHAR(255) utf8mb4) */
    char create_time[32];    /* as MySQL prints it */
    char update_time[32];    /* as MySQL prints it */
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

/* "served", "deleted" or "invalid" (a soft-deleted row is "deleted" even if invalid). */
const char *ctl_row_state(const struct ctl_row *r);

/* The validation error without its "application 'KEY' (id N): " prefix. */
const char *ctl_row_reason(const struct ctl_row *r);

/* The row as a JSON object (columns, resolved values, validation). */
cJSON *ctl_row_json(const struct ctl_row *r);

/* What Redis holds for one application. */
struct ctl_pool {
    long long length; /* LLEN of the pool */
    cJSON *meta;      /* the meta hash: object of field -> string ({} when absent) */
    cJSON *alerts;    /* array of the alert kinds firing in meta */
};

/* Read pool length and meta of n applications in one pipeline. 0, or CTL_ERROR after reporting. */
int ctl_pools_read(struct ctl *c, const char *const *keys, size_t n, struct ctl_pool *out)
    __attribute__((warn_unused_result));
void ctl_pool_free(struct ctl_pool *p);

/* `idpoolctl apps SUBCOMMAND ...` (argv after "apps"). Returns the exit code. */
int ctl_apps(struct ctl *c, int argc, char **argv);

/* --help of `apps` (sub NULL) or of one subcommand; 0, or -1 for an unknown one. */
int ctl_apps_help(FILE *out, const char *prog, const char *sub);

#endif
