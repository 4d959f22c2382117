/*
 * Unit tests of the daemon's row application (daemon/pool.c: on_load,
 * row_apply): the registry fed rows as store_load would deliver them, with
 * stand-ins for MySQL (the load is captured and answered here), Redis (a
 * map of one node; the limits written to or removed from meta are recorded) and health (its
 * calls are counted). New, unchanged, changed (now, or when the refill in
 * flight ends), soft-deleted, invalid and fixed, removed, and rows whose key
 * cannot name a pool; a failed load keeps what was loaded.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "health.h"
#include "log.h"
#include "node.h"
#include "pool.h"
#include "rds.h"
#include "store.h"
#include "unit.h"

/* --- stand-ins ------------------------------------------------------------ */

static store_load_fn *load_fn; /* the load in flight */
static void *load_arg;
static char last_cmd[256]; /* the last side call sent to Redis */
static int ncmds;
static int served_calls, valid_calls, invalid_calls, deleted_calls, removed_calls;

int store_load(struct store *s, store_load_fn *fn, void *arg)
{
    (void)s;
    load_fn = fn;
    load_arg = arg;
    return 0;
}

static store_ledger_fn *ledger_fn; /* the ledger read in flight */
static void *ledger_arg;
static int ledger_reads, space_calls;

int store_ledger(struct store *s, store_ledger_fn *fn, void *arg)
{
    (void)s;
    ledger_fn = fn;
    ledger_arg = arg;
    ledger_reads++;
    return 0;
}

/* One node, always ready, whose main connection is never dereferenced. */
static int fake_rds;
static struct node fake_node = {.main = (struct rds *)&fake_rds};

struct node *nodemap_for_key(struct nodemap *m, const char *key)
{
    (void)m;
    (void)key;
    return &fake_node;
}

int node_ready(const struct node *n)
{
    return n == &fake_node;
}

/* A side call is recorded; answer_side_calls() answers them later. */
static rds_reply_fn *side_fn[16];
static void *side_arg[16];
static size_t nside;

int rds_command(struct rds *r, rds_reply_fn *fn, void *arg, const char *fmt, ...)
{
    va_list ap;

    CHECK(r == fake_node.main);
    va_start(ap, fmt);
    vsnprintf(last_cmd, sizeof(last_cmd), fmt, ap);
    va_end(ap);
    ncmds++;
    if (nside == sizeof(side_fn) / sizeof(side_fn[0]))
        return -1;
    side_fn[nside] = fn;
    side_arg[nside++] = arg;
    return 0;
}

/* Every side call in flight is answered (NULL: the connection dropped, logged by nobody). */
static void answer_side_calls(void)
{
    for (size_t i = 0; i < nside; i++)
        side_fn[i](NULL, NULL, side_arg[i]);
    nside = 0;
}

void health_pool_free(struct pool *p)
{
    (void)p;
}

void health_served(struct pool *p)
{
    (void)p;
    served_calls++;
}

static char last_memory[400]; /* health_row_valid's pool_memory warning, "" for none */

void health_row_valid(struct health *h, struct pool *p, const struct app_cfg *cfg,
                      const char *memory)
{
    (void)h, (void)p, (void)cfg;
    valid_calls++;
    snprintf(last_memory, sizeof(last_memory), "%s", memory ? memory : "");
}

void health_space(struct health *h, struct pool *p)
{
    (void)h, (void)p;
    space_calls++;
}

void health_row_invalid(struct health *h, struct pool *p, const char *err)
{
    (void)h, (void)p, (void)err;
    invalid_calls++;
}

static int conflict_calls;

void health_row_conflict(struct health *h, struct pool *p, const char *err)
{
    (void)h, (void)p, (void)err;
    conflict_calls++;
}

void health_row_deleted(struct health *h, struct pool *p)
{
    (void)h, (void)p;
    deleted_calls++;
}

void health_row_removed(struct health *h, struct pool *p)
{
    (void)h, (void)p;
    removed_calls++;
}

/* --- helpers -------------------------------------------------------------- */

static struct app_row row_of(int64_t id, const char *key, int64_t step)
{
    struct app_row r;

    memset(&r, 0, sizeof(r));
    r.id = id;
    snprintf(r.entity_key, sizeof(r.entity_key), "%s", key);
    snprintf(r.entity_name, sizeof(r.entity_name), "%s", key);
    r.increasing_type = 1;
    r.start_offset = 1;
    r.step = step;
    r.delta = 1;
    r.increment_max = 1;
    return r;
}

