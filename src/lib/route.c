#include "route.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "clock.h"
#include "keys.h"
#include "text.h"

/* One node: a primary of the table, a seed, or an ASK target. */
struct route_node {
    struct cluster_addr addr; /* port 0: a free entry */
    redisContext *rc;         /* NULL while not connected */
    unsigned tv_ms;           /* rc's socket timeout now (0: not set yet) */
    uint64_t down_until_ms;   /* not connected again before this */
    unsigned backoff_ms;      /* the last back-off (0: none since the last connect) */
};

struct router {
    const struct redis_url *url; /* seeds and credentials (the caller's) */
    unsigned io_ms;
    struct cluster_table *table;       /* the table in use (heap: 100 kB) */
    int have_table;                    /* one was read */
    int node_of[CLUSTER_NODES_MAX];    /* node of each primary of table, -1: none */
    uint16_t owned[CLUSTER_NODES_MAX]; /* slots each primary of table owns (count_owned) */
    struct cluster_refresh refresh;
    struct route_node *nodes; /* ROUTE_NODES_MAX entries */
    uint32_t rng;             /* xorshift32: where reads start, the waits' jitter */
    route_fd_fn *fd_fn;
    void *fd_arg;
};

static uint32_t rng_next(struct router *r)
{
    uint32_t x = r->rng;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return r->rng = x;
}

struct router *route_new(const struct redis_url *u, unsigned io_ms, route_fd_fn *fd_fn, void *arg)
{
    struct router *r;

    if (u->kind != REDIS_CLUSTER || u->nhosts == 0 || !(r = calloc(1, sizeof(*r))))
        return NULL;
    r->table = malloc(sizeof(*r->table));
    r->nodes = calloc(ROUTE_NODES_MAX, sizeof(*r->nodes));
    if (!r->table || !r->nodes) {
        free(r->table);
        free(r->nodes);
        free(r);
        return NULL;
    }
    cluster_table_init(r->table);
    for (size_t i = 0; i < CLUSTER_NODES_MAX; i++)
        r->node_of[i] = -1;
    r->url = u;
    r->io_ms = io_ms ? io_ms : 1;
    r->rng = (uint32_t)clock_ms() ^ ((uint32_t)getpid() << 16) ^ (uint32_t)(uintptr_t)r;
    if (r->rng == 0)
        r->rng = 1;
    r->fd_fn = fd_fn;
    r->fd_arg = arg;
    return r;
}

/* Close node n's connection (the fd hook told first: see env.h's env_forget). */
static void node_close(struct router *r, size_t n)
{
    struct route_node *x = &r->nodes[n];

    if (!x->rc)
        return;
    if (r->fd_fn)
        r->fd_fn(r->fd_arg, n, -1);
    redisFree(x->rc);
    x->rc = NULL;
    x->tv_ms = 0;
}

void route_close(struct router *r)
{
    for (size_t n = 0; n < ROUTE_NODES_MAX; n++)
        node_close(r, n);
}

void route_free(struct router *r)
{
    if (!r)
        return;
    route_close(r);
    free(r->nodes);
    free(r->table);
    free(r);
}

int route_connected(const struct router *r)
{
    for (size_t n = 0; n < ROUTE_NODES_MAX; n++)
        if (r->nodes[n].rc)
            return 1;
    return 0;
}

/* Node n failed: closed, backing off, and a read of the table wanted (its slots may have moved). */
static void node_fail(struct router *r, size_t n)
{
    struct route_node *x = &r->nodes[n];

    node_close(r, n);
    x->backoff_ms = x->backoff_ms ? x->backoff_ms * 2 : ROUTE_BACKOFF_MIN_MS;
    if (x->backoff_ms > ROUTE_BACKOFF_MAX_MS)
        x->backoff_ms = ROUTE_BACKOFF_MAX_MS;
    x->down_until_ms = clock_ms() + x->backoff_ms;
    cluster_refresh_want(&r->refresh);
}

