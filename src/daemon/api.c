#include "api.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>

#include "access.h"
#include "accesslog.h"
#include "apihttp.h"
#include "apireq.h"
#include "app.h"
#include "clock.h"
#include "http.h"
#include "keys.h"
#include "log.h"
#include "pool.h"
#include "takereply.h"
#include "node.h"
#include "rds.h"
#include "text.h"

#define API_MAX_BODY  1024 /* bytes: a POST body is at most "count=N" */
#define API_WAIT_MAX  4096 /* requests waiting for one application's buffer */
#define API_BUCKETS   256  /* applications hash (chained) */
#define HOLD_DOWN_MS  takereply_retry_ms(TR_UNAVAILABLE) /* Redis unreachable or refusing */
#define HOLD_LIMIT_MS 1000 /* meta's limits are below the row's (until a refiller syncs them) */
#define HOLD_AUTH_MS  1000 /* Retry-After while the tokens have not been read yet */
#define HOLD_MOVE_MS  50   /* a Cluster slot being migrated (TRYAGAIN), or an ASK not followed */
#define REDIRECTS_MAX 5    /* MOVED and ASK followed in a row for one application's take */
#define STACK_BODY    4096 /* bodies up to this are built on the stack */
#define CTYPE_TEXT    "text/plain; charset=utf-8"
#define CTYPE_JSON    "application/json"
#define ALLOW_HDR     "Allow: GET, POST\r\n"
#define REALM         "WWW-Authenticate: Bearer realm=\"idpool\"\r\n"
#define REALM_INVALID "WWW-Authenticate: Bearer realm=\"idpool\", error=\"invalid_token\"\r\n"

/* A request waiting for IDs. */
struct api_wait {
    TAILQ_ENTRY(api_wait) link;
    struct apihttp_req *req;
    uint64_t count;
    enum apireq_fmt fmt;
};

/* One application's buffer, created at its first request. */
struct api_app {
    struct api_app *next; /* in its bucket */
    struct api *api;
    char key[APP_KEY_MAX + 1];
    size_t keylen;
    char *k_pool, *k_meta; /* Redis keys (heap) */
    uint64_t *ring;        /* the buffered IDs, oldest at head */
    size_t cap, head, n;   /* ring capacity (a power of two), first, count */
    int filling;           /* an idpool_take is in flight */
    uint64_t asked;        /* its count */
    int short_fill;        /* the last take brought less than asked */
    struct node *node;     /* where it was sent */
    int redirects;         /* MOVED and ASK followed since the last take served */
    TAILQ_HEAD(, api_wait) waiters;
    size_t nwait;                  /* waiters */
    uint64_t want;                 /* IDs they ask for */
    uint64_t hold_until_ms;        /* after a refusal: no take before this */
    enum take_refusal held;        /* that refusal (TR_NONE: none) */
    char held_msg[200];            /* its message */
    uint64_t per_take, per_second; /* the row's limits, as last seen */
};

struct api {
    struct apihttp *srv;
    struct nodemap *map; /* takes go to the pool's node's "redis-api" connection */
    struct pools *pools;
    struct access *access;
    char *prefix;
    int buffer; /* api-buffer */
    int stopping;
    struct api_app *apps[API_BUCKETS];
    struct api_stats st;
    struct http_burst auth_log[API_AUTH_N]; /* failed authentications: a line per burst */
    struct event_base *base;
    struct accesslog *alog; /* api-access-log, or NULL */
};

static const int codes[] = API_CODES;

static void count_code(struct api *a, int code)
{
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (codes[i] == code)
            a->st.requests[i]++;
}

/*
 * An error answer: {"error":"IDPOOL_...","message":"..."} with the
 * refusal's status (takereply.h), Retry-After (whole seconds, at least 1)
 * when retry_ms > 0, and `hdr` (one "Name: value\r\n" line) when not NULL.
 */