static int loaded_calls;

static void on_loaded(void *arg)
{
    (void)arg;
    loaded_calls++;
}

/* Reload and deliver `rows` as the store would (side calls left in flight). */
static void load(struct pools *reg, const struct app_row *rows, size_t n)
{
    load_fn = NULL;
    pools_reload(reg);
    CHECK(load_fn != NULL);
    if (load_fn)
        load_fn(load_arg, STORE_OK, rows, n, "");
}

static struct pools *registry(void)
{
    static int fake; /* the store, health and node map are never dereferenced */
    struct pools_env env = {
        .store = (struct store *)&fake,
        .health = (struct health *)&fake,
        .map = (struct nodemap *)&fake,
        .tick_ms = 100,
        .pool_memory_mb = 64,
        .on_loaded = on_loaded,
    };

    return pools_new("idpool", &env);
}

static void tally(struct pools *reg, size_t served, size_t invalid, size_t deleted)
{
    struct daemon_view v;

    memset(&v, 0, sizeof(v));
    pools_tally(reg, &v);
    CHECK_EQ_U64(v.apps_served, served);
    CHECK_EQ_U64(v.apps_invalid, invalid);
    CHECK_EQ_U64(v.apps_deleted, deleted);
    CHECK(v.rows_loaded);
}

/* --- tests ---------------------------------------------------------------- */

static void test_new_and_changed(void)
{
    struct pools *reg = registry();
    struct app_row rows[2] = {row_of(1, "user", 1000), row_of(2, "order", 500)};
    struct pool *p;

    load(reg, rows, 2);
    CHECK_EQ_U64(pools_count(reg), 2);
    CHECK_EQ_U64(served_calls, 2);
    CHECK_EQ_U64(loaded_calls, 1);
    tally(reg, 2, 0, 0);
    p = pools_find(reg, "user");
    CHECK(p && p->live && !p->dead && !p->deleted && !p->bad);
    if (!p)
        goto out;
    CHECK_EQ_U64(p->cfg.step, 1000);
    CHECK(strcmp(p->k_pool, "idpool:{user}:pool") == 0);
    CHECK_EQ_U64(p->sched.due_ms, 0); /* looked at at once */
    CHECK_EQ_U64(ncmds, 0);           /* the limits are the checks' to sync */

    /* the same rows again: nothing changes, the pool keeps its schedule */
    p->sched.due_ms = p->sched.status_due_ms = 777;
    load(reg, rows, 2);
    CHECK_EQ_U64(served_calls, 2);
    CHECK_EQ_U64(p->sched.due_ms, 777);
    CHECK(pools_find(reg, "user") == p);

    /* changed while idle: applied now, and looked at now */
    rows[0].step = 2000;
    load(reg, rows, 2);
    CHECK_EQ_U64(p->cfg.step, 2000);
    CHECK(!p->has_new_cfg);
    CHECK_EQ_U64(p->sched.due_ms, 0);
    CHECK_EQ_U64(p->sched.status_due_ms, 0);

    /* changed during a refill: kept until the pool is idle again */
    pool_set_state(p, POOL_CHECK);
    pool_set_state(p, POOL_LOCK);
    rows[0].step = 3000;
    load(reg, rows, 2);
    CHECK_EQ_U64(p->cfg.step, 2000);
    CHECK(p->has_new_cfg);
    CHECK_EQ_U64(p->new_cfg.step, 3000);
    pool_set_state(p, POOL_IDLE);
    CHECK_EQ_U64(p->cfg.step, 3000);
    CHECK(!p->has_new_cfg);
out:
    answer_side_calls();
    pools_free(reg);
}

