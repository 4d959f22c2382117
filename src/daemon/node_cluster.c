/*
 * node_cluster — the node map of redis-cluster://: one node per primary of
 * a Redis Cluster, found from the slot table that CLUSTER SLOTS gives
 * (core/cluster.h reads it), a key served by the primary of its slot.
 *
 *   - the table is asked on a connection of its own, to a known primary
 *     or else a seed node of the URL, in turn, each attempt bounded; one
 *     question at a time, at most one a second when something asked for
 *     it (a MOVED, a node's main connection lost, a slot with no owner, a
 *     CLUSTERDOWN) and every 10 s anyway (cluster_refresh_due);
 *   - a MOVED patches its slot at once (the command that got it has
 *     failed: its caller tries again, on the new owner);
 *   - nodes are keyed by address and never freed, so that node ids stay
 *     valid in the tables the modules keep per node (node_table_fit); a
 *     node that owns no slot (a demoted primary, a node emptied by a
 *     reshard) is parked: its connections closed until it owns one again
 *     (RDS_TARGET_PARKED);
 *   - a table that owns no slot at all (a node after CLUSTER RESET, or
 *     one that has not joined yet) is not taken: another node is asked.
 *
 *   - a slot being migrated (an ASK) whose keys a writer (refill on) meets
 *     is followed: the daemon moves idpool's keys of the slot to the
 *     target itself (CLUSTER GETKEYSINSLOT and MIGRATE on the source, a
 *     few applications at a time, each one's pool, meta and lock in one
 *     MIGRATE), then routes the slot to the target with ASKING before
 *     every command (rds_set_asking) until the table names the target its
 *     owner or the target answers MOVED (the migration was given up). An
 *     application's keys are never left split across the two nodes for
 *     long: a call on a migrating slot whose keys are partly absent (an
 *     empty pool is deleted) answers TRYAGAIN until SETSLOT NODE, and
 *     refills and takes would wedge for a migration held half-way. The
 *     pool arrives under the source's epoch and is discarded there and
 *     refilled (gaps, never repeats). A target that owns no slot yet (a
 *     new primary) is not followed: its connections are parked;
 *
 * Each node's connections then do what they do on one server (rds.c):
 * the handshake refuses a replica, a writer validates the node under its
 * own epoch, the library is loaded where it is missing (a primary added
 * with CLUSTER MEET has none).
 */
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>

#include "clock.h"
#include "dns.h"
#include "cluster.h"
#include "keys.h"
#include "log.h"
#include "node_int.h"
#include "rds.h"
#include "status.h"

#define TICK_MS        100 /* how often a due refresh is looked for */
#define ATTEMPT_MIN_MS 100 /* one node's time to answer CLUSTER SLOTS, at least */
#define ATTEMPT_MAX_MS 500 /* and at most (then the next one is asked) */
#define ATTEMPTS       3   /* nodes asked per refresh before it is given up */
#define MOVE_BATCH     300 /* keys asked of CLUSTER GETKEYSINSLOT per MIGRATE */
#define MOVE_RETRY_MS  1000

/* What the map keeps per node, by node id. */
struct cnode {
    char host[256];
    int port;
    size_t owned; /* slots it serves in the table in use */
    size_t asked; /* slots migrating to it that are followed there (ASKING) */
};

struct cmap {
    struct nodemap *map;
    /* what node_add needs of the configuration (rds_new): copied, the map outlives reloads */
    char *user, *password, *prefix;

    struct cluster_table table; /* the last one taken */
    uint16_t route[KEYS_SLOTS]; /* node id of each slot, or CLUSTER_NO_OWNER */
    struct cnode *cn;           /* by node id */
    size_t ncn;
    struct cluster_addr seed[REDIS_HOSTS_MAX];
    size_t nseeds;

