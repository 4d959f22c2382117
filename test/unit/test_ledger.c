/*
 * Unit tests of ledger.c, the arithmetic of idpoolctl explain: the
 * lattice of a lease (membership, counts at the edges of the ID space),
 * the verdict on an ID from what the pool shows, and the times of a
 * window (test/integration/t_explain.sh runs them against MariaDB).
 */
#include "ledger.h"
#include "unit.h"

static void test_lattice(void)
{
    struct ledger_lattice l = {1, "row now", 2, 1, 0};
    struct ledger_lattice big = {1, "lease", 1000, 999, 5};

    CHECK(ledger_on_lattice(&l, 1) && ledger_on_lattice(&l, 7) && !ledger_on_lattice(&l, 8));
    CHECK(!ledger_on_lattice(&(struct ledger_lattice){1, "lease", 2, 0, 0}, 0)); /* never 0 */
    CHECK(ledger_on_lattice(&(struct ledger_lattice){1, "lease", 2, 0, 0}, 2));
    l.start = 100;
    CHECK(!ledger_on_lattice(&l, 99) && ledger_on_lattice(&l, 101));
    l.known = 0;
    CHECK(!ledger_on_lattice(&l, 101));
    l = (struct ledger_lattice){1, "lease", 2, 1, 0};
    CHECK_EQ_U64(ledger_lattice_count(&l, 0, 10), 5); /* 1 3 5 7 9 */
    CHECK_EQ_U64(ledger_lattice_count(&l, 1, 2), 1);
    CHECK_EQ_U64(ledger_lattice_count(&l, 2, 3), 0);
    CHECK_EQ_U64(ledger_lattice_count(&l, 10, 10), 0);
    CHECK_EQ_U64(ledger_lattice_count(&l, 10, 5), 0);
    l = (struct ledger_lattice){1, "lease", 3, 1, 1};
    CHECK_EQ_U64(ledger_lattice_count(&l, 100, 300), 67);
    CHECK_EQ_U64(ledger_lattice_count(&l, 500, 600), 33);
    CHECK_EQ_U64(ledger_lattice_count(&big, 0, 1000), 1);
    CHECK_EQ_U64(ledger_lattice_count(&big, 1000, 1999), 0);
    /* the top of the ID space: no overflow */
    l = (struct ledger_lattice){1, "lease", 1, 0, 0};
    CHECK_EQ_U64(ledger_lattice_count(&l, UINT64_MAX - 5, UINT64_MAX), 5);
    l = (struct ledger_lattice){1, "lease", 10, 9, 0};
    CHECK_EQ_U64(ledger_lattice_count(&l, UINT64_MAX - 3, UINT64_MAX), 0);
    /* invalid lattices hold nothing */
    CHECK_EQ_U64(ledger_lattice_count(&(struct ledger_lattice){1, "lease", 0, 0, 0}, 0, 9), 0);
    CHECK_EQ_U64(ledger_lattice_count(&(struct ledger_lattice){1, "lease", 2, 2, 0}, 0, 9), 0);
    CHECK_EQ_U64(ledger_lattice_count(&(struct ledger_lattice){0, "lease", 1, 0, 0}, 0, 9), 0);
}

