/*
 * Unit tests of the ID API's pure parts: the request parsers and the body
 * renderer (apireq.c), the secrets (token.c: generation, SHA-256, names,
 * matching) and the Redis ACL user of a direct client (acluser.c).
 *
 * Queries and form bodies are handed to apireq_count() in buffers of exactly
 * their length, without a terminating NUL, as a request body arrives: under
 * ASan (build-asan/) a read past the end is an error.
 */
#include <stdint.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "acluser.h"
#include "apireq.h"
#include "app.h"
#include "token.h"
#include "unit.h"

/* ---- apireq_path ---- */

/* 1 when path parses to exactly the key `want` (decoded, NUL-terminated). */
static int path_is(const char *path, const char *want)
{
    char key[APP_KEY_MAX + 1];
    size_t len = 0;

    memset(key, 'Z', sizeof(key));
    if (apireq_path(path, key, &len) != HTTPREQ_PATH_OK)
        return 0;
    return len == strlen(want) && strcmp(key, want) == 0;
}

static int path_bad(const char *path)
{
    char key[APP_KEY_MAX + 1];
    size_t len = 0;

    return apireq_path(path, key, &len) == HTTPREQ_PATH_NONE;
}

/* A bad percent-escape: 400, not 404. */
static int path_escape_bad(const char *path)
{
    char key[APP_KEY_MAX + 1];
    size_t len = 0;

    return apireq_path(path, key, &len) == HTTPREQ_PATH_BAD;
}

static void test_path_valid(void)
{
    char path[128], key[80];

    CHECK(path_is("/v1/ids/user", "user"));
    CHECK(path_is("/v1/ids/a", "a"));
    CHECK(path_is("/v1/ids/Order_2024.v-1", "Order_2024.v-1"));
    CHECK(path_is("/v1/ids/x-", "x-"));     /* '-' only not first */
    CHECK(path_is("/v1/ids/a..b", "a..b")); /* only "." and ".." are path segments */
    CHECK(path_is("/v1/ids/...", "..."));
    CHECK(path_is("/v1/ids/.a", ".a"));
    CHECK(path_is("/v1/ids/_", "_"));

    /* 64 characters is the longest key */
    memset(key, 'k', 64);
    key[64] = '\0';
    snprintf(path, sizeof(path), "%s%s", APIREQ_PATH, key);
    CHECK(path_is(path, key));
    /* 65 is one too many */
    memset(key, 'k', 65);
    key[65] = '\0';
    snprintf(path, sizeof(path), "%s%s", APIREQ_PATH, key);
    CHECK(path_bad(path));
}

/* Segments are percent-decoded after the split (issue 22 item 8). */
static void test_path_decoded(void)
{
    char path[300], key[80];

    CHECK(path_is("/v1/ids/demo%5Fmono", "demo_mono"));
    CHECK(path_is("/v1/ids/%75ser", "user"));
    CHECK(path_is("/v1/ids/%75%73%65%72", "user"));
    CHECK(path_is("/v1/ids/us%65r", "user"));
    CHECK(path_is("/v1/ids/us%65R", "useR"));
    CHECK(path_is("/%76%31/%69ds/user", "user")); /* every segment */
    CHECK(path_is("/v1/ids/a%2eb", "a.b"));
    CHECK(path_bad("/v1/ids/%2E%2E")); /* "..": no key */
    CHECK(path_bad("/v1/ids/a%2Fb"));  /* "a/b": a decoded '/' is no separator */
    CHECK(path_bad("/v1/ids/a%2fb"));
    CHECK(path_bad("/v1%2Fids/user")); /* "v1/ids", "user": two segments */
    CHECK(path_bad("/v1/ids%2Fuser")); /* "v1", "ids/user" */
    CHECK(path_bad("/v1/ids/%2Fuser"));
    CHECK(path_bad("/v1/ids/us%20er")); /* "us er" */
    CHECK(path_bad("/v1/ids/%C3%A9"));  /* not a key character */
    CHECK(path_escape_bad("/v1/ids/us%zzer"));
    CHECK(path_escape_bad("/v1/ids/user%"));
    CHECK(path_escape_bad("/v1/ids/user%4"));
    CHECK(path_escape_bad("/v1/ids/us%00er"));
    CHECK(path_escape_bad("/v1/ids/%%75ser"));
    CHECK(path_escape_bad("/v%zz/ids/user")); /* anywhere in the path */
    CHECK(path_escape_bad("/nope/%G0"));
    /* 64 key characters, each encoded (192 bytes): a key */
    snprintf(path, sizeof(path), "%s", APIREQ_PATH);
    for (int i = 0; i < 64; i++)
        strcat(path, "%6B");
    memset(key, 'k', 64);
    key[64] = '\0';
    CHECK(path_is(path, key));
    strcat(path, "%6B"); /* 65 */
    CHECK(path_bad(path));
    /* longer than APIREQ_PATH_MAX (no key is: 210 bytes at most): nothing, not even a 400 */
    snprintf(path, sizeof(path), "%s", APIREQ_PATH);
    while (strlen(path) < APIREQ_PATH_MAX)
        strcat(path, "%zz");
    CHECK(strlen(path) > APIREQ_PATH_MAX);
    CHECK(path_bad(path));
}

