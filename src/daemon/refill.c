#include "refill.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <cjson/cJSON.h>

#include "alert.h"
#include "alerts.h"
#include "app.h"
#include "build_config.h"
#include "clock.h"
#include "fault.h"
#include "gen.h"
#include "resp.h"
#include "log.h"
#include "status.h"

#define MAX_REFILL_IDS (1 << 20) /* most IDs one refill draws; the next check continues */
#define LEASE_TARGET_S 60        /* a lease should last about this long at the current rate */
#define LEASE_MAX_IDS  (1ULL << 30)
#define LEASE_MAX_SPAN                                                                             \
    (1ULL << 48)            /* never reserve more ID space at once (unless a pool needs it) */
#define RATE_SAMPLE_MS 1000 /* minimum interval between consumption-rate samples */
/*
 * Check cadence. Every check is a plain LLEN, sent pre-encoded; the full
 * idpool_status (counters for metrics and alerts, limits, the consumption
 * rate) is read less often. A pool whose length did not change since the
 * last look is idle: checked every IDLE_CHECK_MS instead of every interval,
 * its status read every IDLE_STATUS_MS. Any change of length (pops, takes)
 * makes it busy again at once, so a burst waits at most IDLE_CHECK_MS.
 */
#define IDLE_CHECK_MS 500
/*
 * Refills in progress at once (lock taken, not yet released). More pools
 * below their mark wait for a later tick instead of all taking their lock at
 * once: at a cold start with 10,000 applications, locks taken long before
 * the single MySQL worker gets to their reservation would only be renewed
 * for seconds, or expire and waste their lease.
 */
#define MAX_REFILLS    32
#define MAX_CONTINUE   8  /* refills in a row under one lock (app_continue) */
#define PUSH_WINDOW    32 /* chunks in flight on the push connection (tx_fill) */
#define STATUS_MS      1000
#define IDLE_STATUS_MS 5000
#define NUM_LEN        21 /* decimal uint64 + NUL */
/* FCALL idpool_push 3 pool meta lock token run_id expected next hi nlo nhi */
#define PUSH_FIXED_ARGS 13

enum app_state {
    A_IDLE,     /* nothing in flight */
    A_CHECK,    /* LLEN sent */
    A_LOCK,     /* SET NX + LLEN + HGETALL sent */
    A_RESERVE,  /* waiting for a lease the batch needs */
    A_PUSHQ,    /* waiting for the push connection */
    A_PUSH,     /* pushing on the push connection */
    A_PREFETCH, /* waiting for the next lease (pool already refilled) */
    A_INSTALL,  /* idpool_push storing the prefetched lease in meta */
    A_UNLOCK,   /* idpool_unlock sent */
};

/* One push: IDs ids[off, off+n) and the lease state after them. */
struct push_cmd {
    size_t off, n;
    struct lease_state after;
};

struct app {
    struct refill *rf;
    struct app_cfg cfg;     /* validated row being served */
    struct app_cfg new_cfg; /* newer row, applied when idle */
    int has_new_cfg;
    char *k_pool, *k_meta, *k_lock; /* Redis keys (heap) */
    enum app_state state;
    int live;               /* served: present, not deleted, valid */
    int dead;               /* gone from the table: freed when idle */
    int seen;               /* reload sweep mark */
    char *bad;              /* current validation error, logged once per change */
    char *last_err;         /* last refill error, logged once per change */
    uint64_t due_ms;        /* next check */
    uint64_t check_ms;      /* when the last check was sent */
    uint64_t status_due_ms; /* next full idpool_status read */
    int busy;               /* the pool length changed at the last check */
    char *llen_cmd;         /* LLEN pool, RESP-encoded (heap) */
    size_t llen_len;
    char epoch_seen[96];    /* Redis epoch (rds_epoch) the pool was last checked against */
    int space_warned;       /* the ID-space warning was logged for this row */
    uint64_t lock_at_ms;    /* when the lock was taken or last renewed */
    unsigned side_calls;    /* renewals, limit syncs in flight (the app is not freed meanwhile) */
    unsigned renewing;      /* lock renewals in flight (its pushes wait: they would touch WATCH) */
    int refilling;          /* counted in rf->refilling (lock phase to idle) */
    unsigned continued;     /* refills in a row under this lock (app_continue) */
    int waiting;            /* in line for a refill slot (rf->wq_head) */
    struct app *wq_next;    /* next in that line */
    int low_checks;         /* status reads in a row below low water (0..2), for 'low' */
    int deleted;            /* soft-deleted row */
    uint64_t live_since_ms; /* when it became served */
    /* from the last idpool_status check */
    int len_known;      /* seen_len is valid */
    uint64_t seen_len;  /* pool length */
    int counters_known; /* the meta counters below were read at least once */
    uint64_t underflows, refused_limit, refused_rate, taken;
    int lease_known;               /* seen_lease is valid */
    struct lease_state seen_lease; /* leases as last read or written */
    /* alerts */
    struct alert_track alert[ALERT_COUNT];
    unsigned alert_unsynced;      /* 1 << kind: fired while Redis was unreachable */
    char *alert_msg[ALERT_COUNT]; /* message of each firing alert (heap), for a later sync */
    uint64_t last_ok_ms;      /* last time the pool was at/above low water or got IDs (0: never) */
    int space_exhausted;      /* the last reservation found no ID space left */
    uint64_t refill_start_ms; /* lock taken: for the refill latency histogram */
    uint64_t last_refill_unix_ms;
    /* the refill in progress */
    char token[33];           /* random lock token of this acquisition */
    int locked;               /* SET NX succeeded */
    int lock_step, lock_sent; /* replies seen / commands sent in the lock phase */
    int lock_err;             /* a lock-phase reply was missing or wrong */
    uint64_t len;             /* pool length under the lock */
    char *expected;           /* meta next as read, verbatim (heap; NULL = no meta) */
    struct lease_state plan;  /* lease state after the IDs drawn so far */
    uint64_t *ids;            /* drawn IDs (heap, per refill) */
    size_t nids, want;
    struct push_cmd *cmds; /* per-chunk lease states (heap, per refill) */
    size_t ncmds, cmdcap;
    struct push_cmd *chunks; /* the batch in push-sized chunks (heap, reused) */
    size_t nchunks, chunkcap;
    struct app *pq_next; /* next in the push queue */
    unsigned tx_pending; /* push-connection replies outstanding */
    size_t tx_sent;      /* chunks written to the push connection */
    size_t tx_done;      /* chunks appended (EXEC succeeded) */
    int push_err;        /* enum push_err: the first push error seen */
    char push_msg[256];  /* its description */
    /* consumption rate, from meta 'pushed' */
    uint64_t rate_pushed, rate_len, rate_at_ms; /* the previous sample */
    double rate;                                /* IDs/s, smoothed */
    /* counters */
    uint64_t pushed, refills, lock_busy, fenced, leases, epochs;
};

/* A row whose entity_key is invalid, remembered by id so it is logged once per change. */
struct bad_key {
    int64_t id;
    char *err;
    int seen; /* present in the load being applied */
};

struct refill {
    struct event_base *base;
    struct rds *rds;               /* checks, locks, leases, alerts */
    struct rds *prds;              /* pushes (WATCH/MULTI/EXEC: one application at a time) */
    struct app *pusher;            /* the application using prds */
    struct app *pq_head, *pq_tail; /* applications waiting for it */
    unsigned refilling;            /* applications between app_lock and idle (MAX_REFILLS) */
    struct app *wq_head, *wq_tail; /* applications in line for a refill slot */
    struct store *store;
    struct alerts *alerts;
    char *instance; /* for the status views (heap) */
    uint64_t started_unix_ms;
    int stall_ms, resolve_ms;          /* alert timings */
    uint64_t lat[STATUS_NLATENCY + 1]; /* refill latency histogram (non-cumulative) */
    double lat_sum;
    uint64_t lat_count;
    struct rng rng;
    char *prefix; /* key prefix (heap) */
    int tick_ms, reload_ms, lock_ttl_ms;
    int push_chunk;          /* IDs per RPUSH */
    struct event *tick_ev;   /* persistent tick */
    struct event *reload_ev; /* persistent reload timer */
    struct app **apps;       /* all known applications */
    struct app **index;      /* open-addressing hash of the apps by key, rebuilt per load */
    size_t index_cap;        /* its size: a power of two, at least twice the entries */
    size_t napps, capapps;
    int loading;              /* a load job is in flight */
    int loaded;               /* rows were loaded at least once */
    char *load_err;           /* last load error, logged once per change */
    struct bad_key *bad_keys; /* rows whose entity_key is invalid (no app to hold the error) */
    size_t nbad_keys;
    size_t last_live, last_bad;
    int stopping;
    void (*stop_done)(void *);
    void *stop_arg;
    struct event *stop_ev; /* fires stop_done from the loop */
    /* scratch for building idpool_push argv */
    const char **argv;
    size_t *argvlen;
    char *argbuf;
    char *resp; /* a push chunk's RPUSH in RESP (grown as needed) */
    size_t respcap;
};

static void app_to_idle(struct app *a);
static void mysql_back(struct refill *rf);
static void app_unlock(struct app *a);
static void app_push(struct app *a);

/* --- helpers ------------------------------------------------------------- */

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *str_printf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* Log a refill problem once per distinct message; refill_ok() logs recovery. */
static void app_fail(struct app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void app_fail(struct app *a, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!a->last_err || strcmp(a->last_err, msg) != 0) {
        log_warn("app=%s %s", a->cfg.key, msg);
        free(a->last_err);
        a->last_err = strdup(msg);
    }
}

static void app_ok(struct app *a)
{
    if (a->last_err) {
        log_info("app=%s refilling again (was: %s)", a->cfg.key, a->last_err);
        free(a->last_err);
        a->last_err = NULL;
    }
}