static void test_judge(void)
{
    struct ledger_lattice l = {1, "lease", 2, 0, 1};
    /* pool at next 1000 in [.., 2000), prefetched [5000, 9000) */
    struct ledger_facts f = {&l, 0, 1, 0, 1, {1000, 2000, 5000, 9000}};

    CHECK(ledger_judge(&f, 999) == LEDGER_OFF_LATTICE);
    CHECK(ledger_judge(&f, 998) == LEDGER_ISSUED);
    CHECK(ledger_judge(&f, 1000) == LEDGER_NOT_YET_PUSHED);
    CHECK(ledger_judge(&f, 1998) == LEDGER_NOT_YET_PUSHED);
    CHECK(ledger_judge(&f, 2000) == LEDGER_NOT_PUSHED);
    CHECK(ledger_judge(&f, 4998) == LEDGER_NOT_PUSHED);
    CHECK(ledger_judge(&f, 5000) == LEDGER_NOT_YET_PUSHED);
    CHECK(ledger_judge(&f, 8998) == LEDGER_NOT_YET_PUSHED);
    CHECK(ledger_judge(&f, 9000) == LEDGER_NOT_PUSHED);
    f.st.nlo = f.st.nhi = 0; /* no prefetched lease */
    CHECK(ledger_judge(&f, 5000) == LEDGER_NOT_PUSHED);
    f.gaps = 1;
    CHECK(ledger_judge(&f, 998) == LEDGER_ISSUED_OR_SKIPPED);
    f.in_pool = 1;
    CHECK(ledger_judge(&f, 998) == LEDGER_IN_POOL);
    CHECK(ledger_judge(&f, 999) == LEDGER_OFF_LATTICE); /* the lattice first */
    f.in_pool = 0;
    f.have_meta = 0;
    CHECK(ledger_judge(&f, 998) == LEDGER_ISSUED_OR_SKIPPED);
    f.gaps = 0;
    CHECK(ledger_judge(&f, 4000) == LEDGER_ISSUED_OR_SKIPPED); /* no progress: not told */
    f.pool_read = 0;
    CHECK(ledger_judge(&f, 998) == LEDGER_LEASED);
    l.known = 0; /* an unknown lattice: not off it */
    CHECK(ledger_judge(&f, 999) == LEDGER_LEASED);
    CHECK_STR(ledger_verdict_name(LEDGER_ISSUED_OR_SKIPPED), "issued_or_skipped");
    CHECK_STR(ledger_verdict_name(LEDGER_NEVER_LEASED), "never_leased");
    CHECK_STR(ledger_verdict_name((enum ledger_verdict)99), "?");
}

static void test_time(void)
{
    static const char *const bad[] = {
        "",
        "now-",
        "now-1",
        "now-h",
        "now-1w",
        "now-12345678h",
        "now+1h",
        "yesterday",
        "2026-11-2",
        "2026-13-01",
        "2026-02-29",
        "2026-04-31",
        "0999-01-01",
        "2026-11-29T",
        "2026-11-29T10",
        "2026-11-29T24:00",
        "2026-11-29T10:60",
        "2026-11-29T10:00:60",
        "2026-11-29T10:00:00.5",
        "2026-11-29T10:00:00.1234",
        "2026-11-29T10:00:00+01:00",
        "2026-11-29X10:00",
        "2026-11-29T10:00'",
        "2026-11-29T10:00:00ZZ",
        "2026-11-29 10:00:0a",
    };
    char b[160];

    CHECK(ledger_time_sql("now", b, sizeof(b)) == 0);
    CHECK_STR(b, "UTC_TIMESTAMP(3)");
    CHECK(ledger_time_sql("now-90s", b, sizeof(b)) == 0);
    CHECK_STR(b, "UTC_TIMESTAMP(3) - INTERVAL 90 SECOND");
    CHECK(ledger_time_sql("now-1h", b, sizeof(b)) == 0);
    CHECK_STR(b, "UTC_TIMESTAMP(3) - INTERVAL 1 HOUR");
    CHECK(ledger_time_sql("now-1234567d", b, sizeof(b)) == 0);
    CHECK_STR(b, "UTC_TIMESTAMP(3) - INTERVAL 1234567 DAY");
    CHECK(ledger_time_sql("now-30m", b, sizeof(b)) == 0);
    CHECK_STR(b, "UTC_TIMESTAMP(3) - INTERVAL 30 MINUTE");
    CHECK(ledger_time_sql("2026-11-29", b, sizeof(b)) == 0);
    CHECK_STR(b, "CAST('2026-11-29 00:00:00.000' AS DATETIME(3))");
    CHECK(ledger_time_sql("2024-02-29", b, sizeof(b)) == 0);
    CHECK(ledger_time_sql("2026-11-29T10:00Z", b, sizeof(b)) == 0);
    CHECK_STR(b, "CAST('2026-11-29 10:00:00.000' AS DATETIME(3))");
    CHECK(ledger_time_sql("2026-11-29 23:59:59", b, sizeof(b)) == 0);
    CHECK_STR(b, "CAST('2026-11-29 23:59:59.000' AS DATETIME(3))");
    CHECK(ledger_time_sql("2026-11-29T10:30:00.500Z", b, sizeof(b)) == 0);
    CHECK_STR(b, "CAST('2026-11-29 10:30:00.500' AS DATETIME(3))");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = ledger_time_sql(bad[i], b, sizeof(b));
        if (rc != -1 || b[0] != '\0')
            fprintf(stderr, "accepted: '%s'\n", bad[i]);
        CHECK(rc == -1 && b[0] == '\0');
    }
}

int main(void)
{
    RUN(test_lattice);
    RUN(test_judge);
    RUN(test_time);
    return unit_done();
}
