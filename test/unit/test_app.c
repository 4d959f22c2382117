/* Unit tests for app: row validation, defaults, span arithmetic. */
#include "app.h"
#include "unit.h"

#include <stddef.h>
#include <stdlib.h>

#define TICK 100

static char err[APP_ERR_MAX];

/* A row as MySQL creates it with only the key set (schema column defaults). */
static struct app_row row_default(void)
{
    struct app_row r;

    memset(&r, 0, sizeof(r));
    r.id = 3;
    strcpy(r.entity_key, "user");
    strcpy(r.entity_name, "user ids");
    r.increasing_type = 1;
    r.start_offset = 1; /* never 0 (APP_ID_MIN) */
    r.step = 1000;
    r.delta = 1;
    r.increment_max = 1;
    return r;
}

static int validate(const struct app_row *r, struct app_cfg *c)
{
    memset(c, 0xA5, sizeof(*c));
    memset(err, 0, sizeof(err));
    return app_validate(r, TICK, c, err, sizeof(err));
}

/* The row is valid. */
static int ok(const struct app_row *r)
{
    struct app_cfg c;
    int rc = validate(r, &c);

    if (rc != 0)
        fprintf(stderr, "    unexpected error: %s\n", err);
    return rc == 0;
}

/* The row is rejected, the message names the row and `field`. */
static int bad(const struct app_row *r, const char *field)
{
    struct app_cfg c;
    char want[80];

    if (validate(r, &c) != -1)
        return 0;
    snprintf(want, sizeof(want), "): %s: ", field);
    if (!strstr(err, want) || !strstr(err, "(id ")) {
        fprintf(stderr, "    error '%s' does not name field '%s'\n", err, field);
        return 0;
    }
    return 1;
}

static void test_key_valid(void)
{
    char k[100];

    CHECK(app_key_valid("a"));
    CHECK(app_key_valid("user"));
    CHECK(app_key_valid("AZaz09_.-"));
    CHECK(app_key_valid("..."));
    memset(k, 'x', 64);
    k[64] = '\0';
    CHECK(app_key_valid(k));
    k[64] = 'x';
    k[65] = '\0';
    CHECK(!app_key_valid(k));
    CHECK(!app_key_valid(""));
    CHECK(!app_key_valid(NULL));
    CHECK(!app_key_valid("a/b"));
    CHECK(!app_key_valid("a b"));
    CHECK(!app_key_valid(" a"));
    CHECK(!app_key_valid("a\n"));
    CHECK(!app_key_valid("caf\xc3\xa9"));
    CHECK(!app_key_valid("\xff"));
    CHECK(!app_key_valid("a:b"));
    CHECK(!app_key_valid("{a}"));
    CHECK(!app_key_valid("a*"));
    CHECK(!app_key_valid("a'b"));
}

static void test_defaults(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.step = 0; /* 0 in a sizing column means the default, too */
    r.delta = 0;
    r.increment_max = 0;
    r.version = 42;
    CHECK(validate(&r, &c) == 0);
    CHECK(err[0] == '\0');
    CHECK_EQ_U64(c.id, 3);
    CHECK(strcmp(c.key, "user") == 0);
    CHECK(strcmp(c.name, "user ids") == 0);
    CHECK(c.type == APP_MONOTONIC);
    CHECK_EQ_U64(c.start_offset, 1);
    CHECK_EQ_U64(c.step, 1000);
    CHECK_EQ_U64(c.current_offset, 0);
    CHECK_EQ_U64(c.per_take, 1000);
    CHECK_EQ_U64(c.per_second, 5000);
    CHECK_EQ_U64(c.min_percent, 80);
    CHECK_EQ_U64(c.interval_ms, TICK);
    CHECK_EQ_U64(c.max_pool, 300000);
    CHECK_EQ_U64(c.low_water, 240000);
    CHECK_EQ_U64(c.delta, 1);
    CHECK_EQ_U64(c.remainder, 0);
    CHECK_EQ_U64(c.increment_max, 1);
    CHECK_EQ_U64((uint64_t)c.version, 42);
    CHECK(c.space_warning == 0);

    /* interval 0 follows the tick argument */
    CHECK(app_validate(&r, 250, &c, err, sizeof(err)) == 0);
    CHECK_EQ_U64(c.interval_ms, 250);

    /* max_pool_size 0 follows the resolved max_size_per_second */
    r.max_size_per_second = 100;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.max_pool, 6000);
    CHECK_EQ_U64(c.low_water, 4800);
}

static void test_explicit(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.id = 77;
    r.increasing_type = 2;
    r.start_offset = 1000000;
    r.step = 500;
    r.current_offset = 2000000;
    r.max_size_per_times = 50;
    r.max_size_per_second = 700;
    r.min_size_percent = 50;
    r.interval = 1500;
    r.max_pool_size = 4000;
    r.delta = 3;
    r.remainder = 2;
    r.increment_max = 9;
    r.version = 5;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.id, 77);
    CHECK(c.type == APP_TREND);
    CHECK_EQ_U64(c.start_offset, 1000000);
    CHECK_EQ_U64(c.step, 500);
    CHECK_EQ_U64(c.current_offset, 2000000);
    CHECK_EQ_U64(c.per_take, 50);
    CHECK_EQ_U64(c.per_second, 700);
    CHECK_EQ_U64(c.min_percent, 50);
    CHECK_EQ_U64(c.interval_ms, 1500);
    CHECK_EQ_U64(c.max_pool, 4000);
    CHECK_EQ_U64(c.low_water, 2000);
    CHECK_EQ_U64(c.delta, 3);
    CHECK_EQ_U64(c.remainder, 2);
    CHECK_EQ_U64(c.increment_max, 9);
    CHECK_EQ_U64((uint64_t)c.version, 5);
}

/* The full message format, once, exactly. */
static void test_message_format(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.step = -5;
    CHECK(validate(&r, &c) == -1);
    CHECK(
        strcmp(err, "application 'user' (id 3): step: must be 1..1000000 (0 means 1000), got -5") ==
        0);
    CHECK_STR_CONTAINS(err, "application 'user' (id 3): step:");

    r = row_default();
    r.increasing_type = 0;
    CHECK(validate(&r, &c) == -1);
    CHECK(strcmp(err, "application 'user' (id 3): increasing_type: must be 1 (monotonic) or 2 "
                      "(trend), got 0") == 0);
}