static void fail(struct api *a, struct apihttp_req *req, enum take_refusal why, int retry_ms,
                 const char *hdr, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void fail(struct api *a, struct apihttp_req *req, enum take_refusal why, int retry_ms,
                 const char *hdr, const char *fmt, ...)
{
    static const char oom[] = "{\"error\":\"IDPOOL_INTERNAL\",\"message\":\"out of memory\"}\n";
    int code = takereply_http(why);
    char msg[512], headers[160] = "", *text = NULL;
    cJSON *o = cJSON_CreateObject();
    size_t n;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (o && cJSON_AddStringToObject(o, "error", takereply_name(why)) &&
        cJSON_AddStringToObject(o, "message", msg))
        text = cJSON_PrintBuffered(o, 256, 0);
    cJSON_Delete(o);
    if (text == NULL) {
        count_code(a, 500);
        apihttp_reply(req, 500, CTYPE_JSON, NULL, oom, sizeof(oom) - 1);
        return;
    }
    if (retry_ms > 0)
        snprintf(headers, sizeof(headers), "Retry-After: %d\r\n", (retry_ms + 999) / 1000);
    if (hdr)
        snprintf(headers + strlen(headers), sizeof(headers) - strlen(headers), "%s", hdr);
    n = strlen(text);
    {
        char *body = realloc(text, n + 2); /* JSON bodies end with a newline */
        if (body) {
            text = body;
            text[n++] = '\n';
        }
    }
    count_code(a, code);
    apihttp_reply(req, code, CTYPE_JSON, headers[0] ? headers : NULL, text, n);
    free(text);
}

/* --- the buffers --------------------------------------------------------- */

static size_t bucket_of(const char *key, size_t n)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)key[i]) * 16777619u;
    return h % API_BUCKETS;
}

static struct api_app *app_get(struct api *a, const char *key, size_t n)
{
    size_t b = bucket_of(key, n);
    struct api_app *x;

    for (x = a->apps[b]; x; x = x->next)
        if (x->keylen == n && memcmp(x->key, key, n) == 0)
            return x;
    x = calloc(1, sizeof(*x));
    if (x == NULL)
        return NULL;
    memcpy(x->key, key, n);
    x->keylen = n;
    x->api = a;
    TAILQ_INIT(&x->waiters);
    x->k_pool = keys_app_new(a->prefix, x->key, KEYS_POOL);
    x->k_meta = keys_app_new(a->prefix, x->key, KEYS_META);
    if (!x->k_pool || !x->k_meta) {
        free(x->k_pool);
        free(x->k_meta);
        free(x);
        return NULL;
    }
    x->next = a->apps[b];
    a->apps[b] = x;
    return x;
}

/* The ring moved to a new array of cap (>= x->n) IDs, head first; 0 or -1 (out of memory). */
static int ring_resize(struct api_app *x, size_t cap)
{
    uint64_t *r = malloc(cap * sizeof(*r));

    if (r == NULL)
        return -1;
    for (size_t i = 0; i < x->n; i++)
        r[i] = x->ring[(x->head + i) & (x->cap - 1)];
    free(x->ring);
    x->ring = r;
    x->cap = cap;
    x->head = 0;
    return 0;
}

/* Room for `need` IDs in the ring; 0 or -1 (out of memory). */
static int ring_reserve(struct api_app *x, size_t need)
{
    size_t cap = x->cap ? x->cap : 64;

    if (need <= x->cap)
        return 0;
    while (cap < need)
        cap *= 2;
    return ring_resize(x, cap);
}

/*
 * Room for k more IDs after the last, in one run (takereply_ids writes
 * them so): the ring grown or its IDs moved to the start as needed. NULL
 * when out of memory.
 */
static uint64_t *ring_room(struct api_app *x, size_t k)
{
    size_t tail;

    if (ring_reserve(x, x->n + k) < 0)
        return NULL;
    tail = (x->head + x->n) & (x->cap - 1);
    if (tail >= x->head && tail + k > x->cap && ring_resize(x, x->cap) < 0)
        return NULL;
    return x->ring + ((x->head + x->n) & (x->cap - 1));
}

/*
 * Answer `req` with `n` IDs from the head of the buffer: they leave it
 * here, for this response only.
 */
