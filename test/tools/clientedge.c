/*
 * idpool-clientedge — libidpool at its edges, for the integration tests
 * (issue 18): fork(), and the deadline of one call.
 *
 *   idpool-clientedge fork [--children N] [--ids N] [--ca-file PEM] PREFIX APP ENV...
 *   idpool-clientedge deadline [--timeout-ms MS] [--count N] APP ENV...
 *
 * fork: one client of the environments ENV... takes one ID of APP with
 * idpool_next (the thread's block and the shared buffer now hold IDs),
 * then forks child 0 at once; a second thread of the parent then takes IDs
 * with idpool_next_n as fast as it can (the background thread keeps taking
 * from Redis) while the parent forks children 1..N-1, 20 ms apart. Every
 * child takes --ids IDs with idpool_next and --ids with idpool_next_n
 * (batches of 100) through the inherited client, frees it and exits; the
 * parent then takes --ids more. Every process writes its IDs to a pop log
 * (PREFIX.p0.bin and PREFIX.p1.bin for the parent's threads, PREFIX.cI.bin
 * for child I) for idpool-check. Prints
 *   clientedge: children=N ok=K parent_ids=P child_ids=C takes_during_forks=T forks=M
 * (T: the parent's takes while it forked; M: busy, or idle in an ASan
 * build, see IDLE_FORKS) and, for a child that failed, its error. Exit
 * status 0 when every process got all its IDs. --ca-file: the CAs that
 * verify an https issuer.
 *
 * deadline: one idpool_next_n of --count IDs (100) with timeout_ms --timeout-ms
 * (1000); prints
 *   clientedge: rc=<idpool_strerror> got=K ms=<how long the call took>
 * Exit status 0 whatever the call returned (the test judges it).
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "idpool.h"
#include "poplog.h"
#include "tools.h"

#define CHILDREN_MAX 64
#define BATCH        100
#define FORK_GAP_MS  20
#define CHILD_WAIT_S 60  /* a child running this long after the parent is hung: killed */
#define IDLE_MS      300 /* IDLE_FORKS: no take for this long means the client is idle */

/*
 * The AddressSanitizer runtime of GCC 12 (libasan) does not make its
 * allocator safe across fork(): a child deadlocks in malloc when another
 * thread of the parent was inside it at the fork (seen: the child's
 * background thread stuck in SizeClassAllocator64::GetFromAllocator, in 1
 * run of 4). That is the sanitizer's, not libidpool's (glibc's malloc is
 * fork-safe): under ASan every fork waits until the client is idle and no
 * second thread takes; the normal build forks while the background thread
 * is taking.
 */
#if defined(__SANITIZE_ADDRESS__)
#define IDLE_FORKS 1
#else
#define IDLE_FORKS 0
#endif

/* One pop log (tools.h) and how many IDs it holds. */
struct log {
    FILE *f;
    uint64_t n;
};

/* PREFIX.WHO.bin, consumer number `consumer`: 0, or -1. */
static int log_open(struct log *l, const char *prefix, const char *who, uint32_t consumer)
{
    char path[4096];

    snprintf(path, sizeof(path), "%s.%s.bin", prefix, who);
    l->n = 0;
    l->f = poplog_open(path, consumer, POPLOG_TAKE);
    if (l->f == NULL)
        perror(path);
    return l->f ? 0 : -1;
}

static int log_ids(struct log *l, uint64_t t0, const uint64_t *ids, uint32_t n)
{
    l->n += n;
    return poplog_write(l->f, t0, tools_ns(), ids, n);
}

static int log_close(struct log *l)
{
    return fclose(l->f) == 0 ? 0 : -1;
}

/* An error of app a to stderr: the call's code and what the client last heard. */
static void report(struct idpool_app *a, const char *who, const char *call, enum idpool_rc rc)
{
    char last[320];

    idpool_app_last_error(a, last, sizeof(last));
    fprintf(stderr, "clientedge: %s: %s: %s (last error: %s)\n", who, call, idpool_strerror(rc),
            last[0] ? last : "none");
}

