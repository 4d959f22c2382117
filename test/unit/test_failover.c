/*
 * Unit tests of failover (src/lib/failover.c): libidpool's decision of
 * where an application's takes go and when it is looked at again, driven
 * through sequences of take outcomes as the background thread sees them
 * (client.c's service): failover after failover_ms of dry or
 * not-re-validated pools, at once when down or not served; failback in
 * preference order; refusals' waits; IDPOOL_RATE waited out in place.
 * `test_failover --constants` prints its times instead: the Python
 * client's mirror of them is tested against that (test_pyclient.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "failover.h"
#include "unit.h"

#define FAILOVER_MS 500
#define FAILBACK_MS 1000

/* When each environment may be tried again (the stub of env_retry_at). */
static uint64_t down_until[4];

static uint64_t retry_at(int i, void *arg)
{
    (void)arg;
    return down_until[i];
}

static struct failover_opts opts(unsigned nenv)
{
    struct failover_opts o = {nenv, FAILOVER_MS, FAILBACK_MS, retry_at, NULL};

    memset(down_until, 0, sizeof(down_until));
    return o;
}

/*
 * One turn of the thread at `now` with a low buffer: plan, take (every try
 * answers out[k] in turn, the environment it asked stored in *asked), and
 * the step after. The plan must say take.
 */
static struct failover_step turn(struct failover *f, const struct failover_opts *o, uint64_t now,
                                 const enum take_outcome *out, uint64_t hint, int *asked)
{
    struct failover_plan p = failover_plan(f, now, 1);
    int e = p.from, k = 0, next;

    CHECK(p.take);
    for (;;) {
        asked[k] = e;
        if ((next = failover_next(f, &p, e, out[k])) < 0)
            break;
        e = next;
        k++;
    }
    asked[k + 1] = -1;
    return failover_after(f, o, &p, now, e, out[k], hint);
}

/* One try that answers out. */
static struct failover_step one(struct failover *f, const struct failover_opts *o, uint64_t now,
                                enum take_outcome out, uint64_t hint)
{
    int asked[8];
    enum take_outcome v[1] = {out};

    return turn(f, o, now, v, hint, asked);
}

static void test_plan(void)
{
    struct failover f = {0};
    struct failover_plan p;

    p = failover_plan(&f, 1000, 0); /* the buffer is full enough */
    CHECK(!p.take);
    CHECK_EQ_U64(p.wake, 1000 + IDLE_WAKE_MS);
    p = failover_plan(&f, 1000, 1);
    CHECK(p.take && p.from == 0 && !p.back);
    f.retry_at_ms = 1050; /* a refusal's wait runs */
    p = failover_plan(&f, 1000, 1);
    CHECK(!p.take);
    CHECK_EQ_U64(p.wake, 1050);
    f.retry_at_ms = 1500; /* longer than the idle wake */
    p = failover_plan(&f, 1000, 1);
    CHECK(!p.take);
    CHECK_EQ_U64(p.wake, 1000 + IDLE_WAKE_MS);
    p = failover_plan(&f, 1500, 1);
    CHECK(p.take && p.from == 0);
}

static void test_ids(void)
{
    struct failover_opts o = opts(2);
    struct failover f = {0};
    struct failover_step s = one(&f, &o, 1000, T_IDS, 0);

    CHECK_EQ_U64(s.wake, 1000); /* more may be needed */
    CHECK(!s.failover && !s.failback);
    CHECK(f.env == 0 && f.trouble_ms == 0 && f.failback_at_ms == 0);
}

static void test_dry_fails_over_after_failover_ms(void)
{
    struct failover_opts o = opts(2);
    struct failover f = {0};
    struct failover_step s;
    uint64_t t = 1000;

    s = one(&f, &o, t, T_DRY, 0);
    CHECK(!s.failover && f.env == 0);
    CHECK_EQ_U64(f.trouble_ms, t);
    CHECK_EQ_U64(f.retry_at_ms, t + DRY_RETRY_MS);
    CHECK_EQ_U64(s.wake, t + DRY_RETRY_MS);
    /* dry again and again, never for failover_ms */
    for (t += DRY_RETRY_MS; t < 1000 + FAILOVER_MS; t += DRY_RETRY_MS) {
        CHECK(!failover_plan(&f, t - 1, 1).take); /* the wait runs */
        s = one(&f, &o, t, T_DRY, 0);
        CHECK(!s.failover && f.env == 0);
    }
    CHECK_EQ_U64(f.trouble_ms, 1000);
    s = one(&f, &o, t, T_DRY, 0); /* failover_ms dry: the next environment */
    CHECK(s.failover && f.env == 1);
    CHECK_EQ_U64(f.trouble_ms, 0);
    CHECK_EQ_U64(f.failback_at_ms, t + FAILBACK_MS);
    /* IDs come there: it stays, until the failback is due */
    t += DRY_RETRY_MS;
    s = one(&f, &o, t, T_IDS, 0);
    CHECK(!s.failover && !s.failback && f.env == 1);
}

