/*
 * config — settings from defaults, an optional config file, the environment
 * and command-line flags, validated into one struct config.
 *
 * Every setting is one row of the settings[] table below: its flag / config
 * file key, environment variable, default, kind and --help text. Each value is
 * parsed and validated as soon as it is read (so a typo in the config file is
 * an error even when a flag overrides it), and every error names the setting
 * and where the value came from. Values that may hold a password (URLs and the
 * password settings) are never echoed in error messages.
 */
#include "config.h"
#include "keys.h"
#include "text.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define INSTANCE_MAX 255 /* application_lease.instance is VARCHAR(255) */
#define HOSTNAME_MAX 253

enum setting_id {
    S_REDIS,
    S_REDIS_PASSWORD,
    S_REDIS_PASSWORD_FILE,
    S_REDIS_TIMEOUT,
    S_KEY_PREFIX,
    S_MYSQL,
    S_MYSQL_PASSWORD,
    S_MYSQL_PASSWORD_FILE,
    S_MYSQL_TIMEOUT,
    S_TICK,
    S_LOCK_TTL,
    S_PUSH_CHUNK,
    S_RELOAD,
    S_INSTANCE,
    S_FAILOVER_RESERVE,
    S_REFILL,
    S_HTTP,
    S_HTTP_MAX_CONNS,
    S_HTTP_TIMEOUT,
    S_HTTP_HEAD_TIMEOUT,
    S_HTTP_ALLOWED_HOSTS,
    S_HTTP_MAX_PER_ADDR,
    S_API,
    S_API_MAX_CONNS,
    S_API_MAX_PER_ADDR,
    S_API_BUFFER,
    S_API_TLS_CERT,
    S_API_TLS_KEY,
    S_API_ACCESS_LOG,
    S_ALERT_WEBHOOK,
    S_STALL,
    S_ALERT_RESOLVE,
    S_POOL_MEMORY,
    S_ID_SPACE_WARN,
    S_LOG_LEVEL,
    S_CONFIG,
    S_COUNT,
};

enum setting_kind {
    K_REDIS_URL,
    K_MYSQL_URL,
    K_SECRET,      /* password override, kept aside until all sources are read */
    K_SECRET_FILE, /* a file holding a password override: read at once, kept aside too */
    K_INT,
    K_KEY_PREFIX,
    K_INSTANCE,
    K_HTTP,
    K_WEBHOOK,
    K_LOG_LEVEL,
    K_PATH,    /* --config: read before everything else, see config_load() */
    K_FILE,    /* a file name; empty = none (and "off", for api-access-log) */
    K_BOOL,    /* on|off (also yes|no, true|false, 1|0) */
    K_RESERVE, /* auto|off|trend|all */
    K_HOSTS,   /* host names separated by commas, or "*" */
};

/* Which sources may set a setting. */
#define FROM_FLAG 1u
#define FROM_ENV  2u
#define FROM_FILE 4u
#define FROM_ALL  (FROM_FLAG | FROM_ENV | FROM_FILE)

struct setting {
    const char *name;  /* flag without "--"; also the config-file key */
    const char *alias; /* another name for flag and file key (the brief's), or NULL */
    const char *env;   /* environment variable */
    const char *group; /* --help heading */
    const char *arg;   /* --help metavariable */
    const char *def;   /* default, applied like any other value; NULL: none or computed */
    const char *shown; /* default as --help shows it, when not def */
    const char *help;  /* --help text; '\n' starts another line */
    enum setting_kind kind;
    unsigned sources; /* FROM_* */
    int min, max;     /* K_INT range */
    size_t offset;    /* K_INT: offset of the int in struct config */
};

#define INT_SETTING(min, max, field) K_INT, FROM_ALL, min, max, offsetof(struct config, field)

