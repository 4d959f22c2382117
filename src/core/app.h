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
#define APP_POOL_SECONDS       60 /* max_pool_size default = 60 x max_size_per_second */
#define APP_BYTES_PER_ID       10 /* Redis memory of one pooled ID (deploy/redis-idpool.conf) */
#define APP_ID_MAX             INT64_MAX /* no ID may exceed 2^63-1 */
/*
 * The highest integer a JSON number (an IEEE double: JavaScript, most JSON
 * parsers) holds exactly: `idpoolctl apps add --js-safe` sets max_id to it.
 */
#define APP_JS_SAFE_MAX 9007199254740991LL /* 2^53-1 */
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

/*
 * The columns of `application` (brief §3, sql/schema.sql), in the order
 * idpoold selects them. Everything that names a column is made from this
 * list: struct app_row, APP_ROW_COLUMNS, app_row_from_text(), the column
 * table app_columns[] (idpoolctl's apps show/add/set, the INSERT, the
 * options of apps add and their --help), app_same_settings(). A new column
 * is one line here, plus its rule in app_validate() (and its DEFAULT in
 * sql/schema.sql, which test_app checks).
 *
 *   X(name, sql, type, def, set, cfg, opt, text)
 *
 *   name  the member of struct app_row; the column's name in JSON, in
 *         `apps set name=...` and in messages
 *   sql   its spelling in SQL (a reserved word is back-quoted)
 *   type  ID      the primary key (first)
 *         INT     BIGINT, a count or a size
 *         OFFSET  BIGINT in the ID space (JSON: a decimal string)
 *         TYPE    increasing_type: 1 | 2, shown as monotonic | trend
 *         KEY     entity_key, VARCHAR(64)
 *         NAME    entity_name, VARCHAR(255) of UTF-8
 *         SPACE   id_space, VARCHAR(64): empty, or a key's alphabet
 *         TIME    DATETIME that MySQL sets: read by idpoolctl only, not in
 *                 struct app_row; these come last
 *   def   the value of a new row (the schema's DEFAULT; `apps add` starts
 *         from it)
 *   set   how an operator changes it (`idpoolctl apps set`):
 *         SET     freely; the row is validated before it is written
 *         FORCE   only with --force (current_offset)
 *         KEEP    never: `text` says why (and what to do instead)
 *   cfg   the member of struct app_cfg holding the value in force
 *         (SET and FORCE columns; "-" for KEEP)
 *   opt   the option of `idpoolctl apps add` that sets it, or NULL; its
 *         argument is TEXT (NAME), TYPE (TYPE) or N
 *   text  KEEP: why it cannot be set; with an option: what `apps add
 *         --help` says of the option ('\n' continues it); else NULL
 */
