/*
 * refill — the refill cycle of one pool, in order (brief §5):
 *
 *   lock     SET lock token NX PX ttl + LLEN + HGETALL meta (refill_lock)
 *   plan     how many IDs, drawn from the leases in meta (refill_plan)
 *   reserve  a lease in MySQL when meta's cannot supply them (on_reserve)
 *   push     the batch through the fence (refill_push, push.c)
 *   prefetch the next lease when the current one runs low, stored in meta
 *   continue under the same lock while the pool is still low, or
 *   unlock   compare-and-delete (refill_unlock)
 *
 * Each stage is one module's work; this file only sequences them and
 * changes the pool's state through pool_set_state().
 */
#include "refill.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "build_config.h"
#include "clock.h"
#include "fault.h"
#include "health.h"
#include "lease.h"
#include "log.h"
#include "node.h"
#include "pool.h"
#include "push.h"
#include "rds.h"
#include "resp.h"
#include "scheduler.h"

#define MAX_CONTINUE 8 /* refills in a row under one lock */

struct refill {
    struct event_base *base;
    struct nodemap *map; /* a refill runs on the node of its pool's lock */
    struct store *store;
    struct health *health;
    struct pools *pools;
    struct sched *sched;
    struct pusher **pushers; /* by node id, made at a node's first push */
    size_t npushers;
    struct lease_ctx lc;
    struct rng rng;
    char *instance; /* for the daemon view (heap) */
    uint64_t started_unix_ms;
    int lock_ttl_ms;
    size_t push_chunk;                 /* IDs per RPUSH */
    uint64_t lat[STATUS_NLATENCY + 1]; /* refill latency histogram (non-cumulative) */
    double lat_sum;
    uint64_t lat_count;
    int stopping;
    void (*stop_done)(void *);
    void *stop_arg;
    struct event *stop_ev; /* fires stop_done from the loop */
};

static void refill_plan(struct refill *rf, struct pool *p);
static void refill_push(struct refill *rf, struct pool *p);

static struct refill *refill_of(const struct pool *p)
{
    return pool_owner(p);
}

/*
 * The refill may go on: its node is ready on the main connection it took
 * the lock on. One that became ready again since (a new generation: a
 * reconnect, maybe to another server) stops at its next stage.
 */
static int run_valid(const struct pool *p)
{
    return node_ready(p->run.node) && p->run.node_gen == p->run.node->generation;
}

static uint64_t unix_ms(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

static void maybe_stopped(struct refill *rf)
{
    if (rf->stopping && rf->stop_done && pools_quiet(rf->pools))
        event_active(rf->stop_ev, 0, 0);
}

/* --- unlock -------------------------------------------------------------- */

static void on_unlock(struct rds *r, redisReply *reply, void *arg)
{
    struct pool *p = arg;

    (void)r;
    if (!reply || reply->type == REDIS_REPLY_ERROR)
        log_debug("app=%s lock release failed (%s); it expires by its TTL", p->cfg.key,
                  rds_errstr(reply));
    pool_set_state(p, POOL_IDLE);
}

/* The end of every refill, successful or not: compare-and-delete the lock (never another's). */
static void refill_unlock(struct pool *p)
{
    if (!p->run.locked) {
        pool_set_state(p, POOL_IDLE);
        return;
    }
    p->run.locked = 0;
    pool_checked(p); /* a refill ran: whatever came of it, the pool was looked after */
    pool_set_state(p, POOL_UNLOCK);
    if (rds_command(p->run.node->main, on_unlock, p, "FCALL idpool_unlock 1 %s %s", p->k_lock,
                    p->run.token) != 0)
        pool_set_state(p, POOL_IDLE);
}

/* --- lock ---------------------------------------------------------------- */

static void on_lock_phase(struct rds *r, redisReply *reply, void *arg)
{
    struct pool *p = arg;
    struct refill *rf = refill_of(p);
    int step = p->run.lock_step++;

    (void)r;
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
        if (!p->run.lock_err)
            health_problem(p, "lock phase failed: %s", rds_errstr(reply));
        p->run.lock_err = 1;
    } else if (step == 0) {
        p->run.locked = reply->type == REDIS_REPLY_STATUS;
        p->run.start_ms = clock_ms();
        sched_locked(p);
    } else if (step == 1) {
        p->run.len = reply->type == REDIS_REPLY_INTEGER ? (uint64_t)reply->integer : 0;
    } else if (step == 2 && reply->type == REDIS_REPLY_ARRAY) {
        lease_read_meta(p, reply);
    }
    if (p->run.lock_step < p->run.lock_sent)
        return;
    if (p->run.lock_err || p->run.lock_sent < 3 || !p->run.locked || rf->stopping) {
        if (!p->run.locked && !p->run.lock_err)
            p->c.lock_busy++;
        refill_unlock(p); /* idle at once when not locked */
        return;
    }
    if (fault_at(FAULT_LOCKED))
        fault_fire();
    refill_plan(rf, p);
}

