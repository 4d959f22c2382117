#include "resolve.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "clock.h"
#include "url.h"

int resolve_init(struct resolver *r, const struct redis_url *u, resolve_fd_fn *fd_fn, void *arg)
{
    memset(r, 0, sizeof(*r));
    if (sentinel_set_init(&r->set, u) < 0)
        return -1;
    r->url = u;
    r->fd_fn = fd_fn;
    r->fd_arg = arg;
    return 0;
}

/* Milliseconds left before until (CLOCK_MONOTONIC ms), 0 when none. */
static int left_ms(uint64_t until)
{
    uint64_t now = clock_ms();

    return now >= until ? 0 : (int)(until - now);
}

static struct timeval tv_of(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    return tv;
}

/*
 * One command to a sentinel within its bound (until): the reply, or NULL
 * with err saying why (an error reply is freed and reported too).
 */
static redisReply *ask(redisContext *c, uint64_t until, char *err, size_t errlen, const char *what,
                       const char *fmt, ...)
{
    int ms = left_ms(until);
    redisReply *y;
    va_list ap;

    if (ms == 0 || redisSetTimeout(c, tv_of(ms)) != REDIS_OK) {
        snprintf(err, errlen, "%s: out of time", what);
        return NULL;
    }
    va_start(ap, fmt);
    y = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (y == NULL) {
        snprintf(err, errlen, "%s failed: %s", what, c->errstr[0] ? c->errstr : "no reply");
        return NULL;
    }
    if (y->type == REDIS_REPLY_ERROR) {
        /* Redis' error texts never hold the password that was sent. */
        snprintf(err, errlen, "%s refused: %.160s%s", what, y->str,
                 strncmp(y->str, "NOAUTH", 6) == 0 ? " (set sentinel_password)" : "");
        freeReplyObject(y);
        return NULL;
    }
    return y;
}

static void sentinel_close(struct resolver *r, redisContext *c)
{
    if (r->fd_fn)
        r->fd_fn(r->fd_arg, -1); /* before the close: see env.h's env_forget */
    redisFree(c);
}

/* Merge SENTINEL sentinels from c when due; a failure only waits for the next time. */
static void refresh(struct resolver *r, redisContext *c, uint64_t until)
{
    uint64_t now = clock_ms();
    char ignored[64];
    redisReply *y;

    if (r->refreshed_ms && now - r->refreshed_ms < RESOLVE_REFRESH_MS)
        return;
    r->refreshed_ms = now ? now : 1;
    y = ask(c, until, ignored, sizeof(ignored), "SENTINEL sentinels", "SENTINEL sentinels %s",
            r->url->master);
    if (y)
        sentinel_set_merge(&r->set, y);
    freeReplyObject(y);
}

/*
 * Ask sentinel a (within until) for the master's address: 0, or -1 with
 * err naming a and what went wrong.
 */
static int ask_one(struct resolver *r, const struct sentinel_addr *a, uint64_t until, char *host,
                   size_t hostlen, int *port, char *err, size_t errlen)
{
    const struct redis_url *u = r->url;
    char where[HOSTPORT_STR_MAX], why[224];
    redisContext *c;
    redisReply *y;
    int rc = -1;

    hostport_str(where, sizeof(where), a->host, a->port);
    c = redisConnectWithTimeout(a->host, a->port, tv_of(left_ms(until)));
    if (c == NULL) {
        snprintf(err, errlen, "%s: out of memory", where);
        return -1;
    }
    if (c->fd >= 0 && r->fd_fn)
        r->fd_fn(r->fd_arg, c->fd);
    if (c->err) {
        snprintf(err, errlen, "%s: cannot connect: %s", where, c->errstr);
        goto done;
    }
    if (u->sentinel_password) {
        y = u->sentinel_user
                ? ask(c, until, why, sizeof(why), "AUTH", "AUTH %s %s", u->sentinel_user,
                      u->sentinel_password)
                : ask(c, until, why, sizeof(why), "AUTH", "AUTH %s", u->sentinel_password);
        if (y == NULL) {
            snprintf(err, errlen, "%s: %s", where, why);
            goto done;
        }
        freeReplyObject(y);
    }
    y = ask(c, until, why, sizeof(why), "SENTINEL get-master-addr-by-name",
            "SENTINEL get-master-addr-by-name %s", u->master);
    if (y == NULL) {
        snprintf(err, errlen, "%s: %s", where, why);
        goto done;
    }
    switch (sentinel_master_reply(y, host, hostlen, port)) {
    case SENTINEL_ADDR:
        rc = 0;
        break;
    case SENTINEL_UNKNOWN:
        snprintf(err, errlen, "%s does not know a master named '%s'", where, u->master);
        break;
    case SENTINEL_INVALID:
        snprintf(err, errlen, "%s: SENTINEL get-master-addr-by-name: a reply that names no address",
                 where);
        break;
    }
    freeReplyObject(y);
    if (rc == 0)
        refresh(r, c, until);
done:
    sentinel_close(r, c);
    return rc;
}

int resolve_primary(struct resolver *r, int timeout_ms, char *host, size_t hostlen, int *port,
                    char *err, size_t errlen)
{
    uint64_t start = clock_ms(), end = start + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    char tried[512] = "", last[768] = "no time to ask any";
    size_t n = 0;

    for (size_t i = 0; i < r->set.n; i++) {
        const struct sentinel_addr *a = &r->set.a[i];
        int ms = left_ms(end);
        char where[HOSTPORT_STR_MAX];

        if (ms == 0)
            break;
        if (ms > RESOLVE_SENTINEL_MS)
            ms = RESOLVE_SENTINEL_MS;
        if (n < sizeof(tried))
            n += (size_t)snprintf(tried + n, sizeof(tried) - n, "%s%s", n ? ", " : "",
                                  hostport_str(where, sizeof(where), a->host, a->port));
        if (ask_one(r, a, clock_ms() + (uint64_t)ms, host, hostlen, port, last, sizeof(last)) ==
            0) {
            sentinel_set_promote(&r->set, i);
            return 0;
        }
    }
    snprintf(err, errlen, "no sentinel named the master '%s' (tried %s): %s", r->url->master,
             n ? tried : "none", last);
    return -1;
}

int resolve_check_master(struct redisContext *c, char *err, size_t errlen)
{
    redisReply *y = redisCommand(c, "ROLE");
    enum sentinel_role role;

    if (y == NULL) {
        snprintf(err, errlen, "ROLE failed: %s", c->errstr[0] ? c->errstr : "no reply");
        return -1;
    }
    if (y->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "ROLE refused: %.200s", y->str);
        freeReplyObject(y);
        return -1;
    }
    role = sentinel_role_reply(y);
    freeReplyObject(y);
    if (role == ROLE_MASTER)
        return 0;
    snprintf(err, errlen, "ROLE says %s, not master", sentinel_role_name(role));
    return -1;
}
