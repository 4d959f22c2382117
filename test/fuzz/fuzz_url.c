/*
 * fuzz_url — libFuzzer target for the URL and address parsers of url.c:
 * redis_url_parse(), mysql_url_parse(), webhook_url_parse(),
 * issuer_url_parse() and hostport_parse().
 *
 * The first input byte picks a mode (byte % 6):
 *   0..3  the rest, as a C string, is parsed as a redis:// (or
 *         redis-sentinel://, redis-cluster://), mysql://, http:// (webhook)
 *         URL or a HOST:PORT address;
 *   4     a URL is assembled from a scheme out of a fixed list and fuzzed
 *         pieces, with a marker inside the password (and "@host" present or
 *         forgotten) for the redis, mysql, webhook or issuer parser; for the
 *         issuer also as the token alone ("token@host"): whatever the pieces
 *         are, an error message must never contain the marker (README:
 *         configuration errors never print passwords; url.h: nor tokens);
 *   5     the rest, as a C string, is parsed as an issuer URL,
 *         http[s]://[token@]host[:port][/prefix].
 *
 * Invariants: a failed parse leaves the struct zeroed (nothing to free) and
 * an error that is terminated and non-empty; a successful parse
 * gives a host that is a host name or an IPv6 address, a port in 1..65535
 * and values in range (an issuer's token without spaces or control
 * characters, its prefix "" or "/..." of path characters, not ending in
 * '/'), and round-trips: the URL rebuilt from the parsed fields
 * (percent-encoded) parses to the same fields.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <strings.h>

#include "config.h"
#include "fuzz.h"

#define MARKER "Pw0SeCrEt"

static const void *const zero_struct[16]; /* large enough for every url struct */

/*
 * An error message: terminated inside the buffer and non-empty. (It may
 * echo control characters of a scheme or address as given: not checked.)
 */
static void check_err(const char *err, size_t errlen)
{
    const char *nul = memchr(err, '\0', errlen);

    CHECK(nul != NULL && nul != err);
}

/* A parsed host: an IPv6 address (brackets removed) or 1..253 host name characters. */
static void check_host(const char *h)
{
    struct in6_addr a6;
    size_t n;

    CHECK(h != NULL);
    n = strlen(h);
    CHECK(n >= 1);
    if (strchr(h, ':')) {
        CHECK(inet_pton(AF_INET6, h, &a6) == 1);
        return;
    }
    CHECK(n <= 253);
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_');
    }
}

/* Append s to the n-byte buffer at b (at *len), percent-encoding all but unreserved bytes. */
static void put_enc(char *b, size_t n, size_t *len, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        CHECK(*len + 4 < n);
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            b[(*len)++] = (char)c;
        } else {
            b[(*len)++] = '%';
            b[(*len)++] = hex[c >> 4];
            b[(*len)++] = hex[c & 15];
        }
    }
    b[*len] = '\0';
}

static void put(char *b, size_t n, size_t *len, const char *s)
{
    size_t m = strlen(s);

    CHECK(*len + m < n);
    memcpy(b + *len, s, m + 1);
    *len += m;
}

/* host:port, the host in brackets when it is an IPv6 address. */
static void put_hostport(char *b, size_t n, size_t *len, const char *host, int port)
{
    char p[16];

    if (strchr(host, ':')) {
        put(b, n, len, "[");
        put(b, n, len, host);
        put(b, n, len, "]");
    } else {
        put(b, n, len, host);
    }
    snprintf(p, sizeof(p), ":%d", port);
    put(b, n, len, p);
}

/*
 * A rebuilt URL percent-encodes user and password (up to 3 bytes for each
 * input byte) around a host, port and db: inputs above INPUT_MAX are skipped
 * so that it always fits.
 */
#define INPUT_MAX   8192
#define REBUILT_MAX (3 * INPUT_MAX + 1024)

