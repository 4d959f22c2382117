#include "lease.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "fault.h"
#include "health.h"
#include "log.h"
#include "node.h"
#include "pool.h"
#include "resp.h"

void lease_read_meta(struct pool *p, const redisReply *reply)
{
    struct plan_meta m;

    plan_meta_init(&m);
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *f = reply->element[i], *v = reply->element[i + 1];
        if (f->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING)
            plan_meta_field(&m, f->str, f->len, v->str, v->len);
    }
    free(p->run.expected);
    p->run.expected = NULL;
    if (m.have_next && !(p->run.expected = strndup(m.next, m.next_len)))
        m.bad = 1;
    if (plan_meta_end(&m, &p->run.batch.st) == PLAN_META_CORRUPT)
        log_warn("app=%s meta hash %s is corrupt; refilling from a fresh lease", p->cfg.key,
                 p->k_meta);
}

uint64_t lease_span(const struct pool *p)
{
    return plan_lease_span(&p->cfg, p->seen.rate);
}

/*
 * The pool should get a (new) reserve from a reservation of `span`: it holds
 * none, or one less than half as large (kept while the pool was slower).
 */
static int reserve_wanted(const struct lease_ctx *lc, const struct pool *p, uint64_t span)
{
    return plan_reserve_kept(lc->reserve, p->cfg.type) &&
           (p->reserve.hi == 0 || p->reserve.hi - p->reserve.lo < span / 2);
}

/* After a refused reservation (id_space), the next is tried a second later, not with every refill.
 */
#define CONFLICT_RETRY_MS 1000

int lease_reserve(const struct lease_ctx *lc, struct pool *p, uint64_t span, store_reserve_fn *fn)
{
    if (p->health.lease_conflict && clock_ms() - p->health.conflict_ms < CONFLICT_RETRY_MS)
        return -1;
    p->run.reserve_split = reserve_wanted(lc, p, span) && span <= UINT64_MAX / 2;
    if (p->run.reserve_split)
        span *= 2;
    return store_reserve(lc->store, &p->cfg, span, gen_floor(&p->run.batch.st), fn, p);
}

/* A reservation succeeded: counted, alerts resolved, MySQL known to work. */
static void leased(const struct lease_ctx *lc, struct pool *p, const struct store_lease *lease)
{
    p->c.leases++;
    health_leased(lc->health, p, lease);
    pools_mysql_back(lc->pools);
}

static void reserve_hold(struct pool *p, uint64_t lo, uint64_t hi)
{
    if (p->reserve.hi)
        log_info("app=%s keeps [%" PRIu64 ", %" PRIu64 ") as this daemon's failover reserve "
                 "instead of the smaller [%" PRIu64 ", %" PRIu64 ") (a gap now)",
                 p->cfg.key, lo, hi, p->reserve.lo, p->reserve.hi);
    else
        log_info("app=%s keeps [%" PRIu64 ", %" PRIu64 ") as this daemon's failover reserve "
                 "(used once, only when MySQL cannot lease)",
                 p->cfg.key, lo, hi);
    p->reserve.lo = lo;
    p->reserve.hi = hi;
}

int lease_got(const struct lease_ctx *lc, struct pool *p, const char *what, enum store_err st,
              const struct store_lease *lease, const char *err)
{
    uint64_t hi;

    if (st != STORE_OK) {
        health_problem(p, "%s: %s", what, err);
        if (st == STORE_EXHAUSTED)
            health_exhausted(lc->health, p, err);
        if (st == STORE_CONFLICT)
            health_conflict(lc->health, p, err);
        return -1;
    }
    leased(lc, p, lease);
    if (fault_at(FAULT_RESERVED))
        fault_fire();
    hi = lease->hi;
    if (p->run.reserve_split && hi - lease->lo >= 2) {
        hi = plan_reserve_split(lease->lo, lease->hi);
        reserve_hold(p, hi, lease->hi);
    }
    p->run.reserve_split = 0;
    if (gen_add_lease(&p->run.batch.st, lease->lo, hi) != 0) {
        health_problem(p, "lease [%" PRIu64 ", %" PRIu64 ") is below the state; not used",
                       lease->lo, hi);
        return -1;
    }
    log_debug("app=%s reserved lease [%" PRIu64 ", %" PRIu64 ")", p->cfg.key, lease->lo, hi);
    return 0;
}

int lease_keep(const struct lease_ctx *lc, struct pool *p, const struct store_lease *lease)
{
    p->run.reserve_split = 0;
    leased(lc, p, lease);
    if (!reserve_wanted(lc, p, lease->hi - lease->lo))
        return -1;
    reserve_hold(p, lease->lo, lease->hi);
    return 0;
}

int lease_use_reserve(const struct lease_ctx *lc, struct pool *p, enum store_err st)
{
    struct gen_state *gs = &p->run.batch.st;
    uint64_t lo = p->reserve.lo, hi = p->reserve.hi;

    p->run.reserve_split = 0;
    if (hi == 0 ||
        (st != STORE_DOWN && st != STORE_SQL && st != STORE_UNKNOWN_COMMIT &&
         st != STORE_CONTENDED) ||
        !plan_reserve_usable(lc->reserve, p->cfg.type, p->run.expected != NULL, p->run.len))
        return -1;
    p->reserve.lo = p->reserve.hi = 0; /* once: whatever the push does, it may have landed */
    /* the leases in the state are spent (hence the reservation): what is left of them is a gap */
    *gs = (struct gen_state){0};
    if (gen_add_lease(gs, lo, hi) != 0)
        return -1;
    p->c.reserve_used++;
    log_warn("app=%s MySQL cannot lease: refilling from this daemon's failover reserve "
             "[%" PRIu64 ", %" PRIu64 ")",
             p->cfg.key, lo, hi);
    return 0;
}

int lease_install(struct pool *p, rds_reply_fn *fn)
{
    const struct gen_state *st = &p->run.batch.st;
    char expected[U64_LEN], nums[4][U64_LEN];
    /* the one-key form: the pool need not exist (a Cluster slot being migrated) */
    const char *argv[11] = {"FCALL",      "idpool_push",           "1",     p->k_lock,
                            p->run.token, node_epoch(p->run.node), expected};
    size_t argvlen[11];
    uint64_t v[4] = {st->next, st->hi, st->nlo, st->nhi};

    expected[u64_fmt(st->next, expected)] = '\0';
    for (int i = 0; i < 7; i++)
        argvlen[i] = strlen(argv[i]);
    for (int i = 0; i < 4; i++) {
        argv[7 + i] = nums[i];
        /* "" = no prefetched lease */
        argvlen[7 + i] = i >= 2 && !gen_has_next(st) ? 0 : u64_fmt(v[i], nums[i]);
    }
    return rds_command_argv(p->run.node->main, fn, p, 11, argv, argvlen);
}
