/*
 * `idpoolctl verify`: for every application key (of any environment's
 * ledger or application table), in one pass:
 *
 *   1. the pool of the key in each environment's Redis (LRANGE), sorted;
 *   2. the key's leases of every environment, each streamed from MySQL in
 *      order of lo (mysql_use_result) and merged by lo: each lease is
 *      checked on its own (lc_lease_bad), fed to the sweep (lc_sweep_add:
 *      overlaps in one environment, shared IDs across two) and marks the
 *      pooled IDs of its environment it covers (lc_pool_cover);
 *   3. pooled IDs no lease covered are conflicts.
 *
 * The pool is read before the ledger: a pushed ID's lease was committed
 * before the push, so a daemon at work cannot make a clean pool look bad.
 * Memory: one key's pools and the sweep's window, never the ledger. Leases
 * of rows deleted before application_lease had entity_key ('' there) are
 * checked within their environment by application_id.
 *
 * Exit: 0 no conflict, 1 conflicts (each listed), 2 usage or a server that
 * cannot be read (named).
 */
#include "ctl_verify.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "keys.h"
#include "url.h"
#include "ledgercheck.h"

#define VERIFY_MAX_ENVS 16
#define VERIFY_LIST_MAX 1000 /* conflicts listed; all are counted */
#define VERIFY_FAIL     2    /* a server cannot be read: exit 2, as usage */

enum { O_ENV = 1 };

static const struct ctl_opt verify_opts[] = {
    {"env", 1, O_ENV},
    {NULL, 0, 0},
};

/* One environment: its own settings and connections (a struct ctl of its own). */
struct venv {
    struct ctl x;
    int idx;              /* 1, 2, ... as messages number them */
    char name[400];       /* "environment 2 (MySQL H:P/DB)" */
    int has_redis;        /* pools are checked */
    int has_lattice;      /* application_lease has delta, remainder, start_offset */
    MYSQL *aux;           /* a second connection: a conflict's instance and time */
    MYSQL_RES *res;       /* the leases being streamed */
    struct lc_lease head; /* the next of them */
    int has_head;
    struct lc_pool pool; /* the current key's pool */
};

struct verify {
    struct ctl *c;
    struct venv *env;
    size_t nenv;
    const char *key; /* the application being checked ("" with unkeyed leases) */
    struct lc_sweep sw;
    uint64_t apps, leases, pooled, unknown, unkeyed, conflicts;
    cJSON *list; /* --json: the conflicts listed */
    int failed;  /* a server could not be read (reported) */
};

/* "1,234,567" */
static const char *grouped(uint64_t v, char *buf, size_t len)
{
    char d[24];
    int n = snprintf(d, sizeof(d), "%" PRIu64, v), o = 0;

    for (int i = 0; i < n && (size_t)o + 2 < len; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = d[i];
    }
    buf[o] = '\0';
    return buf;
}

static int fail_env(struct verify *v, struct venv *e, const char *what)
{
    ctl_fail(v->c, VERIFY_FAIL, "%s: %s: error %u: %s", e->name, what, mysql_errno(e->x.db),
             mysql_error(e->x.db));
    v->failed = 1;
    return -1;
}

/* --- reporting ---------------------------------------------------------- */

/* "application 'KEY'", or for a lease recorded without a key "application row N (no key)". */
static const char *app_text(const struct verify *v, const struct lc_lease *l, char *buf, size_t len)
{
    if (v->key[0])
        snprintf(buf, len, "application '%s'", v->key);
    else
        snprintf(buf, len, "application row %" PRId64 " (no key)", l->app_id);
    return buf;
}

/*
 * The stream reads the ledger's covering index (ix_key_lo), which has no
 * instance nor created_at: a lease named in a conflict gets them from its
 * environment's second connection. *out is l with them filled in ("?" when
 * they cannot be read: the conflict is reported all the same).
 */
static void lease_detail(const struct verify *v, const struct lc_lease *l, struct lc_lease *out)
{
    const struct venv *e = &v->env[l->env];
    char sql[128];
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;

    *out = *l;
    snprintf(out->instance, sizeof(out->instance), "?");
    snprintf(out->created, sizeof(out->created), "?");
    snprintf(sql, sizeof(sql),
             "SELECT instance, created_at FROM application_lease WHERE id = %" PRId64, l->id);
    if (!e->aux || mysql_query(e->aux, sql) != 0 || !(res = mysql_store_result(e->aux)))
        return;
    if ((row = mysql_fetch_row(res))) {
        snprintf(out->instance, sizeof(out->instance), "%s", row[0] ? row[0] : "");
        snprintf(out->created, sizeof(out->created), "%s", row[1] ? row[1] : "");
    }
    mysql_free_result(res);
}

