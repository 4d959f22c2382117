/*
 * idpool-check: the independent checker. Reads the binary pop logs written
 * by consumers (idpool-load --record) and checks the invariants of design
 * brief §4 over everything that was popped:
 *
 *   U  no ID was popped twice, across all logs;
 *   M  (--type monotonic) each consumer saw increasing IDs ("order"), and a
 *      request sent after another one completed got larger IDs, whichever
 *      consumers sent them ("cross_order");
 *   A  every ID is >= --start-offset, < 2^63 and % --delta == --remainder;
 *   L  (--leases) the leases are disjoint and every ID lies in one.
 *
 * It also reports, without judging: gaps, empty pops, time below the
 * low-water mark (--llen samples), alert timings (--alerts) and duplicates
 * inside a measured Redis-rollback window (--exposure: "exposed").
 *
 * Further checks, each only when its option is given (the integration
 * tests use them):
 *
 *   --count N           every log holds exactly N IDs ("count_mismatch": logs);
 *   --current-offset N  every ID is below N and no lease ends above N
 *                       ("above_offset": IDs and leases);
 *   --gap LO:HI         (needs --leases) sorted distinct neighbours inside one
 *                       lease differ by k x delta, LO <= k <= HI ("bad_gaps");
 *   --gap-all           and every k in [LO, HI] occurs ("gap_missing": the
 *                       multiples that never do);
 *   --blocks STEP       each log, in pop order, is whole groups of STEP IDs;
 *                       each group sorted is a run with stride delta, is not
 *                       in sorted order (STEP >= 8: shuffled) and lies above
 *                       the group before ("bad_blocks": groups, and a log
 *                       that ends inside a group).
 *
 * --list FILE reads one more stream from a text file of decimal IDs, one
 * per line (a pool snapshot, `redis-cli LRANGE`): it is checked like a log
 * in list order, but has no times, so it takes no part in cross_order.
 * --dump FILE writes every ID read, in input order, one decimal per line.
 *
 *   idpool-check [--type monotonic|trend] [--start-offset N] [--delta D]
 *                [--remainder R] [--leases FILE] [--low-water N --llen FILE]
 *                [--alerts FILE] [--t0-ns T] [--exposure FROM_NS:TO_NS]
 *                [--count N] [--current-offset N] [--gap LO:HI [--gap-all]]
 *                [--blocks STEP] [--dump FILE] [--json]
 *                [LOG.bin | --list FILE]...
 *
 * Pop log, one per consumer, little-endian: a 32-byte header ("IDPLOG1\n",
 * u32 version 1, u32 consumer_id, u32 client kind (0 LPOP, 1 idpool_take),
 * 12 reserved bytes), then records
 * (u64 t_send_ns, u64 t_recv_ns, u32 count, u32 flags 0, count x u64 id);
 * times are CLOCK_MONOTONIC, comparable across the processes of a machine.
 * Side files: --leases "lo hi" lines ([lo, hi)), --llen "t_ns len" lines,
 * --alerts "t_ns <json message>" lines.
 *
 * The last line of the report is one line:
 *   check: ids=N consumers=C duplicates=N order=N cross_order=N arith=N
 *          unleased=N lease_overlaps=N gaps=N empty_pops=N below_low_ms=N exposed=N
 *          exposed_lpop=N exposed_take=N
 * followed by count_mismatch=N, above_offset=N, bad_gaps=N gap_missing=N and
 * bad_blocks=N, each only with its option.
 * --json prints one JSON object with the same fields instead, plus details.
 * Anything malformed is an error (exit 2) naming the file and the byte
 * offset: a cut-short header or record included (idpool-load flushes whole
 * records when stopped; a record whose count runs past the end of the file
 * cannot be told from a corrupt count that would hide every record after
 * it). A pop log holding no ID, or a run that read no ID at all, is an
 * error too unless --allow-empty is given (for a test that legitimately
 * expects none): a consumer that popped nothing proves nothing.
 *
 * Counts: duplicates = pops of an ID beyond its first (earliest t_send);
 * with --exposure, such a pop sent inside [FROM, TO] counts as exposed
 * instead, and is charged to the client kind of the log that made it
 * (exposed_lpop, exposed_take: what that kind of client received twice).
 * order and cross_order count records (requests); arith and
 * unleased count IDs; lease_overlaps counts leases that overlap one with a
 * lower start; gaps counts places where sorted distinct IDs are more than
 * delta apart; below_low_ms is whole milliseconds.
 *
 * Memory: all IDs go into one uint64 array (8 bytes per ID), sorted in place
 * (MSD radix sort); with --type monotonic 40 bytes per non-empty record plus
 * 8 for its two orderings are kept for the cross-consumer sweep. Which log
 * popped a duplicate is found by re-reading the logs, only when there is one.
 *
 * Exit status: 0 no violation; 1 a violation (duplicates, order, cross_order,
 * arith, unleased, lease_overlaps, and the counts of the further checks);
 * 2 bad usage, unreadable or malformed input, or no ID (without --allow-empty).
 */
#define _GNU_SOURCE /* fread_unlocked: one reader thread, no stdio locking per record */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#define EXIT_VIOLATION 1
#define EXIT_BAD       2

#define LOG_MAGIC "IDPLOG1\n"
/* Client kinds of the header (idpool-load writes them). */
#define KIND_LPOP 0
#define KIND_TAKE 1
#define KINDS     2
static const char *const kind_names[KINDS] = {"lpop", "take"};
#define LOG_HEADER_LEN 32
#define LOG_RECORD_LEN 24
#define ID_LIMIT       (UINT64_C(1) << 63)
#define MAX_EXAMPLES   5
#define MAX_GAP_RANGE  (1u << 24) /* --gap-all: multiples tracked at most */

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
    uint32_t kind;          /* client kind from the header: KIND_LPOP, KIND_TAKE */
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
    uint64_t id;                    /* the ID */
    uint64_t n;                     /* pops of it */
    uint64_t min_send;              /* earliest t_send among them: the legitimate pop */
    uint64_t in_window;             /* pops sent inside the exposure window */
    uint64_t in_window_kind[KINDS]; /* the same, by the client kind of the log */
    uint32_t min_kind;              /* client kind of the earliest pop */
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
    uint64_t ids;                 /* IDs in all logs */
    uint64_t records;             /* complete records */
    uint64_t distinct;            /* distinct IDs */
    uint64_t duplicates;          /* extra pops of an ID, outside the exposure window */
    uint64_t exposed;             /* extra pops sent inside the exposure window */
    uint64_t exposed_kind[KINDS]; /* the same, by the client kind that made them */
    uint64_t order;               /* records breaking per-consumer order */
    uint64_t cross_order;         /* records breaking cross-consumer order */
    uint64_t arith;               /* IDs breaking A */
    uint64_t unleased;            /* IDs outside every lease */
    uint64_t lease_overlaps;      /* leases overlapping an earlier one (sorted by lo) */
    uint64_t leases;              /* lease rows read */
    uint64_t gaps;                /* sorted distinct neighbours more than delta apart */
    bool has_missing;             /* missing_leased is meaningful */
    uint64_t missing_leased;      /* valid IDs inside the leases never popped */
    uint64_t empty_pops;          /* empty replies */
    uint64_t longest_empty;       /* longest run of empty pops of one consumer, ns */
    size_t longest_empty_file;    /* in which log */
    uint64_t below_low_ns;        /* time the pool was below the low-water mark */
    uint64_t below_low_longest;   /* longest stretch of it */
    uint64_t below_low_runs;      /* stretches */
    uint64_t llen_samples;        /* samples read */
    bool has_t_first;             /* some record was read */
    uint64_t t_first;             /* earliest t_send */
    uint64_t t_last;              /* latest t_recv */
    uint64_t count_mismatch;      /* --count: logs with another number of IDs */
    uint64_t above_offset;        /* --current-offset: IDs at or above it, leases ending above */
    uint64_t bad_gaps;            /* --gap: neighbours in one lease outside the range */
    uint64_t gap_missing;         /* --gap-all: multiples in the range never seen */
    uint64_t bad_blocks;          /* --blocks: bad groups, logs ending inside a group */
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