/*
 * The pool got a refill slot (scheduler.c): take its lock, read its length
 * and meta in one go, on the node of the lock, to which the refill is
 * pinned from now on.
 */
static void refill_lock(struct pool *p, void *arg)
{
    struct refill *rf = arg;
    struct pool_run *run = &p->run;
    struct node *n = nodemap_for_key(rf->map, p->k_lock);
    char ttl[16];
    static const char hex[] = "0123456789abcdef";

    for (int i = 0; i < 32; i++)
        run->token[i] = hex[rng_next(&rf->rng) & 0xf];
    run->token[32] = '\0';
    snprintf(ttl, sizeof(ttl), "%d", rf->lock_ttl_ms);
    pool_set_state(p, POOL_LOCK);
    run->continued = 0;
    run->locked = 0;
    run->lock_err = 0;
    run->lock_step = 0;
    run->lock_sent = 0;
    if (n == NULL) { /* its slot has no owner now (Cluster): the next check tries again */
        pool_set_state(p, POOL_IDLE);
        return;
    }
    run->node = n;
    run->node_gen = n->generation;
    if (rds_command(n->main, on_lock_phase, p, "SET %s %s NX PX %s", p->k_lock, run->token, ttl) ==
        0)
        run->lock_sent++;
    if (run->lock_sent == 1 && rds_command(n->main, on_lock_phase, p, "LLEN %s", p->k_pool) == 0)
        run->lock_sent++;
    if (run->lock_sent == 2 && rds_command(n->main, on_lock_phase, p, "HGETALL %s", p->k_meta) == 0)
        run->lock_sent++;
    if (run->lock_sent == 0)
        pool_set_state(p, POOL_IDLE);
}

/* --- plan and reserve ---------------------------------------------------- */

static void on_reserve(void *arg, enum store_err st, const struct store_lease *lease,
                       const char *err)
{
    struct pool *p = arg;
    struct refill *rf = refill_of(p);

    /* the refill lost its node (a failover?) before it wrote anything: keep the lease */
    if (st == STORE_OK && !rf->stopping && !run_valid(p)) {
        if (lease_keep(&rf->lc, p, lease) != 0)
            log_debug("app=%s lease [%" PRIu64 ", %" PRIu64 ") unused: the refill lost its node",
                      p->cfg.key, lease->lo, lease->hi);
        refill_unlock(p);
        return;
    }
    /* the reserve only for a refill that can still push (it is spent once, when drawn) */
    if (lease_got(&rf->lc, p, "cannot reserve a lease", st, lease, err) == 0 ||
        (!rf->stopping && run_valid(p) && lease_use_reserve(&rf->lc, p, st) == 0)) {
        enum plan_draw_result dr =
            plan_batch_draw(&p->run.batch, &p->cfg, &rf->rng, rf->push_chunk);
        if (dr == PLAN_DRAW_NOMEM)
            health_problem(p, "out of memory drawing IDs");
        else if (dr == PLAN_DRAW_SHORT)
            health_problem(p, "a fresh lease could not supply the batch");
    }
    if (rf->stopping || !run_valid(p)) {
        refill_unlock(p);
        return;
    }
    refill_push(rf, p); /* whatever was drawn is ours: push it */
}