static const struct setting settings[S_COUNT] = {
    [S_REDIS] = {"redis", NULL, "IDPOOL_REDIS_URL", "Redis", "URL", "redis://127.0.0.1:6379/0",
                 NULL,
                 "Redis server: redis://[[user]:password@]host[:port][/db], or the\n"
                 "primary the sentinels name: redis-sentinel://[[user]:password@]\n"
                 "host[:port][,host[:port]...][/db]#master (port 26379 by default;\n"
                 "?master=NAME, sentinel_user=, sentinel_password= for the sentinels'\n"
                 "own credentials), or a Redis Cluster from its seed nodes:\n"
                 "redis-cluster://[[user]:password@]host[:port][,host[:port]...];\n"
                 "host may be [IPv6]; percent-encode special characters (%40 for @);\n"
                 "rediss:// (TLS) is not supported",
                 K_REDIS_URL, FROM_ALL, 0, 0, 0},
    [S_REDIS_PASSWORD] = {"redis-password", NULL, "IDPOOL_REDIS_PASSWORD", "Redis", NULL, NULL,
                          "none",
                          "Redis password; replaces the one in the URL\n"
                          "(environment or config file only, never a flag)",
                          K_SECRET, FROM_ENV | FROM_FILE, 0, 0, 0},
    [S_REDIS_PASSWORD_FILE] = {"redis-password-file", NULL, "IDPOOL_REDIS_PASSWORD_FILE", "Redis",
                               "FILE", NULL, "the systemd credential redis-password, if passed",
                               "file holding the Redis password (one line; a final newline\n"
                               "is dropped); replaces the one in the URL; not together\n"
                               "with redis-password. Under systemd, LoadCredential=\n"
                               "redis-password:FILE passes it without this setting",
                               K_SECRET_FILE, FROM_ALL, 0, 0, 0},
    [S_REDIS_TIMEOUT] = {"redis-timeout-ms", NULL, "IDPOOL_REDIS_TIMEOUT_MS", "Redis", "MS", "2000",
                         NULL, "connect and command timeout",
                         INT_SETTING(10, 600000, redis_timeout_ms)},
    [S_KEY_PREFIX] = {"key-prefix", NULL, "IDPOOL_KEY_PREFIX", "Redis", "PREFIX", "idpool", NULL,
                      "prefix of every Redis key: PREFIX:{app}:pool ...\n"
                      "1..64 characters of A-Z a-z 0-9 _ . : -",
                      K_KEY_PREFIX, FROM_ALL, 0, 0, 0},
    [S_MYSQL] = {"mysql", NULL, "IDPOOL_MYSQL_URL", "MySQL / MariaDB", "URL",
                 "mysql://root@127.0.0.1:3306/idpool", NULL,
                 "database: mysql://[user[:password]@]host[:port][/db]\n"
                 "(mariadb:// also accepted; user defaults to root, db to idpool)",
                 K_MYSQL_URL, FROM_ALL, 0, 0, 0},
    [S_MYSQL_PASSWORD] = {"mysql-password", NULL, "IDPOOL_MYSQL_PASSWORD", "MySQL / MariaDB", NULL,
                          NULL, "none",
                          "database password; replaces the one in the URL\n"
                          "(environment or config file only, never a flag)",
                          K_SECRET, FROM_ENV | FROM_FILE, 0, 0, 0},
    [S_MYSQL_PASSWORD_FILE] = {"mysql-password-file", NULL, "IDPOOL_MYSQL_PASSWORD_FILE",
                               "MySQL / MariaDB", "FILE", NULL,
                               "the systemd credential mysql-password, if passed",
                               "file holding the database password (one line; a final\n"
                               "newline is dropped); replaces the one in the URL; not\n"
                               "together with mysql-password. Under systemd,\n"
                               "LoadCredential=mysql-password:FILE passes it without this\n"
                               "setting",
                               K_SECRET_FILE, FROM_ALL, 0, 0, 0},
    [S_MYSQL_TIMEOUT] = {"mysql-timeout-ms", NULL, "IDPOOL_MYSQL_TIMEOUT_MS", "MySQL / MariaDB",
                         "MS", "5000", NULL,
                         "connect, read and write timeout (MariaDB counts whole\n"
                         "seconds, so it is rounded up to the next second)",
                         INT_SETTING(1000, 600000, mysql_timeout_ms)},
    [S_TICK] = {"tick-ms", NULL, "IDPOOL_TICK_MS", "Refill", "MS", "100", NULL,
                "refill timer period", INT_SETTING(1, 60000, tick_ms)},
    [S_LOCK_TTL] = {"lock-ttl-ms", NULL, "IDPOOL_LOCK_TTL_MS", "Refill", "MS", "1000",
                    "1000 (10 ticks)",
                    "per-application refill lock TTL, at least 2 x tick-ms;\n"
                    "a refiller stalled longer than this loses the lock",
                    INT_SETTING(100, 600000, lock_ttl_ms)},
    [S_PUSH_CHUNK] = {"push-chunk", NULL, "IDPOOL_PUSH_CHUNK", "Refill", "IDS", "1000", NULL,
                      "IDs per pushed chunk (one RPUSH in one MULTI/EXEC): Redis\n"
                      "serves no other client while it appends one; smaller chunks\n"
                      "keep client latency lower, larger ones push a little faster",
                      INT_SETTING(50, 10000, push_chunk)},
    [S_RELOAD] = {"reload-ms", NULL, "IDPOOL_RELOAD_MS", "Refill", "MS", "5000", NULL,
                  "how often application rows are re-read", INT_SETTING(100, 3600000, reload_ms)},
    [S_INSTANCE] = {"instance", NULL, "IDPOOL_INSTANCE", "Refill", "NAME", NULL, "HOSTNAME:PID",
                    "name of this daemon in application_lease, 1..255 characters", K_INSTANCE,
                    FROM_ALL, 0, 0, 0},
    [S_FAILOVER_RESERVE] = {"failover-reserve", NULL, "IDPOOL_FAILOVER_RESERVE", "Refill", "MODE",
                            "auto", NULL,
                            "which pools keep a range of their own, never written to\n"
                            "Redis, to refill once when MySQL cannot lease (a failover\n"
                            "or a Redis restart while MySQL is down): off, trend\n"
                            "(trend applications), all (monotonic ones too, when the\n"
                            "pool starts over) or auto (trend behind Sentinel, else off)",
                            K_RESERVE, FROM_ALL, 0, 0, 0},
    [S_HTTP] = {"http", NULL, "IDPOOL_HTTP_ADDR", "Status and metrics", "HOST:PORT",
                "127.0.0.1:9471", NULL,
                "status server: / (status page), /metrics, /healthz, /v1/apps\n"
                "([IPv6]:PORT ok); empty disables it",
                K_HTTP, FROM_ALL, 0, 0, 0},
    [S_HTTP_MAX_CONNS] = {"http-max-connections", NULL, "IDPOOL_HTTP_MAX_CONNECTIONS",
                          "Status and metrics", "N", "64", NULL,
                          "status server connections at most; at the limit a new one\n"
                          "closes the least recently answered idle or slow one\n"
                          "(lowered at start to fit the file limit)",
                          INT_SETTING(1, 100000, http_max_conns)},
    [S_HTTP_MAX_PER_ADDR] = {"http-max-connections-per-address", NULL,
                             "IDPOOL_HTTP_MAX_CONNECTIONS_PER_ADDRESS", "Status and metrics", "N",
                             "16", NULL,
                             "status server connections from one client address at\n"
                             "most; more are closed at once",
                             INT_SETTING(1, 100000, http_max_per_addr)},
    [S_HTTP_TIMEOUT] = {"http-timeout-ms", NULL, "IDPOOL_HTTP_TIMEOUT_MS", "Status and metrics",
                        "MS", "10000", NULL,
                        "both servers: a request body must arrive within this long\n"
                        "of its head, a client must read its answers within this\n"
                        "long, and an idle connection is closed after it",
                        INT_SETTING(100, 600000, http_timeout_ms)},
    [S_HTTP_HEAD_TIMEOUT] = {"http-head-timeout-ms", NULL, "IDPOOL_HTTP_HEAD_TIMEOUT_MS",
                             "Status and metrics", "MS", "3000", NULL,
                             "both servers: a request head must arrive whole within\n"
                             "this long of the connection (or of its first byte on a\n"
                             "kept-alive one), else 408 and close; slow senders cannot\n"
                             "extend it",
                             INT_SETTING(100, 600000, http_head_timeout_ms)},
    [S_HTTP_ALLOWED_HOSTS] = {"http-allowed-hosts", NULL, "IDPOOL_HTTP_ALLOWED_HOSTS",
                              "Status and metrics", "NAMES", NULL,
                              "none (IP addresses and localhost only)",
                              "host names the status server answers requests to (their\n"
                              "Host header), separated by commas; * for any. Requests\n"
                              "to an IP address, localhost or the name of --http are\n"
                              "always answered, to another name refused with 403 (DNS\n"
                              "rebinding: a web page must not read /v1/apps through a\n"
                              "browser)",
                              K_HOSTS, FROM_ALL, 0, 0, 0},
    [S_API] = {"api", "api-addr", "IDPOOL_API_ADDR", "ID API", "HOST:PORT", "", "none (off)",
               "ID API: GET/POST /v1/ids/{key} with a bearer token, on a\n"
               "listener of its own ([IPv6]:PORT ok); config-file key also\n"
               "api-addr; empty turns the API off",
               K_HTTP, FROM_ALL, 0, 0, 0},
    [S_API_MAX_CONNS] = {"api-max-connections", NULL, "IDPOOL_API_MAX_CONNECTIONS", "ID API", "N",
                         "1024", NULL,
                         "ID API connections at most; at the limit a new one\n"
                         "closes the least recently answered idle or slow one\n"
                         "(lowered at start to fit the file limit)",
                         INT_SETTING(1, 100000, api_max_conns)},
    [S_API_MAX_PER_ADDR] = {"api-max-connections-per-address", NULL,
                            "IDPOOL_API_MAX_CONNECTIONS_PER_ADDRESS", "ID API", "N", "256", NULL,
                            "ID API connections from one client address at most;\n"
                            "more are closed at once (raise it behind a proxy)",
                            INT_SETTING(1, 100000, api_max_per_addr)},
    [S_API_BUFFER] = {"api-buffer", NULL, "IDPOOL_API_BUFFER", "ID API", "IDS", "1000", NULL,
                      "IDs an issuer keeps per application at most (also at most\n"
                      "max_size_per_times and a tenth of max_size_per_second);\n"
                      "IDs buffered when the process dies are gaps",
                      INT_SETTING(1, 100000, api_buffer)},
    [S_API_TLS_CERT] = {"api-tls-cert", NULL, "IDPOOL_API_TLS_CERT", "ID API", "FILE", NULL,
                        "none (plain HTTP)",
                        "PEM certificate chain: the API speaks HTTPS only\n"
                        "(needs api-tls-key)",
                        K_FILE, FROM_ALL, 0, 0, 0},
    [S_API_TLS_KEY] = {"api-tls-key", NULL, "IDPOOL_API_TLS_KEY", "ID API", "FILE", NULL, "none",
                       "PEM private key of api-tls-cert", K_FILE, FROM_ALL, 0, 0, 0},
    [S_API_ACCESS_LOG] = {"api-access-log", NULL, "IDPOOL_API_ACCESS_LOG", "ID API", "FILE", NULL,
                          "none (off)",
                          "one line per request (time, client, method, path without\n"
                          "the query, status, bytes, ms, token name; never the token)\n"
                          "appended to FILE, or - for stderr; empty or off: none;\n"
                          "reopened on SIGHUP (logrotate)",
                          K_FILE, FROM_ALL, 0, 0, 0},
    [S_REFILL] = {"refill", NULL, "IDPOOL_REFILL", "Refill", "on|off", "on", NULL,
                  "off: an issuer-only instance (serves the API, checks and\n"
                  "refills no pool)",
                  K_BOOL, FROM_ALL, 0, 0, 0},
    [S_ALERT_WEBHOOK] = {"alert-webhook", NULL, "IDPOOL_ALERT_WEBHOOK", "Alerts", "URL", NULL,
                         "none",
                         "POST every alert event (JSON) to http://host[:port][/path];\n"
                         "retried with backoff; https is not supported",
                         K_WEBHOOK, FROM_ALL, 0, 0, 0},
    [S_STALL] = {"stall-ms", NULL, "IDPOOL_STALL_MS", "Alerts", "MS", "10000", NULL,
                 "'stalled' fires when a pool that needs IDs got none for this long",
                 INT_SETTING(100, 3600000, stall_ms)},
    [S_ALERT_RESOLVE] = {"alert-resolve-ms", NULL, "IDPOOL_ALERT_RESOLVE_MS", "Alerts", "MS",
                         "5000", NULL,
                         "an alert resolves once its condition stayed clear this long",
                         INT_SETTING(0, 3600000, alert_resolve_ms)},
    [S_POOL_MEMORY] = {"pool-memory-mb", NULL, "IDPOOL_POOL_MEMORY_MB", "Alerts", "MIB", "64", NULL,
                       "'pool_memory' fires (and apps add/set warn) for an application\n"
                       "whose full pool would take more Redis memory than this (about\n"
                       "10 bytes an ID)",
                       INT_SETTING(1, 1048576, pool_memory_mb)},
    [S_ID_SPACE_WARN] = {"id-space-warn-days", NULL, "IDPOOL_ID_SPACE_WARN_DAYS", "Alerts", "DAYS",
                         "90", NULL,
                         "'id_space_exhaustion' also fires when an application's ID\n"
                         "space would run out within this many days at the rate its\n"
                         "leases grew over the last 7 days (application_lease); 0: off",
                         INT_SETTING(0, 36500, id_space_warn_days)},
    [S_LOG_LEVEL] = {"log-level", NULL, "IDPOOL_LOG_LEVEL", "General", "LEVEL", "info", NULL,
                     "error, warn, info or debug", K_LOG_LEVEL, FROM_ALL, 0, 0, 0},
    [S_CONFIG] = {"config", NULL, "IDPOOL_CONFIG", "General", "FILE", NULL, "none",
                  "config file to read (not itself settable in a config file)", K_PATH,
                  FROM_FLAG | FROM_ENV, 0, 0, 0},
};

