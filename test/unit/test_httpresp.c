/*
 * Unit tests of httpresp (httpresp.c): what libidpool reads of an ID
 * issuer's answer (src/lib/issuer.c) — the head of an HTTP/1.x response, a
 * text/plain body of IDs and a JSON error body.
 *
 * Each input is copied into a heap buffer of exactly its length, with no NUL
 * after it, as it arrives from a socket: under ASan (-Db_sanitize=address) a
 * read past the end is an error. The same holds for the outputs: the IDs and
 * the error strings go to heap buffers of exactly the size passed.
 */
#include <stdint.h>
#include <stdlib.h>

#include "httpresp.h"
#include "unit.h"
#include "unit_bytes.h"

/* The last parse: its buffer (exactly its bytes), a copy of the input, the result. */
static char *buf, *orig;
static size_t buf_len;
static struct httpresp R;
static const char *err;

/* The input, escaped, on stderr: which one failed. */
static void show(const char *what)
{
    unit_show(what, orig, buf_len);
}

/* The n bytes at s into buf, a heap buffer of exactly n bytes (orig: a copy). */
static void load(const char *s, size_t n)
{
    buf = unit_copy(buf, s, n);
    orig = unit_copy(orig, s, n);
    buf_len = n;
}

/* httpresp_parse() over the n bytes at s in a heap buffer of exactly n bytes. */
static enum httpresp_status parse_n(const char *s, size_t n)
{
    enum httpresp_status st;

    load(s, n);
    memset(&R, 0x5a, sizeof(R));
    err = "(not set)";
    st = httpresp_parse(buf, n, &R, &err);
    if (memcmp(buf, orig, n) != 0) {
        CHECK(!"the buffer is not written");
        show("written into");
    }
    return st;
}

/* The n bytes at s are an accepted head; 1 if so (then R holds it). */
static int ok_n(const char *s, size_t n)
{
    enum httpresp_status st = parse_n(s, n);

    CHECK_EQ_U64((uint64_t)(int64_t)st, (uint64_t)(int64_t)HTTPRESP_DONE);
    if (st != HTTPRESP_DONE) {
        show("not accepted");
        if (st == HTTPRESP_BAD)
            fprintf(stderr, "  %s\n", err ? err : "(null)");
        return 0;
    }
    CHECK(err == NULL);
    CHECK(R.head_len >= 14 && R.head_len <= n && R.head_len <= HTTPRESP_HEAD_MAX);
    if (R.head_len > n || R.head_len < 2)
        return 0;
    CHECK(R.status >= 100 && R.status <= 599);
    CHECK(R.minor == 0 || R.minor == 1);
    CHECK(R.keep_alive == 0 || R.keep_alive == 1);
    CHECK(R.has_length == 0 || R.has_length == 1);
    CHECK(R.has_length || R.content_length == 0);
    CHECK(R.retry_after_s >= -1 && R.retry_after_s <= 86400);
    /* the head ends with an empty line */
    CHECK(unit_ends_head(orig, R.head_len));
    return 1;
}

static int ok(const char *s)
{
    return ok_n(s, strlen(s));
}

/* The n bytes at s are incomplete: MORE. */
static void more_n(const char *s, size_t n)
{
    enum httpresp_status st = parse_n(s, n);

    CHECK_EQ_U64((uint64_t)(int64_t)st, (uint64_t)(int64_t)HTTPRESP_MORE);
    if (st != HTTPRESP_MORE) {
        show("not MORE");
        if (st == HTTPRESP_BAD)
            fprintf(stderr, "  %s\n", err ? err : "(null)");
    }
}

static void more(const char *s)
{
    more_n(s, strlen(s));
}

/* The n bytes at s are refused with an error containing msg (NULL: any). */
static void bad_n(const char *s, size_t n, const char *msg)
{
    enum httpresp_status st = parse_n(s, n);

    CHECK_EQ_U64((uint64_t)(int64_t)st, (uint64_t)(int64_t)HTTPRESP_BAD);
    CHECK(err != NULL && err[0] != '\0');
    if (msg && err)
        CHECK_STR_CONTAINS(err, msg);
    if (st != HTTPRESP_BAD || err == NULL || (msg && !strstr(err, msg)))
        show("not refused as expected");
}

static void bad(const char *s, const char *msg)
{
    bad_n(s, strlen(s), msg);
}

/* ---- the status line ---- */

