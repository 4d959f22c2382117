/*
 * libidpool's client (include/idpool.h): applications, per-thread blocks,
 * the shared buffers and the background thread that fills them.
 *
 * Three levels, each filled from the next:
 *   a thread's block (BLOCK IDs per application, thread-local: the common
 *     path of idpool_next is a load and an increment, no lock);
 *   the application's shared buffer (a ring under the application's lock);
 *   the pool in Redis, through the Redis Function idpool_take (FCALL), by
 *     the background thread only,
 *     on its own connection per environment (blocking hiredis, timeouts;
 *     a Cluster: one per primary).
 *
 * Environments are tried in preference order, each through its transport
 * (env.h); which one an application's takes go to, and when it is looked
 * at again, failover.c decides.
 *
 * fork(): a child starts with every client empty (pthread_atfork,
 * fork_child): no buffered ID of the parent, none of its connections; its
 * own background thread is started by the first call that needs IDs.
 */
#include "idpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "app.h"
#include "buffer.h"
#include "clock.h"
#include "env.h"
#include "failover.h"
#include "keys.h"

#define BLOCK     256 /* IDs a thread takes from the shared buffer at once */
#define ERROR_MAX 320 /* bytes of a remembered error: "environment N (...)" */

/* A thread's block of one application's IDs. */
struct tslot {
    uint64_t gen; /* the application it belongs to (0: none) */
    uint32_t pos, n;
    uint64_t ids[BLOCK];
};

/* A thread's blocks, by application slot. */
struct tstate {
    size_t cap;
    struct tslot **slots;
};

struct idpool_app {
    struct idpool_client *c;
    struct idpool_app *next; /* in the client's list */
    char key[APP_KEY_MAX + 1];
    char *k_pool, *k_meta;
    uint32_t slot;                /* index into threads' blocks */
    uint64_t gen;                 /* unique over the process: a reused slot is not mistaken */
    pthread_mutex_t mu;           /* everything below */
    pthread_cond_t cv;            /* IDs arrived, or the state changed */
    struct ring ring;             /* the shared buffer */
    unsigned batch;               /* IDs per take now */
    unsigned cap_batch;           /* max_batch, or less after IDPOOL_LIMIT */
    int hungry;                   /* a caller waited since the last take */
    double rate;                  /* demand, IDs/s */
    uint64_t consumed;            /* IDs handed out since the last rate update */
    uint64_t rate_at_ms;          /* the last rate update */
    struct failover routing;      /* where takes go, when the next is due */
    char last_error[ERROR_MAX];   /* what the last refusal or failure said */
    char (*env_error)[ERROR_MAX]; /* per environment: what its last refusal or failure said;
                                     "" once it supplied IDs (or before it was tried) */
    struct idpool_stats st;
};

struct idpool_client {
    struct env **envs;
    size_t nenv;
    char **urls; /* the environments' URLs, NULL-terminated: a forked child's envs are made from
                    them */
    struct idpool_options o;
    char *prefix, *ca_file;
    pthread_mutex_t mu; /* apps, kick, stopping, started, forked, envs after a fork */
    pthread_cond_t cv;  /* wakes the thread */
    pthread_t thread;
    int locks;   /* mu and cv are initialised */
    int started; /* the thread runs (not in a forked child before its first need) */
    int forked;  /* envs are the parent's (a forked child): replaced before the thread starts */
    int stopping, kick;
    struct idpool_app *apps;
    struct idpool_client *fork_next; /* in the list of live clients (fork handlers) */
};

/* --- time ------------------------------------------------------------- */

/* One call's deadline, set when the call first has to wait (pop_wait). */
struct deadline {
    int set;
    struct timespec at;
};

static int cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t at;
    int rc;

    if (pthread_condattr_init(&at) != 0)
        return -1;
    pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
    rc = pthread_cond_init(cv, &at);
    pthread_condattr_destroy(&at);
    return rc == 0 ? 0 : -1;
}

