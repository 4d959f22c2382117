/*
 * ctl_tokens — `idpoolctl tokens ...` and `idpoolctl apps grant/revoke`.
 *
 *   tokens add     a new token (token_new: 256 random bits) stored as its
 *                  SHA-256 with the applications it may take IDs of, under a
 *                  name no token had before (a revoked one's included);
 *   tokens list    names, applications, times and status; never a hash;
 *   tokens revoke  revoked_at = NOW(3); the row stays, for audit, and its
 *                  name is never given to another token;
 *   apps grant     a Redis ACL user for one application: the password's hash
 *                  upserted into redis_user (a second grant rotates it), then
 *                  ACL SETUSER at once; idpoold re-applies every row on each
 *                  (re)connect, so a Redis that cannot be reached or refuses is
 *                  a warning, not a failure;
 *   apps revoke    revoked_at = NOW(3), then ACL DELUSER (idpoold deletes
 *                  revoked users on each (re)connect as well).
 * A secret exists only in this process' memory and on stdout, once; the
 * buffer holding it is wiped before returning. Strings reach SQL only
 * through ctl_db_quote(); hashes are hex digits made here.
 */
#include "ctl_tokens.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "acluser.h"
#include "app.h"
#include "cluster.h"
#include "keys.h"
#include "route.h"
#include "token.h"

#define APPS_COL_MAX 4096 /* api_token.apps is VARCHAR(4096) */

static const char name_rule[] = "1..64 characters of A-Z a-z 0-9 _ . -";

/* ------------------------------------------------------------- helpers */

/* Run a query and buffer its result: the result (mysql_free_result), or NULL after reporting. */
static MYSQL_RES *db_select(struct ctl *c, const char *sql)
{
    MYSQL_RES *res;

    if (ctl_db_exec(c, sql) != 0)
        return NULL;
    res = mysql_store_result(c->db);
    if (!res)
        ctl_fail(c, CTL_ERROR, "MySQL at %s:%d/%s: reading the result: error %u: %s",
                 c->cfg.mysql.host, c->cfg.mysql.port, c->cfg.mysql.db, mysql_errno(c->db),
                 mysql_error(c->db));
    return res;
}

/* Roll back the transaction of a failed command (the error is already reported). */
static void db_rollback(struct ctl *c)
{
    if (mysql_query(c->db, "ROLLBACK") != 0) {
        /* The connection is going away; MySQL rolls back on its own. */
    }
}

/*
 * 0 when `application` has a row whose key is exactly `key` (served,
 * soft-deleted or invalid alike), else CTL_ERROR after reporting. Keys are
 * compared as Redis does, case-sensitively.
 */
static int app_exists(struct ctl *c, const char *key)
{
    char *q = ctl_db_quote(c, key), *sql;
    MYSQL_RES *res;
    int found;

    sql = ctl_strf("SELECT 1 FROM application WHERE entity_key = BINARY %s LIMIT 1", q);
    free(q);
    res = db_select(c, sql);
    free(sql);
    if (!res)
        return CTL_ERROR;
    found = mysql_fetch_row(res) != NULL;
    mysql_free_result(res);
    if (!found)
        return ctl_fail(c, CTL_ERROR, "no application '%s' (add it with 'idpoolctl apps add %s')",
                        key, key);
    return 0;
}

/* A KEY argument: an application key, or a usage error. */
static int check_key(struct ctl *c, const char *key)
{
    char shown[100];

    if (app_key_valid(key))
        return 0;
    return ctl_usage(c, "KEY: '%s' is not an application key (%s)",
                     ctl_printable(key, shown, sizeof(shown)), name_rule);
}

/* A NAME argument: a token name, or a usage error. */
static int check_name(struct ctl *c, const char *name)
{
    char shown[100];

    if (token_name_valid(name))
        return 0;
    return ctl_usage(c, "token '%s': NAME must be %s", ctl_printable(name, shown, sizeof(shown)),
                     name_rule);
}

/* The apps column as a JSON array: ["*"] or the keys. */
static cJSON *apps_json(const char *apps)
{
    cJSON *arr = ctl_jcheck(cJSON_CreateArray());
    const char *p = apps;

    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char *k = ctl_strf("%.*s", (int)n, p);

        cJSON_AddItemToArray(arr, ctl_jcheck(cJSON_CreateString(k)));
        free(k);
        p += n;
        if (*p == ',')
            p++;
    }
    return arr;
}