static uint64_t unix_ms(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/* What an operator wants to read when an alert resolves. */
static void resolve_message(const struct app *a, enum alert_kind kind, char *buf, size_t len)
{
    switch (kind) {
    case ALERT_UNDERFLOW:
        snprintf(buf, len, "pool holds IDs again (%" PRIu64 ") and takes are served in full",
                 a->seen_len);
        break;
    case ALERT_LOW:
        snprintf(buf, len, "pool back at or above its low-water mark (%" PRIu64 " >= %" PRIu64 ")",
                 a->seen_len, a->cfg.low_water);
        break;
    case ALERT_STALLED:
        snprintf(buf, len, "refilling again");
        break;
    case ALERT_OFFSET_REGRESSION:
        snprintf(buf, len, "current_offset is above every reserved lease again");
        break;
    case ALERT_INVALID_CONFIG:
        snprintf(buf, len, a->deleted ? "row soft-deleted" : "row fixed; served again");
        break;
    default:
        snprintf(buf, len, "condition cleared");
        break;
    }
}

/*
 * Feed one observation of an alert condition; on a transition, announce it
 * (alerts.c dedups across daemons through meta). fire_after_ms: how long the
 * condition must hold; it resolves after alert-resolve-ms clear.
 */
static void app_alert(struct app *a, enum alert_kind kind, int cond, uint64_t fire_after_ms,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void app_alert(struct app *a, enum alert_kind kind, int cond, uint64_t fire_after_ms,
                      const char *fmt, ...)
{
    struct refill *rf = a->rf;
    enum alert_change ch =
        alert_observe(&a->alert[kind], cond, clock_ms(), fire_after_ms, (uint64_t)rf->resolve_ms);
    char msg[384], *extra = NULL;
    cJSON *x;
    va_list ap;

    if (ch == ALERT_NONE)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* The pool's state goes along with the event (sizes are far below 2^53). */
    if (a->len_known && (x = cJSON_CreateObject())) {
        cJSON_AddNumberToObject(x, "pool_length", (double)a->seen_len);
        cJSON_AddNumberToObject(x, "low_water", (double)a->cfg.low_water);
        cJSON_AddNumberToObject(x, "max_pool_size", (double)a->cfg.max_pool);
        extra = cJSON_PrintUnformatted(x);
        cJSON_Delete(x);
    }
    if (ch == ALERT_RESOLVE)
        resolve_message(a, kind, msg, sizeof(msg));
    free(a->alert_msg[kind]);
    a->alert_msg[kind] = ch == ALERT_FIRE ? strdup(msg) : NULL;
    if (ch == ALERT_FIRE && !rds_ready(rf->rds))
        a->alert_unsynced |= 1u << kind;
    else
        a->alert_unsynced &= ~(1u << kind);
    alerts_emit(rf->alerts, a->cfg.key, a->k_meta, kind, ch == ALERT_FIRE, msg, extra);
    cJSON_free(extra);
}

/* Resolve every firing alert at once (the row is gone). */
static void app_alerts_clear(struct app *a, const char *why)
{
    for (int k = 0; k < ALERT_COUNT; k++) {
        if (!a->alert[k].firing)
            continue;
        a->alert[k].firing = 0;
        a->alert[k].cond = 0;
        alerts_emit(a->rf->alerts, a->cfg.key, a->k_meta, (enum alert_kind)k, 0, why, NULL);
    }
}

/* The pool-health alerts of an application that is not served: nothing to watch. */
static void app_alerts_idle(struct app *a)
{
    app_alert(a, ALERT_UNDERFLOW, 0, 0, "-");
    app_alert(a, ALERT_LOW, 0, 0, "-");
    app_alert(a, ALERT_STALLED, 0, 0, "-");
}

static void app_free(struct app *a)
{
    if (a->waiting) { /* unlink it from the line for refill slots */
        struct app **pp = &a->rf->wq_head, *prev = NULL;
        while (*pp && *pp != a) {
            prev = *pp;
            pp = &(*pp)->wq_next;
        }
        if (*pp)
            *pp = a->wq_next;
        if (a->rf->wq_tail == a)
            a->rf->wq_tail = prev;
    }
    for (int k = 0; k < ALERT_COUNT; k++)
        free(a->alert_msg[k]);
    free(a->k_pool);
    free(a->k_meta);
    free(a->k_lock);
    free(a->llen_cmd);
    free(a->bad);
    free(a->last_err);
    free(a->ids);
    free(a->cmds);
    free(a->chunks);
    free(a->expected);
    free(a);
}

static struct app *app_new(struct refill *rf, const char *key)
{
    struct app *a = calloc(1, sizeof(*a));

    if (!a)
        return NULL;
    a->rf = rf;
    a->busy = 1;
    a->k_pool = str_printf("%s:{%s}:pool", rf->prefix, key);
    a->k_meta = str_printf("%s:{%s}:meta", rf->prefix, key);
    a->k_lock = str_printf("%s:{%s}:lock", rf->prefix, key);
    if (a->k_pool)
        a->llen_cmd =
            str_printf("*2\r\n$4\r\nLLEN\r\n$%zu\r\n%s\r\n", strlen(a->k_pool), a->k_pool);
    if (a->llen_cmd)
        a->llen_len = strlen(a->llen_cmd);
    if (!a->k_pool || !a->k_meta || !a->k_lock || !a->llen_cmd) {
        app_free(a);
        return NULL;
    }
    {
        size_t n = strnlen(key, sizeof(a->cfg.key) - 1);
        memcpy(a->cfg.key, key, n);
        a->cfg.key[n] = '\0';
    }
    return a;
}

static int all_idle(const struct refill *rf)
{
    for (size_t i = 0; i < rf->napps; i++)
        if (rf->apps[i]->state != A_IDLE)
            return 0;
    return !rf->loading;
}

static void maybe_stopped(struct refill *rf)
{
    if (rf->stopping && rf->stop_done && all_idle(rf))
        event_active(rf->stop_ev, 0, 0);
}

/* Lease size in IDs: about LEASE_TARGET_S seconds of demand, at least a full pool. */
static uint64_t lease_ids(const struct app *a)
{
    uint64_t min = a->cfg.max_pool > a->cfg.step ? a->cfg.max_pool : a->cfg.step;
    double want = a->rate * LEASE_TARGET_S;

    if (want < (double)min)
        return min;
    if (want > (double)LEASE_MAX_IDS)
        return LEASE_MAX_IDS;
    return (uint64_t)want;
}

/*
 * The ID space to reserve for a lease: lease_ids() worth, but no more than
 * LEASE_MAX_SPAN unless one full pool needs more, so that a large delta x
 * increment_max cannot swallow the whole ID space in one reservation.
 */
static uint64_t lease_span(const struct app *a)
{
    uint64_t span = app_span_for(&a->cfg, lease_ids(a));
    uint64_t floor = app_span_for(&a->cfg, a->cfg.max_pool);
    uint64_t cap = floor > LEASE_MAX_SPAN ? floor : LEASE_MAX_SPAN;

    return span < cap ? span : cap;
}

/*
 * Consumption (IDs/s, smoothed) from what every check sees in Redis: IDs
 * pushed by all instances (meta 'pushed') minus what the pool grew by. It
 * decays to 0 when clients stop, whoever does the refilling.
 */
static void rate_sample(struct app *a, uint64_t pushed, uint64_t len)
{
    uint64_t now = clock_ms();

    if (a->rate_at_ms == 0 || pushed < a->rate_pushed) {
        /* first sample, or meta was lost: start over */
        a->rate_pushed = pushed;
        a->rate_len = len;
        a->rate_at_ms = now;
        return;
    }
    if (now - a->rate_at_ms < RATE_SAMPLE_MS)
        return;
    {
        double gone = (double)(pushed - a->rate_pushed) - ((double)len - (double)a->rate_len);
        double inst = gone > 0 ? gone * 1000.0 / (double)(now - a->rate_at_ms) : 0;
        a->rate = a->rate == 0 ? inst : 0.7 * a->rate + 0.3 * inst;
    }
    a->rate_pushed = pushed;
    a->rate_len = len;
    a->rate_at_ms = now;
}

/* --- the refill cycle ---------------------------------------------------- */

static void app_lock(struct app *a);

/* A refill slot is free: the first application in line gets it (it re-checks its pool). */
static void slot_free(struct refill *rf)
{
    while (rf->refilling < MAX_REFILLS && rf->wq_head) {
        struct app *w = rf->wq_head;

        rf->wq_head = w->wq_next;
        if (!rf->wq_head)
            rf->wq_tail = NULL;
        w->wq_next = NULL;
        w->waiting = 0;
        if (w->live && !w->dead && w->state == A_IDLE && !rf->stopping && rds_ready(rf->rds))
            app_lock(w);
    }
}

/* Finish a refill: free per-refill buffers, apply a pending row, go idle. */
static void app_to_idle(struct app *a)
{
    free(a->ids);
    free(a->cmds);
    free(a->chunks);
    free(a->expected);
    a->ids = NULL;
    a->cmds = NULL;
    a->chunks = NULL;
    a->expected = NULL;
    a->nids = a->want = a->ncmds = a->cmdcap = a->nchunks = a->chunkcap = 0;
    a->state = A_IDLE;
    if (a->refilling) {
        a->refilling = 0;
        a->rf->refilling--;
        slot_free(a->rf);
    }
    if (a->has_new_cfg) {
        a->cfg = a->new_cfg;
        a->has_new_cfg = 0;
    }
    maybe_stopped(a->rf);
}

static void on_unlock(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;

    (void)r;
    if (!reply || reply->type == REDIS_REPLY_ERROR)
        log_debug("app=%s lock release failed (%s); it expires by its TTL", a->cfg.key,
                  rds_errstr(reply));
    app_to_idle(a);
}

/* Compare-and-delete the lock: never releases another refiller's lock. */
static void app_unlock(struct app *a)
{
    if (!a->locked) {
        app_to_idle(a);
        return;
    }
    a->locked = 0;
    a->state = A_UNLOCK;
    if (rds_command(a->rf->rds, on_unlock, a, "FCALL idpool_unlock 1 %s %s", a->k_lock, a->token) !=
        0)
        app_to_idle(a);
}

static int cmd_record(struct app *a, size_t off, size_t n)
{
    if (a->ncmds == a->cmdcap) {
        size_t cap = a->cmdcap ? a->cmdcap * 2 : 64;
        struct push_cmd *c = realloc(a->cmds, cap * sizeof(*c));
        if (!c)
            return -1;
        a->cmds = c;
        a->cmdcap = cap;
    }
    a->cmds[a->ncmds].off = off;
    a->cmds[a->ncmds].n = n;
    a->cmds[a->ncmds].after = a->plan;
    a->ncmds++;
    return 0;
}

/*
 * Draw IDs into the batch until it is complete (0) or the leases run out (1),
 * recording the lease state after each chunk so that every idpool_push call
 * carries a consistent meta. Monotonic draws chunks of push-chunk IDs; trend draws
 * whole blocks of `step` (several small blocks per chunk). -1: out of memory.
 */
static int app_draw(struct app *a)
{
    uint64_t step = a->cfg.step;
    size_t chunk = (size_t)a->rf->push_chunk;

    while (a->nids < a->want) {
        size_t left = a->want - a->nids, unit, got;

        if (a->cfg.type == APP_TREND)
            unit = step >= chunk ? step : (chunk / step) * step;
        else
            unit = chunk;
        if (unit > left)
            unit = a->cfg.type == APP_TREND ? left / step * step : left;
        if (unit == 0)
            break;
        got = gen_draw(&a->cfg, &a->plan, &a->rf->rng, a->ids + a->nids, unit);
        if (got && cmd_record(a, a->nids, got) < 0)
            return -1;
        a->nids += got;
        if (got < unit)
            return 1;
    }
    return 0;
}

static void app_plan(struct app *a);

/* The lock was renewed for another refill in a row (app_continue). */
static void on_continue(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;
    char next[NUM_LEN];

    (void)r;
    if (!reply || reply->type != REDIS_REPLY_INTEGER || reply->integer != 1 || a->rf->stopping) {
        app_unlock(a); /* lost the lock (or stopping): the next check starts over */
        return;
    }
    a->lock_at_ms = a->refill_start_ms = clock_ms();
    /* meta's next is where the last push left it: the start of the plan */
    next[u64_fmt(a->plan.next, next)] = '\0';
    free(a->expected);
    free(a->ids);
    a->ids = NULL;
    a->nids = a->want = a->ncmds = 0;
    a->expected = strdup(next);
    if (!a->expected) {
        app_unlock(a);
        return;
    }
    app_plan(a);
}

/*
 * A refill (and maybe a prefetch) is done. Under heavy consumption the pool
 * can be below its low-water mark again already: then go on at once under
 * the same lock, renewed, instead of releasing it and waiting for the next
 * check (up to MAX_CONTINUE refills in a row, and only while no other
 * application waits for a refill slot).
 */
static void app_continue(struct app *a)
{
    char ttl[16];

    if (a->rf->stopping || a->len >= a->cfg.low_water || a->continued >= MAX_CONTINUE ||
        a->rf->wq_head) {
        app_unlock(a);
        return;
    }
    a->continued++;
    a->state = A_LOCK;
    snprintf(ttl, sizeof(ttl), "%d", a->rf->lock_ttl_ms);
    if (rds_command(a->rf->rds, on_continue, a, "FCALL idpool_renew 1 %s %s %s", a->k_lock,
                    a->token, ttl) != 0)
        app_unlock(a);
}

static void on_install(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;

    (void)r;
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
        app_fail(a, "storing the prefetched lease in meta failed: %s (the lease becomes a gap)",
                 rds_errstr(reply));
        app_unlock(a);
        return;
    }
    app_continue(a);
}

/* Send idpool_push without IDs: store the prefetched lease in meta (lease install). */
static int push_send(struct app *a, const char *expected, const struct lease_state *st,
                     rds_reply_fn *fn)
{
    struct refill *rf = a->rf;
    char *p = rf->argbuf;
    size_t argc = 0;
    const char *fixed[] = {"FCALL",  "idpool_push",      "3",     a->k_pool, a->k_meta, a->k_lock,
                           a->token, rds_epoch(rf->rds), expected};
    uint64_t nums[4] = {st->next, st->hi, st->nlo, st->nhi};

    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        rf->argv[argc] = fixed[i];
        rf->argvlen[argc++] = strlen(fixed[i]);
    }
    for (int i = 0; i < 4; i++) {
        rf->argv[argc] = p;
        if (i >= 2 && !lease_has_next(st))
            rf->argvlen[argc++] = 0; /* "" = no prefetched lease */
        else {
            size_t len = u64_fmt(nums[i], p);
            rf->argvlen[argc++] = len;
            p += len;
        }
    }
    return rds_command_argv(rf->rds, fn, a, (int)argc, rf->argv, rf->argvlen);
}