/* pool-memory-mb: a row whose full pool passes it is served, with the warning (pool_memory). */
static void test_pool_memory(void)
{
    struct pools *reg = registry();
    struct app_row rows[1] = {row_of(1, "big", 1000)};

    rows[0].max_pool_size = 6710886; /* 67,108,860 bytes: 64 MiB + 0 */
    load(reg, rows, 1);
    CHECK(last_memory[0] == '\0');
    rows[0].max_pool_size = 6710887; /* 10 bytes more than 64 MiB */
    load(reg, rows, 1);
    CHECK_STR_CONTAINS(last_memory, "a full pool of 6710887 IDs takes about 65 MiB of Redis "
                                    "(10 bytes an ID), above pool-memory-mb 64");
    tally(reg, 1, 0, 0); /* served all the same */
    /* the default pool sized by max_size_per_second: 60 x 1,500,000 (859 MiB) */
    rows[0].max_pool_size = 0;
    rows[0].max_size_per_second = 1500000;
    pools_set_memory(reg, 500);
    load(reg, rows, 1);
    CHECK_STR_CONTAINS(last_memory, "a full pool of 90000000 IDs takes about 859 MiB");
    CHECK_STR_CONTAINS(last_memory, "above pool-memory-mb 500");
    pools_set_memory(reg, 1000);
    load(reg, rows, 1);
    CHECK(last_memory[0] == '\0');
    answer_side_calls();
    pools_free(reg);
}

static void test_deleted_invalid_removed(void)
{
    struct pools *reg = registry();
    struct app_row rows[2] = {row_of(1, "user", 1000), row_of(2, "order", 500)};
    struct pool *u, *o;

    load(reg, rows, 2);
    u = pools_find(reg, "user");
    o = pools_find(reg, "order");
    CHECK(u && o);
    if (!u || !o)
        goto out;

    /* soft-deleted: not served, its limits removed from meta so takes refuse it */
    ncmds = 0;
    rows[0].deleted_at = 1234;
    load(reg, rows, 2);
    CHECK(!u->live && u->deleted);
    CHECK_EQ_U64(deleted_calls, 1);
    CHECK_EQ_U64(ncmds, 1);
    CHECK(strcmp(last_cmd, "HDEL idpool:{user}:meta per_take per_second") == 0);
    tally(reg, 1, 0, 1);
    /* deleted again: nothing more to remove */
    load(reg, rows, 2);
    CHECK_EQ_U64(ncmds, 1);

    /* restored: served again */
    rows[0].deleted_at = 0;
    load(reg, rows, 2);
    CHECK(u->live && !u->deleted);
    tally(reg, 2, 0, 0);

    /* invalid: not served, the error kept (and named in the views) */
    ncmds = 0;
    rows[1].step = 2000000; /* above 1,000,000 */
    load(reg, rows, 2);
    CHECK(!o->live && o->bad != NULL);
    CHECK_STR_CONTAINS(o->bad, "step");
    CHECK_EQ_U64(invalid_calls, 1);
    CHECK_EQ_U64(ncmds, 1);
    CHECK(strcmp(last_cmd, "HDEL idpool:{order}:meta per_take per_second") == 0);
    tally(reg, 1, 1, 0);
    /* fixed: served again, the error gone */
    rows[1].step = 500;
    load(reg, rows, 2);
    CHECK(o->live && o->bad == NULL);
    tally(reg, 2, 0, 0);

    /* removed from the table: dead, its limits removed, freed once idle */
    answer_side_calls();
    ncmds = 0;
    load(reg, rows, 1);
    CHECK(o->dead && !o->live);
    CHECK_EQ_U64(removed_calls, 1);
    CHECK_EQ_U64(ncmds, 1);
    CHECK_EQ_U64(o->side_calls, 1);
    pools_sweep(reg);
    CHECK_EQ_U64(pools_count(reg), 2); /* not while its side call is in flight */
    answer_side_calls();
    CHECK_EQ_U64(o->side_calls, 0);
    pools_sweep(reg);
    CHECK_EQ_U64(pools_count(reg), 1);
    tally(reg, 1, 0, 0);

    /* added again under the same key: a new pool */
    load(reg, rows, 2);
    o = pools_find(reg, "order");
    CHECK(o && o->live && !o->dead);
    CHECK_EQ_U64(pools_count(reg), 2);
out:
    answer_side_calls();
    pools_free(reg);
}

/*
 * pools_reread (SIGHUP) during a load in flight: that load's rows may
 * predate the signal, so one more load follows it, and the number returned
 * is that one's; the view's rows_loads reaches it only then. Served pools
 * start unchecked (readiness) until pool_checked().
 */
