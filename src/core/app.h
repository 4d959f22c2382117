/*
 * app — one row of the MySQL `application` table, and the rules that decide
 * whether it can be served (design brief §3). Pure logic: no I/O.
 *
 * A value of 0 in a sizing column means "use the default"; app_validate()
 * resolves those and checks every rule. A row that breaks a rule is not
 * served; the error names the row and the field.
 */
#ifndef IDPOOL_APP_H
#define IDPOOL_APP_H

#include <stddef.h>
#include <stdint.h>

#define APP_KEY_MAX  64  /* entity_key: [A-Za-z0-9_.-]{1,64} */
#define APP_NAME_MAX 255 /* entity_name */
#define APP_ERR_MAX  256

#define APP_DEFAULT_STEP       1000
#define APP_MAX_STEP           1000000
#define APP_DEFAULT_PER_TAKE   1000
#define APP_DEFAULT_PER_SECOND 5000
#define APP_DEFAULT_MIN_PCT    80
#define APP_POOL_SECONDS       60        /* max_pool_size default = 60 x max_size_per_second */
#define APP_ID_MAX             INT64_MAX /* no ID may exceed 2^63-1 */
/*
 * No ID is ever 0: MySQL AUTO_INCREMENT reads an inserted 0 as "generate
 * one" and most ORMs read 0 as "not set". New rows start at 1 (the schema's
 * default, idpoolctl's); a row's explicit start_offset 0 is served from 1 on.
 */
#define APP_ID_MIN        1
#define APP_DEFAULT_START APP_ID_MIN

enum app_type {
    APP_MONOTONIC = 1, /* strictly increasing in list order */
    APP_TREND = 2,     /* contiguous blocks of `step` IDs, shuffled */
};

/* A row exactly as read from MySQL (all numeric columns as signed 64-bit). */
struct app_row {
    int64_t id;
    int64_t deleted_at;
    char entity_key[APP_KEY_MAX + 2]; /* +2: one more than allowed, so overlong keys are caught */
    char entity_name[APP_NAME_MAX + 1];
    int64_t increasing_type;
    int64_t start_offset;
    int64_t step;
    int64_t current_offset;
    int64_t max_size_per_times;
    int64_t max_size_per_second;
    int64_t min_size_percent;
    int64_t interval;
    int64_t max_pool_size;
    int64_t delta;
    int64_t remainder;
    int64_t increment_max;
    int64_t version;
};

/* A validated row with defaults resolved: what the refiller serves. */
struct app_cfg {
    int64_t id;                  /* primary key */
    char key[APP_KEY_MAX + 1];   /* entity_key */
    char name[APP_NAME_MAX + 1]; /* entity_name */
    enum app_type type;          /* increasing_type */
    uint64_t start_offset;       /* first ID ever allowed (IDs start at APP_ID_MIN anyway) */
    uint64_t step;               /* IDs per refill batch (trend: block size) */
    uint64_t current_offset;     /* durable high-water mark as last read */
    uint64_t per_take;           /* max_size_per_times, resolved */
    uint64_t per_second;         /* max_size_per_second, resolved */
    uint64_t min_percent;        /* min_size_percent, resolved */
    uint64_t interval_ms;        /* check interval, resolved (tick if 0) */
    uint64_t max_pool;           /* max_pool_size, resolved */
    uint64_t low_water;          /* max_pool * min_percent / 100: refill below this */
    uint64_t delta;              /* every ID % delta == remainder */
    uint64_t remainder;
    uint64_t increment_max; /* monotonic gap in [1, increment_max] x delta */
    int64_t version;        /* bumped on every reservation */
    /*
     * The ID space is running out: the higher offset (space_field names it,
     * space_base is its value) is above 90% of 2^63-1 or leaves less than one
     * full pool below it. A state of the application, not a config error:
     * what is left is still served, and id_space_exhaustion fires.
     */
    int space_warning;
    const char *space_field; /* "current_offset" or "start_offset" (static) */
    uint64_t space_base;
};

/*
 * The columns of `application` that make a struct app_row, in the order
 * app_row_from_text() reads them; a query may select more columns after.
 */
#define APP_ROW_COLUMNS                                                                            \
    "id, deleted_at, entity_key, entity_name, increasing_type, start_offset, step, "               \
    "current_offset, max_size_per_times, max_size_per_second, min_size_percent, `interval`, "      \
    "max_pool_size, delta, remainder, increment_max, version"
#define APP_ROW_NCOLUMNS 17

/*
 * Fill *row from the text of one result row (a MYSQL_ROW and its lengths)
 * whose first APP_ROW_NCOLUMNS columns are APP_ROW_COLUMNS. NULL columns
 * read as 0 / empty; overlong strings are cut (validation then rejects an
 * overlong key; a long name is cut at a UTF-8 character boundary).
 */
void app_row_from_text(struct app_row *row, char *const *cols, const unsigned long *lens);

/*
 * Copy a column of len bytes (src may be NULL) into dst[cap], cut and
 * terminated; a NUL byte inside the column becomes '?'.
 */
void app_copy_col(char *dst, size_t cap, const char *src, unsigned long len);

/* 1 when `key` matches [A-Za-z0-9_.-]{1,64}. */
int app_key_valid(const char *key);

/*
 * Validate `row` and resolve defaults into *out. `tick_ms` is the default for
 * interval = 0. Returns 0, or -1 with err set to a message naming the row and
 * the field, e.g. "application 'user' (id 3): step: must be 1..1000000, got 0".
 * A soft-deleted row is not an error here: callers skip deleted_at != 0.
 */
int app_validate(const struct app_row *row, uint64_t tick_ms, struct app_cfg *out, char *err,
                 size_t errlen) __attribute__((warn_unused_result));

/*
 * The span of ID space (hi - lo) a lease needs so that it can hold at least
 * `count` IDs of this application whatever the random gaps are:
 * count x delta x increment_max (monotonic) or count x delta (trend), plus
 * one delta for alignment. Saturates at APP_ID_MAX.
 */
uint64_t app_span_for(const struct app_cfg *cfg, uint64_t count);

#endif
