#include "keys.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The suffix of each kind, ':' included; all of one length. */
static const char *const suffix[] = {
    [KEYS_POOL] = ":pool",
    [KEYS_META] = ":meta",
    [KEYS_LOCK] = ":lock",
};
#define SUFFIX_LEN 5

int keys_prefix_valid(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > KEYS_PREFIX_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.:-", s[i]))
            return 0;
    return 1;
}

int keys_app(const char *prefix, const char *app, enum keys_kind kind, char *buf, size_t len)
{
    return snprintf(buf, len, "%s:{%s}%s", prefix, app, suffix[kind]);
}

char *keys_app_new(const char *prefix, const char *app, enum keys_kind kind)
{
    size_t n = (size_t)keys_app(prefix, app, kind, NULL, 0) + 1;
    char *s = malloc(n);

    if (s)
        keys_app(prefix, app, kind, s, n);
    return s;
}

int keys_scan_pattern(const char *prefix, char *buf, size_t len)
{
    return snprintf(buf, len, "%s:{*}:*", prefix);
}

int keys_revoked(const char *prefix, char *buf, size_t len)
{
    return snprintf(buf, len, "%s:revoked-tokens", prefix);
}

int keys_promoted(const char *prefix, const char *tag, const char *server_id, char *buf, size_t len)
{
    if (tag)
        return snprintf(buf, len, "%s:promoted:{%s}:%s", prefix, tag, server_id);
    return snprintf(buf, len, "%s:promoted:%s", prefix, server_id);
}

enum keys_kind keys_kind_of(const char *key, size_t len)
{
    if (len < SUFFIX_LEN)
        return KEYS_NONE;
    for (int k = KEYS_POOL; k < KEYS_NONE; k++)
        if (memcmp(key + len - SUFFIX_LEN, suffix[k], SUFFIX_LEN) == 0)
            return (enum keys_kind)k;
    return KEYS_NONE;
}

char *keys_sibling(const char *key, size_t len, enum keys_kind to)
{
    char *s;

    if (keys_kind_of(key, len) == KEYS_NONE || (s = malloc(len + 1)) == NULL)
        return NULL;
    memcpy(s, key, len - SUFFIX_LEN);
    memcpy(s + len - SUFFIX_LEN, suffix[to], SUFFIX_LEN + 1);
    return s;
}

const char *keys_hashtag(const char *key, size_t len, size_t *n)
{
    const char *open = memchr(key, '{', len), *close;

    if (open == NULL)
        return NULL;
    close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
    if (close == NULL || close == open + 1)
        return NULL;
    *n = (size_t)(close - open - 1);
    return open + 1;
}

int keys_app_of(const char *key, size_t len, char *app, size_t cap)
{
    size_t n;
    const char *tag = keys_hashtag(key, len, &n);

    if (tag == NULL || n >= cap)
        return -1;
    memcpy(app, tag, n);
    app[n] = '\0';
    return 0;
}

/* CRC-16/XMODEM (polynomial 0x1021, initial value 0, not reflected): Redis Cluster's key hash. */
static uint16_t crc16(const char *p, size_t n)
{
    uint16_t crc = 0;

    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)((unsigned char)p[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

unsigned keys_slot(const char *key, size_t len)
{
    size_t n = len;
    const char *tag = keys_hashtag(key, len, &n);

    return crc16(tag ? tag : key, n) % KEYS_SLOTS;
}

size_t keys_slot_tag(unsigned slot, char *buf)
{
    /* every slot has one below 10^6 (test_keys checks all 16384), found in ~16384 tries */
    for (unsigned i = 0; i < 1000000; i++) {
        size_t n = (size_t)snprintf(buf, KEYS_SLOT_TAG_MAX, "%u", i);
        if (crc16(buf, n) % KEYS_SLOTS == slot % KEYS_SLOTS)
            return n;
    }
    buf[0] = '\0';
    return 0;
}
