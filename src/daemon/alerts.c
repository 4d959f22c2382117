#include "alerts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>
#include <event2/http.h>

#include "clock.h"
#include "log.h"
#include "node.h"
#include "rds.h"
#include "url.h"

#define HOOK_QUEUE_MAX   1000 /* events kept for the webhook; the oldest is dropped */
#define HOOK_ATTEMPTS    10   /* tries per event before it is given up */
#define HOOK_BACKOFF_MS  500  /* first retry delay, doubled per attempt */
#define HOOK_BACKOFF_MAX 60000
#define HOOK_TIMEOUT_S   5

/* One webhook delivery. */
struct hook_msg {
    char *body;       /* the JSON event */
    int attempts;     /* failed tries so far */
    uint64_t next_ms; /* not before this */
    struct hook_msg *next;
};

/* Who announced which alerts, per application: a resolution goes out from the
 * daemon that announced the firing even if Redis forgot it meanwhile. */
struct notified {
    char *app;
    unsigned mask; /* 1 << kind: announced here; 1 << (UNSYNCED + kind): and meta never
                      recorded the firing (idpool_alert failed), so its 'resolved' is stale */
};

#define UNSYNCED 16

struct alerts {
    struct event_base *base;
    struct nodemap *map; /* idpool_alert on the meta's node */
    char *instance;
    struct webhook_url hook; /* host NULL: no webhook */
    struct evhttp_connection *conn;
    struct hook_msg *head, *tail; /* FIFO; head is the one being delivered */
    unsigned queued;
    int in_flight;
    unsigned long dropped;
    struct event *hook_ev; /* retry timer */
    struct notified *notified;
    size_t nnotified;
};

/* Context of one idpool_alert call. */
struct emit_ctx {
    struct alerts *al;
    char *app;
    enum alert_kind kind;
    int firing;
    char *event; /* JSON */
    char *message;
    int quiet; /* already announced: only publish and record in meta */
};

static void hook_kick(struct alerts *al);

/* The entry of app, or -1. */
static ssize_t notified_find(const struct alerts *al, const char *app)
{
    for (size_t i = 0; i < al->nnotified; i++)
        if (strcmp(al->notified[i].app, app) == 0)
            return (ssize_t)i;
    return -1;
}

/*
 * Record that this daemon announced (set) or no longer has announced (!set)
 * alert kind of app. Entries whose mask drops to 0 are removed, so the list
 * holds only applications with an alert announced here and still firing.
 */
static void notified_bit(struct alerts *al, const char *app, unsigned bit, int set)
{
    ssize_t i = notified_find(al, app);

    if (i < 0) {
        struct notified *v;
        if (!set)
            return;
        v = realloc(al->notified, (al->nnotified + 1) * sizeof(*v));
        if (!v)
            return;
        al->notified = v;
        v[al->nnotified].app = strdup(app);
        v[al->nnotified].mask = 0;
        if (!v[al->nnotified].app)
            return;
        i = (ssize_t)al->nnotified++;
    }
    if (set)
        al->notified[i].mask |= 1u << bit;
    else
        al->notified[i].mask &= ~(1u << bit);
    if (al->notified[i].mask == 0) {
        free(al->notified[i].app);
        al->notified[i] = al->notified[--al->nnotified];
    }
}

static void notified_set(struct alerts *al, const char *app, enum alert_kind kind, int set)
{
    notified_bit(al, app, (unsigned)kind, set);
    if (!set)
        notified_bit(al, app, UNSYNCED + (unsigned)kind, 0);
}

static void rfc3339_now(char *buf, size_t len) /* len >= 64 */
{
    struct timeval tv;
    struct tm tm;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000));
}

/* {"alert","app","state","message","at","instance", ...extra}; heap string or NULL. */
static char *event_json(const struct alerts *al, const char *app, enum alert_kind kind, int firing,
                        const char *message, const char *extra_json)
{
    cJSON *ev = cJSON_CreateObject(), *extra = extra_json ? cJSON_Parse(extra_json) : NULL;
    char at[64];
    char *out = NULL;

    rfc3339_now(at, sizeof(at));
    if (!ev)
        goto done;
    cJSON_AddStringToObject(ev, "alert", alert_name(kind));
    cJSON_AddStringToObject(ev, "app", app);
    cJSON_AddStringToObject(ev, "state", firing ? "firing" : "resolved");
    cJSON_AddStringToObject(ev, "message", message);
    cJSON_AddStringToObject(ev, "at", at);
    cJSON_AddStringToObject(ev, "instance", al->instance);
    if (cJSON_IsObject(extra)) {
        cJSON *item = extra->child;
        while (item) {
            cJSON *next = item->next;
            if (!cJSON_HasObjectItem(ev, item->string))
                cJSON_AddItemToObject(ev, item->string, cJSON_DetachItemViaPointer(extra, item));
            item = next;
        }
    }
    out = cJSON_PrintUnformatted(ev);
done:
    cJSON_Delete(extra);
    cJSON_Delete(ev);
    return out;
}