static void lease_text(const struct lc_lease *l, char *buf, size_t len)
{
    snprintf(buf, len,
             "lease %" PRId64 " [%" PRId64 ", %" PRId64 ") of row %" PRId64 " by '%s' at %s", l->id,
             l->lo, l->hi, l->app_id, l->instance, l->created);
}

static cJSON *lease_json(const struct verify *v, const struct lc_lease *l)
{
    cJSON *o = ctl_jcheck(cJSON_CreateObject());

    ctl_json_i64(o, "environment", v->env[l->env].idx);
    ctl_json_i64(o, "id", l->id);
    ctl_json_i64(o, "application_id", l->app_id);
    ctl_json_offset(o, "lo", (uint64_t)l->lo);
    ctl_json_offset(o, "hi", (uint64_t)l->hi);
    ctl_jcheck(cJSON_AddStringToObject(o, "instance", l->instance));
    ctl_jcheck(cJSON_AddStringToObject(o, "created_at", l->created));
    if (l->lat.known) {
        ctl_json_offset(o, "delta", l->lat.delta);
        ctl_json_offset(o, "remainder", l->lat.remainder);
        ctl_json_offset(o, "start_offset", l->lat.start);
    }
    return o;
}

/*
 * One conflict: counted, listed (up to VERIFY_LIST_MAX) as text or JSON.
 * Returns its JSON object for more fields, NULL when not listed as JSON.
 */
static cJSON *report(struct verify *v, const char *kind, const struct lc_lease *a,
                     const struct lc_lease *b, const char *text)
{
    cJSON *o, *ls;

    v->conflicts++;
    if (v->conflicts > VERIFY_LIST_MAX)
        return NULL;
    if (!v->c->json) {
        printf("conflict: %s\n", text);
        return NULL;
    }
    o = ctl_jcheck(cJSON_CreateObject());
    ls = ctl_jcheck(cJSON_CreateArray());
    ctl_jcheck(cJSON_AddStringToObject(o, "kind", kind));
    ctl_jcheck(cJSON_AddStringToObject(o, "application", v->key));
    ctl_jcheck(cJSON_AddStringToObject(o, "message", text));
    if (a)
        cJSON_AddItemToArray(ls, lease_json(v, a));
    if (b)
        cJSON_AddItemToArray(ls, lease_json(v, b));
    cJSON_AddItemToObject(o, "leases", ls);
    cJSON_AddItemToArray(v->list, o);
    return o;
}

static void on_conflict(void *arg, const struct lc_conflict *k)
{
    struct verify *v = arg;
    const struct venv *ea = &v->env[k->a->env], *eb = &v->env[k->b->env];
    char la[600], lb[600], first[80], text[3000], u[24], an[128];
    struct lc_lease a, b;
    cJSON *o;

    if (v->conflicts >= VERIFY_LIST_MAX) { /* counted, not listed: no need to read more */
        v->conflicts++;
        return;
    }
    lease_detail(v, k->a, &a);
    lease_detail(v, k->b, &b);
    lease_text(&a, la, sizeof(la));
    lease_text(&b, lb, sizeof(lb));
    if (k->has_first)
        snprintf(first, sizeof(first), "first ID in both: %s", ctl_u64(k->first, u));
    else
        snprintf(first, sizeof(first), "no ID on both lattices");
    if (k->kind == LC_OVERLAP)
        snprintf(text, sizeof(text), "%s, %s: leases overlap: %s and %s; %s",
                 app_text(v, k->a, an, sizeof(an)), ea->name, la, lb, first);
    else
        snprintf(text, sizeof(text), "%s, %s and %s: IDs shared: %s and %s; %s",
                 app_text(v, k->a, an, sizeof(an)), ea->name, eb->name, la, lb, first);
    o = report(v, k->kind == LC_OVERLAP ? "overlap" : "shared", &a, &b, text);
    if (o && k->has_first)
        ctl_json_offset(o, "first_id", k->first);
}