/* Under the lock: decide how many IDs to add and draw them (or reserve a lease first). */
static void refill_plan(struct refill *rf, struct pool *p)
{
    struct plan_batch *b = &p->run.batch;
    enum plan_draw_result dr;

    if (!plan_due(&p->cfg, p->run.len, p->run.unfinished)) {
        p->run.unfinished = 0;
        refill_unlock(p); /* someone else refilled it (or finished it) */
        return;
    }
    if (plan_batch_start(b, &b->st, (size_t)plan_want(&p->cfg, p->run.len)) != 0) {
        health_problem(p, "out of memory for a batch of %" PRIu64 " IDs",
                       plan_want(&p->cfg, p->run.len));
        refill_unlock(p);
        return;
    }
    dr = plan_batch_draw(b, &p->cfg, &rf->rng, rf->push_chunk);
    if (dr == PLAN_DRAW_NOMEM) {
        health_problem(p, "out of memory drawing IDs");
        refill_unlock(p);
        return;
    }
    if (dr == PLAN_DRAW_DONE) {
        refill_push(rf, p);
        return;
    }
    /* The leases in meta cannot supply the batch: reserve one now. */
    {
        uint64_t need = app_span_for(&p->cfg, b->want - b->nids), span = lease_span(p);
        pool_set_state(p, POOL_RESERVE);
        if (lease_reserve(&rf->lc, p, span > need ? span : need, on_reserve) != 0)
            refill_push(rf, p);
    }
}

/* --- continue, prefetch -------------------------------------------------- */

/* The lock was renewed for another refill in a row. */
static void on_continue(struct rds *r, redisReply *reply, void *arg)
{
    struct pool *p = arg;
    struct refill *rf = refill_of(p);
    char next[U64_LEN];

    (void)r;
    if (!reply || reply->type != REDIS_REPLY_INTEGER || reply->integer != 1 || rf->stopping) {
        refill_unlock(p); /* lost the lock (or stopping): the next check starts over */
        return;
    }
    p->run.start_ms = clock_ms();
    sched_locked(p);
    /* meta's next is where the last push left it: the start of the plan */
    next[u64_fmt(p->run.batch.st.next, next)] = '\0';
    free(p->run.expected);
    p->run.expected = strdup(next);
    if (!p->run.expected) {
        refill_unlock(p);
        return;
    }
    refill_plan(rf, p);
}

/*
 * A refill (and maybe a prefetch) is done. Under heavy consumption the pool
 * can be below its low-water mark again already: then go on at once under
 * the same lock, renewed, instead of releasing it and waiting for the next
 * check (up to MAX_CONTINUE refills in a row, and only while no other pool
 * waits for a refill slot).
 */
static void refill_continue(struct refill *rf, struct pool *p)
{
    char ttl[16];

    if (rf->stopping || !plan_due(&p->cfg, p->run.len, p->run.unfinished) ||
        p->run.continued >= MAX_CONTINUE || sched_waiters(rf->sched)) {
        refill_unlock(p);
        return;
    }
    p->run.continued++;
    pool_set_state(p, POOL_LOCK);
    snprintf(ttl, sizeof(ttl), "%d", rf->lock_ttl_ms);
    if (rds_command(p->run.node->main, on_continue, p, "FCALL idpool_renew 1 %s %s %s", p->k_lock,
                    p->run.token, ttl) != 0)
        refill_unlock(p);
}

static void on_install(struct rds *r, redisReply *reply, void *arg)
{
    struct pool *p = arg;
    struct refill *rf = refill_of(p);

    (void)r;
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
        health_problem(p,
                       "storing the prefetched lease in meta failed: %s (the lease becomes a gap)",
                       rds_errstr(reply));
        refill_unlock(p);
        return;
    }
    p->seen.lease = p->run.batch.st; /* with the prefetched lease, as meta has it now */
    p->seen.lease_known = 1;
    refill_continue(rf, p);
}

static void on_prefetch(void *arg, enum store_err st, const struct store_lease *lease,
                        const char *err)
{
    struct pool *p = arg;
    struct refill *rf = refill_of(p);

    if (lease_got(&rf->lc, p, "prefetching the next lease failed", st, lease, err) != 0 ||
        rf->stopping || !run_valid(p)) {
        refill_unlock(p);
        return;
    }
    pool_set_state(p, POOL_INSTALL);
    if (lease_install(p, on_install) != 0)
        refill_unlock(p);
}

/* After a successful push: reserve the next lease if the current one runs low. */
static void refill_after_push(struct refill *rf, struct pool *p)
{
    uint64_t span = lease_span(p);

    if (!rf->stopping && plan_should_prefetch(&p->run.batch.st, span)) {
        pool_set_state(p, POOL_PREFETCH);
        if (lease_reserve(&rf->lc, p, span, on_prefetch) == 0)
            return;
    }
    refill_continue(rf, p);
}

