#include "env.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

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
#define ENV_URLS                                                                                   \
    "redis://[[user]:password@]host[:port][/db] or http[s]://TOKEN@host[:port][/prefix]"

int env_init(struct env *e, const char *url, char *err, size_t errlen)
{
    memset(e, 0, sizeof(*e));
    e->fd = -1;
    e->sock = -1;
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

void env_close(struct env *e)
{
    env_sock(e, -1); /* before the socket is closed: a child never closes a reused number */
    if (e->rc) {
        redisFree(e->rc);
        e->rc = NULL;
    }
    if (e->ssl) {
        env_tls_lock();
        SSL_free(e->ssl); /* no close_notify: the socket may be dead, and it would block */
        env_tls_unlock();
        e->ssl = NULL;
    }
    if (e->fd >= 0) {
        close(e->fd);
        e->fd = -1;
    }
}

void env_free(struct env *e)
{
    env_close(e);
    if (e->tls) {
        env_tls_lock();
        SSL_CTX_free(e->tls);
        env_tls_unlock();
    }
    free(e->buf);
    redis_url_free(&e->rurl);
    issuer_url_free(&e->iurl);
    memset(e, 0, sizeof(*e));
    e->fd = -1;
    e->sock = -1;
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
