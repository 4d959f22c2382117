/*
 * idpool-clientload — drives libidpool for the tests (the benchmark's tool is
 * idpool-clientbench, test/tools/clientbench.c):
 *
 *   idpool-clientload [--threads T] [--ids N] [--take K] [--record PREFIX]
 *                     [--timeout-ms MS] [--mod M] [--buffer B] [--max-batch K]
 *                     [--timeline FILE] [--ca-file PEM] [--failback-ms MS]
 *                     [--until-failbacks N [--min-ids M] [--max-secs S]]
 *                     [--cycles C] [--stop-file F] [--pause-ms P] [--flush] APP ENV...
 *
 * --cycles C creates a client, takes 100 IDs with idpool_next from each of
 * T threads and frees it, C times (for leak checkers).
 *
 * T threads take N IDs each from application APP through one client made
 * of the environments ENV... (preference order); APP may be several,
 * a,b,c: thread i takes those of the (i mod n)-th (on a Cluster, apps of
 * different primaries through one client). With idpool_next, or with
 * idpool_take in batches of K. With --record PREFIX, thread i writes the
 * pop log PREFIX.i.bin that idpool-check reads (test/tools/poplog.h; client
 * kind POPLOG_TAKE; with idpool_next, up to 1024 consecutive IDs make
 * one record). Prints one line of counters at the end (ids, IDs by
 * remainder modulo --mod M, the client's stats summed over the
 * applications, seconds). Exit status 0
 * when every thread got all its IDs, 1 otherwise.
 *
 * --until-failbacks N: the threads stop, successfully, once the client
 * failed back N times and (--min-ids M) the threads took at least M IDs in
 * all: a fault test need not guess how long to run, and what it asserts
 * is what stopped the load. --ids is then the most each takes; exit status
 * 1 when they ran out first, or when --max-secs S passed first.
 *
 * ENV is a Redis URL or an issuer's http[s]://TOKEN@host:port (--ca-file:
 * the CAs that verify an https issuer). A timeout (--timeout-ms) is counted
 * and the thread goes on, but 5 in a row or any other error end it; a
 * thread that could not get all its IDs prints the error and
 * idpool_app_last_error().
 *
 * --flush: each record is written out (fflush) as it is made, so a test can
 * count the IDs the threads got while they run (libidpool's buffer holds
 * IDs it took from Redis that no thread got yet: meta's `taken` is not it).
 *
 * --pause-ms P: each thread sleeps P ms after each take (or batch of
 * idpool_next), to pace it.
 *
 * --stop-file F: the threads run until F exists (or they took --ids each),
 * and an error does not end a thread: it tries again 1 ms later (what a
 * client does through a failover; the chaos scenarios stop it with F).
 *
 * --timeline FILE: while the threads run, the main thread samples the
 * application's stats every 5 ms and writes a line, flushed at once,
 *   t_ms=<CLOCK_MONOTONIC ms> env=<n> failovers=<n> failbacks=<n>
 * for the first sample and whenever env, failovers or failbacks changed
 * (a failover and its failback inside one sample show as the counters
 * alone). CLOCK_MONOTONIC is system-wide: the chaos scenarios compare it
 * with their own timestamps to time failovers and failbacks.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "idpool.h"
#include "poplog.h"
#include "tools.h"

#define REC_MAX     1024
#define MOD_MAX     16
#define TIMELINE_MS 5 /* --timeline's sampling interval */

struct worker {
    pthread_t th;
    struct idpool_app *app;
    uint64_t want, got;
    unsigned take, mod;
    enum idpool_rc rc; /* the first error */
    FILE *out;
    uint64_t by_rem[MOD_MAX];
};

/* Workers that finished (--timeline samples until all have). */
static _Atomic unsigned finished;
/* --until-failbacks: set when enough failbacks happened (and --min-ids
 * were taken), or --max-secs passed; the workers stop. */
static _Atomic int stop_now;
/* IDs taken by all the workers so far (for --min-ids). */
static _Atomic uint64_t taken_all;
/* --stop-file: the file whose existence stops the workers; errors are retried. */
static const char *stop_file;
/* --pause-ms: between two takes of a worker. */
static unsigned pause_ms;
static int flush; /* --flush */

