/*
 * ctl_apps_write — the commands of `idpoolctl apps` that write rows:
 *   add      validates the would-be row, then INSERTs it, above the key's
 *            lease history when a row with the key was deleted before
 *            (and above the MAX of an existing table's column with
 *            --start-above);
 *   set      in one transaction: reads the row FOR UPDATE, applies the
 *            edits, validates the result (max_id never below a leased
 *            ID), UPDATEs only the changed columns;
 *   disable  deleted_at = UNIX_TIMESTAMP(); enable: deleted_at = 0 (only a
 *            valid row: an invalid one would not be served anyway).
 * What may be set, and by which option of `apps add`, is the column list's
 * (app.h's APP_COLUMNS). Strings reach SQL only through
 * mysql_real_escape_string(); numbers are formatted from parsed integers.
 */
#include "ctl_apps_write.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "app.h"
#include "ctl_rows.h"
#include "url.h"

#define MAX_ASSIGN 64

static const char force_why[] =
    "current_offset is the durable high-water mark that idpoold itself advances with every "
    "lease; setting it is never needed (to make IDs start higher, set start_offset; lowering it "
    "cannot make idpoold reuse IDs, it keeps the highest lease from application_lease and raises "
    "an offset_regression alert). If you really must, add --force";

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

/* id_space: empty (the application's own space) or named as a key is. */
static int check_space(struct ctl *c, const char *name, const char *value)
{
    if (value[0] != '\0' && !app_key_valid(value))
        return ctl_usage(c,
                         "%s: must be empty or match [A-Za-z0-9_.-]{1,64} (not . or .., no "
                         "leading -), got '%.64s'",
                         name, value);
    return 0;
}

/* Arguments common to the subcommands. */
struct apps_args {
    struct app_row row;   /* add: the new row */
    int force;            /* set: --force */
    const char *name;     /* add: --name */
    const char *space;    /* add, set: --id-space */
    char optname[64];     /* the option being parsed, for messages */
    int js_safe;          /* add: --js-safe */
    int given_start;      /* add: --start given */
    int given_max_id;     /* add: --max-id given */
    const char *above;    /* add: --start-above DB.TABLE.COLUMN */
    const char *from_url; /* add: --from-url mysql://... */
    int above_null;       /* --start-above: the column had no row (MAX is NULL) */
    char above_max[24];   /* --start-above: MAX as read (decimal) */
};

static int opt_int(struct ctl *c, const char *name, const char *value, int64_t *out)
{
    if (ctl_parse_i64(value, out) != 0)
        return ctl_usage(c, "%s: must be a decimal integer (64-bit), got '%.64s'", name, value);
    return 0;
}

/*
 * The row r as written would pass pool-memory-mb: a warning on stderr
 * (idpoold logs it and raises pool_memory), and in doc's "warnings" when
 * doc is not NULL (--json). Written all the same: the operator may mean it.
 */
static void memory_warning(struct ctl *c, const struct ctl_row *r, cJSON *doc)
{
    char why[400];

    if (!r->valid || !app_memory_over(&r->cfg, c->cfg.pool_memory_mb, why, sizeof(why)))
        return;
    fprintf(stderr, "%s: %s: warning: application '%s': %s\n", c->prog, c->cmd, r->key, why);
    if (doc) {
        cJSON *w = cJSON_GetObjectItemCaseSensitive(doc, "warnings");
        if (!w)
            w = ctl_jcheck(cJSON_AddArrayToObject(doc, "warnings"));
        cJSON_AddItemToArray(w, ctl_jcheck(cJSON_CreateString(why)));
    }
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
    O_JS_SAFE,
    O_START_ABOVE,
    O_FROM_URL,
    O_COLUMN = 100, /* O_COLUMN + i: the option of `apps add` that sets app_columns[i] */
};

/* The options of `apps add` that set no column of their own. */
static const struct ctl_opt add_extra[] = {
    {"js-safe", 0, O_JS_SAFE},
    {"start-above", 1, O_START_ABOVE},
    {"from-url", 1, O_FROM_URL},
};
#define N_ADD_EXTRA (sizeof(add_extra) / sizeof(add_extra[0]))