// clang-format off
#define APP_COLUMNS(X)                                                                                                     \
    X(id,                  "id",                  ID,     0,                 KEEP,  -,              NULL,                  \
      "it is the primary key")                                                                                             \
    X(deleted_at,          "deleted_at",          INT,    0,                 KEEP,  -,              NULL,                  \
      "use 'apps disable KEY' and 'apps enable KEY' instead")                                                              \
    X(entity_key,          "entity_key",          KEY,    0,                 KEEP,  -,              NULL,                  \
      "it names the application's Redis keys; add a new application and disable "                                          \
      "this one")                                                                                                          \
    X(entity_name,         "entity_name",         NAME,   0,                 SET,   name,           "name",                \
      "description [entity_name]; default empty")                                                                          \
    X(increasing_type,     "increasing_type",     TYPE,   APP_MONOTONIC,     SET,   type,           "type",                \
      "monotonic (1) or trend (2) [increasing_type]; default monotonic")                                                   \
    X(start_offset,        "start_offset",        OFFSET, APP_DEFAULT_START, SET,   start_offset,   "start",               \
      "first ID ever handed out [start_offset]; default 1 (IDs are\n"                                                      \
      "never 0: 0 starts at 1, or at delta when remainder is 0)")                                                          \
    X(step,                "step",                INT,    APP_DEFAULT_STEP,  SET,   step,           "step",                \
      "IDs per refill batch, 1..1000000 [step]; default 1000")                                                             \
    X(current_offset,      "current_offset",      OFFSET, 0,                 FORCE, current_offset, NULL,            NULL) \
    X(max_size_per_times,  "max_size_per_times",  INT,    0,                 SET,   per_take,       "per-take",            \
      "most IDs one take may ask for [max_size_per_times]; 0 = 1000")                                                      \
    X(max_size_per_second, "max_size_per_second", INT,    0,                 SET,   per_second,     "per-second",          \
      "most IDs granted per second [max_size_per_second]; 0 = 5000")                                                       \
    X(min_size_percent,    "min_size_percent",    INT,    0,                 SET,   min_percent,    "min-percent",         \
      "refill below N% of the pool, 1..99 [min_size_percent]; 0 = 80")                                                     \
    X(interval,            "`interval`",          INT,    0,                 SET,   interval_ms,    "interval",            \
      "check interval in ms [interval]; 0 = idpoold's tick")                                                               \
    X(max_pool_size,       "max_pool_size",       INT,    0,                 SET,   max_pool,       "max-pool",            \
      "pool capacity [max_pool_size]; 0 = 60 x max_size_per_second")                                                       \
    X(delta,               "delta",               INT,    1,                 SET,   delta,          "delta",               \
      "every ID % delta == remainder [delta]; default 1")                                                                  \
    X(remainder,           "remainder",           INT,    0,                 SET,   remainder,      "remainder",           \
      "0 <= remainder < delta [remainder]; default 0")                                                                     \
    X(increment_max,       "increment_max",       INT,    1,                 SET,   increment_max,  "increment-max",       \
      "monotonic: gap between IDs random in 1..N x delta\n"                                                                \
      "[increment_max]; default 1")                                                                                        \
    X(max_id,              "max_id",              OFFSET, 0,                 SET,   max_id,         "max-id",              \
      "highest ID ever handed out [max_id]; default 0 = none (2^63-1);\n"                                                  \
      "--js-safe sets 2^53-1")                                                                                             \
    X(version,             "version",             INT,    0,                 KEEP,  -,              NULL,                  \
      "idpoold bumps it on every lease reservation")                                                                       \
    X(id_space,            "id_space",            SPACE,  0,                 SET,   id_space,       "id-space",            \
      "the ID space shared with other applications [id_space]:\n"                                                          \
      "their IDs never meet; default empty (its own space)")                                                               \
    X(create_time,         "create_time",         TIME,   0,                 KEEP,  -,              NULL,                  \
      "MySQL sets it")                                                                                                     \
    X(update_time,         "update_time",         TIME,   0,                 KEEP,  -,              NULL,                  \
      "MySQL sets it on every change")
// clang-format on

/*
 * What the list makes. The generators dispatch on a column's type
 * (X_##type): every column but a TIME one is in struct app_row and the
 * SELECT.
 */

/* struct app_row: a row exactly as read from MySQL (numbers as signed 64-bit). */
#define APP_ROW_MEMBER_ID(name)     int64_t name;
#define APP_ROW_MEMBER_INT(name)    int64_t name;
#define APP_ROW_MEMBER_OFFSET(name) int64_t name;
#define APP_ROW_MEMBER_TYPE(name)   int64_t name;
#define APP_ROW_MEMBER_KEY(name)    char name[APP_KEY_MAX + 2]; /* +2: overlong keys are caught */
#define APP_ROW_MEMBER_NAME(name)   char name[APP_NAME_MAX + 1];
#define APP_ROW_MEMBER_SPACE(name)  char name[APP_KEY_MAX + 2]; /* +2: overlong names are caught */
#define APP_ROW_MEMBER_TIME(name)
#define APP_ROW_MEMBER(name, sql, type, def, set, cfg, opt, text) APP_ROW_MEMBER_##type(name)
struct app_row {
    APP_COLUMNS(APP_ROW_MEMBER)
};