enum origin_kind {
    O_UNSET = 0,
    O_DEFAULT,
    O_FILE,
    O_ENV,
    O_FLAG,
};

/* Where the current value of a setting came from (for error messages). */
struct origin {
    enum origin_kind kind;
    long line; /* O_FILE: 1-based line number */
};

/* A password override being read: from its setting, or from a file. */
struct secret {
    char *value; /* redis-password / mysql-password (heap) or NULL */
    char *file;  /* redis-password-file / mysql-password-file (heap) or NULL: its name only,
                    read once every source is merged (secret_resolve), so that a file
                    another source overrode is never read */
};

/* The two passwords: which settings give them, and the systemd credential's name. */
enum { SECRET_REDIS, SECRET_MYSQL, SECRET_COUNT };
static const struct {
    enum setting_id value, file;
    const char *credential; /* file name in $CREDENTIALS_DIRECTORY (LoadCredential=) */
} secrets[SECRET_COUNT] = {
    [SECRET_REDIS] = {S_REDIS_PASSWORD, S_REDIS_PASSWORD_FILE, "redis-password"},
    [SECRET_MYSQL] = {S_MYSQL_PASSWORD, S_MYSQL_PASSWORD_FILE, "mysql-password"},
};

/* State of one config_load() call. */
struct loader {
    struct config *cfg;                 /* being built */
    struct origin origin[S_COUNT];      /* source of each setting's current value */
    struct origin config_origin;        /* where the config file path came from */
    struct secret secret[SECRET_COUNT]; /* pending password overrides */
    config_getenv_fn getenv_fn;         /* the environment ($CREDENTIALS_DIRECTORY) */
    char *err;                          /* caller's buffer */
    size_t errlen;
};

