/*
 * fuzz_config — libFuzzer target for config_load(): the config file parser,
 * flags, environment variables and every setting's value parser.
 *
 * The first input byte picks a mode:
 *   0  the rest is a config file (read through a memfd, no disk I/O);
 *   1  the rest, split at NUL bytes, is the command line, except pieces of
 *      the form IDPOOL_X=value, which go to the (fake) environment;
 *   2  one setting and a value: the same value given as --name=value, as
 *      --name value, as IDPOOL_X and as a config file line must give the same
 *      verdict and the same config (the sources differ only in precedence),
 *      and the same error after the part naming the source.
 *
 * --config / IDPOOL_CONFIG only ever name the harness's memfd.
 *
 * Invariants: a config that loads has every value in its documented range
 * and consistent with the others (lock TTL >= 2 ticks, a parsed URL that
 * matches the URL string, an ACL user has a password, ...); any other
 * result leaves *out zeroed and, on CONFIG_ERROR, a terminated, non-empty
 * error.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"

#define MAX_ARGS 32
#define MAX_ENV  32

/* The settings that every source accepts or that flags do not (name, env var, flag?). */
static const struct {
    const char *name;
    const char *env;
    int flag;
} settings[] = {
    {"redis", "IDPOOL_REDIS_URL", 1},
    {"redis-password", "IDPOOL_REDIS_PASSWORD", 0},
    {"redis-timeout-ms", "IDPOOL_REDIS_TIMEOUT_MS", 1},
    {"key-prefix", "IDPOOL_KEY_PREFIX", 1},
    {"mysql", "IDPOOL_MYSQL_URL", 1},
    {"mysql-password", "IDPOOL_MYSQL_PASSWORD", 0},
    {"mysql-timeout-ms", "IDPOOL_MYSQL_TIMEOUT_MS", 1},
    {"tick-ms", "IDPOOL_TICK_MS", 1},
    {"lock-ttl-ms", "IDPOOL_LOCK_TTL_MS", 1},
    {"reload-ms", "IDPOOL_RELOAD_MS", 1},
    {"instance", "IDPOOL_INSTANCE", 1},
    {"http", "IDPOOL_HTTP_ADDR", 1},
    {"alert-webhook", "IDPOOL_ALERT_WEBHOOK", 1},
    {"stall-ms", "IDPOOL_STALL_MS", 1},
    {"alert-resolve-ms", "IDPOOL_ALERT_RESOLVE_MS", 1},
    {"log-level", "IDPOOL_LOG_LEVEL", 1},
};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

/* The fake environment: NAME=value strings. */
static const char *env_vars[MAX_ENV];
static int env_count;
static int memfd = -1;
static char memfd_path[64];

static const char *fake_getenv(const char *name)
{
    size_t n = strlen(name);

    for (int i = 0; i < env_count; i++)
        if (strncmp(env_vars[i], name, n) == 0 && env_vars[i][n] == '=')
            return env_vars[i] + n + 1;
    return NULL;
}

/* Make the memfd hold exactly the n bytes at p. */
static void file_set(const void *p, size_t n)
{
    if (memfd < 0) {
        memfd = memfd_create("idpool-fuzz-config", MFD_CLOEXEC);
        CHECK(memfd >= 0);
        snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
    }
    CHECK(ftruncate(memfd, 0) == 0);
    CHECK(pwrite(memfd, p, n, 0) == (ssize_t)n);
}

