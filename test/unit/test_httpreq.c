/*
 * Unit tests of httpreq (httpreq.c): the head of an HTTP/1.x request parsed
 * in place, as the ID API's server (src/daemon/apihttp.c) hands it over.
 *
 * Each request is copied into a heap buffer of exactly its length, with no
 * NUL after it, as it arrives from a socket: under ASan (build-asan/) a read
 * past the end is an error. Every accepted head is checked for what the
 * header promises of the strings (inside the head, NUL-terminated there) and
 * for the bytes after it (pipelined requests, bodies: left alone); every
 * incomplete one for a buffer left as it was.
 */
#include <stdint.h>
#include <stdlib.h>

#include "httpreq.h"
#include "unit.h"
#include "unit_bytes.h"

#define HEAD_MAX 8192 /* apihttp.c's limit */

/* The last parse: its buffer (exactly its bytes), a copy of the input, the result. */
static char *buf, *orig;
static size_t buf_len;
static struct httpreq R;
static int code;
static const char *err;

/* The input, escaped, on stderr: which one failed. */
static void show(const char *what)
{
    unit_show(what, orig, buf_len);
}

/* httpreq_parse() over the n bytes at s in a heap buffer of exactly n bytes. */
static enum httpreq_status parse_n(const char *s, size_t n, size_t max_head)
{
    buf = unit_copy(buf, s, n);
    orig = unit_copy(orig, s, n);
    buf_len = n;
    memset(&R, 0x5a, sizeof(R));
    code = 0;
    err = NULL;
    return httpreq_parse(buf, n, max_head, &R, &code, &err);
}

/* A returned string: NULL, or inside the head and NUL-terminated there. */
static int in_head(const char *p)
{
    return p == NULL ||
           (p >= buf && p < buf + R.head_len && memchr(p, '\0', (size_t)(buf + R.head_len - p)));
}

/* The n bytes at s are an accepted head (checked as the header promises); 1 if so. */
static int ok_n(const char *s, size_t n, size_t max_head)
{
    enum httpreq_status st = parse_n(s, n, max_head);
    int good = 1;

    CHECK_EQ_U64((uint64_t)(int64_t)st, (uint64_t)(int64_t)HTTPREQ_DONE);
    if (st != HTTPREQ_DONE) {
        show("not accepted");
        if (st == HTTPREQ_BAD)
            fprintf(stderr, "  %d %s\n", code, err ? err : "(null)");
        return 0;
    }
    CHECK(R.head_len >= 1 && R.head_len <= n && R.head_len <= max_head);
    CHECK(R.method != NULL && R.target != NULL);
    if (R.head_len > n || R.method == NULL || R.target == NULL)
        return 0;
    CHECK(in_head(R.method) && in_head(R.target) && in_head(R.authz) && in_head(R.accept) &&
          in_head(R.ctype));
    CHECK(R.method[0] != '\0' && R.target[0] != '\0');
    CHECK(R.minor == 0 || R.minor == 1);
    CHECK(R.keep_alive == 0 || R.keep_alive == 1);
    CHECK(R.expect_continue == 0 || R.expect_continue == 1);
    /* the head ends with an empty line */
    CHECK(unit_ends_head(orig, R.head_len));
    /* the bytes after it are not touched */
    if (memcmp(buf + R.head_len, orig + R.head_len, n - R.head_len) != 0) {
        CHECK(!"bytes after the head are not touched");
        good = 0;
    }
    return good;
}

static int ok(const char *s)
{
    return ok_n(s, strlen(s), HEAD_MAX);
}

/* The n bytes at s are incomplete: MORE, and the buffer unchanged. */
static void more_n(const char *s, size_t n, size_t max_head)
{
    enum httpreq_status st = parse_n(s, n, max_head);

    CHECK_EQ_U64((uint64_t)(int64_t)st, (uint64_t)(int64_t)HTTPREQ_MORE);
    if (st != HTTPREQ_MORE)
        show("not MORE");
    if (memcmp(buf, orig, n) != 0) {
        CHECK(!"MORE leaves the buffer as it was");
        show("written into");
    }
}

static void more(const char *s)
{
    more_n(s, strlen(s), HEAD_MAX);
}

/* The n bytes at s are refused with status want and an error containing msg. */
static void bad_n(const char *s, size_t n, size_t max_head, int want, const char *msg)
{
    enum httpreq_status st = parse_n(s, n, max_head);

    CHECK_EQ_U64((uint64_t)(int64_t)st, (uint64_t)(int64_t)HTTPREQ_BAD);
    CHECK_EQ_U64((uint64_t)code, (uint64_t)want);
    CHECK(err != NULL && err[0] != '\0');
    if (msg)
        CHECK_STR_CONTAINS(err, msg);
    if (st != HTTPREQ_BAD || code != want || (msg && (!err || !strstr(err, msg))))
        show("not refused as expected");
}

static void bad(const char *s, int want, const char *msg)
{
    bad_n(s, strlen(s), HEAD_MAX, want, msg);
}

/* ---- accepted heads ---- */