/* After a successful reservation: offset_regression, and ID space no longer exhausted. */
static void lease_alerts(struct app *a, const struct store_lease *lease)
{
    a->space_exhausted = 0;
    if (lease->regression)
        app_alert(a, ALERT_OFFSET_REGRESSION, 1, 0,
                  "current_offset %" PRIu64 " is below the %" PRIu64
                  " already reserved; kept the higher value",
                  lease->seen_offset, lease->max_leased);
}

static void on_prefetch(void *arg, int status, const struct store_lease *lease, const char *err)
{
    struct app *a = arg;
    char expected[NUM_LEN];

    if (status != 0) {
        app_fail(a, "prefetching the next lease failed: %s", err);
        if (strstr(err, "ID space exhausted")) {
            a->space_exhausted = 1;
            app_alert(a, ALERT_ID_SPACE_EXHAUSTION, 1, 0, "%s", err);
        }
        app_unlock(a);
        return;
    }
    a->leases++;
    if (fault_at(FAULT_RESERVED))
        fault_fire();
    lease_alerts(a, lease);
    mysql_back(a->rf);
    if (lease->regression)
        log_warn("app=%s offset_regression: current_offset %" PRIu64 " is below the %" PRIu64
                 " already reserved; kept the higher value",
                 a->cfg.key, lease->seen_offset, lease->max_leased);
    if (a->rf->stopping || !rds_ready(a->rf->rds) || lease_add(&a->plan, lease->lo, lease->hi)) {
        app_unlock(a);
        return;
    }
    log_debug("app=%s prefetched lease [%" PRIu64 ", %" PRIu64 ")", a->cfg.key, lease->lo,
              lease->hi);
    expected[u64_fmt(a->plan.next, expected)] = '\0';
    a->state = A_INSTALL;
    if (push_send(a, expected, &a->plan, on_install) != 0)
        app_unlock(a);
}

/* After a successful push: reserve the next lease if the current one runs low. */
static void app_after_push(struct app *a)
{
    uint64_t target = lease_span(a);

    if (!a->rf->stopping && !lease_has_next(&a->plan) &&
        lease_remaining_span(&a->plan) < target / 2) {
        a->state = A_PREFETCH;
        if (store_reserve(a->rf->store, a->cfg.id, target, lease_floor(&a->plan), on_prefetch, a) ==
            0)
            return;
    }
    app_continue(a);
}

/* Record one refill's duration (lock to last push reply) in the histogram. */
static void refill_latency(struct refill *rf, uint64_t ms)
{
    static const double bounds[STATUS_NLATENCY] = {
#define B(x) x,
        STATUS_LATENCY_BUCKETS(B)
#undef B
    };
    double sec = (double)ms / 1000.0;
    int i = 0;

    while (i < STATUS_NLATENCY && sec > bounds[i])
        i++;
    rf->lat[i]++;
    rf->lat_sum += sec;
    rf->lat_count++;
}

/*
 * The push path. Every chunk of a refill is appended with native RPUSH
 * inside MULTI/EXEC on a connection of its own ("redis-push"): a Lua
 * function that unpacks 1000 arguments into RPUSH costs Redis about twice the
 * CPU of the plain command, and the push is most of Redis' work. The fence
 * is idpool_push's (src/idpool.lua), in a small function that guards the
 * transaction:
 *
 *   WATCH lock
 *   FCALL idpool_guard 3 pool meta lock token epoch expected_next
 *   MULTI; RPUSH pool ids...; HSET meta next hi run_id [nlo nhi];
 *   [HDEL meta nlo nhi]; HINCRBY meta pushed n; EXEC
 *
 * The guard checks the lock token, the epoch and meta's next; when a check
 * fails it touches the watched lock key, so the EXEC does nothing. EXEC also
 * does nothing if the lock expired, was taken over or deleted after WATCH.
 * Each chunk's guard expects the next left by the chunk before it, so after
 * a chunk that did nothing the following ones do nothing either: a refill
 * is pipelined (PUSH_WINDOW chunks in flight), and the push runs at Redis'
 * speed, not at one round trip per chunk. The lock is not renewed while the
 * application pushes (a renewal would touch the watched key).
 *
 * WATCH is per connection, so one application at a time owns the push
 * connection (rf->pusher); the others wait in a FIFO with their locks
 * renewed, and start only once their last renewal has landed.
 */
enum push_err { PE_NONE, PE_FENCED, PE_EPOCH, PE_STALE, PE_OTHER };

static void pusher_next(struct refill *rf);
static int tx_fill(struct app *a);

