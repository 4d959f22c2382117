#include "access.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "acluser.h"
#include "keys.h"
#include "log.h"
#include "node.h"
#include "rds.h"
#include "store.h"
#include "token.h"

/* The Redis users as applied on one node (ACL users are per server). */
struct access_node {
    struct access *a;
    struct node *n;
    uint64_t
        applied_sum; /* digest of the users last applied (0 = not applied on this connection) */
    int applying;    /* ACL commands in flight */
};

struct access {
    struct store *store;
    struct nodemap *map;
    struct access_node **nodes; /* by node id, made when first needed */
    size_t nnodes;
    char *prefix;        /* key prefix: user names and patterns */
    int db;              /* Redis database: users may SELECT it when not 0 */
    int api;             /* the ID API is on: revocations are read from Redis too */
    struct event *timer; /* periodic reload */
    int loading;         /* a store_auth job is in flight */
    int loaded;          /* a load has succeeded */
    struct store_auth *auth;
    int warned_tokens, warned_grants, warned_acl, warned_revoked; /* said once */
    char last_err[STORE_ERR_MAX];
    char revoked_key[KEYS_MAX];          /* the Redis set of revoked token hashes */
    char (*revoked)[TOKEN_HASH_LEN + 1]; /* hashes read from it, sorted; never forgotten */
    size_t nrevoked, cap_revoked;
    int polling; /* its SMEMBERS is in flight */
    int freeing;
};

/* One user's ACL GETUSER in flight: what is about to be set, to see whether it changes. */
struct user_check {
    struct access_node *an;
    char name[ACLUSER_NAME_MAX];
    char hash[TOKEN_HASH_LEN + 1];
};

