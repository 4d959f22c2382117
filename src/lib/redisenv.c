/*
 * redisenv — libidpool's transport to a Redis (redis://, or the primary a
 * Sentinel set names: redis-sentinel://): FCALL idpool_take on a blocking
 * hiredis connection per environment, opened as needed (AUTH, SELECT)
 * with io_timeout_ms for connect and every command. A Sentinel
 * environment asks the sentinels at every (re)connect (resolve.h) and
 * takes nothing before ROLE said master on that connection; a READONLY
 * or NOREPLICAS refusal or a lost reply closes it (the next take
 * re-resolves). A take is never sent again: a lost take's IDs are a gap.
 */
#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "clock.h"
#include "resolve.h"
#include "url.h"

/* A Redis environment. */
struct redis_env {
    struct env env; /* first: a struct env * is a struct redis_env * */
    struct redis_url url;
    redisContext *rc;     /* NULL while not connected */
    struct resolver sent; /* redis-sentinel://: the sentinels (url.kind REDIS_SENTINEL) */
    char host[256];       /* Sentinel: the primary rc is connected to */
    int port;
    uint64_t asked_ms; /* Sentinel: when the sentinels were last asked (CLOCK_MONOTONIC) */
};

/*
 * A Sentinel environment whose pool is dry asks the sentinels again at most
 * this often: a demoted primary keeps answering as a master until Sentinel
 * turns it into a replica (seconds after the switch), and a dry pool there
 * would never be refilled (no pub/sub here: +switch-master is a hint the
 * daemon follows).
 */
#define DRY_RECHECK_MS 1000

static struct redis_env *redis_of(struct env *e)
{
    return (struct redis_env *)e;
}

/*
 * The resolver's socket is the environment's while open (a forked child
 * closes it); closed, the data connection's is again (a recheck while
 * connected: for that instant a child may keep its copy of the data
 * socket open, never using it).
 */
static void sentinel_sock(void *arg, int fd)
{
    struct redis_env *x = arg;

    env_sock(&x->env, fd >= 0 ? fd : x->rc ? x->rc->fd : -1);
}

static struct env *redis_open(const char *url, char *err, size_t errlen)
{
    struct redis_env *x = calloc(1, sizeof(*x));

    if (x == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (redis_url_parse(url, &x->url, err, errlen) < 0) {
        free(x);
        return NULL;
    }
    env_base(&x->env, &redis_env_ops, x->url.host, x->url.port);
    if (x->url.kind == REDIS_SENTINEL) {
        /* Always a Sentinel URL here: resolve_init cannot fail. */
        if (resolve_init(&x->sent, &x->url, sentinel_sock, x) < 0)
            abort();
        snprintf(x->env.name, sizeof(x->env.name), "%.64s@sentinels", x->url.master);
    }
    return &x->env;
}

static int redis_connected(const struct env *e)
{
    return ((const struct redis_env *)e)->rc != NULL;
}

static void redis_close(struct env *e)
{
    struct redis_env *x = redis_of(e);

    if (x->rc) {
        redisFree(x->rc);
        x->rc = NULL;
    }
}

static void redis_free(struct env *e)
{
    struct redis_env *x = redis_of(e);

    redis_url_free(&x->url);
    free(x);
}

/* One command's reply, or NULL with the connection failed: r->msg says why. */
static redisReply *command_ok(struct redis_env *x, struct take_result *r, const char *what,
                              redisReply *reply)
{
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        take_msg(r, &x->env, "%s failed: %s", what,
                 reply              ? reply->str
                 : x->rc->errstr[0] ? x->rc->errstr
                                    : "no reply");
        freeReplyObject(reply);
        env_fail(&x->env);
        return NULL;
    }
    return reply;
}

/* The Redis connection, (re)opened as needed; NULL while it is down. */
static redisContext *redis_conn(struct redis_env *x, const struct idpool_options *o,
                                struct take_result *r)
{
    struct timeval tv = {o->io_timeout_ms / 1000, (o->io_timeout_ms % 1000) * 1000};
    redisReply *y;

    const char *host = x->url.host;
    int port = x->url.port;
    char primary[256], err[1024];