static void push_error(struct app *a, enum push_err kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void push_error(struct app *a, enum push_err kind, const char *fmt, ...)
{
    va_list ap;

    if (a->push_err != PE_NONE)
        return; /* the first error tells what happened */
    a->push_err = kind;
    va_start(ap, fmt);
    vsnprintf(a->push_msg, sizeof(a->push_msg), fmt, ap);
    va_end(ap);
}

/* The refill's pushes are over, successful or not. */
static void push_finish(struct app *a)
{
    struct refill *rf = a->rf;

    if (rf->pusher == a)
        rf->pusher = NULL;
    switch ((enum push_err)a->push_err) {
    case PE_NONE:
        break;
    case PE_FENCED:
        a->fenced++;
        log_warn("app=%s push fenced off: %s; the rest of this refill was rejected", a->cfg.key,
                 a->push_msg);
        break;
    case PE_EPOCH:
        a->epochs++;
        log_warn("app=%s redis restart or failover detected (epoch changed): pool "
                 "discarded, refilling from a fresh lease",
                 a->cfg.key);
        break;
    default:
        app_fail(a, "push failed: %s", a->push_msg);
        break;
    }
    if (a->push_err != PE_NONE || a->tx_done < a->nchunks) {
        app_unlock(a);
    } else {
        a->refills++;
        a->pushed += a->nids;
        a->last_ok_ms = clock_ms();
        a->last_refill_unix_ms = unix_ms();
        a->seen_lease = a->plan;
        a->lease_known = 1;
        a->seen_len = a->len;
        a->len_known = 1;
        refill_latency(rf, a->last_ok_ms - a->refill_start_ms);
        app_ok(a);
        log_debug("app=%s pushed %zu IDs, pool now %" PRIu64, a->cfg.key, a->nids, a->len);
        app_after_push(a);
    }
    pusher_next(rf);
}

static void tx_settle(struct app *a)
{
    if (a->tx_pending == 0 && (a->push_err != PE_NONE || a->tx_done == a->nchunks))
        push_finish(a);
}

/* A command was queued on the push connection (rc 0) or could not be. */
static int tx_queued(struct app *a, int rc)
{
    if (rc != 0) {
        push_error(a, PE_OTHER, "cannot send on the push connection");
        return -1;
    }
    a->tx_pending++;
    return 0;
}

static int tx_send(struct app *a, rds_reply_fn *fn, int argc, const char **argv,
                   const size_t *argvlen)
{
    return tx_queued(a, rds_command_argv(a->rf->prds, fn, a, argc, argv, argvlen));
}

/* MULTI, RPUSH... : only an error matters (EXEC then fails with EXECABORT). */
static void on_tx_reply(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;

    (void)r;
    a->tx_pending--;
    if (!reply || reply->type == REDIS_REPLY_ERROR)
        push_error(a, PE_OTHER, "%s", rds_errstr(reply));
    tx_settle(a);
}

/* The guard's verdict: an IDPOOL_* error says which check failed. */
static void on_tx_guard(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;

    (void)r;
    a->tx_pending--;
    if (reply && reply->type == REDIS_REPLY_ERROR) {
        if (strncmp(reply->str, "IDPOOL_FENCED", 13) == 0)
            push_error(a, PE_FENCED, "lock not held by this refiller (held past its %d ms TTL?)",
                       a->rf->lock_ttl_ms);
        else if (strncmp(reply->str, "IDPOOL_EPOCH", 12) == 0)
            push_error(a, PE_EPOCH, "%s", reply->str);
        else if (strncmp(reply->str, "IDPOOL_STALE", 12) == 0)
            push_error(a, PE_STALE, "%s", reply->str);
        else
            push_error(a, PE_OTHER, "%s", reply->str);
    } else if (!reply) {
        push_error(a, PE_OTHER, "%s", rds_errstr(reply));
    }
    tx_settle(a);
}

static void on_tx_exec(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;

    (void)r;
    a->tx_pending--;
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
        push_error(a, PE_OTHER, "%s", rds_errstr(reply));
    } else if (reply->type == REDIS_REPLY_NIL) {
        push_error(a, PE_FENCED, "the lock changed before EXEC (held past its %d ms TTL?)",
                   a->rf->lock_ttl_ms);
    } else if (a->push_err == PE_NONE) {
        if (reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
            reply->element[0]->type == REDIS_REPLY_INTEGER)
            a->len = (uint64_t)reply->element[0]->integer;
        a->tx_done++;
        tx_fill(a);
    }
    tx_settle(a);
}

/* Send chunk k: WATCH, the guard, MULTI ... EXEC (see above). */
static int tx_write(struct app *a, size_t k)
{
    struct refill *rf = a->rf;
    const struct push_cmd *c = &a->chunks[k];
    const struct lease_state *st = &c->after;
    char nums[4][NUM_LEN], n[NUM_LEN];
    const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"};
    size_t multi_len[] = {5}, exec_len[] = {4};
    size_t klen = strlen(a->k_pool), need = RESP_RPUSH_MAX(klen, c->n), rlen;

    /* the RPUSH first: nothing is sent if it cannot be built (no MULTI left open) */
    if (need > rf->respcap) {
        char *b = realloc(rf->resp, need);
        if (!b) {
            push_error(a, PE_OTHER, "out of memory for a push chunk");
            return -1;
        }
        rf->resp = b;
        rf->respcap = need;
    }
    rlen = resp_rpush(rf->resp, a->k_pool, klen, a->ids + c->off, c->n);
    {
        const char *epoch = rds_epoch(rf->prds), *want = a->expected ? a->expected : "";
        const char *watch[] = {"WATCH", a->k_lock};
        size_t watch_len[] = {5, strlen(a->k_lock)};
        char prev[NUM_LEN];

        if (k > 0) {
            prev[u64_fmt(a->chunks[k - 1].after.next, prev)] = '\0';
            want = prev;
        }
        const char *guard[] = {"FCALL",   "idpool_guard", "3",   a->k_pool, a->k_meta,
                               a->k_lock, a->token,       epoch, want};
        size_t guard_len[9];
        for (int i = 0; i < 9; i++)
            guard_len[i] = strlen(guard[i]);
        if (tx_send(a, on_tx_reply, 2, watch, watch_len) != 0 ||
            tx_send(a, on_tx_guard, 9, guard, guard_len) != 0 ||
            tx_send(a, on_tx_reply, 1, multi, multi_len) != 0)
            return -1;
    }
    if (tx_queued(a, rds_command_resp(rf->prds, on_tx_reply, a, rf->resp, rlen)) != 0)
        return -1;
    {
        const char *epoch = rds_epoch(rf->prds);
        const char *argv[] = {"HSET",   a->k_meta, "next", nums[0], "hi",  nums[1],
                              "run_id", epoch,     "nlo",  nums[2], "nhi", nums[3]};
        size_t len[12] = {4, strlen(a->k_meta),
                          4, u64_fmt(st->next, nums[0]),
                          2, u64_fmt(st->hi, nums[1]),
                          6, strlen(epoch),
                          3, 0,
                          3, 0};
        int has_next = lease_has_next(st);

        if (has_next) {
            len[9] = u64_fmt(st->nlo, nums[2]);
            len[11] = u64_fmt(st->nhi, nums[3]);
        }
        if (tx_send(a, on_tx_reply, has_next ? 12 : 8, argv, len) != 0)
            return -1;
        if (!has_next) {
            const char *del[] = {"HDEL", a->k_meta, "nlo", "nhi"};
            size_t del_len[] = {4, strlen(a->k_meta), 3, 3};
            if (tx_send(a, on_tx_reply, 4, del, del_len) != 0)
                return -1;
        }
    }
    {
        const char *argv[] = {"HINCRBY", a->k_meta, "pushed", n};
        size_t len[] = {7, strlen(a->k_meta), 6, u64_fmt(c->n, n)};
        if (tx_send(a, on_tx_reply, 4, argv, len) != 0)
            return -1;
    }
    return tx_send(a, on_tx_exec, 1, exec, exec_len);
}

/*
 * Keep up to PUSH_WINDOW chunks in flight: each EXEC reply sends the next
 * chunk. Formatting a chunk overlaps with Redis appending the ones before it,
 * and hiredis' output buffer stays small (a whole refill of 2^20 IDs queued
 * at once is ~25 MB that hiredis shifts down after every partial write).
 */
static int tx_fill(struct app *a)
{
    while (a->push_err == PE_NONE && a->tx_sent < a->nchunks &&
           a->tx_sent - a->tx_done < PUSH_WINDOW) {
        if (tx_write(a, a->tx_sent) != 0)
            return -1;
        if (a->tx_sent++ == 0 && fault_at(FAULT_PUSHING)) {
            rds_flush(a->rf->prds); /* the first chunk is on the wire, the rest is not */
            fault_fire();
        }
    }
    return 0;
}

/* Give the push connection to the next waiting application. */
static void pusher_next(struct refill *rf)
{
    while (!rf->pusher && rf->pq_head && !rf->pq_head->renewing) {
        struct app *a = rf->pq_head;

        rf->pq_head = a->pq_next;
        if (!rf->pq_head)
            rf->pq_tail = NULL;
        a->pq_next = NULL;
        a->state = A_PUSH;
        a->push_err = PE_NONE;
        a->tx_pending = 0;
        a->tx_sent = a->tx_done = 0;
        if (!rds_ready(rf->prds)) {
            push_error(a, PE_OTHER, "the push connection to Redis is down");
            push_finish(a);
            continue;
        }
        rf->pusher = a;
        tx_fill(a);
        tx_settle(a);
    }
}

/*
 * Split the batch into chunks of at most push-chunk IDs (a trend block larger
 * than a chunk goes out in several; all but the first find meta already at
 * the block's end) and queue the application for the push connection.
 */
