#include "scheduler.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cadence.h"
#include "clock.h"
#include "health.h"
#include "keys.h"
#include "fault.h"
#include "log.h"
#include "node.h"
#include "plan.h"
#include "pool.h"
#include "rds.h"
#include "resp.h"
#include "slots.h"

#define RATE_SAMPLE_MS 1000 /* minimum interval between consumption-rate samples */
/*
 * Refills in progress at once (lock taken, not yet released). More pools
 * below their mark wait in line instead of all taking their lock at once:
 * at a cold start with 10,000 applications, locks taken long before the
 * single MySQL worker gets to their reservation would only be renewed for
 * seconds, or expire and waste their lease.
 */
#define MAX_REFILLS 32

/* The epoch sweep of one node (its SCAN and the idpool_epoch calls of the keys it found). */
struct sweep {
    struct sched *s;
    struct node *n;
    int scanning;        /* its SCAN is in progress */
    unsigned pending;    /* its idpool_epoch calls in flight */
    size_t swept, metas; /* pools and metas seen by the sweep in progress */
    size_t discarded;    /* pools (or metas without one) it discarded */
};

struct sched {
    struct sched_env env;
    char match[KEYS_MAX];  /* SCAN pattern of every key of an application (keys.h) */
    int passive;           /* issuer-only: load rows, check nothing */
    struct sweep **sweeps; /* by node id, made when the node is first ready */
    size_t nsweeps;
    struct event *tick_ev;   /* persistent tick */
    struct event *reload_ev; /* persistent reload timer */
    int tick_ms, reload_ms, lock_ttl_ms;
    struct slots slots; /* the refill slots (MAX_REFILLS) and the pools in line */
    int stopping;
};

static void set_timer(struct event *ev, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    evtimer_add(ev, &tv);
}

/* --- slots --------------------------------------------------------------- */

/* The pool whose refill slot (or place in line) is e. */
static struct pool *pool_of_slot(struct slot_entry *e)
{
    return (struct pool *)(void *)((char *)e - offsetof(struct pool, sched.slot));
}

/* A pool below its mark: refill it now if a slot is free, else in line (FIFO) for the next. */
static void sched_request(struct sched *s, struct pool *p)
{
    if (!slots_request(&s->slots, &p->sched.slot)) {
        pool_set_state(p, POOL_IDLE);
        return;
    }
    s->env.start(p, s->env.arg);
}

void sched_release(struct sched *s, struct pool *p)
{
    struct slot_entry *e;

    if (!slots_release(&s->slots, &p->sched.slot))
        return;
    while ((e = slots_next(&s->slots))) {
        struct pool *w = pool_of_slot(e);
        if (w->live && !w->dead && w->state == POOL_IDLE && !s->stopping &&
            node_ready(nodemap_for_key(s->env.map, w->k_pool)))
            sched_request(s, w); /* it re-checks its pool under the lock */
    }
}

int sched_waiters(const struct sched *s)
{
    return slots_waiters(&s->slots);
}

void sched_locked(struct pool *p)
{
    p->sched.renewed_ms = clock_ms();
}

/* --- checks -------------------------------------------------------------- */

static uint64_t reply_u64(const redisReply *r)
{
    return r->type == REDIS_REPLY_INTEGER && r->integer > 0 ? (uint64_t)r->integer : 0;
}

/*
 * Consumption (IDs/s, smoothed) from what every check sees in Redis: IDs
 * pushed by all instances (meta 'pushed') minus what the pool grew by. It
 * decays to 0 when clients stop, whoever does the refilling.
 */
static void rate_sample(struct pool *p, uint64_t pushed, uint64_t len)
{
    struct pool_seen *sn = &p->seen;
    uint64_t now = clock_ms();

    if (sn->rate_at_ms == 0 || pushed < sn->rate_pushed) {
        /* first sample, or meta was lost: start over */
        sn->rate_pushed = pushed;
        sn->rate_len = len;
        sn->rate_at_ms = now;
        return;
    }
    if (now - sn->rate_at_ms < RATE_SAMPLE_MS)
        return;
    {
        double gone = (double)(pushed - sn->rate_pushed) - ((double)len - (double)sn->rate_len);
        double inst = gone > 0 ? gone * 1000.0 / (double)(now - sn->rate_at_ms) : 0;
        sn->rate = sn->rate == 0 ? inst : 0.7 * sn->rate + 0.3 * inst;
    }
    sn->rate_pushed = pushed;
    sn->rate_len = len;
    sn->rate_at_ms = now;
}