static void *work(void *arg)
{
    struct worker *w = arg;
    uint64_t buf[REC_MAX];
    unsigned timeouts = 0;

    while (w->got < w->want && !atomic_load_explicit(&stop_now, memory_order_relaxed)) {
        size_t n = 0, room = w->want - w->got < REC_MAX ? (size_t)(w->want - w->got) : REC_MAX;
        uint64_t t0 = tools_ns();
        enum idpool_rc rc = IDPOOL_OK;

        if (w->take == 0) {
            while (n < room && (rc = idpool_next(w->app, &buf[n])) == IDPOOL_OK)
                n++;
        } else {
            rc = idpool_next_n(w->app, buf, w->take < room ? w->take : room, &n);
        }
        if (n && w->out &&
            (poplog_write(w->out, t0, tools_ns(), buf, (uint32_t)n) < 0 ||
             (flush && fflush(w->out) != 0))) {
            w->rc = IDPOOL_ENOMEM;
            break;
        }
        if (pause_ms) {
            const struct timespec p = {pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L};
            nanosleep(&p, NULL);
        }
        for (size_t i = 0; w->mod && i < n; i++)
            w->by_rem[buf[i] % w->mod]++;
        w->got += n;
        atomic_fetch_add_explicit(&taken_all, n, memory_order_relaxed);
        timeouts = rc == IDPOOL_ETIMEDOUT ? timeouts + 1 : 0;
        if (rc != IDPOOL_OK) {
            if (w->rc == 0)
                w->rc = rc;
            /* A timeout is counted; the others, or 5 timeouts in a row, end the
             * thread, unless it runs until the stop file (then 1 ms, and again). */
            if (stop_file) {
                const struct timespec ms = {0, 1000000L};
                nanosleep(&ms, NULL);
            } else if (rc != IDPOOL_ETIMEDOUT || timeouts == 5) {
                break;
            }
        }
    }
    atomic_fetch_add(&finished, 1);
    return NULL;
}

/* The counters of the distinct applications of w[0..n) added up (env and batch: the first's). */
static void stats_sum(struct worker *w, unsigned n, struct idpool_stats *sum)
{
    struct idpool_stats st;

    memset(sum, 0, sizeof(*sum));
    sum->size = st.size = sizeof(st);
    for (unsigned t = 0; t < n; t++) {
        unsigned u = 0;

        while (u < t && w[u].app != w[t].app)
            u++;
        if (u < t) /* counted already */
            continue;
        idpool_app_stats(w[t].app, &st);
        if (t == 0) {
            sum->env = st.env;
            sum->batch = st.batch;
        }
        sum->blocks += st.blocks;
        sum->waits += st.waits;
        sum->timeouts += st.timeouts;
        sum->takes += st.takes;
        sum->taken += st.taken;
        sum->refused_epoch += st.refused_epoch;
        sum->refused_rate += st.refused_rate;
        sum->empty += st.empty;
        sum->errors += st.errors;
        sum->failovers += st.failovers;
        sum->failbacks += st.failbacks;
        sum->moved += st.moved;
        sum->asked += st.asked;
        sum->cluster_retries += st.cluster_retries;
    }
}

/*
 * --timeline: samples a's stats every TIMELINE_MS until all the
 * workers finished; a line to f for the first sample and each change of
 * environment or of the failover/failback counters. -1 on a write error.
 */
static int timeline(FILE *f, struct idpool_app *a, unsigned threads)
{
    struct idpool_stats st, last = {0};
    const struct timespec d = {0, TIMELINE_MS * 1000000L};
    int first = 1;

    st.size = sizeof(st);
    while (atomic_load(&finished) < threads) {
        uint64_t t = tools_ns() / 1000000u;

        idpool_app_stats(a, &st);
        if (first || st.env != last.env || st.failovers != last.failovers ||
            st.failbacks != last.failbacks) {
            if (fprintf(f, "t_ms=%" PRIu64 " env=%d failovers=%" PRIu64 " failbacks=%" PRIu64 "\n",
                        t, st.env, st.failovers, st.failbacks) < 0 ||
                fflush(f) != 0)
                return -1;
            last = st;
            first = 0;
        }
        nanosleep(&d, NULL);
    }
    return 0;
}

/*
 * --until-failbacks N: watches a's failbacks until N and min_ids IDs taken
 * (done), or until the workers finished or max_ns passed (not done).
 */
struct watch {
    pthread_t th;
    struct idpool_app *a;
    unsigned threads;
    uint64_t want;    /* failbacks */
    uint64_t min_ids; /* and IDs taken in all */
    uint64_t max_ns;  /* at most this long after the start (0: no bound) */
    int done;         /* both reached */
};

static void *watch_failbacks(void *arg)
{
    struct watch *wa = arg;
    struct idpool_stats st;
    const struct timespec d = {0, TIMELINE_MS * 1000000L};
    uint64_t start = tools_ns();

    st.size = sizeof(st);
    while (atomic_load(&finished) < wa->threads) {
        idpool_app_stats(wa->a, &st);
        if (st.failbacks >= wa->want && atomic_load(&taken_all) >= wa->min_ids) {
            wa->done = 1;
            atomic_store(&stop_now, 1);
            break;
        }
        if (wa->max_ns && tools_ns() - start >= wa->max_ns) {
            atomic_store(&stop_now, 1);
            break;
        }
        nanosleep(&d, NULL);
    }
    return NULL;
}