static void app_push(struct app *a)
{
    struct refill *rf = a->rf;
    size_t n = 0, chunk = (size_t)rf->push_chunk;

    if (a->nids == 0) {
        app_unlock(a);
        return;
    }
    for (size_t c = 0; c < a->ncmds; c++)
        n += (a->cmds[c].n + chunk - 1) / chunk;
    if (n > a->chunkcap) {
        struct push_cmd *p = realloc(a->chunks, n * sizeof(*p));
        if (!p) {
            app_fail(a, "out of memory for %zu push chunks", n);
            app_unlock(a);
            return;
        }
        a->chunks = p;
        a->chunkcap = n;
    }
    a->nchunks = 0;
    for (size_t c = 0; c < a->ncmds; c++)
        for (size_t off = 0; off < a->cmds[c].n; off += chunk) {
            struct push_cmd *k = &a->chunks[a->nchunks++];
            k->off = a->cmds[c].off + off;
            k->n = a->cmds[c].n - off < chunk ? a->cmds[c].n - off : chunk;
            k->after = a->cmds[c].after;
        }
    a->state = A_PUSHQ;
    a->pq_next = NULL;
    if (rf->pq_tail)
        rf->pq_tail->pq_next = a;
    else
        rf->pq_head = a;
    rf->pq_tail = a;
    pusher_next(rf);
}

static void on_reserve(void *arg, int status, const struct store_lease *lease, const char *err)
{
    struct app *a = arg;
    int rc;

    if (status != 0) {
        app_fail(a, "cannot reserve a lease: %s", err);
        if (strstr(err, "ID space exhausted")) {
            a->space_exhausted = 1;
            app_alert(a, ALERT_ID_SPACE_EXHAUSTION, 1, 0, "%s", err);
        }
    } else {
        a->leases++;
        if (fault_at(FAULT_RESERVED))
            fault_fire();
        lease_alerts(a, lease);
        mysql_back(a->rf);
        if (lease->regression)
            log_warn("app=%s offset_regression: current_offset %" PRIu64 " is below the %" PRIu64
                     " already reserved; kept the higher value",
                     a->cfg.key, lease->seen_offset, lease->max_leased);
        log_debug("app=%s reserved lease [%" PRIu64 ", %" PRIu64 ")", a->cfg.key, lease->lo,
                  lease->hi);
        if (lease_add(&a->plan, lease->lo, lease->hi) != 0) {
            app_fail(a, "lease [%" PRIu64 ", %" PRIu64 ") is below the state; not used", lease->lo,
                     lease->hi);
        } else {
            rc = app_draw(a);
            if (rc < 0)
                app_fail(a, "out of memory drawing IDs");
            else if (rc > 0)
                app_fail(a, "a fresh lease could not supply the batch");
        }
    }
    if (a->rf->stopping || !rds_ready(a->rf->rds)) {
        app_unlock(a);
        return;
    }
    app_push(a); /* whatever was drawn is ours: push it */
}

static int parse_meta(struct app *a, const redisReply *reply)
{
    uint64_t *dst[4] = {&a->plan.next, &a->plan.hi, &a->plan.nlo, &a->plan.nhi};
    static const char *const names[4] = {"next", "hi", "nlo", "nhi"};
    int have_next = 0, bad = 0;

    memset(&a->plan, 0, sizeof(a->plan));
    free(a->expected);
    a->expected = NULL;
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *f = reply->element[i], *v = reply->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        for (int k = 0; k < 4; k++)
            if (strcmp(f->str, names[k]) == 0 && u64_parse(v->str, v->len, dst[k]) != 0)
                bad = 1;
        if (strcmp(f->str, "next") == 0) {
            have_next = 1;
            /* Kept verbatim, however long: the fence compares it byte for byte. */
            a->expected = strndup(v->str, v->len);
            if (!a->expected)
                bad = 1;
        }
    }
    if (!have_next || bad || a->plan.hi < a->plan.next ||
        (lease_has_next(&a->plan) && (a->plan.nlo < a->plan.hi || a->plan.nhi <= a->plan.nlo))) {
        /* Unusable progress: start from a fresh lease (MySQL knows what was leased). */
        memset(&a->plan, 0, sizeof(a->plan));
        return have_next ? -1 : 0;
    }
    return 0;
}

/* Under the lock: decide how many IDs to add and draw them (or reserve first). */
static void app_plan(struct app *a)
{
    uint64_t room, want, cap;
    int rc;

    if (a->len >= a->cfg.low_water) {
        app_unlock(a); /* someone else refilled it */
        return;
    }
    room = a->cfg.max_pool - a->len;
    want = room / a->cfg.step * a->cfg.step;
    if (want < a->cfg.step)
        want = a->cfg.step;
    cap = MAX_REFILL_IDS / a->cfg.step * a->cfg.step;
    if (cap < a->cfg.step)
        cap = a->cfg.step;
    if (want > cap)
        want = cap;
    a->want = (size_t)want;
    a->nids = 0;
    a->ncmds = 0;
    a->ids = malloc(a->want * sizeof(*a->ids));
    if (!a->ids) {
        app_fail(a, "out of memory for a batch of %zu IDs", a->want);
        app_unlock(a);
        return;
    }
    rc = app_draw(a);
    if (rc < 0) {
        app_fail(a, "out of memory drawing IDs");
        app_unlock(a);
        return;
    }
    if (rc == 0) {
        app_push(a);
        return;
    }
    /* The leases in meta cannot supply the batch: reserve one now. */
    {
        uint64_t need = app_span_for(&a->cfg, a->want - a->nids);
        uint64_t span = lease_span(a);
        a->state = A_RESERVE;
        if (store_reserve(a->rf->store, a->cfg.id, span > need ? span : need, lease_floor(&a->plan),
                          on_reserve, a) != 0)
            app_push(a);
    }
}

static void on_lock_phase(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;
    int step = a->lock_step++;

    (void)r;
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
        if (!a->lock_err)
            app_fail(a, "lock phase failed: %s", rds_errstr(reply));
        a->lock_err = 1;
    } else if (step == 0) {
        a->locked = reply->type == REDIS_REPLY_STATUS;
        a->lock_at_ms = clock_ms();
        a->refill_start_ms = a->lock_at_ms;
    } else if (step == 1) {
        a->len = reply->type == REDIS_REPLY_INTEGER ? (uint64_t)reply->integer : 0;
    } else if (step == 2 && reply->type == REDIS_REPLY_ARRAY) {
        if (parse_meta(a, reply) != 0) {
            log_warn("app=%s meta hash %s is corrupt; refilling from a fresh lease", a->cfg.key,
                     a->k_meta);
        }
    }
    if (a->lock_step < a->lock_sent)
        return;
    if (a->lock_err || a->lock_sent < 3 || !a->locked || a->rf->stopping) {
        if (!a->locked && !a->lock_err)
            a->lock_busy++;
        app_unlock(a); /* no-op when not locked */
        return;
    }
    if (fault_at(FAULT_LOCKED))
        fault_fire();
    app_plan(a);
}

static void app_lock(struct app *a)
{
    struct refill *rf = a->rf;
    char ttl[16];
    static const char hex[] = "0123456789abcdef";

    if (rf->refilling >= MAX_REFILLS) {
        /* Enough refills in progress: in line (FIFO) for the next free slot. */
        app_to_idle(a);
        a->waiting = 1;
        a->wq_next = NULL;
        if (rf->wq_tail)
            rf->wq_tail->wq_next = a;
        else
            rf->wq_head = a;
        rf->wq_tail = a;
        return;
    }
    rf->refilling++;
    a->refilling = 1;
    a->continued = 0;

    for (int i = 0; i < 32; i++)
        a->token[i] = hex[rng_next(&rf->rng) & 0xf];
    a->token[32] = '\0';
    snprintf(ttl, sizeof(ttl), "%d", rf->lock_ttl_ms);
    a->state = A_LOCK;
    a->locked = 0;
    a->lock_err = 0;
    a->lock_step = 0;
    a->lock_sent = 0;
    if (rds_command(rf->rds, on_lock_phase, a, "SET %s %s NX PX %s", a->k_lock, a->token, ttl) == 0)
        a->lock_sent++;
    if (a->lock_sent == 1 && rds_command(rf->rds, on_lock_phase, a, "LLEN %s", a->k_pool) == 0)
        a->lock_sent++;
    if (a->lock_sent == 2 && rds_command(rf->rds, on_lock_phase, a, "HGETALL %s", a->k_meta) == 0)
        a->lock_sent++;
    if (a->lock_sent == 0)
        app_to_idle(a);
}

static void on_epoch(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;

    if (!reply || reply->type != REDIS_REPLY_INTEGER) {
        if (reply)
            app_fail(a, "epoch check failed: %s", rds_errstr(reply));
        return;
    }
    if (reply->integer == 1) {
        a->epochs++;
        log_warn("app=%s redis restart or failover detected (epoch now %s): pool "
                 "discarded, refilling from a fresh lease",
                 a->cfg.key, rds_epoch(r));
    }
    snprintf(a->epoch_seen, sizeof(a->epoch_seen), "%s", rds_epoch(r));
}

static void on_side_call(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;

    (void)r;
    a->side_calls--;
    if (reply && reply->type == REDIS_REPLY_ERROR)
        log_warn("app=%s %s", a->cfg.key, reply->str);
}

static uint64_t reply_u64(const redisReply *r)
{
    return r->type == REDIS_REPLY_INTEGER && r->integer > 0 ? (uint64_t)r->integer : 0;
}

/*
 * idpool_take reads the limits from meta: keep them equal to the row (also
 * after meta was lost), and remove them when the row is not served, so that
 * takes answer IDPOOL_NOAPP.
 */