/* The options of `apps add`: one per column that has one (APP_COLUMNS' opt), then add_extra. */
static const struct ctl_opt *add_opts(void)
{
    static struct ctl_opt opts[APP_NCOLUMNS + N_ADD_EXTRA + 1];
    static size_t n;

    if (n == 0) {
        for (size_t i = 0; i < APP_NCOLUMNS; i++)
            if (app_columns[i].opt)
                opts[n++] = (struct ctl_opt){app_columns[i].opt, 1, O_COLUMN + (int)i};
        for (size_t i = 0; i < N_ADD_EXTRA; i++)
            opts[n++] = add_extra[i];
    }
    return opts;
}

/* `apps set`: --force, and --id-space NAME (the same as id_space=NAME). */
static const struct ctl_opt set_opts[] = {
    {"force", 0, O_FORCE},
    {"id-space", 1, O_COLUMN + APP_COL_id_space},
    {NULL, 0, 0},
};

static int on_add_opt(struct ctl *c, int id, const char *name, const char *value, void *arg)
{
    struct apps_args *a = arg;
    const struct app_column *f;

    snprintf(a->optname, sizeof(a->optname), "--%s", name);
    switch (id) {
    case O_FORCE:
        a->force = 1;
        return 0;
    case O_JS_SAFE:
        a->js_safe = 1;
        return 0;
    case O_START_ABOVE:
        a->above = value;
        return 0;
    case O_FROM_URL:
        a->from_url = value;
        return 0;
    default:
        break;
    }
    f = &app_columns[id - O_COLUMN];
    if (f == &app_columns[APP_COL_start_offset])
        a->given_start = 1;
    if (f == &app_columns[APP_COL_max_id])
        a->given_max_id = 1;
    if (f->type == APP_T_NAME) {
        a->name = value;
        return check_name(c, a->optname, value);
    }
    if (f->type == APP_T_SPACE) {
        a->space = value;
        snprintf(a->row.id_space, sizeof(a->row.id_space), "%s", value);
        return check_space(c, a->optname, value);
    }
    if (f->type == APP_T_TYPE)
        return opt_type(c, a->optname, value, app_row_num(&a->row, f));
    return opt_int(c, a->optname, value, app_row_num(&a->row, f));
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

        /* no id_space: the schema's default (a schema older than the column has none) */
        if (!f->opt || (f->type == APP_T_SPACE && !a->row.id_space[0]))
            continue;
        fprintf(fc, ", %s", f->sql);
        if (f->type == APP_T_NAME || f->type == APP_T_SPACE) {
            q = ctl_db_quote(c, f->type == APP_T_NAME ? (a->name ? a->name : "") : a->row.id_space);
            fprintf(fv, ", %s", q);
            free(q);
        } else {
            fprintf(fv, ", %s", ctl_i64(app_row_get(&a->row, f), buf));
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

/* One identifier of --start-above: 1..64 of [A-Za-z0-9_$] (quoted with backticks all the same). */
static int ident_ok(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '$'))
            return 0;
    return 1;
}

/* An integer column type (MAX of it is one); DECIMAL, FLOAT, text and dates are not. */
static int int_field(enum enum_field_types t)
{
    return t == MYSQL_TYPE_TINY || t == MYSQL_TYPE_SHORT || t == MYSQL_TYPE_INT24 ||
           t == MYSQL_TYPE_LONG || t == MYSQL_TYPE_LONGLONG;
}

/*
 * MAX(`COLUMN`) of `DB`.`TABLE` (a->above), read through --from-url or the
 * configured MySQL, into *out (-1 when the table has no row, or no row at
 * or above 0): 0, or an exit code (reported). Refuses a spec that is not
 * three identifiers, a column that is not an integer and a MAX above 2^63-1.
 */
