#include "httpresp.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define BODY_MAX (1u << 20) /* 1 MiB: 1,000 IDs of 20 digits are 21 KB */

/* The value bytes [v, v+n) as an unsigned decimal <= max: 0, or -1. */
static int decimal(const char *v, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t x = 0;

    if (n == 0 || n > 20)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(v[i] - '0');
        if (d > 9 || x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    if (x > max)
        return -1;
    *out = x;
    return 0;
}

/* Does the comma-separated list [v, v+n) hold `token` (case-insensitive)? */
static int has_token(const char *v, size_t n, const char *token)
{
    size_t tl = strlen(token);

    while (n) {
        size_t k = 0, a, b;
        while (k < n && v[k] != ',')
            k++;
        for (a = 0; a < k && (v[a] == ' ' || v[a] == '\t'); a++)
            ;
        for (b = k; b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'); b--)
            ;
        if (b - a == tl && strncasecmp(v + a, token, tl) == 0)
            return 1;
        v += k < n ? k + 1 : k;
        n -= k < n ? k + 1 : k;
    }
    return 0;
}

/* One header line [p, p+n) (without its line end) applied to r. */
static enum httpresp_status header(const char *p, size_t n, struct httpresp *r, int *conn_close,
                                   int *conn_keep, const char **err)
{
    const char *colon = memchr(p, ':', n), *v;
    size_t name_len, vn;
    uint64_t x;

    if (n && (p[0] == ' ' || p[0] == '\t')) {
        *err = "a folded header line (obs-fold)";
        return HTTPRESP_BAD;
    }
    if (colon == NULL || colon == p) {
        *err = "a header line without 'name:'";
        return HTTPRESP_BAD;
    }
    name_len = (size_t)(colon - p);
    for (size_t i = 0; i < name_len; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch <= ' ' || ch >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", ch)) {
            *err = "a bad header name";
            return HTTPRESP_BAD;
        }
    }
    v = colon + 1;
    vn = n - name_len - 1;
    while (vn && (*v == ' ' || *v == '\t'))
        v++, vn--;
    while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
        vn--;
#define IS(name) (name_len == sizeof(name) - 1 && strncasecmp(p, name, name_len) == 0)
    if (IS("Content-Length")) {
        if (decimal(v, vn, BODY_MAX, &x) < 0) {
            *err = "a bad or too large Content-Length";
            return HTTPRESP_BAD;
        }
        if (r->has_length && r->content_length != x) {
            *err = "conflicting Content-Length fields";
            return HTTPRESP_BAD;
        }
        r->content_length = x;
        r->has_length = 1;
    } else if (IS("Transfer-Encoding")) {
        *err = "a Transfer-Encoding (only bodies with a Content-Length are read)";
        return HTTPRESP_BAD;
    } else if (IS("Retry-After")) {
        r->retry_after_s = decimal(v, vn, 86400, &x) == 0 ? (int)x : -1;
    } else if (IS("Connection")) {
        *conn_close |= has_token(v, vn, "close");
        *conn_keep |= has_token(v, vn, "keep-alive");
    }
#undef IS
    return HTTPRESP_DONE;
}

enum httpresp_status httpresp_parse(const char *buf, size_t len, struct httpresp *r,
                                    const char **err)
{
    const char *p = buf, *end, *nl;
    int conn_close = 0, conn_keep = 0;
    enum httpresp_status st;
    uint64_t code;

    memset(r, 0, sizeof(*r));
    r->retry_after_s = -1;
    *err = NULL;
    if (len > HTTPRESP_HEAD_MAX)
        len = HTTPRESP_HEAD_MAX;
    end = buf + len;
    /* The status line, once complete. */
    nl = memchr(p, '\n', len);
    if (nl == NULL)
        goto more;
    {
        size_t n = (size_t)(nl - p) - (nl > p && nl[-1] == '\r');
        if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ' ||
            (n > 12 && p[12] != ' ') || decimal(p + 9, 3, 599, &code) < 0 || code < 100) {
            *err = "not an HTTP/1.x status line";
            return HTTPRESP_BAD;
        }
        r->minor = p[7] - '0';
        r->status = (int)code;
    }
    for (p = nl + 1; p < end; p = nl + 1) {
        size_t n;
        nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            goto more;
        n = (size_t)(nl - p) - (nl > p && nl[-1] == '\r');
        if (n == 0) { /* the empty line: the head is complete */
            r->head_len = (size_t)(nl + 1 - buf);
            r->keep_alive = r->minor == 1 ? !conn_close : conn_keep && !conn_close;
            return HTTPRESP_DONE;
        }
        st = header(p, n, r, &conn_close, &conn_keep, err);
        if (st != HTTPRESP_DONE)
            return st;
    }
more:
    if (len >= HTTPRESP_HEAD_MAX) {
        *err = "a response head over 8 KiB";
        return HTTPRESP_BAD;
    }
    return HTTPRESP_MORE;
}

long httpresp_ids(const char *body, size_t len, uint64_t *ids, size_t cap)
{
    const char *p = body, *end = body + len;
    size_t k = 0;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n;
        if (nl == NULL)
            return -1; /* every line ends with LF */
        n = (size_t)(nl - p) - (nl > p && nl[-1] == '\r');
        if (k == cap || decimal(p, n, UINT64_MAX, &ids[k]) < 0)
            return -1;
        k++;
        p = nl + 1;
    }
    return (long)k;
}

int httpresp_error(const char *body, size_t len, char *code, size_t code_len, char *msg,
                   size_t msg_len)
{
    cJSON *o = cJSON_ParseWithLength(body, len);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "message");
    int rc = -1;

    if (code_len)
        code[0] = '\0';
    if (msg_len)
        msg[0] = '\0';
    if (cJSON_IsObject(o) && cJSON_IsString(e) && cJSON_IsString(m)) {
        snprintf(code, code_len, "%s", e->valuestring);
        snprintf(msg, msg_len, "%s", m->valuestring);
        rc = 0;
    }
    cJSON_Delete(o);
    return rc;
}
