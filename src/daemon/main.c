/*
 * idpoold — keeps every application's Redis ID pool topped up.
 *
 * Boot: parse config -> open stores (MySQL worker, Redis node map) ->
 * refill loop -> signals -> event loop -> teardown.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "build_config.h"
#include "access.h"
#include "alerts.h"
#include "api.h"
#include "config.h"
#include "dns.h"
#include "statushttp.h"
#include "fault.h"
#include "http.h"
#include "log.h"
#include "node.h"
#include "notify.h"
#include "refill.h"
#include "store.h"
#include "url.h"

#define SHUTDOWN_GRACE_MS 1500

struct daemon {
    struct event_base *base;
    struct config cfg; /* settings in force */
    int argc;          /* kept for SIGHUP re-parsing */
    char **argv;
    struct store *store;
    struct nodemap *map; /* the Redis nodes and their connections */
    struct alerts *alerts;
    struct refill *refill;
    struct statushttp *http;
    struct access *access;           /* API tokens, Redis users of direct clients */
    struct api *api;                 /* the ID API (listens nowhere when api is empty) */
    struct status_source refill_src; /* the refill loop's views, completed by src_daemon */
    struct notify *notify;           /* sd_notify: readiness, status, watchdog (systemd) */
    struct event *ev_term, *ev_int, *ev_hup;
    struct event *ev_grace; /* bounds a graceful shutdown */
    int stopping;
};

static const char *env_get(const char *name)
{
    return getenv(name);
}

static void on_node_state(struct node *n, int ready, void *arg)
{
    struct daemon *d = arg;

    if (d->refill)
        refill_node_state(d->refill, n, ready);
    if (d->access)
        access_node_state(d->access, n, ready);
}

/* The status views: the refill loop's, with the ID API's counters added. */
static void src_each(void *ctx, status_app_fn *fn, void *arg)
{
    struct daemon *d = ctx;

    d->refill_src.each_app(d->refill_src.ctx, fn, arg);
}

static int src_one(void *ctx, const char *key, status_app_fn *fn, void *arg)
{
    struct daemon *d = ctx;

    return d->refill_src.one_app(d->refill_src.ctx, key, fn, arg);
}

static void src_daemon(void *ctx, struct daemon_view *out)
{
    struct daemon *d = ctx;
    struct api_stats st;
    int loaded;

    _Static_assert(sizeof(st.requests) == sizeof(out->api_requests), "API_CODES and daemon_view");
    d->refill_src.daemon(d->refill_src.ctx, out);
    nodemap_view(d->map, out);
    api_get_stats(d->api, &st);
    memcpy(out->api_requests, st.requests, sizeof(out->api_requests));
    out->api_ids = st.ids;
    out->api_takes = st.takes;
    out->api_buffered = st.buffered;
    out->api_tokens = access_tokens(d->access, &loaded);
    out->api_tokens_loaded = loaded;
    out->api_no_token = st.auth_failures[API_AUTH_MISSING];
    out->api_bad_token = st.auth_failures[API_AUTH_UNKNOWN];
    statushttp_get_closes(d->http, out->http_closes[0]);
    memcpy(out->http_closes[1], st.closes, sizeof(out->http_closes[1]));
}

static void on_stopped(void *arg)
{
    struct daemon *d = arg;

    log_info("in-flight work finished and locks released");
    event_base_loopbreak(d->base);
}

static void on_grace(evutil_socket_t fd, short what, void *arg)
{
    struct daemon *d = arg;

    (void)fd;
    (void)what;
    log_warn("shutdown: work still in flight after %d ms; exiting anyway (locks expire by "
             "their TTL, unpushed leases become gaps)",
             SHUTDOWN_GRACE_MS);
    event_base_loopbreak(d->base);
}

/* SIGTERM/SIGINT: stop refilling, finish in-flight work, release locks. Twice: exit now. */
static void on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
    struct daemon *d = arg;
    struct timeval tv = {SHUTDOWN_GRACE_MS / 1000, (SHUTDOWN_GRACE_MS % 1000) * 1000};

    (void)what;
    if (d->stopping) {
        log_warn("%s again: exiting at once", strsignal((int)sig));
        _exit(1);
    }
    d->stopping = 1;
    log_info("%s: stopping: finishing in-flight refills, releasing locks", strsignal((int)sig));
    notify_stopping(d->notify);
    evtimer_add(d->ev_grace, &tv);
    refill_shutdown(d->refill, on_stopped, d);
}

static void warn_restart_needed(const char *name, const char *a, const char *b)
{
    if (strcmp(a ? a : "", b ? b : "") != 0)
        log_warn("reload: %s changed; the new value takes effect after a restart", name);
}

