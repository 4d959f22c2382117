#include "url.h"

#include "text.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REDIS_DEFAULT_PORT    6379
#define SENTINEL_DEFAULT_PORT 26379
#define SENTINEL_NAME_MAX     64
#define MYSQL_DEFAULT_PORT    3306
#define REDIS_DB_MAX          1000000
#define MYSQL_DB_MAX          64
#define HOSTNAME_MAX          253
/* ---------------------------------------------------------------- URLs */

/* The pieces of scheme://[userinfo@]hostport[/path], pointing into the URL. */
struct url_parts {
    bool has_userinfo;
    const char *user; /* up to the first ':' of userinfo */
    size_t user_len;
    bool has_password; /* userinfo has a ':' */
    const char *password;
    size_t password_len;
    const char *hostport;
    size_t hostport_len;
    bool has_path;    /* a '/' follows the host */
    const char *path; /* after the '/' */
    size_t path_len;
    const char *query; /* '?...' (URL_QUERY only), NULL if none */
    size_t query_len;
    const char *fragment; /* after '#' (URL_FRAGMENT only), NULL if none */
    size_t fragment_len;
};

/* What url_split accepts after the path. */
enum { URL_QUERY = 1, URL_FRAGMENT = 2 };

/*
 * Check the scheme against the accepted ones and return what follows "://".
 * Only the scheme is ever echoed: the rest may hold a password.
 */
static const char *url_scheme(const char *s, const char *const *schemes, const char *expect,
                              char *err, size_t errlen)
{
    const char *sep = strstr(s, "://");

    for (const char *const *sc = schemes; *sc; sc++) {
        size_t n = strlen(*sc);
        if (strncasecmp(s, *sc, n) == 0 && strncmp(s + n, "://", 3) == 0)
            return s + n + 3;
    }
    if (sep && sep - s <= 16)
        text_err(err, errlen, "unsupported scheme '%.*s://', expected %s", (int)(sep - s), s,
                 expect);
    else
        text_err(err, errlen, "not a URL, expected %s", expect);
    return NULL;
}

/*
 * Split the part after "scheme://" into userinfo, host[:port] and path.
 * Following RFC 3986 the authority ends at the first '/', '?' or '#', and the
 * last '@' in it ends the userinfo (so a raw '@' in a password works).
 * Query strings are rejected unless allow has URL_QUERY, fragments unless
 * it has URL_FRAGMENT.
 */
static int url_split(const char *rest, unsigned allow, struct url_parts *p, char *err,
                     size_t errlen)
{
    size_t alen = strcspn(rest, "/?#");
    const char *at = NULL, *after;

    memset(p, 0, sizeof(*p));
    for (const char *c = rest; *c; c++) {
        if ((unsigned char)*c <= ' ' || *c == 0x7f) {
            text_err(err, errlen, "URL contains a space or control character");
            return -1;
        }
    }
    for (size_t i = 0; i < alen; i++)
        if (rest[i] == '@')
            at = rest + i;
    p->hostport = rest;
    p->hostport_len = alen;
    if (at) {
        const char *colon = memchr(rest, ':', (size_t)(at - rest));

        p->has_userinfo = true;
        p->user = rest;
        p->user_len = colon ? (size_t)(colon - rest) : (size_t)(at - rest);
        if (colon) {
            p->has_password = true;
            p->password = colon + 1;
            p->password_len = (size_t)(at - colon - 1);
        }
        p->hostport = at + 1;
        p->hostport_len = alen - (size_t)(at + 1 - rest);
    }
    after = rest + alen;
    if (*after == '/') {
        p->has_path = true;
        p->path = after + 1;
        p->path_len = strcspn(p->path, "?#");
        after = p->path + p->path_len;
        if (memchr(p->path, '@', p->path_len)) {
            text_err(err, errlen, "'@' after the host (percent-encode '/' in a password as %%2F)");
            return -1;
        }
    }
    if (*after == '?' && (allow & URL_QUERY)) {
        p->query = after;
        p->query_len = strcspn(after, "#");
        after += p->query_len;
    } else if (*after == '?') {
        text_err(err, errlen, "query strings ('?...') are not supported%s",
                 p->has_userinfo ? " (percent-encode '?' in a password as %3F)" : "");
        return -1;
    }
    if (*after == '#' && (allow & URL_FRAGMENT)) {
        p->fragment = after + 1;
        p->fragment_len = strlen(p->fragment);
    } else if (*after == '#') {
        text_err(err, errlen,
                 "fragments ('#...') are not supported (percent-encode '#' in a password as %%23)");
        return -1;
    }
    return 0;
}

