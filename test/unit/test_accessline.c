/*
 * Unit tests of accessline (accessline.c): a line of the ID API's access
 * log, as accessline.h describes it. Each line is written into a heap
 * buffer of exactly ACCESSLINE_MAX bytes: under ASan a write past it is an
 * error.
 */
#include <stdint.h>
#include <stdlib.h>

#include "accessline.h"
#include "unit.h"

#define T0 1795886101123ULL /* 2026-11-28T17:15:01.123Z */

static char line[ACCESSLINE_MAX + 1];

/* The line of e, NUL-terminated in line[]; checked to be one line of printable ASCII. */
static const char *fmt(const struct accessline *e)
{
    char *buf = malloc(ACCESSLINE_MAX);
    size_t n;

    CHECK(buf != NULL);
    if (buf == NULL)
        return "";
    n = accessline_format(buf, e);
    CHECK(n >= 2 && n <= ACCESSLINE_MAX && buf[n - 1] == '\n');
    for (size_t i = 0; i + 1 < n; i++)
        CHECK(buf[i] >= 0x20 && buf[i] < 0x7f);
    memcpy(line, buf, n);
    line[n] = '\0';
    free(buf);
    return line;
}

static void test_request(void)
{
    struct accessline e = {
        T0, "192.0.2.7:51234", "GET", "/v1/ids/user?count=5&x=secret", 200, 27, 412, "t1"};

    CHECK_STR(fmt(&e),
              "2026-11-28T17:15:01.123Z 192.0.2.7:51234 GET /v1/ids/user 200 27 0.412 t1\n");
    /* the query is never written, nor a fragment */
    e.target = "/v1/ids/user#frag";
    e.duration_us = 1234567;
    e.status = 503;
    e.bytes = 0;
    CHECK_STR(fmt(&e),
              "2026-11-28T17:15:01.123Z 192.0.2.7:51234 GET /v1/ids/user 503 0 1234.567 t1\n");
    /* the absolute form as sent */
    e.target = "http://idpool.example/v1/ids/user?count=1";
    e.peer = "[2001:db8::1]:443";
    e.user = NULL;
    e.duration_us = 5;
    CHECK_STR(fmt(&e), "2026-11-28T17:15:01.123Z [2001:db8::1]:443 GET "
                       "http://idpool.example/v1/ids/user 503 0 0.005 -\n");
}

static void test_unknown(void)
{
    struct accessline e = {T0, "10.0.0.1:1", NULL, NULL, 408, 77, 3000000, NULL};

    CHECK_STR(fmt(&e), "2026-11-28T17:15:01.123Z 10.0.0.1:1 - - 408 77 3000.000 -\n");
    e.peer = NULL;
    e.method = "";
    e.target = "?only=query";
    e.user = "";
    CHECK_STR(fmt(&e), "2026-11-28T17:15:01.123Z - - - 408 77 3000.000 -\n");
    e.time_ms = 0;
    e.status = 400;
    CHECK_STR(fmt(&e), "1970-01-01T00:00:00.000Z - - - 400 77 3000.000 -\n");
}

/* Bytes a client chose are escaped: a line is one line, fields stay fields. */
static void test_escaped(void)
{
    struct accessline e = {T0,  "192.0.2.7:51234", "GET", "/v1/ids/\xc3\xa9\"\\x\x7f", 404, 100, 10,
                           NULL};

    CHECK_STR(fmt(&e), "2026-11-28T17:15:01.123Z 192.0.2.7:51234 GET "
                       "/v1/ids/\\xc3\\xa9\\x22\\x5cx\\x7f 404 100 0.010 -\n");
    e.target = "/a b\r\n2026 forged";
    CHECK_STR(fmt(&e), "2026-11-28T17:15:01.123Z 192.0.2.7:51234 GET "
                       "/a\\x20b\\x0d\\x0a2026\\x20forged 404 100 0.010 -\n");
    e.method = "P\tST";
    e.user = "a b";
    e.target = "/";
    CHECK_STR(fmt(&e),
              "2026-11-28T17:15:01.123Z 192.0.2.7:51234 P\\x09ST / 404 100 0.010 a\\x20b\n");
}

/* A long path is cut at ACCESSLINE_PATH_MAX bytes; the longest line fits. */
static void test_long(void)
{
    char path[1024], want[2048], big[300];
    struct accessline e = {UINT64_MAX / 2, "192.0.2.7:51234", "GET", path, 999,
                           UINT64_MAX,     UINT64_MAX,        NULL};

    memset(path, 'p', sizeof(path));
    path[0] = '/';
    path[ACCESSLINE_PATH_MAX] = '\0';
    snprintf(want, sizeof(want), " GET %s ", path);
    CHECK_STR_CONTAINS(fmt(&e), want); /* exactly the limit: whole */
    snprintf(want, sizeof(want), " GET %s... ", path);
    path[ACCESSLINE_PATH_MAX] = 'p';
    path[ACCESSLINE_PATH_MAX + 1] = '\0';
    CHECK_STR_CONTAINS(fmt(&e), want); /* one more: cut */
    /* every field at its longest, every byte escaped */
    memset(path, 0xff, sizeof(path) - 1);
    path[sizeof(path) - 1] = '\0';
    memset(big, 0x01, sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    e.peer = big;
    e.method = big;
    e.user = big;
    fmt(&e);
    CHECK(strlen(line) < ACCESSLINE_MAX);
    CHECK_STR_CONTAINS(line, "\\xff... 999 18446744073709551615 18446744073709551.615 ");
}

int main(void)
{
    RUN(test_request);
    RUN(test_unknown);
    RUN(test_escaped);
    RUN(test_long);
    return unit_done();
}