/*
 * idpool_take reads the limits from meta: keep them equal to the row (also
 * after meta was lost), and remove them when the row is not served.
 */
static void sync_limits(struct pool *p, const redisReply *per_take, const redisReply *per_second)
{
    char t[U64_LEN], ps[U64_LEN];
    int have = per_take->type == REDIS_REPLY_STRING && per_second->type == REDIS_REPLY_STRING;

    if (!p->live) {
        if (have)
            pool_limits(p, NULL, NULL);
        return;
    }
    t[u64_fmt(p->cfg.per_take, t)] = '\0';
    ps[u64_fmt(p->cfg.per_second, ps)] = '\0';
    if (have && strcmp(per_take->str, t) == 0 && strcmp(per_second->str, ps) == 0)
        return;
    pool_limits(p, t, ps);
}

/* The interval of p's checks: its row's; a row not served, whose interval may mean nothing: slow.
 */
static uint64_t check_interval(const struct pool *p)
{
    return p->live ? p->cfg.interval_ms : CADENCE_IDLE_CHECK_MS;
}

/* After a check: is the pool busy, and when to look again (if it is not refilled now). */
static void check_done(struct pool *p, uint64_t len)
{
    p->sched.busy = cadence_busy(p->seen.len_known, p->seen.len, len, p->seen.rate);
    p->sched.due_ms = cadence_next_check(p->sched.check_ms, check_interval(p), p->sched.busy);
    if (p->live && len >= p->cfg.low_water) { /* (an invalid row's low water means nothing) */
        health_pool_ok(p);
        pool_checked(p);
    }
    p->seen.len = len;
    p->seen.len_known = 1;
}

/* The check is over: refill the pool if it is below its mark (or its last refill was cut short). */
static void check_next(struct sched *s, struct pool *p)
{
    if (!plan_due(&p->cfg, p->seen.len, p->run.unfinished) || s->stopping || !p->live) {
        pool_set_state(p, POOL_IDLE);
        return;
    }
    sched_request(s, p);
}

static void on_llen(struct rds *r, redisReply *reply, void *arg)
{
    struct pool *p = arg;
    struct sched *s = p->sched.owner;

    (void)r;
    if (!reply || reply->type != REDIS_REPLY_INTEGER) {
        if (reply)
            health_problem(p, "LLEN %s failed: %s", p->k_pool, rds_errstr(reply));
        pool_set_state(p, POOL_IDLE);
        return;
    }
    check_done(p, reply_u64(reply));
    if (p->seen.len < p->cfg.low_water)
        p->sched.status_due_ms = 0; /* read the counters at the next check */
    check_next(s, p);
}

static void on_check(struct rds *r, redisReply *reply, void *arg)
{
    struct pool *p = arg;
    struct sched *s = p->sched.owner;
    uint64_t prev_underflows = p->c.underflows;
    redisReply **e;
    int uf_in_meta;

    (void)r;
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 8) {
        if (reply) {
            char why[300];
            snprintf(why, sizeof(why), "idpool_status failed: %.250s", rds_errstr(reply));
            health_problem(p, "idpool_status %s failed: %s", p->k_pool, rds_errstr(reply));
            if (p->live) /* a check that keeps failing must page, not wedge quietly */
                health_unreachable(s->env.health, p, clock_ms(), why);
        }
        pool_set_state(p, POOL_IDLE);
        return;
    }
    e = reply->element;
    check_done(p, reply_u64(e[0]));
    p->c.underflows = reply_u64(e[1]);
    p->c.refused_limit = reply_u64(e[2]);
    p->c.refused_rate = reply_u64(e[3]);
    p->c.taken = reply_u64(e[4]);
    uf_in_meta = reply_u64(e[5]) == 1;
    sync_limits(p, e[6], e[7]);
    if (reply->elements > 8)
        rate_sample(p, reply_u64(e[8]), p->seen.len);
    if (reply->elements > 10) {
        p->c.refused_epoch = reply_u64(e[9]);
        /* IDs in a pool not written under this epoch (meta lost, or written by a daemon
         * that saw another Redis): sweep it at the next check, before refilling it. */
        if (e[10]->type == REDIS_REPLY_STRING && p->seen.len > 0 &&
            strcmp(e[10]->str, rds_epoch(r)) != 0)
            p->sched.epoch_seen[0] = '\0';
    }
    if (p->live)
        health_check(s->env.health, p, prev_underflows, uf_in_meta,
                     reply->elements > 10 && e[10]->type == REDIS_REPLY_STRING && e[10]->len == 0);
    p->seen.counters_known = 1;
    p->sched.status_due_ms = cadence_next_status(p->sched.check_ms, check_interval(p),
                                                 health_pending(p) || uf_in_meta, p->sched.busy);
    check_next(s, p);
}

