/*
 * Unit tests of config: defaults, precedence (defaults < file < environment <
 * flags), URL and address parsing, error messages naming setting and source,
 * and memory ownership (run under valgrind).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "url.h"
#include "unit.h"

/* A fake environment: a NULL-terminated table read by fake_getenv(). */
struct envvar {
    const char *name;
    const char *value;
};

static const struct envvar *fake_env;

static const char *fake_getenv(const char *name)
{
    for (const struct envvar *e = fake_env; e && e->name; e++)
        if (strcmp(e->name, name) == 0)
            return e->value;
    return NULL;
}

#define ENV(...)  ((const struct envvar[]){__VA_ARGS__, {NULL, NULL}})
#define ARGV(...) ((char *[]){"idpoold", __VA_ARGS__, NULL})

static char *no_args[] = {"idpoold", NULL};
static char err[CONFIG_ERR_MAX];

/* config_load() with argv (NULL-terminated) and the fake environment env. */
static enum config_result load(struct config *cfg, const struct envvar *env, char **argv)
{
    int argc = 0;

    while (argv[argc])
        argc++;
    fake_env = env;
    return config_load(cfg, argc, argv, fake_getenv, err, sizeof(err));
}

/* True when every byte of *cfg is zero (nothing left to free). */
static int config_is_zero(const struct config *cfg)
{
    static const struct config zero;

    return memcmp(cfg, &zero, sizeof(zero)) == 0;
}

/* Load expecting CONFIG_ERROR, check that the message contains want. */
static void expect_error(const struct envvar *env, char **argv, const char *want)
{
    struct config cfg;

    memset(&cfg, 0xa5, sizeof(cfg)); /* config_load must overwrite it */
    CHECK_EQ_U64((uint64_t)load(&cfg, env, argv), (uint64_t)CONFIG_ERROR);
    CHECK_STR_CONTAINS(err, want);
    CHECK(config_is_zero(&cfg));
    config_free(&cfg);
}

/* Write content to a new temp file; its path goes to path (>= 32 bytes). */
static void write_tmp(char *path, const char *content)
{
    int fd;
    size_t n = strlen(content);

    strcpy(path, "/tmp/idpool-config-XXXXXX");
    fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK(write(fd, content, n) == (ssize_t)n);
    close(fd);
}

static void test_defaults(void)
{
    struct config cfg;
    char pid[32];

    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, no_args), (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.redis_url, "redis://127.0.0.1:6379/0") == 0);
    CHECK(strcmp(cfg.redis.host, "127.0.0.1") == 0);
    CHECK_EQ_U64(cfg.redis.port, 6379);
    CHECK_EQ_U64(cfg.redis.db, 0);
    CHECK(cfg.redis.user == NULL);
    CHECK(cfg.redis.password == NULL);
    CHECK(strcmp(cfg.mysql_url, "mysql://root@127.0.0.1:3306/idpool") == 0);
    CHECK(strcmp(cfg.mysql.host, "127.0.0.1") == 0);
    CHECK_EQ_U64(cfg.mysql.port, 3306);
    CHECK(strcmp(cfg.mysql.user, "root") == 0);
    CHECK(cfg.mysql.password == NULL);
    CHECK(strcmp(cfg.mysql.db, "idpool") == 0);
    CHECK(strcmp(cfg.http_addr, "127.0.0.1:9471") == 0);
    CHECK(strcmp(cfg.http_host, "127.0.0.1") == 0);
    CHECK_EQ_U64(cfg.http_port, 9471);
    CHECK(strcmp(cfg.key_prefix, "idpool") == 0);
    CHECK_EQ_U64(cfg.tick_ms, 100);
    CHECK_EQ_U64(cfg.lock_ttl_ms, 1000);
    CHECK_EQ_U64(cfg.reload_ms, 5000);
    CHECK_EQ_U64(cfg.redis_timeout_ms, 2000);
    CHECK_EQ_U64(cfg.mysql_timeout_ms, 5000);
    CHECK_EQ_U64(cfg.log_level, LOG_INFO);
    CHECK(cfg.config_file == NULL);
    snprintf(pid, sizeof(pid), ":%ld", (long)getpid());
    CHECK_STR_CONTAINS(cfg.instance, pid);
    CHECK(cfg.instance[0] != ':');
    CHECK(strcmp(err, "") == 0);
    config_free(&cfg);
    CHECK(config_is_zero(&cfg));
}

/* A config file changes every setting it names; comments, quotes, spacing. */
static void test_file_overrides_defaults(void)
{
    struct config cfg;
    char path[64];

    write_tmp(path, "# idpool test config\n"
                    "; another comment style\n"
                    "\n"
                    "   \t\n"
                    "redis = redis://r.example:7000/2\n"
                    "mysql=mysql://app:pw@db.example/ids\n"
                    "  http   =   \"0.0.0.0:8080\"  \n"
                    "key-prefix = \"pfx\"\n"
                    "tick-ms = 50\r\n"
                    "lock-ttl-ms=300\n"
                    "reload-ms = 1000\n"
                    "redis-timeout-ms = 10\n"
                    "mysql-timeout-ms = 1500\n"
                    "log-level = debug\n"
                    "instance = worker-1\n"
                    "tick-ms = 60\n"); /* a later line wins */
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--config", path)), (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.config_file, path) == 0);
    CHECK(strcmp(cfg.redis.host, "r.example") == 0);
    CHECK_EQ_U64(cfg.redis.port, 7000);
    CHECK_EQ_U64(cfg.redis.db, 2);
    CHECK(strcmp(cfg.mysql.host, "db.example") == 0);
    CHECK(strcmp(cfg.mysql.user, "app") == 0);
    CHECK(strcmp(cfg.mysql.password, "pw") == 0);
    CHECK(strcmp(cfg.mysql.db, "ids") == 0);
    CHECK(strcmp(cfg.http_addr, "0.0.0.0:8080") == 0);
    CHECK(strcmp(cfg.http_host, "0.0.0.0") == 0);
    CHECK_EQ_U64(cfg.http_port, 8080);
    CHECK(strcmp(cfg.key_prefix, "pfx") == 0);
    CHECK_EQ_U64(cfg.tick_ms, 60);
    CHECK_EQ_U64(cfg.lock_ttl_ms, 300);
    CHECK_EQ_U64(cfg.reload_ms, 1000);
    CHECK_EQ_U64(cfg.redis_timeout_ms, 10);
    CHECK_EQ_U64(cfg.mysql_timeout_ms, 1500);
    CHECK_EQ_U64(cfg.log_level, LOG_DEBUG);
    CHECK(strcmp(cfg.instance, "worker-1") == 0);
    config_free(&cfg);
    unlink(path);
}

static void test_env_overrides_file(void)
{
    struct config cfg;
    char path[64];

    write_tmp(path, "tick-ms = 50\nreload-ms = 1000\nkey-prefix = fromfile\n");
    CHECK_EQ_U64((uint64_t)load(
                     &cfg,
                     ENV({"IDPOOL_CONFIG", path}, {"IDPOOL_TICK_MS", "70"},
                         {"IDPOOL_KEY_PREFIX", "fromenv"}, {"IDPOOL_REDIS_URL", "redis://envhost"},
                         {"IDPOOL_MYSQL_URL", "mysql://envdb"}, {"IDPOOL_HTTP_ADDR", "[::1]:9000"},
                         {"IDPOOL_LOCK_TTL_MS", "2000"}, {"IDPOOL_RELOAD_MS", "200"},
                         {"IDPOOL_REDIS_TIMEOUT_MS", "11"}, {"IDPOOL_MYSQL_TIMEOUT_MS", "1001"},
                         {"IDPOOL_LOG_LEVEL", "warn"}, {"IDPOOL_INSTANCE", "env-inst"}),
                     no_args),
                 (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.config_file, path) == 0);
    CHECK_EQ_U64(cfg.tick_ms, 70);
    CHECK_EQ_U64(cfg.reload_ms, 200);
    CHECK(strcmp(cfg.key_prefix, "fromenv") == 0);
    CHECK(strcmp(cfg.redis.host, "envhost") == 0);
    CHECK(strcmp(cfg.mysql.host, "envdb") == 0);
    CHECK(strcmp(cfg.http_host, "::1") == 0);
    CHECK_EQ_U64(cfg.http_port, 9000);
    CHECK_EQ_U64(cfg.lock_ttl_ms, 2000);
    CHECK_EQ_U64(cfg.redis_timeout_ms, 11);
    CHECK_EQ_U64(cfg.mysql_timeout_ms, 1001);
    CHECK_EQ_U64(cfg.log_level, LOG_WARN);
    CHECK(strcmp(cfg.instance, "env-inst") == 0);
    config_free(&cfg);

    /* Settings the environment leaves alone keep the file's value. */
    CHECK_EQ_U64(
        (uint64_t)load(&cfg, ENV({"IDPOOL_CONFIG", path}, {"IDPOOL_TICK_MS", "70"}), no_args),
        (uint64_t)CONFIG_OK);
    CHECK_EQ_U64(cfg.tick_ms, 70);
    CHECK_EQ_U64(cfg.reload_ms, 1000);
    CHECK(strcmp(cfg.key_prefix, "fromfile") == 0);
    config_free(&cfg);
    unlink(path);
}

static void test_flags_override_env(void)
{
    struct config cfg;
    char path[64];

    write_tmp(path, "tick-ms = 50\nlog-level = error\n");
    CHECK_EQ_U64((uint64_t)load(&cfg,
                                ENV({"IDPOOL_TICK_MS", "70"}, {"IDPOOL_LOG_LEVEL", "warn"},
                                    {"IDPOOL_REDIS_URL", "redis://envhost"}),
                                ARGV("--config", path, "--tick-ms", "80", "--log-level=debug",
                                     "--redis=redis://flaghost:1", "--mysql", "mysql://flagdb",
                                     "--http", "localhost:1", "--key-prefix=k", "--lock-ttl-ms",
                                     "500", "--reload-ms=100", "--redis-timeout-ms", "600000",
                                     "--mysql-timeout-ms=600000", "--instance", "flag-inst")),
                 (uint64_t)CONFIG_OK);
    CHECK_EQ_U64(cfg.tick_ms, 80);
    CHECK_EQ_U64(cfg.log_level, LOG_DEBUG);
    CHECK(strcmp(cfg.redis.host, "flaghost") == 0);
    CHECK_EQ_U64(cfg.redis.port, 1);
    CHECK(strcmp(cfg.redis_url, "redis://flaghost:1") == 0);
    CHECK(strcmp(cfg.mysql.host, "flagdb") == 0);
    CHECK(strcmp(cfg.http_host, "localhost") == 0);
    CHECK_EQ_U64(cfg.http_port, 1);
    CHECK(strcmp(cfg.key_prefix, "k") == 0);
    CHECK_EQ_U64(cfg.lock_ttl_ms, 500);
    CHECK_EQ_U64(cfg.reload_ms, 100);
    CHECK_EQ_U64(cfg.redis_timeout_ms, 600000);
    CHECK_EQ_U64(cfg.mysql_timeout_ms, 600000);
    CHECK(strcmp(cfg.instance, "flag-inst") == 0);
    config_free(&cfg);

    /* A repeated flag: the last one wins. */
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--tick-ms", "5", "--tick-ms=6")),
                 (uint64_t)CONFIG_OK);
    CHECK_EQ_U64(cfg.tick_ms, 6);
    config_free(&cfg);
    unlink(path);
}