static void sync_limits(struct app *a, const redisReply *per_take, const redisReply *per_second)
{
    struct refill *rf = a->rf;
    char t[NUM_LEN], p[NUM_LEN];
    int have = per_take->type == REDIS_REPLY_STRING && per_second->type == REDIS_REPLY_STRING;

    if (!a->live) {
        if (have &&
            rds_command(rf->rds, on_side_call, a, "HDEL %s per_take per_second", a->k_meta) == 0)
            a->side_calls++;
        return;
    }
    t[u64_fmt(a->cfg.per_take, t)] = '\0';
    p[u64_fmt(a->cfg.per_second, p)] = '\0';
    if (have && strcmp(per_take->str, t) == 0 && strcmp(per_second->str, p) == 0)
        return;
    if (rds_command(rf->rds, on_side_call, a, "HSET %s per_take %s per_second %s", a->k_meta, t,
                    p) == 0)
        a->side_calls++;
}

/* The row is no longer served: takes must answer IDPOOL_NOAPP. */
static void drop_limits(struct app *a)
{
    if (rds_ready(a->rf->rds) &&
        rds_command(a->rf->rds, on_side_call, a, "HDEL %s per_take per_second", a->k_meta) == 0)
        a->side_calls++;
}

/* Since when the pool has had no reason to stall: last healthy, or since served. */
static uint64_t ok_since(const struct app *a)
{
    return a->last_ok_ms > a->live_since_ms ? a->last_ok_ms : a->live_since_ms;
}

/* The pool-health alerts, from one check of a served application. */
static void check_alerts(struct app *a, uint64_t prev_underflows, int uf_firing_in_meta)
{
    struct refill *rf = a->rf;
    uint64_t now = clock_ms(), len = a->seen_len, lw = a->cfg.low_water;
    uint64_t ref = ok_since(a);
    int new_underflows = a->counters_known && a->underflows > prev_underflows;

    if (len >= lw) {
        a->last_ok_ms = now;
        a->low_checks = 0;
    } else if (a->low_checks < 2) {
        a->low_checks++;
    }
    app_alert(a, ALERT_UNDERFLOW,
              (a->last_ok_ms && len == 0) || new_underflows ||
                  (uf_firing_in_meta && !a->alert[ALERT_UNDERFLOW].firing),
              0, "pool ran dry: %s (pool %" PRIu64 ", low water %" PRIu64 ")",
              new_underflows ? "takes got short or empty replies" : "the pool is empty", len, lw);
    /* Low at two status reads in a row, i.e. still low after the refill the first one
     * started: one check landing in the dip before a refill is not a shortage. */
    app_alert(a, ALERT_LOW, a->last_ok_ms && a->low_checks >= 2, 1000 + 2 * a->cfg.interval_ms,
              "pool stays below its low-water mark after refilling: %" PRIu64 " < %" PRIu64
              " (refill cannot keep up with consumption)",
              len, lw);
    /* A check interval longer than stall-ms must not look like a stall by itself. */
    app_alert(a, ALERT_STALLED, len < lw && now - ref > (uint64_t)rf->stall_ms + a->cfg.interval_ms,
              0,
              "no IDs pushed for %" PRIu64 " ms while the pool needs them (%" PRIu64
              " < low water %" PRIu64 ")%s%s",
              now - ref, len, lw, a->last_err ? ": " : "", a->last_err ? a->last_err : "");
    app_alert(a, ALERT_OFFSET_REGRESSION, 0, 0, "-");
}

/* An alert fires or waits to fire or resolve: keep reading the status every interval. */
static int alerts_pending(const struct app *a)
{
    for (int k = 0; k < ALERT_COUNT; k++)
        if (a->alert[k].firing || a->alert[k].cond)
            return 1;
    return 0;
}

/* After a check: is the pool busy, and when to look again (if it is not refilled now). */
static void check_done(struct app *a, uint64_t len)
{
    uint64_t idle = IDLE_CHECK_MS > a->cfg.interval_ms ? IDLE_CHECK_MS : a->cfg.interval_ms;

    a->busy = !a->len_known || len != a->seen_len || a->rate >= 1.0;
    a->due_ms = a->check_ms + (a->busy ? a->cfg.interval_ms : idle);
    if (len >= a->cfg.low_water) {
        a->last_ok_ms = clock_ms(); /* for 'stalled': the pool was fine until now */
        a->low_checks = 0;
    }
}

static void on_llen(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;
    uint64_t len;

    (void)r;
    if (!reply || reply->type != REDIS_REPLY_INTEGER) {
        if (reply)
            app_fail(a, "LLEN %s failed: %s", a->k_pool, rds_errstr(reply));
        app_to_idle(a);
        return;
    }
    len = reply_u64(reply);
    check_done(a, len);
    a->seen_len = len;
    a->len_known = 1;
    if (len >= a->cfg.low_water || a->rf->stopping || !a->live) {
        app_to_idle(a);
        return;
    }
    a->status_due_ms = 0; /* read the counters at the next check */
    app_lock(a);
}

static void on_check(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;
    uint64_t prev_underflows = a->underflows;
    redisReply **e;

    (void)r;
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 8) {
        if (reply)
            app_fail(a, "idpool_status %s failed: %s", a->k_pool, rds_errstr(reply));
        app_to_idle(a);
        return;
    }
    e = reply->element;
    check_done(a, reply_u64(e[0]));
    a->status_due_ms = a->check_ms + (alerts_pending(a) ? a->cfg.interval_ms
                                      : a->busy         ? STATUS_MS
                                                        : IDLE_STATUS_MS);
    a->seen_len = reply_u64(e[0]);
    a->len_known = 1;
    a->underflows = reply_u64(e[1]);
    a->refused_limit = reply_u64(e[2]);
    a->refused_rate = reply_u64(e[3]);
    a->taken = reply_u64(e[4]);
    sync_limits(a, e[6], e[7]);
    if (reply->elements > 8)
        rate_sample(a, reply_u64(e[8]), a->seen_len);
    if (a->live)
        check_alerts(a, prev_underflows, reply_u64(e[5]) == 1);
    a->counters_known = 1;
    a->status_due_ms = a->check_ms + (alerts_pending(a) || reply_u64(e[5]) == 1 ? a->cfg.interval_ms
                                      : a->busy                                 ? STATUS_MS
                                                                                : IDLE_STATUS_MS);
    if (a->seen_len >= a->cfg.low_water || a->rf->stopping || !a->live) {
        app_to_idle(a);
        return;
    }
    app_lock(a);
}

/* Free applications that left the table once nothing of theirs is in flight. */
static void sweep_dead(struct refill *rf)
{
    size_t j = 0;

    for (size_t i = 0; i < rf->napps; i++) {
        struct app *a = rf->apps[i];
        if (a->dead && a->state == A_IDLE && !a->side_calls)
            app_free(a);
        else
            rf->apps[j++] = a;
    }
    rf->napps = j;
}

static void on_renew(struct rds *r, redisReply *reply, void *arg)
{
    struct app *a = arg;

    (void)r;
    a->side_calls--;
    a->renewing--;
    if (reply && reply->type == REDIS_REPLY_INTEGER && reply->integer == 0)
        log_debug("app=%s lock expired while waiting; the push will be fenced off", a->cfg.key);
    if (a->rf->pq_head == a)
        pusher_next(a->rf); /* it waited for this renewal to land */
}

/*
 * Keep the lock while a lease reservation is in flight: a slow MySQL is not
 * a reason to let another refiller in (its push would be fenced off and the
 * lease wasted). Compare-and-pexpire, so a lock already lost stays lost.
 */
static void renew_locks(struct refill *rf, uint64_t now)
{
    for (size_t i = 0; i < rf->napps; i++) {
        struct app *a = rf->apps[i];
        char ttl[16];

        if (!a->locked ||
            (a->state != A_RESERVE && a->state != A_PREFETCH && a->state != A_PUSHQ) ||
            now - a->lock_at_ms < (uint64_t)rf->lock_ttl_ms / 3)
            continue;
        snprintf(ttl, sizeof(ttl), "%d", rf->lock_ttl_ms);
        if (rds_command(rf->rds, on_renew, a, "FCALL idpool_renew 1 %s %s %s", a->k_lock, a->token,
                        ttl) == 0) {
            a->side_calls++;
            a->renewing++;
            a->lock_at_ms = now;
        }
    }
}

