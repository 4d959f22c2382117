/*
 * node — the node maps. Each kind of map is a row of kinds[] (seatd's
 * impls[], libidpool's transports[]) that makes its nodes and says which
 * one serves a key. Standalone, here: the one node of redis://; Sentinel
 * in node_sentinel.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>

#include "node_int.h"
#include "rds.h"

static void on_main_state(struct rds *r, int ready, void *arg)
{
    struct node *n = arg;

    (void)r;
    if (ready) {
        n->generation++;
        /* the server is back: the node's other connections need not wait out their backoff */
        rds_kick(n->push);
        rds_kick(n->api);
    }
    if (n->map->ops->state)
        n->map->ops->state(n->map, n, ready);
    if (n->map->on_state)
        n->map->on_state(n, ready, n->map->arg);
}

static void on_auth_reply(redisAsyncContext *ac, void *reply, void *arg)
{
    (void)ac;
    (void)reply;
    (void)arg; /* its error, if any, is what the next command answers */
}

redisAsyncContext *node_control_connect(struct nodemap *m, const char *host, int port,
                                        const char *user, const char *password,
                                        redisConnectCallback *on_connect,
                                        redisDisconnectCallback *on_disconnect, void *data,
                                        char *why, size_t whylen)
{
    redisAsyncContext *ac = redisAsyncConnect(host, port);

    if (!ac || ac->err) {
        snprintf(why, whylen, "%s", ac ? ac->errstr : "out of memory");
        if (ac)
            redisAsyncFree(ac);
        return NULL;
    }
    ac->data = data;
    if (redisLibeventAttach(ac, m->base) != REDIS_OK) {
        redisAsyncFree(ac);
        snprintf(why, whylen, "cannot attach to the event loop");
        return NULL;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    if (password && user)
        redisAsyncCommand(ac, on_auth_reply, NULL, "AUTH %s %s", user, password);
    else if (password)
        redisAsyncCommand(ac, on_auth_reply, NULL, "AUTH %s", password);
    return ac;
}

int node_control_lookup(struct nodemap *m, const char *host, dns_fn *fn, void *arg,
                        struct dns_req **req, struct event *ev, int timeout_ms, char *ip, char *why,
                        size_t whylen)
{
    int rc = dns_lookup(m->base, host, fn, arg, req, ip, DNS_IP_MAX, why, whylen);

    if (rc == 1) {
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        evtimer_add(ev, &tv);
    }
    return rc;
}

void node_control_close(redisAsyncContext **acp)
{
    redisAsyncContext *ac = *acp;

    *acp = NULL;
    if (ac)
        redisAsyncFree(ac);
}

static void node_free(struct node *n)
{
    if (n == NULL)
        return;
    /*
     * The API's first: its takes fail while the issuer is stopping. Then the
     * pushes': a push failed now unlocks on main, which is still there (and
     * fails that too). A pusher started later finds no push connection.
     */
    rds_free(n->api);
    rds_free(n->push);
    n->push = NULL;
    rds_free(n->main);
    free(n);
}

struct node *node_add(struct nodemap *m, const struct config *cfg)
{
    struct node **nodes = realloc(m->nodes, (m->nnodes + 1) * sizeof(*nodes));
    struct node *n;
    unsigned writer = (m->flags & NODEMAP_WRITER) ? RDS_WRITER : 0;

    if (nodes == NULL)
        return NULL;
    m->nodes = nodes;
    n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    n->map = m;
    n->id = (unsigned)m->nnodes;
    if (cfg->redis.kind == REDIS_STANDALONE)
        hostport_str(n->addr, sizeof(n->addr), cfg->redis.host, cfg->redis.port);
    /* a refiller's connections validate the server and write under its epoch */
    n->main = rds_new(m->base, cfg, RDS_MAIN | writer, on_main_state, n);
    n->push = rds_new(m->base, cfg, writer, NULL, NULL);
    if (n->main && n->push && (m->flags & NODEMAP_API)) {
        n->api = rds_new(m->base, cfg, 0, NULL, NULL);
        if (n->api)
            rds_set_name(n->api, "redis-api");
    }
    if (!n->main || !n->push || (!n->api && (m->flags & NODEMAP_API))) {
        node_free(n);
        return NULL;
    }
    m->nodes[m->nnodes++] = n;
    return n;
}

/* --- standalone: redis://, one node ------------------------------------- */

static int standalone_open(struct nodemap *m, const struct config *cfg)
{
    return node_add(m, cfg) ? 0 : -1;
}

/* The one node, without hashing the key: the check path pays nothing for the map. */
static struct node *standalone_for_key(struct nodemap *m, const char *key)
{
    (void)key;
    return m->nodes[0];
}

static const struct nodemap_ops standalone_map_ops = {
    .kind = REDIS_STANDALONE,
    .name = "standalone",
    .open = standalone_open,
    .for_key = standalone_for_key,
};

static const struct nodemap_ops *const kinds[] = {
    &standalone_map_ops,
    &sentinel_map_ops,
    &cluster_map_ops,
};

/* --- the map ------------------------------------------------------------- */

struct nodemap *nodemap_new(struct event_base *base, const struct config *cfg, unsigned flags,
                            node_state_fn *on_state, void *arg)
{
    struct nodemap *m = calloc(1, sizeof(*m));

    if (m == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (kinds[i]->kind == cfg->redis.kind)
            m->ops = kinds[i];
    if (m->ops == NULL) { /* config.c refuses these already */
        log_error("redis: %s:// is not supported by idpoold yet",
                  redis_kind_scheme(cfg->redis.kind));
        free(m);
        return NULL;
    }
    m->base = base;
    m->flags = flags;
    m->timeout_ms = cfg->redis_timeout_ms;
    m->on_state = on_state;
    m->arg = arg;
    if (m->ops->open(m, cfg) < 0) {
        nodemap_free(m);
        return NULL;
    }
    return m;
}

void nodemap_free(struct nodemap *m)
{
    if (m == NULL)
        return;
    if (m->ops->close)
        m->ops->close(m);
    for (size_t i = 0; i < m->nnodes; i++)
        node_free(m->nodes[i]);
    free(m->nodes);
    free(m);
}

struct node *nodemap_for_key(struct nodemap *m, const char *key)
{
    return m->ops->for_key(m, key);
}

/* The nodes that serve keys now (a Cluster map's nodes that own a slot; every other one). */
struct node *nodemap_next_primary(const struct nodemap *m, const struct node *prev)
{
    for (size_t i = prev ? prev->id + 1 : 0; i < m->nnodes; i++)
        if (!m->ops->serves || m->ops->serves(m, m->nodes[i]))
            return m->nodes[i];
    return NULL;
}

void nodemap_view(const struct nodemap *m, struct daemon_view *out)
{
    if (m->ops->view)
        m->ops->view(m, out);
}

enum node_err node_error(struct node *n, const redisReply *reply, struct node **to)
{
    *to = NULL;
    if (!n->map->ops->error || !reply || reply->type != REDIS_REPLY_ERROR)
        return NODE_ERR_OTHER;
    return n->map->ops->error(n->map, n, reply, to);
}

int node_ready(const struct node *n)
{
    return n && rds_ready(n->main);
}

const char *node_epoch(const struct node *n)
{
    return rds_epoch(n->main);
}

void node_check_library(struct node *n)
{
    rds_check_library(n->main);
}

void nodemap_set_timeout(struct nodemap *m, int timeout_ms)
{
    m->timeout_ms = timeout_ms;
    for (size_t i = 0; i < m->nnodes; i++) {
        struct node *n = m->nodes[i];
        rds_set_timeout(n->main, timeout_ms);
        rds_set_timeout(n->push, timeout_ms);
        if (n->api)
            rds_set_timeout(n->api, timeout_ms);
    }
}

int nodemap_ready(const struct nodemap *m)
{
    for (const struct node *n = nodemap_next_primary(m, NULL); n; n = nodemap_next_primary(m, n))
        if (!rds_ready(n->main) || !rds_ready(n->push))
            return 0;
    return 1;
}

void nodemap_stats(const struct nodemap *m, struct rds_stats *sum)
{
    memset(sum, 0, sizeof(*sum));
    for (size_t i = 0; i < m->nnodes; i++) {
        struct rds_stats st_main, st_push;

        rds_get_stats(m->nodes[i]->main, &st_main);
        rds_get_stats(m->nodes[i]->push, &st_push);
        sum->errors += st_main.errors + st_push.errors;
        sum->reconnects += st_main.reconnects + st_push.reconnects;
    }
}

int node_table_fit(void *table, size_t *len, size_t size, const struct node *n)
{
    char *t;

    if (n->id < *len)
        return 0;
    memcpy(&t, table, sizeof(t));
    t = realloc(t, (n->id + 1) * size);
    if (t == NULL)
        return -1;
    memset(t + *len * size, 0, (n->id + 1 - *len) * size);
    memcpy(table, &t, sizeof(t));
    *len = n->id + 1;
    return 0;
}
