/*
 * Unit tests of sentinel (sentinel.c): the set of sentinels and the
 * Sentinel replies, built by hand as hiredis would (RESP2: SENTINEL
 * sentinels is an array of flat field, value arrays).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "sentinel.h"
#include "unit.h"

/* Replies live in a static arena, reset by each test. */
static redisReply arena[256];
static redisReply *ptrs[512];
static size_t narena, nptrs;

static void reset(void)
{
    memset(arena, 0, sizeof(arena));
    narena = nptrs = 0;
}

static redisReply *str(const char *s)
{
    redisReply *y = &arena[narena++];

    y->type = REDIS_REPLY_STRING;
    y->str = (char *)s;
    y->len = strlen(s);
    return y;
}

static redisReply *nil(void)
{
    redisReply *y = &arena[narena++];

    y->type = REDIS_REPLY_NIL;
    return y;
}

/* An array of n replies. */
static redisReply *arr(size_t n, ...)
{
    redisReply *y = &arena[narena++];
    va_list ap;

    y->type = REDIS_REPLY_ARRAY;
    y->element = &ptrs[nptrs];
    y->elements = n;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        ptrs[nptrs++] = va_arg(ap, redisReply *);
    va_end(ap);
    return y;
}

/* One entry of SENTINEL sentinels. */
static redisReply *sentinel(const char *ip, const char *port)
{
    return arr(8, str("name"), str("0123abcd"), str("ip"), str(ip), str("port"), str(port),
               str("flags"), str("sentinel"));
}

static void test_set(void)
{
    struct redis_url u = url_of("redis-sentinel://a:1,[::1]:2,c#m");
    struct sentinel_set s;

    CHECK(sentinel_set_init(&s, &u) == 0);
    CHECK_EQ_U64(s.n, 3);
    CHECK_STR(s.a[0].host, "a");
    CHECK(s.a[0].port == 1);
    CHECK_STR(s.a[1].host, "::1");
    CHECK(s.a[2].port == 26379);
    sentinel_set_promote(&s, 2); /* c answered: c, a, ::1 */
    CHECK_STR(s.a[0].host, "c");
    CHECK_STR(s.a[1].host, "a");
    CHECK_STR(s.a[2].host, "::1");
    sentinel_set_promote(&s, 0); /* the first: nothing moves */
    sentinel_set_promote(&s, 3); /* out of range: nothing moves */
    CHECK_STR(s.a[0].host, "c");
    CHECK_STR(s.a[2].host, "::1");
    redis_url_free(&u);

    u = url_of("redis://h");
    CHECK(sentinel_set_init(&s, &u) == -1);
    CHECK_EQ_U64(s.n, 0);
    redis_url_free(&u);
}

static void test_merge(void)
{
    struct redis_url u = url_of("redis-sentinel://10.0.0.1:26379#m");
    struct sentinel_set s;
    redisReply *r;

    reset();
    CHECK(sentinel_set_init(&s, &u) == 0);
    r = arr(6, sentinel("10.0.0.2", "26379"), sentinel("10.0.0.1", "26379"), /* known */
            sentinel("10.0.0.2", "26379"),                                   /* twice */
            sentinel("bad host", "1"), sentinel("10.0.0.3", "0"),            /* skipped */
            arr(2, str("ip"), str("10.0.0.4")));                             /* no port */
    CHECK_EQ_U64(sentinel_set_merge(&s, r), 1);
    CHECK_EQ_U64(s.n, 2);
    CHECK_STR(s.a[1].host, "10.0.0.2");
    CHECK(s.a[1].port == 26379);
    CHECK_EQ_U64(sentinel_set_merge(&s, NULL), 0);
    CHECK_EQ_U64(sentinel_set_merge(&s, str("x")), 0);
    CHECK_EQ_U64(sentinel_set_merge(&s, arr(1, nil())), 0);

    /* At most REDIS_HOSTS_MAX. */
    reset();
    {
        static char ips[20][16];
        redisReply *many[20], all = {0};

        for (int i = 0; i < 20; i++) {
            snprintf(ips[i], sizeof(ips[i]), "10.1.0.%d", i);
            many[i] = sentinel(ips[i], "26379");
        }
        all.type = REDIS_REPLY_ARRAY;
        all.element = many;
        all.elements = 20;
        CHECK_EQ_U64(sentinel_set_merge(&s, &all), REDIS_HOSTS_MAX - 2);
        CHECK_EQ_U64(s.n, REDIS_HOSTS_MAX);
        CHECK_STR(s.a[REDIS_HOSTS_MAX - 1].host, "10.1.0.13");
    }
    redis_url_free(&u);
}

