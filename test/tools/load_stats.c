/*
 * load_stats — idpool-load's counters: each connection's latency histogram
 * (hist.h, in microseconds), its per-100-ms timeline and its errors by kind;
 * their totals over all connections at the end, the --timeline and --hist
 * files, and the summary line (or --json object) the benchmarks parse.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "hist.h"
#include "load.h"

/* A latency into the connection's histogram (us; its maximum is exact). */
void lat_add(struct conn *cn, uint64_t lat_ns)
{
    hist_add(cn->hist, lat_ns / 1000);
}

/* The timeline bucket of monotonic time t; NULL on out of memory (the
 * timeline is then incomplete, nothing else is affected). */
struct tl_bucket *tl_at(struct conn *cn, uint64_t t)
{
    uint64_t t0 = atomic_load_explicit(&cn->run->t0_ns, memory_order_relaxed);
    size_t i = t0 != 0 && t > t0 ? (size_t)((t - t0) / TIMELINE_NS) : 0;

    if (i >= cn->tl_cap) {
        size_t cap = cn->tl_cap ? cn->tl_cap : 1024;
        struct tl_bucket *nt;

        while (cap <= i)
            cap *= 2;
        nt = realloc(cn->tl, cap * sizeof *nt);
        if (nt == NULL)
            return NULL;
        memset(nt + cn->tl_cap, 0, (cap - cn->tl_cap) * sizeof *nt);
        cn->tl = nt;
        cn->tl_cap = cap;
    }
    if (i >= cn->tl_len)
        cn->tl_len = i + 1;
    return &cn->tl[i];
}

/* An error of kind k at time t: counted in all, by kind and in the timeline. */
void count_error(struct conn *cn, enum ekind k, uint64_t t)
{
    struct tl_bucket *b = tl_at(cn, t);

    cn->errors++;
    cn->ekind[k]++;
    if (b != NULL)
        b->errors++;
}

/* An error reply's class (enum eclass) counted: the class, or -1 (none of them). */
int count_reply_class(struct conn *cn, const char *text)
{
    for (int k = 0; k < C_NCLASSES; k++) {
        size_t n = strlen(eclasses[k].prefix);

        if (strncmp(text, eclasses[k].prefix, n) == 0 && (text[n] == ' ' || text[n] == '\0')) {
            cn->eclass[k]++;
            return k;
        }
    }
    return -1;
}

/* Totals over all connections. */
struct totals {
    uint64_t requests, ids, empties, errors, ekind[E_NKINDS], eclass[C_NCLASSES];
    struct hist *hist; /* latency, us */
    uint64_t end_ns;
    struct tl_bucket *tl;
    size_t tl_len;
};

void totals_free(struct totals *t)
{
    if (t == NULL)
        return;
    free(t->hist);
    free(t->tl);
    free(t);
}

struct totals *totals_merge(struct conn **cns, unsigned n)
{
    struct totals *t = calloc(1, sizeof *t);
    size_t len = 0;

    if (t == NULL)
        return NULL;
    for (unsigned i = 0; i < n; i++)
        if (cns[i]->tl_len > len)
            len = cns[i]->tl_len;
    t->tl = calloc(len ? len : 1, sizeof *t->tl);
    t->hist = hist_new(HIST_LINEAR_BITS, HIST_SUB_BITS, HIST_TOP_BITS);
    if (t->tl == NULL || t->hist == NULL) {
        totals_free(t);
        return NULL;
    }
    t->tl_len = len;
    for (unsigned i = 0; i < n; i++) {
        struct conn *cn = cns[i];

        t->requests += cn->requests;
        t->ids += cn->ids_total;
        t->empties += cn->empties;
        t->errors += cn->errors;
        for (int k = 0; k < E_NKINDS; k++)
            t->ekind[k] += cn->ekind[k];
        for (int k = 0; k < C_NCLASSES; k++)
            t->eclass[k] += cn->eclass[k];
        hist_merge(t->hist, cn->hist);
        if (cn->end_ns > t->end_ns)
            t->end_ns = cn->end_ns;
        for (size_t b = 0; b < cn->tl_len; b++) {
            t->tl[b].ids += cn->tl[b].ids;
            t->tl[b].empties += cn->tl[b].empties;
            t->tl[b].errors += cn->tl[b].errors;
        }
    }
    return t;
}

/* --timeline: lines "t_s ids empties errors" per 100 ms. */
static void timeline_lines(FILE *f, const struct totals *t)
{
    for (size_t i = 0; i < t->tl_len; i++)
        fprintf(f, "%.3f %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", (double)i * 0.1, t->tl[i].ids,
                t->tl[i].empties, t->tl[i].errors);
}

