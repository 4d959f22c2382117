/*
 * ctl_apps — `idpoolctl apps ...`.
 *
 * Reads use the same column list as idpoold's loader and judge every row
 * with app_validate(), so "valid" means exactly "idpoold serves it". Writes:
 *   add      validates the would-be row, then INSERTs it, above the key's
 *            lease history when a row with the key was deleted before;
 *   set      in one transaction: reads the row FOR UPDATE, applies the
 *            edits, validates the result, UPDATEs only the changed columns;
 *   disable  deleted_at = UNIX_TIMESTAMP(); enable: deleted_at = 0 (only a
 *            valid row: an invalid one would not be served anyway).
 * grant and revoke (the application's Redis user) are ctl_tokens', dispatched
 * from here.
 * Strings reach SQL only through mysql_real_escape_string(); numbers are
 * formatted from parsed integers.
 */
#include "ctl_apps.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "ctl_rows.h"
#include "ctl_tokens.h"

#define MAX_ASSIGN 64

static const char force_why[] =
    "current_offset is the durable high-water mark that idpoold itself advances with every "
    "lease; setting it is never needed (to make IDs start higher, set start_offset; lowering it "
    "cannot make idpoold reuse IDs, it keeps the highest lease from application_lease and raises "
    "an offset_regression alert). If you really must, add --force";

static int64_t *row_int(struct app_row *r, const struct app_column *f)
{
    return (int64_t *)(void *)((char *)r + f->row_off);
}

static int64_t row_get(const struct app_row *r, const struct app_column *f)
{
    return *(const int64_t *)(const void *)((const char *)r + f->row_off);
}

static const struct app_column *field_find(const char *name, size_t n)
{
    for (size_t i = 0; i < APP_NCOLUMNS; i++)
        if (strlen(app_columns[i].name) == n && memcmp(app_columns[i].name, name, n) == 0)
            return &app_columns[i];
    return NULL;
}

/* The columns an operator may set (APP_SET), for messages: "entity_name, ..., increment_max". */
static const char *settable(void)
{
    static char buf[512];

    if (!buf[0])
        for (size_t i = 0; i < APP_NCOLUMNS; i++)
            if (app_columns[i].set == APP_SET)
                snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", buf[0] ? ", " : "",
                         app_columns[i].name);
    return buf;
}

/*
 * The i-th column as `apps show` and its JSON list them: the row's own
 * columns in table order, then its state and audit columns (deleted_at,
 * then the times MySQL sets).
 */
static const struct app_column *shown_field(size_t i)
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

static const char *type_name(int64_t t)
{
    return t == APP_MONOTONIC ? "monotonic" : t == APP_TREND ? "trend" : NULL;
}

/* The value in force of a column of a valid row, as text ("" when it has none). */
static const char *resolved_text(const struct ctl_row *r, const struct app_column *f, char *buf)
{
    const char *v = (const char *)&r->cfg + f->cfg_off;

    if (f->set == APP_KEEP)
        return "";
    if (f->type == APP_T_NAME)
        return v;
    if (f->type == APP_T_TYPE)
        return type_name(*(const enum app_type *)(const void *)v);
    return ctl_u64(*(const uint64_t *)(const void *)v, buf);
}

/* The stored value of a column as text. */
static const char *column_text(const struct ctl_row *r, const struct app_column *f, char *buf)
{
    if (f->type == APP_T_KEY)
        return r->key;
    if (f->type == APP_T_NAME)
        return r->name;
    if (f->type == APP_T_TIME)
        return r->time[(f - app_columns) - APP_ROW_NCOLUMNS];
    return ctl_i64(row_get(&r->row, f), buf);
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
        ctl_jcheck(cJSON_AddStringToObject(cols, shown_field(i)->name,
                                           column_text(r, shown_field(i), buf)));
    if (!r->valid) {
        ctl_jcheck(cJSON_AddNullToObject(o, "resolved"));
        return o;
    }
    res = ctl_jcheck(cJSON_AddObjectToObject(o, "resolved"));
    for (size_t i = 0; i < APP_NCOLUMNS; i++) {
        const struct app_column *f = shown_field(i);
        const char *t = resolved_text(r, f, buf);

        /* Names and offsets are strings (ctl_common.h's JSON rule); a count is a number. */
        if (f->set == APP_KEEP)
            continue;
        if (f->type == APP_T_INT)
            ctl_json_u64(res, f->name, strtoull(t, NULL, 10));
        else
            ctl_jcheck(cJSON_AddStringToObject(res, f->name, t));
    }
    ctl_json_u64(res, "low_water", r->cfg.low_water);
    ctl_jcheck(cJSON_AddBoolToObject(res, "space_warning", r->cfg.space_warning));
    return o;
}

static const char *meta_get(const struct ctl_pool *p, const char *field)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->meta, field);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ------------------------------------------------------------- commands */

/* Arguments common to the subcommands. */
struct apps_args {
    struct app_row row; /* add: the new row */
    int force;          /* set: --force */
    const char *name;   /* add: --name */
    char optname[64];   /* the option being parsed, for messages */
};

static int opt_int(struct ctl *c, const char *name, const char *value, int64_t *out)
{
    if (ctl_parse_i64(value, out) != 0)
        return ctl_usage(c, "%s: must be a decimal integer (64-bit), got '%.64s'", name, value);
    return 0;
}

/* monotonic | trend | a number (an unknown number is for app_validate to reject). */
static int opt_type(struct ctl *c, const char *name, const char *value, int64_t *out)
{
    if (strcmp(value, "monotonic") == 0)
        *out = APP_MONOTONIC;
    else if (strcmp(value, "trend") == 0)
        *out = APP_TREND;
    else if (ctl_parse_i64(value, out) != 0)
        return ctl_usage(c, "%s: must be monotonic, trend, 1 or 2, got '%.64s'", name, value);
    return 0;
}

