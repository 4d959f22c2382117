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
 */
#define _GNU_SOURCE /* ppoll */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "keys.h"

#define EXIT_ERROR     1
#define EXIT_MALFORMED 2
#define EXIT_USAGE     64

#define NS_PER_MS      1000000ULL
#define NS_PER_S       1000000000ULL
#define POLL_SLICE_NS  (100 * NS_PER_MS) /* stop flags are checked this often */
#define TIMELINE_NS    (100 * NS_PER_MS) /* one timeline line per 100 ms */
#define BACKOFF_MIN_MS 50                /* --backoff-ms defaults */
#define BACKOFF_MAX_MS 1000
#define MAX_BATCH      1000000
#define MAX_CONNS      1024
#define MAX_PIPELINE   4096
#define READ_BUF       16384 /* per read(2); hiredis moves unread bytes every 1 KiB */
#define REC_BUF        (4u << 20)
#define REC_FLUSH_NS   NS_PER_S /* a killed consumer loses at most ~1 s of log */
#define PING_IDLE_NS   NS_PER_S /* subscribe: PING after this much silence */

/* Log-linear latency histogram, in microseconds: 1 us buckets below
 * 1024 us, then 128 buckets per power of two (< 0.8% wide) up to 2^24 us
 * (16.7 s); anything longer lands in the last bucket (max is exact). */
#define HIST_LINEAR  1024
#define HIST_SUBBITS 7
#define HIST_OCTAVES 14 /* 2^10 .. 2^24 us */
#define HIST_N       (HIST_LINEAR + (HIST_OCTAVES << HIST_SUBBITS))

/* The pop log header's client kind (idpool-check reports exposure per kind). */
#define LOG_KIND_LPOP 0
#define LOG_KIND_TAKE 1

enum mode { MODE_LPOP, MODE_TAKE, MODE_INCRBY, MODE_RPUSH, MODE_LLEN, MODE_SUBSCRIBE };
static const char *const mode_names[] = {"lpop", "take", "incrby", "rpush", "llen", "subscribe"};

/* Why a request failed; each kind is counted in errors and by name. */
enum ekind {
    E_IO,            /* connection lost, read/write error */
    E_TIMEOUT,       /* no reply within --timeout-ms */
    E_CONNECT,       /* a (re)connect attempt failed */
    E_REPLY,         /* an error reply (with --reconnect: LOADING, READONLY...) */
    E_REFUSED_RATE,  /* take: IDPOOL_RATE */
    E_REFUSED_LIMIT, /* take: IDPOOL_LIMIT */
    E_IDPOOL,        /* take: any other IDPOOL_* error */
    E_NKINDS
};
static const char *const ekind_names[] = {
    "err_io",       "err_timeout",   "err_connect", "err_reply",
    "refused_rate", "refused_limit", "err_idpool",
};

/* Command-line options. */
struct opts {
    const char *host;        /* Redis host */
    int port;                /* Redis port (required) */
    const char *password;    /* AUTH with this, if set */
    int db;                  /* SELECT this database */
    enum mode mode;          /* what to send */
    const char *key;         /* list / counter / channel */
    char *meta;              /* take: the meta key derived from key (owned) */
    uint64_t batch;          /* IDs per request */
    unsigned conns;          /* connections = threads */
    unsigned pipeline;       /* requests in flight per connection */
    double duration;         /* seconds, 0 = no limit */
    uint64_t count;          /* IDs in total (llen: samples; subscribe: messages), 0 = no limit */
    double rate;             /* requests/s over all connections, 0 = flat out */
    const char *record;      /* binary pop logs PREFIX.<i>.bin */
    const char *timeline;    /* per-100-ms lines */
    const char *hist;        /* latency buckets */
    bool reconnect;          /* survive connection errors */
    uint64_t timeout_ms;     /* connect and command timeout */
    const char *stop_file;   /* stop once this exists */
    uint64_t interval_ms;    /* llen sampling period */
    const char *out;         /* llen / subscribe lines */
    bool json;               /* summary as JSON */
    uint64_t empty_pause_us; /* flat out: pause after an empty or refused reply */
    uint64_t backoff_min_ms; /* first wait after a failure */
    uint64_t backoff_max_ms; /* doubling up to this */
};

/* Timeline bucket (100 ms). */
struct tl_bucket {
    uint64_t ids;
    uint64_t empties;
    uint64_t errors;
};

/* A request in flight. */
struct inflight {
    uint64_t send_ns;  /* just before its write(2) */
    uint64_t sched_ns; /* --rate: when it was due (latency starts here) */
    uint64_t want;     /* IDs asked for (claimed against --count) */
};

/* The reply being parsed, filled in by the reader callbacks below. */
struct rstate {
    int type;          /* top-level reply type, 0 = none yet */
    long long integer; /* INTEGER reply */
    size_t elements;   /* ARRAY reply: announced length */
    size_t nids;       /* IDs parsed into conn.ids */
    bool bad;          /* a malformed element or shape */
    char what[96];     /* the bad element, or the error / status text */
};

struct run;

/* One connection and its thread; everything here is private to the thread
 * until it is joined. */
struct conn {
    struct run *run;        /* shared state */
    const struct opts *o;   /* options */
    unsigned idx;           /* 0..conns-1, also the consumer_id of the log */
    pthread_t th;           /* its thread */
    redisContext *c;        /* NULL while disconnected */
    struct rstate rs;       /* reply being parsed */
    uint64_t *ids;          /* IDs of that reply (capacity: batch) */
    size_t ids_cap;         /* see ids */
    struct inflight *ring;  /* requests in flight, FIFO */
    unsigned ring_head;     /* oldest */
    unsigned inflight;      /* how many */
    char *wbuf;             /* requests to write */
    size_t wbuf_cap;        /* pipeline * longest command */
    uint64_t sched_k;       /* --rate: next slot number of this connection */
    uint64_t pause_until;   /* flat out: no new request before this */
    uint64_t backoff_ms;    /* next reconnect wait */
    bool down_reported;     /* the current outage was logged */
    unsigned down_attempts; /* failed connects in a row */
    unsigned down_errors;   /* errors since the outage was reported */
    int fatal;              /* exit status this thread asks for (0 = none) */
    /* statistics */
    uint64_t requests;        /* replies received */
    uint64_t ids_total;       /* IDs received (rpush: pushed) */
    uint64_t empties;         /* nil / empty array replies */
    uint64_t errors;          /* all error kinds */
    uint64_t ekind[E_NKINDS]; /* errors by kind */
    uint64_t hist[HIST_N];    /* latency, us */
    uint64_t max_ns;          /* exact maximum latency */
    struct tl_bucket *tl;     /* timeline */
    size_t tl_len;            /* buckets used */
    size_t tl_cap;            /* buckets allocated */
    uint64_t end_ns;          /* when this thread stopped */
    /* --record */
    int rec_fd;              /* -1 if not recording */
    char *rec_path;          /* its name (owned) */
    unsigned char *rec_buf;  /* buffered records */
    size_t rec_len;          /* bytes in rec_buf */
    size_t rec_cap;          /* see rec_buf */
    uint64_t rec_flushed_ns; /* last write(2) of rec_buf */
    FILE *ref_out;           /* take: PREFIX.<i>.refused (IDPOOL_* refusals), or NULL */
    char *ref_path;          /* its name (owned) */
    char err[256];           /* why the last connect failed */
    /* llen / subscribe */
    FILE *out;           /* --out */
    char rbuf[READ_BUF]; /* read(2) buffer */
};