static void test_increasing_type(void)
{
    struct app_row r = row_default();

    r.increasing_type = 1;
    CHECK(ok(&r));
    r.increasing_type = 2;
    CHECK(ok(&r));
    r.increasing_type = 0;
    CHECK(bad(&r, "increasing_type"));
    r.increasing_type = 3;
    CHECK(bad(&r, "increasing_type"));
    CHECK_STR_CONTAINS(err, "got 3");
    r.increasing_type = -1;
    CHECK(bad(&r, "increasing_type"));
}

static void test_step(void)
{
    struct app_row r = row_default();

    r.step = 1;
    CHECK(ok(&r));
    r.step = 1000000;
    r.min_size_percent = 50;
    r.max_pool_size = 2000000;
    CHECK(ok(&r));
    r.step = 1000001;
    CHECK(bad(&r, "step"));
    CHECK_STR_CONTAINS(err, "'user'");
    CHECK_STR_CONTAINS(err, "got 1000001");
    r.step = -1;
    CHECK(bad(&r, "step"));
    CHECK_STR_CONTAINS(err, "got -1");
}

static void test_offsets(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.start_offset = -1;
    CHECK(bad(&r, "start_offset"));
    CHECK_STR_CONTAINS(err, "must be >= 0, got -1");
    r.start_offset = 0;
    r.current_offset = -1;
    CHECK(bad(&r, "current_offset"));
    CHECK_STR_CONTAINS(err, "got -1");
    r.current_offset = INT64_MIN;
    CHECK(bad(&r, "current_offset"));
    CHECK_STR_CONTAINS(err, "got -9223372036854775808");
    r.current_offset = 12345;
    r.start_offset = 99;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.current_offset, 12345);
    CHECK_EQ_U64(c.start_offset, 99);
    /* An explicit 0 is still a valid row (the generator starts it at 1). */
    r.start_offset = 0;
    r.current_offset = 0;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.start_offset, 0);
    CHECK_EQ_U64(APP_DEFAULT_START, 1);
    CHECK_EQ_U64(APP_ID_MIN, 1);
}

static void test_per_take(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.max_size_per_times = 1;
    CHECK(ok(&r));
    r.max_size_per_times = -1;
    CHECK(bad(&r, "max_size_per_times"));
    /* must be <= max_pool_size (resolved) */
    r.max_pool_size = 5000;
    r.max_size_per_times = 5000;
    CHECK(ok(&r));
    r.max_size_per_times = 5001;
    CHECK(bad(&r, "max_size_per_times"));
    CHECK_STR_CONTAINS(err, "must be <= max_pool_size (5000), got 5001");
    /* against a defaulted pool: 60 x 100 = 6000 */
    r.max_pool_size = 0;
    r.max_size_per_second = 100;
    r.max_size_per_times = 6001;
    CHECK(bad(&r, "max_size_per_times"));
    CHECK_STR_CONTAINS(err, "(6000)");
    /* must be <= max_size_per_second: a take above it is never granted */
    r.max_size_per_times = 100;
    CHECK(ok(&r));
    r.max_size_per_times = 101;
    CHECK(bad(&r, "max_size_per_times"));
    CHECK_STR_CONTAINS(err, "must be <= max_size_per_second (100), got 101");
    /* the default (1000) is lowered to max_size_per_second */
    r.max_size_per_times = 0;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.per_take, 100);
    /* the default (1000) is checked too */
    r.max_size_per_second = 0;
    r.max_pool_size = 999;
    r.step = 1;
    CHECK(bad(&r, "max_size_per_times"));
    CHECK_STR_CONTAINS(err, "got 1000");
}

static void test_per_second(void)
{
    struct app_row r = row_default();

    r.max_pool_size = 100000;
    r.max_size_per_second = 1;
    CHECK(ok(&r));
    r.max_size_per_second = 100000000;
    CHECK(ok(&r));
    r.max_size_per_second = 100000001;
    CHECK(bad(&r, "max_size_per_second"));
    CHECK_STR_CONTAINS(err, "got 100000001");
    r.max_size_per_second = -1;
    CHECK(bad(&r, "max_size_per_second"));
}

static void test_min_percent(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.max_pool_size = 100000; /* 100000 x 1% = 1000 = step: fits at 99% */
    r.min_size_percent = 1;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.low_water, 1000);
    r.min_size_percent = 99;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.low_water, 99000);
    r.min_size_percent = 100;
    CHECK(bad(&r, "min_size_percent"));
    CHECK_STR_CONTAINS(err, "must be 1..99 (0 means 80), got 100");
    r.min_size_percent = -1;
    CHECK(bad(&r, "min_size_percent"));
}

static void test_interval(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.interval = 1;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.interval_ms, 1);
    r.interval = 86400000;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.interval_ms, 86400000);
    r.interval = 86400001;
    CHECK(bad(&r, "interval"));
    CHECK_STR_CONTAINS(err, "got 86400001");
    r.interval = -1;
    CHECK(bad(&r, "interval"));
    CHECK_STR_CONTAINS(err, "0 means the tick");
}

static void test_max_pool(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.max_pool_size = 100000000;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.max_pool, 100000000);
    CHECK_EQ_U64(c.low_water, 80000000);
    r.max_pool_size = 100000001;
    CHECK(bad(&r, "max_pool_size"));
    CHECK_STR_CONTAINS(err, "got 100000001");
    r.max_pool_size = -1;
    CHECK(bad(&r, "max_pool_size"));
    /* the resolved default is range-checked too: 60 x 10^8 is too big */
    r.max_pool_size = 0;
    r.max_size_per_second = 100000000;
    CHECK(bad(&r, "max_pool_size"));
    CHECK_STR_CONTAINS(err, "6000000000");
    CHECK_STR_CONTAINS(err, "max_size_per_second");
    r.max_size_per_second = 100000000 / 60; /* 60 x 1666666 = 99999960 */
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.max_pool, 99999960);

    /* max_pool_size >= step (pool and per_take small so that rule fires first) */
    r = row_default();
    r.max_size_per_times = 10;
    r.max_pool_size = 999;
    CHECK(bad(&r, "max_pool_size"));
    CHECK_STR_CONTAINS(err, "must be >= step (1000), got 999");
}

