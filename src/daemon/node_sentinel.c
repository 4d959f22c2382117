/*
 * node_sentinel — the node map of redis-sentinel://: one node, on the
 * primary that the sentinels name, found as Redis' guide for Sentinel
 * clients says:
 *
 *   - the sentinels are asked in turn, each bounded by a short timeout; the
 *     one that answers moves to the front, and every 30 s the ones it knows
 *     (SENTINEL sentinels) join the list;
 *   - SENTINEL get-master-addr-by-name gives the primary's address; the
 *     node's connections then confirm on their own connection, before any
 *     write or validation, that the server is a primary (rds.c's INFO
 *     handshake refuses a replica);
 *   - every reconnect asks again (a connection lost at t waits for an
 *     answer to a question asked at or after t), and so does a READONLY
 *     reply or a failed role check, which both drop the connection;
 *   - the sentinels are also asked every second while all is well: when
 *     they name another primary than the one connected (a failover the
 *     connections did not feel, or an old primary cut off but still a
 *     master), the connections move to it;
 *   - +switch-master (pub/sub on the first sentinel) asks again at once; it
 *     is a hint only, the answer always comes from get-master-addr-by-name.
 *
 * One question is in flight at a time for the whole map, so that the
 * node's three connections (and their reconnects) never storm the
 * sentinels. Nothing here writes to Redis: what the node does with the
 * address is rds.c's (handshake, validation, epoch).
 */
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>

#include "clock.h"
#include "dns.h"
#include "log.h"
#include "node_int.h"
#include "rds.h"
#include "sentinel.h"
#include "status.h"

#define ATTEMPT_MIN_MS 100   /* one sentinel's time to answer, at least */
#define ATTEMPT_MAX_MS 500   /* and at most (then the next one is asked) */
#define POLL_MS        1000  /* asked again while all is well */
#define RETRY_MIN_MS   100   /* after no sentinel answered: backoff from */
#define RETRY_MAX_MS   1000  /* to */
#define REFRESH_MS     30000 /* SENTINEL sentinels merged at most this often */

struct smap {
    struct nodemap *map;
    struct node *node;
    struct sentinel_set set; /* in the order to ask them */
    char *master;            /* the primary's name */
    char *user, *password;   /* the sentinels' own (the URL's sentinel_user/_password) */
    int attempt_ms;

    /* the question: one at a time */
    redisAsyncContext *ac;    /* to set.a[tried]; kept open to set.a[0] after an answer */
    char ip[DNS_IP_MAX];      /* the address ac connects to (set.a[tried]'s, looked up) */
    struct dns_req *dns;      /* set.a[tried]'s host name being looked up, or NULL */
    int asking;               /* a question is in flight */
    size_t tried;             /* sentinels that failed this question */
    uint64_t asked_ms;        /* when this question was asked */
    uint64_t need_ms;         /* a connection waits for an answer asked at or after this */
    struct event *attempt_ev; /* one sentinel's timeout */
    struct event *next_ev;    /* the next question (poll, or retry) */
    int retry_ms;
    char why[256]; /* the last sentinel's failure */
    int failures;  /* questions in a row that no sentinel answered */

    /* the answer */
    char host[256];
    int port;
    uint64_t answer_ms; /* asked_ms of the question answered; 0: no answer yet */
    uint64_t refreshed_ms;

    redisAsyncContext *sub; /* SUBSCRIBE +switch-master on a sentinel; NULL: none */

    uint64_t failovers; /* answers naming another primary than the one before */
    uint64_t errors;    /* questions to one sentinel that failed */
};

static void ask(struct smap *s);
static void attempt(struct smap *s);

static void schedule_next(struct smap *s, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    evtimer_add(s->next_ev, &tv);
}

/* The question failed on set.a[tried]: ask the next sentinel. */
static void attempt_failed(struct smap *s, const char *fmt, const char *what)
{
    char hp[HOSTPORT_STR_MAX];

    snprintf(s->why, sizeof(s->why), "sentinel %s: ",
             hostport_str(hp, sizeof(hp), s->set.a[s->tried].host, s->set.a[s->tried].port));
    snprintf(s->why + strlen(s->why), sizeof(s->why) - strlen(s->why), fmt, what);
    evtimer_del(s->attempt_ev);
    dns_cancel(s->dns);
    s->dns = NULL;
    node_control_close(&s->ac);
    s->errors++;
    s->tried++;
    attempt(s);
}