    /* the question: one at a time */
    struct cluster_refresh refresh;
    redisAsyncContext *ac;     /* to the node asked */
    struct dns_req *dns;       /* the asked node's host name being looked up, or NULL */
    struct cluster_addr asked; /* that node */
    size_t next;               /* candidate to ask next (rotates) */
    int attempts;              /* of this refresh */
    int attempt_ms;
    struct event *attempt_ev; /* one attempt's timeout */
    struct event *tick_ev;    /* persistent: is a refresh due? */
    char why[512];            /* the last attempt's failure */
    int failures;             /* refreshes in a row that no node answered */
    uint64_t answered_ms;     /* when the table in use was read (0: never) */

    uint16_t ask[KEYS_SLOTS]; /* node id a migrating slot is followed to, or CLUSTER_NO_OWNER */
    struct {                  /* the move of idpool's keys of one slot: one at a time */
        int on, slot;
        unsigned from, to; /* node ids */
        size_t apps;       /* applications moved so far */
        int warned;        /* its failure was logged */
        uint64_t retry_ms; /* no new move before */
    } mv;

    uint64_t refreshes, moved, asks, tryagains, downs; /* for the log and /metrics */
    struct node_view *views;                           /* the status view's nodes (cmap_view) */
    size_t nviews;
};

static void attempt(struct cmap *c);

/* --- nodes ---------------------------------------------------------------- */

/* rds_target_fn of every connection of a node: its address while it owns a slot. */
static int cnode_target(struct rds *r, uint64_t since_ms, const char **host, int *port, void *arg)
{
    struct node *n = arg;
    struct cmap *c = n->map->impl;
    const struct cnode *cn = &c->cn[n->id];

    (void)r;
    (void)since_ms;
    if (cn->owned == 0)
        return RDS_TARGET_PARKED;
    *host = cn->host;
    *port = cn->port;
    return RDS_TARGET_AT;
}

static void cmap_on_error(struct rds *r, const redisReply *reply, void *arg);

/* The node at host:port, made (parked until it owns a slot) when the map has none there. */
static struct node *cnode_get(struct cmap *c, const char *host, int port)
{
    struct nodemap *m = c->map;
    struct config cfg;
    struct cnode *cn;
    struct node *n;

    for (size_t i = 0; i < c->ncn; i++)
        if (c->cn[i].port == port && strcmp(c->cn[i].host, host) == 0)
            return m->nodes[i];
    if (!(cn = realloc(c->cn, (c->ncn + 1) * sizeof(*cn))))
        return NULL;
    c->cn = cn;
    memset(&cn[c->ncn], 0, sizeof(*cn));
    snprintf(cn[c->ncn].host, sizeof(cn[c->ncn].host), "%s", host);
    cn[c->ncn].port = port;
    memset(&cfg, 0, sizeof(cfg));
    cfg.redis.kind = REDIS_STANDALONE;
    cfg.redis.host = cn[c->ncn].host;
    cfg.redis.port = port;
    cfg.redis.user = c->user;
    cfg.redis.password = c->password;
    cfg.key_prefix = c->prefix;
    cfg.redis_timeout_ms = m->timeout_ms; /* a reload's, for a node made after it */
    if (!(n = node_add(m, &cfg)))
        return NULL;
    hostport_str(n->addr, sizeof(n->addr), host, port);
    c->ncn++; /* n->id == c->ncn - 1: both grow together */
    rds_set_target(n->main, cnode_target, n);
    rds_set_target(n->push, cnode_target, n);
    rds_set_on_error(n->main, cmap_on_error, n);
    rds_set_on_error(n->push, cmap_on_error, n);
    if (n->api) {
        rds_set_target(n->api, cnode_target, n);
        rds_set_on_error(n->api, cmap_on_error, n);
    }
    return n;
}

/* Node n's connections write their own keys (rds_set_slot) in the first slot it owns. */
static void cnode_slot(struct cmap *c, struct node *n)
{
    int slot = -1;

    for (size_t s = 0; s < KEYS_SLOTS && slot < 0; s++)
        if (c->route[s] == n->id)
            slot = (int)s;
    rds_set_slot(n->main, slot);
    rds_set_slot(n->push, slot);
    if (n->api)
        rds_set_slot(n->api, slot);
}

