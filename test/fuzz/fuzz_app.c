/*
 * fuzz_app — libFuzzer target for the `application` row rules (app.c,
 * design brief §3).
 *
 * The first input byte picks a mode:
 *   0, 1  the rest is decoded into the fields of a struct app_row (integers
 *         biased to the boundaries, see fz_i64; key and name as strings or as
 *         raw, possibly unterminated, buffers) and a tick, then validated;
 *   2     the rest is decoded into the 17 text columns of a MySQL result row
 *         (NULL, a decimal number, arbitrary bytes or a long repeated unit)
 *         and read with app_row_from_text(), as idpoold and idpoolctl do,
 *         then validated: a key column that breaks the pattern is never
 *         served, a name that is valid UTF-8 stays valid UTF-8 when cut;
 *   3     app_span_for() on an arbitrary config and count.
 *
 * Every validation is compared with ref_valid(), an independent statement of
 * the rules in 128-bit arithmetic, and an accepted row must satisfy the
 * brief's invariants (check_cfg): a refill fits, IDs stay below 2^63, the
 * defaults are the documented ones, and so on. A rejected row gets an error
 * that is terminated, printable and names the row and a column.
 */
#include <inttypes.h>

#include "app.h"
#include "idspace.h"
#include "fuzz.h"

/* The implementation limits of app.c (private there), restated. */
#define LIM_PER_SECOND 100000000LL
#define LIM_POOL       100000000LL
#define LIM_INTERVAL   86400000LL
#define LIM_DELTA      4294967296LL
#define LIM_INCREMENT  1000000LL

typedef __int128 i128;

static const char *const columns[] = {
    "entity_key",
    "increasing_type",
    "start_offset",
    "step",
    "current_offset",
    "max_size_per_times",
    "max_size_per_second",
    "min_size_percent",
    "interval",
    "max_pool_size",
    "delta",
    "remainder",
    "increment_max",
    "max_id",
    "id_space",
};

static int ref_key_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