static void on_attempt_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct smap *s = arg;
    char ms[16];

    (void)fd;
    (void)what;
    snprintf(ms, sizeof(ms), "%d", s->attempt_ms);
    if (s->asking)
        attempt_failed(s, "no answer within %s ms", ms);
}

static void on_next(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ask(arg);
}

/* A message on +switch-master: when about our primary, ask at once (a hint only). */
static void on_switch(redisAsyncContext *ac, void *reply, void *arg)
{
    struct smap *s = arg;
    const redisReply *m = reply;
    char host[256], hp[HOSTPORT_STR_MAX];
    int port;

    if (ac != s->sub || !m || m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
        m->element[0]->type != REDIS_REPLY_STRING || strcmp(m->element[0]->str, "message") != 0 ||
        m->element[2]->type != REDIS_REPLY_STRING ||
        sentinel_switch_msg(m->element[2]->str, s->master, host, sizeof(host), &port) != 0)
        return;
    log_info("redis: +switch-master: the primary of '%s' moved to %s; asking the sentinels",
             s->master, hostport_str(hp, sizeof(hp), host, port));
    s->need_ms = clock_ms();
    ask(s);
}

static redisAsyncContext *sentinel_connect(struct smap *s, const char *ip, int port);

/* Listen to +switch-master on the sentinel that answered last (at s->ip: set.a[0] now). */
static void subscribe(struct smap *s)
{
    if (s->sub || !(s->sub = sentinel_connect(s, s->ip, s->set.a[0].port)))
        return;
    if (redisAsyncCommand(s->sub, on_switch, s, "SUBSCRIBE +switch-master") != REDIS_OK)
        node_control_close(&s->sub);
}

/* The answer of the sentinel at set.a[tried]: the connections go there. */
static void answered(struct smap *s, const char *host, int port)
{
    char hp[HOSTPORT_STR_MAX], was[HOSTPORT_STR_MAX], from[HOSTPORT_STR_MAX];
    int moved = s->answer_ms && (port != s->port || strcmp(host, s->host) != 0);
    struct node *n = s->node;

    evtimer_del(s->attempt_ev);
    hostport_str(from, sizeof(from), s->set.a[s->tried].host, s->set.a[s->tried].port);
    sentinel_set_promote(&s->set, s->tried);
    if (moved || !s->answer_ms || s->failures)
        log_info("redis: the sentinels name %s as the primary of '%s'%s%s%s (asked %s)",
                 hostport_str(hp, sizeof(hp), host, port), s->master, moved ? " (it was " : "",
                 moved ? hostport_str(was, sizeof(was), s->host, s->port) : "", moved ? ")" : "",
                 from);
    s->failovers += moved;
    snprintf(s->host, sizeof(s->host), "%s", host);
    s->port = port;
    hostport_str(n->addr, sizeof(n->addr), host, port);
    s->answer_ms = s->asked_ms;
    s->asking = 0;
    s->tried = 0;
    s->failures = 0;
    s->retry_ms = RETRY_MIN_MS;
    rds_retarget(n->main);
    rds_retarget(n->push);
    if (n->api)
        rds_retarget(n->api);
    subscribe(s);
    /* a connection lost while this question was out needs a newer answer */
    if (s->need_ms > s->answer_ms)
        ask(s);
    else
        schedule_next(s, POLL_MS);
}

static void on_master(redisAsyncContext *ac, void *reply, void *arg)
{
    struct smap *s = arg;
    char host[256];
    int port;

    if (ac != s->ac || !s->asking)
        return;
    switch (sentinel_master_reply(reply, host, sizeof(host), &port)) {
    case SENTINEL_ADDR:
        answered(s, host, port);
        break;
    case SENTINEL_UNKNOWN:
        attempt_failed(s, "does not know the master name '%s'", s->master);
        break;
    default:
        attempt_failed(s, "SENTINEL get-master-addr-by-name failed: %s",
                       reply && ((redisReply *)reply)->type == REDIS_REPLY_ERROR
                           ? ((redisReply *)reply)->str
                           : "unexpected reply");
        break;
    }
}

