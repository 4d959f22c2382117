#include "rds.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>

#include "build_config.h"
#include "clock.h"
#include "dns.h"
#include "keys.h"
#include "log.h"
#include "token.h"
#include "url.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 1000       /* also bounds the window after a Redis restart (README) */
#define ROLE_CHECK_MS  1000       /* how often a ready connection checks for a failover */
#define LIB_CHECK_MS   1000       /* at most this often after "Function not found" */
#define NONCE_BYTES    16         /* of a new epoch (idpool_validate) */
#define SERVER_ID_MAX  96         /* "run_id:master_replid" and its NUL */
#define PROMOTED_TTL   "86400000" /* ms a promoted server's reset marker is kept */

enum rds_conn {
    RDS_DOWN,       /* no connection; a reconnect is scheduled */
    RDS_RESOLVING,  /* waiting for the target to name an address (rds_retarget) */
    RDS_LOOKUP,     /* looking the host name up (dns.c), under the connect timeout */
    RDS_CONNECTING, /* TCP connect in progress */
    RDS_HANDSHAKE,  /* AUTH/SELECT/INFO/FUNCTION LOAD in flight */
    RDS_READY,      /* commands accepted */
};

struct rds {
    struct event_base *base;
    const char *name; /* "redis" or "redis-push", for the log */
    unsigned flags;   /* RDS_MAIN, RDS_WRITER */
    char *host;       /* server address */
    int port;
    char *user;            /* ACL user or NULL */
    char *password;        /* or NULL */
    int db;                /* SELECT target */
    int timeout_ms;        /* connect and command timeout */
    redisAsyncContext *ac; /* current context, NULL when down */
    struct dns_req *dns;   /* the host name's lookup in RDS_LOOKUP, else NULL */
    enum rds_conn state;
    uint64_t state_since_ms;       /* when CONNECTING/HANDSHAKE began */
    uint64_t progress_ms;          /* last reply, or first send after idle */
    unsigned outstanding;          /* commands sent, not yet answered */
    int backoff_ms;                /* next reconnect delay */
    int failures;                  /* consecutive failed attempts (log throttling) */
    char server_id[SERVER_ID_MAX]; /* "run_id:master_replid" from INFO at the handshake */
    char epoch[RDS_EPOCH_MAX];     /* writers: what idpool_validate answered ("" = none) */
    const char *stale;             /* why to drop the connection (on_watch): a writer's epoch is no
                                      longer the validated one, or READONLY (demoted_why) */
    int lib_raced;                 /* a load without REPLACE found the library there */
    int promoted;                  /* INFO: master_replid2 is set (a replica promoted) */
    int lib_fresh;                 /* this handshake loaded the library (its state is new) */
    int epoch_probed;              /* this handshake read the library's epoch (hs_epoch_reset) */
    int epoch_seen;                /* the probe's answer: EPOCH_NONE, EPOCH_OURS or EPOCH_ERROR */
    char *prefix;                  /* the key prefix, for the promoted server's marker */
    char marker[KEYS_PREFIX_MAX + 32 + SERVER_ID_MAX]; /* keys_promoted of server_id */
    int slot;                                          /* one the node serves (Cluster), or -1 */
    uint64_t role_check_ms;    /* last INFO replication probe sent (0 = none in flight) */
    int role_probe;            /* a probe is in flight */
    int ever_ready;            /* was ready at least once */
    int lib_loading;           /* a check or load of the function library is in flight */
    int in_multi;              /* the owner has a MULTI open: send nothing of our own */
    int asking;                /* ASKING before each command of the owner's (rds_set_asking) */
    uint64_t lib_checked_ms;   /* when the library was last checked after a missing function */
    long long lib_newer;       /* version of a newer library found and kept (0: none) */
    struct rds_stats stats;    /* for /metrics */
    struct event *retry_ev;    /* reconnect timer */
    struct event *watch_ev;    /* persistent timeout watchdog */
    struct event *retarget_ev; /* rds_retarget's work, outside any reply callback */
    uint64_t lost_ms;          /* when the last connection was lost (0: never connected) */
    rds_target_fn *target;     /* where to connect now; NULL: host and port above */
    rds_error_fn *on_error;    /* sees every error reply first (a Cluster redirection) */
    void *error_arg;
    void *target_arg;
    rds_state_fn *on_state; /* owner notification */
    void *arg;
};

enum { EPOCH_NONE, EPOCH_OURS, EPOCH_ERROR }; /* rds.epoch_seen */

/* Per-command context: counts outstanding commands for the timeout. */
struct rds_cb {
    struct rds *r;
    rds_reply_fn *fn;
    void *arg;
};

static void rds_connect(struct rds *r);
static int lib_check(struct rds *r, int handshake);

const char *rds_errstr(const redisReply *reply)
{
    if (!reply)
        return "connection lost";
    if (reply->type == REDIS_REPLY_ERROR)
        return reply->str;
    return "unexpected reply type";
}

static void rds_schedule_retry(struct rds *r)
{
    struct timeval tv = {r->backoff_ms / 1000, (r->backoff_ms % 1000) * 1000};

    evtimer_add(r->retry_ev, &tv);
    r->backoff_ms = r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
}

/*
 * Forget the current context and schedule a reconnect. `ac` is freed by the
 * caller (or by hiredis, when it is the one disconnecting).
 */
