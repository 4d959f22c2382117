/*
 * idpool-clientbench — libidpool's idpool_next() measured, for the client
 * section of the benchmark (test/bench/client.py):
 *
 *   idpool-clientbench --mode throughput [--threads T] [--calls N] [--slices K]
 *                      [--cpus LIST] [--max-batch B] APP ENV...
 *   idpool-clientbench --mode sustained [--threads T] [--secs S] [--warmup S]
 *                      [--rate R] [--untimed] [--cpus LIST] [--max-batch B]
 *                      [--buffer IDS] [--hist FILE] APP ENV...
 *
 * throughput: the buffer is filled with N x T IDs first (takes of B IDs,
 * default 1000), then, in the same process, K slices (default 20) of N / K
 * calls per thread: T threads of atomic_fetch_add on one shared counter,
 * then T threads of idpool_next; untimed loops, each run timed from the
 * first thread's start to the last one's end. Reported: medians of the
 * slices, the ratio within each slice (so that a slice the machine was
 * busy in weighs no more than another). The background thread goes on
 * refilling meanwhile (the buffer is below its low water once the calls
 * start). Prints
 *   clientbench: mode=throughput threads=T calls=... next_per_s=...
 *   atomic_per_s=... ratio=... (and the counters of the idpool_next runs)
 *
 * sustained: T threads call idpool_next continuously for WARMUP s (not
 * counted: the take size adapts to the demand) and then S s, while the
 * background thread refills the buffer from Redis; flat out, or at R IDs/s
 * in all (paced: each thread makes the calls that are due every
 * millisecond, back to back, and sleeps until the next millisecond). Each
 * call is timed with two clock_gettime into a log-linear histogram (32
 * buckets per power of two, about 3 %); --untimed leaves the timing out
 * (for the rate alone). The client has libidpool's default options but
 * max_batch B and buffer IDS when given. Prints
 *   clientbench: mode=sustained threads=T ... ids_per_s=... waits=...
 *   p50_ns=... p99_ns=... p999_ns=... p9999_ns=... max_ns=... timer_p50_ns=...
 * where waits (and the other counters) are the client's idpool_stats over
 * the S s, timer_p50_ns is the median of an empty timed call (the
 * clock's own cost, included in every latency) and preempted counts the
 * measuring threads' involuntary context switches in the S s (a call
 * the scheduler interrupted is slow without having waited for IDs).
 *
 * --cpus LIST (e.g. "1" or "0,1") pins thread i to the (i mod n)-th CPU of
 * LIST; the background thread is never pinned. Exit status 0, 1 when a call
 * failed or the buffer never filled, 2 on a usage or set-up error.
 */
#define _GNU_SOURCE /* pthread_setaffinity_np */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "hist.h"
#include "idpool.h"
#include "tools.h"

#define THREADS_MAX 64
#define CPUS_MAX    64
#define HSUB_BITS   5        /* latencies (ns): 2^HSUB_BITS buckets per power of two, */
#define HLIN_BITS   6        /* exact below 2^HLIN_BITS */
#define TICK_NS     1000000u /* a paced thread's calls are made every millisecond */
#define BLOCK       256      /* libidpool's IDs per thread block (src/lib/client.c) */
#define FILL_S      300      /* the buffer must fill within this */
#define CALIBRATE   1000000u /* empty timed calls of the clock calibration */

enum phase { P_WAIT, P_WARMUP, P_MEASURE, P_STOP };

/* One measuring thread. */
struct worker {
    pthread_t th;
    unsigned idx;
    struct idpool_app *app; /* NULL: the atomic counter */
    int cpu;                /* pinned to it; -1: not pinned */
    uint64_t n;             /* throughput: calls to make */
    double rate;            /* sustained: calls per second of this thread; 0: flat out */
    int timed;              /* sustained: time each call */
    uint64_t start, end;    /* ns, around the counted calls */
    uint64_t calls, errors; /* counted calls, of them failed */
    uint64_t sum;           /* of the IDs: the loop is not optimised away */
    long preempted;         /* involuntary context switches while counted */
    struct hist *h, *timer;
};