/* APP_COL_<name>: a column's index in APP_COLUMNS, app_columns[] and the SELECT. */
#define APP_COL_ENUM(name, sql, type, def, set, cfg, opt, text) APP_COL_##name,
enum app_col { APP_COLUMNS(APP_COL_ENUM) APP_NCOLUMNS };

/*
 * APP_ROW_COLUMNS: the columns that make a struct app_row (all but TIME),
 * as SQL, in the order app_row_from_text() reads them; APP_ROW_NCOLUMNS:
 * their number. A query may select more columns after them: idpoolctl
 * selects APP_TIME_COLUMNS (", create_time, update_time").
 */
#define APP_SQL_ROW_ID(sql)     sql /* always first: no comma */
#define APP_SQL_ROW_INT(sql)    ", " sql
#define APP_SQL_ROW_OFFSET(sql) ", " sql
#define APP_SQL_ROW_TYPE(sql)   ", " sql
#define APP_SQL_ROW_KEY(sql)    ", " sql
#define APP_SQL_ROW_NAME(sql)   ", " sql
#define APP_SQL_ROW_SPACE(sql)  ", " sql
#define APP_SQL_ROW_TIME(sql)
#define APP_SQL_ROW(name, sql, type, def, set, cfg, opt, text) APP_SQL_ROW_##type(sql)
#define APP_ROW_COLUMNS                                        APP_COLUMNS(APP_SQL_ROW)

#define APP_SQL_TIME_ID(sql)
#define APP_SQL_TIME_INT(sql)
#define APP_SQL_TIME_OFFSET(sql)
#define APP_SQL_TIME_TYPE(sql)
#define APP_SQL_TIME_KEY(sql)
#define APP_SQL_TIME_NAME(sql)
#define APP_SQL_TIME_SPACE(sql)
#define APP_SQL_TIME_TIME(sql)                                  ", " sql
#define APP_SQL_TIME(name, sql, type, def, set, cfg, opt, text) APP_SQL_TIME_##type(sql)
#define APP_TIME_COLUMNS                                        APP_COLUMNS(APP_SQL_TIME)

#define APP_IN_ROW_ID                                         1
#define APP_IN_ROW_INT                                        1
#define APP_IN_ROW_OFFSET                                     1
#define APP_IN_ROW_TYPE                                       1
#define APP_IN_ROW_KEY                                        1
#define APP_IN_ROW_NAME                                       1
#define APP_IN_ROW_SPACE                                      1
#define APP_IN_ROW_TIME                                       0
#define APP_IN_ROW(name, sql, type, def, set, cfg, opt, text) +APP_IN_ROW_##type
enum { APP_ROW_NCOLUMNS = 0 APP_COLUMNS(APP_IN_ROW) };

/* APP_COLUMNS' type and set as values (APP_T_INT, APP_SET, ...). */
enum app_col_type {
    APP_T_ID,
    APP_T_INT,
    APP_T_OFFSET,
    APP_T_TYPE,
    APP_T_KEY,
    APP_T_NAME,
    APP_T_SPACE,
    APP_T_TIME
};
enum app_col_set { APP_SET, APP_FORCE, APP_KEEP };

/* One column of `application`, from APP_COLUMNS (see there). */
struct app_column {
    const char *name;       /* "max_size_per_times" */
    const char *sql;        /* "max_size_per_times"; "`interval`" */
    enum app_col_type type; /* how it is stored and shown */
    enum app_col_set set;   /* how an operator changes it */
    int64_t def;            /* the value of a new row */
    const char *opt;        /* `apps add --opt`, or NULL */
    const char *why;        /* APP_KEEP: why it cannot be set */
    const char *help;       /* opt: what `apps add --help` says of it */
    size_t row_off;         /* offset in struct app_row (not TIME) */
    size_t row_size;        /* size of that member (not TIME) */
    size_t cfg_off;         /* offset of the value in force in struct app_cfg (SET, FORCE) */
};

/* Every column, in APP_COLUMNS order: app_columns[APP_COL_step] is step. */
extern const struct app_column app_columns[APP_NCOLUMNS];

