/*
 * ctl_explain — `idpoolctl explain`: where an ID came from, read from the
 * write-ahead ledger (application_lease) of each environment and, when a
 * Redis is given, from the pool and meta of the application there.
 *
 *   explain ID [--app KEY] [--env MYSQL_URL[,REDIS_URL] ...]
 *       per environment: the application(s) whose lease [lo, hi) holds ID
 *       (found per key through ix_key_hi: the lowest hi above ID), the
 *       lease's id, time and instance, whether ID is on the lattice the
 *       lease was taken on (off it: never issued), and what the pool says
 *       (LPOS: in it now; meta's next: pushed already or not yet). With
 *       --app and no lease holding ID: why (below start_offset, between two
 *       leases, above every lease).
 *   explain --app KEY --from TIME --to TIME
 *       the ranges leased with created_at in [from, to), contiguous ones
 *       merged, with the lattice IDs they hold.
 *
 * What the ledger cannot know: it records ranges, not IDs. A monotonic
 * application with increment_max > 1 skips IDs at random inside its
 * leases, so an ID of a lease that the pool has passed was either handed
 * out or skipped; a trend application pushes every lattice ID of a lease
 * it draws from, in whole blocks of step, but a lease's tail shorter than
 * a block, a lease never drawn from and a discarded pool are gaps too.
 *
 * The lattice (delta, remainder, start_offset) is the lease's own when
 * application_lease records it (columns probed once per environment),
 * else the row's now ("lattice as the row says now"); type, increment_max
 * and step are always the row's now.
 */
#include "ctl_explain.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "ctl_rows.h"
#include "keys.h"
#include "ledger.h"
#include "plan.h"

#define EXPLAIN_MAX_ENVS 16

enum { O_APP = 1, O_ENV, O_FROM, O_TO };

static const struct ctl_opt explain_opts[] = {
    {"app", 1, O_APP}, {"env", 1, O_ENV}, {"from", 1, O_FROM}, {"to", 1, O_TO}, {NULL, 0, 0},
};

struct explain_args {
    const char *app;
    const char *envs[EXPLAIN_MAX_ENVS];
    size_t nenv;
    const char *from, *to;
};

/* One environment: its own settings and connections. */
struct xenv {
    struct ctl x;
    int idx;         /* 1, 2, ... */
    char name[400];  /* "environment 2 (MySQL H:P/DB)" */
    char mysql[300]; /* "H:P/DB" */
    char redis[300]; /* "H:P" (a Sentinel set's, a Cluster's: the first given) */
    int has_redis;   /* a Redis to read the pools of */
    int has_lattice; /* application_lease has delta, remainder, start_offset */
    char *mysql_url; /* --env's parts (heap) */
    char *redis_url;
};

/* One row of application_lease. */
struct lease {
    int64_t id, app_id, lo, hi;
    char instance[256];
    char created[40]; /* UTC, ISO 8601 */
    struct ledger_lattice lat;
};

/* ---------------------------------------------------------------- lattice */

static void lattice_of_row(struct ledger_lattice *l, const struct ctl_row *r)
{
    l->known = r != NULL && r->row.delta >= 1 && r->row.remainder >= 0 &&
               r->row.remainder < r->row.delta && r->row.start_offset >= 0;
    l->source = "row now";
    if (l->known) {
        l->delta = (uint64_t)r->row.delta;
        l->remainder = (uint64_t)r->row.remainder;
        l->start = (uint64_t)r->row.start_offset;
    }
}

/* ----------------------------------------------------------- environments */

/* Split "MYSQL_URL[,REDIS_URL]" (a Redis URL starts with "redis"). */
static void env_urls(const char *spec, char **mysql, char **redis)
{
    const char *comma = strstr(spec, ",redis");

    *mysql = comma ? ctl_strf("%.*s", (int)(comma - spec), spec) : ctl_strf("%s", spec);
    *redis = comma ? ctl_strf("%s", comma + 1) : NULL;
}

/*
 * Environment e: the global settings, then its URLs (spec: --env, or NULL
 * for the global ones, Redis included), connected to MySQL; the lattice
 * columns probed. 0, or an exit code after reporting.
 */