/* Look a setting up by its flag / file-key name (n bytes, not NUL-terminated). */
static int setting_find(const char *name, size_t n)
{
    for (int i = 0; i < S_COUNT; i++)
        if ((strlen(settings[i].name) == n && memcmp(settings[i].name, name, n) == 0) ||
            (settings[i].alias && strlen(settings[i].alias) == n &&
             memcmp(settings[i].alias, name, n) == 0))
            return i;
    return -1;
}

/* ------------------------------------------------------------- loading */

/*
 * The "where" of an error: "--tick-ms", "IDPOOL_TICK_MS",
 * "/etc/idpool.conf:7: tick-ms" or "tick-ms (default)".
 */
static void origin_prefix(const struct loader *ld, enum setting_id id, char *buf, size_t len)
{
    const struct setting *s = &settings[id];
    const struct origin *o = &ld->origin[id];

    switch (o->kind) {
    case O_FLAG:
        snprintf(buf, len, "--%s", s->name);
        break;
    case O_ENV:
        snprintf(buf, len, "%s", s->env);
        break;
    case O_FILE:
        snprintf(buf, len, "%s:%ld: %s", ld->cfg->config_file, o->line, s->name);
        break;
    default:
        snprintf(buf, len, "%s (default)", s->name);
        break;
    }
}

/* Where a setting's value came from, for cross-setting errors. */
static void origin_source(const struct loader *ld, enum setting_id id, char *buf, size_t len)
{
    const struct origin *o = &ld->origin[id];

    switch (o->kind) {
    case O_FLAG:
        snprintf(buf, len, "--%s", settings[id].name);
        break;
    case O_ENV:
        snprintf(buf, len, "%s", settings[id].env);
        break;
    case O_FILE:
        snprintf(buf, len, "%s:%ld", ld->cfg->config_file, o->line);
        break;
    default:
        snprintf(buf, len, "the default");
        break;
    }
}

