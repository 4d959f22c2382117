#include "env.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "url.h"

static pthread_mutex_t tls_mu = PTHREAD_MUTEX_INITIALIZER;

void env_tls_lock(void)
{
    pthread_mutex_lock(&tls_mu);
}

void env_tls_unlock(void)
{
    pthread_mutex_unlock(&tls_mu);
}

#define BACKOFF_MIN_MS 100  /* a failed environment is not tried again before this */
#define BACKOFF_MAX_MS 2000 /* ... doubling up to this */

/* The transports, by URL scheme: a new kind of environment is a row here and its file. */
static const struct env_ops *const transports[] = {
    &redis_env_ops,
    &cluster_env_ops,
    &issuer_env_ops,
};
#define NTRANSPORTS (sizeof(transports) / sizeof(transports[0]))

/* The URL forms of every transport ("redis://... or http[s]://..."), for messages. */
static void usage(char *buf, size_t len)
{
    size_t n = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < NTRANSPORTS && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? " or " : "", transports[i]->usage);
}

struct env *env_new(const char *url, char *err, size_t errlen)
{
    char forms[256];
    const char *sep;

    for (size_t i = 0; i < NTRANSPORTS; i++)
        for (const char *const *s = transports[i]->schemes; *s; s++)
            if (strncasecmp(url, *s, strlen(*s)) == 0)
                return transports[i]->open(url, err, errlen);
    usage(forms, sizeof(forms));
    sep = strstr(url, "://");
    if (sep && sep - url <= 16)
        snprintf(err, errlen, "unsupported scheme '%.*s://', expected %s", (int)(sep - url), url,
                 forms);
    else
        snprintf(err, errlen, "not an environment URL, expected %s", forms);
    return NULL;
}

void env_base(struct env *e, const struct env_ops *ops, const char *host, int port)
{
    e->ops = ops;
    e->sock = -1;
    hostport_str(e->name, sizeof(e->name), host, port);
}

void env_close(struct env *e)
{
    env_sock(e, -1); /* before the socket is closed: a child never closes a reused number */
    e->ops->close(e);
}

void env_free(struct env *e)
{
    if (e == NULL)
        return;
    env_close(e);
    e->ops->free(e);
}

uint64_t env_retry_at(const struct env *e, const char *key)
{
    if (e->ops->retry_at)
        return e->ops->retry_at(e, key);
    return e->ops->connected(e) ? 0 : e->down_until_ms;
}

enum take_outcome env_take(struct env *e, const struct take_req *q, uint64_t now,
                           struct take_result *r)
{
    uint64_t at = env_retry_at(e, q->k_pool);

    memset(r, 0, sizeof(*r));
    if (now < at) {
        r->skipped = 1;
        take_msg(r, e, "down, next try in %llu ms", (unsigned long long)(at - now));
        return T_DOWN;
    }
    return e->ops->take(e, q, r);
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
    uint64_t now = clock_ms();

    env_close(e);
    e->backoff_ms = e->backoff_ms ? e->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (e->backoff_ms > BACKOFF_MAX_MS)
        e->backoff_ms = BACKOFF_MAX_MS;
    e->down_until_ms = now + e->backoff_ms;
}

enum take_outcome env_refusal(const char *s, unsigned count, struct take_result *r)
{
    enum take_refusal why = takereply_parse(s, NULL);
    enum take_outcome o = takereply_outcome(why);

    if (o == T_EPOCH || o == T_RATE)
        r->hint_ms = takereply_wait_ms(why, s);
    else if (o == T_LIMIT)
        r->limit = takereply_limit(s, count);
    return o;
}