static void report_bad(struct verify *v, const struct lc_lease *l, enum lc_bad bad)
{
    char la[600], text[1200], d[24], r[24], s[24], an[128];
    struct lc_lease full;

    if (v->conflicts >= VERIFY_LIST_MAX) {
        v->conflicts++;
        return;
    }
    lease_detail(v, l, &full);
    lease_text(&full, la, sizeof(la));
    snprintf(text, sizeof(text),
             "%s, %s: %s is off its lattice: %s (delta %s, remainder %s, "
             "start_offset %s)",
             app_text(v, l, an, sizeof(an)), v->env[l->env].name, la, lc_bad_text(bad),
             ctl_i64((int64_t)l->lat.delta, d), ctl_i64((int64_t)l->lat.remainder, r),
             ctl_i64((int64_t)l->lat.start, s));
    report(v, "off_lattice", &full, NULL, text);
}

static void report_pooled(struct verify *v, const struct venv *e, const char *id, const char *why)
{
    char text[800];
    cJSON *o;

    snprintf(text, sizeof(text), "application '%s', %s: pooled ID %s %s", v->key, e->name, id, why);
    o = report(v, "pool", NULL, NULL, text);
    if (o) {
        ctl_json_i64(o, "environment", e->idx);
        ctl_jcheck(cJSON_AddStringToObject(o, "id", id));
    }
}

/* --- environments ------------------------------------------------------- */

/* Split "MYSQL_URL[,REDIS_URL]" (a Redis URL starts with "redis"). */
static void env_urls(const char *spec, char **mysql, char **redis)
{
    const char *comma = strstr(spec, ",redis");

    if (!comma) {
        *mysql = ctl_strf("%s", spec);
        *redis = NULL;
        return;
    }
    *mysql = ctl_strf("%.*s", (int)(comma - spec), spec);
    *redis = ctl_strf("%s", comma + 1);
}

/*
 * Environment e's settings: the global ones, then its URLs (--env), loaded
 * as idpoolctl's own are. 0, or an exit code after reporting.
 */
static int env_setup(struct verify *v, struct venv *e, const char *spec)
{
    struct ctl *c = v->c, *x = &e->x;
    char *mysql = NULL, *redis = NULL;
    int rc;

    x->prog = c->prog;
    x->json = 0; /* messages only: the JSON document is the command's */
    x->cmd = "verify";
    x->gargv = ctl_xcalloc((size_t)c->gargc + 5, sizeof(char *));
    memcpy(x->gargv, c->gargv, (size_t)c->gargc * sizeof(char *));
    x->gargc = c->gargc;
    e->has_redis = 1;
    if (spec) {
        env_urls(spec, &mysql, &redis);
        x->gargv[x->gargc++] = "--mysql";
        x->gargv[x->gargc++] = mysql;
        e->has_redis = redis != NULL;
        if (redis) {
            x->gargv[x->gargc++] = "--redis";
            x->gargv[x->gargc++] = redis;
        }
    }
    rc = ctl_setup(x);
    /* config_load copied what it keeps. */
    free(mysql);
    free(redis);
    if (rc != 0) {
        snprintf(c->errmsg, sizeof(c->errmsg), "%s", x->errmsg);
        return rc;
    }
    snprintf(e->name, sizeof(e->name), "environment %d (MySQL %s:%d/%s)", e->idx, x->cfg.mysql.host,
             x->cfg.mysql.port, x->cfg.mysql.db);
    return 0;
}

/* Connect environment e: MySQL, then Redis when its pools are checked. 0 or -1 (reported). */
static int env_open(struct verify *v, struct venv *e)
{
    char cmd[64];

    snprintf(cmd, sizeof(cmd), "verify: environment %d", e->idx);
    e->x.cmd = cmd;
    if (ctl_db_open(&e->x) != 0 || (e->has_redis && ctl_redis_open(&e->x) != 0)) {
        snprintf(v->c->errmsg, sizeof(v->c->errmsg), "environment %d: %.900s", e->idx, e->x.errmsg);
        e->x.cmd = "verify";
        v->failed = 1;
        return -1;
    }
    /* The second connection, for the details of conflicts (the first one streams). */
    {
        MYSQL *first = e->x.db;

        e->x.db = NULL;
        if (ctl_db_open(&e->x) != 0) {
            snprintf(v->c->errmsg, sizeof(v->c->errmsg), "environment %d: %.900s", e->idx,
                     e->x.errmsg);
            e->x.db = first;
            e->x.cmd = "verify";
            v->failed = 1;
            return -1;
        }
        e->aux = e->x.db;
        e->x.db = first;
    }
    e->x.cmd = "verify";
    if (mysql_query(e->x.db, "SELECT delta, remainder, start_offset FROM application_lease "
                             "LIMIT 0") == 0) {
        mysql_free_result(mysql_store_result(e->x.db));
        e->has_lattice = 1;
    }
    return 0;
}