static void usage(FILE *f)
{
    fprintf(f, "usage: idpool-check [options] [LOG.bin | --list FILE]...\n"
               "  --type monotonic|trend   monotonic also checks order (M); default trend\n"
               "  --start-offset N         every ID >= N (0)\n"
               "  --delta D --remainder R  every ID %% D == R (1, 0)\n"
               "  --leases FILE            lines \"lo hi\": disjoint, every ID inside one\n"
               "  --low-water N --llen FILE  time the pool length was below N\n"
               "  --alerts FILE            lines \"t_ns <json>\": alert timings\n"
               "  --t0-ns T                alert times relative to T (default: first pop)\n"
               "  --exposure FROM:TO       duplicates sent in [FROM, TO] ns count as exposed\n"
               "  --count N                every log holds exactly N IDs\n"
               "  --current-offset N       every ID < N, every lease end <= N\n"
               "  --gap LO:HI              (with --leases) sorted neighbours in one lease\n"
               "                           differ by k x delta, LO <= k <= HI\n"
               "  --gap-all                and every such k occurs\n"
               "  --blocks STEP            each log is whole shuffled runs of STEP IDs, each\n"
               "                           above the one before\n"
               "  --list FILE              one more stream: decimal IDs, one per line\n"
               "  --dump FILE              write every ID read, one per line, input order\n"
               "  --json                   one JSON object instead of the report\n"
               "  --allow-empty            a log without IDs, or no ID at all, is no error\n"
               "exit: 0 ok, 1 a violation, 2 bad usage, unreadable or malformed input, no ID\n");
}

/* Parses a canonical unsigned decimal into *out; -1 on anything else. */
__attribute__((warn_unused_result)) static int parse_u64(const char *s, uint64_t *out)
{
    char *end;

    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

/* Parses "FROM:TO" (ns, inclusive). */
__attribute__((warn_unused_result)) static int parse_window(const char *s, uint64_t *from,
                                                            uint64_t *to)
{
    const char *colon = s ? strchr(s, ':') : NULL;
    char buf[64];

    if (!colon || (size_t)(colon - s) >= sizeof buf)
        return -1;
    memcpy(buf, s, (size_t)(colon - s));
    buf[colon - s] = '\0';
    if (parse_u64(buf, from) < 0 || parse_u64(colon + 1, to) < 0 || *from > *to)
        return -1;
    return 0;
}

/* Fills o from argv; 0 ok, 1 --help, -1 bad usage (message printed). */
static int parse_args(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->delta = 1;
    o->logs = calloc((size_t)argc, sizeof *o->logs);
    o->is_list = calloc((size_t)argc, sizeof *o->is_list);
    if (!o->logs || !o->is_list)
        return -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;

        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return 1;
        if (!strcmp(a, "--json")) {
            o->json = true;
            continue;
        }
        if (!strcmp(a, "--gap-all")) {
            o->gap_all = true;
            continue;
        }
        if (!strcmp(a, "--allow-empty")) {
            o->allow_empty = true;
            continue;
        }
        if (a[0] != '-' || !a[1]) {
            o->logs[o->nlogs++] = argv[i];
            continue;
        }
        if (!v) {
            fprintf(stderr, "idpool-check: %s needs a value\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "--type")) {
            if (!strcmp(v, "monotonic"))
                o->monotonic = true;
            else if (strcmp(v, "trend"))
                bad = 1;
        } else if (!strcmp(a, "--start-offset")) {
            bad = parse_u64(v, &o->start_offset);
        } else if (!strcmp(a, "--delta")) {
            bad = parse_u64(v, &o->delta) || o->delta == 0;
        } else if (!strcmp(a, "--remainder")) {
            bad = parse_u64(v, &o->remainder);
        } else if (!strcmp(a, "--leases")) {
            o->leases = v;
        } else if (!strcmp(a, "--low-water")) {
            bad = parse_u64(v, &o->low_water);
            o->has_low_water = true;
        } else if (!strcmp(a, "--llen")) {
            o->llen = v;
        } else if (!strcmp(a, "--alerts")) {
            o->alerts = v;
        } else if (!strcmp(a, "--t0-ns")) {
            bad = parse_u64(v, &o->t0);
            o->has_t0 = true;
        } else if (!strcmp(a, "--exposure")) {
            bad = parse_window(v, &o->exp_from, &o->exp_to);
            o->has_exposure = true;
        } else if (!strcmp(a, "--count")) {
            bad = parse_u64(v, &o->count);
            o->has_count = true;
        } else if (!strcmp(a, "--current-offset")) {
            bad = parse_u64(v, &o->cur);
            o->has_cur = true;
        } else if (!strcmp(a, "--gap")) {
            bad = parse_window(v, &o->gap_lo, &o->gap_hi) || o->gap_lo == 0;
            o->has_gap = true;
        } else if (!strcmp(a, "--blocks")) {
            bad = parse_u64(v, &o->blocks) || o->blocks == 0 || o->blocks > UINT32_MAX;
        } else if (!strcmp(a, "--list")) {
            o->is_list[o->nlogs] = true;
            o->logs[o->nlogs++] = argv[i];
        } else if (!strcmp(a, "--dump")) {
            o->dump = v;
        } else {
            fprintf(stderr, "idpool-check: unknown option %s\n", a);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "idpool-check: bad value for %s: '%s'\n", a, v);
            return -1;
        }
    }
    if (o->remainder >= o->delta) {
        fprintf(stderr, "idpool-check: --remainder must be below --delta\n");
        return -1;
    }
    if (o->has_gap && !o->leases) {
        fprintf(stderr, "idpool-check: --gap needs --leases\n");
        return -1;
    }
    if (o->gap_all && (!o->has_gap || o->gap_hi - o->gap_lo >= MAX_GAP_RANGE)) {
        fprintf(stderr, "idpool-check: --gap-all needs a --gap range of at most %u\n",
                MAX_GAP_RANGE);
        return -1;
    }
    if (o->has_low_water != (o->llen != NULL)) {
        fprintf(stderr, "idpool-check: --low-water and --llen go together\n");
        return -1;
    }
    if (o->nlogs == 0) {
        fprintf(stderr, "idpool-check: no log files\n");
        return -1;
    }
    return 0;
}

/* Grows *p (element size sz) to hold at least need elements. */
__attribute__((warn_unused_result)) static int grow(void *p, size_t *cap, size_t need, size_t sz)
{
    void **pp = p;

    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 1024;
    while (ncap < need)
        ncap += ncap / 2;
    void *n = realloc(*pp, ncap * sz);
    if (!n) {
        fprintf(stderr, "idpool-check: out of memory (%zu elements)\n", ncap);
        return -1;
    }
    *pp = n;
    *cap = ncap;
    return 0;
}

static uint64_t get64(const unsigned char *b)
{
    uint64_t v;
    memcpy(&v, b, 8);
    return le64toh(v);
}

static uint32_t get32(const unsigned char *b)
{
    uint32_t v;
    memcpy(&v, b, 4);
    return le32toh(v);
}