/* --- webhook ---------------------------------------------------------------- */

static void hook_pop(struct alerts *al)
{
    struct hook_msg *m = al->head;

    al->head = m->next;
    if (!al->head)
        al->tail = NULL;
    al->queued--;
    free(m->body);
    free(m);
}

static void on_hook_done(struct evhttp_request *req, void *arg)
{
    char hp[HOSTPORT_STR_MAX];
    struct alerts *al = arg;
    struct hook_msg *m = al->head;
    int code = req ? evhttp_request_get_response_code(req) : 0;

    al->in_flight = 0;
    if (!m)
        return;
    if (code >= 200 && code < 300) {
        hook_pop(al);
    } else if (++m->attempts >= HOOK_ATTEMPTS) {
        log_error("alert webhook http://%s%.*s%s: giving up on an event after %d attempts "
                  "(last: %s %d)",
                  hostport_str(hp, sizeof(hp), al->hook.host, al->hook.port),
                  (int)strcspn(al->hook.path, "?"), al->hook.path,
                  strchr(al->hook.path, '?') ? "?***" : "", m->attempts,
                  code ? "HTTP" : "no response", code);
        al->dropped++;
        hook_pop(al);
    } else {
        uint64_t delay = (uint64_t)HOOK_BACKOFF_MS << (m->attempts - 1);
        if (delay > HOOK_BACKOFF_MAX)
            delay = HOOK_BACKOFF_MAX;
        if (m->attempts == 1)
            log_warn("alert webhook http://%s%.*s%s failed (%s %d); retrying with backoff",
                     hostport_str(hp, sizeof(hp), al->hook.host, al->hook.port),
                     (int)strcspn(al->hook.path, "?"), al->hook.path,
                     strchr(al->hook.path, '?') ? "?***" : "", code ? "HTTP" : "no response", code);
        m->next_ms = clock_ms() + delay;
    }
    hook_kick(al);
}

static void hook_send(struct alerts *al)
{
    struct hook_msg *m = al->head;
    struct evhttp_request *req;
    char host[300];

    if (!al->conn) {
        al->conn = evhttp_connection_base_new(al->base, NULL, al->hook.host,
                                              (unsigned short)al->hook.port);
        if (!al->conn)
            return;
        evhttp_connection_set_timeout(al->conn, HOOK_TIMEOUT_S);
    }
    req = evhttp_request_new(on_hook_done, al);
    if (!req)
        return;
    snprintf(host, sizeof(host), strchr(al->hook.host, ':') ? "[%s]:%d" : "%s:%d", al->hook.host,
             al->hook.port);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host", host);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evbuffer_add(evhttp_request_get_output_buffer(req), m->body, strlen(m->body));
    al->in_flight = 1;
    if (evhttp_make_request(al->conn, req, EVHTTP_REQ_POST, al->hook.path) != 0)
        al->in_flight = 0; /* libevent freed req; the timer retries */
}

/* Deliver the head of the queue now, or arm the timer for when it is due. */
static void hook_kick(struct alerts *al)
{
    uint64_t now = clock_ms();

    if (al->in_flight || !al->head)
        return;
    if (al->head->next_ms <= now) {
        hook_send(al);
        if (al->in_flight)
            return;
        al->head->next_ms = now + HOOK_BACKOFF_MS;
    }
    {
        uint64_t wait = al->head->next_ms - now;
        struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)(wait % 1000) * 1000};
        evtimer_add(al->hook_ev, &tv);
    }
}

static void on_hook_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hook_kick(arg);
}

static void hook_enqueue(struct alerts *al, const char *event)
{
    struct hook_msg *m;

    if (!al->hook.host)
        return;
    if (al->queued >= HOOK_QUEUE_MAX && al->head && al->head->next) {
        /* Keep the newest; never drop the head while it is in flight. */
        struct hook_msg *old = al->head->next;
        al->head->next = old->next;
        if (al->tail == old)
            al->tail = al->head;
        al->queued--;
        al->dropped++;
        free(old->body);
        free(old);
        log_warn("alert webhook: queue full (%d events), dropped the oldest", HOOK_QUEUE_MAX);
    }
    m = calloc(1, sizeof(*m));
    if (!m || !(m->body = strdup(event))) {
        free(m);
        return;
    }
    if (al->tail)
        al->tail->next = m;
    else
        al->head = m;
    al->tail = m;
    al->queued++;
    hook_kick(al);
}

/* --- emit ------------------------------------------------------------------- */

/* Log and webhook: what the announcing daemon does. */
static void deliver(struct alerts *al, const char *app, enum alert_kind kind, int firing,
                    const char *message, const char *event)
{
    if (firing)
        log_warn("alert %s firing app=%s: %s", alert_name(kind), app, message);
    else
        log_info("alert %s resolved app=%s: %s", alert_name(kind), app, message);
    notified_set(al, app, kind, firing);
    if (event)
        hook_enqueue(al, event);
}