static void test_minimal_get(void)
{
    static const char req[] = "GET / HTTP/1.1\r\n\r\n";

    if (ok(req)) {
        CHECK_STR(R.method, "GET");
        CHECK_STR(R.target, "/");
        CHECK_EQ_U64((uint64_t)R.minor, 1);
        CHECK(R.authz == NULL && R.accept == NULL && R.ctype == NULL);
        CHECK_EQ_U64(R.content_length, 0);
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
        CHECK_EQ_U64((uint64_t)R.expect_continue, 0);
        CHECK_EQ_U64(R.head_len, sizeof(req) - 1);
        /* parsed in place */
        CHECK(R.method == buf && R.target == buf + 4);
    }
    /* a typical request of the ID API */
    if (ok("POST /v1/ids/user?count=5 HTTP/1.1\r\nHost: idpool:9480\r\n"
           "Authorization: Bearer idp_abc\r\nAccept: text/plain\r\n"
           "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n"
           "User-Agent: curl/8.5.0\r\n\r\ncount=3")) {
        CHECK_STR(R.method, "POST");
        CHECK_STR(R.target, "/v1/ids/user?count=5");
        CHECK_STR(R.authz, "Bearer idp_abc");
        CHECK_STR(R.accept, "text/plain");
        CHECK_STR(R.ctype, "application/x-www-form-urlencoded");
        CHECK_EQ_U64(R.content_length, 7);
        CHECK_EQ_U64(R.head_len, buf_len - 7);
        CHECK(memcmp(buf + R.head_len, "count=3", 7) == 0);
    }
    /* other methods and targets: any token, any visible bytes */
    if (ok("OPTIONS * HTTP/1.1\r\n\r\n")) {
        CHECK_STR(R.method, "OPTIONS");
        CHECK_STR(R.target, "*");
    }
    if (ok("get http://h:1/a?b#c HTTP/1.1\r\n\r\n")) {
        CHECK_STR(R.method, "get"); /* methods are case-sensitive: taken as sent */
        CHECK_STR(R.target, "http://h:1/a?b#c");
    }
    if (ok("M-1.x!#$%&'*+^_`|~ /\xc3\xa9\"<>{} HTTP/1.1\r\n\r\n")) {
        CHECK_STR(R.method, "M-1.x!#$%&'*+^_`|~");
        CHECK_STR(R.target, "/\xc3\xa9\"<>{}");
    }
    /* header fields the parser does not read are skipped */
    if (ok("GET / HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Tab:\tv\r\nX-Obs: \xe9t\xe9\r\n\r\n"))
        CHECK(R.authz == NULL && R.accept == NULL && R.ctype == NULL);
}

