#define _GNU_SOURCE /* vasprintf */
#include "pool.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "health.h"
#include "idspace.h"
#include "keys.h"
#include "log.h"
#include "node.h"
#include "rds.h"
#include "runway.h"
#include "store.h"

/* A row whose entity_key is invalid, remembered by id so it is logged once per change. */
struct bad_key {
    int64_t id;
    char *key; /* the key as stored (heap; any bytes but NUL) */
    char *err;
    int seen; /* present in the load being applied */
};

struct pools {
    struct pools_env env;
    char *prefix;    /* key prefix (heap) */
    struct pool **v; /* every pool */
    size_t n, cap;
    struct pool **index;      /* open-addressing hash of the pools by key, rebuilt per load */
    size_t index_cap;         /* its size: a power of two, at least twice the entries */
    int loading;              /* a load job is in flight */
    int again;                /* load once more when the one in flight ends (pools_reload) */
    int loaded;               /* rows were loaded at least once */
    uint64_t loads_begun;     /* loads started (the one in flight included) */
    uint64_t loads_done;      /* loads ended, successful or not */
    int stopping;             /* no more loads */
    char *load_err;           /* last load error, logged once per change */
    struct bad_key *bad_keys; /* rows whose entity_key is invalid (no pool to hold the error) */
    size_t nbad_keys;
    size_t last_live, last_bad;
    int ledger_loading;    /* a ledger job is in flight */
    int ledger_due;        /* read the ledger with the next load (SIGHUP) */
    uint64_t ledger_at_ms; /* when the ledger was last asked for (0: never) */
    char *ledger_err;      /* last ledger error, logged once per change */
};

/*
 * The lease ledger is read with a row load at most this often (and at
 * start, on SIGHUP): its growth is measured over days, so once a minute is
 * plenty, and keeps its few index lookups per application off MySQL.
 */
#define LEDGER_READ_MS  60000
#define LEDGER_RETRY_MS 10000 /* after a failed read of the ledger */

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *str_printf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* --- pools --------------------------------------------------------------- */

static void pool_free(struct pool *p)
{
    health_pool_free(p);
    plan_batch_free(&p->run.batch);
    free(p->run.expected);
    free(p->k_pool);
    free(p->k_meta);
    free(p->k_lock);
    free(p->llen_cmd);
    free(p->bad);
    free(p);
}

static struct pool *pool_new(struct pools *reg, const char *key)
{
    struct pool *p = calloc(1, sizeof(*p));
    size_t n = strnlen(key, sizeof(p->cfg.key) - 1);

    if (!p)
        return NULL;
    p->reg = reg;
    p->sched.busy = 1;
    p->k_pool = keys_app_new(reg->prefix, key, KEYS_POOL);
    p->k_meta = keys_app_new(reg->prefix, key, KEYS_META);
    p->k_lock = keys_app_new(reg->prefix, key, KEYS_LOCK);
    if (p->k_pool)
        p->llen_cmd =
            str_printf("*2\r\n$4\r\nLLEN\r\n$%zu\r\n%s\r\n", strlen(p->k_pool), p->k_pool);
    if (p->llen_cmd)
        p->llen_len = strlen(p->llen_cmd);
    if (!p->k_pool || !p->k_meta || !p->k_lock || !p->llen_cmd) {
        pool_free(p);
        return NULL;
    }
    memcpy(p->cfg.key, key, n);
    p->cfg.key[n] = '\0';
    return p;
}

void pool_checked(struct pool *p)
{
    p->checked = 1;
}

void pool_set_state(struct pool *p, enum pool_state to)
{
    if (!pool_state_allowed(p->state, to))
        log_error("app=%s internal error: state %s -> %s is not a transition of the refill "
                  "cycle",
                  p->cfg.key, pool_state_name(p->state), pool_state_name(to));
    p->state = to;
    if (to != POOL_IDLE)
        return;
    /* The refill is over: free its buffers, apply a row that changed meanwhile. */
    plan_batch_free(&p->run.batch);
    free(p->run.expected);
    p->run.expected = NULL;
    if (p->has_new_cfg) {
        p->cfg = p->new_cfg;
        p->has_new_cfg = 0;
    }
    if (p->reg->env.on_idle)
        p->reg->env.on_idle(p, p->reg->env.arg);
}

