/*
 * ctl_common — shared plumbing of idpoolctl: errors and exit codes, settings,
 * connections, argument parsing and output helpers.
 */
#include "ctl_common.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "clock.h"
#include "resolve.h"
#include "route.h"

void ctl_oom(void)
{
    fputs("idpoolctl: out of memory\n", stderr);
    exit(CTL_ERROR);
}

void *ctl_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);

    if (!p)
        ctl_oom();
    return p;
}

cJSON *ctl_jcheck(cJSON *j)
{
    if (!j)
        ctl_oom();
    return j;
}

char *ctl_strf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        ctl_oom();
    s = malloc((size_t)n + 1);
    if (!s)
        ctl_oom();
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static void vreport(struct ctl *c, const char *fmt, va_list ap)
{
    vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
    if (c->cmd)
        fprintf(stderr, "%s: %s: %s\n", c->prog, c->cmd, c->errmsg);
    else
        fprintf(stderr, "%s: %s\n", c->prog, c->errmsg);
}

int ctl_fail(struct ctl *c, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport(c, fmt, ap);
    va_end(ap);
    return code;
}

int ctl_usage(struct ctl *c, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport(c, fmt, ap);
    va_end(ap);
    if (c->cmd)
        fprintf(stderr, "Try '%s %s --help'.\n", c->prog, c->cmd);
    else
        fprintf(stderr, "Try '%s --help'.\n", c->prog);
    return CTL_USAGE;
}

int ctl_setup(struct ctl *c)
{
    char err[CONFIG_ERR_MAX];
    enum config_result r;
    const char *cmd = c->cmd;
    int code;

    if (c->cfg_loaded)
        return 0;
    r = config_load(&c->cfg, c->gargc, c->gargv, NULL, err, sizeof(err));
    if (r == CONFIG_OK) {
        c->cfg_loaded = 1;
        return 0;
    }
    /*
     * --help/--version never reach config_load (main handles them). A bad
     * setting is a usage error (exit 2, with the "Try" line) wherever it
     * came from: a flag, the environment or a config file, as for idpoold.
     */
    c->cmd = NULL; /* a global option is not the command's fault */
    code = ctl_usage(c, "%s", err);
    c->cmd = cmd;
    return code;
}

/* MariaDB counts whole seconds: round up, as idpoold does. */
static unsigned timeout_s(int ms)
{
    return (unsigned)((ms + 999) / 1000);
}

int ctl_db_open(struct ctl *c)
{
    if (c->db)
        return 0;
    return ctl_db_connect(c, &c->cfg.mysql, &c->db);
}

int ctl_db_connect(struct ctl *c, const struct mysql_url *u, MYSQL **out)
{
    unsigned to = timeout_s(c->cfg.mysql_timeout_ms), proto = MYSQL_PROTOCOL_TCP;
    MYSQL *m;

    *out = NULL;
    m = mysql_init(NULL);
    if (!m)
        ctl_oom();
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &to);
    mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &to);
    mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &to);
    mysql_options(m, MYSQL_OPT_PROTOCOL, &proto);
    mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (!mysql_real_connect(m, u->host, u->user, u->password, u->db, (unsigned)u->port, NULL, 0)) {
        /* mysql_error() names the user, never the password. */
        ctl_fail(c, CTL_ERROR, "cannot connect to MySQL at %s:%d/%s: %s", u->host, u->port, u->db,
                 mysql_error(m));
        mysql_close(m);
        return CTL_ERROR;
    }
    *out = m;
    return 0;
}

int ctl_db_fail(struct ctl *c)
{
    return ctl_fail(c, CTL_ERROR, "MySQL at %s:%d/%s: error %u: %s", c->cfg.mysql.host,
                    c->cfg.mysql.port, c->cfg.mysql.db, mysql_errno(c->db), mysql_error(c->db));
}

int ctl_db_exec(struct ctl *c, const char *sql)
{
    if (mysql_query(c->db, sql) == 0)
        return 0;
    return ctl_db_fail(c);
}