static void test_dry_one_environment(void)
{
    struct failover_opts o = opts(1);
    struct failover f = {0};
    struct failover_step s;

    s = one(&f, &o, 1000, T_DRY, 0);
    s = one(&f, &o, 1000 + FAILOVER_MS, T_DRY, 0); /* nowhere to go: trouble starts anew */
    CHECK(!s.failover && f.env == 0);
    CHECK_EQ_U64(f.trouble_ms, 0);
    CHECK_EQ_U64(f.failback_at_ms, 0);
    s = one(&f, &o, 1000 + FAILOVER_MS + DRY_RETRY_MS, T_DRY, 0);
    CHECK_EQ_U64(f.trouble_ms, 1000 + FAILOVER_MS + DRY_RETRY_MS);
}

static void test_epoch_waits_then_fails_over(void)
{
    struct failover_opts o = opts(2);
    struct failover f = {0};
    struct failover_step s;

    s = one(&f, &o, 1000, T_EPOCH, 50);
    CHECK(!s.failover && f.env == 0);
    CHECK_EQ_U64(f.retry_at_ms, 1050);
    CHECK_EQ_U64(s.wake, 1050);
    s = one(&f, &o, 1050, T_EPOCH, 300); /* a wait beyond the idle wake */
    CHECK_EQ_U64(s.wake, 1050 + IDLE_WAKE_MS);
    CHECK(!failover_plan(&f, 1300, 1).take);
    s = one(&f, &o, 1000 + FAILOVER_MS, T_EPOCH, 200);
    CHECK(s.failover && f.env == 1);
    /* a dry pool and a not re-validated one are the same trouble */
    f = (struct failover){0};
    one(&f, &o, 1000, T_DRY, 0);
    s = one(&f, &o, 1000 + FAILOVER_MS, T_EPOCH, 20);
    CHECK(s.failover && f.env == 1);
}

static void test_rate_is_waited_out_in_place(void)
{
    struct failover_opts o = opts(2);
    struct failover f = {0};
    struct failover_step s;
    uint64_t t;

    for (t = 1000; t < 1000 + 10 * FAILOVER_MS; t += 300) {
        CHECK(failover_plan(&f, t, 1).take);
        s = one(&f, &o, t, T_RATE, 300);
        CHECK(!s.failover && f.env == 0);
        CHECK_EQ_U64(f.retry_at_ms, t + 300);
        CHECK_EQ_U64(s.wake, t + IDLE_WAKE_MS);
        CHECK(!failover_plan(&f, t + 299, 1).take);
    }
    CHECK_EQ_U64(f.trouble_ms, 0); /* a limit is no trouble */
    s = one(&f, &o, t, T_RATE, 40);
    CHECK_EQ_U64(s.wake, t + 40);
}

static void test_limit(void)
{
    struct failover_opts o = opts(2);
    struct failover f = {0};
    struct failover_step s = one(&f, &o, 1000, T_LIMIT, 0);

    CHECK_EQ_U64(s.wake, 1000); /* at once, with a smaller batch */
    CHECK(!s.failover && f.env == 0 && f.retry_at_ms == 0 && f.trouble_ms == 0);
}

static void test_down_fails_over_at_once(void)
{
    struct failover_opts o = opts(3);
    struct failover f = {0};
    struct failover_step s;

    s = one(&f, &o, 1000, T_DOWN, 0);
    CHECK(s.failover && f.env == 1);
    CHECK_EQ_U64(s.wake, 1000); /* another environment to try */
    CHECK_EQ_U64(f.failback_at_ms, 1000 + FAILBACK_MS);
    down_until[2] = 1070; /* the next one backs off: no spinning */
    s = one(&f, &o, 1000, T_DOWN, 0);
    CHECK(s.failover && f.env == 2);
    CHECK_EQ_U64(s.wake, 1070);
    down_until[0] = 900; /* past: at once */
    s = one(&f, &o, 1070, T_DOWN, 0);
    CHECK(s.failover && f.env == 0); /* wraps */
    CHECK_EQ_U64(s.wake, 1070);
    /* a timeout is a failure like any other, a dry pool after it is trouble anew */
    s = one(&f, &o, 1080, T_DRY, 0);
    CHECK_EQ_U64(f.trouble_ms, 1080);
}

