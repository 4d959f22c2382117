/*
 * idpool-load: the load generator of the benchmarks and the consumer of the
 * chaos tests. One thread per connection, optional pipelining, an open-loop
 * rate schedule, a log-linear latency histogram, a per-100-ms timeline and
 * a binary log of every ID popped (interfaces: notes/interfaces.md).
 *
 *   idpool-load --port P --mode lpop --key 'idpool:{user}:pool' --batch 100 \
 *               --conns 4 --pipeline 16 --duration 10
 *
 * The client must stay cheap next to one redis-server on a small machine,
 * so the hot path allocates nothing per ID: hiredis only connects and
 * parses; its reader is given our own reply-object functions, which parse
 * each array element straight into a per-connection uint64 buffer instead
 * of building a redisReply per element. Requests are sent as RESP formatted
 * once at start (RPUSH: the same 1000-ID command every time) with write(2)
 * on the socket; replies are read with read(2) and fed to the reader.
 *
 * --sentinel H:P[,H:P...] --master NAME: the primary a Sentinel set names,
 * asked at every connect (src/lib/resolve.h), ROLE-checked; READONLY or
 * NOREPLICAS closes the connection (the next connect asks again); error
 * replies are counted by class too (reply_readonly, reply_noreplicas,
 * reply_loading).
 *
 * --cluster H:P[,H:P...]: a Redis Cluster from its seed nodes: every
 * connect goes to the primary of --key's slot in the slot table (one for
 * all connections, read with CLUSTER SLOTS when due: src/lib/route.h); a
 * MOVED patches the table (a read of it wanted) and connects again, to the
 * new owner, with or without --reconnect. ASK is not followed (a migrating
 * slot's requests are refused until it has moved; then MOVED); ASK,
 * TRYAGAIN and CLUSTERDOWN are error replies, counted (reply_moved,
 * reply_ask, reply_tryagain, reply_clusterdown) and waited out with
 * --reconnect.
 *
 * Chaos use: --record logs only requests whose reply was parsed, each ID
 * once; --reconnect survives restarts and partitions (connect and command
 * timeouts, backoff 50 ms doubling to 1 s; --backoff-ms 1:1 retries every
 * millisecond, to pop the moment a restarted Redis accepts). SIGTERM/SIGINT/--stop-file stop
 * sending, wait for the replies in flight (bounded by --timeout-ms) and
 * flush the logs; a second signal stops at once (logs still flushed).
 * Take consumers also log each IDPOOL_* refusal, with its time, to
 * PREFIX.<i>.refused (lines "t_send_ns t_recv_ns CODE"): the chaos suite
 * counts the IDPOOL_EPOCH refusals inside a Redis-rollback window.
 *
 * Exit status: 0 ok; 1 error (connection, I/O, an error reply without
 * --reconnect); 2 a malformed ID or reply; 64 bad usage.
 *
 * This file is the program: options, the threads, the stop flags and the
 * summary; each job is a file of its own (see load.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "keys.h"
#include "load.h"
#include "tools.h"

const char *const mode_names[] = {"lpop", "take", "incrby", "rpush", "llen", "subscribe"};
const char *const ekind_names[] = {
    "err_io",       "err_timeout",   "err_connect", "err_reply",
    "refused_rate", "refused_limit", "err_idpool",
};
const struct eclass_row eclasses[C_NCLASSES] = {
    [C_READONLY] = {"READONLY", "reply_readonly"},
    [C_NOREPLICAS] = {"NOREPLICAS", "reply_noreplicas"},
    [C_LOADING] = {"LOADING", "reply_loading"},
    [C_MOVED] = {"MOVED", "reply_moved"},
    [C_ASK] = {"ASK", "reply_ask"},
    [C_TRYAGAIN] = {"TRYAGAIN", "reply_tryagain"},
    [C_CLUSTERDOWN] = {"CLUSTERDOWN", "reply_clusterdown"},
};

/* 0 running, 1 graceful stop (drain in-flight), 2 stop now. Set by the
 * signal handler, the main thread (--stop-file) and a failing thread. */
atomic_int g_stop;

static void on_signal(int sig)
{
    (void)sig;
    int s = atomic_load(&g_stop);
    atomic_store(&g_stop, s < 2 ? s + 1 : 2);
}

void request_stop(int level)
{
    int s = atomic_load(&g_stop);
    while (s < level && !atomic_compare_exchange_weak(&g_stop, &s, level))
        ;
}

/* Sleeps until the monotonic time t (never longer than one poll slice, so
 * callers re-check the stop flags). */
