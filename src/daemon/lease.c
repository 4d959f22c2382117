#include "lease.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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

int lease_reserve(const struct lease_ctx *lc, struct pool *p, uint64_t span, store_reserve_fn *fn)
{
    return store_reserve(lc->store, p->cfg.id, p->cfg.key, span, gen_floor(&p->run.batch.st), fn,
                         p);
}

int lease_got(const struct lease_ctx *lc, struct pool *p, const char *what, enum store_err st,
              const struct store_lease *lease, const char *err)
{
    if (st != STORE_OK) {
        health_problem(p, "%s: %s", what, err);
        if (st == STORE_EXHAUSTED)
            health_exhausted(lc->health, p, err);
        return -1;
    }
    p->c.leases++;
    if (fault_at(FAULT_RESERVED))
        fault_fire();
    health_leased(lc->health, p, lease);
    pools_mysql_back(lc->pools);
    if (gen_add_lease(&p->run.batch.st, lease->lo, lease->hi) != 0) {
        health_problem(p, "lease [%" PRIu64 ", %" PRIu64 ") is below the state; not used",
                       lease->lo, lease->hi);
        return -1;
    }
    log_debug("app=%s reserved lease [%" PRIu64 ", %" PRIu64 ")", p->cfg.key, lease->lo, lease->hi);
    return 0;
}

int lease_install(struct pool *p, rds_reply_fn *fn)
{
    const struct gen_state *st = &p->run.batch.st;
    char expected[U64_LEN], nums[4][U64_LEN];
    const char *argv[13] = {"FCALL",   "idpool_push", "3",          p->k_pool,
                            p->k_meta, p->k_lock,     p->run.token, node_epoch(p->run.node),
                            expected};
    size_t argvlen[13];
    uint64_t v[4] = {st->next, st->hi, st->nlo, st->nhi};

    expected[u64_fmt(st->next, expected)] = '\0';
    for (int i = 0; i < 9; i++)
        argvlen[i] = strlen(argv[i]);
    for (int i = 0; i < 4; i++) {
        argv[9 + i] = nums[i];
        /* "" = no prefetched lease */
        argvlen[9 + i] = i >= 2 && !gen_has_next(st) ? 0 : u64_fmt(v[i], nums[i]);
    }
    return rds_command_argv(p->run.node->main, fn, p, 13, argv, argvlen);
}