/*
 * Send one command to Redis, the connection opened on first use: where
 * key lives (a Cluster: its slot's primary, redirections followed), or
 * with key NULL to every server (a Cluster's every primary: ACL users are
 * per node). 0 (integer replies summed into *n when n is not NULL), or -1
 * with the Redis errors in err (naming each server and the command; the
 * servers that took it did), or an empty err when ctl_redis_open() has
 * already reported it.
 */
static int redis_run(struct ctl *c, const char *key, int argc, const char **argv, const char *what,
                     char *err, size_t len, long long *n)
{
    size_t lens[ACLUSER_ARGC_MAX], used = 0, servers;
    char where[400], why[CTL_MSG_MAX];
    int rc = 0;

    err[0] = '\0';
    if (ctl_redis_open(c) != 0)
        return -1;
    for (int i = 0; i < argc && i < ACLUSER_ARGC_MAX; i++)
        lens[i] = strlen(argv[i]);
    servers = key ? 1 : ctl_redis_servers(c);
    for (size_t s = 0; s < servers; s++) {
        redisContext *x = NULL;
        redisReply *r = NULL;

        why[0] = '\0';
        if (key) {
            if (ctl_redis_keyed(c, key, argc, argv, &r, where, sizeof(where), why, sizeof(why)) !=
                0) {
                snprintf(err, len, "%s", why); /* names Redis and the command */
                return -1;
            }
        } else if ((x = ctl_redis_server(c, s, where, sizeof(where), why, sizeof(why))) != NULL) {
            r = redisCommandArgv(x, argc, argv, lens);
            if (!r)
                snprintf(why, sizeof(why), "%s", x->errstr[0] ? x->errstr : "no reply");
        }
        if (!r) {
            used += (size_t)snprintf(err + used, used < len ? len - used : 0, "%s%s: %s failed: %s",
                                     rc ? "; " : "", where, what, why);
            rc = -1;
        } else if (r->type == REDIS_REPLY_ERROR) {
            used += (size_t)snprintf(err + used, used < len ? len - used : 0,
                                     "%s%s: %s refused: %s", rc ? "; " : "", where, what, r->str);
            rc = -1;
        } else if (n && r->type == REDIS_REPLY_INTEGER) {
            *n += r->integer;
        }
        freeReplyObject(r);
    }
    return rc;
}

/*
 * "warning: ERR; REST" on stderr, for a Redis step that idpoold will redo
 * (ERR empty: the error is the line above, from ctl_redis_open()).
 */
static void redis_warn(struct ctl *c, const char *err, const char *rest)
{
    fprintf(stderr, "%s: %s: warning: %s; %s\n", c->prog, c->cmd,
            err[0] ? err : "not applied to Redis (see above)", rest);
}

/* -------------------------------------------------------------- tokens */

/* The applications of a token: every one ("*"), or distinct keys in the order given. */
struct app_list {
    int all;     /* "*" */
    size_t n;    /* number of keys */
    char **keys; /* pointers into copy */
    char *copy;  /* the --apps value, split in place (heap) */
    char *text;  /* the apps column: "*" or "k1,k2,..." (heap) */
};

static void app_list_free(struct app_list *l)
{
    free(l->keys);
    free(l->copy);
    free(l->text);
    memset(l, 0, sizeof(*l));
}