/* --hist: lines "latency_us count", the lowest latency of each bucket used. */
static void hist_lines(FILE *f, const struct totals *t)
{
    for (unsigned i = 0; i < t->hist->nbuckets; i++)
        if (t->hist->n[i] != 0)
            fprintf(f, "%" PRIu64 " %" PRIu64 "\n", hist_lo(t->hist, i), t->hist->n[i]);
}

/* Writes path with lines(); 0, or -1 with a message. */
static int write_file(const char *path, void (*lines)(FILE *, const struct totals *),
                      const struct totals *t)
{
    FILE *f = fopen(path, "w");

    if (f != NULL) {
        lines(f, t);
        if (fclose(f) == 0)
            return 0;
    }
    fprintf(stderr, "idpool-load: %s: %s\n", path, strerror(errno));
    return -1;
}

/* --timeline and --hist, each when given: 0, or -1 when one could not be written. */
int totals_write(const struct opts *o, const struct totals *t)
{
    int rc = 0;

    if (o->timeline != NULL && write_file(o->timeline, timeline_lines, t) != 0)
        rc = -1;
    if (o->hist != NULL && write_file(o->hist, hist_lines, t) != 0)
        rc = -1;
    return rc;
}

/* The summary line (or --json object); t0 is the start of the measured run,
 * printed last as t0_ns (CLOCK_MONOTONIC, system-wide): with secs, it places
 * the run's --timeline on a clock shared by every process, so the windows
 * of loads run side by side can be overlapped (the benchmark's Cluster
 * section). */
void print_summary(const struct opts *o, const struct totals *t, uint64_t t0)
{
    double secs = t->end_ns > t0 ? (double)(t->end_ns - t0) / 1e9 : 0;
    uint64_t max_us = t->hist->max;
    uint64_t p50, p99, p999;
    uint64_t rate = secs > 0 ? (uint64_t)llround((double)t->ids / secs) : 0;
    struct rusage ru;
    uint64_t cpu_ms = 0;

    /* subscribe: the histogram holds PINGs, not messages */
    p50 = hist_quantile(t->hist, 0.50);
    p99 = hist_quantile(t->hist, 0.99);
    p999 = hist_quantile(t->hist, 0.999);
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        cpu_ms = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                 (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
    if (o->json) {
        printf("{\"mode\":\"%s\",\"batch\":%" PRIu64 ",\"conns\":%u,\"pipeline\":%u,"
               "\"secs\":%.2f,\"requests\":%" PRIu64 ",\"ids\":%" PRIu64 ",\"ids_per_s\":%" PRIu64
               ",\"empties\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"p50_us\":%" PRIu64
               ",\"p99_us\":%" PRIu64 ",\"p999_us\":%" PRIu64 ",\"max_us\":%" PRIu64,
               mode_names[o->mode], o->batch, o->conns, o->pipeline, secs, t->requests, t->ids,
               rate, t->empties, t->errors, p50, p99, p999, max_us);
        for (int k = 0; k < E_NKINDS; k++)
            printf(",\"%s\":%" PRIu64, ekind_names[k], t->ekind[k]);
        for (int k = 0; k < C_NCLASSES; k++)
            printf(",\"%s\":%" PRIu64, eclasses[k].name, t->eclass[k]);
        printf(",\"cpu_ms\":%" PRIu64 ",\"t0_ns\":%" PRIu64 "}\n", cpu_ms, t0);
    } else {
        printf("load: mode=%s batch=%" PRIu64 " conns=%u pipeline=%u secs=%.2f requests=%" PRIu64
               " ids=%" PRIu64 " ids_per_s=%" PRIu64 " empties=%" PRIu64 " errors=%" PRIu64
               " p50_us=%" PRIu64 " p99_us=%" PRIu64 " p999_us=%" PRIu64 " max_us=%" PRIu64,
               mode_names[o->mode], o->batch, o->conns, o->pipeline, secs, t->requests, t->ids,
               rate, t->empties, t->errors, p50, p99, p999, max_us);
        for (int k = 0; k < E_NKINDS; k++)
            if (t->ekind[k] != 0)
                printf(" %s=%" PRIu64, ekind_names[k], t->ekind[k]);
        for (int k = 0; k < C_NCLASSES; k++)
            if (t->eclass[k] != 0)
                printf(" %s=%" PRIu64, eclasses[k].name, t->eclass[k]);
        printf(" cpu_ms=%" PRIu64 " t0_ns=%" PRIu64 "\n", cpu_ms, t0);
    }
    fflush(stdout);
}
