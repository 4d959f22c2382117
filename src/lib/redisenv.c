/*
 * redisenv — libidpool's takes from a Redis: FCALL idpool_take on a blocking
 * hiredis connection per environment, opened as needed (AUTH, SELECT) with
 * io_timeout_ms for connect and every command.
 */
#include "env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* One command's reply, or NULL with the connection failed: r->msg says why. */
static redisReply *command_ok(struct env *e, struct take_result *r, const char *what,
                              redisReply *reply)
{
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        take_msg(r, e, "%s failed: %s", what,
                 reply              ? reply->str
                 : e->rc->errstr[0] ? e->rc->errstr
                                    : "no reply");
        freeReplyObject(reply);
        env_fail(e);
        return NULL;
    }
    return reply;
}

/* The Redis connection, (re)opened as needed; NULL while it is down. */
static redisContext *redis_conn(struct env *e, const struct idpool_options *o, uint64_t now,
                                struct take_result *r)
{
    struct timeval tv = {o->io_timeout_ms / 1000, (o->io_timeout_ms % 1000) * 1000};
    redisReply *x;

    if (e->rc)
        return e->rc;
    if (now < e->down_until_ms) {
        r->skipped = 1;
        take_msg(r, e, "down, next try in %llu ms", (unsigned long long)(e->down_until_ms - now));
        return NULL;
    }
    e->rc = redisConnectWithTimeout(e->rurl.host, e->rurl.port, tv);
    if (e->rc && e->rc->fd >= 0)
        env_sock(e, e->rc->fd);
    if (e->rc == NULL || e->rc->err || redisSetTimeout(e->rc, tv) != REDIS_OK) {
        take_msg(r, e, "cannot connect: %s", e->rc ? e->rc->errstr : "out of memory");
        env_fail(e);
        return NULL;
    }
    if (e->rurl.password) {
        x = e->rurl.user ? redisCommand(e->rc, "AUTH %s %s", e->rurl.user, e->rurl.password)
                         : redisCommand(e->rc, "AUTH %s", e->rurl.password);
        if ((x = command_ok(e, r, "AUTH", x)) == NULL)
            return NULL;
        freeReplyObject(x);
    }
    if (e->rurl.db) {
        x = command_ok(e, r, "SELECT", redisCommand(e->rc, "SELECT %d", e->rurl.db));
        if (x == NULL)
            return NULL;
        freeReplyObject(x);
    }
    e->backoff_ms = 0;
    return e->rc;
}

enum take_outcome redis_take(struct env *e, const struct idpool_options *o, const char *k_pool,
                             const char *k_meta, unsigned count, uint64_t now,
                             struct take_result *r)
{
    redisContext *rc = redis_conn(e, o, now, r);
    redisReply *x;
    enum take_outcome out;

    if (rc == NULL)
        return T_DOWN;
    x = redisCommand(rc, "FCALL idpool_take 2 %s %s %u", k_pool, k_meta, count);
    if (x == NULL) {
        take_msg(r, e, "%s", rc->errstr);
        env_fail(e);
        return T_DOWN;
    }
    if (x->type == REDIS_REPLY_ARRAY) {
        r->ids = malloc((x->elements ? x->elements : 1) * sizeof(*r->ids));
        if (r->ids)
            r->n = takereply_ids(x, r->ids, NULL, NULL);
        out = r->n ? T_IDS : T_DRY;
        if (out == T_DRY)
            take_msg(r, e, "the pool is empty");
    } else if (x->type == REDIS_REPLY_ERROR) {
        /* Not ours (a missing library, a read-only replica, ...): T_DOWN. */
        out = env_refusal(x->str, count, r);
        take_msg(r, e, "%s", x->str);
        if (out == T_DOWN)
            env_fail(e);
    } else {
        out = T_DOWN;
        take_msg(r, e, "unexpected reply type %d to idpool_take", x->type);
        env_fail(e);
    }
    freeReplyObject(x);
    return out;
}
