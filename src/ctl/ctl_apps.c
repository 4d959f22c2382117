/*
 * ctl_apps — `idpoolctl apps ...`: its command table and help, and the
 * reads, list and show. Rows are read with the same column list as
 * idpoold's loader and judged with app_validate(), so "valid" means exactly
 * "idpoold serves it". The writes are ctl_apps_write's; grant and revoke
 * (the application's Redis user) are ctl_tokens'.
 */
#include "ctl_apps.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_apps_write.h"
#include "ctl_rows.h"
#include "ctl_tokens.h"
#include "keys.h"

static const char *meta_get(const struct ctl_pool *p, const char *field)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->meta, field);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int cmd_list(struct ctl *c, int argc, char **argv)
{
    static const char *const hdr[] = {"KEY", "ID", "TYPE", "STEP", "MAX_POOL", "MAX_ID", "STATE"};
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
    t = ctl_table_new(7, hdr);
    for (size_t i = 0; i < n; i++) {
        const struct ctl_row *r = &rows[i];
        char key[260], id[24], step[24], pool[24], type[24], maxid[24], state[APP_ERR_MAX + 16];
        const char *tn = ctl_type_name(r->row.increasing_type);
        const char *cells[7] = {ctl_printable(r->key, key, sizeof(key)), ctl_i64(r->row.id, id),
                                tn ? tn : ctl_i64(r->row.increasing_type, type)};

        if (r->valid) {
            cells[3] = ctl_u64(r->cfg.step, step);
            cells[4] = ctl_u64(r->cfg.max_pool, pool);
        } else { /* as stored: 0 there means the default, not a pool of 0 */
            cells[3] = r->row.step ? ctl_i64(r->row.step, step) : "default";
            cells[4] = r->row.max_pool_size ? ctl_i64(r->row.max_pool_size, pool) : "default";
        }
        if (r->row.deleted_at != 0)
            snprintf(state, sizeof(state), "deleted");
        else if (r->valid)
            snprintf(state, sizeof(state), "served");
        else
            snprintf(state, sizeof(state), "INVALID: %s", ctl_row_reason(r));
        /* the ceiling as stored; "-": none (2^63-1) */
        cells[5] = r->row.max_id ? ctl_i64(r->row.max_id, maxid) : "-";
        cells[6] = state;
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
    char pool_key[256], meta_key[256], buf[24], rbuf[24], shown[1100], ceiling[48];
    struct ctl_pool p = {0};
    struct ctl_row r;
    const char *keys[1], *key;
    int rc, rrc;

    if ((rc = ctl_row_arg(c, argc, argv, &key, &r)) != 0)
        return rc;
    keys_app(c->cfg.key_prefix, r.key, KEYS_POOL, pool_key, sizeof(pool_key));
    keys_app(c->cfg.key_prefix, r.key, KEYS_META, meta_key, sizeof(meta_key));
    keys[0] = r.key;
    rrc = ctl_redis_open(c);
    if (rrc == 0)
        rrc = ctl_pools_read(c, keys, 1, &p, 0);
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
        printf("warning:      the ID space is nearly exhausted (offset above 90%% of %s)\n",
               app_ceiling_text(&r.cfg, ceiling, sizeof(ceiling)));
    printf("\n  %-20s %-24s %s\n", "COLUMN", "VALUE", "IN FORCE");
    for (size_t i = 0; i < APP_NCOLUMNS; i++) {
        const struct app_column *f = ctl_row_column(i);
        const char *res = r.valid ? ctl_row_in_force(&r, f, rbuf) : "";

        /* id and entity_key head the output. */
        if (f->type == APP_T_ID || f->type == APP_T_KEY)
            continue;
        if (f->type == APP_T_NAME) {
            printf("  %-20s %s\n", f->name, ctl_printable(r.name, shown, sizeof(shown)));
            continue;
        }
        if (f->type == APP_T_SPACE) {
            printf("  %-20s %s\n", f->name,
                   r.row.id_space[0] ? ctl_printable(r.row.id_space, shown, sizeof(shown))
                                     : "(its own)");
            continue;
        }
        if (f == &app_columns[APP_COL_interval] && r.valid)
            printf("  %-20s %-24s %s ms\n", f->name, ctl_row_text(&r, f, buf), res);
        else if (f == &app_columns[APP_COL_min_size_percent] && r.valid)
            printf("  %-20s %-24s %s (low water %" PRIu64 ")\n", f->name, ctl_row_text(&r, f, buf),
                   res, r.cfg.low_water);
        else if (res[0])
            printf("  %-20s %-24s %s\n", f->name, ctl_row_text(&r, f, buf), res);
        else
            printf("  %-20s %s\n", f->name, ctl_row_text(&r, f, buf));
    }
    if (rrc == 0)
        show_pool_text(&r, &p, pool_key, meta_key);
    ctl_pool_free(&p);
    return rrc;
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
    "values in force, defaults resolved; for an invalid row the columns as stored, 0 shown\n"
    "as 'default'), MAX_ID (the highest ID it may get; '-' for none, i.e. 2^63-1) and STATE:\n"
    "served, deleted (soft-deleted), or INVALID with the reason idpoold gives.\n";

static const char help_show[] =
    "Usage: %s [global options] apps show KEY [--json]\n"
    "\n"
    "Show one application: every column of its row, the value in force of each (0 in a\n"
    "sizing column means the default), the validation result, and what Redis holds: pool\n"
    "length and fill, the lease in meta (next, hi, prefetched range), the limits idpool_take\n"
    "enforces, counters and firing alerts. Exit 1 if KEY does not exist or Redis cannot be\n"
    "read (the MySQL part is still shown).\n";

static const char help_add_head[] =
    "Usage: %s [global options] apps add KEY [options]\n"
    "\n"
    "Add an application. The would-be row is checked with idpoold's own rules before it\n"
    "is inserted; an invalid row or an existing key is an error (exit 1) and nothing is\n"
    "written. KEY (entity_key) is 1..64 characters of A-Z a-z 0-9 _ . -\n"
    "\n"
    "Options (the column in brackets; 0 in a sizing column means its default):\n";

static const char help_add_tail[] =
    "\n"
    "Rules: max_pool_size >= step; a refill of step must fit above the low-water mark\n"
    "(max_pool_size x (100 - min_size_percent) / 100 >= step); max_size_per_times <=\n"
    "max_pool_size; no ID may exceed 2^63-1; max_id is 0 (none) or at least the first ID\n"
    "start_offset allows.\n"
    "\n"
    "A key's lease history outlives its rows: when a row with KEY was deleted, the new\n"
    "row starts above every ID ever leased under KEY (its current_offset is set to that,\n"
    "and the output says so).\n"
    "\n"
    "Example: %s apps add order --type trend --step 500 --per-second 2000\n"
    "         %s apps add orders --js-safe --start-above shop.orders.id\n";

/* One option of `apps add --help`: "  --step N              text", '\n' in text continuing it. */
static void help_option(FILE *out, const char *opt, const char *arg, const char *text)
{
    char lhs[64];

    snprintf(lhs, sizeof(lhs), "--%s%s%s", opt, arg[0] ? " " : "", arg);
    fprintf(out, "  %-21s ", lhs);
    for (;;) {
        size_t n = strcspn(text, "\n");

        fprintf(out, "%.*s\n", (int)n, text);
        if (text[n] == '\0')
            break;
        text += n + 1;
        fprintf(out, "%24s", "");
    }
}

/* `apps add --help`: its options are the columns' (APP_COLUMNS' opt and text). */
static void help_add(FILE *out, const char *prog)
{
    fprintf(out, help_add_head, prog);
    for (size_t i = 0; i < APP_NCOLUMNS; i++) {
        const struct app_column *f = &app_columns[i];

        if (f->opt)
            help_option(out, f->opt,
                        f->type == APP_T_NAME    ? "TEXT"
                        : f->type == APP_T_SPACE ? "NAME"
                        : f->type == APP_T_TYPE  ? "TYPE"
                                                 : "N",
                        f->help);
    }
    help_option(out, "js-safe", "",
                "max_id 2^53-1 (9007199254740991): every ID exact as a JSON\n"
                "number and in JavaScript");
    help_option(out, "start-above", "SPEC",
                "SPEC is DB.TABLE.COLUMN of an existing table: start_offset is\n"
                "the first ID above its MAX (delta and remainder respected);\n"
                "an empty table: the normal start");
    help_option(out, "from-url", "URL",
                "read --start-above through mysql://user[:password]@host[:port]/db\n"
                "instead of the configured MySQL");
    help_option(out, "json", "", "print the new row as JSON");
    fprintf(out, help_add_tail, prog, prog);
}

static const char help_set[] =
    "Usage: %s [global options] apps set KEY field=value... [--id-space NAME] [--force] [--json]\n"
    "\n"
    "Change columns of an application. In one transaction the row is read and locked, the\n"
    "edits applied, the result checked with idpoold's own rules (an invalid result is an\n"
    "error, exit 1, and nothing is written), and only the changed columns are updated.\n"
    "\n"
    "Fields (the column names of `application`):\n"
    "  entity_name, increasing_type (1, 2, monotonic or trend), start_offset, step,\n"
    "  max_size_per_times, max_size_per_second, min_size_percent, interval, max_pool_size,\n"
    "  delta, remainder, increment_max, max_id (0: no ceiling; never below an ID already\n"
    "  leased: refused naming the highest lease), id_space (--id-space NAME is id_space=NAME)\n"
    "\n"
    "id_space: applications with the same non-empty id_space share one ID space (their\n"
    "IDs go into one table): idpoold refuses to serve one whose IDs could meet another's\n"
    "(alert id_space_conflict). Empty (the default): the application's own space.\n"
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
    "Redis Cluster (redis-cluster://): ACL users are per node, so the user is created\n"
    "on every primary (and its old connections closed there); a primary that cannot\n"
    "be reached or refuses is named in the warning. The example names the primary of\n"
    "the pool's slot, with -c (redis-cli follows a MOVED after a reshard).\n"
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
    "ACL DELUSER (its connections are closed; on a Redis Cluster, on every primary). If\n"
    "Redis cannot be reached, a warning says so and idpoold deletes the user when it\n"
    "(re)connects. Exit 1 if KEY has no active Redis user.\n";

const struct ctl_cmd ctl_apps_cmds[] = {
    {"list", "", "every application: key, id, type, step, max_pool_size, state", cmd_list,
     help_list, NULL, NULL},
    {"show", "KEY", "all columns, the values in force, validation, Redis state", cmd_show,
     help_show, NULL, NULL},
    {"add", "KEY [options]", "add an application, validated first (see 'apps add --help')",
     ctl_apps_add, NULL, NULL, help_add},
    {"set", "KEY field=value...", "change columns, validated first (see 'apps set --help')",
     ctl_apps_set, help_set, NULL, NULL},
    {"disable", "KEY", "soft-delete: deleted_at = now; idpoold stops serving it", ctl_apps_disable,
     help_disable, NULL, NULL},
    {"enable", "KEY", "undo disable: deleted_at = 0 (only a valid row)", ctl_apps_enable,
     help_enable, NULL, NULL},
    {"grant", "KEY",
     "a Redis user that may only LPOP and LLEN the application's pool\n"
     "(prints its password once; again: a new password)",
     ctl_redis_user_grant, help_grant, NULL, NULL},
    {"revoke", "KEY", "delete that Redis user", ctl_redis_user_revoke, help_revoke, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
};