/* --config beats IDPOOL_CONFIG; an empty path means no file. */
static void test_config_path_sources(void)
{
    struct config cfg;
    char a[64], b[64];

    write_tmp(a, "tick-ms = 11\n");
    write_tmp(b, "tick-ms = 22\n");
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_CONFIG", a}), ARGV("--config", b)),
                 (uint64_t)CONFIG_OK);
    CHECK_EQ_U64(cfg.tick_ms, 22);
    CHECK(strcmp(cfg.config_file, b) == 0);
    config_free(&cfg);

    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_CONFIG", ""}), no_args), (uint64_t)CONFIG_OK);
    CHECK(cfg.config_file == NULL);
    CHECK_EQ_U64(cfg.tick_ms, 100);
    config_free(&cfg);

    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_CONFIG", a}), ARGV("--config=")),
                 (uint64_t)CONFIG_OK);
    CHECK(cfg.config_file == NULL);
    CHECK_EQ_U64(cfg.tick_ms, 100);
    config_free(&cfg);
    unlink(a);
    unlink(b);
}

static void test_redis_url_forms(void)
{
    struct redis_url u;
    char e[CONFIG_ERR_MAX];

    CHECK(redis_url_parse("redis://h", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.host, "h") == 0);
    CHECK_EQ_U64(u.port, 6379);
    CHECK_EQ_U64(u.db, 0);
    CHECK(u.user == NULL && u.password == NULL);
    redis_url_free(&u);

    CHECK(redis_url_parse("redis://cache-1.example.com:7000/3", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.host, "cache-1.example.com") == 0);
    CHECK_EQ_U64(u.port, 7000);
    CHECK_EQ_U64(u.db, 3);
    redis_url_free(&u);

    /* Password only: classic AUTH. */
    CHECK(redis_url_parse("redis://:pw@h:1/2", &u, e, sizeof(e)) == 0);
    CHECK(u.user == NULL);
    CHECK(strcmp(u.password, "pw") == 0);
    CHECK_EQ_U64(u.port, 1);
    CHECK_EQ_U64(u.db, 2);
    redis_url_free(&u);

    /* ACL user, percent-decoded user and password. */
    CHECK(redis_url_parse("redis://%61lice:s3cr%40t%3a%2F@h", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.user, "alice") == 0);
    CHECK(strcmp(u.password, "s3cr@t:/") == 0);
    redis_url_free(&u);

    /* The last '@' ends the userinfo; a ':' in the password is kept. */
    CHECK(redis_url_parse("redis://u:p@s:s@h", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.user, "u") == 0);
    CHECK(strcmp(u.password, "p@s:s") == 0);
    CHECK(strcmp(u.host, "h") == 0);
    redis_url_free(&u);

    /* A user without a password parses (the password may come from env). */
    CHECK(redis_url_parse("redis://bob@h", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.user, "bob") == 0);
    CHECK(u.password == NULL);
    redis_url_free(&u);

    /* An empty password is no password. */
    CHECK(redis_url_parse("redis://:@h", &u, e, sizeof(e)) == 0);
    CHECK(u.user == NULL && u.password == NULL);
    redis_url_free(&u);

    CHECK(redis_url_parse("redis://[::1]:6380/1", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.host, "::1") == 0);
    CHECK_EQ_U64(u.port, 6380);
    CHECK_EQ_U64(u.db, 1);
    redis_url_free(&u);

    CHECK(redis_url_parse("redis://:pw@[2001:db8::1]", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.host, "2001:db8::1") == 0);
    CHECK_EQ_U64(u.port, 6379);
    redis_url_free(&u);

    CHECK(redis_url_parse("REDIS://h/", &u, e, sizeof(e)) == 0);
    CHECK_EQ_U64(u.db, 0);
    redis_url_free(&u);

    CHECK(redis_url_parse("redis://h/1000000", &u, e, sizeof(e)) == 0);
    CHECK_EQ_U64(u.db, 1000000);
    redis_url_free(&u);

    CHECK(redis_url_parse("redis://h:65535", &u, e, sizeof(e)) == 0);
    CHECK_EQ_U64(u.port, 65535);
    redis_url_free(&u);

    /* redis_url_free is safe on a zeroed struct and twice. */
    redis_url_free(&u);
}

