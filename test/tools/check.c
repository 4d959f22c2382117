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
 * Pop logs: the format of test/tools/poplog.h, one per consumer; a client
 * kind of the header that is not POPLOG_LPOP or POPLOG_TAKE is an error.
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
 *
 * This file is the program: options, the passes in order (check_run), and
 * what every pass uses; each job is a file of its own (see check.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

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
int grow(void *p, size_t *cap, size_t need, size_t sz)
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

void add_example(struct example *ex, size_t *n, const char *fmt, ...)
{
    va_list ap;

    if (*n >= MAX_EXAMPLES)
        return;
    va_start(ap, fmt);
    vsnprintf(ex[*n].text, sizeof ex[*n].text, fmt, ap);
    va_end(ap);
    (*n)++;
}

/* The reference time of relative timings: --t0-ns, the first pop, or the first alert. */
uint64_t t0_of(const struct check *c)
{
    if (c->o.has_t0)
        return c->o.t0;
    if (c->r.has_t_first)
        return c->r.t_first;
    return c->nalerts ? c->alerts[0].t_ns : 0;
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