/*
 * Percent-decode n bytes into a new heap string (text_pct_decode). "what"
 * names the part in the error message; the text itself is never echoed (it
 * may be a password).
 */
static char *pct_decode(const char *s, size_t n, const char *what, char *err, size_t errlen)
{
    char *out = malloc(n + 1);
    size_t len;

    if (out == NULL) {
        text_err(err, errlen, "out of memory");
        return NULL;
    }
    if (text_pct_decode(s, n, out, &len) < 0) {
        text_err(err, errlen, "bad percent-escape in the %s (%s)", what, TEXT_PCT_HINT);
        free(out);
        return NULL;
    }
    out[len] = '\0';
    return out;
}

static bool hostname_char(char c)
{
    return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_';
}

/*
 * Parse host[:port] or [v6addr][:port] (n bytes at s) into a heap host
 * (brackets removed) and a port. default_port < 0 makes the port required.
 * Only the host and port are echoed in errors, never anything else, and the
 * port only when show_port: in a URL without '@', "user:password" with the
 * host forgotten reads as host:port, so a bad port may be a password.
 */
static int hostport_split(const char *s, size_t n, int default_port, bool show_port, char **host,
                          int *port, char *err, size_t errlen)
{
    const char *h, *p = NULL, *end = s + n;
    size_t hlen, plen = 0;
    long long v;

    *host = NULL;
    *port = 0;
    if (n == 0) {
        text_err(err, errlen, "missing host");
        return -1;
    }
    if (s[0] == '[') {
        const char *close = memchr(s, ']', n);
        char addr[INET6_ADDRSTRLEN + 1];
        struct in6_addr a6;

        if (close == NULL) {
            text_err(err, errlen, "missing ']' after IPv6 address");
            return -1;
        }
        h = s + 1;
        hlen = (size_t)(close - h);
        if (hlen == 0 || hlen >= sizeof(addr)) {
            text_err(err, errlen, "bad IPv6 address '%.*s'", (int)(hlen < 64 ? hlen : 64), h);
            return -1;
        }
        memcpy(addr, h, hlen);
        addr[hlen] = '\0';
        if (inet_pton(AF_INET6, addr, &a6) != 1) {
            text_err(err, errlen, "bad IPv6 address '%s'", addr);
            return -1;
        }
        if (close + 1 < end) {
            if (close[1] != ':') {
                if (show_port)
                    text_err(err, errlen, "expected ':PORT' after ']', got '%.*s'",
                             (int)((size_t)(end - close - 1) < 32 ? (size_t)(end - close - 1) : 32),
                             close + 1);
                else /* as a bad port: with no '@' it may be part of a password */
                    text_err(err, errlen,
                             "expected ':PORT' after ']' (what follows is not shown: "
                             "with no '@' before the host it may be a password)");
                return -1;
            }
            p = close + 2;
            plen = (size_t)(end - p);
        }
    } else {
        const char *colon = memchr(s, ':', n);

        h = s;
        hlen = colon ? (size_t)(colon - s) : n;
        if (colon) {
            p = colon + 1;
            plen = (size_t)(end - p);
            if (memchr(p, ':', plen)) {
                text_err(err, errlen, "an IPv6 address must be in brackets, e.g. [::1]:PORT");
                return -1;
            }
        }
        if (hlen == 0) {
            text_err(err, errlen, "missing host (use 0.0.0.0 or [::] for every address)");
            return -1;
        }
        for (size_t i = 0; i < hlen; i++) {
            if (!hostname_char(h[i]) || hlen > HOSTNAME_MAX) {
                text_err(err, errlen, "bad host name '%.*s'", (int)(hlen < 64 ? hlen : 64), h);
                return -1;
            }
        }
    }
    if (p == NULL) {
        if (default_port < 0) {
            text_err(err, errlen, "missing port (expected HOST:PORT or [IPv6]:PORT)");
            return -1;
        }
        *port = default_port;
    } else if (plen == 0) {
        text_err(err, errlen, "missing port after ':'");
        return -1;
    } else if (text_int(p, plen, 1, 65535, &v) < 0) {
        if (show_port)
            text_err(err, errlen, "port must be an integer in 1..65535, got '%.*s'",
                     (int)(plen < 32 ? plen : 32), p);
        else
            text_err(err, errlen,
                     "port must be an integer in 1..65535 (not shown: with no '@' before the "
                     "host it may be a password)");
        return -1;
    } else {
        *port = (int)v;
    }
    *host = strndup(h, hlen);
    if (*host == NULL) {
        text_err(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

const char *hostport_str(char *buf, size_t len, const char *host, int port)
{
    snprintf(buf, len, host && strchr(host, ':') ? "[%s]:%d" : "%s:%d", host ? host : "", port);
    return buf;
}

const char *redis_url_where(char *buf, size_t len, const struct redis_url *u)
{
    const char *many = u->nhosts == 1 ? "" : "s";
    char hp[HOSTPORT_STR_MAX];
    size_t n;

    if (u->kind == REDIS_SENTINEL)
        n = (size_t)snprintf(buf, len, "master '%s' via sentinel%s ", u->master, many);
    else if (u->kind == REDIS_CLUSTER)
        n = (size_t)snprintf(buf, len, "cluster via seed%s ", many);
    else
        return hostport_str(buf, len, u->host, u->port);
    for (size_t i = 0; i < u->nhosts && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "",
                              hostport_str(hp, sizeof(hp), u->hosts[i].host, u->hosts[i].port));
    return buf;
}

/* The schemes of enum redis_kind, in its order. */
static const char *const redis_schemes[] = {"redis", "redis-sentinel", "redis-cluster", NULL};

const char *redis_kind_scheme(enum redis_kind kind)
{
    return (unsigned)kind < sizeof(redis_schemes) / sizeof(redis_schemes[0]) - 1
               ? redis_schemes[kind]
               : "redis";
}

int hostport_parse(const char *s, char **host, int *port, char *err, size_t errlen)
{
    const char *sep = strstr(s, "://");

    if (sep && sep - s <= 16) { /* --http http://127.0.0.1:9471 */
        *host = NULL;
        text_err(err, errlen, "expected host:port, not a URL (drop the '%.*s://')", (int)(sep - s),
                 s);
        return -1;
    }
    return hostport_split(s, strlen(s), -1, true, host, port, err, errlen);
}

/* http://host[:port][/path][?query]: where alerts are POSTed. No userinfo or TLS. */
int webhook_url_parse(const char *s, struct webhook_url *out, char *err, size_t errlen)
{
    static const char *const schemes[] = {"http", NULL};
    struct url_parts p;
    const char *rest;

    memset(out, 0, sizeof(*out));
    if (strncasecmp(s, "https://", 8) == 0) {
        text_err(err, errlen, "https:// is not supported, use http:// (e.g. to a local relay)");
        return -1;
    }
    rest = url_scheme(s, schemes, "http://host[:port][/path][?query]", err, errlen);
    if (rest == NULL || url_split(rest, URL_QUERY, &p, err, errlen) < 0)
        return -1;
    if (p.has_userinfo) {
        text_err(err, errlen, "user:password@ is not supported in the webhook URL");
        return -1;
    }
    /* has_userinfo is false here: a bad port is never shown (see hostport_split). */
    if (hostport_split(p.hostport, p.hostport_len, 80, p.has_userinfo, &out->host, &out->port, err,
                       errlen) < 0)
        return -1;
    /* The request target: "/" path, then the query as written. */
    out->path = malloc(p.path_len + p.query_len + 2);
    if (out->path == NULL) {
        webhook_url_free(out);
        text_err(err, errlen, "out of memory");
        return -1;
    }
    out->path[0] = '/';
    memcpy(out->path + 1, p.has_path ? p.path : "", p.has_path ? p.path_len : 0);
    memcpy(out->path + 1 + (p.has_path ? p.path_len : 0), p.query ? p.query : "", p.query_len);
    out->path[1 + (p.has_path ? p.path_len : 0) + p.query_len] = '\0';
    return 0;
}

void webhook_url_free(struct webhook_url *u)
{
    free(u->host);
    free(u->path);
    memset(u, 0, sizeof(*u));
}

/*
 * http[s]://[token@]host[:port][/prefix]. The token is never echoed. The
 * prefix is a path of the characters a URL path may hold unescaped.
 */
int issuer_url_parse(const char *s, struct issuer_url *out, char *err, size_t errlen)
{
    static const char *const schemes[] = {"http", "https", NULL};
    const char *expect = "http[s]://[token@]host[:port][/prefix]";
    struct url_parts p;
    const char *rest;
    size_t plen;

    memset(out, 0, sizeof(*out));
    rest = url_scheme(s, schemes, expect, err, errlen);
    if (rest == NULL || url_split(rest, 0, &p, err, errlen) < 0)
        return -1;
    out->tls = rest - s == 8; /* "https://" */
    if (p.has_userinfo) {
        const char *t = p.has_password ? p.password : p.user;
        size_t tl = p.has_password ? p.password_len : p.user_len;
        if ((p.has_password && p.user_len > 0) || tl == 0) {
            text_err(err, errlen, "the userinfo must be the token alone (%s)", expect);
            goto fail;
        }
        out->token = pct_decode(t, tl, "token", err, errlen);
        if (out->token == NULL)
            goto fail;
        /* It goes into "Authorization: Bearer <token>": an escaped CR LF would end that line. */
        for (const char *c = out->token; *c; c++) {
            if ((unsigned char)*c <= ' ' || *c == 0x7f) {
                text_err(err, errlen,
                         "the token may not contain a space or control character "
                         "(percent-escaped or not)");
                goto fail;
            }
        }
    }
    plen = p.has_path ? p.path_len : 0;
    while (plen && p.path[plen - 1] == '/')
        plen--;
    for (size_t i = 0; i < plen; i++) {
        char c = p.path[i];
        if (!isalnum((unsigned char)c) && !strchr("/-._~!$&'()*+,;=:", c)) {
            if ((unsigned char)c > ' ' && (unsigned char)c < 0x7f)
                text_err(err, errlen,
                         "the path prefix may not contain '%c' (only letters, digits and "
                         "/-._~!$&'()*+,;=:)",
                         c);
            else
                text_err(err, errlen,
                         "the path prefix may not contain byte 0x%02x (only letters, digits and "
                         "/-._~!$&'()*+,;=:)",
                         (unsigned char)c);
            goto fail;
        }
    }
    out->prefix = malloc(plen + 2);
    if (out->prefix == NULL) {
        text_err(err, errlen, "out of memory");
        goto fail;
    }
    out->prefix[0] = '\0';
    if (plen) {
        out->prefix[0] = '/';
        memcpy(out->prefix + 1, p.path, plen);
        out->prefix[plen + 1] = '\0';
    }
    if (hostport_split(p.hostport, p.hostport_len, out->tls ? 443 : 80, p.has_userinfo, &out->host,
                       &out->port, err, errlen) < 0)
        goto fail;
    return 0;
fail:
    issuer_url_free(out);
    return -1;
}

void issuer_url_free(struct issuer_url *u)
{
    free(u->host);
    free(u->token);
    free(u->prefix);
    memset(u, 0, sizeof(*u));
}

void redis_url_free(struct redis_url *u)
{
    free(u->host);
    free(u->user);
    free(u->password);
    for (size_t i = 0; i < u->nhosts; i++)
        free(u->hosts[i].host);
    free(u->hosts);
    free(u->master);
    free(u->sentinel_user);
    free(u->sentinel_password);
    memset(u, 0, sizeof(*u));
}

/* A Sentinel master's name: 1..64 of A-Z a-z 0-9 _ . - */
static bool master_name_valid(const char *s, size_t n)
{
    if (n == 0 || n > SENTINEL_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
            return false;
    return true;
}

/* Set *name to the master's name n bytes at s, given as `how`; a second, different one is an error.
 */
static int master_set(struct redis_url *out, const char *s, size_t n, const char *how, char *err,
                      size_t errlen)
{
    if (!master_name_valid(s, n)) {
        text_err(err, errlen,
                 "the master's name (%s) must be 1..%d characters of A-Z a-z 0-9 _ . -, got "
                 "'%.*s'",
                 how, SENTINEL_NAME_MAX, (int)(n < 80 ? n : 80), s);
        return -1;
    }
    if (out->master) {
        if (strlen(out->master) == n && memcmp(out->master, s, n) == 0)
            return 0;
        text_err(err, errlen, "the master's name is given twice, differently: '%s' and '%.*s' (%s)",
                 out->master, (int)n, s, how);
        return -1;
    }
    out->master = strndup(s, n);
    if (out->master == NULL) {
        text_err(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/*
 * The query of a redis-sentinel:// URL (q points at '?'): master=NAME,
 * sentinelMasterId=NAME, sentinel_user=U, sentinel_password=PW, each once.
 * A password is never echoed.
 */
static int sentinel_query(struct redis_url *out, const char *q, size_t qlen, char *err,
                          size_t errlen)
{
    const char *end = q + qlen, *c = q + 1;

    while (c < end) {
        const char *amp = memchr(c, '&', (size_t)(end - c)), *eq;
        size_t len = amp ? (size_t)(amp - c) : (size_t)(end - c), klen;
        char **dst = NULL;
        const char *what = NULL;

        eq = memchr(c, '=', len);
        klen = eq ? (size_t)(eq - c) : len;
        if (len == 0) {
            c += 1;
            continue;
        }
        if (!eq) {
            text_err(err, errlen, "parameter '%.*s' has no '=VALUE'", (int)(klen < 40 ? klen : 40),
                     c);
            return -1;
        }
        if (klen == 6 && memcmp(c, "master", 6) == 0) {
            if (master_set(out, eq + 1, len - klen - 1, "master=", err, errlen) < 0)
                return -1;
        } else if (klen == 16 && memcmp(c, "sentinelMasterId", 16) == 0) {
            if (master_set(out, eq + 1, len - klen - 1, "sentinelMasterId=", err, errlen) < 0)
                return -1;
        } else if (klen == 13 && memcmp(c, "sentinel_user", 13) == 0) {
            dst = &out->sentinel_user;
            what = "sentinel_user";
        } else if (klen == 17 && memcmp(c, "sentinel_password", 17) == 0) {
            dst = &out->sentinel_password;
            what = "sentinel_password";
        } else {
            text_err(err, errlen,
                     "unknown parameter '%.*s' (expected master, sentinelMasterId, "
                     "sentinel_user, sentinel_password)",
                     (int)(klen < 40 ? klen : 40), c);
            return -1;
        }
        if (dst) {
            if (*dst) {
                text_err(err, errlen, "parameter %s given twice", what);
                return -1;
            }
            if (len - klen - 1 > 0 &&
                (*dst = pct_decode(eq + 1, len - klen - 1, what, err, errlen)) == NULL)
                return -1;
        }
        c += len + (amp ? 1 : 0);
    }
    return 0;
}

/*
 * The comma-separated hosts of a redis-sentinel:// or redis-cluster:// URL's
 * authority, each with defport when it has none; `what` names one in errors
 * ("sentinel").
 */
static int url_hosts(struct redis_url *out, const struct url_parts *p, int defport,
                     const char *what, char *err, size_t errlen)
{
    const char *c = p->hostport, *end = p->hostport + p->hostport_len;

    for (;;) {
        const char *comma = memchr(c, ',', (size_t)(end - c));
        size_t n = comma ? (size_t)(comma - c) : (size_t)(end - c);
        struct redis_hostport *h;

        if (out->nhosts == REDIS_HOSTS_MAX) {
            text_err(err, errlen, "more than %d %ss", REDIS_HOSTS_MAX, what);
            return -1;
        }
        if (!out->hosts && !(out->hosts = calloc(REDIS_HOSTS_MAX, sizeof(*out->hosts)))) {
            text_err(err, errlen, "out of memory");
            return -1;
        }
        h = &out->hosts[out->nhosts];
        if (hostport_split(c, n, defport, p->has_userinfo, &h->host, &h->port, err, errlen) < 0)
            return -1;
        out->nhosts++;
        for (size_t i = 0; i + 1 < out->nhosts; i++) {
            if (out->hosts[i].port == h->port && strcasecmp(out->hosts[i].host, h->host) == 0) {
                char hp[HOSTPORT_STR_MAX];
                text_err(err, errlen, "%s %s is listed twice", what,
                         hostport_str(hp, sizeof(hp), h->host, h->port));
                return -1;
            }
        }
        if (!comma)
            return 0;
        c = comma + 1;
    }
}

/*
 * redis://[[user]:password@]host[:port][/db]. ":pw@" is a password alone
 * (classic AUTH), "user:pw@" an ACL user; "user@" leaves the password to the
 * redis-password setting. An empty password counts as none. Or
 * redis-sentinel://, the same with a list of sentinels for the host and the
 * master's name, or redis-cluster://, with a list of seed nodes and no
 * database but 0 (url.h).
 */
int redis_url_parse(const char *s, struct redis_url *out, char *err, size_t errlen)
{
    static const char *const expect =
        "redis://[[user]:password@]host[:port][/db] or "
        "redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master or "
        "redis-cluster://[[user]:password@]host[:port][,host[:port]...]";
    struct url_parts p;
    const char *rest;
    long long db;

    memset(out, 0, sizeof(*out));
    if (strncasecmp(s, "rediss://", 9) == 0) {
        text_err(err, errlen, "rediss:// (TLS) is not supported, use redis://");
        return -1;
    }
    rest = url_scheme(s, redis_schemes, expect, err, errlen);
    if (rest == NULL)
        return -1;
    for (size_t i = 0; redis_schemes[i]; i++)
        if (rest - s == (ptrdiff_t)strlen(redis_schemes[i]) + 3 &&
            strncasecmp(s, redis_schemes[i], strlen(redis_schemes[i])) == 0)
            out->kind = (enum redis_kind)i;
    if (url_split(rest, out->kind == REDIS_SENTINEL ? URL_QUERY | URL_FRAGMENT : 0, &p, err,
                  errlen) < 0)
        goto fail; /* out is left empty on every error, kind included */
    if (p.has_userinfo && p.user_len > 0) {
        out->user = pct_decode(p.user, p.user_len, "user", err, errlen);
        if (out->user == NULL)
            goto fail;
    }
    if (p.has_password && p.password_len > 0) {
        out->password = pct_decode(p.password, p.password_len, "password", err, errlen);
        if (out->password == NULL)
            goto fail;
    }
    if (p.has_path && p.path_len > 0) {
        long long max = out->kind == REDIS_CLUSTER ? 0 : REDIS_DB_MAX;

        if (text_int(p.path, p.path_len, 0, max, &db) < 0) {
            if (out->kind == REDIS_CLUSTER)
                text_err(err, errlen, "Redis Cluster has database 0 only, got '/%.*s'",
                         (int)(p.path_len < 32 ? p.path_len : 32), p.path);
            else
                text_err(err, errlen, "database must be an integer in 0..%d, got '%.*s'",
                         REDIS_DB_MAX, (int)(p.path_len < 32 ? p.path_len : 32), p.path);
            goto fail;
        }
        out->db = (int)db;
    }
    if (out->kind == REDIS_STANDALONE) {
        if (hostport_split(p.hostport, p.hostport_len, REDIS_DEFAULT_PORT, p.has_userinfo,
                           &out->host, &out->port, err, errlen) < 0)
            goto fail;
        return 0;
    }
    if (out->kind == REDIS_CLUSTER &&
        url_hosts(out, &p, REDIS_DEFAULT_PORT, "seed node", err, errlen) < 0)
        goto fail;
    if (out->kind == REDIS_SENTINEL) {
        if (url_hosts(out, &p, SENTINEL_DEFAULT_PORT, "sentinel", err, errlen) < 0)
            goto fail;
        if (p.fragment && master_set(out, p.fragment, p.fragment_len, "#", err, errlen) < 0)
            goto fail;
        if (p.query && sentinel_query(out, p.query, p.query_len, err, errlen) < 0)
            goto fail;
        if (!out->master) {
            text_err(err, errlen,
                     "a redis-sentinel:// URL needs the master's name (#NAME or ?master=NAME)");
            goto fail;
        }
    }
    out->host = strdup(out->hosts[0].host);
    out->port = out->hosts[0].port;
    if (out->host == NULL) {
        text_err(err, errlen, "out of memory");
        goto fail;
    }
    return 0;

fail:
    redis_url_free(out);
    return -1;
}

void mysql_url_free(struct mysql_url *u)
{
    free(u->host);
    free(u->user);
    free(u->password);
    free(u->db);
    memset(u, 0, sizeof(*u));
}

static bool mysql_db_valid(const char *s, size_t n)
{
    if (n == 0 || n > MYSQL_DB_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '$')
            return false;
    return true;
}

/*
 * mysql://[user[:password]@]host[:port][/db], also mariadb://. The user
 * defaults to "root", the database to "idpool"; an empty password counts as
 * none.
 */
int mysql_url_parse(const char *s, struct mysql_url *out, char *err, size_t errlen)
{
    static const char *const schemes[] = {"mysql", "mariadb", NULL};
    struct url_parts p;
    const char *rest;

    memset(out, 0, sizeof(*out));
    rest = url_scheme(s, schemes, "mysql://[user[:password]@]host[:port][/db]", err, errlen);
    if (rest == NULL || url_split(rest, 0, &p, err, errlen) < 0)
        return -1;
    if (p.has_userinfo && p.user_len > 0) {
        out->user = pct_decode(p.user, p.user_len, "user", err, errlen);
        if (out->user == NULL)
            goto fail;
    } else if ((out->user = strdup("root")) == NULL) {
        text_err(err, errlen, "out of memory");
        goto fail;
    }
    if (p.has_password && p.password_len > 0) {
        out->password = pct_decode(p.password, p.password_len, "password", err, errlen);
        if (out->password == NULL)
            goto fail;
    }
    if (p.has_path && p.path_len > 0) {
        if (!mysql_db_valid(p.path, p.path_len)) {
            text_err(err, errlen,
                     "database name must be 1..%d characters of A-Z a-z 0-9 _ $, got '%.*s'",
                     MYSQL_DB_MAX, (int)(p.path_len < 80 ? p.path_len : 80), p.path);
            goto fail;
        }
        out->db = strndup(p.path, p.path_len);
    } else {
        out->db = strdup("idpool");
    }
    if (out->db == NULL) {
        text_err(err, errlen, "out of memory");
        goto fail;
    }
    if (hostport_split(p.hostport, p.hostport_len, MYSQL_DEFAULT_PORT, p.has_userinfo, &out->host,
                       &out->port, err, errlen) < 0)
        goto fail;
    return 0;

fail:
    mysql_url_free(out);
    return -1;
}