/* FNV-1a over the users: what must be (re)applied when it changes. */
static uint64_t grants_digest(const struct store_auth *au)
{
    uint64_t h = 1469598103934665603ULL;

    for (size_t i = 0; au && i < au->ngrants; i++) {
        const struct store_grant *g = &au->grants[i];
        for (const char *p = g->key; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        for (const char *p = g->hash; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        h = (h ^ (uint64_t)(g->revoked + 2)) * 1099511628211ULL;
    }
    return h ? h : 1;
}

/* Say once why Redis refused an ACL or CLIENT command, with the rights that are missing. */
static void acl_refused(struct access_node *an, const char *what, const char *err)
{
    struct access *a = an->a;

    an->applied_sum = 0;
    if (a->warned_acl)
        return;
    a->warned_acl = 1;
    log_error("redis: cannot apply the Redis users of direct clients (%s): %s%s", what, err,
              strncmp(err, "NOPERM", 6) == 0
                  ? " (the daemon's Redis user needs +acl|setuser, +acl|deluser, +acl|getuser "
                    "and +client|kill)"
                  : "");
}

static void on_acl_reply(struct rds *r, redisReply *reply, void *arg)
{
    struct access_node *an = arg;

    (void)r;
    an->applying--;
    if (reply == NULL) {
        an->applied_sum = 0; /* the connection went: apply again when it is back */
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR)
        acl_refused(an, "ACL SETUSER/DELUSER", reply->str);
}

static void on_kill(struct rds *r, redisReply *reply, void *arg)
{
    struct user_check *uc = arg;
    struct access_node *an = uc->an;

    (void)r;
    an->applying--;
    if (reply == NULL)
        an->applied_sum = 0;
    else if (reply->type == REDIS_REPLY_ERROR)
        acl_refused(an, "CLIENT KILL USER", reply->str);
    else if (reply->type == REDIS_REPLY_INTEGER && reply->integer > 0)
        log_info("redis: closed %lld connection(s) of Redis user %s: its password changed",
                 reply->integer, uc->name);
    free(uc);
}

/*
 * 1 when an ACL GETUSER reply shows a user whose password is not exactly
 * `hash`: a rotation, so connections that logged in before must go. A
 * user that did not exist (nil) has no connections: 0.
 */
static int password_changed(const redisReply *reply, const char *hash)
{
    if (reply->type != REDIS_REPLY_ARRAY)
        return 0;
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *k = reply->element[i], *v = reply->element[i + 1];

        if (k->type != REDIS_REPLY_STRING || strcmp(k->str, "passwords") != 0)
            continue;
        return !(v->type == REDIS_REPLY_ARRAY && v->elements == 1 &&
                 v->element[0]->type == REDIS_REPLY_STRING &&
                 strcmp(v->element[0]->str, hash) == 0);
    }
    return 1; /* no password field: not what this daemon set */
}

/*
 * The user as it was before the ACL SETUSER sent right behind this GETUSER:
 * when its password changes, CLIENT KILL USER closes the connections that
 * authenticated with the old one (ACL SETUSER leaves them open). Sent only
 * when it changes, so re-applying unchanged users on a reconnect closes
 * nothing.
 */
static void on_getuser(struct rds *r, redisReply *reply, void *arg)
{
    struct user_check *uc = arg;
    struct access_node *an = uc->an;

    (void)r;
    an->applying--;
    if (reply == NULL) {
        an->applied_sum = 0;
    } else if (reply->type == REDIS_REPLY_ERROR) {
        acl_refused(an, "ACL GETUSER", reply->str);
    } else if (password_changed(reply, uc->hash) &&
               rds_command(an->n->main, on_kill, uc, "CLIENT KILL USER %s", uc->name) == 0) {
        an->applying++;
        return; /* uc goes with on_kill */
    }
    free(uc);
}

/* ACL GETUSER then ACL SETUSER of one granted user on a node; 0, or -1 when it is not ready. */
static int apply_user(struct access_node *an, const struct store_grant *g)
{
    struct access *a = an->a;
    char space[2 * ACLUSER_NAME_MAX + 80];
    const char *argv[ACLUSER_ARGC_MAX];
    struct user_check *uc = calloc(1, sizeof(*uc));
    int argc;

    if (uc == NULL)
        return -1;
    uc->an = an;
    acluser_name(a->prefix, g->key, uc->name, sizeof(uc->name));
    snprintf(uc->hash, sizeof(uc->hash), "%s", g->hash);
    if (rds_command(an->n->main, on_getuser, uc, "ACL GETUSER %s", uc->name) < 0) {
        free(uc);
        return -1;
    }
    an->applying++;
    argc = acluser_setuser(a->prefix, g->key, g->hash, a->db, space, argv);
    if (rds_command_argv(an->n->main, on_acl_reply, an, argc, argv, NULL) < 0)
        return -1;
    an->applying++;
    return 0;
}

/*
 * Send ACL SETUSER (or DELUSER when revoked) for every row to one node:
 * idempotent, so any number of daemons may do it. Only when the node is
 * ready and the rows changed since the last complete application on its
 * connection.
 */
static void apply_node(struct access_node *an)
{
    struct access *a = an->a;
    uint64_t sum;
    size_t set = 0, del = 0;

    if (!a->auth || !node_ready(an->n) || an->applying)
        return;
    sum = grants_digest(a->auth);
    if (sum == an->applied_sum)
        return;
    for (size_t i = 0; i < a->auth->ngrants; i++) {
        const struct store_grant *g = &a->auth->grants[i];
        char name[ACLUSER_NAME_MAX];

        if (g->revoked) {
            acluser_name(a->prefix, g->key, name, sizeof(name));
            if (rds_command(an->n->main, on_acl_reply, an, "ACL DELUSER %s", name) < 0)
                return; /* not ready any more: applied again on the next connection */
            an->applying++;
            del++;
        } else {
            if (apply_user(an, g) < 0)
                return;
            set++;
        }
    }
    an->applied_sum = sum;
    if (set || del) {
        a->warned_acl = 0;
        log_info("redis: applied %zu Redis user(s) of direct clients, deleted %zu revoked", set,
                 del);
    }
}

/* What access knows of node n, made when first needed; NULL when out of memory. */
static struct access_node *node_of(struct access *a, struct node *n)
{
    if (node_table_fit(&a->nodes, &a->nnodes, sizeof(*a->nodes), n) != 0)
        return NULL;
    if (a->nodes[n->id] == NULL && (a->nodes[n->id] = calloc(1, sizeof(**a->nodes))) != NULL) {
        a->nodes[n->id]->a = a;
        a->nodes[n->id]->n = n;
    }
    return a->nodes[n->id];
}

/* The users on every primary (ACL users are not replicated). */
static void apply_users(struct access *a)
{
    for (struct node *n = nodemap_next_primary(a->map, NULL); n;
         n = nodemap_next_primary(a->map, n)) {
        struct access_node *an = node_of(a, n);

        if (an)
            apply_node(an);
    }
}

/* Where hash is, or would go, in the sorted revoked hashes; *found when it is there. */
static size_t revoked_find(const struct access *a, const char *hash, int *found)
{
    size_t lo = 0, hi = a->nrevoked;

    *found = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(hash, a->revoked[mid]);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Add a revoked hash; 1 when it is new, 0 when known or out of memory. */
static int revoked_add(struct access *a, const char *hash)
{
    int found;
    size_t at = revoked_find(a, hash, &found);

    if (found)
        return 0;
    if (a->nrevoked == a->cap_revoked) {
        size_t cap = a->cap_revoked ? 2 * a->cap_revoked : 16;
        void *p = realloc(a->revoked, cap * sizeof(*a->revoked));
        if (p == NULL)
            return 0;
        a->revoked = p;
        a->cap_revoked = cap;
    }
    memmove(a->revoked[at + 1], a->revoked[at], (a->nrevoked - at) * sizeof(*a->revoked));
    memcpy(a->revoked[at], hash, TOKEN_HASH_LEN + 1);
    a->nrevoked++;
    return 1;
}

/*
 * The revoked token hashes in Redis, merged into the ones known: kept for
 * the life of the process, so a Redis that restarts empty while MySQL is
 * unreachable does not bring a revoked token back.
 */
static void on_revoked(struct rds *r, redisReply *reply, void *arg)
{
    struct access *a = arg;
    size_t added = 0;

    (void)r;
    a->polling = 0;
    if (reply == NULL)
        return;
    if (reply->type == REDIS_REPLY_ERROR) {
        if (!a->warned_revoked)
            log_warn("redis: cannot read the revoked API tokens (SMEMBERS %s): %s; revocations "
                     "reach this issuer through MySQL only",
                     a->revoked_key, reply->str);
        a->warned_revoked = 1;
        return;
    }
    a->warned_revoked = 0;
    for (size_t i = 0; reply->type == REDIS_REPLY_ARRAY && i < reply->elements; i++) {
        const redisReply *e = reply->element[i];

        if (e->type == REDIS_REPLY_STRING && token_hash_valid(e->str))
            added += (size_t)revoked_add(a, e->str);
    }
    if (added)
        log_info("access: %zu API token(s) revoked through Redis (%s)", added, a->revoked_key);
}

/* Read the revoked tokens from Redis (an issuer only; one read in flight). */
static void poll_revoked(struct access *a)
{
    struct node *n;

    if (!a->api || a->polling || a->freeing)
        return;
    n = nodemap_for_key(a->map, a->revoked_key);
    if (node_ready(n) && rds_command(n->main, on_revoked, a, "SMEMBERS %s", a->revoked_key) == 0)
        a->polling = 1;
}

static int by_hash(const void *x, const void *y)
{
    return strcmp(((const struct store_token *)x)->hash, ((const struct store_token *)y)->hash);
}

static void on_auth(void *arg, enum store_err st, struct store_auth *au, const char *err)
{
    struct access *a = arg;

    a->loading = 0;
    if (st != STORE_OK) {
        if (strcmp(a->last_err, err) != 0)
            log_warn("access: cannot read the API tokens and Redis users (keeping the ones "
                     "loaded before): %s",
                     err);
        snprintf(a->last_err, sizeof(a->last_err), "%s", err);
        return;
    }
    if (a->last_err[0])
        log_info("access: API tokens and Redis users read again");
    a->last_err[0] = '\0';
    if (au->tokens_missing && !a->warned_tokens)
        log_warn("access: no table api_token: the ID API accepts no token until the schema is "
                 "updated (load sql/schema.sql again)");
    if (au->grants_missing && !a->warned_grants)
        log_warn("access: no table redis_user: Redis users of direct clients are not applied "
                 "until the schema is updated (load sql/schema.sql again)");
    if (au->skipped)
        log_warn("access: %zu token or user row(s) skipped: malformed name, key or hash",
                 au->skipped);
    a->warned_tokens = au->tokens_missing;
    a->warned_grants = au->grants_missing;
    if (!a->loaded || au->ntokens != a->auth->ntokens)
        log_info("access: %zu API token(s), %zu Redis user(s)", au->ntokens, au->ngrants);
    qsort(au->tokens, au->ntokens, sizeof(*au->tokens), by_hash);
    store_auth_free(a->auth);
    a->auth = au;
    a->loaded = 1;
    apply_users(a);
}

void access_reload(struct access *a)
{
    poll_revoked(a);
    if (a->loading || a->freeing)
        return;
    if (store_auth(a->store, on_auth, a) == 0)
        a->loading = 1;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    access_reload(arg);
}

void access_configure(struct access *a, const struct config *cfg)
{
    struct timeval tv = {cfg->reload_ms / 1000, (cfg->reload_ms % 1000) * 1000};

    event_add(a->timer, &tv);
}

struct access *access_new(struct event_base *base, const struct config *cfg, struct store *store,
                          struct nodemap *map)
{
    struct access *a = calloc(1, sizeof(*a));

    if (a == NULL)
        return NULL;
    a->store = store;
    a->map = map;
    a->db = cfg->redis.db;
    a->api = config_api_on(cfg);
    a->prefix = strdup(cfg->key_prefix);
    a->timer = event_new(base, -1, EV_PERSIST, on_timer, a);
    if (a->prefix)
        keys_revoked(a->prefix, a->revoked_key, sizeof(a->revoked_key));
    if (a->prefix == NULL || a->timer == NULL) {
        access_free(a);
        return NULL;
    }
    access_configure(a, cfg);
    access_reload(a);
    return a;
}

void access_free(struct access *a)
{
    if (a == NULL)
        return;
    a->freeing = 1;
    if (a->timer)
        event_free(a->timer);
    store_auth_free(a->auth);
    for (size_t i = 0; i < a->nnodes; i++)
        free(a->nodes[i]);
    free(a->nodes);
    free(a->revoked);
    free(a->prefix);
    free(a);
}

void access_node_state(struct access *a, struct node *n, int ready)
{
    struct access_node *an = node_of(a, n);

    if (an)
        an->applied_sum = 0;
    if (n == nodemap_for_key(a->map, a->revoked_key))
        a->polling = 0; /* a lost connection answered it with NULL */
    if (ready) {
        if (an)
            apply_node(an);
        poll_revoked(a);
    }
}

const char *access_token(const struct access *a, const char *tok, size_t n, const char **apps_out)
{
    char hex[TOKEN_HASH_LEN + 1];
    size_t lo = 0, hi;

    if (a->auth == NULL || n > 512)
        return NULL;
    hi = a->auth->ntokens;
    token_hash(tok, n, hex);
    /*
     * Binary search over hashes sorted by MySQL (hex text: byte order).
     * Comparisons leak how much of a hash prefix matched, which says
     * nothing about a token (SHA-256 has no usable preimages).
     */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(hex, a->auth->tokens[mid].hash);
        if (c == 0) {
            int revoked;

            revoked_find(a, hex, &revoked);
            if (revoked) /* through Redis, before MySQL says so here */
                return NULL;
            *apps_out = a->auth->tokens[mid].apps;
            return a->auth->tokens[mid].name;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

int access_allows(const char *apps, const char *key, size_t keylen)
{
    const char *p = apps;

    if (strcmp(apps, "*") == 0)
        return 1;
    while (*p) {
        size_t n = strcspn(p, ",");
        const char *s = p;
        size_t m = n;

        while (m && (*s == ' ')) /* "user, order" */
            s++, m--;
        while (m && s[m - 1] == ' ')
            m--;
        if (m == keylen && memcmp(s, key, keylen) == 0)
            return 1;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

size_t access_tokens(const struct access *a, int *loaded)
{
    *loaded = a->loaded;
    return a->auth ? a->auth->ntokens : 0;
}