static void on_side_call(struct rds *r, redisReply *reply, void *arg)
{
    struct pool *p = arg;

    (void)r;
    p->side_calls--;
    if (reply && reply->type == REDIS_REPLY_ERROR)
        log_warn("app=%s %s", p->cfg.key, reply->str);
}

void pool_limits(struct pool *p, const char *per_take, const char *per_second)
{
    struct node *n = nodemap_for_key(p->reg->env.map, p->k_meta);
    int rc;

    if (!node_ready(n))
        return;
    if (per_take)
        rc = rds_command(n->main, on_side_call, p, "HSET %s per_take %s per_second %s", p->k_meta,
                         per_take, per_second);
    else
        rc = rds_command(n->main, on_side_call, p, "HDEL %s per_take per_second", p->k_meta);
    if (rc == 0)
        p->side_calls++;
}

void *pool_owner(const struct pool *p)
{
    return p->reg->env.arg;
}

size_t pools_count(const struct pools *reg)
{
    return reg->n;
}

struct pool *pools_at(const struct pools *reg, size_t i)
{
    return reg->v[i];
}

int pools_quiet(const struct pools *reg)
{
    for (size_t i = 0; i < reg->n; i++)
        if (reg->v[i]->state != POOL_IDLE)
            return 0;
    return !reg->loading && !reg->ledger_loading;
}

void pools_sweep(struct pools *reg)
{
    size_t j = 0;

    for (size_t i = 0; i < reg->n; i++) {
        struct pool *p = reg->v[i];
        if (p->dead && p->state == POOL_IDLE && !p->side_calls && !p->sched.slot.waiting)
            pool_free(p);
        else
            reg->v[j++] = p;
    }
    reg->n = j;
}

/* --- the index by key ---------------------------------------------------- */

static size_t key_hash(const char *key)
{
    size_t h = 14695981039346656037ULL; /* FNV-1a */

    for (; *key; key++)
        h = (h ^ (unsigned char)*key) * 1099511628211ULL;
    return h;
}

static void index_insert(struct pools *reg, struct pool *p)
{
    size_t i = key_hash(p->cfg.key) & (reg->index_cap - 1);

    while (reg->index[i])
        i = (i + 1) & (reg->index_cap - 1);
    reg->index[i] = p;
}

/* Size the index for the pools we have plus `incoming` rows; -1 on OOM. */
static int index_rebuild(struct pools *reg, size_t incoming)
{
    size_t cap = 16;

    while (cap < 2 * (reg->n + incoming))
        cap *= 2;
    free(reg->index);
    reg->index = calloc(cap, sizeof(*reg->index));
    if (!reg->index) {
        reg->index_cap = 0;
        return -1;
    }
    reg->index_cap = cap;
    for (size_t i = 0; i < reg->n; i++)
        if (!reg->v[i]->dead)
            index_insert(reg, reg->v[i]);
    return 0;
}

struct pool *pools_find(struct pools *reg, const char *key)
{
    size_t i;

    if (!reg->index_cap)
        return NULL;
    for (i = key_hash(key) & (reg->index_cap - 1); reg->index[i];
         i = (i + 1) & (reg->index_cap - 1))
        if (strcmp(reg->index[i]->cfg.key, key) == 0)
            return reg->index[i];
    return NULL;
}

/* --- applying rows ------------------------------------------------------- */