/* --- the keys ----------------------------------------------------------- */

static int cmp_key(const void *a, const void *b)
{
    return strcasecmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Every application key of every environment: of its ledger and of its
 * application table (a pool may outlive its leases' visibility), sorted and
 * without repeats, as MySQL compares keys (case-insensitively).
 */
static int keys_all(struct verify *v, char ***out, size_t *n)
{
    char **keys = NULL;
    size_t nk = 0, cap = 0;

    for (size_t i = 0; i < v->nenv; i++) {
        struct venv *e = &v->env[i];
        MYSQL_RES *res;
        MYSQL_ROW row;

        if (mysql_query(e->x.db,
                        "SELECT DISTINCT entity_key FROM application_lease "
                        "WHERE entity_key <> '' UNION SELECT entity_key FROM application") != 0 ||
            !(res = mysql_store_result(e->x.db))) {
            for (size_t k = 0; k < nk; k++)
                free(keys[k]);
            free(keys);
            return fail_env(v, e, "reading the application keys");
        }
        while ((row = mysql_fetch_row(res))) {
            if (!row[0] || !row[0][0])
                continue;
            if (nk == cap) {
                cap = cap ? 2 * cap : 64;
                keys = realloc(keys, cap * sizeof(*keys));
                if (!keys)
                    ctl_oom();
            }
            keys[nk++] = ctl_strf("%s", row[0]);
        }
        mysql_free_result(res);
    }
    if (nk)
        qsort(keys, nk, sizeof(*keys), cmp_key);
    {
        size_t w = 0;
        for (size_t k = 0; k < nk; k++) {
            if (w > 0 && strcasecmp(keys[w - 1], keys[k]) == 0) {
                free(keys[k]);
                continue;
            }
            keys[w++] = keys[k];
        }
        nk = w;
    }
    *out = keys;
    *n = nk;
    return 0;
}

/* --- streaming the leases ------------------------------------------------ */

/* A column's integer (NULL is not one). */
static int parse_i64(const char *s, int64_t *out)
{
    return s ? ctl_parse_i64(s, out) : -1;
}

/* The next row of e's stream into e->head (has_head 0 at the end): 0, or -1 (reported). */
static int env_next(struct verify *v, struct venv *e)
{
    MYSQL_ROW row = mysql_fetch_row(e->res);
    struct lc_lease *l = &e->head;

    e->has_head = 0;
    if (!row) {
        if (mysql_errno(e->x.db))
            return fail_env(v, e, "reading application_lease");
        return 0;
    }
    l->env = (int)(e - v->env);
    if (parse_i64(row[0], &l->id) < 0 || parse_i64(row[1], &l->app_id) < 0 ||
        parse_i64(row[2], &l->lo) < 0 || parse_i64(row[3], &l->hi) < 0 ||
        lc_lattice_parse(&l->lat, row[4], row[5], row[6]) < 0) {
        ctl_fail(v->c, VERIFY_FAIL, "%s: application_lease row %s: not a number", e->name,
                 row[0] ? row[0] : "NULL");
        v->failed = 1;
        return -1;
    }
    e->has_head = 1;
    return 0;
}

/* Start streaming e's leases that `where` selects, in order of `order`. 0 or -1 (reported). */
static int env_stream(struct verify *v, struct venv *e, const char *where, const char *order)
{
    char *sql = ctl_strf("SELECT id, application_id, lo, hi, %s "
                         "FROM application_lease WHERE %s ORDER BY %s",
                         e->has_lattice ? "delta, remainder, start_offset" : "NULL, NULL, NULL",
                         where, order);
    int rc = mysql_query(e->x.db, sql);

    free(sql);
    if (rc != 0 || !(e->res = mysql_use_result(e->x.db)))
        return fail_env(v, e, "reading application_lease");
    return env_next(v, e);
}

static void env_unstream(struct venv *e)
{
    if (e->res)
        mysql_free_result(e->res); /* reads what is left of the rows */
    e->res = NULL;
    e->has_head = 0;
}

/* One lease of the stream: counted, checked alone, swept, and covering its pool's IDs. */
static int take_lease(struct verify *v, struct venv *e)
{
    const struct lc_lease *l = &e->head;
    enum lc_bad bad = lc_lease_bad(l);

    v->leases++;
    if (!l->lat.known)
        v->unknown++;
    if (bad != LC_GOOD) {
        report_bad(v, l, bad);
        return 0;
    }
    if (lc_sweep_add(&v->sw, l) < 0)
        ctl_oom();
    if (e->pool.n)
        lc_pool_cover(&e->pool, l);
    return 0;
}

/* --- pools -------------------------------------------------------------- */

/* Environment e's pool of v->key, into e->pool (empty when e has no Redis). 0 or -1 (reported). */
static int pool_read(struct verify *v, struct venv *e)
{
    char pool[KEYS_MAX], where[400], err[CTL_MSG_MAX];
    const char *argv[4] = {"LRANGE", pool, "0", "-1"};
    redisReply *r = NULL;
    uint64_t *ids;
    size_t n = 0;

    lc_pool_free(&e->pool);
    if (!e->has_redis)
        return 0;
    keys_app(e->x.cfg.key_prefix, v->key, KEYS_POOL, pool, sizeof(pool));
    if (ctl_redis_keyed(&e->x, pool, 4, argv, &r, where, sizeof(where), err, sizeof(err)) != 0) {
        ctl_fail(v->c, VERIFY_FAIL, "%s: %s", e->name, err);
        v->failed = 1;
        return -1;
    }
    if (r->type != REDIS_REPLY_ARRAY) {
        ctl_fail(v->c, VERIFY_FAIL, "%s: %s: LRANGE %s: %s", e->name, where, pool,
                 r->type == REDIS_REPLY_ERROR ? r->str : "not a list");
        freeReplyObject(r);
        v->failed = 1;
        return -1;
    }
    ids = ctl_xcalloc(r->elements ? r->elements : 1, sizeof(*ids));
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *el = r->element[i];
        char *end;
        unsigned long long x;

        errno = 0;
        x = el->type == REDIS_REPLY_STRING && el->len > 0 && el->str[0] >= '0' && el->str[0] <= '9'
                ? strtoull(el->str, &end, 10)
                : (end = NULL, 0);
        if (!end || *end != '\0' || errno != 0) {
            char shown[80];
            report_pooled(
                v, e,
                ctl_printable(el->type == REDIS_REPLY_STRING ? el->str : "?", shown, sizeof(shown)),
                "is not an ID");
            continue;
        }
        ids[n++] = x;
    }
    v->pooled += r->elements;
    freeReplyObject(r);
    if (lc_pool_set(&e->pool, ids, n) < 0)
        ctl_oom();
    return 0;
}

/* Pooled IDs of e no lease covered: conflicts. */
static void pool_finish(struct verify *v, struct venv *e)
{
    for (size_t i = 0; i < e->pool.n; i++)
        if (!e->pool.hit[i]) {
            char u[24];
            report_pooled(v, e, ctl_u64(e->pool.ids[i], u),
                          "lies in no lease of the application on its lattice");
        }
    lc_pool_free(&e->pool);
}

/* --- the checks --------------------------------------------------------- */

/* The environment whose next lease has the lowest lo (NULL: all done). */
static struct venv *lowest(struct verify *v)
{
    struct venv *best = NULL;

    for (size_t i = 0; i < v->nenv; i++) {
        struct venv *e = &v->env[i];
        if (e->has_head && (!best || e->head.lo < best->head.lo))
            best = e;
    }
    return best;
}

/* Application `key` in every environment. 0, or -1 (reported). */
static int check_key(struct verify *v, const char *key)
{
    char *q = ctl_db_quote(&v->env[0].x, key), *where;
    struct venv *e;
    int rc = 0;

    if (!q)
        ctl_oom();
    v->key = key;
    v->apps++;
    lc_sweep_reset(&v->sw);
    for (size_t i = 0; i < v->nenv && rc == 0; i++)
        rc = pool_read(v, &v->env[i]);
    where = ctl_strf("entity_key = %s", q);
    free(q);
    for (size_t i = 0; i < v->nenv && rc == 0; i++)
        rc = env_stream(v, &v->env[i], where, "lo"); /* ix_key_lo's order */
    free(where);
    while (rc == 0 && (e = lowest(v)) != NULL) {
        take_lease(v, e);
        rc = env_next(v, e);
    }
    for (size_t i = 0; i < v->nenv; i++) {
        env_unstream(&v->env[i]);
        if (rc == 0)
            pool_finish(v, &v->env[i]);
        lc_pool_free(&v->env[i].pool);
    }
    return rc;
}

/*
 * Leases recorded without a key (of rows deleted before application_lease
 * had entity_key): within their environment, by application_id.
 */
static int check_unkeyed(struct verify *v, struct venv *e)
{
    int64_t app = -1;
    int rc;

    v->key = "";
    rc = env_stream(v, e, "entity_key = ''", "application_id, lo");
    while (rc == 0 && e->has_head) {
        if (e->head.app_id != app) {
            lc_sweep_reset(&v->sw);
            app = e->head.app_id;
        }
        v->unkeyed++;
        take_lease(v, e);
        rc = env_next(v, e);
    }
    env_unstream(e);
    return rc;
}

static void summary(struct verify *v)
{
    char envs[32], apps[32], leases[32], pooled[32], conf[32], unk[32], pairs[32], unkeyed[32];
    char extra[400] = "";

    grouped(v->nenv, envs, sizeof(envs));
    grouped(v->apps, apps, sizeof(apps));
    grouped(v->leases, leases, sizeof(leases));
    grouped(v->pooled, pooled, sizeof(pooled));
    grouped(v->conflicts, conf, sizeof(conf));
    grouped(v->unknown, unk, sizeof(unk));
    grouped(v->sw.pairs_unchecked, pairs, sizeof(pairs));
    grouped(v->unkeyed, unkeyed, sizeof(unkeyed));
    if (v->c->json) {
        cJSON *doc = ctl_jcheck(cJSON_CreateObject());

        ctl_jcheck(cJSON_AddBoolToObject(doc, "ok", v->conflicts == 0));
        ctl_json_u64(doc, "environments", v->nenv);
        ctl_json_u64(doc, "applications", v->apps);
        ctl_json_u64(doc, "leases", v->leases);
        ctl_json_u64(doc, "pooled_ids", v->pooled);
        ctl_json_u64(doc, "conflicts", v->conflicts);
        ctl_json_u64(doc, "leases_lattice_unknown", v->unknown);
        ctl_json_u64(doc, "pairs_unchecked", v->sw.pairs_unchecked);
        ctl_json_u64(doc, "leases_unkeyed", v->unkeyed);
        cJSON_AddItemToObject(doc, "listed", v->list);
        v->list = NULL;
        ctl_json_print(v->c, doc);
        return;
    }
    if (v->unknown)
        snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
                 "; %s leases from before the ledger recorded lattices (their lattice not "
                 "checked)",
                 unk);
    if (v->sw.pairs_unchecked)
        snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
                 "; %s overlaps of such a lease with another environment's unchecked", pairs);
    if (v->unkeyed)
        snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
                 "; %s leases without a key checked by row only", unkeyed);
    if (v->conflicts > VERIFY_LIST_MAX)
        printf("... and %" PRIu64 " more conflicts (the first %d listed)\n",
               v->conflicts - VERIFY_LIST_MAX, VERIFY_LIST_MAX);
    printf("verify: %s: %s environment%s, %s application%s, %s leases, %s pooled IDs checked; "
           "%s conflict%s%s\n",
           v->conflicts ? "FAILED" : "ok", envs, v->nenv == 1 ? "" : "s", apps,
           v->apps == 1 ? "" : "s", leases, pooled, conf, v->conflicts == 1 ? "" : "s", extra);
}

