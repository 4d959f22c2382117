/*
 * ctl_rows — what idpoolctl reads: `application` rows from MySQL, judged by
 * the daemon's own app_validate(), and each pool's length and meta from Redis.
 */
#include "ctl_rows.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The daemon's row columns (idpoold's loader reads the same ones), then the audit times. */
#define ROW_COLUMNS APP_ROW_COLUMNS APP_TIME_COLUMNS

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

    *rows = NULL;
    *n = 0;
    if (key) {
        q = ctl_db_quote(c, key);
        /* BINARY: keys are case-sensitive in Redis, so here too. */
        sql = ctl_strf("SELECT " ROW_COLUMNS " FROM application WHERE entity_key = BINARY %s%s", q,
                       for_update ? " FOR UPDATE" : "");
    } else {
        sql = ctl_strf("SELECT " ROW_COLUMNS " FROM application ORDER BY entity_key, id");
    }
    free(q);
    rc = ctl_db_exec(c, sql);
    free(sql);
    if (rc != 0)
        return rc;
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

int ctl_pools_read(struct ctl *c, const char *const *keys, size_t n, struct ctl_pool *out)
{
    char pool[256], meta[256];
    int rc = 0;

    for (size_t i = 0; i < n; i++) {
        ctl_redis_key(c, keys[i], "pool", pool, sizeof(pool));
        ctl_redis_key(c, keys[i], "meta", meta, sizeof(meta));
        if (redisAppendCommand(c->rds, "LLEN %s", pool) != REDIS_OK ||
            redisAppendCommand(c->rds, "HGETALL %s", meta) != REDIS_OK)
            ctl_oom();
    }
    for (size_t i = 0; i < n; i++) {
        redisReply *len = NULL, *h = NULL;
        void *r1 = NULL, *r2 = NULL;

        out[i].length = -1;
        out[i].meta = ctl_jcheck(cJSON_CreateObject());
        out[i].alerts = ctl_jcheck(cJSON_CreateArray());
        if (rc != 0)
            continue;
        if (redisGetReply(c->rds, &r1) != REDIS_OK || redisGetReply(c->rds, &r2) != REDIS_OK) {
            rc = ctl_fail(c, CTL_ERROR, "%s: %s", c->rds_where,
                          c->rds->errstr[0] ? c->rds->errstr : "no reply");
            freeReplyObject(r1);
            continue;
        }
        len = r1;
        h = r2;
        if (len->type == REDIS_REPLY_INTEGER) {
            out[i].length = len->integer;
        } else if (len->type == REDIS_REPLY_ERROR) {
            rc = ctl_fail(c, CTL_ERROR, "%s: LLEN: %s", c->rds_where, len->str);
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
            rc = ctl_fail(c, CTL_ERROR, "%s: HGETALL: %s", c->rds_where, h->str);
        }
        freeReplyObject(len);
        freeReplyObject(h);
    }
    return rc;
}

/* A meta field, or NULL. */