static int str_eq(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

/* "[user][:password]@" when u has either, percent-encoded. */
static void put_userinfo(char *b, size_t n, size_t *len, const struct redis_url *u)
{
    if (!u->user && !u->password)
        return;
    if (u->user)
        put_enc(b, n, len, u->user);
    if (u->password) {
        put(b, n, len, ":");
        put_enc(b, n, len, u->password);
    }
    put(b, n, len, "@");
}

/*
 * The hosts of a parsed redis-sentinel:// or redis-cluster:// URL: 1..16,
 * distinct, valid; the first is host:port.
 */
static void check_hosts(const struct redis_url *u)
{
    CHECK(u->nhosts >= 1 && u->nhosts <= REDIS_HOSTS_MAX);
    for (size_t i = 0; i < u->nhosts; i++) {
        check_host(u->hosts[i].host);
        CHECK(u->hosts[i].port >= 1 && u->hosts[i].port <= 65535);
        for (size_t j = 0; j < i; j++)
            CHECK(u->hosts[i].port != u->hosts[j].port ||
                  strcasecmp(u->hosts[i].host, u->hosts[j].host) != 0);
    }
    CHECK(str_eq(u->host, u->hosts[0].host) && u->port == u->hosts[0].port);
}

/* scheme://[userinfo@]h1:p1,h2:p2... of u, the start of a rebuilt URL. */
static void put_hosts(char *b, size_t n, size_t *len, const char *scheme, const struct redis_url *u)
{
    put(b, n, len, scheme);
    put_userinfo(b, n, len, u);
    for (size_t i = 0; i < u->nhosts; i++) {
        if (i > 0)
            put(b, n, len, ",");
        put_hostport(b, n, len, u->hosts[i].host, u->hosts[i].port);
    }
}

/* v, parsed from u rebuilt, has u's kind, hosts, credentials and database. */
static void check_same(const struct redis_url *u, const struct redis_url *v)
{
    CHECK(v->kind == u->kind && v->nhosts == u->nhosts && v->db == u->db);
    for (size_t i = 0; i < u->nhosts; i++)
        CHECK(str_eq(u->hosts[i].host, v->hosts[i].host) && u->hosts[i].port == v->hosts[i].port);
    CHECK(str_eq(u->host, v->host) && u->port == v->port);
    CHECK(str_eq(u->user, v->user) && str_eq(u->password, v->password));
}

/*
 * A parsed redis-sentinel:// URL: its hosts (check_hosts); a master's name
 * of 1..64 of A-Z a-z 0-9 _ . -; rebuilt (the sentinels, /db,
 * ?sentinel_user=..&sentinel_password=.., #master), it parses the same.
 */
static void check_sentinel(struct redis_url *u)
{
    struct redis_url v;
    char err[CONFIG_ERR_MAX], url[REBUILT_MAX];
    size_t len = 0, n;
    const char *sep = "?";

    check_hosts(u);
    CHECK(u->master != NULL);
    n = strlen(u->master);
    CHECK(n >= 1 && n <= 64);
    for (size_t i = 0; i < n; i++)
        CHECK(isalnum((unsigned char)u->master[i]) || strchr("_.-", u->master[i]));
    CHECK(u->sentinel_user == NULL || u->sentinel_user[0] != '\0');
    CHECK(u->sentinel_password == NULL || u->sentinel_password[0] != '\0');

    put_hosts(url, sizeof(url), &len, "redis-sentinel://", u);
    len += (size_t)snprintf(url + len, sizeof(url) - len, "/%d", u->db);
    if (u->sentinel_user) {
        put(url, sizeof(url), &len, "?sentinel_user=");
        put_enc(url, sizeof(url), &len, u->sentinel_user);
        sep = "&";
    }
    if (u->sentinel_password) {
        put(url, sizeof(url), &len, sep);
        put(url, sizeof(url), &len, "sentinel_password=");
        put_enc(url, sizeof(url), &len, u->sentinel_password);
    }
    put(url, sizeof(url), &len, "#");
    put(url, sizeof(url), &len, u->master);
    if (redis_url_parse(url, &v, err, sizeof(err)) < 0) {
        fprintf(stderr, "rebuilt '%s' fails: %s\n", url, err);
        CHECK(!"rebuilt redis-sentinel URL parses");
    }
    check_same(u, &v);
    CHECK(str_eq(u->sentinel_user, v.sentinel_user) &&
          str_eq(u->sentinel_password, v.sentinel_password));
    CHECK(str_eq(u->master, v.master));
    redis_url_free(&v);
    redis_url_free(u);
    CHECK(memcmp(u, zero_struct, sizeof(*u)) == 0);
}

/*
 * A parsed redis-cluster:// URL: its hosts (check_hosts), database 0,
 * nothing of Sentinel; rebuilt (the seed nodes, /0), it parses the same.
 */
static void check_cluster(struct redis_url *u)
{
    struct redis_url v;
    char err[CONFIG_ERR_MAX], url[REBUILT_MAX];
    size_t len = 0;

    check_hosts(u);
    CHECK(u->db == 0 && u->master == NULL);
    CHECK(u->sentinel_user == NULL && u->sentinel_password == NULL);
    put_hosts(url, sizeof(url), &len, "redis-cluster://", u);
    put(url, sizeof(url), &len, "/0");
    if (redis_url_parse(url, &v, err, sizeof(err)) < 0) {
        fprintf(stderr, "rebuilt '%s' fails: %s\n", url, err);
        CHECK(!"rebuilt redis-cluster URL parses");
    }
    check_same(u, &v);
    redis_url_free(&v);
    redis_url_free(u);
    CHECK(memcmp(u, zero_struct, sizeof(*u)) == 0);
}

static void check_redis(const char *s)
{
    struct redis_url u, v;
    char err[CONFIG_ERR_MAX], url[REBUILT_MAX];
    size_t len = 0;

    if (redis_url_parse(s, &u, err, sizeof(err)) < 0) {
        check_err(err, sizeof(err));
        CHECK(memcmp(&u, zero_struct, sizeof(u)) == 0);
        return;
    }
    check_host(u.host);
    CHECK(u.port >= 1 && u.port <= 65535);
    CHECK(u.db >= 0 && u.db <= 1000000);
    CHECK(u.user == NULL || u.user[0] != '\0');
    CHECK(u.password == NULL || u.password[0] != '\0'); /* empty counts as none */
    if (u.kind == REDIS_SENTINEL) {
        check_sentinel(&u);
        return;
    }
    if (u.kind == REDIS_CLUSTER) {
        check_cluster(&u);
        return;
    }
    CHECK(u.kind == REDIS_STANDALONE);
    CHECK(u.hosts == NULL && u.nhosts == 0 && u.master == NULL);
    CHECK(u.sentinel_user == NULL && u.sentinel_password == NULL);

    /* redis://[user][:password@]host:port/db, rebuilt, parses the same. */
    put(url, sizeof(url), &len, "redis://");
    put_userinfo(url, sizeof(url), &len, &u);
    put_hostport(url, sizeof(url), &len, u.host, u.port);
    snprintf(url + len, sizeof(url) - len, "/%d", u.db);
    if (redis_url_parse(url, &v, err, sizeof(err)) < 0) {
        fprintf(stderr, "rebuilt '%s' fails: %s\n", url, err);
        CHECK(!"rebuilt redis URL parses");
    }
    check_same(&u, &v);
    redis_url_free(&v);
    redis_url_free(&u);
    CHECK(memcmp(&u, zero_struct, sizeof(u)) == 0);
}

static void check_mysql(const char *s)
{
    struct mysql_url u, v;
    char err[CONFIG_ERR_MAX], url[REBUILT_MAX];
    size_t len = 0, n;

    if (mysql_url_parse(s, &u, err, sizeof(err)) < 0) {
        check_err(err, sizeof(err));
        CHECK(memcmp(&u, zero_struct, sizeof(u)) == 0);
        return;
    }
    check_host(u.host);
    CHECK(u.port >= 1 && u.port <= 65535);
    CHECK(u.user != NULL && u.user[0] != '\0');
    CHECK(u.password == NULL || u.password[0] != '\0');
    CHECK(u.db != NULL);
    n = strlen(u.db);
    CHECK(n >= 1 && n <= 64);
    for (size_t i = 0; i < n; i++) {
        char c = u.db[i];
        CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '$');
    }

    put(url, sizeof(url), &len, "mysql://");
    put_enc(url, sizeof(url), &len, u.user);
    if (u.password) {
        put(url, sizeof(url), &len, ":");
        put_enc(url, sizeof(url), &len, u.password);
    }
    put(url, sizeof(url), &len, "@");
    put_hostport(url, sizeof(url), &len, u.host, u.port);
    put(url, sizeof(url), &len, "/");
    put(url, sizeof(url), &len, u.db);
    if (mysql_url_parse(url, &v, err, sizeof(err)) < 0) {
        fprintf(stderr, "rebuilt '%s' fails: %s\n", url, err);
        CHECK(!"rebuilt mysql URL parses");
    }
    CHECK(str_eq(u.host, v.host) && u.port == v.port && str_eq(u.db, v.db));
    CHECK(str_eq(u.user, v.user) && str_eq(u.password, v.password));
    mysql_url_free(&v);
    mysql_url_free(&u);
}