static void test_master_reply(void)
{
    char host[256];
    int port = 0;

    reset();
    CHECK(sentinel_master_reply(arr(2, str("127.0.0.1"), str("6380")), host, sizeof(host), &port) ==
          SENTINEL_ADDR);
    CHECK_STR(host, "127.0.0.1");
    CHECK(port == 6380);
    CHECK(sentinel_master_reply(arr(2, str("::1"), str("7000")), host, sizeof(host), &port) ==
          SENTINEL_ADDR);
    CHECK_STR(host, "::1");
    CHECK(sentinel_master_reply(nil(), host, sizeof(host), &port) == SENTINEL_UNKNOWN);
    CHECK(sentinel_master_reply(NULL, host, sizeof(host), &port) == SENTINEL_INVALID);
    CHECK(sentinel_master_reply(str("x"), host, sizeof(host), &port) == SENTINEL_INVALID);
    CHECK(sentinel_master_reply(arr(1, str("h")), host, sizeof(host), &port) == SENTINEL_INVALID);
    CHECK(sentinel_master_reply(arr(2, str("h"), str("0")), host, sizeof(host), &port) ==
          SENTINEL_INVALID);
    CHECK(sentinel_master_reply(arr(2, str("h"), str("65536")), host, sizeof(host), &port) ==
          SENTINEL_INVALID);
    CHECK(sentinel_master_reply(arr(2, str(""), str("1")), host, sizeof(host), &port) ==
          SENTINEL_INVALID);
    CHECK(sentinel_master_reply(arr(2, str("h"), nil()), host, sizeof(host), &port) ==
          SENTINEL_INVALID);
    /* A host that does not fit the caller's buffer. */
    CHECK(sentinel_master_reply(arr(2, str("longer"), str("1")), host, 4, &port) ==
          SENTINEL_INVALID);
}

static void test_switch_msg(void)
{
    char host[256] = "";
    int port = 0;

    CHECK(sentinel_switch_msg("mymaster 127.0.0.1 6379 127.0.0.1 6380", "mymaster", host,
                              sizeof(host), &port) == 0);
    CHECK_STR(host, "127.0.0.1");
    CHECK(port == 6380);
    CHECK(sentinel_switch_msg("other 127.0.0.1 6379 10.0.0.9 6380", "mymaster", host, sizeof(host),
                              &port) == -1);
    CHECK(sentinel_switch_msg("mymasterx 1.1.1.1 1 2.2.2.2 2", "mymaster", host, sizeof(host),
                              &port) == -1);
    CHECK(sentinel_switch_msg("mymaster 1.1.1.1 1 2.2.2.2", "mymaster", host, sizeof(host),
                              &port) == -1);
    CHECK(sentinel_switch_msg("mymaster 1.1.1.1 1 2.2.2.2 2 extra", "mymaster", host, sizeof(host),
                              &port) == -1);
    CHECK(sentinel_switch_msg("mymaster 1.1.1.1 1 2.2.2.2 x", "mymaster", host, sizeof(host),
                              &port) == -1);
    CHECK(sentinel_switch_msg("", "mymaster", host, sizeof(host), &port) == -1);
    CHECK(sentinel_switch_msg("m 1.1.1.1 1 ::2 9 ", "m", host, sizeof(host), &port) == 0);
    CHECK_STR(host, "::2");
    CHECK(port == 9);
}

static void test_role(void)
{
    redisReply e = {0};

    reset();
    CHECK(sentinel_role_reply(arr(3, str("master"), str("0"), arr(0))) == ROLE_MASTER);
    CHECK(sentinel_role_reply(arr(5, str("slave"), str("h"), str("1"), str("connected"),
                                  str("0"))) == ROLE_REPLICA);
    CHECK(sentinel_role_reply(arr(2, str("sentinel"), arr(0))) == ROLE_SENTINEL);
    CHECK(sentinel_role_reply(arr(1, str("leader"))) == ROLE_UNKNOWN);
    CHECK(sentinel_role_reply(arr(0)) == ROLE_UNKNOWN);
    CHECK(sentinel_role_reply(NULL) == ROLE_UNKNOWN);
    e.type = REDIS_REPLY_ERROR;
    e.str = (char *)"NOAUTH Authentication required.";
    e.len = strlen(e.str);
    CHECK(sentinel_role_reply(&e) == ROLE_UNKNOWN);
    CHECK_STR(sentinel_role_name(ROLE_REPLICA), "replica");
    CHECK_STR(sentinel_role_name((enum sentinel_role)99), "unknown");
}

int main(void)
{
    RUN(test_set);
    RUN(test_merge);
    RUN(test_master_reply);
    RUN(test_switch_msg);
    RUN(test_role);
    return unit_done();
}