/* --stop-file: sets stop_now once the file exists or every worker finished. */
static void *watch_stop_file(void *arg)
{
    const struct timespec d = {0, TIMELINE_MS * 1000000L};
    unsigned threads = *(unsigned *)arg;

    while (atomic_load(&finished) < threads) {
        if (access(stop_file, F_OK) == 0) {
            atomic_store(&stop_now, 1);
            break;
        }
        nanosleep(&d, NULL);
    }
    return NULL;
}

/* The application of thread t in the list "a,b,c" (the (t mod n)-th) into key: 0, or -1. */
static int app_nth(const char *list, unsigned t, char *key, size_t len)
{
    unsigned n = 1;
    const char *p = list, *e;

    for (const char *q = list; *q; q++)
        n += *q == ',';
    for (t %= n; t > 0; t--)
        p = strchr(p, ',') + 1;
    e = strchr(p, ',');
    if (!e)
        e = p + strlen(p);
    if (e == p || (size_t)(e - p) >= len)
        return -1;
    memcpy(key, p, (size_t)(e - p));
    key[e - p] = '\0';
    return 0;
}

int main(int argc, char **argv)
{
    unsigned threads = 1, take = 0, timeout = 0, mod = 0, buffer = 0, max_batch = 0,
             failback_ms = 0;
    unsigned long cycles = 0;
    uint64_t until_failbacks = 0, min_ids = 0, max_secs = 0;
    struct watch wa = {0};
    pthread_t stop_th;
    uint64_t ids = 1000000, got = 0;
    const char *prefix = NULL, *timeline_path = NULL, *ca_file = NULL;
    FILE *tl = NULL;
    int i, ok = 1;
    struct idpool_options o;
    struct idpool_client *c;
    struct idpool_stats st;
    struct worker *w;
    char err[256];
    struct timespec t0, t1;

    for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--flush") == 0) {
            flush = 1;
            i--; /* a flag: no value */
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "idpool-clientload: %s needs a value\n", argv[i]);
            return 2;
        }
        if (strcmp(argv[i], "--threads") == 0)
            threads = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--ids") == 0)
            ids = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--take") == 0)
            take = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--timeout-ms") == 0)
            timeout = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--record") == 0)
            prefix = argv[i + 1];
        else if (strcmp(argv[i], "--timeline") == 0)
            timeline_path = argv[i + 1];
        else if (strcmp(argv[i], "--mod") == 0)
            mod = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--buffer") == 0)
            buffer = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--max-batch") == 0)
            max_batch = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--cycles") == 0)
            cycles = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--until-failbacks") == 0)
            until_failbacks = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--min-ids") == 0)
            min_ids = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--max-secs") == 0)
            max_secs = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--failback-ms") == 0)
            failback_ms = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--ca-file") == 0)
            ca_file = argv[i + 1];
        else if (strcmp(argv[i], "--stop-file") == 0)
            stop_file = argv[i + 1];
        else if (strcmp(argv[i], "--pause-ms") == 0)
            pause_ms = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "idpool-clientload: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (argc - i < 2 || threads == 0 || threads > 64 || take > REC_MAX || mod > MOD_MAX ||
        ((min_ids || max_secs) && !until_failbacks) || min_ids > ids * threads ||
        (stop_file && until_failbacks)) {
        fprintf(stderr, "usage: idpool-clientload [--threads T] [--ids N] [--take K<=1024] "
                        "[--record PREFIX] [--timeout-ms MS] [--mod M<=16] "
                        "[--timeline FILE] [--stop-file F] [--pause-ms P] [--flush] APP ENV...\n");
        return 2;
    }
    idpool_options_init(&o);
    o.timeout_ms = timeout;
    o.buffer = buffer;
    o.max_batch = max_batch;
    o.ca_file = ca_file;
    o.failback_ms = failback_ms;
    for (unsigned long k = 0; k < cycles; k++) {
        struct idpool_app *a;
        uint64_t id;

        if (idpool_client_new((const char *const *)argv + i + 1, (size_t)(argc - i - 1), &o, &c,
                              err, sizeof(err)) != IDPOOL_OK) {
            fprintf(stderr, "idpool-clientload: %s\n", err);
            return 2;
        }
        if (idpool_app_get(c, argv[i], &a) != IDPOOL_OK) {
            fprintf(stderr, "idpool-clientload: bad application key '%s'\n", argv[i]);
            return 2;
        }
        for (int j = 0; j < 100; j++) {
            enum idpool_rc rc = idpool_next(a, &id);
            if (rc != IDPOOL_OK) {
                fprintf(stderr, "idpool-clientload: cycle %lu: %s\n", k, idpool_strerror(rc));
                return 1;
            }
        }
        idpool_client_free(c);
        if (k + 1 == cycles) {
            printf("clientload: %lu clients created, used and freed\n", cycles);
            return 0;
        }
    }
    if (idpool_client_new((const char *const *)argv + i + 1, (size_t)(argc - i - 1), &o, &c, err,
                          sizeof(err)) != IDPOOL_OK) {
        fprintf(stderr, "idpool-clientload: %s\n", err);
        return 2;
    }
    w = calloc(threads, sizeof(*w));
    if (w == NULL)
        return 2;
    if (timeline_path && (tl = fopen(timeline_path, "w")) == NULL) {
        perror(timeline_path);
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned t = 0; t < threads; t++) {
        char key[128];

        w[t].want = ids;
        w[t].take = take;
        w[t].mod = mod;
        if (app_nth(argv[i], t, key, sizeof(key)) < 0 ||
            idpool_app_get(c, key, &w[t].app) != IDPOOL_OK) {
            fprintf(stderr, "idpool-clientload: bad application key in '%s'\n", argv[i]);
            return 2;
        }
        if (prefix) {
            char path[4096];

            snprintf(path, sizeof(path), "%s.%u.bin", prefix, t);
            w[t].out = poplog_open(path, t, POPLOG_TAKE);
            if (w[t].out == NULL) {
                perror(path);
                return 2;
            }
        }
        pthread_create(&w[t].th, NULL, work, &w[t]);
    }
    if (stop_file)
        pthread_create(&stop_th, NULL, watch_stop_file, &threads);
    if (until_failbacks) {
        wa = (struct watch){.a = w[0].app,
                            .threads = threads,
                            .want = until_failbacks,
                            .min_ids = min_ids,
                            .max_ns = max_secs * 1000000000ULL};
        pthread_create(&wa.th, NULL, watch_failbacks, &wa);
    }
    if (tl) {
        if (timeline(tl, w[0].app, threads) < 0) {
            perror(timeline_path);
            ok = 0;
        }
        if (fclose(tl) != 0)
            ok = 0;
    }
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(w[t].th, NULL);
        got += w[t].got;
        if (w[t].got < w[t].want && !atomic_load(&stop_now)) {
            ok = 0;
            char why[400];
            idpool_app_last_error(w[t].app, why, sizeof(why));
            fprintf(stderr,
                    "idpool-clientload: thread %u got %" PRIu64 " of %" PRIu64
                    ": %s; last error: %s\n",
                    t, w[t].got, w[t].want, idpool_strerror(w[t].rc), why[0] ? why : "none");
        }
        if (w[t].out)
            fclose(w[t].out);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (stop_file)
        pthread_join(stop_th, NULL);
    if (until_failbacks) {
        pthread_join(wa.th, NULL);
        if (!wa.done) {
            ok = 0;
            fprintf(stderr,
                    "idpool-clientload: %s before %" PRIu64 " failback(s) and %" PRIu64
                    " IDs (%" PRIu64 " taken)\n",
                    atomic_load(&stop_now) ? "--max-secs passed" : "the threads ended",
                    until_failbacks, min_ids, got);
        }
    }
    if (mod) {
        printf("clientload: by remainder modulo %u:", mod);
        for (unsigned r = 0; r < mod; r++) {
            uint64_t k = 0;
            for (unsigned t = 0; t < threads; t++)
                k += w[t].by_rem[r];
            printf(" r%u=%" PRIu64, r, k);
        }
        printf("\n");
    }
    stats_sum(w, threads, &st);
    printf("clientload: ids=%" PRIu64 " secs=%.3f blocks=%" PRIu64 " waits=%" PRIu64
           " timeouts=%" PRIu64 " takes=%" PRIu64 " taken=%" PRIu64 " epoch=%" PRIu64
           " rate=%" PRIu64 " empty=%" PRIu64 " errors=%" PRIu64 " failovers=%" PRIu64
           " failbacks=%" PRIu64 " env=%d batch=%u moved=%" PRIu64 " asked=%" PRIu64
           " cluster_retries=%" PRIu64 "\n",
           got, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
           st.blocks, st.waits, st.timeouts, st.takes, st.taken, st.refused_epoch, st.refused_rate,
           st.empty, st.errors, st.failovers, st.failbacks, st.env, st.batch, st.moved, st.asked,
           st.cluster_retries);
    idpool_client_free(c);
    free(w);
    return ok ? 0 : 1;
}