static int env_open(struct ctl *c, struct xenv *e, const char *spec)
{
    struct ctl *x = &e->x;
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc;

    x->prog = c->prog;
    x->cmd = c->cmd;
    x->gargv = ctl_xcalloc((size_t)c->gargc + 5, sizeof(char *));
    memcpy(x->gargv, c->gargv, (size_t)c->gargc * sizeof(char *));
    x->gargc = c->gargc;
    e->has_redis = 1;
    if (spec) {
        env_urls(spec, &e->mysql_url, &e->redis_url);
        x->gargv[x->gargc++] = "--mysql";
        x->gargv[x->gargc++] = e->mysql_url;
        e->has_redis = e->redis_url != NULL;
        if (e->redis_url) {
            x->gargv[x->gargc++] = "--redis";
            x->gargv[x->gargc++] = e->redis_url;
        }
    }
    if ((rc = ctl_setup(x)) != 0 || (rc = ctl_db_open(x)) != 0) {
        snprintf(c->errmsg, sizeof(c->errmsg), "%s", x->errmsg);
        return rc;
    }
    snprintf(e->mysql, sizeof(e->mysql), "%s:%d/%s", x->cfg.mysql.host, x->cfg.mysql.port,
             x->cfg.mysql.db);
    snprintf(e->name, sizeof(e->name), "environment %d (MySQL %s)", e->idx, e->mysql);
    hostport_str(e->redis, sizeof(e->redis), x->cfg.redis.host, x->cfg.redis.port);
    if (mysql_query(x->db, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                           "DATABASE() AND TABLE_NAME = 'application_lease' AND COLUMN_NAME IN "
                           "('delta', 'remainder', 'start_offset')") != 0 ||
        !(res = mysql_store_result(x->db))) {
        return ctl_fail(c, CTL_ERROR, "%s: reading information_schema: %s", e->name,
                        mysql_error(x->db));
    }
    row = mysql_fetch_row(res);
    e->has_lattice = row && row[0] && strcmp(row[0], "3") == 0;
    mysql_free_result(res);
    return 0;
}

static void env_close(struct xenv *e)
{
    ctl_close(&e->x);
    free(e->x.gargv);
    free(e->mysql_url);
    free(e->redis_url);
}

static cJSON *env_json(const struct xenv *e)
{
    cJSON *o = ctl_jcheck(cJSON_CreateObject());

    ctl_json_i64(o, "environment", e->idx);
    ctl_jcheck(cJSON_AddStringToObject(o, "mysql", e->mysql));
    if (e->has_redis)
        ctl_jcheck(cJSON_AddStringToObject(o, "redis", e->redis));
    else
        ctl_jcheck(cJSON_AddNullToObject(o, "redis"));
    ctl_jcheck(cJSON_AddBoolToObject(o, "lattice_recorded", e->has_lattice));
    return o;
}

/* ------------------------------------------------------------------ MySQL */

/* One query's whole result, or NULL after reporting. */
static MYSQL_RES *query(struct ctl *c, struct xenv *e, const char *sql)
{
    MYSQL_RES *res;

    if (mysql_query(e->x.db, sql) != 0 || !(res = mysql_store_result(e->x.db))) {
        ctl_fail(c, CTL_ERROR, "%s: error %u: %s", e->name, mysql_errno(e->x.db),
                 mysql_error(e->x.db));
        return NULL;
    }
    return res;
}

/* created_at as UTC ISO 8601: MySQL wrote it in the server's session zone. */
#define CREATED_UTC                                                                                \
    "DATE_FORMAT(CONVERT_TZ(created_at, @@session.time_zone, '+00:00'), "                          \
    "'%Y-%m-%dT%H:%i:%s.%fZ')"

/* The columns lease_read() reads, then `more` (e->has_lattice: the lattice's too). */
static const char *lease_cols(const struct xenv *e)
{
    return e->has_lattice ? "id, application_id, lo, hi, instance, " CREATED_UTC
                            ", delta, remainder, start_offset"
                          : "id, application_id, lo, hi, instance, " CREATED_UTC;
}

/* A row of lease_cols() into *l; its lattice the recorded one, else `row_lat` (NULL: unknown). */
static int lease_read(const struct xenv *e, MYSQL_ROW row, const struct ledger_lattice *row_lat,
                      struct lease *l)
{
    size_t n;

    memset(l, 0, sizeof(*l));
    for (int i = 0; i < 4; i++)
        if (!row[i])
            return -1;
    if (ctl_parse_i64(row[0], &l->id) || ctl_parse_i64(row[1], &l->app_id) ||
        ctl_parse_i64(row[2], &l->lo) || ctl_parse_i64(row[3], &l->hi))
        return -1;
    snprintf(l->instance, sizeof(l->instance), "%s", row[4] ? row[4] : "");
    snprintf(l->created, sizeof(l->created), "%s", row[5] ? row[5] : "?");
    n = strlen(l->created); /* microseconds to milliseconds, as the column keeps them */
    if (n == 27 && l->created[n - 1] == 'Z')
        memmove(l->created + 23, "Z", 2);
    if (row_lat)
        l->lat = *row_lat;
    if (e->has_lattice && row[6] && row[7] && row[8]) {
        int64_t d, r, s;

        if (ctl_parse_i64(row[6], &d) || ctl_parse_i64(row[7], &r) || ctl_parse_i64(row[8], &s))
            return -1;
        l->lat.known = d >= 1 && r >= 0 && r < d && s >= 0;
        l->lat.source = "lease";
        l->lat.delta = (uint64_t)d;
        l->lat.remainder = (uint64_t)r;
        l->lat.start = (uint64_t)s;
    }
    return 0;
}

/*
 * The first lease of key in e's ledger chosen by `where_order` (" AND hi >
 * N ORDER BY hi LIMIT 1"), into *l: 1 found, 0 none, -1 error (reported).
 */