/* [A-Za-z0-9_.-]{1,64} on the n bytes at s, not "." or "..", not starting with '-'. */
static int ref_key(const char *s, size_t n)
{
    if (n < 1 || n > APP_KEY_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!ref_key_char((unsigned char)s[i]))
            return 0;
    if (s[0] == '-' || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return 0;
    return 1;
}

/* A sizing column: 0 means def, else lo..hi. Returns the resolved value or -1. */
static i128 ref_sizing(int64_t v, i128 def, i128 lo, i128 hi)
{
    if (v == 0)
        return def;
    return v >= lo && v <= hi ? v : -1;
}

/*
 * The rules of design brief §3, with app.c's upper limits, computed in
 * 128-bit arithmetic (nothing can wrap or saturate). 1 when the row is valid.
 */
static int ref_valid(const struct app_row *r)
{
    i128 step, per_take, per_second, pct, pool, delta, inc, span, base;

    if (!ref_key(r->entity_key, strnlen(r->entity_key, sizeof(r->entity_key))))
        return 0;
    if (r->increasing_type != 1 && r->increasing_type != 2)
        return 0;
    if (r->start_offset < 0 || r->current_offset < 0)
        return 0;
    step = ref_sizing(r->step, 1000, 1, 1000000);
    per_take = ref_sizing(r->max_size_per_times, 1000, 1, LIM_POOL);
    per_second = ref_sizing(r->max_size_per_second, 5000, 1, LIM_PER_SECOND);
    pct = ref_sizing(r->min_size_percent, 80, 1, 99);
    if (step < 0 || per_take < 0 || per_second < 0 || pct < 0)
        return 0;
    if (r->max_size_per_times == 0 && per_take > per_second)
        per_take = per_second; /* the default take is lowered to a second's grant */
    if (r->interval < 0 || r->interval > LIM_INTERVAL)
        return 0;
    pool = r->max_pool_size == 0 ? 60 * per_second : (i128)r->max_pool_size;
    if (pool < 1 || pool > LIM_POOL)
        return 0;
    delta = ref_sizing(r->delta, 1, 1, LIM_DELTA);
    if (delta < 0 || r->remainder < 0 || r->remainder >= delta)
        return 0;
    inc = ref_sizing(r->increment_max, 1, 1, LIM_INCREMENT);
    if (inc < 0)
        return 0;
    /* id_space: empty, or a key */
    {
        size_t n = strnlen(r->id_space, sizeof(r->id_space));
        if (n > 0 && !ref_key(r->id_space, n))
            return 0;
    }
    if (per_take > pool || per_take > per_second || pool < step || pool * (100 - pct) / 100 < step)
        return 0;
    /* A full pool above start_offset stays below 2^63 (current_offset may be
     * anywhere up to 2^63-1: a state). app.c also refuses a span of exactly
     * 2^63-1 (it cannot tell it from saturation). */
    span = pool * delta * (r->increasing_type == 1 ? inc : 1) + delta;
    base = r->start_offset;
    if (span >= INT64_MAX || base + span > INT64_MAX)
        return 0;
    /* max_id: 0, or at least the first ID of the lattice at or above start_offset (>= 1) */
    if (r->max_id < 0)
        return 0;
    if (r->max_id != 0) {
        i128 from = base > 1 ? base : 1,
             first = from + ((r->remainder - from % delta) % delta + delta) % delta;
        if (first > r->max_id)
            return 0;
    }
    return 1;
}

/* The brief's invariants on a row that validated into *c. */
static void check_cfg(const struct app_row *r, uint64_t tick, const struct app_cfg *c)
{
    i128 span, base;

    CHECK(c->id == r->id && c->version == r->version);
    CHECK(c->type == APP_MONOTONIC || c->type == APP_TREND);
    CHECK((int64_t)c->type == r->increasing_type);
    CHECK(app_key_valid(c->key) && strcmp(c->key, r->entity_key) == 0);
    CHECK(strcmp(c->id_space, r->id_space) == 0 && (!c->id_space[0] || app_key_valid(c->id_space)));

    /* The name: a prefix of the row's, at most APP_NAME_MAX bytes, still UTF-8 if it was. */
    {
        size_t rn = strnlen(r->entity_name, sizeof(r->entity_name)), cn = strlen(c->name);

        CHECK(cn <= APP_NAME_MAX && cn <= rn && memcmp(c->name, r->entity_name, cn) == 0);
        CHECK(cn == rn || rn > APP_NAME_MAX);
        if (fz_utf8_valid((const unsigned char *)r->entity_name, rn))
            CHECK(fz_utf8_valid((const unsigned char *)c->name, cn));
    }

    /* Ranges, and 0 resolves to the documented default. */
    CHECK(c->start_offset == (uint64_t)r->start_offset);
    CHECK(c->current_offset == (uint64_t)r->current_offset);
    CHECK(c->step >= 1 && c->step <= APP_MAX_STEP);
    CHECK(c->step == (r->step ? (uint64_t)r->step : APP_DEFAULT_STEP));
    CHECK(c->per_second ==
          (r->max_size_per_second ? (uint64_t)r->max_size_per_second : APP_DEFAULT_PER_SECOND));
    CHECK(c->per_take == (r->max_size_per_times                  ? (uint64_t)r->max_size_per_times
                          : APP_DEFAULT_PER_TAKE < c->per_second ? APP_DEFAULT_PER_TAKE
                                                                 : c->per_second));
    CHECK(c->min_percent >= 1 && c->min_percent <= 99);
    CHECK(c->min_percent ==
          (r->min_size_percent ? (uint64_t)r->min_size_percent : APP_DEFAULT_MIN_PCT));
    CHECK(c->interval_ms == (r->interval ? (uint64_t)r->interval : tick));
    CHECK(c->max_pool ==
          (r->max_pool_size ? (uint64_t)r->max_pool_size : APP_POOL_SECONDS * c->per_second));
    CHECK(c->delta >= 1 && c->delta == (r->delta ? (uint64_t)r->delta : 1));
    CHECK(c->remainder < c->delta && c->remainder == (uint64_t)r->remainder);
    CHECK(c->increment_max >= 1 && c->increment_max <= 1000000);
    CHECK(c->increment_max == (r->increment_max ? (uint64_t)r->increment_max : 1));

    /* Relations (§3): sizes, a refill fits above low water, takes fit in the pool. */
    CHECK(c->max_pool >= c->step);
    CHECK(c->max_pool * (100 - c->min_percent) / 100 >= c->step);
    CHECK(c->per_take <= c->max_pool);
    CHECK(c->per_take <= c->per_second);
    CHECK(c->low_water == c->max_pool * c->min_percent / 100);
    CHECK(c->low_water < c->max_pool && c->max_pool - c->low_water >= c->step);

    /* No ID can exceed 2^63-1: a full pool above start_offset fits; the higher
     * offset near the end (or leaving less than a pool) is a warning. */
    span =
        (i128)c->max_pool * c->delta * (c->type == APP_MONOTONIC ? c->increment_max : 1) + c->delta;
    CHECK(c->start_offset + span <= INT64_MAX);
    base = c->start_offset > c->current_offset ? c->start_offset : c->current_offset;
    CHECK((i128)app_span_for(c, c->max_pool) == span);
    CHECK(c->max_id == (uint64_t)r->max_id);
    {
        /* max_id 2^63-1 is no ceiling: no lease reaches past 2^63-1 anyway */
        i128 ceiling = c->max_id && c->max_id < INT64_MAX ? (i128)c->max_id + 1 : INT64_MAX;
        CHECK((i128)app_ceiling(c) == ceiling);
        CHECK(c->space_warning == (base > ceiling / 10 * 9 || base + span > ceiling));
    }
    CHECK(c->space_base == (uint64_t)base);
    CHECK(strcmp(c->space_field,
                 c->current_offset > c->start_offset ? "current_offset" : "start_offset") == 0);
}

/* A rejected row's message: terminated, printable, naming the row and one column. */
static void check_err(const struct app_row *r, const char *err, size_t errlen)
{
    size_t n;
    int named = 0;

    if (err == NULL || errlen == 0)
        return;
    CHECK(memchr(err, '\0', errlen) != NULL);
    n = strlen(err);
    for (size_t i = 0; i < n; i++)
        CHECK((unsigned char)err[i] >= ' ' && (unsigned char)err[i] < 0x7f);
    if (errlen < APP_ERR_MAX)
        return; /* cut: nothing more to check */
    CHECK(strncmp(err, "application '", 13) == 0);
    for (size_t i = 0; i < sizeof(columns) / sizeof(columns[0]); i++) {
        char want[64];

        snprintf(want, sizeof(want), "): %s: ", columns[i]);
        if (r->id == 0)
            snprintf(want, sizeof(want), "': %s: ", columns[i]);
        named |= strstr(err, want) != NULL;
    }
    CHECK(named);
}

/* Validate *r, compare with the reference, check the result either way. */
static void check_row(const struct app_row *r, uint64_t tick, size_t errlen)
{
    struct app_cfg c, c2;
    char *err = errlen ? malloc(errlen) : NULL; /* exact size: ASan sees any overflow */
    int rc, rc2;

    CHECK(errlen == 0 || err != NULL);
    /* app_key_valid() reads at most APP_KEY_MAX + 1 bytes, terminated or not. */
    CHECK(app_key_valid(r->entity_key) ==
          ref_key(r->entity_key, strnlen(r->entity_key, sizeof(r->entity_key))));
    memset(&c, 0xA5, sizeof(c));
    if (err)
        memset(err, 'x', errlen);
    rc = app_validate(r, tick, &c, err, errlen);
    CHECK(rc == 0 || rc == -1);
    if (rc == 0)
        check_cfg(r, tick, &c);
    else
        check_err(r, err, errlen);
    CHECK((rc == 0) == ref_valid(r));

    /* Deterministic, and the error buffer does not change the verdict. */
    memset(&c2, 0x5A, sizeof(c2));
    rc2 = app_validate(r, tick, &c2, NULL, 0);
    CHECK(rc2 == rc);
    if (rc == 0)
        CHECK(memcmp(&c, &c2, sizeof(c)) == 0);
    free(err);
}

/* Error buffer size: none, a short one (cut messages) or the usual one. */
static size_t pick_errlen(struct fz *f)
{
    uint8_t b = fz_u8(f);

    if (b < 16)
        return b;
    return APP_ERR_MAX;
}

static void mode_struct(struct fz *f)
{
    struct app_row r;
    uint8_t how = fz_u8(f);
    uint64_t tick = 1 + fz_uint(f, 2) % 60000; /* config allows 1..60000 */
    size_t errlen = pick_errlen(f);
    size_t n;
    char *s;

    memset(&r, 0, sizeof(r));
    r.id = fz_i64(f);
    r.deleted_at = fz_i64(f);
    if (how & 1) { /* raw buffer, possibly full and unterminated */
        n = fz_u8(f) % (sizeof(r.entity_key) + 1);
        for (size_t i = 0; i < n; i++)
            r.entity_key[i] = (char)fz_u8(f);
    } else {
        s = fz_str(f, sizeof(r.entity_key) - 1, NULL);
        strcpy(r.entity_key, s);
        free(s);
    }
    if (how & 2) {
        n = fz_u8(f) + (how & 4 ? 1 : 0); /* up to 256: full and unterminated */
        for (size_t i = 0; i < n; i++)
            r.entity_name[i] = (char)fz_u8(f);
    } else {
        s = fz_str(f, sizeof(r.entity_name) - 1, NULL);
        strcpy(r.entity_name, s);
        free(s);
    }
    r.increasing_type = fz_i64(f);
    r.start_offset = fz_i64(f);
    r.step = fz_i64(f);
    r.current_offset = fz_i64(f);
    r.max_size_per_times = fz_i64(f);
    r.max_size_per_second = fz_i64(f);
    r.min_size_percent = fz_i64(f);
    r.interval = fz_i64(f);
    r.max_pool_size = fz_i64(f);
    r.delta = fz_i64(f);
    r.remainder = fz_i64(f);
    r.increment_max = fz_i64(f);
    r.max_id = fz_i64(f);
    r.version = fz_i64(f);
    s = fz_str(f, sizeof(r.id_space) - 1, NULL);
    strcpy(r.id_space, s);
    free(s);
    check_row(&r, tick, errlen);
}

/*
 * A long string: a prefix, then a short unit repeated (up to max bytes in
 * all). Repeating "é" or "€" after some ASCII makes the long, valid UTF-8
 * names that random bytes almost never are, cut at every offset.
 */
static char *fz_repeat(struct fz *f, size_t max, size_t *len)
{
    size_t plen, ulen, count = (size_t)fz_u8(f) * 4, n;
    char *pre = fz_str(f, 64, &plen), *unit = fz_str(f, 8, &ulen), *s;

    n = plen + (ulen ? count * ulen : 0);
    if (n > max)
        n = max;
    s = malloc(n + 1);
    CHECK(s != NULL);
    for (size_t i = 0; i < n; i++)
        s[i] = i < plen ? pre[i] : unit[(i - plen) % ulen];
    s[n] = '\0';
    free(pre);
    free(unit);
    *len = n;
    return s;
}

/*
 * A MySQL result row in text: each column NULL, the decimal text of a value
 * (checked to read back exactly) or arbitrary bytes (NUL included, as a
 * VARCHAR may hold them; for the strings also a long repeated unit).
 */
static void mode_text(struct fz *f)
{
    char *cols[APP_ROW_NCOLUMNS + 1];
    unsigned long lens[APP_ROW_NCOLUMNS + 1];
    int64_t want[APP_ROW_NCOLUMNS];
    int exact[APP_ROW_NCOLUMNS];
    struct app_row r;
    uint64_t tick = 1 + fz_uint(f, 2) % 60000;
    size_t errlen = pick_errlen(f);
    int64_t *nums[APP_ROW_NCOLUMNS] = {
        &r.id,
        &r.deleted_at,
        NULL,
        NULL,
        &r.increasing_type,
        &r.start_offset,
        &r.step,
        &r.current_offset,
        &r.max_size_per_times,
        &r.max_size_per_second,
        &r.min_size_percent,
        &r.interval,
        &r.max_pool_size,
        &r.delta,
        &r.remainder,
        &r.increment_max,
        &r.max_id,
        &r.version,
        NULL, /* id_space */
    };

    for (int i = 0; i < APP_ROW_NCOLUMNS; i++) {
        uint8_t kind = fz_u8(f) % 4;
        size_t n;

        exact[i] = 0;
        if (kind == 0) {
            cols[i] = NULL;
            lens[i] = 0;
            want[i] = 0;
            exact[i] = 1;
            continue;
        }
        if (kind == 1 && i != 2 && i != 3) {
            want[i] = fz_i64(f);
            exact[i] = 1;
            cols[i] = malloc(24);
            CHECK(cols[i] != NULL);
            n = (size_t)snprintf(cols[i], 24, "%" PRId64, want[i]);
        } else if (kind == 1) {
            cols[i] = fz_repeat(f, 1100, &n);
        } else {
            cols[i] = fz_str(f, 1100, &n); /* VARCHAR(255) utf8mb4: up to 1020 bytes */
        }
        lens[i] = (unsigned long)n;
    }
    cols[APP_ROW_NCOLUMNS] = "2024-01-01 00:00:00"; /* a query may select more columns */
    lens[APP_ROW_NCOLUMNS] = 19;
    memset(&r, 0xA5, sizeof(r));
    app_row_from_text(&r, cols, lens);

    for (int i = 0; i < APP_ROW_NCOLUMNS; i++)
        if (nums[i] && exact[i])
            CHECK(*nums[i] == want[i]);
    /* Strings: a copy of the column, cut to the buffer and terminated. */
    CHECK(memchr(r.entity_key, '\0', sizeof(r.entity_key)) != NULL);
    CHECK(memchr(r.entity_name, '\0', sizeof(r.entity_name)) != NULL);
    CHECK(strlen(r.entity_name) <= APP_NAME_MAX);
    CHECK(memchr(r.id_space, '\0', sizeof(r.id_space)) != NULL);

    check_row(&r, tick, errlen);

    /*
     * §3: a key column that does not match [A-Za-z0-9_.-]{1,64} is not
     * served: whatever the copy made of it, the row must not validate.
     */
    if (!ref_key(cols[2] ? cols[2] : "", cols[2] ? lens[2] : 0))
        CHECK(app_validate(&r, tick, &(struct app_cfg){0}, NULL, 0) != 0);
    /* A name that is valid UTF-8 in MySQL stays valid UTF-8 when cut. */
    if (cols[3] && fz_utf8_valid((const unsigned char *)cols[3], lens[3])) {
        struct app_cfg c;

        CHECK(fz_utf8_valid((const unsigned char *)r.entity_name, strlen(r.entity_name)));
        if (app_validate(&r, tick, &c, NULL, 0) == 0)
            CHECK(fz_utf8_valid((const unsigned char *)c.name, strlen(c.name)));
    }
    for (int i = 0; i < APP_ROW_NCOLUMNS; i++)
        free(cols[i]);
}

/* app_span_for() saturates exactly at APP_ID_MAX, for any config and count. */
static void mode_span(struct fz *f)
{
    struct app_cfg c;
    uint64_t count;
    unsigned __int128 per_id, want;

    memset(&c, 0, sizeof(c));
    c.type = (enum app_type)(fz_u8(f) % 4);
    c.delta = (uint64_t)fz_i64(f);
    c.increment_max = (uint64_t)fz_i64(f);
    count = (uint64_t)fz_i64(f);
    per_id = (unsigned __int128)c.delta * (c.type == APP_TREND ? 1 : c.increment_max);
    if (count != 0 && per_id > (~(unsigned __int128)0 - c.delta) / count)
        want = INT64_MAX; /* not even 128 bits hold it */
    else
        want = count * per_id + c.delta;
    if (want > INT64_MAX)
        want = INT64_MAX;
    CHECK((unsigned __int128)app_span_for(&c, count) == want);
}

/* A delta of 1..2^32, small ones (where brute force can judge) as often as large ones. */
static uint64_t fz_delta(struct fz *f)
{
    uint64_t v = fz_uint(f, 5);

    return 1 + (fz_u8(f) & 1 ? v % 4294967296ULL : v % 64);
}

/*
 * idspace_first_common(): a result is in the range and both lattices, never
 * 0 (no ID is), and the first there (the common IDs repeat every lcm); none
 * only when the lattices never meet or no common ID is in the range (brute
 * force where lcm is small).
 */
static void mode_meet(struct fz *f)
{
    uint64_t d1 = fz_delta(f), d2 = fz_delta(f);
    uint64_t r1 = fz_uint(f, 5) % d1, r2 = fz_uint(f, 5) % d2;
    uint64_t lo = (uint64_t)fz_i64(f), hi = (uint64_t)fz_i64(f), x = 0, g = d1, b = d2;
    uint64_t from = lo ? lo : 1;
    unsigned __int128 lcm;
    int found = idspace_first_common(d1, r1, d2, r2, lo, hi, &x);

    while (b) {
        uint64_t t = g % b;
        g = b;
        b = t;
    }
    lcm = (unsigned __int128)(d1 / g) * d2;
    CHECK(idspace_lattices_meet(d1, r1, d2, r2) == (r1 % g == r2 % g));
    if (found) {
        CHECK(from <= x && x < hi && x % d1 == r1 && x % d2 == r2);
        CHECK((unsigned __int128)x < lcm || (unsigned __int128)x - lcm < from);
    } else if (r1 % g == r2 % g && lcm <= 100000) {
        for (uint64_t y = from; y < hi && y - from < (uint64_t)lcm; y++)
            CHECK(!(y % d1 == r1 && y % d2 == r2));
    }
    if (r1 % g != r2 % g)
        CHECK(!found);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};

    switch (fz_u8(&f) % 5) {
    case 0:
    case 1:
        mode_struct(&f);
        break;
    case 2:
        mode_text(&f);
        break;
    case 3:
        mode_span(&f);
        break;
    default:
        mode_meet(&f);
        break;
    }
    return 0;
}