    if (x->rc)
        return x->rc;
    if (x->url.kind == REDIS_SENTINEL) {
        if (resolve_primary(&x->sent, o->io_timeout_ms, primary, sizeof(primary), &port, err,
                            sizeof(err)) < 0) {
            take_msg(r, &x->env, "%s", err);
            env_fail(&x->env);
            return NULL;
        }
        host = primary;
        x->asked_ms = clock_ms();
        snprintf(x->host, sizeof(x->host), "%s", primary);
        x->port = port;
        snprintf(x->env.name, sizeof(x->env.name), "%.64s@", x->url.master);
        hostport_str(x->env.name + strlen(x->env.name), sizeof(x->env.name) - strlen(x->env.name),
                     host, port);
    }
    x->rc = redisConnectWithTimeout(host, port, tv);
    if (x->rc && x->rc->fd >= 0)
        env_sock(&x->env, x->rc->fd);
    if (x->rc == NULL || x->rc->err || redisSetTimeout(x->rc, tv) != REDIS_OK) {
        take_msg(r, &x->env, "cannot connect: %s", x->rc ? x->rc->errstr : "out of memory");
        env_fail(&x->env);
        return NULL;
    }
    if (x->url.password) {
        y = x->url.user ? redisCommand(x->rc, "AUTH %s %s", x->url.user, x->url.password)
                        : redisCommand(x->rc, "AUTH %s", x->url.password);
        if ((y = command_ok(x, r, "AUTH", y)) == NULL)
            return NULL;
        freeReplyObject(y);
    }
    if (x->url.db) {
        y = command_ok(x, r, "SELECT", redisCommand(x->rc, "SELECT %d", x->url.db));
        if (y == NULL)
            return NULL;
        freeReplyObject(y);
    }
    if (x->url.kind == REDIS_SENTINEL && resolve_check_master(x->rc, err, sizeof(err)) < 0) {
        take_msg(r, &x->env, "%s", err);
        env_fail(&x->env); /* the next try asks the sentinels again */
        return NULL;
    }
    x->env.backoff_ms = 0;
    return x->rc;
}

/*
 * A Sentinel environment found its pool dry: when the sentinels now name
 * another primary, close the connection (not a failure: no back-off), so
 * the next take goes there.
 */
static void dry_recheck(struct redis_env *x, const struct idpool_options *o)
{
    char host[256], err[1024];
    int port;

    if (x->url.kind != REDIS_SENTINEL || clock_ms() - x->asked_ms < DRY_RECHECK_MS)
        return;
    x->asked_ms = clock_ms();
    if (resolve_primary(&x->sent, o->io_timeout_ms, host, sizeof(host), &port, err, sizeof(err)) ==
            0 &&
        (port != x->port || strcmp(host, x->host) != 0))
        env_close(&x->env);
}

enum take_outcome redis_take_reply(const struct env *e, const char *node, const struct take_req *q,
                                   const struct redisReply *y, struct take_result *r)
{
    const char *sep = node ? ": " : "";
    enum take_outcome out;

    node = node ? node : "";
    if (y->type == REDIS_REPLY_ARRAY) {
        r->ids = malloc((y->elements ? y->elements : 1) * sizeof(*r->ids));
        if (r->ids)
            r->n = takereply_ids(y, r->ids, NULL, NULL);
        out = r->n ? T_IDS : T_DRY;
        if (out == T_DRY)
            take_msg(r, e, "%s%sthe pool is empty", node, sep);
    } else if (y->type == REDIS_REPLY_ERROR) {
        out = env_refusal(y->str, q->count, r);
        take_msg(r, e, "%s%s%s", node, sep, y->str);
    } else {
        out = T_DOWN;
        take_msg(r, e, "%s%sunexpected reply type %d to idpool_take", node, sep, y->type);
    }
    return out;
}

static enum take_outcome redis_take(struct env *e, const struct take_req *q, struct take_result *r)
{
    struct redis_env *x = redis_of(e);
    redisContext *rc = redis_conn(x, q->o, r);
    redisReply *y;
    enum take_outcome out;

    if (rc == NULL)
        return T_DOWN;
    y = redisCommand(rc, "FCALL idpool_take 2 %s %s %u", q->k_pool, q->k_meta, q->count);
    if (y == NULL) {
        /* Lost: the IDs it may have popped are a gap, never asked for again. */
        take_msg(r, e, "%s", rc->errstr);
        env_fail(e);
        return T_DOWN;
    }
    out = redis_take_reply(e, NULL, q, y, r);
    /*
     * An error not ours (a missing library, READONLY from a demoted
     * primary, NOREPLICAS, ...) or a reply that makes no sense: closed; a
     * Sentinel environment asks the sentinels again at the next try.
     */
    if (out == T_DOWN)
        env_fail(e);
    else if (out == T_DRY)
        dry_recheck(x, q->o);
    freeReplyObject(y);
    return out;
}

static const char *const redis_schemes[] = {"redis://", "redis-sentinel://", NULL};

const struct env_ops redis_env_ops = {
    .schemes = redis_schemes,
    .usage = "redis://[[user]:password@]host[:port][/db] or "
             "redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master",
    .open = redis_open,
    .take = redis_take,
    .connected = redis_connected,
    .close = redis_close,
    .free = redis_free,
};