static bool in_window(const struct opts *o, uint64_t t)
{
    return o->has_exposure && t >= o->exp_from && t <= o->exp_to;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* Milliseconds of t after the reference time (negative before it). */
static double rel_ms(uint64_t t, uint64_t t0)
{
    return t >= t0 ? (double)(t - t0) / 1e6 : -((double)(t0 - t) / 1e6);
}

static void add_example(struct example *ex, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_example(struct example *ex, size_t *n, const char *fmt, ...)
{
    va_list ap;

    if (*n >= MAX_EXAMPLES)
        return;
    va_start(ap, fmt);
    vsnprintf(ex[*n].text, sizeof ex[*n].text, fmt, ap);
    va_end(ap);
    (*n)++;
}

/* Called for each complete record of a log by log_scan. */
typedef void (*record_fn)(struct check *c, uint32_t file, uint64_t offset, uint64_t t_send,
                          uint64_t t_recv, const uint64_t *ids, uint32_t count);

/*
 * Reads one pop log and calls fn for every record. Anything malformed is an
 * error naming the file and the byte offset, a header or record cut short
 * included: a count running past the end of the file may as well be a
 * corrupt count in the middle, and ignoring the rest would hide its records.
 */
__attribute__((warn_unused_result)) static int log_scan(struct check *c, uint32_t file,
                                                        record_fn fn)
{
    struct logfile *lf = &c->files[file];
    const char *path = lf->path;
    unsigned char hdr[LOG_HEADER_LEN];
    uint64_t *buf = NULL;
    size_t cap = 0;
    uint64_t off = 0, size;
    struct stat st;
    int rc = -1;
    FILE *f = fopen(path, "rb");

    if (!f) {
        fprintf(stderr, "idpool-check: %s: %s\n", path, strerror(errno));
        return -1;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    if (fstat(fileno(f), &st) < 0) {
        fprintf(stderr, "idpool-check: %s: %s\n", path, strerror(errno));
        goto out;
    }
    size = (uint64_t)st.st_size;
    if (lf->scanned && lf->size < size) /* a consumer still writing: read what was checked */
        size = lf->size;
    lf->scanned = true;
    lf->size = size;
    if (size < LOG_HEADER_LEN) {
        fprintf(stderr,
                "idpool-check: %s: byte offset 0: truncated header (%" PRIu64 " of %d bytes)\n",
                path, size, LOG_HEADER_LEN);
        goto out;
    }
    if (fread(hdr, 1, LOG_HEADER_LEN, f) != LOG_HEADER_LEN) {
        fprintf(stderr, "idpool-check: %s: byte offset 0: read error\n", path);
        goto out;
    }
    if (memcmp(hdr, LOG_MAGIC, 8)) {
        fprintf(stderr, "idpool-check: %s: byte offset 0: bad magic\n", path);
        goto out;
    }
    if (get32(hdr + 8) != 1) {
        fprintf(stderr, "idpool-check: %s: byte offset 8: unsupported version %" PRIu32 "\n", path,
                get32(hdr + 8));
        goto out;
    }
    lf->consumer = get32(hdr + 12);
    lf->kind = get32(hdr + 16);
    if (lf->kind >= KINDS) {
        fprintf(stderr, "idpool-check: %s: byte offset 16: unknown client kind %" PRIu32 "\n", path,
                lf->kind);
        goto out;
    }
    off = LOG_HEADER_LEN;
    while (off < size) {
        unsigned char rh[LOG_RECORD_LEN];
        uint64_t left = size - off;

        if (left < LOG_RECORD_LEN) {
            fprintf(stderr,
                    "idpool-check: %s: byte offset %" PRIu64 ": truncated record header (%" PRIu64
                    " of %d bytes)\n",
                    path, off, left, LOG_RECORD_LEN);
            goto out;
        }
        if (fread_unlocked(rh, 1, LOG_RECORD_LEN, f) != LOG_RECORD_LEN) {
            fprintf(stderr, "idpool-check: %s: byte offset %" PRIu64 ": read error\n", path, off);
            goto out;
        }
        uint64_t t_send = get64(rh), t_recv = get64(rh + 8);
        uint32_t count = get32(rh + 16), flags = get32(rh + 20);
        if (flags != 0) {
            fprintf(stderr, "idpool-check: %s: byte offset %" PRIu64 ": bad flags %" PRIu32 "\n",
                    path, off, flags);
            goto out;
        }
        if (t_recv < t_send) {
            fprintf(stderr,
                    "idpool-check: %s: byte offset %" PRIu64 ": t_recv %" PRIu64
                    " before t_send %" PRIu64 "\n",
                    path, off, t_recv, t_send);
            goto out;
        }
        if ((uint64_t)count * 8 > left - LOG_RECORD_LEN) {
            fprintf(stderr,
                    "idpool-check: %s: byte offset %" PRIu64 ": count %" PRIu32 " needs %" PRIu64
                    " bytes, %" PRIu64 " left (truncated record or bad count)\n",
                    path, off, count, (uint64_t)count * 8, left - LOG_RECORD_LEN);
            goto out;
        }
        if (grow(&buf, &cap, count ? count : 1, sizeof *buf) < 0)
            goto out;
        if (fread_unlocked(buf, 8, count, f) != count) {
            fprintf(stderr, "idpool-check: %s: byte offset %" PRIu64 ": read error\n", path,
                    off + LOG_RECORD_LEN);
            goto out;
        }
        for (uint32_t i = 0; i < count; i++)
            buf[i] = le64toh(buf[i]);
        fn(c, file, off, t_send, t_recv, buf, count);
        off += LOG_RECORD_LEN + (uint64_t)count * 8;
    }
    rc = 0;
out:
    free(buf);
    fclose(f);
    return rc;
}

/* Where a record is: a byte offset in a log, a line of a --list. */
static const char *unit(const struct logfile *lf)
{
    return lf->is_list ? "line" : "byte";
}

static int cmp_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

/*
 * --blocks: checks the group of STEP IDs just completed in c->blk: a run
 * with stride delta once sorted, not handed out in sorted order (a refill
 * shuffles each block), and above the group before (blocks never overlap).
 */
static void block_check(struct check *c, const struct logfile *lf)
{
    const struct opts *o = &c->o;
    struct result *r = &c->r;
    size_t n = (size_t)o->blocks;
    uint64_t *srt = c->blk_tmp;
    const char *why = NULL;
    bool asc = true, desc = true;

    memcpy(srt, c->blk, n * sizeof *srt);
    qsort(srt, n, sizeof *srt, cmp_u64);
    for (size_t i = 1; i < n; i++) {
        if (srt[i] == srt[i - 1] && !why)
            why = "repeats an ID";
        else if (srt[i] - srt[i - 1] != o->delta && !why)
            why = "is not a run with stride delta";
        asc = asc && c->blk[i] > c->blk[i - 1];
        desc = desc && c->blk[i] < c->blk[i - 1];
    }
    if (!why && n >= 8 && (asc || desc))
        why = "is not shuffled";
    if (!why && c->cur.have_top && srt[0] <= c->cur.top)
        why = "is not above the group before";
    if (why) {
        r->bad_blocks++;
        add_example(r->ex_more, &r->n_ex_more,
                    "%s: group of %zu at ID #%" PRIu64 " (%" PRIu64 "..%" PRIu64 ") %s", lf->path,
                    n, c->cur.blk_first, srt[0], srt[n - 1], why);
    }
    c->cur.have_top = true;
    c->cur.top = srt[n - 1];
}

/* --blocks: adds IDs of the log in pop order, checking each full group. */
static void blocks_add(struct check *c, const struct logfile *lf, const uint64_t *ids,
                       uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        if (c->cur.nblk == 0)
            c->cur.blk_first = lf->ids - count + i;
        c->blk[c->cur.nblk++] = ids[i];
        if (c->cur.nblk == c->o.blocks) {
            block_check(c, lf);
            c->cur.nblk = 0;
        }
    }
}

/* --dump: the IDs, one decimal per line. */
static void dump_ids(struct check *c, const uint64_t *ids, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        fprintf(c->dump, "%" PRIu64 "\n", ids[i]);
}

/*
 * First pass: collects the IDs, checks A and per-consumer order, counts empty
 * pops and keeps what the cross-consumer sweep needs.
 */
static void pass_load(struct check *c, uint32_t file, uint64_t offset, uint64_t t_send,
                      uint64_t t_recv, const uint64_t *ids, uint32_t count)
{
    struct logfile *lf = &c->files[file];
    struct result *r = &c->r;
    const struct opts *o = &c->o;

    lf->records++;
    lf->ids += count;
    r->records++;
    if (c->dump)
        dump_ids(c, ids, count);
    if (o->blocks)
        blocks_add(c, lf, ids, count);
    if (!lf->is_list) {
        if (!r->has_t_first || t_send < r->t_first)
            r->t_first = t_send;
        if (!r->has_t_first || t_recv > r->t_last)
            r->t_last = t_recv;
        r->has_t_first = true;
    }

    if (count == 0) {
        lf->empties++;
        r->empty_pops++;
        if (!c->cur.in_empty) {
            c->cur.in_empty = true;
            c->cur.empty_from = t_send;
        }
        if (t_recv - c->cur.empty_from > lf->longest_empty)
            lf->longest_empty = t_recv - c->cur.empty_from;
        return;
    }
    c->cur.in_empty = false;

    if (c->oom || grow(&c->ids, &c->cap_ids, c->nids + count, sizeof *c->ids) < 0) {
        c->oom = true;
        return;
    }
    memcpy(c->ids + c->nids, ids, (size_t)count * sizeof *ids);
    c->nids += count;

    uint64_t lo = UINT64_MAX, hi = 0;
    bool order_bad = false;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t id = ids[i];
        if (id < lo)
            lo = id;
        if (id > hi)
            hi = id;
        if (id < o->start_offset || id >= ID_LIMIT || id % o->delta != o->remainder) {
            r->arith++;
            add_example(r->ex_arith, &r->n_ex_arith, "%s %s %" PRIu64 ": id %" PRIu64 " (%s)",
                        lf->path, unit(lf), offset, id,
                        id >= ID_LIMIT         ? ">= 2^63"
                        : id < o->start_offset ? "below start_offset"
                                               : "id % delta != remainder");
        }
        if (o->monotonic) {
            if (c->cur.have_max && id <= c->cur.max) {
                if (!order_bad)
                    add_example(r->ex_order, &r->n_ex_order,
                                "%s %s %" PRIu64 ": id %" PRIu64 " after %" PRIu64, lf->path,
                                unit(lf), offset, id, c->cur.max);
                order_bad = true;
            }
            if (!c->cur.have_max || id > c->cur.max)
                c->cur.max = id;
            c->cur.have_max = true;
        }
    }
    if (order_bad)
        r->order++;
    if (o->monotonic && !lf->is_list) {
        if (grow(&c->recs, &c->cap_recs, c->nrecs + 1, sizeof *c->recs) < 0) {
            c->oom = true;
            return;
        }
        c->recs[c->nrecs++] = (struct rec){t_send, t_recv, lo, hi, file};
    }
}

static void insertion_sort(uint64_t *a, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t v = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

/*
 * In-place MSD radix sort (American flag sort), 8-bit digits from bit shift
 * down: no second array, so sorting costs no memory beyond the IDs.
 */
static void radix_sort(uint64_t *a, size_t n, int shift)
{
    size_t count[256], start[256], next[256];

    while (n > 48) {
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++)
            count[(a[i] >> shift) & 0xff]++;
        size_t sum = 0;
        int full = -1;
        for (int b = 0; b < 256; b++) {
            start[b] = next[b] = sum;
            sum += count[b];
            if (count[b] == n)
                full = b;
        }
        if (full < 0) {
            for (int b = 0; b < 256; b++) {
                size_t end = start[b] + count[b];
                while (next[b] < end) {
                    uint64_t v = a[next[b]];
                    unsigned d = (v >> shift) & 0xff;
                    while (d != (unsigned)b) {
                        uint64_t t = a[next[d]];
                        a[next[d]++] = v;
                        v = t;
                        d = (v >> shift) & 0xff;
                    }
                    a[next[b]++] = v;
                }
            }
        }
        if (shift == 0)
            return;
        if (full >= 0) { /* every key shares this digit: go to the next one */
            shift -= 8;
            continue;
        }
        for (int b = 0; b < 256; b++)
            if (count[b] > 1)
                radix_sort(a + start[b], count[b], shift - 8);
        return;
    }
    insertion_sort(a, n);
}

/* Sorts the IDs, starting at the highest byte in which they differ. */
static void sort_ids(uint64_t *a, size_t n)
{
    if (n < 2)
        return;
    uint64_t mn = a[0], mx = a[0];
    for (size_t i = 1; i < n; i++) {
        if (a[i] < mn)
            mn = a[i];
        if (a[i] > mx)
            mx = a[i];
    }
    uint64_t diff = mn ^ mx;
    if (!diff)
        return;
    int top = 63 - __builtin_clzll(diff);
    radix_sort(a, n, top / 8 * 8);
}

static int cmp_range(const void *pa, const void *pb)
{
    const struct range *a = pa, *b = pb;
    if (a->lo != b->lo)
        return a->lo < b->lo ? -1 : 1;
    return (a->hi > b->hi) - (a->hi < b->hi);
}

/* Opens a text side file; NULL with a message on failure. */
static FILE *open_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        fprintf(stderr, "idpool-check: %s: %s\n", path, strerror(errno));
    return f;
}