/* --- push ---------------------------------------------------------------- */

/* Record one refill's duration (lock to last push reply) in the histogram. */
static void refill_latency(struct refill *rf, uint64_t ms)
{
    static const double bounds[STATUS_NLATENCY] = {
#define B(x) x,
        STATUS_LATENCY_BUCKETS(B)
#undef B
    };
    double sec = (double)ms / 1000.0;
    int i = 0;

    while (i < STATUS_NLATENCY && sec > bounds[i])
        i++;
    rf->lat[i]++;
    rf->lat_sum += sec;
    rf->lat_count++;
}

/* The job has the push connection: the pool is pushing (its lock is no longer renewed). */
static void on_push_start(struct push_job *job, void *arg)
{
    (void)job;
    pool_set_state(arg, POOL_PUSH);
}

/* A push waits for the lock renewals in flight: they touch the key its WATCH guards. */
static int push_ready(void *arg)
{
    const struct pool *p = arg;

    return p->sched.renewing == 0;
}

/*
 * The pool grew by `n` IDs of this refill, up to length `len`, leaving meta's
 * leases at `st`: count them, whether the whole batch went in or only its
 * first chunks before a fence or failure.
 */
static void refill_count(struct refill *rf, struct pool *p, size_t n, uint64_t len,
                         const struct gen_state *st)
{
    p->run.len = len;
    p->c.pushed += n;
    p->last_refill_unix_ms = unix_ms();
    p->seen.lease = *st;
    p->seen.lease_known = 1;
    p->seen.len = len;
    p->seen.len_known = 1;
    health_refilled(rf->health, p);
}

/*
 * A push that did not append the whole batch: say why and how much went in.
 * The refill is unfinished: the next check takes the lock again and
 * finishes it, even when the chunks appended left the pool above its
 * low-water mark (plan_due), so a fence never leaves a pool short for good.
 */
static void refill_cut_short(struct refill *rf, struct pool *p, const struct push_job *job)
{
    size_t n = push_appended(job);
    char done[96];

    p->run.unfinished = 1;
    if (n > 0) {
        refill_count(rf, p, n, job->len, &job->chunks[job->ndone - 1].after);
        snprintf(done, sizeof(done), "%zu of %zu IDs appended (pool now %" PRIu64 ")", n,
                 p->run.batch.nids, job->len);
    } else {
        snprintf(done, sizeof(done), "none of %zu IDs appended", p->run.batch.nids);
    }
    switch (job->result) {
    case PUSH_FENCED:
        p->c.fenced++;
        log_warn("app=%s push fenced off: %s; %s, the rest of this refill was rejected; "
                 "finishing it at the next check",
                 p->cfg.key, job->msg, done);
        break;
    case PUSH_EPOCH:
        sched_discarded(p, NULL);
        break;
    case PUSH_UNVALIDATED:
        log_warn("app=%s push refused: %s; validating the server again, then refilling", p->cfg.key,
                 job->msg);
        break;
    case PUSH_NOFENCE:
        node_check_library(p->run.node); /* the guard's library may be gone or foreign */
        health_problem(p, "push failed: %s", job->msg);
        break;
    case PUSH_OK:
    case PUSH_STALE:
    case PUSH_ERROR:
        health_problem(p, "push failed: %s", job->msg);
        break;
    }
}

static void on_pushed(struct push_job *job, void *arg)
{
    struct pool *p = arg;
    struct refill *rf = refill_of(p);
    const struct plan_batch *b = &p->run.batch;

    if (job->result != PUSH_OK) {
        refill_cut_short(rf, p, job);
        refill_unlock(p);
        return;
    }
    p->run.unfinished = 0;
    p->c.refills++;
    refill_count(rf, p, b->nids, job->len, &b->st);
    refill_latency(rf, clock_ms() - p->run.start_ms);
    log_debug("app=%s pushed %zu IDs, pool now %" PRIu64, p->cfg.key, b->nids, p->run.len);
    refill_after_push(rf, p);
}