static _Atomic uint64_t counter; /* the in-process counter of the comparison */
static _Atomic int phase;
static _Atomic unsigned ready;

static void sleep_ns(uint64_t d)
{
    struct timespec ts = {(time_t)(d / 1000000000u), (long)(d % 1000000000u)};

    nanosleep(&ts, NULL);
}

/* --- threads ---------------------------------------------------------- */

static void pin(int cpu)
{
    cpu_set_t set;

    if (cpu < 0)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
        fprintf(stderr, "idpool-clientbench: cannot pin a thread to CPU %d\n", cpu);
}

/* throughput: n untimed calls once every thread is ready. */
static void *throughput_thread(void *arg)
{
    struct worker *w = arg;
    uint64_t id, sum = 0, n = w->n;

    pin(w->cpu);
    atomic_fetch_add(&ready, 1);
    while (atomic_load_explicit(&phase, memory_order_acquire) != P_MEASURE)
        ;
    w->start = tools_ns();
    if (w->app) {
        for (uint64_t k = 0; k < n; k++) {
            if (idpool_next(w->app, &id) != IDPOOL_OK) {
                w->errors++;
                break;
            }
            sum += id;
        }
    } else {
        for (uint64_t k = 0; k < n; k++)
            sum += atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
    }
    w->end = tools_ns();
    w->sum = sum;
    w->calls = n;
    return NULL;
}

/* Involuntary context switches of this thread so far. */
static long nivcsw(void)
{
    struct rusage ru;

    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}

/* One call, timed into h when timed. */
static inline void one_call(struct worker *w, int timed, int counted)
{
    uint64_t id = 0, t0 = 0;
    enum idpool_rc rc;

    if (timed)
        t0 = tools_ns();
    rc = idpool_next(w->app, &id);
    if (timed && counted)
        hist_add(w->h, tools_ns() - t0);
    if (counted) {
        w->calls++;
        w->errors += rc != IDPOOL_OK;
    }
    w->sum += id;
}

/* sustained: calls until P_STOP, counted in P_MEASURE; flat out or paced. */
static void *sustained_thread(void *arg)
{
    struct worker *w = arg;
    uint64_t t0, due_done = 0;
    int p;

    pin(w->cpu);
    for (unsigned k = 0; w->timed && k < CALIBRATE; k++) { /* the clock's own cost */
        uint64_t a = tools_ns();
        hist_add(w->timer, tools_ns() - a);
    }
    atomic_fetch_add(&ready, 1);
    while (atomic_load_explicit(&phase, memory_order_acquire) == P_WAIT)
        ;
    t0 = tools_ns();
    while ((p = atomic_load_explicit(&phase, memory_order_relaxed)) != P_STOP) {
        int counted = p == P_MEASURE;

        if (counted && w->start == 0) {
            w->start = tools_ns();
            w->preempted = -nivcsw();
        }
        if (w->rate <= 0) {
            for (unsigned k = 0; k < 4096; k++)
                one_call(w, w->timed, counted);
            continue;
        }
        /* paced: the calls due by now, then sleep to the next tick */
        {
            uint64_t now = tools_ns(), due = (uint64_t)((double)(now - t0) * w->rate / 1e9);
            struct timespec ts;
            uint64_t next;

            while (due_done < due) {
                one_call(w, w->timed, counted);
                due_done++;
            }
            next = now - (now - t0) % TICK_NS + TICK_NS;
            ts.tv_sec = (time_t)(next / 1000000000u);
            ts.tv_nsec = (long)(next % 1000000000u);
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        }
    }
    w->end = tools_ns();
    w->preempted += nivcsw();
    return NULL;
}

/* "0,2,3" -> cpus; returns how many, -1 when malformed. */
static int parse_cpus(const char *s, int *cpus)
{
    int n = 0;

    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);

        if (end == s || v < 0 || v >= CPU_SETSIZE || n == CPUS_MAX)
            return -1;
        cpus[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return n;
}

static int cpu_of(const int *cpus, int ncpus, unsigned t)
{
    return ncpus > 0 ? cpus[t % (unsigned)ncpus] : -1;
}