/* State shared by all threads. */
struct run {
    const struct opts *o;
    char *cmd;                    /* the request for a full batch (RESP, owned) */
    size_t cmd_len;               /* see cmd */
    char **push_ids;              /* rpush: batch decimal IDs (owned) */
    size_t *push_lens;            /* their lengths */
    _Atomic uint64_t t0_ns;       /* start of the measured run */
    _Atomic uint64_t deadline_ns; /* --duration, 0 = none */
    atomic_int go;                /* all connected: start */
    atomic_uint ready;            /* threads past their first connect */
    atomic_uint live;             /* threads still running */
    _Atomic uint64_t claimed;     /* --count: IDs asked for or received */
    _Atomic uint64_t received;    /* --count: IDs received */
};

/* 0 running, 1 graceful stop (drain in-flight), 2 stop now. Set by the
 * signal handler, the main thread (--stop-file) and a failing thread. */
static atomic_int g_stop;

static void on_signal(int sig)
{
    (void)sig;
    int s = atomic_load(&g_stop);
    atomic_store(&g_stop, s < 2 ? s + 1 : 2);
}

static void request_stop(int level)
{
    int s = atomic_load(&g_stop);
    while (s < level && !atomic_compare_exchange_weak(&g_stop, &s, level))
        ;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Sleeps until the monotonic time t (never longer than one poll slice, so
 * callers re-check the stop flags). */
static void sleep_until(uint64_t t)
{
    uint64_t now = now_ns();
    struct timespec ts;

    if (t <= now)
        return;
    if (t - now > POLL_SLICE_NS)
        t = now + POLL_SLICE_NS;
    ts.tv_sec = (time_t)(t / NS_PER_S);
    ts.tv_nsec = (long)(t % NS_PER_S);
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL); /* EINTR: caller loops */
}

/* ------------------------------------------------------------- options --- */