void sched_discarded(struct pool *p, const char *epoch)
{
    p->c.discards++;
    log_warn("app=%s redis restart or failover detected (or a rollback, a restore or a library "
             "reload%s%s): pool of an earlier epoch discarded, refilling from a fresh lease",
             p->cfg.key, epoch ? "; epoch now " : "", epoch ? epoch : "");
}

static void on_epoch(struct rds *r, redisReply *reply, void *arg)
{
    struct pool *p = arg;

    if (!reply || reply->type != REDIS_REPLY_INTEGER) {
        if (reply)
            health_problem(p, "epoch check failed: %s", rds_errstr(reply));
        return;
    }
    if (reply->integer == 1)
        sched_discarded(p, rds_epoch(r));
    snprintf(p->sched.epoch_seen, sizeof(p->sched.epoch_seen), "%s", rds_epoch(r));
}

/* The alert states in meta, read once: firing ones are adopted (health_adopt). */
static void on_adopt(struct rds *r, redisReply *reply, void *arg)
{
    struct pool *p = arg;
    struct sched *s = p->sched.owner;
    unsigned mask = 0;

    (void)r;
    p->side_calls--;
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != ALERT_COUNT) {
        if (reply)
            log_debug("app=%s reading the alert states in meta failed: %s", p->cfg.key,
                      rds_errstr(reply));
        return; /* read again at the next check */
    }
    for (size_t k = 0; k < reply->elements; k++) {
        const redisReply *e = reply->element[k];
        if (e->type == REDIS_REPLY_STRING && strcmp(e->str, "firing") == 0)
            mask |= 1u << k;
    }
    if (!p->dead)
        health_adopt(s->env.health, p, mask);
}

/* HMGET <meta> alert:<kind>... for every kind, in enum order, on the pool's node. */
static int send_adopt(struct rds *rds, struct pool *p)
{
    static char fields[ALERT_COUNT][64];
    const char *argv[2 + ALERT_COUNT];

    argv[0] = "HMGET";
    argv[1] = p->k_meta;
    for (int k = 0; k < ALERT_COUNT; k++) {
        if (!fields[k][0])
            snprintf(fields[k], sizeof(fields[k]), "alert:%s", alert_name((enum alert_kind)k));
        argv[2 + k] = fields[k];
    }
    if (rds_command_argv(rds, on_adopt, p, 2 + ALERT_COUNT, argv, NULL) != 0)
        return -1;
    p->side_calls++;
    return 0;
}

/* A sweep of node n is running: its SCAN, or idpool_epoch calls it sent. */
static int node_sweeping(const struct sched *s, const struct node *n)
{
    const struct sweep *sw = n->id < s->nsweeps ? s->sweeps[n->id] : NULL;

    return sw && (sw->scanning || sw->pending);
}