static void test_reread_and_checked(void)
{
    struct pools *reg = registry();
    struct app_row rows[2] = {row_of(1, "user", 1000), row_of(2, "order", 500)};
    struct daemon_view v;
    store_load_fn *first;
    uint64_t want;

    load(reg, rows, 2);
    memset(&v, 0, sizeof(v));
    pools_tally(reg, &v);
    CHECK_EQ_U64(v.rows_loads, 1);
    CHECK_EQ_U64(v.apps_unchecked, 2);
    pool_checked(pools_find(reg, "user"));
    pools_tally(reg, &v);
    CHECK_EQ_U64(v.apps_unchecked, 1);

    load_fn = NULL;
    pools_reload(reg); /* a periodic reload in flight */
    first = load_fn;
    CHECK(first != NULL);
    want = pools_reread(reg);
    CHECK_EQ_U64(want, 3);
    load_fn = NULL;
    if (first)
        first(load_arg, STORE_OK, rows, 2, "");
    pools_tally(reg, &v);
    CHECK_EQ_U64(v.rows_loads, 2);
    CHECK(load_fn != NULL); /* the load after it started */
    if (load_fn)
        load_fn(load_arg, STORE_DOWN, NULL, 0, "cannot connect to MySQL: refused");
    pools_tally(reg, &v);
    CHECK_EQ_U64(v.rows_loads, want); /* ended, failed: the reread is over */
    /* nothing in flight: a reread is the next load */
    load_fn = NULL;
    CHECK_EQ_U64(pools_reread(reg), 4);
    CHECK(load_fn != NULL);
    if (load_fn)
        load_fn(load_arg, STORE_OK, rows, 2, "");
    pools_free(reg);
}

static void test_bad_key_and_failed_load(void)
{
    struct pools *reg = registry();
    struct app_row rows[3] = {row_of(1, "user", 1000), row_of(2, "bad key!", 1000),
                              row_of(3, "gone key!", 1000)};

    rows[2].deleted_at = 5; /* deleted with a bad key: nothing to serve or report */
    load(reg, rows, 3);
    CHECK_EQ_U64(pools_count(reg), 1); /* no pool for a key that cannot name one */
    tally(reg, 1, 1, 0);
    /* the bad key fixed: served, no longer counted invalid */
    snprintf(rows[1].entity_key, sizeof(rows[1].entity_key), "fixed");
    load(reg, rows, 3);
    CHECK_EQ_U64(pools_count(reg), 2);
    tally(reg, 2, 0, 0);

    /* a failed load keeps every pool as it was */
    loaded_calls = 0;
    load_fn = NULL;
    pools_reload(reg);
    CHECK(load_fn != NULL);
    if (load_fn)
        load_fn(load_arg, STORE_DOWN, NULL, 0, "cannot connect to MySQL: refused");
    CHECK_EQ_U64(loaded_calls, 1);
    CHECK_EQ_U64(pools_count(reg), 2);
    tally(reg, 2, 0, 0);
    /* and MySQL back loads again at once */
    load_fn = NULL;
    pools_mysql_back(reg);
    CHECK(load_fn != NULL);
    if (load_fn)
        load_fn(load_arg, STORE_OK, rows, 3, "");
    /* with MySQL fine, pools_mysql_back does not reload */
    load_fn = NULL;
    pools_mysql_back(reg);
    CHECK(load_fn == NULL);
    answer_side_calls();
    pools_free(reg);
}

/*
 * The lease ledger: read with the first load, then not again within a
 * minute unless SIGHUP asks (pools_reload_ledger); its growth goes to the
 * pool of the same row id, and id_space_exhaustion is looked at again for
 * served pools; a failed read is tried again with the next load.
 */