static void usage(FILE *f)
{
    fprintf(f, "usage: idpool-load --port P --mode MODE --key KEY [options]\n"
               "  --host H            Redis host (127.0.0.1)\n"
               "  --port P            Redis port\n"
               "  --password PW       AUTH password\n"
               "  --db N              database (0)\n"
               "  --mode MODE         lpop | take | incrby | rpush | llen | subscribe\n"
               "  --key KEY           list (lpop, rpush, llen), pool (take: meta = KEY with\n"
               "                      ':pool' -> ':meta'), counter (incrby), channel (subscribe)\n"
               "  --batch N           IDs per request (1; lpop 1 = LPOP without count)\n"
               "  --conns C           connections, one thread each (1)\n"
               "  --pipeline D        requests in flight per connection (1)\n"
               "  --duration S        stop after S seconds (float)\n"
               "  --count N           stop after N IDs in total (llen: samples,\n"
               "                      subscribe: messages)\n"
               "  --rate R            requests/s over all connections, open loop (0 = flat out)\n"
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

/* True if the 8 bytes (little-endian load) are all ASCII digits, and
 * their value; SWAR as in simdjson / fast_float. */
static bool eight_digits(const char *s, uint64_t *out)
{
    uint64_t v;

    memcpy(&v, s, 8);
    if (((v & 0xF0F0F0F0F0F0F0F0ULL) |
         (((v + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4)) != 0x3333333333333333ULL)
        return false;
    v -= 0x3030303030303030ULL;
    v = v * 10 + (v >> 8); /* pairs of digits */
    v = (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
         (((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >>
        32;
    *out = v;
    return true;
}

/* Parses a canonical unsigned decimal below 2^63; -1 on anything else
 * (no sign, no leading zeros, no spaces). Hot: runs once per ID, so 8
 * digits at a time. Up to 18 digits cannot overflow; 19 digits are
 * compared with 2^63-1 first. */
static int parse_id(const char *s, size_t len, uint64_t *out)
{
    static const char max[] = "9223372036854775807";
    uint64_t v = 0, chunk;
    size_t i = 0;

    if (len == 0 || len > 19 || (s[0] == '0' && len > 1))
        return -1;
    if (len == 19 && memcmp(s, max, 19) > 0)
        return -1; /* too big, or not digits (rejected below anyway) */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i < len % 8; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';

        if (d > 9)
            return -1;
        v = v * 10 + d;
    }
    for (; i < len; i += 8) {
        if (!eight_digits(s + i, &chunk))
            return -1;
        v = v * 100000000 + chunk;
    }
#else
    for (; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';

        if (d > 9)
            return -1;
        v = v * 10 + d;
    }
    (void)chunk;
#endif
    *out = v;
    return 0;
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

    if (o->port == 0)
        return usage_error("--port", "required");
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

/* ----------------------------------------------------------- histogram --- */

static unsigned hist_index(uint64_t us)
{
    unsigned k, idx;

    if (us < HIST_LINEAR)
        return (unsigned)us;
    k = 63u - (unsigned)__builtin_clzll(us); /* >= 10 */
    idx = HIST_LINEAR + ((k - 10) << HIST_SUBBITS) +
          (unsigned)((us >> (k - HIST_SUBBITS)) & ((1u << HIST_SUBBITS) - 1));
    return idx < HIST_N ? idx : HIST_N - 1;
}

/* Lowest latency (us) of bucket i, and its width. */
static uint64_t hist_lo(unsigned i, uint64_t *width)
{
    unsigned k, sub;

    if (i < HIST_LINEAR) {
        *width = 1;
        return i;
    }
    k = 10 + ((i - HIST_LINEAR) >> HIST_SUBBITS);
    sub = (i - HIST_LINEAR) & ((1u << HIST_SUBBITS) - 1);
    *width = 1ULL << (k - HIST_SUBBITS);
    return (1ULL << k) + (uint64_t)sub * *width;
}

static void hist_add(struct conn *cn, uint64_t lat_ns)
{
    cn->hist[hist_index(lat_ns / 1000)]++;
    if (lat_ns > cn->max_ns)
        cn->max_ns = lat_ns;
}

/* The q-quantile (us): the highest latency of the bucket holding it, never
 * above the exact maximum. */
static uint64_t hist_quantile(const uint64_t *h, uint64_t total, double q, uint64_t max_us)
{
    uint64_t target, cum = 0, w, lo;
    unsigned i;

    if (total == 0)
        return 0;
    target = (uint64_t)ceil(q * (double)total);
    if (target < 1)
        target = 1;
    for (i = 0; i < HIST_N; i++) {
        cum += h[i];
        if (cum >= target)
            break;
    }
    if (i == HIST_N)
        i = HIST_N - 1;
    lo = hist_lo(i, &w);
    lo += w - 1;
    return lo < max_us ? lo : max_us;
}

/* ------------------------------------------------------------ timeline --- */

/* The timeline bucket of monotonic time t; NULL on out of memory (the
 * timeline is then incomplete, nothing else is affected). */
static struct tl_bucket *tl_at(struct conn *cn, uint64_t t)
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

static void count_error(struct conn *cn, enum ekind k, uint64_t t)
{
    struct tl_bucket *b = tl_at(cn, t);

    cn->errors++;
    cn->ekind[k]++;
    if (b != NULL)
        b->errors++;
}

/* -------------------------------------------------------------- record --- */

static void put_le64(unsigned char *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}

static void put_le32(unsigned char *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int rec_flush(struct conn *cn)
{
    if (cn->ref_out != NULL && fflush(cn->ref_out) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->ref_path, strerror(errno));
        return -1;
    }
    if (cn->rec_fd < 0 || cn->rec_len == 0)
        return 0;
    if (write_all(cn->rec_fd, cn->rec_buf, cn->rec_len) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->rec_path, strerror(errno));
        return -1;
    }
    cn->rec_len = 0;
    return 0;
}

/* Creates PREFIX.<i>.bin with its header. */
static int rec_open(struct conn *cn, const char *prefix)
{
    unsigned char hdr[32] = "IDPLOG1\n";
    size_t n = strlen(prefix) + 32;

    cn->rec_path = malloc(n);
    cn->rec_cap = REC_BUF;
    if (cn->rec_cap < 2 * (24 + 8 * cn->ids_cap))
        cn->rec_cap = 2 * (24 + 8 * cn->ids_cap);
    cn->rec_buf = malloc(cn->rec_cap);
    if (cn->rec_path == NULL || cn->rec_buf == NULL) {
        fprintf(stderr, "idpool-load: out of memory\n");
        return -1;
    }
    snprintf(cn->rec_path, n, "%s.%u.bin", prefix, cn->idx);
    cn->rec_fd = open(cn->rec_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (cn->rec_fd < 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->rec_path, strerror(errno));
        return -1;
    }
    put_le32(hdr + 8, 1);
    put_le32(hdr + 12, cn->idx);
    put_le32(hdr + 16, cn->o->mode == MODE_TAKE ? LOG_KIND_TAKE : LOG_KIND_LPOP);
    if (write_all(cn->rec_fd, hdr, sizeof hdr) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->rec_path, strerror(errno));
        return -1;
    }
    if (cn->o->mode != MODE_TAKE)
        return 0;
    cn->ref_path = malloc(n);
    if (cn->ref_path == NULL) {
        fprintf(stderr, "idpool-load: out of memory\n");
        return -1;
    }
    snprintf(cn->ref_path, n, "%s.%u.refused", prefix, cn->idx);
    cn->ref_out = fopen(cn->ref_path, "we");
    if (cn->ref_out == NULL) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->ref_path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Flushes the logs once a second (a killed consumer loses at most that much). */
static int rec_tick(struct conn *cn, uint64_t now)
{
    if (now - cn->rec_flushed_ns < REC_FLUSH_NS)
        return 0;
    cn->rec_flushed_ns = now;
    return rec_flush(cn);
}

/* take: logs one IDPOOL_* refusal (its code: the error's first word). */
static int ref_put(struct conn *cn, uint64_t t_send, uint64_t t_recv, const char *what)
{
    int len = (int)strcspn(what, " \r\n");

    if (cn->ref_out == NULL)
        return 0;
    if (fprintf(cn->ref_out, "%" PRIu64 " %" PRIu64 " %.*s\n", t_send, t_recv, len, what) < 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->ref_path, strerror(errno));
        return -1;
    }
    return rec_tick(cn, t_recv);
}

/* Appends one record: a reply received, with its IDs (none: an empty pop). */
static int rec_put(struct conn *cn, uint64_t t_send, uint64_t t_recv, const uint64_t *ids, size_t n)
{
    size_t need = 24 + 8 * n;
    unsigned char *p;

    if (cn->rec_len + need > cn->rec_cap && rec_flush(cn) != 0)
        return -1;
    p = cn->rec_buf + cn->rec_len;
    put_le64(p, t_send);
    put_le64(p + 8, t_recv);
    put_le32(p + 16, (uint32_t)n);
    put_le32(p + 20, 0);
    p += 24;
    for (size_t i = 0; i < n; i++, p += 8)
        put_le64(p, ids[i]);
    cn->rec_len += need;
    return rec_tick(cn, t_recv);
}

/* ------------------------------------------------- reply-object functions --- */

/*
 * The hiredis reader calls these for every reply item; privdata is the
 * connection. Instead of allocating a redisReply per item, they note the
 * top-level shape in conn.rs and parse every array element strictly into
 * conn.ids. Every function returns a non-NULL dummy (NULL means out of
 * memory to the reader) and nothing is ever freed.
 */
static void mark_bad(struct rstate *rs, const char *why, const char *s, size_t len)
{
    if (rs->bad)
        return;
    rs->bad = true;
    snprintf(rs->what, sizeof rs->what, "%s '%.*s'", why, len > 40 ? 40 : (int)len, s ? s : "");
}

static void *fn_string(const redisReadTask *t, char *s, size_t len)
{
    struct conn *cn = t->privdata;
    struct rstate *rs = &cn->rs;
    uint64_t id;

    if (t->parent == NULL) {
        rs->type = t->type;
        if (t->type != REDIS_REPLY_STRING) { /* error or status text */
            snprintf(rs->what, sizeof rs->what, "%.*s", len > 90 ? 90 : (int)len, s);
            return cn;
        }
    } else if (t->parent->parent != NULL || t->type != REDIS_REPLY_STRING) {
        mark_bad(rs, "unexpected element", s, len);
        return cn;
    }
    if (rs->nids >= cn->ids_cap)
        mark_bad(rs, "more IDs than requested, at", s, len);
    else if (parse_id(s, len, &id) != 0)
        mark_bad(rs, "not an ID:", s, len);
    else
        cn->ids[rs->nids++] = id;
    return cn;
}

static void *fn_array(const redisReadTask *t, int elements)
{
    struct conn *cn = t->privdata;

    if (t->parent != NULL)
        mark_bad(&cn->rs, "nested array", NULL, 0);
    else {
        cn->rs.type = REDIS_REPLY_ARRAY;
        cn->rs.elements = elements > 0 ? (size_t)elements : 0;
    }
    return cn;
}

static void *fn_integer(const redisReadTask *t, long long v)
{
    struct conn *cn = t->privdata;

    if (t->parent != NULL)
        mark_bad(&cn->rs, "integer element", NULL, 0);
    else {
        cn->rs.type = REDIS_REPLY_INTEGER;
        cn->rs.integer = v;
    }
    return cn;
}

static void *fn_nil(const redisReadTask *t)
{
    struct conn *cn = t->privdata;

    if (t->parent != NULL)
        mark_bad(&cn->rs, "nil element", NULL, 0);
    else
        cn->rs.type = REDIS_REPLY_NIL;
    return cn;
}

static void fn_free(void *obj)
{
    (void)obj;
}

static redisReplyObjectFunctions id_functions = {
    .createString = fn_string,
    .createArray = fn_array,
    .createInteger = fn_integer,
    .createNil = fn_nil,
    .freeObject = fn_free,
};

/* ---------------------------------------------------------- connection --- */

static void set_sock_timeout(int fd, int opt, uint64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

    (void)setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv);
}

/* One command during setup (AUTH, SELECT, SUBSCRIBE); -1 on an error. */
static int setup_cmd(struct conn *cn, const char *what, redisReply *r)
{
    int rc = 0;

    if (r == NULL) {
        snprintf(cn->err, sizeof cn->err, "%s: %s", what, cn->c->errstr);
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(cn->err, sizeof cn->err, "%s: %s", what, r->str);
        rc = -1;
    }
    freeReplyObject(r);
    return rc;
}

static void conn_close(struct conn *cn)
{
    if (cn->c != NULL)
        redisFree(cn->c);
    cn->c = NULL;
    memset(&cn->rs, 0, sizeof cn->rs);
}

/*
 * One connect attempt: TCP with --timeout-ms, AUTH, SELECT, then the
 * socket gets a 100 ms receive timeout (a blocked read(2) comes back to
 * check the stop flags and the request deadline itself) and a --timeout-ms
 * send timeout. Pop modes get our reply-object functions. 0 or -1 (the
 * reason in rs.what).
 */
static int conn_open(struct conn *cn)
{
    const struct opts *o = cn->o;
    struct timeval tv = {(time_t)(o->timeout_ms / 1000),
                         (suseconds_t)(o->timeout_ms % 1000) * 1000};

    conn_close(cn);
    cn->c = redisConnectWithTimeout(o->host, o->port, tv);
    if (cn->c == NULL) {
        snprintf(cn->err, sizeof cn->err, "out of memory");
        return -1;
    }
    if (cn->c->err) {
        snprintf(cn->err, sizeof cn->err, "connect %s:%d: %s", o->host, o->port, cn->c->errstr);
        goto fail;
    }
    if (redisSetTimeout(cn->c, tv) != REDIS_OK) {
        snprintf(cn->err, sizeof cn->err, "cannot set the socket timeout");
        goto fail;
    }
    if (o->password && setup_cmd(cn, "AUTH", redisCommand(cn->c, "AUTH %s", o->password)) != 0)
        goto fail;
    if (o->db != 0 && setup_cmd(cn, "SELECT", redisCommand(cn->c, "SELECT %d", o->db)) != 0)
        goto fail;
    if (o->mode == MODE_SUBSCRIBE &&
        setup_cmd(cn, "SUBSCRIBE", redisCommand(cn->c, "SUBSCRIBE %s", o->key)) != 0)
        goto fail;
    set_sock_timeout(cn->c->fd, SO_RCVTIMEO, POLL_SLICE_NS / NS_PER_MS);
    set_sock_timeout(cn->c->fd, SO_SNDTIMEO, o->timeout_ms);
    if (o->mode != MODE_LLEN && o->mode != MODE_SUBSCRIBE) {
        cn->c->reader->fn = &id_functions;
        cn->c->reader->privdata = cn;
        cn->c->reader->maxbuf = 0; /* keep the buffer: no free/malloc per read */
    }
    memset(&cn->rs, 0, sizeof cn->rs);
    return 0;
fail:
    conn_close(cn);
    return -1;
}

/* The stop level this thread must obey: the global one, or 1 once the
 * duration is over. */
static int stop_level(struct conn *cn, uint64_t now)
{
    int s = atomic_load_explicit(&g_stop, memory_order_relaxed);
    uint64_t dl = atomic_load_explicit(&cn->run->deadline_ns, memory_order_relaxed);

    if (s == 0 && dl != 0 && now >= dl)
        s = 1;
    return s;
}

static uint64_t backoff_next(const struct conn *cn)
{
    uint64_t ms = cn->backoff_ms, max = cn->o->backoff_max_ms;

    return ms * 2 < max ? ms * 2 : max;
}

/* A good reply ends an outage: one line, and the backoff starts over. */
static void replies_again(struct conn *cn)
{
    if (cn->down_reported)
        fprintf(stderr, "idpool-load: conn %u: replies again (%u errors meanwhile)\n", cn->idx,
                cn->down_errors);
    cn->down_reported = false;
    cn->down_errors = 0;
    cn->backoff_ms = cn->o->backoff_min_ms;
}

/* --count IDs have arrived (over all connections). */
static bool count_reached(struct conn *cn)
{
    return cn->o->count != 0 &&
           atomic_load_explicit(&cn->run->received, memory_order_relaxed) >= cn->o->count;
}

/* Releases IDs claimed against --count and not received. */
static void unclaim(struct conn *cn, uint64_t n)
{
    if (cn->o->count != 0 && n != 0)
        atomic_fetch_sub(&cn->run->claimed, n);
}

/*
 * The connection failed (kind): the requests in flight are lost, never
 * recorded; their claims go back. Without --reconnect this ends the run
 * (exit 1); with it, the next loop reconnects after the backoff.
 */
static void conn_fail(struct conn *cn, enum ekind kind, const char *why)
{
    uint64_t now = now_ns();

    count_error(cn, kind, now);
    cn->down_errors++;
    while (cn->inflight > 0) {
        unclaim(cn, cn->ring[cn->ring_head].want);
        cn->ring_head = (cn->ring_head + 1) % cn->o->pipeline;
        cn->inflight--;
    }
    if (!cn->down_reported)
        fprintf(stderr, "idpool-load: conn %u: %s%s\n", cn->idx, why,
                cn->o->reconnect ? "; reconnecting" : "");
    cn->down_reported = true;
    conn_close(cn);
    if (!cn->o->reconnect) {
        cn->fatal = EXIT_ERROR;
        request_stop(1);
    }
}

/*
 * Connects, retrying with backoff (--backoff-ms) with --reconnect
 * until it works or the run stops. 0 connected, -1 not (fatal set when
 * there is no --reconnect).
 */
static int conn_ensure(struct conn *cn, bool first)
{
    while (cn->c == NULL) {
        if (!first || cn->down_attempts > 0) {
            uint64_t until = now_ns() + cn->backoff_ms * NS_PER_MS;

            while (now_ns() < until && stop_level(cn, now_ns()) == 0)
                sleep_until(until);
            cn->backoff_ms = backoff_next(cn);
        }
        if (stop_level(cn, now_ns()) != 0 || count_reached(cn))
            return -1;
        if (conn_open(cn) == 0) {
            /* "replies again" is said by the first reply: a stopped server
             * still accepts connections (the kernel's backlog). */
            cn->down_attempts = 0;
            return 0;
        }
        cn->down_attempts++;
        cn->down_errors++;
        count_error(cn, E_CONNECT, now_ns());
        if (!cn->down_reported || !cn->o->reconnect)
            fprintf(stderr, "idpool-load: conn %u: %s%s\n", cn->idx, cn->err,
                    cn->o->reconnect ? "; retrying" : "");
        cn->down_reported = true;
        if (!cn->o->reconnect) {
            cn->fatal = EXIT_ERROR;
            request_stop(1);
            return -1;
        }
    }
    return 0;
}

/* -------------------------------------------------------- pop/push loop --- */

/* The RESP request for `want` IDs (malloc'd by hiredis; -1 on failure). */
static int format_request(const struct run *run, uint64_t want, char **out)
{
    const struct opts *o = run->o;
    const char *argv[8];
    size_t lens[8];
    char num[24];
    int argc = 0;

    snprintf(num, sizeof num, "%" PRIu64, want);
#define ARG(s) (argv[argc] = (s), lens[argc] = strlen(argv[argc]), argc++)
    switch (o->mode) {
    case MODE_LPOP:
        ARG("LPOP");
        ARG(o->key);
        if (o->batch > 1)
            ARG(num);
        break;
    case MODE_TAKE:
        ARG("FCALL");
        ARG("idpool_take");
        ARG("2");
        ARG(o->key);
        ARG(o->meta);
        ARG(num);
        break;
    case MODE_INCRBY:
        ARG("INCRBY");
        ARG(o->key);
        ARG(num);
        break;
    case MODE_LLEN:
        ARG("LLEN");
        ARG(o->key);
        break;
    case MODE_RPUSH: {
        const char **av = malloc((want + 2) * sizeof *av);
        size_t *al = malloc((want + 2) * sizeof *al);
        int len = -1;

        if (av != NULL && al != NULL) {
            av[0] = "RPUSH";
            al[0] = 5;
            av[1] = o->key;
            al[1] = strlen(o->key);
            for (uint64_t i = 0; i < want; i++) {
                av[i + 2] = run->push_ids[i];
                al[i + 2] = run->push_lens[i];
            }
            len = redisFormatCommandArgv(out, (int)(want + 2), av, al);
        }
        free(av);
        free(al);
        return len;
    }
    case MODE_SUBSCRIBE:
        return -1;
    }
#undef ARG
    return redisFormatCommandArgv(out, argc, argv, lens);
}

/* Claims up to batch IDs against --count; 0 when all are claimed. */
static uint64_t claim(struct conn *cn)
{
    uint64_t batch = cn->o->batch, count = cn->o->count, c, want;

    if (count == 0)
        return batch;
    c = atomic_load(&cn->run->claimed);
    do {
        if (c >= count)
            return 0;
        want = count - c < batch ? count - c : batch;
    } while (!atomic_compare_exchange_weak(&cn->run->claimed, &c, c + want));
    return want;
}

/*
 * Handles one complete reply (in conn.rs / conn.ids) to the oldest request
 * in flight: counts it, its latency and IDs, and records it. Returns 0, or
 * -1 when the run must end (fatal set).
 */
static int on_reply(struct conn *cn)
{
    const struct opts *o = cn->o;
    struct rstate *rs = &cn->rs;
    struct inflight rq = cn->ring[cn->ring_head];
    uint64_t now = now_ns(), n = 0, lat;
    bool empty = false, refused = false;
    struct tl_bucket *b;

    cn->ring_head = (cn->ring_head + 1) % o->pipeline;
    cn->inflight--;
    cn->requests++;
    lat = now - (rq.sched_ns ? rq.sched_ns : rq.send_ns);
    if (rq.sched_ns > now)
        lat = 0;
    hist_add(cn, lat);

    if (rs->bad)
        goto malformed;
    switch (rs->type) {
    case REDIS_REPLY_ERROR:
        unclaim(cn, rq.want);
        if (o->mode == MODE_TAKE && strncmp(rs->what, "IDPOOL_", 7) == 0) {
            enum ekind k = strncmp(rs->what, "IDPOOL_RATE", 11) == 0    ? E_REFUSED_RATE
                           : strncmp(rs->what, "IDPOOL_LIMIT", 12) == 0 ? E_REFUSED_LIMIT
                                                                        : E_IDPOOL;
            count_error(cn, k, now);
            if (ref_put(cn, rq.send_ns, now, rs->what) != 0) {
                cn->fatal = EXIT_ERROR;
                request_stop(1);
                return -1;
            }
            refused = true;
            break;
        }
        count_error(cn, E_REPLY, now);
        cn->down_errors++;
        if (!o->reconnect) {
            fprintf(stderr, "idpool-load: conn %u: error reply: %s\n", cn->idx, rs->what);
            cn->fatal = EXIT_ERROR;
            request_stop(1);
            return -1;
        }
        if (!cn->down_reported)
            fprintf(stderr, "idpool-load: conn %u: error reply: %s; retrying\n", cn->idx, rs->what);
        cn->down_reported = true;
        /* LOADING, READONLY...: back off like a reconnect. */
        cn->pause_until = now + cn->backoff_ms * NS_PER_MS;
        cn->backoff_ms = backoff_next(cn);
        goto done;
    case REDIS_REPLY_NIL:
        if (o->mode != MODE_LPOP && o->mode != MODE_TAKE)
            goto malformed;
        empty = true;
        break;
    case REDIS_REPLY_STRING:
        if (o->mode != MODE_LPOP || o->batch != 1)
            goto malformed;
        n = rs->nids;
        break;
    case REDIS_REPLY_ARRAY:
        if ((o->mode != MODE_LPOP && o->mode != MODE_TAKE) ||
            (o->mode == MODE_LPOP && o->batch == 1))
            goto malformed;
        n = rs->nids;
        if (n != rs->elements || n > rq.want) {
            snprintf(rs->what, sizeof rs->what, "%zu IDs for a request of %" PRIu64, rs->elements,
                     rq.want);
            goto malformed;
        }
        empty = n == 0;
        break;
    case REDIS_REPLY_INTEGER:
        if (o->mode == MODE_RPUSH) {
            if (rs->integer < (long long)rq.want)
                goto malformed_int;
            n = rq.want;
        } else if (o->mode == MODE_INCRBY) {
            /* v stands for IDs v-want+1 .. v, all >= 1 */
            if (rs->integer < (long long)rq.want)
                goto malformed_int;
            n = rq.want;
            for (uint64_t i = 0; i < n; i++)
                cn->ids[i] = (uint64_t)rs->integer - n + 1 + i;
        } else {
            goto malformed_int;
        }
        break;
    default:
        snprintf(rs->what, sizeof rs->what, "reply of type %d", rs->type);
        goto malformed;
    }

    replies_again(cn);
    if (!refused) {
        cn->ids_total += n;
        if (o->count != 0) {
            unclaim(cn, rq.want - n);
            atomic_fetch_add(&cn->run->received, n);
        }
        if (empty)
            cn->empties++;
        b = tl_at(cn, now);
        if (b != NULL) {
            b->ids += n;
            b->empties += empty;
        }
        if (cn->rec_fd >= 0 && rec_put(cn, rq.send_ns, now, cn->ids, n) != 0) {
            cn->fatal = EXIT_ERROR;
            request_stop(1);
            return -1;
        }
    }
    if ((empty || refused) && o->rate == 0 && o->empty_pause_us > 0)
        cn->pause_until = now + o->empty_pause_us * 1000;
done:
    rs->type = 0;
    rs->nids = 0;
    rs->bad = false;
    rs->what[0] = '\0';
    return 0;

malformed_int:
    snprintf(rs->what, sizeof rs->what, "integer reply %lld", rs->integer);
malformed:
    fprintf(stderr, "idpool-load: conn %u: malformed reply: %s\n", cn->idx,
            rs->what[0] ? rs->what : "unexpected shape");
    cn->fatal = EXIT_MALFORMED;
    request_stop(1);
    return -1;
}

/* Feeds what was read to the reader and handles every complete reply. */
static int feed_replies(struct conn *cn, size_t len)
{
    void *reply;

    if (redisReaderFeed(cn->c->reader, cn->rbuf, len) != REDIS_OK) {
        conn_fail(cn, E_IO, "reader error");
        return 0;
    }
    for (;;) {
        if (redisReaderGetReply(cn->c->reader, &reply) != REDIS_OK) {
            char why[160];

            snprintf(why, sizeof why, "protocol error: %s", cn->c->reader->errstr);
            conn_fail(cn, E_IO, why);
            return 0;
        }
        if (reply == NULL)
            return 0;
        if (cn->inflight == 0) {
            fprintf(stderr, "idpool-load: conn %u: a reply nobody asked for\n", cn->idx);
            cn->fatal = EXIT_MALFORMED;
            request_stop(1);
            return -1;
        }
        if (on_reply(cn) != 0)
            return -1;
    }
}

/* Appends requests while the pipeline has room and the schedule allows,
 * then writes them in one go. 0, or -1 if this connection failed. */
static int fill_pipeline(struct conn *cn, uint64_t now, bool *starved)
{
    const struct opts *o = cn->o;
    struct run *run = cn->run;
    size_t wlen = 0;
    unsigned first = cn->inflight;

    while (cn->inflight < o->pipeline) {
        uint64_t sched = 0, want;
        struct inflight *rq;

        if (cn->pause_until > now)
            break;
        if (o->rate > 0) {
            uint64_t t0 = atomic_load_explicit(&run->t0_ns, memory_order_relaxed);

            /* slot k of connection i: (k * conns + i) / rate after t0 */
            sched = t0 + (uint64_t)(((double)cn->sched_k * o->conns + cn->idx) * 1e9 / o->rate);
            if (sched > now)
                break;
        }
        want = claim(cn);
        if (want == 0) {
            *starved = true;
            break;
        }
        if (want == o->batch) {
            memcpy(cn->wbuf + wlen, run->cmd, run->cmd_len);
            wlen += run->cmd_len;
        } else { /* the last, partial batch of --count */
            char *cmd;
            int len = format_request(run, want, &cmd);

            if (len < 0 || (size_t)len > run->cmd_len) {
                fprintf(stderr, "idpool-load: cannot format a request\n");
                unclaim(cn, want);
                cn->fatal = EXIT_ERROR;
                request_stop(1);
                return -1;
            }
            memcpy(cn->wbuf + wlen, cmd, (size_t)len);
            wlen += (size_t)len;
            redisFreeCommand(cmd);
        }
        if (o->rate > 0)
            cn->sched_k++;
        rq = &cn->ring[(cn->ring_head + cn->inflight) % o->pipeline];
        rq->sched_ns = sched;
        rq->want = want;
        cn->inflight++;
    }
    if (wlen == 0)
        return 0;
    now = now_ns();
    for (unsigned i = first; i < cn->inflight; i++)
        cn->ring[(cn->ring_head + i) % o->pipeline].send_ns = now;
    if (write_all(cn->c->fd, cn->wbuf, wlen) != 0) {
        int err = errno;
        char why[160];

        snprintf(why, sizeof why, "write: %s", err == EAGAIN ? "timed out" : strerror(err));
        conn_fail(cn, err == EAGAIN ? E_TIMEOUT : E_IO, why);
        return -1;
    }
    return 0;
}

/* Reads once (blocking at most 100 ms, or, while sending, until the next
 * --rate slot) and handles the replies. 0, or -1 when the run must end. */
static int read_replies(struct conn *cn, uint64_t now, bool sending)
{
    const struct opts *o = cn->o;
    uint64_t oldest = cn->ring[cn->ring_head].send_ns;
    ssize_t n;

    if (sending && o->rate > 0 && cn->inflight < o->pipeline && cn->pause_until <= now) {
        /* Room for another request: wake up for its slot. */
        uint64_t t0 = atomic_load_explicit(&cn->run->t0_ns, memory_order_relaxed);
        uint64_t next = t0 + (uint64_t)(((double)cn->sched_k * o->conns + cn->idx) * 1e9 / o->rate);
        uint64_t wait = next > now ? next - now : 0;
        struct pollfd pfd = {cn->c->fd, POLLIN, 0};
        struct timespec ts;

        if (wait > POLL_SLICE_NS)
            wait = POLL_SLICE_NS;
        ts.tv_sec = (time_t)(wait / NS_PER_S);
        ts.tv_nsec = (long)(wait % NS_PER_S);
        if (ppoll(&pfd, 1, &ts, NULL) <= 0)
            goto check_timeout;
    }
    n = read(cn->c->fd, cn->rbuf, sizeof cn->rbuf);
    if (n > 0)
        return feed_replies(cn, (size_t)n);
    if (n == 0) {
        conn_fail(cn, E_IO, "connection closed by the server");
        return 0;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        char why[160];

        snprintf(why, sizeof why, "read: %s", strerror(errno));
        conn_fail(cn, E_IO, why);
        return 0;
    }
check_timeout:
    if (now_ns() - oldest >= o->timeout_ms * NS_PER_MS) {
        char why[80];

        snprintf(why, sizeof why, "no reply within %" PRIu64 " ms", o->timeout_ms);
        conn_fail(cn, E_TIMEOUT, why);
    }
    return 0;
}

/* Waits while nothing is in flight: for the next --rate slot, the end of
 * a pause, or (--count) for IDs another connection may give back. */
static void idle_wait(struct conn *cn, uint64_t now, bool starved)
{
    const struct opts *o = cn->o;
    uint64_t until = now + POLL_SLICE_NS;

    if (o->rate > 0) {
        uint64_t t0 = atomic_load_explicit(&cn->run->t0_ns, memory_order_relaxed);
        uint64_t next = t0 + (uint64_t)(((double)cn->sched_k * o->conns + cn->idx) * 1e9 / o->rate);

        if (next < until)
            until = next;
    }
    if (cn->pause_until > now && cn->pause_until < until)
        until = cn->pause_until;
    if (starved && now + NS_PER_MS < until)
        until = now + NS_PER_MS;
    sleep_until(until);
}

/* The request loop of lpop / take / incrby / rpush. */
static void run_requests(struct conn *cn)
{
    for (;;) {
        uint64_t now = now_ns();
        int stop = stop_level(cn, now);
        bool starved = false, done;

        if (stop >= 2 || (stop == 1 && cn->inflight == 0))
            break;
        done = count_reached(cn);
        if (done && cn->inflight == 0)
            break;
        if (cn->c == NULL) {
            if (stop != 0 || conn_ensure(cn, false) != 0)
                break;
            continue;
        }
        if (stop == 0 && !done && fill_pipeline(cn, now, &starved) != 0) {
            if (cn->fatal)
                break;
            continue; /* connection failed: reconnect */
        }
        if (cn->inflight == 0) {
            idle_wait(cn, now, starved);
            continue;
        }
        if (read_replies(cn, now, stop == 0 && !done && !starved) != 0)
            break;
        if (cn->fatal)
            break;
    }
}

/* ---------------------------------------------------- llen / subscribe --- */

/*
 * Waits for one reply (default hiredis objects) until the monotonic time
 * deadline: 1 and *reply, 0 timed out or stopped, -1 the connection
 * failed (conn_fail done).
 */
static int wait_reply(struct conn *cn, uint64_t deadline, redisReply **reply)
{
    for (;;) {
        void *r = NULL;
        ssize_t n;

        if (redisReaderGetReply(cn->c->reader, &r) != REDIS_OK) {
            conn_fail(cn, E_IO, "protocol error");
            return -1;
        }
        if (r != NULL) {
            *reply = r;
            return 1;
        }
        if (now_ns() >= deadline || stop_level(cn, now_ns()) >= 2)
            return 0;
        n = read(cn->c->fd, cn->rbuf, sizeof cn->rbuf);
        if (n > 0) {
            if (redisReaderFeed(cn->c->reader, cn->rbuf, (size_t)n) != REDIS_OK) {
                conn_fail(cn, E_IO, "reader error");
                return -1;
            }
        } else if (n == 0) {
            conn_fail(cn, E_IO, "connection closed by the server");
            return -1;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            conn_fail(cn, E_IO, strerror(errno));
            return -1;
        }
    }
}

static int send_raw(struct conn *cn, const char *cmd, size_t len)
{
    if (write_all(cn->c->fd, cmd, len) != 0) {
        conn_fail(cn, errno == EAGAIN ? E_TIMEOUT : E_IO, "write failed");
        return -1;
    }
    return 0;
}

static bool out_line_failed(struct conn *cn)
{
    if (ferror(cn->out) || fflush(cn->out) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->o->out, strerror(errno));
        cn->fatal = EXIT_ERROR;
        request_stop(1);
        return true;
    }
    return false;
}

/* llen: LLEN every --interval-ms on a fixed schedule (missed slots are
 * skipped), lines "t_ns len" with t_ns when the reply was parsed. */
static void run_llen(struct conn *cn)
{
    const struct opts *o = cn->o;
    uint64_t t0 = atomic_load(&cn->run->t0_ns), period = o->interval_ms * NS_PER_MS, k = 0;

    for (;;) {
        uint64_t now = now_ns(), due = t0 + k * period, sent;
        redisReply *r = NULL;
        int rc;

        if (stop_level(cn, now) != 0 || (o->count != 0 && cn->requests >= o->count))
            break;
        if (cn->c == NULL) {
            if (conn_ensure(cn, false) != 0)
                break;
            continue;
        }
        if (due > now) {
            sleep_until(due);
            continue;
        }
        k = (now - t0) / period + 1; /* next slot after this one */
        sent = now_ns();
        if (send_raw(cn, cn->run->cmd, cn->run->cmd_len) != 0)
            continue;
        rc = wait_reply(cn, sent + o->timeout_ms * NS_PER_MS, &r);
        if (rc < 0)
            continue;
        if (rc == 0) {
            if (stop_level(cn, now_ns()) >= 2)
                break;
            conn_fail(cn, E_TIMEOUT, "LLEN: no reply in time");
            continue;
        }
        now = now_ns();
        cn->requests++;
        hist_add(cn, now - sent);
        if (r->type == REDIS_REPLY_INTEGER) {
            fprintf(cn->out, "%" PRIu64 " %lld\n", now, r->integer);
            replies_again(cn);
        } else if (r->type == REDIS_REPLY_ERROR) {
            count_error(cn, E_REPLY, now);
            cn->down_errors++;
            if (!cn->down_reported)
                fprintf(stderr, "idpool-load: LLEN: %s\n", r->str);
            cn->down_reported = true;
            if (!o->reconnect) {
                cn->fatal = EXIT_ERROR;
                request_stop(1);
            }
        } else {
            fprintf(stderr, "idpool-load: LLEN: reply of type %d\n", r->type);
            cn->fatal = EXIT_MALFORMED;
            request_stop(1);
        }
        freeReplyObject(r);
        if (cn->fatal || out_line_failed(cn))
            break;
    }
}

/* subscribe: lines "t_ns <message>" for each message on the channel. A PING
 * after 1 s of silence detects a dead or partitioned server. */
static void run_subscribe(struct conn *cn)
{
    const struct opts *o = cn->o;
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    uint64_t last = now_ns(), ping_sent = 0;

    for (;;) {
        uint64_t now = now_ns();
        redisReply *r = NULL;
        int rc;

        if (stop_level(cn, now) != 0 || (o->count != 0 && cn->requests >= o->count))
            break;
        if (cn->c == NULL) {
            if (conn_ensure(cn, false) != 0)
                break;
            last = now_ns();
            ping_sent = 0;
            continue;
        }
        if (ping_sent == 0 && now - last >= PING_IDLE_NS) {
            if (send_raw(cn, ping, sizeof ping - 1) != 0)
                continue;
            ping_sent = now;
        }
        if (ping_sent != 0 && now - ping_sent >= o->timeout_ms * NS_PER_MS) {
            conn_fail(cn, E_TIMEOUT, "subscribe: no PING reply in time");
            continue;
        }
        rc = wait_reply(cn, now + POLL_SLICE_NS, &r);
        if (rc <= 0)
            continue;
        now = now_ns();
        last = now;
        replies_again(cn);
        if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
            r->element[0]->type == REDIS_REPLY_STRING) {
            const char *kind = r->element[0]->str;

            if (strcmp(kind, "message") == 0 && r->elements == 3 &&
                r->element[2]->type == REDIS_REPLY_STRING) {
                cn->requests++;
                fprintf(cn->out, "%" PRIu64 " %.*s\n", now, (int)r->element[2]->len,
                        r->element[2]->str);
            } else if (strcmp(kind, "pong") == 0) {
                if (ping_sent)
                    hist_add(cn, now - ping_sent);
                ping_sent = 0;
            }
        }
        freeReplyObject(r);
        if (out_line_failed(cn))
            break;
    }
}

/* --------------------------------------------------------------- thread --- */

static void *conn_main(void *arg)
{
    struct conn *cn = arg;
    struct run *run = cn->run;
    int rc = conn_ensure(cn, true);

    atomic_fetch_add(&run->ready, 1);
    while (rc == 0 && !atomic_load(&run->go) && atomic_load(&g_stop) == 0)
        sleep_until(now_ns() + NS_PER_MS);
    if (rc == 0 && atomic_load(&run->go)) {
        if (cn->o->mode == MODE_LLEN)
            run_llen(cn);
        else if (cn->o->mode == MODE_SUBSCRIBE)
            run_subscribe(cn);
        else
            run_requests(cn);
    }
    cn->end_ns = now_ns();
    if (rec_flush(cn) != 0 && cn->fatal == 0)
        cn->fatal = EXIT_ERROR;
    conn_close(cn);
    atomic_fetch_sub(&run->live, 1);
    return NULL;
}

/* ----------------------------------------------------------------- main --- */

/* rpush: batch pseudo-random IDs of 16..19 digits (< 2^63), the same every run. */
static int make_push_ids(struct run *run, uint64_t batch)
{
    static const uint64_t lo[] = {1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
                                  1000000000000000000ULL};
    static const uint64_t hi[] = {10000000000000000ULL, 100000000000000000ULL,
                                  1000000000000000000ULL, (uint64_t)INT64_MAX};
    uint64_t x = 0x9e3779b97f4a7c15ULL;

    run->push_ids = calloc(batch, sizeof *run->push_ids);
    run->push_lens = calloc(batch, sizeof *run->push_lens);
    if (run->push_ids == NULL || run->push_lens == NULL)
        return -1;
    for (uint64_t i = 0; i < batch; i++) {
        unsigned d;

        x ^= x << 13; /* xorshift64 */
        x ^= x >> 7;
        x ^= x << 17;
        d = (unsigned)(x >> 62);
        run->push_ids[i] = malloc(24);
        if (run->push_ids[i] == NULL)
            return -1;
        snprintf(run->push_ids[i], 24, "%" PRIu64, lo[d] + x % (hi[d] - lo[d]));
        run->push_lens[i] = strlen(run->push_ids[i]);
    }
    return 0;
}

static int conn_init(struct conn *cn, struct run *run, unsigned idx)
{
    const struct opts *o = run->o;

    cn->run = run;
    cn->o = o;
    cn->idx = idx;
    cn->rec_fd = -1;
    cn->backoff_ms = cn->o->backoff_min_ms;
    cn->ids_cap = o->batch;
    cn->ids = malloc(cn->ids_cap * sizeof *cn->ids);
    cn->ring = calloc(o->pipeline, sizeof *cn->ring);
    cn->wbuf_cap = (size_t)o->pipeline * run->cmd_len + 1;
    cn->wbuf = malloc(cn->wbuf_cap);
    if (cn->ids == NULL || cn->ring == NULL || cn->wbuf == NULL) {
        fprintf(stderr, "idpool-load: out of memory\n");
        return -1;
    }
    if (o->record != NULL && rec_open(cn, o->record) != 0)
        return -1;
    if (o->out != NULL) {
        cn->out = fopen(o->out, "w");
        if (cn->out == NULL) {
            fprintf(stderr, "idpool-load: %s: %s\n", o->out, strerror(errno));
            return -1;
        }
    }
    return 0;
}

static int conn_free(struct conn *cn)
{
    int rc = 0;

    if (cn->rec_fd >= 0 && close(cn->rec_fd) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->rec_path, strerror(errno));
        rc = -1;
    }
    if (cn->ref_out != NULL && fclose(cn->ref_out) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->ref_path, strerror(errno));
        rc = -1;
    }
    if (cn->out != NULL && fclose(cn->out) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->o->out, strerror(errno));
        rc = -1;
    }
    free(cn->rec_path);
    free(cn->ref_path);
    free(cn->rec_buf);
    free(cn->ids);
    free(cn->ring);
    free(cn->wbuf);
    free(cn->tl);
    free(cn);
    return rc;
}