/* Send the check of one pool, on node n (ready), if it is due. */
static void check_one(struct sched *s, struct pool *p, struct node *n, uint64_t now)
{
    struct rds *rds = n->main;
    const char *epoch = node_epoch(n);
    /* First look at a pool on this Redis process: discard it if it was filled under
     * another one (cadence.h). */
    struct cadence_pool cp = {
        .now = now,
        .due_ms = p->sched.due_ms,
        .status_due_ms = p->sched.status_due_ms,
        .epoch_due = strcmp(p->sched.epoch_seen, epoch) != 0,
        .sweeping = node_sweeping(s, n),
        .waiting = p->sched.slot.waiting,
        .idle = p->state == POOL_IDLE,
        .live = p->live,
        .dead = p->dead,
    };
    enum cadence_check what = cadence_check(&cp);

    p->sched.owner = s;
    if (what == CADENCE_NONE)
        return;
    p->sched.check_ms = now;
    p->sched.due_ms = now + check_interval(p);
    pool_set_state(p, POOL_CHECK);
    if (what == CADENCE_EPOCH &&
        rds_command(rds, on_epoch, p, "FCALL idpool_epoch 1 %s %s", p->k_meta, epoch) != 0) {
        pool_set_state(p, POOL_IDLE);
        return;
    }
    /* after idpool_epoch: alert states of a discarded meta are gone with it */
    if (!p->health.adopted)
        (void)send_adopt(rds, p);
    if (what != CADENCE_LLEN) {
        if (rds_command(rds, on_check, p, "FCALL_RO idpool_status 1 %s", p->k_meta) != 0)
            pool_set_state(p, POOL_IDLE);
    } else if (rds_command_resp(rds, on_llen, p, p->llen_cmd, p->llen_len) != 0) {
        pool_set_state(p, POOL_IDLE);
    }
}

/* --- the epoch sweep ---------------------------------------------------- */

/*
 * After every (re)connect, which is also every validation, every pool and
 * meta in Redis is checked against the epoch: idpool_epoch discards what an
 * earlier epoch wrote (a restart, a rollback to older data, a failover, a
 * reload of the library or a restore into the process), a pool whose meta
 * was lost, and a meta of an earlier epoch whose pool LPOP drained. The keys
 * come from SCAN, not from the rows: the sweep does not wait for MySQL (it
 * may be down when Redis comes back) nor for a pool that is busy refilling,
 * and it also covers pools of rows soft-deleted or removed. A pool and its
 * meta found both are checked twice (idpool_epoch is idempotent).
 * Each node is swept on its own, when its main connection is ready (a
 * node's epoch is its own): one SCAN per primary.
 */
struct sweep_item {
    struct sweep *sw;
    char *pool; /* the pool key (heap) */
};

static void sweep_scan(struct sweep *sw, const char *cursor);

/* The sweep is over when its SCAN is done and every idpool_epoch has answered. */
static void sweep_done(struct sweep *sw, struct rds *r)
{
    if (sw->scanning || sw->pending)
        return;
    log_info("epoch sweep (epoch %s): %zu pools and %zu metas in Redis, %zu discarded",
             rds_epoch(r), sw->swept, sw->metas, sw->discarded);
}

/* The registered pool of a pool key (its application: keys_app_of), or NULL. */
static struct pool *sweep_pool_of(struct sched *s, const char *key)
{
    char app[APP_KEY_MAX + 1];

    if (keys_app_of(key, strlen(key), app, sizeof(app)) != 0)
        return NULL;
    return pools_find(s->env.pools, app);
}

static void on_sweep_epoch(struct rds *r, redisReply *reply, void *arg)
{
    struct sweep_item *it = arg;
    struct sweep *sw = it->sw;
    struct pool *p = sweep_pool_of(sw->s, it->pool);

    if (p)
        p->side_calls--;
    if (reply && reply->type == REDIS_REPLY_INTEGER) {
        if (p)
            snprintf(p->sched.epoch_seen, sizeof(p->sched.epoch_seen), "%s", rds_epoch(r));
        if (reply->integer == 1) {
            sw->discarded++;
            if (p) {
                sched_discarded(p, rds_epoch(r));
            } else {
                log_warn("pool %s discarded: written under an earlier epoch or without "
                         "meta (epoch now %s); no application row for it is loaded",
                         it->pool, rds_epoch(r));
            }
        }
    } else if (reply) {
        log_warn("epoch sweep: idpool_epoch %s failed: %s", it->pool, rds_errstr(reply));
    }
    free(it->pool);
    free(it);
    sw->pending--;
    if (reply)
        sweep_done(sw, r);
}