static void on_sentinels(redisAsyncContext *ac, void *reply, void *arg)
{
    struct smap *s = arg;
    size_t added;

    if (ac != s->ac || !reply)
        return;
    if ((added = sentinel_set_merge(&s->set, reply)) > 0)
        log_info("redis: %zu more sentinel%s of '%s' learnt (%zu known)", added,
                 added == 1 ? "" : "s", s->master, s->set.n);
}

static void on_ctx_connect(const redisAsyncContext *ac, int status)
{
    struct smap *s = ac->data;

    /* a failed connect: hiredis frees ac after this callback */
    if (status != REDIS_OK && ac == s->sub)
        s->sub = NULL; /* subscribed again after the next answer */
    if (status != REDIS_OK && ac == s->ac) {
        s->ac = NULL;
        if (s->asking)
            attempt_failed(s, "%s", ac->errstr[0] ? ac->errstr : "connect failed");
    }
}

static void on_ctx_disconnect(const redisAsyncContext *ac, int status)
{
    struct smap *s = ac->data;

    (void)status;
    if (ac == s->sub)
        s->sub = NULL;
    if (ac != s->ac)
        return; /* closed by us */
    s->ac = NULL;
    if (s->asking)
        attempt_failed(s, "%s", ac->errstr[0] ? ac->errstr : "the sentinel closed the connection");
}

/* A connection to a sentinel at ip (numeric), AUTH queued; NULL with s->why set. */
static redisAsyncContext *sentinel_connect(struct smap *s, const char *ip, int port)
{
    return node_control_connect(s->map, ip, port, s->user, s->password, on_ctx_connect,
                                on_ctx_disconnect, s, s->why, sizeof(s->why));
}

static void ask_at(struct smap *s, const char *ip);

/* set.a[tried]'s address, looked up off the loop (dns.c). */
static void on_lookup(const char *ip, const char *err, void *arg)
{
    struct smap *s = arg;

    s->dns = NULL;
    if (!ip)
        attempt_failed(s, "%s", err);
    else
        ask_at(s, ip);
}

/* Ask set.a[tried], or give up this question when every sentinel failed. */
static void attempt(struct smap *s)
{
    char ip[DNS_IP_MAX], why[160];
    int rc;

    if (s->tried >= s->set.n) {
        s->asking = 0;
        s->tried = 0;
        if (s->failures++ == 0 || s->failures % 20 == 0)
            log_warn("redis: no sentinel answered where the primary of '%s' is (%zu asked; "
                     "last: %s); asking again with backoff",
                     s->master, s->set.n, s->why);
        schedule_next(s, s->retry_ms);
        s->retry_ms = s->retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : s->retry_ms * 2;
        return;
    }
    if (s->ac) { /* open to set.a[0] since its last answer */
        ask_at(s, NULL);
        return;
    }
    rc = node_control_lookup(s->map, s->set.a[s->tried].host, on_lookup, s, &s->dns, s->attempt_ev,
                             s->attempt_ms, ip, why, sizeof(why));
    if (rc == 0)
        ask_at(s, ip);
    else if (rc < 0)
        attempt_failed(s, "%s", why);
}

/* Ask set.a[tried], connecting to it at ip first (NULL: s->ac is open to it). */
static void ask_at(struct smap *s, const char *ip)
{
    struct timeval tv = {s->attempt_ms / 1000, (s->attempt_ms % 1000) * 1000};
    uint64_t now = clock_ms();

    if (ip) {
        snprintf(s->ip, sizeof(s->ip), "%s", ip);
        if (!(s->ac = sentinel_connect(s, ip, s->set.a[s->tried].port))) {
            char why[sizeof(s->why)];
            memcpy(why, s->why, sizeof(why));
            attempt_failed(s, "%s", why);
            return;
        }
    }
    evtimer_add(s->attempt_ev, &tv);
    if (redisAsyncCommand(s->ac, on_master, s, "SENTINEL get-master-addr-by-name %s", s->master) !=
        REDIS_OK) {
        attempt_failed(s, "%s", "cannot send SENTINEL get-master-addr-by-name");
        return;
    }
    if (now - s->refreshed_ms >= REFRESH_MS &&
        redisAsyncCommand(s->ac, on_sentinels, s, "SENTINEL sentinels %s", s->master) == REDIS_OK)
        s->refreshed_ms = now;
}