/* The pusher of node n, made when first needed; NULL when out of memory. */
static struct pusher *pusher_of(struct refill *rf, struct node *n)
{
    if (node_table_fit(&rf->pushers, &rf->npushers, sizeof(*rf->pushers), n) != 0)
        return NULL;
    if (!rf->pushers[n->id])
        rf->pushers[n->id] = pusher_new(n, rf->lock_ttl_ms);
    return rf->pushers[n->id];
}

/* Cut the batch into push chunks and queue it for the pusher of the refill's node. */
static void refill_push(struct refill *rf, struct pool *p)
{
    struct plan_batch *b = &p->run.batch;
    struct push_job *job = &p->run.job;
    struct pusher *pu = pusher_of(rf, p->run.node);

    if (b->nids == 0 || !pu) {
        if (!pu)
            health_problem(p, "out of memory for the pusher of its node");
        refill_unlock(p);
        return;
    }
    if (plan_batch_split(b, rf->push_chunk) != 0) {
        health_problem(p, "out of memory for the push chunks of %zu IDs", b->nids);
        refill_unlock(p);
        return;
    }
    pool_set_state(p, POOL_PUSHQ);
    job->k_pool = p->k_pool;
    job->k_meta = p->k_meta;
    job->k_lock = p->k_lock;
    job->token = p->run.token;
    job->expected = p->run.expected ? p->run.expected : "";
    job->ids = b->ids;
    job->chunks = b->chunks;
    job->nchunks = b->nchunks;
    job->start = on_push_start;
    job->done = on_pushed;
    job->ready = push_ready;
    job->arg = p;
    push_submit(pu, job);
}

/* --- the daemon ---------------------------------------------------------- */

/* A renewal a push waited for has landed (scheduler.c): its node's pusher may start it. */
static void on_renewed(struct pool *p, void *arg)
{
    struct refill *rf = arg;
    unsigned id = p->run.node->id;

    if (id < rf->npushers && rf->pushers[id])
        push_kick(rf->pushers[id]);
}

/* A pool went idle: its refill slot goes on, and a shutdown may be complete. */
static void on_idle(struct pool *p, void *arg)
{
    struct refill *rf = arg;

    sched_release(rf->sched, p);
    maybe_stopped(rf);
}

static void on_loaded(void *arg)
{
    maybe_stopped(arg);
}

static void src_each(void *ctx, status_app_fn *fn, void *arg)
{
    struct refill *rf = ctx;

    pools_each_view(rf->pools, fn, arg);
}

static int src_one(void *ctx, const char *key, status_app_fn *fn, void *arg)
{
    struct refill *rf = ctx;

    return pools_one_view(rf->pools, key, fn, arg);
}

static void src_daemon(void *ctx, struct daemon_view *out)
{
    struct refill *rf = ctx;
    struct rds_stats rs;
    struct store_stats ss;

    memset(out, 0, sizeof(*out));
    nodemap_stats(rf->map, &rs);
    store_get_stats(rf->store, &ss);
    out->version = IDPOOL_VERSION;
    out->instance = rf->instance;
    out->started_unix_ms = rf->started_unix_ms;
    out->redis_up = nodemap_ready(rf->map);
    out->mysql_up = ss.up;
    out->mysql_schema_missing = ss.schema_missing;
    snprintf(out->mysql_denied, sizeof(out->mysql_denied), "%s", ss.denied);
    out->redis_errors = rs.errors;
    out->redis_reconnects = rs.reconnects;
    out->mysql_errors = ss.errors;
    out->mysql_reconnects = ss.reconnects;
    pools_tally(rf->pools, out);
    memcpy(out->refill_latency, rf->lat, sizeof(rf->lat));
    out->refill_latency_sum = rf->lat_sum;
    out->refill_latency_count = rf->lat_count;
}

void refill_status_source(struct refill *rf, struct status_source *out)
{
    out->ctx = rf;
    out->each_app = src_each;
    out->one_app = src_one;
    out->daemon = src_daemon;
}

uint64_t refill_reload(struct refill *rf)
{
    pools_reload_ledger(rf->pools);
    return pools_reread(rf->pools);
}