static int read_max(struct ctl *c, struct apps_args *a, int64_t *out)
{
    const char *p = a->above, *d1 = strchr(p, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    char *sql = NULL, err[256];
    struct mysql_url u;
    MYSQL *m = c->db, *own = NULL;
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    MYSQL_FIELD *f;
    int rc = CTL_ERROR;

    *out = -1;
    if (!d1 || !d2 || strchr(d2 + 1, '.') || !ident_ok(p, (size_t)(d1 - p)) ||
        !ident_ok(d1 + 1, (size_t)(d2 - d1 - 1)) || !ident_ok(d2 + 1, strlen(d2 + 1)))
        return ctl_usage(c,
                         "--start-above: expected DB.TABLE.COLUMN, each 1..64 characters of "
                         "A-Z a-z 0-9 _ $, got '%.200s'",
                         p);
    if (a->from_url) {
        memset(&u, 0, sizeof(u));
        if (mysql_url_parse(a->from_url, &u, err, sizeof(err)) < 0)
            return ctl_usage(c, "--from-url: %s", err);
        rc = ctl_db_connect(c, &u, &own);
        mysql_url_free(&u);
        if (rc != 0)
            return rc;
        m = own;
        rc = CTL_ERROR;
    }
    sql = ctl_strf("SELECT MAX(`%.*s`) FROM `%.*s`.`%.*s`", (int)strlen(d2 + 1), d2 + 1,
                   (int)(d1 - p), p, (int)(d2 - d1 - 1), d1 + 1);
    if (mysql_query(m, sql) != 0 || !(res = mysql_store_result(m))) {
        ctl_fail(c, CTL_ERROR, "--start-above %s: %s: error %u: %s", p, sql, mysql_errno(m),
                 mysql_error(m));
        goto out;
    }
    f = mysql_fetch_field(res);
    row = mysql_fetch_row(res);
    if (!f || !row) {
        ctl_fail(c, CTL_ERROR, "--start-above %s: %s returned no row", p, sql);
        goto out;
    }
    if (!int_field(f->type)) {
        ctl_fail(c, CTL_ERROR,
                 "--start-above %s: not an integer column (MySQL field type %d): IDs can only "
                 "start above the MAX of an integer column",
                 p, (int)f->type);
        goto out;
    }
    if (!row[0]) {
        a->above_null = 1;
    } else if (row[0][0] == '-') {
        snprintf(a->above_max, sizeof(a->above_max), "%.20s", row[0]); /* all below 1: no effect */
    } else if (ctl_parse_i64(row[0], out) != 0) {
        ctl_fail(c, CTL_ERROR, "--start-above %s: MAX = %.24s is above 2^63-1: no ID is left", p,
                 row[0]);
        goto out;
    } else {
        snprintf(a->above_max, sizeof(a->above_max), "%.20s", row[0]);
    }
    rc = 0;
out:
    if (res)
        mysql_free_result(res);
    if (own)
        mysql_close(own);
    free(sql);
    return rc;
}

/*
 * --start-above: start_offset becomes the smallest ID of the row's lattice
 * (delta, remainder) above MAX(COLUMN), so that no ID idpool hands out can
 * collide with a row the table already has; a MAX of NULL (no row) leaves
 * the normal start. cfg is the row validated as given (delta resolved).
 */
static int start_above(struct ctl *c, struct apps_args *a, const struct app_cfg *cfg)
{
    int64_t max;
    uint64_t start;
    int rc = read_max(c, a, &max);

    if (rc != 0)
        return rc;
    if (max < 0)
        return 0;
    if (cfg->max_id != 0 && (uint64_t)max >= cfg->max_id)
        return ctl_fail(c, CTL_ERROR,
                        "--start-above %s: MAX = %" PRId64 " is at or above max_id %" PRIu64
                        ": no ID above it is allowed (raise --max-id, or drop --js-safe)",
                        a->above, max, cfg->max_id);
    if (app_lattice_above((uint64_t)max, cfg->delta, cfg->remainder, &start) != 0)
        return ctl_fail(c, CTL_ERROR,
                        "--start-above %s: MAX = %" PRId64 ": no ID of delta %" PRIu64
                        ", remainder %" PRIu64 " is left above it "
                        "below 2^63-1",
                        a->above, max, cfg->delta, cfg->remainder);
    a->row.start_offset = (int64_t)start;
    return 0;
}

/* What --start-above read, for the output: text, or an object in doc. */
static void start_above_report(const struct apps_args *a, const struct ctl_row *r, cJSON *doc)
{
    char buf[24];

    if (!a->above)
        return;
    if (doc) {
        cJSON *o = ctl_jcheck(cJSON_AddObjectToObject(doc, "start_above"));
        ctl_jcheck(cJSON_AddStringToObject(o, "column", a->above));
        if (a->above_null)
            ctl_jcheck(cJSON_AddNullToObject(o, "max"));
        else
            ctl_jcheck(cJSON_AddStringToObject(o, "max", a->above_max));
        ctl_jcheck(cJSON_AddStringToObject(o, "start_offset", ctl_i64(r->row.start_offset, buf)));
        return;
    }
    if (a->above_null)
        printf("%s: MAX = NULL (no rows) -> start_offset %" PRId64 " (the normal start)\n",
               a->above, r->row.start_offset);
    else
        printf("%s: MAX = %s -> start_offset %" PRId64 "\n", a->above, a->above_max,
               r->row.start_offset);
}

int ctl_apps_add(struct ctl *c, int argc, char **argv)
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
        if (app_columns[i].type != APP_T_KEY && app_columns[i].type != APP_T_NAME &&
            app_columns[i].type != APP_T_SPACE)
            *app_row_num(&a.row, &app_columns[i]) = app_columns[i].def;
    rc = ctl_opts_parse(c, argc, argv, add_opts(), on_add_opt, &a, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ctl_usage(c, "missing KEY");
    if (a.js_safe && a.given_max_id)
        return ctl_usage(c, "--js-safe sets max_id to 2^53-1: give it or --max-id, not both");
    if (a.js_safe)
        a.row.max_id = APP_JS_SAFE_MAX;
    if (a.above && a.given_start)
        return ctl_usage(c, "--start-above sets start_offset: give it or --start, not both");
    if (a.from_url && !a.above)
        return ctl_usage(c, "--from-url is where --start-above reads: give --start-above too");
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
    if (a.above) {
        if ((rc = start_above(c, &a, &cfg)) != 0)
            return rc;
        if (app_validate(&a.row, (uint64_t)c->cfg.tick_ms, &cfg, err, sizeof(err)) != 0)
            return ctl_fail(c, CTL_ERROR, "--start-above %s: %s", a.above, err);
    }
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
        start_above_report(&a, &r, doc);
        memory_warning(c, &r, doc);
        ctl_json_print(c, doc);
        return 0;
    }
    memory_warning(c, &r, NULL);
    start_above_report(&a, &r, NULL);
    printf("added application '%s' (id %" PRId64 "): %s, step %" PRIu64 ", max_pool_size %" PRIu64
           ", low water %" PRIu64 "\n",
           r.key, r.row.id, ctl_type_name(r.cfg.type), r.cfg.step, r.cfg.max_pool, r.cfg.low_water);
    if (r.cfg.max_id != 0)
        printf("'%s' never gets an ID above max_id %" PRIu64 "%s\n", r.key, r.cfg.max_id,
               r.cfg.max_id == (uint64_t)APP_JS_SAFE_MAX ? " (2^53-1: exact in JSON and JavaScript)"
                                                         : "");
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
    const char *text; /* entity_name, id_space */
};