static void test_path_invalid(void)
{
    CHECK(path_bad(""));
    CHECK(path_bad("/"));
    CHECK(path_bad("/v1/ids/"));
    CHECK(path_bad("/v1/ids"));
    CHECK(path_bad("/v1/idsuser"));
    CHECK(path_bad("/v1/ids//user"));
    CHECK(path_bad("/v1/ids/user/"));
    CHECK(path_bad("/v1/ids/a/b"));
    CHECK(path_bad("/v1/ids/user%20x"));
    CHECK(path_bad("/v1/ids/.."));
    CHECK(path_bad("/v1/ids/."));
    CHECK(path_bad("/v1/ids/../apps"));
    CHECK(path_bad("/v1/ids/-user"));
    CHECK(path_bad("/v1/ids/-"));
    CHECK(path_bad("/v1/ids/user?count=5")); /* the query is split off by the caller */
    CHECK(path_bad("/v1/ids/us er"));
    CHECK(path_bad("/v1/ids/us\ter"));
    CHECK(path_bad("/v1/ids/us{e}r"));
    CHECK(path_bad("/v1/ids/\xc3\xa9"));
    CHECK(path_bad("/v1/apps/user"));
    CHECK(path_bad("/v2/ids/user"));
    CHECK(path_bad("/V1/IDS/user"));
    CHECK(path_bad("v1/ids/user"));
    CHECK(path_bad("//v1/ids/user"));
    CHECK(path_bad("/v1/ids"));
    CHECK(path_bad(" /v1/ids/user"));
}

/* ---- apireq_count ---- */

static char count_err[APIREQ_ERR_MAX];

/*
 * apireq_count() over s (NULL: no query) in a heap buffer of exactly its
 * length, with no NUL after it.
 */
static int count_of(const char *s, uint64_t *v)
{
    size_t n = s ? strlen(s) : 0;
    char *q = NULL;
    int rc;

    if (s) {
        q = malloc(n ? n : 1);
        CHECK(q != NULL);
        if (q == NULL)
            return -2;
        memcpy(q, s, n);
    }
    memset(count_err, 0, sizeof(count_err));
    *v = 12345;
    rc = apireq_count(q, n, v, count_err, sizeof(count_err));
    free(q);
    return rc;
}

/* s gives count want. */
static void count_ok(const char *s, uint64_t want)
{
    uint64_t v;

    CHECK_EQ_U64((uint64_t)count_of(s, &v), 0);
    CHECK_EQ_U64(v, want);
}

/* s is refused with an error containing want. */
static void count_bad(const char *s, const char *want)
{
    uint64_t v;

    CHECK_EQ_U64((uint64_t)(int64_t)count_of(s, &v), (uint64_t)(int64_t)-1);
    CHECK_STR_CONTAINS(count_err, want);
}

static void test_count_valid(void)
{
    uint64_t v;

    count_ok(NULL, 1);
    count_ok("", 1);
    count_ok("count=5", 5);
    count_ok("count=1", 1);
    count_ok("count=100", 100);
    count_ok("count=5&", 5);
    count_ok("&&count=7", 7);
    count_ok("&count=7&&", 7);
    count_ok("&", 1);
    count_ok("&&&", 1);
    count_ok("count=0005", 5);
    count_ok("count=9999999999", 9999999999ULL); /* 10 digits */
    count_ok("count=0000000001", 1);             /* 10 digits, leading zeros */

    /* NULL with a length: no query */
    CHECK_EQ_U64((uint64_t)apireq_count(NULL, 7, &v, count_err, sizeof(count_err)), 0);
    CHECK_EQ_U64(v, 1);
    /* only len bytes are read: "count=55" cut to "count=5" */
    CHECK_EQ_U64((uint64_t)apireq_count("count=55", 7, &v, count_err, sizeof(count_err)), 0);
    CHECK_EQ_U64(v, 5);
    CHECK_EQ_U64((uint64_t)apireq_count("count=5&foo=1", 7, &v, count_err, sizeof(count_err)), 0);
    CHECK_EQ_U64(v, 5);
}

static void test_count_invalid(void)
{
    count_bad("count=0", "count must be an integer >= 1, got '0'");
    count_bad("count=-1", "got '-1'");
    count_bad("count=-0", "got '-0'");
    count_bad("count=", "got ''");
    count_bad("count", "count must be an integer >= 1");
    count_bad("count=5&count=6", "count given twice");
    count_bad("count=5&count=5", "count given twice");
    count_bad("foo=1", "unknown parameter 'foo'");
    count_bad("foo=1", "the only one is count");
    count_bad("count=5&foo=1", "unknown parameter 'foo'");
    count_bad("foo", "unknown parameter 'foo'");
    count_bad("=5", "unknown parameter ''");
    count_bad("Count=5", "unknown parameter 'Count'");
    count_bad("counts=5", "unknown parameter 'counts'");
    count_bad("coun=5", "unknown parameter 'coun'");
    count_bad("c%6Funts=5", "unknown parameter 'c%6Funts'"); /* quoted as sent */
    count_bad("count=1e3", "got '1e3'");
    count_bad("count=+5", "got '+5'");
    count_bad("count= 5", "got ' 5'");
    count_bad("count=5 ", "got '5 '");
    count_bad("count=5x", "got '5x'");
    count_bad("count=0x10", "got '0x10'");
    count_bad("count=5.0", "got '5.0'");
    count_bad("count=%2B5", "got '%2B5'"); /* "+5" */
    count_bad("count=%205", "got '%205'"); /* " 5" */
    count_bad("count=5=5", "got '5=5'");
    count_bad("count=10000000000", "got '10000000000'"); /* 11 digits */
    count_bad("count=00000000001", "got '00000000001'"); /* 11 digits, even as 1 */
    count_bad("count=99999999999999999999999", "got '99999999999999999999999'");
    count_bad("count=5;x=1", "got '5;x=1'");
    count_bad("count=5\ncount=6", "got '5?count=6'"); /* control bytes shown as '?' */
}