/* SIGHUP: re-read the configuration (a bad one is rejected) and the rows. */
static void on_hup(evutil_socket_t sig, short what, void *arg)
{
    struct daemon *d = arg;
    struct config nc;
    char err[CONFIG_ERR_MAX];
    enum config_result rc;
    const char *rejected = NULL;

    (void)sig;
    (void)what;
    log_info("SIGHUP: reloading configuration and applications");
    rc = config_load(&nc, d->argc, d->argv, env_get, err, sizeof(err));
    if (rc != CONFIG_OK) {
        rejected = rc == CONFIG_ERROR ? err : "unexpected --help/--version";
        log_error("reload: configuration rejected, keeping the current one: %s", rejected);
        if (rc != CONFIG_ERROR)
            config_free(&nc);
        api_configure(d->api, &d->cfg); /* reopens the access log all the same (logrotate) */
    } else {
        warn_restart_needed("redis", d->cfg.redis_url, nc.redis_url);
        warn_restart_needed("mysql", d->cfg.mysql_url, nc.mysql_url);
        warn_restart_needed("key-prefix", d->cfg.key_prefix, nc.key_prefix);
        warn_restart_needed("http", d->cfg.http_addr, nc.http_addr);
        warn_restart_needed("api", d->cfg.api_addr, nc.api_addr);
        warn_restart_needed("api-tls-cert", d->cfg.api_tls_cert, nc.api_tls_cert);
        warn_restart_needed("api-tls-key", d->cfg.api_tls_key, nc.api_tls_key);
        if (d->cfg.refill != nc.refill || d->cfg.api_max_conns != nc.api_max_conns ||
            d->cfg.api_max_per_addr != nc.api_max_per_addr)
            log_warn("reload: refill, api-max-connections or api-max-connections-per-address "
                     "changed; the new value takes effect after a restart");
        warn_restart_needed("instance", d->cfg.instance, nc.instance);
        warn_restart_needed("alert-webhook", d->cfg.alert_webhook, nc.alert_webhook);
        if (d->cfg.http_max_conns != nc.http_max_conns ||
            d->cfg.http_max_per_addr != nc.http_max_per_addr ||
            d->cfg.http_timeout_ms != nc.http_timeout_ms ||
            d->cfg.http_head_timeout_ms != nc.http_head_timeout_ms)
            log_warn("reload: http-max-connections, http-max-connections-per-address, "
                     "http-timeout-ms or http-head-timeout-ms changed; the new value takes effect "
                     "after a restart");
        if (d->cfg.mysql_timeout_ms != nc.mysql_timeout_ms)
            log_warn("reload: mysql-timeout-ms changed; the new value takes effect after a "
                     "restart");
        if (strcmp(d->cfg.redis.password ? d->cfg.redis.password : "",
                   nc.redis.password ? nc.redis.password : "") != 0 ||
            strcmp(d->cfg.mysql.password ? d->cfg.mysql.password : "",
                   nc.mysql.password ? nc.mysql.password : "") != 0)
            log_warn("reload: a password changed; the new one is used after a restart");
        log_set_level(nc.log_level);
        nodemap_set_timeout(d->map, nc.redis_timeout_ms);
        refill_configure(d->refill, &nc);
        access_configure(d->access, &nc);
        api_configure(d->api, &nc);
        if (statushttp_configure(d->http, &nc) != 0)
            log_error("reload: out of memory; http-allowed-hosts is kept as it was");
        config_free(&d->cfg);
        d->cfg = nc;
    }
    /* systemd: reloading until the rows were read again (also when the config was rejected) */
    notify_reloading(d->notify, refill_reload(d->refill), rejected);
    access_reload(d->access);
}