/* Totals over all connections. */
struct totals {
    uint64_t requests, ids, empties, errors, ekind[E_NKINDS], max_ns;
    uint64_t hist[HIST_N];
    uint64_t end_ns;
    struct tl_bucket *tl;
    size_t tl_len;
};

static int merge(struct totals *t, struct conn **cns, unsigned n)
{
    size_t len = 0;

    for (unsigned i = 0; i < n; i++)
        if (cns[i]->tl_len > len)
            len = cns[i]->tl_len;
    t->tl = calloc(len ? len : 1, sizeof *t->tl);
    if (t->tl == NULL)
        return -1;
    t->tl_len = len;
    for (unsigned i = 0; i < n; i++) {
        struct conn *cn = cns[i];

        t->requests += cn->requests;
        t->ids += cn->ids_total;
        t->empties += cn->empties;
        t->errors += cn->errors;
        for (int k = 0; k < E_NKINDS; k++)
            t->ekind[k] += cn->ekind[k];
        for (unsigned b = 0; b < HIST_N; b++)
            t->hist[b] += cn->hist[b];
        if (cn->max_ns > t->max_ns)
            t->max_ns = cn->max_ns;
        if (cn->end_ns > t->end_ns)
            t->end_ns = cn->end_ns;
        for (size_t b = 0; b < cn->tl_len; b++) {
            t->tl[b].ids += cn->tl[b].ids;
            t->tl[b].empties += cn->tl[b].empties;
            t->tl[b].errors += cn->tl[b].errors;
        }
    }
    return 0;
}

