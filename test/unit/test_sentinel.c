/*
 * Unit tests of sentinel (sentinel.c): the set of sentinels and the
 * Sentinel replies, built by hand as hiredis would (RESP2: SENTINEL
 * sentinels is an array of flat field, value arrays).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sentinel.h"
#include "unit.h"
#include "unit_reply.h"

/* One entry of SENTINEL sentinels. */
static redisReply *sentinel(const char *ip, const char *port)
{
    return reply_arr(8, reply_str("name"), reply_str("0123abcd"), reply_str("ip"), reply_str(ip),
                     reply_str("port"), reply_str(port), reply_str("flags"), reply_str("sentinel"));
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

    reply_reset();
    CHECK(sentinel_set_init(&s, &u) == 0);
    r = reply_arr(6, sentinel("10.0.0.2", "26379"), sentinel("10.0.0.1", "26379"), /* known */
                  sentinel("10.0.0.2", "26379"),                                   /* twice */
                  sentinel("bad host", "1"), sentinel("10.0.0.3", "0"),            /* skipped */
                  reply_arr(2, reply_str("ip"), reply_str("10.0.0.4")));           /* no port */
    CHECK_EQ_U64(sentinel_set_merge(&s, r), 1);
    CHECK_EQ_U64(s.n, 2);
    CHECK_STR(s.a[1].host, "10.0.0.2");
    CHECK(s.a[1].port == 26379);
    CHECK_EQ_U64(sentinel_set_merge(&s, NULL), 0);
    CHECK_EQ_U64(sentinel_set_merge(&s, reply_str("x")), 0);
    CHECK_EQ_U64(sentinel_set_merge(&s, reply_arr(1, reply_nil())), 0);

    /* At most REDIS_HOSTS_MAX. */
    reply_reset();
    {
        static char ips[20][16];
        redisReply *many[20];

        for (int i = 0; i < 20; i++) {
            snprintf(ips[i], sizeof(ips[i]), "10.1.0.%d", i);
            many[i] = sentinel(ips[i], "26379");
        }
        CHECK_EQ_U64(sentinel_set_merge(&s, reply_arrv(many, 20)), REDIS_HOSTS_MAX - 2);
        CHECK_EQ_U64(s.n, REDIS_HOSTS_MAX);
        CHECK_STR(s.a[REDIS_HOSTS_MAX - 1].host, "10.1.0.13");
    }
    redis_url_free(&u);
}

static void test_master_reply(void)
{
    char host[256];
    int port = 0;

    reply_reset();
    CHECK(sentinel_master_reply(reply_arr(2, reply_str("127.0.0.1"), reply_str("6380")), host,
                                sizeof(host), &port) == SENTINEL_ADDR);
    CHECK_STR(host, "127.0.0.1");
    CHECK(port == 6380);
    CHECK(sentinel_master_reply(reply_arr(2, reply_str("::1"), reply_str("7000")), host,
                                sizeof(host), &port) == SENTINEL_ADDR);
    CHECK_STR(host, "::1");
    CHECK(sentinel_master_reply(reply_nil(), host, sizeof(host), &port) == SENTINEL_UNKNOWN);
    CHECK(sentinel_master_reply(NULL, host, sizeof(host), &port) == SENTINEL_INVALID);
    CHECK(sentinel_master_reply(reply_str("x"), host, sizeof(host), &port) == SENTINEL_INVALID);
    CHECK(sentinel_master_reply(reply_arr(1, reply_str("h")), host, sizeof(host), &port) ==
          SENTINEL_INVALID);
    CHECK(sentinel_master_reply(reply_arr(2, reply_str("h"), reply_str("0")), host, sizeof(host),
                                &port) == SENTINEL_INVALID);
    CHECK(sentinel_master_reply(reply_arr(2, reply_str("h"), reply_str("65536")), host,
                                sizeof(host), &port) == SENTINEL_INVALID);
    CHECK(sentinel_master_reply(reply_arr(2, reply_str(""), reply_str("1")), host, sizeof(host),
                                &port) == SENTINEL_INVALID);
    CHECK(sentinel_master_reply(reply_arr(2, reply_str("h"), reply_nil()), host, sizeof(host),
                                &port) == SENTINEL_INVALID);
    /* A NUL inside the host or the port (text_host_valid, text_int). */
    CHECK(sentinel_master_reply(reply_arr(2, reply_strn("a\0b", 3), reply_str("1")), host,
                                sizeof(host), &port) == SENTINEL_INVALID);
    CHECK(sentinel_master_reply(reply_arr(2, reply_str("h"), reply_strn("1\0", 2)), host,
                                sizeof(host), &port) == SENTINEL_INVALID);
    /* A host that does not fit the caller's buffer. */
    CHECK(sentinel_master_reply(reply_arr(2, reply_str("longer"), reply_str("1")), host, 4,
                                &port) == SENTINEL_INVALID);
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
    reply_reset();
    CHECK(sentinel_role_reply(reply_arr(3, reply_str("master"), reply_str("0"), reply_arr(0))) ==
          ROLE_MASTER);
    CHECK(sentinel_role_reply(reply_arr(5, reply_str("slave"), reply_str("h"), reply_str("1"),
                                        reply_str("connected"), reply_str("0"))) == ROLE_REPLICA);
    CHECK(sentinel_role_reply(reply_arr(2, reply_str("sentinel"), reply_arr(0))) == ROLE_SENTINEL);
    CHECK(sentinel_role_reply(reply_arr(1, reply_str("leader"))) == ROLE_UNKNOWN);
    CHECK(sentinel_role_reply(reply_arr(0)) == ROLE_UNKNOWN);
    CHECK(sentinel_role_reply(NULL) == ROLE_UNKNOWN);
    CHECK(sentinel_role_reply(reply_err("NOAUTH Authentication required.")) == ROLE_UNKNOWN);
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