static void serve(struct api_app *x, struct apihttp_req *req, uint64_t n, enum apireq_fmt fmt)
{
    struct api *a = x->api;
    uint64_t ids[64], *v = ids;
    char stack[STACK_BODY], *body = stack;
    size_t max = apireq_body_max(x->keylen, n), len;

    if (n > 64 && (v = malloc(n * sizeof(*v))) == NULL) {
        fail(a, req, TR_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        v[i] = x->ring[(x->head + i) & (x->cap - 1)];
    if (max > sizeof(stack) && (body = malloc(max)) == NULL) {
        if (v != ids)
            free(v);
        fail(a, req, TR_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    /* Consumed before the answer goes out: never in two responses, whatever follows. */
    x->head = (x->head + n) & (x->cap - 1);
    x->n -= n;
    a->st.ids += n;
    a->st.buffered -= n;
    len = apireq_body(body, fmt, x->key, x->keylen, v, n);
    a->st.requests[0]++;
    apihttp_reply(req, 200, fmt == APIREQ_TEXT ? CTYPE_TEXT : CTYPE_JSON, NULL, body, len);
    if (body != stack)
        free(body);
    if (v != ids)
        free(v);
}

/* Answer a request that cannot get IDs now, with the reason the last take gave. */
static void refuse(struct api_app *x, struct apihttp_req *req)
{
    struct api *a = x->api;
    uint64_t now = clock_ms();
    enum take_refusal why = x->held != TR_NONE ? x->held : TR_EMPTY;
    int retry = x->hold_until_ms > now ? (int)(x->hold_until_ms - now) : 1;

    if (takereply_retry_ms(why) == 0) /* waiting will not help (IDPOOL_LIMIT) */
        retry = 0;
    if (why == TR_EMPTY)
        fail(a, req, why, retry, NULL,
             "the pool of '%s' is empty; retry shortly (the refillers are behind or stopped)",
             x->key);
    else
        fail(a, req, why, retry, NULL, "%s", x->held_msg);
}

/* No take for ms: the last one was refused (why), answered with msg meanwhile. */
static void hold(struct api_app *x, enum take_refusal why, unsigned ms, const char *msg)
{
    x->held = why;
    x->hold_until_ms = clock_ms() + (uint64_t)ms;
    snprintf(x->held_msg, sizeof(x->held_msg), "%s", msg);
}

static int held(const struct api_app *x)
{
    return x->held != TR_NONE && clock_ms() < x->hold_until_ms;
}

static void take(struct api_app *x);

/*
 * Serve the waiting requests in order: in full while the buffer holds
 * enough; when no take can bring more now (the pool ran short, a refusal
 * is held) with what there is, or refused.
 */
static void drain(struct api_app *x)
{
    struct api_wait *w;
    int stuck = x->short_fill || held(x);

    while ((w = TAILQ_FIRST(&x->waiters)) != NULL) {
        uint64_t n = w->count;

        if (x->n < n) {
            if (!stuck)
                break;
            n = x->n;
        }
        TAILQ_REMOVE(&x->waiters, w, link);
        x->nwait--;
        x->want -= w->count;
        if (n > 0)
            serve(x, w->req, n, w->fmt);
        else
            refuse(x, w->req);
        free(w);
    }
    take(x);
}

/* How many IDs this issuer keeps for the application, at most. */
static uint64_t target(const struct api_app *x)
{
    uint64_t t = (uint64_t)x->api->buffer, tenth = x->per_second / 10;

    if (t > x->per_take)
        t = x->per_take;
    if (t > tenth)
        t = tenth;
    return t ? t : 1;
}

/* A pool entry that is not an ID (takereply_ids): logged, skipped. */
static void skip_entry(const char *entry, void *arg)
{
    const struct api_app *x = arg;

    log_warn("api: %s: skipped a pool entry that is not an ID: '%.40s'", x->key, entry);
}

static void take(struct api_app *x);
static int send_take(struct api_app *x, struct node *n, int asking);

/*
 * A Redis Cluster redirection or refusal of a take: a MOVED is taken again
 * at once (the map has the slot's new node), an ASK sent once to the node
 * named, with ASKING; a few in a row at most. A slot whose keys are split
 * by a migration (TRYAGAIN), or a cluster that cannot serve it, is held
 * briefly. 0 when handled, -1 when reply is not one of them.
 */
static int on_redirect(struct api_app *x, const redisReply *reply)
{
    struct node *to;
    enum node_err e = node_error(x->node, reply, &to);

    if (e == NODE_ERR_OTHER)
        return -1;
    if (e == NODE_ERR_MOVED && x->redirects++ < REDIRECTS_MAX) {
        take(x);
        return 0;
    }
    if (e == NODE_ERR_ASK && to && node_ready(to) && x->redirects++ < REDIRECTS_MAX &&
        send_take(x, to, 1) == 0)
        return 0;
    hold(x, TR_UNAVAILABLE, e == NODE_ERR_DOWN ? HOLD_DOWN_MS : HOLD_MOVE_MS,
         e == NODE_ERR_DOWN ? "the Redis Cluster cannot serve this application now; retry shortly"
                            : "this application's keys are moving between Redis nodes; retry "
                              "shortly");
    drain(x);
    return 0;
}

static void on_take(struct rds *r, redisReply *reply, void *arg)
{
    struct api_app *x = arg;
    struct api *a = x->api;
    uint64_t asked = x->asked;

    (void)r;
    x->filling = 0;
    x->short_fill = 0;
    if (a->stopping)
        return;
    if (reply && reply->type == REDIS_REPLY_ERROR && on_redirect(x, reply) == 0)
        return;
    if (reply == NULL) {
        hold(x, TR_UNAVAILABLE, HOLD_DOWN_MS, "Redis is unreachable; retry shortly");
    } else if (reply->type == REDIS_REPLY_ARRAY) {
        size_t got = 0;
        uint64_t *room = reply->elements ? ring_room(x, reply->elements) : NULL;

        if (room) {
            got = takereply_ids(reply, room, skip_entry, x);
            x->n += got;
        }
        a->st.taken += got;
        a->st.buffered += got;
        if (got < asked) {
            x->short_fill = 1;
            hold(x, TR_EMPTY, takereply_retry_ms(TR_EMPTY), "");
        } else {
            x->held = TR_NONE;
        }
        x->redirects = 0;
    } else if (reply->type == REDIS_REPLY_ERROR) {
        const char *m;
        enum take_refusal why = takereply_parse(reply->str, &m);

        switch (why) {
        case TR_RATE:
        case TR_EPOCH:
            hold(x, why, takereply_wait_ms(why, m), m);
            break;
        case TR_NOAPP:
            /* The row is served (checked before): no refiller wrote meta yet, or Redis lost it. */
            hold(x, TR_UNAVAILABLE, HOLD_DOWN_MS,
                 "the pool has no limits in Redis: no refilling idpoold has checked it yet, or "
                 "Redis lost them (a refiller restores them within a check); retry shortly");
            break;
        case TR_LIMIT:
            hold(x, why, HOLD_LIMIT_MS, m);
            break;
        default:
            log_warn("api: %s: idpool_take failed: %s", x->key, reply->str);
            hold(x, TR_UNAVAILABLE, HOLD_DOWN_MS, "Redis refused the take; retry shortly");
            break;
        }
    }
    drain(x);
}

/*
 * Take from the pool when the buffer runs low or requests wait for more
 * than it holds: one take in flight per application, none while a refusal
 * is held; waiting requests are answered at once while it is.
 */
static void take(struct api_app *x)
{
    struct api *a = x->api;
    uint64_t t, ask;

    if (x->filling || a->stopping)
        return;
    if (held(x)) {
        if (x->nwait)
            drain(x);
        return;
    }
    t = target(x);
    if (x->n >= x->want + (t + 1) / 2)
        return;
    ask = x->want + t - x->n;
    if (ask > x->per_take)
        ask = x->per_take;
    if (ring_reserve(x, x->n + ask) < 0) {
        hold(x, TR_UNAVAILABLE, HOLD_DOWN_MS, "out of memory");
        drain(x);
        return;
    }
    x->asked = ask;
    if (send_take(x, nodemap_for_key(a->map, x->k_pool), 0) < 0) {
        hold(x, TR_UNAVAILABLE, HOLD_DOWN_MS, "Redis is unreachable; retry shortly");
        drain(x);
    }
}

/* idpool_take of x->asked IDs on node n (after ASKING: an ASK redirection); 0, or -1. */
static int send_take(struct api_app *x, struct node *n, int asking)
{
    char count[24];
    const char *argv[6] = {"FCALL", "idpool_take", "2", x->k_pool, x->k_meta, count};
    size_t len[6];
    static const char *const askv[] = {"ASKING"};
    static const size_t asklen[] = {6};

    snprintf(count, sizeof(count), "%" PRIu64, x->asked);
    for (int i = 0; i < 6; i++)
        len[i] = strlen(argv[i]);
    if (n == NULL ||
        (asking && rds_command_argv(n->api, NULL, NULL, 1, (const char **)askv, asklen) < 0) ||
        rds_command_argv(n->api, on_take, x, 6, argv, len) < 0)
        return -1;
    x->node = n;
    x->filling = 1;
    x->api->st.takes++;
    return 0;
}

/* --- requests ------------------------------------------------------------ */

/* The count of a request: query, or for a POST a form body. 0, or -1 (answered). */
static int request_count(struct api *a, struct apihttp_req *req, const char *query, size_t qlen,
                         uint64_t *count)
{
    char err[APIREQ_ERR_MAX];

    if (req->body_len > 0 && strcmp(req->method, "POST") == 0) {
        if (qlen > 0) {
            fail(a, req, TR_BADARG, 0, NULL, "count given in both the query and the body: use one");
            return -1;
        }
        if (req->ctype && strncasecmp(req->ctype, "application/x-www-form-urlencoded", 33) != 0) {
            fail(a, req, TR_BADARG, 0, NULL,
                 "a POST body must be count=N (application/x-www-form-urlencoded)");
            return -1;
        }
        if (apireq_count(req->body, req->body_len, count, err, sizeof(err)) < 0) {
            fail(a, req, TR_BADARG, 0, NULL, "%s", err);
            return -1;
        }
        return 0;
    }
    if (apireq_count(query, qlen, count, err, sizeof(err)) < 0) {
        fail(a, req, TR_BADARG, 0, NULL, "%s", err);
        return -1;
    }
    return 0;
}

/*
 * The path of a request target into buf (NUL-terminated), also of the
 * absolute form ("http://host/v1/ids/user", RFC 9112 3.2.2); *query and
 * *qlen get the query. 0, or -1 when it is no path or too long.
 */
static int target_split(const char *t, char *buf, size_t size, const char **query, size_t *qlen)
{
    size_t n;

    if (strncasecmp(t, "http://", 7) == 0 || strncasecmp(t, "https://", 8) == 0) {
        t = strchr(t + (t[4] == ':' ? 7 : 8), '/');
        if (t == NULL)
            t = "/";
    }
    if (t[0] != '/')
        return -1;
    n = strcspn(t, "?#");
    if (n >= size)
        return -1;
    memcpy(buf, t, n);
    buf[n] = '\0';
    *query = t[n] == '?' ? t + n + 1 : NULL;
    *qlen = *query ? strcspn(*query, "#") : 0;
    return 0;
}

/*
 * Count a failed authentication and log it, at most one line per burst of
 * each reason (http_burst), with the peer's address: never the token.
 */
static void auth_failed(struct api *a, struct apihttp_req *req, enum api_auth why, const char *what)
{
    uint64_t n;

    a->st.auth_failures[why]++;
    if (http_burst_due(&a->auth_log[why], &n))
        log_warn("api: failed authentication from %s: %s (%" PRIu64
                 " failed authentication(s) since the last message)",
                 req->peer ? req->peer : "?", what, n);
}

/*
 * Every request: path, method, token, application, count, in that order
 * (a token learns nothing of applications it may not see: 403 before 404).
 */
static void on_request(struct apihttp_req *req, void *arg)
{
    struct api *a = arg;
    char path[APIREQ_PATH_MAX + 1], key[APP_KEY_MAX + 1];
    const char *tok, *apps, *name, *query;
    size_t keylen, toklen, qlen;
    struct pool *p;
    struct api_app *x;
    uint64_t count;
    enum apireq_fmt fmt;
    enum httpreq_path_status st;
    int loaded;

    st = target_split(req->target, path, sizeof(path), &query, &qlen) < 0
             ? HTTPREQ_PATH_NONE
             : apireq_path(path, key, &keylen);
    if (st == HTTPREQ_PATH_BAD) {
        fail(a, req, TR_BADREQUEST, 0, NULL, "bad percent-escape in the path (%s)", TEXT_PCT_HINT);
        return;
    }
    if (st != HTTPREQ_PATH_OK) {
        fail(a, req, TR_NOTFOUND, 0, NULL,
             "no such path: IDs are at /v1/ids/{key} (an application key)");
        return;
    }
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "POST") != 0) {
        fail(a, req, TR_METHOD, 0, ALLOW_HDR, "method %.32s not allowed: use GET or POST",
             req->method);
        return;
    }
    if (apireq_bearer(req->authz, &tok, &toklen) < 0) {
        auth_failed(a, req, API_AUTH_MISSING, "missing or malformed token");
        fail(a, req, TR_AUTH, 0, REALM,
             "missing or malformed token: send 'Authorization: Bearer <token>'");
        return;
    }
    access_tokens(a->access, &loaded);
    if (!loaded) {
        /* A valid token is not "unknown" until the tokens have been read. */
        fail(a, req, TR_UNAVAILABLE, HOLD_AUTH_MS, NULL,
             "the API tokens have not been read from MySQL yet; retry shortly");
        return;
    }
    name = access_token(a->access, tok, toklen, &apps);
    if (name == NULL) {
        auth_failed(a, req, API_AUTH_UNKNOWN, "unknown or revoked token");
        fail(a, req, TR_AUTH, 0, REALM_INVALID, "unknown or revoked token");
        return;
    }
    apihttp_req_user(req, name);
    if (!access_allows(apps, key, keylen)) {
        fail(a, req, TR_FORBIDDEN, 0, NULL, "token '%s' may not take IDs of '%s'", name, key);
        return;
    }
    p = pools_find(a->pools, key);
    if (p == NULL || !p->live) {
        fail(a, req, TR_NOAPP, 0, NULL,
             "no application '%s' is served (unknown, disabled or invalid row)", key);
        return;
    }
    if (request_count(a, req, query, qlen, &count) < 0)
        return;
    if (count > p->cfg.per_take) {
        fail(a, req, TR_LIMIT, 0, NULL, "count %" PRIu64 " exceeds max_size_per_times %" PRIu64,
             count, p->cfg.per_take);
        return;
    }
    fmt = apireq_accept(req->accept);
    if (fmt == APIREQ_NONE) {
        fail(a, req, TR_NOTACCEPTABLE, 0, NULL,
             "the Accept header allows neither application/json nor text/plain (errors are "
             "JSON whatever it says)");
        return;
    }
    x = app_get(a, key, keylen);
    if (x == NULL) {
        fail(a, req, TR_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    x->per_take = p->cfg.per_take;
    x->per_second = p->cfg.per_second;
    if (TAILQ_EMPTY(&x->waiters) && x->n >= count) {
        serve(x, req, count, fmt);
        take(x); /* ahead of need */
        return;
    }
    if (x->nwait >= API_WAIT_MAX) {
        fail(a, req, TR_EMPTY, 1000, NULL,
             "%d requests already wait for IDs of '%s'; retry shortly", API_WAIT_MAX, x->key);
        return;
    }
    {
        struct api_wait *w = calloc(1, sizeof(*w));
        if (w == NULL) {
            fail(a, req, TR_INTERNAL, 0, NULL, "out of memory");
            return;
        }
        w->req = req;
        w->count = count;
        w->fmt = fmt;
        TAILQ_INSERT_TAIL(&x->waiters, w, link);
        x->nwait++;
        x->want += count;
    }
    if (held(x))
        drain(x);
    else
        take(x);
}

/* --- lifecycle ------------------------------------------------------------ */

struct api *api_new(struct event_base *base, const struct config *cfg, struct pools *pools,
                    struct access *access, struct nodemap *map)
{
    struct api *a = calloc(1, sizeof(*a));
    struct apihttp_opts o = {
        .name = "api",
        .host = cfg->api_host,
        .port = cfg->api_port,
        .routes = "/v1/ids/{key}",
        .max_conns = cfg->api_max_conns,
        .max_per_addr = cfg->api_max_per_addr,
        .timeout_ms = cfg->http_timeout_ms,
        .head_timeout_ms = cfg->http_head_timeout_ms,
        .max_body = API_MAX_BODY,
        .tls_cert = cfg->api_tls_cert,
        .tls_key = cfg->api_tls_key,
        .handler = on_request,
    };

    if (a == NULL)
        return NULL;
    a->pools = pools;
    a->access = access;
    a->map = map;
    a->buffer = cfg->api_buffer;
    a->prefix = strdup(cfg->key_prefix);
    if (a->prefix == NULL)
        goto fail;
    if (!config_api_on(cfg))
        o.host = NULL;
    o.arg = a;
    a->base = base;
    a->srv = apihttp_new(base, &o);
    if (a->srv == NULL)
        goto fail;
    if (o.host && cfg->api_access_log) {
        if ((a->alog = accesslog_open(base, cfg->api_access_log)) == NULL)
            goto fail;
        apihttp_set_access_log(a->srv, a->alog);
    }
    return a;
fail:
    api_free(a);
    return NULL;
}

void api_stop(struct api *a)
{
    if (a == NULL || a->stopping)
        return;
    /* Waiting requests are answered first: their connections go next. */
    for (size_t b = 0; b < API_BUCKETS; b++) {
        for (struct api_app *x = a->apps[b]; x; x = x->next) {
            struct api_wait *w;
            while ((w = TAILQ_FIRST(&x->waiters)) != NULL) {
                TAILQ_REMOVE(&x->waiters, w, link);
                fail(a, w->req, TR_UNAVAILABLE, 1000, NULL, "the issuer is shutting down");
                free(w);
            }
            x->nwait = 0;
            x->want = 0;
        }
    }
    a->stopping = 1; /* on_take ignores the NULL replies nodemap_free gives */
    apihttp_free(a->srv);
    a->srv = NULL;
    accesslog_free(a->alog);
    a->alog = NULL;
}

void api_free(struct api *a)
{
    if (a == NULL)
        return;
    api_stop(a);
    for (size_t b = 0; b < API_BUCKETS; b++) {
        struct api_app *x = a->apps[b];
        while (x) {
            struct api_app *next = x->next;
            free(x->ring);
            free(x->k_pool);
            free(x->k_meta);
            free(x);
            x = next;
        }
    }
    free(a->prefix);
    free(a);
}

/*
 * The access log after a SIGHUP: the same file is opened again (logrotate
 * moved it away), another one replaces it once it opened, none closes it;
 * a file that cannot be opened leaves the old one in place (logged).
 */
static void access_log_configure(struct api *a, const char *path)
{
    struct accesslog *l;

    if (a->srv == NULL || a->stopping)
        return;
    if (a->alog && path && strcmp(accesslog_path(a->alog), path) == 0) {
        (void)accesslog_reopen(a->alog); /* an error is logged, the old file kept */
        return;
    }
    if (path && (l = accesslog_open(a->base, path)) == NULL)
        return;
    if (path == NULL)
        l = NULL;
    apihttp_set_access_log(a->srv, l);
    if (a->alog)
        log_info("api: access log %s closed", accesslog_path(a->alog));
    accesslog_free(a->alog);
    a->alog = l;
}

void api_configure(struct api *a, const struct config *cfg)
{
    a->buffer = cfg->api_buffer;
    access_log_configure(a, config_api_on(cfg) ? cfg->api_access_log : NULL);
}

void api_get_stats(const struct api *a, struct api_stats *out)
{
    *out = a->st;
    apihttp_get_closes(a->srv, out->closes);
    /* and what the HTTP server refused before a request reached us */
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        out->requests[i] += apihttp_refused(a->srv, codes[i]);
}