static int write_timeline(const char *path, const struct totals *t)
{
    FILE *f = fopen(path, "w");

    if (f == NULL)
        goto fail;
    for (size_t i = 0; i < t->tl_len; i++)
        fprintf(f, "%.3f %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", (double)i * 0.1, t->tl[i].ids,
                t->tl[i].empties, t->tl[i].errors);
    if (fclose(f) != 0)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "idpool-load: %s: %s\n", path, strerror(errno));
    return -1;
}

static int write_hist(const char *path, const struct totals *t)
{
    FILE *f = fopen(path, "w");

    if (f == NULL)
        goto fail;
    for (unsigned i = 0; i < HIST_N; i++) {
        uint64_t w, lo = hist_lo(i, &w);

        if (t->hist[i] != 0)
            fprintf(f, "%" PRIu64 " %" PRIu64 "\n", lo, t->hist[i]);
    }
    if (fclose(f) != 0)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "idpool-load: %s: %s\n", path, strerror(errno));
    return -1;
}

static void print_summary(const struct opts *o, const struct totals *t, double secs)
{
    uint64_t max_us = t->max_ns / 1000, n = 0;
    uint64_t p50, p99, p999;
    uint64_t rate = secs > 0 ? (uint64_t)llround((double)t->ids / secs) : 0;
    struct rusage ru;
    uint64_t cpu_ms = 0;

    for (unsigned i = 0; i < HIST_N; i++) /* subscribe: PINGs, not messages */
        n += t->hist[i];
    p50 = hist_quantile(t->hist, n, 0.50, max_us);
    p99 = hist_quantile(t->hist, n, 0.99, max_us);
    p999 = hist_quantile(t->hist, n, 0.999, max_us);
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
        printf(",\"cpu_ms\":%" PRIu64 "}\n", cpu_ms);
    } else {
        printf("load: mode=%s batch=%" PRIu64 " conns=%u pipeline=%u secs=%.2f requests=%" PRIu64
               " ids=%" PRIu64 " ids_per_s=%" PRIu64 " empties=%" PRIu64 " errors=%" PRIu64
               " p50_us=%" PRIu64 " p99_us=%" PRIu64 " p999_us=%" PRIu64 " max_us=%" PRIu64,
               mode_names[o->mode], o->batch, o->conns, o->pipeline, secs, t->requests, t->ids,
               rate, t->empties, t->errors, p50, p99, p999, max_us);
        for (int k = 0; k < E_NKINDS; k++)
            if (t->ekind[k] != 0)
                printf(" %s=%" PRIu64, ekind_names[k], t->ekind[k]);
        printf(" cpu_ms=%" PRIu64 "\n", cpu_ms);
    }
    fflush(stdout);
}