/* Another instance announced the resolution of an alert we announced. */
static void forget(struct alerts *al, const char *app, enum alert_kind kind)
{
    notified_set(al, app, kind, 0);
}

static int has_bit(struct alerts *al, const char *app, unsigned bit)
{
    ssize_t i = notified_find(al, app);

    return i >= 0 && (al->notified[i].mask & (1u << bit));
}

static int was_notified(struct alerts *al, const char *app, enum alert_kind kind)
{
    return has_bit(al, app, (unsigned)kind);
}

static void emit_ctx_free(struct emit_ctx *c)
{
    free(c->app);
    free(c->event);
    free(c->message);
    free(c);
}

static void on_alert_reply(struct rds *r, redisReply *reply, void *arg)
{
    struct emit_ctx *c = arg;

    (void)r;
    if (c->quiet) {
        /* nothing more to announce */
    } else if (reply && reply->type == REDIS_REPLY_INTEGER) {
        /* 1: ours to announce; 0: another instance announced it. */
        if (reply->integer == 1)
            deliver(c->al, c->app, c->kind, c->firing, c->message, c->event);
        else if (!c->firing && has_bit(c->al, c->app, UNSYNCED + (unsigned)c->kind))
            deliver(c->al, c->app, c->kind, 0, c->message, c->event); /* meta never knew */
        else if (!c->firing)
            forget(c->al, c->app, c->kind);
    } else {
        /* No deduplication possible: announce it ourselves. */
        if (reply)
            log_warn("alert %s app=%s: idpool_alert failed: %s", alert_name(c->kind), c->app,
                     rds_errstr(reply));
        if (c->firing || was_notified(c->al, c->app, c->kind))
            deliver(c->al, c->app, c->kind, c->firing, c->message, c->event);
        if (c->firing)
            notified_bit(c->al, c->app, UNSYNCED + (unsigned)c->kind, 1);
    }
    emit_ctx_free(c);
}

static void emit(struct alerts *al, const char *app, const char *meta_key, enum alert_kind kind,
                 int firing, const char *message, const char *extra_json, int quiet)
{
    char *event = event_json(al, app, kind, firing, message, extra_json);
    struct node *n = meta_key ? nodemap_for_key(al->map, meta_key) : NULL;
    struct emit_ctx *c;

    if (n && node_ready(n) && (c = calloc(1, sizeof(*c)))) {
        c->al = al;
        c->kind = kind;
        c->firing = firing;
        c->quiet = quiet;
        c->app = strdup(app);
        c->message = strdup(message);
        c->event = event;
        if (c->app && c->message &&
            rds_command(n->main, on_alert_reply, c, "FCALL idpool_alert 1 %s %s %s %s %s", meta_key,
                        alert_name(kind), firing ? "firing" : "resolved", message,
                        extra_json ? extra_json : "") == 0)
            return;
        c->event = NULL;
        emit_ctx_free(c);
    }
    if (!quiet && (firing || was_notified(al, app, kind)))
        deliver(al, app, kind, firing, message, event);
    free(event);
}

void alerts_emit(struct alerts *al, const char *app, const char *meta_key, enum alert_kind kind,
                 int firing, const char *message, const char *extra_json)
{
    emit(al, app, meta_key, kind, firing, message, extra_json, 0);
}

void alerts_sync(struct alerts *al, const char *app, const char *meta_key, enum alert_kind kind,
                 const char *message)
{
    emit(al, app, meta_key, kind, 1, message, NULL, 1);
}

unsigned alerts_webhook_pending(const struct alerts *al)
{
    return al->queued;
}

unsigned long alerts_webhook_dropped(const struct alerts *al)
{
    return al->dropped;
}

struct alerts *alerts_new(struct event_base *base, const struct config *cfg, struct nodemap *map)
{
    struct alerts *al = calloc(1, sizeof(*al));

    if (!al)
        return NULL;
    al->base = base;
    al->map = map;
    al->instance = strdup(cfg->instance);
    al->hook_ev = evtimer_new(base, on_hook_timer, al);
    if (cfg->webhook.host) {
        al->hook.host = strdup(cfg->webhook.host);
        al->hook.path = strdup(cfg->webhook.path);
        al->hook.port = cfg->webhook.port;
    }
    if (!al->instance || !al->hook_ev ||
        (cfg->webhook.host && (!al->hook.host || !al->hook.path))) {
        alerts_free(al);
        return NULL;
    }
    return al;
}

void alerts_free(struct alerts *al)
{
    if (!al)
        return;
    if (al->queued)
        log_warn("alert webhook: %u undelivered events dropped at exit", al->queued);
    while (al->head)
        hook_pop(al);
    if (al->conn)
        evhttp_connection_free(al->conn);
    if (al->hook_ev)
        event_free(al->hook_ev);
    for (size_t i = 0; i < al->nnotified; i++)
        free(al->notified[i].app);
    free(al->notified);
    webhook_url_free(&al->hook);
    free(al->instance);
    free(al);
}