void route_fail(struct router *r, int node)
{
    if (node >= 0 && node < ROUTE_NODES_MAX)
        node_fail(r, (size_t)node);
}

/* 1 when node n is a primary of the table in use. */
static int node_in_table(const struct router *r, size_t n)
{
    for (size_t i = 0; i < r->table->nprimaries; i++)
        if (r->node_of[i] == (int)n)
            return 1;
    return 0;
}

/*
 * The node at a, made when absent: in a free entry, or else in one that is
 * neither connected nor a primary of the table. -1 when every entry is in
 * use.
 */
static int node_get(struct router *r, const struct cluster_addr *a)
{
    int free_at = -1;

    for (size_t n = 0; n < ROUTE_NODES_MAX; n++) {
        const struct route_node *x = &r->nodes[n];
        if (x->addr.port == a->port && strcasecmp(x->addr.host, a->host) == 0)
            return (int)n;
        if (free_at < 0 && x->addr.port == 0)
            free_at = (int)n;
    }
    for (size_t n = 0; free_at < 0 && n < ROUTE_NODES_MAX; n++)
        if (!r->nodes[n].rc && !node_in_table(r, n))
            free_at = (int)n;
    if (free_at >= 0) {
        memset(&r->nodes[free_at], 0, sizeof(r->nodes[free_at]));
        r->nodes[free_at].addr = *a;
    }
    return free_at;
}

/* Milliseconds one step may take: io_ms, or less before the deadline; 0: none left. */
static unsigned step_ms(const struct router *r, uint64_t deadline_ms)
{
    uint64_t now = clock_ms();

    if (now >= deadline_ms)
        return 0;
    return deadline_ms - now < r->io_ms ? (unsigned)(deadline_ms - now) : r->io_ms;
}

static struct timeval tv_of(unsigned ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

    return tv;
}

/* The next command on node n's connection is bounded by step_ms: 0, or -1 (out of time). */
static int node_bound(struct router *r, size_t n, uint64_t deadline_ms)
{
    struct route_node *x = &r->nodes[n];
    unsigned ms = step_ms(r, deadline_ms);

    if (ms == 0)
        return -1;
    if (ms != x->tv_ms) { /* a system call only when the bound changes */
        if (redisSetTimeout(x->rc, tv_of(ms)) != REDIS_OK)
            return -1;
        x->tv_ms = ms;
    }
    return 0;
}

/*
 * Node n's connection, opened (and AUTH sent) as needed within the
 * deadline: NULL with err naming the node. A node backing off is not
 * tried; a failed connect or AUTH fails the node.
 */
static redisContext *node_conn(struct router *r, size_t n, uint64_t deadline_ms, char *err,
                               size_t errlen)
{
    struct route_node *x = &r->nodes[n];
    const struct redis_url *u = r->url;
    char where[HOSTPORT_STR_MAX];
    uint64_t now = clock_ms();
    unsigned ms;
    redisReply *y;

    hostport_str(where, sizeof(where), x->addr.host, x->addr.port);
    if (x->rc)
        return x->rc;
    if (now < x->down_until_ms) {
        text_err(err, errlen, "%s: down, next try in %llu ms", where,
                 (unsigned long long)(x->down_until_ms - now));
        return NULL;
    }
    if ((ms = step_ms(r, deadline_ms)) == 0) {
        text_err(err, errlen, "%s: out of time before connecting", where);
        return NULL;
    }
    x->rc = redisConnectWithTimeout(x->addr.host, x->addr.port, tv_of(ms));
    if (!x->rc) {
        text_err(err, errlen, "%s: out of memory", where);
        return NULL;
    }
    if (x->rc->fd >= 0 && r->fd_fn)
        r->fd_fn(r->fd_arg, n, x->rc->fd);
    if (x->rc->err) {
        text_err(err, errlen, "%s: cannot connect: %s", where, x->rc->errstr);
        node_fail(r, n);
        return NULL;
    }
    if (u->password) {
        if (node_bound(r, n, deadline_ms) < 0) {
            text_err(err, errlen, "%s: out of time before AUTH", where);
            node_close(r, n);
            return NULL;
        }
        y = u->user ? redisCommand(x->rc, "AUTH %s %s", u->user, u->password)
                    : redisCommand(x->rc, "AUTH %s", u->password);
        if (!y || y->type == REDIS_REPLY_ERROR) {
            /* Redis' error texts never hold the password that was sent. */
            text_err(err, errlen, "%s: AUTH failed: %.200s", where,
                     y                  ? y->str
                     : x->rc->errstr[0] ? x->rc->errstr
                                        : "no reply");
            freeReplyObject(y);
            node_fail(r, n);
            return NULL;
        }
        freeReplyObject(y);
    }
    x->backoff_ms = 0;
    return x->rc;
}