/* Names and values are percent-decoded (issue 22 item 8). */
static void test_count_decoded(void)
{
    count_ok("count=%31%30", 10);
    count_ok("count=%35", 5);
    count_ok("co%75nt=5", 5);
    count_ok("%63%6F%75%6E%74=7", 7); /* 15 bytes: the longest "count" */
    count_ok("count=1%30", 10);
    count_ok("count=%39%39%39%39%39%39%39%39%39%39", 9999999999ULL);     /* 30 bytes */
    count_bad("count=%31%30%30%30%30%30%30%30%30%30%30", "got '%31%30"); /* 11 digits */
    count_bad("%63%6F%75%6E%74%20=7", "unknown parameter");              /* "count " */
    count_bad("count=%zz", "bad percent-escape in 'count=%zz'");
    count_bad("count=%zz", "write '%' itself as %25; %00 is not allowed");
    count_bad("count=5%", "bad percent-escape in 'count=5%'");
    count_bad("count=5%3", "bad percent-escape");
    count_bad("count=%00", "bad percent-escape in 'count=%00'");
    count_bad("count=5%005", "bad percent-escape");
    count_bad("co%zznt=5", "bad percent-escape in 'co%zznt=5'");
    count_bad("count=5&x%zz=1", "bad percent-escape in 'x%zz=1'");
    count_bad("count=%31&count=2", "count given twice");
    count_bad("count=%26", "got '%26'"); /* "&" is a value, not a separator */
    count_bad("count=%3D5", "got '%3D5'");
}