void sleep_until(uint64_t t)
{
    uint64_t now = tools_ns();
    struct timespec ts;

    if (t <= now)
        return;
    if (t - now > POLL_SLICE_NS)
        t = now + POLL_SLICE_NS;
    ts.tv_sec = (time_t)(t / NS_PER_S);
    ts.tv_nsec = (long)(t % NS_PER_S);
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL); /* EINTR: caller loops */
}

static void usage(FILE *f)
{
    fprintf(f, "usage: idpool-load --port P --mode MODE --key KEY [options]\n"
               "  --host H            Redis host (127.0.0.1)\n"
               "  --port P            Redis port\n"
               "  --sentinel H:P[,H:P...]  instead of --host/--port: the primary these\n"
               "                      sentinels name (asked at every connect; ROLE must say\n"
               "                      master; READONLY or NOREPLICAS: connect again)\n"
               "  --master NAME       with --sentinel: the primary's name there\n"
               "  --cluster H:P[,H:P...]  instead of --host/--port: a Redis Cluster from\n"
               "                      these seeds, the primary of --key's slot (MOVED:\n"
               "                      the table patched, connect again there)\n"
               "  --password PW       AUTH password\n"
               "  --db N              database (0)\n"
               "  --mode MODE         lpop | take | incrby | rpush | llen | subscribe\n"
               "  --key KEY           list (lpop, rpush, llen), pool (take: meta = KEY with\n"
               "                      ':pool' -> ':meta'), counter (incrby), channel (subscribe)\n"
               "  --batch N           IDs per request (1; lpop 1 = LPOP without count)\n"
               "  --push-base N       rpush: the IDs N, N+1, ... N+batch-1, shaped as the\n"
               "                      daemon's of a monotonic application (default:\n"
               "                      pseudo-random IDs of 16..19 digits)\n"
               "  --conns C           connections, one thread each (1)\n"
               "  --pipeline D        requests in flight per connection (1)\n"
               "  --duration S        stop after S seconds (float)\n"
               "  --count N           stop after N IDs in total (llen: samples,\n"
               "                      subscribe: messages)\n"
               "  --rate R            requests/s over all connections, open loop (0 = flat out)\n"
               "  --burst-us U        --rate: each wake-up also sends the requests due in the\n"
               "                      next U microseconds, pipelined (0; a paced drain's\n"
               "                      CPU is mostly its wake-ups)\n"
               "  --record PREFIX     log every reply to PREFIX.<i>.bin (needs --pipeline 1);\n"
               "                      take: each IDPOOL_* refusal to PREFIX.<i>.refused\n"
               "  --timeline FILE     lines 't_s ids empties errors' per 100 ms\n"
               "  --hist FILE         lines 'latency_us count'\n"
               "  --reconnect         survive connection errors and error replies\n"
               "  --backoff-ms MIN:MAX  waits between reconnects and after error replies,\n"
               "                      doubling from MIN to MAX (50:1000)\n"
               "  --timeout-ms MS     connect and command timeout (2000)\n"
               "  --stop-file FILE    stop gracefully once FILE exists\n"
               "  --interval-ms MS    llen: sampling period (20)\n"
               "  --out FILE          llen / subscribe: output lines\n"
               "  --empty-pause-us U  flat out: pause after an empty or refused reply (1000)\n"
               "  --json              summary as one JSON object\n"
               "Exit: 0 ok, 1 error, 2 malformed ID or reply, 64 usage.\n");
}

static int opt_u64(const char *name, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (parse_id(s, strlen(s), out) != 0 || *out < lo || *out > hi) {
        fprintf(stderr,
                "idpool-load: %s: expected an integer in [%" PRIu64 ", %" PRIu64 "], got '%s'\n",
                name, lo, hi, s);
        return -1;
    }
    return 0;
}

