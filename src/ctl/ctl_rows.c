/*
 * ctl_rows — what idpoolctl reads: `application` rows from MySQL, judged by
 * the daemon's own app_validate(), and each pool's length and meta from Redis.
 */
#include "ctl_rows.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "cluster.h"
#include "keys.h"

/* ----------------------------------------------------------------- rows */

static void row_validate(struct ctl *c, struct ctl_row *r)
{
    r->valid =
        app_validate(&r->row, (uint64_t)c->cfg.tick_ms, &r->cfg, r->error, sizeof(r->error)) == 0;
}

int ctl_rows_load(struct ctl *c, const char *key, int for_update, struct ctl_row **rows, size_t *n)
{
    char *sql = NULL, *q = NULL;
    MYSQL_RES *res;
    MYSQL_ROW mrow;
    size_t cap;
    int rc;
    unsigned missing = 0;

    *rows = NULL;
    *n = 0;
    /*
     * The daemon's row columns (idpoold's loader reads the same ones), then
     * the audit times. A schema older than a column of APP_OPTIONAL_COLUMNS:
     * read as its default (as idpoold reads it), with a warning.
     */
    for (;;) {
        char colbuf[1024];
        const char *cols = app_row_columns(missing, 1, colbuf, sizeof(colbuf));
        unsigned bit;

        if (key) {
            q = ctl_db_quote(c, key);
            /* BINARY: keys are case-sensitive in Redis, so here too. */
            sql = ctl_strf("SELECT %s FROM application WHERE entity_key = BINARY %s%s", cols, q,
                           for_update ? " FOR UPDATE" : "");
        } else {
            sql = ctl_strf("SELECT %s FROM application ORDER BY entity_key, id", cols);
        }
        free(q);
        q = NULL;
        rc = mysql_query(c->db, sql);
        free(sql);
        if (rc == 0)
            break;
        bit = mysql_errno(c->db) == ER_BAD_FIELD_ERROR ? app_missing_column(mysql_error(c->db)) : 0;
        if (!bit || (missing & bit))
            return ctl_db_fail(c);
        missing |= bit;
        for (size_t i = 0; i < APP_NCOLUMNS; i++)
            if (bit == 1u << i)
                fprintf(stderr,
                        "%s: %s: warning: application has no column %s (the schema is older than "
                        "idpoolctl): %s; load sql/schema.sql again\n",
                        c->prog, c->cmd, app_columns[i].name, app_missing_means(bit));
    }
    res = mysql_store_result(c->db);
    if (!res)
        return ctl_fail(c, CTL_ERROR, "MySQL: reading application rows: %s", mysql_error(c->db));
    cap = (size_t)mysql_num_rows(res);
    *rows = ctl_xcalloc(cap, sizeof(**rows));
    while ((mrow = mysql_fetch_row(res)) && *n < cap) {
        unsigned long *len = mysql_fetch_lengths(res);
        struct ctl_row *r = &(*rows)[(*n)++];

        app_row_from_text(&r->row, mrow, len);
        app_copy_col(r->key, sizeof(r->key), mrow[APP_COL_entity_key], len[APP_COL_entity_key]);
        app_copy_col(r->name, sizeof(r->name), mrow[APP_COL_entity_name], len[APP_COL_entity_name]);
        for (int i = APP_ROW_NCOLUMNS; i < APP_NCOLUMNS; i++)
            app_copy_col(r->time[i - APP_ROW_NCOLUMNS], sizeof(r->time[0]), mrow[i], len[i]);
        row_validate(c, r);
    }
    mysql_free_result(res);
    return 0;
}

/* ----------------------------------------------------------- rendering */

/*
 * The i-th column as `apps show` and its JSON list them: the row's own
 * columns in table order, then its state and audit columns (deleted_at,
 * then the times MySQL sets).
 */
const struct app_column *ctl_row_column(size_t i)
{
    static size_t order[APP_NCOLUMNS];
    static size_t n;

    if (n == 0) {
        for (size_t k = 0; k < APP_NCOLUMNS; k++)
            if (k != APP_COL_deleted_at && app_columns[k].type != APP_T_TIME)
                order[n++] = k;
        order[n++] = APP_COL_deleted_at;
        for (size_t k = 0; k < APP_NCOLUMNS; k++)
            if (app_columns[k].type == APP_T_TIME)
                order[n++] = k;
    }
    return &app_columns[order[i]];
}