/* The column named name[0..len), or NULL. */
const struct app_column *app_column_find(const char *name, size_t len);

/* The value of a numeric column (ID, INT, OFFSET, TYPE) of row: read, or where to write it. */
int64_t app_row_get(const struct app_row *row, const struct app_column *col);
int64_t *app_row_num(struct app_row *row, const struct app_column *col);

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
    uint64_t max_id;        /* highest ID ever handed out; 0: none (below 2^63-1) */
    /* id_space: "" = its own; else the IDs of the applications sharing it never meet */
    char id_space[APP_KEY_MAX + 1];
    int64_t version; /* bumped on every reservation */
    /*
     * The ID space is running out: the higher offset (space_field names it,
     * space_base is its value) is above 90% of the ceiling (app_ceiling:
     * 2^63-1 or max_id) or leaves less than one full pool below it. A state of the application, not
     * a config error: what is left is still served, and id_space_exhaustion fires.
     */
    int space_warning;
    const char *space_field; /* "current_offset" or "start_offset" (static) */
    uint64_t space_base;
};

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

/*
 * 1 when x and y serve the same settings: the same row (id) and the same
 * value in force of every column an operator sets (APP_SET; not the offsets
 * idpoold advances itself). A row whose settings changed is logged again.
 */
int app_same_settings(const struct app_cfg *x, const struct app_cfg *y);

/*
 * The settings in force as idpoold logs them ("app=KEY serving: ..."):
 * "trend step=500 max_pool_size=... interval=100ms".
 */
void app_describe(const struct app_cfg *c, char *buf, size_t len);

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

/*
 * The end (exclusive) of c's ID space: max_id + 1, or 2^63-1 when the row
 * has no ceiling (max_id 0). No lease reaches past it (store_reserve caps
 * its hi there), and the runway of the ID space counts to it.
 */
uint64_t app_ceiling(const struct app_cfg *c);

/* The ceiling for messages: "max_id 9007199254740991" or "2^63-1". Returns buf. */
const char *app_ceiling_text(const struct app_cfg *c, char *buf, size_t len);

/*
 * The smallest ID above n on the lattice of delta and remainder (x % delta
 * == remainder, x >= APP_ID_MIN), into *out: 0, or -1 when there is none
 * below 2^63-1 (or delta/remainder are not a lattice). `apps add
 * --start-above` starts an application there.
 */
int app_lattice_above(uint64_t n, uint64_t delta, uint64_t remainder, uint64_t *out)
    __attribute__((warn_unused_result));

/* The first ID c can ever hand out (its lattice at or above start_offset, never 0): 0 or -1. */
int app_first_id(const struct app_cfg *c, uint64_t *out) __attribute__((warn_unused_result));

/*
 * Columns that schema upgrades added and that idpoold and idpoolctl can do
 * without on an older schema, read as their default (said once, tried again
 * with every read): a bit (1u << APP_COL_x) each.
 */
#define APP_OPTIONAL_COLUMNS ((1u << APP_COL_max_id) | (1u << APP_COL_id_space))

/*
 * APP_ROW_COLUMNS (with_time: and APP_TIME_COLUMNS) into buf, the columns
 * of the bits in `missing` read as their default ('' or 0). Returns buf.
 */
const char *app_row_columns(unsigned missing, int with_time, char *buf, size_t len);

/*
 * The optional column that a MySQL error text names ("Unknown column
 * 'max_id' in 'field list'"): its bit, or 0.
 */
unsigned app_missing_column(const char *mysql_error);

/* What reading without the optional column of `bit` means, for the warning. */
const char *app_missing_means(unsigned bit);

/*
 * Whether a full pool of c (max_pool_size x APP_BYTES_PER_ID bytes of
 * Redis) is above budget_mb MiB: 1 with the warning in buf ("a full pool
 * of 100000000 IDs takes about 954 MiB of Redis (10 bytes an ID), above
 * pool-memory-mb 64"), else 0 (buf empty).
 */
int app_memory_over(const struct app_cfg *c, int budget_mb, char *buf, size_t len);

#endif