static void bad_key_report(struct pools *reg, const struct app_row *row, const char *err)
{
    struct bad_key *b = NULL, *v;
    char *key, *msg;

    for (size_t i = 0; i < reg->nbad_keys; i++)
        if (reg->bad_keys[i].id == row->id)
            b = &reg->bad_keys[i];
    if (b && strcmp(b->err, err) == 0 &&
        strncmp(b->key, row->entity_key, sizeof(row->entity_key)) == 0) {
        b->seen = 1;
        return;
    }
    if (!b || strcmp(b->err, err) != 0)
        log_error("%s; application not served until the row is fixed", err);
    key = strndup(row->entity_key, sizeof(row->entity_key));
    msg = strdup(err);
    if (!key || !msg)
        goto oom;
    if (b) {
        free(b->err);
        free(b->key);
    } else {
        v = realloc(reg->bad_keys, (reg->nbad_keys + 1) * sizeof(*v));
        if (!v)
            goto oom;
        reg->bad_keys = v;
        b = &reg->bad_keys[reg->nbad_keys++];
        b->id = row->id;
    }
    b->key = key;
    b->err = msg;
    b->seen = 1;
    return;
oom:
    free(key);
    free(msg);
}

/* Forget rows with a bad key that were fixed or removed (not seen in this load). */
static void bad_key_sweep(struct pools *reg)
{
    size_t j = 0;

    for (size_t i = 0; i < reg->nbad_keys; i++) {
        if (reg->bad_keys[i].seen) {
            reg->bad_keys[i].seen = 0;
            reg->bad_keys[j++] = reg->bad_keys[i];
        } else {
            free(reg->bad_keys[i].err);
            free(reg->bad_keys[i].key);
        }
    }
    reg->nbad_keys = j;
}

/* The pool of a row, created when the row is new; NULL when out of memory. */
static struct pool *pool_for_row(struct pools *reg, const struct app_row *row)
{
    struct pool *p;