static struct idpool_stats stats_of(struct idpool_app *a)
{
    struct idpool_stats st;

    memset(&st, 0, sizeof(st));
    st.size = sizeof(st);
    idpool_app_stats(a, &st);
    return st;
}

/* T threads of throughput_thread (app NULL: the atomic); calls per second. */
static double throughput_run(struct idpool_app *app, unsigned threads, uint64_t n, const int *cpus,
                             int ncpus, uint64_t *errors)
{
    struct worker w[THREADS_MAX];
    uint64_t start = UINT64_MAX, end = 0;

    atomic_store(&phase, P_WAIT);
    atomic_store(&ready, 0);
    for (unsigned t = 0; t < threads; t++) {
        w[t] = (struct worker){.idx = t, .app = app, .n = n, .cpu = cpu_of(cpus, ncpus, t)};
        pthread_create(&w[t].th, NULL, throughput_thread, &w[t]);
    }
    while (atomic_load(&ready) < threads) /* all running, spinning on the start */
        sleep_ns(100000);
    atomic_store_explicit(&phase, P_MEASURE, memory_order_release);
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(w[t].th, NULL);
        *errors += w[t].errors;
        start = w[t].start < start ? w[t].start : start;
        end = w[t].end > end ? w[t].end : end;
    }
    return (double)n * threads / ((double)(end - start) / 1e9);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return a < b ? -1 : a > b;
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * The buffer filled with n x threads IDs, then `slices` slices, each n /
 * slices calls per thread of the atomic and then of idpool_next: medians
 * of the slices (a slice the scheduler interrupted does not count more
 * than any other; the ratio is taken within each slice, so both sides of
 * it had the machine in the same state).
 */
static int throughput(struct idpool_app *a, unsigned threads, uint64_t n, unsigned slices,
                      const int *cpus, int ncpus)
{
    uint64_t per = n / slices, errors = 0, deadline = tools_ns() + FILL_S * 1000000000ull;
    uint64_t want = per * slices * threads + 2 * BLOCK * threads; /* the blocks' rounding */
    struct idpool_stats s0, s1;
    double *at = calloc(slices, sizeof(double)), *nx = calloc(slices, sizeof(double));
    double *ra = calloc(slices, sizeof(double)), best_next = 0, best_atomic = 0;
    int rc = 1;

    if (at == NULL || nx == NULL || ra == NULL)
        goto out;
    do { /* the buffer filled first: next() is measured from memory */
        sleep_ns(20000000);
        s0 = stats_of(a);
    } while (s0.buffered < want && tools_ns() < deadline);
    if (s0.buffered < want) {
        fprintf(stderr, "idpool-clientbench: the buffer never held %" PRIu64 " IDs (%" PRIu64 ")\n",
                want, s0.buffered);
        goto out;
    }
    s0 = stats_of(a);
    for (unsigned k = 0; k < slices; k++) {
        at[k] = throughput_run(NULL, threads, per, cpus, ncpus, &errors);
        nx[k] = throughput_run(a, threads, per, cpus, ncpus, &errors);
        ra[k] = nx[k] / at[k];
        best_atomic = at[k] > best_atomic ? at[k] : best_atomic;
        best_next = nx[k] > best_next ? nx[k] : best_next;
    }
    s1 = stats_of(a);
    printf("clientbench: mode=throughput threads=%u calls=%" PRIu64 " slices=%u next_per_s=%.0f "
           "atomic_per_s=%.0f ratio=%.3f next_best_per_s=%.0f atomic_best_per_s=%.0f "
           "buffered_before=%" PRIu64 " waits=%" PRIu64 " blocks=%" PRIu64 " takes=%" PRIu64
           " errors=%" PRIu64 "\n",
           threads, per * slices * threads, slices, median(nx, slices), median(at, slices),
           median(ra, slices), best_next, best_atomic, s0.buffered, s1.waits - s0.waits,
           s1.blocks - s0.blocks, s1.takes - s0.takes, errors);
    rc = errors ? 1 : 0;
out:
    free(at);
    free(nx);
    free(ra);
    return rc;
}