/* Every connection of node n looks at its target again (it owns slots now, or none). */
static void cnode_retarget(struct node *n)
{
    rds_retarget(n->main);
    rds_retarget(n->push);
    if (n->api)
        rds_retarget(n->api);
}

/* Node id was told it serves slots (is) or none (!is) now: its connections follow. */
static void cnode_serves(struct cmap *c, size_t id, int is)
{
    char hp[HOSTPORT_STR_MAX];

    if (is)
        cnode_slot(c, c->map->nodes[id]);
    log_info("redis: %s %s", hostport_str(hp, sizeof(hp), c->cn[id].host, c->cn[id].port),
             is ? "serves slots of the cluster: connecting" : "serves no slot now: disconnecting");
    cnode_retarget(c->map->nodes[id]);
}

/* --- slots being migrated ------------------------------------------------- */

/* Node id follows one more (delta 1) or one less (-1) migrating slot: ASKING while any. */
static void cnode_asking(struct cmap *c, unsigned id, int delta)
{
    struct node *n = c->map->nodes[id];
    int was = c->cn[id].asked > 0, is;

    c->cn[id].asked = delta > 0 ? c->cn[id].asked + 1 : c->cn[id].asked - 1;
    is = c->cn[id].asked > 0;
    if (was == is)
        return;
    rds_set_asking(n->main, is);
    rds_set_asking(n->push, is);
    if (n->api)
        rds_set_asking(n->api, is);
}

/* Slot s is followed to its target no more: its migration ended (how: why). */
static void ask_clear(struct cmap *c, size_t s, const char *why)
{
    char hp[HOSTPORT_STR_MAX];
    unsigned id = c->ask[s];

    if (id == CLUSTER_NO_OWNER)
        return;
    c->ask[s] = CLUSTER_NO_OWNER;
    cnode_asking(c, id, -1);
    log_info("redis: slot %zu: no longer followed to %s with ASKING (%s)", s,
             hostport_str(hp, sizeof(hp), c->cn[id].host, c->cn[id].port), why);
}

static void move_keys(struct cmap *c);

/* The move of the slot's keys is over: followed to the target from now on, or retried (err). */
static void move_over(struct cmap *c, const char *err)
{
    char from[HOSTPORT_STR_MAX], to[HOSTPORT_STR_MAX];
    unsigned f = c->mv.from, t = c->mv.to;
    int s = c->mv.slot;

    hostport_str(from, sizeof(from), c->cn[f].host, c->cn[f].port);
    hostport_str(to, sizeof(to), c->cn[t].host, c->cn[t].port);
    c->mv.on = 0;
    if (err) {
        if (!c->mv.warned)
            log_warn("redis: slot %d is being migrated from %s to %s and idpool's keys in it "
                     "could not be moved to %s: %s; its applications are not refilled until "
                     "they are (tried again every second) or the migration ends",
                     s, from, to, to, err);
        c->mv.warned = 1;
        c->mv.retry_ms = clock_ms() + MOVE_RETRY_MS;
        return;
    }
    c->mv.warned = 0;
    if (c->ask[s] != CLUSTER_NO_OWNER)
        ask_clear(c, (size_t)s, "followed to another node now");
    c->ask[s] = (uint16_t)t;
    cnode_asking(c, t, 1);
    log_info("redis: slot %d is being migrated from %s to %s: the keys of %zu applications "
             "moved there (MIGRATE); followed there with ASKING until the migration ends",
             s, from, to, c->mv.apps);
}

/* MIGRATE's reply: the next batch, or the end. */
static void on_migrated(struct rds *r, redisReply *reply, void *arg)
{
    struct node *n = arg;
    struct cmap *c = n->map->impl;

    (void)r;
    if (!c || !c->mv.on)
        return; /* the map is closing */
    if (!reply || reply->type == REDIS_REPLY_ERROR)
        move_over(c, rds_errstr(reply));
    else
        move_keys(c);
}