static int on_verify_opt(struct ctl *c, int id, const char *name, const char *value, void *arg)
{
    const char **specs = arg;
    size_t n = 0;

    (void)name;
    (void)id;
    while (n < VERIFY_MAX_ENVS && specs[n])
        n++;
    if (n == VERIFY_MAX_ENVS)
        return ctl_usage(c, "--env: at most %d environments", VERIFY_MAX_ENVS);
    if (!value[0] || value[0] == ',')
        return ctl_usage(c, "--env: a MySQL URL is needed, got '%.64s'", value);
    {
        char *mysql, *redis, err[512];
        struct mysql_url mu;
        struct redis_url ru;
        int bad = 0;

        env_urls(value, &mysql, &redis);
        if (mysql_url_parse(mysql, &mu, err, sizeof(err)) < 0)
            bad = 1;
        else
            mysql_url_free(&mu);
        if (!bad && redis && redis_url_parse(redis, &ru, err, sizeof(err)) < 0)
            bad = 1;
        else if (!bad && redis)
            redis_url_free(&ru);
        free(mysql);
        free(redis);
        if (bad) /* err never holds a password */
            return ctl_usage(c, "--env (environment %zu): %s", n + 1, err);
    }
    specs[n] = value;
    return 0;
}

int ctl_verify(struct ctl *c, int argc, char **argv)
{
    const char *specs[VERIFY_MAX_ENVS + 1] = {NULL};
    struct verify v = {.c = c};
    char **keys = NULL;
    size_t nkeys = 0, nspec = 0;
    int npos, rc;
    char *pos[1];

    rc = ctl_opts_parse(c, argc, argv, verify_opts, on_verify_opt, specs, pos, 0, &npos);
    if (rc != 0)
        return rc;
    if ((rc = ctl_setup(c)) != 0)
        return rc;
    while (specs[nspec])
        nspec++;
    v.nenv = nspec ? nspec : 1;
    v.env = ctl_xcalloc(v.nenv, sizeof(*v.env));
    lc_sweep_init(&v.sw, on_conflict, &v);
    if (c->json)
        v.list = ctl_jcheck(cJSON_CreateArray());
    for (size_t i = 0; i < v.nenv && rc == 0; i++) {
        v.env[i].idx = (int)i + 1;
        rc = env_setup(&v, &v.env[i], nspec ? specs[i] : NULL);
    }
    for (size_t i = 0; i < v.nenv && rc == 0; i++)
        rc = env_open(&v, &v.env[i]) < 0 ? VERIFY_FAIL : 0;
    if (rc == 0 && keys_all(&v, &keys, &nkeys) < 0)
        rc = VERIFY_FAIL;
    for (size_t k = 0; k < nkeys && rc == 0; k++)
        if (check_key(&v, keys[k]) < 0)
            rc = VERIFY_FAIL;
    for (size_t i = 0; i < v.nenv && rc == 0; i++)
        if (check_unkeyed(&v, &v.env[i]) < 0)
            rc = VERIFY_FAIL;
    if (rc == 0) {
        summary(&v);
        rc = v.conflicts ? CTL_ERROR : CTL_OK;
    }
    for (size_t k = 0; k < nkeys; k++)
        free(keys[k]);
    free(keys);
    for (size_t i = 0; i < v.nenv; i++) {
        env_unstream(&v.env[i]);
        lc_pool_free(&v.env[i].pool);
        free(v.env[i].x.gargv);
        if (v.env[i].aux)
            mysql_close(v.env[i].aux);
        ctl_close(&v.env[i].x);
    }
    free(v.env);
    lc_sweep_free(&v.sw);
    cJSON_Delete(v.list);
    return rc;
}

