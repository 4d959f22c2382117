/*
 * Unit tests of the Redis key names (keys.c): an application's keys, the
 * sweep's SCAN pattern, the revoked-tokens set, a key's kind, sibling and
 * application, and the Cluster slot (hash tags as Redis defines them; the
 * slots are checked against a real Redis by test/integration/t_keyslot.sh).
 */
#include <stdlib.h>

#include "keys.h"
#include "unit.h"

#define SLOT(s) keys_slot(s, strlen(s))

static void test_names(void)
{
    char b[KEYS_MAX], prefix[KEYS_PREFIX_MAX + 1], app[APP_KEY_MAX + 1];
    char *s;

    keys_app("idpool", "user", KEYS_POOL, b, sizeof(b));
    CHECK_STR(b, "idpool:{user}:pool");
    keys_app("idpool", "user", KEYS_META, b, sizeof(b));
    CHECK_STR(b, "idpool:{user}:meta");
    keys_app("idp:test", "order.v-2", KEYS_LOCK, b, sizeof(b));
    CHECK_STR(b, "idp:test:{order.v-2}:lock");
    keys_scan_pattern("idpool", b, sizeof(b));
    CHECK_STR(b, "idpool:{*}:*");
    keys_revoked("idpool", b, sizeof(b));
    CHECK_STR(b, "idpool:revoked-tokens");
    keys_promoted("idpool", NULL, "6a1c:9f0e", b, sizeof(b));
    CHECK_STR(b, "idpool:promoted:6a1c:9f0e");
    keys_promoted("idpool", "13", "6a1c:9f0e", b, sizeof(b));
    CHECK_STR(b, "idpool:promoted:{13}:6a1c:9f0e");

    /* The longest prefix and application fit in KEYS_MAX exactly. */
    memset(prefix, 'p', KEYS_PREFIX_MAX);
    prefix[KEYS_PREFIX_MAX] = '\0';
    memset(app, 'a', APP_KEY_MAX);
    app[APP_KEY_MAX] = '\0';
    CHECK(keys_app(prefix, app, KEYS_POOL, b, sizeof(b)) == KEYS_MAX - 1);
    CHECK(strlen(b) == KEYS_MAX - 1);
    CHECK(keys_revoked(prefix, NULL, 0) < KEYS_MAX);
    CHECK(keys_scan_pattern(prefix, NULL, 0) < KEYS_MAX);

    /* Cut to fit, as snprintf. */
    CHECK(keys_app("idpool", "user", KEYS_POOL, b, 8) == 18);
    CHECK_STR(b, "idpool:");

    s = keys_app_new("idpool", "user", KEYS_META);
    CHECK_STR(s, "idpool:{user}:meta");
    free(s);
    s = keys_app_new("a-prefix-longer-than-any-the-daemon-accepts-0123456789-0123456789", "k",
                     KEYS_POOL);
    CHECK_STR(s, "a-prefix-longer-than-any-the-daemon-accepts-0123456789-0123456789:{k}:pool");
    free(s);
}

static void test_prefix(void)
{
    char p[KEYS_PREFIX_MAX + 2];

    CHECK(keys_prefix_valid("idpool"));
    CHECK(keys_prefix_valid("a:b.c-d_E9"));
    CHECK(!keys_prefix_valid(""));
    memset(p, 'p', sizeof(p) - 1);
    p[KEYS_PREFIX_MAX] = '\0';
    CHECK(keys_prefix_valid(p));
    p[KEYS_PREFIX_MAX] = 'p';
    p[KEYS_PREFIX_MAX + 1] = '\0';
    CHECK(!keys_prefix_valid(p));
    /* No brace (the hash tag), no glob character (patterns), no space. */
    CHECK(!keys_prefix_valid("a{b"));
    CHECK(!keys_prefix_valid("a}b"));
    CHECK(!keys_prefix_valid("a*"));
    CHECK(!keys_prefix_valid("a?"));
    CHECK(!keys_prefix_valid("a[b]"));
    CHECK(!keys_prefix_valid("a\\b"));
    CHECK(!keys_prefix_valid("a b"));
}

static void test_kind(void)
{
    char app[APP_KEY_MAX + 1];
    char *s;

    CHECK(keys_kind_of("idpool:{user}:pool", 18) == KEYS_POOL);
    CHECK(keys_kind_of("idpool:{user}:meta", 18) == KEYS_META);
    CHECK(keys_kind_of("idpool:{user}:lock", 18) == KEYS_LOCK);
    CHECK(keys_kind_of("idpool:{user}:pools", 19) == KEYS_NONE);
    CHECK(keys_kind_of(":pool", 5) == KEYS_POOL);
    CHECK(keys_kind_of("pool", 4) == KEYS_NONE);
    CHECK(keys_kind_of("", 0) == KEYS_NONE);
    CHECK(keys_kind_of("idpool:{user}:poolX", 18) == KEYS_POOL); /* len counts, not the NUL */

    s = keys_sibling("idpool:{user}:pool", 18, KEYS_META);
    CHECK_STR(s, "idpool:{user}:meta");
    free(s);
    s = keys_sibling("idpool:{user}:meta", 18, KEYS_POOL);
    CHECK_STR(s, "idpool:{user}:pool");
    free(s);
    /* Whatever matched the sweep's pattern keeps everything but its suffix. */
    s = keys_sibling("idpool:{a}:x:meta", 17, KEYS_POOL);
    CHECK_STR(s, "idpool:{a}:x:pool");
    free(s);
    CHECK(keys_sibling("idpool:{user}:other", 19, KEYS_POOL) == NULL);

    CHECK(keys_app_of("idpool:{user}:pool", 18, app, sizeof(app)) == 0);
    CHECK_STR(app, "user");
    CHECK(keys_app_of("a:b:{order.v-2}:meta", 20, app, sizeof(app)) == 0);
    CHECK_STR(app, "order.v-2");
    CHECK(keys_app_of("idpool:{user}:pool", 18, app, 4) == -1); /* "user" + NUL needs 5 */
    CHECK(keys_app_of("idpool:{user}:pool", 18, app, 5) == 0);
    CHECK(keys_app_of("idpool:{}:pool", 14, app, sizeof(app)) == -1);
    CHECK(keys_app_of("idpool:{user:pool", 17, app, sizeof(app)) == -1);
    CHECK(keys_app_of("idpool:user:pool", 16, app, sizeof(app)) == -1);
}