/* The applications of the keys a GETKEYSINSLOT returned, each once (apps[]: their tags). */
static size_t slot_apps(const struct cmap *c, const redisReply *reply,
                        char (*apps)[APP_KEY_MAX + 1])
{
    size_t napps = 0, plen = strlen(c->prefix);

    for (size_t i = 0; i < reply->elements && napps < MOVE_BATCH; i++) {
        const redisReply *k = reply->element[i];
        char app[APP_KEY_MAX + 1];
        size_t j;

        if (k->type != REDIS_REPLY_STRING || k->len <= plen + 1 ||
            strncmp(k->str, c->prefix, plen) != 0 || k->str[plen] != ':' ||
            keys_kind_of(k->str, k->len) == KEYS_NONE ||
            keys_app_of(k->str, k->len, app, sizeof(app)) != 0)
            continue; /* not an application's key: the operator's tool moves it */
        for (j = 0; j < napps && strcmp(apps[j], app) != 0; j++)
            ;
        if (j == napps)
            memcpy(apps[napps++], app, sizeof(app));
    }
    return napps;
}

/* GETKEYSINSLOT's reply: MIGRATE the pool, meta and lock of each application in it. */
static void on_slot_keys(struct rds *r, redisReply *reply, void *arg)
{
    struct node *n = arg;
    struct cmap *c = n->map->impl;
    static char apps[MOVE_BATCH][APP_KEY_MAX + 1];
    const char *argv[12 + 3 * MOVE_BATCH];
    char *keys[3 * MOVE_BATCH];
    char port[16], timeout[16];
    size_t napps, argc = 0, nkeys = 0;
    const struct cnode *to;

    (void)r;
    if (!c || !c->mv.on)
        return;
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
        move_over(c, reply ? rds_errstr(reply) : "connection lost");
        return;
    }
    if ((napps = slot_apps(c, reply, apps)) == 0) {
        move_over(c, NULL); /* none left on the source */
        return;
    }
    to = &c->cn[c->mv.to];
    snprintf(port, sizeof(port), "%d", to->port);
    snprintf(timeout, sizeof(timeout), "%d", c->map->timeout_ms);
    argv[argc++] = "MIGRATE";
    argv[argc++] = to->host;
    argv[argc++] = port;
    argv[argc++] = "";
    argv[argc++] = "0";
    argv[argc++] = timeout;
    if (c->password) {
        argv[argc++] = c->user ? "AUTH2" : "AUTH";
        if (c->user)
            argv[argc++] = c->user;
        argv[argc++] = c->password;
    }
    argv[argc++] = "KEYS";
    for (size_t i = 0; i < napps; i++)
        for (int k = KEYS_POOL; k <= KEYS_LOCK; k++)
            if ((keys[nkeys] = keys_app_new(c->prefix, apps[i], (enum keys_kind)k)))
                argv[argc++] = keys[nkeys++];
    if (nkeys < 3 * napps)
        move_over(c, "out of memory");
    else if (rds_command_argv(c->map->nodes[c->mv.from]->main, on_migrated,
                              c->map->nodes[c->mv.from], (int)argc, argv, NULL) != 0)
        move_over(c, "the connection to the source is down");
    else
        c->mv.apps += napps;
    for (size_t i = 0; i < nkeys; i++)
        free(keys[i]);
}

/* Ask the source for the keys left in the slot. */
static void move_keys(struct cmap *c)
{
    struct node *from = c->map->nodes[c->mv.from];

    if (rds_command(from->main, on_slot_keys, from, "CLUSTER GETKEYSINSLOT %d %d", c->mv.slot,
                    MOVE_BATCH) != 0)
        move_over(c, "the connection to the source is down");
}

/*
 * Node `from` answered ASK for slot `slot`, naming `to`: a writer moves
 * idpool's keys of the slot there and follows it (see the top).
 */
static void move_start(struct cmap *c, struct node *from, int slot, struct node *to)
{
    if (!(c->map->flags & NODEMAP_WRITER) || c->mv.on || from == to || c->ask[slot] == to->id ||
        c->cn[to->id].owned == 0 || clock_ms() < c->mv.retry_ms)
        return;
    if (c->mv.slot != slot)
        c->mv.warned = 0;
    c->mv.on = 1;
    c->mv.slot = slot;
    c->mv.from = from->id;
    c->mv.to = to->id;
    c->mv.apps = 0;
    move_keys(c);
}

