/*
 * check — what the files of idpool-check share: the options, the inputs,
 * the working arrays and the result of one run (struct check), and each
 * file's entry points. check.c is the program (options, the order of the
 * passes); each other file one job:
 *
 *   check_read.c    reading the inputs: pop logs, --list files, text side files
 *   check_first.c   the first pass over every record: A, per-consumer order,
 *                   --blocks, --dump
 *   check_unique.c  the sorted IDs: U (duplicates, exposure), gaps, L membership
 *   check_leases.c  L: the leases, --gap, --current-offset on leases
 *   check_order.c   M across consumers (cross_order)
 *   check_timing.c  what is reported without judging: --llen, --alerts
 *   check_report.c  the text report, its last line, and --json
 */
#ifndef IDPOOL_CHECK_H
#define IDPOOL_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "poplog.h"

#define EXIT_VIOLATION 1
#define EXIT_BAD       2

#define ID_LIMIT      (UINT64_C(1) << 63)
#define MAX_EXAMPLES  5
#define MAX_GAP_RANGE (1u << 24) /* --gap-all: multiples tracked at most */

/* Command-line options. */
struct opts {
    bool monotonic;        /* --type monotonic: check M */
    uint64_t start_offset; /* every ID >= this */
    uint64_t delta;        /* every ID % delta == remainder */
    uint64_t remainder;    /* see delta */
    const char *leases;    /* lease file, or NULL */
    bool has_low_water;    /* --low-water given */
    uint64_t low_water;    /* below this pool length counts as low */
    const char *llen;      /* pool length samples, or NULL */
    const char *alerts;    /* alert events, or NULL */
    bool has_t0;           /* --t0-ns given */
    uint64_t t0;           /* alert times are relative to this */
    bool has_exposure;     /* --exposure given */
    uint64_t exp_from;     /* exposure window start, ns (inclusive) */
    uint64_t exp_to;       /* exposure window end, ns (inclusive) */
    bool json;             /* one JSON object instead of the text report */
    bool allow_empty;      /* --allow-empty: a log (or the run) without IDs is fine */
    bool has_count;        /* --count given */
    uint64_t count;        /* IDs every log must hold */
    bool has_cur;          /* --current-offset given */
    uint64_t cur;          /* every ID below it, no lease end above it */
    bool has_gap;          /* --gap given */
    uint64_t gap_lo;       /* neighbours in one lease differ by k x delta, */
    uint64_t gap_hi;       /* gap_lo <= k <= gap_hi */
    bool gap_all;          /* every k of [gap_lo, gap_hi] must occur */
    uint64_t blocks;       /* --blocks STEP, 0 = not checked */
    const char *dump;      /* write the IDs here, or NULL */
    char **logs;           /* the pop logs and lists, in the order given */
    bool *is_list;         /* per input: a --list text file */
    size_t nlogs;          /* how many */
};

/* One pop log (one consumer). */
struct logfile {
    const char *path;       /* as given */
    bool is_list;           /* a --list text file: no header, no times */
    uint32_t consumer;      /* consumer_id from the header */
    uint32_t kind;          /* client kind from the header: POPLOG_LPOP, POPLOG_TAKE */
    uint64_t records;       /* complete records */
    uint64_t ids;           /* IDs in them */
    uint64_t empties;       /* records with count 0 */
    uint64_t longest_empty; /* longest run of empty pops, ns */
    bool scanned;           /* the first pass read it */
    uint64_t size;          /* bytes the first pass read; later passes stop there */
    size_t rec_first;       /* its non-empty records: c->recs[rec_first, rec_end) */
    size_t rec_end;
};

/* A non-empty record, kept for the cross-consumer sweep (monotonic only). */
struct rec {
    uint64_t t_send; /* request written */
    uint64_t t_recv; /* reply parsed */
    uint64_t lo;     /* smallest ID in it */
    uint64_t hi;     /* largest ID in it */
    uint32_t file;   /* index into the log list */
};

/* A lease [lo, hi). */
struct range {
    uint64_t lo;
    uint64_t hi;
};