static int fail(struct loader *ld, enum setting_id id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Write "<where>: <message>" into the caller's error buffer; returns -1. */
static int fail(struct loader *ld, enum setting_id id, const char *fmt, ...)
{
    char where[CONFIG_ERR_MAX], msg[CONFIG_ERR_MAX];
    va_list ap;

    origin_prefix(ld, id, where, sizeof(where));
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    text_err(ld->err, ld->errlen, "%s: %s", where, msg);
    return -1;
}

/* Replace a heap string field with a copy of value. */
static int replace_str(struct loader *ld, enum setting_id id, char **field, const char *value)
{
    char *copy = strdup(value);

    if (copy == NULL)
        return fail(ld, id, "out of memory");
    free(*field);
    *field = copy;
    return 0;
}

/* A password file is one line: anything this large is not one. */
#define SECRET_FILE_MAX 4096

/*
 * Read the password in file path into *out (heap): the whole file, less one
 * final newline ("\n" or "\r\n"). A file that is missing, unreadable, not a
 * regular file (a directory; a FIFO or a terminal would block), empty,
 * oversized or of more than one line is an error naming the file (never its
 * content): 0 / -1.
 */
static int secret_file_read(const char *path, char **out, char *err, size_t errlen)
{
    char buf[SECRET_FILE_MAX + 1];
    size_t n = 0;
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    *out = NULL;
    if (fd < 0 || fstat(fd, &st) != 0) {
        text_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        text_err(err, errlen, "%s is not a regular file: it should hold the password", path);
        close(fd);
        return -1;
    }
    while (n < sizeof(buf)) {
        ssize_t r = read(fd, buf + n, sizeof(buf) - n);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            text_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n > SECRET_FILE_MAX) {
        text_err(err, errlen, "%s is larger than %d bytes: not a password file", path,
                 SECRET_FILE_MAX);
        return -1;
    }
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    if (n == 0) {
        text_err(err, errlen, "%s is empty: it should hold the password", path);
        return -1;
    }
    if (memchr(buf, '\n', n) || memchr(buf, '\r', n) || memchr(buf, '\0', n)) {
        text_err(err, errlen,
                 "%s holds more than one line (or a NUL byte): it should hold the password alone",
                 path);
        return -1;
    }
    *out = strndup(buf, n);
    if (*out == NULL) {
        text_err(err, errlen, "cannot read %s: out of memory", path);
        return -1;
    }
    return 0;
}

/*
 * Parse and validate one value of setting id from source o, replacing the
 * previous value in ld->cfg only once the new one is known to be good.
 */
/* http-allowed-hosts: names of A-Z a-z 0-9 . - _ (1..253) or *, separated by commas. */
static bool host_list_valid(const char *v)
{
    while (*v) {
        size_t n;

        v += strspn(v, " ,");
        for (n = strcspn(v, ","); n > 0 && v[n - 1] == ' '; n--)
            ;
        if (n > 253 ||
            (!(n == 1 && v[0] == '*') && strspn(v, "abcdefghijklmnopqrstuvwxyz"
                                                   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") < n))
            return false;
        v += strcspn(v, ",");
    }
    return true;
}

static int setting_apply(struct loader *ld, enum setting_id id, const char *value, struct origin o)
{
    const struct setting *s = &settings[id];
    struct config *cfg = ld->cfg;
    char msg[CONFIG_ERR_MAX];

    ld->origin[id] = o;
    switch (s->kind) {
    case K_INT: {
        long long v;

        if (text_int(value, strlen(value), s->min, s->max, &v) < 0)
            return fail(ld, id, "must be an integer in %d..%d, got '%.64s'", s->min, s->max, value);
        *(int *)(void *)((char *)cfg + s->offset) = (int)v;
        return 0;
    }
    case K_REDIS_URL: {
        struct redis_url u;

        if (redis_url_parse(value, &u, msg, sizeof(msg)) < 0)
            return fail(ld, id, "%s", msg);
        if (replace_str(ld, id, &cfg->redis_url, value) < 0) {
            redis_url_free(&u);
            return -1;
        }
        redis_url_free(&cfg->redis);
        cfg->redis = u;
        return 0;
    }
    case K_MYSQL_URL: {
        struct mysql_url u;

        if (mysql_url_parse(value, &u, msg, sizeof(msg)) < 0)
            return fail(ld, id, "%s", msg);
        if (replace_str(ld, id, &cfg->mysql_url, value) < 0) {
            mysql_url_free(&u);
            return -1;
        }
        mysql_url_free(&cfg->mysql);
        cfg->mysql = u;
        return 0;
    }
    case K_SECRET: {
        char **slot = &ld->secret[id == S_REDIS_PASSWORD ? SECRET_REDIS : SECRET_MYSQL].value;

        /* Empty means "not set", so IDPOOL_X_PASSWORD=${UNSET} is harmless. */
        if (value[0] == '\0')
            return 0;
        return replace_str(ld, id, slot, value);
    }
    case K_SECRET_FILE: {
        char **slot = &ld->secret[id == S_REDIS_PASSWORD_FILE ? SECRET_REDIS : SECRET_MYSQL].file;

        if (value[0] == '\0') { /* empty: none, as for the password settings */
            free(*slot);
            *slot = NULL;
            return 0;
        }
        return replace_str(ld, id, slot, value); /* read by secret_resolve */
    }
    case K_HTTP: {
        char *host = NULL;
        int port = 0;

        char **addr = id == S_API ? &cfg->api_addr : &cfg->http_addr;
        char **hostp = id == S_API ? &cfg->api_host : &cfg->http_host;

        if (value[0] != '\0' && hostport_parse(value, &host, &port, msg, sizeof(msg)) < 0)
            return fail(ld, id, "%s (an empty value turns it off)", msg);
        if (replace_str(ld, id, addr, value) < 0) {
            free(host);
            return -1;
        }
        free(*hostp);
        *hostp = host;
        *(id == S_API ? &cfg->api_port : &cfg->http_port) = port;
        return 0;
    }
    case K_WEBHOOK: {
        struct webhook_url w;

        if (value[0] == '\0') {
            webhook_url_free(&cfg->webhook);
            free(cfg->alert_webhook);
            cfg->alert_webhook = NULL;
            return 0;
        }
        if (webhook_url_parse(value, &w, msg, sizeof(msg)) < 0)
            return fail(ld, id, "%s", msg);
        if (replace_str(ld, id, &cfg->alert_webhook, value) < 0) {
            webhook_url_free(&w);
            return -1;
        }
        webhook_url_free(&cfg->webhook);
        cfg->webhook = w;
        return 0;
    }
    case K_KEY_PREFIX:
        if (strchr(value, '{') || strchr(value, '}'))
            return fail(ld, id, "must not contain '{' or '}' (Redis Cluster hash tags)");
        if (!keys_prefix_valid(value))
            return fail(ld, id, "must be 1..%d characters of A-Z a-z 0-9 _ . : -, got '%.80s'",
                        KEYS_PREFIX_MAX, value);
        return replace_str(ld, id, &cfg->key_prefix, value);
    case K_HOSTS:
        if (!host_list_valid(value))
            return fail(ld, id,
                        "must be host names (A-Z a-z 0-9 . - _) or *, separated by commas; "
                        "got '%.80s'",
                        value);
        if (value[0] == '\0') {
            free(cfg->http_allowed_hosts);
            cfg->http_allowed_hosts = NULL;
            return 0;
        }
        return replace_str(ld, id, &cfg->http_allowed_hosts, value);
    case K_INSTANCE: {
        size_t n = strlen(value);

        for (size_t i = 0; i < n; i++)
            if ((unsigned char)value[i] < ' ' || value[i] == 0x7f)
                n = 0;
        if (n == 0 || n > INSTANCE_MAX)
            return fail(ld, id, "must be 1..%d characters, no control characters", INSTANCE_MAX);
        return replace_str(ld, id, &cfg->instance, value);
    }
    case K_LOG_LEVEL: {
        int level = log_level_parse(value);

        if (level < 0)
            return fail(ld, id, "must be one of error, warn, info, debug; got '%.32s'", value);
        cfg->log_level = (enum log_level)level;
        return 0;
    }
    case K_PATH:
        return replace_str(ld, id, &cfg->config_file, value);
    case K_FILE: {
        char **slot = id == S_API_TLS_CERT  ? &cfg->api_tls_cert
                      : id == S_API_TLS_KEY ? &cfg->api_tls_key
                                            : &cfg->api_access_log;

        if (value[0] == '\0' || (id == S_API_ACCESS_LOG && strcmp(value, "off") == 0)) {
            free(*slot);
            *slot = NULL;
            return 0;
        }
        return replace_str(ld, id, slot, value);
    }
    case K_BOOL: {
        static const char *const on[] = {"on", "yes", "true", "1"}, *const off[] = {"off", "no",
                                                                                    "false", "0"};

        for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
            if (strcasecmp(value, on[i]) == 0 || strcasecmp(value, off[i]) == 0) {
                cfg->refill = strcasecmp(value, on[i]) == 0;
                return 0;
            }
        }
        return fail(ld, id, "must be on or off, got '%.32s'", value);
    }
    case K_RESERVE: {
        static const char *const modes[] = {"off", "trend", "all"};

        for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
            if (strcasecmp(value, modes[i]) == 0) {
                cfg->failover_reserve = (int)i; /* enum plan_reserve_mode */
                return 0;
            }
        }
        if (strcasecmp(value, "auto") == 0) {
            cfg->failover_reserve = -1; /* finish() decides */
            return 0;
        }
        return fail(ld, id, "must be one of auto, off, trend, all; got '%.32s'", value);
    }
    }
    return fail(ld, id, "internal error: unknown setting kind");
}

/* Built-in defaults, applied through setting_apply() like any other source. */
static int defaults_apply(struct loader *ld)
{
    struct origin o = {O_DEFAULT, 0};
    char host[HOSTNAME_MAX + 2], instance[sizeof(host) + 24];

    for (int i = 0; i < S_COUNT; i++)
        if (settings[i].def && setting_apply(ld, (enum setting_id)i, settings[i].def, o) < 0)
            return -1;
    if (gethostname(host, sizeof(host)) < 0 || host[0] == '\0')
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    snprintf(instance, sizeof(instance), "%s:%ld", host, (long)getpid());
    return setting_apply(ld, S_INSTANCE, instance, o);
}

static char *trim(char *s)
{
    char *end;

    while (*s == ' ' || *s == '\t')
        s++;
    end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' || end[-1] == '\n'))
        end--;
    *end = '\0';
    return s;
}

/* A config file is a few KiB: anything this large is not one (--config /dev/zero, a log). */
#define CONFIG_FILE_MAX (1024 * 1024)

/*
 * Read "key = value" lines from the config file cfg->config_file. '#' and ';'
 * start comment lines (not trailing comments: a '#' may be part of a
 * password); a value may be wrapped in double quotes. The file is read
 * whole, at most CONFIG_FILE_MAX bytes, then parsed.
 */
static int file_apply(struct loader *ld)
{
    const char *path = ld->cfg->config_file;
    char *buf, *line, *end, where[CONFIG_ERR_MAX];
    size_t len;
    long lineno = 0;
    int rc = -1;
    FILE *f;

    origin_prefix(ld, S_CONFIG, where, sizeof(where));
    f = fopen(path, "r");
    if (f == NULL) {
        text_err(ld->err, ld->errlen, "%s: cannot read %s: %s", where, path, strerror(errno));
        return -1;
    }
    buf = malloc(CONFIG_FILE_MAX + 1);
    if (buf == NULL) {
        text_err(ld->err, ld->errlen, "%s: cannot read %s: out of memory", where, path);
        fclose(f);
        return -1;
    }
    errno = 0;
    len = fread(buf, 1, CONFIG_FILE_MAX + 1, f);
    if (ferror(f)) {
        text_err(ld->err, ld->errlen, "%s: cannot read %s: %s", where, path,
                 strerror(errno ? errno : EIO));
        goto out;
    }
    if (len > CONFIG_FILE_MAX) {
        text_err(ld->err, ld->errlen,
                 "%s: %s is larger than %d KiB: not a config file (a config file holds a few "
                 "'name = value' lines)",
                 where, path, CONFIG_FILE_MAX / 1024);
        goto out;
    }
    end = buf + len;
    line = buf;
    /* A UTF-8 byte order mark (editors on Windows write one) is not part of the first name. */
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
        line += 3;
    while (line < end) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t n = nl ? (size_t)(nl - line) : (size_t)(end - line);
        char *next = nl ? nl + 1 : end;
        char *key, *value, *eq;
        size_t vlen;
        int id;

        lineno++;
        if (memchr(line, '\0', n) != NULL) {
            text_err(ld->err, ld->errlen, "%s:%ld: line contains a NUL byte", path, lineno);
            goto out;
        }
        line[n] = '\0'; /* in the buffer: n <= len <= CONFIG_FILE_MAX */
        key = trim(line);
        line = next;
        if (*key == '\0' || *key == '#' || *key == ';')
            continue;
        eq = strchr(key, '=');
        if (eq == NULL) {
            text_err(ld->err, ld->errlen, "%s:%ld: expected 'name = value'", path, lineno);
            goto out;
        }
        *eq = '\0';
        key = trim(key);
        value = trim(eq + 1);
        id = setting_find(key, strlen(key));
        if (id < 0 || !(settings[id].sources & FROM_FILE)) {
            text_err(ld->err, ld->errlen, "%s:%ld: unknown setting '%.64s'%s", path, lineno, key,
                     id == S_CONFIG ? " (a config file cannot name another)" : "");
            goto out;
        }
        vlen = strlen(value);
        if (value[0] == '"') {
            if (vlen < 2 || value[vlen - 1] != '"') {
                text_err(ld->err, ld->errlen, "%s:%ld: %s: missing closing '\"'", path, lineno,
                         key);
                goto out;
            }
            value[vlen - 1] = '\0';
            value++;
        }
        if (setting_apply(ld, (enum setting_id)id, value, (struct origin){O_FILE, lineno}) < 0)
            goto out;
    }
    rc = 0;
out:
    free(buf);
    fclose(f);
    return rc;
}

/* Every setting's environment variable, where set (an empty value counts). */
static int env_apply(struct loader *ld, config_getenv_fn getenv_fn)
{
    for (int i = 0; i < S_COUNT; i++) {
        const char *v;

        if (i == S_CONFIG || !(settings[i].sources & FROM_ENV))
            continue;
        v = getenv_fn(settings[i].env);
        if (v && setting_apply(ld, (enum setting_id)i, v, (struct origin){O_ENV, 0}) < 0)
            return -1;
    }
    return 0;
}

/*
 * Walk argv. With apply false it only checks the syntax (unknown flags,
 * missing values, stray arguments), stops at --help / --version and notes
 * the last --config; with apply true it applies every value except --config.
 */
static enum config_result flags_walk(struct loader *ld, int argc, char *const argv[], bool apply,
                                     const char **config_path)
{
    for (int i = 1; i < argc && argv[i]; i++) {
        const char *a = argv[i], *name, *eq, *value;
        size_t len;
        int id;

        if (strcmp(a, "--") == 0) {
            if (i + 1 < argc && argv[i + 1]) {
                text_err(ld->err, ld->errlen, "unexpected argument '%.64s'", argv[i + 1]);
                return CONFIG_ERROR;
            }
            break;
        }
        if (a[0] != '-' || a[1] == '\0') {
            text_err(ld->err, ld->errlen, "unexpected argument '%.64s'", a);
            return CONFIG_ERROR;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return CONFIG_HELP;
        if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0)
            return CONFIG_VERSION;
        if (strncmp(a, "--help=", 7) == 0 || strncmp(a, "--version=", 10) == 0) {
            text_err(ld->err, ld->errlen, "%s takes no value",
                     a[2] == 'h' ? "--help" : "--version");
            return CONFIG_ERROR;
        }
        if (a[1] != '-') {
            text_err(ld->err, ld->errlen, "unknown option '%.32s' (see --help)", a);
            return CONFIG_ERROR;
        }
        name = a + 2;
        eq = strchr(name, '=');
        len = eq ? (size_t)(eq - name) : strlen(name);
        id = setting_find(name, len);
        if (id < 0) {
            text_err(ld->err, ld->errlen, "unknown option '--%.*s' (see --help)",
                     (int)(len < 64 ? len : 64), name);
            return CONFIG_ERROR;
        }
        if (!(settings[id].sources & FROM_FLAG)) {
            text_err(ld->err, ld->errlen,
                     "--%s: not accepted as a flag (it would show in ps); set %s or '%s' in the "
                     "config file",
                     settings[id].name, settings[id].env, settings[id].name);
            return CONFIG_ERROR;
        }
        if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc && argv[i + 1] && strncmp(argv[i + 1], "--", 2) != 0) {
            value = argv[++i];
        } else {
            text_err(ld->err, ld->errlen, "--%s: missing value", settings[id].name);
            return CONFIG_ERROR;
        }
        if (id == S_CONFIG) {
            if (config_path)
                *config_path = value;
        } else if (apply &&
                   setting_apply(ld, (enum setting_id)id, value, (struct origin){O_FLAG, 0}) < 0) {
            return CONFIG_ERROR;
        }
    }
    return CONFIG_OK;
}