/* --- the table ------------------------------------------------------------ */

/*
 * Take table t: the route of every slot, nodes made for new primaries,
 * nodes that gained or lost all their slots told so. -1 when out of memory
 * (the table in use is kept).
 */
static int take_table(struct cmap *c, const struct cluster_table *t)
{
    struct node *of[CLUSTER_NODES_MAX];
    size_t *owned;
    size_t changed = 0;
    char hp[HOSTPORT_STR_MAX];

    for (size_t i = 0; i < t->nprimaries; i++)
        if (!(of[i] = cnode_get(c, t->primary[i].host, t->primary[i].port)))
            return -1;
    if (!(owned = calloc(c->ncn ? c->ncn : 1, sizeof(*owned))))
        return -1;
    for (size_t s = 0; s < KEYS_SLOTS; s++) {
        uint16_t id =
            t->owner[s] == CLUSTER_NO_OWNER ? CLUSTER_NO_OWNER : (uint16_t)of[t->owner[s]]->id;
        changed += id != c->route[s];
        c->route[s] = id;
        if (id != CLUSTER_NO_OWNER)
            owned[id]++;
    }
    c->table = *t;
    for (size_t i = 0; i < c->ncn; i++) {
        int was = c->cn[i].owned > 0, is = owned[i] > 0;

        c->cn[i].owned = owned[i];
        if (is)
            cnode_slot(c, c->map->nodes[i]);
        if (was != is)
            cnode_serves(c, i, is);
    }
    free(owned);
    for (size_t s = 0; s < KEYS_SLOTS; s++)
        if (c->ask[s] != CLUSTER_NO_OWNER && c->route[s] == c->ask[s])
            ask_clear(c, s, "the slot table names it the owner");
    if (changed || !c->answered_ms)
        log_info("redis: cluster slot table read from %s: %zu primaries, %zu slots moved, %zu "
                 "without an owner",
                 hostport_str(hp, sizeof(hp), c->asked.host, c->asked.port), t->nprimaries, changed,
                 t->unowned);
    return 0;
}

/* The addresses to ask, in turn: the primaries of the table in use, then the seeds. */
static const struct cluster_addr *candidate(const struct cmap *c, size_t i)
{
    size_t n = c->table.nprimaries + c->nseeds;

    i %= n;
    return i < c->table.nprimaries ? &c->table.primary[i] : &c->seed[i - c->table.nprimaries];
}

static void refresh_over(struct cmap *c)
{
    evtimer_del(c->attempt_ev);
    dns_cancel(c->dns);
    c->dns = NULL;
    node_control_close(&c->ac);
    cluster_refresh_done(&c->refresh);
}

static void attempt_failed(struct cmap *c, const char *fmt, const char *what)
{
    char hp[HOSTPORT_STR_MAX];
    int n = snprintf(c->why, sizeof(c->why),
                     "%s: ", hostport_str(hp, sizeof(hp), c->asked.host, c->asked.port));

    snprintf(c->why + n, sizeof(c->why) - (size_t)n, fmt, what);
    evtimer_del(c->attempt_ev);
    dns_cancel(c->dns);
    c->dns = NULL;
    node_control_close(&c->ac);
    c->next++;
    attempt(c);
}