/* A refill must fit: max_pool_size * (100 - min_size_percent) / 100 >= step. */
static void test_refill_fit(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.max_size_per_times = 10;
    r.max_pool_size = 5000; /* 5000 x 20 / 100 = 1000 */
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.low_water, 4000);
    r.max_pool_size = 4999; /* 4999 x 20 / 100 = 999 */
    CHECK(bad(&r, "max_pool_size"));
    CHECK_STR_CONTAINS(err, "'user' (id 3)");
    CHECK_STR_CONTAINS(err, "must be >= 5000");
    CHECK_STR_CONTAINS(err, "refill");
    CHECK_STR_CONTAINS(err, "4999 * (100 - 80) / 100 = 999");
    CHECK_STR_CONTAINS(err, "step (1000)");
    CHECK_STR_CONTAINS(err, "got 4999");

    /* min 99%: needs step x 100; rounding up when not exact: 7 x 100 / 3 -> 234 */
    r.min_size_percent = 97;
    r.step = 7;
    r.max_pool_size = 234; /* 234 x 3 / 100 = 7 */
    CHECK(ok(&r));
    r.max_pool_size = 233; /* 233 x 3 / 100 = 6 */
    CHECK(bad(&r, "max_pool_size"));
    CHECK_STR_CONTAINS(err, "must be >= 234");

    /* with the defaulted pool and a small per_second */
    r = row_default();
    r.max_size_per_second = 50; /* pool 3000, room 600 < 1000 */
    r.max_size_per_times = 10;
    CHECK(bad(&r, "max_pool_size"));
    CHECK_STR_CONTAINS(err, "3000 * (100 - 80) / 100 = 600");
}

static void test_delta_remainder(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.delta = 4294967296LL;
    r.remainder = 4294967295LL;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.delta, 4294967296ULL);
    CHECK_EQ_U64(c.remainder, 4294967295ULL);
    r.delta = 4294967297LL;
    CHECK(bad(&r, "delta"));
    CHECK_STR_CONTAINS(err, "got 4294967297");
    r.delta = -1;
    CHECK(bad(&r, "delta"));

    r.delta = 10;
    r.remainder = 9;
    CHECK(ok(&r));
    r.remainder = 10;
    CHECK(bad(&r, "remainder"));
    CHECK_STR_CONTAINS(err, "must be 0..9 (below delta 10), got 10");
    r.remainder = -1;
    CHECK(bad(&r, "remainder"));
    CHECK_STR_CONTAINS(err, "got -1");
    r.delta = 0; /* resolved to 1: only remainder 0 */
    r.remainder = 0;
    CHECK(ok(&r));
    r.remainder = 1;
    CHECK(bad(&r, "remainder"));
}

static void test_increment_max(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.increment_max = 1000000;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.increment_max, 1000000);
    r.increment_max = 1000001;
    CHECK(bad(&r, "increment_max"));
    CHECK_STR_CONTAINS(err, "got 1000001");
    r.increment_max = -1;
    CHECK(bad(&r, "increment_max"));
}

/* An invalid key still identifies the row: id plus a sanitized key. */
static void test_bad_key_message(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.id = 7;
    strcpy(r.entity_key, "a/b");
    CHECK(bad(&r, "entity_key"));
    CHECK_STR_CONTAINS(err, "application 'a?b' (id 7): entity_key:");
    CHECK_STR_CONTAINS(err, "byte 0x2f at offset 1");

    strcpy(r.entity_key, "");
    CHECK(bad(&r, "entity_key"));
    CHECK_STR_CONTAINS(err, "application '' (id 7)");
    CHECK_STR_CONTAINS(err, "empty");

    strcpy(r.entity_key, "caf\xc3\xa9 'x'");
    CHECK(bad(&r, "entity_key"));
    CHECK_STR_CONTAINS(err, "'caf????x?' (id 7)");
    CHECK_STR_CONTAINS(err, "0xc3");

    strcpy(r.entity_key, "a\nb");
    CHECK(bad(&r, "entity_key"));
    CHECK(strchr(err, '\n') == NULL);

    /* 65 bytes: shown truncated to 64 and marked */
    memset(r.entity_key, 'k', 65);
    r.entity_key[65] = '\0';
    CHECK(bad(&r, "entity_key"));
    CHECK_STR_CONTAINS(err, "more than 64 bytes");
    {
        char want[80];
        memset(want, 'k', 64);
        strcpy(want + 64, "...' (id 7)");
        CHECK_STR_CONTAINS(err, want);
    }

    /* buffer entirely full, not terminated: no overread (valgrind) */
    memset(r.entity_key, 'z', sizeof(r.entity_key));
    CHECK(bad(&r, "entity_key"));
    CHECK_STR_CONTAINS(err, "zzz...'");

    /* not addressable in a URL path or on a command line */
    strcpy(r.entity_key, "..");
    CHECK(bad(&r, "entity_key"));
    CHECK_STR_CONTAINS(err, "application '..' (id 7): entity_key: must not be '.' or '..' (a URL "
                            "path cannot address it: /v1/apps/..)");
    strcpy(r.entity_key, ".");
    CHECK(bad(&r, "entity_key"));
    CHECK_STR_CONTAINS(err, "must not be '.' or '..'");
    strcpy(r.entity_key, "--name");
    CHECK(bad(&r, "entity_key"));
    CHECK_STR_CONTAINS(err, "application '--name' (id 7): entity_key: must not start with '-'");
    strcpy(r.entity_key, "-");
    CHECK(bad(&r, "entity_key"));
    CHECK(!app_key_valid("..") && !app_key_valid(".") && !app_key_valid("-x"));
    /* dots and dashes elsewhere are fine */
    strcpy(r.entity_key, "...");
    CHECK(validate(&r, &c) == 0);
    strcpy(r.entity_key, ".hidden");
    CHECK(validate(&r, &c) == 0);
    strcpy(r.entity_key, "a-.b-");
    CHECK(validate(&r, &c) == 0);
    CHECK(app_key_valid("a..b") && app_key_valid("x-"));

    /* 64 bytes is fine and copied whole */
    memset(r.entity_key, 'q', 64);
    r.entity_key[64] = '\0';
    CHECK(validate(&r, &c) == 0);
    CHECK(strlen(c.key) == 64);
    CHECK(memcmp(c.key, r.entity_key, 65) == 0);
}