/* --- the table ------------------------------------------------------------ */

/* The slots each primary of the table owns, counted again after the table changed. */
static void count_owned(struct router *r)
{
    memset(r->owned, 0, sizeof(r->owned));
    for (size_t s = 0; s < KEYS_SLOTS; s++)
        if (r->table->owner[s] != CLUSTER_NO_OWNER)
            r->owned[r->table->owner[s]]++;
}

/*
 * Take table t (a copy): the node of each primary found or made, and the
 * connections of nodes it no longer names closed (a demoted primary, a
 * seed asked, a node emptied by a reshard).
 */
static void take_table(struct router *r, const struct cluster_table *t)
{
    *r->table = *t;
    r->have_table = 1;
    for (size_t i = 0; i < CLUSTER_NODES_MAX; i++)
        r->node_of[i] = i < t->nprimaries ? node_get(r, &t->primary[i]) : -1;
    for (size_t n = 0; n < ROUTE_NODES_MAX; n++)
        if (r->nodes[n].rc && !node_in_table(r, n))
            node_close(r, n);
    count_owned(r);
}

/*
 * Ask node n for CLUSTER SLOTS within the deadline: 0 with the table in
 * *t, or -1 with err naming n.
 */
static int ask_node(struct router *r, size_t n, uint64_t deadline_ms, struct cluster_table *t,
                    char *err, size_t errlen)
{
    const struct route_node *x = &r->nodes[n];
    char where[HOSTPORT_STR_MAX], why[200];
    redisContext *c = node_conn(r, n, deadline_ms, err, errlen);
    redisReply *y;
    int rc = -1;

    if (!c)
        return -1;
    hostport_str(where, sizeof(where), x->addr.host, x->addr.port);
    if (node_bound(r, n, deadline_ms) < 0) {
        text_err(err, errlen, "%s: out of time before CLUSTER SLOTS", where);
        return -1;
    }
    y = redisCommand(c, "CLUSTER SLOTS");
    if (!y) {
        text_err(err, errlen, "%s: CLUSTER SLOTS failed: %s", where,
                 c->errstr[0] ? c->errstr : "no reply");
        node_fail(r, n);
        return -1;
    }
    if (y->type == REDIS_REPLY_ERROR)
        text_err(err, errlen, "%s: CLUSTER SLOTS refused: %.200s", where, y->str);
    else if (cluster_table_read(t, y, x->addr.host, why, sizeof(why)) < 0)
        text_err(err, errlen, "%s: %s", where, why);
    else if (t->unowned == KEYS_SLOTS)
        text_err(err, errlen,
                 "%s: serves no slot and knows no node that does (not joined yet, "
                 "or reset)",
                 where);
    else
        rc = 0;
    freeReplyObject(y);
    return rc;
}

/* The node of seed k of the URL (made when absent); -1 when it has none. */
static int seed_node(struct router *r, size_t k)
{
    const struct redis_hostport *h = &r->url->hosts[k];
    struct cluster_addr a;

    if (strlen(h->host) >= sizeof(a.host))
        return -1;
    strcpy(a.host, h->host);
    a.port = h->port;
    return node_get(r, &a);
}