/* n IDs with idpool_next, then n with idpool_next_n (batches of BATCH), into l: 0 or -1. */
static int take_ids(struct idpool_app *a, struct log *l, uint64_t n, const char *who)
{
    uint64_t ids[BATCH];

    for (uint64_t i = 0; i < n;) {
        uint64_t t0 = tools_ns();
        uint32_t k = 0;
        enum idpool_rc rc = IDPOOL_OK;

        while (k < BATCH && i < n && (rc = idpool_next(a, &ids[k])) == IDPOOL_OK) {
            k++;
            i++;
        }
        if ((k && log_ids(l, t0, ids, k) < 0) || rc != IDPOOL_OK) {
            report(a, who, "idpool_next", rc);
            return -1;
        }
    }
    for (uint64_t i = 0; i < n;) {
        uint64_t t0 = tools_ns();
        size_t got = 0, want = n - i < BATCH ? (size_t)(n - i) : BATCH;
        enum idpool_rc rc = idpool_next_n(a, ids, want, &got);

        if (got && log_ids(l, t0, ids, (uint32_t)got) < 0)
            rc = IDPOOL_ENOMEM;
        if (rc != IDPOOL_OK) {
            report(a, who, "idpool_next_n", rc);
            return -1;
        }
        i += got;
    }
    return 0;
}

/* The parent's second thread: takes until told to stop. */
struct drainer {
    pthread_t th;
    struct idpool_app *a;
    struct log l;
    atomic_int stop;
    int rc;
};

static void *drain(void *arg)
{
    struct drainer *d = arg;
    uint64_t ids[BATCH];

    while (!atomic_load(&d->stop)) {
        uint64_t t0 = tools_ns();
        size_t got = 0;
        enum idpool_rc rc = idpool_next_n(d->a, ids, BATCH, &got);

        if (got && log_ids(&d->l, t0, ids, (uint32_t)got) < 0)
            rc = IDPOOL_ENOMEM;
        if (rc != IDPOOL_OK) {
            report(d->a, "parent's second thread", "idpool_next_n", rc);
            d->rc = -1;
            break;
        }
    }
    return NULL;
}

/* IDLE_FORKS: wait (at most 10 s) until a's buffer holds IDs and no take came for IDLE_MS. */
static void wait_idle(struct idpool_app *a)
{
    const struct timespec tick = {0, 10 * 1000000L};
    struct idpool_stats st;
    uint64_t takes = UINT64_MAX, since = 0, t0 = tools_ns();

    st.size = sizeof(st);
    while (tools_ns() - t0 < 10000000000ull) {
        idpool_app_stats(a, &st);
        if (st.takes != takes || st.buffered == 0) {
            takes = st.takes;
            since = tools_ns();
        } else if (tools_ns() - since >= IDLE_MS * 1000000ull) {
            return;
        }
        nanosleep(&tick, NULL);
    }
}

/* A child: its IDs through the inherited client; never returns. */
static void child(struct idpool_client *c, struct idpool_app *a, const char *prefix, int i,
                  uint64_t ids)
{
    char who[32];
    struct log l;
    int st = 1;

    snprintf(who, sizeof(who), "c%d", i);
    if (log_open(&l, prefix, who, 2 + (uint32_t)i) == 0) {
        st = take_ids(a, &l, ids, who) == 0 ? 0 : 1;
        if (log_close(&l) < 0)
            st = 1;
    }
    idpool_client_free(c);
    /*
     * _exit: the parent's stdio buffers (its logs' unwritten records) are
     * not flushed a second time; and in a forked child of a threaded process
     * LeakSanitizer would count the parent's other threads' memory (their
     * stacks are gone here) as leaked.
     */
    _exit(st);
}

static int usage(void)
{
    fprintf(stderr, "usage: idpool-clientedge fork [--children N] [--ids N] [--ca-file PEM] "
                    "PREFIX APP ENV...\n"
                    "       idpool-clientedge deadline [--timeout-ms MS] [--count N] APP ENV...\n");
    return 2;
}

static int new_client(char **envs, int n, unsigned timeout_ms, const char *ca_file,
                      struct idpool_client **c)
{
    struct idpool_options o;
    char err[256];

    idpool_options_init(&o);
    o.timeout_ms = timeout_ms;
    o.ca_file = ca_file;
    if (idpool_client_new((const char *const *)envs, (size_t)n, &o, c, err, sizeof(err)) !=
        IDPOOL_OK) {
        fprintf(stderr, "clientedge: %s\n", err);
        return -1;
    }
    return 0;
}