int main(int argc, char **argv)
{
    struct daemon d;
    char err[CONFIG_ERR_MAX];

    memset(&d, 0, sizeof(d));
    d.argc = argc;
    d.argv = argv;
    switch (config_load(&d.cfg, argc, argv, env_get, err, sizeof(err))) {
    case CONFIG_OK:
        break;
    case CONFIG_HELP:
        config_usage(stdout, "idpoold");
        config_free(&d.cfg);
        return 0;
    case CONFIG_VERSION:
        printf("idpoold %s\n", IDPOOL_VERSION);
        config_free(&d.cfg);
        return 0;
    case CONFIG_ERROR:
        fprintf(stderr, "idpoold: %s\nTry 'idpoold --help'.\n", err);
        return 2;
    }
    log_set_level(d.cfg.log_level);
    signal(SIGPIPE, SIG_IGN);
    event_set_log_callback(http_libevent_log);
    if (fault_init(err, sizeof(err)) != 0) {
        fprintf(stderr, "idpoold: %s\n", err);
        config_free(&d.cfg);
        return 2;
    }

    char rhp[REDIS_HOSTS_MAX * HOSTPORT_STR_MAX + 64], mhp[HOSTPORT_STR_MAX];

    log_info("idpoold %s starting: redis %s db %d, mysql %s@%s/%s, key prefix '%s', "
             "tick %d ms, lock ttl %d ms, reload %d ms, instance %s%s",
             IDPOOL_VERSION, redis_url_where(rhp, sizeof(rhp), &d.cfg.redis), d.cfg.redis.db,
             d.cfg.mysql.user, hostport_str(mhp, sizeof(mhp), d.cfg.mysql.host, d.cfg.mysql.port),
             d.cfg.mysql.db, d.cfg.key_prefix, d.cfg.tick_ms, d.cfg.lock_ttl_ms, d.cfg.reload_ms,
             d.cfg.instance,
             d.cfg.refill ? "" : "; issuer only (refill off: no pool is checked or refilled)");

    /*
     * With epoll, changes to the interest list are batched per loop turn:
     * an event enabled and disabled within one turn (a write event around
     * an answer that went out at once) costs no epoll_ctl at all. Safe
     * because no descriptor is dup()ed.
     */
    {
        struct event_config *ec = event_config_new();
        if (!ec || event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST) != 0)
            die("cannot configure the event loop");
        d.base = event_base_new_with_config(ec);
        event_config_free(ec);
    }
    if (!d.base)
        die("cannot create the event loop");
    http_raise_fd_limit(); /* idle clients must not run the servers out of descriptors */
    d.store = store_new(d.base, &d.cfg);
    if (!d.store)
        die("cannot start the MySQL worker");
    d.map =
        nodemap_new(d.base, &d.cfg,
                    (d.cfg.refill ? NODEMAP_WRITER : 0) | (config_api_on(&d.cfg) ? NODEMAP_API : 0),
                    on_node_state, &d);
    if (!d.map)
        die("cannot set up the Redis connections");
    d.alerts = alerts_new(d.base, &d.cfg, d.map);
    if (!d.alerts)
        die("cannot set up alerting");
    d.refill = refill_new(d.base, &d.cfg, d.map, d.store, d.alerts);
    if (!d.refill)
        die("cannot set up the refill loop");
    d.access = access_new(d.base, &d.cfg, d.store, d.map);
    if (!d.access)
        die("cannot set up the API tokens and Redis users");
    d.api = api_new(d.base, &d.cfg, refill_pools(d.refill), d.access, d.map);
    if (!d.api)
        die("cannot start the ID API on %s", d.cfg.api_addr);
    {
        struct status_source src = {&d, src_each, src_one, src_daemon};
        struct statusline_role role = {d.cfg.refill, config_api_on(&d.cfg)};
        refill_status_source(d.refill, &d.refill_src);
        d.http = statushttp_new(d.base, &d.cfg, &src);
        if (!d.http)
            die("cannot start the HTTP status server on %s", d.cfg.http_addr);
        d.notify = notify_new(d.base, &src, &role);
        if (!d.notify)
            die("cannot set up the notifications to systemd");
    }

    d.ev_term = evsignal_new(d.base, SIGTERM, on_stop_signal, &d);
    d.ev_int = evsignal_new(d.base, SIGINT, on_stop_signal, &d);
    d.ev_hup = evsignal_new(d.base, SIGHUP, on_hup, &d);
    d.ev_grace = evtimer_new(d.base, on_grace, &d);
    if (!d.ev_term || !d.ev_int || !d.ev_hup || !d.ev_grace || evsignal_add(d.ev_term, NULL) ||
        evsignal_add(d.ev_int, NULL) || evsignal_add(d.ev_hup, NULL))
        die("cannot install signal handlers");

    event_base_dispatch(d.base);

    /*
     * Teardown: the issuer stops (waiting requests answered, its server
     * closed), then Redis (pending callbacks see NULL replies, the API's
     * too, while its applications still exist), then MySQL.
     */
    notify_free(d.notify);
    api_stop(d.api);
    statushttp_free(d.http);
    nodemap_free(d.map);
    api_free(d.api);
    store_free(d.store);
    refill_free(d.refill);
    access_free(d.access);
    alerts_free(d.alerts);
    event_free(d.ev_term);
    event_free(d.ev_int);
    event_free(d.ev_hup);
    event_free(d.ev_grace);
    dns_free(d.base);
    event_base_free(d.base);
    config_free(&d.cfg);
    libevent_global_shutdown();
    log_info("idpoold stopped");
    return 0;
}