/* Waits for the threads, turning the stop file into a graceful stop. */
static void supervise(struct run *run, const struct opts *o)
{
    uint64_t checked = 0;

    while (atomic_load(&run->live) > 0) {
        uint64_t now = now_ns();

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
        return EXIT_USAGE;
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
    tot = calloc(1, sizeof *tot);
    if (cns == NULL || tot == NULL) {
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
        sleep_until(now_ns() + NS_PER_MS);
    {
        uint64_t t0 = now_ns();

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
    if (merge(tot, cns, started) != 0) {
        fprintf(stderr, "idpool-load: out of memory\n");
        rc = rc ? rc : EXIT_ERROR;
        goto out;
    }
    {
        uint64_t t0 = atomic_load(&run.t0_ns);
        double secs = tot->end_ns > t0 ? (double)(tot->end_ns - t0) / 1e9 : 0;

        if (o.timeline != NULL && write_timeline(o.timeline, tot) != 0 && rc == 0)
            rc = EXIT_ERROR;
        if (o.hist != NULL && write_hist(o.hist, tot) != 0 && rc == 0)
            rc = EXIT_ERROR;
        print_summary(&o, tot, secs);
    }

out:
    if (cns != NULL) {
        for (unsigned i = 0; i < o.conns; i++)
            if (cns[i] != NULL && conn_free(cns[i]) != 0 && rc == 0)
                rc = EXIT_ERROR;
        free(cns);
    }
    if (tot != NULL)
        free(tot->tl);
    free(tot);
    if (run.push_ids != NULL)
        for (uint64_t i = 0; i < o.batch; i++)
            free(run.push_ids[i]);
    free(run.push_ids);
    free(run.push_lens);
    if (run.cmd != NULL)
        redisFreeCommand(run.cmd);
    free(o.meta);
    return rc;
}