/*
 * Where password i comes from, once every source is read: its setting
 * (redis-password), its file setting (redis-password-file) or, when neither
 * is set, the systemd credential of its name if the service manager passed
 * one ($CREDENTIALS_DIRECTORY/redis-password, LoadCredential=). Two of
 * them at once is an error: an operator moving a password from one place
 * to another must not find the old one still in force. The password found
 * replaces *password (the URL's); none leaves it.
 */
static int secret_resolve(struct loader *ld, int i, char **password)
{
    struct secret *sc = &ld->secret[i];
    const char *dir = ld->getenv_fn("CREDENTIALS_DIRECTORY");
    char cred[4096], from[CONFIG_ERR_MAX / 2], msg[CONFIG_ERR_MAX];
    char *pw = NULL;

    if (sc->value && sc->file) {
        origin_source(ld, secrets[i].value, from, sizeof(from));
        return fail(ld, secrets[i].file, "set, and so is %s (from %s): give the password one way",
                    settings[secrets[i].value].name, from);
    }
    cred[0] = '\0';
    if (dir && dir[0] != '\0')
        snprintf(cred, sizeof(cred), "%s/%s", dir, secrets[i].credential);
    if (cred[0] && access(cred, F_OK) == 0) {
        if (sc->value || sc->file) {
            origin_prefix(ld, sc->value ? secrets[i].value : secrets[i].file, from, sizeof(from));
            text_err(ld->err, ld->errlen,
                     "%s: set, and systemd passed the credential %s too (%s): give the password "
                     "one way",
                     from, secrets[i].credential, cred);
            return -1;
        }
        if (secret_file_read(cred, &pw, msg, sizeof(msg)) < 0) {
            text_err(ld->err, ld->errlen, "systemd credential %s: %s", secrets[i].credential, msg);
            return -1;
        }
    } else if (sc->file) {
        /* the one file that won: named by the last source that set it */
        if (secret_file_read(sc->file, &pw, msg, sizeof(msg)) < 0)
            return fail(ld, secrets[i].file, "%s", msg);
    } else if (sc->value) {
        pw = sc->value;
        sc->value = NULL;
    }
    if (pw) {
        free(*password);
        *password = pw;
    }
    return 0;
}