/* redis_url_parse must fail with a message containing want, leaving u empty. */
static void redis_bad(const char *url, const char *want)
{
    struct redis_url u;
    char e[CONFIG_ERR_MAX] = "";

    memset(&u, 0xa5, sizeof(u));
    CHECK(redis_url_parse(url, &u, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, want);
    CHECK(u.host == NULL && u.user == NULL && u.password == NULL);
    if (strstr(e, "topsecret")) {
        fprintf(stderr, "password leaked into error for %s: %s\n", url, e);
        CHECK(0);
    }
    redis_url_free(&u);
}

static void test_redis_url_errors(void)
{
    redis_bad("rediss://h", "TLS");
    redis_bad("http://h", "unsupported scheme 'http://'");
    redis_bad("mysql://h", "unsupported scheme 'mysql://'");
    redis_bad("h:6379", "not a URL");
    redis_bad("", "not a URL");
    redis_bad("redis://", "missing host");
    redis_bad("redis://:topsecret@", "missing host");
    redis_bad("redis://:topsecret@/0", "missing host");
    redis_bad("redis://u:p@h:0", "port must be an integer in 1..65535, got '0'");
    redis_bad("redis://:p@h:65536", "got '65536'");
    redis_bad("redis://u@h:abc", "got 'abc'");
    /* Found by fuzzing: with no '@', "user:password" reads as host:port; the port is not shown. */
    redis_bad("redis://admin:topsecret", "port must be an integer in 1..65535 (not shown");
    redis_bad("redis://h:0", "port must be an integer in 1..65535 (not shown");
    redis_bad("redis://h:-1", "port");
    redis_bad("redis://h:99999999999999999999999", "port");
    redis_bad("redis://:topsecret@h:", "missing port after ':'");
    redis_bad("redis://h/abc", "database must be an integer in 0..1000000, got 'abc'");
    redis_bad("redis://h/-1", "database");
    redis_bad("redis://h/1000001", "database");
    redis_bad("redis://h/0/1", "database");
    redis_bad("redis://h/0?timeout=1", "query strings");
    redis_bad("redis://h?x", "query strings");
    redis_bad("redis://h/0#frag", "fragments");
    redis_bad("redis://:top#secret@h", "fragments");
    redis_bad("redis://:top/secret@h", "'@' after the host");
    redis_bad("redis://::1:6379", "brackets");
    redis_bad("redis://[::1:6379", "missing ']'");
    redis_bad("redis://[zz::1]:1", "bad IPv6 address 'zz::1'");
    redis_bad("redis://[]:1", "bad IPv6 address");
    redis_bad("redis://[::1]x", "expected ':PORT' after ']'");
    /* With no '@', what follows ']' may be a password ("user:password", host forgotten). */
    redis_bad("redis://[::1]x:topsecret", "expected ':PORT' after ']' (what follows is not shown");
    redis_bad("redis-sentinel://s1,[::]_u:topsecret", "expected ':PORT' after ']' (what follows");
    redis_bad("redis://u:p@[::1]x", "expected ':PORT' after ']', got 'x'");
    redis_bad("redis://ho!st", "bad host name 'ho!st'");
    redis_bad("redis://:topsecret%zz@h", "bad percent-escape in the password");
    redis_bad("redis://:topsecret%4@h", "bad percent-escape");
    redis_bad("redis://:topsecret%@h", "bad percent-escape");
    redis_bad("redis://us%00er:topsecret@h", "bad percent-escape in the user");
    redis_bad("redis://:top secret@h", "space or control character");
    redis_bad("redis://h\n", "space or control character");
}

/* redis-sentinel:// URLs: the sentinels, the master's name, the two sets of credentials. */
static void test_sentinel_urls(void)
{
    struct redis_url u;
    char e[CONFIG_ERR_MAX] = "";

    CHECK(redis_url_parse("redis://h", &u, e, sizeof(e)) == 0);
    CHECK(u.kind == REDIS_STANDALONE && u.hosts == NULL && u.nhosts == 0 && !u.master);
    redis_url_free(&u);

    CHECK(redis_url_parse("redis-sentinel://s1#mymaster", &u, e, sizeof(e)) == 0);
    CHECK(u.kind == REDIS_SENTINEL);
    CHECK_EQ_U64(u.nhosts, 1);
    CHECK(strcmp(u.hosts[0].host, "s1") == 0);
    CHECK_EQ_U64(u.hosts[0].port, 26379);
    CHECK(strcmp(u.host, "s1") == 0); /* the first sentinel, for anyone not reading kind */
    CHECK_EQ_U64(u.port, 26379);
    CHECK(strcmp(u.master, "mymaster") == 0);
    CHECK(u.user == NULL && u.password == NULL && u.db == 0);
    CHECK(u.sentinel_user == NULL && u.sentinel_password == NULL);
    redis_url_free(&u);

    CHECK(redis_url_parse("REDIS-SENTINEL://app:pw@10.0.0.1:5000,[::1],s-3.example:26380/3"
                          "?sentinel_user=sen&sentinel_password=p%23w#m.1_x-y",
                          &u, e, sizeof(e)) == 0);
    CHECK_EQ_U64(u.nhosts, 3);
    CHECK(strcmp(u.hosts[0].host, "10.0.0.1") == 0);
    CHECK_EQ_U64(u.hosts[0].port, 5000);
    CHECK(strcmp(u.hosts[1].host, "::1") == 0);
    CHECK_EQ_U64(u.hosts[1].port, 26379);
    CHECK(strcmp(u.hosts[2].host, "s-3.example") == 0);
    CHECK_EQ_U64(u.hosts[2].port, 26380);
    CHECK(strcmp(u.user, "app") == 0 && strcmp(u.password, "pw") == 0);
    CHECK_EQ_U64(u.db, 3);
    CHECK(strcmp(u.sentinel_user, "sen") == 0 && strcmp(u.sentinel_password, "p#w") == 0);
    CHECK(strcmp(u.master, "m.1_x-y") == 0);
    redis_url_free(&u);

    /* ?master= (the issue's form), lettuce's sentinelMasterId=, and the same name twice. */
    CHECK(redis_url_parse("redis-sentinel://s?master=a", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.master, "a") == 0);
    redis_url_free(&u);
    CHECK(redis_url_parse("redis-sentinel://s/0?sentinelMasterId=b&&master=b#b", &u, e,
                          sizeof(e)) == 0);
    CHECK(strcmp(u.master, "b") == 0);
    redis_url_free(&u);
    /* An empty sentinel_password counts as none. */
    CHECK(redis_url_parse("redis-sentinel://s?sentinel_password=#m", &u, e, sizeof(e)) == 0);
    CHECK(u.sentinel_password == NULL);
    redis_url_free(&u);

    /* Sixteen sentinels are allowed. */
    CHECK(redis_url_parse("redis-sentinel://a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,"
                          "a16#m",
                          &u, e, sizeof(e)) == 0);
    CHECK_EQ_U64(u.nhosts, 16);
    CHECK(strcmp(u.hosts[15].host, "a16") == 0);
    redis_url_free(&u);

    redis_bad("redis-sentinel://s", "needs the master's name (#NAME or ?master=NAME)");
    redis_bad("redis-sentinel://:topsecret@s/0", "needs the master's name");
    redis_bad("redis-sentinel://s#", "the master's name (#) must be 1..64 characters");
    redis_bad("redis-sentinel://s#a b", "space or control character");
    redis_bad("redis-sentinel://s#a/b", "the master's name (#) must be");
    redis_bad("redis-sentinel://s?master=a#b", "given twice, differently: 'b' and 'a'");
    redis_bad("redis-sentinel://s?master=a&sentinelMasterId=c", "given twice, differently");
    redis_bad("redis-sentinel://s?mastr=a", "unknown parameter 'mastr' (expected master,");
    redis_bad("redis-sentinel://s?master#m", "parameter 'master' has no '=VALUE'");
    redis_bad("redis-sentinel://s?sentinel_password=topsecret&sentinel_password=x#m",
              "parameter sentinel_password given twice");
    redis_bad("redis-sentinel://s?sentinel_password=topsecret%zz#m",
              "bad percent-escape in the sentinel_password");
    redis_bad("redis-sentinel://s1,s1:26379#m", "sentinel s1:26379 is listed twice");
    redis_bad("redis-sentinel://S1:7,s1:7#m", "listed twice");
    redis_bad("redis-sentinel://s1,,s2#m", "missing host");
    redis_bad("redis-sentinel://s1,#m", "missing host");
    redis_bad("redis-sentinel://s1:0#m", "port must be an integer in 1..65535");
    redis_bad("redis-sentinel://a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16,a17#m",
              "more than 16 sentinels");
    redis_bad("redis-sentinel://s/x#m", "database must be an integer");
    redis_bad("sentinel://s#m", "unsupported scheme 'sentinel://', expected redis://");
}

/* redis-cluster:// URLs: the seed nodes, database 0 only, no query or fragment. */
static void test_cluster_urls(void)
{
    struct redis_url u;
    char e[CONFIG_ERR_MAX] = "", where[256];

    CHECK(redis_url_parse("redis-cluster://n1", &u, e, sizeof(e)) == 0);
    CHECK(u.kind == REDIS_CLUSTER);
    CHECK_EQ_U64(u.nhosts, 1);
    CHECK_STR(u.hosts[0].host, "n1");
    CHECK_EQ_U64(u.hosts[0].port, 6379);
    CHECK_STR(u.host, "n1"); /* the first seed, for anyone not reading kind */
    CHECK_EQ_U64(u.port, 6379);
    CHECK(u.user == NULL && u.password == NULL && u.db == 0 && u.master == NULL);
    CHECK_STR(redis_url_where(where, sizeof(where), &u), "cluster via seed n1:6379");
    redis_url_free(&u);

    CHECK(redis_url_parse("REDIS-CLUSTER://app:p%40w@10.0.0.1:7000,[::1],n-3.example:7002/0", &u, e,
                          sizeof(e)) == 0);
    CHECK(u.kind == REDIS_CLUSTER);
    CHECK_EQ_U64(u.nhosts, 3);
    CHECK_STR(u.hosts[0].host, "10.0.0.1");
    CHECK_EQ_U64(u.hosts[0].port, 7000);
    CHECK_STR(u.hosts[1].host, "::1");
    CHECK_EQ_U64(u.hosts[1].port, 6379);
    CHECK_STR(u.hosts[2].host, "n-3.example");
    CHECK_EQ_U64(u.hosts[2].port, 7002);
    CHECK_STR(u.user, "app");
    CHECK_STR(u.password, "p@w");
    CHECK_STR(redis_url_where(where, sizeof(where), &u),
              "cluster via seeds 10.0.0.1:7000,[::1]:6379,n-3.example:7002");
    CHECK(strstr(where, "p@w") == NULL);
    redis_url_free(&u);

    CHECK(redis_url_parse("redis-cluster://a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16/",
                          &u, e, sizeof(e)) == 0);
    CHECK_EQ_U64(u.nhosts, 16);
    redis_url_free(&u);

    redis_bad("redis-cluster://n1/1", "Redis Cluster has database 0 only, got '/1'");
    redis_bad("redis-cluster://:topsecret@n1/x", "Redis Cluster has database 0 only, got '/x'");
    redis_bad("redis-cluster://n1#m", "fragments ('#...') are not supported");
    redis_bad("redis-cluster://n1/0?timeout=1", "query strings ('?...') are not supported");
    redis_bad("redis-cluster://n1,n1:6379", "seed node n1:6379 is listed twice");
    redis_bad("redis-cluster://n1,,n2", "missing host");
    redis_bad("redis-cluster://:topsecret@", "missing host");
    redis_bad("redis-cluster://n1:0", "port must be an integer in 1..65535 (not shown");
    redis_bad("redis-cluster://a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16,a17",
              "more than 16 seed nodes");
    redis_bad("cluster://n1", "unsupported scheme 'cluster://', expected redis://");
    CHECK_STR(redis_kind_scheme(REDIS_CLUSTER), "redis-cluster");
    CHECK_STR(redis_kind_scheme(REDIS_SENTINEL), "redis-sentinel");
    CHECK_STR(redis_kind_scheme(REDIS_STANDALONE), "redis");
}

/* s as a JSON string (control bytes as \u00XX) appended at b[*n] (NULL: null). */
static void json_str(char *b, size_t len, size_t *n, const char *s)
{
    if (s == NULL) {
        *n += (size_t)snprintf(b + *n, *n < len ? len - *n : 0, "null");
        return;
    }
    *n += (size_t)snprintf(b + *n, *n < len ? len - *n : 0, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            *n += (size_t)snprintf(b + *n, *n < len ? len - *n : 0, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            *n += (size_t)snprintf(b + *n, *n < len ? len - *n : 0, "\\u%04x", *s);
        else
            *n += (size_t)snprintf(b + *n, *n < len ? len - *n : 0, "%c", *s);
    }
    *n += (size_t)snprintf(b + *n, *n < len ? len - *n : 0, "\"");
}

/* u as url_vectors.tsv writes a parsed URL: compact JSON, its keys in its order. */
static void redis_url_json(const struct redis_url *u, char *b, size_t len)
{
    size_t n = 0;

#define PUT(...) (n += (size_t)snprintf(b + n, n < len ? len - n : 0, __VA_ARGS__))
    PUT("{\"kind\":\"%s\",\"host\":", u->kind == REDIS_SENTINEL  ? "sentinel"
                                      : u->kind == REDIS_CLUSTER ? "cluster"
                                                                 : "standalone");
    json_str(b, len, &n, u->host);
    PUT(",\"port\":%d,\"db\":%d,\"username\":", u->port, u->db);
    json_str(b, len, &n, u->user);
    PUT(",\"password\":");
    json_str(b, len, &n, u->password);
    if (u->kind != REDIS_STANDALONE) {
        PUT(",\"%s\":[", u->kind == REDIS_SENTINEL ? "sentinels" : "seeds");
        for (size_t i = 0; i < u->nhosts; i++) {
            PUT("%s[", i ? "," : "");
            json_str(b, len, &n, u->hosts[i].host);
            PUT(",%d]", u->hosts[i].port);
        }
        PUT("]");
    }
    if (u->kind == REDIS_SENTINEL) {
        PUT(",\"master\":");
        json_str(b, len, &n, u->master);
        PUT(",\"sentinel_username\":");
        json_str(b, len, &n, u->sentinel_user);
        PUT(",\"sentinel_password\":");
        json_str(b, len, &n, u->sentinel_password);
    }
    PUT("}");
#undef PUT
}

/*
 * test/unit/url_vectors.tsv, which test_pyclient.py reads too: the C and the
 * Python parsers accept and refuse the same URLs, with the same meaning.
 */
static void test_url_vectors(void)
{
    char line[4096], json[4096], e[CONFIG_ERR_MAX];
    int nvec = 0;
    FILE *f = unit_source("test/unit/url_vectors.tsv");

    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        char *url = line, *want, *text;
        struct redis_url u;
        int rc;

        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        want = strchr(url, '\t');
        CHECK(want != NULL);
        if (!want)
            continue;
        *want++ = '\0';
        text = strchr(want, '\t');
        if (text)
            *text++ = '\0';
        nvec++;
        e[0] = '\0';
        rc = redis_url_parse(url, &u, e, sizeof(e));
        if (strcmp(want, "error") == 0) {
            CHECK(rc == -1);
            if (rc != -1)
                fprintf(stderr, "  %s parsed, expected an error\n", url);
            else if (text)
                CHECK_STR_CONTAINS(e, text);
            CHECK(strstr(e, "topsecret") == NULL);
        } else {
            CHECK(rc == 0);
            if (rc == 0) {
                redis_url_json(&u, json, sizeof(json));
                CHECK_STR(json, want);
            } else {
                fprintf(stderr, "  %s: %s\n", url, e);
            }
        }
        redis_url_free(&u);
    }
    fclose(f);
    CHECK(nvec >= 40);
}

static void test_mysql_urls(void)
{
    struct mysql_url u;
    char e[CONFIG_ERR_MAX] = "";

    CHECK(mysql_url_parse("mysql://h", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.host, "h") == 0);
    CHECK_EQ_U64(u.port, 3306);
    CHECK(strcmp(u.user, "root") == 0);
    CHECK(u.password == NULL);
    CHECK(strcmp(u.db, "idpool") == 0);
    mysql_url_free(&u);

    CHECK(mysql_url_parse("mariadb://app:p%40ss@db.local:3307/Db_1$", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.host, "db.local") == 0);
    CHECK_EQ_U64(u.port, 3307);
    CHECK(strcmp(u.user, "app") == 0);
    CHECK(strcmp(u.password, "p@ss") == 0);
    CHECK(strcmp(u.db, "Db_1$") == 0);
    mysql_url_free(&u);

    CHECK(mysql_url_parse("mysql://u@[2001:db8::5]/x", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.host, "2001:db8::5") == 0);
    CHECK(strcmp(u.user, "u") == 0);
    CHECK(u.password == NULL);
    CHECK(strcmp(u.db, "x") == 0);
    mysql_url_free(&u);

    /* Password without user: user defaults to root. */
    CHECK(mysql_url_parse("mysql://:pw@h/", &u, e, sizeof(e)) == 0);
    CHECK(strcmp(u.user, "root") == 0);
    CHECK(strcmp(u.password, "pw") == 0);
    CHECK(strcmp(u.db, "idpool") == 0);
    mysql_url_free(&u);

    /* 64 characters is the longest database name. */
    CHECK(mysql_url_parse(
              "mysql://h/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &u, e,
              sizeof(e)) == 0);
    CHECK_EQ_U64(strlen(u.db), 64);
    mysql_url_free(&u);

    memset(&u, 0xa5, sizeof(u));
    CHECK(mysql_url_parse("mysql://h/bad-name", &u, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "database name must be 1..64 characters of A-Z a-z 0-9 _ $, got "
                          "'bad-name'");
    CHECK(u.host == NULL && u.user == NULL && u.db == NULL);
    CHECK(mysql_url_parse(
              "mysql://h/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &u, e,
              sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "database name");
    CHECK(mysql_url_parse("postgres://h", &u, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "unsupported scheme 'postgres://', expected mysql://");
    CHECK(mysql_url_parse("mysql://u@h:99999", &u, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "port must be an integer in 1..65535, got '99999'");
    /* Found by fuzzing: the password of "user:password" with "@host" forgotten was shown. */
    CHECK(mysql_url_parse("mysql://root:topsecret", &u, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "port must be an integer in 1..65535 (not shown");
    CHECK(strstr(e, "topsecret") == NULL);
    CHECK(mysql_url_parse("mysql://u:topsecret@h/db?ssl=1", &u, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "query strings ('?...') are not supported (percent-encode '?' in a "
                          "password as %3F)");
    CHECK(strstr(e, "topsecret") == NULL);
    /* No password in the URL: no hint about one. */
    CHECK(mysql_url_parse("mysql://h/db?ssl=1", &u, e, sizeof(e)) == -1);
    CHECK(strcmp(e, "query strings ('?...') are not supported") == 0);
    CHECK(mysql_url_parse("mysql://u:bad%g1@h", &u, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "bad percent-escape in the password");
    CHECK(u.host == NULL && u.user == NULL && u.db == NULL && u.password == NULL);
    mysql_url_free(&u);
}

static void test_hostport(void)
{
    char e[CONFIG_ERR_MAX] = "", *host = NULL;
    int port = 0;

    CHECK(hostport_parse("127.0.0.1:9471", &host, &port, e, sizeof(e)) == 0);
    CHECK(strcmp(host, "127.0.0.1") == 0);
    CHECK_EQ_U64(port, 9471);
    free(host);
    CHECK(hostport_parse("[::1]:80", &host, &port, e, sizeof(e)) == 0);
    CHECK(strcmp(host, "::1") == 0);
    CHECK_EQ_U64(port, 80);
    free(host);
    CHECK(hostport_parse("[::]:1", &host, &port, e, sizeof(e)) == 0);
    CHECK(strcmp(host, "::") == 0);
    free(host);
    CHECK(hostport_parse("localhost:65535", &host, &port, e, sizeof(e)) == 0);
    CHECK(strcmp(host, "localhost") == 0);
    CHECK_EQ_U64(port, 65535);
    free(host);

    CHECK(hostport_parse("localhost", &host, &port, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "missing port");
    CHECK(host == NULL);
    CHECK(hostport_parse("[::1]", &host, &port, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "missing port");
    CHECK(hostport_parse(":80", &host, &port, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "missing host");
    CHECK(hostport_parse("", &host, &port, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "missing host");
    CHECK(hostport_parse("h:0", &host, &port, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "port must be an integer in 1..65535, got '0'");
    CHECK(hostport_parse("h:80x", &host, &port, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "got '80x'");
    CHECK(hostport_parse("h: 80", &host, &port, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "port");
    CHECK(hostport_parse("::1:80", &host, &port, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "brackets");
    CHECK(hostport_parse("h/x:80", &host, &port, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, "bad host name 'h/x'");
    CHECK(host == NULL);
}

/* The HTTP listener: empty disables it; a bad address names --http. */
static void test_http_addr(void)
{
    struct config cfg;

    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--http", "")), (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.http_addr, "") == 0);
    CHECK(cfg.http_host == NULL);
    CHECK_EQ_U64(cfg.http_port, 0);
    config_free(&cfg);

    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_HTTP_ADDR", ""}), no_args), (uint64_t)CONFIG_OK);
    CHECK(cfg.http_host == NULL);
    config_free(&cfg);

    /* A flag re-enables what the environment disabled. */
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_HTTP_ADDR", ""}), ARGV("--http=[::]:81")),
                 (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.http_host, "::") == 0);
    CHECK_EQ_U64(cfg.http_port, 81);
    config_free(&cfg);

    expect_error(NULL, ARGV("--http", "localhost"), "--http: missing port");
    {
        char hp[HOSTPORT_STR_MAX];

        /* messages print IPv6 addresses in brackets */
        CHECK(strcmp(hostport_str(hp, sizeof(hp), "::1", 6379), "[::1]:6379") == 0);
        CHECK(strcmp(hostport_str(hp, sizeof(hp), "127.0.0.1", 1), "127.0.0.1:1") == 0);
        CHECK(strcmp(hostport_str(hp, sizeof(hp), "db.example", 3306), "db.example:3306") == 0);
    }
    expect_error(NULL, ARGV("--http", "http://127.0.0.1:1"),
                 "--http: expected host:port, not a URL (drop the 'http://')");
    expect_error(NULL, ARGV("--help=1"), "--help takes no value");
    expect_error(NULL, ARGV("--version=yes"), "--version takes no value");
    expect_error(ENV({"IDPOOL_HTTP_ADDR", "h:0"}), no_args, "IDPOOL_HTTP_ADDR: port must be");
}

/* idpoold takes a redis-cluster:// URL: its seed nodes, as given. */
static void test_cluster_config(void)
{
    struct config cfg;

    CHECK(load(&cfg, NULL, ARGV("--redis", "redis-cluster://u:pw@n1:7000,n2")) == CONFIG_OK);
    CHECK(cfg.redis.kind == REDIS_CLUSTER && cfg.redis.nhosts == 2);
    CHECK_STR(cfg.redis.hosts[1].host, "n2");
    CHECK(cfg.redis.hosts[0].port == 7000 && cfg.redis.hosts[1].port == 6379);
    CHECK_STR(cfg.redis.user, "u");
    config_free(&cfg);
}

/* URL errors through config_load name the source and never the password. */
static void test_url_errors_in_config(void)
{
    char path[64], want[128];

    expect_error(NULL, ARGV("--redis", "rediss://h"), "--redis: rediss:// (TLS) is not supported");
    expect_error(NULL, ARGV("--redis", "redis-sentinel://:topsecret@s1,s2"),
                 "--redis: a redis-sentinel:// URL needs the master's name");
    CHECK(strstr(err, "topsecret") == NULL);
    expect_error(NULL, ARGV("--redis", "redis-cluster://:topsecret@n1:7000,n2:7001/1"),
                 "--redis: Redis Cluster has database 0 only, got '/1'");
    CHECK(strstr(err, "topsecret") == NULL);
    expect_error(ENV({"IDPOOL_MYSQL_URL", "mysql://h:0"}), no_args,
                 "IDPOOL_MYSQL_URL: port must be an integer in 1..65535");
    write_tmp(path, "\nredis = redis://:topsecret@h:x\n");
    snprintf(want, sizeof(want), "%s:2: redis: port must be", path);
    expect_error(NULL, ARGV("--config", path), want);
    CHECK(strstr(err, "topsecret") == NULL);
    unlink(path);
}

/* Integer settings: strict parsing, exact ranges, errors naming the source. */
static void test_int_settings(void)
{
    static const struct {
        const char *flag, *env;
        int min, max;
        size_t off;
    } ints[] = {
        {"--tick-ms", "IDPOOL_TICK_MS", 1, 60000, offsetof(struct config, tick_ms)},
        {"--lock-ttl-ms", "IDPOOL_LOCK_TTL_MS", 100, 600000, offsetof(struct config, lock_ttl_ms)},
        {"--reload-ms", "IDPOOL_RELOAD_MS", 100, 3600000, offsetof(struct config, reload_ms)},
        {"--push-chunk", "IDPOOL_PUSH_CHUNK", 50, 10000, offsetof(struct config, push_chunk)},
        {"--redis-timeout-ms", "IDPOOL_REDIS_TIMEOUT_MS", 10, 600000,
         offsetof(struct config, redis_timeout_ms)},
        {"--mysql-timeout-ms", "IDPOOL_MYSQL_TIMEOUT_MS", 1000, 600000,
         offsetof(struct config, mysql_timeout_ms)},
    };
    static const char *const junk[] = {
        "abc", "", "10x", " 10", "10 ", "+10", "1e3", "0x10", "99999999999999999999"};

    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        struct config cfg;
        char lo[16], hi[16], below[16], above[16], want[128];

        snprintf(lo, sizeof(lo), "%d", ints[i].min);
        snprintf(hi, sizeof(hi), "%d", ints[i].max);
        snprintf(below, sizeof(below), "%d", ints[i].min - 1);
        snprintf(above, sizeof(above), "%d", ints[i].max + 1);
        /* tick-ms 1 keeps the lock-ttl >= 2 x tick rule out of the way. */
        CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--tick-ms", "1", (char *)ints[i].flag, lo)),
                     (uint64_t)CONFIG_OK);
        CHECK_EQ_U64(*(int *)(void *)((char *)&cfg + ints[i].off), ints[i].min);
        config_free(&cfg);
        CHECK_EQ_U64(
            (uint64_t)load(&cfg, NULL, ARGV("--lock-ttl-ms", "600000", (char *)ints[i].flag, hi)),
            (uint64_t)CONFIG_OK);
        CHECK_EQ_U64(*(int *)(void *)((char *)&cfg + ints[i].off), ints[i].max);
        config_free(&cfg);

        snprintf(want, sizeof(want), "%s: must be an integer in %d..%d, got '%s'", ints[i].flag,
                 ints[i].min, ints[i].max, below);
        expect_error(NULL, ARGV((char *)ints[i].flag, below), want);
        snprintf(want, sizeof(want), "%s: must be an integer in %d..%d, got '%s'", ints[i].env,
                 ints[i].min, ints[i].max, above);
        expect_error(ENV({ints[i].env, above}), no_args, want);
        for (size_t j = 0; j < sizeof(junk) / sizeof(junk[0]); j++) {
            snprintf(want, sizeof(want), "%s: must be an integer", ints[i].env);
            expect_error(ENV({ints[i].env, junk[j]}), no_args, want);
        }
    }
    expect_error(NULL, ARGV("--tick-ms", "abc"),
                 "--tick-ms: must be an integer in 1..60000, got 'abc'");
    CHECK(strcmp(err, "--tick-ms: must be an integer in 1..60000, got 'abc'") == 0);
    expect_error(NULL, ARGV("--tick-ms=-5"), "--tick-ms: must be an integer in 1..60000, got '-5'");
}

/* A bad value in the config file names FILE:LINE and the key. */
static void test_file_value_errors(void)
{
    char path[64], want[160];

    write_tmp(path, "# comment\n\n; comment\ntick-ms = 10\n\n\ntick-ms = abc\n");
    snprintf(want, sizeof(want), "%s:7: tick-ms: must be an integer in 1..60000, got 'abc'", path);
    expect_error(NULL, ARGV("--config", path), want);
    CHECK(strcmp(err, want) == 0);
    /* Checked where it is read, even though a flag would override it. */
    expect_error(NULL, ARGV("--config", path, "--tick-ms", "5"), want);
    unlink(path);

    write_tmp(path, "log-level = loud\n");
    snprintf(want, sizeof(want), "%s:1: log-level: must be one of error, warn, info, debug", path);
    expect_error(ENV({"IDPOOL_CONFIG", path}), no_args, want);
    unlink(path);
}

/* A file that starts with a UTF-8 byte order mark reads as without it. */
static void test_file_bom(void)
{
    struct config cfg;
    char path[64];

    write_tmp(path, "\xEF\xBB\xBFtick-ms = 42\nreload-ms = 700\n");
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--config", path)), (uint64_t)CONFIG_OK);
    CHECK_EQ_U64(cfg.tick_ms, 42);
    CHECK_EQ_U64(cfg.reload_ms, 700);
    config_free(&cfg);
    unlink(path);
    /* only at the very start: elsewhere it is part of a name (and named as unknown) */
    write_tmp(path, "tick-ms = 42\n\xEF\xBB\xBFreload-ms = 700\n");
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--config", path)), (uint64_t)CONFIG_ERROR);
    config_free(&cfg);
    unlink(path);
}

static void test_file_syntax_errors(void)
{
    struct config cfg;
    char path[64], want[256];

    write_tmp(path, "tick-ms = 10\nfoo = 1\n");
    snprintf(want, sizeof(want), "%s:2: unknown setting 'foo'", path);
    expect_error(NULL, ARGV("--config", path), want);
    unlink(path);

    write_tmp(path, "# ok\njust a line\n");
    snprintf(want, sizeof(want), "%s:2: expected 'name = value'", path);
    expect_error(NULL, ARGV("--config", path), want);
    unlink(path);

    write_tmp(path, "key-prefix = \"abc\n");
    snprintf(want, sizeof(want), "%s:1: key-prefix: missing closing '\"'", path);
    expect_error(NULL, ARGV("--config", path), want);
    unlink(path);

    /* --config is not a file key; nor are keys spelled with dashes. */
    write_tmp(path, "config = /etc/other.conf\n");
    snprintf(want, sizeof(want), "%s:1: unknown setting 'config'", path);
    expect_error(NULL, ARGV("--config", path), want);
    unlink(path);
    write_tmp(path, "--tick-ms = 5\n");
    snprintf(want, sizeof(want), "%s:1: unknown setting '--tick-ms'", path);
    expect_error(NULL, ARGV("--config", path), want);
    unlink(path);

    /* Unreadable: the message names the source, the path and strerror. */
    snprintf(want, sizeof(want), "--config: cannot read /nonexistent/idpool.conf: %s",
             strerror(ENOENT));
    expect_error(NULL, ARGV("--config", "/nonexistent/idpool.conf"), want);
    snprintf(want, sizeof(want), "IDPOOL_CONFIG: cannot read /nonexistent/x.conf: %s",
             strerror(ENOENT));
    expect_error(ENV({"IDPOOL_CONFIG", "/nonexistent/x.conf"}), no_args, want);
    snprintf(want, sizeof(want), "--config: cannot read /tmp: %s", strerror(EISDIR));
    expect_error(NULL, ARGV("--config=/tmp"), want);

    /* Not a config file: refused at 1 MiB rather than read forever. */
    expect_error(NULL, ARGV("--config", "/dev/zero"),
                 "--config: /dev/zero is larger than 1024 KiB: not a config file");
    {
        char big[64];
        FILE *f;

        write_tmp(big, "");
        f = fopen(big, "w");
        CHECK(f != NULL);
        for (int i = 0; f && i < 1024 * 1024 / 16 + 1; i++)
            fputs("# comment line.\n", f); /* 16 bytes */
        if (f)
            fclose(f);
        snprintf(want, sizeof(want), "IDPOOL_CONFIG: %s is larger than 1024 KiB", big);
        expect_error(ENV({"IDPOOL_CONFIG", big}), no_args, want);
        unlink(big);
    }
    /* A NUL byte names its line; a last line without a newline is read. */
    write_tmp(path, "tick-ms = 10\nkey-prefix = a");
    {
        int fd = open(path, O_WRONLY | O_APPEND);

        CHECK(fd >= 0 && write(fd, "\0b\n", 3) == 3);
        if (fd >= 0)
            close(fd);
    }
    snprintf(want, sizeof(want), "%s:2: line contains a NUL byte", path);
    expect_error(NULL, ARGV("--config", path), want);
    unlink(path);
    write_tmp(path, "tick-ms = 20\nlock-ttl-ms = 3000");
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--config", path)), (uint64_t)CONFIG_OK);
    CHECK_EQ_U64(cfg.tick_ms, 20);
    CHECK_EQ_U64(cfg.lock_ttl_ms, 3000);
    config_free(&cfg);
    unlink(path);
}

static void test_lock_ttl_rule(void)
{
    struct config cfg;
    char path[64], want[256];

    /* Default lock-ttl 1000 is too short for a 600 ms tick. */
    expect_error(NULL, ARGV("--tick-ms", "600"),
                 "--lock-ttl-ms: must be at least 2 x --tick-ms (2 x 600 = 1200), got 1000 "
                 "(lock-ttl-ms from the default, tick-ms from --tick-ms)");
    expect_error(ENV({"IDPOOL_LOCK_TTL_MS", "199"}), no_args,
                 "(lock-ttl-ms from IDPOOL_LOCK_TTL_MS, tick-ms from the default)");
    write_tmp(path, "tick-ms = 501\n");
    snprintf(want, sizeof(want), "tick-ms from %s:1)", path);
    expect_error(NULL, ARGV("--config", path), want);
    unlink(path);

    /* Exactly 2 x tick is fine; a later source can fix an earlier clash. */
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--tick-ms", "500")), (uint64_t)CONFIG_OK);
    CHECK_EQ_U64(cfg.lock_ttl_ms, 1000);
    config_free(&cfg);
    CHECK_EQ_U64(
        (uint64_t)load(&cfg, ENV({"IDPOOL_TICK_MS", "1000"}), ARGV("--lock-ttl-ms", "2000")),
        (uint64_t)CONFIG_OK);
    config_free(&cfg);
}

static void test_bad_flags(void)
{
    expect_error(NULL, ARGV("--frobnicate"), "unknown option '--frobnicate'");
    expect_error(NULL, ARGV("--frobnicate=1"), "unknown option '--frobnicate'");
    expect_error(NULL, ARGV("-x"), "unknown option '-x'");
    expect_error(NULL, ARGV("-tick-ms", "5"), "unknown option '-tick-ms'");
    expect_error(NULL, ARGV("--tick-ms"), "--tick-ms: missing value");
    expect_error(NULL, ARGV("--redis", "--tick-ms", "5"), "--redis: missing value");
    expect_error(NULL, ARGV("extra"), "unexpected argument 'extra'");
    expect_error(NULL, ARGV("--tick-ms", "5", "extra"), "unexpected argument 'extra'");
    expect_error(NULL, ARGV("-"), "unexpected argument '-'");
    expect_error(NULL, ARGV("--", "x"), "unexpected argument 'x'");
    expect_error(NULL, ARGV("--redis-password=topsecret"), "--redis-password: not accepted");
    CHECK(strstr(err, "topsecret") == NULL);
    expect_error(NULL, ARGV("--mysql-password", "x"), "IDPOOL_MYSQL_PASSWORD");
    expect_error(NULL, ARGV("--log-level", "loud"),
                 "--log-level: must be one of error, warn, info, debug; got 'loud'");

    /* A trailing "--" alone is fine. */
    struct config cfg;
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--tick-ms", "5", "--")), (uint64_t)CONFIG_OK);
    config_free(&cfg);
}

static void test_help_version(void)
{
    struct config cfg;

    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("-h")), (uint64_t)CONFIG_HELP);
    CHECK(config_is_zero(&cfg));
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--help")), (uint64_t)CONFIG_HELP);
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("-V")), (uint64_t)CONFIG_VERSION);
    CHECK(config_is_zero(&cfg));
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--version")), (uint64_t)CONFIG_VERSION);
    /* Help works whatever the values, the file or the environment say. */
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_TICK_MS", "bad"}),
                                ARGV("--tick-ms", "abc", "--config", "/nonexistent", "--help")),
                 (uint64_t)CONFIG_HELP);
    CHECK(config_is_zero(&cfg));
    config_free(&cfg);
    /* ...but an unknown option before it is still an error. */
    expect_error(NULL, ARGV("--nope", "--help"), "unknown option '--nope'");
}

static void test_password_overrides(void)
{
    struct config cfg;
    char path[64];

    CHECK_EQ_U64(
        (uint64_t)load(&cfg,
                       ENV({"IDPOOL_REDIS_URL", "redis://:urlpw@h"},
                           {"IDPOOL_REDIS_PASSWORD", "envpw"}, {"IDPOOL_MYSQL_PASSWORD", "dbpw"}),
                       ARGV("--mysql", "mysql://app:urlpw@db/x")),
        (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.redis.password, "envpw") == 0);
    CHECK(cfg.redis.user == NULL);
    CHECK(strcmp(cfg.mysql.password, "dbpw") == 0);
    CHECK(strcmp(cfg.mysql.user, "app") == 0);
    /* The URL is kept as given. */
    CHECK(strcmp(cfg.redis_url, "redis://:urlpw@h") == 0);
    config_free(&cfg);

    /* From the config file; the environment beats the file. */
    write_tmp(path, "redis-password = \" file pw \"\nmysql-password = filedb\n");
    CHECK_EQ_U64(
        (uint64_t)load(&cfg, ENV({"IDPOOL_MYSQL_PASSWORD", "envdb"}), ARGV("--config", path)),
        (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.redis.password, " file pw ") == 0);
    CHECK(strcmp(cfg.mysql.password, "envdb") == 0);
    config_free(&cfg);

    /* An empty variable is no override. */
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_REDIS_PASSWORD", ""}),
                                ARGV("--config", path, "--redis", "redis://:urlpw@h")),
                 (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.redis.password, " file pw ") == 0);
    config_free(&cfg);
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_REDIS_PASSWORD", ""}),
                                ARGV("--redis", "redis://:urlpw@h")),
                 (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.redis.password, "urlpw") == 0);
    config_free(&cfg);
    unlink(path);

    /* An ACL user with the password from the environment. */
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_REDIS_PASSWORD", "acl"}),
                                ARGV("--redis", "redis://bob@h")),
                 (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.redis.user, "bob") == 0);
    CHECK(strcmp(cfg.redis.password, "acl") == 0);
    config_free(&cfg);

    /* ...and without any password: an error that does not echo the user. */
    expect_error(NULL, ARGV("--redis", "redis://topsecret@h"),
                 "--redis: an ACL user needs a password");
    CHECK(strstr(err, "topsecret") == NULL);
}

/*
 * Passwords from files: redis-password-file / mysql-password-file, and the
 * systemd credentials redis-password / mysql-password in
 * $CREDENTIALS_DIRECTORY (LoadCredential=) when neither setting is given.
 */
static void test_password_files(void)
{
    struct config cfg;
    char rp[64], mp[64], bad[64], dir[64], cred[128], both[64];

    write_tmp(rp, "from file\n");
    write_tmp(mp, "db pw\r\n");
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_MYSQL_PASSWORD_FILE", mp}),
                                ARGV("--redis", "redis://:urlpw@h", "--redis-password-file", rp)),
                 (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.redis.password, "from file") == 0);
    CHECK(strcmp(cfg.mysql.password, "db pw") == 0);
    config_free(&cfg);

    /*
     * Only the file of the source that wins is read, once all are merged: a
     * config file's and an environment's file that the next source replaced
     * are never opened (nor their errors reported).
     */
    {
        char conf[64], line[128];

        snprintf(line, sizeof(line), "redis-password-file = /nonexistent/conf-pw\n");
        write_tmp(conf, line);
        CHECK_EQ_U64(
            (uint64_t)load(&cfg, ENV({"IDPOOL_REDIS_PASSWORD_FILE", rp}), ARGV("--config", conf)),
            (uint64_t)CONFIG_OK);
        CHECK(cfg.redis.password && strcmp(cfg.redis.password, "from file") == 0);
        config_free(&cfg);
        CHECK_EQ_U64((uint64_t)load(&cfg,
                                    ENV({"IDPOOL_REDIS_PASSWORD_FILE", "/nonexistent/env-pw"}),
                                    ARGV("--config", conf, "--redis-password-file", rp)),
                     (uint64_t)CONFIG_OK);
        CHECK(cfg.redis.password && strcmp(cfg.redis.password, "from file") == 0);
        config_free(&cfg);
        /* an empty flag turns it off: nothing is read, no password */
        CHECK_EQ_U64(
            (uint64_t)load(&cfg, NULL, ARGV("--config", conf, "--redis-password-file", "")),
            (uint64_t)CONFIG_OK);
        CHECK(cfg.redis.password == NULL);
        config_free(&cfg);
        /* ...and the winner's error names the winner's source */
        expect_error(ENV({"IDPOOL_REDIS_PASSWORD_FILE", rp}),
                     ARGV("--config", conf, "--redis-password-file", "/nonexistent/flag-pw"),
                     "--redis-password-file: cannot read /nonexistent/flag-pw: No such file");
        unlink(conf);
    }

    /* Both ways for one password: an error naming both. */
    expect_error(ENV({"IDPOOL_REDIS_PASSWORD", "envpw"}), ARGV("--redis-password-file", rp),
                 "--redis-password-file: set, and so is redis-password (from "
                 "IDPOOL_REDIS_PASSWORD): give the password one way");

    /* Bad files: the error names the file and never shows its content. */
    expect_error(NULL, ARGV("--redis-password-file", "/nonexistent/pw"),
                 "--redis-password-file: cannot read /nonexistent/pw: No such file or directory");
    write_tmp(bad, "");
    expect_error(ENV({"IDPOOL_MYSQL_PASSWORD_FILE", bad}), no_args, "IDPOOL_MYSQL_PASSWORD_FILE: ");
    CHECK_STR_CONTAINS(err, " is empty");
    unlink(bad);
    /* A FIFO nobody writes to (or a terminal) must not block the start. */
    strcpy(bad, "/tmp/idpool-fifo-XXXXXX");
    CHECK(mkdtemp(bad) != NULL);
    strcat(bad, "/pw");
    CHECK(mkfifo(bad, 0600) == 0);
    expect_error(NULL, ARGV("--redis-password-file", bad), " is not a regular file");
    unlink(bad);
    *strrchr(bad, '/') = '\0';
    rmdir(bad);
    expect_error(NULL, ARGV("--mysql-password-file", "/dev/null"),
                 "--mysql-password-file: /dev/null is not a regular file");
    write_tmp(bad, "IDPOOL_REDIS_PASSWORD=topsecret\nmore\n");
    expect_error(NULL, ARGV("--redis-password-file", bad), "holds more than one line");
    CHECK(strstr(err, "topsecret") == NULL);
    unlink(bad);

    /* The systemd credentials, when no setting names a password. */
    strcpy(dir, "/tmp/idpool-creds-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cred, sizeof(cred), "%s/redis-password", dir);
    CHECK(rename(rp, cred) == 0);
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"CREDENTIALS_DIRECTORY", dir}),
                                ARGV("--redis", "redis://:urlpw@h")),
                 (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.redis.password, "from file") == 0);
    CHECK(cfg.mysql.password == NULL); /* no mysql-password credential: none */
    config_free(&cfg);
    /* ...a credential beside a password setting: an error naming both. */
    expect_error(ENV({"CREDENTIALS_DIRECTORY", dir}, {"IDPOOL_REDIS_PASSWORD", "envpw"}), no_args,
                 "IDPOOL_REDIS_PASSWORD: set, and systemd passed the credential redis-password "
                 "too (");
    write_tmp(both, "x\n");
    expect_error(ENV({"CREDENTIALS_DIRECTORY", dir}), ARGV("--redis-password-file", both),
                 "--redis-password-file: set, and systemd passed the credential redis-password");
    unlink(both);
    /* ...one that is not a file (a directory in its place). */
    snprintf(cred, sizeof(cred), "%s/mysql-password", dir);
    CHECK(mkdir(cred, 0700) == 0);
    expect_error(ENV({"CREDENTIALS_DIRECTORY", dir}), no_args,
                 "systemd credential mysql-password: ");
    CHECK_STR_CONTAINS(err, "/mysql-password is not a regular file");
    CHECK(rmdir(cred) == 0);
    snprintf(cred, sizeof(cred), "%s/redis-password", dir);
    unlink(cred);
    CHECK(rmdir(dir) == 0);
    unlink(mp);
}