/*
 * The nodes to ask for the table, in order, into order[] (their count):
 * the primaries of the table in use from a random one (no two clients
 * start at the same node), then the seeds; the connected ones first, then
 * the ones not backing off, the rest last.
 */
static size_t candidates(struct router *r, int *order)
{
    size_t np = r->have_table ? r->table->nprimaries : 0, start = np ? rng_next(r) % np : 0;
    size_t nids = 0, n = 0;
    int ids[ROUTE_NODES_MAX], seen[ROUTE_NODES_MAX] = {0};
    uint64_t now = clock_ms();

    for (size_t k = 0; k < np; k++)
        ids[nids++] = r->node_of[(start + k) % np];
    for (size_t k = 0; k < r->url->nhosts && nids < ROUTE_NODES_MAX; k++)
        ids[nids++] = seed_node(r, k);
    for (int rank = 0; rank < 3; rank++)
        for (size_t k = 0; k < nids; k++) {
            const struct route_node *x;
            int id = ids[k];

            if (id < 0 || seen[id])
                continue;
            x = &r->nodes[id];
            if ((x->rc ? 0 : now >= x->down_until_ms ? 1 : 2) != rank)
                continue;
            seen[id] = 1;
            order[n++] = id;
        }
    return n;
}

/* Read the table now: 0, or -1 with err naming the nodes asked (the table in use is kept). */
static int read_table(struct router *r, uint64_t deadline_ms, char *err, size_t errlen)
{
    int order[ROUTE_NODES_MAX];
    size_t n = candidates(r, order), tried = 0, len = 0;
    char names[512] = "", last[512] = "no node to ask";
    struct cluster_table *t = malloc(sizeof(*t));

    if (!t) {
        text_err(err, errlen, "cannot read the cluster's slot table: out of memory");
        return -1;
    }
    for (size_t k = 0; k < n && tried < ROUTE_ASK_MAX; k++) {
        const struct route_node *x = &r->nodes[order[k]];
        char where[HOSTPORT_STR_MAX];

        if (step_ms(r, deadline_ms) == 0)
            break;
        tried++;
        if (len < sizeof(names))
            len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", len ? ", " : "",
                                    hostport_str(where, sizeof(where), x->addr.host, x->addr.port));
        if (ask_node(r, (size_t)order[k], deadline_ms, t, last, sizeof(last)) == 0) {
            take_table(r, t);
            free(t);
            return 0;
        }
    }
    free(t);
    text_err(err, errlen, "cannot read the cluster's slot table (asked %s): %s",
             tried ? names : "none in time", last);
    return -1;
}

int route_sync(struct router *r, uint64_t deadline_ms, char *err, size_t errlen)
{
    char why[1024];
    int rc;

    if (!cluster_refresh_due(&r->refresh, clock_ms(), NULL)) {
        if (r->have_table)
            return 0;
        text_err(err, errlen, "no slot table yet (the last read failed; next read in a second)");
        return -1;
    }
    rc = read_table(r, deadline_ms, why, sizeof(why));
    cluster_refresh_done(&r->refresh);
    if (rc == 0)
        return 0;
    cluster_refresh_want(&r->refresh); /* again in a second */
    if (r->have_table)
        return 0;
    text_err(err, errlen, "%s", why);
    return -1;
}

/* The node serving slot in the table in use; -1 when none. */
static int slot_node(const struct router *r, unsigned slot)
{
    uint16_t i = r->table->owner[slot];

    return r->have_table && i != CLUSTER_NO_OWNER ? r->node_of[i] : -1;
}

int route_addr(const struct router *r, const char *key, struct cluster_addr *out)
{
    uint16_t i = r->table->owner[keys_slot(key, strlen(key))];

    if (!r->have_table || i == CLUSTER_NO_OWNER)
        return -1;
    *out = r->table->primary[i];
    return 0;
}