static void rds_lost(struct rds *r, const char *why)
{
    int was_ready = r->state == RDS_READY;
    char hp[HOSTPORT_STR_MAX];

    r->ac = NULL;
    r->state = RDS_DOWN;
    r->server_id[0] = '\0';
    r->epoch[0] = '\0';
    r->stale = NULL;
    r->role_probe = 0;
    r->in_multi = 0;
    r->lost_ms = clock_ms();
    r->failures++;
    r->stats.errors++;
    if (was_ready)
        log_warn("%s: connection to %s lost: %s; reconnecting", r->name,
                 hostport_str(hp, sizeof(hp), r->host, r->port), why);
    else if (r->failures == 1 || r->failures % 20 == 0)
        log_warn("%s: cannot connect to %s: %s (attempt %d, retrying with backoff)", r->name,
                 hostport_str(hp, sizeof(hp), r->host, r->port), why, r->failures);
    rds_schedule_retry(r);
    if (was_ready && r->on_state)
        r->on_state(r, 0, r->arg);
}

/* Drop the connection on our initiative (timeout, bad handshake). */
static void rds_drop(struct rds *r, const char *why)
{
    redisAsyncContext *ac = r->ac;

    if (r->dns) {
        dns_cancel(r->dns);
        r->dns = NULL;
        rds_lost(r, why);
        return;
    }
    if (!ac)
        return;
    rds_lost(r, why);
    /* Pending callbacks run now with NULL replies; safe inside a callback too. */
    redisAsyncFree(ac);
}

/* Why a connection to a server that became a replica is dropped (on_watch). */
static const char demoted_why[] = "READONLY: the server is a replica now";

/* An error reply on a ready connection: what it says about the server. */
static void reply_error(struct rds *r, const redisReply *reply)
{
    /*
     * The library was flushed or deleted under us: load it again (and say so).
     * Only on the main connection: the push connection's transactions would
     * swallow the check (queued inside MULTI).
     */
    if ((r->flags & RDS_MAIN) && !r->lib_loading &&
        r->progress_ms - r->lib_checked_ms >= LIB_CHECK_MS &&
        strncmp(reply->str, "ERR Function not found", 22) == 0) {
        if (r->lib_newer == 0)
            log_warn("%s: a function of the idpool library is missing (FUNCTION FLUSH or "
                     "DELETE?): %s; loading it again",
                     r->name, reply->str);
        r->lib_checked_ms = r->progress_ms;
        if (lib_check(r, 0) != 0)
            r->lib_loading = 0;
    }
    /* The library's state is new since we validated: validate again (on_watch). */
    if ((r->flags & RDS_WRITER) && strncmp(reply->str, "IDPOOL_UNVALIDATED", 18) == 0)
        r->stale = "a write was refused: the epoch is no longer the validated one";
    /*
     * The server was demoted (a failover): every connection drops it
     * (on_watch, never inside a MULTI), and the reconnect looks for the
     * primary again, through the sentinels when they name it.
     */
    if (strncmp(reply->str, "READONLY", 8) == 0)
        r->stale = demoted_why;
}

static void rds_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct rds_cb *cb = privdata;
    struct rds *r = cb->r;

    (void)ac;
    r->outstanding--;
    r->progress_ms = clock_ms();
    if (reply && ((redisReply *)reply)->type == REDIS_REPLY_ERROR && r->on_error)
        r->on_error(r, reply, r->error_arg);
    if (reply && ((redisReply *)reply)->type == REDIS_REPLY_ERROR && r->state == RDS_READY)
        reply_error(r, reply);
    if (cb->fn)
        cb->fn(r, reply, cb->arg);
    free(cb);
}

/* A callback context for one command; NULL when there is no connection or memory. */
static struct rds_cb *cb_new(struct rds *r, rds_reply_fn *fn, void *arg)
{
    struct rds_cb *cb;

    if (!r->ac || !(cb = malloc(sizeof(*cb))))
        return NULL;
    cb->r = r;
    cb->fn = fn;
    cb->arg = arg;
    return cb;
}

/* Account for a queued command (for the command timeout), or drop its context. */
static int cb_queued(struct rds *r, struct rds_cb *cb, int status)
{
    if (status != REDIS_OK) {
        free(cb);
        return -1;
    }
    if (r->outstanding++ == 0)
        r->progress_ms = clock_ms();
    return 0;
}

static int rds_send(struct rds *r, rds_reply_fn *fn, void *arg, int argc, const char **argv,
                    const size_t *argvlen)
{
    struct rds_cb *cb = cb_new(r, fn, arg);

    if (!cb)
        return -1;
    return cb_queued(r, cb, redisAsyncCommandArgv(r->ac, rds_reply, cb, argc, argv, argvlen));
}

/* ASKING ahead of the owner's next command, while asked to (outside a MULTI: it lasts to EXEC). */
static int ask_first(struct rds *r)
{
    const char *argv[] = {"ASKING"};
    size_t len[] = {6};

    if (!r->asking || r->in_multi)
        return 0;
    return rds_send(r, NULL, NULL, 1, argv, len);
}

int rds_command_resp(struct rds *r, rds_reply_fn *fn, void *arg, const char *cmd, size_t len)
{
    struct rds_cb *cb;

    if (r->state != RDS_READY || ask_first(r) != 0 || !(cb = cb_new(r, fn, arg)))
        return -1;
    return cb_queued(r, cb, redisAsyncFormattedCommand(r->ac, rds_reply, cb, cmd, len));
}

int rds_command_argv(struct rds *r, rds_reply_fn *fn, void *arg, int argc, const char **argv,
                     const size_t *argvlen)
{
    if (r->state != RDS_READY || ask_first(r) != 0)
        return -1;
    return rds_send(r, fn, arg, argc, argv, argvlen);
}