/* True for blank and '#' lines of a text side file. */
static bool skip_line(const char *line)
{
    line += strspn(line, " \t\r\n");
    return !*line || *line == '#';
}

/* Splits the first two whitespace-separated numbers off a line. */
__attribute__((warn_unused_result)) static int two_numbers(char *line, uint64_t *a, uint64_t *b)
{
    char *save = NULL;
    char *x = strtok_r(line, " \t\r\n", &save);
    char *y = strtok_r(NULL, " \t\r\n", &save);
    return parse_u64(x, a) || parse_u64(y, b) ? -1 : 0;
}

/*
 * Reads a --list file (decimal IDs, one per line, blank and '#' lines
 * skipped) and calls fn with them in chunks, as records without times;
 * offset is the line number of a chunk's first ID.
 */
__attribute__((warn_unused_result)) static int list_scan(struct check *c, uint32_t file,
                                                         record_fn fn)
{
    enum { CHUNK = 1024 };
    const char *path = c->files[file].path;
    uint64_t buf[CHUNK], first = 0;
    size_t n = 0, len = 0, lineno = 0;
    char *line = NULL;
    int rc = -1;
    FILE *f = open_text(path);

    if (!f)
        return -1;
    while (getline(&line, &len, f) > 0) {
        char *save = NULL, *tok;
        lineno++;
        if (skip_line(line))
            continue;
        tok = strtok_r(line, " \t\r\n", &save);
        if (parse_u64(tok, &buf[n]) < 0 || strtok_r(NULL, " \t\r\n", &save)) {
            fprintf(stderr, "idpool-check: %s:%zu: expected one decimal ID\n", path, lineno);
            goto out;
        }
        if (n++ == 0)
            first = lineno;
        if (n == CHUNK) {
            fn(c, file, first, 0, 0, buf, (uint32_t)n);
            n = 0;
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "idpool-check: %s: read error\n", path);
        goto out;
    }
    if (n)
        fn(c, file, first, 0, 0, buf, (uint32_t)n);
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

/* Reads input file (a pop log or a --list) and calls fn for each record. */
__attribute__((warn_unused_result)) static int input_scan(struct check *c, uint32_t file,
                                                          record_fn fn)
{
    if (c->files[file].is_list)
        return list_scan(c, file, fn);
    return log_scan(c, file, fn);
}

/* Reads --leases: lines "lo hi" (further columns ignored), [lo, hi). */
__attribute__((warn_unused_result)) static int leases_load(struct check *c)
{
    char *line = NULL;
    size_t len = 0, cap = 0, lineno = 0;
    int rc = -1;
    FILE *f = open_text(c->o.leases);

    if (!f)
        return -1;
    while (getline(&line, &len, f) > 0) {
        struct range rg;
        lineno++;
        if (skip_line(line))
            continue;
        if (two_numbers(line, &rg.lo, &rg.hi) < 0 || rg.lo > rg.hi) {
            fprintf(stderr, "idpool-check: %s:%zu: expected \"lo hi\" with lo <= hi\n", c->o.leases,
                    lineno);
            goto out;
        }
        if (grow(&c->leases, &cap, c->nleases + 1, sizeof *c->leases) < 0)
            goto out;
        c->leases[c->nleases++] = rg;
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

/*
 * L, lease side: sorts the leases, counts those overlapping an earlier one
 * and builds their union for the membership walk.
 */
__attribute__((warn_unused_result)) static int leases_check(struct check *c)
{
    struct result *r = &c->r;
    uint64_t reach = 0;

    r->leases = c->nleases;
    qsort(c->leases, c->nleases, sizeof *c->leases, cmp_range);
    c->merged = calloc(c->nleases ? c->nleases : 1, sizeof *c->merged);
    if (!c->merged)
        return -1;
    for (size_t i = 0; i < c->nleases; i++) {
        struct range rg = c->leases[i];
        if (rg.lo == rg.hi)
            continue;
        if (i > 0 && rg.lo < reach) {
            r->lease_overlaps++;
            add_example(r->ex_lease, &r->n_ex_lease,
                        "lease [%" PRIu64 ", %" PRIu64
                        ") overlaps an earlier one reaching %" PRIu64,
                        rg.lo, rg.hi, reach);
        }
        if (rg.hi > reach)
            reach = rg.hi;
        if (c->o.has_cur && rg.hi > c->o.cur) {
            r->above_offset++;
            add_example(r->ex_more, &r->n_ex_more,
                        "lease [%" PRIu64 ", %" PRIu64 ") ends above current_offset %" PRIu64,
                        rg.lo, rg.hi, c->o.cur);
        }
        if (c->nmerged && rg.lo <= c->merged[c->nmerged - 1].hi) {
            if (rg.hi > c->merged[c->nmerged - 1].hi)
                c->merged[c->nmerged - 1].hi = rg.hi;
        } else {
            c->merged[c->nmerged++] = rg;
        }
    }
    return 0;
}

/* Number of x in [0, n) with x % delta == remainder. */
static uint64_t valid_below(uint64_t n, uint64_t delta, uint64_t rem)
{
    return n / delta + (n % delta > rem ? 1 : 0);
}

/* The index of the lease holding id, or SIZE_MAX; *j moves up with id. */
static size_t lease_of(const struct check *c, size_t *j, uint64_t id)
{
    while (*j + 1 < c->nleases && c->leases[*j + 1].lo <= id)
        (*j)++;
    if (*j < c->nleases && c->leases[*j].lo <= id && id < c->leases[*j].hi)
        return *j;
    return SIZE_MAX;
}

/*
 * --gap: distinct sorted neighbours prev < id. Inside one lease the
 * generator stepped from prev to id by k x delta with k drawn from
 * [1, increment_max]: k must lie in [gap_lo, gap_hi].
 */
static void gap_check(struct check *c, uint64_t prev, size_t lease_prev, uint64_t id, size_t lease)
{
    const struct opts *o = &c->o;
    struct result *r = &c->r;
    uint64_t d = id - prev, k = d / o->delta;

    if (lease == SIZE_MAX || lease != lease_prev)
        return;
    if (d % o->delta || k < o->gap_lo || k > o->gap_hi) {
        r->bad_gaps++;
        add_example(r->ex_more, &r->n_ex_more,
                    "gap %" PRIu64 " -> %" PRIu64 " (%" PRIu64 " = %.2f x delta) outside [%" PRIu64
                    ", %" PRIu64 "] x delta inside one lease",
                    prev, id, d, (double)d / (double)o->delta, o->gap_lo, o->gap_hi);
    } else if (c->gap_seen) {
        c->gap_seen[k - o->gap_lo] = true;
    }
}

/*
 * U, gaps and L over the sorted IDs in one walk: counts extra pops, collects
 * the duplicated IDs, counts gaps, checks each ID against the union of the
 * leases, and the options --gap and --current-offset.
 */
__attribute__((warn_unused_result)) static int walk_sorted(struct check *c)
{
    const struct opts *o = &c->o;
    struct result *r = &c->r;
    const uint64_t *a = c->ids;
    size_t n = c->nids, j = 0, cap = 0, jl = 0, lease_prev = SIZE_MAX;
    uint64_t leased_popped = 0;

    for (size_t i = 0; i < n; i++) {
        uint64_t id = a[i];
        bool repeat = i > 0 && a[i - 1] == id;

        if (repeat) {
            if (!c->ndups || c->dups[c->ndups - 1].id != id) {
                if (grow(&c->dups, &cap, c->ndups + 1, sizeof *c->dups) < 0)
                    return -1;
                c->dups[c->ndups++] = (struct dup){.id = id, .min_send = UINT64_MAX};
            }
        } else {
            r->distinct++;
            if (i > 0 && id - a[i - 1] > o->delta)
                r->gaps++;
            if (o->has_gap) {
                size_t lease = lease_of(c, &jl, id);
                if (i > 0)
                    gap_check(c, a[i - 1], lease_prev, id, lease);
                lease_prev = lease;
            }
            if (o->has_cur && id >= o->cur) {
                r->above_offset++;
                add_example(r->ex_more, &r->n_ex_more,
                            "id %" PRIu64 " is not below current_offset %" PRIu64, id, o->cur);
            }
        }
        if (o->leases) {
            while (j < c->nmerged && c->merged[j].hi <= id)
                j++;
            if (j < c->nmerged && c->merged[j].lo <= id) {
                if (!repeat && id % o->delta == o->remainder)
                    leased_popped++;
            } else {
                r->unleased++;
                if (!repeat)
                    add_example(r->ex_lease, &r->n_ex_lease, "id %" PRIu64 " is in no lease", id);
            }
        }
    }
    if (o->leases) {
        uint64_t valid = 0;
        for (size_t k = 0; k < c->nmerged; k++)
            valid += valid_below(c->merged[k].hi, o->delta, o->remainder) -
                     valid_below(c->merged[k].lo, o->delta, o->remainder);
        r->has_missing = true;
        r->missing_leased = valid - leased_popped;
    }
    if (c->gap_seen) {
        uint64_t first = 0;
        for (uint64_t k = 0; k <= o->gap_hi - o->gap_lo; k++) {
            if (c->gap_seen[k])
                continue;
            if (!r->gap_missing++)
                first = o->gap_lo + k;
        }
        if (r->gap_missing)
            add_example(r->ex_more, &r->n_ex_more,
                        "%" PRIu64 " multiples of delta in [%" PRIu64 ", %" PRIu64
                        "] never occur inside a lease, e.g. %" PRIu64,
                        r->gap_missing, o->gap_lo, o->gap_hi, first);
    }
    return 0;
}

/* The dup entry of id, or NULL. */
static struct dup *dup_find(struct check *c, uint64_t id)
{
    size_t lo = 0, hi = c->ndups;

    if (!c->ndups || id < c->dups[0].id || id > c->dups[c->ndups - 1].id)
        return NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->dups[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->ndups && c->dups[lo].id == id ? &c->dups[lo] : NULL;
}

/* Second pass: for each duplicated ID, its pops, the earliest t_send and the pops in the window. */
static void pass_dups(struct check *c, uint32_t file, uint64_t offset, uint64_t t_send,
                      uint64_t t_recv, const uint64_t *ids, uint32_t count)
{
    uint32_t kind = c->files[file].kind;

    (void)offset, (void)t_recv;
    for (uint32_t i = 0; i < count; i++) {
        struct dup *d = dup_find(c, ids[i]);
        if (!d)
            continue;
        d->n++;
        if (t_send < d->min_send) {
            d->min_send = t_send;
            d->min_kind = kind;
        }
        if (in_window(&c->o, t_send)) {
            d->in_window++;
            d->in_window_kind[kind]++;
        }
    }
}

/* Pops of d sent inside the exposure window, not counting the legitimate (earliest) one. */
static uint64_t dup_exposed(const struct check *c, const struct dup *d)
{
    return d->in_window - (in_window(&c->o, d->min_send) ? 1 : 0);
}

/* Third pass: the first pop and one later pop of each example duplicate. */
static void pass_examples(struct check *c, uint32_t file, uint64_t offset, uint64_t t_send,
                          uint64_t t_recv, const uint64_t *ids, uint32_t count)
{
    struct result *r = &c->r;
    struct pop p = {true, file, offset, t_send, t_recv};

    for (uint32_t i = 0; i < count; i++) {
        for (size_t k = 0; k < r->n_ex_dup; k++) {
            struct dup_example *ex = &r->ex_dup[k];
            const struct dup *d = &c->dups[ex->dup];
            if (d->id != ids[i])
                continue;
            if (!ex->first.set && t_send == d->min_send)
                ex->first = p;
            else if (in_window(&c->o, t_send) == ex->exposed &&
                     (!ex->again.set || t_send < ex->again.t_send))
                ex->again = p;
        }
    }
}

/* U: splits the extra pops into duplicates and exposed and picks the examples. */
__attribute__((warn_unused_result)) static int dups_classify(struct check *c)
{
    struct result *r = &c->r;

    if (!c->ndups)
        return 0;
    for (uint32_t f = 0; f < c->o.nlogs; f++)
        if (input_scan(c, f, pass_dups) < 0)
            return -1;
    for (int want_exposed = 0; want_exposed < 2; want_exposed++) {
        for (size_t k = 0; k < c->ndups; k++) {
            const struct dup *d = &c->dups[k];
            uint64_t exposed = dup_exposed(c, d);
            if (!want_exposed) {
                r->exposed += exposed;
                r->duplicates += d->n - 1 - exposed;
                for (uint32_t kind = 0; kind < KINDS; kind++)
                    r->exposed_kind[kind] +=
                        d->in_window_kind[kind] -
                        (kind == d->min_kind && in_window(&c->o, d->min_send) ? 1 : 0);
            }
            bool fits = want_exposed ? exposed > 0 : d->n - 1 - exposed > 0;
            if (fits && r->n_ex_dup < MAX_EXAMPLES)
                r->ex_dup[r->n_ex_dup++] =
                    (struct dup_example){.dup = k, .exposed = want_exposed != 0};
        }
    }
    for (uint32_t f = 0; f < c->o.nlogs; f++)
        if (input_scan(c, f, pass_examples) < 0)
            return -1;
    return 0;
}

/* The reference time of relative timings: --t0-ns, the first pop, or the first alert. */
static uint64_t t0_of(const struct check *c)
{
    if (c->o.has_t0)
        return c->o.t0;
    if (c->r.has_t_first)
        return c->r.t_first;
    return c->nalerts ? c->alerts[0].t_ns : 0;
}

static const struct rec *sort_base; /* the records cmp_idx_* look at */

static int cmp_idx_send(const void *pa, const void *pb)
{
    const struct rec *a = &sort_base[*(const uint32_t *)pa];
    const struct rec *b = &sort_base[*(const uint32_t *)pb];
    return (a->t_send > b->t_send) - (a->t_send < b->t_send);
}

static int cmp_idx_recv(const void *pa, const void *pb)
{
    const struct rec *a = &sort_base[*(const uint32_t *)pa];
    const struct rec *b = &sort_base[*(const uint32_t *)pb];
    return (a->t_recv > b->t_recv) - (a->t_recv < b->t_recv);
}

/* One log's records in key order, for the merge. */
struct run {
    uint64_t key;  /* key of the head record */
    uint32_t *idx; /* sorted record indices, or NULL: the records are in order */
    size_t next;   /* next position in the run */
    size_t end;    /* end of the run */
    size_t base;   /* index of the run's first record */
};

static uint64_t rec_key(const struct rec *r, bool by_recv)
{
    return by_recv ? r->t_recv : r->t_send;
}

static uint32_t run_head(const struct run *ru)
{
    return ru->idx ? ru->idx[ru->next] : (uint32_t)(ru->base + ru->next);
}

/* Heap order of runs: smaller head key first, then lower log index. */
static bool run_less(const struct run *runs, size_t a, size_t b)
{
    return runs[a].key < runs[b].key || (runs[a].key == runs[b].key && a < b);
}

static void heap_down(const struct run *runs, size_t *heap, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && run_less(runs, heap[l], heap[m]))
            m = l;
        if (l + 1 < n && run_less(runs, heap[l + 1], heap[m]))
            m = l + 1;
        if (m == i)
            return;
        size_t t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

/*
 * Fills out with the record indices in t_send (or t_recv) order. Each log's
 * records are contiguous and normally already in order (a consumer waits for
 * each reply); a log that is not is sorted on its own. The logs are then
 * merged with a heap: O(n log logs), and no copy of the records.
 */
__attribute__((warn_unused_result)) static int order_records(struct check *c, bool by_recv,
                                                             uint32_t *out)
{
    size_t k = c->o.nlogs, n = 0, nheap = 0;
    struct run *runs = calloc(k, sizeof *runs);
    size_t *heap = calloc(k, sizeof *heap);
    int rc = -1;

    if (!runs || !heap)
        goto out;
    for (size_t f = 0; f < k; f++) {
        struct run *ru = &runs[f];
        const struct logfile *lf = &c->files[f];
        ru->base = lf->rec_first;
        ru->end = lf->rec_end - lf->rec_first;
        for (size_t i = lf->rec_first + 1; i < lf->rec_end; i++) {
            if (rec_key(&c->recs[i], by_recv) < rec_key(&c->recs[i - 1], by_recv)) {
                ru->idx = malloc(ru->end * sizeof *ru->idx);
                if (!ru->idx)
                    goto out;
                for (size_t j = 0; j < ru->end; j++)
                    ru->idx[j] = (uint32_t)(ru->base + j);
                sort_base = c->recs;
                qsort(ru->idx, ru->end, sizeof *ru->idx, by_recv ? cmp_idx_recv : cmp_idx_send);
                break;
            }
        }
        if (ru->end) {
            ru->key = rec_key(&c->recs[run_head(ru)], by_recv);
            heap[nheap++] = f;
        }
    }
    for (size_t i = nheap; i-- > 0;)
        heap_down(runs, heap, nheap, i);
    while (nheap) {
        struct run *ru = &runs[heap[0]];
        out[n++] = run_head(ru);
        if (++ru->next == ru->end)
            heap[0] = heap[--nheap];
        else
            ru->key = rec_key(&c->recs[run_head(ru)], by_recv);
        heap_down(runs, heap, nheap, 0);
    }
    rc = 0;
out:
    if (rc < 0)
        fprintf(stderr, "idpool-check: out of memory\n");
    for (size_t f = 0; runs && f < k; f++)
        free(runs[f].idx);
    free(runs);
    free(heap);
    return rc;
}

/* The largest ID seen, with the consumer and record it came from. */
struct best {
    bool set;
    uint64_t max;
    uint32_t file;
    size_t rec;
};

/*
 * M across consumers: if request a completed (t_recv) before request b was
 * sent (t_send), the server served a first, so every ID of b must be above
 * every ID of a. Records are swept in t_send order while the completed ones
 * (t_recv order) feed a running maximum; two maxima from different consumers
 * are kept so that a consumer is compared with the others only (its own
 * order is checked in the first pass). O(n log n) at worst.
 */
__attribute__((warn_unused_result)) static int cross_check(struct check *c)
{
    struct result *r = &c->r;
    size_t n = c->nrecs, j = 0;
    struct best b1 = {0}, b2 = {0}; /* b2: best of the consumers other than b1's */
    uint64_t t0 = t0_of(c);

    if (n < 2)
        return 0;
    if (n > UINT32_MAX) {
        fprintf(stderr, "idpool-check: too many records\n");
        return -1;
    }
    uint32_t *by_send = malloc(n * sizeof *by_send);
    uint32_t *by_recv = malloc(n * sizeof *by_recv);
    if (!by_send || !by_recv)
        fprintf(stderr, "idpool-check: out of memory\n");
    if (!by_send || !by_recv || order_records(c, false, by_send) < 0 ||
        order_records(c, true, by_recv) < 0) {
        free(by_send);
        free(by_recv);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const struct rec *b = &c->recs[by_send[i]];
        while (j < n && c->recs[by_recv[j]].t_recv < b->t_send) {
            const struct rec *a = &c->recs[by_recv[j]];
            struct best nb = {true, a->hi, a->file, by_recv[j]};
            if (b1.set && a->file == b1.file) {
                if (a->hi > b1.max)
                    b1 = nb;
            } else if (!b1.set || a->hi > b1.max) {
                b2 = b1;
                b1 = nb;
            } else if (!b2.set || a->hi > b2.max) {
                b2 = nb;
            }
            j++;
        }
        const struct best *cmp = b1.set && b1.file != b->file ? &b1 : &b2;
        if (cmp->set && b->lo <= cmp->max) {
            const struct rec *a = &c->recs[cmp->rec];
            r->cross_order++;
            add_example(r->ex_cross, &r->n_ex_cross,
                        "%s: request sent at +%.3f ms got id %" PRIu64 " <= id %" PRIu64
                        " of %s, received at +%.3f ms",
                        c->files[b->file].path, rel_ms(b->t_send, t0), b->lo, cmp->max,
                        c->files[a->file].path, rel_ms(a->t_recv, t0));
        }
    }
    free(by_send);
    free(by_recv);
    return 0;
}

struct sample {
    uint64_t t;
    uint64_t len;
};

static int cmp_sample(const void *pa, const void *pb)
{
    const struct sample *a = pa, *b = pb;
    return (a->t > b->t) - (a->t < b->t);
}

/*
 * --llen: time the pool spent below --low-water. A sample below the mark
 * counts until the next sample; the last sample counts nothing.
 */
__attribute__((warn_unused_result)) static int llen_check(struct check *c)
{
    struct result *r = &c->r;
    struct sample *s = NULL;
    size_t n = 0, cap = 0, lineno = 0, len = 0;
    char *line = NULL;
    int rc = -1;
    FILE *f = open_text(c->o.llen);

    if (!f)
        return -1;
    while (getline(&line, &len, f) > 0) {
        lineno++;
        if (skip_line(line))
            continue;
        if (grow(&s, &cap, n + 1, sizeof *s) < 0)
            goto out;
        if (two_numbers(line, &s[n].t, &s[n].len) < 0) {
            fprintf(stderr, "idpool-check: %s:%zu: expected \"t_ns len\"\n", c->o.llen, lineno);
            goto out;
        }
        n++;
    }
    r->llen_samples = n;
    if (n)
        qsort(s, n, sizeof *s, cmp_sample);
    uint64_t run = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i].len < c->o.low_water) {
            uint64_t d = s[i + 1].t - s[i].t;
            if (run == 0)
                r->below_low_runs++;
            run += d;
            r->below_low_ns += d;
            if (run > r->below_low_longest)
                r->below_low_longest = run;
        } else {
            run = 0;
        }
    }
    rc = 0;
out:
    free(s);
    free(line);
    fclose(f);
    return rc;
}

/* --alerts: lines "t_ns <json message>". */
__attribute__((warn_unused_result)) static int alerts_load(struct check *c)
{
    size_t cap = 0, lineno = 0, len = 0;
    char *line = NULL;
    int rc = -1;
    FILE *f = open_text(c->o.alerts);

    if (!f)
        return -1;
    while (getline(&line, &len, f) > 0) {
        char *sp, *end;
        lineno++;
        if (skip_line(line))
            continue;
        sp = line + strcspn(line, " \t");
        if (*sp)
            *sp++ = '\0';
        end = sp + strlen(sp);
        while (end > sp && (end[-1] == '\n' || end[-1] == '\r'))
            *--end = '\0';
        uint64_t t;
        cJSON *ev = cJSON_Parse(sp);
        if (parse_u64(line, &t) < 0 || !cJSON_IsObject(ev)) {
            cJSON_Delete(ev);
            fprintf(stderr, "idpool-check: %s:%zu: expected \"t_ns <json object>\"\n", c->o.alerts,
                    lineno);
            goto out;
        }
        if (grow(&c->alerts, &cap, c->nalerts + 1, sizeof *c->alerts) < 0) {
            cJSON_Delete(ev);
            goto out;
        }
        c->alerts[c->nalerts++] = (struct alert_ev){t, ev};
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

/* A string member of an alert, "?" if absent. */
static const char *alert_str(const cJSON *ev, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ev, a);
    if (!cJSON_IsString(v) && b)
        v = cJSON_GetObjectItemCaseSensitive(ev, b);
    return cJSON_IsString(v) ? v->valuestring : "?";
}

static bool violated(const struct result *r)
{
    return r->duplicates || r->order || r->cross_order || r->arith || r->unleased ||
           r->lease_overlaps || r->count_mismatch || r->above_offset || r->bad_gaps ||
           r->gap_missing || r->bad_blocks;
}

/* The counts of the further checks given, as " name=N" fields (or JSON members). */
static void more_fields(const struct check *c, cJSON *j)
{
    const struct opts *o = &c->o;
    const struct result *r = &c->r;
    struct {
        bool on;
        const char *name;
        uint64_t v;
    } f[] = {
        {o->has_count, "count_mismatch", r->count_mismatch},
        {o->has_cur, "above_offset", r->above_offset},
        {o->has_gap, "bad_gaps", r->bad_gaps},
        {o->gap_all, "gap_missing", r->gap_missing},
        {o->blocks != 0, "bad_blocks", r->bad_blocks},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].on)
            continue;
        if (j) {
            char buf[24];
            snprintf(buf, sizeof buf, "%" PRIu64, f[i].v);
            cJSON_AddRawToObject(j, f[i].name, buf);
        } else {
            printf(" %s=%" PRIu64, f[i].name, f[i].v);
        }
    }
}