static int write_hist(const char *path, const struct hist *h)
{
    FILE *f = fopen(path, "w");

    if (f == NULL)
        return -1;
    for (unsigned i = 0; i < h->nbuckets; i++)
        if (h->n[i])
            fprintf(f, "%" PRIu64 " %" PRIu64 "\n", hist_hi(h, i), h->n[i]);
    return fclose(f) == 0 ? 0 : -1;
}

static int sustained(struct idpool_app *a, unsigned threads, double secs, double warmup,
                     double rate, int timed, const int *cpus, int ncpus, const char *hist_path)
{
    struct worker *w = calloc(threads, sizeof(*w));
    struct hist *all = hist_new(HLIN_BITS, HSUB_BITS, 64);
    struct hist *timer = hist_new(HLIN_BITS, HSUB_BITS, 64);
    struct idpool_stats s0, s1;
    long preempted = 0;
    uint64_t calls = 0, errors = 0, start = UINT64_MAX, end = 0, deadline;
    double span;
    int rc = 0;

    if (w == NULL || all == NULL || timer == NULL)
        return 2;
    deadline = tools_ns() + FILL_S * 1000000000ull;
    do { /* the first take in: the load starts on a buffer that has IDs */
        sleep_ns(20000000);
        s0 = stats_of(a);
    } while (s0.takes == 0 && tools_ns() < deadline);
    atomic_store(&phase, P_WAIT);
    atomic_store(&ready, 0);
    for (unsigned t = 0; t < threads; t++) {
        w[t].idx = t;
        w[t].app = a;
        w[t].cpu = cpu_of(cpus, ncpus, t);
        w[t].rate = rate / threads;
        w[t].timed = timed;
        w[t].h = hist_new(HLIN_BITS, HSUB_BITS, 64);
        w[t].timer = hist_new(HLIN_BITS, HSUB_BITS, 64);
        if (w[t].h == NULL || w[t].timer == NULL)
            return 2;
        pthread_create(&w[t].th, NULL, sustained_thread, &w[t]);
    }
    while (atomic_load(&ready) < threads)
        sleep_ns(1000000);
    atomic_store_explicit(&phase, P_WARMUP, memory_order_release);
    sleep_ns((uint64_t)(warmup * 1e9));
    s0 = stats_of(a);
    atomic_store_explicit(&phase, P_MEASURE, memory_order_release);
    sleep_ns((uint64_t)(secs * 1e9));
    atomic_store_explicit(&phase, P_STOP, memory_order_release);
    s1 = stats_of(a);
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(w[t].th, NULL);
        calls += w[t].calls;
        errors += w[t].errors;
        preempted += w[t].preempted;
        if (w[t].start && w[t].start < start)
            start = w[t].start;
        end = w[t].end > end ? w[t].end : end;
        hist_merge(all, w[t].h);
        hist_merge(timer, w[t].timer);
        free(w[t].h);
        free(w[t].timer);
    }
    span = start < end ? (double)(end - start) / 1e9 : secs;
    printf("clientbench: mode=sustained threads=%u timed=%d rate=%.0f secs=%.3f calls=%" PRIu64
           " ids_per_s=%.0f errors=%" PRIu64 " waits=%" PRIu64 " timeouts=%" PRIu64
           " blocks=%" PRIu64 " takes=%" PRIu64 " taken=%" PRIu64 " empty=%" PRIu64
           " take_errors=%" PRIu64 " batch=%u buffered=%" PRIu64 " preempted=%ld",
           threads, timed, rate, span, calls, (double)calls / span, errors, s1.waits - s0.waits,
           s1.timeouts - s0.timeouts, s1.blocks - s0.blocks, s1.takes - s0.takes,
           s1.taken - s0.taken, s1.empty - s0.empty, s1.errors - s0.errors, s1.batch, s1.buffered,
           preempted);
    if (timed)
        printf(" p50_ns=%" PRIu64 " p99_ns=%" PRIu64 " p999_ns=%" PRIu64 " p9999_ns=%" PRIu64
               " max_ns=%" PRIu64 " over_1us=%" PRIu64 " over_100us=%" PRIu64
               " timer_p50_ns=%" PRIu64,
               hist_quantile(all, 0.5), hist_quantile(all, 0.99), hist_quantile(all, 0.999),
               hist_quantile(all, 0.9999), all->max, hist_above(all, 1000), hist_above(all, 100000),
               hist_quantile(timer, 0.5));
    printf("\n");
    if (hist_path && timed && write_hist(hist_path, all) < 0) {
        perror(hist_path);
        rc = 2;
    }
    free(all);
    free(timer);
    free(w);
    return rc ? rc : errors ? 1 : 0;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: idpool-clientbench --mode throughput|sustained [--threads T<=%d] "
            "[--calls N] [--slices K] [--max-batch B] [--secs S] [--warmup S] [--rate R] "
            "[--untimed] [--buffer IDS] [--cpus LIST] [--hist FILE] APP ENV...\n",
            THREADS_MAX);
    return 2;
}

