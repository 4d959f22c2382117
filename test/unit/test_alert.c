/* Unit tests of alert hysteresis: fire once, resolve once, no flapping. */
#include "alert.h"
#include "unit.h"

static void test_names(void)
{
    CHECK(strcmp(alert_name(ALERT_UNDERFLOW), "underflow") == 0);
    CHECK(strcmp(alert_name(ALERT_ID_SPACE_EXHAUSTION), "id_space_exhaustion") == 0);
    CHECK(strcmp(alert_name(ALERT_COUNT), "unknown") == 0);
}

static void test_fire_and_resolve_once(void)
{
    struct alert_track t = {0};

    CHECK_EQ_U64(alert_observe(&t, 0, 1000, 0, 5000), ALERT_NONE);
    CHECK_EQ_U64(alert_observe(&t, 1, 1100, 0, 5000), ALERT_FIRE);
    CHECK_EQ_U64(alert_observe(&t, 1, 1200, 0, 5000), ALERT_NONE);
    CHECK_EQ_U64(alert_observe(&t, 0, 1300, 0, 5000), ALERT_NONE);
    CHECK_EQ_U64(alert_observe(&t, 0, 6299, 0, 5000), ALERT_NONE);
    CHECK_EQ_U64(alert_observe(&t, 0, 6300, 0, 5000), ALERT_RESOLVE);
    CHECK_EQ_U64(alert_observe(&t, 0, 9000, 0, 5000), ALERT_NONE);
}

static void test_no_flapping(void)
{
    struct alert_track t = {0};
    int fires = 0, resolves = 0;

    /* A condition that flickers every 100 ms for 10 s: fires once, never resolves. */
    for (uint64_t now = 0; now < 10000; now += 100) {
        enum alert_change c = alert_observe(&t, (now / 100) % 2, now, 0, 1000);
        fires += c == ALERT_FIRE;
        resolves += c == ALERT_RESOLVE;
    }
    CHECK_EQ_U64(fires, 1);
    CHECK_EQ_U64(resolves, 0);
    CHECK(t.firing);
}

static void test_fire_after(void)
{
    struct alert_track t = {0};

    /* Must hold for 2 s; a blip shorter than that never fires. */
    CHECK_EQ_U64(alert_observe(&t, 1, 0, 2000, 0), ALERT_NONE);
    CHECK_EQ_U64(alert_observe(&t, 1, 1999, 2000, 0), ALERT_NONE);
    CHECK_EQ_U64(alert_observe(&t, 0, 2001, 2000, 0), ALERT_NONE);
    CHECK_EQ_U64(alert_observe(&t, 1, 3000, 2000, 0), ALERT_NONE);
    CHECK_EQ_U64(alert_observe(&t, 1, 5000, 2000, 0), ALERT_FIRE);
    /* resolve_after 0: the first clear observation resolves. */
    CHECK_EQ_U64(alert_observe(&t, 0, 5001, 2000, 0), ALERT_RESOLVE);
}

int main(void)
{
    RUN(test_names);
    RUN(test_fire_and_resolve_once);
    RUN(test_no_flapping);
    RUN(test_fire_after);
    return unit_done();
}