static void test_prefix_instance_loglevel(void)
{
    struct config cfg;
    char long_prefix[66];

    CHECK_EQ_U64(
        (uint64_t)load(&cfg, NULL, ARGV("--key-prefix", "a.b:c-d_E9", "--log-level", "error")),
        (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.key_prefix, "a.b:c-d_E9") == 0);
    CHECK_EQ_U64(cfg.log_level, LOG_ERROR);
    config_free(&cfg);

    memset(long_prefix, 'p', 64);
    long_prefix[64] = '\0';
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--key-prefix", long_prefix)),
                 (uint64_t)CONFIG_OK);
    config_free(&cfg);
    long_prefix[64] = 'p';
    long_prefix[65] = '\0';
    expect_error(NULL, ARGV("--key-prefix", long_prefix), "--key-prefix: must be 1..64");
    expect_error(NULL, ARGV("--key-prefix", ""), "--key-prefix: must be 1..64");
    expect_error(NULL, ARGV("--key-prefix", "a{b}"), "--key-prefix: must not contain '{' or '}'");
    expect_error(ENV({"IDPOOL_KEY_PREFIX", "a b"}), no_args, "IDPOOL_KEY_PREFIX: must be 1..64");
    expect_error(NULL, ARGV("--instance", ""), "--instance: must be 1..255");
    expect_error(NULL, ARGV("--instance", "a\tb"), "--instance: must be 1..255");
    expect_error(ENV({"IDPOOL_LOG_LEVEL", "INFO"}), no_args, "IDPOOL_LOG_LEVEL: must be one of");
}