static void test_name_copy(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    /* unterminated name: cut at 255 */
    memset(r.entity_name, 'n', sizeof(r.entity_name));
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(strlen(c.name), 255);

    /* exactly 255 bytes, terminated */
    r.entity_name[255] = '\0';
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(strlen(c.name), 255);

    /* the cut would split "é" (c3 a9 at 254..255): drop it whole */
    memset(r.entity_name, 'n', sizeof(r.entity_name));
    r.entity_name[254] = (char)0xc3;
    r.entity_name[255] = (char)0xa9;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(strlen(c.name), 254);

    /* a complete "é" at 253..254 is kept */
    r.entity_name[253] = (char)0xc3;
    r.entity_name[254] = (char)0xa9;
    r.entity_name[255] = 'n';
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(strlen(c.name), 255);

    /* a 3-byte sequence cut after 2 bytes */
    memset(r.entity_name, 'n', sizeof(r.entity_name));
    r.entity_name[253] = (char)0xe2;
    r.entity_name[254] = (char)0x82;
    r.entity_name[255] = (char)0xac;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(strlen(c.name), 253);

    /* empty name is fine */
    r.entity_name[0] = '\0';
    CHECK(validate(&r, &c) == 0);
    CHECK(c.name[0] == '\0');
}

/* The first broken column in table order is the one reported. */
static void test_order(void)
{
    struct app_row r = row_default();

    strcpy(r.entity_key, "bad key");
    r.increasing_type = 9;
    r.step = -1;
    CHECK(bad(&r, "entity_key"));
    strcpy(r.entity_key, "user");
    CHECK(bad(&r, "increasing_type"));
    r.increasing_type = 1;
    r.start_offset = -1;
    CHECK(bad(&r, "start_offset"));
    r.start_offset = 0;
    CHECK(bad(&r, "step"));
    r.step = 1000;
    r.current_offset = -1;
    r.increment_max = -1;
    r.delta = -1;
    CHECK(bad(&r, "current_offset"));
    r.current_offset = 0;
    CHECK(bad(&r, "delta"));
    r.delta = 1;
    CHECK(bad(&r, "increment_max"));
    r.increment_max = 1;
    /* column checks come before relations */
    r.max_size_per_times = 999999;
    r.max_pool_size = 10;
    r.interval = -3;
    CHECK(bad(&r, "interval"));
    r.interval = 0;
    CHECK(bad(&r, "max_size_per_times"));
    r.max_size_per_times = 5;
    CHECK(bad(&r, "max_pool_size"));
}

/* Every numeric column at the extremes: rejected cleanly, never overflowed (but for
 * current_offset near 2^63, where the leases may well have got to). */
static void test_extremes(void)
{
    static const struct {
        size_t off;
        const char *field;
    } cols[] = {
        {offsetof(struct app_row, increasing_type), "increasing_type"},
        {offsetof(struct app_row, step), "step"},
        {offsetof(struct app_row, max_size_per_times), "max_size_per_times"},
        {offsetof(struct app_row, max_size_per_second), "max_size_per_second"},
        {offsetof(struct app_row, min_size_percent), "min_size_percent"},
        {offsetof(struct app_row, interval), "interval"},
        {offsetof(struct app_row, max_pool_size), "max_pool_size"},
        {offsetof(struct app_row, delta), "delta"},
        {offsetof(struct app_row, remainder), "remainder"},
        {offsetof(struct app_row, increment_max), "increment_max"},
        {offsetof(struct app_row, start_offset), "start_offset"},
        {offsetof(struct app_row, current_offset), "current_offset"},
    };
    static const int64_t vals[] = {INT64_MAX, INT64_MIN, INT64_MIN + 1, -1, INT64_MAX - 1};

    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
        for (size_t j = 0; j < sizeof(vals) / sizeof(vals[0]); j++) {
            struct app_row r = row_default();
            char got[40];
            memcpy((char *)&r + cols[i].off, &vals[j], sizeof(int64_t));
            if (cols[i].off == offsetof(struct app_row, current_offset) && vals[j] > 0) {
                struct app_cfg c; /* the leases reached the end: a state, not an error */
                CHECK(validate(&r, &c) == 0 && c.space_warning == 1);
                continue;
            }
            CHECK(bad(&r, cols[i].field));
            snprintf(got, sizeof(got), "%" PRId64, vals[j]);
            CHECK_STR_CONTAINS(err, got);
        }
    }

    /* everything huge at once: the first column wins, nothing crashes */
    {
        struct app_row r = row_default();
        r.increasing_type = 2;
        r.start_offset = INT64_MAX;
        r.step = INT64_MAX;
        r.current_offset = INT64_MAX;
        r.max_size_per_times = INT64_MAX;
        r.max_size_per_second = INT64_MAX;
        r.min_size_percent = INT64_MAX;
        r.interval = INT64_MAX;
        r.max_pool_size = INT64_MAX;
        r.delta = INT64_MAX;
        r.remainder = INT64_MAX;
        r.increment_max = INT64_MAX;
        CHECK(bad(&r, "step"));
    }

    /* the largest legal sizes: the pool's span saturates, so no offset works */
    {
        struct app_row r = row_default();
        r.max_pool_size = 100000000;
        r.delta = 4294967296LL;
        r.increment_max = 1000000;
        CHECK(bad(&r, "max_pool_size"));
        CHECK_STR_CONTAINS(err, "2^63");
        /* trend ignores increment_max: 10^8 x 2^32 + 2^32 fits */
        r.increasing_type = 2;
        CHECK(ok(&r));
    }

    /* small errlen: truncated and terminated; NULL err: no crash */
    {
        struct app_row r = row_default();
        struct app_cfg c;
        char small[10];
        r.step = -1;
        memset(small, 'x', sizeof(small));
        CHECK(app_validate(&r, TICK, &c, small, sizeof(small)) == -1);
        CHECK(strcmp(small, "applicati") == 0);
        CHECK(app_validate(&r, TICK, &c, NULL, 0) == -1);
        CHECK(app_validate(&r, TICK, &c, small, 0) == -1);
        CHECK(small[0] == 'a');
        r.step = 1000;
        CHECK(app_validate(&r, TICK, &c, NULL, 0) == 0);
    }

    /* on failure *out is untouched */
    {
        struct app_row r = row_default();
        struct app_cfg c, before;
        memset(&c, 0x5a, sizeof(c));
        before = c;
        r.remainder = 5;
        CHECK(app_validate(&r, TICK, &c, err, sizeof(err)) == -1);
        CHECK(memcmp(&c, &before, sizeof(c)) == 0);
    }
}

/*
 * No ID can exceed 2^63-1: start_offset must leave room for one full pool;
 * current_offset near (or at) the end is a warning, not an error.
 */