static void print_last_line(const struct check *c)
{
    const struct result *r = &c->r;
    printf("check: ids=%" PRIu64 " consumers=%zu duplicates=%" PRIu64 " order=%" PRIu64
           " cross_order=%" PRIu64 " arith=%" PRIu64 " unleased=%" PRIu64 " lease_overlaps=%" PRIu64
           " gaps=%" PRIu64 " empty_pops=%" PRIu64 " below_low_ms=%" PRIu64 " exposed=%" PRIu64,
           r->ids, c->o.nlogs, r->duplicates, r->order, r->cross_order, r->arith, r->unleased,
           r->lease_overlaps, r->gaps, r->empty_pops, r->below_low_ns / 1000000, r->exposed);
    printf(" exposed_lpop=%" PRIu64 " exposed_take=%" PRIu64, r->exposed_kind[KIND_LPOP],
           r->exposed_kind[KIND_TAKE]);
    more_fields(c, NULL);
    printf("\n");
}

static void print_pop(const struct check *c, const char *what, const struct pop *p, uint64_t t0)
{
    const struct logfile *lf = &c->files[p->file];

    if (!p->set) {
        printf("      %s: ?\n", what);
        return;
    }
    printf("      %s: %s (consumer %" PRIu32 ") %s %" PRIu64
           "%s%s, sent +%.3f ms, received +%.3f ms\n",
           what, lf->path, lf->consumer, unit(lf), p->offset, lf->is_list ? "" : ", ",
           lf->is_list ? "" : kind_names[lf->kind], rel_ms(p->t_send, t0), rel_ms(p->t_recv, t0));
}