    if (reg->n == reg->cap) {
        size_t cap = reg->cap ? reg->cap * 2 : 16;
        struct pool **v = realloc(reg->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        reg->v = v;
        reg->cap = cap;
    }
    p = pool_new(reg, row->entity_key);
    if (!p)
        return NULL;
    reg->v[reg->n++] = p;
    index_insert(reg, p);
    p->cfg.id = row->id;
    return p;
}

static void row_deleted(struct pools *reg, struct pool *p, const struct app_row *row)
{
    if (p->live) {
        log_info("app=%s soft-deleted (deleted_at=%" PRId64 "): no longer refilled", p->cfg.key,
                 row->deleted_at);
        pool_limits(p, NULL, NULL);
    }
    p->live = 0;
    p->deleted = 1;
    free(p->bad);
    p->bad = NULL;
    p->conflict = 0;
    health_row_deleted(reg->env.health, p);
}

/* Not served: the row breaks a rule, or (conflict) its IDs can meet another row's of its id_space.
 */
static void row_invalid(struct pools *reg, struct pool *p, const char *err, int conflict)
{
    if (!p->bad || strcmp(p->bad, err) != 0) {
        if (conflict)
            log_error("app=%s %s", p->cfg.key, err);
        else
            log_error("%s; application not served until the row is fixed", err);
        free(p->bad);
        p->bad = strdup(err);
    }
    if (p->live)
        pool_limits(p, NULL, NULL);
    p->live = 0;
    p->conflict = conflict;
    if (conflict)
        health_row_conflict(reg->env.health, p, err);
    else
        health_row_invalid(reg->env.health, p, err);
}

static void row_valid(struct pools *reg, struct pool *p, const struct app_cfg *cfg)
{
    char desc[256], memory[400];
    int over;

    if (p->bad) {
        log_info("app=%s %s; serving again", p->cfg.key,
                 p->conflict ? "its IDs no longer meet another application's of its id_space"
                             : "row fixed");
        p->conflict = 0;
        free(p->bad);
        p->bad = NULL;
    }
    if (cfg->space_warning && !p->space_warned) {
        char ceiling[48];
        log_warn("app=%s ID space nearly exhausted: %s %" PRIu64
                 " is above 90%% of %s or leaves less than one full pool below it",
                 cfg->key, cfg->space_field, cfg->space_base,
                 app_ceiling_text(cfg, ceiling, sizeof(ceiling)));
    }
    p->space_warned = cfg->space_warning;
    over = app_memory_over(cfg, reg->env.pool_memory_mb, memory, sizeof(memory));
    if (over && !p->memory_warned)
        log_warn("app=%s pool_memory: %s", cfg->key, memory);
    p->memory_warned = over;
    health_row_valid(reg->env.health, p, cfg, over ? memory : NULL);
    app_describe(cfg, desc, sizeof(desc));
    if (!p->live) {
        log_info("app=%s serving: %s", cfg->key, desc);
        p->live = 1;
        p->live_since_ms = clock_ms();
        health_served(p);
        p->cfg = *cfg;
        p->sched.due_ms = 0;
        return;
    }
    if (!app_same_settings(&p->cfg, cfg)) {
        log_info("app=%s row changed: %s", cfg->key, desc);
        p->sched.due_ms = p->sched.status_due_ms =
            0; /* look at the pool with the new settings now */
    }
    if (p->state == POOL_IDLE) {
        p->cfg = *cfg;
    } else {
        p->new_cfg = *cfg;
        p->has_new_cfg = 1;
    }
}

/*
 * A row as judged before it is applied: valid (cfg) or not (err), and, valid
 * and served, whether its IDs can meet another row's of its id_space
 * (conflict: the message).
 */
struct row_judged {
    struct app_cfg cfg;
    int valid;
    char err[APP_ERR_MAX];
    char *conflict; /* heap, or NULL */
};

static void row_apply(struct pools *reg, const struct app_row *row, const struct row_judged *jr)
{
    int key_ok = app_key_valid(row->entity_key);
    struct pool *p;

    if (!key_ok && row->deleted_at != 0)
        return; /* a deleted row with a bad key: nothing to serve or report */
    p = key_ok ? pools_find(reg, row->entity_key) : NULL;
    if (!jr->valid && !p && !key_ok) {
        /* Cannot even name a pool: report, keyed by the row id. */
        bad_key_report(reg, row, jr->err);
        return;
    }
    if (!p && !(p = pool_for_row(reg, row)))
        return;
    p->mark = 1;
    if (row->deleted_at != 0) {
        row_deleted(reg, p, row);
        return;
    }
    p->deleted = 0;
    if (!jr->valid)
        row_invalid(reg, p, jr->err, 0);
    else if (jr->conflict)
        row_invalid(reg, p, jr->conflict, 1);
    else
        row_valid(reg, p, &jr->cfg);
}

/*
 * The static check of the shared ID spaces (idspace_rows_meet): a served
 * row whose used range [start_offset, current_offset) holds an ID of its
 * lattice that is also in the used range and lattice of another row of its
 * id_space (a soft-deleted one too: its IDs were handed out) is not served.
 * Its pool would draw such IDs from leases it already holds: no
 * reservation would see them. Rows without an id_space cost nothing.
 */
static void spaces_judge(const struct app_row *rows, struct row_judged *jr, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct app_cfg *a = &jr[i].cfg;

        if (!jr[i].valid || rows[i].deleted_at != 0 || !a->id_space[0])
            continue;
        for (size_t k = 0; k < n && !jr[i].conflict; k++) {
            const struct app_cfg *b = &jr[k].cfg;
            uint64_t x;
            char msg[640];

            if (k == i || !jr[k].valid || !idspace_rows_meet(a, b, &x))
                continue;
            snprintf(msg, sizeof(msg),
                     "id_space_conflict: id_space '%s': application '%s' (id %" PRId64
                     ", delta %" PRIu64 " remainder %" PRIu64 ", leased up to %" PRIu64
                     ") and '%s' (id %" PRId64 ", delta %" PRIu64 " remainder %" PRIu64
                     ", leased up to %" PRIu64 ") can both hand out ID %" PRIu64
                     "; not served until their IDs no longer meet (change delta, remainder, "
                     "start_offset or id_space)",
                     a->id_space, a->key, a->id, a->delta, a->remainder, a->current_offset, b->key,
                     b->id, b->delta, b->remainder, b->current_offset, x);
            jr[i].conflict = strdup(msg);
        }
    }
}