/* Sweep the pools and metas of one SCAN reply, then go on with its cursor. */
static void on_sweep_scan(struct rds *r, redisReply *reply, void *arg)
{
    struct sweep *sw = arg;
    const redisReply *keys;

    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_ARRAY) {
        if (reply)
            log_warn("epoch sweep: SCAN failed: %s; the pools are checked one by one",
                     rds_errstr(reply));
        sw->scanning = 0;
        return;
    }
    keys = reply->element[1];
    for (size_t i = 0; i < keys->elements; i++) {
        const redisReply *k = keys->element[i];
        enum keys_kind kind;
        struct sweep_item *it;
        struct pool *p;
        char *meta;

        if (k->type != REDIS_REPLY_STRING || strlen(k->str) != k->len)
            continue; /* not a key idpool names (a NUL in it) */
        kind = keys_kind_of(k->str, k->len);
        if (kind != KEYS_POOL && kind != KEYS_META)
            continue; /* a lock */
        it = malloc(sizeof(*it));
        meta = it ? keys_sibling(k->str, k->len, KEYS_META) : NULL;
        if (!meta || !(it->pool = keys_sibling(k->str, k->len, KEYS_POOL))) {
            free(meta);
            free(it);
            continue;
        }
        it->sw = sw;
        if (kind == KEYS_POOL)
            sw->swept++;
        else
            sw->metas++;
        p = sweep_pool_of(sw->s, k->str);
        if (rds_command(r, on_sweep_epoch, it, "FCALL idpool_epoch 1 %s %s", meta, rds_epoch(r)) ==
            0) {
            sw->pending++;
            if (p)
                p->side_calls++;
        } else {
            free(it->pool);
            free(it);
        }
        free(meta);
    }
    if (strcmp(reply->element[0]->str, "0") != 0) {
        sweep_scan(sw, reply->element[0]->str);
        return;
    }
    sw->scanning = 0;
    sweep_done(sw, r);
}

static void sweep_scan(struct sweep *sw, const char *cursor)
{
    if (rds_command(sw->n->main, on_sweep_scan, sw, "SCAN %s MATCH %s COUNT 1000", cursor,
                    sw->s->match) != 0)
        sw->scanning = 0;
}

/* The sweep of node n, made when first needed; NULL when out of memory. */
static struct sweep *sweep_of(struct sched *s, struct node *n)
{
    if (node_table_fit(&s->sweeps, &s->nsweeps, sizeof(*s->sweeps), n) != 0)
        return NULL;
    if (!s->sweeps[n->id] && (s->sweeps[n->id] = calloc(1, sizeof(**s->sweeps))) != NULL) {
        s->sweeps[n->id]->s = s;
        s->sweeps[n->id]->n = n;
    }
    return s->sweeps[n->id];
}

/* The node's main connection validated the server at its handshake (rds): sweep under that epoch.
 */
static void sweep_start(struct sched *s, struct node *n)
{
    struct sweep *sw = sweep_of(s, n);

    if (!sw) {
        log_error("epoch sweep: out of memory; the pools are checked one by one");
        return;
    }
    sw->scanning = 1;
    sw->swept = sw->metas = sw->discarded = 0;
    if (fault_at(FAULT_SWEEP))
        fault_fire();
    sweep_scan(sw, "0");
}

/* --- renewal ------------------------------------------------------------- */

static void on_renew(struct rds *r, redisReply *reply, void *arg)
{
    struct pool *p = arg;
    struct sched *s = p->sched.owner;

    (void)r;

    p->side_calls--;
    p->sched.renewing--;
    if (reply && reply->type == REDIS_REPLY_INTEGER && reply->integer == 0)
        log_debug("app=%s lock expired while waiting; the push will be fenced off", p->cfg.key);
    if (p->state == POOL_PUSHQ)
        s->env.renewed(p, s->env.arg); /* its push may have waited for this renewal to land */
}

/*
 * Keep the lock while a pool waits for a lease or for the push connection:
 * a slow MySQL is not a reason to let another refiller in (its push would
 * be fenced off and the lease wasted). Compare-and-pexpire, so a lock
 * already lost stays lost. A pool that is pushing is not renewed: the
 * renewal would touch the key its transactions WATCH.
 */