static void test_count_messages(void)
{
    char big[128], want[64];
    uint64_t v;

    /* at most 32 bytes of the value are quoted */
    snprintf(big, sizeof(big), "count=%s", "0123456789abcdefghijklmnopqrstuvwxyz");
    count_bad(big, "got '0123456789abcdefghijklmnopqrstuv'");
    CHECK(strstr(count_err, "uvw") == NULL);
    /* and of a parameter's name */
    snprintf(big, sizeof(big), "%s=1", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop");
    snprintf(want, sizeof(want), "'%.32s'", big);
    count_bad(big, want);
    /* non-printable bytes of the name as '?' */
    count_bad("f\x01\x7f\xff=1", "unknown parameter 'f\?\?\?'");
    /* a NUL inside the value is not a digit */
    {
        static const char q[] = {'c', 'o', 'u', 'n', 't', '=', '5', '\0', 'x'};
        CHECK_EQ_U64(
            (uint64_t)(int64_t)apireq_count(q, sizeof(q), &v, count_err, sizeof(count_err)),
            (uint64_t)(int64_t)-1);
        CHECK_STR_CONTAINS(count_err, "got '5?x'");
    }

    /* a short error buffer: terminated, cut */
    {
        char small[8];
        memset(small, 'Z', sizeof(small));
        CHECK_EQ_U64((uint64_t)(int64_t)apireq_count("count=0", 7, &v, small, sizeof(small)),
                     (uint64_t)(int64_t)-1);
        CHECK(memchr(small, '\0', sizeof(small)) != NULL);
        CHECK(strncmp(small, "count m", 7) == 0);
    }
    /* no error buffer */
    CHECK_EQ_U64((uint64_t)(int64_t)apireq_count("count=0", 7, &v, NULL, 0), (uint64_t)(int64_t)-1);
}

/* ---- apireq_accept ---- */

/* accept gives format want (J: JSON, T: text, N: none). */
static void accept_is(const char *accept, char want)
{
    enum apireq_fmt f = apireq_accept(accept);
    char got = f == APIREQ_JSON ? 'J' : f == APIREQ_TEXT ? 'T' : f == APIREQ_NONE ? 'N' : '?';

    CHECK(got == want);
    if (got != want)
        fprintf(stderr, "  Accept: %s -> %c, expected %c\n", accept ? accept : "(none)", got, want);
}

static void test_accept(void)
{
    accept_is(NULL, 'J');
    accept_is("", 'J');
    accept_is("text/plain", 'T');
    accept_is("application/json", 'J');
    /* equal weights: the first listed, then JSON */
    accept_is("application/json, text/plain", 'J');
    accept_is("text/plain, application/json", 'T');
    accept_is("text/plain; charset=utf-8", 'T');
    accept_is("text/plain ; q=1", 'T');
    accept_is("*/*", 'J');
    accept_is("text/*", 'T');
    accept_is("application/*", 'J');
    accept_is("*/*, text/plain", 'J'); /* both weigh 1: JSON's range comes first */
    accept_is("text/html, text/plain", 'T');
    accept_is("text/html,application/xml;q=0.9,*/*;q=0.8", 'J'); /* a browser's */
    accept_is("TEXT/PLAIN", 'T');
    accept_is("Text/Plain", 'T');
    accept_is("APPLICATION/JSON, text/plain", 'J');
    accept_is("  text/plain  ", 'T');
    accept_is("\ttext/plain\t,", 'T');
    accept_is(",,, ,text/plain", 'T');
    accept_is("text/plain,", 'T');
}

/* q-values are weighed (issue 22 item 8). */
static void test_accept_q(void)
{
    accept_is("text/plain;q=0.5, application/json", 'J');
    accept_is("text/plain;q=0.5, application/json;q=0.4", 'T');
    accept_is("application/json;q=0.5, text/plain;q=0.501", 'T');
    accept_is("application/json;q=0, text/plain", 'T');
    accept_is("application/json;q=0.0, text/plain;q=0.001", 'T');
    accept_is("text/plain;Q=0.2, application/json;q=0.1", 'T'); /* Q: case-insensitive */
    accept_is("text/plain;q=1.0, application/json;q=1.000", 'T');
    accept_is("text/plain;q=0.7, application/json;q=0.7", 'T'); /* a tie: the first listed */
    accept_is("application/json;q=0.7, text/plain;q=0.7", 'J');
    accept_is("text/plain ; q=0.3 , application/json ; q=0.2", 'T');
    accept_is("text/plain;charset=utf-8;q=0.3, application/json;q=0.2", 'T');
    accept_is("text/plain;q=0.3;level=1, application/json;q=0.2", 'T');         /* after q */
    accept_is("text/plain;foo=\"a,b;q=0\";q=0.9, application/json;q=0.5", 'T'); /* quoted */
    accept_is("text/plain;foo=\"a\\\"b\";q=0.9, application/json;q=0.5", 'T');  /* \" inside */
    accept_is("text/plain;;q=0.9;, application/json;q=0.5", 'T'); /* empty parameters */
    /* the most specific range decides a type's weight, wherever it is */
    accept_is("*/*;q=0.1, text/plain", 'T');
    accept_is("text/plain, */*;q=0.1", 'T');
    accept_is("*/*;q=0.9, application/json;q=0.1", 'T'); /* text/plain by the wildcard */
    accept_is("text/*;q=0.9, text/plain;q=0.1, application/json;q=0.5", 'J');
    accept_is("text/plain;q=0.1, text/*;q=0.9, application/json;q=0.5", 'J');
    accept_is("text/plain;q=0.1, text/plain;q=0.9, application/json;q=0.5", 'J'); /* first */
    accept_is("application/*;q=0.2, */*;q=0.9", 'T');
    /* nothing acceptable: 406 */
    accept_is("text/plain;q=0", 'N');
    accept_is("application/json;q=0, text/plain;q=0", 'N');
    accept_is("application/xml", 'N');
    accept_is("text/html", 'N');
    accept_is("image/*", 'N');
    accept_is("*/*;q=0", 'N');
    accept_is("*/*;q=0, text/html", 'N');
    accept_is("text/plainx", 'N');
    accept_is("application/json;q=0, */*", 'T'); /* json excluded, the rest welcome */
    accept_is("text/*;q=0, */*;q=0.5", 'J');
    /* elements that do not parse are ignored */
    accept_is("text/plain;q=2, application/json;q=0.1", 'J');
    accept_is("text/plain;q=1.001, application/json;q=0.1", 'J');
    accept_is("text/plain;q=0.1234, application/json;q=0.1", 'J');
    accept_is("text/plain;q=.5, application/json;q=0.1", 'J');
    accept_is("text/plain;q=, application/json;q=0.1", 'J');
    accept_is("text/plain;q=x, application/json;q=0.1", 'J');
    accept_is("text/plain;q=-1, application/json;q=0.1", 'J');
    accept_is("text/plain;q=01, application/json;q=0.1", 'J');
    accept_is("text/plain;q=0.5x, application/json;q=0.1", 'J');
    accept_is("text/plain;q=\"0.5\", application/json;q=0.1", 'J'); /* quoted: not a qvalue */
    accept_is("text/plain;x, application/json;q=0.1", 'J');
    accept_is("text/plain;foo=\"open, application/json;q=0.1", 'J'); /* one element, open */
    accept_is("text/plain x, application/json;q=0.1", 'J');
    accept_is("*/plain, application/json;q=0.1", 'J');
    accept_is("text/plain;q=0.5 junk, application/json;q=0.1", 'J');
    /* a header where nothing parses is no header: anything goes */
    accept_is("text / plain", 'J');
    accept_is("foo;text/plain", 'J');
    accept_is("garbage", 'J');
    accept_is(";;;,,,;", 'J');
    accept_is("\x01\xff", 'J');
    accept_is("text/plain;q=2", 'J');
    accept_is("xtext/plain", 'N'); /* parses: a type nobody serves */
    accept_is("text/plai", 'N');
}

/* ---- apireq_bearer ---- */

/* 1 when authz gives the token want, pointing into authz. */
static int bearer_is(const char *authz, const char *want)
{
    const char *tok = NULL;
    size_t len = 0;

    if (apireq_bearer(authz, &tok, &len) != 0)
        return 0;
    return tok >= authz && tok + len <= authz + strlen(authz) && len == strlen(want) &&
           memcmp(tok, want, len) == 0;
}

static int bearer_bad(const char *authz)
{
    const char *tok = NULL;
    size_t len = 0;

    return apireq_bearer(authz, &tok, &len) == -1;
}

static void test_bearer(void)
{
    char tok[TOKEN_LEN + 1], h[80];

    CHECK(bearer_is("Bearer idp_abc", "idp_abc"));
    CHECK(bearer_is("bearer idp_abc", "idp_abc"));
    CHECK(bearer_is("BEARER idp_abc", "idp_abc"));
    CHECK(bearer_is("bEaReR x", "x"));
    CHECK(bearer_is("Bearer    idp_abc", "idp_abc"));
    CHECK(bearer_is("Bearer\tidp_abc", "idp_abc"));
    CHECK(bearer_is("Bearer idp_abc   ", "idp_abc"));
    CHECK(bearer_is("Bearer idp_abc \t", "idp_abc"));
    CHECK(bearer_is("Bearer abc=", "abc="));
    CHECK(bearer_is("Bearer abc==", "abc=="));
    CHECK(bearer_is("Bearer A-._~+/z09", "A-._~+/z09")); /* every token68 character */
    CHECK(bearer_is("Bearer -", "-"));

    CHECK(bearer_bad(NULL));
    CHECK(bearer_bad(""));
    CHECK(bearer_bad("Basic dXNlcjpwYXNz"));
    CHECK(bearer_bad("Bearer"));
    CHECK(bearer_bad("Bearer "));
    CHECK(bearer_bad("Bearer    "));
    CHECK(bearer_bad("Bearer a b"));
    CHECK(bearer_bad("Bearerxyz"));
    CHECK(bearer_bad("Bearer,xyz"));
    CHECK(bearer_bad("Bear xyz"));
    CHECK(bearer_bad("Token xyz"));
    CHECK(bearer_bad(" Bearer xyz"));
    CHECK(bearer_bad("Bearer =="));   /* padding only: no token */
    CHECK(bearer_bad("Bearer =abc")); /* '=' only at the end */
    CHECK(bearer_bad("Bearer a=b"));
    CHECK(bearer_bad("Bearer abc==x"));
    CHECK(bearer_bad("Bearer abc\""));
    CHECK(bearer_bad("Bearer \"abc\""));
    CHECK(bearer_bad("Bearer a,b"));
    CHECK(bearer_bad("Bearer a;b"));
    CHECK(bearer_bad("Bearer a%20b"));
    CHECK(bearer_bad("Bearer a\x01"));
    CHECK(bearer_bad("Bearer a\r\n"));
    CHECK(bearer_bad("Bearer \xc3\xa9"));
    CHECK(bearer_bad("Bearer a:b"));

    /* a token from token_new() is a bearer token */
    CHECK(token_new(tok) == 0);
    snprintf(h, sizeof(h), "Bearer %s", tok);
    CHECK(bearer_is(h, tok));
}

/* ---- apireq_u64 ---- */

static void u64_is(uint64_t v, const char *want)
{
    char buf[32];
    size_t n;

    memset(buf, '#', sizeof(buf));
    n = apireq_u64(v, buf);
    CHECK_EQ_U64(n, strlen(want));
    CHECK(memcmp(buf, want, strlen(want)) == 0);
    CHECK(buf[n] == '#'); /* not terminated, nothing written after */
}

static void test_u64(void)
{
    u64_is(0, "0");
    u64_is(1, "1");
    u64_is(9, "9");
    u64_is(10, "10");
    u64_is(1000000, "1000000");
    u64_is(INT64_MAX, "9223372036854775807");
    u64_is((uint64_t)INT64_MAX + 1, "9223372036854775808");
    u64_is(UINT64_MAX - 1, "18446744073709551614");
    u64_is(UINT64_MAX, "18446744073709551615"); /* 20 digits */
}

/* ---- apireq_body ---- */

#define BODY_BUF 4096

static char body_buf[BODY_BUF];

/*
 * apireq_body() into body_buf, checked against want (NULL: only the bounds)
 * and against apireq_body_max(): nothing is written past the length, which
 * is never more than the bound. The body is NUL-terminated afterwards.
 */
static size_t body_is(enum apireq_fmt fmt, const char *key, const uint64_t *ids, size_t n,
                      const char *want)
{
    size_t keylen = strlen(key), max = apireq_body_max(keylen, n), len;

    CHECK(max < BODY_BUF);
    memset(body_buf, 0xa5, sizeof(body_buf));
    len = apireq_body(body_buf, fmt, key, keylen, ids, n);
    CHECK(len <= max);
    for (size_t i = len; i < BODY_BUF; i++)
        if ((unsigned char)body_buf[i] != 0xa5) {
            CHECK(!"nothing written after the body");
            break;
        }
    if (want) {
        CHECK_EQ_U64(len, strlen(want));
        CHECK(len == strlen(want) && memcmp(body_buf, want, len) == 0);
    }
    body_buf[len < BODY_BUF ? len : BODY_BUF - 1] = '\0';
    return len;
}

static void test_body_json(void)
{
    static const uint64_t one[] = {42};
    static const uint64_t three[] = {1, 0, 9223372036854775807ULL};
    static const uint64_t big[] = {UINT64_MAX};

    body_is(APIREQ_JSON, "user", NULL, 0, "{\"app\":\"user\",\"ids\":[]}\n");
    body_is(APIREQ_JSON, "user", one, 1, "{\"app\":\"user\",\"ids\":[\"42\"]}\n");
    body_is(APIREQ_JSON, "order.v-2", three, 3,
            "{\"app\":\"order.v-2\",\"ids\":[\"1\",\"0\",\"9223372036854775807\"]}\n");
    body_is(APIREQ_JSON, "u", big, 1, "{\"app\":\"u\",\"ids\":[\"18446744073709551615\"]}\n");
}

static void test_body_text(void)
{
    static const uint64_t one[] = {42};
    static const uint64_t three[] = {1, 0, 9223372036854775807ULL};
    static const uint64_t big[] = {UINT64_MAX};

    body_is(APIREQ_TEXT, "user", NULL, 0, "");
    body_is(APIREQ_TEXT, "user", one, 1, "42\n");
    body_is(APIREQ_TEXT, "user", three, 3, "1\n0\n9223372036854775807\n");
    body_is(APIREQ_TEXT, "user", big, 1, "18446744073709551615\n");
}

/* The widest bodies (64-character key, 20-digit IDs) fit the bound; JSON parses. */
static void test_body_bound(void)
{
    uint64_t ids[100];
    char key[65];
    size_t len;
    cJSON *j, *a;

    memset(key, 'k', 64);
    key[64] = '\0';
    for (size_t i = 0; i < 100; i++)
        ids[i] = UINT64_MAX - i;
    for (size_t n = 0; n <= 100; n++) {
        len = body_is(APIREQ_JSON, key, ids, n, NULL);
        CHECK(len + 5 >= apireq_body_max(64, n)); /* the bound is tight, not far above */
        j = cJSON_ParseWithLength(body_buf, len);
        CHECK(j != NULL);
        CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "app")), key) == 0);
        a = cJSON_GetObjectItemCaseSensitive(j, "ids");
        CHECK(cJSON_IsArray(a) && (size_t)cJSON_GetArraySize(a) == n);
        for (size_t i = 0; i < n && a; i++) {
            const char *s = cJSON_GetStringValue(cJSON_GetArrayItem(a, (int)i));
            CHECK(s != NULL && strtoull(s, NULL, 10) == ids[i]);
        }
        cJSON_Delete(j);

        len = body_is(APIREQ_TEXT, key, ids, n, NULL);
        CHECK_EQ_U64(len, n * 21);
    }
    /* small IDs, small bodies */
    memset(ids, 0, sizeof(ids));
    CHECK_EQ_U64(body_is(APIREQ_TEXT, "k", ids, 100, NULL), 200);
    CHECK_EQ_U64(body_is(APIREQ_JSON, "k", ids, 100, NULL), 21 + 100 * 4 - 1);
    /* the bound grows with the key and the count */
    CHECK(apireq_body_max(10, 5) > apireq_body_max(9, 5));
    CHECK(apireq_body_max(10, 6) > apireq_body_max(10, 5));
}

