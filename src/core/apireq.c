#include "apireq.h"

#include <string.h>
#include <strings.h>

#include "app.h"
#include "text.h"

#define COUNT_DIGITS_MAX 10

enum httpreq_path_status apireq_path(const char *path, char *key, size_t *keylen)
{
    size_t n = strlen(path);
    char buf[APIREQ_PATH_MAX + 1];
    struct httpreq_path p;
    enum httpreq_path_status st;

    if (n > APIREQ_PATH_MAX)
        return HTTPREQ_PATH_NONE;
    st = httpreq_path_split(path, n, buf, &p);
    if (st != HTTPREQ_PATH_OK)
        return st;
    if (p.n != 3 || strcmp(p.seg[0], "v1") != 0 || strcmp(p.seg[1], "ids") != 0 ||
        p.len[2] > APP_KEY_MAX || !app_key_valid(p.seg[2]))
        return HTTPREQ_PATH_NONE;
    memcpy(key, p.seg[2], p.len[2] + 1);
    *keylen = p.len[2];
    return HTTPREQ_PATH_OK;
}

/* Up to 32 bytes of s, non-printable bytes as '?', for a message. */
static void quote(const char *s, size_t n, char *out, size_t outlen)
{
    size_t i, m = n < 32 ? n : 32;

    if (m >= outlen)
        m = outlen - 1;
    for (i = 0; i < m; i++)
        out[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    out[i] = '\0';
}

/*
 * Percent-decode one part of a parameter (n bytes at s) into out (size
 * bytes, NUL-terminated): 0; 1 when it is longer than size - 1 raw bytes
 * (too long to be anything the caller looks for; not decoded); -1 at a bad
 * escape (err says so, quoting the parameter).
 */
static int param_part(const char *s, size_t n, char *out, size_t size, const char *param,
                      size_t plen, char *err, size_t errlen)
{
    char q[40];
    size_t len;

    if (n >= size)
        return 1;
    if (text_pct_decode(s, n, out, &len) < 0) {
        quote(param, plen, q, sizeof(q));
        text_err(err, errlen, "bad percent-escape in '%s' (%s)", q, TEXT_PCT_HINT);
        return -1;
    }
    out[len] = '\0';
    return memchr(out, '\0', len) ? 1 : 0;
}

int apireq_count(const char *query, size_t len, uint64_t *count, char *err, size_t errlen)
{
    size_t i = 0;
    int seen = 0;
    char q[40];

    *count = 1;
    while (query && i < len) {
        size_t end = i, eq, vlen;
        /* "count" is at most 15 bytes percent-encoded, 10 digits at most 30 */
        char name[16], value[COUNT_DIGITS_MAX * 3 + 1];
        long long v;
        int rc;

        while (end < len && query[end] != '&')
            end++;
        for (eq = i; eq < end && query[eq] != '='; eq++)
            ;
        if (end == i) { /* "a&&b", a trailing '&' */
            i = end + 1;
            continue;
        }
        rc = param_part(query + i, eq - i, name, sizeof(name), query + i, end - i, err, errlen);
        if (rc < 0)
            return -1;
        if (rc > 0 || strcmp(name, "count") != 0) {
            quote(query + i, eq - i, q, sizeof(q));
            text_err(err, errlen, "unknown parameter '%s' (the only one is count)", q);
            return -1;
        }
        if (seen++) {
            text_err(err, errlen, "count given twice");
            return -1;
        }
        vlen = eq < end ? end - eq - 1 : 0;
        rc = eq == end ? 1
                       : param_part(query + eq + 1, vlen, value, sizeof(value), query + i, end - i,
                                    err, errlen);
        if (rc < 0)
            return -1;
        if (rc > 0 || strlen(value) > COUNT_DIGITS_MAX ||
            text_int(value, strlen(value), 1, 9999999999LL, &v) < 0) {
            quote(eq < end ? query + eq + 1 : "", vlen, q, sizeof(q));
            text_err(err, errlen, "count must be an integer >= 1, got '%s'", q);
            return -1;
        }
        *count = (uint64_t)v;
        i = end + 1;
    }
    return 0;
}

/* p past optional white space (OWS). */
static const char *ows(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static size_t token_len(const char *p)
{
    size_t n = 0;

    while (httpreq_tchar((unsigned char)p[n]))
        n++;
    return n;
}

/* The length of the quoted-string at p (p[0] == '"'), or 0 when it is not one. */
static size_t quoted_len(const char *p)
{
    size_t n = 1;

    for (;;) {
        unsigned char c = (unsigned char)p[n];

        if (c == '"')
            return n + 1;
        if (c == '\\') {
            c = (unsigned char)p[n + 1];
            if (c != '\t' && (c < 0x20 || c == 0x7f))
                return 0;
            n += 2;
        } else if (c != '\t' && (c < 0x20 || c == 0x7f)) {
            return 0; /* the end, or a control character */
        } else {
            n++;
        }
    }
}

/* A qvalue (RFC 9110 12.4.2) of n bytes at p in thousandths, or -1. */
static int qvalue(const char *p, size_t n)
{
    int q = 0;

    if (n == 0 || (p[0] != '0' && p[0] != '1') || n > 5 || (n > 1 && p[1] != '.'))
        return -1;
    for (size_t i = 2; i < 5; i++) {
        int d = i < n ? p[i] - '0' : 0;
        if (d < 0 || d > 9)
            return -1;
        q = q * 10 + d;
    }
    if (p[0] == '1')
        return q == 0 ? 1000 : -1;
    return q;
}

/*
 * One element of an Accept list at *pp (after its OWS): its media range
 * (type, subtype) and weight; *pp is then past it (at ',' or the end).
 * 0, or -1 when it does not parse (*pp at its end all the same).
 */
static int accept_element(const char **pp, const char **type, size_t *tl, const char **sub,
                          size_t *sl, int *q)
{
    const char *p = *pp;

    *type = p;
    *tl = token_len(p);
    p += *tl;
    if (*tl == 0 || *p != '/')
        goto bad;
    *sub = ++p;
    *sl = token_len(p);
    p += *sl;
    if (*sl == 0 || (**type == '*' && *tl == 1 && !(**sub == '*' && *sl == 1)))
        goto bad; /* a wildcard type needs a wildcard subtype */
    *q = 1000;
    for (;;) {
        const char *name;
        size_t nl, vl;

        p = ows(p);
        if (*p != ';')
            break;
        p = ows(p + 1);
        if (*p == ';' || *p == ',' || *p == '\0')
            continue; /* an empty parameter */
        name = p;
        nl = token_len(p);
        p += nl;
        if (nl == 0 || *p != '=')
            goto bad;
        p++;
        vl = *p == '"' ? quoted_len(p) : token_len(p);
        if (vl == 0)
            goto bad;
        if (nl == 1 && (*name == 'q' || *name == 'Q') && (*q = qvalue(p, vl)) < 0)
            goto bad;
        p += vl;
    }
    if (*p == ',' || *p == '\0') {
        *pp = p;
        return 0;
    }
bad:
    /* to the next ',' outside a quoted string */
    while (*p && *p != ',') {
        size_t n = *p == '"' ? quoted_len(p) : 0;
        p += n ? n : 1;
    }
    *pp = p;
    return -1;
}

enum apireq_fmt apireq_accept(const char *accept)
{
    static const struct {
        const char *type, *sub;
    } served[2] = {[APIREQ_JSON] = {"application", "json"}, [APIREQ_TEXT] = {"text", "plain"}};
    int spec[2] = {0, 0}, q[2] = {0, 0}, pos[2] = {0, 0}, any = 0, i = 0;
    const char *p = accept;

    while (p && *p) {
        const char *type, *sub;
        size_t tl, sl;
        int w;

        p = ows(p);
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == '\0')
            break;
        i++;
        if (accept_element(&p, &type, &tl, &sub, &sl, &w) < 0)
            continue;
        any = 1;
        for (int f = 0; f < 2; f++) {
            int s = 0;

            if (tl == 1 && *type == '*')
                s = 1;
            else if (tl == strlen(served[f].type) && strncasecmp(type, served[f].type, tl) == 0)
                s = sl == 1 && *sub == '*'                                                    ? 2
                    : sl == strlen(served[f].sub) && strncasecmp(sub, served[f].sub, sl) == 0 ? 3
                                                                                              : 0;
            if (s > spec[f]) {
                spec[f] = s;
                q[f] = w;
                pos[f] = i;
            }
        }
    }
    if (!any)
        return APIREQ_JSON;
    if (q[APIREQ_JSON] == 0 && q[APIREQ_TEXT] == 0)
        return APIREQ_NONE;
    if (q[APIREQ_TEXT] > q[APIREQ_JSON] ||
        (q[APIREQ_TEXT] == q[APIREQ_JSON] && pos[APIREQ_TEXT] < pos[APIREQ_JSON]))
        return APIREQ_TEXT;
    return APIREQ_JSON;
}

int apireq_bearer(const char *authz, const char **tok, size_t *len)
{
    static const char token68[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/";
    const char *p;
    size_t n;

    if (authz == NULL || strncasecmp(authz, "Bearer", 6) != 0 ||
        (authz[6] != ' ' && authz[6] != '\t'))
        return -1;
    p = authz + 6 + strspn(authz + 6, " \t");
    n = strspn(p, token68);
    n += n ? strspn(p + n, "=") : 0; /* token68 may end in '=' padding */
    if (n == 0 || p[n + strspn(p + n, " \t")] != '\0')
        return -1;
    *tok = p;
    *len = n;
    return 0;
}

size_t apireq_u64(uint64_t v, char *buf)
{
    char tmp[20];
    size_t n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

size_t apireq_body_max(size_t keylen, size_t n)
{
    /* {"app":"","ids":[]}\n is 20 bytes; each ID at most 20 digits + "", */
    return 24 + keylen + n * 23;
}

size_t apireq_body(char *buf, enum apireq_fmt fmt, const char *key, size_t keylen,
                   const uint64_t *ids, size_t n)
{
    char *p = buf;

    if (fmt == APIREQ_TEXT) {
        for (size_t i = 0; i < n; i++) {
            p += apireq_u64(ids[i], p);
            *p++ = '\n';
        }
        return (size_t)(p - buf);
    }
    memcpy(p, "{\"app\":\"", 8);
    p += 8;
    memcpy(p, key, keylen);
    p += keylen;
    memcpy(p, "\",\"ids\":[", 9);
    p += 9;
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        *p++ = '"';
        p += apireq_u64(ids[i], p);
        *p++ = '"';
    }
    memcpy(p, "]}\n", 3);
    p += 3;
    return (size_t)(p - buf);
}