/* Nothing is left to free after an error; config_free is idempotent. */
static void test_free_after_error(void)
{
    struct config cfg;
    char path[64];

    memset(&cfg, 0, sizeof(cfg));
    config_free(&cfg);
    CHECK(config_is_zero(&cfg));

    /* Fails late (cross-check), after every string has been allocated. */
    write_tmp(path, "redis = redis://u:p@h\nhttp = [::1]:1\n");
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_REDIS_PASSWORD", "x"}),
                                ARGV("--config", path, "--tick-ms", "1000")),
                 (uint64_t)CONFIG_ERROR);
    CHECK(config_is_zero(&cfg));
    config_free(&cfg);
    config_free(&cfg);
    unlink(path);

    /* Success, free, free again. */
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, no_args), (uint64_t)CONFIG_OK);
    config_free(&cfg);
    config_free(&cfg);
    CHECK(config_is_zero(&cfg));
}

/* A SIGHUP reload builds a new struct; a failed one leaves the old intact. */
static void test_reload(void)
{
    struct config cur, next;
    char path[64];

    write_tmp(path, "tick-ms = 40\nkey-prefix = one\n");
    CHECK_EQ_U64((uint64_t)load(&cur, NULL, ARGV("--config", path)), (uint64_t)CONFIG_OK);
    CHECK_EQ_U64(cur.tick_ms, 40);
    unlink(path);

    write_tmp(path, "tick-ms = 60\nkey-prefix = two\n");
    CHECK_EQ_U64((uint64_t)load(&next, NULL, ARGV("--config", path)), (uint64_t)CONFIG_OK);
    CHECK_EQ_U64(next.tick_ms, 60);
    CHECK(strcmp(next.key_prefix, "two") == 0);
    CHECK(strcmp(cur.key_prefix, "one") == 0);
    config_free(&cur);
    cur = next;
    unlink(path);

    write_tmp(path, "tick-ms = nope\n");
    CHECK_EQ_U64((uint64_t)load(&next, NULL, ARGV("--config", path)), (uint64_t)CONFIG_ERROR);
    CHECK_EQ_U64(cur.tick_ms, 60);
    CHECK(strcmp(cur.key_prefix, "two") == 0);
    config_free(&next);
    config_free(&cur);
    unlink(path);
}

