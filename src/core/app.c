/*
 * app — the columns of `application` (app_columns[], made from APP_COLUMNS)
 * and the validation of its rows (design brief §3).
 *
 * Every value comes from an operator and may be anything a signed BIGINT
 * holds (negative, INT64_MAX), so all arithmetic here saturates at
 * APP_ID_MAX instead of wrapping.
 *
 * Order of the checks (the first failure is the one reported):
 *   1. each column on its own, in table order: entity_key, increasing_type,
 *      start_offset, step, current_offset, max_size_per_times,
 *      max_size_per_second, min_size_percent, interval, max_pool_size
 *      (raw value, then its resolved default), delta, remainder (against the
 *      resolved delta), increment_max, max_id (>= 0), id_space (empty, or
 *      as a key);
 *   2. then the relations between columns:
 *      max_size_per_times <= max_pool_size; max_size_per_times <=
 *      max_size_per_second (its default, 1000, is lowered to it);
 *      max_pool_size >= step;
 *      a refill must fit above the low-water mark; room in the ID space for
 *      one full pool above start_offset; max_id 0 or at least the first
 *      ID start_offset, delta and remainder allow. (current_offset running
 *      into the end of the ID space, 2^63-1 or max_id, is a state,
 *      space_warning, not an error: the IDs already leased are still
 *      served.)
 */
#include "app.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define APP_MAX_PER_SECOND 100000000LL
#define APP_MAX_POOL       100000000LL
#define APP_MAX_INTERVAL   86400000LL   /* one day, ms */
#define APP_MAX_DELTA      4294967296LL /* 2^32 */
#define APP_MAX_INCREMENT  1000000LL

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    uint64_t r;

    if (__builtin_add_overflow(a, b, &r) || r > (uint64_t)APP_ID_MAX)
        return (uint64_t)APP_ID_MAX;
    return r;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;

    if (__builtin_mul_overflow(a, b, &r) || r > (uint64_t)APP_ID_MAX)
        return (uint64_t)APP_ID_MAX;
    return r;
}