static void check_webhook(const char *s)
{
    struct webhook_url u, v;
    char err[CONFIG_ERR_MAX], url[REBUILT_MAX];
    size_t len = 0;

    if (webhook_url_parse(s, &u, err, sizeof(err)) < 0) {
        check_err(err, sizeof(err));
        CHECK(memcmp(&u, zero_struct, sizeof(u)) == 0);
        return;
    }
    check_host(u.host);
    CHECK(u.port >= 1 && u.port <= 65535);
    CHECK(u.path != NULL && u.path[0] == '/');
    /* The path (and query) goes into a request line: no spaces, controls or fragment. */
    for (const char *c = u.path; *c; c++)
        CHECK((unsigned char)*c > ' ' && *c != 0x7f && *c != '#');

    put(url, sizeof(url), &len, "http://");
    put_hostport(url, sizeof(url), &len, u.host, u.port);
    put(url, sizeof(url), &len, u.path);
    if (webhook_url_parse(url, &v, err, sizeof(err)) < 0) {
        fprintf(stderr, "rebuilt '%s' fails: %s\n", url, err);
        CHECK(!"rebuilt webhook URL parses");
    }
    CHECK(str_eq(u.host, v.host) && u.port == v.port && str_eq(u.path, v.path));
    webhook_url_free(&v);
    webhook_url_free(&u);
}

