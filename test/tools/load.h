/*
 * load — what the files of idpool-load share: the options, one connection
 * and its thread (struct conn), the state of the run, and each file's entry
 * points. load.c is the program (options, threads, the summary); each
 * other file one job:
 *
 *   load_conn.c    a connection: connect, fail, reconnect with backoff
 *   load_reply.c   replies parsed straight into IDs (hiredis reader functions)
 *   load_pop.c     the request loop of lpop, take, incrby and rpush
 *   load_sample.c  the samplers: llen and subscribe
 *   load_record.c  --record: the pop logs (poplog.h) and take's refusals
 *   load_stats.c   counters, latency histogram, timeline, the summary line
 */
#ifndef IDPOOL_LOAD_H
#define IDPOOL_LOAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <hiredis/hiredis.h>

#include "resolve.h"
#include "route.h"
#include "url.h"

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
#define HIST_LINEAR_BITS 10
#define HIST_SUB_BITS    7
#define HIST_TOP_BITS    24

enum mode { MODE_LPOP, MODE_TAKE, MODE_INCRBY, MODE_RPUSH, MODE_LLEN, MODE_SUBSCRIBE };
extern const char *const mode_names[]; /* of enum mode, as --mode takes them */

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
extern const char *const ekind_names[]; /* of enum ekind, as the summary shows them */

/* Error replies counted by class too (of err_reply): a failover or a reshard shows as these. */
enum eclass {
    C_READONLY,
    C_NOREPLICAS,
    C_LOADING,
    C_MOVED,
    C_ASK,
    C_TRYAGAIN,
    C_CLUSTERDOWN,
    C_NCLASSES
};
/* Of enum eclass: the reply's first word, and the summary's name. */
extern const struct eclass_row {
    const char *prefix;
    const char *name;
} eclasses[C_NCLASSES];

/* Command-line options. */
struct opts {
    const char *host;        /* Redis host */
    int port;                /* Redis port (required without --sentinel) */
    const char *sentinel;    /* --sentinel H:P[,H:P...]: the primary a Sentinel set names */
    const char *master;      /* --master NAME: its name there */
    struct redis_url surl;   /* --sentinel as a redis-sentinel:// URL (kind REDIS_SENTINEL) */
    const char *cluster;     /* --cluster H:P[,H:P...]: the primary of --key's slot */
    struct redis_url curl;   /* --cluster as a redis-cluster:// URL (kind REDIS_CLUSTER) */
    const char *password;    /* AUTH with this, if set */
    int db;                  /* SELECT this database */
    enum mode mode;          /* what to send */
    const char *key;         /* list / counter / channel */
    char *meta;              /* take: the meta key derived from key (owned) */
    uint64_t batch;          /* IDs per request */
    uint64_t push_base;      /* rpush: IDs push_base, +1, ... (a monotonic application's
                                shape); 0 = pseudo-random 16..19 digits */
    unsigned conns;          /* connections = threads */
    unsigned pipeline;       /* requests in flight per connection */
    double duration;         /* seconds, 0 = no limit */
    uint64_t count;          /* IDs in total (llen: samples; subscribe: messages), 0 = no limit */
    double rate;             /* requests/s over all connections, 0 = flat out */
    uint64_t burst_ns;       /* --rate: send what is due this much ahead in one go */
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

struct hist;
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
    uint64_t requests;           /* replies received */
    uint64_t ids_total;          /* IDs received (rpush: pushed) */
    uint64_t empties;            /* nil / empty array replies */
    uint64_t errors;             /* all error kinds */
    uint64_t ekind[E_NKINDS];    /* errors by kind */
    uint64_t eclass[C_NCLASSES]; /* error replies by class */
    struct hist *hist;           /* latency, us */
    struct tl_bucket *tl;        /* timeline */
    size_t tl_len;               /* buckets used */
    size_t tl_cap;               /* buckets allocated */
    uint64_t end_ns;             /* when this thread stopped */
    /* --record */
    int rec_fd;              /* -1 if not recording */
    char *rec_path;          /* its name (owned) */
    unsigned char *rec_buf;  /* buffered records */
    size_t rec_len;          /* bytes in rec_buf */
    size_t rec_cap;          /* see rec_buf */
    uint64_t rec_flushed_ns; /* last write(2) of rec_buf */
    FILE *ref_out;           /* take: PREFIX.<i>.refused (IDPOOL_* refusals), or NULL */
    char *ref_path;          /* its name (owned) */
    char err[1024];          /* why the last connect failed */
    struct resolver res;     /* --sentinel: this connection's sentinels */
    bool drop;               /* --sentinel: READONLY or NOREPLICAS: reconnect (re-resolve) */
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
    struct router *route;         /* --cluster: the slot table, shared (route_mu) */
    pthread_mutex_t route_mu;
};

/* 0 running, 1 graceful stop (drain in-flight), 2 stop now. Set by the
 * signal handler, the main thread (--stop-file) and a failing thread. */
extern atomic_int g_stop;

/* load.c */
void request_stop(int level);
void sleep_until(uint64_t t);

/* load_conn.c */
int conn_init(struct conn *cn, struct run *run, unsigned idx);
int conn_free(struct conn *cn);
void conn_close(struct conn *cn);
void conn_fail(struct conn *cn, enum ekind kind, const char *why);
void conn_drop(struct conn *cn);
int conn_ensure(struct conn *cn, bool first);
int stop_level(struct conn *cn, uint64_t now);
uint64_t backoff_next(const struct conn *cn);
void replies_again(struct conn *cn);

/* load_reply.c */
int parse_id(const char *s, size_t len, uint64_t *out);
void reply_attach(struct conn *cn);

/* load_pop.c */
int make_push_ids(struct run *run, uint64_t batch);
int format_request(const struct run *run, uint64_t want, char **out);
bool count_reached(struct conn *cn);
void unclaim(struct conn *cn, uint64_t n);
void run_requests(struct conn *cn);

/* load_sample.c */
void run_llen(struct conn *cn);
void run_subscribe(struct conn *cn);

/* load_record.c */
int write_all(int fd, const void *buf, size_t len);
int rec_open(struct conn *cn, const char *prefix);
int rec_flush(struct conn *cn);
int rec_put(struct conn *cn, uint64_t t_send, uint64_t t_recv, const uint64_t *ids, size_t n);
int ref_put(struct conn *cn, uint64_t t_send, uint64_t t_recv, const char *what);

/* load_stats.c */
struct totals;
void lat_add(struct conn *cn, uint64_t lat_ns);
struct tl_bucket *tl_at(struct conn *cn, uint64_t t);
void count_error(struct conn *cn, enum ekind k, uint64_t t);
int count_reply_class(struct conn *cn, const char *text);
struct totals *totals_merge(struct conn **cns, unsigned n);
void totals_free(struct totals *t);
int totals_write(const struct opts *o, const struct totals *t);
void print_summary(const struct opts *o, const struct totals *t, uint64_t t0);

#endif