static void on_slots(redisAsyncContext *ac, void *reply, void *arg)
{
    struct cmap *c = arg;
    struct cluster_table *t;
    char err[200], hp[HOSTPORT_STR_MAX];

    if (ac != c->ac || !reply)
        return;
    if (((redisReply *)reply)->type == REDIS_REPLY_ERROR) {
        attempt_failed(c, "CLUSTER SLOTS failed: %s", ((redisReply *)reply)->str);
        return;
    }
    if (!(t = malloc(sizeof(*t)))) {
        attempt_failed(c, "%s", "out of memory");
        return;
    }
    if (cluster_table_read(t, reply, c->asked.host, err, sizeof(err)) != 0) {
        free(t);
        attempt_failed(c, "CLUSTER SLOTS: %s", err);
        return;
    }
    if (t->unowned == KEYS_SLOTS) {
        free(t);
        attempt_failed(c, "%s",
                       "serves no slot and knows no node that does (not joined yet, or reset)");
        return;
    }
    if (take_table(c, t) != 0) {
        free(t);
        attempt_failed(c, "%s", "out of memory");
        return;
    }
    free(t);
    if (c->failures)
        log_info("redis: the cluster's slot table was read again (%s) after %d failed refreshes",
                 hostport_str(hp, sizeof(hp), c->asked.host, c->asked.port), c->failures);
    c->failures = 0;
    c->answered_ms = clock_ms();
    c->refreshes++;
    refresh_over(c);
}

static void on_ctx_connect(const redisAsyncContext *ac, int status)
{
    struct cmap *c = ac->data;

    if (status != REDIS_OK && ac == c->ac) {
        c->ac = NULL; /* hiredis frees it after this callback */
        attempt_failed(c, "%s", ac->errstr[0] ? ac->errstr : "connect failed");
    }
}

static void on_ctx_disconnect(const redisAsyncContext *ac, int status)
{
    struct cmap *c = ac->data;

    (void)status;
    if (ac != c->ac)
        return; /* closed by us */
    c->ac = NULL;
    attempt_failed(c, "%s", ac->errstr[0] ? ac->errstr : "the node closed the connection");
}

static void on_attempt_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct cmap *c = arg;
    char ms[16];

    (void)fd;
    (void)what;
    snprintf(ms, sizeof(ms), "%d", c->attempt_ms);
    attempt_failed(c, "no answer to CLUSTER SLOTS within %s ms", ms);
}

static void ask_at(struct cmap *c, const char *ip);

/* The asked node's address, looked up off the loop (dns.c). */
static void on_lookup(const char *ip, const char *err, void *arg)
{
    struct cmap *c = arg;

    c->dns = NULL;
    if (!ip)
        attempt_failed(c, "%s", err);
    else
        ask_at(c, ip);
}

/* Ask the next candidate, or give this refresh up after ATTEMPTS of them. */
static void attempt(struct cmap *c)
{
    char ip[DNS_IP_MAX], why[160];
    int rc;

    if (c->attempts++ >= ATTEMPTS) {
        if (c->failures++ == 0 || c->failures % 20 == 0)
            log_warn("redis: cannot read the cluster's slot table (last: %s); asking again "
                     "in a second",
                     c->why);
        cluster_refresh_want(&c->refresh);
        refresh_over(c);
        return;
    }
    c->asked = *candidate(c, c->next);
    rc = node_control_lookup(c->map, c->asked.host, on_lookup, c, &c->dns, c->attempt_ev,
                             c->attempt_ms, ip, why, sizeof(why));
    if (rc == 0)
        ask_at(c, ip);
    else if (rc < 0)
        attempt_failed(c, "%s", why);
}

/* CLUSTER SLOTS to the asked node, at ip (its numeric address). */
static void ask_at(struct cmap *c, const char *ip)
{
    struct timeval tv = {c->attempt_ms / 1000, (c->attempt_ms % 1000) * 1000};
    redisAsyncContext *ac;
    char why[128];

    ac = node_control_connect(c->map, ip, c->asked.port, c->user, c->password, on_ctx_connect,
                              on_ctx_disconnect, c, why, sizeof(why));
    if (!ac) {
        attempt_failed(c, "%s", why);
        return;
    }
    c->ac = ac;
    evtimer_add(c->attempt_ev, &tv);
    if (redisAsyncCommand(ac, on_slots, c, "CLUSTER SLOTS") != REDIS_OK)
        attempt_failed(c, "%s", "cannot send CLUSTER SLOTS");
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct cmap *c = arg;

    (void)fd;
    (void)what;
    /*
     * While a primary of the table cannot be reached, ask every second: the
     * other nodes still name it until its replica won the election.
     */
    for (size_t i = 0; i < c->ncn && !c->refresh.wanted; i++)
        if (c->cn[i].owned > 0 && !node_ready(c->map->nodes[i]))
            cluster_refresh_want(&c->refresh);
    if (!cluster_refresh_due(&c->refresh, clock_ms(), NULL))
        return;
    c->attempts = 0;
    attempt(c);
}