static void check_issuer(const char *s)
{
    struct issuer_url u, v;
    char err[CONFIG_ERR_MAX], url[REBUILT_MAX];
    size_t len = 0, n;

    if (issuer_url_parse(s, &u, err, sizeof(err)) < 0) {
        check_err(err, sizeof(err));
        CHECK(memcmp(&u, zero_struct, sizeof(u)) == 0);
        return;
    }
    check_host(u.host);
    CHECK(u.port >= 1 && u.port <= 65535);
    CHECK(u.tls == 0 || u.tls == 1);
    /* The token goes into "Authorization: Bearer <token>": no spaces or controls. */
    CHECK(u.token == NULL || u.token[0] != '\0');
    for (const char *c = u.token; c && *c; c++)
        CHECK((unsigned char)*c > ' ' && *c != 0x7f);
    /* The prefix goes before /v1/ids/{key} in a request line, unescaped. */
    CHECK(u.prefix != NULL);
    n = strlen(u.prefix);
    CHECK(n == 0 || (u.prefix[0] == '/' && u.prefix[n - 1] != '/'));
    for (size_t i = 0; i < n; i++) {
        char c = u.prefix[i];
        CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (c && strchr("/-._~!$&'()*+,;=:", c)));
    }

    put(url, sizeof(url), &len, u.tls ? "https://" : "http://");
    if (u.token) {
        put(url, sizeof(url), &len, ":");
        put_enc(url, sizeof(url), &len, u.token);
        put(url, sizeof(url), &len, "@");
    }
    put_hostport(url, sizeof(url), &len, u.host, u.port);
    put(url, sizeof(url), &len, u.prefix);
    if (issuer_url_parse(url, &v, err, sizeof(err)) < 0) {
        fprintf(stderr, "rebuilt '%s' fails: %s\n", url, err);
        CHECK(!"rebuilt issuer URL parses");
    }
    CHECK(str_eq(u.host, v.host) && u.port == v.port && u.tls == v.tls);
    CHECK(str_eq(u.token, v.token) && str_eq(u.prefix, v.prefix));
    issuer_url_free(&v);
    issuer_url_free(&u);
    CHECK(memcmp(&u, zero_struct, sizeof(u)) == 0);
}

static void check_hostport(const char *s)
{
    char err[CONFIG_ERR_MAX], buf[512], *host = (char *)1, *host2;
    int port = -1, port2;
    size_t len = 0;

    if (hostport_parse(s, &host, &port, err, sizeof(err)) < 0) {
        CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0');
        CHECK(host == NULL);
        return;
    }
    check_host(host);
    CHECK(port >= 1 && port <= 65535);
    put_hostport(buf, sizeof(buf), &len, host, port);
    CHECK(hostport_parse(buf, &host2, &port2, err, sizeof(err)) == 0);
    CHECK(strcmp(host, host2) == 0 && port == port2);
    free(host);
    free(host2);
}

/*
 * Replace the bytes that would move the password out of the userinfo. With
 * "@host" forgotten, "user:pw" is the first address of a list, and a ','
 * in it starts the next address of a redis-sentinel:// or redis-cluster://
 * URL (echoed as a bad host name): a password no more either.
 */
static void userinfo_clean(char *s, int no_host)
{
    for (; *s; s++)
        if (*s == '/' || *s == '?' || *s == '#' || (no_host && (*s == '@' || *s == ',')))
            *s = '_';
}

/* How many times MARKER occurs in s (overlaps counted). */
static size_t count_marker(const char *s)
{
    size_t n = 0;

    for (const char *p = s; (p = strstr(p, MARKER)) != NULL; p++)
        n++;
    return n;
}