int rds_command(struct rds *r, rds_reply_fn *fn, void *arg, const char *fmt, ...)
{
    struct rds_cb *cb;
    va_list ap;
    int rc;

    if (r->state != RDS_READY || ask_first(r) != 0 || !(cb = cb_new(r, fn, arg)))
        return -1;
    va_start(ap, fmt);
    rc = redisvAsyncCommand(r->ac, rds_reply, cb, fmt, ap);
    va_end(ap);
    return cb_queued(r, cb, rc);
}

/* --- handshake ----------------------------------------------------------- */

static void hs_check_ok(struct rds *r, redisReply *reply, void *arg)
{
    const char *what = arg;

    if (r->state != RDS_HANDSHAKE || !reply)
        return;
    if (reply->type == REDIS_REPLY_ERROR) {
        char why[256];
        snprintf(why, sizeof(why), "%s failed: %s", what, reply->str);
        rds_drop(r, why);
    }
}

/*
 * Copies the value of "name:value\r\n" in an INFO reply into buf; 0, or -1
 * when the field is absent, empty or longer than the buffer.
 */
static int info_field(const char *info, const char *name, char *buf, size_t size)
{
    size_t nlen = strlen(name);
    const char *p = info;

    while ((p = strstr(p, name)) != NULL) {
        if ((p == info || p[-1] == '\n') && p[nlen] == ':') {
            size_t n = strcspn(p + nlen + 1, "\r\n");
            if (n == 0 || n >= size)
                return -1;
            memcpy(buf, p + nlen + 1, n);
            buf[n] = '\0';
            return 0;
        }
        p += nlen;
    }
    return -1;
}

/*
 * The server's identity from INFO server + replication: "run_id:master_replid"
 * into epoch (the base of the epochs idpool_validate chooses). A restart
 * changes run_id, a failover or a demotion changes master_replid. Refuses a
 * replica: only a primary is ever validated or written to. NULL, or why the
 * reply cannot be used.
 */
static const char *info_epoch(const redisReply *reply, char *epoch, size_t size, int need_run_id)
{
    char run_id[48], replid[48], role[16];

    if (!reply || reply->type != REDIS_REPLY_STRING)
        return "INFO failed";
    if (info_field(reply->str, "role", role, sizeof(role)) != 0 ||
        info_field(reply->str, "master_replid", replid, sizeof(replid)) != 0)
        return "INFO replication gave no role or master_replid";
    if (strcmp(role, "master") != 0)
        return "the server is a replica (role:slave): pools must be written on the primary";
    if (need_run_id) {
        if (info_field(reply->str, "run_id", run_id, sizeof(run_id)) != 0)
            return "INFO server gave no run_id";
        snprintf(epoch, size, "%s:%s", run_id, replid);
    } else {
        snprintf(epoch, size, "%s", replid);
    }
    return NULL;
}

static void hs_info(struct rds *r, redisReply *reply, void *arg)
{
    const char *err;
    char replid2[48];

    (void)arg;
    if (r->state != RDS_HANDSHAKE || !reply)
        return;
    if ((err = info_epoch(reply, r->server_id, sizeof(r->server_id), 1)) != NULL) {
        rds_drop(r, err);
        return;
    }
    /* a server that never was a replica has no second replication id: all zeros */
    r->promoted = info_field(reply->str, "master_replid2", replid2, sizeof(replid2)) == 0 &&
                  strspn(replid2, "0") != strlen(replid2);
}

/*
 * A writer's second probe: the library's validated epoch. Another one, or
 * none, means the library's state is new since we validated (FUNCTION LOAD,
 * DEBUG RELOAD or a restore into this process, a full resync): validate
 * again, so that our writes carry the new epoch and the sweep discards what
 * the old one wrote.
 */
static void on_validated(struct rds *r, redisReply *reply, void *arg)
{
    (void)arg;
    r->role_probe = 0;
    if (r->state != RDS_READY || !reply || reply->type == REDIS_REPLY_ERROR)
        return; /* a missing library is loaded again by the main connection */
    if (reply->type != REDIS_REPLY_STRING || strcmp(reply->str, r->epoch) != 0)
        r->stale = reply->type == REDIS_REPLY_STRING
                       ? "another daemon validated a new epoch (the library's state is new)"
                       : "the function library has no validated epoch (reloaded, restored or "
                         "resynced since we validated)";
}

/*
 * Periodic probe while connected: a replica promoted in place (failover
 * behind a fixed address) or a primary demoted to a replica keeps the
 * connection but changes master_replid. The pools it holds may then contain
 * IDs already handed out elsewhere: reconnect, so that a new epoch makes
 * idpool_epoch discard them. Writers then read the validated epoch.
 */
static void on_role(struct rds *r, redisReply *reply, void *arg)
{
    char replid[48];
    const char *err, *mine;

    (void)arg;
    r->role_probe = 0;
    if (r->state != RDS_READY || !reply)
        return;
    if ((err = info_epoch(reply, replid, sizeof(replid), 0)) != NULL) {
        char why[160];
        snprintf(why, sizeof(why), "failover check: %s", err);
        rds_drop(r, why);
        return;
    }
    mine = strchr(r->server_id, ':');
    if (!mine || strcmp(mine + 1, replid) != 0) {
        char why[200];
        snprintf(why, sizeof(why), "failover detected: master_replid changed from %s to %s",
                 mine ? mine + 1 : "?", replid);
        rds_drop(r, why);
        return;
    }
    if ((r->flags & RDS_WRITER) && !r->in_multi) {
        const char *argv[] = {"FCALL_RO", "idpool_validated", "0"};
        size_t len[] = {8, 16, 1};
        if (rds_send(r, on_validated, NULL, 3, argv, len) == 0)
            r->role_probe = 1;
    }
}