/* A NULL getenv_fn reads the real environment. */
static void test_real_getenv(void)
{
    struct config cfg;
    char *argv[] = {"idpoold", NULL};

    setenv("IDPOOL_RELOAD_MS", "777", 1);
    CHECK_EQ_U64((uint64_t)config_load(&cfg, 1, argv, NULL, err, sizeof(err)), (uint64_t)CONFIG_OK);
    CHECK_EQ_U64(cfg.reload_ms, 777);
    config_free(&cfg);
    unsetenv("IDPOOL_RELOAD_MS");

    /* argc 0 / argv NULL: no flags. */
    CHECK_EQ_U64((uint64_t)config_load(&cfg, 0, NULL, fake_getenv, err, sizeof(err)),
                 (uint64_t)CONFIG_OK);
    config_free(&cfg);
}

/* The --help text lists every flag and variable, and how the file works. */
static void test_usage(void)
{
    static const char *const want[] = {
        "Usage: idpoold",
        "--redis URL",
        "IDPOOL_REDIS_URL",
        "redis://127.0.0.1:6379/0",
        "IDPOOL_REDIS_PASSWORD",
        "--redis-timeout-ms MS",
        "IDPOOL_REDIS_TIMEOUT_MS",
        "--key-prefix",
        "IDPOOL_KEY_PREFIX",
        "--mysql URL",
        "IDPOOL_MYSQL_URL",
        "mysql://root@127.0.0.1:3306/idpool",
        "IDPOOL_MYSQL_PASSWORD",
        "--mysql-timeout-ms",
        "IDPOOL_MYSQL_TIMEOUT_MS",
        "rounded up",
        "--tick-ms",
        "IDPOOL_TICK_MS",
        "--lock-ttl-ms",
        "IDPOOL_LOCK_TTL_MS",
        "2 x tick-ms",
        "--reload-ms",
        "IDPOOL_RELOAD_MS",
        "--instance",
        "IDPOOL_INSTANCE",
        "--http HOST:PORT",
        "IDPOOL_HTTP_ADDR",
        "127.0.0.1:9471",
        "--log-level",
        "IDPOOL_LOG_LEVEL",
        "--config FILE",
        "IDPOOL_CONFIG",
        "without the leading dashes",
        "defaults < config file < environment < flags",
        "-h, --help",
        "-V, --version",
    };
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    CHECK(f != NULL);
    if (f == NULL)
        return;
    config_usage(f, "idpoold");
    fclose(f);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        CHECK_STR_CONTAINS(text, want[i]);
    /* No line wider than 100 columns; the second column starts at column 31, whatever the
     * first holds (a long variable name gets a line of its own, not run into the text). */
    for (char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (nl == NULL)
            break;
        CHECK(nl - line <= 100);
        if (strncmp(line, "    IDPOOL_", 11) == 0) {
            size_t name = strcspn(line + 4, " \n") + 4;
            CHECK(line + name == nl || (name <= 30 && line[30] == ' ' && line[31] != ' '));
        }
    }
    CHECK_STR_CONTAINS(text, "    IDPOOL_HTTP_MAX_CONNECTIONS_PER_ADDRESS\n");
    free(text);
}

