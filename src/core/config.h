/*
 * config — daemon settings from defaults, an optional config file, the
 * environment and command-line flags (later sources win), validated into one
 * struct. Pure: no I/O except reading the config file and password files
 * (redis-password-file, mysql-password-file, the systemd credentials
 * redis-password and mysql-password), so it is unit-tested without servers.
 *
 * Every setting has a flag (--redis), an environment variable
 * (IDPOOL_REDIS_URL) and a config-file key (redis = ...). See config_usage().
 */
#ifndef IDPOOL_CONFIG_H
#define IDPOOL_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "log.h"
#include "plan.h"
#include "url.h"

#define CONFIG_ERR_MAX 512

struct config {
    char *redis_url;            /* as given (password included: never log it) */
    struct redis_url redis;     /* parsed redis_url */
    char *mysql_url;            /* as given (never log it) */
    struct mysql_url mysql;     /* parsed mysql_url */
    char *http_addr;            /* host:port for status/metrics, "" disables */
    char *http_host;            /* parsed http_addr host (heap) */
    int http_port;              /* parsed http_addr port */
    int http_max_conns;         /* status server connections at most */
    int http_max_per_addr;      /* status server connections from one address at most */
    int http_timeout_ms;        /* body, unread answers and idle deadline (both servers) */
    int http_head_timeout_ms;   /* request head deadline (both servers) */
    char *http_allowed_hosts;   /* names the status server answers to, "a,b" or "*"; or NULL */
    char *api_addr;             /* host:port of the ID API, "" = off */
    char *api_host;             /* parsed api_addr host (heap) */
    int api_port;               /* parsed api_addr port */
    int api_max_conns;          /* ID API connections at most */
    int api_max_per_addr;       /* ID API connections from one address at most */
    int api_buffer;             /* IDs an issuer buffers per application at most */
    char *api_tls_cert;         /* PEM certificate chain file, or NULL: plain HTTP */
    char *api_tls_key;          /* PEM private key file, or NULL */
    char *api_access_log;       /* access log file, "-" for stderr, or NULL: none */
    int refill;                 /* 0: issuer-only instance (no checks, no refills) */
    int failover_reserve;       /* enum plan_reserve_mode (auto resolved by config_load) */
    char *alert_webhook;        /* alert webhook URL as given, or NULL */
    struct webhook_url webhook; /* parsed alert_webhook */
    int stall_ms;               /* 'stalled' fires after a needy pool got nothing this long */
    int alert_resolve_ms;       /* an alert resolves after its condition is clear this long */
    int pool_memory_mb;         /* 'pool_memory' fires for a full pool above this, MiB */
    int id_space_warn_days;     /* 'id_space_exhaustion' below this ID-space runway (0: off) */
    char *key_prefix;           /* Redis key prefix, default "idpool" */
    int tick_ms;                /* refill timer period */
    int lock_ttl_ms;            /* per-application lock TTL */
    int push_chunk;             /* IDs per RPUSH (one MULTI/EXEC) */
    int reload_ms;              /* how often application rows are re-read */
    int redis_timeout_ms;       /* Redis connect and command timeout */
    int mysql_timeout_ms;       /* MySQL connect/read/write timeout */
    enum log_level log_level;   /* error|warn|info|debug */
    char *config_file;          /* file read, or NULL */
    char *instance;             /* name recorded in application_lease; default host:pid */
};

enum config_result {
    CONFIG_OK = 0,
    CONFIG_ERROR = -1,  /* err holds a message naming the setting */
    CONFIG_HELP = 1,    /* --help given: print config_usage(), exit 0 */
    CONFIG_VERSION = 2, /* --version given */
};

typedef const char *(*config_getenv_fn)(const char *name);

/*
 * Build a config into *out (which is overwritten; free with config_free)
 * from defaults, then the config file (--config or IDPOOL_CONFIG), then the
 * environment (looked up through getenv_fn, so tests can pass a fake), then
 * argv. On CONFIG_ERROR err names the setting and where it came from, e.g.
 * "--tick-ms: must be an integer in 1..60000, got 'abc'".
 * On error *out holds nothing that needs freeing.
 */
enum config_result config_load(struct config *out, int argc, char *const argv[],
                               config_getenv_fn getenv_fn, char *err, size_t errlen)
    __attribute__((warn_unused_result));

void config_free(struct config *cfg);

/* The ID API is on: api_addr is set. */
int config_api_on(const struct config *cfg);

/* The --help text. */
void config_usage(FILE *out, const char *progname);

/*
 * The settings part of it: the settings named in only[] (NULL-terminated;
 * NULL: every setting) under their headings, then -h and -V. idpoolctl
 * lists the settings it uses.
 */
void config_usage_settings(FILE *out, const char *const *only);

#endif