static void hs_policy(struct rds *r, redisReply *reply, void *arg)
{
    (void)arg;
    if (r->state != RDS_HANDSHAKE || !reply)
        return;
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
        reply->element[1]->type == REDIS_REPLY_STRING) {
        if (strcmp(reply->element[1]->str, "noeviction") != 0)
            log_warn("redis: maxmemory-policy is '%s'; use 'noeviction' so that Redis never "
                     "evicts pools, meta or locks (evicted meta is re-initialised from a fresh "
                     "lease, losing the pool's IDs as a gap)",
                     reply->element[1]->str);
    } else {
        log_info("redis: cannot read maxmemory-policy (%s); make sure it is 'noeviction'",
                 rds_errstr(reply));
    }
}

/*
 * The function library. idpoold loads its own only when the one in Redis is
 * missing (a fresh server, FUNCTION FLUSH/DELETE) or older: a newer one is
 * never replaced (a rolling upgrade or rollback of the daemons), and an
 * equal one is not reloaded, which would reset its state (the validated
 * epoch of idpool_take) under the other daemons. The push path does not
 * depend on it for safety: it commits only on the guard's verdict.
 */
static void hs_ready(struct rds *r);
static void hs_validate(struct rds *r);

/* A FUNCTION LOAD of ours was refused: drop the handshake, or say so. */
static void lib_load_failed(struct rds *r, const redisReply *reply, int handshake)
{
    char why[384];
    const char *hint =
        strncmp(reply->str, "NOPERM", 6) == 0
            ? "this Redis user may not run FUNCTION LOAD: grant it, e.g. ACL SETUSER <user> "
              "+function|load +fcall +fcall_ro"
        : strncasecmp(reply->str, "ERR unknown command", 19) == 0
            ? "Redis >= 7.0 is needed"
            : "Redis >= 7.0 with FUNCTION LOAD allowed for this user is needed";

    snprintf(why, sizeof(why), "FUNCTION LOAD of the idpool library (version %d) failed: %s (%s)",
             IDPOOL_LIB_VERSION, reply->str, hint);
    if (handshake)
        rds_drop(r, why);
    else
        log_error("%s: %s; pools cannot be checked or refilled until it is loaded", r->name, why);
}

static void lib_loaded(struct rds *r, redisReply *reply, void *arg)
{
    int handshake = arg != NULL;

    r->lib_loading = 0;
    if (handshake && r->state != RDS_HANDSHAKE)
        return;
    if (!reply)
        return;
    if (reply->type == REDIS_REPLY_ERROR && strstr(reply->str, "already exists")) {
        /* another daemon loaded it meanwhile: look at its version again (once: a
         * library of that name without our functions is then replaced) */
        r->lib_raced = 1;
        if (lib_check(r, handshake) != 0) {
            r->lib_loading = 0;
            if (handshake)
                rds_drop(r, "cannot queue the library check");
        }
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        lib_load_failed(r, reply, handshake);
        return;
    }
    r->lib_raced = 0;
    r->lib_fresh = handshake;
    if (!handshake)
        log_warn("%s: the idpool function library (version %d) was loaded again", r->name,
                 IDPOOL_LIB_VERSION);
    if (handshake)
        hs_validate(r);
}

static void lib_version(struct rds *r, redisReply *reply, void *arg)
{
    int handshake = arg != NULL;
    static const char lib[] = IDPOOL_LUA_SOURCE;
    const char *argv[] = {"FUNCTION", "LOAD", "REPLACE", lib};
    size_t len[] = {8, 4, 7, sizeof(lib) - 1};
    int missing = reply && reply->type == REDIS_REPLY_ERROR && !r->lib_raced;

    if ((handshake && r->state != RDS_HANDSHAKE) || !reply) {
        r->lib_loading = 0;
        return;
    }
    r->lib_raced = reply->type == REDIS_REPLY_INTEGER ? 0 : r->lib_raced;
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer >= IDPOOL_LIB_VERSION) {
        r->lib_loading = 0;
        if (reply->integer > IDPOOL_LIB_VERSION && reply->integer != r->lib_newer)
            log_warn("%s: a newer idpool function library (version %lld) is loaded; this daemon "
                     "(library version %d) keeps it",
                     r->name, reply->integer, IDPOOL_LIB_VERSION);
        r->lib_newer = reply->integer > IDPOOL_LIB_VERSION ? reply->integer : 0;
        if (handshake)
            hs_validate(r);
        return;
    }
    r->lib_newer = 0;
    /*
     * A load resets the library's state, and with it the epoch that another
     * connection (of this daemon or another) may have just validated: a
     * missing library is loaded without REPLACE, so that of two connections
     * that found it missing together the second does not undo the first's
     * load (it gets "already exists", looks again and validates into the
     * same epoch).
     */
    if (reply->type == REDIS_REPLY_INTEGER)
        log_info("%s: replacing the idpool function library version %lld with version %d", r->name,
                 reply->integer, IDPOOL_LIB_VERSION);
    if (missing) {
        argv[2] = lib;
        len[2] = sizeof(lib) - 1;
    }
    if (rds_send(r, lib_loaded, arg, missing ? 3 : 4, argv, len) != 0) {
        r->lib_loading = 0;
        if (handshake)
            rds_drop(r, "cannot queue FUNCTION LOAD");
    }
}