char *ctl_db_quote(struct ctl *c, const char *value)
{
    size_t n = strlen(value);
    char *q = malloc(2 * n + 3);

    if (!q)
        ctl_oom();
    q[0] = '\'';
    n = mysql_real_escape_string(c->db, q + 1, value, (unsigned long)n);
    q[n + 1] = '\'';
    q[n + 2] = '\0';
    return q;
}

/* A reply to a setup command: 0, or CTL_ERROR after reporting what failed. */
static int redis_setup_reply(struct ctl *c, redisReply *r, const char *what)
{
    int rc = 0;

    if (!r)
        rc = ctl_fail(c, CTL_ERROR, "%s: %s failed: %s", c->rds_where, what,
                      c->rds->errstr[0] ? c->rds->errstr : "no reply");
    else if (r->type == REDIS_REPLY_ERROR)
        rc = ctl_fail(c, CTL_ERROR, "%s: %s refused: %s", c->rds_where, what, r->str);
    freeReplyObject(r);
    return rc;
}

/*
 * A Cluster: its slot table read from the seeds (or the primaries they
 * name), each asked within the Redis timeout; the primaries are connected
 * when a command needs them. 0, or CTL_ERROR after reporting.
 */
static int cluster_open(struct ctl *c)
{
    const struct redis_url *u = &c->cfg.redis;
    char where[REDIS_HOSTS_MAX * HOSTPORT_STR_MAX + 64], err[1024];
    unsigned ms = (unsigned)c->cfg.redis_timeout_ms;

    snprintf(c->rds_where, sizeof(c->rds_where), "Redis %s",
             redis_url_where(where, sizeof(where), u));
    c->route = route_new(u, ms, NULL, NULL);
    if (!c->route)
        ctl_oom();
    if (route_sync(c->route, clock_ms() + (uint64_t)ms * ROUTE_ASK_MAX, err, sizeof(err)) < 0)
        return ctl_fail(c, CTL_ERROR, "%s: %s", c->rds_where, err);
    return 0;
}

void ctl_redis_where(const struct ctl *c, const redisContext *x, char *where, size_t wlen)
{
    char hp[HOSTPORT_STR_MAX];

    if (x == c->rds)
        snprintf(where, wlen, "%s", c->rds_where);
    else
        snprintf(where, wlen, "Redis cluster node %s",
                 hostport_str(hp, sizeof(hp), x->tcp.host, x->tcp.port));
}

/*
 * A Cluster's connection to the primary of key's slot, or with key NULL
 * to its i-th primary, opened as needed within the Redis timeout: NULL
 * with err saying why. Its name into where either way.
 */
static redisContext *routed(struct ctl *c, const char *key, size_t i, char *where, size_t wlen,
                            char *err, size_t errlen)
{
    uint64_t deadline = clock_ms() + (uint64_t)c->cfg.redis_timeout_ms;
    struct cluster_addr ka;
    const struct cluster_addr *a = !key ? route_primary(c->route, i)
                                   : route_addr(c->route, key, &ka) == 0 ? &ka
                                                                         : NULL;
    char hp[HOSTPORT_STR_MAX] = "?";
    redisContext *x = key ? route_key_conn(c->route, key, deadline, err, errlen)
                          : route_primary_conn(c->route, i, deadline, err, errlen);

    if (x)
        ctl_redis_where(c, x, where, wlen);
    else if (a)
        snprintf(where, wlen, "Redis cluster node %s",
                 hostport_str(hp, sizeof(hp), a->host, a->port));
    else
        snprintf(where, wlen, "%s", c->rds_where);
    return x;
}

int ctl_redis_where_key(const struct ctl *c, const char *key, char *where, size_t wlen)
{
    struct cluster_addr a;
    char hp[HOSTPORT_STR_MAX];

    if (!c->route || route_addr(c->route, key, &a) < 0)
        return -1;
    snprintf(where, wlen, "Redis cluster node %s", hostport_str(hp, sizeof(hp), a.host, a.port));
    return 0;
}