void route_moved(struct router *r, unsigned slot, const struct cluster_addr *to)
{
    int i = cluster_table_move(r->table, slot, to->host, to->port);

    cluster_refresh_want(&r->refresh); /* a failover or a reshard moves more than one slot */
    if (i >= 0 && r->node_of[i] < 0)
        r->node_of[i] = node_get(r, to);
    count_owned(r);
}

void route_want(struct router *r)
{
    cluster_refresh_want(&r->refresh);
}

size_t route_primaries(const struct router *r)
{
    size_t k = 0;

    for (size_t i = 0; r->have_table && i < r->table->nprimaries; i++)
        k += r->owned[i] > 0;
    return k;
}

const struct cluster_addr *route_primary(const struct router *r, size_t i)
{
    for (size_t j = 0; r->have_table && j < r->table->nprimaries; j++)
        if (r->owned[j] > 0 && i-- == 0)
            return &r->table->primary[j];
    return NULL;
}

/* The connection to the node at a (found or made), within the deadline: NULL with err. */
static redisContext *addr_conn(struct router *r, const struct cluster_addr *a, uint64_t deadline_ms,
                               char *err, size_t errlen)
{
    int n = node_get(r, a);

    if (n < 0) {
        text_err(err, errlen, "more than %d cluster nodes", ROUTE_NODES_MAX);
        return NULL;
    }
    return node_conn(r, (size_t)n, deadline_ms, err, errlen);
}

struct redisContext *route_primary_conn(struct router *r, size_t i, uint64_t deadline_ms, char *err,
                                        size_t errlen)
{
    const struct cluster_addr *a = route_primary(r, i);

    if (!a) {
        text_err(err, errlen, "no primary %zu in the cluster's slot table", i);
        return NULL;
    }
    return addr_conn(r, a, deadline_ms, err, errlen);
}

struct redisContext *route_key_conn(struct router *r, const char *key, uint64_t deadline_ms,
                                    char *err, size_t errlen)
{
    struct cluster_addr a;

    if (route_addr(r, key, &a) < 0) {
        text_err(err, errlen, "slot %u of %.200s has no primary in the cluster's slot table",
                 keys_slot(key, strlen(key)), key);
        return NULL;
    }
    return addr_conn(r, &a, deadline_ms, err, errlen);
}

/* --- commands ------------------------------------------------------------- */

/*
 * Wait *wait_ms (with jitter: half to all of it) and double it up to
 * ROUTE_RETRY_MAX_MS: 0, or -1 when the wait would end past the deadline.
 */
static int retry_pause(struct router *r, unsigned *wait_ms, uint64_t deadline_ms)
{
    unsigned ms = *wait_ms / 2 + rng_next(r) % (*wait_ms / 2 + 1);
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    if (clock_ms() + ms >= deadline_ms)
        return -1;
    while (nanosleep(&ts, &ts) != 0)
        ;
    *wait_ms = *wait_ms * 2 < ROUTE_RETRY_MAX_MS ? *wait_ms * 2 : ROUTE_RETRY_MAX_MS;
    return 0;
}

/* One round trip of argv on node n (after ASKING when asking): 0 with *y, or -1 (lost). */
static int round_trip(struct router *r, size_t n, int asking, int argc, const char **argv,
                      const size_t *lens, redisReply **y)
{
    redisContext *c = r->nodes[n].rc;
    void *a = NULL, *v = NULL;

    if ((asking && redisAppendCommand(c, "ASKING") != REDIS_OK) ||
        redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK ||
        (asking && redisGetReply(c, &a) != REDIS_OK) || redisGetReply(c, &v) != REDIS_OK) {
        freeReplyObject(a);
        return -1;
    }
    freeReplyObject(a); /* ASKING's +OK: if it failed, the command says so (MOVED) */
    *y = v;
    return 0;
}

enum route_rc route_command(struct router *r, const char *key, int argc, const char **argv,
                            const size_t *lens, uint64_t deadline_ms, struct redisReply **reply,
                            struct route_trip *trip, char *err, size_t errlen)
{
    unsigned slot = keys_slot(key, strlen(key)), wait = ROUTE_RETRY_MIN_MS, hops = 0;
    struct cluster_addr ask = {"", 0};
    char last[256] = ""; /* the last TRYAGAIN or CLUSTERDOWN, for a message at the deadline */
    int asking = 0;