void rds_check_library(struct rds *r)
{
    uint64_t now = clock_ms();

    if (r->state != RDS_READY || r->lib_loading || now - r->lib_checked_ms < LIB_CHECK_MS)
        return;
    r->lib_checked_ms = now;
    if (lib_check(r, 0) != 0)
        r->lib_loading = 0;
}

/* Look at the loaded library and load ours if it is missing or older. */
static int lib_check(struct rds *r, int handshake)
{
    const char *argv[] = {"FCALL_RO", "idpool_version", "0"};
    size_t len[] = {8, 14, 1};

    r->lib_loading = 1;
    return rds_send(r, lib_version, handshake ? r : NULL, 3, argv, len);
}

static void hs_validated(struct rds *r, redisReply *reply, void *arg)
{
    char why[320];

    (void)arg;
    if (r->state != RDS_HANDSHAKE || !reply)
        return;
    if (reply->type != REDIS_REPLY_STRING || reply->len >= sizeof(r->epoch)) {
        snprintf(why, sizeof(why), "idpool_validate failed: %.250s", rds_errstr(reply));
        rds_drop(r, why);
        return;
    }
    memcpy(r->epoch, reply->str, reply->len + 1);
    hs_ready(r);
}

/*
 * A promoted replica's replicas may hold an epoch of their own: a former
 * primary demoted and resynced partially keeps its library's state, with
 * the epoch it was validated under. Promoted back before the sweep of its
 * successor, it would serve takes from pools written under that epoch,
 * which the successor may have handed out since. So the first writer to
 * validate a promoted server resets the library's state everywhere:
 * FUNCTION LOAD replicates, and a replica loading it forgets its epoch.
 *
 * Once per promotion, or the reset of a second daemon would wipe the epoch
 * the first validated meanwhile (its pushes refused until it noticed). So
 * the reset and the server's marker (keys_promoted) are one transaction,
 * under a WATCH of the marker taken before the library's epoch was read: of
 * two daemons that found no epoch of this server, the second's EXEC is
 * aborted, and both validate after the one reset, into one epoch.
 * Only when the library is ours (a newer one is never replaced) and only
 * on the main connection, the push connection waiting until it is done.
 */
static void hs_epoch_probe(struct rds *r, redisReply *reply, void *arg)
{
    size_t base = strlen(r->server_id);

    (void)arg;
    if (r->state != RDS_HANDSHAKE || !reply)
        return;
    r->epoch_seen = reply->type == REDIS_REPLY_ERROR ? EPOCH_ERROR
                    : reply->type == REDIS_REPLY_STRING && reply->len > base &&
                            strncmp(reply->str, r->server_id, base) == 0 && reply->str[base] == ':'
                        ? EPOCH_OURS
                        : EPOCH_NONE;
}

static void hs_reset_queued(struct rds *r, redisReply *reply, void *arg)
{
    if (r->state != RDS_HANDSHAKE || !reply || reply->type != REDIS_REPLY_ERROR)
        return;
    if (arg)
        lib_load_failed(r, reply, 1);
    else
        hs_check_ok(r, reply, "the library reset");
}

static void hs_reset_undone(struct rds *r, redisReply *reply, void *arg)
{
    (void)reply;
    (void)arg;
    rds_drop(r, "the library reset of the promoted server failed (its marker removed)");
}

static void hs_reset_done(struct rds *r, redisReply *reply, void *arg)
{
    char hp[HOSTPORT_STR_MAX];

    (void)arg;
    r->lib_loading = 0;
    if (r->state != RDS_HANDSHAKE || !reply)
        return;
    if (reply->type == REDIS_REPLY_NIL) {
        log_info("%s: another daemon reset the library of the promoted %s first: validating "
                 "into its epoch",
                 r->name, hostport_str(hp, sizeof(hp), r->host, r->port));
        hs_validate(r);
        return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) {
        char why[320];
        snprintf(why, sizeof(why), "the library reset failed: %.250s", rds_errstr(reply));
        rds_drop(r, why);
        return;
    }
    if (reply->element[1]->type == REDIS_REPLY_ERROR) {
        /* not reset after all: the next daemon (or our next handshake) tries */
        const char *argv[] = {"DEL", r->marker};
        size_t len[] = {3, strlen(r->marker)};
        lib_load_failed(r, reply->element[1], 0);
        if (rds_send(r, hs_reset_undone, NULL, 2, argv, len) != 0)
            rds_drop(r, "cannot queue the DEL of the promoted server's marker");
        return;
    }
    log_info("%s: %s was promoted: loaded the idpool library again so that its replicas forget "
             "their epochs",
             r->name, hostport_str(hp, sizeof(hp), r->host, r->port));
    r->lib_fresh = 1;
    hs_validate(r);
}