static void test_noapp_everywhere(void)
{
    struct failover_opts o = opts(2);
    struct failover f = {0};
    struct failover_step s;

    s = one(&f, &o, 1000, T_NOAPP, 0);
    CHECK(s.failover && f.env == 1 && f.noapp == 1);
    CHECK(!failover_nowhere(&f, 2));
    CHECK_EQ_U64(s.wake, 1000);
    s = one(&f, &o, 1000, T_NOAPP, 0);
    CHECK(s.failover && f.env == 0 && f.noapp == 3);
    CHECK(failover_nowhere(&f, 2)); /* callers fail at once */
    CHECK_EQ_U64(f.retry_at_ms, 1000 + NOAPP_RETRY_MS);
    CHECK_EQ_U64(s.wake, 1000 + IDLE_WAKE_MS);
    CHECK(!failover_plan(&f, 1000 + NOAPP_RETRY_MS - 1, 1).take);
    s = one(&f, &o, 1000 + NOAPP_RETRY_MS, T_IDS, 0); /* served again */
    CHECK(f.noapp == 2 && !failover_nowhere(&f, 2));
    CHECK(f.env == 0);
}

static void test_failback(void)
{
    struct failover_opts o = opts(2);
    struct failover f = {0};
    struct failover_plan p;
    struct failover_step s;
    int asked[8];
    enum take_outcome ids[] = {T_IDS};

    one(&f, &o, 1000, T_DOWN, 0);
    CHECK(f.env == 1);
    p = failover_plan(&f, 1000 + FAILBACK_MS - 1, 1);
    CHECK(p.take && !p.back && p.from == 1);
    p = failover_plan(&f, 1000 + FAILBACK_MS, 0); /* due even with a full buffer */
    CHECK(p.take && p.back && p.from == 0);
    s = turn(&f, &o, 1000 + FAILBACK_MS, ids, 0, asked);
    CHECK(asked[0] == 0 && asked[1] == -1);
    CHECK(s.failback && !s.failover && f.env == 0);
    CHECK_EQ_U64(s.wake, 1000 + FAILBACK_MS);
    CHECK(!failover_plan(&f, 5000, 0).take); /* at home: no failback */
}

static void test_failback_fails(void)
{
    struct failover_opts o = opts(2);
    struct failover f = {0};
    struct failover_step s;
    int asked[8];
    enum take_outcome out[] = {T_DRY};
    uint64_t t = 1000 + FAILBACK_MS;

    one(&f, &o, 1000, T_DOWN, 0);
    one(&f, &o, 1000, T_DRY, 0); /* trouble at the current one, a wait */
    s = turn(&f, &o, t, out, 0, asked);
    CHECK(asked[0] == 0 && asked[1] == -1);
    CHECK(!s.failover && !s.failback && f.env == 1);
    CHECK_EQ_U64(s.wake, t); /* serve the current environment at once */
    CHECK_EQ_U64(f.failback_at_ms, t + FAILBACK_MS);
    CHECK_EQ_U64(f.retry_at_ms, 1000 + DRY_RETRY_MS); /* the preferred one's answer is not kept */
    CHECK_EQ_U64(f.trouble_ms, 1000);
    out[0] = T_DOWN; /* nor is a failure of it a failover */
    s = turn(&f, &o, t + FAILBACK_MS, out, 0, asked);
    CHECK(!s.failover && f.env == 1);
}

static void test_failback_in_order(void)
{
    struct failover_opts o = opts(3);
    struct failover f = {0};
    struct failover_step s;
    int asked[8];
    enum take_outcome none[] = {T_DOWN, T_DRY}, second[] = {T_NOAPP, T_IDS};
    uint64_t t;

    one(&f, &o, 1000, T_DOWN, 0);
    one(&f, &o, 1000, T_DOWN, 0);
    CHECK(f.env == 2);
    t = f.failback_at_ms;
    s = turn(&f, &o, t, none, 0, asked); /* 0 then 1, never 2 */
    CHECK(asked[0] == 0 && asked[1] == 1 && asked[2] == -1);
    CHECK(f.env == 2 && !s.failback);
    t = f.failback_at_ms;
    s = turn(&f, &o, t, second, 0, asked);
    CHECK(asked[0] == 0 && asked[1] == 1 && asked[2] == -1);
    CHECK(s.failback && f.env == 1);
    CHECK(f.noapp == 0); /* a failback's refusal is not kept either */
    /* the failback time has passed: 0 is tried again at the next turn */
    CHECK(failover_plan(&f, t, 0).back);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--constants") == 0) { /* the Python client's mirror */
        printf("IDLE_WAKE_MS %d\nDRY_RETRY_MS %d\nNOAPP_RETRY_MS %d\n", IDLE_WAKE_MS, DRY_RETRY_MS,
               NOAPP_RETRY_MS);
        return 0;
    }
    RUN(test_plan);
    RUN(test_ids);
    RUN(test_dry_fails_over_after_failover_ms);
    RUN(test_dry_one_environment);
    RUN(test_epoch_waits_then_fails_over);
    RUN(test_rate_is_waited_out_in_place);
    RUN(test_limit);
    RUN(test_down_fails_over_at_once);
    RUN(test_noapp_everywhere);
    RUN(test_failback);
    RUN(test_failback_fails);
    RUN(test_failback_in_order);
    return unit_done();
}