/* Parse --apps: KEY[,KEY...] (duplicates collapsed) or * alone. 0 or CTL_USAGE (reported). */
static int app_list_parse(struct ctl *c, const char *value, struct app_list *l)
{
    char shown[100], *p, *k;
    size_t cap = 1, len = 0;

    for (const char *s = value; *s; s++)
        cap += *s == ',';
    l->keys = ctl_xcalloc(cap, sizeof(char *));
    l->copy = ctl_strf("%s", value);
    p = l->copy;
    while ((k = strsep(&p, ",")) != NULL) {
        size_t i;

        if (k[0] == '\0')
            return ctl_usage(c, "--apps: empty application key in '%s' (give KEY[,KEY...] or '*')",
                             ctl_printable(value, shown, sizeof(shown)));
        if (strcmp(k, "*") == 0) {
            l->all = 1;
            continue;
        }
        if (!app_key_valid(k))
            return ctl_usage(c, "--apps: '%s' is not an application key (%s)",
                             ctl_printable(k, shown, sizeof(shown)), name_rule);
        for (i = 0; i < l->n && strcmp(l->keys[i], k) != 0; i++)
            ;
        if (i == l->n)
            l->keys[l->n++] = k;
    }
    if (l->all && l->n > 0)
        return ctl_usage(c, "--apps: '*' (every application) stands alone, not next to keys");
    if (l->all) {
        l->text = ctl_strf("*");
        return 0;
    }
    for (size_t i = 0; i < l->n; i++)
        len += strlen(l->keys[i]) + 1;
    if (len > APPS_COL_MAX + 1)
        return ctl_usage(c, "--apps: the list is %zu characters long, at most %d are stored",
                         len - 1, APPS_COL_MAX);
    l->text = ctl_xcalloc(len, 1);
    for (size_t i = 0; i < l->n; i++) {
        if (i > 0)
            strcat(l->text, ",");
        strcat(l->text, l->keys[i]);
    }
    return 0;
}

/* Options of `tokens add`. */
struct add_args {
    const char *apps; /* --apps */
};

enum { O_APPS = 1 };

static const struct ctl_opt add_opts[] = {
    {"apps", 1, O_APPS},
    {NULL, 0, 0},
};

static int on_add_opt(struct ctl *c, int id, const char *name, const char *value, void *arg)
{
    struct add_args *a = arg;

    (void)name;
    if (id == O_APPS) {
        if (a->apps)
            return ctl_usage(c, "--apps given twice (give one list: --apps a,b)");
        a->apps = value;
    }
    return 0;
}

/*
 * Store a token's hash under `name` as a new row. A name is never given to
 * another token, not even a revoked one's: its row stays as it was, for
 * audit, and the log's mentions of the name keep meaning one token. Names
 * are unique the way the index compares them (regardless of case).
 */
static int token_store(struct ctl *c, const char *name, const char *hash, const char *apps)
{
    char *qn = ctl_db_quote(c, name), *qa = ctl_db_quote(c, apps), *sql, shown[100];
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc;

    sql = ctl_strf("SELECT name, revoked_at FROM api_token WHERE name = %s", qn);
    res = db_select(c, sql);
    free(sql);
    if (!res) {
        rc = CTL_ERROR;
        goto out;
    }
    row = mysql_fetch_row(res);
    if (row) {
        const char *as = "";
        char other[160];

        if (row[0] && strcmp(row[0], name) != 0) {
            snprintf(other, sizeof(other), " as '%s' (names are unique regardless of case)",
                     ctl_printable(row[0], shown, sizeof(shown)));
            as = other;
        }
        if (row[1])
            rc = ctl_fail(c, CTL_ERROR,
                          "token '%s' exists%s, revoked at %s; its row stays for audit and its "
                          "name is not given to another token: choose another name",
                          name, as, row[1]);
        else
            rc = ctl_fail(c, CTL_ERROR, "token '%s' exists%s; choose another name", name, as);
        mysql_free_result(res);
        goto out;
    }
    mysql_free_result(res);
    sql = ctl_strf("INSERT INTO api_token (name, token_sha256, apps, created_at) "
                   "VALUES (%s, '%s', %s, NOW(3))",
                   qn, hash, qa);
    if (mysql_query(c->db, sql) != 0) {
        unsigned e = mysql_errno(c->db);

        /* A concurrent `tokens add` of the same name got there first. */
        if (e == ER_DUP_ENTRY)
            rc = ctl_fail(c, CTL_ERROR, "token '%s' exists; choose another name", name);
        else
            rc = ctl_fail(c, CTL_ERROR, "MySQL at %s:%d/%s: storing token '%s': error %u: %s",
                          c->cfg.mysql.host, c->cfg.mysql.port, c->cfg.mysql.db, name, e,
                          mysql_error(c->db));
    } else {
        rc = 0;
    }
    free(sql);
out:
    free(qn);
    free(qa);
    return rc;
}