static void test_status_line(void)
{
    static const char resp[] = "HTTP/1.1 200 OK\r\n\r\n";

    if (ok(resp)) {
        CHECK_EQ_U64((uint64_t)R.status, 200);
        CHECK_EQ_U64((uint64_t)R.minor, 1);
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
        CHECK_EQ_U64((uint64_t)R.has_length, 0);
        CHECK_EQ_U64(R.content_length, 0);
        CHECK_EQ_U64((uint64_t)(int64_t)R.retry_after_s, (uint64_t)(int64_t)-1);
        CHECK_EQ_U64(R.head_len, sizeof(resp) - 1);
    }
    /* an answer of idpoold --api */
    if (ok("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
           "Content-Length: 63\r\nRetry-After: 2\r\nConnection: keep-alive\r\n\r\n")) {
        CHECK_EQ_U64((uint64_t)R.status, 429);
        CHECK_EQ_U64((uint64_t)R.has_length, 1);
        CHECK_EQ_U64(R.content_length, 63);
        CHECK_EQ_U64((uint64_t)R.retry_after_s, 2);
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
        CHECK_EQ_U64(R.head_len, buf_len);
    }
    /* HTTP/1.0 */
    if (ok("HTTP/1.0 404 Not Found\r\n\r\n")) {
        CHECK_EQ_U64((uint64_t)R.status, 404);
        CHECK_EQ_U64((uint64_t)R.minor, 0);
        CHECK_EQ_U64((uint64_t)R.keep_alive, 0);
    }
    /* the bounds of the code */
    if (ok("HTTP/1.1 100 Continue\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.status, 100);
    if (ok("HTTP/1.1 599 x\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.status, 599);
    /* the reason phrase: missing, empty, or any bytes */
    if (ok("HTTP/1.1 204\r\n\r\n")) {
        CHECK_EQ_U64((uint64_t)R.status, 204);
        CHECK_EQ_U64(R.head_len, 16);
    }
    if (ok("HTTP/1.1 204 \r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.status, 204);
    if (ok("HTTP/1.1 503 Service \t Unavailable \xc3\xa9\xff\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.status, 503);
    if (ok("HTTP/1.1 200 200 OK HTTP/1.1\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.status, 200);
    /* bare LF line ends, and mixed */
    if (ok("HTTP/1.1 200 OK\n\n")) {
        CHECK_EQ_U64((uint64_t)R.status, 200);
        CHECK_EQ_U64(R.head_len, 17);
    }
    if (ok("HTTP/1.1 200 OK\nContent-Length: 1\r\n\n"))
        CHECK_EQ_U64(R.content_length, 1);
    if (ok("HTTP/1.1 200 OK\r\nContent-Length: 1\n\r\n"))
        CHECK_EQ_U64(R.content_length, 1);
}

static void test_status_line_errors(void)
{
    static const char *const bads[] = {
        "\r\n\r\n",
        "\n\n",
        "\r\nHTTP/1.1 200 OK\r\n\r\n", /* no empty lines before the status line */
        " HTTP/1.1 200 OK\r\n\r\n",
        "HTTP/1.1 200\r\r\n\r\n",
        "HTTP/1.1 20\r\n\r\n",
        "HTTP/1.1 2\r\n\r\n",
        "HTTP/1.1\r\n\r\n",
        "HTTP/1.1 \r\n\r\n",
        "HTTP/1.1 99 OK\r\n\r\n",
        "HTTP/1.1 099 OK\r\n\r\n",
        "HTTP/1.1 000 OK\r\n\r\n",
        "HTTP/1.1 600 OK\r\n\r\n",
        "HTTP/1.1 999 OK\r\n\r\n",
        "HTTP/1.1 1000 OK\r\n\r\n",
        "HTTP/1.1 2000\r\n\r\n",
        "HTTP/1.1 20x OK\r\n\r\n",
        "HTTP/1.1 +20 OK\r\n\r\n",
        "HTTP/1.1 -20 OK\r\n\r\n",
        "HTTP/1.1  200 OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "HTTP/1.1 200\tOK\r\n\r\n",
        "HTTP/1.1\t200 OK\r\n\r\n",
        "HTTP/1.2 200 OK\r\n\r\n",
        "HTTP/1.9 200 OK\r\n\r\n",
        "HTTP/1.x 200 OK\r\n\r\n",
        "HTTP/1.10 200 OK\r\n\r\n",
        "HTTP/1.  200 OK\r\n\r\n",
        "HTTP/2.0 200 OK\r\n\r\n",
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/0.9 200 OK\r\n\r\n",
        "HTTP/11 200 OK\r\n\r\n",
        "http/1.1 200 OK\r\n\r\n",
        "Http/1.1 200 OK\r\n\r\n",
        "ICY 200 OK\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",
        "<html><body>hello</body></html>\n\n",
        "SSH-2.0-OpenSSH_9.2p1 Debian\r\n\r\n",
    };

    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++)
        bad(bads[i], "not an HTTP/1.x status line");
    /* judged when the status line is complete, before the head is */
    bad("HTTP/2.0 200 OK\r\n", "status line");
    bad("HTTP/1.1 600 x\n", "status line");
}

/* ---- Connection and keep-alive ---- */

/* The head "HTTP/1.<minor> 200 OK" + fields + empty line keeps the connection alive: want. */
static void keep(int minor, const char *fields, int want)
{
    char s[512];

    snprintf(s, sizeof(s), "HTTP/1.%d 200 OK\r\n%s\r\n", minor, fields);
    if (ok(s)) {
        CHECK_EQ_U64((uint64_t)R.minor, (uint64_t)minor);
        CHECK_EQ_U64((uint64_t)R.keep_alive, (uint64_t)want);
        if (R.keep_alive != want)
            show("keep_alive");
    }
}

static void test_keep_alive(void)
{
    /* the defaults */
    keep(1, "", 1);
    keep(0, "", 0);
    /* HTTP/1.1: close ends it, wherever it is in the list and in which case */
    keep(1, "Connection: close\r\n", 0);
    keep(1, "connection: Close\r\n", 0);
    keep(1, "CONNECTION:CLOSE\r\n", 0);
    keep(1, "Connection: \t close \t\r\n", 0);
    keep(1, "Connection: keep-alive\r\n", 1);
    keep(1, "Connection: keep-alive, close\r\n", 0);
    keep(1, "Connection: close, keep-alive\r\n", 0);
    keep(1, "Connection: Upgrade , Close\r\n", 0);
    keep(1, "Connection: ,,close,,\r\n", 0);
    keep(1, "Connection: keep-alive\r\nConnection: close\r\n", 0);
    keep(1, "Connection: close\r\nConnection: keep-alive\r\n", 0);
    /* not the token */
    keep(1, "Connection: closed\r\n", 1);
    keep(1, "Connection: x-close\r\n", 1);
    keep(1, "Connection: clo se\r\n", 1);
    keep(1, "Connection: close-keep-alive\r\n", 1);
    keep(1, "Connection: \"close\"\r\n", 1);
    keep(1, "Connection:\r\n", 1);
    keep(1, "Connection: ,\r\n", 1);
    keep(1, "X-Connection: close\r\n", 1);
    keep(1, "Proxy-Connection: close\r\n", 1);
    /* HTTP/1.0: only with keep-alive, and close still wins */
    keep(0, "Connection: keep-alive\r\n", 1);
    keep(0, "Connection: Keep-Alive\r\n", 1);
    keep(0, "Connection: Upgrade, Keep-Alive\r\n", 1);
    keep(0, "Connection: ,, \t keep-alive \t ,,\r\n", 1);
    keep(0, "Connection: keep-alive, close\r\n", 0);
    keep(0, "Connection: keep-alive\r\nConnection: close\r\n", 0);
    keep(0, "Connection: keep-alived\r\n", 0);
    keep(0, "Connection: Upgrade\r\n", 0);
    keep(0, "Keep-Alive: timeout=5, max=100\r\n", 0);
    keep(0, "X: keep-alive\r\n", 0);
}

/* ---- header fields ---- */

static void test_header_names(void)
{
    /* names are case-insensitive, OWS around the value is dropped */
    if (ok("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"))
        CHECK_EQ_U64(R.content_length, 5);
    if (ok("HTTP/1.1 200 OK\r\nCONTENT-LENGTH:5\r\n\r\n"))
        CHECK_EQ_U64(R.content_length, 5);
    if (ok("HTTP/1.1 200 OK\r\nContent-length: \t 5 \t \r\n\r\n"))
        CHECK_EQ_U64(R.content_length, 5);
    if (ok("HTTP/1.1 200 OK\nContent-Length:\t5\t\n\n"))
        CHECK_EQ_U64(R.content_length, 5);
    /* fields not read are skipped, whatever their token name or value */
    if (ok("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
           "Date: Wed, 21 Oct 2015 07:28:00 GMT\r\nX!#$%&'*+-.^_`|~09: v\r\nX-Empty:\r\n"
           "X-Obs: \xe9t\xe9\t\r\nContent-Lengthy: x\r\nX-Content-Length: x\r\n\r\n")) {
        CHECK_EQ_U64((uint64_t)R.has_length, 0);
        CHECK_EQ_U64((uint64_t)R.keep_alive, 1);
    }
    /* not names */
    bad("HTTP/1.1 200 OK\r\n: x\r\n\r\n", "without 'name:'");
    bad("HTTP/1.1 200 OK\r\nContent-Length 5\r\n\r\n", "without 'name:'");
    bad("HTTP/1.1 200 OK\r\nX\r\n\r\n", "without 'name:'");
    bad("HTTP/1.1 200 OK\r\nX: y\r\n\r\r\n\r\n", "without 'name:'");
    bad("HTTP/1.1 200 OK\r\nContent Length: 5\r\n\r\n", "bad header name");
    bad("HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n", "bad header name");
    bad("HTTP/1.1 200 OK\r\nContent-Length\t: 5\r\n\r\n", "bad header name");
    bad("HTTP/1.1 200 OK\r\nBad(name): x\r\n\r\n", "bad header name");
    bad("HTTP/1.1 200 OK\r\nX/Y: x\r\n\r\n", "bad header name");
    bad("HTTP/1.1 200 OK\r\n\"X\": x\r\n\r\n", "bad header name");
    bad("HTTP/1.1 200 OK\r\nX{}: x\r\n\r\n", "bad header name");
    bad("HTTP/1.1 200 OK\r\nH\xc3\xa9: x\r\n\r\n", "bad header name");
    bad("HTTP/1.1 200 OK\r\nX\x7f: x\r\n\r\n", "bad header name");
    bad("HTTP/1.1 200 OK\r\nX\x01: x\r\n\r\n", "bad header name");
    bad("HTTP/1.1 200 OK\r\nX\rY: x\r\n\r\n", "bad header name");
    bad_n("HTTP/1.1 200 OK\r\nX\0Y: x\r\n\r\n", 27, "bad header name");
    /* obs-fold, and whitespace before the first field */
    bad("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", "obs-fold");
    bad("HTTP/1.1 200 OK\r\nX: a\r\n\tb\r\n\r\n", "obs-fold");
    bad("HTTP/1.1 200 OK\nX: a\n b\n\n", "obs-fold");
    bad("HTTP/1.1 200 OK\r\n Content-Length: 5\r\n\r\n", "obs-fold");
    bad("HTTP/1.1 200 OK\r\n \r\n\r\n", "obs-fold");
    bad("HTTP/1.1 200 OK\r\n\t\r\n\r\n", "obs-fold");
}

static void test_content_length(void)
{
    static const struct {
        const char *v;
        uint64_t n;
    } good[] = {
        {"0", 0}, {"5", 5}, {"63", 63}, {"005", 5}, {"1048576", 1048576}, {"0000000000", 0},
    };
    static const char *const bads[] = {
        "",
        " ",
        "1048577",
        "2000000",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999",
        "100000000000000000000",
        "000000000000000000005",
        "5a",
        "a5",
        "+5",
        "-5",
        "-0",
        "0x10",
        "5.0",
        "5 5",
        "5,5",
        "5, 5",
        "\"5\"",
        "\xef\xbc\x95", /* FULLWIDTH DIGIT FIVE */
    };
    char s[256];

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        snprintf(s, sizeof(s), "HTTP/1.1 200 OK\r\nContent-Length: %s\r\n\r\n", good[i].v);
        if (ok(s)) {
            CHECK_EQ_U64((uint64_t)R.has_length, 1);
            CHECK_EQ_U64(R.content_length, good[i].n);
        }
    }
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
        snprintf(s, sizeof(s), "HTTP/1.1 200 OK\r\nContent-Length: %s\r\n\r\n", bads[i]);
        bad(s, "Content-Length");
    }
    bad("HTTP/1.1 200 OK\r\nContent-Length: 1048577\r\n\r\n", "too large");
    /* the same value twice is one length; two values are a broken answer */
    if (ok("HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 005\r\n\r\nhello")) {
        CHECK_EQ_U64(R.content_length, 5);
        CHECK_EQ_U64(R.head_len, buf_len - 5);
    }
    if (ok("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n"))
        CHECK_EQ_U64(R.content_length, 0);
    bad("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", "conflicting");
    bad("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: 1\r\n\r\n", "conflicting");
    bad("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: x\r\n\r\n", "Content-Length");
}

static void test_transfer_encoding(void)
{
    static const char *const bads[] = {
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTRANSFER-ENCODING:\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\n",
        "HTTP/1.0 200 OK\nTransfer-Encoding: chunked\n\n0\r\n\r\n",
    };

    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++)
        bad(bads[i], "Transfer-Encoding");
    /* other names that start alike are other fields */
    if (ok("HTTP/1.1 200 OK\r\nTransfer-Encodings: chunked\r\nTE: trailers\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.has_length, 0);
}

static void test_retry_after(void)
{
    static const struct {
        const char *v;
        int s;
    } cases[] = {
        {"0", 0},
        {"2", 2},
        {"30", 30},
        {" \t 7 \t ", 7},
        {"007", 7},
        {"86400", 86400},
        {"86401", -1},
        {"4294967296", -1},
        {"99999999999999999999999", -1},
        {"Wed, 21 Oct 2015 07:28:00 GMT", -1},
        {"Sun, 06 Nov 1994 08:49:37 GMT", -1},
        {"-1", -1},
        {"+5", -1},
        {"1.5", -1},
        {"5s", -1},
        {"5 5", -1},
        {"", -1},
    };
    char s[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(s, sizeof(s), "HTTP/1.1 503 Unavailable\r\nRetry-After: %s\r\n\r\n", cases[i].v);
        if (ok(s)) {
            CHECK_EQ_U64((uint64_t)(int64_t)R.retry_after_s, (uint64_t)(int64_t)cases[i].s);
            if (R.retry_after_s != cases[i].s)
                show("Retry-After");
        }
    }
    if (ok("HTTP/1.1 429 x\r\nretry-after: 3\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.retry_after_s, 3);
    if (ok("HTTP/1.1 429 x\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)(int64_t)R.retry_after_s, (uint64_t)(int64_t)-1);
    /* the last one counts (a date after a number: unknown) */
    if (ok("HTTP/1.1 429 x\r\nRetry-After: 3\r\nRetry-After: 4\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)R.retry_after_s, 4);
    if (ok("HTTP/1.1 429 x\r\nRetry-After: 3\r\nRetry-After: soon\r\n\r\n"))
        CHECK_EQ_U64((uint64_t)(int64_t)R.retry_after_s, (uint64_t)(int64_t)-1);
}

/* ---- incomplete heads, the body after the head, the limit ---- */

/* Every proper prefix of a valid head is incomplete, and never DONE early. */
static void test_incomplete(void)
{
    static const char *const heads[] = {
        "HTTP/1.1 200 OK\r\n\r\n",
        "HTTP/1.1 200 OK\n\n",
        "HTTP/1.1 204\r\n\r\n",
        ("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 42\r\n"
         "Connection: keep-alive\r\nRetry-After: 5\r\n\r\n"),
        "HTTP/1.1 429 Too Many Requests\nContent-Length: 0\r\nX:\n\r\n",
    };

    for (size_t k = 0; k < sizeof(heads) / sizeof(heads[0]); k++) {
        size_t n = strlen(heads[k]);
        size_t want_len = 0;

        if (ok_n(heads[k], n)) {
            CHECK_EQ_U64(R.head_len, n);
            want_len = R.head_len;
        }
        for (size_t i = 0; i < n; i++)
            more_n(heads[k], i);
        /* with a body after it: the same head at every length from its end on */
        {
            char s[512];
            static const char body[] = "12\n34\r\n\r\n\n{\"error\":1}HTTP/1.1 200 OK\r\n\r\n";
            size_t m = sizeof(body) - 1;

            memcpy(s, heads[k], n);
            memcpy(s + n, body, m);
            for (size_t i = n; i <= n + m; i++)
                if (ok_n(s, i))
                    CHECK_EQ_U64(R.head_len, want_len);
        }
    }
    /* an invalid head is not judged before its line is complete */
    more("HTTP/2.0 200 OK");
    more("HTTP/1.1 20");
    more("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked");
    more("HTTP/1.1 200 OK\r\nContent-Length: 99999999");
    more("HTTP/1.1 200 OK\r\nX: a\r\n b");
    /* a CR alone does not end a line */
    more("HTTP/1.1 200 OK\r");
    more("HTTP/1.1 200 OK\r\r");
    more("HTTP/1.1 200 OK\r\n\r");
    more("HTTP/1.1 200 OK\r\nX: y\r\r\r\r");
    more("");
}

static void test_head_len(void)
{
    static const char head[] =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\n";
    char s[256];

    /* the body follows; it may hold empty lines, NULs, another head */
    snprintf(s, sizeof(s), "%s1\n2\n3\n", head);
    if (ok(s)) {
        CHECK_EQ_U64(R.head_len, sizeof(head) - 1);
        CHECK_EQ_U64(R.content_length, 6);
        CHECK(memcmp(buf + R.head_len, "1\n2\n3\n", 6) == 0);
    }
    snprintf(s, sizeof(s), "%s\r\n\r\n\n\nHTTP/1.1 500 x\r\n\r\n", head);
    if (ok(s))
        CHECK_EQ_U64(R.head_len, sizeof(head) - 1);
    memcpy(s, head, sizeof(head) - 1);
    memcpy(s + sizeof(head) - 1, "\0\0\r\n\0\0", 6);
    if (ok_n(s, sizeof(head) - 1 + 6))
        CHECK_EQ_U64(R.head_len, sizeof(head) - 1);
    /* the empty line's forms */
    if (ok("HTTP/1.1 200 OK\nA: b\n\nbody"))
        CHECK_EQ_U64(R.head_len, buf_len - 4);
    if (ok("HTTP/1.1 200 OK\r\nA: b\n\r\nbody"))
        CHECK_EQ_U64(R.head_len, buf_len - 4);
    if (ok("HTTP/1.1 200 OK\nA: b\r\n\nbody"))
        CHECK_EQ_U64(R.head_len, buf_len - 4);
    /* a body that starts with a CR: not part of the head */
    if (ok("HTTP/1.1 200 OK\n\n\r\n"))
        CHECK_EQ_U64(R.head_len, 17);
}

/* A head of exactly n bytes: "HTTP/1.1 200 OK<eol>X: vvv...<eol><eol>" (n >= 26). */
static char *head_of(size_t n, const char *eol)
{
    return unit_head_of("HTTP/1.1 200 OK", n, eol);
}

static void test_head_max(void)
{
    static const char *const eols[] = {"\r\n", "\n"};

    CHECK_EQ_U64(HTTPRESP_HEAD_MAX, 8192);
    for (size_t k = 0; k < 2; k++) {
        char *s = head_of(HTTPRESP_HEAD_MAX, eols[k]), *t = head_of(HTTPRESP_HEAD_MAX + 1, eols[k]);
        char *u = malloc(HTTPRESP_HEAD_MAX + 100);

        if (u == NULL)
            exit(1);
        /* exactly at the limit */
        if (ok_n(s, HTTPRESP_HEAD_MAX))
            CHECK_EQ_U64(R.head_len, HTTPRESP_HEAD_MAX);
        /* with a body after it: only the head counts */
        memcpy(u, s, HTTPRESP_HEAD_MAX);
        memset(u + HTTPRESP_HEAD_MAX, 'b', 100);
        if (ok_n(u, HTTPRESP_HEAD_MAX + 100))
            CHECK_EQ_U64(R.head_len, HTTPRESP_HEAD_MAX);
        /* one byte short of its end: incomplete */
        more_n(s, HTTPRESP_HEAD_MAX - 1);
        /* one byte over */
        bad_n(t, HTTPRESP_HEAD_MAX + 1, "8 KiB");
        /* as many bytes as the limit and no end yet: refused, not MORE */
        bad_n(t, HTTPRESP_HEAD_MAX, "8 KiB");
        more_n(t, HTTPRESP_HEAD_MAX - 1);
        /* a longer buffer of it */
        memcpy(u, t, HTTPRESP_HEAD_MAX + 1);
        memset(u + HTTPRESP_HEAD_MAX + 1, 'b', 99);
        bad_n(u, HTTPRESP_HEAD_MAX + 100, "8 KiB");
        /* a status line that never ends */
        memset(u, 'x', HTTPRESP_HEAD_MAX + 100);
        memcpy(u, "HTTP/1.1 200 ", 13);
        more_n(u, HTTPRESP_HEAD_MAX - 1);
        bad_n(u, HTTPRESP_HEAD_MAX, "8 KiB");
        bad_n(u, HTTPRESP_HEAD_MAX + 100, "8 KiB");
        free(s);
        free(t);
        free(u);
    }
    /* smaller heads of every size near the interesting ones */
    for (size_t n = 26; n < 300; n += 7) {
        char *s = head_of(n, "\r\n");
        if (ok_n(s, n))
            CHECK_EQ_U64(R.head_len, n);
        more_n(s, n - 1);
        free(s);
    }
}

/* ---- httpresp_ids ---- */

static long n_ids;
static uint64_t *ids;

/* httpresp_ids() over s (exactly its bytes) into a heap array of exactly cap IDs. */
static long ids_n(const char *s, size_t n, size_t cap)
{
    load(s, n);
    free(ids);
    ids = malloc(cap ? cap * sizeof(*ids) : 1);
    if (ids == NULL)
        exit(1);
    n_ids = httpresp_ids(buf, n, ids, cap);
    if (memcmp(buf, orig, n) != 0)
        CHECK(!"the body is not written");
    return n_ids;
}

static long ids_of(const char *s, size_t cap)
{
    return ids_n(s, strlen(s), cap);
}

/* s is not a list of IDs (with room for many). */
static void ids_bad(const char *s)
{
    CHECK_EQ_U64((uint64_t)ids_of(s, 100), (uint64_t)(int64_t)-1);
    if (n_ids != -1)
        show("not refused");
}

static void test_ids(void)
{
    static const char *const bads[] = {
        "1",
        "1\n2",
        "1\r",
        "1\n2\r",
        "\n",
        "\r\n",
        "1\n\n",
        "1\n\r\n",
        "\n1\n",
        "a\n",
        "1a\n",
        " 1\n",
        "1 \n",
        "1\t\n",
        "+1\n",
        "-1\n",
        "0x1\n",
        "1,2\n",
        "1.0\n",
        "1\r\r\n",
        "1\r2\n",
        "\r1\n",
        "18446744073709551616\n",
        "18446744073709551620\n",
        "99999999999999999999\n",
        "100000000000000000000\n",
        "1\n18446744073709551616\n",
        "\xef\xbc\x91\n",
    };

    /* an empty body: no IDs */
    CHECK_EQ_U64((uint64_t)ids_n("", 0, 0), 0);
    CHECK_EQ_U64((uint64_t)ids_n("", 0, 5), 0);
    /* one, many */
    if (ids_of("1\n", 1) == 1)
        CHECK_EQ_U64(ids[0], 1);
    else
        CHECK(!"one ID");
    if (ids_of("0\n", 1) == 1)
        CHECK_EQ_U64(ids[0], 0);
    else
        CHECK(!"ID 0");
    if (ids_of("10\n20\n30\n", 3) == 3) {
        CHECK_EQ_U64(ids[0], 10);
        CHECK_EQ_U64(ids[1], 20);
        CHECK_EQ_U64(ids[2], 30);
    } else {
        CHECK(!"three IDs");
    }
    /* room for more than come */
    CHECK_EQ_U64((uint64_t)ids_of("10\n20\n30\n", 1000), 3);
    /* CRLF, and mixed */
    if (ids_of("7\r\n8\r\n", 2) == 2) {
        CHECK_EQ_U64(ids[0], 7);
        CHECK_EQ_U64(ids[1], 8);
    } else {
        CHECK(!"CRLF");
    }
    if (ids_of("7\n8\r\n9\n", 3) == 3)
        CHECK_EQ_U64(ids[2], 9);
    else
        CHECK(!"mixed line ends");
    /* the bounds of uint64 */
    if (ids_of("18446744073709551615\n18446744073709551614\r\n", 2) == 2) {
        CHECK_EQ_U64(ids[0], UINT64_MAX);
        CHECK_EQ_U64(ids[1], UINT64_MAX - 1);
    } else {
        CHECK(!"UINT64_MAX");
    }
    if (ids_of("9223372036854775808\n", 1) == 1)
        CHECK_EQ_U64(ids[0], (uint64_t)INT64_MAX + 1);
    else
        CHECK(!"2^63");
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++)
        ids_bad(bads[i]);
    /* a NUL in a line */
    CHECK_EQ_U64((uint64_t)ids_n("1\0\n", 3, 5), (uint64_t)(int64_t)-1);
    CHECK_EQ_U64((uint64_t)ids_n("1\n\0", 3, 5), (uint64_t)(int64_t)-1);
    /* more than cap */
    CHECK_EQ_U64((uint64_t)ids_of("1\n2\n3\n", 2), (uint64_t)(int64_t)-1);
    CHECK_EQ_U64((uint64_t)ids_of("1\n", 0), (uint64_t)(int64_t)-1);
    CHECK_EQ_U64((uint64_t)ids_of("1\n2\n3\n", 3), 3);
    /* a full answer: 1,000 IDs of 20 digits */
    {
        size_t n = 1000 * 21;
        char *s = malloc(n + 1);
        long k;

        if (s == NULL)
            exit(1);
        for (size_t i = 0; i < 1000; i++)
            snprintf(s + 21 * i, 22, "%020" PRIu64 "\n", (uint64_t)UINT64_MAX - i * 7919);
        k = ids_n(s, n, 1000);
        CHECK_EQ_U64((uint64_t)k, 1000);
        if (k == 1000) {
            CHECK_EQ_U64(ids[0], UINT64_MAX);
            CHECK_EQ_U64(ids[999], UINT64_MAX - 999 * 7919);
        }
        CHECK_EQ_U64((uint64_t)ids_n(s, n, 999), (uint64_t)(int64_t)-1);
        CHECK_EQ_U64((uint64_t)ids_n(s, n - 1, 1000), (uint64_t)(int64_t)-1);
        free(s);
    }
}

/* ---- httpresp_error ---- */

static char *code, *msg;
static int err_rc;

/*
 * httpresp_error() over s (exactly its bytes) into heap buffers of exactly
 * code_len and msg_len bytes (NULL when 0).
 */
static int error_n(const char *s, size_t n, size_t code_len, size_t msg_len)
{
    load(s, n);
    free(code);
    free(msg);
    code = code_len ? malloc(code_len) : NULL;
    msg = msg_len ? malloc(msg_len) : NULL;
    if ((code_len && code == NULL) || (msg_len && msg == NULL))
        exit(1);
    if (code)
        memset(code, 'c', code_len);
    if (msg)
        memset(msg, 'm', msg_len);
    err_rc = httpresp_error(buf, n, code, code_len, msg, msg_len);
    CHECK(err_rc == 0 || err_rc == -1);
    CHECK(code_len == 0 || memchr(code, '\0', code_len) != NULL);
    CHECK(msg_len == 0 || memchr(msg, '\0', msg_len) != NULL);
    if (err_rc < 0) {
        CHECK(code_len == 0 || code[0] == '\0');
        CHECK(msg_len == 0 || msg[0] == '\0');
    }
    return err_rc;
}

static int error_of(const char *s)
{
    return error_n(s, strlen(s), 32, 200);
}

static void test_error(void)
{
    static const char *const bads[] = {
        "",
        " ",
        "{}",
        "[]",
        "null",
        "\"IDPOOL_RATE\"",
        "not json",
        "<html><body>502 Bad Gateway</body></html>",
        "{\"error\":\"IDPOOL_RATE\"}",
        "{\"message\":\"m\"}",
        "{\"error\":1,\"message\":\"m\"}",
        "{\"error\":\"IDPOOL_RATE\",\"message\":null}",
        "{\"error\":\"IDPOOL_RATE\",\"message\":[\"m\"]}",
        "{\"error\":{\"code\":\"IDPOOL_RATE\"},\"message\":\"m\"}",
        "{\"error\":true,\"message\":\"m\"}",
        "{\"Error\":\"IDPOOL_RATE\",\"Message\":\"m\"}",
        "[{\"error\":\"IDPOOL_RATE\",\"message\":\"m\"}]",
        "{\"error\":\"IDPOOL_RATE\",\"message\":\"m\"",
        "{\"error\":\"IDPOOL_RATE\",\"message\":\"m",
        "{\"error\":\"IDPOOL_RATE\",\"message\":",
        "{\"error\":\"IDPOOL_RATE\",",
        "{\"error\":'IDPOOL_RATE',\"message\":\"m\"}",
        "{error:\"IDPOOL_RATE\",message:\"m\"}",
    };

    if (error_of("{\"error\":\"IDPOOL_RATE\",\"message\":\"over 100 IDs/s, retry in 200 ms\"}") ==
        0) {
        CHECK_STR(code, "IDPOOL_RATE");
        CHECK_STR(msg, "over 100 IDs/s, retry in 200 ms");
    } else {
        CHECK(!"a good error body");
    }
    /* other fields, other orders, whitespace, escapes */
    if (error_of(" \r\n{ \"message\" : \"caf\\u00e9 \\\"x\\\"\\n\", \"status\": 429,\n"
                 "\"extra\":{\"error\":\"no\"}, \"error\" : \"IDPOOL_EMPTY\" }\n") == 0) {
        CHECK_STR(code, "IDPOOL_EMPTY");
        CHECK_STR(msg, "caf\xc3\xa9 \"x\"\n");
    } else {
        CHECK(!"extra fields");
    }
    if (error_of("{\"error\":\"\",\"message\":\"\"}") == 0) {
        CHECK_STR(code, "");
        CHECK_STR(msg, "");
    } else {
        CHECK(!"empty strings");
    }
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
        CHECK_EQ_U64((uint64_t)(int64_t)error_of(bads[i]), (uint64_t)(int64_t)-1);
        if (err_rc != -1)
            fprintf(stderr, "  accepted: %s\n", bads[i]);
    }
    /* an empty body: nothing to read, not even a byte */
    CHECK_EQ_U64((uint64_t)(int64_t)error_n("", 0, 32, 200), (uint64_t)(int64_t)-1);
    /* only the first len bytes are the body */
    {
        static const char body[] = "{\"error\":\"IDPOOL_AUTH\",\"message\":\"no token\"}";
        size_t n = sizeof(body) - 1;

        CHECK_EQ_U64((uint64_t)(int64_t)error_n(body, n - 1, 32, 200), (uint64_t)(int64_t)-1);
        CHECK_EQ_U64((uint64_t)(int64_t)error_n(body, 1, 32, 200), (uint64_t)(int64_t)-1);
        /* truncation to small buffers, always NUL-terminated */
        if (error_n(body, n, 5, 4) == 0) {
            CHECK_STR(code, "IDPO");
            CHECK_STR(msg, "no ");
        } else {
            CHECK(!"truncated");
        }
        if (error_n(body, n, 1, 1) == 0) {
            CHECK_STR(code, "");
            CHECK_STR(msg, "");
        } else {
            CHECK(!"truncated to nothing");
        }
        if (error_n(body, n, 12, 9) == 0) {
            CHECK_STR(code, "IDPOOL_AUTH");
            CHECK_STR(msg, "no token");
        } else {
            CHECK(!"exact sizes");
        }
        /* no buffers at all */
        CHECK_EQ_U64((uint64_t)(int64_t)error_n(body, n, 0, 0), 0);
        CHECK_EQ_U64((uint64_t)(int64_t)error_n("x", 1, 0, 0), (uint64_t)(int64_t)-1);
    }
    /* a long message: cut at the buffer */
    {
        char body[1200];
        int n =
            snprintf(body, sizeof(body), "{\"error\":\"IDPOOL_EPOCH\",\"message\":\"%0999d\"}", 7);

        if (error_n(body, (size_t)n, 32, 200) == 0) {
            CHECK_EQ_U64(strlen(msg), 199);
            CHECK(msg[198] == '0');
        } else {
            CHECK(!"a long message");
        }
    }
}

int main(void)
{
    RUN(test_status_line);
    RUN(test_status_line_errors);
    RUN(test_keep_alive);
    RUN(test_header_names);
    RUN(test_content_length);
    RUN(test_transfer_encoding);
    RUN(test_retry_after);
    RUN(test_incomplete);
    RUN(test_head_len);
    RUN(test_head_max);
    RUN(test_ids);
    RUN(test_error);
    free(buf);
    free(orig);
    free(ids);
    free(code);
    free(msg);
    return unit_done();
}