/*
 * Checks across settings, done once every source is read: the lock must
 * outlive two ticks, and password overrides replace the URLs' passwords.
 */
static int finish(struct loader *ld)
{
    struct config *cfg = ld->cfg;
    char ttl_from[CONFIG_ERR_MAX / 2], tick_from[CONFIG_ERR_MAX / 2];

    if ((long)cfg->lock_ttl_ms < 2L * cfg->tick_ms) {
        origin_source(ld, S_LOCK_TTL, ttl_from, sizeof(ttl_from));
        origin_source(ld, S_TICK, tick_from, sizeof(tick_from));
        text_err(ld->err, ld->errlen,
                 "--lock-ttl-ms: must be at least 2 x --tick-ms (2 x %d = %d), got %d "
                 "(lock-ttl-ms from %s, tick-ms from %s)",
                 cfg->tick_ms, 2 * cfg->tick_ms, cfg->lock_ttl_ms, ttl_from, tick_from);
        return -1;
    }
    if ((cfg->api_tls_cert == NULL) != (cfg->api_tls_key == NULL))
        return fail(ld, cfg->api_tls_cert ? S_API_TLS_CERT : S_API_TLS_KEY,
                    "TLS for the API needs both api-tls-cert and api-tls-key (%s is not set)",
                    cfg->api_tls_cert ? "api-tls-key" : "api-tls-cert");
    if (cfg->api_tls_cert && !config_api_on(cfg))
        return fail(ld, S_API_TLS_CERT, "set, but the API is off (set api / IDPOOL_API_ADDR)");
    if (cfg->api_access_log && !config_api_on(cfg))
        return fail(ld, S_API_ACCESS_LOG, "set, but the API is off (set api / IDPOOL_API_ADDR)");
    if (!cfg->refill && !config_api_on(cfg))
        return fail(ld, S_REFILL,
                    "off with the API off too: this instance would do nothing (set api / "
                    "IDPOOL_API_ADDR for an issuer-only instance)");
    if (secret_resolve(ld, SECRET_REDIS, &cfg->redis.password) < 0 ||
        secret_resolve(ld, SECRET_MYSQL, &cfg->mysql.password) < 0)
        return -1;
    if (cfg->failover_reserve < 0) /* auto */
        cfg->failover_reserve =
            cfg->redis.kind == REDIS_SENTINEL ? PLAN_RESERVE_TREND : PLAN_RESERVE_OFF;
    if (cfg->redis.user && cfg->redis.password == NULL)
        return fail(ld, S_REDIS,
                    "an ACL user needs a password: write user:password@ in the URL or set "
                    "IDPOOL_REDIS_PASSWORD / redis-password (for a password alone write "
                    "redis://:password@host)");
    return 0;
}

static const char *real_getenv(const char *name)
{
    return getenv(name);
}