static int cmd_add(struct ctl *c, int argc, char **argv)
{
    struct add_args a = {0};
    struct app_list l = {0};
    char *pos[1], tok[TOKEN_LEN + 1] = "", hash[TOKEN_HASH_LEN + 1];
    int npos, rc;

    rc = ctl_opts_parse(c, argc, argv, add_opts, on_add_opt, &a, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ctl_usage(c, "missing NAME");
    if ((rc = check_name(c, pos[0])) != 0)
        return rc;
    if (!a.apps)
        return ctl_usage(c, "missing --apps KEY[,KEY...] (or --apps '*' for every application)");
    if ((rc = app_list_parse(c, a.apps, &l)) != 0)
        goto out;
    if ((rc = ctl_setup(c)) != 0 || (rc = ctl_db_open(c)) != 0)
        goto out;
    for (size_t i = 0; i < l.n; i++)
        if ((rc = app_exists(c, l.keys[i])) != 0)
            goto out;
    if (token_new(tok) != 0) {
        rc = ctl_fail(c, CTL_ERROR, "no random numbers from the kernel (getrandom failed)");
        goto out;
    }
    token_hash(tok, strlen(tok), hash);
    if ((rc = token_store(c, pos[0], hash, l.text)) != 0)
        goto out;

    if (c->json) {
        cJSON *doc = ctl_jcheck(cJSON_CreateObject());

        ctl_jcheck(cJSON_AddStringToObject(doc, "name", pos[0]));
        cJSON_AddItemToObject(doc, "apps", apps_json(l.text));
        ctl_jcheck(cJSON_AddStringToObject(doc, "token", tok));
        ctl_json_print(c, doc);
        goto out;
    }
    printf("token %s for apps: %s%s\n", pos[0], l.text, l.all ? " (every application)" : "");
    printf("%s\n", tok);
    printf("(shown once: idpoold stores only its hash; pass it as 'Authorization: Bearer "
           "<token>')\n");
    printf("idpoold accepts it within its reload interval (%d ms here) or at once on SIGHUP.\n",
           c->cfg.reload_ms);
out:
    explicit_bzero(tok, sizeof(tok));
    app_list_free(&l);
    return rc;
}

static int cmd_list(struct ctl *c, int argc, char **argv)
{
    static const char *const hdr[] = {"NAME", "APPS", "CREATED", "STATUS"};
    struct ctl_table *t;
    char *pos[1];
    MYSQL_RES *res;
    MYSQL_ROW row;
    int npos, rc;

    rc = ctl_opts_parse(c, argc, argv, NULL, NULL, NULL, pos, 0, &npos);
    if (rc != 0)
        return rc;
    if ((rc = ctl_setup(c)) != 0 || (rc = ctl_db_open(c)) != 0)
        return rc;
    /* Never the hash: it is not even read. */
    res = db_select(c, "SELECT name, apps, created_at, revoked_at FROM api_token "
                       "ORDER BY name, id");
    if (!res)
        return CTL_ERROR;
    if (c->json) {
        cJSON *arr = ctl_jcheck(cJSON_CreateArray());

        while ((row = mysql_fetch_row(res))) {
            cJSON *o = ctl_jcheck(cJSON_CreateObject());

            ctl_jcheck(cJSON_AddStringToObject(o, "name", row[0] ? row[0] : ""));
            cJSON_AddItemToObject(o, "apps", apps_json(row[1] ? row[1] : ""));
            ctl_jcheck(cJSON_AddStringToObject(o, "created_at", row[2] ? row[2] : ""));
            if (row[3])
                ctl_jcheck(cJSON_AddStringToObject(o, "revoked_at", row[3]));
            else
                ctl_jcheck(cJSON_AddNullToObject(o, "revoked_at"));
            ctl_jcheck(cJSON_AddBoolToObject(o, "active", row[3] == NULL));
            cJSON_AddItemToArray(arr, o);
        }
        mysql_free_result(res);
        ctl_json_print(c, arr);
        return 0;
    }

    t = ctl_table_new(4, hdr);
    while ((row = mysql_fetch_row(res))) {
        char name[300], apps[APPS_COL_MAX * 4 + 1], status[64];
        const char *cells[4] = {ctl_printable(row[0] ? row[0] : "", name, sizeof(name)),
                                ctl_printable(row[1] ? row[1] : "", apps, sizeof(apps)), row[2],
                                status};

        if (row[3])
            snprintf(status, sizeof(status), "revoked at %s", row[3]);
        else
            snprintf(status, sizeof(status), "active");
        ctl_table_add(t, cells);
    }
    mysql_free_result(res);
    ctl_table_print(t, stdout);
    if (ctl_table_rows(t) == 0)
        printf("(no tokens: add one with 'idpoolctl tokens add NAME --apps KEY')\n");
    ctl_table_free(t);
    return 0;
}

static int cmd_revoke(struct ctl *c, int argc, char **argv)
{
    char *pos[1], *q, *sql, shown[100], err[CTL_MSG_MAX + 400];
    MYSQL_RES *res;
    MYSQL_ROW row;
    int npos, rc, in_redis = 0;
    my_ulonglong changed;

    rc = ctl_opts_parse(c, argc, argv, NULL, NULL, NULL, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ctl_usage(c, "missing NAME");
    if ((rc = check_name(c, pos[0])) != 0)
        return rc;
    if ((rc = ctl_setup(c)) != 0 || (rc = ctl_db_open(c)) != 0)
        return rc;
    q = ctl_db_quote(c, pos[0]);
    sql = ctl_strf(
        "UPDATE api_token SET revoked_at = NOW(3) WHERE name = %s AND revoked_at IS NULL", q);
    rc = ctl_db_exec(c, sql);
    free(sql);
    if (rc != 0) {
        free(q);
        return rc;
    }
    changed = mysql_affected_rows(c->db);
    sql = ctl_strf("SELECT name, revoked_at, token_sha256 FROM api_token WHERE name = %s", q);
    free(q);
    res = db_select(c, sql);
    free(sql);
    if (!res)
        return CTL_ERROR;
    row = mysql_fetch_row(res);
    if (!row) {
        mysql_free_result(res);
        return ctl_fail(c, CTL_ERROR, "no token '%s' (see 'idpoolctl tokens list')", pos[0]);
    }
    /*
     * The hash in Redis as well (again for a token revoked before: Redis may
     * have lost it): issuers read it every reload interval, also while they
     * cannot read MySQL.
     */
    if (row[2] && token_hash_valid(row[2])) {
        char key[KEYS_MAX];
        const char *av[3] = {"SADD", key, row[2]};

        keys_revoked(c->cfg.key_prefix, key, sizeof(key));
        in_redis = redis_run(c, key, 3, av, "SADD", err, sizeof(err), NULL) == 0;
        if (!in_redis)
            redis_warn(c, err,
                       "the token is revoked in MySQL; an issuer that cannot read MySQL keeps "
                       "accepting it until it can");
    }
    if (c->json) {
        cJSON *doc = ctl_jcheck(cJSON_CreateObject());

        ctl_jcheck(cJSON_AddStringToObject(doc, "result", changed == 1 ? "revoked" : "unchanged"));
        ctl_jcheck(cJSON_AddBoolToObject(doc, "redis", in_redis));
        ctl_jcheck(cJSON_AddStringToObject(doc, "name", row[0] ? row[0] : ""));
        if (row[1])
            ctl_jcheck(cJSON_AddStringToObject(doc, "revoked_at", row[1]));
        else
            ctl_jcheck(cJSON_AddNullToObject(doc, "revoked_at"));
        ctl_json_print(c, doc);
    } else if (changed == 1) {
        printf("revoked token '%s' (at %s): idpoold stops accepting it within its reload interval "
               "(%d ms here) or at once on SIGHUP\n",
               ctl_printable(row[0] ? row[0] : "", shown, sizeof(shown)), row[1] ? row[1] : "?",
               c->cfg.reload_ms);
    } else {
        printf("token '%s' is already revoked (at %s)\n",
               ctl_printable(row[0] ? row[0] : "", shown, sizeof(shown)), row[1] ? row[1] : "?");
    }
    mysql_free_result(res);
    return 0;
}

/* ---------------------------------------------------------- Redis users */

/*
 * Upsert the password hash of application `key`'s Redis user, in one
 * transaction; *rotated is set when an active grant's password was
 * replaced (the previous password stops working once Redis has the new one).
 */
static int user_store(struct ctl *c, const char *key, const char *hash, int *rotated)
{
    char *q = ctl_db_quote(c, key), *sql;
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc;

    *rotated = 0;
    if ((rc = ctl_db_exec(c, "START TRANSACTION")) != 0)
        goto out;
    sql = ctl_strf("SELECT revoked_at IS NULL FROM redis_user WHERE entity_key = BINARY %s "
                   "FOR UPDATE",
                   q);
    res = db_select(c, sql);
    free(sql);
    if (!res) {
        rc = CTL_ERROR;
        goto rollback;
    }
    row = mysql_fetch_row(res);
    *rotated = row && row[0] && strcmp(row[0], "1") == 0;
    mysql_free_result(res);
    sql = ctl_strf("INSERT INTO redis_user (entity_key, password_sha256, created_at) "
                   "VALUES (%s, '%s', NOW(3)) ON DUPLICATE KEY UPDATE password_sha256 = '%s', "
                   "created_at = NOW(3), revoked_at = NULL",
                   q, hash, hash);
    rc = ctl_db_exec(c, sql);
    free(sql);
    if (rc != 0)
        goto rollback;
    rc = ctl_db_exec(c, "COMMIT");
    goto out;

rollback:
    db_rollback(c);
out:
    free(q);
    return rc;
}

/* Options of `apps grant`. */
enum { O_ANY_DB = 1 };

static const struct ctl_opt grant_opts[] = {
    {"allow-any-db", 0, O_ANY_DB},
    {NULL, 0, 0},
};

static int on_grant_opt(struct ctl *c, int id, const char *name, const char *value, void *arg)
{
    (void)c;
    (void)name;
    (void)value;
    if (id == O_ANY_DB)
        *(int *)arg = 1;
    return 0;
}

/*
 * Parse `apps grant|revoke KEY` (opts: grant's, or NULL), load the
 * settings, open MySQL.
 */
static int user_args(struct ctl *c, int argc, char **argv, const struct ctl_opt *opts, void *oarg,
                     char **key)
{
    char *pos[1];
    int npos, rc;

    rc = ctl_opts_parse(c, argc, argv, opts, opts ? on_grant_opt : NULL, oarg, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ctl_usage(c, "missing KEY");
    if ((rc = check_key(c, pos[0])) != 0)
        return rc;
    if ((rc = ctl_setup(c)) != 0 || (rc = ctl_db_open(c)) != 0)
        return rc;
    *key = pos[0];
    return 0;
}

/*
 * The --json document of apps grant and revoke: the user, the key, whether
 * Redis took the change now, and if not, why.
 */
static cJSON *user_doc(struct ctl *c, const char *user, const char *key, int applied,
                       const char *err)
{
    cJSON *doc = ctl_jcheck(cJSON_CreateObject());

    ctl_jcheck(cJSON_AddStringToObject(doc, "user", user));
    ctl_jcheck(cJSON_AddStringToObject(doc, "key", key));
    ctl_jcheck(cJSON_AddBoolToObject(doc, "applied", applied));
    if (!applied)
        ctl_jcheck(cJSON_AddStringToObject(doc, "redis_error", err[0] ? err : c->errmsg));
    return doc;
}

int ctl_redis_user_grant(struct ctl *c, int argc, char **argv)
{
    char *key = NULL, pw[TOKEN_LEN + 1] = "", hash[TOKEN_HASH_LEN + 1], user[ACLUSER_NAME_MAX];
    char space[2 * ACLUSER_NAME_MAX + 80], pool[KEYS_MAX], err[CTL_MSG_MAX + 400], db[24];
    char port[24] = "PORT";
    const char *av[ACLUSER_ARGC_MAX];
    const char *prefix, *host;
    struct cluster_addr own;
    int rc, ac, rotated, applied, any_db = 0;
    long long killed = 0;

    if ((rc = user_args(c, argc, argv, grant_opts, &any_db, &key)) != 0)
        return rc;
    /*
     * ACL key patterns hold in every database, and a user that may SELECT
     * one may SELECT them all: on db N the user could LPOP the pool of the
     * same key in any other database of this Redis (another deployment's).
     */
    keys_app(c->cfg.key_prefix, key, KEYS_POOL, pool, sizeof(pool));
    if (c->cfg.redis.db != 0 && !any_db)
        return ctl_fail(c, CTL_ERROR,
                        "the Redis database is %d, not 0: a granted user needs SELECT to reach "
                        "it, and Redis ACLs cannot limit SELECT or key patterns to one database, "
                        "so the user could LPOP %s in every database of this Redis; "
                        "give --allow-any-db if nothing else in it uses that key",
                        c->cfg.redis.db, pool);
    if ((rc = app_exists(c, key)) != 0)
        return rc;
    if (token_new(pw) != 0)
        return ctl_fail(c, CTL_ERROR, "no random numbers from the kernel (getrandom failed)");
    token_hash(pw, strlen(pw), hash);
    if ((rc = user_store(c, key, hash, &rotated)) != 0)
        goto out;

    /* At once; idpoold applies the stored row on its next (re)connect anyway. */
    prefix = c->cfg.key_prefix;
    acluser_name(prefix, key, user, sizeof(user));
    ac = acluser_setuser(prefix, key, hash, c->cfg.redis.db, space, av);
    applied = redis_run(c, NULL, ac, av, "ACL SETUSER", err, sizeof(err), NULL) == 0;
    /*
     * ACL SETUSER leaves connections that logged in with the old password
     * open: close every connection of the user (none can have logged in
     * with the new password yet).
     */
    if (applied) {
        av[0] = "CLIENT";
        av[1] = "KILL";
        av[2] = "USER";
        av[3] = user;
        if (redis_run(c, NULL, 4, av, "CLIENT KILL USER", err, sizeof(err), &killed) != 0)
            redis_warn(c, err,
                       "connections that logged in with the previous password stay open; "
                       "idpoold closes them when it applies the user");
    } else {
        redis_warn(c, err,
                   "the user is stored in MySQL; idpoold applies it to Redis when it (re)connects");
    }

    if (c->json) {
        cJSON *doc = user_doc(c, user, key, applied, err);

        ctl_jcheck(cJSON_AddStringToObject(doc, "password", pw));
        ctl_jcheck(cJSON_AddBoolToObject(doc, "rotated", rotated));
        ctl_json_i64(doc, "closed_connections", killed);
        ctl_json_print(c, doc);
        goto out;
    }
    printf("%s Redis user '%s' for application '%s'%s%s\n",
           rotated ? "new password for" : "granted", user, key,
           rotated && applied ? " (the previous password no longer authenticates)" : "",
           applied ? "" : " (stored in MySQL, not yet in Redis: see the warning)");
    if (killed > 0)
        printf("closed %lld connection(s) that logged in with the previous password\n", killed);
    printf("password: %s\n", pw);
    printf("(shown once: only its hash is stored; the user may LPOP and LLEN %s, nothing else)\n",
           pool);
    snprintf(db, sizeof(db), " -n %d", c->cfg.redis.db);
    /*
     * The server it was applied on: with Sentinel the primary (never a
     * sentinel); a Cluster's primary of the pool's slot, with -c (redis-cli
     * follows a MOVED when the slot has moved since).
     */
    host = c->cfg.redis.host;
    if (c->cfg.redis.kind == REDIS_CLUSTER && c->route && route_addr(c->route, pool, &own) == 0) {
        host = own.host;
        snprintf(port, sizeof(port), "%d -c", own.port);
    } else if (c->cfg.redis.kind != REDIS_SENTINEL) {
        snprintf(port, sizeof(port), "%d", c->cfg.redis.port);
    } else {
        host = c->rds_port != 0 ? c->rds_host : "PRIMARY";
        if (c->rds_port != 0)
            snprintf(port, sizeof(port), "%d", c->rds_port);
    }
    printf("example:  redis-cli -h %s -p %s%s --user %s --pass %s LPOP %s 10\n", host, port,
           c->cfg.redis.db != 0 ? db : "", user, pw, pool);
out:
    explicit_bzero(pw, sizeof(pw));
    return rc;
}

int ctl_redis_user_revoke(struct ctl *c, int argc, char **argv)
{
    char *key = NULL, *q, *sql, user[ACLUSER_NAME_MAX], err[CTL_MSG_MAX + 400];
    const char *av[3];
    int rc, applied;

    if ((rc = user_args(c, argc, argv, NULL, NULL, &key)) != 0)
        return rc;
    q = ctl_db_quote(c, key);
    sql = ctl_strf("UPDATE redis_user SET revoked_at = NOW(3) WHERE entity_key = BINARY %s AND "
                   "revoked_at IS NULL",
                   q);
    free(q);
    rc = ctl_db_exec(c, sql);
    free(sql);
    if (rc != 0)
        return rc;
    if (mysql_affected_rows(c->db) != 1)
        return ctl_fail(c, CTL_ERROR,
                        "application '%s' has no Redis user (grant one with 'idpoolctl apps "
                        "grant %s')",
                        key, key);

    acluser_name(c->cfg.key_prefix, key, user, sizeof(user));
    av[0] = "ACL";
    av[1] = "DELUSER";
    av[2] = user;
    applied = redis_run(c, NULL, 3, av, "ACL DELUSER", err, sizeof(err), NULL) == 0;
    if (!applied)
        redis_warn(c, err,
                   "the user is revoked in MySQL; idpoold deletes it from Redis when it "
                   "(re)connects");
    if (c->json) {
        ctl_json_print(c, user_doc(c, user, key, applied, err));
        return 0;
    }
    printf("revoked Redis user '%s' of application '%s'%s\n", user, key,
           applied ? ": deleted from Redis, its connections closed" : "");
    return 0;
}

/* ----------------------------------------------------------------- help */

const char ctl_tokens_help[] =
    "Usage: %s [global options] tokens COMMAND [ARGS]\n"
    "\n"
    "Manage the bearer tokens of idpoold's ID API (GET /v1/ids/KEY with 'Authorization:\n"
    "Bearer <token>'): the rows of the MySQL table `api_token`. A token is shown once, when\n"
    "it is added; only its SHA-256 is stored. idpoold picks up changes within its reload\n"
    "interval (reload-ms) or at once on SIGHUP.\n";

static const char help_add[] =
    "Usage: %s [global options] tokens add NAME --apps KEY[,KEY...]|* [--json]\n"
    "\n"
    "Add a token that may take IDs of the given applications ('*': every application,\n"
    "present and future). NAME is 1..64 characters of A-Z a-z 0-9 _ . - and new\n"
    "(regardless of case): a revoked token keeps its row, for audit, and its name.\n"
    "Each KEY must be an existing application (disabled ones count).\n"
    "\n"
    "The token (idp_ and 43 more characters) is printed once, on the second line (--json:\n"
    "{\"name\", \"apps\", \"token\"}); idpoold stores only its SHA-256, so a lost token is\n"
    "revoked and replaced under a new name, never recovered. Exit 1 if an application\n"
    "does not exist or a token, active or revoked, has this name.\n"
    "\n"
    "Example: %s tokens add checkout --apps user,order\n";

static const char help_list[] =
    "Usage: %s [global options] tokens list [--json]\n"
    "\n"
    "List every token, sorted by name: NAME, APPS (keys or *), CREATED and STATUS (active,\n"
    "or revoked at <time>). Never a token or its hash. --json: an array of {name, apps,\n"
    "created_at, revoked_at (null or a time), active}.\n";

static const char help_revoke[] =
    "Usage: %s [global options] tokens revoke NAME [--json]\n"
    "\n"
    "Revoke a token: revoked_at = now. idpoold stops accepting it within its reload\n"
    "interval (reload-ms) or at once on SIGHUP. Its hash is also added to the Redis set\n"
    "'<key-prefix>:revoked-tokens', which every issuer reads each reload interval, so\n"
    "issuers that cannot read MySQL refuse it too; when Redis cannot be reached a\n"
    "warning says so (exit 0), and such issuers accept the token until they read MySQL\n"
    "again. The row stays, for audit, and so does its name: no other token gets it.\n"
    "Revoking a revoked token changes nothing in MySQL (exit 0; the hash is written to\n"
    "Redis again); an unknown NAME is an error (exit 1). --json: {\"result\", \"name\",\n"
    "\"revoked_at\", \"redis\"}.\n";

const struct ctl_cmd ctl_tokens_cmds[] = {
    {"add", "NAME --apps KEY[,KEY...]|*",
     "a bearer token of the ID API for these applications\n"
     "(or all: *), printed once",
     cmd_add, help_add, NULL, NULL},
    {"list", "", "every token: name, applications, created, status", cmd_list, help_list, NULL,
     NULL},
    {"revoke", "NAME", "stop accepting a token (the row stays, for audit)", cmd_revoke, help_revoke,
     NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
};
