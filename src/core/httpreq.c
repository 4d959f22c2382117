#include "httpreq.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

#include "text.h"

int httpreq_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* A field value character: VCHAR, SP, HTAB, obs-text. */
static int is_vchar(unsigned char c)
{
    return c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f);
}

/* 1 when the comma-separated list `v` holds `token` (case-insensitive). */
static int list_has(const char *v, const char *token)
{
    size_t n = strlen(token);

    while (*v) {
        size_t len;

        v += strspn(v, " \t,");
        len = strcspn(v, ",");
        while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
            len--;
        if (len == n && strncasecmp(v, token, n) == 0)
            return 1;
        v += strcspn(v, ",");
    }
    return 0;
}

/* ":PORT" ends a Host value: 1 to 5 digits. */
static int port_ok(const char *p)
{
    size_t d = strspn(p, "0123456789");

    return d >= 1 && d <= 5 && p[d] == '\0';
}

int httpreq_host_allowed(const char *host, const char *allowed)
{
    unsigned char addr[sizeof(struct in6_addr)];
    char name[256];
    const char *end;
    size_t n;

    if (host == NULL)
        return 1;
    if (host[0] == '[') { /* [IPv6]:port */
        end = strchr(host, ']');
        if (end == NULL || (end[1] != '\0' && (end[1] != ':' || !port_ok(end + 2))))
            return 0;
        n = (size_t)(end - host - 1);
        if (n >= sizeof(name))
            return 0;
        memcpy(name, host + 1, n);
        name[n] = '\0';
        return inet_pton(AF_INET6, name, addr) == 1;
    }
    end = strchr(host, ':');
    n = end ? (size_t)(end - host) : strlen(host);
    if ((end && !port_ok(end + 1)) || n == 0 || n >= sizeof(name))
        return 0;
    memcpy(name, host, n);
    name[n] = '\0';
    if (n > 1 && name[n - 1] == '.') /* the absolute form of a name */
        name[--n] = '\0';
    if (inet_pton(AF_INET, name, addr) == 1 || strcasecmp(name, "localhost") == 0)
        return 1;
    return allowed != NULL && (list_has(allowed, name) || list_has(allowed, "*"));
}

static enum httpreq_status bad(int *code, const char **err, int c, const char *msg)
{
    *code = c;
    *err = msg;
    return HTTPREQ_BAD;
}

/* The request line, NUL-terminated at `line`. */
static enum httpreq_status request_line(char *line, struct httpreq *r, int *code, const char **err)
{
    char *p = line, *sp;

    r->method = p;
    while (httpreq_tchar((unsigned char)*p))
        p++;
    if (p == line || *p != ' ')
        return bad(code, err, 400,
                   "malformed request line (expected METHOD SP target SP HTTP/1.1)");
    *p++ = '\0';
    r->target = p;
    while ((unsigned char)*p > 0x20 && *p != 0x7f)
        p++;
    if (p == r->target || *p != ' ')
        return bad(code, err, 400,
                   "malformed request line (expected METHOD SP target SP HTTP/1.1)");
    *p++ = '\0';
    sp = p;
    if (strncmp(sp, "HTTP/", 5) != 0 || !(sp[5] >= '0' && sp[5] <= '9') || sp[6] != '.' ||
        !(sp[7] >= '0' && sp[7] <= '9') || sp[8] != '\0')
        return bad(code, err, 400,
                   "malformed request line (expected METHOD SP target SP HTTP/1.1)");
    if (sp[5] != '1' || sp[7] > '1') /* HTTP/1.2 too: minor is 0 or 1 */
        return bad(code, err, 505, "only HTTP/1.0 and HTTP/1.1 are served");
    r->minor = sp[7] - '0';
    return HTTPREQ_DONE;
}