static void print_examples(const struct example *ex, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf("    %s\n", ex[i].text);
}

/* The human report; its last line is the summary line of the interface. */
static void report_text(const struct check *c)
{
    const struct opts *o = &c->o;
    const struct result *r = &c->r;
    uint64_t t0 = t0_of(c);

    printf("idpool-check: %zu logs, %" PRIu64 " records, %" PRIu64 " IDs (%" PRIu64
           " distinct), type %s, %.1f s of pops\n",
           o->nlogs, r->records, r->ids, r->distinct, o->monotonic ? "monotonic" : "trend",
           r->has_t_first ? ms(r->t_last - r->t_first) / 1000 : 0.0);
    printf("  U unique:     duplicates=%" PRIu64 " exposed=%" PRIu64 " (lpop %" PRIu64
           ", take %" PRIu64 ")",
           r->duplicates, r->exposed, r->exposed_kind[KIND_LPOP], r->exposed_kind[KIND_TAKE]);
    if (o->has_exposure)
        printf(" (window %" PRIu64 "..%" PRIu64 " ns, +%.3f..+%.3f ms)", o->exp_from, o->exp_to,
               rel_ms(o->exp_from, t0), rel_ms(o->exp_to, t0));
    printf("\n");
    for (size_t i = 0; i < r->n_ex_dup; i++) {
        const struct dup_example *ex = &r->ex_dup[i];
        const struct dup *d = &c->dups[ex->dup];
        printf("    id %" PRIu64 " popped %" PRIu64 " times%s\n", d->id, d->n,
               ex->exposed ? " (exposed)" : "");
        print_pop(c, "first", &ex->first, t0);
        print_pop(c, "again", &ex->again, t0);
    }
    if (o->monotonic) {
        printf("  M monotonic:  order=%" PRIu64 " cross_order=%" PRIu64 " (records)\n", r->order,
               r->cross_order);
        print_examples(r->ex_order, r->n_ex_order);
        print_examples(r->ex_cross, r->n_ex_cross);
    } else {
        printf("  M monotonic:  not checked (--type trend)\n");
    }
    printf("  A arithmetic: arith=%" PRIu64 " (start_offset=%" PRIu64 " delta=%" PRIu64
           " remainder=%" PRIu64 ")\n",
           r->arith, o->start_offset, o->delta, o->remainder);
    print_examples(r->ex_arith, r->n_ex_arith);
    if (o->leases) {
        printf("  L leased:     unleased=%" PRIu64 " lease_overlaps=%" PRIu64 " (%" PRIu64
               " leases, %" PRIu64 " leased IDs never popped)\n",
               r->unleased, r->lease_overlaps, r->leases, r->missing_leased);
        print_examples(r->ex_lease, r->n_ex_lease);
    } else {
        printf("  L leased:     not checked (no --leases)\n");
    }
    printf("  gaps=%" PRIu64 " (sorted neighbours more than delta apart)\n", r->gaps);
    printf("  empty pops=%" PRIu64, r->empty_pops);
    if (r->empty_pops)
        printf(", longest run %.3f ms (%s)", ms(r->longest_empty),
               c->files[r->longest_empty_file].path);
    printf("\n");
    if (o->llen)
        printf("  below low-water %" PRIu64 ": %.3f ms in %" PRIu64
               " stretches, longest %.3f ms (%" PRIu64 " samples)\n",
               o->low_water, ms(r->below_low_ns), r->below_low_runs, ms(r->below_low_longest),
               r->llen_samples);
    if (o->alerts) {
        printf("  alerts: %zu (ms after t0 %" PRIu64 ")\n", c->nalerts, t0);
        for (size_t i = 0; i < c->nalerts; i++) {
            const cJSON *ev = c->alerts[i].event;
            printf("    %+10.3f ms  %-20s %-9s %s\n", rel_ms(c->alerts[i].t_ns, t0),
                   alert_str(ev, "alert", "kind"), alert_str(ev, "state", NULL),
                   alert_str(ev, "app", NULL));
        }
    }
    if (o->has_count || o->has_cur || o->has_gap || o->blocks) {
        printf("  further:");
        more_fields(c, NULL);
        printf("\n");
        print_examples(r->ex_more, r->n_ex_more);
    }
    printf("  verdict: %s\n", violated(r) ? "VIOLATION" : "ok");
    print_last_line(c);
}