static void test_ledger(void)
{
    struct pools *reg = registry();
    struct app_row rows[3] = {row_of(7, "user", 100), row_of(3, "order", 100),
                              row_of(9, "gone", 100)};
    /* by application_id, as the store reads them; 5 is a row removed long ago */
    struct store_growth g[3] = {
        {3, {1, 5000, 1, 1000, 86400000}}, {5, {1, 700, 0, 0, 0}}, {7, {1, 90000, 0, 0, 0}}};
    struct pool *user, *order, *gone;

    rows[2].deleted_at = 1;
    ledger_reads = space_calls = 0;
    ledger_fn = NULL;
    load(reg, rows, 3);
    CHECK(ledger_reads == 1 && ledger_fn != NULL);
    CHECK(!pools_quiet(reg)); /* a ledger read is in flight */
    user = pools_find(reg, "user");
    order = pools_find(reg, "order");
    gone = pools_find(reg, "gone");
    CHECK(user && order && gone && !user->ledger.known);
    if (!user || !order || !gone || !ledger_fn)
        goto out;
    ledger_fn(ledger_arg, STORE_OK, g, 3, "");
    CHECK(pools_quiet(reg));
    CHECK(order->ledger.known && order->ledger.top == 5000 && order->ledger.first_lo == 1000 &&
          order->ledger.in_window && order->ledger.elapsed_ms == 86400000);
    CHECK(user->ledger.known && user->ledger.top == 90000 && !user->ledger.in_window);
    CHECK(gone->ledger.known && gone->ledger.top == 0); /* not in the result: no lease */
    CHECK(space_calls == 2); /* user and order are served, gone is soft-deleted */

    /* within the minute: rows again, not the ledger; SIGHUP: the ledger too */
    load(reg, rows, 3);
    CHECK(ledger_reads == 1);
    pools_reload_ledger(reg);
    load(reg, rows, 3);
    CHECK(ledger_reads == 2);
    /* a failed read: kept what was read, read again LEDGER_RETRY_MS later (not
     * with the next load: a slow query would hold the MySQL worker each time),
     * or on SIGHUP */
    ledger_fn(ledger_arg, STORE_SQL, NULL, 0, "lost connection");
    CHECK(order->ledger.known && order->ledger.top == 5000);
    load(reg, rows, 3);
    CHECK(ledger_reads == 2);
    pools_reload_ledger(reg);
    load(reg, rows, 3);
    CHECK(ledger_reads == 3);
    ledger_fn(ledger_arg, STORE_OK, NULL, 0, "");
out:
    pools_free(reg);
}

/*
 * application.id_space: two rows of one space whose used ranges hold an ID
 * of both lattices are not served (either of them), with a message naming
 * both; other remainders, other spaces, ranges apart or no space: served.
 */
static void test_shared_space(void)
{
    struct pools *reg = registry();
    struct app_row rows[3] = {row_of(1, "a", 1000), row_of(2, "b", 1000), row_of(3, "c", 1000)};
    struct pool *a, *b;

    for (int i = 0; i < 3; i++) {
        rows[i].delta = 2;
        rows[i].current_offset = 5001;
    }
    rows[1].remainder = 1;
    snprintf(rows[0].id_space, sizeof(rows[0].id_space), "%s", "orders");
    snprintf(rows[1].id_space, sizeof(rows[1].id_space), "%s", "orders");
    /* c: the same lattice as a, but its own space */
    conflict_calls = 0;
    load(reg, rows, 3);
    tally(reg, 3, 0, 0);
    CHECK_EQ_U64(conflict_calls, 0);

    /* b's remainder set to a's: both used [1, 5001), both stop */
    rows[1].remainder = 0;
    load(reg, rows, 3);
    tally(reg, 1, 2, 0);
    CHECK_EQ_U64(conflict_calls, 2);
    a = pools_find(reg, "a");
    b = pools_find(reg, "b");
    CHECK(a && b && !a->live && !b->live && a->conflict && b->conflict);
    if (b) {
        CHECK_STR_CONTAINS(b->bad, "id_space_conflict: id_space 'orders': application 'b' (id 2");
        CHECK_STR_CONTAINS(b->bad, "and 'a' (id 1, delta 2 remainder 0, leased up to 5001) can "
                                   "both hand out ID 2;");
    }

    /* b moved above a's range: served again, until a's leases reach it */
    rows[1].start_offset = 1000000;
    rows[1].current_offset = 1005000;
    load(reg, rows, 3);
    tally(reg, 3, 0, 0);
    CHECK(a && b && a->live && b->live && !a->conflict && !b->conflict && !b->bad);

    /* a soft-deleted row's IDs were handed out: the other is not served; it is not flagged */
    rows[1].start_offset = 1;
    rows[1].current_offset = 5001;
    rows[0].deleted_at = 1;
    conflict_calls = 0;
    load(reg, rows, 3);
    tally(reg, 1, 1, 1);
    CHECK_EQ_U64(conflict_calls, 1);
    CHECK(b && !b->live && b->conflict);
    answer_side_calls();
    pools_free(reg);
}

int main(void)
{
    log_set_level(LOG_ERROR);
    RUN(test_new_and_changed);
    RUN(test_deleted_invalid_removed);
    RUN(test_pool_memory);
    RUN(test_bad_key_and_failed_load);
    RUN(test_reread_and_checked);
    RUN(test_ledger);
    RUN(test_shared_space);
    return unit_done();
}