/* Send the check of one application if it is due (on_tick). */
static void check_one(struct refill *rf, struct app *a, uint64_t now)
{
    /* First look at a pool on this Redis process: discard it if it was filled under
     * another one, at once and even if the row is not served (clients may still pop). */
    int epoch_due = strcmp(a->epoch_seen, rds_epoch(rf->rds)) != 0;

    if (a->waiting)
        return; /* in line for a refill slot */
    if (a->dead || a->state != A_IDLE || (!a->live && !epoch_due) ||
        (now < a->due_ms && !epoch_due))
        return;
    a->check_ms = now;
    a->due_ms = now + a->cfg.interval_ms;
    a->state = A_CHECK;
    if (epoch_due && rds_command(rf->rds, on_epoch, a, "FCALL idpool_epoch 2 %s %s %s", a->k_pool,
                                 a->k_meta, rds_epoch(rf->rds)) != 0) {
        a->state = A_IDLE;
        return;
    }
    if (epoch_due || now >= a->status_due_ms || !a->live) {
        if (rds_command(rf->rds, on_check, a, "FCALL_RO idpool_status 2 %s %s", a->k_pool,
                        a->k_meta) != 0)
            a->state = A_IDLE;
    } else if (rds_command_resp(rf->rds, on_llen, a, a->llen_cmd, a->llen_len) != 0) {
        a->state = A_IDLE;
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct refill *rf = arg;
    uint64_t now = clock_ms();

    (void)fd;
    (void)what;
    sweep_dead(rf);
    if (!rds_ready(rf->rds)) {
        /* Nothing can be pushed: a pool that needed IDs stalls. */
        for (size_t i = 0; i < rf->napps; i++) {
            struct app *a = rf->apps[i];
            uint64_t ref = ok_since(a);
            if (a->live && !a->dead && !rf->stopping)
                app_alert(a, ALERT_STALLED, now - ref > (uint64_t)rf->stall_ms, 0,
                          "no IDs pushed for %" PRIu64 " ms: Redis is unreachable", now - ref);
        }
        return;
    }
    renew_locks(rf, now);
    if (rf->stopping)
        return;
    /* Every due check goes out in one write: hiredis buffers until the loop flushes. */
    for (size_t i = 0; i < rf->napps; i++)
        check_one(rf, rf->apps[i], now);
}

/* --- loading rows -------------------------------------------------------- */

static size_t key_hash(const char *key)
{
    size_t h = 14695981039346656037ULL; /* FNV-1a */

    for (; *key; key++)
        h = (h ^ (unsigned char)*key) * 1099511628211ULL;
    return h;
}

static void index_insert(struct refill *rf, struct app *a)
{
    size_t i = key_hash(a->cfg.key) & (rf->index_cap - 1);

    while (rf->index[i])
        i = (i + 1) & (rf->index_cap - 1);
    rf->index[i] = a;
}

/* Size the index for the apps we have plus `incoming` rows; -1 on OOM. */
static int index_rebuild(struct refill *rf, size_t incoming)
{
    size_t cap = 16;

    while (cap < 2 * (rf->napps + incoming))
        cap *= 2;
    free(rf->index);
    rf->index = calloc(cap, sizeof(*rf->index));
    if (!rf->index) {
        rf->index_cap = 0;
        return -1;
    }
    rf->index_cap = cap;
    for (size_t i = 0; i < rf->napps; i++)
        if (!rf->apps[i]->dead)
            index_insert(rf, rf->apps[i]);
    return 0;
}

static struct app *find_app(struct refill *rf, const char *key)
{
    size_t i;

    if (!rf->index_cap)
        return NULL;
    for (i = key_hash(key) & (rf->index_cap - 1); rf->index[i]; i = (i + 1) & (rf->index_cap - 1))
        if (strcmp(rf->index[i]->cfg.key, key) == 0)
            return rf->index[i];
    return NULL;
}

static int same_settings(const struct app_cfg *x, const struct app_cfg *y)
{
    return x->id == y->id && x->type == y->type && x->start_offset == y->start_offset &&
           x->step == y->step && x->per_take == y->per_take && x->per_second == y->per_second &&
           x->min_percent == y->min_percent && x->interval_ms == y->interval_ms &&
           x->max_pool == y->max_pool && x->delta == y->delta && x->remainder == y->remainder &&
           x->increment_max == y->increment_max && strcmp(x->name, y->name) == 0;
}

static void describe(const struct app_cfg *c, char *buf, size_t len)
{
    snprintf(buf, len,
             "%s step=%" PRIu64 " max_pool_size=%" PRIu64 " low_water=%" PRIu64 " delta=%" PRIu64
             " remainder=%" PRIu64 " increment_max=%" PRIu64 " start_offset=%" PRIu64
             " interval=%" PRIu64 "ms",
             c->type == APP_TREND ? "trend" : "monotonic", c->step, c->max_pool, c->low_water,
             c->delta, c->remainder, c->increment_max, c->start_offset, c->interval_ms);
}

static void bad_key_report(struct refill *rf, int64_t id, const char *err)
{
    struct bad_key *b = NULL, *v;

    for (size_t i = 0; i < rf->nbad_keys; i++)
        if (rf->bad_keys[i].id == id)
            b = &rf->bad_keys[i];
    if (b && strcmp(b->err, err) == 0) {
        b->seen = 1;
        return;
    }
    log_error("%s; application not served until the row is fixed", err);
    if (b) {
        free(b->err);
    } else {
        v = realloc(rf->bad_keys, (rf->nbad_keys + 1) * sizeof(*v));
        if (!v)
            return;
        rf->bad_keys = v;
        b = &rf->bad_keys[rf->nbad_keys++];
        b->id = id;
    }
    b->err = strdup(err);
    b->seen = b->err != NULL;
}

/* Forget rows with a bad key that were fixed or removed (not seen in this load). */
static void bad_key_sweep(struct refill *rf)
{
    size_t j = 0;

    for (size_t i = 0; i < rf->nbad_keys; i++) {
        if (rf->bad_keys[i].seen) {
            rf->bad_keys[i].seen = 0;
            rf->bad_keys[j++] = rf->bad_keys[i];
        } else {
            free(rf->bad_keys[i].err);
        }
    }
    rf->nbad_keys = j;
}

static void apply_row(struct refill *rf, const struct app_row *row)
{
    struct app_cfg cfg;
    char err[APP_ERR_MAX], desc[256];
    struct app *a;
    int valid;

    if (!app_key_valid(row->entity_key) && row->deleted_at != 0)
        return; /* a deleted row with a bad key: nothing to serve or report */
    valid = app_validate(row, (uint64_t)rf->tick_ms, &cfg, err, sizeof(err)) == 0;
    a = app_key_valid(row->entity_key) ? find_app(rf, row->entity_key) : NULL;
    if (!valid && !a && !app_key_valid(row->entity_key)) {
        /* Cannot even name a pool: report, keyed by the row id. */
        bad_key_report(rf, row->id, err);
        return;
    }
    if (!a) {
        if (rf->napps == rf->capapps) {
            size_t cap = rf->capapps ? rf->capapps * 2 : 16;
            struct app **v = realloc(rf->apps, cap * sizeof(*v));
            if (!v)
                return;
            rf->apps = v;
            rf->capapps = cap;
        }
        a = app_new(rf, row->entity_key);
        if (!a)
            return;
        rf->apps[rf->napps++] = a;
        index_insert(rf, a);
        a->cfg.id = row->id;
    }
    a->seen = 1;
    if (row->deleted_at != 0) {
        if (a->live) {
            log_info("app=%s soft-deleted (deleted_at=%" PRId64 "): no longer refilled", a->cfg.key,
                     row->deleted_at);
            drop_limits(a);
        }
        a->live = 0;
        a->deleted = 1;
        free(a->bad);
        a->bad = NULL;
        app_alerts_idle(a);
        app_alert(a, ALERT_INVALID_CONFIG, 0, 0, "-");
        return;
    }
    a->deleted = 0;
    if (!valid) {
        if (!a->bad || strcmp(a->bad, err) != 0) {
            log_error("%s; application not served until the row is fixed", err);
            free(a->bad);
            a->bad = strdup(err);
        }
        if (a->live)
            drop_limits(a);
        a->live = 0;
        app_alerts_idle(a);
        app_alert(a, ALERT_INVALID_CONFIG, 1, 0, "%s", err);
        return;
    }
    app_alert(a, ALERT_INVALID_CONFIG, 0, 0, "-");
    if (a->bad) {
        log_info("app=%s row fixed; serving again", a->cfg.key);
        free(a->bad);
        a->bad = NULL;
    }
    if (cfg.space_warning && !a->space_warned)
        log_warn("app=%s ID space nearly exhausted: current_offset %" PRIu64
                 " is above 90%% of 2^63-1",
                 cfg.key, cfg.current_offset);
    a->space_warned = cfg.space_warning;
    app_alert(a, ALERT_ID_SPACE_EXHAUSTION, cfg.space_warning || a->space_exhausted, 0,
              "current_offset %" PRIu64 " is above 90%% of 2^63-1: the ID space will run out",
              cfg.current_offset);
    describe(&cfg, desc, sizeof(desc));
    if (!a->live) {
        log_info("app=%s serving: %s", cfg.key, desc);
        a->live = 1;
        a->live_since_ms = clock_ms();
        a->cfg = cfg;
        a->due_ms = 0;
        return;
    }
    if (!same_settings(&a->cfg, &cfg)) {
        log_info("app=%s row changed: %s", cfg.key, desc);
        a->due_ms = a->status_due_ms = 0; /* look at the pool with the new settings now */
    }
    if (a->state == A_IDLE) {
        a->cfg = cfg;
    } else {
        a->new_cfg = cfg;
        a->has_new_cfg = 1;
    }
}

static void on_load(void *arg, int status, const struct app_row *rows, size_t n, const char *err)
{
    struct refill *rf = arg;
    size_t live = 0, bad = 0;

    rf->loading = 0;
    if (status != 0) {
        if (!err)
            err = "unknown error";
        if (!rf->load_err || strcmp(rf->load_err, err) != 0) {
            log_warn("cannot load applications: %s; keeping the %zu already loaded", err,
                     rf->napps);
            free(rf->load_err);
            rf->load_err = strdup(err);
        }
        maybe_stopped(rf);
        return;
    }
    if (rf->load_err) {
        log_info("applications loaded again");
        free(rf->load_err);
        rf->load_err = NULL;
    }
    if (index_rebuild(rf, n) < 0) {
        log_error("out of memory indexing %zu applications; keeping the current ones", n);
        maybe_stopped(rf);
        return;
    }
    for (size_t i = 0; i < rf->napps; i++)
        rf->apps[i]->seen = 0;
    for (size_t i = 0; i < n; i++)
        apply_row(rf, &rows[i]);
    bad_key_sweep(rf);
    for (size_t i = 0; i < rf->napps; i++) {
        struct app *a = rf->apps[i];
        if (!a->seen && !a->dead) {
            log_info("app=%s row removed from the table: no longer refilled", a->cfg.key);
            if (a->live)
                drop_limits(a);
            app_alerts_clear(a, "application row removed from the table");
            a->live = 0;
            a->dead = 1;
        }
        live += a->live;
        bad += a->bad != NULL;
    }
    bad += rf->nbad_keys;
    if (!rf->loaded || live != rf->last_live || bad != rf->last_bad)
        log_info("applications: %zu served, %zu invalid, %zu rows read", live, bad, n);
    rf->loaded = 1;
    rf->last_live = live;
    rf->last_bad = bad;
    sweep_dead(rf);
    maybe_stopped(rf);
}

/*
 * A MySQL job succeeded: if loading rows had failed, load them now. That
 * refreshes the rows as soon as an outage ends, and clears the load error,
 * so that the next outage is logged again even if it starts before the
 * next periodic reload.
 */
static void mysql_back(struct refill *rf)
{
    if (rf->load_err)
        refill_reload(rf);
}

void refill_reload(struct refill *rf)
{
    if (rf->loading || rf->stopping)
        return;
    if (store_load(rf->store, on_load, rf) == 0)
        rf->loading = 1;
}

static void on_reload(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    refill_reload(arg);
}

/* --- status views -------------------------------------------------------- */

static void fill_view(const struct app *a, struct app_view *v)
{
    memset(v, 0, sizeof(*v));
    v->key = a->cfg.key;
    v->cfg = &a->cfg;
    v->id = a->cfg.id;
    v->served = a->live;
    v->deleted = a->deleted;
    v->invalid = a->bad;
    v->len_known = a->len_known;
    v->pool_len = a->seen_len;
    v->fill_pct = a->cfg.max_pool ? (double)a->seen_len * 100.0 / (double)a->cfg.max_pool : 0;
    v->rate = a->rate;
    v->lease_known = a->lease_known;
    v->lease = a->seen_lease;
    v->lease_remaining = a->lease_known ? lease_remaining_span(&a->seen_lease) : 0;
    v->pushed = a->pushed;
    v->refills = a->refills;
    v->lock_busy = a->lock_busy;
    v->fenced = a->fenced;
    v->leases = a->leases;
    v->epochs = a->epochs;
    v->underflows = a->underflows;
    v->refused_limit = a->refused_limit;
    v->refused_rate = a->refused_rate;
    v->taken = a->taken;
    v->last_refill_unix_ms = a->last_refill_unix_ms;
    v->last_error = a->last_err;
    for (int k = 0; k < ALERT_COUNT; k++)
        v->alerts[k] = a->alert[k].firing;
}

static int cmp_key(const void *x, const void *y)
{
    return strcmp((*(struct app *const *)x)->cfg.key, (*(struct app *const *)y)->cfg.key);
}

static void src_each(void *ctx, status_app_fn *fn, void *arg)
{
    struct refill *rf = ctx;
    struct app **v = malloc((rf->napps ? rf->napps : 1) * sizeof(*v));
    size_t n = 0;
    struct app_view view;

    if (!v)
        return;
    for (size_t i = 0; i < rf->napps; i++)
        if (!rf->apps[i]->dead)
            v[n++] = rf->apps[i];
    qsort(v, n, sizeof(*v), cmp_key);
    for (size_t i = 0; i < n; i++) {
        fill_view(v[i], &view);
        fn(&view, arg);
    }
    free(v);
}

static int src_one(void *ctx, const char *key, status_app_fn *fn, void *arg)
{
    struct app *a = find_app(ctx, key);
    struct app_view view;

    if (!a || a->dead)
        return -1;
    fill_view(a, &view);
    fn(&view, arg);
    return 0;
}

static void src_daemon(void *ctx, struct daemon_view *out)
{
    struct refill *rf = ctx;
    struct rds_stats rs;
    struct store_stats ss;

    memset(out, 0, sizeof(*out));
    rds_get_stats(rf->rds, &rs);
    {
        struct rds_stats ps;
        rds_get_stats(rf->prds, &ps);
        rs.errors += ps.errors;
        rs.reconnects += ps.reconnects;
    }
    store_get_stats(rf->store, &ss);
    out->version = IDPOOL_VERSION;
    out->instance = rf->instance;
    out->started_unix_ms = rf->started_unix_ms;
    out->redis_up = rds_ready(rf->rds) && rds_ready(rf->prds);
    out->mysql_up = ss.up;
    out->rows_loaded = rf->loaded;
    out->redis_errors = rs.errors;
    out->redis_reconnects = rs.reconnects;
    out->mysql_errors = ss.errors;
    out->mysql_reconnects = ss.reconnects;
    for (size_t i = 0; i < rf->napps; i++) {
        const struct app *a = rf->apps[i];
        if (a->dead)
            continue;
        out->apps_served += a->live;
        out->apps_invalid += a->bad != NULL;
        out->apps_deleted += a->deleted;
    }
    out->apps_invalid += rf->nbad_keys;
    memcpy(out->refill_latency, rf->lat, sizeof(rf->lat));
    out->refill_latency_sum = rf->lat_sum;
    out->refill_latency_count = rf->lat_count;
}

void refill_status_source(struct refill *rf, struct status_source *out)
{
    out->ctx = rf;
    out->each_app = src_each;
    out->one_app = src_one;
    out->daemon = src_daemon;
}

/* --- lifecycle ----------------------------------------------------------- */

static void set_timer(struct event *ev, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    evtimer_add(ev, &tv);
}

void refill_configure(struct refill *rf, const struct config *cfg)
{
    rf->lock_ttl_ms = cfg->lock_ttl_ms;
    rf->push_chunk = cfg->push_chunk;
    rf->stall_ms = cfg->stall_ms;
    rf->resolve_ms = cfg->alert_resolve_ms;
    if (rf->tick_ms != cfg->tick_ms) {
        rf->tick_ms = cfg->tick_ms;
        set_timer(rf->tick_ev, rf->tick_ms);
    }
    if (rf->reload_ms != cfg->reload_ms) {
        rf->reload_ms = cfg->reload_ms;
        set_timer(rf->reload_ev, rf->reload_ms);
    }
}

void refill_redis_state(struct refill *rf, int ready)
{
    /* Alerts announced while Redis was unreachable reach pub/sub and meta now. */
    for (size_t i = 0; ready && i < rf->napps; i++) {
        struct app *a = rf->apps[i];
        for (int k = 0; k < ALERT_COUNT; k++)
            if ((a->alert_unsynced & (1u << k)) && a->alert[k].firing)
                alerts_sync(rf->alerts, a->cfg.key, a->k_meta, (enum alert_kind)k,
                            a->alert_msg[k] ? a->alert_msg[k] : "");
        a->alert_unsynced = 0;
    }
    if (ready)
        on_tick(-1, 0, rf); /* check every pool at once after (re)connecting */
}

static void on_stopped(evutil_socket_t fd, short what, void *arg)
{
    struct refill *rf = arg;

    (void)fd;
    (void)what;
    if (rf->stop_done) {
        void (*done)(void *) = rf->stop_done;
        rf->stop_done = NULL;
        done(rf->stop_arg);
    }
}

void refill_shutdown(struct refill *rf, void (*done)(void *), void *arg)
{
    rf->stopping = 1;
    rf->stop_done = done;
    rf->stop_arg = arg;
    evtimer_del(rf->tick_ev);
    evtimer_del(rf->reload_ev);
    maybe_stopped(rf);
}

struct refill *refill_new(struct event_base *base, const struct config *cfg, struct rds *rds,
                          struct rds *prds, struct store *store, struct alerts *alerts)
{
    struct refill *rf = calloc(1, sizeof(*rf));
    size_t maxargs = PUSH_FIXED_ARGS;

    if (!rf)
        return NULL;
    rf->base = base;
    rf->rds = rds;
    rf->prds = prds;
    rf->store = store;
    rf->alerts = alerts;
    rf->instance = strdup(cfg->instance);
    rf->started_unix_ms = unix_ms();
    rf->stall_ms = cfg->stall_ms;
    rf->resolve_ms = cfg->alert_resolve_ms;
    rf->prefix = strdup(cfg->key_prefix);
    rf->tick_ms = cfg->tick_ms;
    rf->reload_ms = cfg->reload_ms;
    rf->lock_ttl_ms = cfg->lock_ttl_ms;
    rf->push_chunk = cfg->push_chunk;
    rng_seed_os(&rf->rng);
    rf->argv = calloc(maxargs, sizeof(*rf->argv));
    rf->argvlen = calloc(maxargs, sizeof(*rf->argvlen));
    rf->argbuf = malloc(maxargs * NUM_LEN);
    rf->tick_ev = event_new(base, -1, EV_PERSIST, on_tick, rf);
    rf->reload_ev = event_new(base, -1, EV_PERSIST, on_reload, rf);
    rf->stop_ev = event_new(base, -1, 0, on_stopped, rf);
    if (!rf->prefix || !rf->instance || !rf->argv || !rf->argvlen || !rf->argbuf || !rf->tick_ev ||
        !rf->reload_ev || !rf->stop_ev) {
        refill_free(rf);
        return NULL;
    }
    set_timer(rf->tick_ev, rf->tick_ms);
    set_timer(rf->reload_ev, rf->reload_ms);
    refill_reload(rf);
    return rf;
}

void refill_free(struct refill *rf)
{
    if (!rf)
        return;
    for (size_t i = 0; i < rf->napps; i++)
        app_free(rf->apps[i]);
    free(rf->apps);
    free(rf->index);
    if (rf->tick_ev)
        event_free(rf->tick_ev);
    if (rf->reload_ev)
        event_free(rf->reload_ev);
    if (rf->stop_ev)
        event_free(rf->stop_ev);
    free(rf->argv);
    free(rf->argvlen);
    free(rf->argbuf);
    free(rf->resp);
    free(rf->prefix);
    free(rf->instance);
    free(rf->load_err);
    for (size_t i = 0; i < rf->nbad_keys; i++)
        free(rf->bad_keys[i].err);
    free(rf->bad_keys);
    free(rf);
}