/* Adds a uint64 as a JSON number without going through a double. */
static void json_u64(cJSON *obj, const char *name, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    cJSON_AddRawToObject(obj, name, buf);
}

static cJSON *json_pop(const struct check *c, const struct pop *p, uint64_t t0)
{
    cJSON *o = cJSON_CreateObject();
    if (!p->set)
        return o;
    cJSON_AddStringToObject(o, "log", c->files[p->file].path);
    cJSON_AddNumberToObject(o, "consumer", c->files[p->file].consumer);
    json_u64(o, "offset", p->offset);
    json_u64(o, "t_send_ns", p->t_send);
    json_u64(o, "t_recv_ns", p->t_recv);
    cJSON_AddNumberToObject(o, "t_send_ms", rel_ms(p->t_send, t0));
    return o;
}

static void json_examples(cJSON *obj, const char *name, const struct example *ex, size_t n)
{
    cJSON *a = cJSON_AddArrayToObject(obj, name);
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(ex[i].text));
}

/* --json: one object with the fields of the summary line and the details. */
static int report_json(const struct check *c)
{
    const struct opts *o = &c->o;
    const struct result *r = &c->r;
    uint64_t t0 = t0_of(c);
    cJSON *j = cJSON_CreateObject();

    json_u64(j, "ids", r->ids);
    cJSON_AddNumberToObject(j, "consumers", (double)o->nlogs);
    json_u64(j, "duplicates", r->duplicates);
    json_u64(j, "order", r->order);
    json_u64(j, "cross_order", r->cross_order);
    json_u64(j, "arith", r->arith);
    json_u64(j, "unleased", r->unleased);
    json_u64(j, "lease_overlaps", r->lease_overlaps);
    json_u64(j, "gaps", r->gaps);
    json_u64(j, "empty_pops", r->empty_pops);
    json_u64(j, "below_low_ms", r->below_low_ns / 1000000);
    json_u64(j, "exposed", r->exposed);
    json_u64(j, "exposed_lpop", r->exposed_kind[KIND_LPOP]);
    json_u64(j, "exposed_take", r->exposed_kind[KIND_TAKE]);
    more_fields(c, j);
    cJSON_AddBoolToObject(j, "ok", !violated(r));
    cJSON_AddStringToObject(j, "type", o->monotonic ? "monotonic" : "trend");
    json_u64(j, "records", r->records);
    json_u64(j, "distinct", r->distinct);
    json_u64(j, "t0_ns", t0);
    if (o->leases) {
        json_u64(j, "leases", r->leases);
        json_u64(j, "missing_leased", r->missing_leased);
    }
    cJSON_AddNumberToObject(j, "longest_empty_ms", ms(r->longest_empty));
    if (o->llen) {
        cJSON_AddNumberToObject(j, "below_low_longest_ms", ms(r->below_low_longest));
        json_u64(j, "below_low_stretches", r->below_low_runs);
    }
    if (o->has_exposure) {
        json_u64(j, "exposure_from_ns", o->exp_from);
        json_u64(j, "exposure_to_ns", o->exp_to);
    }
    cJSON *dups = cJSON_AddArrayToObject(j, "duplicate_examples");
    for (size_t i = 0; i < r->n_ex_dup; i++) {
        const struct dup_example *ex = &r->ex_dup[i];
        cJSON *e = cJSON_CreateObject();
        json_u64(e, "id", c->dups[ex->dup].id);
        json_u64(e, "pops", c->dups[ex->dup].n);
        cJSON_AddBoolToObject(e, "exposed", ex->exposed);
        cJSON_AddItemToObject(e, "first", json_pop(c, &ex->first, t0));
        cJSON_AddItemToObject(e, "again", json_pop(c, &ex->again, t0));
        cJSON_AddItemToArray(dups, e);
    }
    json_examples(j, "order_examples", r->ex_order, r->n_ex_order);
    json_examples(j, "cross_order_examples", r->ex_cross, r->n_ex_cross);
    json_examples(j, "arith_examples", r->ex_arith, r->n_ex_arith);
    json_examples(j, "lease_examples", r->ex_lease, r->n_ex_lease);
    json_examples(j, "further_examples", r->ex_more, r->n_ex_more);
    cJSON *logs = cJSON_AddArrayToObject(j, "logs");
    for (size_t i = 0; i < o->nlogs; i++) {
        const struct logfile *lf = &c->files[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "log", lf->path);
        cJSON_AddNumberToObject(e, "consumer", lf->consumer);
        json_u64(e, "records", lf->records);
        json_u64(e, "ids", lf->ids);
        json_u64(e, "empty_pops", lf->empties);
        cJSON_AddNumberToObject(e, "longest_empty_ms", ms(lf->longest_empty));
        cJSON_AddItemToArray(logs, e);
    }
    cJSON *al = cJSON_AddArrayToObject(j, "alerts");
    for (size_t i = 0; i < c->nalerts; i++) {
        const cJSON *ev = c->alerts[i].event;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "kind", alert_str(ev, "alert", "kind"));
        cJSON_AddStringToObject(e, "state", alert_str(ev, "state", NULL));
        cJSON_AddStringToObject(e, "app", alert_str(ev, "app", NULL));
        cJSON_AddNumberToObject(e, "t_ms", rel_ms(c->alerts[i].t_ns, t0));
        json_u64(e, "t_ns", c->alerts[i].t_ns);
        cJSON_AddItemToArray(al, e);
    }
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) {
        fprintf(stderr, "idpool-check: out of memory\n");
        return -1;
    }
    printf("%s\n", s);
    free(s);
    return 0;
}