static void hs_epoch_reset(struct rds *r, redisReply *reply, void *arg)
{
    char hp[HOSTPORT_STR_MAX];
    static const char lib[] = IDPOOL_LUA_SOURCE;
    const char *load[] = {"FUNCTION", "LOAD", "REPLACE", lib};
    size_t load_len[] = {8, 4, 7, sizeof(lib) - 1};
    const char *set[] = {"SET", r->marker, "1", "PX", PROMOTED_TTL};
    size_t set_len[] = {3, strlen(r->marker), 1, 2, sizeof(PROMOTED_TTL) - 1};
    const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"}, *unwatch[] = {"UNWATCH"};
    size_t multi_len[] = {5}, exec_len[] = {4}, unwatch_len[] = {7};
    int done = r->epoch_seen != EPOCH_NONE; /* an error is idpool_validate's to report */

    (void)arg;
    if (r->state != RDS_HANDSHAKE || !reply)
        return;
    r->epoch_probed = 1;
    done |= reply->type == REDIS_REPLY_INTEGER && reply->integer > 0;
    if (!done && r->lib_newer)
        log_warn("%s: %s was promoted, but a newer idpool library (version %lld) is loaded: "
                 "this daemon does not reload it, so its replicas keep their epochs until a "
                 "daemon of that version does",
                 r->name, hostport_str(hp, sizeof(hp), r->host, r->port), r->lib_newer);
    if (done || r->lib_newer || !(r->flags & RDS_MAIN)) {
        if ((r->flags & RDS_MAIN) &&
            rds_send(r, hs_check_ok, "UNWATCH", 1, unwatch, unwatch_len) != 0)
            rds_drop(r, "cannot queue UNWATCH");
        else if (!done && !r->lib_newer)
            rds_drop(r, "the promoted server's replicas may hold an epoch: waiting for the main "
                        "connection to reset the library");
        else
            hs_validate(r);
        return;
    }
    r->lib_loading = 1;
    if (rds_send(r, hs_check_ok, "MULTI", 1, multi, multi_len) != 0 ||
        rds_send(r, hs_reset_queued, NULL, 5, set, set_len) != 0 ||
        rds_send(r, hs_reset_queued, r, 4, load, load_len) != 0 ||
        rds_send(r, hs_reset_done, NULL, 1, exec, exec_len) != 0) {
        r->lib_loading = 0;
        rds_drop(r, "cannot queue the library reset");
    }
}

/*
 * A writer validates the server: after INFO said, on this connection, that
 * it is a primary (hs_info drops a replica, and its reply came before the
 * library's), it asks idpool_validate for the epoch its writes carry. The
 * other connections (the issuer's) only take, and validate nothing.
 */
static void hs_validate(struct rds *r)
{
    char nonce[2 * NONCE_BYTES + 1];
    const char *argv[] = {"FCALL", "idpool_validate", "0", r->server_id, nonce};
    size_t len[] = {5, 15, 1, strlen(r->server_id), 2 * NONCE_BYTES};

    if (!(r->flags & RDS_WRITER)) {
        hs_ready(r);
        return;
    }
    if (!r->server_id[0]) {
        rds_drop(r, "no run_id:master_replid from INFO before idpool_validate");
        return;
    }
    if (r->promoted && !r->lib_fresh && !r->epoch_probed) {
        const char *watch[] = {"WATCH", r->marker}, *exists[] = {"EXISTS", r->marker};
        const char *probe[] = {"FCALL_RO", "idpool_validated", "0"};
        char tag[KEYS_SLOT_TAG_MAX];
        size_t mlen;

        if (r->slot >= 0)
            keys_slot_tag((unsigned)r->slot, tag);
        mlen = (size_t)keys_promoted(r->prefix, r->slot >= 0 ? tag : NULL, r->server_id, r->marker,
                                     sizeof(r->marker));
        size_t wlen[] = {5, mlen}, elen[] = {6, mlen}, plen[] = {8, 16, 1};

        if (((r->flags & RDS_MAIN) && rds_send(r, hs_check_ok, "WATCH", 2, watch, wlen) != 0) ||
            rds_send(r, hs_epoch_probe, NULL, 3, probe, plen) != 0 ||
            rds_send(r, hs_epoch_reset, NULL, 2, exists, elen) != 0)
            rds_drop(r, "cannot queue the epoch probe");
        return;
    }
    if (token_random_hex(nonce, NONCE_BYTES) != 0) {
        rds_drop(r, "no random numbers from the kernel (getrandom failed) for a new epoch");
        return;
    }
    if (rds_send(r, hs_validated, NULL, 5, argv, len) != 0)
        rds_drop(r, "cannot queue idpool_validate");
}

static void hs_ready(struct rds *r)
{
    char hp[HOSTPORT_STR_MAX];

    r->state = RDS_READY;
    r->backoff_ms = BACKOFF_MIN_MS;
    if (r->ever_ready)
        r->stats.reconnects++;
    r->ever_ready = 1;
    r->role_check_ms = clock_ms();
    log_info("%s: connected to %s db %d (%s %s)%s", r->name,
             hostport_str(hp, sizeof(hp), r->host, r->port), r->db,
             r->epoch[0] ? "epoch" : "server", r->epoch[0] ? r->epoch : r->server_id,
             r->failures ? ", recovered" : "");
    r->failures = 0;
    if (r->on_state)
        r->on_state(r, 1, r->arg);
}

static void rds_handshake(struct rds *r)
{
    char db[16];
    int n = 0;
    int ok = 0;

    r->state = RDS_HANDSHAKE;
    r->state_since_ms = clock_ms();
    r->promoted = r->lib_fresh = r->epoch_probed = 0;
    r->epoch_seen = EPOCH_NONE;
    if (r->password) {
        const char *argv[3] = {"AUTH"};
        size_t len[3] = {4};
        if (r->user) {
            argv[1] = r->user;
            argv[2] = r->password;
            n = 3;
        } else {
            argv[1] = r->password;
            n = 2;
        }
        len[1] = strlen(argv[1]);
        len[2] = n == 3 ? strlen(argv[2]) : 0;
        ok |= rds_send(r, hs_check_ok, "AUTH", n, argv, len);
    }
    snprintf(db, sizeof(db), "%d", r->db);
    {
        const char *argv[] = {"SELECT", db};
        size_t len[] = {6, strlen(db)};
        ok |= rds_send(r, hs_check_ok, "SELECT", 2, argv, len);
    }
    {
        const char *argv[] = {"INFO", "server", "replication"};
        size_t len[] = {4, 6, 11};
        ok |= rds_send(r, hs_info, NULL, 3, argv, len);
    }
    if (r->flags & RDS_MAIN) {
        const char *argv[] = {"CONFIG", "GET", "maxmemory-policy"};
        size_t len[] = {6, 3, 16};
        ok |= rds_send(r, hs_policy, NULL, 3, argv, len);
    }
    ok |= lib_check(r, 1);
    if (ok != 0)
        rds_drop(r, "cannot queue handshake commands");
}

