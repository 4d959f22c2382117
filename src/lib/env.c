#include "env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include "text.h"

#define BACKOFF_MIN_MS 100  /* a failed environment is not tried again before this */
#define BACKOFF_MAX_MS 2000 /* ... doubling up to this */
#define ENV_URLS                                                                                   \
    "redis://[[user]:password@]host[:port][/db] or http[s]://TOKEN@host[:port][/prefix]"

int env_init(struct env *e, const char *url, char *err, size_t errlen)
{
    memset(e, 0, sizeof(*e));
    e->fd = -1;
    if (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0) {
        e->http = 1;
        if (issuer_url_parse(url, &e->iurl, err, errlen) < 0)
            return -1;
        if (e->iurl.token == NULL) {
            issuer_url_free(&e->iurl);
            snprintf(err, errlen, "an issuer needs a token: http[s]://TOKEN@host[:port]");
            return -1;
        }
        hostport_str(e->name, sizeof(e->name), e->iurl.host, e->iurl.port);
        return 0;
    }
    if (strncasecmp(url, "redis://", 8) != 0) {
        const char *sep = strstr(url, "://");
        if (sep && sep - url <= 16)
            snprintf(err, errlen, "unsupported scheme '%.*s://', expected %s", (int)(sep - url),
                     url, ENV_URLS);
        else
            snprintf(err, errlen, "not an environment URL, expected %s", ENV_URLS);
        return -1;
    }
    if (redis_url_parse(url, &e->rurl, err, errlen) < 0)
        return -1;
    hostport_str(e->name, sizeof(e->name), e->rurl.host, e->rurl.port);
    return 0;
}

void env_free(struct env *e)
{
    if (e->rc)
        redisFree(e->rc);
    issuer_close(e);
    if (e->tls)
        SSL_CTX_free(e->tls);
    free(e->buf);
    redis_url_free(&e->rurl);
    issuer_url_free(&e->iurl);
    memset(e, 0, sizeof(*e));
    e->fd = -1;
}

void take_msg(struct take_result *r, const struct env *e, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(r->msg, sizeof(r->msg), "%.200s: ", e->name);

    va_start(ap, fmt);
    vsnprintf(r->msg + n, sizeof(r->msg) - (size_t)n, fmt, ap);
    va_end(ap);
}

void env_fail(struct env *e)
{
    struct timespec ts;
    uint64_t now;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    if (e->rc) {
        redisFree(e->rc);
        e->rc = NULL;
    }
    issuer_close(e);
    e->backoff_ms = e->backoff_ms ? e->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (e->backoff_ms > BACKOFF_MAX_MS)
        e->backoff_ms = BACKOFF_MAX_MS;
    e->down_until_ms = now + e->backoff_ms;
}

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

enum take_outcome env_refusal(const char *s, unsigned count, struct take_result *r)
{
    if (strncmp(s, "IDPOOL_EPOCH", 12) == 0) {
        r->hint_ms = (uint64_t)text_retry_ms(s, 200);
        return T_EPOCH;
    }
    if (strncmp(s, "IDPOOL_RATE", 11) == 0) {
        r->hint_ms = (uint64_t)text_retry_ms(s, 1000);
        return T_RATE;
    }
    if (strncmp(s, "IDPOOL_LIMIT", 12) == 0) {
        const char *p = strstr(s, "max_size_per_times ");
        r->limit = p ? (unsigned)strtoul(p + 19, NULL, 10) : count / 2;
        return T_LIMIT;
    }
    if (strncmp(s, "IDPOOL_NOAPP", 12) == 0)
        return T_NOAPP;
    return T_DOWN;
}

static enum take_outcome redis_take(struct env *e, const struct idpool_options *o,
                                    const char *k_pool, const char *k_meta, unsigned count,
                                    uint64_t now, struct take_result *r)
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
        for (size_t i = 0; r->ids && i < x->elements; i++) {
            const redisReply *y = x->element[i];
            char *end;
            unsigned long long v;

            if (y->type != REDIS_REPLY_STRING)
                continue;
            errno = 0;
            v = strtoull(y->str, &end, 10);
            if (end != y->str && *end == '\0' && errno == 0)
                r->ids[r->n++] = v;
        }
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

enum take_outcome env_take(struct env *e, const struct idpool_options *o, const char *key,
                           const char *k_pool, const char *k_meta, unsigned count, uint64_t now,
                           struct take_result *r)
{
    memset(r, 0, sizeof(*r));
    if (e->http)
        return issuer_take(e, o, key, count, now, r);
    return redis_take(e, o, k_pool, k_meta, count, now, r);
}