/* The key alphabet, spelled out: isalnum() would depend on the locale. */
static int key_char_ok(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

/*
 * A NUL byte inside the column becomes '?': cutting the string there would
 * turn a key such as "user\0x" into "user", a valid key that another row
 * may already have (two rows refilling one pool).
 */
void app_copy_col(char *dst, size_t cap, const char *src, unsigned long len)
{
    if (!src)
        len = 0;
    if (len > cap - 1)
        len = cap - 1;
    for (unsigned long i = 0; i < len; i++)
        dst[i] = src[i] != '\0' ? src[i] : '?';
    dst[len] = '\0';
}

/*
 * The length to keep of a UTF-8 string cut after n bytes: n, or less when
 * the cut would leave an incomplete sequence at the end, so that the copy
 * stays valid text for logs and JSON.
 */
static size_t utf8_cut(const char *s, size_t n)
{
    size_t j = n;

    while (j > 0 && ((unsigned char)s[j - 1] & 0xC0) == 0x80)
        j--;
    if (j > 0) {
        unsigned char lead = (unsigned char)s[j - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if ((j - 1) + need > n)
            return j - 1;
    }
    return n;
}

/* app_columns[]: the offsets and sizes by column type (TIME: not in struct app_row). */
#define ROW_OFF_ID(name)      offsetof(struct app_row, name)
#define ROW_OFF_INT(name)     offsetof(struct app_row, name)
#define ROW_OFF_OFFSET(name)  offsetof(struct app_row, name)
#define ROW_OFF_TYPE(name)    offsetof(struct app_row, name)
#define ROW_OFF_KEY(name)     offsetof(struct app_row, name)
#define ROW_OFF_NAME(name)    offsetof(struct app_row, name)
#define ROW_OFF_SPACE(name)   offsetof(struct app_row, name)
#define ROW_OFF_TIME(name)    0
#define ROW_SIZE_ID(name)     sizeof(((struct app_row *)0)->name)
#define ROW_SIZE_INT(name)    sizeof(((struct app_row *)0)->name)
#define ROW_SIZE_OFFSET(name) sizeof(((struct app_row *)0)->name)
#define ROW_SIZE_TYPE(name)   sizeof(((struct app_row *)0)->name)
#define ROW_SIZE_KEY(name)    sizeof(((struct app_row *)0)->name)
#define ROW_SIZE_NAME(name)   sizeof(((struct app_row *)0)->name)
#define ROW_SIZE_SPACE(name)  sizeof(((struct app_row *)0)->name)
#define ROW_SIZE_TIME(name)   0
#define CFG_OFF_SET(cfg)      offsetof(struct app_cfg, cfg)
#define CFG_OFF_FORCE(cfg)    offsetof(struct app_cfg, cfg)
#define CFG_OFF_KEEP(cfg)     0
#define WHY_SET(text)         NULL
#define WHY_FORCE(text)       NULL
#define WHY_KEEP(text)        text
#define HELP_SET(text)        text
#define HELP_FORCE(text)      text
#define HELP_KEEP(text)       NULL
#define COLUMN(name, sql, type, def, set, cfg, opt, text)                                          \
    [APP_COL_##name] = {#name,                                                                     \
                        sql,                                                                       \
                        APP_T_##type,                                                              \
                        APP_##set,                                                                 \
                        def,                                                                       \
                        opt,                                                                       \
                        WHY_##set(text),                                                           \
                        HELP_##set(text),                                                          \
                        ROW_OFF_##type(name),                                                      \
                        ROW_SIZE_##type(name),                                                     \
                        CFG_OFF_##set(cfg)},

const struct app_column app_columns[APP_NCOLUMNS] = {APP_COLUMNS(COLUMN)};

int64_t *app_row_num(struct app_row *row, const struct app_column *col)
{
    return (int64_t *)(void *)((char *)row + col->row_off);
}

int64_t app_row_get(const struct app_row *row, const struct app_column *col)
{
    return *(const int64_t *)(const void *)((const char *)row + col->row_off);
}

const struct app_column *app_column_find(const char *name, size_t len)
{
    for (size_t i = 0; i < APP_NCOLUMNS; i++)
        if (strlen(app_columns[i].name) == len && memcmp(app_columns[i].name, name, len) == 0)
            return &app_columns[i];
    return NULL;
}

void app_row_from_text(struct app_row *row, char *const *cols, const unsigned long *lens)
{
    for (int i = 0; i < APP_ROW_NCOLUMNS; i++) {
        const struct app_column *c = &app_columns[i];
        char *dst = (char *)row + c->row_off;

        switch (c->type) {
        case APP_T_KEY:
        case APP_T_SPACE:
            app_copy_col(dst, c->row_size, cols[i], lens[i]);
            break;
        case APP_T_NAME:
            app_copy_col(dst, c->row_size, cols[i], lens[i]);
            /* VARCHAR(255) in utf8mb4 holds up to 1020 bytes: cut at a character boundary. */
            if (cols[i] && lens[i] > APP_NAME_MAX)
                dst[utf8_cut(dst, APP_NAME_MAX)] = '\0';
            break;
        case APP_T_TIME:
            break;
        default:
            *app_row_num(row, c) = cols[i] ? strtoll(cols[i], NULL, 10) : 0;
            break;
        }
    }
}

/*
 * The settings an operator sets (APP_SET columns) and the row's id, compared
 * by type: a change to any of them is a changed row.
 */
#define SAME_T_ID(m)        x->m == y->m
#define SAME_T_INT(m)       x->m == y->m
#define SAME_T_OFFSET(m)    x->m == y->m
#define SAME_T_TYPE(m)      x->m == y->m
#define SAME_T_NAME(m)      strcmp(x->m, y->m) == 0
#define SAME_T_SPACE(m)     strcmp(x->m, y->m) == 0
#define SAME_SET(type, cfg) &&SAME_T_##type(cfg)
#define SAME_FORCE(type, cfg)
#define SAME_KEEP(type, cfg)
#define SAME(name, sql, type, def, set, cfg, opt, text) SAME_##set(type, cfg)

int app_same_settings(const struct app_cfg *x, const struct app_cfg *y)
{
    return x->id == y->id APP_COLUMNS(SAME);
}

void app_describe(const struct app_cfg *c, char *buf, size_t len)
{
    snprintf(buf, len,
             "%s step=%" PRIu64 " max_pool_size=%" PRIu64 " low_water=%" PRIu64 " delta=%" PRIu64
             " remainder=%" PRIu64 " increment_max=%" PRIu64 " start_offset=%" PRIu64
             " interval=%" PRIu64 "ms%s%s",
             c->type == APP_TREND ? "trend" : "monotonic", c->step, c->max_pool, c->low_water,
             c->delta, c->remainder, c->increment_max, c->start_offset, c->interval_ms,
             c->id_space[0] ? " id_space=" : "", c->id_space);
    if (c->max_id != 0 && strlen(buf) + 1 < len)
        snprintf(buf + strlen(buf), len - strlen(buf), " max_id=%" PRIu64, c->max_id);
}

/*
 * A key must be addressable everywhere it is used: "." and ".." are path
 * segments a URL cannot name (/v1/apps/..), and a leading '-' reads as an
 * option on a command line (idpoolctl apps show --name).
 */
static int key_addressable(const char *key)
{
    return key[0] != '-' && strcmp(key, ".") != 0 && strcmp(key, "..") != 0;
}

int app_key_valid(const char *key)
{
    size_t i;

    if (!key)
        return 0;
    for (i = 0; key[i]; i++) {
        if (i >= APP_KEY_MAX || !key_char_ok((unsigned char)key[i]))
            return 0;
    }
    return i >= 1 && key_addressable(key);
}

uint64_t app_span_for(const struct app_cfg *cfg, uint64_t count)
{
    uint64_t per_id = cfg->delta;

    /* Anything but trend is treated as monotonic: the larger, safer span. */
    if (cfg->type != APP_TREND)
        per_id = sat_mul(per_id, cfg->increment_max);
    return sat_add(sat_mul(count, per_id), cfg->delta);
}

/* Context for error messages: the row, and where to write. */
struct vctx {
    const struct app_row *row;
    char *err;
    size_t errlen;
};

/*
 * A printable rendering of the row's key for error messages: bytes outside
 * the key alphabet become '?', and more than APP_KEY_MAX bytes end in "...".
 * Never reads past the row's key buffer, terminated or not.
 */
static void key_render(const struct app_row *row, char buf[APP_KEY_MAX + 4])
{
    size_t n = strnlen(row->entity_key, sizeof(row->entity_key));
    size_t shown = n > APP_KEY_MAX ? APP_KEY_MAX : n;

    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)row->entity_key[i];
        buf[i] = key_char_ok(c) ? (char)c : '?';
    }
    if (n > APP_KEY_MAX)
        memcpy(buf + shown, "...", 4);
    else
        buf[shown] = '\0';
}

/* Write "application 'KEY' (id N): FIELD: <fmt>" into the error buffer; returns -1. */
__attribute__((format(printf, 3, 4))) static int fail(const struct vctx *v, const char *field,
                                                      const char *fmt, ...)
{
    char key[APP_KEY_MAX + 4];
    va_list ap;
    int n;

    if (!v->err || v->errlen == 0)
        return -1;
    key_render(v->row, key);
    /* id 0: a row not inserted yet (idpoolctl checks rows before writing them). */
    if (v->row->id)
        n = snprintf(v->err, v->errlen, "application '%s' (id %" PRId64 "): %s: ", key, v->row->id,
                     field);
    else
        n = snprintf(v->err, v->errlen, "application '%s': %s: ", key, field);
    if (n < 0) {
        v->err[0] = '\0';
        return -1;
    }
    if ((size_t)n >= v->errlen)
        return -1; /* truncated; snprintf already terminated it */
    va_start(ap, fmt);
    vsnprintf(v->err + n, v->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/*
 * A sizing column: 0 means `def`, anything else must be in [lo, hi].
 * Stores the resolved value in *out.
 */
static int sizing(const struct vctx *v, const char *field, int64_t val, int64_t def, int64_t lo,
                  int64_t hi, uint64_t *out)
{
    if (val == 0) {
        *out = (uint64_t)def;
        return 0;
    }
    if (val < lo || val > hi)
        return fail(v, field,
                    "must be %" PRId64 "..%" PRId64 " (0 means %" PRId64 "), got %" PRId64, lo, hi,
                    def, val);
    *out = (uint64_t)val;
    return 0;
}

/* An offset column: any value >= 0. */
static int offset(const struct vctx *v, const char *field, int64_t val, uint64_t *out)
{
    if (val < 0)
        return fail(v, field, "must be >= 0, got %" PRId64, val);
    *out = (uint64_t)val;
    return 0;
}

/*
 * Describe why a key (entity_key, or a non-empty id_space: field) is
 * invalid, as the "got ..." part of the message. key is a row buffer of
 * APP_KEY_MAX + 2 bytes.
 */
static int key_fail(const struct vctx *v, const char *field, const char *key)
{
    size_t n = strnlen(key, APP_KEY_MAX + 2);
    const char *pat = "must match [A-Za-z0-9_.-]{1,64}";

    if (n == 0)
        return fail(v, field, "%s, got an empty key", pat);
    if (n > APP_KEY_MAX)
        return fail(v, field, "%s, got more than %d bytes", pat, APP_KEY_MAX);
    for (size_t i = 0; i < n; i++) {
        if (!key_char_ok((unsigned char)key[i]))
            return fail(v, field, "%s, got byte 0x%02x at offset %zu", pat, (unsigned char)key[i],
                        i);
    }
    if (key[0] == '-')
        return fail(v, field,
                    "must not start with '-' (a command line would read it as an option)");
    if (strcmp(key, ".") == 0 || strcmp(key, "..") == 0)
        return fail(v, field, "must not be '.' or '..' (a URL path cannot address it: /v1/apps/%s)",
                    key);
    return fail(v, field, "%s", pat); /* not reached */
}

/*
 * Copy at most APP_NAME_MAX bytes of the name. When the name had to be cut,
 * drop a UTF-8 sequence that the cut left incomplete, so the copy stays valid
 * text for logs and JSON.
 */
static void name_copy(char *dst, const char *src)
{
    size_t n = strnlen(src, APP_NAME_MAX);

    if (n == APP_NAME_MAX && src[APP_NAME_MAX] != '\0')
        n = utf8_cut(src, n);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int app_validate(const struct app_row *row, uint64_t tick_ms, struct app_cfg *out, char *err,
                 size_t errlen)
{
    const struct vctx vc = {row, err, errlen};
    const struct vctx *v = &vc;
    struct app_cfg c;
    uint64_t base, span;

    memset(&c, 0, sizeof(c));
    if (err && errlen)
        err[0] = '\0';

    /* 1. Each column on its own, in table order. */
    if (!app_key_valid(row->entity_key))
        return key_fail(v, "entity_key", row->entity_key);
    if (row->increasing_type != APP_MONOTONIC && row->increasing_type != APP_TREND)
        return fail(v, "increasing_type", "must be 1 (monotonic) or 2 (trend), got %" PRId64,
                    row->increasing_type);
    c.type = (enum app_type)row->increasing_type;
    if (offset(v, "start_offset", row->start_offset, &c.start_offset) ||
        sizing(v, "step", row->step, APP_DEFAULT_STEP, 1, APP_MAX_STEP, &c.step) ||
        offset(v, "current_offset", row->current_offset, &c.current_offset) ||
        sizing(v, "max_size_per_times", row->max_size_per_times, APP_DEFAULT_PER_TAKE, 1,
               APP_MAX_POOL, &c.per_take) ||
        sizing(v, "max_size_per_second", row->max_size_per_second, APP_DEFAULT_PER_SECOND, 1,
               APP_MAX_PER_SECOND, &c.per_second) ||
        sizing(v, "min_size_percent", row->min_size_percent, APP_DEFAULT_MIN_PCT, 1, 99,
               &c.min_percent))
        return -1;
    /* the default take is never more than a second grants */
    if (row->max_size_per_times == 0 && c.per_take > c.per_second)
        c.per_take = c.per_second;
    if (row->interval < 0 || row->interval > APP_MAX_INTERVAL)
        return fail(v, "interval", "must be 1..%lld ms (0 means the tick), got %" PRId64,
                    APP_MAX_INTERVAL, row->interval);
    c.interval_ms = row->interval == 0 ? tick_ms : (uint64_t)row->interval;

    if (row->max_pool_size != 0) {
        if (row->max_pool_size < 1 || row->max_pool_size > APP_MAX_POOL)
            return fail(v, "max_pool_size",
                        "must be 1..%lld (0 means %d x max_size_per_second), got %" PRId64,
                        APP_MAX_POOL, APP_POOL_SECONDS, row->max_pool_size);
        c.max_pool = (uint64_t)row->max_pool_size;
    } else {
        c.max_pool = sat_mul(APP_POOL_SECONDS, c.per_second);
        if (c.max_pool > (uint64_t)APP_MAX_POOL)
            return fail(v, "max_pool_size",
                        "must be 1..%lld, got 0, which means %d x max_size_per_second = %" PRIu64
                        ": set max_pool_size",
                        APP_MAX_POOL, APP_POOL_SECONDS, c.max_pool);
    }

    if (row->delta == 0) {
        c.delta = 1;
    } else if (row->delta < 1 || row->delta > APP_MAX_DELTA) {
        return fail(v, "delta", "must be 1..%lld (0 means 1), got %" PRId64, APP_MAX_DELTA,
                    row->delta);
    } else {
        c.delta = (uint64_t)row->delta;
    }
    if (row->remainder < 0 || (uint64_t)row->remainder >= c.delta)
        return fail(v, "remainder",
                    "must be 0..%" PRIu64 " (below delta %" PRIu64 "), got %" PRId64, c.delta - 1,
                    c.delta, row->remainder);
    c.remainder = (uint64_t)row->remainder;
    if (sizing(v, "increment_max", row->increment_max, 1, 1, APP_MAX_INCREMENT, &c.increment_max) ||
        offset(v, "max_id", row->max_id, &c.max_id))
        return -1;
    /* id_space: empty (its own space), or named like a key */
    if (row->id_space[0] != '\0' && !app_key_valid(row->id_space))
        return key_fail(v, "id_space", row->id_space);

    /* 2. Relations between columns. All values are now small and positive. */
    if (c.per_take > c.max_pool)
        return fail(v, "max_size_per_times", "must be <= max_pool_size (%" PRIu64 "), got %" PRIu64,
                    c.max_pool, c.per_take);
    if (c.per_take > c.per_second)
        return fail(v, "max_size_per_times",
                    "must be <= max_size_per_second (%" PRIu64 "), got %" PRIu64
                    ": a take of more than a second grants can never be served",
                    c.per_second, c.per_take);
    if (c.max_pool < c.step)
        return fail(v, "max_pool_size", "must be >= step (%" PRIu64 "), got %" PRIu64, c.step,
                    c.max_pool);
    /*
     * A refill must fit (original design): refills start below the low-water
     * mark, so the room above it must hold at least one step. The smallest
     * pool that works is ceil(step * 100 / (100 - min_size_percent)).
     */
    {
        uint64_t room = c.max_pool * (100 - c.min_percent) / 100;
        if (room < c.step) {
            uint64_t need = (c.step * 100 + (100 - c.min_percent) - 1) / (100 - c.min_percent);
            return fail(v, "max_pool_size",
                        "must be >= %" PRIu64 " so a refill of step (%" PRIu64
                        ") fits above low water (%" PRIu64 " * (100 - %" PRIu64 ") / 100 = %" PRIu64
                        "), got %" PRIu64,
                        need, c.step, c.max_pool, c.min_percent, room, c.max_pool);
        }
    }
    c.low_water = c.max_pool * c.min_percent / 100;

    /*
     * No ID can exceed 2^63-1: an operator's start_offset must leave room
     * for one full pool. current_offset is where the leases got to: near
     * the end it is a warning (the application serves what is left, then
     * its reservations find no space and id_space_exhaustion fires).
     */
    span = app_span_for(&c, c.max_pool);
    if (span >= (uint64_t)APP_ID_MAX) /* saturated: no offset could work */
        return fail(v, "max_pool_size",
                    "must be small enough that a full pool fits below 2^63 (max_pool_size x "
                    "delta%s + delta), got %" PRIu64,
                    c.type == APP_TREND ? "" : " x increment_max", c.max_pool);
    if (span > (uint64_t)APP_ID_MAX - c.start_offset)
        return fail(v, "start_offset",
                    "ID space exhausted: must be <= %" PRIu64 " (a full pool spans %" PRIu64
                    "), got %" PRIu64,
                    (uint64_t)APP_ID_MAX - span, span, c.start_offset);
    /*
     * A ceiling must leave the application at least one ID: the first one
     * on its lattice at or above start_offset (max_id itself need not be on
     * the lattice: 2^53-1 serves every delta).
     */
    if (c.max_id != 0) {
        uint64_t first;
        if (app_first_id(&c, &first) != 0 || first > c.max_id)
            return fail(v, "max_id",
                        "must be 0 (no ceiling below 2^63-1) or >= %" PRIu64
                        " (the first ID of start_offset %" PRIu64 ", delta %" PRIu64
                        ", remainder %" PRIu64 "), got %" PRIu64,
                        first, c.start_offset, c.delta, c.remainder, c.max_id);
    }
    base = c.current_offset > c.start_offset ? c.current_offset : c.start_offset;
    c.space_field = c.current_offset > c.start_offset ? "current_offset" : "start_offset";
    c.space_base = base;
    {
        uint64_t ceiling = app_ceiling(&c);
        c.space_warning = base >= ceiling || base > ceiling / 10 * 9 || span > ceiling - base;
    }

    c.id = row->id;
    c.version = row->version;
    memcpy(c.key, row->entity_key, strlen(row->entity_key) + 1);  /* valid: <= 64 bytes */
    memcpy(c.id_space, row->id_space, strlen(row->id_space) + 1); /* valid: <= 64 bytes */
    name_copy(c.name, row->entity_name);
    *out = c;
    return 0;
}

uint64_t app_ceiling(const struct app_cfg *c)
{
    return c->max_id != 0 && c->max_id < (uint64_t)APP_ID_MAX ? c->max_id + 1
                                                              : (uint64_t)APP_ID_MAX;
}

const char *app_ceiling_text(const struct app_cfg *c, char *buf, size_t len)
{
    if (c->max_id != 0 && c->max_id < (uint64_t)APP_ID_MAX)
        snprintf(buf, len, "max_id %" PRIu64, c->max_id);
    else
        snprintf(buf, len, "2^63-1");
    return buf;
}

int app_lattice_above(uint64_t n, uint64_t delta, uint64_t remainder, uint64_t *out)
{
    uint64_t x;

    *out = 0;
    if (delta == 0 || remainder >= delta || n >= (uint64_t)APP_ID_MAX)
        return -1;
    /* the lattice point in n's stride, then the next stride if it is not above n */
    x = n - n % delta + remainder;
    if (x <= n)
        x += delta; /* no wrap: n < 2^63 and delta <= 2^32 */
    if (x < APP_ID_MIN)
        x += delta; /* ID 0 is never handed out */
    if (x >= (uint64_t)APP_ID_MAX)
        return -1;
    *out = x;
    return 0;
}

int app_first_id(const struct app_cfg *c, uint64_t *out)
{
    uint64_t from = c->start_offset > APP_ID_MIN ? c->start_offset : APP_ID_MIN;

    return app_lattice_above(from - 1, c->delta, c->remainder, out);
}

const char *app_row_columns(unsigned missing, int with_time, char *buf, size_t len)
{
    size_t at = 0;

    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < APP_NCOLUMNS && at < len; i++) {
        const struct app_column *col = &app_columns[i];
        const char *sql = col->sql;

        if (col->type == APP_T_TIME && !with_time)
            continue;
        if (i < 32 && (missing & APP_OPTIONAL_COLUMNS & (1u << i)))
            sql = col->type == APP_T_SPACE ? "''" : "0";
        at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "", sql);
    }
    return buf;
}

unsigned app_missing_column(const char *mysql_error)
{
    const char *q = mysql_error ? strchr(mysql_error, '\'') : NULL;

    if (!q || strncmp(mysql_error, "Unknown column ", 15) != 0)
        return 0;
    q++;
    for (size_t i = 0; i < APP_NCOLUMNS && i < 32; i++) {
        size_t n = strlen(app_columns[i].name);

        if ((APP_OPTIONAL_COLUMNS & (1u << i)) && strncmp(q, app_columns[i].name, n) == 0 &&
            q[n] == '\'')
            return 1u << i;
    }
    return 0;
}

const char *app_missing_means(unsigned bit)
{
    if (bit == 1u << APP_COL_max_id)
        return "no application has a ceiling below 2^63-1";
    if (bit == 1u << APP_COL_id_space)
        return "every application is in its own ID space";
    return "";
}

int app_memory_over(const struct app_cfg *c, int budget_mb, char *buf, size_t len)
{
    uint64_t bytes = sat_mul(c->max_pool, APP_BYTES_PER_ID);
    uint64_t budget = (uint64_t)(budget_mb > 0 ? budget_mb : 0) * 1024 * 1024;

    if (len)
        buf[0] = '\0';
    if (bytes <= budget)
        return 0;
    snprintf(buf, len,
             "a full pool of %" PRIu64 " IDs takes about %" PRIu64 " MiB of Redis (%d bytes an "
             "ID), above pool-memory-mb %d: lower max_pool_size (or max_size_per_second, which "
             "sizes a default pool) or raise pool-memory-mb",
             c->max_pool, (bytes + 1024 * 1024 - 1) / (1024 * 1024), APP_BYTES_PER_ID, budget_mb);
    return 1;
}