/* --- connection lifecycle ------------------------------------------------ */

static void on_connect(const redisAsyncContext *ac, int status)
{
    struct rds *r = ac->data;

    if (r->ac != ac)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback. */
        rds_lost(r, ac->errstr[0] ? ac->errstr : "connect failed");
        return;
    }
    rds_handshake(r);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    struct rds *r = ac->data;

    (void)status;
    if (r->ac != ac)
        return; /* we dropped it ourselves: already handled */
    rds_lost(r, ac->errstr[0] ? ac->errstr : "server closed the connection");
}

/* Where the target says the server is now: 0, or 1 (not known yet: RDS_RESOLVING). */
static int rds_resolve(struct rds *r, uint64_t since_ms)
{
    const char *host;
    int port;
    char *copy;

    if (r->target(r, since_ms, &host, &port, r->target_arg) != 0)
        return 1;
    if (strcmp(host, r->host) != 0) {
        if ((copy = strdup(host)) == NULL)
            return 1;
        free(r->host);
        r->host = copy;
    }
    r->port = port;
    return 0;
}

/* Connect to ip, the numeric address of r->host (which the log keeps naming). */
static void rds_connect_ip(struct rds *r, const char *ip)
{
    redisAsyncContext *ac = redisAsyncConnect(ip, r->port);

    if (!ac) {
        rds_lost(r, "out of memory");
        return;
    }
    if (ac->err) {
        char why[256];
        snprintf(why, sizeof(why), "%s", ac->errstr);
        redisAsyncFree(ac);
        rds_lost(r, why);
        return;
    }
    ac->data = r;
    if (redisLibeventAttach(ac, r->base) != REDIS_OK) {
        redisAsyncFree(ac);
        rds_lost(r, "cannot attach to the event loop");
        return;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    r->ac = ac;
    r->state = RDS_CONNECTING;
}

static void on_lookup(const char *ip, const char *err, void *arg)
{
    struct rds *r = arg;

    r->dns = NULL;
    if (!ip)
        rds_lost(r, err);
    else
        rds_connect_ip(r, ip);
}

/*
 * Connect to the server: its host name is looked up off the event loop
 * first (dns.c; hiredis would block the loop on getaddrinfo), a numeric
 * address is used as it is.
 */
static void rds_connect(struct rds *r)
{
    char ip[DNS_IP_MAX], why[160];

    r->state_since_ms = clock_ms();
    /* every reconnect asks the target again: what it said before the loss may be the cause */
    if (r->target && rds_resolve(r, r->lost_ms) != 0) {
        r->state = RDS_RESOLVING;
        return;
    }
    switch (dns_lookup(r->base, r->host, on_lookup, r, &r->dns, ip, sizeof(ip), why, sizeof(why))) {
    case 0:
        rds_connect_ip(r, ip);
        break;
    case 1:
        r->state = RDS_LOOKUP;
        break;
    default:
        rds_lost(r, why);
        break;
    }
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    rds_connect(arg);
}

/*
 * The target has a new answer: a connection waiting for one, or waiting
 * out a backoff since a loss older than the answer, connects now; one made
 * to another address is dropped and made again at once to the new one.
 */
static void on_retarget(evutil_socket_t fd, short what, void *arg)
{
    struct rds *r = arg;
    char hp[HOSTPORT_STR_MAX], why[HOSTPORT_STR_MAX + 32];
    const char *host;
    int port;

    (void)fd;
    (void)what;
    if (r->state == RDS_RESOLVING) {
        rds_connect(r);
        return;
    }
    /* waiting out a backoff: an answer newer than the loss is worth trying now */
    if (r->state == RDS_DOWN) {
        if (r->target(r, r->lost_ms, &host, &port, r->target_arg) == 0) {
            evtimer_del(r->retry_ev);
            rds_connect(r);
        }
        return;
    }
    switch (r->target(r, 0, &host, &port, r->target_arg)) {
    case RDS_TARGET_PARKED:
        rds_drop(r, "the node serves nothing now; waiting until it does");
        evtimer_del(r->retry_ev);
        r->state = RDS_RESOLVING;
        return;
    case RDS_TARGET_AT:
        if (port != r->port || strcmp(host, r->host) != 0)
            break;
        return;
    default:
        return;
    }
    snprintf(why, sizeof(why), "the primary is %s now", hostport_str(hp, sizeof(hp), host, port));
    rds_drop(r, why);
    /* the answer is newer than this loss: use it now, without a backoff */
    evtimer_del(r->retry_ev);
    r->lost_ms = 0;
    rds_connect(r);
}

void rds_kick(struct rds *r)
{
    static const struct timeval now = {0, 0};

    if (r == NULL || r->state != RDS_DOWN)
        return;
    r->backoff_ms = BACKOFF_MIN_MS;
    evtimer_add(r->retry_ev, &now); /* replaces the pending timeout */
}

/* hiredis 0.14 has no timeouts: enforce connect and command timeouts here. */
static void on_watch(evutil_socket_t fd, short what, void *arg)
{
    struct rds *r = arg;
    uint64_t now = clock_ms();

    (void)fd;
    (void)what;
    if ((r->state == RDS_LOOKUP || r->state == RDS_CONNECTING || r->state == RDS_HANDSHAKE) &&
        now - r->state_since_ms > (uint64_t)r->timeout_ms) {
        rds_drop(r, r->state == RDS_LOOKUP       ? "no answer from the resolver (host name lookup "
                                                   "timed out)"
                    : r->state == RDS_CONNECTING ? "connect timed out"
                                                 : "handshake timed out");
    } else if (r->state == RDS_READY && r->outstanding > 0 &&
               now - r->progress_ms > (uint64_t)r->timeout_ms) {
        char why[96];
        snprintf(why, sizeof(why), "no reply for %d ms (%u commands pending)", r->timeout_ms,
                 r->outstanding);
        rds_drop(r, why);
    } else if (r->state == RDS_READY && r->stale && !r->in_multi) {
        char why[200];
        snprintf(why, sizeof(why), "%s; %s", r->stale,
                 r->stale == demoted_why ? "looking for the primary again" : "validating again");
        rds_drop(r, why);
    } else if (r->state == RDS_READY && !r->role_probe && !r->in_multi &&
               now - r->role_check_ms >= ROLE_CHECK_MS) {
        const char *argv[] = {"INFO", "replication"};
        size_t len[] = {4, 11};
        r->role_check_ms = now;
        if (rds_send(r, on_role, NULL, 2, argv, len) == 0)
            r->role_probe = 1;
    }
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

struct rds *rds_new(struct event_base *base, const struct config *cfg, unsigned flags,
                    rds_state_fn *on_state, void *arg)
{
    struct rds *r = calloc(1, sizeof(*r));
    struct timeval tv;
    int period;

    if (!r)
        return NULL;
    r->base = base;
    r->flags = flags;
    r->name = (flags & RDS_MAIN) ? "redis" : "redis-push";
    r->host = strdup(cfg->redis.host);
    r->port = cfg->redis.port;
    r->user = dup_or_null(cfg->redis.user);
    r->password = dup_or_null(cfg->redis.password);
    r->prefix = strdup(cfg->key_prefix);
    r->slot = -1;
    r->db = cfg->redis.db;
    r->timeout_ms = cfg->redis_timeout_ms;
    r->backoff_ms = BACKOFF_MIN_MS;
    r->on_state = on_state;
    r->arg = arg;
    r->retry_ev = evtimer_new(base, on_retry, r);
    r->watch_ev = event_new(base, -1, EV_PERSIST, on_watch, r);
    r->retarget_ev = evtimer_new(base, on_retarget, r);
    if (!r->host || !r->prefix || !r->retry_ev || !r->watch_ev || !r->retarget_ev) {
        rds_free(r);
        return NULL;
    }
    period = r->timeout_ms / 4 < 10 ? 10 : r->timeout_ms / 4 > 250 ? 250 : r->timeout_ms / 4;
    tv.tv_sec = 0;
    tv.tv_usec = period * 1000;
    evtimer_add(r->watch_ev, &tv);
    /* from the loop, so that the owner can still rds_set_target */
    event_active(r->retry_ev, EV_TIMEOUT, 1);
    return r;
}

void rds_set_name(struct rds *r, const char *name)
{
    r->name = name;
}

void rds_set_target(struct rds *r, rds_target_fn *fn, void *arg)
{
    r->target = fn;
    r->target_arg = arg;
}

void rds_set_slot(struct rds *r, int slot)
{
    r->slot = slot;
}

void rds_set_on_error(struct rds *r, rds_error_fn *fn, void *arg)
{
    r->on_error = fn;
    r->error_arg = arg;
}

void rds_retarget(struct rds *r)
{
    if (r->target)
        event_active(r->retarget_ev, EV_TIMEOUT, 1);
}

void rds_where(const struct rds *r, char *buf, size_t size)
{
    hostport_str(buf, size, r->host, r->port);
}

void rds_free(struct rds *r)
{
    if (!r)
        return;
    dns_cancel(r->dns);
    r->dns = NULL;
    if (r->ac) {
        redisAsyncContext *ac = r->ac;
        r->ac = NULL;
        r->state = RDS_DOWN;
        r->on_state = NULL;
        redisAsyncFree(ac);
    }
    if (r->retry_ev)
        event_free(r->retry_ev);
    if (r->watch_ev)
        event_free(r->watch_ev);
    if (r->retarget_ev)
        event_free(r->retarget_ev);
    free(r->host);
    free(r->user);
    free(r->password);
    free(r->prefix);
    free(r);
}

void rds_get_stats(const struct rds *r, struct rds_stats *out)
{
    *out = r->stats;
}

int rds_ready(const struct rds *r)
{
    return r->state == RDS_READY;
}

const char *rds_epoch(const struct rds *r)
{
    return r->epoch;
}

void rds_flush(struct rds *r)
{
    if (r->ac && !(r->ac->c.flags & REDIS_DISCONNECTING))
        redisAsyncHandleWrite(r->ac);
}

unsigned rds_outstanding(const struct rds *r)
{
    return r->outstanding;
}

void rds_in_multi(struct rds *r, int open)
{
    r->in_multi = open;
}

void rds_set_asking(struct rds *r, int on)
{
    r->asking = on;
}

int rds_asking(const struct rds *r)
{
    return r->asking;
}

void rds_set_timeout(struct rds *r, int timeout_ms)
{
    r->timeout_ms = timeout_ms;
}