    *reply = NULL;
    memset(trip, 0, sizeof(*trip));
    trip->node = -1;
    for (;;) {
        redisReply *y = NULL;
        struct cluster_addr to;
        int n, s;

        if (route_sync(r, deadline_ms, err, errlen) < 0)
            return ROUTE_UNSENT;
        n = asking ? node_get(r, &ask) : slot_node(r, slot);
        if (n < 0) {
            /* No owner (a hole of the table, or a full node list): a read may name one. */
            cluster_refresh_want(&r->refresh);
            text_err(err, errlen, "slot %u has no primary in the cluster's slot table", slot);
            if (retry_pause(r, &wait, deadline_ms) == 0)
                continue;
            return ROUTE_UNSENT;
        }
        trip->node = n;
        hostport_str(trip->where, sizeof(trip->where), r->nodes[n].addr.host,
                     r->nodes[n].addr.port);
        if (!node_conn(r, (size_t)n, deadline_ms, err, errlen))
            return ROUTE_UNSENT;
        if (node_bound(r, (size_t)n, deadline_ms) < 0) {
            text_err(err, errlen, "%s: out of time%s%s", trip->where, last[0] ? " after " : "",
                     last);
            return ROUTE_UNSENT;
        }
        if (round_trip(r, (size_t)n, asking, argc, argv, lens, &y) < 0) {
            text_err(err, errlen, "%s: %s", trip->where,
                     r->nodes[n].rc->errstr[0] ? r->nodes[n].rc->errstr : "no reply");
            node_fail(r, (size_t)n);
            return ROUTE_LOST;
        }
        if (y->type != REDIS_REPLY_ERROR) {
            *reply = y;
            return ROUTE_REPLY;
        }
        switch (cluster_error_read(y->str, y->len, r->nodes[n].addr.host, &s, &to)) {
        case CLUSTER_MOVED:
            trip->moved++;
            route_moved(r, (unsigned)s, &to);
            asking = 0;
            break;
        case CLUSTER_ASK:
            trip->asked++;
            ask = to;
            asking = 1;
            break;
        case CLUSTER_TRYAGAIN:
        case CLUSTER_DOWN:
            trip->retried++;
            if (strncmp(y->str, "CLUSTERDOWN", 11) == 0)
                cluster_refresh_want(&r->refresh);
            snprintf(last, sizeof(last), "%.200s", y->str);
            text_err(err, errlen, "%s: %s", trip->where, last);
            freeReplyObject(y);
            asking = 0; /* routed again by the table */
            if (retry_pause(r, &wait, deadline_ms) == 0)
                continue;
            return ROUTE_UNSENT;
        case CLUSTER_ERR_OTHER:
            *reply = y;
            return ROUTE_REPLY;
        }
        if (++hops > ROUTE_REDIRECTS_MAX) {
            text_err(err, errlen, "%s: more than %d redirections, the last %.200s", trip->where,
                     ROUTE_REDIRECTS_MAX, y->str);
            freeReplyObject(y);
            return ROUTE_UNSENT;
        }
        freeReplyObject(y);
    }
}

uint64_t route_retry_at(const struct router *r, const char *key, uint64_t now_ms)
{
    struct cluster_refresh probe = r->refresh; /* cluster_refresh_due marks what it is given */
    int64_t wait = 0;
    uint64_t read_at =
        cluster_refresh_due(&probe, now_ms, &wait) || wait < 0 ? now_ms : now_ms + (uint64_t)wait;
    int n = slot_node(r, keys_slot(key, strlen(key)));
    const struct route_node *x;

    if (n < 0)
        return read_at;
    x = &r->nodes[n];
    if (x->rc || now_ms >= x->down_until_ms)
        return 0;
    return x->down_until_ms < read_at ? x->down_until_ms : read_at;
}