static void test_id_space(void)
{
    struct app_row r = row_default();
    struct app_cfg c;
    int64_t span;

    /* default pool 300000, delta 1, increment_max 1: span 300001 */
    span = 300001;
    r.start_offset = INT64_MAX - span;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 1);
    CHECK(strcmp(c.space_field, "start_offset") == 0);
    CHECK(c.space_base == (uint64_t)(INT64_MAX - span));
    r.start_offset = INT64_MAX - span + 1;
    CHECK(bad(&r, "start_offset"));
    CHECK_STR_CONTAINS(err, "ID space exhausted");
    CHECK_STR_CONTAINS(err, "a full pool spans 300001");
    CHECK_STR_CONTAINS(err, "must be <= 9223372036854475806");
    r.start_offset = INT64_MAX;
    CHECK(bad(&r, "start_offset"));

    /* current_offset: the leases got there; what is left is served, with a warning */
    r.start_offset = 0;
    r.current_offset = INT64_MAX - span + 1;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 1);
    CHECK(strcmp(c.space_field, "current_offset") == 0);
    r.current_offset = INT64_MAX; /* the first lease of the largest start_offset ends here */
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 1);
    CHECK(c.space_base == (uint64_t)INT64_MAX);
    /* below 90% with a full pool's room: no warning */
    r.current_offset = INT64_MAX / 10 * 8;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 0);
    /* above 90%: the warning names the higher offset */
    r.current_offset = INT64_MAX / 10 * 9 + 1;
    r.start_offset = 5;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 1);
    CHECK(strcmp(c.space_field, "current_offset") == 0);
    r.current_offset = 0;
    r.start_offset = INT64_MAX / 10 * 9 + 1;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 1);
    CHECK(strcmp(c.space_field, "start_offset") == 0);

    /* the span grows with delta and increment_max (monotonic): 5000 x 7 x 3 + 7 */
    r = row_default();
    r.max_pool_size = 5000;
    r.max_size_per_times = 10;
    r.delta = 7;
    r.increment_max = 3;
    span = 5000 * 7 * 3 + 7;
    r.start_offset = INT64_MAX - span;
    CHECK(ok(&r));
    r.start_offset++;
    CHECK(bad(&r, "start_offset"));
    /* trend: 5000 x 7 + 7 */
    r.increasing_type = 2;
    CHECK(ok(&r));
    r.start_offset = INT64_MAX - (5000 * 7 + 7) + 1;
    CHECK(bad(&r, "start_offset"));
}

/* id_space: empty (the row's own space), or named as a key is. */
static void test_shared_space(void)
{
    struct app_row r = row_default();
    struct app_cfg c;
    char msg[APP_ERR_MAX];

    CHECK(validate(&r, &c) == 0);
    CHECK(strcmp(c.id_space, "") == 0);
    snprintf(r.id_space, sizeof(r.id_space), "%s", "orders.eu-1");
    CHECK(validate(&r, &c) == 0);
    CHECK(strcmp(c.id_space, "orders.eu-1") == 0);
    snprintf(r.id_space, sizeof(r.id_space), "%s", "a b");
    CHECK(app_validate(&r, 100, &c, msg, sizeof(msg)) != 0);
    CHECK_STR_CONTAINS(msg, "id_space: must match [A-Za-z0-9_.-]{1,64}, got byte 0x20 at offset 1");
    snprintf(r.id_space, sizeof(r.id_space), "%s", "-x");
    CHECK(app_validate(&r, 100, &c, msg, sizeof(msg)) != 0);
    CHECK_STR_CONTAINS(msg, "id_space: must not start with '-'");
    memset(r.id_space, 's', APP_KEY_MAX + 1);
    r.id_space[APP_KEY_MAX + 1] = '\0';
    CHECK(app_validate(&r, 100, &c, msg, sizeof(msg)) != 0);
    CHECK_STR_CONTAINS(msg, "id_space: must match [A-Za-z0-9_.-]{1,64}, got more than 64 bytes");
}

static void test_space_warning(void)
{
    struct app_row r = row_default();
    struct app_cfg c;
    const int64_t threshold = INT64_MAX / 10 * 9;

    r.current_offset = threshold;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 0);
    r.current_offset = threshold + 1;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 1);
    /* the larger offset counts */
    r.current_offset = 0;
    r.start_offset = threshold + 1;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 1);
    r.start_offset = 1000;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 0);
}

static void test_span_for(void)
{
    struct app_cfg c;

    memset(&c, 0, sizeof(c));
    c.type = APP_MONOTONIC;
    c.delta = 3;
    c.increment_max = 5;
    CHECK_EQ_U64(app_span_for(&c, 10), 10 * 3 * 5 + 3);
    CHECK_EQ_U64(app_span_for(&c, 0), 3);
    CHECK_EQ_U64(app_span_for(&c, 1), 18);
    c.type = APP_TREND;
    CHECK_EQ_U64(app_span_for(&c, 10), 10 * 3 + 3);
    CHECK_EQ_U64(app_span_for(&c, 0), 3);

    c.delta = 1;
    c.increment_max = 1;
    CHECK_EQ_U64(app_span_for(&c, 1000), 1001);

    /* exactly at the limit, and one past it */
    c.type = APP_TREND;
    CHECK_EQ_U64(app_span_for(&c, (uint64_t)INT64_MAX - 1), (uint64_t)INT64_MAX);
    CHECK_EQ_U64(app_span_for(&c, (uint64_t)INT64_MAX), (uint64_t)INT64_MAX);
    CHECK_EQ_U64(app_span_for(&c, UINT64_MAX), (uint64_t)INT64_MAX);

    /* products that overflow 64 bits saturate instead of wrapping */
    c.type = APP_MONOTONIC;
    c.delta = 4294967296ULL;
    c.increment_max = 1000000;
    CHECK_EQ_U64(app_span_for(&c, 100000000), (uint64_t)INT64_MAX);
    CHECK_EQ_U64(app_span_for(&c, UINT64_MAX), (uint64_t)INT64_MAX);
    c.delta = UINT64_MAX;
    CHECK_EQ_U64(app_span_for(&c, 0), (uint64_t)INT64_MAX);
    c.increment_max = UINT64_MAX;
    c.delta = 2;
    CHECK_EQ_U64(app_span_for(&c, 1), (uint64_t)INT64_MAX);
    /* 2^62 x 2 would be 2^63 (> INT64_MAX) */
    c.increment_max = 1;
    CHECK_EQ_U64(app_span_for(&c, 1ULL << 62), (uint64_t)INT64_MAX);
    CHECK_EQ_U64(app_span_for(&c, (1ULL << 62) - 2), (1ULL << 63) - 2);
}