static void test_alert_settings(void)
{
    struct config cfg;
    struct webhook_url w;

    CHECK(load(&cfg, NULL, no_args) == CONFIG_OK);
    CHECK(cfg.alert_webhook == NULL);
    CHECK_EQ_U64(cfg.stall_ms, 10000);
    CHECK_EQ_U64(cfg.alert_resolve_ms, 5000);
    config_free(&cfg);

    CHECK(load(&cfg, ENV({"IDPOOL_ALERT_WEBHOOK", "http://127.0.0.1:8080/hooks/idpool"}),
               ARGV("--stall-ms", "2500", "--alert-resolve-ms=0")) == CONFIG_OK);
    CHECK(cfg.alert_webhook &&
          strcmp(cfg.alert_webhook, "http://127.0.0.1:8080/hooks/idpool") == 0);
    CHECK(cfg.webhook.host && strcmp(cfg.webhook.host, "127.0.0.1") == 0);
    CHECK_EQ_U64(cfg.webhook.port, 8080);
    CHECK(cfg.webhook.path && strcmp(cfg.webhook.path, "/hooks/idpool") == 0);
    CHECK_EQ_U64(cfg.stall_ms, 2500);
    CHECK_EQ_U64(cfg.alert_resolve_ms, 0);
    config_free(&cfg);

    /* Defaults: port 80, path "/"; IPv6 literal; an empty value disables. */
    CHECK(webhook_url_parse("http://[::1]", &w, err, sizeof(err)) == 0);
    CHECK(w.host && strcmp(w.host, "::1") == 0);
    CHECK_EQ_U64(w.port, 80);
    CHECK(w.path && strcmp(w.path, "/") == 0);
    webhook_url_free(&w);
    CHECK(load(&cfg, ENV({"IDPOOL_ALERT_WEBHOOK", "http://h/x"}), ARGV("--alert-webhook", "")) ==
          CONFIG_OK);
    CHECK(cfg.alert_webhook == NULL && cfg.webhook.host == NULL);
    config_free(&cfg);

    /* A query string is part of the request target (tokens of hook endpoints). */
    CHECK(webhook_url_parse("http://h:81/x/y?token=a%20b&c=1", &w, err, sizeof(err)) == 0);
    CHECK(w.path && strcmp(w.path, "/x/y?token=a%20b&c=1") == 0);
    webhook_url_free(&w);
    CHECK(webhook_url_parse("http://h?q", &w, err, sizeof(err)) == 0);
    CHECK(w.path && strcmp(w.path, "/?q") == 0);
    webhook_url_free(&w);
    expect_error(NULL, ARGV("--alert-webhook", "http://h/x?a#frag"), "fragments");
    expect_error(NULL, ARGV("--alert-webhook", "https://example.invalid/"),
                 "https:// is not supported");
    expect_error(NULL, ARGV("--alert-webhook", "ftp://h/"), "--alert-webhook: unsupported scheme");
    expect_error(NULL, ARGV("--alert-webhook", "http://u:p@h/"), "user:password@ is not supported");
    expect_error(NULL, ARGV("--alert-webhook", "http://h:99999/"), "--alert-webhook");
    /* Found by fuzzing: "http://user:token" (no '@') showed the token as a bad port. */
    expect_error(NULL, ARGV("--alert-webhook", "http://user:topsecret/hook"),
                 "--alert-webhook: port must be an integer in 1..65535 (not shown");
    CHECK(strstr(err, "topsecret") == NULL);
    expect_error(NULL, ARGV("--stall-ms", "50"), "--stall-ms: must be an integer in 100..3600000");
    expect_error(ENV({"IDPOOL_ALERT_RESOLVE_MS", "-1"}), no_args, "IDPOOL_ALERT_RESOLVE_MS");
}

/* issuer_url_parse(url) succeeds with host, port, tls, token (NULL: none) and prefix. */
static void issuer_ok(const char *url, const char *host, int port, int tls, const char *token,
                      const char *prefix)
{
    struct issuer_url u;
    char e[CONFIG_ERR_MAX] = "";

    memset(&u, 0xa5, sizeof(u));
    CHECK(issuer_url_parse(url, &u, e, sizeof(e)) == 0);
    if (u.host == NULL || u.prefix == NULL) {
        fprintf(stderr, "  %s: %s\n", url, e);
        CHECK(!"issuer URL parses");
        return;
    }
    CHECK(strcmp(u.host, host) == 0);
    CHECK_EQ_U64((uint64_t)u.port, (uint64_t)port);
    CHECK_EQ_U64((uint64_t)u.tls, (uint64_t)tls);
    CHECK(token ? u.token && strcmp(u.token, token) == 0 : u.token == NULL);
    CHECK(strcmp(u.prefix, prefix) == 0);
    issuer_url_free(&u);
    CHECK(u.host == NULL && u.token == NULL && u.prefix == NULL);
}

/*
 * issuer_url_parse(url) fails with a message containing want, leaving u
 * empty; the token (topsecret in the URLs below) is never in the message.
 */
static void issuer_bad(const char *url, const char *want)
{
    struct issuer_url u;
    char e[CONFIG_ERR_MAX] = "";

    memset(&u, 0xa5, sizeof(u));
    CHECK(issuer_url_parse(url, &u, e, sizeof(e)) == -1);
    CHECK_STR_CONTAINS(e, want);
    CHECK(u.host == NULL && u.token == NULL && u.prefix == NULL && u.port == 0 && u.tls == 0);
    if (strstr(e, "topsecret")) {
        fprintf(stderr, "token leaked into error for %s: %s\n", url, e);
        CHECK(0);
    }
    issuer_url_free(&u);
}

/* The URL of an ID issuer (libidpool's environments). */
static void test_issuer_url(void)
{
    /* defaults: port 80, 443 with https; no token, no prefix */
    issuer_ok("http://h", "h", 80, 0, NULL, "");
    issuer_ok("https://h", "h", 443, 1, NULL, "");
    issuer_ok("HTTPS://issuer.example.com", "issuer.example.com", 443, 1, NULL, "");
    issuer_ok("Http://h", "h", 80, 0, NULL, "");
    issuer_ok("http://127.0.0.1:9472", "127.0.0.1", 9472, 0, NULL, "");
    issuer_ok("https://h:8443", "h", 8443, 1, NULL, "");
    issuer_ok("https://h:80", "h", 80, 1, NULL, "");
    issuer_ok("http://h:65535", "h", 65535, 0, NULL, "");
    /* IPv6 literals */
    issuer_ok("http://[::1]:9472", "::1", 9472, 0, NULL, "");
    issuer_ok("https://[2001:db8::1]/ids", "2001:db8::1", 443, 1, NULL, "/ids");
    /* the token: "tok@" or ":tok@", percent-decoded */
    issuer_ok("http://idp_abc-_XYZ09@h", "h", 80, 0, "idp_abc-_XYZ09", "");
    issuer_ok("https://:idp_abc@h:1", "h", 1, 1, "idp_abc", "");
    issuer_ok("http://%69dp_a%2Fb%2B%3D%40%3A%25@[::1]", "::1", 80, 0, "idp_a/b+=@:%", "");
    issuer_ok("http://:t@k:en@h", "h", 80, 0, "t@k:en", ""); /* the last '@' ends it */
    issuer_ok("http://t%C3%A9@h", "h", 80, 0, "t\xc3\xa9", "");
    /* the prefix: trailing slashes dropped, "/" is none */
    issuer_ok("http://h/", "h", 80, 0, NULL, "");
    issuer_ok("http://h//", "h", 80, 0, NULL, "");
    issuer_ok("http://h/api", "h", 80, 0, NULL, "/api");
    issuer_ok("http://h/api/", "h", 80, 0, NULL, "/api");
    issuer_ok("http://h/api///", "h", 80, 0, NULL, "/api");
    issuer_ok("https://tok@h:8443/a/b/", "h", 8443, 1, "tok", "/a/b");
    issuer_ok("http://h/a-b.c_d~e/!$&'()*+,;=:", "h", 80, 0, NULL, "/a-b.c_d~e/!$&'()*+,;=:");

    /* the scheme */
    issuer_bad("ftp://h", "unsupported scheme 'ftp://', expected http[s]://");
    issuer_bad("httpx://h", "unsupported scheme");
    issuer_bad("h:9472", "not a URL");
    issuer_bad("", "not a URL");
    issuer_bad("http:/h", "not a URL");
    /* the userinfo must be the token alone */
    issuer_bad("http://user:topsecret@h", "the userinfo must be the token alone");
    issuer_bad("http://a:b@h", "token alone");
    issuer_bad("http://topsecret:@h", "token alone");
    issuer_bad("http://@h", "token alone");
    issuer_bad("http://:@h", "token alone");
    issuer_bad("http://topsecret%zz@h", "bad percent-escape in the token");
    issuer_bad("http://:topsecret%4@h", "bad percent-escape in the token");
    issuer_bad("http://top%00secret@h", "bad percent-escape in the token");
    /* a token that would break the Authorization line */
    issuer_bad("http://topsecret%0D%0AX%3A%20y@h", "the token may not contain a space or control");
    issuer_bad("http://:top%20secret@h", "space or control");
    issuer_bad("http://:topsecret%09@h", "space or control");
    issuer_bad("http://:topsecret%7F@h", "space or control");
    issuer_bad("http://:top secret@h", "space or control character");
    /* the prefix: only what a path holds unescaped */
    issuer_bad("http://h/a%20b", "the path prefix may not contain '%'");
    issuer_bad("http://:topsecret@h/a%2Fb", "the path prefix may not contain '%'");
    issuer_bad("http://h/a\"b", "the path prefix may not contain '\"'");
    issuer_bad("http://h/a<b>", "the path prefix may not contain '<'");
    issuer_bad("http://h/a\\b", "the path prefix");
    issuer_bad("http://h/a[b]", "the path prefix");
    issuer_bad("http://h/a{b}", "the path prefix");
    issuer_bad("http://h/a|b", "the path prefix");
    issuer_bad("http://h/a^b", "the path prefix");
    issuer_bad("http://h/a`b", "the path prefix");
    issuer_bad("http://h/\xc3\xa9", "the path prefix");
    issuer_bad("http://h/a b", "space or control character");
    issuer_bad("http://:topsecret@h/a@b", "'@' after the host");
    /* no query, no fragment */
    issuer_bad("http://h?x", "query strings");
    issuer_bad("http://h/api?token=topsecret", "query strings");
    issuer_bad("http://:topsecret@h/api#f", "fragments");
    issuer_bad("http://:top#secret@h", "fragments");
    /* the host and port */
    issuer_bad("http://", "missing host");
    issuer_bad("https://:topsecret@", "missing host");
    issuer_bad("http://:topsecret@/api", "missing host");
    issuer_bad("http://:topsecret@h:0", "port must be an integer in 1..65535, got '0'");
    issuer_bad("http://tok@h:65536", "got '65536'");
    issuer_bad("http://h:x", "port must be an integer in 1..65535");
    issuer_bad("http://h:", "missing port after ':'");
    issuer_bad("http://:topsecret@h:", "missing port");
    issuer_bad("http://h!/", "bad host name 'h!'");
    issuer_bad("http://::1/", "brackets");
    issuer_bad("http://[::1", "missing ']'");
    issuer_bad("http://[zz::1]", "bad IPv6 address");
    issuer_bad("http://[::1]x", "expected ':PORT' after ']'");
    /* "token:..." with the host forgotten reads as host:port: the port is not shown */
    issuer_bad("http://idp:topsecret", "port must be an integer in 1..65535 (not shown");
    issuer_bad("https://x:topsecret/api", "(not shown");
    issuer_bad("http://x:topsecret", "port");
}