enum httpreq_status httpreq_parse(char *buf, size_t len, size_t max_head, struct httpreq *r,
                                  int *code, const char **err)
{
    size_t lim = len < max_head ? len : max_head, start = 0, end = 0, i;
    int have_cl = 0, close = 0, keep = 0, first = 1;
    char *line;

    memset(r, 0, sizeof(*r));
    /* A client may send empty lines before a request (RFC 9112 2.2). */
    while (start < lim && (buf[start] == '\r' || buf[start] == '\n'))
        start++;
    for (i = start; i < lim; i++) {
        if (buf[i] == '\n' && i + 1 < lim &&
            (buf[i + 1] == '\n' || (buf[i + 1] == '\r' && i + 2 < lim && buf[i + 2] == '\n'))) {
            end = i + (buf[i + 1] == '\n' ? 2 : 3);
            break;
        }
    }
    if (end == 0)
        return len >= max_head ? bad(code, err, 431, "request head too large") : HTTPREQ_MORE;
    if (memchr(buf, '\0', end))
        return bad(code, err, 400, "NUL byte in the request head");
    r->head_len = end;
    for (line = buf + start; line < buf + end;) {
        char *nl = memchr(line, '\n', (size_t)(buf + end - line)), *eol = nl, *colon, *v, *ve;

        if (eol > line && eol[-1] == '\r')
            eol--;
        *eol = '\0';
        *nl = '\0';
        if (memchr(line, '\r', (size_t)(eol - line)))
            return bad(code, err, 400, "bare CR in the request head");
        if (first) {
            enum httpreq_status st = request_line(line, r, code, err);
            if (st != HTTPREQ_DONE)
                return st;
            first = 0;
            line = nl + 1;
            continue;
        }
        if (eol == line)
            break; /* the empty line */
        if (*line == ' ' || *line == '\t')
            return bad(code, err, 400, "folded header line (obs-fold)");
        for (colon = line; httpreq_tchar((unsigned char)*colon); colon++)
            ;
        if (colon == line || *colon != ':')
            return bad(code, err, 400, "malformed header line (expected name: value)");
        *colon = '\0';
        for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
            ;
        for (ve = v; *ve; ve++)
            if (!is_vchar((unsigned char)*ve))
                return bad(code, err, 400, "control character in a header value");
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        *ve = '\0';
        if (strcasecmp(line, "authorization") == 0) {
            /* Which one would the client mean? Neither is guessed (a proxy may have added one). */
            if (r->authz)
                return bad(code, err, 400, "more than one Authorization header");
            r->authz = v;
        } else if (strcasecmp(line, "host") == 0) {
            if (r->host) /* RFC 9112 3.2: a server must refuse more than one */
                return bad(code, err, 400, "more than one Host header");
            r->host = v;
        } else if (strcasecmp(line, "accept") == 0) {
            if (!r->accept)
                r->accept = v;
        } else if (strcasecmp(line, "content-type") == 0) {
            r->ctype = v;
        } else if (strcasecmp(line, "content-length") == 0) {
            uint64_t n = 0;
            size_t d = strspn(v, "0123456789");

            if (d == 0 || v[d] != '\0' || d > 18)
                return bad(code, err, 400, "bad Content-Length");
            for (size_t k = 0; k < d; k++)
                n = n * 10 + (uint64_t)(v[k] - '0');
            if (have_cl && n != r->content_length)
                return bad(code, err, 400, "conflicting Content-Length headers");
            r->content_length = n;
            have_cl = 1;
        } else if (strcasecmp(line, "transfer-encoding") == 0) {
            return bad(code, err, 411, "Transfer-Encoding is not supported: send a Content-Length");
        } else if (strcasecmp(line, "connection") == 0) {
            close |= list_has(v, "close");
            keep |= list_has(v, "keep-alive");
        } else if (strcasecmp(line, "expect") == 0) {
            r->expect_continue = strcasecmp(v, "100-continue") == 0;
        }
        line = nl + 1;
    }
    r->keep_alive = !close && (r->minor == 1 || keep);
    return HTTPREQ_DONE;
}

enum httpreq_path_status httpreq_path_split(const char *path, size_t len, char *buf,
                                            struct httpreq_path *p)
{
    size_t i = 1, out = 0, slashes = 0;

    p->n = 0;
    if (len == 0 || path[0] != '/')
        return HTTPREQ_PATH_NONE;
    for (size_t k = 0; k < len; k++)
        slashes += path[k] == '/';
    if (slashes > HTTPREQ_SEGS_MAX)
        return HTTPREQ_PATH_NONE;
    for (;;) { /* a segment starts at path[i] */
        const char *slash = memchr(path + i, '/', len - i);
        size_t end = slash ? (size_t)(slash - path) : len, n;

        if (text_pct_decode(path + i, end - i, buf + out, &n) < 0)
            return HTTPREQ_PATH_BAD;
        buf[out + n] = '\0';
        p->seg[p->n] = buf + out;
        p->len[p->n++] = n;
        out += n + 1;
        if (slash == NULL)
            return HTTPREQ_PATH_OK;
        i = end + 1;
    }
}