/* --- what the connections say --------------------------------------------- */

/*
 * What an error reply that a connection of n got means, the one reading of
 * it: the redirection's slot and the node named (made when the map had none
 * there; NULL when out of memory).
 */
static enum node_err cmap_read(struct cmap *c, const struct node *n, const redisReply *reply,
                               int *slot, struct node **to)
{
    struct cluster_addr at;

    *to = NULL;
    switch (cluster_error_read(reply->str, reply->len, c->cn[n->id].host, slot, &at)) {
    case CLUSTER_MOVED:
        *to = cnode_get(c, at.host, at.port);
        return NODE_ERR_MOVED;
    case CLUSTER_ASK:
        *to = cnode_get(c, at.host, at.port);
        return NODE_ERR_ASK;
    case CLUSTER_TRYAGAIN:
        return NODE_ERR_TRYAGAIN;
    case CLUSTER_DOWN:
        return NODE_ERR_DOWN;
    default:
        return NODE_ERR_OTHER;
    }
}

/*
 * rds_error_fn of every node connection, before the command's own callback
 * (which may ask node_error what the reply means): MOVED patches the route
 * at once, and both it and CLUSTERDOWN want the table read again.
 */
static void cmap_on_error(struct rds *r, const redisReply *reply, void *arg)
{
    struct node *n = arg, *owner;
    struct cmap *c = n->map->impl;
    int slot;

    (void)r;
    switch (cmap_read(c, n, reply, &slot, &owner)) {
    case NODE_ERR_MOVED:
        c->moved++;
        cluster_refresh_want(&c->refresh);
        /* the target answers MOVED (the migration was given up) or the slot is its own now */
        if (c->ask[slot] != CLUSTER_NO_OWNER && owner &&
            (n->id == c->ask[slot] || owner->id == c->ask[slot]))
            ask_clear(c, (size_t)slot, "MOVED");
        /* the refresh tells the rest */
        if (owner && c->route[slot] != owner->id) {
            uint16_t was = c->route[slot];

            c->route[slot] = (uint16_t)owner->id;
            /* the last slot of the node that answered MOVED gone: it is parked now, as
             * take_table would park it (which, finding it owns nothing, will not) */
            if (was != CLUSTER_NO_OWNER && c->cn[was].owned > 0 && --c->cn[was].owned == 0)
                cnode_serves(c, was, 0);
            if (c->cn[owner->id].owned++ == 0)
                cnode_serves(c, owner->id, 1);
        }
        break;
    case NODE_ERR_ASK:
        c->asks++;
        if (owner)
            move_start(c, n, slot, owner);
        break;
    case NODE_ERR_TRYAGAIN:
        c->tryagains++;
        break;
    case NODE_ERR_DOWN:
        c->downs++;
        cluster_refresh_want(&c->refresh);
        break;
    default:
        break;
    }
}

static enum node_err cmap_error(struct nodemap *m, struct node *n, const redisReply *reply,
                                struct node **to)
{
    int slot;

    return cmap_read(m->impl, n, reply, &slot, to);
}

/* --- the map's operations ------------------------------------------------- */