/* Ask the sentinels where the primary is (unless a question is out already). */
static void ask(struct smap *s)
{
    if (s->asking)
        return;
    evtimer_del(s->next_ev);
    s->asking = 1;
    s->tried = 0;
    s->asked_ms = clock_ms();
    attempt(s);
}

/* rds_target_fn of the node's connections. */
static int smap_target(struct rds *r, uint64_t since_ms, const char **host, int *port, void *arg)
{
    struct smap *s = arg;

    (void)r;
    if (s->answer_ms && s->answer_ms >= since_ms) {
        *host = s->host;
        *port = s->port;
        return 0;
    }
    if (since_ms > s->need_ms)
        s->need_ms = since_ms;
    ask(s);
    return 1;
}

static int smap_open(struct nodemap *m, const struct config *cfg)
{
    struct smap *s = calloc(1, sizeof(*s));
    const struct redis_url *u = &cfg->redis;
    int t = cfg->redis_timeout_ms;

    if (s == NULL)
        return -1;
    m->impl = s;
    s->map = m;
    if (sentinel_set_init(&s->set, u) != 0 || s->set.n == 0)
        return -1;
    s->master = strdup(u->master);
    s->user = u->sentinel_user ? strdup(u->sentinel_user) : NULL;
    s->password = u->sentinel_password ? strdup(u->sentinel_password) : NULL;
    s->attempt_ms = t < ATTEMPT_MIN_MS ? ATTEMPT_MIN_MS : t > ATTEMPT_MAX_MS ? ATTEMPT_MAX_MS : t;
    s->retry_ms = RETRY_MIN_MS;
    s->attempt_ev = evtimer_new(m->base, on_attempt_timeout, s);
    s->next_ev = evtimer_new(m->base, on_next, s);
    if (!s->master || (u->sentinel_user && !s->user) || (u->sentinel_password && !s->password) ||
        !s->attempt_ev || !s->next_ev || !(s->node = node_add(m, cfg)))
        return -1;
    rds_set_target(s->node->main, smap_target, s);
    rds_set_target(s->node->push, smap_target, s);
    if (s->node->api)
        rds_set_target(s->node->api, smap_target, s);
    return 0;
}

static struct node *smap_for_key(struct nodemap *m, const char *key)
{
    (void)key;
    return m->nodes[0];
}

static void smap_view(const struct nodemap *m, struct daemon_view *out)
{
    const struct smap *s = m->impl;

    out->sentinel = 1;
    out->sentinel_up = s->answer_ms != 0 && s->failures == 0;
    out->redis_master = s->master;
    if (s->answer_ms)
        hostport_str(out->redis_primary, sizeof(out->redis_primary), s->host, s->port);
    out->redis_failovers = s->failovers;
    out->sentinel_errors = s->errors;
}

static void smap_close(struct nodemap *m)
{
    struct smap *s = m->impl;

    if (s == NULL)
        return;
    s->asking = 0;
    dns_cancel(s->dns);
    s->dns = NULL;
    node_control_close(&s->ac);
    node_control_close(&s->sub);
    if (s->attempt_ev)
        event_free(s->attempt_ev);
    if (s->next_ev)
        event_free(s->next_ev);
    free(s->master);
    free(s->user);
    free(s->password);
    free(s);
    m->impl = NULL;
}

const struct nodemap_ops sentinel_map_ops = {
    .kind = REDIS_SENTINEL,
    .name = "sentinel",
    .open = smap_open,
    .for_key = smap_for_key,
    .view = smap_view,
    .close = smap_close,
};