static int opt_double(const char *name, const char *s, double *out)
{
    char *end;

    errno = 0;
    *out = strtod(s, &end);
    if (s[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(*out) || *out < 0) {
        fprintf(stderr, "idpool-load: %s: expected a number >= 0, got '%s'\n", name, s);
        return -1;
    }
    return 0;
}

static int usage_error(const char *flag, const char *why)
{
    fprintf(stderr, "idpool-load: %s: %s\n", flag, why);
    return -1;
}

/* Checks combinations once every flag is read. */
static int check_opts(struct opts *o, bool have_mode, bool set_conns, bool set_batch)
{
    bool pop = o->mode == MODE_LPOP || o->mode == MODE_TAKE || o->mode == MODE_INCRBY;
    bool sampler = o->mode == MODE_LLEN || o->mode == MODE_SUBSCRIBE;

    if (o->cluster != NULL) {
        char url[1024], err[256];

        if (o->port != 0 || o->sentinel != NULL || o->db != 0)
            return usage_error("--cluster", "not with --port, --sentinel or --db");
        snprintf(url, sizeof url, "redis-cluster://%.1000s", o->cluster);
        if (redis_url_parse(url, &o->curl, err, sizeof err) != 0)
            return usage_error("--cluster", err);
        if (o->password && (o->curl.password = strdup(o->password)) == NULL)
            return usage_error("--cluster", "out of memory");
    } else if (o->sentinel != NULL) {
        char url[1024], err[256];

        if (o->port != 0)
            return usage_error("--sentinel", "not with --port");
        if (o->master == NULL)
            return usage_error("--sentinel", "needs --master NAME");
        snprintf(url, sizeof url, "redis-sentinel://%.900s/%d#%.64s", o->sentinel, o->db,
                 o->master);
        if (redis_url_parse(url, &o->surl, err, sizeof err) != 0)
            return usage_error("--sentinel", err);
    } else if (o->master != NULL) {
        return usage_error("--master", "only with --sentinel");
    } else if (o->port == 0) {
        return usage_error("--port", "required");
    }
    if (!have_mode)
        return usage_error("--mode", "required");
    if (o->key == NULL || o->key[0] == '\0')
        return usage_error("--key", "required");
    if (o->record != NULL && !pop)
        return usage_error("--record", "only with --mode lpop, take or incrby");
    if (o->record != NULL && o->pipeline != 1)
        return usage_error("--record", "requires --pipeline 1");
    if (sampler) {
        if (o->out == NULL)
            return usage_error("--out", "required with --mode llen and subscribe");
        if (set_conns && o->conns != 1)
            return usage_error("--conns", "llen and subscribe use one connection");
        if (o->pipeline != 1)
            return usage_error("--pipeline", "llen and subscribe send one request at a time");
        if (o->rate > 0)
            return usage_error("--rate", "not with llen / subscribe (llen: --interval-ms)");
        if (set_batch)
            return usage_error("--batch", "not with llen / subscribe");
    } else if (o->out != NULL) {
        return usage_error("--out", "only with --mode llen and subscribe");
    }
    if (o->push_base && o->mode != MODE_RPUSH)
        return usage_error("--push-base", "only with --mode rpush");
    if (o->mode == MODE_TAKE) {
        size_t n = strlen(o->key);

        if (keys_kind_of(o->key, n) != KEYS_POOL)
            return usage_error("--key", "take: must end in ':pool' (meta = ...:meta)");
        o->meta = keys_sibling(o->key, n, KEYS_META);
        if (o->meta == NULL)
            return usage_error("--key", "out of memory");
    }
    return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    bool have_mode = false, set_conns = false, set_batch = false;
    uint64_t n;
    int i;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--reconnect") == 0) {
            o->reconnect = true;
            continue;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0)
            return usage_error(a, "unexpected argument");
        if (v == NULL)
            return usage_error(a, "unknown option or missing value");
        i++;
        if (strcmp(a, "--host") == 0) {
            o->host = v;
        } else if (strcmp(a, "--port") == 0) {
            if (opt_u64(a, v, 1, 65535, &n) != 0)
                return -1;
            o->port = (int)n;
        } else if (strcmp(a, "--sentinel") == 0) {
            o->sentinel = v;
        } else if (strcmp(a, "--master") == 0) {
            o->master = v;
        } else if (strcmp(a, "--cluster") == 0) {
            o->cluster = v;
        } else if (strcmp(a, "--password") == 0) {
            o->password = v;
        } else if (strcmp(a, "--db") == 0) {
            if (opt_u64(a, v, 0, 65535, &n) != 0)
                return -1;
            o->db = (int)n;
        } else if (strcmp(a, "--mode") == 0) {
            size_t m;

            for (m = 0; m < sizeof mode_names / sizeof *mode_names; m++)
                if (strcmp(v, mode_names[m]) == 0)
                    break;
            if (m == sizeof mode_names / sizeof *mode_names)
                return usage_error(a, "expected lpop, take, incrby, rpush, llen or subscribe");
            o->mode = (enum mode)m;
            have_mode = true;
        } else if (strcmp(a, "--key") == 0) {
            o->key = v;
        } else if (strcmp(a, "--batch") == 0) {
            if (opt_u64(a, v, 1, MAX_BATCH, &o->batch) != 0)
                return -1;
            set_batch = true;
        } else if (strcmp(a, "--push-base") == 0) {
            if (opt_u64(a, v, 1, (uint64_t)INT64_MAX - MAX_BATCH, &o->push_base) != 0)
                return -1;
        } else if (strcmp(a, "--conns") == 0) {
            if (opt_u64(a, v, 1, MAX_CONNS, &n) != 0)
                return -1;
            o->conns = (unsigned)n;
            set_conns = true;
        } else if (strcmp(a, "--pipeline") == 0) {
            if (opt_u64(a, v, 1, MAX_PIPELINE, &n) != 0)
                return -1;
            o->pipeline = (unsigned)n;
        } else if (strcmp(a, "--duration") == 0) {
            if (opt_double(a, v, &o->duration) != 0)
                return -1;
            if (o->duration <= 0 || o->duration > 1e7)
                return usage_error(a, "expected seconds in (0, 1e7]");
        } else if (strcmp(a, "--count") == 0) {
            if (opt_u64(a, v, 1, INT64_MAX, &o->count) != 0)
                return -1;
        } else if (strcmp(a, "--rate") == 0) {
            if (opt_double(a, v, &o->rate) != 0)
                return -1;
            if (o->rate > 1e9)
                return usage_error(a, "at most 1e9 requests/s");
        } else if (strcmp(a, "--burst-us") == 0) {
            uint64_t us;

            if (opt_u64(a, v, 0, 1000000, &us) != 0)
                return -1;
            o->burst_ns = us * 1000;
        } else if (strcmp(a, "--record") == 0) {
            o->record = v;
        } else if (strcmp(a, "--timeline") == 0) {
            o->timeline = v;
        } else if (strcmp(a, "--hist") == 0) {
            o->hist = v;
        } else if (strcmp(a, "--timeout-ms") == 0) {
            if (opt_u64(a, v, 1, 3600000, &o->timeout_ms) != 0)
                return -1;
        } else if (strcmp(a, "--stop-file") == 0) {
            o->stop_file = v;
        } else if (strcmp(a, "--interval-ms") == 0) {
            if (opt_u64(a, v, 1, 3600000, &o->interval_ms) != 0)
                return -1;
        } else if (strcmp(a, "--out") == 0) {
            o->out = v;
        } else if (strcmp(a, "--backoff-ms") == 0) {
            char lo[24], *colon = strchr(v, ':');

            if (colon == NULL || (size_t)(colon - v) >= sizeof lo)
                return usage_error(a, "expected MIN:MAX milliseconds");
            memcpy(lo, v, (size_t)(colon - v));
            lo[colon - v] = '\0';
            if (opt_u64(a, lo, 1, 60000, &o->backoff_min_ms) != 0 ||
                opt_u64(a, colon + 1, 1, 60000, &o->backoff_max_ms) != 0)
                return -1;
            if (o->backoff_max_ms < o->backoff_min_ms)
                return usage_error(a, "MAX is below MIN");
        } else if (strcmp(a, "--empty-pause-us") == 0) {
            if (opt_u64(a, v, 0, 10000000, &o->empty_pause_us) != 0)
                return -1;
        } else {
            return usage_error(a, "unknown option");
        }
    }
    return check_opts(o, have_mode, set_conns, set_batch);
}