const char *ctl_type_name(int64_t t)
{
    return t == APP_MONOTONIC ? "monotonic" : t == APP_TREND ? "trend" : NULL;
}

const char *ctl_row_in_force(const struct ctl_row *r, const struct app_column *f, char *buf)
{
    const char *v = (const char *)&r->cfg + f->cfg_off;

    if (f->set == APP_KEEP)
        return "";
    if (f->type == APP_T_NAME || f->type == APP_T_SPACE)
        return v;
    if (f->type == APP_T_TYPE)
        return ctl_type_name(*(const enum app_type *)(const void *)v);
    return ctl_u64(*(const uint64_t *)(const void *)v, buf);
}

const char *ctl_row_text(const struct ctl_row *r, const struct app_column *f, char *buf)
{
    if (f->type == APP_T_KEY)
        return r->key;
    if (f->type == APP_T_NAME)
        return r->name;
    if (f->type == APP_T_SPACE)
        return r->row.id_space;
    if (f->type == APP_T_TIME)
        return r->time[(f - app_columns) - APP_ROW_NCOLUMNS];
    return ctl_i64(app_row_get(&r->row, f), buf);
}

cJSON *ctl_row_json(const struct ctl_row *r)
{
    cJSON *o = ctl_jcheck(cJSON_CreateObject()), *cols, *res;
    char buf[24];

    ctl_jcheck(cJSON_AddStringToObject(o, "key", r->key));
    ctl_json_i64(o, "id", r->row.id);
    ctl_jcheck(cJSON_AddStringToObject(o, "state", ctl_row_state(r)));
    ctl_jcheck(cJSON_AddBoolToObject(o, "valid", r->valid));
    if (r->valid)
        ctl_jcheck(cJSON_AddNullToObject(o, "error"));
    else
        ctl_jcheck(cJSON_AddStringToObject(o, "error", r->error));
    cols = ctl_jcheck(cJSON_AddObjectToObject(o, "columns"));
    for (size_t i = 0; i < APP_NCOLUMNS; i++)
        ctl_jcheck(cJSON_AddStringToObject(cols, ctl_row_column(i)->name,
                                           ctl_row_text(r, ctl_row_column(i), buf)));
    if (!r->valid) {
        ctl_jcheck(cJSON_AddNullToObject(o, "resolved"));
        return o;
    }
    res = ctl_jcheck(cJSON_AddObjectToObject(o, "resolved"));
    for (size_t i = 0; i < APP_NCOLUMNS; i++) {
        const struct app_column *f = ctl_row_column(i);
        const char *t = ctl_row_in_force(r, f, buf);

        /* Names and offsets are strings (ctl_common.h's JSON rule); a count is a number. */
        if (f->set == APP_KEEP)
            continue;
        if (f->type == APP_T_INT)
            ctl_json_u64(res, f->name, strtoull(t, NULL, 10));
        else if (f == &app_columns[APP_COL_max_id] && r->cfg.max_id == 0)
            ctl_jcheck(cJSON_AddNullToObject(res, f->name)); /* none: as /v1/apps says it */
        else
            ctl_jcheck(cJSON_AddStringToObject(res, f->name, t));
    }
    ctl_json_u64(res, "low_water", r->cfg.low_water);
    ctl_jcheck(cJSON_AddBoolToObject(res, "space_warning", r->cfg.space_warning));
    return o;
}

/* The one row with this key: 0, or CTL_ERROR (reported, naming the key) when there is none. */
int ctl_row_load(struct ctl *c, const char *key, int for_update, struct ctl_row *out)
{
    struct ctl_row *rows;
    size_t n;
    char shown[260];
    int rc = ctl_rows_load(c, key, for_update, &rows, &n);

    if (rc != 0)
        return rc;
    if (n == 0) {
        free(rows);
        return ctl_fail(c, CTL_ERROR, "no application '%s' (see 'idpoolctl apps list')",
                        ctl_printable(key, shown, sizeof(shown)));
    }
    *out = rows[0];
    free(rows);
    return 0;
}