static int parse_assign(struct ctl *c, const char *arg, int force, struct assign *out)
{
    const char *eq = strchr(arg, '=');
    const struct app_column *f;
    size_t n;

    if (!eq || eq == arg)
        return ctl_usage(c, "expected field=value, got '%.64s'", arg);
    n = (size_t)(eq - arg);
    f = app_column_find(arg, n);
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
    if (f->type == APP_T_SPACE)
        return check_space(c, f->name, eq + 1);
    if (f->type == APP_T_TYPE)
        return opt_type(c, f->name, eq + 1, &out->v);
    return opt_int(c, f->name, eq + 1, &out->v);
}

/*
 * A ceiling set or lowered (max_id from 0 to N, or from M to N < M) must
 * stay at or above every ID already leased to the row: the highest lease's
 * hi - 1 (its IDs may be in the pool or handed out), or current_offset - 1
 * when that is higher. The row is locked (apps set reads it FOR UPDATE) and
 * idpoold's reservation re-reads max_id in its compare-and-set, so no lease
 * can slip in between. 0, or CTL_ERROR naming the lease.
 */
static int max_id_check(struct ctl *c, const struct ctl_row *r, const struct ctl_row *nr)
{
    int64_t old = r->row.max_id, now = nr->row.max_id, top = r->row.current_offset, hi;
    char *sql, buf[24];
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc;

    if (now == 0 || now == old || (old != 0 && now > old))
        return 0;
    sql = ctl_strf("SELECT lo, hi, instance, created_at FROM application_lease WHERE "
                   "application_id = %s ORDER BY hi DESC LIMIT 1",
                   ctl_i64(r->row.id, buf));
    rc = ctl_db_exec(c, sql);
    free(sql);
    if (rc != 0)
        return rc;
    if (!(res = mysql_store_result(c->db)))
        return ctl_fail(c, CTL_ERROR, "MySQL: reading the leases: %s", mysql_error(c->db));
    row = mysql_fetch_row(res);
    hi = row && row[1] ? (int64_t)strtoll(row[1], NULL, 10) : 0;
    if (hi >= top && hi - 1 > now) {
        rc = ctl_fail(c, CTL_ERROR,
                      "application '%s' (id %" PRId64 "): max_id: cannot be lowered to %" PRId64
                      ": lease [%s, %s) taken by '%s' at %s already holds IDs up to %" PRId64
                      " (they may be in the pool or handed out); max_id must be >= %" PRId64
                      " (nothing changed)",
                      r->key, r->row.id, now, row[0] ? row[0] : "?", row[1], row[2] ? row[2] : "",
                      row[3] ? row[3] : "?", hi - 1, hi - 1);
    } else if (top - 1 > now) {
        rc = ctl_fail(c, CTL_ERROR,
                      "application '%s' (id %" PRId64 "): max_id: cannot be lowered to %" PRId64
                      ": current_offset %" PRId64 " says IDs up to %" PRId64
                      " are already leased; max_id must be >= %" PRId64 " (nothing changed)",
                      r->key, r->row.id, now, top, top - 1, top - 1);
    }
    mysql_free_result(res);
    return rc;
}