/* --- per-thread blocks -------------------------------------------------- */

/*
 * One pointer per thread, in the static TLS block (initial-exec): reading it
 * is one load off the thread pointer, where the default model of a shared
 * library calls __tls_get_addr on every idpool_next. glibc keeps room for a
 * few such bytes even for libraries loaded later with dlopen.
 */
static __thread struct tstate *tls __attribute__((tls_model("initial-exec")));
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_key_ok;

/* Slots are reused; generations never are. */
static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *free_slots;
static size_t nfree, free_cap;
static uint32_t next_slot;
static uint64_t next_gen = 1;

static void tls_destroy(void *p)
{
    struct tstate *t = p;

    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i]);
    free(t->slots);
    free(t);
}

static void tls_init(void)
{
    tls_key_ok = pthread_key_create(&tls_key, tls_destroy) == 0;
}

/* This thread's block for application a, created as needed; NULL when out of memory. */
static struct tslot *tslot_of(struct idpool_app *a)
{
    struct tstate *t = tls;
    struct tslot *s;

    if (t == NULL) {
        pthread_once(&tls_once, tls_init);
        if (!tls_key_ok || (t = calloc(1, sizeof(*t))) == NULL)
            return NULL;
        pthread_setspecific(tls_key, t); /* freed when the thread exits */
        tls = t;
    }
    if (a->slot >= t->cap) {
        size_t cap = t->cap ? t->cap : 8;
        struct tslot **v;

        while (cap <= a->slot)
            cap *= 2;
        v = realloc(t->slots, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        memset(v + t->cap, 0, (cap - t->cap) * sizeof(*v));
        t->slots = v;
        t->cap = cap;
    }
    s = t->slots[a->slot];
    if (s == NULL && (s = t->slots[a->slot] = calloc(1, sizeof(*s))) == NULL)
        return NULL;
    if (s->gen != a->gen) { /* left by a freed application: those IDs are gaps */
        s->gen = a->gen;
        s->pos = s->n = 0;
    }
    return s;
}

static void slot_get(uint32_t *slot, uint64_t *gen)
{
    pthread_mutex_lock(&slot_mu);
    if (nfree)
        *slot = free_slots[--nfree];
    else
        *slot = next_slot++;
    *gen = next_gen++;
    pthread_mutex_unlock(&slot_mu);
}

static void slot_put(uint32_t slot)
{
    pthread_mutex_lock(&slot_mu);
    if (nfree == free_cap) {
        size_t cap = free_cap ? free_cap * 2 : 16;
        uint32_t *v = realloc(free_slots, cap * sizeof(*v));
        if (v == NULL) { /* the slot number is simply not reused */
            pthread_mutex_unlock(&slot_mu);
            return;
        }
        free_slots = v;
        free_cap = cap;
    }
    free_slots[nfree++] = slot;
    pthread_mutex_unlock(&slot_mu);
}

/* --- callers ---------------------------------------------------------- */

/* Below this many IDs in the shared buffer a take is sent (buffer.c). Called with a->mu held. */
static size_t low_water(const struct idpool_app *a)
{
    return low_water_ids(a->batch, a->c->o.buffer, a->rate, a->c->o.target_ms);
}

static void *thread_main(void *arg);

/*
 * The environments forked children left behind: the parent's, as they were
 * at the fork (its thread may have been inside hiredis or OpenSSL: nothing
 * of them is used or freed again; fork_child closed their sockets), kept
 * reachable so that leak checkers do not count them.
 */
struct grave {
    struct env **envs;
    struct grave *next;
};
static pthread_mutex_t grave_mu = PTHREAD_MUTEX_INITIALIZER;
static struct grave *graves;

/* Keep envs (the parent's) reachable; out of memory, they are merely leaked. */
static void grave_add(struct env **envs)
{
    struct grave *g = malloc(sizeof(*g));

    if (g == NULL)
        return;
    pthread_mutex_lock(&grave_mu);
    g->envs = envs;
    g->next = graves;
    graves = g;
    pthread_mutex_unlock(&grave_mu);
}

/*
 * A forked child's own environments, made from the URLs before its
 * background thread starts; the parent's go to the graves. Called with
 * c->mu held. 0, or -1 (out of memory).
 */
static int envs_renew(struct idpool_client *c)
{
    struct env **envs = calloc(c->nenv, sizeof(*envs));
    char msg[256];

    if (envs == NULL)
        return -1;
    for (size_t i = 0; i < c->nenv; i++)
        if ((envs[i] = env_new(c->urls[i], msg, sizeof(msg))) == NULL) { /* parsed once already */
            while (i--)
                env_free(envs[i]);
            free(envs);
            return -1;
        }
    grave_add(c->envs);
    c->envs = envs;
    c->forked = 0;
    return 0;
}

/*
 * Start c's background thread unless it runs: at creation, and in a forked
 * child at the first call that needs IDs. Called with c->mu held (or before
 * c is shared). 0, or -1.
 */
static int thread_start(struct idpool_client *c)
{
    if (c->started)
        return 0;
    if (c->forked && envs_renew(c) < 0)
        return -1;
    if (pthread_create(&c->thread, NULL, thread_main, c) != 0)
        return -1;
    c->started = 1;
    return 0;
}

/* Wake the background thread (started if need be): 0, or -1 when it cannot start. */
static int kick(struct idpool_client *c)
{
    int rc;

    pthread_mutex_lock(&c->mu);
    rc = thread_start(c);
    c->kick = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/*
 * Move up to n IDs from a's shared buffer into out, waiting while it is
 * empty, until dl: one deadline per call of the API, however many times it
 * waits (set here, timeout_ms after the call first waits). Called with
 * a->mu held. IDPOOL_OK with *got >= 1, or an error.
 */
static enum idpool_rc pop_wait(struct idpool_app *a, uint64_t *out, size_t n, size_t *got,
                               struct deadline *dl)
{
    struct idpool_client *c = a->c;
    int waited = 0, ask = 0;

    *got = 0;
    while (a->ring.n == 0) {
        if (c->stopping)
            return IDPOOL_ECLOSED;
        if (failover_nowhere(&a->routing, (unsigned)c->nenv))
            return IDPOOL_ENOAPP;
        if (!waited) {
            waited = 1;
            a->st.waits++;
            a->hungry = 1;
            if (!dl->set) {
                dl->set = 1;
                dl->at = clock_deadline_in(c->o.timeout_ms);
            }
        }
        if (!ask) { /* once: the thread then keeps at it (a kick per wake-up would spin) */
            ask = 1;
            pthread_mutex_unlock(&a->mu);
            if (kick(c) < 0) {
                pthread_mutex_lock(&a->mu);
                return IDPOOL_ENOMEM;
            }
            pthread_mutex_lock(&a->mu);
        }
        if (a->ring.n == 0 && !c->stopping &&
            pthread_cond_timedwait(&a->cv, &a->mu, &dl->at) == ETIMEDOUT && a->ring.n == 0) {
            a->st.timeouts++;
            return IDPOOL_ETIMEDOUT;
        }
    }
    *got = ring_pop(&a->ring, out, n);
    a->consumed += *got;
    a->st.buffered = a->ring.n;
    if (!ask && a->ring.n < low_water(a)) { /* ask ahead */
        pthread_mutex_unlock(&a->mu);
        (void)kick(c); /* a failure shows when a caller waits */
        pthread_mutex_lock(&a->mu);
    }
    return IDPOOL_OK;
}

__attribute__((noinline)) static enum idpool_rc next_slow(struct idpool_app *a, uint64_t *id)
{
    struct tslot *s = tslot_of(a);
    struct deadline dl = {0};
    size_t got;
    enum idpool_rc rc;

    if (s == NULL)
        return IDPOOL_ENOMEM;
    pthread_mutex_lock(&a->mu);
    rc = pop_wait(a, s->ids, BLOCK, &got, &dl);
    if (rc == IDPOOL_OK)
        a->st.blocks++;
    pthread_mutex_unlock(&a->mu);
    if (rc != IDPOOL_OK)
        return rc;
    s->pos = 1;
    s->n = (uint32_t)got;
    *id = s->ids[0];
    return IDPOOL_OK;
}

enum idpool_rc idpool_next(struct idpool_app *a, uint64_t *id)
{
    struct tstate *t = tls;

    if (__builtin_expect(t != NULL && a != NULL && a->slot < t->cap, 1)) {
        struct tslot *s = t->slots[a->slot];
        if (__builtin_expect(s != NULL && s->gen == a->gen && s->pos < s->n, 1)) {
            *id = s->ids[s->pos++];
            return IDPOOL_OK;
        }
    }
    if (a == NULL || id == NULL)
        return IDPOOL_EINVAL;
    return next_slow(a, id);
}

enum idpool_rc idpool_next_n(struct idpool_app *a, uint64_t *ids, size_t n, size_t *got)
{
    struct tslot *s;
    struct deadline dl = {0}; /* one for the whole call, however many waits */
    enum idpool_rc rc = IDPOOL_OK;

    if (got)
        *got = 0;
    if (a == NULL || ids == NULL || got == NULL || n == 0)
        return IDPOOL_EINVAL;
    s = tslot_of(a);
    if (s == NULL)
        return IDPOOL_ENOMEM;
    while (*got < n && s->pos < s->n) /* this thread's block first: its IDs are older */
        ids[(*got)++] = s->ids[s->pos++];
    pthread_mutex_lock(&a->mu);
    while (*got < n) {
        size_t k;
        rc = pop_wait(a, ids + *got, n - *got, &k, &dl);
        if (rc != IDPOOL_OK)
            break;
        *got += k;
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}

/* --- the background thread ---------------------------------------------- */

/* When environment i may be tried again for application arg (failover_opts' retry_at). */
static uint64_t env_retry(int i, void *arg)
{
    const struct idpool_app *a = arg;

    return env_retry_at(a->c->envs[i], a->k_pool);
}

/* The counters of a refusal or failure (the IDs' own are counted where they are kept). */
static void count_outcome(struct idpool_app *a, enum take_outcome o, const struct take_result *r)
{
    a->st.moved += r->moved;
    a->st.asked += r->asked;
    a->st.cluster_retries += r->retried;
    switch (o) {
    case T_IDS:
    case T_LIMIT:
        break;
    case T_DRY:
        a->st.empty++;
        break;
    case T_EPOCH:
        a->st.refused_epoch++;
        break;
    case T_RATE:
        a->st.refused_rate++;
        break;
    case T_NOAPP:
        a->st.errors++;
        break;
    case T_DOWN:
        if (!r->skipped)
            a->st.errors++;
        break;
    }
}

/*
 * What environment e answered a's take, in a->env_error[e]: the refusal or
 * failure, until it supplies IDs again. A skip (e backing off) tried
 * nothing: what it said before stands.
 */
static void env_answered(struct idpool_app *a, int e, enum take_outcome o,
                         const struct take_result *r)
{
    pthread_mutex_lock(&a->mu);
    if (o == T_IDS)
        a->env_error[e][0] = '\0';
    else if (!r->skipped)
        snprintf(a->env_error[e], ERROR_MAX, "environment %d (%s)", e, r->msg);
    pthread_mutex_unlock(&a->mu);
}

/*
 * Look after one application: take when its buffer is below one batch or a
 * caller waits, from the environment failover_plan says (or, when due, a
 * more preferred one); returns when it wants to be looked at again.
 */
static uint64_t service(struct idpool_app *a, uint64_t now)
{
    struct idpool_client *c = a->c;
    struct failover_opts opts = {(unsigned)c->nenv, c->o.failover_ms, c->o.failback_ms, env_retry,
                                 a};
    struct failover_plan p;
    struct failover_step s;
    struct take_req q = {&c->o, a->key, a->k_pool, a->k_meta, 0};
    struct take_result r;
    enum take_outcome o;
    int e;

    pthread_mutex_lock(&a->mu);
    if (now > a->rate_at_ms) {
        a->rate = rate_update(a->rate, a->consumed, now - a->rate_at_ms);
        a->consumed = 0;
        a->rate_at_ms = now;
    }
    /* A waiting caller means an empty buffer: below the low water too. */
    p = failover_plan(&a->routing, now, a->ring.n < low_water(a));
    if (!p.take) {
        pthread_mutex_unlock(&a->mu);
        return p.wake;
    }
    a->batch =
        batch_next(a->batch, a->rate, c->o.target_ms, c->o.min_batch, a->cap_batch, a->hungry);
    a->hungry = 0;
    q.count = a->batch;
    pthread_mutex_unlock(&a->mu);

    /* Without a's lock: a take blocks on the network. A failback tries the preferred in order. */
    for (e = p.from;;) {
        int next;
        o = env_take(c->envs[e], &q, now, &r);
        env_answered(a, e, o, &r);
        if ((next = failover_next(&a->routing, &p, e, o)) < 0)
            break;
        free(r.ids);
        e = next;
    }

    pthread_mutex_lock(&a->mu);
    if (o != T_IDS && !r.skipped) /* a skip would hide why it is backing off */
        memcpy(a->last_error, a->env_error[e], sizeof(a->last_error));
    count_outcome(a, o, &r); /* failback tries too */
    s = failover_after(&a->routing, &opts, &p, now, e, o, r.hint_ms);
    if (o == T_IDS || !p.back) { /* else a failback brought nothing: nothing else changed */
        if (o == T_IDS && ring_push(&a->ring, r.ids, r.n) == 0) {
            a->st.takes++;
            a->st.taken += r.n;
        }
        if (o == T_LIMIT)
            a->cap_batch = r.limit > 0 ? r.limit : 1; /* the row's max_size_per_times */
        a->st.failovers += (uint64_t)s.failover;
        a->st.failbacks += (uint64_t)s.failback;
        a->st.env = a->routing.env;
        a->st.buffered = a->ring.n;
        a->st.batch = a->batch;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    free(r.ids);
    return s.wake;
}

static void *thread_main(void *arg)
{
    struct idpool_client *c = arg;

    pthread_mutex_lock(&c->mu);
    while (!c->stopping) {
        uint64_t now = clock_ms(), wake = now + IDLE_WAKE_MS;
        struct idpool_app *a = c->apps; /* the list only grows while the thread runs */

        c->kick = 0;
        pthread_mutex_unlock(&c->mu);
        for (; a; a = a->next) {
            uint64_t w = service(a, clock_ms());
            if (w < wake)
                wake = w;
        }
        pthread_mutex_lock(&c->mu);
        now = clock_ms();
        if (!c->kick && !c->stopping && wake > now) {
            struct timespec dl = clock_deadline_in(wake - now);
            pthread_cond_timedwait(&c->cv, &c->mu, &dl);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* --- fork ------------------------------------------------------------- */

/*
 * The live clients, for the fork handlers. Lock order: clients_mu, c->mu,
 * a->mu, slot_mu, grave_mu, the TLS lock (env.h).
 */
static pthread_mutex_t clients_mu = PTHREAD_MUTEX_INITIALIZER;
static struct idpool_client *clients;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/*
 * Before fork(): take every lock of every client, so that the child finds
 * each client's state whole (no ring, list or counter half updated by
 * another thread), and the TLS lock, so that no thread of ours is inside
 * OpenSSL. Each is held only for bookkeeping or one OpenSSL step, never
 * across a wait for the network: fork waits for no network.
 */
static void fork_prepare(void)
{
    pthread_mutex_lock(&clients_mu);
    for (struct idpool_client *c = clients; c; c = c->fork_next) {
        pthread_mutex_lock(&c->mu);
        for (struct idpool_app *a = c->apps; a; a = a->next)
            pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_lock(&slot_mu);
    pthread_mutex_lock(&grave_mu);
    env_tls_lock(); /* no thread of ours inside OpenSSL */
}

static void fork_parent(void)
{
    env_tls_unlock();
    pthread_mutex_unlock(&grave_mu);
    pthread_mutex_unlock(&slot_mu);
    for (struct idpool_client *c = clients; c; c = c->fork_next) {
        for (struct idpool_app *a = c->apps; a; a = a->next)
            pthread_mutex_unlock(&a->mu);
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_unlock(&clients_mu);
}

/*
 * A client in a forked child (the only thread, the one that called fork,
 * holds every lock: fork_prepare): its buffers emptied (the parent hands
 * those IDs out), its sockets closed (the parent's connections: a reply
 * meant for the parent is never read here), its counters zeroed, no
 * background thread (the first call that needs IDs starts one, with new
 * connections: thread_start). Condition variables are made anew: the
 * parent's waiters, gone here, may still be counted in them.
 */
static void client_after_fork(struct idpool_client *c)
{
    uint64_t now = clock_ms();

    for (size_t i = 0; i < c->nenv; i++)
        env_forget(c->envs[i]);
    c->forked = 1;
    c->started = 0;
    c->kick = 0;
    cond_init(&c->cv);
    for (struct idpool_app *a = c->apps; a; a = a->next) {
        a->ring.head = a->ring.n = 0;
        a->batch = c->o.min_batch;
        a->hungry = 0;
        a->rate = 0;
        a->consumed = 0;
        a->rate_at_ms = now;
        memset(&a->routing, 0, sizeof(a->routing));
        a->last_error[0] = '\0';
        memset(a->env_error, 0, c->nenv * sizeof(*a->env_error));
        memset(&a->st, 0, sizeof(a->st));
        a->st.size = sizeof(a->st);
        cond_init(&a->cv);
        pthread_mutex_unlock(&a->mu);
    }
    pthread_mutex_unlock(&c->mu);
}

static void fork_child(void)
{
    struct tstate *t = tls; /* the forking thread's blocks: the parent's IDs */

    for (size_t i = 0; t && i < t->cap; i++)
        if (t->slots[i])
            t->slots[i]->pos = t->slots[i]->n = 0;
    env_tls_unlock();
    pthread_mutex_unlock(&grave_mu);
    pthread_mutex_unlock(&slot_mu);
    for (struct idpool_client *c = clients; c; c = c->fork_next)
        client_after_fork(c);
    pthread_mutex_unlock(&clients_mu);
}

static void atfork_init(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* --- lifecycle ---------------------------------------------------------- */

static void errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void errf(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || len == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

enum idpool_rc idpool_client_new(const char *const *envs, size_t n,
                                 const struct idpool_options *opts, struct idpool_client **out,
                                 char *err, size_t errlen)
{
    struct idpool_client *c;
    char msg[256];

    errf(err, errlen, "%s", "");
    if (out == NULL || envs == NULL || n == 0 || n > 32) {
        errf(err, errlen, "idpool_client_new: give 1 to 32 environments");
        return IDPOOL_EINVAL;
    }
    *out = NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return IDPOOL_ENOMEM;
    if (opts) {
        size_t sz = opts->size < sizeof(c->o) ? opts->size : sizeof(c->o);
        memcpy(&c->o, opts, sz);
    }
    c->o.size = sizeof(c->o);
    c->o.timeout_ms = c->o.timeout_ms ? c->o.timeout_ms : 1000;
    c->o.io_timeout_ms = c->o.io_timeout_ms ? c->o.io_timeout_ms : 500;
    c->o.failover_ms = c->o.failover_ms ? c->o.failover_ms : 500;
    c->o.failback_ms = c->o.failback_ms ? c->o.failback_ms : 1000;
    c->o.target_ms = c->o.target_ms ? c->o.target_ms : 500;
    c->o.min_batch = c->o.min_batch ? c->o.min_batch : 100;
    c->o.max_batch = c->o.max_batch ? c->o.max_batch : 1000;
    if (c->o.min_batch > c->o.max_batch)
        c->o.min_batch = c->o.max_batch;
    c->prefix = strdup(c->o.key_prefix ? c->o.key_prefix : "idpool");
    c->o.key_prefix = c->prefix;
    if (c->o.ca_file && (c->ca_file = strdup(c->o.ca_file)) == NULL)
        goto nomem;
    c->o.ca_file = c->ca_file;
    c->envs = calloc(n, sizeof(*c->envs));
    c->urls = calloc(n + 1, sizeof(*c->urls));
    if (c->prefix == NULL || c->envs == NULL || c->urls == NULL)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        if (envs[i] && (c->urls[i] = strdup(envs[i])) == NULL)
            goto nomem;
        if (envs[i] == NULL || (c->envs[i] = env_new(envs[i], msg, sizeof(msg))) == NULL) {
            errf(err, errlen, "environment %zu: %s", i,
                 envs[i] ? msg
                         : "NULL (expected redis://host[:port][/db], redis-sentinel://..., "
                           "redis-cluster://... or http[s]://TOKEN@host[:port])");
            idpool_client_free(c);
            return IDPOOL_EINVAL;
        }
        c->nenv = i + 1;
    }
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        goto nomem;
    if (cond_init(&c->cv) != 0) {
        pthread_mutex_destroy(&c->mu);
        goto nomem;
    }
    c->locks = 1;
    pthread_once(&atfork_once, atfork_init);
    pthread_mutex_lock(&clients_mu); /* no fork between the thread's start and this */
    if (thread_start(c) < 0) {
        pthread_mutex_unlock(&clients_mu);
        errf(err, errlen, "idpool_client_new: cannot start the background thread");
        idpool_client_free(c);
        return IDPOOL_ENOMEM;
    }
    c->fork_next = clients;
    clients = c;
    pthread_mutex_unlock(&clients_mu);
    *out = c;
    return IDPOOL_OK;
nomem:
    errf(err, errlen, "idpool_client_new: out of memory");
    idpool_client_free(c);
    return IDPOOL_ENOMEM;
}

enum idpool_rc idpool_app_get(struct idpool_client *c, const char *key, struct idpool_app **out)
{
    struct idpool_app *a;

    if (c == NULL || out == NULL || !app_key_valid(key))
        return IDPOOL_EINVAL;
    pthread_mutex_lock(&c->mu);
    for (a = c->apps; a; a = a->next)
        if (strcmp(a->key, key) == 0)
            break;
    if (a == NULL && (a = calloc(1, sizeof(*a))) != NULL) {
        snprintf(a->key, sizeof(a->key), "%s", key);
        a->c = c;
        a->batch = c->o.min_batch;
        a->cap_batch = c->o.max_batch;
        a->rate_at_ms = clock_ms();
        a->st.size = sizeof(a->st);
        a->k_pool = keys_app_new(c->prefix, key, KEYS_POOL);
        a->k_meta = keys_app_new(c->prefix, key, KEYS_META);
        a->env_error = calloc(c->nenv, sizeof(*a->env_error));
        if (!a->k_pool || !a->k_meta || !a->env_error || pthread_mutex_init(&a->mu, NULL) != 0 ||
            cond_init(&a->cv) != 0) {
            free(a->k_pool);
            free(a->k_meta);
            free(a->env_error);
            free(a);
            a = NULL;
        } else {
            slot_get(&a->slot, &a->gen);
            a->next = c->apps;
            c->apps = a;
            c->kick = 1;
            pthread_cond_signal(&c->cv);
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (a == NULL)
        return IDPOOL_ENOMEM;
    *out = a;
    return IDPOOL_OK;
}

void idpool_client_free(struct idpool_client *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&clients_mu);
    for (struct idpool_client **p = &clients; *p; p = &(*p)->fork_next)
        if (*p == c) {
            *p = c->fork_next;
            break;
        }
    pthread_mutex_unlock(&clients_mu);
    if (c->locks) {
        pthread_mutex_lock(&c->mu);
        c->stopping = 1;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
        for (struct idpool_app *a = c->apps; a; a = a->next) { /* wake waiting callers */
            pthread_mutex_lock(&a->mu);
            pthread_cond_broadcast(&a->cv);
            pthread_mutex_unlock(&a->mu);
        }
        if (c->started) /* not in a forked child that never needed it */
            pthread_join(c->thread, NULL);
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
    }
    while (c->apps) {
        struct idpool_app *a = c->apps;
        c->apps = a->next;
        ring_free(&a->ring);
        slot_put(a->slot);
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
        free(a->k_pool);
        free(a->k_meta);
        free(a->env_error);
        free(a);
    }
    if (c->forked) { /* the parent's envs, left as they are (envs_renew) */
        grave_add(c->envs);
    } else {
        for (size_t i = 0; c->envs && i < c->nenv; i++)
            env_free(c->envs[i]);
        free(c->envs);
    }
    for (size_t i = 0; c->urls && c->urls[i]; i++)
        free(c->urls[i]);
    free(c->urls);
    free(c->prefix);
    free(c->ca_file);
    free(c);
}

void idpool_app_stats(struct idpool_app *a, struct idpool_stats *out)
{
    struct idpool_stats st;
    size_t sz;

    if (a == NULL || out == NULL)
        return;
    sz = out->size < sizeof(st) ? out->size : sizeof(st);
    pthread_mutex_lock(&a->mu);
    st = a->st;
    st.buffered = a->ring.n;
    st.env = a->routing.env;
    st.batch = a->batch;
    pthread_mutex_unlock(&a->mu);
    st.size = sz;
    memcpy(out, &st, sz);
}

size_t idpool_app_last_error(struct idpool_app *a, char *buf, size_t len)
{
    size_t n;

    if (a == NULL || buf == NULL || len == 0)
        return 0;
    pthread_mutex_lock(&a->mu);
    snprintf(buf, len, "%s", a->last_error);
    pthread_mutex_unlock(&a->mu);
    n = strlen(buf);
    return n;
}

size_t idpool_app_env_error(struct idpool_app *a, size_t env, char *buf, size_t len)
{
    if (a == NULL || buf == NULL || len == 0)
        return 0;
    buf[0] = '\0';
    if (env >= a->c->nenv)
        return 0;
    pthread_mutex_lock(&a->mu);
    snprintf(buf, len, "%s", a->env_error[env]);
    pthread_mutex_unlock(&a->mu);
    return strlen(buf);
}

const char *idpool_strerror(enum idpool_rc rc)
{
    switch (rc) {
    case IDPOOL_OK:
        return "ok";
    case IDPOOL_EINVAL:
        return "invalid argument";
    case IDPOOL_ENOMEM:
        return "out of memory";
    case IDPOOL_ETIMEDOUT:
        return "timed out: no environment supplied IDs in time";
    case IDPOOL_ENOAPP:
        return "no environment serves this application (unknown there, or the token may not "
               "take it)";
    case IDPOOL_ECLOSED:
        return "the client is being freed";
    }
    return "unknown error";
}