/* What was learnt about one duplicated ID by re-reading the logs. */
struct dup {
    uint64_t id;                           /* the ID */
    uint64_t n;                            /* pops of it */
    uint64_t min_send;                     /* earliest t_send among them: the legitimate pop */
    uint64_t in_window;                    /* pops sent inside the exposure window */
    uint64_t in_window_kind[POPLOG_KINDS]; /* the same, by the client kind of the log */
    uint32_t min_kind;                     /* client kind of the earliest pop */
};

/* One pop of an example duplicate. */
struct pop {
    bool set;        /* filled in */
    uint32_t file;   /* log index */
    uint64_t offset; /* byte offset of the record */
    uint64_t t_send; /* times of the record */
    uint64_t t_recv;
};

/* A duplicate to show: the first pop and a later one of the same class. */
struct dup_example {
    size_t dup;   /* index into the dup array */
    bool exposed; /* counted as exposed, not as a duplicate */
    struct pop first;
    struct pop again;
};

/* A violation to show, as one line of text. */
struct example {
    char text[256];
};

/* An alert event from --alerts. */
struct alert_ev {
    uint64_t t_ns; /* when it was received */
    cJSON *event;  /* the message as parsed */
};

/* Everything the run found. */
struct result {
    uint64_t ids;                        /* IDs in all logs */
    uint64_t records;                    /* complete records */
    uint64_t distinct;                   /* distinct IDs */
    uint64_t duplicates;                 /* extra pops of an ID, outside the exposure window */
    uint64_t exposed;                    /* extra pops sent inside the exposure window */
    uint64_t exposed_kind[POPLOG_KINDS]; /* the same, by the client kind that made them */
    uint64_t order;                      /* records breaking per-consumer order */
    uint64_t cross_order;                /* records breaking cross-consumer order */
    uint64_t arith;                      /* IDs breaking A */
    uint64_t unleased;                   /* IDs outside every lease */
    uint64_t lease_overlaps;             /* leases overlapping an earlier one (sorted by lo) */
    uint64_t leases;                     /* lease rows read */
    uint64_t gaps;                       /* sorted distinct neighbours more than delta apart */
    bool has_missing;                    /* missing_leased is meaningful */
    uint64_t missing_leased;             /* valid IDs inside the leases never popped */
    uint64_t empty_pops;                 /* empty replies */
    uint64_t longest_empty;              /* longest run of empty pops of one consumer, ns */
    size_t longest_empty_file;           /* in which log */
    uint64_t below_low_ns;               /* time the pool was below the low-water mark */
    uint64_t below_low_longest;          /* longest stretch of it */
    uint64_t below_low_runs;             /* stretches */
    uint64_t llen_samples;               /* samples read */
    bool has_t_first;                    /* some record was read */
    uint64_t t_first;                    /* earliest t_send */
    uint64_t t_last;                     /* latest t_recv */
    uint64_t count_mismatch;             /* --count: logs with another number of IDs */
    uint64_t above_offset; /* --current-offset: IDs at or above it, leases ending above */
    uint64_t bad_gaps;     /* --gap: neighbours in one lease outside the range */
    uint64_t gap_missing;  /* --gap-all: multiples in the range never seen */
    uint64_t bad_blocks;   /* --blocks: bad groups, logs ending inside a group */
    struct example ex_order[MAX_EXAMPLES];
    size_t n_ex_order;
    struct example ex_cross[MAX_EXAMPLES];
    size_t n_ex_cross;
    struct example ex_arith[MAX_EXAMPLES];
    size_t n_ex_arith;
    struct example ex_lease[MAX_EXAMPLES];
    size_t n_ex_lease;
    struct example ex_more[MAX_EXAMPLES]; /* the further checks */
    size_t n_ex_more;
    struct dup_example ex_dup[MAX_EXAMPLES];
    size_t n_ex_dup;
};

/* Per-log state of the first pass, reset for each log. */
struct cursor {
    bool have_max;       /* max is valid */
    uint64_t max;        /* largest ID of this consumer so far */
    bool in_empty;       /* the previous record was empty */
    uint64_t empty_from; /* t_send of the first empty pop of the run */
    size_t nblk;         /* --blocks: IDs of the current group so far */
    uint64_t blk_first;  /* index in the log of the group's first ID */
    bool have_top;       /* top is valid */
    uint64_t top;        /* largest ID of the previous group */
};