int ctl_apps_set(struct ctl *c, int argc, char **argv)
{
    struct apps_args a;
    struct assign as[MAX_ASSIGN + 1];
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
    if (npos < 2 && !a.space)
        return ctl_usage(c, "nothing to set: give field=value (settable: %s)", settable());
    nas = npos - 1;
    if (a.space) /* --id-space NAME: id_space=NAME, already checked */
        as[nas++] = (struct assign){&app_columns[APP_COL_id_space], 0, a.space};
    for (int i = 0; i < nas; i++) {
        if (i < npos - 1 && (rc = parse_assign(c, pos[i + 1], a.force, &as[i])) != 0)
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

        if (f->type == APP_T_NAME || f->type == APP_T_SPACE) {
            const char *was = f->type == APP_T_NAME ? r.name : r.row.id_space;
            char *q;
            if (strcmp(was, as[i].text) == 0)
                continue;
            if (f->type == APP_T_NAME) {
                snprintf(nr.row.entity_name, sizeof(nr.row.entity_name), "%s", as[i].text);
                snprintf(nr.name, sizeof(nr.name), "%s", as[i].text);
            } else {
                snprintf(nr.row.id_space, sizeof(nr.row.id_space), "%s", as[i].text);
            }
            q = ctl_db_quote(c, as[i].text);
            fprintf(sf, "%s`%s` = %s", nchanged ? ", " : "", f->name, q);
            free(q);
            ch = ctl_jcheck(cJSON_CreateObject());
            ctl_jcheck(cJSON_AddStringToObject(ch, "field", f->name));
            ctl_jcheck(cJSON_AddStringToObject(ch, "old", was));
            ctl_jcheck(cJSON_AddStringToObject(ch, "new", as[i].text));
        } else {
            int64_t old = app_row_get(&r.row, f);
            if (old == as[i].v)
                continue;
            *app_row_num(&nr.row, f) = as[i].v;
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
    if ((rc = max_id_check(c, &r, &nr)) != 0)
        goto rollback;
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
        memory_warning(c, &nr, doc);
        ctl_json_print(c, doc);
    } else {
        memory_warning(c, &nr, NULL);
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
    char *sql, buf[24];
    const char *key;
    struct ctl_row r;
    int rc;

    if ((rc = ctl_row_arg(c, argc, argv, &key, &r)) != 0)
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
    if ((rc = ctl_row_load(c, key, 0, &r)) != 0)
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

int ctl_apps_disable(struct ctl *c, int argc, char **argv)
{
    return set_enabled(c, argc, argv, 0);
}

int ctl_apps_enable(struct ctl *c, int argc, char **argv)
{
    return set_enabled(c, argc, argv, 1);
}