static void test_low_water(void)
{
    struct app_row r = row_default();
    struct app_cfg c;

    r.step = 10;
    r.max_size_per_times = 10;
    r.max_pool_size = 1000;
    r.min_size_percent = 80;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.low_water, 800);
    r.max_pool_size = 1001; /* floor(800.8) */
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.low_water, 800);
    r.max_pool_size = 199;
    r.min_size_percent = 1; /* floor(1.99) */
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.low_water, 1);
    r.max_pool_size = 99; /* floor(0.99): refill only when empty */
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.low_water, 0);
}

static void test_row_from_text(void)
{
    char key65[66];
    char *cols[APP_ROW_NCOLUMNS] = {"7",  "0", "user", "user IDs", "2",     "100", "500",
                                    NULL, "0", "0",    "0",        "0",     "0",   "3",
                                    "2",  "1", "42",   "9",        "orders"};
    unsigned long lens[APP_ROW_NCOLUMNS] = {0};
    struct app_row r;

    for (int i = 0; i < APP_ROW_NCOLUMNS; i++)
        lens[i] = cols[i] ? strlen(cols[i]) : 0;
    memset(&r, 0xa5, sizeof(r));
    app_row_from_text(&r, cols, lens);
    CHECK_EQ_U64((uint64_t)r.id, 7);
    CHECK(strcmp(r.entity_key, "user") == 0);
    CHECK(strcmp(r.entity_name, "user IDs") == 0);
    CHECK_EQ_U64((uint64_t)r.increasing_type, 2);
    CHECK_EQ_U64((uint64_t)r.step, 500);
    CHECK_EQ_U64((uint64_t)r.current_offset, 0); /* NULL column */
    CHECK_EQ_U64((uint64_t)r.delta, 3);
    CHECK_EQ_U64((uint64_t)r.remainder, 2);
    CHECK_EQ_U64((uint64_t)r.max_id, 42);
    CHECK_EQ_U64((uint64_t)r.version, 9);
    CHECK(strcmp(r.id_space, "orders") == 0);
    /* An overlong key is cut to one byte past the limit, so validation still rejects it. */
    memset(key65, 'k', 65);
    key65[65] = '\0';
    cols[2] = key65;
    lens[2] = 65;
    app_row_from_text(&r, cols, lens);
    CHECK_EQ_U64(strlen(r.entity_key), 65);
    CHECK(!app_key_valid(r.entity_key));
}

/* Found by fuzzing: a NUL byte inside the key column used to cut the key short. */
static void test_row_from_text_nul(void)
{
    char key[] = {'u', 's', 'e', 'r', '\0', 'x'}, name[] = {'a', '\0', 'b'};
    char *cols[APP_ROW_NCOLUMNS] = {"7", "0", key, name, "1", "0", "0", "0", "0", "0",
                                    "0", "0", "0", "0",  "0", "0", "0", "0", ""};
    unsigned long lens[APP_ROW_NCOLUMNS] = {0};
    struct app_row r;

    for (int i = 0; i < APP_ROW_NCOLUMNS; i++)
        lens[i] = strlen(cols[i]);
    lens[2] = sizeof(key);
    lens[3] = sizeof(name);
    app_row_from_text(&r, cols, lens);
    /* "user\0x" is not the valid key "user" (another row's, maybe): it is rejected. */
    CHECK(strcmp(r.entity_key, "user?x") == 0);
    CHECK(bad(&r, "entity_key"));
    CHECK(strcmp(r.entity_name, "a?b") == 0);
}

/*
 * Found by fuzzing: entity_name is VARCHAR(255) in utf8mb4, up to 1020 bytes;
 * the cut to 255 bytes used to split a character, leaving invalid UTF-8.
 */
static void test_row_from_text_name_cut(void)
{
    char name[300];
    char *cols[APP_ROW_NCOLUMNS] = {"7", "0", "user", name, "1", "0", "0", "0", "0", "0",
                                    "0", "0", "0",    "0",  "0", "0", "0", "0", ""};
    unsigned long lens[APP_ROW_NCOLUMNS] = {0};
    struct app_row r;
    struct app_cfg c;

    for (int i = 0; i < APP_ROW_NCOLUMNS; i++)
        lens[i] = cols[i] == name ? sizeof(name) : strlen(cols[i]);
    /* "é" (c3 a9) at 254..255: the cut after 255 bytes drops it whole */
    memset(name, 'n', sizeof(name));
    name[254] = (char)0xc3;
    name[255] = (char)0xa9;
    app_row_from_text(&r, cols, lens);
    CHECK_EQ_U64(strlen(r.entity_name), 254);
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(strlen(c.name), 254);

    /* a 4-byte character at 253..256 */
    memset(name, 'n', sizeof(name));
    memcpy(name + 253, "\xf0\x9f\x98\x80", 4);
    app_row_from_text(&r, cols, lens);
    CHECK_EQ_U64(strlen(r.entity_name), 253);

    /* a 3-byte character ending at 254 is kept; ASCII is cut at 255 */
    memset(name, 'n', sizeof(name));
    memcpy(name + 252, "\xe2\x82\xac", 3);
    app_row_from_text(&r, cols, lens);
    CHECK_EQ_U64(strlen(r.entity_name), 255);
    CHECK(memcmp(r.entity_name + 252, "\xe2\x82\xac", 3) == 0);
    memset(name, 'n', sizeof(name));
    app_row_from_text(&r, cols, lens);
    CHECK_EQ_U64(strlen(r.entity_name), 255);
}