static int lease_find(struct ctl *c, struct xenv *e, const char *qkey, const char *where_order,
                      const struct ledger_lattice *row_lat, struct lease *l)
{
    char *sql = ctl_strf("SELECT %s FROM application_lease WHERE entity_key = %s%s", lease_cols(e),
                         qkey, where_order);
    MYSQL_RES *res = query(c, e, sql);
    MYSQL_ROW row;
    int found = 0;

    free(sql);
    if (!res)
        return -1;
    if ((row = mysql_fetch_row(res))) {
        if (lease_read(e, row, row_lat, l) != 0) {
            mysql_free_result(res);
            ctl_fail(c, CTL_ERROR, "%s: application_lease: a row is not numbers", e->name);
            return -1;
        }
        found = 1;
    }
    mysql_free_result(res);
    return found;
}

/* The application keys of e (of its ledger and its table), into *keys (heap). -1 on error. */
static int keys_all(struct ctl *c, struct xenv *e, char ***keys, size_t *n)
{
    MYSQL_RES *res = query(c, e,
                           "SELECT entity_key FROM application_lease WHERE entity_key <> '' "
                           "UNION SELECT entity_key FROM application");
    MYSQL_ROW row;
    size_t i = 0;

    *keys = NULL;
    *n = 0;
    if (!res)
        return -1;
    *keys = ctl_xcalloc(mysql_num_rows(res) + 1, sizeof(char *));
    while ((row = mysql_fetch_row(res)))
        if (row[0] && row[0][0])
            (*keys)[i++] = ctl_strf("%s", row[0]);
    *n = i;
    mysql_free_result(res);
    return 0;
}