void refill_configure(struct refill *rf, const struct config *cfg)
{
    rf->lock_ttl_ms = cfg->lock_ttl_ms;
    rf->push_chunk = (size_t)cfg->push_chunk;
    rf->lc.reserve = (enum plan_reserve_mode)cfg->failover_reserve;
    health_configure(rf->health, cfg->stall_ms, cfg->alert_resolve_ms, cfg->id_space_warn_days);
    for (size_t i = 0; i < rf->npushers; i++)
        if (rf->pushers[i])
            pusher_configure(rf->pushers[i], cfg->lock_ttl_ms);
    sched_configure(rf->sched, cfg->tick_ms, cfg->reload_ms, cfg->lock_ttl_ms);
    pools_set_tick(rf->pools, cfg->tick_ms);
    pools_set_memory(rf->pools, cfg->pool_memory_mb);
}

void refill_node_state(struct refill *rf, struct node *n, int ready)
{
    if (!ready)
        return;
    /* Alerts announced while the node was unreachable reach pub/sub and meta now. */
    for (size_t i = 0; i < pools_count(rf->pools); i++) {
        struct pool *p = pools_at(rf->pools, i);
        if (nodemap_for_key(rf->map, p->k_meta) == n)
            health_resync(rf->health, p);
    }
    sched_node_ready(rf->sched, n);
}

static void on_stopped(evutil_socket_t fd, short what, void *arg)
{
    struct refill *rf = arg;

    (void)fd;
    (void)what;
    if (rf->stop_done) {
        void (*done)(void *) = rf->stop_done;
        rf->stop_done = NULL;
        done(rf->stop_arg);
    }
}

void refill_shutdown(struct refill *rf, void (*done)(void *), void *arg)
{
    rf->stopping = 1;
    rf->stop_done = done;
    rf->stop_arg = arg;
    sched_stop(rf->sched);
    pools_stop(rf->pools);
    maybe_stopped(rf);
}

struct refill *refill_new(struct event_base *base, const struct config *cfg, struct nodemap *map,
                          struct store *store, struct alerts *alerts)
{
    struct refill *rf = calloc(1, sizeof(*rf));

    if (!rf)
        return NULL;
    rf->base = base;
    rf->map = map;
    rf->store = store;
    rf->instance = strdup(cfg->instance);
    rf->started_unix_ms = unix_ms();
    rf->lock_ttl_ms = cfg->lock_ttl_ms;
    rf->push_chunk = (size_t)cfg->push_chunk;
    rng_seed_os(&rf->rng);
    rf->stop_ev = event_new(base, -1, 0, on_stopped, rf);
    rf->health =
        health_new(alerts, map, cfg->stall_ms, cfg->alert_resolve_ms, cfg->id_space_warn_days);
    if (!rf->instance || !rf->stop_ev || !rf->health)
        goto fail;
    {
        struct pools_env env = {.store = store,
                                .health = rf->health,
                                .map = map,
                                .tick_ms = cfg->tick_ms,
                                .pool_memory_mb = cfg->pool_memory_mb,
                                .on_idle = on_idle,
                                .on_loaded = on_loaded,
                                .arg = rf};
        rf->pools = pools_new(cfg->key_prefix, &env);
        if (!rf->pools)
            goto fail;
    }
    {
        struct sched_env env = {.prefix = cfg->key_prefix,
                                .map = map,
                                .pools = rf->pools,
                                .health = rf->health,
                                .start = refill_lock,
                                .renewed = on_renewed,
                                .arg = rf};
        rf->sched = sched_new(base, &env, cfg->tick_ms, cfg->reload_ms, cfg->lock_ttl_ms);
        if (!rf->sched)
            goto fail;
        if (!cfg->refill)
            sched_passive(rf->sched);
    }
    rf->lc.store = store;
    rf->lc.health = rf->health;
    rf->lc.pools = rf->pools;
    rf->lc.reserve = (enum plan_reserve_mode)cfg->failover_reserve;
    pools_reload(rf->pools);
    return rf;
fail:
    refill_free(rf);
    return NULL;
}

struct pools *refill_pools(struct refill *rf)
{
    return rf->pools;
}

void refill_free(struct refill *rf)
{
    if (!rf)
        return;
    sched_free(rf->sched);
    pools_free(rf->pools);
    for (size_t i = 0; i < rf->npushers; i++)
        pusher_free(rf->pushers[i]);
    free(rf->pushers);
    health_free(rf->health);
    if (rf->stop_ev)
        event_free(rf->stop_ev);
    free(rf->instance);
    free(rf);
}