redisContext *ctl_redis_try_key(struct ctl *c, const char *key, char *where, size_t wlen, char *err,
                                size_t errlen)
{
    if (!c->route) {
        snprintf(where, wlen, "%s", c->rds_where);
        return c->rds;
    }
    return routed(c, key, 0, where, wlen, err, errlen);
}

redisContext *ctl_redis_for_key(struct ctl *c, const char *key, char *where, size_t wlen)
{
    char err[1024];
    redisContext *x = ctl_redis_try_key(c, key, where, wlen, err, sizeof(err));

    if (!x)
        ctl_fail(c, CTL_ERROR, "%s: %s", c->rds_where, err);
    return x;
}

int ctl_redis_keyed(struct ctl *c, const char *key, int argc, const char **argv, redisReply **out,
                    char *where, size_t wlen, char *err, size_t errlen)
{
    char why[1024];
    size_t lens[16];
    struct route_trip trip;

    *out = NULL;
    snprintf(where, wlen, "%s", c->rds_where);
    if (argc > 16) {
        snprintf(err, errlen, "%s: %s: too many arguments", c->rds_where, argv[0]);
        return -1;
    }
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    if (!c->route) {
        *out = redisCommandArgv(c->rds, argc, argv, lens);
        if (!*out)
            snprintf(err, errlen, "%s: %s failed: %s", c->rds_where, argv[0],
                     c->rds->errstr[0] ? c->rds->errstr : "no reply");
        return *out ? 0 : -1;
    }
    /* A lost command is not sent again: it may have run. */
    if (route_command(c->route, key, argc, argv, lens,
                      clock_ms() + (uint64_t)c->cfg.redis_timeout_ms, out, &trip, why,
                      sizeof(why)) == ROUTE_REPLY) {
        snprintf(where, wlen, "Redis cluster node %s", trip.where);
        return 0;
    }
    snprintf(err, errlen, "%s: %s failed: %s", c->rds_where, argv[0], why);
    return -1;
}

size_t ctl_redis_servers(const struct ctl *c)
{
    return c->route ? route_primaries(c->route) : 1;
}

redisContext *ctl_redis_server(struct ctl *c, size_t i, char *where, size_t wlen, char *err,
                               size_t errlen)
{
    if (!c->route) {
        snprintf(where, wlen, "%s", c->rds_where);
        return c->rds;
    }
    return routed(c, NULL, i, where, wlen, err, errlen);
}

int ctl_redis_open(struct ctl *c)
{
    const struct redis_url *u = &c->cfg.redis;
    struct timeval tv = {c->cfg.redis_timeout_ms / 1000, (c->cfg.redis_timeout_ms % 1000) * 1000};
    char primary[256], where[HOSTPORT_STR_MAX], err[1024] = "not a Sentinel URL";
    const char *host = u->host;
    int port = u->port;
    redisContext *r;

    if (c->rds || c->route)
        return 0;
    if (u->kind == REDIS_CLUSTER)
        return cluster_open(c);
    if (u->kind == REDIS_SENTINEL) {
        struct resolver res;

        if (resolve_init(&res, u, NULL, NULL) < 0 ||
            resolve_primary(&res, c->cfg.redis_timeout_ms, primary, sizeof(primary), &port, err,
                            sizeof(err)) < 0)
            return ctl_fail(c, CTL_ERROR, "cannot find the Redis primary through Sentinel: %s",
                            err);
        host = primary;
        snprintf(c->rds_where, sizeof(c->rds_where), "Redis %s via Sentinel (primary %s)",
                 u->master, hostport_str(where, sizeof(where), host, port));
    } else if (strchr(u->host, ':')) {
        snprintf(c->rds_where, sizeof(c->rds_where), "Redis at [%s]:%d", u->host, u->port);
    } else {
        snprintf(c->rds_where, sizeof(c->rds_where), "Redis at %s:%d", u->host, u->port);
    }
    snprintf(c->rds_host, sizeof(c->rds_host), "%s", host);
    c->rds_port = port;
    r = redisConnectWithTimeout(host, port, tv);
    if (!r)
        ctl_oom();
    if (r->err) {
        ctl_fail(c, CTL_ERROR, "cannot connect to %s: %s", c->rds_where, r->errstr);
        redisFree(r);
        return CTL_ERROR;
    }
    c->rds = r;
    if (redisSetTimeout(r, tv) != REDIS_OK)
        return ctl_fail(c, CTL_ERROR, "%s: cannot set the command timeout", c->rds_where);
    if (u->password) {
        redisReply *rep;

        if (u->user)
            rep = redisCommand(r, "AUTH %s %s", u->user, u->password);
        else
            rep = redisCommand(r, "AUTH %s", u->password);
        if (redis_setup_reply(c, rep, "AUTH") != 0)
            return CTL_ERROR;
    }
    if (u->db != 0 && redis_setup_reply(c, redisCommand(r, "SELECT %d", u->db), "SELECT") != 0)
        return CTL_ERROR;
    /* What the sentinels named may have been demoted since: read and write the primary only. */
    if (u->kind == REDIS_SENTINEL && resolve_check_master(r, err, sizeof(err)) < 0)
        return ctl_fail(c, CTL_ERROR, "%s: %s", c->rds_where, err);
    return 0;
}

