/*
 * clusterenv — libidpool's transport to a Redis Cluster
 * (redis-cluster://, the seed nodes): FCALL idpool_take on the primary of
 * the slot of the application's keys, one blocking hiredis connection per
 * primary, the slot table read from CLUSTER SLOTS and MOVED, ASK,
 * TRYAGAIN and CLUSTERDOWN followed by route.h. A take — its table read,
 * connects, redirections and waits — is bounded by io_timeout_ms in all,
 * each connect and command by what is left of it.
 *
 * A take whose reply was lost (a timeout, a connection error) is never sent
 * again, as on one Redis (redisenv.c): idpool_take may have popped IDs that
 * never arrived, and sending it again would not bring those back but pop
 * more; the lost ones are a gap. Its primary is closed and backs off, and
 * the table is read again (a failover moves its slots). A refusal that is
 * not Cluster's nor ours (a missing library on a new primary, NOREPLICAS)
 * closes that primary alone: the applications of the other primaries go
 * on. IDPOOL_EPOCH (a promoted replica not yet validated by the daemon) is
 * waited out where it was said, as on one Redis (failover.c).
 */
#include "env.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "clock.h"
#include "route.h"
#include "url.h"

/* A Cluster environment. */
struct cluster_env {
    struct env env; /* first: a struct env * is a struct cluster_env * */
    struct redis_url url;
    struct router *route;
    /*
     * The socket of each node's connection, -1 when none (route_fd_fn), for a
     * forked child (cluster_forget): as struct env's sock, one per node.
     */
    int socks[ROUTE_NODES_MAX];
};

static struct cluster_env *cluster_of(struct env *e)
{
    return (struct cluster_env *)e;
}

static void cluster_sock(void *arg, size_t node, int fd)
{
    struct cluster_env *x = arg;

    __atomic_store_n(&x->socks[node], fd, __ATOMIC_SEQ_CST);
}

static struct env *cluster_open(const char *url, char *err, size_t errlen)
{
    struct cluster_env *x = calloc(1, sizeof(*x));
    char where[REDIS_HOSTS_MAX * HOSTPORT_STR_MAX + 64];

    if (x == NULL || redis_url_parse(url, &x->url, err, errlen) < 0) {
        if (x == NULL)
            snprintf(err, errlen, "out of memory");
        free(x);
        return NULL;
    }
    for (size_t i = 0; i < ROUTE_NODES_MAX; i++)
        x->socks[i] = -1;
    /*
     * Each step of a take is bounded by what is left of its io_timeout_ms
     * (route_command's deadline), never by more: io_ms is no bound here.
     */
    x->route = route_new(&x->url, UINT32_MAX, cluster_sock, x);
    if (x->route == NULL) {
        snprintf(err, errlen, "out of memory");
        redis_url_free(&x->url);
        free(x);
        return NULL;
    }
    env_base(&x->env, &cluster_env_ops, x->url.host, x->url.port);
    snprintf(x->env.name, sizeof(x->env.name), "%.290s",
             redis_url_where(where, sizeof(where), &x->url));
    return &x->env;
}

static int cluster_connected(const struct env *e)
{
    return route_connected(((const struct cluster_env *)e)->route);
}

static void cluster_close(struct env *e)
{
    route_close(cluster_of(e)->route);
}

static void cluster_free(struct env *e)
{
    struct cluster_env *x = cluster_of(e);

    route_free(x->route);
    redis_url_free(&x->url);
    free(x);
}

static uint64_t cluster_retry_at(const struct env *e, const char *key)
{
    return route_retry_at(((const struct cluster_env *)e)->route, key, clock_ms());
}

/* In a forked child: close the child's copies of the nodes' sockets, touching nothing else. */
static void cluster_forget(struct env *e)
{
    struct cluster_env *x = cluster_of(e);

    for (size_t i = 0; i < ROUTE_NODES_MAX; i++) {
        int fd = __atomic_exchange_n(&x->socks[i], -1, __ATOMIC_SEQ_CST);
        if (fd >= 0)
            close(fd);
    }
}

static enum take_outcome cluster_take(struct env *e, const struct take_req *q,
                                      struct take_result *r)
{
    struct cluster_env *x = cluster_of(e);
    char count[16], err[512];
    const char *argv[6] = {"FCALL", "idpool_take", "2", q->k_pool, q->k_meta, count};
    size_t lens[6];
    struct route_trip trip;
    redisReply *y;
    enum take_outcome out = T_DOWN;

    snprintf(count, sizeof(count), "%u", q->count);
    for (int i = 0; i < 6; i++)
        lens[i] = strlen(argv[i]);
    switch (route_command(x->route, q->k_pool, 6, argv, lens, clock_ms() + q->o->io_timeout_ms, &y,
                          &trip, err, sizeof(err))) {
    case ROUTE_REPLY:
        out = redis_take_reply(e, trip.where, q, y, r);
        if (out == T_DOWN) /* neither Cluster's nor ours: this node alone is closed */
            route_fail(x->route, trip.node);
        freeReplyObject(y);
        break;
    case ROUTE_UNSENT: /* it did not run: the next take goes where the table then says */
        take_msg(r, e, "%s", err);
        break;
    case ROUTE_LOST: /* see above: never sent again; route closed the node */
        take_msg(r, e, "%s (the take is lost: the IDs it may have taken are a gap)", err);
        break;
    }
    r->moved = trip.moved;
    r->asked = trip.asked;
    r->retried = trip.retried;
    return out;
}

static const char *const cluster_schemes[] = {"redis-cluster://", NULL};

const struct env_ops cluster_env_ops = {
    .schemes = cluster_schemes,
    .usage = "redis-cluster://[[user]:password@]host[:port][,host[:port]...]",
    .open = cluster_open,
    .take = cluster_take,
    .connected = cluster_connected,
    .close = cluster_close,
    .free = cluster_free,
    .retry_at = cluster_retry_at,
    .forget = cluster_forget,
};