static void renew_locks(struct sched *s, uint64_t now)
{
    char ttl[16];

    snprintf(ttl, sizeof(ttl), "%d", s->lock_ttl_ms);
    for (size_t i = 0; i < pools_count(s->env.pools); i++) {
        struct pool *p = pools_at(s->env.pools, i);

        if (!p->run.locked ||
            (p->state != POOL_RESERVE && p->state != POOL_PREFETCH && p->state != POOL_PUSHQ) ||
            now - p->sched.renewed_ms < (uint64_t)s->lock_ttl_ms / 3)
            continue;
        p->sched.owner = s;
        if (rds_command(p->run.node->main, on_renew, p, "FCALL idpool_renew 1 %s %s %s", p->k_lock,
                        p->run.token, ttl) == 0) {
            p->side_calls++;
            p->sched.renewing++;
            p->sched.renewed_ms = now;
        }
    }
}

/* --- the tick ------------------------------------------------------------ */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct sched *s = arg;
    struct pools *reg = s->env.pools;
    uint64_t now = clock_ms();

    (void)fd;
    (void)what;
    pools_sweep(reg);
    if (s->passive)
        return;          /* issuer-only: the refillers check the pools */
    renew_locks(s, now); /* (a renewal on a node that is not ready is not sent) */
    /* Every due check goes out in one write per node: hiredis buffers until the loop flushes. */
    for (size_t i = 0; i < pools_count(reg); i++) {
        struct pool *p = pools_at(reg, i);
        struct node *n = nodemap_for_key(s->env.map, p->k_pool);

        if (!node_ready(n)) {
            /* Nothing can be pushed: a pool that needed IDs stalls. */
            if (p->live && !p->dead && !s->stopping)
                health_unreachable(s->env.health, p, now, "Redis is unreachable");
        } else if (!s->stopping) {
            check_one(s, p, n, now);
        }
    }
}

static void on_reload(evutil_socket_t fd, short what, void *arg)
{
    struct sched *s = arg;

    (void)fd;
    (void)what;
    pools_reload(s->env.pools);
}

void sched_passive(struct sched *s)
{
    s->passive = 1;
}

void sched_node_ready(struct sched *s, struct node *n)
{
    if (s->passive)
        return;
    sweep_start(s, n);
    on_tick(-1, 0, s); /* check every pool at once after (re)connecting */
}

void sched_stop(struct sched *s)
{
    s->stopping = 1;
    evtimer_del(s->tick_ev);
    evtimer_del(s->reload_ev);
}

void sched_configure(struct sched *s, int tick_ms, int reload_ms, int lock_ttl_ms)
{
    s->lock_ttl_ms = lock_ttl_ms;
    if (s->tick_ms != tick_ms) {
        s->tick_ms = tick_ms;
        set_timer(s->tick_ev, tick_ms);
    }
    if (s->reload_ms != reload_ms) {
        s->reload_ms = reload_ms;
        set_timer(s->reload_ev, reload_ms);
    }
}

struct sched *sched_new(struct event_base *base, const struct sched_env *env, int tick_ms,
                        int reload_ms, int lock_ttl_ms)
{
    struct sched *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->env = *env;
    slots_init(&s->slots, MAX_REFILLS);
    keys_scan_pattern(env->prefix, s->match, sizeof(s->match));
    s->tick_ev = event_new(base, -1, EV_PERSIST, on_tick, s);
    s->reload_ev = event_new(base, -1, EV_PERSIST, on_reload, s);
    if (!s->tick_ev || !s->reload_ev) {
        sched_free(s);
        return NULL;
    }
    sched_configure(s, tick_ms, reload_ms, lock_ttl_ms);
    return s;
}

void sched_free(struct sched *s)
{
    if (!s)
        return;
    if (s->tick_ev)
        event_free(s->tick_ev);
    if (s->reload_ev)
        event_free(s->reload_ev);
    for (size_t i = 0; i < s->nsweeps; i++)
        free(s->sweeps[i]);
    free(s->sweeps);
    free(s);
}
