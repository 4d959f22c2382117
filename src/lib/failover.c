#include "failover.h"

struct failover_plan failover_plan(const struct failover *f, uint64_t now, int low)
{
    struct failover_plan p = {0};

    p.back = f->env > 0 && now >= f->failback_at_ms;
    if (!p.back && (!low || now < f->retry_at_ms)) {
        p.wake = now + IDLE_WAKE_MS;
        if (now < f->retry_at_ms && f->retry_at_ms < p.wake)
            p.wake = f->retry_at_ms;
        return p;
    }
    p.take = 1;
    p.from = p.back ? 0 : f->env;
    return p;
}

int failover_next(const struct failover *f, const struct failover_plan *p, int e,
                  enum take_outcome out)
{
    if (!p->back || out == T_IDS || e + 1 >= f->env)
        return -1;
    return e + 1;
}

/* Move to the next environment (in order, wrapping), when there is another: 1 when moved. */
static int move_on(struct failover *f, const struct failover_opts *o, uint64_t now)
{
    f->trouble_ms = 0;
    if (o->nenv < 2)
        return 0;
    f->env = (f->env + 1) % (int)o->nenv;
    f->failback_at_ms = now + o->failback_ms;
    return 1;
}

struct failover_step failover_after(struct failover *f, const struct failover_opts *o,
                                    const struct failover_plan *p, uint64_t now, int e,
                                    enum take_outcome out, uint64_t hint_ms)
{
    struct failover_step s = {now + IDLE_WAKE_MS, 0, 0};

    if (p->back && out != T_IDS) { /* the preferred ones are still out: stay, try later */
        f->failback_at_ms = now + o->failback_ms;
        s.wake = now; /* serve the current environment at once */
        return s;
    }
    switch (out) {
    case T_IDS:
        f->trouble_ms = 0;
        f->noapp &= ~(1u << e);
        if (e < f->env) {
            f->env = e;
            s.failback = 1;
        }
        break;
    case T_DRY:
        f->retry_at_ms = now + DRY_RETRY_MS;
        break;
    case T_EPOCH:
    case T_RATE: /* RATE is not a reason to leave: the limit is the application's */
        f->retry_at_ms = now + hint_ms;
        break;
    case T_LIMIT:
        break;
    case T_NOAPP:
        f->noapp |= 1u << e;
        s.failover = move_on(f, o, now);
        if (failover_nowhere(f, o->nenv)) /* callers fail at once meanwhile */
            f->retry_at_ms = now + NOAPP_RETRY_MS;
        break;
    case T_DOWN:
        s.failover = move_on(f, o, now);
        break;
    }
    if (out == T_DRY || out == T_EPOCH) {
        if (f->trouble_ms == 0)
            f->trouble_ms = now;
        else if (now - f->trouble_ms >= o->failover_ms)
            s.failover = move_on(f, o, now);
    }
    if (f->env > 0 && f->failback_at_ms == 0)
        f->failback_at_ms = now + o->failback_ms;
    if (f->retry_at_ms > now && f->retry_at_ms < s.wake)
        s.wake = f->retry_at_ms;
    if (out == T_IDS || out == T_LIMIT ||
        ((out == T_NOAPP || out == T_DOWN) && f->retry_at_ms <= now))
        s.wake = now;                   /* more may be needed, or another environment to try */
    if (out == T_DOWN && o->retry_at) { /* no spinning on the down */
        uint64_t at = o->retry_at(f->env, o->arg);
        if (at > now)
            s.wake = at;
    }
    return s;
}