/* The whole run: options, inputs, working arrays and result. */
struct check {
    struct opts o;
    struct logfile *files; /* one per log */
    uint64_t *ids;         /* every ID popped, in log order, then sorted */
    size_t nids, cap_ids;
    struct rec *recs; /* non-empty records (monotonic only) */
    size_t nrecs, cap_recs;
    struct range *leases; /* as read, then sorted by lo */
    size_t nleases;
    struct range *merged; /* union of the leases, sorted, disjoint */
    size_t nmerged;
    struct dup *dups; /* duplicated IDs, sorted */
    size_t ndups;
    struct alert_ev *alerts;
    size_t nalerts;
    struct cursor cur; /* the log being loaded */
    uint64_t *blk;     /* --blocks: the current group, in pop order */
    uint64_t *blk_tmp; /* and sorted */
    bool *gap_seen;    /* --gap-all: multiples seen, index k - gap_lo */
    FILE *dump;        /* --dump */
    bool oom;          /* the first pass ran out of memory */
    struct result r;
};

/* Called for each complete record of an input by input_scan. */
typedef void (*record_fn)(struct check *c, uint32_t file, uint64_t offset, uint64_t t_send,
                          uint64_t t_recv, const uint64_t *ids, uint32_t count);

/* check.c: what every pass uses. */
__attribute__((warn_unused_result)) int grow(void *p, size_t *cap, size_t need, size_t sz);
void add_example(struct example *ex, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t t0_of(const struct check *c);

/* t (ns) lies inside the --exposure window. */
static inline bool in_window(const struct opts *o, uint64_t t)
{
    return o->has_exposure && t >= o->exp_from && t <= o->exp_to;
}

/* Nanoseconds as milliseconds. */
static inline double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* Milliseconds of t after the reference time (negative before it). */
static inline double rel_ms(uint64_t t, uint64_t t0)
{
    return t >= t0 ? (double)(t - t0) / 1e6 : -((double)(t0 - t) / 1e6);
}

/* Where a record is: a byte offset in a log, a line of a --list. */
static inline const char *unit(const struct logfile *lf)
{
    return lf->is_list ? "line" : "byte";
}

/* check_read.c */
__attribute__((warn_unused_result)) int parse_u64(const char *s, uint64_t *out);
__attribute__((warn_unused_result)) int input_scan(struct check *c, uint32_t file, record_fn fn);
FILE *open_text(const char *path);
bool skip_line(const char *line);
__attribute__((warn_unused_result)) int two_numbers(char *line, uint64_t *a, uint64_t *b);

/* check_first.c */
void pass_load(struct check *c, uint32_t file, uint64_t offset, uint64_t t_send, uint64_t t_recv,
               const uint64_t *ids, uint32_t count);

/* check_unique.c */
void sort_ids(uint64_t *a, size_t n);
__attribute__((warn_unused_result)) int walk_sorted(struct check *c);
__attribute__((warn_unused_result)) int dups_classify(struct check *c);

/* check_leases.c */
__attribute__((warn_unused_result)) int leases_load(struct check *c);
__attribute__((warn_unused_result)) int leases_check(struct check *c);
size_t lease_of(const struct check *c, size_t *j, uint64_t id);
void gap_check(struct check *c, uint64_t prev, size_t lease_prev, uint64_t id, size_t lease);
uint64_t leases_valid(const struct check *c);
void gaps_missing(struct check *c);

/* check_order.c */
__attribute__((warn_unused_result)) int cross_check(struct check *c);

/* check_timing.c */
__attribute__((warn_unused_result)) int llen_check(struct check *c);
__attribute__((warn_unused_result)) int alerts_load(struct check *c);
const char *alert_str(const cJSON *ev, const char *a, const char *b);

/* check_report.c */
bool violated(const struct result *r);
void report_text(const struct check *c);
__attribute__((warn_unused_result)) int report_json(const struct check *c);

#endif