/*
 * scheme://user:pw1<MARKER>pw2@hostport[/path] for one of the four parsers,
 * or the same with "@hostport" forgotten (then "user:pw..." reads as a host
 * and a port); for the issuer also scheme://pw1<MARKER>pw2@hostport[/path],
 * the token alone. The marker sits in the password (the token) wherever the
 * pieces move the separators, so unless a piece holds the marker itself, no
 * error may show it.
 */
static void check_secret(struct fz *f)
{
    static const char *const schemes[] = {
        "redis", "REDIS", "rediss", "mysql", "MySQL",          "mariadb",      "http",
        "https", "",      "redis:", "HTTPS", "redis-sentinel", "redis-cluster"};
    char err[CONFIG_ERR_MAX], *url, *user, *pw1, *pw2, *hp, *path;
    uint8_t kind = fz_u8(f) % 4, flags = fz_u8(f);
    int has_path = flags & 1, no_host = flags & 2; /* no_host: "@host" forgotten */
    /* token_alone: "pw1<MARKER>pw2@host", the issuer's "token@" (with a host only) */
    int token_alone = kind == 3 && (flags & 4) && !no_host;
    const char *scheme = schemes[fz_u8(f) % (sizeof(schemes) / sizeof(schemes[0]))];
    size_t n;
    int rc;

    user = fz_str(f, 300, NULL);
    pw1 = fz_str(f, 300, NULL);
    pw2 = fz_str(f, 300, NULL);
    /*
     * '/', '?' and '#' end the authority (RFC 3986; README: percent-encode
     * them), and with "@host" forgotten a raw '@' would make the rest of the
     * password the host: in such URLs the password is not a password.
     */
    userinfo_clean(user, no_host);
    userinfo_clean(pw1, no_host);
    userinfo_clean(pw2, no_host);
    /*
     * A user name, not an [IPv6] literal the ']' would end (at the start, or
     * after a ',' in a redis-sentinel:// list): its text is echoed as a
     * bad address, and with no '@' the password would be inside it.
     */
    for (char *c = user; no_host && *c; c++)
        if (*c == '[')
            *c = '_';
    hp = fz_str(f, 300, NULL);
    path = fz_str(f, 300, NULL);
    n = strlen(scheme) + strlen(user) + strlen(pw1) + strlen(pw2) + strlen(hp) + strlen(path) + 64;
    url = malloc(n);
    CHECK(url != NULL);
    snprintf(url, n, "%s://%s%s%s" MARKER "%s%s%s%s%s", scheme, token_alone ? "" : user,
             token_alone ? "" : ":", pw1, pw2, no_host ? "" : "@", no_host ? "" : hp,
             has_path ? "/" : "", path);

    memset(err, 0, sizeof(err));
    if (kind == 0) {
        struct redis_url u;
        rc = redis_url_parse(url, &u, err, sizeof(err));
        if (rc == 0)
            redis_url_free(&u);
    } else if (kind == 1) {
        struct mysql_url u;
        rc = mysql_url_parse(url, &u, err, sizeof(err));
        if (rc == 0)
            mysql_url_free(&u);
    } else if (kind == 2) {
        struct webhook_url u;
        rc = webhook_url_parse(url, &u, err, sizeof(err));
        if (rc == 0)
            webhook_url_free(&u);
    } else {
        struct issuer_url u;
        rc = issuer_url_parse(url, &u, err, sizeof(err));
        if (rc == 0)
            issuer_url_free(&u);
    }
    /*
     * Only the pieces the harness does not control may be echoed: never the
     * password. Checked when the marker occurs in the URL only once, in the
     * password: pieces may hold it, or spell it across their joins (a host
     * ending in "Pw0" before a path "SeCrEt": the bad port is shown).
     */
    if (rc < 0 && count_marker(url) == 1 && strstr(err, MARKER)) {
        fprintf(stderr, "URL '%s': error shows the password: %s\n", url, err);
        CHECK(!"no password in errors");
    }
    free(url);
    free(user);
    free(pw1);
    free(pw2);
    free(hp);
    free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    uint8_t mode = fz_u8(&f) % 6;
    char *s;

    if (size > INPUT_MAX)
        return 0;
    if (mode == 4) {
        check_secret(&f);
        return 0;
    }
    s = fz_rest(&f, NULL);
    switch (mode) {
    case 0:
        check_redis(s);
        break;
    case 1:
        check_mysql(s);
        break;
    case 2:
        check_webhook(s);
        break;
    case 5:
        check_issuer(s);
        break;
    default:
        check_hostport(s);
        break;
    }
    free(s);
    return 0;
}