const char ctl_verify_help[] =
    "Usage: %s [global options] verify [--env MYSQL_URL[,REDIS_URL]]... [--json]\n"
    "\n"
    "Prove from the lease ledgers (table application_lease) that no ID can have been\n"
    "issued twice, or name each conflict. For every application key, computed over\n"
    "every lease, not sampled:\n"
    "  * within each environment no two leases of the key overlap (rows deleted and\n"
    "    added again under the key included), and each lease respects the lattice it\n"
    "    was taken on (delta >= 1, 0 <= remainder < delta, lo >= start_offset);\n"
    "  * across the environments given, the key's ID sets are disjoint: two leases\n"
    "    conflict when their ranges overlap and an ID of the overlap is on both\n"
    "    lattices (x %% delta == remainder for both; the first such ID is named);\n"
    "  * every ID now in a pool (Redis list <key-prefix>:{KEY}:pool) lies in a lease of\n"
    "    its application and environment, on its lattice.\n"
    "\n"
    "Each --env is one environment: its MySQL URL, and after a comma its Redis URL\n"
    "(redis://, redis-sentinel:// or redis-cluster://; without one, its pools are not\n"
    "checked). Without --env: the configured MySQL and Redis (--mysql, --redis). The\n"
    "key prefix and passwords are the global settings. Leases recorded before the\n"
    "ledger had the columns delta, remainder and start_offset are counted in the\n"
    "summary: their lattice is unknown and not checked.\n"
    "\n"
    "Prints one line per conflict (at most 1000; all are counted) and a summary line.\n"
    "Exit status: 0 no conflict, 1 conflicts, 2 usage error or an environment that\n"
    "cannot be read (named).\n";