int ctl_row_arg(struct ctl *c, int argc, char **argv, const char **key, struct ctl_row *out)
{
    char *pos[1];
    int npos, rc;

    rc = ctl_opts_parse(c, argc, argv, NULL, NULL, NULL, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ctl_usage(c, "missing KEY");
    if ((rc = ctl_setup(c)) != 0 || (rc = ctl_db_open(c)) != 0)
        return rc;
    *key = pos[0];
    return ctl_row_load(c, pos[0], 0, out);
}

const char *ctl_row_state(const struct ctl_row *r)
{
    if (r->row.deleted_at != 0)
        return "deleted";
    return r->valid ? "served" : "invalid";
}

const char *ctl_row_reason(const struct ctl_row *r)
{
    const char *p = r->error;

    if (strncmp(p, "application '", 13) == 0) {
        const char *q = strstr(p, "): ");
        if (q)
            return q + 3;
    }
    return p;
}

/* ---------------------------------------------------------------- Redis */

void ctl_pool_free(struct ctl_pool *p)
{
    cJSON_Delete(p->meta);
    cJSON_Delete(p->alerts);
    p->meta = p->alerts = NULL;
}

/* "alert:<kind>" = "firing" (not "alert:<kind>:notified" and the like). */
static int alert_field(const char *f, const char *v)
{
    return strncmp(f, "alert:", 6) == 0 && f[6] && !strchr(f + 6, ':') && strcmp(v, "firing") == 0;
}

/* 1 when reply r is a Cluster's: the command did not run there (a slot on the move). */
static int cluster_said(const redisReply *r)
{
    struct cluster_addr to;
    int slot;

    return r->type == REDIS_REPLY_ERROR &&
           cluster_error_read(r->str, r->len, NULL, &slot, &to) != CLUSTER_ERR_OTHER;
}

/*
 * LLEN and HGETALL of one application again, one by one, a Cluster's
 * redirections followed: 0 with both replies, or CTL_ERROR after reporting.
 */
static int pool_read_routed(struct ctl *c, const char *pool, const char *meta, void **r1, void **r2)
{
    const char *llen[2] = {"LLEN", pool}, *hgetall[2] = {"HGETALL", meta};
    char err[CTL_MSG_MAX], where[400];
    redisReply *a = NULL, *b = NULL;

    if (ctl_redis_keyed(c, pool, 2, llen, &a, where, sizeof(where), err, sizeof(err)) != 0 ||
        ctl_redis_keyed(c, meta, 2, hgetall, &b, where, sizeof(where), err, sizeof(err)) != 0) {
        freeReplyObject(a);
        return ctl_fail(c, CTL_ERROR, "%s", err);
    }
    *r1 = a;
    *r2 = b;
    return 0;
}

/* The servers that could not be read (ctl_pools_read's partial): each reported once. */
struct unread {
    char where[8][400];
    size_t n;
};

static int unread_known(const struct unread *u, const char *where)
{
    for (size_t i = 0; i < u->n; i++)
        if (strcmp(u->where[i], where) == 0)
            return 1;
    return 0;
}

/* Application p cannot be read at where: reported when where is new. */
static void unread_mark(struct ctl *c, struct unread *u, struct ctl_pool *p, const char *where,
                        const char *err)
{
    p->unread = 1;
    p->length = -1;
    if (unread_known(u, where))
        return;
    if (u->n < sizeof(u->where) / sizeof(u->where[0]))
        snprintf(u->where[u->n++], sizeof(u->where[0]), "%s", where);
    ctl_fail(c, CTL_ERROR, "%s: %s (its applications' pools unknown)", where, err);
}

int ctl_pools_read(struct ctl *c, const char *const *keys, size_t n, struct ctl_pool *out,
                   int partial)
{
    char pool[KEYS_MAX], meta[KEYS_MAX], where[400], err[1024];
    redisContext **conn = ctl_xcalloc(n, sizeof(*conn));
    struct unread unread = {.n = 0};
    struct timeval tv = {c->cfg.redis_timeout_ms / 1000, (c->cfg.redis_timeout_ms % 1000) * 1000};
    int rc = 0;

    for (size_t i = 0; i < n; i++) {
        out[i].length = -1;
        out[i].unread = 0;
        out[i].meta = ctl_jcheck(cJSON_CreateObject());
        out[i].alerts = ctl_jcheck(cJSON_CreateArray());
    }
    /*
     * Pipelined: each application's two commands on the connection of its
     * server (a Cluster: of its slot's primary), then the replies in the
     * same order (one connection answers in order).
     */
    for (size_t i = 0; i < n && rc == 0; i++) {
        keys_app(c->cfg.key_prefix, keys[i], KEYS_POOL, pool, sizeof(pool));
        keys_app(c->cfg.key_prefix, keys[i], KEYS_META, meta, sizeof(meta));
        if (partial && ctl_redis_where_key(c, pool, where, sizeof(where)) == 0 &&
            unread_known(&unread, where)) {
            out[i].unread = 1; /* not asked again: it may take the whole timeout */
            continue;
        }
        if (!(conn[i] = ctl_redis_try_key(c, pool, where, sizeof(where), err, sizeof(err)))) {
            if (partial)
                unread_mark(c, &unread, &out[i], where, err);
            else
                rc = ctl_fail(c, CTL_ERROR, "%s: %s", where, err);
        } else if (redisSetTimeout(conn[i], tv) != REDIS_OK) { /* the replies' wait is bounded */
            ctl_oom();
        } else if (redisAppendCommand(conn[i], "LLEN %s", pool) != REDIS_OK ||
                   redisAppendCommand(conn[i], "HGETALL %s", meta) != REDIS_OK) {
            ctl_oom();
        }
    }
    for (size_t i = 0; i < n; i++) {
        redisReply *len = NULL, *h = NULL;
        void *r1 = NULL, *r2 = NULL;

        if (rc != 0 || !conn[i])
            continue;
        keys_app(c->cfg.key_prefix, keys[i], KEYS_POOL, pool, sizeof(pool));
        keys_app(c->cfg.key_prefix, keys[i], KEYS_META, meta, sizeof(meta));
        ctl_redis_where(c, conn[i], where, sizeof(where));
        if (redisGetReply(conn[i], &r1) != REDIS_OK || redisGetReply(conn[i], &r2) != REDIS_OK) {
            freeReplyObject(r1);
            if (partial)
                unread_mark(c, &unread, &out[i], where,
                            conn[i]->errstr[0] ? conn[i]->errstr : "no reply");
            else
                rc = ctl_fail(c, CTL_ERROR, "%s: %s", where,
                              conn[i]->errstr[0] ? conn[i]->errstr : "no reply");
            continue;
        }
        if (cluster_said(r1) || cluster_said(r2)) { /* its slot moved since the table was read */
            freeReplyObject(r1);
            freeReplyObject(r2);
            if ((rc = pool_read_routed(c, pool, meta, &r1, &r2)) != 0)
                continue;
        }
        len = r1;
        h = r2;
        if (len->type == REDIS_REPLY_INTEGER) {
            out[i].length = len->integer;
        } else if (len->type == REDIS_REPLY_ERROR) {
            rc = ctl_fail(c, CTL_ERROR, "%s: LLEN: %s", where, len->str);
        }
        if (h->type == REDIS_REPLY_ARRAY) {
            for (size_t k = 0; k + 1 < h->elements; k += 2) {
                const redisReply *f = h->element[k], *v = h->element[k + 1];
                if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
                    continue;
                ctl_jcheck(cJSON_AddStringToObject(out[i].meta, f->str, v->str));
                if (alert_field(f->str, v->str))
                    cJSON_AddItemToArray(out[i].alerts, ctl_jcheck(cJSON_CreateString(f->str + 6)));
            }
        } else if (h->type == REDIS_REPLY_ERROR && rc == 0) {
            rc = ctl_fail(c, CTL_ERROR, "%s: HGETALL: %s", where, h->str);
        }
        freeReplyObject(len);
        freeReplyObject(h);
    }
    free(conn);
    return rc;
}

/* A meta field, or NULL. */