static void *conn_main(void *arg)
{
    struct conn *cn = arg;
    struct run *run = cn->run;
    int rc = conn_ensure(cn, true);

    atomic_fetch_add(&run->ready, 1);
    while (rc == 0 && !atomic_load(&run->go) && atomic_load(&g_stop) == 0)
        sleep_until(tools_ns() + NS_PER_MS);
    if (rc == 0 && atomic_load(&run->go)) {
        if (cn->o->mode == MODE_LLEN)
            run_llen(cn);
        else if (cn->o->mode == MODE_SUBSCRIBE)
            run_subscribe(cn);
        else
            run_requests(cn);
    }
    cn->end_ns = tools_ns();
    if (rec_flush(cn) != 0 && cn->fatal == 0)
        cn->fatal = EXIT_ERROR;
    conn_close(cn);
    atomic_fetch_sub(&run->live, 1);
    return NULL;
}

/* Waits for the threads, turning the stop file into a graceful stop. */
static void supervise(struct run *run, const struct opts *o)
{
    uint64_t checked = 0;

    while (atomic_load(&run->live) > 0) {
        uint64_t now = tools_ns();

        if (o->stop_file != NULL && now - checked >= 20 * NS_PER_MS) {
            checked = now;
            if (access(o->stop_file, F_OK) == 0)
                request_stop(1);
        }
        sleep_until(now + 5 * NS_PER_MS);
    }
}