/* The column list: the SELECT idpoold sends and what it generates. */
static void test_columns(void)
{
    /* Byte for byte the list idpoold and idpoolctl have always selected. */
    CHECK(strcmp(APP_ROW_COLUMNS,
                 "id, deleted_at, entity_key, entity_name, increasing_type, start_offset, step, "
                 "current_offset, max_size_per_times, max_size_per_second, min_size_percent, "
                 "`interval`, max_pool_size, delta, remainder, increment_max, max_id, "
                 "version, id_space") == 0);
    CHECK(strcmp(APP_TIME_COLUMNS, ", create_time, update_time") == 0);
    CHECK_EQ_U64(APP_ROW_NCOLUMNS, 19);
    {
        char buf[1024];

        /* the same list, built */
        CHECK(strcmp(app_row_columns(0, 0, buf, sizeof(buf)), APP_ROW_COLUMNS) == 0);
        CHECK(strcmp(app_row_columns(0, 1, buf, sizeof(buf)), APP_ROW_COLUMNS APP_TIME_COLUMNS) ==
              0);
        /* a schema older than max_id and id_space: read as 0 and '' */
        CHECK(strcmp(app_row_columns(APP_OPTIONAL_COLUMNS, 0, buf, sizeof(buf)),
                     "id, deleted_at, entity_key, entity_name, increasing_type, start_offset, "
                     "step, current_offset, max_size_per_times, max_size_per_second, "
                     "min_size_percent, `interval`, max_pool_size, delta, remainder, "
                     "increment_max, 0, version, ''") == 0);
        CHECK(strcmp(app_row_columns(1u << APP_COL_id_space, 1, buf, sizeof(buf)),
                     "id, deleted_at, entity_key, entity_name, increasing_type, start_offset, "
                     "step, current_offset, max_size_per_times, max_size_per_second, "
                     "min_size_percent, `interval`, max_pool_size, delta, remainder, "
                     "increment_max, max_id, version, '', create_time, update_time") == 0);
        /* a column not optional is never replaced */
        CHECK(strcmp(app_row_columns(1u << APP_COL_delta, 0, buf, sizeof(buf)), APP_ROW_COLUMNS) ==
              0);
        /* what MySQL says of a missing column */
        CHECK_EQ_U64(app_missing_column("Unknown column 'max_id' in 'field list'"),
                     1u << APP_COL_max_id);
        CHECK_EQ_U64(app_missing_column("Unknown column 'id_space' in 'field list'"),
                     1u << APP_COL_id_space);
        CHECK_EQ_U64(app_missing_column("Unknown column 'delta' in 'field list'"), 0);
        CHECK_EQ_U64(app_missing_column("Unknown column 'max_idx' in 'field list'"), 0);
        CHECK_EQ_U64(app_missing_column("Table 'idpool.application' doesn't exist"), 0);
        CHECK_EQ_U64(app_missing_column(NULL), 0);
    }
    /* app_row_from_text() reads column i of the SELECT into app_columns[i]. */
    for (int i = 0; i < APP_NCOLUMNS; i++) {
        const struct app_column *c = &app_columns[i];

        CHECK(c->name && c->sql && strstr(c->sql, c->name));
        CHECK((c->type == APP_T_TIME) == (i >= APP_ROW_NCOLUMNS)); /* TIME columns last */
        CHECK(c->type != APP_T_ID || i == 0);
        CHECK((c->set == APP_KEEP) == (c->why != NULL));
        CHECK(c->set != APP_KEEP || c->opt == NULL);
        CHECK((c->opt != NULL) == (c->help != NULL)); /* every option of apps add has its help */
    }
    CHECK(app_columns[APP_COL_interval].row_off == offsetof(struct app_row, interval));
    CHECK(app_columns[APP_COL_max_size_per_times].cfg_off == offsetof(struct app_cfg, per_take));
    CHECK(strcmp(app_columns[APP_COL_max_pool_size].opt, "max-pool") == 0);
}

/*
 * The defaults of the list are sql/schema.sql's: `apps add` starts a row
 * from them, so a row it adds is the row an INSERT of the key alone makes.
 */
static void test_columns_schema(void)
{
    char text[16384], *table, *end;
    size_t n;
    FILE *f = unit_source("sql/schema.sql");

    if (!f)
        return;
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    table = strstr(text, "CREATE TABLE IF NOT EXISTS `application` (");
    CHECK(table != NULL);
    if (!table)
        return;
    end = strstr(table, ") ENGINE");
    CHECK(end != NULL);
    if (!end)
        return;
    *end = '\0';
    for (int i = 0; i < APP_NCOLUMNS; i++) {
        const struct app_column *c = &app_columns[i];
        char col[80], def[48], *line, *eol;

        snprintf(col, sizeof(col), "\n  `%s` ", c->name);
        line = strstr(table, col);
        CHECK(line != NULL);
        if (!line) {
            fprintf(stderr, "column %s is not in sql/schema.sql\n", c->name);
            continue;
        }
        eol = strchr(line + 1, '\n');
        if (eol)
            *eol = '\0';
        if (c->type == APP_T_INT || c->type == APP_T_OFFSET || c->type == APP_T_TYPE) {
            snprintf(def, sizeof(def), " DEFAULT %" PRId64 " ", c->def);
            CHECK_STR_CONTAINS(line, def);
        }
        if (eol)
            *eol = '\n';
    }
}

/* A change to any setting an operator sets is a changed row; idpoold's own offsets are not. */
static void test_same_settings(void)
{
    struct app_row r = row_default();
    struct app_cfg a, b;

    CHECK(validate(&r, &a) == 0);
    b = a;
    CHECK(app_same_settings(&a, &b));
    b.current_offset += 1000;
    b.version++;
    b.low_water++; /* derived: follows the columns */
    CHECK(app_same_settings(&a, &b));
#define FLIP(m, v)                                                                                 \
    do {                                                                                           \
        b = a;                                                                                     \
        b.m = v;                                                                                   \
        CHECK(!app_same_settings(&a, &b));                                                         \
    } while (0)
    FLIP(id, 4);
    FLIP(type, APP_TREND);
    FLIP(start_offset, 5);
    FLIP(step, 7);
    b = a;
    snprintf(b.id_space, sizeof(b.id_space), "%s", "orders");
    CHECK(!app_same_settings(&a, &b));
    FLIP(per_take, 7);
    FLIP(per_second, 7);
    FLIP(min_percent, 7);
    FLIP(interval_ms, 7);
    FLIP(max_pool, 7);
    FLIP(delta, 7);
    FLIP(remainder, 7);
    FLIP(increment_max, 7);
    FLIP(max_id, 7);
#undef FLIP
    b = a;
    strcpy(b.name, "other");
    CHECK(!app_same_settings(&a, &b));
}

static void test_describe(void)
{
    struct app_row r = row_default();
    struct app_cfg c;
    char buf[256];

    r.increasing_type = APP_TREND;
    r.step = 500;
    r.max_size_per_second = 2000;
    CHECK(validate(&r, &c) == 0);
    app_describe(&c, buf, sizeof(buf));
    CHECK(strcmp(buf, "trend step=500 max_pool_size=120000 low_water=96000 delta=1 remainder=0 "
                      "increment_max=1 start_offset=1 interval=100ms") == 0);
    r.max_id = APP_JS_SAFE_MAX;
    CHECK(validate(&r, &c) == 0);
    app_describe(&c, buf, sizeof(buf));
    CHECK_STR_CONTAINS(buf, "interval=100ms max_id=9007199254740991");
}

/*
 * max_id: 0 (no ceiling) or at least the first ID the row can hand out;
 * the ceiling moves the end of the ID space (space_warning, app_ceiling).
 */