static void check_free(struct check *c)
{
    for (size_t i = 0; i < c->nalerts; i++)
        cJSON_Delete(c->alerts[i].event);
    free(c->alerts);
    free(c->files);
    free(c->ids);
    free(c->recs);
    free(c->leases);
    free(c->merged);
    free(c->dups);
    free(c->blk);
    free(c->blk_tmp);
    free(c->gap_seen);
    if (c->dump)
        fclose(c->dump);
    free(c->o.logs);
    free(c->o.is_list);
}

/* Runs every check; 0 or -1 (input unreadable, message printed). */
__attribute__((warn_unused_result)) static int check_run(struct check *c)
{
    struct result *r = &c->r;

    c->files = calloc(c->o.nlogs, sizeof *c->files);
    if (!c->files)
        return -1;
    if (c->o.blocks) {
        c->blk = calloc((size_t)c->o.blocks, sizeof *c->blk);
        c->blk_tmp = calloc((size_t)c->o.blocks, sizeof *c->blk_tmp);
        if (!c->blk || !c->blk_tmp) {
            fprintf(stderr, "idpool-check: out of memory\n");
            return -1;
        }
    }
    if (c->o.gap_all) {
        c->gap_seen = calloc((size_t)(c->o.gap_hi - c->o.gap_lo + 1), sizeof *c->gap_seen);
        if (!c->gap_seen) {
            fprintf(stderr, "idpool-check: out of memory\n");
            return -1;
        }
    }
    if (c->o.dump) {
        c->dump = fopen(c->o.dump, "w");
        if (!c->dump) {
            fprintf(stderr, "idpool-check: %s: %s\n", c->o.dump, strerror(errno));
            return -1;
        }
    }
    for (uint32_t f = 0; f < c->o.nlogs; f++) {
        struct logfile *lf = &c->files[f];
        lf->path = c->o.logs[f];
        lf->is_list = c->o.is_list[f];
        memset(&c->cur, 0, sizeof c->cur);
        lf->rec_first = c->nrecs;
        if (input_scan(c, f, pass_load) < 0)
            return -1;
        lf->rec_end = c->nrecs;
        if (c->oom)
            return -1;
        if (!lf->is_list && lf->ids == 0 && !c->o.allow_empty) {
            fprintf(stderr,
                    "idpool-check: %s: byte offset %" PRIu64
                    ": no ID in the log (--allow-empty accepts it)\n",
                    lf->path, lf->size);
            return -1;
        }
        if (c->o.has_count && lf->ids != c->o.count) {
            r->count_mismatch++;
            add_example(r->ex_more, &r->n_ex_more,
                        "%s: %" PRIu64 " IDs, expected %" PRIu64 " (--count)", lf->path, lf->ids,
                        c->o.count);
        }
        if (c->o.blocks && c->cur.nblk) {
            r->bad_blocks++;
            add_example(r->ex_more, &r->n_ex_more,
                        "%s: %" PRIu64 " IDs is not a whole number of groups of %" PRIu64, lf->path,
                        lf->ids, c->o.blocks);
        }
        if (c->files[f].longest_empty > r->longest_empty) {
            r->longest_empty = c->files[f].longest_empty;
            r->longest_empty_file = f;
        }
    }
    r->ids = c->nids;
    if (r->ids == 0 && !c->o.allow_empty) {
        fprintf(stderr, "idpool-check: no ID in any input (--allow-empty accepts it)\n");
        return -1;
    }
    if (c->dump) {
        int bad = ferror(c->dump);
        if (fclose(c->dump) != 0 || bad) {
            c->dump = NULL;
            fprintf(stderr, "idpool-check: %s: write error\n", c->o.dump);
            return -1;
        }
        c->dump = NULL;
    }
    if (c->o.leases && (leases_load(c) < 0 || leases_check(c) < 0))
        return -1;
    if (c->o.llen && llen_check(c) < 0)
        return -1;
    if (c->o.alerts && alerts_load(c) < 0)
        return -1;
    if (c->o.monotonic && cross_check(c) < 0)
        return -1;
    free(c->recs);
    c->recs = NULL;
    sort_ids(c->ids, c->nids);
    if (walk_sorted(c) < 0)
        return -1;
    free(c->ids);
    c->ids = NULL;
    return dups_classify(c);
}

int main(int argc, char **argv)
{
    struct check c;
    int rc;

    memset(&c, 0, sizeof c);
    rc = parse_args(argc, argv, &c.o);
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr);
        free(c.o.logs);
        free(c.o.is_list);
        return rc > 0 ? 0 : EXIT_BAD;
    }
    if (check_run(&c) < 0) {
        check_free(&c);
        return EXIT_BAD;
    }
    if (c.o.json)
        rc = report_json(&c);
    else
        report_text(&c);
    rc = rc < 0 ? EXIT_BAD : violated(&c.r) ? EXIT_VIOLATION : 0;
    check_free(&c);
    return rc;
}
