/*
 * Unit tests of the runway arithmetic (runway.c): the pool's seconds at the
 * consumption rate, the ledger's growth a day, the ID space left below the
 * ceiling and its days, and the human units of idpoolctl status.
 */
#include "app.h"
#include "runway.h"
#include "unit.h"

#define DAY_MS 86400000ULL

static int near(double x, double want)
{
    return x >= want * (1 - 1e-9) && x <= want * (1 + 1e-9);
}

static struct app_cfg cfg_at(uint64_t start, uint64_t current)
{
    struct app_cfg c;

    memset(&c, 0, sizeof(c));
    c.start_offset = start;
    c.current_offset = current;
    return c;
}

static void test_pool(void)
{
    CHECK(near(runway_pool_s(1, 60000, 1000.0, 0), 60.0));
    CHECK(runway_pool_s(1, 0, 1000.0, 0) == 0);    /* empty: dry now */
    CHECK(isinf(runway_pool_s(1, 60000, 0.0, 0))); /* nothing consumed: never */
    CHECK(runway_pool_s(1, 60000, 0.0, 0) > 0);
    CHECK(isinf(runway_pool_s(1, 60000, -1.0, 0)));   /* nonsense rate: never, not < 0 */
    CHECK(isnan(runway_pool_s(0, 60000, 1000.0, 0))); /* length unknown */
    CHECK(isnan(runway_pool_s(1, 60000, 1000.0, 1))); /* stale: its Redis is down */
    CHECK(isnan(runway_pool_s(1, 60000, RUNWAY_UNKNOWN, 0)));
    CHECK(near(runway_pool_s(1, UINT64_MAX, 0.5, 0), 2.0 * (double)UINT64_MAX));
}

static void test_growth(void)
{
    struct runway_ledger l = {0};

    /* never read */
    CHECK(isnan(runway_growth_per_day(&l)));
    /* read, no lease at all */
    l.known = 1;
    CHECK(runway_growth_per_day(&l) == 0);
    /* leases, but none in the window (an application idle for a week) */
    l.top = 5000;
    CHECK(runway_growth_per_day(&l) == 0);
    /* one lease, created a day ago: its span over that day */
    l.in_window = 1;
    l.first_lo = 3000;
    l.elapsed_ms = DAY_MS;
    CHECK(near(runway_growth_per_day(&l), 2000.0));
    /* 10 leases of 1e6 over 7 days, measured from the first one's lo */
    l.first_lo = 1000000;
    l.top = 11000000;
    l.elapsed_ms = 7 * DAY_MS;
    CHECK(near(runway_growth_per_day(&l), 1e7 / 7));
    /* zero elapsed time, and below the minimum span: nothing measured */
    l.elapsed_ms = 0;
    CHECK(runway_growth_per_day(&l) == 0);
    l.elapsed_ms = RUNWAY_MIN_SPAN_MS - 1;
    CHECK(runway_growth_per_day(&l) == 0);
    l.elapsed_ms = RUNWAY_MIN_SPAN_MS;
    CHECK(near(runway_growth_per_day(&l), 1e7 * (RUNWAY_DAY_MS / RUNWAY_MIN_SPAN_MS)));
    /* top not above the window's first lo (an inconsistent read): no growth */
    l.top = l.first_lo;
    CHECK(runway_growth_per_day(&l) == 0);
    /* huge: the whole ID space in one millisecond above the minimum span */
    l.first_lo = 0;
    l.top = (uint64_t)APP_ID_MAX;
    l.elapsed_ms = RUNWAY_MIN_SPAN_MS;
    CHECK(
        near(runway_growth_per_day(&l), (double)APP_ID_MAX * (RUNWAY_DAY_MS / RUNWAY_MIN_SPAN_MS)));
}