static void test_max_id(void)
{
    struct app_row r = row_default();
    struct app_cfg c;
    char buf[48];

    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.max_id, 0);
    CHECK_EQ_U64(app_ceiling(&c), (uint64_t)INT64_MAX);
    CHECK(strcmp(app_ceiling_text(&c, buf, sizeof(buf)), "2^63-1") == 0);
    r.max_id = -1;
    CHECK(bad(&r, "max_id"));
    CHECK_STR_CONTAINS(err, "must be >= 0, got -1");
    r.max_id = APP_JS_SAFE_MAX;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(c.max_id, 9007199254740991ULL);
    CHECK_EQ_U64(app_ceiling(&c), 9007199254740992ULL);
    CHECK(strcmp(app_ceiling_text(&c, buf, sizeof(buf)), "max_id 9007199254740991") == 0);
    CHECK(c.space_warning == 0);
    /* at start_offset: one ID, valid; below it: none, an error naming the first ID */
    r.start_offset = 1000;
    r.max_id = 1000;
    CHECK(ok(&r));
    r.max_id = 999;
    CHECK(bad(&r, "max_id"));
    CHECK_STR_CONTAINS(err, "must be 0 (no ceiling below 2^63-1) or >= 1000 (the first ID of "
                            "start_offset 1000, delta 1, remainder 0), got 999");
    /* the lattice: delta 10, remainder 3 from 1000 -> the first ID is 1003 */
    r.delta = 10;
    r.remainder = 3;
    r.max_id = 1002;
    CHECK(bad(&r, "max_id"));
    CHECK_STR_CONTAINS(err, ">= 1003 ");
    r.max_id = 1003;
    CHECK(ok(&r));
    /* max_id need not be on the lattice: 2^53-1 serves every delta */
    r.max_id = APP_JS_SAFE_MAX;
    CHECK(ok(&r));
    /* start_offset 0, remainder 0: IDs start at delta (never 0) */
    r = row_default();
    r.start_offset = 0;
    r.delta = 4;
    r.max_id = 3;
    CHECK(bad(&r, "max_id"));
    r.max_id = 4;
    CHECK(ok(&r));

    /* space_warning counts to max_id: above 90% of it, or less than a full pool below it */
    r = row_default();
    r.max_id = APP_JS_SAFE_MAX;
    r.current_offset = APP_JS_SAFE_MAX / 10 * 8;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 0);
    r.current_offset = APP_JS_SAFE_MAX / 10 * 9 + 10;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 1);
    CHECK(strcmp(c.space_field, "current_offset") == 0);
    r.current_offset = APP_JS_SAFE_MAX + 1; /* the last lease ended at the ceiling */
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 1);
    /* max_id 2^63-1 is no ceiling: no lease passes 2^63-1 anyway (found by fuzzing) */
    r.max_id = INT64_MAX;
    CHECK(validate(&r, &c) == 0);
    CHECK_EQ_U64(app_ceiling(&c), (uint64_t)INT64_MAX);
    CHECK(strcmp(app_ceiling_text(&c, buf, sizeof(buf)), "2^63-1") == 0);
    /* the same offset without a ceiling is far from the end */
    r.max_id = 0;
    CHECK(validate(&r, &c) == 0);
    CHECK(c.space_warning == 0);
}

/* The smallest lattice ID above n (apps add --start-above), and where there is none. */
static void test_lattice_above(void)
{
    uint64_t x;

    CHECK(app_lattice_above(0, 1, 0, &x) == 0);
    CHECK_EQ_U64(x, 1);
    CHECK(app_lattice_above(123456, 1, 0, &x) == 0);
    CHECK_EQ_U64(x, 123457);
    /* delta 10, remainder 3: above 123456 is 123463; above 123463 is 123473 */
    CHECK(app_lattice_above(123456, 10, 3, &x) == 0);
    CHECK_EQ_U64(x, 123463);
    CHECK(app_lattice_above(123463, 10, 3, &x) == 0);
    CHECK_EQ_U64(x, 123473);
    CHECK(app_lattice_above(123462, 10, 3, &x) == 0);
    CHECK_EQ_U64(x, 123463);
    /* remainder 0: never ID 0 */
    CHECK(app_lattice_above(0, 4, 0, &x) == 0);
    CHECK_EQ_U64(x, 4);
    CHECK(app_lattice_above(7, 4, 0, &x) == 0);
    CHECK_EQ_U64(x, 8);
    /* the top of the ID space: 2^63-2 is the last ID a lease can hold (hi <= 2^63-1) */
    CHECK(app_lattice_above((uint64_t)INT64_MAX - 2, 1, 0, &x) == 0);
    CHECK_EQ_U64(x, (uint64_t)INT64_MAX - 1);
    CHECK(app_lattice_above((uint64_t)INT64_MAX - 1, 1, 0, &x) == -1);
    CHECK(app_lattice_above((uint64_t)INT64_MAX - 2, 2, 1, &x) == -1); /* next: 2^63-1 */
    CHECK(app_lattice_above((uint64_t)INT64_MAX, 1, 0, &x) == -1);
    CHECK(app_lattice_above(UINT64_MAX, 1, 0, &x) == -1);
    CHECK(app_lattice_above((uint64_t)INT64_MAX - 10, 4294967296ULL, 5, &x) == -1);
    /* not a lattice */
    CHECK(app_lattice_above(5, 0, 0, &x) == -1);
    CHECK(app_lattice_above(5, 3, 3, &x) == -1);
}

int main(void)
{
    RUN(test_key_valid);
    RUN(test_defaults);
    RUN(test_explicit);
    RUN(test_message_format);
    RUN(test_increasing_type);
    RUN(test_step);
    RUN(test_offsets);
    RUN(test_per_take);
    RUN(test_per_second);
    RUN(test_min_percent);
    RUN(test_interval);
    RUN(test_max_pool);
    RUN(test_refill_fit);
    RUN(test_delta_remainder);
    RUN(test_increment_max);
    RUN(test_bad_key_message);
    RUN(test_name_copy);
    RUN(test_order);
    RUN(test_extremes);
    RUN(test_id_space);
    RUN(test_shared_space);
    RUN(test_space_warning);
    RUN(test_span_for);
    RUN(test_low_water);
    RUN(test_row_from_text);
    RUN(test_row_from_text_nul);
    RUN(test_row_from_text_name_cut);
    RUN(test_columns);
    RUN(test_columns_schema);
    RUN(test_same_settings);
    RUN(test_describe);
    RUN(test_max_id);
    RUN(test_lattice_above);
    return unit_done();
}
