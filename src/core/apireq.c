#include "apireq.h"

#include <string.h>
#include <strings.h>

#include "app.h"
#include "text.h"

#define COUNT_DIGITS_MAX 10

int apireq_path(const char *path, const char **key, size_t *keylen)
{
    const size_t plen = sizeof(APIREQ_PATH) - 1;
    char buf[APP_KEY_MAX + 1];
    size_t n;

    if (strncmp(path, APIREQ_PATH, plen) != 0)
        return -1;
    n = strlen(path + plen);
    if (n == 0 || n > APP_KEY_MAX)
        return -1;
    memcpy(buf, path + plen, n);
    buf[n] = '\0';
    if (!app_key_valid(buf))
        return -1;
    *key = path + plen;
    *keylen = n;
    return 0;
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

int apireq_count(const char *query, size_t len, uint64_t *count, char *err, size_t errlen)
{
    size_t i = 0;
    int seen = 0;
    char q[40];

    *count = 1;
    while (query && i < len) {
        size_t end = i, eq;
        long long v;

        while (end < len && query[end] != '&')
            end++;
        for (eq = i; eq < end && query[eq] != '='; eq++)
            ;
        if (end == i) { /* "a&&b", a trailing '&' */
            i = end + 1;
            continue;
        }
        if (eq - i != 5 || memcmp(query + i, "count", 5) != 0) {
            quote(query + i, eq - i, q, sizeof(q));
            text_err(err, errlen, "unknown parameter '%s' (the only one is count)", q);
            return -1;
        }
        if (seen++) {
            text_err(err, errlen, "count given twice");
            return -1;
        }
        quote(eq < end ? query + eq + 1 : "", eq < end ? end - eq - 1 : 0, q, sizeof(q));
        if (eq == end || end - eq - 1 > COUNT_DIGITS_MAX ||
            memchr(query + eq + 1, '\0', end - eq - 1) ||
            text_int(query + eq + 1, end - eq - 1, 1, 9999999999LL, &v) < 0) {
            text_err(err, errlen, "count must be an integer >= 1, got '%s'", q);
            return -1;
        }
        *count = (uint64_t)v;
        i = end + 1;
    }
    return 0;
}

enum apireq_fmt apireq_accept(const char *accept)
{
    const char *p = accept;

    while (p && *p) {
        size_t n;

        p += strspn(p, " \t,");
        n = strcspn(p, ",;");
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n == 10 && strncasecmp(p, "text/plain", 10) == 0)
            return APIREQ_TEXT;
        if (n == 16 && strncasecmp(p, "application/json", 16) == 0)
            return APIREQ_JSON;
        p = strchr(p, ',');
    }
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