static int str_eq(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static int is_zero(const struct config *c)
{
    static const struct config zero;

    return memcmp(c, &zero, sizeof(zero)) == 0;
}

static void check_host(const char *h)
{
    CHECK(h != NULL && h[0] != '\0' && !strchr(h, '[') && !strchr(h, ']') && !strchr(h, '@') &&
          !strchr(h, '/'));
}

/* A config that loaded: every value in range, the parsed forms match the strings. */
static void check_config(const struct config *c, const char *config_file)
{
    struct redis_url ru;
    struct mysql_url mu;
    char err[CONFIG_ERR_MAX], *host;
    int port;
    size_t n;

    CHECK(c->tick_ms >= 1 && c->tick_ms <= 60000);
    CHECK(c->lock_ttl_ms >= 100 && c->lock_ttl_ms <= 600000);
    CHECK(c->lock_ttl_ms >= 2 * c->tick_ms);
    CHECK(c->reload_ms >= 100 && c->reload_ms <= 3600000);
    CHECK(c->redis_timeout_ms >= 10 && c->redis_timeout_ms <= 600000);
    CHECK(c->mysql_timeout_ms >= 1000 && c->mysql_timeout_ms <= 600000);
    CHECK(c->stall_ms >= 100 && c->stall_ms <= 3600000);
    CHECK(c->alert_resolve_ms >= 0 && c->alert_resolve_ms <= 3600000);
    CHECK(c->log_level >= LOG_ERROR && c->log_level <= LOG_DEBUG);
    CHECK(str_eq(c->config_file, config_file));

    /* Redis: the URL string parses to the struct (the password may be overridden). */
    CHECK(c->redis_url != NULL);
    CHECK(redis_url_parse(c->redis_url, &ru, err, sizeof(err)) == 0);
    CHECK(c->redis.kind == ru.kind && c->redis.nhosts == ru.nhosts);
    CHECK(c->redis.kind == REDIS_STANDALONE || (c->redis.nhosts >= 1 && c->redis.hosts != NULL));
    check_host(c->redis.host);
    CHECK(str_eq(ru.host, c->redis.host) && ru.port == c->redis.port && ru.db == c->redis.db);
    CHECK(str_eq(ru.user, c->redis.user));
    CHECK(c->redis.user == NULL || c->redis.password != NULL); /* an ACL user needs one */
    CHECK(c->redis.password == NULL || c->redis.password[0] != '\0');
    redis_url_free(&ru);

    CHECK(c->mysql_url != NULL);
    CHECK(mysql_url_parse(c->mysql_url, &mu, err, sizeof(err)) == 0);
    check_host(c->mysql.host);
    CHECK(str_eq(mu.host, c->mysql.host) && mu.port == c->mysql.port);
    CHECK(str_eq(mu.user, c->mysql.user) && str_eq(mu.db, c->mysql.db));
    CHECK(c->mysql.password == NULL || c->mysql.password[0] != '\0');
    mysql_url_free(&mu);

    /* HTTP: "" disables it, anything else is a parsed HOST:PORT. */
    CHECK(c->http_addr != NULL);
    if (c->http_addr[0] == '\0') {
        CHECK(c->http_host == NULL);
    } else {
        CHECK(hostport_parse(c->http_addr, &host, &port, err, sizeof(err)) == 0);
        check_host(c->http_host);
        CHECK(strcmp(host, c->http_host) == 0 && port == c->http_port);
        free(host);
    }

    if (c->alert_webhook == NULL) {
        CHECK(c->webhook.host == NULL && c->webhook.path == NULL && c->webhook.port == 0);
    } else {
        struct webhook_url w;

        CHECK(webhook_url_parse(c->alert_webhook, &w, err, sizeof(err)) == 0);
        check_host(c->webhook.host);
        CHECK(str_eq(w.host, c->webhook.host) && w.port == c->webhook.port &&
              str_eq(w.path, c->webhook.path));
        webhook_url_free(&w);
    }

    /* The key prefix: 1..64 of A-Z a-z 0-9 _ . : - (so no '{' '}' hash tags). */
    CHECK(c->key_prefix != NULL);
    n = strlen(c->key_prefix);
    CHECK(n >= 1 && n <= 64);
    for (size_t i = 0; i < n; i++) {
        char ch = c->key_prefix[i];
        CHECK((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == ':' || ch == '-');
    }

    /* The instance goes into application_lease.instance VARCHAR(255). */
    CHECK(c->instance != NULL);
    n = strlen(c->instance);
    CHECK(n >= 1 && n <= 255);
    for (size_t i = 0; i < n; i++)
        CHECK((unsigned char)c->instance[i] >= ' ' && c->instance[i] != 0x7f);
}

/* config_load() with the argv (NULL-terminated) and the fake environment; checks the result. */
static enum config_result load(struct config *c, char **argv, char *err, const char *config_file)
{
    int argc = 0;
    enum config_result r;

    while (argv[argc])
        argc++;
    memset(c, 0xA5, sizeof(*c)); /* config_load overwrites it */
    memset(err, 'x', CONFIG_ERR_MAX);
    r = config_load(c, argc, argv, fake_getenv, err, CONFIG_ERR_MAX);
    CHECK(r == CONFIG_OK || r == CONFIG_ERROR || r == CONFIG_HELP || r == CONFIG_VERSION);
    if (r == CONFIG_OK) {
        check_config(c, config_file);
        return r;
    }
    CHECK(is_zero(c)); /* nothing to free */
    if (r == CONFIG_ERROR) {
        CHECK(memchr(err, '\0', CONFIG_ERR_MAX) != NULL && err[0] != '\0');
    }
    return r;
}

static void mode_file(struct fz *f)
{
    char *argv[] = {"idpoold", "--config", memfd_path, NULL};
    char err[CONFIG_ERR_MAX];
    struct config c;

    file_set(f->p, f->n);
    env_count = 0;
    if (load(&c, argv, err, memfd_path) == CONFIG_OK)
        config_free(&c);
    CHECK(is_zero(&c));
}

/*
 * A command line and environment. Every --config names the memfd (empty
 * here), so nothing else is ever opened; IDPOOL_CONFIG is left out.
 */
static void mode_argv(struct fz *f)
{
    static char config_flag[96];
    char *argv[MAX_ARGS + 2], *s, err[CONFIG_ERR_MAX];
    const char *config_file = NULL;
    size_t len, i = 0;
    int argc = 1;
    struct config c;

    s = fz_rest(f, &len);
    file_set("", 0);
    snprintf(config_flag, sizeof(config_flag), "--config=%s", memfd_path);
    argv[0] = "idpoold";
    env_count = 0;
    while (i < len) {
        char *piece = s + i;

        i += strlen(piece) + 1;
        if (strncmp(piece, "IDPOOL_", 7) == 0 && strchr(piece, '=')) {
            if (env_count < MAX_ENV && strncmp(piece, "IDPOOL_CONFIG=", 14) != 0)
                env_vars[env_count++] = piece;
        } else if (argc < MAX_ARGS) {
            argv[argc++] = piece;
        }
    }
    argv[argc] = NULL;
    for (int a = 1; a < argc; a++) {
        if (strncmp(argv[a], "--config=", 9) == 0) {
            argv[a] = config_flag;
            config_file = memfd_path;
        } else if (strcmp(argv[a], "--config") == 0 && a + 1 < argc) {
            argv[a + 1] = memfd_path;
            config_file = memfd_path;
        }
    }
    if (load(&c, argv, err, config_file) == CONFIG_OK)
        config_free(&c);
    free(s);
}

/* Two loaded configs hold the same settings. */
static int config_same(const struct config *a, const struct config *b)
{
    return str_eq(a->redis_url, b->redis_url) && str_eq(a->redis.host, b->redis.host) &&
           a->redis.port == b->redis.port && str_eq(a->redis.user, b->redis.user) &&
           str_eq(a->redis.password, b->redis.password) && a->redis.db == b->redis.db &&
           str_eq(a->mysql_url, b->mysql_url) && str_eq(a->mysql.host, b->mysql.host) &&
           a->mysql.port == b->mysql.port && str_eq(a->mysql.user, b->mysql.user) &&
           str_eq(a->mysql.password, b->mysql.password) && str_eq(a->mysql.db, b->mysql.db) &&
           str_eq(a->http_addr, b->http_addr) && str_eq(a->http_host, b->http_host) &&
           a->http_port == b->http_port && str_eq(a->alert_webhook, b->alert_webhook) &&
           str_eq(a->webhook.host, b->webhook.host) && a->webhook.port == b->webhook.port &&
           str_eq(a->webhook.path, b->webhook.path) && a->stall_ms == b->stall_ms &&
           a->alert_resolve_ms == b->alert_resolve_ms && str_eq(a->key_prefix, b->key_prefix) &&
           a->tick_ms == b->tick_ms && a->lock_ttl_ms == b->lock_ttl_ms &&
           a->reload_ms == b->reload_ms && a->redis_timeout_ms == b->redis_timeout_ms &&
           a->mysql_timeout_ms == b->mysql_timeout_ms && a->log_level == b->log_level &&
           str_eq(a->instance, b->instance);
}

/* One source's outcome for mode_value. */
struct outcome {
    enum config_result r;
    struct config c;
    char err[CONFIG_ERR_MAX];
    const char *msg; /* err after "<where>: ", or NULL when err names another setting */
};

static void outcome_msg(struct outcome *o, const char *where)
{
    size_t n = strlen(where);

    o->msg = NULL;
    if (o->r == CONFIG_ERROR && strncmp(o->err, where, n) == 0 && strncmp(o->err + n, ": ", 2) == 0)
        o->msg = o->err + n + 2;
}

static void mode_value(struct fz *f)
{
    unsigned idx = fz_u8(f) % NSETTINGS;
    const char *name = settings[idx].name, *env = settings[idx].env;
    struct outcome o[4]; /* --name=value, --name value, env, file */
    int have[4] = {0, 0, 0, 0};
    char *value, *flag, *envv, *file, where[160];
    size_t vlen, n;

    value = fz_rest(f, &vlen);
    vlen = strlen(value); /* a C string: up to the first NUL */
    n = vlen + strlen(name) + strlen(env) + 16;
    flag = malloc(n);
    envv = malloc(n);
    file = malloc(n);
    CHECK(flag && envv && file);
    snprintf(flag, n, "--%s=%s", name, value);
    snprintf(envv, n, "%s=%s", env, value);
    snprintf(file, n, "%s = \"%s\"\n", name, value);

    if (settings[idx].flag) {
        char *argv1[] = {"idpoold", flag, NULL};
        char *argv2[] = {"idpoold", flag, value, NULL};

        env_count = 0;
        o[0].r = load(&o[0].c, argv1, o[0].err, NULL);
        snprintf(where, sizeof(where), "--%s", name);
        outcome_msg(&o[0], where);
        have[0] = 1;
        if (strncmp(value, "--", 2) != 0) { /* else it would be taken for the next flag */
            argv2[1] = strndup(flag, 2 + strlen(name));
            CHECK(argv2[1] != NULL);
            o[1].r = load(&o[1].c, argv2, o[1].err, NULL);
            outcome_msg(&o[1], where);
            free(argv2[1]);
            have[1] = 1;
        }
    }
    {
        char *argv[] = {"idpoold", NULL};

        env_vars[0] = envv;
        env_count = 1;
        o[2].r = load(&o[2].c, argv, o[2].err, NULL);
        outcome_msg(&o[2], env);
        env_count = 0;
        have[2] = 1;
    }
    if (!strchr(value, '\n')) { /* one line: the quotes keep the value exactly */
        char *argv[] = {"idpoold", "--config", memfd_path, NULL};

        file_set(file, strlen(file));
        o[3].r = load(&o[3].c, argv, o[3].err, memfd_path);
        snprintf(where, sizeof(where), "%s:1: %s", memfd_path, name);
        outcome_msg(&o[3], where);
        have[3] = 1;
    }

    for (int i = 0; i < 4; i++) {
        if (!have[i])
            continue;
        for (int j = i + 1; j < 4; j++) {
            if (!have[j])
                continue;
            if (o[i].r != o[j].r) {
                fprintf(stderr,
                        "setting %s = '%s': source %d gives %d (%s), source %d gives %d (%s)\n",
                        name, value, i, o[i].r, o[i].err, j, o[j].r, o[j].err);
                CHECK(!"every source parses a value the same way");
            }
            if (o[i].r == CONFIG_OK) {
                /* The file source also records the file's path. */
                CHECK(config_same(&o[i].c, &o[j].c));
            }
            if (o[i].msg && o[j].msg && strcmp(o[i].msg, o[j].msg) != 0) {
                fprintf(stderr, "setting %s: '%s' vs '%s'\n", name, o[i].err, o[j].err);
                CHECK(!"the same error whatever the source");
            }
        }
    }
    for (int i = 0; i < 4; i++)
        if (have[i] && o[i].r == CONFIG_OK)
            config_free(&o[i].c);
    free(value);
    free(flag);
    free(envv);
    free(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};

    switch (fz_u8(&f) % 3) {
    case 0:
        mode_file(&f);
        break;
    case 1:
        mode_argv(&f);
        break;
    default:
        mode_value(&f);
        break;
    }
    return 0;
}