/*
 * Sources in increasing precedence: defaults, config file, environment,
 * flags. argv is checked first so that --help works whatever the rest says
 * and --config is known before the file is read. *out is built from scratch
 * (the caller frees any previous config), so a reload can build a new struct
 * and keep the old one when this fails. getenv_fn NULL means getenv(3).
 */
enum config_result config_load(struct config *out, int argc, char *const argv[],
                               config_getenv_fn getenv_fn, char *err, size_t errlen)
{
    struct loader ld;
    const char *path = NULL;
    enum config_result r;

    memset(out, 0, sizeof(*out));
    memset(&ld, 0, sizeof(ld));
    ld.cfg = out;
    ld.err = err;
    ld.errlen = errlen;
    text_err(err, errlen, "%s", "");
    if (getenv_fn == NULL)
        getenv_fn = real_getenv;
    ld.getenv_fn = getenv_fn;
    if (argv == NULL)
        argc = 0;

    r = flags_walk(&ld, argc, argv, false, &path);
    if (r != CONFIG_OK)
        goto out;
    r = CONFIG_ERROR;
    if (defaults_apply(&ld) < 0)
        goto out;
    if (path) {
        ld.config_origin = (struct origin){O_FLAG, 0};
    } else {
        path = getenv_fn(settings[S_CONFIG].env);
        ld.config_origin = (struct origin){O_ENV, 0};
    }
    /* An empty path means no config file, like an unset one. */
    if (path && path[0] != '\0') {
        if (setting_apply(&ld, S_CONFIG, path, ld.config_origin) < 0 || file_apply(&ld) < 0)
            goto out;
    }
    if (env_apply(&ld, getenv_fn) < 0)
        goto out;
    if (flags_walk(&ld, argc, argv, true, NULL) != CONFIG_OK)
        goto out;
    if (finish(&ld) < 0)
        goto out;
    r = CONFIG_OK;
out:
    for (int i = 0; i < SECRET_COUNT; i++) {
        free(ld.secret[i].value);
        free(ld.secret[i].file);
    }
    if (r != CONFIG_OK)
        config_free(out);
    return r;
}

int config_api_on(const struct config *cfg)
{
    return cfg->api_addr != NULL && cfg->api_addr[0] != '\0';
}

void config_free(struct config *cfg)
{
    free(cfg->redis_url);
    redis_url_free(&cfg->redis);
    free(cfg->mysql_url);
    mysql_url_free(&cfg->mysql);
    free(cfg->http_addr);
    free(cfg->http_allowed_hosts);
    free(cfg->http_host);
    free(cfg->api_addr);
    free(cfg->api_host);
    free(cfg->api_tls_cert);
    free(cfg->api_tls_key);
    free(cfg->api_access_log);
    free(cfg->alert_webhook);
    webhook_url_free(&cfg->webhook);
    free(cfg->key_prefix);
    free(cfg->config_file);
    free(cfg->instance);
    memset(cfg, 0, sizeof(*cfg));
}

/*
 * One line of --help: lhs in the first column, text (n bytes) in the second;
 * an lhs too long for the column gets a line of its own, the text below it
 * (an environment variable name ran into the help text).
 */
static void usage_row(FILE *out, const char *lhs, const char *text, int n)
{
    if (strlen(lhs) > 28) {
        fprintf(out, "  %s\n", lhs);
        lhs = "";
    }
    fprintf(out, "  %-28s %.*s\n", lhs, n, text);
}

/* One setting in --help: flag and help on the first line, env var below. */
static void usage_setting(FILE *out, const struct setting *s)
{
    char tail[128];
    char lhs[64];
    const char *help = s->help;
    int line = 0;

    for (;;) {
        size_t n = strcspn(help, "\n");

        if (line == 0 && (s->sources & FROM_FLAG))
            snprintf(lhs, sizeof(lhs), "--%s %s", s->name, s->arg);
        else if (line == 0)
            snprintf(lhs, sizeof(lhs), "%s (no flag)", s->name);
        else if (line == 1)
            snprintf(lhs, sizeof(lhs), "  %s", s->env);
        else
            lhs[0] = '\0';
        usage_row(out, lhs, help, (int)n);
        line++;
        if (help[n] == '\0')
            break;
        help += n + 1;
    }
    if (line == 1)
        snprintf(lhs, sizeof(lhs), "  %s", s->env);
    else
        lhs[0] = '\0';
    if (s->kind == K_INT)
        snprintf(tail, sizeof(tail), "default: %s, range %d..%d", s->shown ? s->shown : s->def,
                 s->min, s->max);
    else
        snprintf(tail, sizeof(tail), "default: %s", s->shown ? s->shown : s->def);
    usage_row(out, lhs, tail, (int)strlen(tail));
}

void config_usage(FILE *out, const char *progname)
{
    fprintf(out,
            "Usage: %s [options]\n"
            "\n"
            "Keeps Redis ID pools filled from the application rows in MySQL/MariaDB.\n"
            "\n"
            "Every setting has a flag, an environment variable (shown below it) and a config\n"
            "file key. Later sources win: defaults < config file < environment < flags.\n"
            "Flags take '--name value' or '--name=value'. The config file holds 'name = value'\n"
            "lines, where name is the flag name without the leading dashes (tick-ms = 250);\n"
            "lines starting with '#' or ';' are comments, values may be in double quotes.\n"
            "An empty --config or IDPOOL_CONFIG means no file. Passwords are best kept out of\n"
            "URLs (see redis-password, mysql-password); config errors never show them.\n",
            progname);
    config_usage_settings(out, NULL);
}

/* name is one of only[] (NULL-terminated); every name when only is NULL. */
static bool listed(const char *name, const char *const *only)
{
    if (!only)
        return true;
    for (; *only; only++)
        if (strcmp(*only, name) == 0)
            return true;
    return false;
}

void config_usage_settings(FILE *out, const char *const *only)
{
    const char *group = NULL;

    for (int i = 0; i < S_COUNT; i++) {
        if (!listed(settings[i].name, only))
            continue;
        if (group == NULL || strcmp(group, settings[i].group) != 0) {
            group = settings[i].group;
            fprintf(out, "\n%s:\n", group);
        }
        usage_setting(out, &settings[i]);
    }
    fprintf(out, "  %-28s %s\n", "-h, --help", "show this help and exit");
    fprintf(out, "  %-28s %s\n", "-V, --version", "show the version and exit");
}