static int cmap_open(struct nodemap *m, const struct config *cfg)
{
    struct cmap *c = calloc(1, sizeof(*c));
    const struct redis_url *u = &cfg->redis;
    struct timeval tick = {0, TICK_MS * 1000};
    int t = cfg->redis_timeout_ms;

    if (c == NULL)
        return -1;
    m->impl = c;
    c->map = m;
    cluster_table_init(&c->table);
    for (size_t s = 0; s < KEYS_SLOTS; s++)
        c->route[s] = c->ask[s] = CLUSTER_NO_OWNER;
    for (size_t i = 0; i < u->nhosts && c->nseeds < REDIS_HOSTS_MAX; i++) {
        snprintf(c->seed[c->nseeds].host, sizeof(c->seed[0].host), "%s", u->hosts[i].host);
        c->seed[c->nseeds++].port = u->hosts[i].port;
    }
    c->user = u->user ? strdup(u->user) : NULL;
    c->password = u->password ? strdup(u->password) : NULL;
    c->prefix = strdup(cfg->key_prefix);
    c->attempt_ms = t < ATTEMPT_MIN_MS ? ATTEMPT_MIN_MS : t > ATTEMPT_MAX_MS ? ATTEMPT_MAX_MS : t;
    c->attempt_ev = evtimer_new(m->base, on_attempt_timeout, c);
    c->tick_ev = event_new(m->base, -1, EV_PERSIST, on_tick, c);
    if (c->nseeds == 0 || (u->user && !c->user) || (u->password && !c->password) || !c->prefix ||
        !c->attempt_ev || !c->tick_ev)
        return -1;
    cluster_refresh_want(&c->refresh);
    evtimer_add(c->tick_ev, &tick);
    event_active(c->tick_ev, EV_TIMEOUT, 1); /* the first question from the loop */
    return 0;
}

static struct node *cmap_for_key(struct nodemap *m, const char *key)
{
    struct cmap *c = m->impl;
    unsigned s = keys_slot(key, strlen(key));
    uint16_t id = c->ask[s] != CLUSTER_NO_OWNER ? c->ask[s] : c->route[s];

    if (id == CLUSTER_NO_OWNER) {
        cluster_refresh_want(&c->refresh);
        return NULL;
    }
    return m->nodes[id];
}

static int cmap_serves(const struct nodemap *m, const struct node *n)
{
    const struct cmap *c = m->impl;

    return c->cn[n->id].owned > 0;
}

/* A node's main connection lost: the slots may have moved (a failover); ask. */
static void cmap_state(struct nodemap *m, struct node *n, int ready)
{
    struct cmap *c = m->impl;

    if (!ready && c->cn[n->id].owned > 0)
        cluster_refresh_want(&c->refresh);
}

static void cmap_view(const struct nodemap *m, struct daemon_view *out)
{
    struct cmap *c = m->impl;
    size_t n = 0;

    out->cluster = 1;
    out->cluster_unowned = c->table.unowned;
    out->cluster_refreshes = c->refreshes;
    out->cluster_moved = c->moved;
    out->cluster_asks = c->asks;
    out->cluster_tryagains = c->tryagains;
    out->cluster_downs = c->downs;
    if (c->nviews < c->ncn) {
        struct node_view *v = realloc(c->views, c->ncn * sizeof(*v));
        if (v == NULL)
            return; /* the nodes are left out of this view */
        c->views = v;
        c->nviews = c->ncn;
    }
    for (size_t i = 0; i < c->ncn; i++) {
        if (c->cn[i].owned == 0)
            continue;
        snprintf(c->views[n].addr, sizeof(c->views[n].addr), "%s", m->nodes[i]->addr);
        c->views[n].up = node_ready(m->nodes[i]);
        c->views[n++].slots = c->cn[i].owned;
    }
    out->nodes = c->views;
    out->nnodes = n;
}

static void cmap_close(struct nodemap *m)
{
    struct cmap *c = m->impl;

    if (c == NULL)
        return;
    dns_cancel(c->dns);
    c->dns = NULL;
    node_control_close(&c->ac);
    if (c->attempt_ev)
        event_free(c->attempt_ev);
    if (c->tick_ev)
        event_free(c->tick_ev);
    free(c->cn);
    free(c->views);
    free(c->user);
    free(c->password);
    free(c->prefix);
    free(c);
    m->impl = NULL;
}

const struct nodemap_ops cluster_map_ops = {
    .kind = REDIS_CLUSTER,
    .name = "cluster",
    .open = cmap_open,
    .for_key = cmap_for_key,
    .serves = cmap_serves,
    .state = cmap_state,
    .error = cmap_error,
    .view = cmap_view,
    .close = cmap_close,
};