static void test_http10(void)
{
    if (ok("GET / HTTP/1.0\r\n\r\n")) {
        CHECK_EQ_U64((uint64_t)R.minor, 0);
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    }
    if (ok("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")) {
        CHECK_EQ_U64((uint64_t)R.minor, 0);
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    }
    if (ok("GET / HTTP/1.0\r\nconnection: Keep-Alive\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    /* only that token */
    if (ok("GET / HTTP/1.0\r\nConnection: keep-alived\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    if (ok("GET / HTTP/1.0\r\nConnection: Upgrade\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    if (ok("GET / HTTP/1.0\r\nKeep-Alive: timeout=5\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    /* close wins */
    if (ok("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
}

static void test_http11_close(void)
{
    if (ok("GET / HTTP/1.1\r\nConnection: close\r\n\r\n")) {
        CHECK_EQ_U64((uint64_t)R.minor, 1);
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    }
    if (ok("GET / HTTP/1.1\r\nCONNECTION: CLOSE\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    if (ok("GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    /* close wins, in one field or across two */
    if (ok("GET / HTTP/1.1\r\nConnection: close, keep-alive\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    if (ok("GET / HTTP/1.1\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    if (ok("GET / HTTP/1.1\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    /* not the token */
    if (ok("GET / HTTP/1.1\r\nConnection: closed\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    if (ok("GET / HTTP/1.1\r\nConnection: x-close\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    if (ok("GET / HTTP/1.1\r\nConnection: clo se\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    if (ok("GET / HTTP/1.1\r\nConnection:\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    if (ok("GET / HTTP/1.1\r\nX-Connection: close\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
}

static void test_connection_list(void)
{
    if (ok("GET / HTTP/1.0\r\nConnection: Keep-Alive, Upgrade\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    if (ok("GET / HTTP/1.1\r\nConnection: Keep-Alive, Upgrade\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    if (ok("GET / HTTP/1.0\r\nConnection: Upgrade, Keep-Alive\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    if (ok("GET / HTTP/1.0\r\nConnection: Upgrade,keep-alive,TE\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    /* empty elements and OWS around them */
    if (ok("GET / HTTP/1.0\r\nConnection: ,, \t keep-alive \t ,,\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    if (ok("GET / HTTP/1.1\r\nConnection: Upgrade , close\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    if (ok("GET / HTTP/1.1\r\nConnection: ,close,\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    if (ok("GET / HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    if (ok("GET / HTTP/1.0\r\nConnection: Upgrade, close-keep-alive\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    if (ok("GET / HTTP/1.0\r\nConnection: ,\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
}

static void test_bare_lf(void)
{
    static const char req[] = "GET /x HTTP/1.1\nHost: h\nAccept: text/plain\n\n";

    if (ok(req)) {
        CHECK_STR(R.target, "/x");
        CHECK_STR(R.accept, "text/plain");
        CHECK_EQ_U64(R.head_len, sizeof(req) - 1);
    }
    /* mixed */
    if (ok("GET / HTTP/1.1\nAccept: a\r\nAuthorization: b\n\r\n")) {
        CHECK_STR(R.accept, "a");
        CHECK_STR(R.authz, "b");
        CHECK_EQ_U64(R.head_len, buf_len);
    }
    if (ok("GET / HTTP/1.1\r\nAccept: a\n\n")) {
        CHECK_STR(R.accept, "a");
        CHECK_EQ_U64(R.head_len, buf_len);
    }
    if (ok("GET / HTTP/1.0\n\n")) {
        CHECK_EQ_U64((uint64_t)R.minor, 0);
        CHECK_EQ_U64(R.head_len, 16);
    }
}

static void test_leading_empty_lines(void)
{
    if (ok("\r\n\r\nGET / HTTP/1.1\r\n\r\n")) {
        CHECK(R.method == buf + 4);
        CHECK_STR(R.method, "GET");
        CHECK_STR(R.target, "/");
        CHECK_EQ_U64(R.head_len, buf_len); /* they are part of the head */
    }
    if (ok("\n\nGET / HTTP/1.1\n\n")) {
        CHECK(R.method == buf + 2);
        CHECK_EQ_U64(R.head_len, buf_len);
    }
    if (ok("\r\nPOST /a HTTP/1.0\r\nContent-Length: 2\r\n\r\nab")) {
        CHECK_STR(R.method, "POST");
        CHECK_EQ_U64(R.content_length, 2);
        CHECK_EQ_U64(R.head_len, buf_len - 2);
    }
    /* only empty lines: nothing yet */
    more("\r\n");
    more("\r\n\r\n\r\n\r\n");
    more("\n\n\n");
    /* ... up to the limit */
    bad_n("\r\n\r\n\r\n\r\n", 8, 8, 431, NULL);
}

/* Every proper prefix of a valid head is incomplete, and leaves the buffer alone. */
static void test_incomplete(void)
{
    static const char *const reqs[] = {
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\n\n",
        "GET /v1/ids/user?count=5 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer x\r\n"
        "Accept: text/plain\r\nContent-Length: 3\r\nConnection: keep-alive\r\n"
        "Expect: 100-continue\r\n\r\n",
        "\r\n\r\nGET / HTTP/1.0\nA: b\r\nC:\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    };

    for (size_t k = 0; k < sizeof(reqs) / sizeof(reqs[0]); k++) {
        size_t n = strlen(reqs[k]);

        for (size_t i = 0; i < n; i++) {
            more_n(reqs[k], i, HEAD_MAX);
            /* a limit of the whole head: still only incomplete */
            more_n(reqs[k], i, n);
        }
        if (ok_n(reqs[k], n, HEAD_MAX))
            CHECK_EQ_U64(R.head_len, n);
        if (ok_n(reqs[k], n, n))
            CHECK_EQ_U64(R.head_len, n);
    }
    /* an invalid head is not judged before it is complete */
    more("GET  / HTTP/1.1\r\n");
    more("GET / HTTP/2.0\r\nTransfer-Encoding: chunked\r\n");
    more_n("GET /\0 HTTP/1.1\r\n", 17, HEAD_MAX);
    /* a CR alone does not end a line */
    more("GET / HTTP/1.1\r\r");
    more("GET / HTTP/1.1\r\n\r");
    more("GET / HTTP/1.1\r\nA: b\r\r\r\r");
}

/* A head of exactly n bytes: "GET / HTTP/1.1\r\nX: vvv...\r\n\r\n" (n >= 24). */
static char *head_of(size_t n, const char *eol)
{
    return unit_head_of("GET / HTTP/1.1", n, eol);
}

static void test_max_head(void)
{
    static const char *const eols[] = {"\r\n", "\n"};

    for (size_t k = 0; k < 2; k++) {
        static const size_t sizes[] = {24, 25, 100, 1000, HEAD_MAX};

        for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
            size_t n = sizes[j];
            char *s = head_of(n, eols[k]);

            CHECK_EQ_U64(strlen(s), n);
            /* exactly at the limit */
            if (ok_n(s, n, n))
                CHECK_EQ_U64(R.head_len, n);
            /* one byte over */
            bad_n(s, n, n - 1, 431, "too large");
            /* more bytes than the limit: only the head counts */
            if (n == HEAD_MAX) {
                char *t = malloc(n + 100);
                if (t == NULL)
                    exit(1);
                memcpy(t, s, n);
                memset(t + n, 'b', 100);
                if (ok_n(t, n + 100, n))
                    CHECK_EQ_U64(R.head_len, n);
                bad_n(t, n + 100, n - 1, 431, "too large");
                free(t);
            }
            /* the head one byte short of its end: incomplete under the limit, too large at it */
            more_n(s, n - 1, n);
            bad_n(s, n - 1, n - 1, 431, NULL);
            free(s);
        }
    }
    /* the server's limit */
    {
        char *s = head_of(HEAD_MAX + 1, "\r\n");
        bad_n(s, HEAD_MAX + 1, HEAD_MAX, 431, "too large");
        /* not seen yet: as many bytes as the limit, no end */
        bad_n(s, HEAD_MAX, HEAD_MAX, 431, "too large");
        more_n(s, HEAD_MAX - 1, HEAD_MAX);
        free(s);
    }
    /* leading empty lines count */
    {
        static const char req[] = "\r\n\r\nGET / HTTP/1.1\r\n\r\n";
        size_t n = sizeof(req) - 1;
        if (ok_n(req, n, n))
            CHECK_EQ_U64(R.head_len, n);
        bad_n(req, n, n - 1, 431, NULL);
    }
    /* a limit of 0 */
    bad_n("GET / HTTP/1.1\r\n\r\n", 18, 0, 431, NULL);
    bad_n("", 0, 0, 431, NULL);
}

/* ---- refused heads ---- */

static void test_request_line_errors(void)
{
    static const char *const bad400[] = {
        "GET\r\n\r\n",
        "GET \r\n\r\n",
        "GET /\r\n\r\n",
        "GET / \r\n\r\n",
        "GET HTTP/1.1\r\n\r\n",
        " / HTTP/1.1\r\n\r\n",
        " GET / HTTP/1.1\r\n\r\n",
        "/ HTTP/1.1\r\n\r\n",
        "GET  / HTTP/1.1\r\n\r\n",
        "GET /  HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1 \r\n\r\n",
        "GET / HTTP/1.1\t\r\n\r\n",
        "GET\t/ HTTP/1.1\r\n\r\n",
        "GET /\tHTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1 x\r\n\r\n",
        "GET / x HTTP/1.1\r\n\r\n",
        "GET / http/1.1\r\n\r\n",
        "GET / Http/1.1\r\n\r\n",
        "GET / HTTP/1.x\r\n\r\n",
        "GET / HTTP/1.1x\r\n\r\n",
        "GET / HTTP/1.10\r\n\r\n",
        "GET / HTTP/1.\r\n\r\n",
        "GET / HTTP/1\r\n\r\n",
        "GET / HTTP/11\r\n\r\n",
        "GET / HTTP/\r\n\r\n",
        "GET / HTTP\r\n\r\n",
        "GET / HTTP/2\r\n\r\n",
        "GET / HTTP/1,1\r\n\r\n",
        "GET / HTTP/ 1.1\r\n\r\n",
        "GET / HTTP/01.1\r\n\r\n",
        "GET / HTTP/x.1\r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n",
        "GET: / HTTP/1.1\r\n\r\n",
        "G\xc3\x89T / HTTP/1.1\r\n\r\n",
        "GET /\x7f HTTP/1.1\r\n\r\n",
        "GET /\x01 HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\r\n\r\n",
        "GET /\r HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\rHost: h\r\n\r\n",
        "Host: h\r\n\r\n",
        "x\n\n",
    };
    static const char *const bad505[] = {
        "GET / HTTP/2.0\r\n\r\n", "GET / HTTP/0.9\r\n\r\n", "GET / HTTP/3.0\r\n\r\n",
        "GET / HTTP/9.9\r\n\r\n", "GET / HTTP/1.2\r\n\r\n", "GET / HTTP/1.9\r\n\r\n",
        "PRI * HTTP/2.0\r\n\r\n",
    };

    for (size_t i = 0; i < sizeof(bad400) / sizeof(bad400[0]); i++)
        bad(bad400[i], 400, NULL);
    bad("GET  / HTTP/1.1\r\n\r\n", 400, "malformed request line");
    bad("GET / http/1.1\r\n\r\n", 400, "malformed request line");
    for (size_t i = 0; i < sizeof(bad505) / sizeof(bad505[0]); i++)
        bad(bad505[i], 505, "HTTP/1.0 and HTTP/1.1");
    /* the HTTP/2 connection preface */
    bad("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, NULL);
}

static void test_header_errors(void)
{
    /* no colon */
    bad("GET / HTTP/1.1\r\nHost h\r\n\r\n", 400, "malformed header line");
    bad("GET / HTTP/1.1\r\nHost\r\n\r\n", 400, "malformed header line");
    bad("GET / HTTP/1.1\r\nHost: h\r\nx\r\n\r\n", 400, "malformed header line");
    /* whitespace before the colon */
    bad("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400, "malformed header line");
    bad("GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", 400, "malformed header line");
    bad("GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\n", 400, NULL);
    /* not a token */
    bad("GET / HTTP/1.1\r\n: h\r\n\r\n", 400, "malformed header line");
    bad("GET / HTTP/1.1\r\nHo(st: h\r\n\r\n", 400, "malformed header line");
    bad("GET / HTTP/1.1\r\nHo st: h\r\n\r\n", 400, "malformed header line");
    bad("GET / HTTP/1.1\r\nH\xc3\xa9: h\r\n\r\n", 400, "malformed header line");
    bad("GET / HTTP/1.1\r\nHost\x01: h\r\n\r\n", 400, NULL);
    /* obs-fold, and whitespace before the first field */
    bad("GET / HTTP/1.1\r\nAccept: text/plain\r\n , application/json\r\n\r\n", 400, "obs-fold");
    bad("GET / HTTP/1.1\r\nAccept: text/plain\r\n\tapplication/json\r\n\r\n", 400, "obs-fold");
    bad("GET / HTTP/1.1\nAccept: a\n b\n\n", 400, "obs-fold");
    bad("GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400, NULL);
    bad("GET / HTTP/1.1\r\n\t\r\n\r\n", 400, NULL);
    bad("GET / HTTP/1.1\r\n \r\n\r\n", 400, NULL);
    /* control characters in a value */
    bad("GET / HTTP/1.1\r\nAccept: a\x01"
        "b\r\n\r\n",
        400, "control character");
    bad("GET / HTTP/1.1\r\nAccept: a\x7f\r\n\r\n", 400, "control character");
    bad("GET / HTTP/1.1\r\nX-Other: \x1b[31m\r\n\r\n", 400, "control character");
    bad("GET / HTTP/1.1\r\nAuthorization: Bearer x\x0b\r\n\r\n", 400, "control character");
    bad("GET / HTTP/1.1\r\nAccept: a\x0c\r\n\r\n", 400, "control character");
    /* a CR that does not end a line */
    bad("GET / HTTP/1.1\r\nAccept: a\rb\r\n\r\n", 400, "bare CR");
    bad("GET / HTTP/1.1\r\nAccept: a\r\r\n\r\n", 400, "bare CR");
    bad("GET / HTTP/1.1\r\nA\r: a\r\n\r\n", 400, NULL);
    bad("GET / HTTP/1.1\r\n\r\r\n\r\n", 400, "bare CR");
    /* allowed in a value: HTAB, SP, obs-text */
    if (ok("GET / HTTP/1.1\r\nAccept: a\tb c\x80\xff\r\n\r\n"))
        CHECK_STR(R.accept, "a\tb c\x80\xff");
}

/* A NUL anywhere in the head: 400; after it (a body, the next request): not the head's. */
static void test_nul(void)
{
    static const char req[] = "\r\nPOST /a HTTP/1.1\r\nAccept: x\r\nContent-Length: 3\r\n\r\n";
    static const char next[] = "GET / HTTP/1.1\r\n\r\n";
    size_t n = sizeof(req) - 1, m = sizeof(next) - 1;
    char s[sizeof(req) + sizeof(next)];

    for (size_t i = 0; i < n; i++) {
        memcpy(s, req, n);
        memcpy(s + n, next, m);
        s[i] = '\0';
        if (i + 3 < n) {
            bad_n(s, n, HEAD_MAX, 400, "NUL");
        } else {
            /* one of the last line ends: the head is not complete */
            more_n(s, n, HEAD_MAX);
            /* until another empty line comes */
            bad_n(s, n + m, HEAD_MAX, 400, "NUL");
        }
        bad_n(s, n + m, HEAD_MAX, 400, "NUL");
    }
    /* NUL instead of a line end or the empty line's CR */
    memcpy(s, req, n);
    s[n - 4] = '\0'; /* the CR of the last field's line end */
    bad_n(s, n, HEAD_MAX, 400, "NUL");
    /* the body may hold NULs */
    memcpy(s, req, n);
    memcpy(s + n, "\0\0\0", 3);
    if (ok_n(s, n + 3, HEAD_MAX)) {
        CHECK_EQ_U64(R.head_len, n);
        CHECK_EQ_U64(R.content_length, 3);
    }
    bad_n("GET / HTTP/1.1\0\r\n\r\n", 19, HEAD_MAX, 400, "NUL");
    bad_n("GET /\0 HTTP/1.1\r\n\r\n", 19, HEAD_MAX, 400, "NUL");
    bad_n("\0GET / HTTP/1.1\r\n\r\n", 19, HEAD_MAX, 400, "NUL");
    bad_n("GET / HTTP/1.1\r\nA: \0\r\n\r\n", 24, HEAD_MAX, 400, "NUL");
}

static void test_content_length(void)
{
    static const struct {
        const char *v;
        uint64_t n;
    } good[] = {
        {"0", 0},
        {"5", 5},
        {"42", 42},
        {"007", 7},
        {"00", 0},
        {"4294967296", 4294967296ULL},
        {"999999999999999999", 999999999999999999ULL}, /* 18 digits */
        {"000000000000000001", 1},                     /* 18 digits */
        {"  5", 5},
        {"5 \t ", 5},
        {"\t5\t", 5},
    };
    static const char *const bad_values[] = {
        "",
        " ",
        "1000000000000000000", /* 19 digits */
        "0000000000000000001", /* 19 digits, even as 1 */
        "9223372036854775807",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999999",
        "abc",
        "5a",
        "a5",
        "-1",
        "-0",
        "+5",
        "5 5",
        "5,5",
        "5, 5",
        "0x10",
        "1e3",
        "5.0",
        "\xd9\xa5", /* ARABIC-INDIC DIGIT FIVE */
    };
    char req[256];

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        snprintf(req, sizeof(req), "POST / HTTP/1.1\r\nContent-Length:%s\r\n\r\n", good[i].v);
        if (ok(req))
            CHECK_EQ_U64(R.content_length, good[i].n);
    }
    for (size_t i = 0; i < sizeof(bad_values) / sizeof(bad_values[0]); i++) {
        snprintf(req, sizeof(req), "POST / HTTP/1.1\r\nContent-Length: %s\r\n\r\n", bad_values[i]);
        bad(req, 400, "bad Content-Length");
    }
    /* absent */
    if (ok("POST / HTTP/1.1\r\n\r\n"))
        CHECK_EQ_U64(R.content_length, 0);
    /* repeated: the same value is one value */
    if (ok("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"))
        CHECK_EQ_U64(R.content_length, 5);
    if (ok("POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 005\r\n\r\n"))
        CHECK_EQ_U64(R.content_length, 5);
    if (ok("POST / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n"))
        CHECK_EQ_U64(R.content_length, 0);
    /* different values */
    bad("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400, "conflicting");
    bad("POST / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 1\r\n\r\n", 400, "conflicting");
    bad("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        400, "conflicting");
    bad("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: x\r\n\r\n", 400,
        "bad Content-Length");
    bad("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length:\r\n\r\n", 400, NULL);
}

static void test_transfer_encoding(void)
{
    bad("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411, "Content-Length");
    bad("POST / HTTP/1.1\r\ntransfer-encoding: identity\r\n\r\n", 411, NULL);
    bad("POST / HTTP/1.1\r\nTRANSFER-ENCODING: gzip, chunked\r\n\r\n", 411, NULL);
    bad("POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n", 411, NULL);
    bad("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 411, NULL);
    /* with a Content-Length, before or after it (request smuggling) */
    bad("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 411, NULL);
    bad("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 411, NULL);
    /* a name that only looks like it */
    if (ok("POST / HTTP/1.1\r\nTransfer-Encodings: chunked\r\nX-Transfer-Encoding: chunked\r\n"
           "TE: trailers\r\n\r\n"))
        CHECK_EQ_U64(R.content_length, 0);
}

static void test_expect(void)
{
    if (ok("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n")) {
        CHECK_EQ_U64((uint64_t)R.expect_continue, 1);
        CHECK_EQ_U64(R.content_length, 10);
    }
    if (ok("POST / HTTP/1.1\r\nexpect: 100-Continue\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.expect_continue, 1);
    if (ok("POST / HTTP/1.1\r\nEXPECT:\t 100-CONTINUE \t\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.expect_continue, 1);
    if (ok("POST / HTTP/1.1\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.expect_continue, 0);
    if (ok("POST / HTTP/1.1\r\nExpect: 100-continued\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.expect_continue, 0);
    if (ok("POST / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.expect_continue, 0);
    if (ok("POST / HTTP/1.1\r\nExpect:\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.expect_continue, 0);
    if (ok("POST / HTTP/1.1\r\nX-Expect: 100-continue\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.expect_continue, 0);
}

static void test_first_kept(void)
{
    if (ok("GET / HTTP/1.1\r\nAuthorization: Bearer first\r\nAccept: text/plain\r\n"
           "Accept: application/json\r\n\r\n")) {
        CHECK_STR(R.authz, "Bearer first");
        CHECK_STR(R.accept, "text/plain");
        CHECK(R.authz > buf && R.authz < buf + 40);
    }
    /* an empty first one is still the first */
    if (ok("GET / HTTP/1.1\r\nAccept:\r\nAccept: text/plain\r\nAuthorization: \r\n\r\n")) {
        CHECK_STR(R.accept, "");
        CHECK_STR(R.authz, "");
    }
    if (ok("GET / HTTP/1.1\r\nContent-Type: text/plain\r\n\r\n"))
        CHECK_STR(R.ctype, "text/plain");
}

/* Two Authorization headers: 400, whatever they hold (issue 22 item 8). */
static void test_two_authorizations(void)
{
    bad("GET / HTTP/1.1\r\nAuthorization: Bearer first\r\nAccept: text/plain\r\n"
        "Authorization: Bearer second\r\n\r\n",
        400, "more than one Authorization header");
    bad("GET / HTTP/1.1\r\nAuthorization: Bearer x\r\nauthorization: Bearer x\r\n\r\n", 400,
        "more than one Authorization");
    bad("GET / HTTP/1.1\r\nAuthorization:\r\nAUTHORIZATION: Bearer x\r\n\r\n", 400,
        "more than one Authorization");
    /* an incomplete head is not judged yet */
    more("GET / HTTP/1.1\r\nAuthorization: a\r\nAuthorization: b\r\n");
    /* other names are other fields */
    if (ok("GET / HTTP/1.1\r\nAuthorization: a\r\nProxy-Authorization: b\r\n"
           "X-Authorization: c\r\n\r\n"))
        CHECK_STR(R.authz, "a");
}

/* Host: one at most (RFC 9112 3.2), and which values the status server answers to. */
static void test_host(void)
{
    if (ok("GET / HTTP/1.1\r\nHost: 127.0.0.1:9471\r\n\r\n"))
        CHECK_STR(R.host, "127.0.0.1:9471");
    if (ok("GET / HTTP/1.0\r\n\r\n"))
        CHECK(R.host == NULL);
    bad("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", 400, "more than one Host header");

    /* IP literals and localhost, with or without a port, whatever is configured */
    CHECK(httpreq_host_allowed(NULL, NULL));
    CHECK(httpreq_host_allowed("127.0.0.1", NULL));
    CHECK(httpreq_host_allowed("10.1.2.3:9471", NULL));
    CHECK(httpreq_host_allowed("[::1]:9471", NULL));
    CHECK(httpreq_host_allowed("[fe80::1]", NULL));
    CHECK(httpreq_host_allowed("localhost:9471", NULL));
    CHECK(httpreq_host_allowed("LocalHost.", NULL));
    /* any other name only when configured (any case, a final dot), "*" for every name */
    CHECK(!httpreq_host_allowed("attacker.example:9471", NULL));
    CHECK(!httpreq_host_allowed("attacker.example", "idpool.internal"));
    CHECK(httpreq_host_allowed("IDPOOL.internal.:9471", "a.example, idpool.internal"));
    CHECK(httpreq_host_allowed("attacker.example", "*"));
    CHECK(!httpreq_host_allowed("localhost.attacker.example", NULL));
    CHECK(!httpreq_host_allowed("127.0.0.1.nip.io", NULL));
    /* malformed: never allowed, not even by "*" */
    CHECK(!httpreq_host_allowed("", "*"));
    CHECK(!httpreq_host_allowed("127.0.0.1:", "*"));
    CHECK(!httpreq_host_allowed("127.0.0.1:x", "*"));
    CHECK(!httpreq_host_allowed("127.0.0.1:123456", "*"));
    CHECK(!httpreq_host_allowed("[::1", "*"));
    CHECK(!httpreq_host_allowed("[::1]x", "*"));
    CHECK(!httpreq_host_allowed("[attacker.example]", "*"));
    CHECK(!httpreq_host_allowed("::1", NULL));
}

static void test_case_insensitive(void)
{
    if (ok("POST / HTTP/1.1\r\nAUTHORIZATION: a\r\naccept: b\r\nCoNtEnT-tYpE: c\r\n"
           "CONTENT-LENGTH: 4\r\nconnection: CLOSE\r\nExPeCt: 100-continue\r\n\r\n")) {
        CHECK_STR(R.authz, "a");
        CHECK_STR(R.accept, "b");
        CHECK_STR(R.ctype, "c");
        CHECK_EQ_U64(R.content_length, 4);
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
        CHECK_EQ_U64((uint64_t)R.expect_continue, 1);
    }
    bad("POST / HTTP/1.1\r\ntRANSFER-eNCODING: chunked\r\n\r\n", 411, NULL);
    /* the values are taken as sent */
    if (ok("GET / HTTP/1.1\r\nAuthorization: Bearer AbC\r\nAccept: Text/Plain\r\n\r\n")) {
        CHECK_STR(R.authz, "Bearer AbC");
        CHECK_STR(R.accept, "Text/Plain");
    }
    /* prefixes and suffixes of the names are other fields */
    if (ok("GET / HTTP/1.1\r\nAuthorizatio: a\r\nAccepts: b\r\nContent-Typ: c\r\n"
           "Content-Lengths: x\r\nAccept-Encoding: gzip\r\n\r\n")) {
        CHECK(R.authz == NULL && R.accept == NULL && R.ctype == NULL);
        CHECK_EQ_U64(R.content_length, 0);
    }
}

static void test_ows_trimmed(void)
{
    if (ok("GET / HTTP/1.1\r\nAccept: \t text/plain \t \r\nAuthorization:Bearer  a b\t\r\n"
           "Content-Type:   application/json\r\n\r\n")) {
        CHECK_STR(R.accept, "text/plain");
        CHECK_STR(R.authz, "Bearer  a b"); /* inner whitespace stays */
        CHECK_STR(R.ctype, "application/json");
    }
    if (ok("GET / HTTP/1.1\r\nAccept: \t \r\nAuthorization:\r\n\r\n")) {
        CHECK_STR(R.accept, "");
        CHECK_STR(R.authz, "");
    }
    /* with bare LF line ends */
    if (ok("GET / HTTP/1.1\nAccept:  x  \n\n"))
        CHECK_STR(R.accept, "x");
}

static void test_head_len(void)
{
    static const char two[] = "GET /1 HTTP/1.1\r\nAccept: a\r\n\r\nGET /2 HTTP/1.1\n\n";
    static const char body[] = "POST /a HTTP/1.1\r\nContent-Length: 12\r\n\r\n\r\n\r\nbody\n\nrest";

    if (ok("GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
        CHECK_EQ_U64(R.head_len, 27);
    if (ok("GET / HTTP/1.1\nHost: h\n\n"))
        CHECK_EQ_U64(R.head_len, 24);
    /* pipelined: the first head only, the next request left as it was */
    if (ok(two)) {
        CHECK_EQ_U64(R.head_len, 30);
        CHECK_STR(R.target, "/1");
        CHECK_STR(R.accept, "a");
        CHECK(memcmp(buf + 30, "GET /2 HTTP/1.1\n\n", 17) == 0);
        /* then the next one, as apihttp.c moves it up */
        if (ok_n(two + 30, sizeof(two) - 1 - 30, HEAD_MAX)) {
            CHECK_EQ_U64(R.head_len, 17);
            CHECK_STR(R.target, "/2");
            CHECK(R.accept == NULL);
        }
    }
    /* a body that holds empty lines and a head of its own */
    if (ok(body)) {
        CHECK_EQ_U64(R.head_len, 40);
        CHECK_EQ_U64(R.content_length, 12);
        CHECK(memcmp(buf + 40, "\r\n\r\nbody\n\nrest", 14) == 0);
    }
    /* bytes right after the head that could be taken for line ends */
    if (ok("GET / HTTP/1.1\r\n\r\n\r\n"))
        CHECK_EQ_U64(R.head_len, 18);
    if (ok("GET / HTTP/1.1\n\n\n"))
        CHECK_EQ_U64(R.head_len, 16);
    if (ok("GET / HTTP/1.1\r\n\n\r\n"))
        CHECK_EQ_U64(R.head_len, 17);
    /* a next request with errors is not this one's concern */
    if (ok("GET / HTTP/1.1\r\n\r\nGET  / HTTP/9.9\r\nTransfer-Encoding: x\r\n\r\n"))
        CHECK_EQ_U64(R.head_len, 18);
}

/* ---- httpreq_path_split ---- */

/*
 * path splits into the segments listed in want ("a|b|": "a", "b", ""), each
 * NUL-terminated in a heap buffer of exactly strlen(path) + 1 bytes.
 */
static void split_is(const char *path, const char *want)
{
    size_t n = strlen(path), k = 0;
    char *pb = unit_copy(NULL, path, n), *out = malloc(n + 1);
    struct httpreq_path p;
    enum httpreq_path_status st;

    CHECK(out != NULL);
    if (out == NULL)
        return;
    memset(&p, 0x5a, sizeof(p));
    st = httpreq_path_split(pb, n, out, &p);
    CHECK_EQ_U64((uint64_t)(int64_t)st, (uint64_t)HTTPREQ_PATH_OK);
    if (st == HTTPREQ_PATH_OK) {
        for (const char *w = want;; k++) {
            size_t wl = strcspn(w, "|");
            CHECK(k < p.n);
            if (k >= p.n)
                break;
            CHECK(p.len[k] == wl && memcmp(p.seg[k], w, wl) == 0 && p.seg[k][wl] == '\0');
            CHECK(p.seg[k] >= out && p.seg[k] + wl < out + n + 1);
            if (w[wl] == '\0')
                break;
            w += wl + 1;
        }
        CHECK_EQ_U64(p.n, k + 1);
    }
    if (st != HTTPREQ_PATH_OK || p.n != k + 1)
        fprintf(stderr, "  path '%s' (%d)\n", path, (int)st);
    free(pb);
    free(out);
}

static void split_fails(const char *path, enum httpreq_path_status want)
{
    size_t n = strlen(path);
    char *pb = unit_copy(NULL, path, n), *out = malloc(n + 1);
    struct httpreq_path p;

    CHECK(out != NULL);
    if (out != NULL)
        CHECK_EQ_U64((uint64_t)(int64_t)httpreq_path_split(pb, n, out, &p),
                     (uint64_t)(int64_t)want);
    free(pb);
    free(out);
}

static void test_path_split(void)
{
    split_is("/", "");
    split_is("/metrics", "metrics");
    split_is("/v1/ids/user", "v1|ids|user");
    split_is("/v1/apps/", "v1|apps|");
    split_is("//x", "|x");
    split_is("/a//b/", "a||b|");
    split_is("/%6Detrics", "metrics");
    split_is("/v1/ids/demo%5Fmono", "v1|ids|demo_mono");
    split_is("/a%2Fb/c", "a/b|c"); /* a decoded '/' separates nothing */
    split_is("/a%2fb%2F", "a/b/");
    split_is("/%25", "%");
    split_is("/%2525", "%25"); /* decoded once */
    split_is("/a+b", "a+b");
    split_is("/%C3%A9", "\xc3\xa9");
    split_is("/%20", " ");
    split_is("/1/2/3/4/5/6/7/8", "1|2|3|4|5|6|7|8"); /* HTTPREQ_SEGS_MAX */
    split_fails("/1/2/3/4/5/6/7/8/9", HTTPREQ_PATH_NONE);
    split_fails("/1/2/3/4/5/6/7/8/%zz", HTTPREQ_PATH_NONE); /* too many segments, first */
    split_fails("", HTTPREQ_PATH_NONE);
    split_fails("x/y", HTTPREQ_PATH_NONE);
    split_fails("*", HTTPREQ_PATH_NONE);
    split_fails("/%zz", HTTPREQ_PATH_BAD);
    split_fails("/%", HTTPREQ_PATH_BAD);
    split_fails("/a%", HTTPREQ_PATH_BAD);
    split_fails("/a%4", HTTPREQ_PATH_BAD);
    split_fails("/a%4/", HTTPREQ_PATH_BAD); /* the escape does not reach into the next segment */
    split_fails("/%00", HTTPREQ_PATH_BAD);
    split_fails("/ok/%0", HTTPREQ_PATH_BAD);
    split_fails("/%G1", HTTPREQ_PATH_BAD);
    split_fails("/%1G", HTTPREQ_PATH_BAD);
    split_fails("/% 1", HTTPREQ_PATH_BAD);
    /* only len bytes are read */
    {
        char out[8];
        struct httpreq_path p;
        CHECK(httpreq_path_split("/ab%zz", 3, out, &p) == HTTPREQ_PATH_OK);
        CHECK(p.n == 1 && strcmp(p.seg[0], "ab") == 0);
    }
}

int main(void)
{
    RUN(test_minimal_get);
    RUN(test_http10);
    RUN(test_http11_close);
    RUN(test_connection_list);
    RUN(test_bare_lf);
    RUN(test_leading_empty_lines);
    RUN(test_incomplete);
    RUN(test_max_head);
    RUN(test_request_line_errors);
    RUN(test_header_errors);
    RUN(test_nul);
    RUN(test_content_length);
    RUN(test_transfer_encoding);
    RUN(test_expect);
    RUN(test_first_kept);
    RUN(test_two_authorizations);
    RUN(test_host);
    RUN(test_case_insensitive);
    RUN(test_ows_trimmed);
    RUN(test_head_len);
    RUN(test_path_split);
    free(buf);
    free(orig);
    return unit_done();
}