int main(int argc, char **argv)
{
    struct opts o = {
        .host = "127.0.0.1",
        .batch = 1,
        .conns = 1,
        .pipeline = 1,
        .timeout_ms = 2000,
        .interval_ms = 20,
        .empty_pause_us = 1000,
        .backoff_min_ms = BACKOFF_MIN_MS,
        .backoff_max_ms = BACKOFF_MAX_MS,
    };
    struct run run = {.o = &o};
    struct conn **cns = NULL;
    struct totals *tot = NULL;
    struct sigaction sa;
    unsigned started = 0;
    int rc = 0;

    if (parse_args(argc, argv, &o) != 0) {
        fprintf(stderr, "(idpool-load --help for usage)\n");
        free(o.meta);
        redis_url_free(&o.surl);
        redis_url_free(&o.curl);
        return EXIT_USAGE;
    }
    pthread_mutex_init(&run.route_mu, NULL);
    if (o.cluster != NULL &&
        (run.route = route_new(&o.curl, (unsigned)o.timeout_ms, NULL, NULL)) == NULL) {
        fprintf(stderr, "idpool-load: out of memory\n");
        rc = EXIT_ERROR;
        goto out;
    }
    if (o.mode == MODE_RPUSH && make_push_ids(&run, o.batch) != 0) {
        fprintf(stderr, "idpool-load: out of memory\n");
        rc = EXIT_ERROR;
        goto out;
    }
    if (o.mode != MODE_SUBSCRIBE) {
        int len = format_request(&run, o.batch, &run.cmd);

        if (len < 0) {
            fprintf(stderr, "idpool-load: cannot format the request\n");
            rc = EXIT_ERROR;
            goto out;
        }
        run.cmd_len = (size_t)len;
    }

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: blocking calls return EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    cns = calloc(o.conns, sizeof *cns);
    if (cns == NULL) {
        fprintf(stderr, "idpool-load: out of memory\n");
        rc = EXIT_ERROR;
        goto out;
    }
    for (unsigned i = 0; i < o.conns; i++) {
        cns[i] = calloc(1, sizeof **cns);
        if (cns[i] == NULL || conn_init(cns[i], &run, i) != 0) {
            if (cns[i] == NULL)
                fprintf(stderr, "idpool-load: out of memory\n");
            rc = EXIT_ERROR;
            goto out;
        }
    }

    /* Connect all, then start the clock for everyone at once. */
    atomic_store(&run.live, o.conns);
    for (started = 0; started < o.conns; started++) {
        if (pthread_create(&cns[started]->th, NULL, conn_main, cns[started]) != 0) {
            fprintf(stderr, "idpool-load: cannot start a thread\n");
            atomic_fetch_sub(&run.live, o.conns - started);
            request_stop(2);
            rc = EXIT_ERROR;
            break;
        }
    }
    while (atomic_load(&run.ready) < started && atomic_load(&g_stop) == 0)
        sleep_until(tools_ns() + NS_PER_MS);
    {
        uint64_t t0 = tools_ns();

        atomic_store(&run.t0_ns, t0);
        if (o.duration > 0)
            atomic_store(&run.deadline_ns, t0 + (uint64_t)(o.duration * 1e9));
        atomic_store(&run.go, 1);
    }
    supervise(&run, &o);
    for (unsigned i = 0; i < started; i++)
        pthread_join(cns[i]->th, NULL);

    for (unsigned i = 0; i < started; i++) {
        if (cns[i]->fatal == EXIT_MALFORMED)
            rc = EXIT_MALFORMED;
        else if (cns[i]->fatal != 0 && rc == 0)
            rc = cns[i]->fatal;
    }
    tot = totals_merge(cns, started);
    if (tot == NULL) {
        fprintf(stderr, "idpool-load: out of memory\n");
        rc = rc ? rc : EXIT_ERROR;
        goto out;
    }
    if (totals_write(&o, tot) != 0 && rc == 0)
        rc = EXIT_ERROR;
    print_summary(&o, tot, atomic_load(&run.t0_ns));

out:
    if (cns != NULL) {
        for (unsigned i = 0; i < o.conns; i++)
            if (cns[i] != NULL && conn_free(cns[i]) != 0 && rc == 0)
                rc = EXIT_ERROR;
        free(cns);
    }
    totals_free(tot);
    if (run.push_ids != NULL)
        for (uint64_t i = 0; i < o.batch; i++)
            free(run.push_ids[i]);
    free(run.push_ids);
    free(run.push_lens);
    if (run.cmd != NULL)
        redisFreeCommand(run.cmd);
    route_free(run.route);
    pthread_mutex_destroy(&run.route_mu);
    free(o.meta);
    redis_url_free(&o.surl);
    redis_url_free(&o.curl);
    return rc;
}