static void test_space(void)
{
    struct app_cfg c = cfg_at(1, 0);
    struct runway_ledger l = {0};

    CHECK_EQ_U64(runway_ceiling(&c), (uint64_t)APP_ID_MAX);
    /* the higher of start_offset, current_offset and the ledger's top */
    CHECK_EQ_U64(runway_space_left(&c, NULL), (uint64_t)APP_ID_MAX - 1);
    c.current_offset = 1000;
    CHECK_EQ_U64(runway_space_left(&c, &l), (uint64_t)APP_ID_MAX - 1000);
    l.top = 5000; /* not read: ignored */
    CHECK_EQ_U64(runway_space_left(&c, &l), (uint64_t)APP_ID_MAX - 1000);
    l.known = 1;
    CHECK_EQ_U64(runway_space_left(&c, &l), (uint64_t)APP_ID_MAX - 5000);
    c.start_offset = 9000;
    CHECK_EQ_U64(runway_space_left(&c, &l), (uint64_t)APP_ID_MAX - 9000);
    /* at and past the ceiling: nothing left (no wrap) */
    c.current_offset = (uint64_t)APP_ID_MAX;
    CHECK_EQ_U64(runway_space_left(&c, &l), 0);
    l.top = UINT64_MAX;
    CHECK_EQ_U64(runway_space_left(&c, &l), 0);

    /* a ceiling (max_id): the space ends after it */
    c = cfg_at(1, 0);
    l = (struct runway_ledger){0};
    c.max_id = (uint64_t)APP_JS_SAFE_MAX;
    CHECK_EQ_U64(runway_ceiling(&c), 9007199254740992ULL);
    CHECK_EQ_U64(runway_space_left(&c, &l), 9007199254740991ULL);
    l.known = 1;
    l.top = 9007199254740000ULL;
    CHECK_EQ_U64(runway_space_left(&c, &l), 992);
    l.top = 9007199254740992ULL; /* the last lease ended at the ceiling */
    CHECK_EQ_U64(runway_space_left(&c, &l), 0);

    /* days */
    CHECK(near(runway_space_days(3000, 100.0), 30.0));
    CHECK(isinf(runway_space_days(3000, 0)));              /* no growth measured: never */
    CHECK(isnan(runway_space_days(3000, RUNWAY_UNKNOWN))); /* ledger not read */
    CHECK(runway_space_days(0, 100.0) == 0);               /* ceiling reached or passed */
    CHECK(runway_space_days(0, 0) == 0);
    CHECK(runway_space_days(0, RUNWAY_UNKNOWN) == 0);
    CHECK(near(runway_space_days((uint64_t)APP_ID_MAX, 1.0), (double)APP_ID_MAX));
    CHECK(runway_space_days(1, 1e300) >= 0);
}

/* The numbers of the integration test t_runway: 10 leases over 10 days, 30 days left. */
static void test_thirty_days(void)
{
    const uint64_t g = 100000000000000ULL; /* one lease a day */
    struct app_cfg c = cfg_at(1, (uint64_t)APP_ID_MAX - 30 * g);
    struct runway_ledger l = {1, (uint64_t)APP_ID_MAX - 30 * g, 1, (uint64_t)APP_ID_MAX - 36 * g,
                              6 * DAY_MS};
    double days = runway_space_days(runway_space_left(&c, &l), runway_growth_per_day(&l));

    CHECK(days > 29.99 && days < 30.01);
}

static void test_human(void)
{
    char b[32];

    CHECK(strcmp(runway_human(42.4, b, sizeof(b)), "42s") == 0);
    CHECK(strcmp(runway_human(0, b, sizeof(b)), "0s") == 0);
    CHECK(strcmp(runway_human(18 * 60, b, sizeof(b)), "18m") == 0);
    CHECK(strcmp(runway_human(3.2 * 3600, b, sizeof(b)), "3.2h") == 0);
    CHECK(strcmp(runway_human(4.5 * 86400, b, sizeof(b)), "4.5d") == 0);
    CHECK(strcmp(runway_human(1200.0 * 86400, b, sizeof(b)), "1200d") == 0);
    CHECK(strcmp(runway_human(1e30, b, sizeof(b)), "1.2e+25d") == 0);
    CHECK(strcmp(runway_human(RUNWAY_NEVER, b, sizeof(b)), "-") == 0);
    CHECK(strcmp(runway_human(RUNWAY_UNKNOWN, b, sizeof(b)), "-") == 0);
    CHECK(strcmp(runway_human(-1, b, sizeof(b)), "-") == 0);
}

int main(void)
{
    RUN(test_pool);
    RUN(test_growth);
    RUN(test_space);
    RUN(test_thirty_days);
    RUN(test_human);
    return unit_done();
}