int main(int argc, char **argv)
{
    unsigned threads = 1, max_batch = 0, slices = 20, buffer = 0;
    uint64_t calls = 10000000;
    double secs = 5, warmup = 1, rate = 0;
    int i, timed = 1, ncpus = 0, cpus[CPUS_MAX], rc;
    const char *mode = NULL, *hist_path = NULL;
    struct idpool_options o;
    struct idpool_client *c;
    struct idpool_app *a;
    char err[256];

    for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *opt = argv[i], *v;

        if (strcmp(opt, "--untimed") == 0) {
            timed = 0;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "idpool-clientbench: %s needs a value\n", opt);
            return 2;
        }
        v = argv[++i];
        if (strcmp(opt, "--mode") == 0)
            mode = v;
        else if (strcmp(opt, "--threads") == 0)
            threads = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(opt, "--calls") == 0)
            calls = strtoull(v, NULL, 10);
        else if (strcmp(opt, "--slices") == 0)
            slices = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(opt, "--max-batch") == 0)
            max_batch = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(opt, "--secs") == 0)
            secs = strtod(v, NULL);
        else if (strcmp(opt, "--warmup") == 0)
            warmup = strtod(v, NULL);
        else if (strcmp(opt, "--rate") == 0)
            rate = strtod(v, NULL);
        else if (strcmp(opt, "--buffer") == 0)
            buffer = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(opt, "--hist") == 0)
            hist_path = v;
        else if (strcmp(opt, "--cpus") == 0) {
            if ((ncpus = parse_cpus(v, cpus)) < 0) {
                fprintf(stderr, "idpool-clientbench: bad CPU list '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "idpool-clientbench: unknown option %s\n", opt);
            return usage();
        }
    }
    if (argc - i < 2 || mode == NULL || threads == 0 || threads > THREADS_MAX || calls == 0 ||
        slices == 0 || calls < slices || secs <= 0 || warmup < 0 || rate < 0 ||
        (strcmp(mode, "throughput") != 0 && strcmp(mode, "sustained") != 0))
        return usage();
    idpool_options_init(&o);
    if (strcmp(mode, "throughput") == 0) { /* a buffer of all the calls, filled in big takes */
        o.buffer = (unsigned)(calls * threads + 2 * BLOCK * threads);
        o.max_batch = max_batch ? max_batch : 1000;
        o.min_batch = o.max_batch;
    } else {
        o.max_batch = max_batch;
        o.buffer = buffer;
    }
    if (idpool_client_new((const char *const *)argv + i + 1, (size_t)(argc - i - 1), &o, &c, err,
                          sizeof(err)) != IDPOOL_OK) {
        fprintf(stderr, "idpool-clientbench: %s\n", err);
        return 2;
    }
    if (idpool_app_get(c, argv[i], &a) != IDPOOL_OK) {
        fprintf(stderr, "idpool-clientbench: bad application key '%s'\n", argv[i]);
        idpool_client_free(c);
        return 2;
    }
    if (strcmp(mode, "throughput") == 0)
        rc = throughput(a, threads, calls, slices, cpus, ncpus);
    else
        rc = sustained(a, threads, secs, warmup, rate, timed, cpus, ncpus, hist_path);
    idpool_client_free(c);
    return rc;
}