void ctl_close(struct ctl *c)
{
    if (c->db)
        mysql_close(c->db);
    c->db = NULL;
    if (c->rds)
        redisFree(c->rds);
    c->rds = NULL;
    route_free(c->route);
    c->route = NULL;
    if (c->cfg_loaded)
        config_free(&c->cfg);
    c->cfg_loaded = 0;
}

int ctl_parse_i64(const char *s, int64_t *out)
{
    const char *d = s[0] == '-' ? s + 1 : s;
    char *end;
    long long v;

    if (!isdigit((unsigned char)d[0]))
        return -1;
    for (const char *p = d; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (int64_t)v;
    return 0;
}

const char *ctl_i64(int64_t v, char *buf)
{
    snprintf(buf, 24, "%" PRId64, v);
    return buf;
}

const char *ctl_u64(uint64_t v, char *buf)
{
    snprintf(buf, 24, "%" PRIu64, v);
    return buf;
}

const char *ctl_printable(const char *s, char *buf, size_t len)
{
    size_t i;

    for (i = 0; s[i] && i + 1 < len; i++)
        buf[i] = ((unsigned char)s[i] < ' ' || s[i] == 0x7f) ? '?' : s[i];
    buf[i] = '\0';
    return buf;
}

/* ------------------------------------------------------------ options */

static const struct ctl_opt *opt_find(const struct ctl_opt *opts, const char *name, size_t n)
{
    for (; opts && opts->name; opts++)
        if (strlen(opts->name) == n && memcmp(opts->name, name, n) == 0)
            return opts;
    return NULL;
}

int ctl_opts_parse(struct ctl *c, int argc, char **argv, const struct ctl_opt *opts, ctl_opt_fn *fn,
                   void *arg, char **pos, int maxpos, int *npos)
{
    int i, help = 0, only_pos = 0;

    *npos = 0;
    for (i = 0; i < argc; i++) {
        const char *a = argv[i], *name, *eq, *value = NULL;
        const struct ctl_opt *o;
        size_t n;
        int rc;

        if (only_pos || a[0] != '-' || a[1] == '\0' ||
            (a[1] != '-' && isdigit((unsigned char)a[1]))) {
            /* A positional argument (a negative number counts as one). */
            if (*npos >= maxpos)
                return ctl_usage(c, "unexpected argument '%.64s'", a);
            pos[(*npos)++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help = 1;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            c->json = 1;
            continue;
        }
        if (a[1] != '-')
            return ctl_usage(c, "unknown option '%.32s'", a);
        name = a + 2;
        eq = strchr(name, '=');
        n = eq ? (size_t)(eq - name) : strlen(name);
        o = opt_find(opts, name, n);
        if (!o)
            return ctl_usage(c,
                             "unknown option '--%.*s' (global options such as --redis go "
                             "before the command)",
                             (int)(n < 64 ? n : 64), name);
        if (o->has_arg) {
            if (eq)
                value = eq + 1;
            else if (i + 1 < argc)
                value = argv[++i];
            else
                return ctl_usage(c, "--%s: missing value", o->name);
        } else if (eq) {
            return ctl_usage(c, "--%s takes no value", o->name);
        }
        rc = fn ? fn(c, o->id, o->name, value, arg) : 0;
        if (rc != 0)
            return rc;
    }
    return help ? CTL_HELP : 0;
}

/* -------------------------------------------------------------- output */

struct ctl_table {
    int ncols;
    size_t nrows, cap;
    char **cells; /* (nrows + 1) x ncols; row 0 holds the headers */
};

static char *xstrdup(const char *s)
{
    char *d = strdup(s ? s : "-");

    if (!d)
        ctl_oom();
    return d;
}

struct ctl_table *ctl_table_new(int ncols, const char *const *headers)
{
    struct ctl_table *t = ctl_xcalloc(1, sizeof(*t));

    t->ncols = ncols;
    t->cap = 16;
    t->cells = ctl_xcalloc(t->cap * (size_t)ncols, sizeof(char *));
    for (int i = 0; i < ncols; i++)
        t->cells[i] = xstrdup(headers[i]);
    return t;
}

void ctl_table_add(struct ctl_table *t, const char *const *cells)
{
    size_t row = t->nrows + 1;

    if (row >= t->cap) {
        char **n = realloc(t->cells, 2 * t->cap * (size_t)t->ncols * sizeof(char *));
        if (!n)
            ctl_oom();
        t->cells = n;
        t->cap *= 2;
    }
    for (int i = 0; i < t->ncols; i++)
        t->cells[row * (size_t)t->ncols + (size_t)i] = xstrdup(cells[i]);
    t->nrows++;
}

size_t ctl_table_rows(const struct ctl_table *t)
{
    return t->nrows;
}

/* Display width of UTF-8 text: one column per code point (good enough here). */
static size_t text_width(const char *s)
{
    size_t w = 0;

    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

void ctl_table_print(const struct ctl_table *t, FILE *out)
{
    size_t width[32] = {0};
    int ncols = t->ncols < 32 ? t->ncols : 32;

    for (size_t r = 0; r <= t->nrows; r++)
        for (int i = 0; i < ncols; i++) {
            size_t w = text_width(t->cells[r * (size_t)t->ncols + (size_t)i]);
            if (w > width[i])
                width[i] = w;
        }
    for (size_t r = 0; r <= t->nrows; r++) {
        for (int i = 0; i < ncols; i++) {
            const char *s = t->cells[r * (size_t)t->ncols + (size_t)i];
            if (i == ncols - 1) {
                fprintf(out, "%s\n", s);
            } else {
                fputs(s, out);
                for (size_t w = text_width(s); w < width[i] + 2; w++)
                    fputc(' ', out);
            }
        }
    }
}

void ctl_table_free(struct ctl_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < (t->nrows + 1) * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}

void ctl_json_print(struct ctl *c, cJSON *doc)
{
    char *s = cJSON_Print(doc);

    if (!s)
        ctl_oom();
    puts(s);
    free(s);
    cJSON_Delete(doc);
    c->json_done = 1;
}

/*
 * JSON numbers: one rule everywhere (idpoolctl --json, /v1/apps): values
 * in the ID space (IDs, offsets, lease bounds) are strings, as they may
 * exceed 2^53; counts, sizes, row ids and versions are numbers.
 */
void ctl_json_i64(cJSON *obj, const char *name, int64_t v)
{
    ctl_jcheck(cJSON_AddNumberToObject(obj, name, (double)v));
}

void ctl_json_u64(cJSON *obj, const char *name, uint64_t v)
{
    ctl_jcheck(cJSON_AddNumberToObject(obj, name, (double)v));
}

void ctl_json_offset(cJSON *obj, const char *name, uint64_t v)
{
    char buf[24];

    ctl_jcheck(cJSON_AddStringToObject(obj, name, ctl_u64(v, buf)));
}