static void keys_free(char **keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

/* The row of key in e (*have 0 when there is none). 0, or an exit code. */
static int row_of(struct xenv *e, const char *key, struct ctl_row *out, int *have)
{
    struct ctl_row *rows = NULL;
    size_t n = 0;
    int rc = ctl_rows_load(&e->x, key, 0, &rows, &n);

    *have = rc == 0 && n > 0;
    if (*have)
        *out = rows[0];
    free(rows);
    return rc;
}

/* ------------------------------------------------------------------ Redis */

/* What the pool of an application says about one ID. */
struct pool_view {
    int read;                      /* Redis was read */
    char error[CTL_MSG_MAX + 512]; /* why not, when it was to be */
    int in_pool;                   /* LPOS found the ID */
    long long pos;                 /* ... at this index */
    int have_meta;                 /* meta holds progress */
    struct gen_state st;
};

static void pool_read(struct xenv *e, const char *key, uint64_t id, struct pool_view *v)
{
    char pool[KEYS_MAX], meta[KEYS_MAX], idtxt[24], where[400];
    const char *lpos[3] = {"LPOS", pool, idtxt}, *hgetall[2] = {"HGETALL", meta};
    redisReply *a = NULL, *b = NULL;
    struct plan_meta m;

    memset(v, 0, sizeof(*v));
    if (!e->has_redis) {
        snprintf(v->error, sizeof(v->error), "no Redis URL given for this environment");
        return;
    }
    if (!e->x.rds && !e->x.route && ctl_redis_open(&e->x) != 0) {
        snprintf(v->error, sizeof(v->error), "%s", e->x.errmsg);
        return;
    }
    keys_app(e->x.cfg.key_prefix, key, KEYS_POOL, pool, sizeof(pool));
    keys_app(e->x.cfg.key_prefix, key, KEYS_META, meta, sizeof(meta));
    ctl_u64(id, idtxt);
    if (ctl_redis_keyed(&e->x, pool, 3, lpos, &a, where, sizeof(where), v->error,
                        sizeof(v->error)) != 0 ||
        ctl_redis_keyed(&e->x, meta, 2, hgetall, &b, where, sizeof(where), v->error,
                        sizeof(v->error)) != 0)
        goto done;
    if (a->type == REDIS_REPLY_ERROR || b->type == REDIS_REPLY_ERROR) {
        snprintf(v->error, sizeof(v->error), "%s: %s", where,
                 a->type == REDIS_REPLY_ERROR ? a->str : b->str);
        goto done;
    }
    v->read = 1;
    v->in_pool = a->type == REDIS_REPLY_INTEGER;
    v->pos = v->in_pool ? a->integer : -1;
    plan_meta_init(&m);
    for (size_t i = 0; b->type == REDIS_REPLY_ARRAY && i + 1 < b->elements; i += 2)
        if (b->element[i]->type == REDIS_REPLY_STRING &&
            b->element[i + 1]->type == REDIS_REPLY_STRING)
            plan_meta_field(&m, b->element[i]->str, b->element[i]->len, b->element[i + 1]->str,
                            b->element[i + 1]->len);
    v->have_meta = plan_meta_end(&m, &v->st) == PLAN_META_OK;
done:
    freeReplyObject(a);
    freeReplyObject(b);
}

/* ---------------------------------------------------------------- explain */

/* One application's answer (a JSON object; text lines printed as it goes). */
struct answer {
    struct ctl *c;
    cJSON *o;
};

static void say(struct answer *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct answer *a, const char *fmt, ...)
{
    va_list ap;

    if (a->c->json)
        return;
    printf("    ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static void verdict_set(struct answer *a, enum ledger_verdict v, const char *why)
{
    ctl_jcheck(cJSON_AddStringToObject(a->o, "verdict", ledger_verdict_name(v)));
    ctl_jcheck(cJSON_AddStringToObject(a->o, "explanation", why));
    if (v == LEDGER_IN_POOL || v == LEDGER_NOT_YET_PUSHED)
        ctl_jcheck(cJSON_AddTrueToObject(a->o, "can_be_in_pool"));
    else if (v == LEDGER_LEASED)
        ctl_jcheck(cJSON_AddNullToObject(a->o, "can_be_in_pool"));
    else
        ctl_jcheck(cJSON_AddFalseToObject(a->o, "can_be_in_pool"));
    say(a, "=> %s: %s", ledger_verdict_name(v), why);
}

static void row_describe(struct answer *a, const char *key, const struct ctl_row *r, int have)
{
    char k[260], id[24], s[24];

    if (!have) {
        ctl_jcheck(cJSON_AddNullToObject(a->o, "row"));
        say(a, "application '%s': no row now (deleted): type and increment_max unknown",
            ctl_printable(key, k, sizeof(k)));
        return;
    }
    {
        cJSON *o = ctl_jcheck(cJSON_AddObjectToObject(a->o, "row"));
        const char *tn = ctl_type_name(r->row.increasing_type);

        ctl_json_i64(o, "id", r->row.id);
        ctl_jcheck(cJSON_AddStringToObject(o, "state", ctl_row_state(r)));
        ctl_jcheck(cJSON_AddStringToObject(o, "type", tn ? tn : "?"));
        ctl_json_i64(o, "increment_max", r->row.increment_max);
        ctl_json_i64(o, "step", r->row.step);
        ctl_json_offset(o, "start_offset", (uint64_t)r->row.start_offset);
        ctl_json_offset(o, "delta", (uint64_t)r->row.delta);
        ctl_json_offset(o, "remainder", (uint64_t)r->row.remainder);
        say(a, "application '%s' (row %s, %s, %s, increment_max %" PRId64 ", step %s)",
            ctl_printable(key, k, sizeof(k)), ctl_i64(r->row.id, id), ctl_row_state(r),
            tn ? tn : "type ?", r->row.increment_max, ctl_i64(r->row.step, s));
    }
}

static void lease_describe(struct answer *a, const char *name, const struct lease *l,
                           const char *what)
{
    cJSON *o = ctl_jcheck(cJSON_AddObjectToObject(a->o, name));
    char lo[24], hi[24];

    ctl_json_i64(o, "id", l->id);
    ctl_json_i64(o, "application_id", l->app_id);
    ctl_json_offset(o, "lo", (uint64_t)l->lo);
    ctl_json_offset(o, "hi", (uint64_t)l->hi);
    ctl_jcheck(cJSON_AddStringToObject(o, "created_at", l->created));
    ctl_jcheck(cJSON_AddStringToObject(o, "instance", l->instance));
    say(a, "%s lease %" PRId64 " [%s, %s) of row %" PRId64 ", taken %s by '%s'", what, l->id,
        ctl_i64(l->lo, lo), ctl_i64(l->hi, hi), l->app_id, l->created, l->instance);
}

static void lattice_describe(struct answer *a, const struct ledger_lattice *l, uint64_t id)
{
    char d[24], r[24], s[24];
    cJSON *o;

    if (!l->known) {
        ctl_jcheck(cJSON_AddNullToObject(a->o, "lattice"));
        ctl_jcheck(cJSON_AddNullToObject(a->o, "on_lattice"));
        say(a, "lattice unknown (no lattice recorded with the lease, and no valid row)");
        return;
    }
    o = ctl_jcheck(cJSON_AddObjectToObject(a->o, "lattice"));
    ctl_json_offset(o, "delta", l->delta);
    ctl_json_offset(o, "remainder", l->remainder);
    ctl_json_offset(o, "start_offset", l->start);
    ctl_jcheck(cJSON_AddStringToObject(o, "source", l->source));
    ctl_jcheck(cJSON_AddBoolToObject(a->o, "on_lattice", ledger_on_lattice(l, id)));
    say(a, "%s the lattice: delta %s, remainder %s, start_offset %s (%s)",
        ledger_on_lattice(l, id) ? "on" : "OFF", ctl_u64(l->delta, d), ctl_u64(l->remainder, r),
        ctl_u64(l->start, s),
        strcmp(l->source, "lease") == 0 ? "as the lease recorded it"
                                        : "lattice as the row says now");
}

static void pool_describe(struct answer *a, const struct pool_view *v)
{
    cJSON *o = ctl_jcheck(cJSON_AddObjectToObject(a->o, "pool"));
    char n[24], h[24], nl[24], nh[24], pre[64] = "";

    ctl_jcheck(cJSON_AddBoolToObject(o, "read", v->read));
    if (!v->read) {
        ctl_jcheck(cJSON_AddStringToObject(o, "error", v->error));
        say(a, "pool not read: %s", v->error);
        return;
    }
    ctl_jcheck(cJSON_AddBoolToObject(o, "in_pool", v->in_pool));
    if (v->in_pool)
        ctl_json_i64(o, "position", v->pos);
    if (v->have_meta) {
        ctl_json_offset(o, "next", v->st.next);
        ctl_json_offset(o, "hi", v->st.hi);
        if (gen_has_next(&v->st)) {
            ctl_json_offset(o, "nlo", v->st.nlo);
            ctl_json_offset(o, "nhi", v->st.nhi);
        }
        if (gen_has_next(&v->st))
            snprintf(pre, sizeof(pre), ", prefetched [%s, %s)", ctl_u64(v->st.nlo, nl),
                     ctl_u64(v->st.nhi, nh));
        say(a, "pool: %s; meta: next %s, lease up to %s%s",
            v->in_pool ? "holds the ID" : "does not hold the ID", ctl_u64(v->st.next, n),
            ctl_u64(v->st.hi, h), pre);
    } else {
        ctl_jcheck(cJSON_AddNullToObject(o, "next"));
        say(a, "pool: %s; meta holds no progress",
            v->in_pool ? "holds the ID" : "does not hold the ID");
    }
}

/* The verdict on an ID inside lease l of an application (row r if have), and why. */
static void judge_leased(struct answer *a, const struct lease *l, const struct ctl_row *r, int have,
                         const struct pool_view *v, uint64_t id)
{
    int trend = have && r->row.increasing_type == APP_TREND;
    struct ledger_facts f = {&l->lat,      !have || (!trend && r->row.increment_max > 1),
                             v->read,      v->in_pool,
                             v->have_meta, v->st};
    enum ledger_verdict verdict = ledger_judge(&f, id);
    char why[600], im[24];

    switch (verdict) {
    case LEDGER_OFF_LATTICE:
        snprintf(why, sizeof(why),
                 "not on the lattice of the lease: idpool never generated this ID here");
        break;
    case LEDGER_LEASED:
        snprintf(why, sizeof(why),
                 "leased here; whether it is in the pool, was handed out or was skipped needs the "
                 "environment's Redis%s",
                 f.gaps ? " (the ledger records ranges, not IDs)" : "");
        break;
    case LEDGER_IN_POOL:
        snprintf(why, sizeof(why), "in the pool now: not handed out yet");
        break;
    case LEDGER_NOT_YET_PUSHED:
        snprintf(why, sizeof(why),
                 "in the pool's current or prefetched lease, not below meta's next: not pushed "
                 "yet; %s",
                 f.gaps ? "it may still be pushed, or skipped (a gap)" : "it will be");
        break;
    case LEDGER_NOT_PUSHED:
        snprintf(why, sizeof(why),
                 "leased but not a lease the pool holds: never pushed (unless an idpoold keeps "
                 "this range as its failover reserve)");
        break;
    case LEDGER_ISSUED_OR_SKIPPED:
        if (!v->have_meta)
            snprintf(why, sizeof(why),
                     "the pool holds no progress (no meta: the application is deleted or Redis "
                     "lost its state): the ID was handed out, or never pushed; it will not be "
                     "pushed again (a new lease starts above every lease)");
        else
            snprintf(why, sizeof(why),
                     "the pool passed it: it was handed out, or skipped: monotonic with "
                     "increment_max %s skips at random between IDs and the ledger records "
                     "ranges, not IDs, so which cannot be known from the ledger",
                     have ? ctl_i64(r->row.increment_max, im) : "unknown (no row)");
        break;
    default: /* LEDGER_ISSUED */
        snprintf(why, sizeof(why),
                 "the pool passed it: handed out (%s pushes every lattice ID of the leases it "
                 "draws from; only a pool discarded before its IDs were taken%s leaves gaps)",
                 trend ? "trend" : "monotonic with increment_max 1",
                 trend ? " or a lease's tail shorter than a block of step" : "");
        break;
    }
    verdict_set(a, verdict, why);
}

/* The verdict on an ID in no lease of key (prev/next: the leases around it). */
static void judge_unleased(struct answer *a, const struct ledger_lattice *row_lat, int have_prev,
                           const struct lease *prev, int have_next, const struct lease *next,
                           uint64_t id)
{
    const char *reason, *why;
    uint64_t first = row_lat->known && row_lat->start > APP_ID_MIN ? row_lat->start : APP_ID_MIN;

    if (row_lat->known && id < first) {
        reason = "below_start_offset";
        why = "below the application's start_offset: never issued";
    } else if (!have_prev && !have_next) {
        reason = "no_lease";
        why = "the application has no lease here: never issued";
    } else if (have_prev && have_next) {
        reason = "between_leases";
        why = "between two leases (a skipped range: a reservation whose outcome was unknown, or "
              "current_offset raised): never issued";
    } else if (have_next) {
        reason = "below_first_lease";
        why = "below the application's first lease: never issued";
    } else {
        reason = "above_leases";
        why = "above every lease: not leased yet (a later lease may hold it)";
    }
    if (have_prev)
        lease_describe(a, "lease_before", prev, "after");
    if (have_next)
        lease_describe(a, "lease_after", next, "before");
    ctl_jcheck(cJSON_AddStringToObject(a->o, "reason", reason));
    verdict_set(a, LEDGER_NEVER_LEASED, why);
}

/*
 * Explain id in application key of e: 1 when a lease of key holds it (or
 * explained anyway: all), 0 when not (nothing added), -1 on error.
 */
static int explain_key(struct ctl *c, struct xenv *e, const char *key, uint64_t id, int all,
                       cJSON *apps)
{
    struct ctl_row r;
    struct ledger_lattice row_lat;
    struct lease l, prev;
    struct pool_view v;
    struct answer a = {c, NULL};
    char *qkey = ctl_db_quote(&e->x, key), cond[160];
    int have, found, have_prev = 0, rc = -1;

    if (!qkey)
        ctl_oom();
    snprintf(cond, sizeof(cond), " AND hi > %" PRIu64 " ORDER BY hi LIMIT 1", id);
    found = lease_find(c, e, qkey, cond, NULL, &l);
    if (found < 0 || (found == 0 && !all) || (found == 1 && l.lo > (int64_t)id && !all)) {
        rc = found < 0 ? -1 : 0;
        goto done;
    }
    if (row_of(e, key, &r, &have) != 0) {
        snprintf(c->errmsg, sizeof(c->errmsg), "%s", e->x.errmsg);
        goto done;
    }
    lattice_of_row(&row_lat, have ? &r : NULL);
    if (found == 1 && !l.lat.source) /* not recorded with the lease */
        l.lat = row_lat;
    a.o = ctl_jcheck(cJSON_CreateObject());
    cJSON_AddItemToArray(apps, a.o);
    ctl_jcheck(cJSON_AddStringToObject(a.o, "application", key));
    row_describe(&a, key, &r, have);
    if (found == 1 && l.lo <= (int64_t)id) {
        lease_describe(&a, "lease", &l, "in");
        lattice_describe(&a, &l.lat, id);
        memset(&v, 0, sizeof(v));
        if (!l.lat.known || ledger_on_lattice(&l.lat, id)) { /* off it, the pool cannot tell */
            pool_read(e, key, id, &v);
            pool_describe(&a, &v);
        }
        judge_leased(&a, &l, &r, have, &v, id);
        rc = 1;
        goto done;
    }
    snprintf(cond, sizeof(cond), " AND hi <= %" PRIu64 " ORDER BY hi DESC LIMIT 1", id);
    if ((have_prev = lease_find(c, e, qkey, cond, &row_lat, &prev)) < 0)
        goto done;
    lattice_describe(&a, &row_lat, id);
    judge_unleased(&a, &row_lat, have_prev, &prev, found, &l, id);
    rc = 1;
done:
    free(qkey);
    return rc;
}

/* explain ID in one environment. 0, or an exit code. */
static int explain_env(struct ctl *c, struct xenv *e, const char *app, uint64_t id, cJSON *envs)
{
    cJSON *o = env_json(e), *apps;
    char **keys = NULL;
    size_t nk = 0, n = 0;
    int rc;

    cJSON_AddItemToArray(envs, o);
    apps = ctl_jcheck(cJSON_AddArrayToObject(o, "applications"));
    if (!c->json)
        printf("%s, %s%s:\n", e->name, e->has_redis ? "Redis " : "no Redis given",
               e->has_redis ? e->redis : "");
    if (app) {
        if (explain_key(c, e, app, id, 1, apps) < 0)
            return CTL_ERROR;
        return 0;
    }
    if (keys_all(c, e, &keys, &nk) != 0)
        return CTL_ERROR;
    for (size_t i = 0; i < nk; i++) {
        if ((rc = explain_key(c, e, keys[i], id, 0, apps)) < 0) {
            keys_free(keys, nk);
            return CTL_ERROR;
        }
        n += (size_t)rc;
    }
    keys_free(keys, nk);
    ctl_jcheck(cJSON_AddBoolToObject(o, "never_leased", n == 0));
    if (n == 0 && !c->json)
        printf("    => never_leased: no lease of any application holds it here: never issued\n");
    return 0;
}

/* ----------------------------------------------------------- time windows */

/* One merged range of the window. */
struct span {
    int64_t lo, hi;
    uint64_t ids; /* lattice IDs */
    size_t leases;
    char first[40], last[40]; /* created_at of its first and last lease */
};

/* explain --app KEY --from --to in one environment. 0, or an exit code. */
static int window_env(struct ctl *c, struct xenv *e, const char *key, const char *from,
                      const char *to, cJSON *envs)
{
    cJSON *o = env_json(e), *arr;
    struct ctl_row r = {0};
    struct ledger_lattice row_lat;
    struct span cur = {0};
    char *qkey, *sql;
    MYSQL_RES *res;
    MYSQL_ROW row;
    uint64_t total = 0;
    size_t nleases = 0, nspans = 0;
    int have, recorded = 0;

    cJSON_AddItemToArray(envs, o);
    arr = ctl_jcheck(cJSON_AddArrayToObject(o, "ranges"));
    if (row_of(e, key, &r, &have) != 0) {
        snprintf(c->errmsg, sizeof(c->errmsg), "%s", e->x.errmsg);
        return CTL_ERROR;
    }
    lattice_of_row(&row_lat, have ? &r : NULL);
    if (!(qkey = ctl_db_quote(&e->x, key)))
        ctl_oom();
    sql = ctl_strf("SELECT %s FROM application_lease WHERE entity_key = %s AND created_at >= "
                   "CONVERT_TZ(%s, '+00:00', @@session.time_zone) AND created_at < "
                   "CONVERT_TZ(%s, '+00:00', @@session.time_zone) ORDER BY lo",
                   lease_cols(e), qkey, from, to);
    free(qkey);
    res = query(c, e, sql);
    free(sql);
    if (!res)
        return CTL_ERROR;
    if (!c->json)
        printf("%s: application '%s', leases taken in the window:\n", e->name, key);
    for (;;) {
        struct lease l;
        int end = (row = mysql_fetch_row(res)) == NULL;

        if (!end && lease_read(e, row, &row_lat, &l) != 0) {
            mysql_free_result(res);
            return ctl_fail(c, CTL_ERROR, "%s: application_lease: a row is not numbers", e->name);
        }
        if (cur.leases > 0 && (end || l.lo != cur.hi)) {
            cJSON *s = ctl_jcheck(cJSON_CreateObject());
            char lo[24], hi[24];

            ctl_json_offset(s, "lo", (uint64_t)cur.lo);
            ctl_json_offset(s, "hi", (uint64_t)cur.hi);
            ctl_json_u64(s, "lattice_ids", cur.ids);
            ctl_json_u64(s, "leases", cur.leases);
            ctl_jcheck(cJSON_AddStringToObject(s, "first_taken", cur.first));
            ctl_jcheck(cJSON_AddStringToObject(s, "last_taken", cur.last));
            cJSON_AddItemToArray(arr, s);
            if (!c->json)
                printf("    [%s, %s)  %" PRIu64 " lattice IDs, %zu lease%s, taken %s .. %s\n",
                       ctl_i64(cur.lo, lo), ctl_i64(cur.hi, hi), cur.ids, cur.leases,
                       cur.leases == 1 ? "" : "s", cur.first, cur.last);
            nspans++;
            cur.leases = 0;
        }
        if (end)
            break;
        if (cur.leases == 0) {
            cur.lo = l.lo;
            cur.ids = 0;
            snprintf(cur.first, sizeof(cur.first), "%s", l.created);
        }
        cur.hi = l.hi;
        if (l.lat.known)
            cur.ids += ledger_lattice_count(&l.lat, (uint64_t)l.lo, (uint64_t)l.hi);
        recorded += strcmp(l.lat.source ? l.lat.source : "", "lease") == 0;
        cur.leases++;
        nleases++;
        snprintf(cur.last, sizeof(cur.last), "%s", l.created);
        total += l.lat.known ? ledger_lattice_count(&l.lat, (uint64_t)l.lo, (uint64_t)l.hi) : 0;
    }
    mysql_free_result(res);
    ctl_json_u64(o, "leases", nleases);
    ctl_json_u64(o, "lattice_ids", total);
    ctl_jcheck(cJSON_AddStringToObject(o, "lattice_source",
                                       (size_t)recorded == nleases ? "lease" : "row now"));
    if (!c->json) {
        if (nspans == 0)
            printf("    (none)\n");
        printf("    %zu lease%s, %" PRIu64 " lattice IDs (%s)%s\n", nleases,
               nleases == 1 ? "" : "s", total,
               (size_t)recorded == nleases ? "lattice as the leases recorded it"
                                           : "lattice as the row says now",
               have && r.row.increasing_type == APP_MONOTONIC && r.row.increment_max > 1
                   ? "; monotonic with gaps: fewer IDs were handed out"
                   : "");
    }
    return 0;
}

/* ------------------------------------------------------------------ entry */

static int on_opt(struct ctl *c, int id, const char *name, const char *value, void *arg)
{
    struct explain_args *x = arg;

    (void)name;
    switch (id) {
    case O_APP:
        if (!app_key_valid(value))
            return ctl_usage(c, "--app: not an application key: '%.64s'", value);
        x->app = value;
        break;
    case O_ENV:
        if (x->nenv == EXPLAIN_MAX_ENVS)
            return ctl_usage(c, "--env: at most %d environments", EXPLAIN_MAX_ENVS);
        x->envs[x->nenv++] = value;
        break;
    case O_FROM:
        x->from = value;
        break;
    case O_TO:
        x->to = value;
        break;
    }
    return 0;
}

int ctl_explain(struct ctl *c, int argc, char **argv)
{
    struct explain_args x = {0};
    struct xenv env[EXPLAIN_MAX_ENVS];
    char *pos[1], from[160], to[160];
    size_t nenv;
    int npos, rc = 0;
    int64_t id = 0;
    cJSON *doc, *envs;

    rc = ctl_opts_parse(c, argc, argv, explain_opts, on_opt, &x, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (x.from || x.to) {
        if (npos > 0)
            return ctl_usage(c, "an ID or a window (--from, --to), not both");
        if (!x.app || !x.from || !x.to)
            return ctl_usage(c, "a window takes --app KEY, --from TIME and --to TIME");
        if (ledger_time_sql(x.from, from, sizeof(from)) != 0)
            return ctl_usage(c,
                             "--from: not a time: '%.64s' (2026-11-29T10:00:00Z, a date, "
                             "now, now-1h)",
                             x.from);
        if (ledger_time_sql(x.to, to, sizeof(to)) != 0)
            return ctl_usage(c,
                             "--to: not a time: '%.64s' (2026-11-29T10:00:00Z, a date, now, "
                             "now-1h)",
                             x.to);
    } else if (npos != 1) {
        return ctl_usage(c, "missing ID (or --app KEY --from TIME --to TIME)");
    } else if (ctl_parse_i64(pos[0], &id) != 0 || id < 0) {
        return ctl_usage(c, "not an ID: '%.64s' (a decimal integer, 0..2^63-1)", pos[0]);
    }
    if ((rc = ctl_setup(c)) != 0)
        return rc;
    nenv = x.nenv ? x.nenv : 1;
    memset(env, 0, sizeof(env));
    doc = ctl_jcheck(cJSON_CreateObject());
    if (npos == 1)
        ctl_json_offset(doc, "id", (uint64_t)id);
    else {
        ctl_jcheck(cJSON_AddStringToObject(doc, "application", x.app));
        ctl_jcheck(cJSON_AddStringToObject(doc, "from", x.from));
        ctl_jcheck(cJSON_AddStringToObject(doc, "to", x.to));
    }
    envs = ctl_jcheck(cJSON_AddArrayToObject(doc, "environments"));
    for (size_t i = 0; i < nenv && rc == 0; i++) {
        env[i].idx = (int)i + 1;
        if ((rc = env_open(c, &env[i], x.nenv ? x.envs[i] : NULL)) != 0)
            break;
        rc = npos == 1 ? explain_env(c, &env[i], x.app, (uint64_t)id, envs)
                       : window_env(c, &env[i], x.app, from, to, envs);
    }
    for (size_t i = 0; i < nenv; i++)
        env_close(&env[i]);
    if (rc != 0) {
        cJSON_Delete(doc);
        return rc;
    }
    if (c->json)
        ctl_json_print(c, doc);
    else
        cJSON_Delete(doc);
    return 0;
}

const char ctl_explain_help[] =
    "Usage: %s [global options] explain ID [--app KEY] [--env MYSQL_URL[,REDIS_URL]]... "
    "[--json]\n"
    "\n"
    "   or: %s [global options] explain --app KEY --from TIME --to TIME [--env ...]\n"
    "\n"
    "Where an ID came from, from the ledger of leases (application_lease): per\n"
    "environment, the application whose lease holds it, the lease's id, range [lo, hi),\n"
    "when it was taken and by which idpoold instance, whether the ID is on the\n"
    "application's lattice (id %% delta = remainder, >= start_offset; off it: never\n"
    "issued) and, when the environment's Redis is known, whether it is in the pool now\n"
    "(LPOS) or the pool has passed it (meta's next). Verdicts: in_pool, not_yet_pushed,\n"
    "not_pushed, issued, issued_or_skipped, leased (Redis not read), off_lattice,\n"
    "never_leased (with the reason: below_start_offset, below_first_lease,\n"
    "between_leases, above_leases, no_lease).\n"
    "\n"
    "The ledger records ranges, not IDs: a monotonic application with increment_max > 1\n"
    "skips IDs at random, so an ID the pool has passed was handed out or skipped\n"
    "(issued_or_skipped) and nothing can tell which. A trend application pushes every\n"
    "lattice ID of the leases it draws from, in whole blocks of step.\n"
    "\n"
    "With --from and --to: the ranges of KEY leased with created_at in [from, to),\n"
    "contiguous leases merged, with the number of lattice IDs they hold (an upper\n"
    "bound of the IDs handed out). TIME is UTC: 2026-11-29T10:00:00Z, 2026-11-29\n"
    "(midnight), now, now-90s, now-30m, now-1h, now-7d.\n"
    "\n"
    "Options:\n"
    "  --app KEY        only this application; without it every application whose\n"
    "                   lease holds the ID is named\n"
    "  --env MYSQL_URL[,REDIS_URL]\n"
    "                   an environment (repeat for several; the answer is per\n"
    "                   environment); without --env, the configured MySQL and Redis;\n"
    "                   without a REDIS_URL the pool is not read\n"
    "  --from TIME      start of the window (inclusive)\n"
    "  --to TIME        end of the window (exclusive)\n"
    "\n"
    "The lattice is the one recorded with each lease when application_lease has the\n"
    "columns delta, remainder and start_offset, else the row's now (said so). Exit 0\n"
    "with an answer (never_leased included), 1 when a server cannot be read.\n";