static int cmd_fork(int argc, char **argv)
{
    unsigned children = 4;
    uint64_t ids = 2000, child_ids = 0, takes0;
    int i, ok = 0, rc = 0;
    pid_t pids[CHILDREN_MAX];
    struct idpool_client *c;
    struct idpool_app *a;
    struct idpool_stats st;
    struct drainer d = {0};
    struct log l;
    uint64_t id, t0;
    const char *prefix, *ca_file = NULL;

    for (i = 0; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--children") == 0)
            children = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--ids") == 0)
            ids = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--ca-file") == 0)
            ca_file = argv[i + 1];
        else
            return usage();
    }
    if (argc - i < 3 || children < 1 || children > CHILDREN_MAX)
        return usage();
    prefix = argv[i];
    if (new_client(argv + i + 2, argc - i - 2, 5000, ca_file, &c) < 0)
        return 1;
    if (idpool_app_get(c, argv[i + 1], &a) != IDPOOL_OK || log_open(&l, prefix, "p0", 0) < 0 ||
        log_open(&d.l, prefix, "p1", 1) < 0)
        return 1;
    t0 = tools_ns();
    rc = idpool_next(a, &id);
    if (rc != IDPOOL_OK || log_ids(&l, t0, &id, 1) < 0) {
        report(a, "parent", "idpool_next", rc);
        return 1;
    }
    st.size = sizeof(st);
    idpool_app_stats(a, &st);
    takes0 = st.takes;
    for (unsigned k = 0; k < children; k++) {
        if (IDLE_FORKS) {
            wait_idle(a);
        } else if (k == 1) { /* the others while the background thread keeps taking */
            d.a = a;
            if (pthread_create(&d.th, NULL, drain, &d) != 0)
                return 1;
        }
        if (k >= 1 && !IDLE_FORKS) {
            struct timespec gap = {0, FORK_GAP_MS * 1000000L};
            nanosleep(&gap, NULL);
        }
        pids[k] = fork();
        if (pids[k] < 0) {
            perror("fork");
            return 1;
        }
        if (pids[k] == 0)
            child(c, a, prefix, (int)k, ids);
    }
    idpool_app_stats(a, &st);
    if (children > 1 && !IDLE_FORKS) {
        atomic_store(&d.stop, 1);
        pthread_join(d.th, NULL);
    }
    if (d.rc < 0 || take_ids(a, &l, ids, "parent") < 0)
        rc = 1;
    t0 = tools_ns();
    for (unsigned k = 0; k < children; k++) {
        const struct timespec tick = {0, 10 * 1000000L};
        pid_t w;
        int ws;

        while ((w = waitpid(pids[k], &ws, WNOHANG)) == 0 &&
               tools_ns() - t0 < CHILD_WAIT_S * 1000000000ull)
            nanosleep(&tick, NULL);
        if (w == 0) {
            fprintf(stderr, "clientedge: child %u: hung (killed after %d s)\n", k, CHILD_WAIT_S);
            kill(pids[k], SIGKILL);
            w = waitpid(pids[k], &ws, 0);
            rc = 1;
            continue;
        }
        if (w < 0) {
            perror("waitpid");
            rc = 1;
            continue;
        }
        if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
            ok++;
            child_ids += 2 * ids;
        } else {
            fprintf(stderr, "clientedge: child %u: %s %d\n", k,
                    WIFEXITED(ws) ? "exit status" : "killed by signal",
                    WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
            rc = 1;
        }
    }
    if (log_close(&l) < 0 || log_close(&d.l) < 0)
        rc = 1;
    printf("clientedge: children=%u ok=%d parent_ids=%" PRIu64 " child_ids=%" PRIu64
           " takes_during_forks=%" PRIu64 " forks=%s\n",
           children, ok, l.n + d.l.n, child_ids, st.takes - takes0, IDLE_FORKS ? "idle" : "busy");
    idpool_client_free(c);
    return rc;
}

static int cmd_deadline(int argc, char **argv)
{
    unsigned timeout_ms = 1000;
    size_t count = 100, got = 0;
    uint64_t *ids, t0;
    struct idpool_client *c;
    struct idpool_app *a;
    enum idpool_rc rc;
    int i;

    for (i = 0; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--timeout-ms") == 0)
            timeout_ms = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--count") == 0)
            count = strtoul(argv[i + 1], NULL, 10);
        else
            return usage();
    }
    if (argc - i < 2 || count == 0 || (ids = calloc(count, sizeof(*ids))) == NULL)
        return usage();
    if (new_client(argv + i + 1, argc - i - 1, timeout_ms, NULL, &c) < 0)
        return 1;
    if (idpool_app_get(c, argv[i], &a) != IDPOOL_OK)
        return 1;
    t0 = tools_ns();
    rc = idpool_next_n(a, ids, count, &got);
    printf("clientedge: rc=%s got=%zu ms=%" PRIu64 "\n", idpool_strerror(rc), got,
           (tools_ns() - t0) / 1000000u);
    idpool_client_free(c);
    free(ids);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "fork") == 0)
        return cmd_fork(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "deadline") == 0)
        return cmd_deadline(argc - 2, argv + 2);
    return usage();
}