static void test_hashtag(void)
{
    size_t n = 0;
    const char *t;

    /* The examples of the Redis Cluster specification. */
    t = keys_hashtag("{user1000}.following", 20, &n);
    CHECK(t && n == 8 && memcmp(t, "user1000", 8) == 0);
    CHECK(keys_hashtag("foo{}{bar}", 10, &n) == NULL); /* the whole key */
    t = keys_hashtag("foo{{bar}}zap", 13, &n);
    CHECK(t && n == 4 && memcmp(t, "{bar", 4) == 0);
    t = keys_hashtag("foo{bar}{zap}", 13, &n);
    CHECK(t && n == 3 && memcmp(t, "bar", 3) == 0);
    /* And the edges. */
    CHECK(keys_hashtag("plain", 5, &n) == NULL);
    CHECK(keys_hashtag("{", 1, &n) == NULL);
    CHECK(keys_hashtag("a}{b", 4, &n) == NULL);
    t = keys_hashtag("}{b}", 4, &n);
    CHECK(t && n == 1 && *t == 'b');
    CHECK(keys_hashtag("{ab}", 3, &n) == NULL); /* the '}' is beyond len */
    t = keys_hashtag("x{\0}y}", 6, &n);         /* any bytes, NUL included */
    CHECK(t && n == 1 && *t == '\0');
}

static void test_slot(void)
{
    char b[KEYS_MAX];

    /* CRC-16/XMODEM's check value is 0x31c3; Redis: KEYSLOT foo is 12182, somekey 11058. */
    CHECK_EQ_U64(SLOT("123456789"), 0x31c3);
    CHECK_EQ_U64(SLOT("foo"), 12182);
    CHECK_EQ_U64(SLOT("somekey"), 11058);
    CHECK_EQ_U64(SLOT(""), 0);
    CHECK_EQ_U64(SLOT("{user1000}.following"), SLOT("user1000"));
    CHECK_EQ_U64(SLOT("{user1000}.followers"), SLOT("user1000"));
    CHECK_EQ_U64(SLOT("foo{bar}{zap}"), SLOT("bar"));
    CHECK(SLOT("foo{}{bar}") != SLOT("bar"));
    /* An application's keys share a slot: the application's. */
    keys_app("idpool", "user", KEYS_POOL, b, sizeof(b));
    CHECK_EQ_U64(SLOT(b), SLOT("user"));
    keys_app("other", "user", KEYS_LOCK, b, sizeof(b));
    CHECK_EQ_U64(SLOT(b), SLOT("user"));
    for (unsigned i = 0; i < 1000; i++) {
        snprintf(b, sizeof(b), "k%u", i * 7919u);
        CHECK(SLOT(b) < KEYS_SLOTS);
    }
}

/* Every slot has a tag (a key "{tag}..." lands in it): the smallest number of that slot. */
static void test_slot_tag(void)
{
    static unsigned first[KEYS_SLOTS]; /* the smallest number of each slot, + 1 */
    char tag[KEYS_SLOT_TAG_MAX], key[KEYS_SLOT_TAG_MAX + 8];
    size_t covered = 0;

    for (unsigned i = 0; i < 1000000 && covered < KEYS_SLOTS; i++) {
        int n = snprintf(key, sizeof(key), "%u", i);
        unsigned s = keys_slot(key, (size_t)n);
        if (first[s] == 0) {
            first[s] = i + 1;
            covered++;
        }
    }
    CHECK(covered == KEYS_SLOTS);
    for (unsigned s = 0; s < KEYS_SLOTS; s += 61) {
        size_t n = keys_slot_tag(s, tag);
        CHECK(n > 0 && n == strlen(tag) && n < KEYS_SLOT_TAG_MAX);
        CHECK(strtoul(tag, NULL, 10) + 1 == first[s]);
        snprintf(key, sizeof(key), "x{%s}y", tag);
        CHECK(keys_slot(key, strlen(key)) == s);
    }
}

int main(void)
{
    RUN(test_names);
    RUN(test_prefix);
    RUN(test_kind);
    RUN(test_hashtag);
    RUN(test_slot);
    RUN(test_slot_tag);
    return unit_done();
}