/* entity_name: VARCHAR(255) of valid UTF-8. */
static int check_name(struct ctl *c, const char *name, const char *value)
{
    const unsigned char *p = (const unsigned char *)value;
    size_t chars = 0;

    while (*p) {
        int n = *p < 0x80             ? 1
                : (*p & 0xE0) == 0xC0 ? 2
                : (*p & 0xF0) == 0xE0 ? 3
                : (*p & 0xF8) == 0xF0 ? 4
                                      : 0;
        if (n == 0 || (n == 2 && *p < 0xC2))
            return ctl_usage(c, "%s: not valid UTF-8", name);
        for (int i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return ctl_usage(c, "%s: not valid UTF-8", name);
        p += n;
        chars++;
    }
    if (chars > APP_NAME_MAX)
        return ctl_usage(c, "%s: at most %d characters, got %zu", name, APP_NAME_MAX, chars);
    return 0;
}

enum {
    O_FORCE = 1,
    O_COLUMN = 100, /* O_COLUMN + i: the option of `apps add` that sets app_columns[i] */
};

/* The options of `apps add`: one per column that has one (APP_COLUMNS' opt). */
static const struct ctl_opt *add_opts(void)
{
    static struct ctl_opt opts[APP_NCOLUMNS + 1];
    static size_t n;

    if (n == 0)
        for (size_t i = 0; i < APP_NCOLUMNS; i++)
            if (app_columns[i].opt)
                opts[n++] = (struct ctl_opt){app_columns[i].opt, 1, O_COLUMN + (int)i};
    return opts;
}

static const struct ctl_opt set_opts[] = {
    {"force", 0, O_FORCE},
    {NULL, 0, 0},
};

static int on_add_opt(struct ctl *c, int id, const char *name, const char *value, void *arg)
{
    struct apps_args *a = arg;
    const struct app_column *f;

    snprintf(a->optname, sizeof(a->optname), "--%s", name);
    if (id == O_FORCE) {
        a->force = 1;
        return 0;
    }
    f = &app_columns[id - O_COLUMN];
    if (f->type == APP_T_NAME) {
        a->name = value;
        return check_name(c, a->optname, value);
    }
    if (f->type == APP_T_TYPE)
        return opt_type(c, a->optname, value, row_int(&a->row, f));
    return opt_int(c, a->optname, value, row_int(&a->row, f));
}

/* Remind the operator when the change takes effect. */
static void reload_hint(struct ctl *c)
{
    if (!c->json)
        printf("idpoold applies it within its reload interval (%d ms here) or at once on "
               "SIGHUP.\n",
               c->cfg.reload_ms);
}

/* {"result": ..., "key": ..., "id": ..., "app": {...}} with the row as read back. */
static cJSON *result_json(const char *result, const struct ctl_row *r)
{
    cJSON *o = ctl_jcheck(cJSON_CreateObject());

    ctl_jcheck(cJSON_AddStringToObject(o, "result", result));
    ctl_jcheck(cJSON_AddStringToObject(o, "key", r->key));
    ctl_json_i64(o, "id", r->row.id);
    cJSON_AddItemToObject(o, "app", ctl_row_json(r));
    return o;
}

static int cmd_list(struct ctl *c, int argc, char **argv)
{
    static const char *const hdr[] = {"KEY", "ID", "TYPE", "STEP", "MAX_POOL", "STATE"};
    struct ctl_row *rows;
    struct ctl_table *t;
    size_t n;
    char *pos[1];
    int npos, rc;

    rc = ctl_opts_parse(c, argc, argv, NULL, NULL, NULL, pos, 0, &npos);
    if (rc != 0)
        return rc;
    if ((rc = ctl_setup(c)) != 0 || (rc = ctl_db_open(c)) != 0)
        return rc;
    if ((rc = ctl_rows_load(c, NULL, 0, &rows, &n)) != 0)
        return rc;
    if (c->json) {
        cJSON *doc = ctl_jcheck(cJSON_CreateObject());
        cJSON *arr = ctl_jcheck(cJSON_AddArrayToObject(doc, "apps"));
        for (size_t i = 0; i < n; i++)
            cJSON_AddItemToArray(arr, ctl_row_json(&rows[i]));
        ctl_json_print(c, doc);
        free(rows);
        return 0;
    }
    t = ctl_table_new(6, hdr);
    for (size_t i = 0; i < n; i++) {
        const struct ctl_row *r = &rows[i];
        char key[260], id[24], step[24], pool[24], type[24], state[APP_ERR_MAX + 16];
        const char *tn = type_name(r->row.increasing_type);
        const char *cells[6] = {ctl_printable(r->key, key, sizeof(key)), ctl_i64(r->row.id, id),
                                tn ? tn : ctl_i64(r->row.increasing_type, type)};

        if (r->valid) {
            cells[3] = ctl_u64(r->cfg.step, step);
            cells[4] = ctl_u64(r->cfg.max_pool, pool);
        } else {
            cells[3] = ctl_i64(r->row.step, step);
            cells[4] = ctl_i64(r->row.max_pool_size, pool);
        }
        if (r->row.deleted_at != 0)
            snprintf(state, sizeof(state), "deleted");
        else if (r->valid)
            snprintf(state, sizeof(state), "served");
        else
            snprintf(state, sizeof(state), "INVALID: %s", ctl_row_reason(r));
        cells[5] = state;
        ctl_table_add(t, cells);
    }
    ctl_table_print(t, stdout);
    if (n == 0)
        printf("(no applications: add one with 'idpoolctl apps add KEY')\n");
    ctl_table_free(t);
    free(rows);
    return 0;
}

static void show_pool_text(const struct ctl_row *r, const struct ctl_pool *p, const char *pool_key,
                           const char *meta_key)
{
    const char *next = meta_get(p, "next"), *hi = meta_get(p, "hi");
    const char *nlo = meta_get(p, "nlo"), *nhi = meta_get(p, "nhi");
    const char *pt = meta_get(p, "per_take"), *ps = meta_get(p, "per_second");
    static const char *const counters[] = {"pushed",        "taken",        "underflows",
                                           "refused_limit", "refused_rate", NULL};

    printf("\nredis:\n");
    printf("  %-20s %s\n", "pool key", pool_key);
    if (r->valid && r->cfg.max_pool > 0)
        printf("  %-20s %lld (%.1f%% of %" PRIu64 ", low water %" PRIu64 ")\n", "pool length",
               p->length, 100.0 * (double)p->length / (double)r->cfg.max_pool, r->cfg.max_pool,
               r->cfg.low_water);
    else
        printf("  %-20s %lld\n", "pool length", p->length);
    printf("  %-20s %s%s\n", "meta key", meta_key,
           cJSON_GetArraySize(p->meta) == 0 ? " (absent: never refilled, or reset)" : "");
    if (next && hi)
        printf("  %-20s next %s, hi %s (IDs below hi are reserved in MySQL)\n", "lease", next, hi);
    else
        printf("  %-20s none\n", "lease");
    if (nlo && nhi)
        printf("  %-20s [%s, %s)\n", "prefetched lease", nlo, nhi);
    if (pt && ps)
        printf("  %-20s max_size_per_times %s, max_size_per_second %s\n", "limits for take", pt,
               ps);
    else
        printf("  %-20s none in meta (idpoold has not synced this application: idpool_take "
               "answers IDPOOL_NOAPP)\n",
               "limits for take");
    for (int i = 0; counters[i]; i++) {
        const char *v = meta_get(p, counters[i]);
        if (v)
            printf("  %-20s %s\n", counters[i], v);
    }
    if (cJSON_GetArraySize(p->alerts) == 0) {
        printf("  %-20s none\n", "alerts firing");
    } else {
        const cJSON *a;
        printf("  %-20s", "alerts firing");
        cJSON_ArrayForEach(a, p->alerts)
        {
            printf(" %s", a->valuestring);
        }
        printf("\n");
    }
}

static int cmd_show(struct ctl *c, int argc, char **argv)
{
    char *pos[1], pool_key[256], meta_key[256], buf[24], rbuf[24], shown[1100];
    struct ctl_pool p = {0};
    struct ctl_row r;
    const char *keys[1];
    int npos, rc, rrc;

    rc = ctl_opts_parse(c, argc, argv, NULL, NULL, NULL, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ctl_usage(c, "missing KEY");
    if ((rc = ctl_setup(c)) != 0 || (rc = ctl_db_open(c)) != 0)
        return rc;
    if ((rc = ctl_row_load(c, pos[0], 0, &r)) != 0)
        return rc;
    ctl_redis_key(c, r.key, "pool", pool_key, sizeof(pool_key));
    ctl_redis_key(c, r.key, "meta", meta_key, sizeof(meta_key));
    keys[0] = r.key;
    rrc = ctl_redis_open(c);
    if (rrc == 0)
        rrc = ctl_pools_read(c, keys, 1, &p);
    if (c->json) {
        cJSON *doc = ctl_row_json(&r), *rd;

        if (rrc == 0) {
            rd = ctl_jcheck(cJSON_AddObjectToObject(doc, "redis"));
            ctl_jcheck(cJSON_AddStringToObject(rd, "pool_key", pool_key));
            ctl_jcheck(cJSON_AddStringToObject(rd, "meta_key", meta_key));
            ctl_json_i64(rd, "pool_length", p.length);
            if (r.valid && r.cfg.max_pool > 0)
                ctl_jcheck(cJSON_AddNumberToObject(
                    rd, "fill_pct", 100.0 * (double)p.length / (double)r.cfg.max_pool));
            else
                ctl_jcheck(cJSON_AddNullToObject(rd, "fill_pct"));
            cJSON_AddItemToObject(rd, "meta", p.meta);
            cJSON_AddItemToObject(rd, "alerts", p.alerts);
            p.meta = p.alerts = NULL;
        } else {
            rd = ctl_jcheck(cJSON_AddObjectToObject(doc, "redis"));
            ctl_jcheck(cJSON_AddStringToObject(rd, "error", c->errmsg));
        }
        ctl_json_print(c, doc);
        ctl_pool_free(&p);
        return rrc;
    }

    printf("application:  %s (id %" PRId64 ")\n", ctl_printable(r.key, shown, sizeof(shown)),
           r.row.id);
    if (r.row.deleted_at != 0)
        printf("state:        deleted (deleted_at %" PRId64 "): not served\n", r.row.deleted_at);
    else
        printf("state:        %s\n", r.valid ? "served" : "INVALID: not served");
    printf("validation:   %s\n", r.valid ? "ok" : r.error);
    if (r.valid && r.cfg.space_warning)
        printf("warning:      the ID space is nearly exhausted (offset above 90%% of 2^63)\n");
    printf("\n  %-20s %-24s %s\n", "COLUMN", "VALUE", "IN FORCE");
    for (size_t i = 0; i < APP_NCOLUMNS; i++) {
        const struct app_column *f = shown_field(i);
        const char *res = r.valid ? resolved_text(&r, f, rbuf) : "";

        /* id and entity_key head the output. */
        if (f->type == APP_T_ID || f->type == APP_T_KEY)
            continue;
        if (f->type == APP_T_NAME) {
            printf("  %-20s %s\n", f->name, ctl_printable(r.name, shown, sizeof(shown)));
            continue;
        }
        if (f == &app_columns[APP_COL_interval] && r.valid)
            printf("  %-20s %-24s %s ms\n", f->name, column_text(&r, f, buf), res);
        else if (f == &app_columns[APP_COL_min_size_percent] && r.valid)
            printf("  %-20s %-24s %s (low water %" PRIu64 ")\n", f->name, column_text(&r, f, buf),
                   res, r.cfg.low_water);
        else if (res[0])
            printf("  %-20s %-24s %s\n", f->name, column_text(&r, f, buf), res);
        else
            printf("  %-20s %s\n", f->name, column_text(&r, f, buf));
    }
    if (rrc == 0)
        show_pool_text(&r, &p, pool_key, meta_key);
    ctl_pool_free(&p);
    return rrc;
}

/*
 * The result of `select` followed by the quoted key, or NULL: the error is
 * reported, unless it is `tolerated` (then *hit is set, nothing said).
 */
static MYSQL_RES *key_select(struct ctl *c, const char *select, const char *key, unsigned tolerated,
                             int *hit)
{
    char *q = ctl_db_quote(c, key), *sql = ctl_strf("%s%s", select, q);
    MYSQL_RES *res = NULL;
    int rc = mysql_query(c->db, sql);

    free(q);
    free(sql);
    if (rc != 0 && tolerated && mysql_errno(c->db) == tolerated)
        *hit = 1;
    else if (rc != 0 || !(res = mysql_store_result(c->db)))
        ctl_fail(c, CTL_ERROR, "MySQL at %s:%d/%s: error %u: %s", c->cfg.mysql.host,
                 c->cfg.mysql.port, c->cfg.mysql.db, mysql_errno(c->db), mysql_error(c->db));
    return res;
}

/* Is there a row whose key equals `key` the way the unique index compares? */
static int key_conflict(struct ctl *c, const char *key, int64_t *id, char *existing, size_t len)
{
    MYSQL_RES *res =
        key_select(c, "SELECT id, entity_key FROM application WHERE entity_key = ", key, 0, NULL);
    MYSQL_ROW row;
    int rc;

    if (!res)
        return -1;
    row = mysql_fetch_row(res);
    rc = row != NULL;
    if (row) {
        *id = row[0] ? strtoll(row[0], NULL, 10) : 0;
        snprintf(existing, len, "%s", row[1] ? row[1] : "");
    }
    mysql_free_result(res);
    return rc;
}

/*
 * The highest hi ever leased under `key`, by any row (rows deleted since
 * included: application_lease keeps the key), into *hi: 0, or CTL_ERROR. A
 * schema older than application_lease.entity_key cannot tell: *hi is 0
 * and a warning says why.
 */
static int key_history(struct ctl *c, const char *key, int64_t *hi)
{
    int old_schema = 0;
    MYSQL_RES *res =
        key_select(c, "SELECT COALESCE(MAX(hi), 0) FROM application_lease WHERE entity_key = ", key,
                   ER_BAD_FIELD_ERROR, &old_schema);
    MYSQL_ROW row;

    *hi = 0;
    if (old_schema) {
        fprintf(stderr,
                "%s: %s: warning: application_lease has no column entity_key (the schema is "
                "older than idpoolctl): the leases of a deleted row with this key cannot be "
                "found; load sql/schema.sql again\n",
                c->prog, c->cmd);
        return 0;
    }
    if (!res)
        return CTL_ERROR;
    row = mysql_fetch_row(res);
    if (row && row[0])
        *hi = strtoll(row[0], NULL, 10);
    mysql_free_result(res);
    return 0;
}

/*
 * The INSERT of `apps add`: the key, every column that has an option (its
 * value given or its default), and current_offset at the key's lease
 * history. Heap.
 */
static char *insert_sql(struct ctl *c, const struct apps_args *a, const char *key, int64_t history)
{
    char *cols = NULL, *vals = NULL, *q, *sql, buf[24];
    size_t ncols = 0, nvals = 0;
    FILE *fc = open_memstream(&cols, &ncols), *fv = open_memstream(&vals, &nvals);

    if (!fc || !fv)
        ctl_oom();
    q = ctl_db_quote(c, key);
    fprintf(fc, "%s", app_columns[APP_COL_entity_key].sql);
    fprintf(fv, "%s", q);
    free(q);
    for (size_t i = 0; i < APP_NCOLUMNS; i++) {
        const struct app_column *f = &app_columns[i];

        if (!f->opt)
            continue;
        fprintf(fc, ", %s", f->sql);
        if (f->type == APP_T_NAME) {
            q = ctl_db_quote(c, a->name ? a->name : "");
            fprintf(fv, ", %s", q);
            free(q);
        } else {
            fprintf(fv, ", %s", ctl_i64(row_get(&a->row, f), buf));
        }
    }
    fprintf(fc, ", %s", app_columns[APP_COL_current_offset].sql);
    fprintf(fv, ", %s", ctl_i64(history, buf));
    if (fclose(fc) != 0 || fclose(fv) != 0)
        ctl_oom();
    sql = ctl_strf("INSERT INTO application (%s) VALUES (%s)", cols, vals);
    free(cols);
    free(vals);
    return sql;
}

static int cmd_add(struct ctl *c, int argc, char **argv)
{
    struct apps_args a;
    struct ctl_row r;
    struct app_cfg cfg;
    char err[APP_ERR_MAX], *pos[1], *sql, existing[300], shown[300], buf[24];
    int64_t id, history;
    int npos, rc;

    memset(&a, 0, sizeof(a));
    /* The defaults of the table (sql/schema.sql). */
    for (size_t i = 0; i < APP_ROW_NCOLUMNS; i++)
        if (app_columns[i].type != APP_T_KEY && app_columns[i].type != APP_T_NAME)
            *row_int(&a.row, &app_columns[i]) = app_columns[i].def;
    rc = ctl_opts_parse(c, argc, argv, add_opts(), on_add_opt, &a, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ctl_usage(c, "missing KEY");
    /* One byte more than allowed, so that app_validate() reports an overlong key. */
    snprintf(a.row.entity_key, sizeof(a.row.entity_key), "%s", pos[0]);
    snprintf(a.row.entity_name, sizeof(a.row.entity_name), "%s", a.name ? a.name : "");
    if ((rc = ctl_setup(c)) != 0)
        return rc;
    /* The daemon's rules, before anything is written. */
    if (app_validate(&a.row, (uint64_t)c->cfg.tick_ms, &cfg, err, sizeof(err)) != 0)
        return ctl_fail(c, CTL_ERROR, "%s", err);
    if ((rc = ctl_db_open(c)) != 0)
        return rc;
    rc = key_conflict(c, pos[0], &id, existing, sizeof(existing));
    if (rc < 0)
        return CTL_ERROR;
    if (rc > 0) {
        if (strcmp(existing, pos[0]) == 0)
            return ctl_fail(c, CTL_ERROR, "application '%s' already exists (id %" PRId64 ")",
                            pos[0], id);
        return ctl_fail(c, CTL_ERROR,
                        "application '%s': entity_key clashes with the existing application '%s' "
                        "(id %" PRId64 "): keys are unique regardless of case",
                        pos[0], ctl_printable(existing, shown, sizeof(shown)), id);
    }
    /*
     * The key's lease history outlives its rows: a row added again under a
     * key that had one starts above it (its current_offset says so; idpoold
     * would keep above it anyway).
     */
    if ((rc = key_history(c, pos[0], &history)) != 0)
        return rc;
    sql = insert_sql(c, &a, pos[0], history);
    if (mysql_query(c->db, sql) != 0) {
        unsigned e = mysql_errno(c->db);
        free(sql);
        if (e == ER_DUP_ENTRY)
            return ctl_fail(c, CTL_ERROR, "application '%s' already exists", pos[0]);
        return ctl_fail(c, CTL_ERROR, "MySQL at %s:%d/%s: adding '%s': error %u: %s",
                        c->cfg.mysql.host, c->cfg.mysql.port, c->cfg.mysql.db, pos[0], e,
                        mysql_error(c->db));
    }
    free(sql);
    if ((rc = ctl_row_load(c, pos[0], 0, &r)) != 0)
        return rc;
    if (c->json) {
        cJSON *doc = result_json("added", &r);
        /* The key's lease history (rows deleted earlier): a string, as offsets are; null if none.
         */
        if (history > 0)
            ctl_jcheck(cJSON_AddStringToObject(doc, "history_hi", ctl_i64(history, buf)));
        else
            ctl_jcheck(cJSON_AddNullToObject(doc, "history_hi"));
        ctl_json_print(c, doc);
        return 0;
    }
    printf("added application '%s' (id %" PRId64 "): %s, step %" PRIu64 ", max_pool_size %" PRIu64
           ", low water %" PRIu64 "\n",
           r.key, r.row.id, type_name(r.cfg.type), r.cfg.step, r.cfg.max_pool, r.cfg.low_water);
    if (history > a.row.start_offset)
        printf("'%s' starts above the key's lease history, at %" PRId64
               ": rows deleted earlier leased its IDs below that (current_offset %" PRId64 ")\n",
               r.key, history, history);
    else if (history > 0)
        printf("'%s' had leases below %" PRId64
               " (rows deleted earlier), all under its start_offset %" PRId64 "\n",
               r.key, history, a.row.start_offset);
    reload_hint(c);
    return 0;
}

/* One `field=value` of `apps set`, parsed. */
struct assign {
    const struct app_column *f;
    int64_t v;        /* numeric columns */
    const char *text; /* entity_name */
};

static int parse_assign(struct ctl *c, const char *arg, int force, struct assign *out)
{
    const char *eq = strchr(arg, '=');
    const struct app_column *f;
    size_t n;

    if (!eq || eq == arg)
        return ctl_usage(c, "expected field=value, got '%.64s'", arg);
    n = (size_t)(eq - arg);
    f = field_find(arg, n);
    if (!f)
        return ctl_usage(c, "unknown field '%.*s' (settable: %s)", (int)(n < 64 ? n : 64), arg,
                         settable());
    if (f->set == APP_KEEP)
        return ctl_usage(c, "field '%s' cannot be set: %s", f->name, f->why);
    if (f->set == APP_FORCE && !force)
        return ctl_usage(c, "field '%s' refused: %s", f->name, force_why);
    out->f = f;
    out->text = eq + 1;
    if (f->type == APP_T_NAME)
        return check_name(c, f->name, eq + 1);
    if (f->type == APP_T_TYPE)
        return opt_type(c, f->name, eq + 1, &out->v);
    return opt_int(c, f->name, eq + 1, &out->v);
}

static int cmd_set(struct ctl *c, int argc, char **argv)
{
    struct apps_args a;
    struct assign as[MAX_ASSIGN];
    struct ctl_row r, nr;
    struct app_cfg cfg;
    char *pos[MAX_ASSIGN + 1], err[APP_ERR_MAX], buf[24], obuf[24], *set = NULL, *sql;
    cJSON *changes = NULL;
    size_t setlen = 0;
    FILE *sf;
    int npos, rc, nas, nchanged = 0;
    int64_t lowered_from = -1;

    memset(&a, 0, sizeof(a));
    rc = ctl_opts_parse(c, argc, argv, set_opts, on_add_opt, &a, pos, MAX_ASSIGN + 1, &npos);
    if (rc != 0)
        return rc;
    if (npos < 1)
        return ctl_usage(c, "missing KEY");
    if (npos < 2)
        return ctl_usage(c, "nothing to set: give field=value (settable: %s)", settable());
    nas = npos - 1;
    for (int i = 0; i < nas; i++) {
        if ((rc = parse_assign(c, pos[i + 1], a.force, &as[i])) != 0)
            return rc;
        for (int j = 0; j < i; j++)
            if (as[j].f == as[i].f)
                return ctl_usage(c, "field '%s' given twice", as[i].f->name);
    }
    if ((rc = ctl_setup(c)) != 0 || (rc = ctl_db_open(c)) != 0)
        return rc;

    /* Read, check and write in one transaction, the row locked throughout. */
    if ((rc = ctl_db_exec(c, "START TRANSACTION")) != 0)
        return rc;
    if ((rc = ctl_row_load(c, pos[0], 1, &r)) != 0)
        goto rollback;
    nr = r;
    sf = open_memstream(&set, &setlen);
    if (!sf)
        ctl_oom();
    changes = ctl_jcheck(cJSON_CreateArray());
    for (int i = 0; i < nas; i++) {
        const struct app_column *f = as[i].f;
        cJSON *ch;

        if (f->type == APP_T_NAME) {
            char *q;
            if (strcmp(r.name, as[i].text) == 0)
                continue;
            snprintf(nr.row.entity_name, sizeof(nr.row.entity_name), "%s", as[i].text);
            snprintf(nr.name, sizeof(nr.name), "%s", as[i].text);
            q = ctl_db_quote(c, as[i].text);
            fprintf(sf, "%s`%s` = %s", nchanged ? ", " : "", f->name, q);
            free(q);
            ch = ctl_jcheck(cJSON_CreateObject());
            ctl_jcheck(cJSON_AddStringToObject(ch, "field", f->name));
            ctl_jcheck(cJSON_AddStringToObject(ch, "old", r.name));
            ctl_jcheck(cJSON_AddStringToObject(ch, "new", as[i].text));
        } else {
            int64_t old = row_get(&r.row, f);
            if (old == as[i].v)
                continue;
            *row_int(&nr.row, f) = as[i].v;
            if (f->set == APP_FORCE && as[i].v < old)
                lowered_from = old;
            fprintf(sf, "%s`%s` = %s", nchanged ? ", " : "", f->name, ctl_i64(as[i].v, buf));
            ch = ctl_jcheck(cJSON_CreateObject());
            ctl_jcheck(cJSON_AddStringToObject(ch, "field", f->name));
            ctl_jcheck(cJSON_AddStringToObject(ch, "old", ctl_i64(old, obuf)));
            ctl_jcheck(cJSON_AddStringToObject(ch, "new", buf));
        }
        cJSON_AddItemToArray(changes, ch);
        nchanged++;
    }
    if (fclose(sf) != 0)
        ctl_oom();

    /* The daemon's rules on the row as it would be. */
    if (app_validate(&nr.row, (uint64_t)c->cfg.tick_ms, &cfg, err, sizeof(err)) != 0) {
        rc = ctl_fail(c, CTL_ERROR, "%s (nothing changed)", err);
        goto rollback;
    }
    if (nchanged == 0) {
        if ((rc = ctl_db_exec(c, "ROLLBACK")) != 0)
            goto out;
        if (c->json) {
            cJSON *doc = result_json("unchanged", &r);
            cJSON_AddItemToObject(doc, "changes", changes);
            changes = NULL;
            ctl_json_print(c, doc);
        } else {
            printf("application '%s' (id %" PRId64 "): no change (the values are already set)\n",
                   r.key, r.row.id);
        }
        goto out;
    }
    sql = ctl_strf("UPDATE application SET %s WHERE id = %s", set, ctl_i64(r.row.id, buf));
    rc = ctl_db_exec(c, sql);
    free(sql);
    if (rc != 0)
        goto rollback;
    if ((rc = ctl_db_exec(c, "COMMIT")) != 0)
        goto out;
    if ((rc = ctl_row_load(c, pos[0], 0, &nr)) != 0)
        goto out;
    if (lowered_from >= 0)
        fprintf(stderr,
                "%s: %s: warning: current_offset lowered from %" PRId64 " to %" PRId64
                ": idpoold keeps the highest leased value (no ID is reused) and raises an "
                "offset_regression alert\n",
                c->prog, c->cmd, lowered_from, nr.row.current_offset);
    if (c->json) {
        cJSON *doc = result_json("updated", &nr);
        cJSON_AddItemToObject(doc, "changes", changes);
        changes = NULL;
        ctl_json_print(c, doc);
    } else {
        const cJSON *ch;
        printf("updated application '%s' (id %" PRId64 "):\n", nr.key, nr.row.id);
        cJSON_ArrayForEach(ch, changes)
        {
            char o[1100], n[1100];
            printf("  %-20s %s -> %s\n", cJSON_GetObjectItemCaseSensitive(ch, "field")->valuestring,
                   ctl_printable(cJSON_GetObjectItemCaseSensitive(ch, "old")->valuestring, o,
                                 sizeof(o)),
                   ctl_printable(cJSON_GetObjectItemCaseSensitive(ch, "new")->valuestring, n,
                                 sizeof(n)));
        }
        reload_hint(c);
    }
    goto out;

rollback:
    if (mysql_query(c->db, "ROLLBACK") != 0) {
        /* The connection is going away; MySQL rolls back on its own. */
    }
out:
    cJSON_Delete(changes);
    free(set);
    return rc;
}

/* disable (on = 0) / enable (on = 1) */
static int set_enabled(struct ctl *c, int argc, char **argv, int on)
{
    char *pos[1], *sql, buf[24];
    struct ctl_row r;
    int npos, rc;

    rc = ctl_opts_parse(c, argc, argv, NULL, NULL, NULL, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ctl_usage(c, "missing KEY");
    if ((rc = ctl_setup(c)) != 0 || (rc = ctl_db_open(c)) != 0)
        return rc;
    if ((rc = ctl_row_load(c, pos[0], 0, &r)) != 0)
        return rc;
    if ((r.row.deleted_at == 0) == on) {
        if (c->json)
            ctl_json_print(c, result_json("unchanged", &r));
        else
            printf("application '%s' (id %" PRId64 ") is already %s\n", r.key, r.row.id,
                   on ? "enabled" : "disabled");
        return 0;
    }
    if (on && !r.valid)
        return ctl_fail(c, CTL_ERROR,
                        "not enabling it: %s; idpoold would not serve it (fix it first with "
                        "'idpoolctl apps set %s field=value ...')",
                        r.error, r.key);
    /* The state is re-checked in the WHERE clause: a concurrent edit wins cleanly. */
    sql = ctl_strf(on ? "UPDATE application SET deleted_at = 0 WHERE id = %s AND deleted_at <> 0"
                      : "UPDATE application SET deleted_at = UNIX_TIMESTAMP() WHERE id = %s AND "
                        "deleted_at = 0",
                   ctl_i64(r.row.id, buf));
    rc = ctl_db_exec(c, sql);
    free(sql);
    if (rc != 0)
        return rc;
    if ((rc = ctl_row_load(c, pos[0], 0, &r)) != 0)
        return rc;
    if (c->json) {
        ctl_json_print(c, result_json(on ? "enabled" : "disabled", &r));
        return 0;
    }
    printf("%s application '%s' (id %" PRId64 ")%s\n", on ? "enabled" : "disabled", r.key, r.row.id,
           on ? "" : ": idpoold stops refilling it; IDs already in its pool stay there");
    reload_hint(c);
    return 0;
}

static int cmd_disable(struct ctl *c, int argc, char **argv)
{
    return set_enabled(c, argc, argv, 0);
}

static int cmd_enable(struct ctl *c, int argc, char **argv)
{
    return set_enabled(c, argc, argv, 1);
}

/* ----------------------------------------------------------------- help */

const char ctl_apps_help[] =
    "Usage: %s [global options] apps COMMAND [ARGS]\n"
    "\n"
    "Manage applications: the rows of the MySQL table `application`. Rows are judged by\n"
    "the same rules as idpoold's (a row that breaks one is not served); writes are\n"
    "validated before they are made. idpoold applies changes within its reload interval\n"
    "(reload-ms) or at once on SIGHUP.\n";

static const char help_list[] =
    "Usage: %s [global options] apps list [--json]\n"
    "\n"
    "List every application (MySQL), sorted by key: KEY, ID, TYPE, STEP and MAX_POOL (the\n"
    "values in force, defaults resolved; the raw columns for an invalid row) and STATE:\n"
    "served, deleted (soft-deleted), or INVALID with the reason idpoold gives.\n";

static const char help_show[] =
    "Usage: %s [global options] apps show KEY [--json]\n"
    "\n"
    "Show one application: every column of its row, the value in force of each (0 in a\n"
    "sizing column means the default), the validation result, and what Redis holds: pool\n"
    "length and fill, the lease in meta (next, hi, prefetched range), the limits idpool_take\n"
    "enforces, counters and firing alerts. Exit 1 if KEY does not exist or Redis cannot be\n"
    "read (the MySQL part is still shown).\n";

static const char help_add[] =
    "Usage: %s [global options] apps add KEY [options]\n"
    "\n"
    "Add an application. The would-be row is checked with idpoold's own rules before it\n"
    "is inserted; an invalid row or an existing key is an error (exit 1) and nothing is\n"
    "written. KEY (entity_key) is 1..64 characters of A-Z a-z 0-9 _ . -\n"
    "\n"
    "Options (the column in brackets; 0 in a sizing column means its default):\n"
    "  --name TEXT           description [entity_name]; default empty\n"
    "  --type TYPE           monotonic (1) or trend (2) [increasing_type]; default monotonic\n"
    "  --start N             first ID ever handed out [start_offset]; default 1 (IDs are\n"
    "                        never 0: 0 starts at 1, or at delta when remainder is 0)\n"
    "  --step N              IDs per refill batch, 1..1000000 [step]; default 1000\n"
    "  --max-pool N          pool capacity [max_pool_size]; 0 = 60 x max_size_per_second\n"
    "  --min-percent N       refill below N%% of the pool, 1..99 [min_size_percent]; 0 = 80\n"
    "  --per-take N          most IDs one take may ask for [max_size_per_times]; 0 = 1000\n"
    "  --per-second N        most IDs granted per second [max_size_per_second]; 0 = 5000\n"
    "  --interval MS         check interval [interval]; 0 = idpoold's tick\n"
    "  --delta N             every ID %% delta == remainder [delta]; default 1\n"
    "  --remainder N         0 <= remainder < delta [remainder]; default 0\n"
    "  --increment-max N     monotonic: gap between IDs random in 1..N x delta\n"
    "                        [increment_max]; default 1\n"
    "  --json                print the new row as JSON\n"
    "\n"
    "Rules: max_pool_size >= step; a refill of step must fit above the low-water mark\n"
    "(max_pool_size x (100 - min_size_percent) / 100 >= step); max_size_per_times <=\n"
    "max_pool_size; no ID may exceed 2^63-1.\n"
    "\n"
    "A key's lease history outlives its rows: when a row with KEY was deleted, the new\n"
    "row starts above every ID ever leased under KEY (its current_offset is set to that,\n"
    "and the output says so).\n"
    "\n"
    "Example: %s apps add order --type trend --step 500 --per-second 2000\n";

static const char help_set[] =
    "Usage: %s [global options] apps set KEY field=value... [--force] [--json]\n"
    "\n"
    "Change columns of an application. In one transaction the row is read and locked, the\n"
    "edits applied, the result checked with idpoold's own rules (an invalid result is an\n"
    "error, exit 1, and nothing is written), and only the changed columns are updated.\n"
    "\n"
    "Fields (the column names of `application`):\n"
    "  entity_name, increasing_type (1, 2, monotonic or trend), start_offset, step,\n"
    "  max_size_per_times, max_size_per_second, min_size_percent, interval, max_pool_size,\n"
    "  delta, remainder, increment_max\n"
    "\n"
    "Refused: id, entity_key, version, create_time, update_time; deleted_at (use\n"
    "'apps disable' / 'apps enable'); current_offset unless --force is given. Setting\n"
    "current_offset is never needed: idpoold advances it with every lease (to start IDs\n"
    "higher, raise start_offset), and lowering it cannot make idpoold reuse an ID.\n"
    "\n"
    "Example: %s apps set user step=2000 max_size_per_second=20000\n";

static const char help_disable[] =
    "Usage: %s [global options] apps disable KEY [--json]\n"
    "\n"
    "Soft-delete an application: deleted_at = UNIX_TIMESTAMP(). idpoold stops refilling\n"
    "it; the row, its offsets and its pool are kept. Undo with 'apps enable KEY'.\n";

static const char help_enable[] =
    "Usage: %s [global options] apps enable KEY [--json]\n"
    "\n"
    "Undo 'apps disable': deleted_at = 0, so idpoold serves the application again. An\n"
    "invalid row is not enabled (exit 1): fix it with 'apps set' first.\n";

static const char help_grant[] =
    "Usage: %s [global options] apps grant KEY [--allow-any-db] [--json]\n"
    "\n"
    "Give the application KEY a Redis ACL user for clients that take IDs straight from\n"
    "Redis: user '<key-prefix>:KEY' may run LPOP and LLEN on '<key-prefix>:{KEY}:pool'\n"
    "and nothing else (no other key, no push, no delete, no script or function, no\n"
    "pub/sub). The application must exist (exit 1 otherwise).\n"
    "\n"
    "A new random password is printed once, with the user name and an example\n"
    "redis-cli command; only its SHA-256 is stored, in the MySQL table `redis_user`.\n"
    "Granting again replaces the password: the previous one stops working, and the\n"
    "connections that logged in with it are closed (CLIENT KILL USER). The user is\n"
    "created in Redis at once (ACL SETUSER) and idpoold re-creates it whenever it\n"
    "(re)connects, so a restarted Redis gets it back. If Redis cannot be reached or\n"
    "refuses (e.g. NOPERM), the grant is still stored: a warning names the Redis error\n"
    "and the exit status is 0; idpoold applies it (and closes the old password's\n"
    "connections) within its reload interval. --json: {\"user\", \"password\", \"key\",\n"
    "\"applied\", \"rotated\", \"closed_connections\"}.\n"
    "\n"
    "Redis database: with a database other than 0 the grant is refused (exit 1) unless\n"
    "--allow-any-db is given. The user then needs SELECT to reach the database, and\n"
    "Redis ACLs limit neither SELECT nor key patterns to one database: the user could\n"
    "LPOP '<key-prefix>:{KEY}:pool' in every database of that Redis. Give the flag only\n"
    "when no other database holds a pool of that name (e.g. another deployment).\n"
    "\n"
    "Example: %s apps grant user\n";

static const char help_revoke[] =
    "Usage: %s [global options] apps revoke KEY [--json]\n"
    "\n"
    "Revoke the Redis user of application KEY: revoked_at = now in `redis_user`, then\n"
    "ACL DELUSER (its connections are closed). If Redis cannot be reached, a warning\n"
    "says so and idpoold deletes the user when it (re)connects. Exit 1 if KEY has no\n"
    "active Redis user.\n";

const struct ctl_cmd ctl_apps_cmds[] = {
    {"list", "", "every application: key, id, type, step, max_pool_size, state", cmd_list,
     help_list, NULL},
    {"show", "KEY", "all columns, the values in force, validation, Redis state", cmd_show,
     help_show, NULL},
    {"add", "KEY [options]", "add an application, validated first (see 'apps add --help')",
     cmd_add, help_add, NULL},
    {"set", "KEY field=value...", "change columns, validated first (see 'apps set --help')",
     cmd_set, help_set, NULL},
    {"disable", "KEY", "soft-delete: deleted_at = now; idpoold stops serving it", cmd_disable,
     help_disable, NULL},
    {"enable", "KEY", "undo disable: deleted_at = 0 (only a valid row)", cmd_enable, help_enable,
     NULL},
    {"grant", "KEY",
     "a Redis user that may only LPOP and LLEN the application's pool\n"
     "(prints its password once; again: a new password)",
     ctl_redis_user_grant, help_grant, NULL},
    {"revoke", "KEY", "delete that Redis user", ctl_redis_user_revoke, help_revoke, NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