/* ---- token ---- */

static int b64url(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

static void test_token_new(void)
{
    char a[TOKEN_LEN + 8], b[TOKEN_LEN + 8];
    int seen_last[256] = {0};

    memset(a, '#', sizeof(a));
    CHECK(token_new(a) == 0);
    CHECK_EQ_U64(strlen(a), TOKEN_LEN);
    CHECK_EQ_U64(TOKEN_LEN, 47);
    CHECK(strncmp(a, TOKEN_PREFIX, 4) == 0);
    CHECK(strncmp(a, "idp_", 4) == 0);
    CHECK(a[TOKEN_LEN + 1] == '#'); /* nothing written past the NUL */
    for (size_t i = 4; i < TOKEN_LEN; i++)
        CHECK(b64url(a[i]));
    CHECK(token_new(b) == 0);
    CHECK(strcmp(a, b) != 0);

    /*
     * 256 bits in 43 characters: the last one carries 4 bits and two zero
     * bits, so it is one of 16 characters; the others take all 64.
     */
    for (int k = 0; k < 200; k++) {
        CHECK(token_new(a) == 0);
        CHECK_EQ_U64(strlen(a), TOKEN_LEN);
        for (size_t i = 4; i < TOKEN_LEN; i++)
            if (!b64url(a[i])) {
                CHECK(!"base64url alphabet");
                break;
            }
        seen_last[(unsigned char)a[TOKEN_LEN - 1]] = 1;
    }
    for (int c = 0; c < 256; c++)
        if (seen_last[c])
            CHECK(strchr("AEIMQUYcgkosw048", c) != NULL);
}

static void test_token_hash(void)
{
    char hex[TOKEN_HASH_LEN + 8];

    memset(hex, '#', sizeof(hex));
    token_hash("abc", 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    CHECK(hex[TOKEN_HASH_LEN + 1] == '#');
    token_hash("", 0, hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
    token_hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
    CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
    /* n bytes, not up to a NUL */
    token_hash("abcdef", 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    token_hash("a\0c", 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") != 0);
    CHECK(token_hash_valid(hex));
}

static void test_token_hash_valid(void)
{
    char h[TOKEN_HASH_LEN + 2];

    CHECK(token_hash_valid("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    CHECK(token_hash_valid("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    CHECK(!token_hash_valid(""));
    CHECK(!token_hash_valid("abc"));
    /* upper case is not how hashes are stored */
    CHECK(!token_hash_valid("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"));
    CHECK(!token_hash_valid("Ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    /* 63 and 65 digits */
    memset(h, 'a', sizeof(h));
    h[63] = '\0';
    CHECK(!token_hash_valid(h));
    h[63] = 'a';
    h[64] = '\0';
    CHECK(token_hash_valid(h));
    h[64] = 'a';
    h[65] = '\0';
    CHECK(!token_hash_valid(h));
    /* a non-hex digit anywhere */
    memset(h, 'a', 64);
    h[64] = '\0';
    h[40] = 'g';
    CHECK(!token_hash_valid(h));
    h[40] = ' ';
    CHECK(!token_hash_valid(h));
    h[40] = 'a';
    h[63] = '\n';
    CHECK(!token_hash_valid(h));
    /* 64 zeros: what token_hash() writes when hashing fails, never a stored hash */
    memset(h, '0', 64);
    h[64] = '\0';
    CHECK(!token_hash_valid(h));
    h[10] = '1';
    CHECK(token_hash_valid(h));
}

static void test_token_name_valid(void)
{
    char n[TOKEN_NAME_MAX + 2];

    CHECK(token_name_valid("ci"));
    CHECK(token_name_valid("a"));
    CHECK(token_name_valid("billing-service_v2.prod"));
    CHECK(token_name_valid("-"));
    CHECK(token_name_valid("..")); /* names are not path segments */
    CHECK(token_name_valid("ABCxyz019"));
    CHECK(!token_name_valid(""));
    CHECK(!token_name_valid("a b"));
    CHECK(!token_name_valid("a/b"));
    CHECK(!token_name_valid("a:b"));
    CHECK(!token_name_valid("a'b"));
    CHECK(!token_name_valid("a\"b"));
    CHECK(!token_name_valid("a\tb"));
    CHECK(!token_name_valid("\xc3\xa9"));
    memset(n, 'n', sizeof(n));
    n[TOKEN_NAME_MAX] = '\0';
    CHECK(token_name_valid(n)); /* 64 */
    n[TOKEN_NAME_MAX] = 'n';
    n[TOKEN_NAME_MAX + 1] = '\0';
    CHECK(!token_name_valid(n)); /* 65 */
}

static void test_token_matches(void)
{
    char tok[TOKEN_LEN + 1], other[TOKEN_LEN + 1], hex[TOKEN_HASH_LEN + 1];
    char upper[TOKEN_HASH_LEN + 1];

    CHECK(token_matches("abc", 3,
                        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    CHECK(!token_matches("abd", 3,
                         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    CHECK(!token_matches("ab", 2,
                         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    CHECK(token_matches("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));

    CHECK(token_new(tok) == 0);
    CHECK(token_new(other) == 0);
    token_hash(tok, strlen(tok), hex);
    CHECK(token_matches(tok, strlen(tok), hex));
    CHECK(!token_matches(other, strlen(other), hex));
    CHECK(!token_matches(tok, strlen(tok) - 1, hex));
    tok[TOKEN_LEN - 1] ^= 1; /* one bit */
    CHECK(!token_matches(tok, strlen(tok), hex));
    tok[TOKEN_LEN - 1] ^= 1;
    CHECK(token_matches(tok, strlen(tok), hex));
    /* the stored hash must be a valid one: upper case, short or empty never match */
    for (size_t i = 0; i <= TOKEN_HASH_LEN; i++)
        upper[i] = (hex[i] >= 'a' && hex[i] <= 'f') ? (char)(hex[i] - 32) : hex[i];
    CHECK(strcmp(upper, hex) != 0);
    CHECK(!token_matches(tok, strlen(tok), upper));
    hex[63] = '\0';
    CHECK(!token_matches(tok, strlen(tok), hex));
    CHECK(!token_matches(tok, strlen(tok), ""));
    CHECK(
        !token_matches("", 0, "0000000000000000000000000000000000000000000000000000000000000000"));
}

/* ---- acluser ---- */

#define ACL_SPACE (2 * ACLUSER_NAME_MAX + 80)

static void test_acluser_name(void)
{
    char buf[ACLUSER_NAME_MAX];

    acluser_name("idpool", "user", buf, sizeof(buf));
    CHECK(strcmp(buf, "idpool:user") == 0);
    acluser_name("idp:test", "order.v-2", buf, sizeof(buf));
    CHECK(strcmp(buf, "idp:test:order.v-2") == 0);
    acluser_name("idpool", "user", buf, 5); /* cut, terminated */
    CHECK(strcmp(buf, "idpo") == 0);
}

static void test_acluser_db0(void)
{
    static const char hash[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    static const char *const want[] = {
        "ACL",
        "SETUSER",
        "idpool:user",
        "reset",
        "on",
        "#" /* + hash */,
        "~idpool:{user}:pool",
        "resetchannels",
        "-@all",
        "+lpop",
        "+llen",
    };
    char space[ACL_SPACE], pw[80];
    const char *argv[ACLUSER_ARGC_MAX + 1];
    int argc;

    argv[11] = argv[12] = NULL;
    argc = acluser_setuser("idpool", "user", hash, 0, space, argv);
    CHECK_EQ_U64((uint64_t)argc, 11);
    snprintf(pw, sizeof(pw), "#%s", hash);
    for (int i = 0; i < 11 && i < argc; i++) {
        const char *w = i == 5 ? pw : want[i];
        if (argv[i] == NULL || strcmp(argv[i], w) != 0) {
            fprintf(stderr, "argv[%d] = '%s', expected '%s'\n", i, argv[i] ? argv[i] : "(null)", w);
            CHECK(!"ACL SETUSER argv, db 0");
        }
    }
    CHECK(argv[11] == NULL); /* nothing more: no +select */
    /* never the password itself, nor any other right */
    for (int i = 0; i < argc; i++) {
        CHECK(strcmp(argv[i], "nopass") != 0);
        CHECK(argv[i][0] != '>');
        CHECK(strcmp(argv[i], "+select") != 0);
        CHECK(strcmp(argv[i], "allkeys") != 0 && strcmp(argv[i], "~*") != 0);
    }
}

static void test_acluser_db3(void)
{
    static const char hash[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    char space[ACL_SPACE];
    const char *argv[ACLUSER_ARGC_MAX + 1];
    int argc;

    argc = acluser_setuser("idp:test", "order.v-2", hash, 3, space, argv);
    CHECK_EQ_U64((uint64_t)argc, 12);
    CHECK((uint64_t)argc <= ACLUSER_ARGC_MAX);
    if (argc != 12)
        return;
    CHECK(strcmp(argv[0], "ACL") == 0 && strcmp(argv[1], "SETUSER") == 0);
    CHECK(strcmp(argv[2], "idp:test:order.v-2") == 0);
    CHECK(strcmp(argv[3], "reset") == 0); /* first: no stale rights */
    CHECK(strcmp(argv[4], "on") == 0);
    CHECK(argv[5][0] == '#' && strcmp(argv[5] + 1, hash) == 0);
    CHECK(strcmp(argv[6], "~idp:test:{order.v-2}:pool") == 0);
    CHECK(strcmp(argv[7], "resetchannels") == 0);
    CHECK(strcmp(argv[8], "-@all") == 0);
    CHECK(strcmp(argv[9], "+lpop") == 0);
    CHECK(strcmp(argv[10], "+llen") == 0);
    CHECK(strcmp(argv[11], "+select") == 0);
}

/* The longest prefix (64) and key (64) fit `space` whole, and nothing is written past it. */
static void test_acluser_longest(void)
{
    static const char hash[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    char space[ACL_SPACE + 64], prefix[65], key[65], want[200];
    const char *argv[ACLUSER_ARGC_MAX];
    int argc;

    memset(prefix, 'p', 64);
    prefix[64] = '\0';
    memset(key, 'k', 64);
    key[64] = '\0';
    memset(space, 0x5a, sizeof(space));
    argc = acluser_setuser(prefix, key, hash, 1, space, argv);
    CHECK_EQ_U64((uint64_t)argc, 12);
    for (size_t i = ACL_SPACE; i < sizeof(space); i++)
        if (space[i] != 0x5a) {
            CHECK(!"nothing written past 2 * ACLUSER_NAME_MAX + 80 bytes");
            break;
        }
    snprintf(want, sizeof(want), "%s:%s", prefix, key);
    CHECK(strcmp(argv[2], want) == 0);
    snprintf(want, sizeof(want), "~%s:{%s}:pool", prefix, key);
    CHECK(strcmp(argv[6], want) == 0);
    CHECK(argv[5][0] == '#' && strcmp(argv[5] + 1, hash) == 0);
    /* the user, password and key pattern are built in space */
    CHECK(argv[2] >= space && argv[2] < space + ACL_SPACE);
    CHECK(argv[5] >= space && argv[5] < space + ACL_SPACE);
    CHECK(argv[6] >= space && argv[6] < space + ACL_SPACE);
}

int main(void)
{
    RUN(test_path_valid);
    RUN(test_path_decoded);
    RUN(test_path_invalid);
    RUN(test_count_valid);
    RUN(test_count_invalid);
    RUN(test_count_decoded);
    RUN(test_count_messages);
    RUN(test_accept);
    RUN(test_accept_q);
    RUN(test_bearer);
    RUN(test_u64);
    RUN(test_body_json);
    RUN(test_body_text);
    RUN(test_body_bound);
    RUN(test_token_new);
    RUN(test_token_hash);
    RUN(test_token_hash_valid);
    RUN(test_token_name_valid);
    RUN(test_token_matches);
    RUN(test_acluser_name);
    RUN(test_acluser_db0);
    RUN(test_acluser_db3);
    RUN(test_acluser_longest);
    return unit_done();
}