/* Who is held up by whom (issue 18, item 9): the HTTP servers' limits and deadlines. */
static void test_http_limits(void)
{
    struct config cfg;
    char path[64];

    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, no_args), (uint64_t)CONFIG_OK);
    CHECK_EQ_U64((uint64_t)cfg.http_head_timeout_ms, 3000);
    CHECK_EQ_U64((uint64_t)cfg.http_max_per_addr, 16);
    CHECK_EQ_U64((uint64_t)cfg.api_max_per_addr, 256);
    config_free(&cfg);
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_HTTP_HEAD_TIMEOUT_MS", "500"}),
                                ARGV("--http-max-connections-per-address", "2")),
                 (uint64_t)CONFIG_OK);
    CHECK_EQ_U64((uint64_t)cfg.http_head_timeout_ms, 500);
    CHECK_EQ_U64((uint64_t)cfg.http_max_per_addr, 2);
    config_free(&cfg);
    write_tmp(path, "api-max-connections-per-address = 7\n");
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_API_MAX_CONNECTIONS_PER_ADDRESS", "9"}),
                                ARGV("--config", path)),
                 (uint64_t)CONFIG_OK);
    CHECK_EQ_U64((uint64_t)cfg.api_max_per_addr, 9); /* the environment over the file */
    config_free(&cfg);
    unlink(path);
    expect_error(NULL, ARGV("--api-max-connections-per-address", "0"),
                 "--api-max-connections-per-address: must be an integer in 1..100000");
    expect_error(NULL, ARGV("--http-head-timeout-ms", "99"),
                 "--http-head-timeout-ms: must be an integer in 100..600000");
}

/* The ID API's settings and refill (issue 11). */
static void test_api_settings(void)
{
    struct config cfg;
    char path[64];

    /* Off by default; refill on. */
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, no_args), (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.api_addr, "") == 0);
    CHECK(!config_api_on(&cfg));
    CHECK(cfg.api_host == NULL);
    CHECK_EQ_U64((uint64_t)cfg.refill, 1);
    CHECK_EQ_U64((uint64_t)cfg.api_buffer, 1000);
    CHECK_EQ_U64((uint64_t)cfg.api_max_conns, 1024);
    CHECK(cfg.api_tls_cert == NULL && cfg.api_tls_key == NULL);
    config_free(&cfg);

    /* --api, IDPOOL_API_ADDR, and the config-file key api-addr (the brief's name) or api. */
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--api", "[::1]:9472", "--refill", "OFF")),
                 (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.api_host, "::1") == 0);
    CHECK_EQ_U64((uint64_t)cfg.api_port, 9472);
    CHECK(config_api_on(&cfg));
    CHECK_EQ_U64((uint64_t)cfg.refill, 0);
    config_free(&cfg);
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_API_ADDR", "127.0.0.1:1"}), no_args),
                 (uint64_t)CONFIG_OK);
    CHECK_EQ_U64((uint64_t)cfg.api_port, 1);
    config_free(&cfg);
    write_tmp(path, "api-addr = 0.0.0.0:9000\nrefill = no\napi-buffer = 50\n");
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--config", path)), (uint64_t)CONFIG_OK);
    CHECK(strcmp(cfg.api_host, "0.0.0.0") == 0);
    CHECK_EQ_U64((uint64_t)cfg.refill, 0);
    CHECK_EQ_U64((uint64_t)cfg.api_buffer, 50);
    config_free(&cfg);
    unlink(path);

    /* Errors name the setting. */
    expect_error(NULL, ARGV("--api", "localhost"), "--api: missing port");
    expect_error(NULL, ARGV("--refill", "maybe"), "--refill: must be on or off, got 'maybe'");
    expect_error(NULL, ARGV("--refill", "off"), "--refill: off with the API off too");
    expect_error(NULL, ARGV("--api", "127.0.0.1:1", "--api-tls-cert", "/x.pem"),
                 "--api-tls-cert: TLS for the API needs both api-tls-cert and api-tls-key "
                 "(api-tls-key is not set)");
    expect_error(NULL, ARGV("--api-tls-cert", "/x.pem", "--api-tls-key", "/y.pem"),
                 "--api-tls-cert: set, but the API is off");
    expect_error(NULL, ARGV("--api-buffer", "0"), "--api-buffer: must be an integer in 1..100000");
}

/* api-access-log (issue 22 item 8): off by default; a file, "-", off or empty. */
static void test_api_access_log(void)
{
    struct config cfg;
    char path[64];

    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--api", "127.0.0.1:1")), (uint64_t)CONFIG_OK);
    CHECK(cfg.api_access_log == NULL);
    config_free(&cfg);
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL,
                                ARGV("--api", "127.0.0.1:1", "--api-access-log", "/var/log/a.log")),
                 (uint64_t)CONFIG_OK);
    CHECK_STR(cfg.api_access_log, "/var/log/a.log");
    config_free(&cfg);
    CHECK_EQ_U64(
        (uint64_t)load(&cfg, ENV({"IDPOOL_API_ACCESS_LOG", "-"}), ARGV("--api", "127.0.0.1:1")),
        (uint64_t)CONFIG_OK);
    CHECK_STR(cfg.api_access_log, "-");
    config_free(&cfg);
    /* a flag's "off" or "" overrides the file's path */
    write_tmp(path, "api = 127.0.0.1:1\napi-access-log = \"/var/log/idpool api.log\"\n");
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--config", path)), (uint64_t)CONFIG_OK);
    CHECK_STR(cfg.api_access_log, "/var/log/idpool api.log");
    config_free(&cfg);
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--config", path, "--api-access-log", "off")),
                 (uint64_t)CONFIG_OK);
    CHECK(cfg.api_access_log == NULL);
    config_free(&cfg);
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--config", path, "--api-access-log=")),
                 (uint64_t)CONFIG_OK);
    CHECK(cfg.api_access_log == NULL);
    config_free(&cfg);
    unlink(path);
    expect_error(NULL, ARGV("--api-access-log", "-"), "--api-access-log: set, but the API is off");
    /* off without the API is no error */
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--api-access-log", "off")), (uint64_t)CONFIG_OK);
    config_free(&cfg);
}

/* failover-reserve (issue 20): auto follows the URL's kind; errors name the values. */
static void test_failover_reserve(void)
{
    struct config cfg;
    char path[64];

    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, no_args), (uint64_t)CONFIG_OK);
    CHECK_EQ_U64((uint64_t)cfg.failover_reserve, PLAN_RESERVE_OFF); /* auto, redis:// */
    config_free(&cfg);
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--redis", "redis-sentinel://127.0.0.1#m")),
                 (uint64_t)CONFIG_OK);
    CHECK_EQ_U64((uint64_t)cfg.failover_reserve, PLAN_RESERVE_TREND); /* auto, Sentinel */
    config_free(&cfg);
    CHECK_EQ_U64((uint64_t)load(&cfg, ENV({"IDPOOL_FAILOVER_RESERVE", "ALL"}), no_args),
                 (uint64_t)CONFIG_OK);
    CHECK_EQ_U64((uint64_t)cfg.failover_reserve, PLAN_RESERVE_ALL);
    config_free(&cfg);
    CHECK_EQ_U64((uint64_t)load(
                     &cfg, NULL,
                     ARGV("--redis", "redis-sentinel://127.0.0.1#m", "--failover-reserve", "off")),
                 (uint64_t)CONFIG_OK);
    CHECK_EQ_U64((uint64_t)cfg.failover_reserve, PLAN_RESERVE_OFF);
    config_free(&cfg);
    write_tmp(path, "failover-reserve = trend\n");
    CHECK_EQ_U64((uint64_t)load(&cfg, NULL, ARGV("--config", path)), (uint64_t)CONFIG_OK);
    CHECK_EQ_U64((uint64_t)cfg.failover_reserve, PLAN_RESERVE_TREND);
    config_free(&cfg);
    unlink(path);
    expect_error(NULL, ARGV("--failover-reserve", "some"),
                 "--failover-reserve: must be one of auto, off, trend, all; got 'some'");
}

int main(void)
{
    RUN(test_defaults);
    RUN(test_file_overrides_defaults);
    RUN(test_env_overrides_file);
    RUN(test_flags_override_env);
    RUN(test_config_path_sources);
    RUN(test_redis_url_forms);
    RUN(test_redis_url_errors);
    RUN(test_sentinel_urls);
    RUN(test_cluster_urls);
    RUN(test_url_vectors);
    RUN(test_mysql_urls);
    RUN(test_hostport);
    RUN(test_http_addr);
    RUN(test_url_errors_in_config);
    RUN(test_cluster_config);
    RUN(test_int_settings);
    RUN(test_file_value_errors);
    RUN(test_file_syntax_errors);
    RUN(test_file_bom);
    RUN(test_lock_ttl_rule);
    RUN(test_bad_flags);
    RUN(test_help_version);
    RUN(test_password_overrides);
    RUN(test_password_files);
    RUN(test_prefix_instance_loglevel);
    RUN(test_free_after_error);
    RUN(test_reload);
    RUN(test_real_getenv);
    RUN(test_usage);
    RUN(test_alert_settings);
    RUN(test_issuer_url);
    RUN(test_api_settings);
    RUN(test_api_access_log);
    RUN(test_failover_reserve);
    RUN(test_http_limits);
    return unit_done();
}