static void on_load(void *arg, enum store_err st, const struct app_row *rows, size_t n,
                    const char *err)
{
    struct pools *reg = arg;
    struct row_judged *judged;
    size_t live = 0, bad = 0;

    reg->loading = 0;
    reg->loads_done++;
    if (st != STORE_OK) {
        if (!err || !*err)
            err = "unknown error";
        if (!reg->load_err || strcmp(reg->load_err, err) != 0) {
            log_warn("cannot load applications: %s; keeping the %zu already loaded", err, reg->n);
            free(reg->load_err);
            reg->load_err = strdup(err);
        }
        goto out;
    }
    if (reg->load_err) {
        log_info("applications loaded again");
        free(reg->load_err);
        reg->load_err = NULL;
    }
    if (index_rebuild(reg, n) < 0) {
        log_error("out of memory indexing %zu applications; keeping the current ones", n);
        goto out;
    }
    judged = calloc(n ? n : 1, sizeof(*judged));
    if (!judged) {
        log_error("out of memory judging %zu applications; keeping the current ones", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        judged[i].valid = app_validate(&rows[i], (uint64_t)reg->env.tick_ms, &judged[i].cfg,
                                       judged[i].err, sizeof(judged[i].err)) == 0;
    spaces_judge(rows, judged, n);
    for (size_t i = 0; i < reg->n; i++)
        reg->v[i]->mark = 0;
    for (size_t i = 0; i < n; i++) {
        row_apply(reg, &rows[i], &judged[i]);
        free(judged[i].conflict);
    }
    free(judged);
    bad_key_sweep(reg);
    for (size_t i = 0; i < reg->n; i++) {
        struct pool *p = reg->v[i];
        if (!p->mark && !p->dead) {
            log_info("app=%s row removed from the table: no longer refilled", p->cfg.key);
            if (p->live)
                pool_limits(p, NULL, NULL);
            health_row_removed(reg->env.health, p);
            p->live = 0;
            p->dead = 1;
        }
        live += p->live;
        bad += p->bad != NULL;
    }
    bad += reg->nbad_keys;
    if (!reg->loaded || live != reg->last_live || bad != reg->last_bad)
        log_info("applications: %zu served, %zu invalid, %zu rows read", live, bad, n);
    reg->loaded = 1;
    reg->last_live = live;
    reg->last_bad = bad;
    pools_sweep(reg);
out:
    if (reg->again) {
        reg->again = 0;
        pools_reload(reg);
    }
    if (reg->env.on_loaded)
        reg->env.on_loaded(reg->env.arg);
}

static int cmp_growth(const void *key, const void *elem)
{
    int64_t id = *(const int64_t *)key, other = ((const struct store_growth *)elem)->app_id;

    return id < other ? -1 : id > other;
}

/*
 * The ledger's growth of every application (by row id): kept in each pool
 * for its runway, and id_space_exhaustion looked at again with it.
 */
static void on_ledger(void *arg, enum store_err st, const struct store_growth *g, size_t n,
                      const char *err)
{
    struct pools *reg = arg;

    reg->ledger_loading = 0;
    if (st != STORE_OK) {
        if (!err || !*err)
            err = "unknown error";
        if (!reg->ledger_err || strcmp(reg->ledger_err, err) != 0) {
            log_warn("cannot read the lease ledger for the runway: %s", err);
            free(reg->ledger_err);
            reg->ledger_err = strdup(err);
        }
        /* again LEDGER_RETRY_MS later, not with every load: a query that timed
         * out on a ledger without its index would hold the MySQL worker, and
         * the reservations queued behind it, every reload-ms */
        {
            uint64_t now = clock_ms();

            reg->ledger_at_ms = now > LEDGER_READ_MS - LEDGER_RETRY_MS
                                    ? now - (LEDGER_READ_MS - LEDGER_RETRY_MS)
                                    : 1;
        }
        goto out;
    }
    free(reg->ledger_err);
    reg->ledger_err = NULL;
    for (size_t i = 0; i < reg->n; i++) {
        struct pool *p = reg->v[i];
        const struct store_growth *hit =
            n ? bsearch(&p->cfg.id, g, n, sizeof(*g), cmp_growth) : NULL;

        if (p->dead)
            continue;
        if (hit) {
            p->ledger = hit->l;
        } else { /* no lease at all */
            memset(&p->ledger, 0, sizeof(p->ledger));
            p->ledger.known = 1;
        }
        if (p->live)
            health_space(reg->env.health, p);
    }
out:
    if (reg->env.on_loaded)
        reg->env.on_loaded(reg->env.arg);
}

void pools_reload(struct pools *reg)
{
    uint64_t now = clock_ms();

    if (reg->stopping)
        return;
    if (!reg->loading) {
        reg->loads_begun++;
        if (store_load(reg->env.store, on_load, reg) == 0)
            reg->loading = 1;
        else
            reg->loads_done++; /* not started: it ended, failed */
    }
    /* after the rows (jobs run in order): the pools of new rows get theirs at once */
    if (!reg->ledger_loading &&
        (reg->ledger_due || !reg->ledger_at_ms || now - reg->ledger_at_ms >= LEDGER_READ_MS) &&
        store_ledger(reg->env.store, on_ledger, reg) == 0) {
        reg->ledger_loading = 1;
        reg->ledger_due = 0;
        reg->ledger_at_ms = now ? now : 1;
    }
}

uint64_t pools_reread(struct pools *reg)
{
    if (reg->loading && !reg->stopping) {
        reg->again = 1;
        return reg->loads_begun + 1;
    }
    pools_reload(reg);
    return reg->loads_begun;
}

void pools_reload_ledger(struct pools *reg)
{
    reg->ledger_due = 1;
}

/*
 * A MySQL job succeeded: if loading rows had failed, load them now. That
 * refreshes the rows as soon as an outage ends, and clears the load error,
 * so that the next outage is logged again even if it starts before the
 * next periodic reload.
 */
void pools_mysql_back(struct pools *reg)
{
    if (reg->load_err)
        pools_reload(reg);
}

void pools_stop(struct pools *reg)
{
    reg->stopping = 1;
}

void pools_set_tick(struct pools *reg, int tick_ms)
{
    reg->env.tick_ms = tick_ms;
}

void pools_set_memory(struct pools *reg, int pool_memory_mb)
{
    reg->env.pool_memory_mb = pool_memory_mb;
}

/* --- views --------------------------------------------------------------- */

static void fill_view(const struct pool *p, struct app_view *v)
{
    const struct node *n = nodemap_for_key(p->reg->env.map, p->k_pool);

    memset(v, 0, sizeof(*v));
    v->key = p->cfg.key;
    v->node = n && n->addr[0] ? n->addr : NULL;
    v->cfg = &p->cfg;
    v->id = p->cfg.id;
    v->served = p->live;
    v->deleted = p->deleted;
    v->invalid = p->bad;
    v->len_known = p->seen.len_known;
    v->pool_len = p->seen.len;
    v->fill_pct = p->cfg.max_pool ? (double)p->seen.len * 100.0 / (double)p->cfg.max_pool : 0;
    v->rate = p->seen.rate;
    v->stale = !node_ready(n);
    v->lease_known = p->seen.lease_known;
    v->lease = p->seen.lease;
    v->lease_remaining = p->seen.lease_known ? gen_remaining(&p->seen.lease) : 0;
    v->reserve_lo = p->reserve.lo;
    v->reserve_hi = p->reserve.hi;
    v->c = p->c;
    v->last_refill_unix_ms = p->last_refill_unix_ms;
    v->last_error = p->health.last_err;
    for (int k = 0; k < ALERT_COUNT; k++)
        v->alerts[k] = p->health.alert[k].firing;
    v->runway_pool_s = runway_pool_s(v->len_known, v->pool_len, v->rate, v->stale);
    v->growth_per_day = runway_growth_per_day(&p->ledger);
    v->space_left = runway_space_left(&p->cfg, &p->ledger);
    v->runway_space_days = runway_space_days(v->space_left, v->growth_per_day);
}

static int cmp_key(const void *x, const void *y)
{
    return strcmp((*(struct pool *const *)x)->cfg.key, (*(struct pool *const *)y)->cfg.key);
}

/* The view of a row whose key cannot name a pool: its key as stored, id and error. */
static void bad_key_view(const struct bad_key *b, struct app_view *view)
{
    memset(view, 0, sizeof(*view));
    view->key = b->key;
    view->id = b->id;
    view->invalid = b->err;
    view->alerts[ALERT_INVALID_CONFIG] = 1;
    view->bad_key = 1;
}

void pools_each_view(struct pools *reg, status_app_fn *fn, void *arg)
{
    struct pool **v = malloc((reg->n ? reg->n : 1) * sizeof(*v));
    size_t n = 0;
    struct app_view view;

    if (!v)
        return;
    for (size_t i = 0; i < reg->n; i++)
        if (!reg->v[i]->dead)
            v[n++] = reg->v[i];
    qsort(v, n, sizeof(*v), cmp_key);
    for (size_t i = 0; i < n; i++) {
        fill_view(v[i], &view);
        fn(&view, arg);
    }
    free(v);
    /* Rows whose key cannot name a pool are shown too, with their error (by id). */
    for (size_t i = 0; i < reg->nbad_keys; i++) {
        bad_key_view(&reg->bad_keys[i], &view);
        fn(&view, arg);
    }
}

int pools_one_view(struct pools *reg, const char *key, status_app_fn *fn, void *arg)
{
    struct pool *p = pools_find(reg, key);
    struct app_view view;

    if (!p || p->dead) {
        /* a row whose key cannot name a pool, as pools_each_view lists it */
        for (size_t i = 0; i < reg->nbad_keys; i++) {
            if (strcmp(reg->bad_keys[i].key, key) == 0) {
                bad_key_view(&reg->bad_keys[i], &view);
                fn(&view, arg);
                return 0;
            }
        }
        return -1;
    }
    fill_view(p, &view);
    fn(&view, arg);
    return 0;
}

void pools_tally(const struct pools *reg, struct daemon_view *out)
{
    out->apps_served = out->apps_invalid = out->apps_deleted = 0;
    out->apps_unchecked = out->alerts_firing = 0;
    for (size_t i = 0; i < reg->n; i++) {
        const struct pool *p = reg->v[i];
        if (p->dead)
            continue;
        out->apps_served += p->live;
        out->apps_invalid += p->bad != NULL;
        out->apps_deleted += p->deleted;
        out->apps_unchecked += p->live && !p->checked;
        for (int k = 0; k < ALERT_COUNT; k++)
            out->alerts_firing += p->health.alert[k].firing != 0;
    }
    out->apps_invalid += reg->nbad_keys;
    out->alerts_firing += reg->nbad_keys; /* invalid_config of each (pools_each_view) */
    out->rows_loaded = reg->loaded;
    out->rows_loads = reg->loads_done;
}

/* --- lifecycle ----------------------------------------------------------- */

struct pools *pools_new(const char *prefix, const struct pools_env *env)
{
    struct pools *reg = calloc(1, sizeof(*reg));

    if (!reg)
        return NULL;
    reg->env = *env;
    reg->prefix = strdup(prefix);
    if (!reg->prefix) {
        free(reg);
        return NULL;
    }
    return reg;
}

void pools_free(struct pools *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; i < reg->n; i++)
        pool_free(reg->v[i]);
    free(reg->v);
    free(reg->index);
    free(reg->prefix);
    free(reg->load_err);
    free(reg->ledger_err);
    for (size_t i = 0; i < reg->nbad_keys; i++) {
        free(reg->bad_keys[i].err);
        free(reg->bad_keys[i].key);
    }
    free(reg->bad_keys);
    free(reg);
}
