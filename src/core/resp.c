#include "resp.h"

#include <string.h>

/* Decimal digits of v: from its bit length (x 1233/4096 ~ log10 2), then one compare. */
static size_t u64_digits(uint64_t v)
{
    static const uint64_t pow10[20] = {1ULL,
                                       10ULL,
                                       100ULL,
                                       1000ULL,
                                       10000ULL,
                                       100000ULL,
                                       1000000ULL,
                                       10000000ULL,
                                       100000000ULL,
                                       1000000000ULL,
                                       10000000000ULL,
                                       100000000000ULL,
                                       1000000000000ULL,
                                       10000000000000ULL,
                                       100000000000000ULL,
                                       1000000000000000ULL,
                                       10000000000000000ULL,
                                       100000000000000000ULL,
                                       1000000000000000000ULL,
                                       10000000000000000000ULL};
    unsigned t;

    if (v < 10)
        return 1;
    t = (unsigned)(64 - __builtin_clzll(v)) * 1233 >> 12;
    return t + 1 - (v < pow10[t]);
}

/* The n digits of v, written backwards from buf + n, two at a time (the
 * generator's hot spot: a pushed ID is formatted once, ~19 digits). */
static void u64_put(uint64_t v, char *buf, size_t n)
{
    static const char pairs[] = "00010203040506070809"
                                "10111213141516171819"
                                "20212223242526272829"
                                "30313233343536373839"
                                "40414243444546474849"
                                "50515253545556575859"
                                "60616263646566676869"
                                "70717273747576777879"
                                "80818283848586878889"
                                "90919293949596979899";
    char *p = buf + n;

    while (v >= 100) {
        unsigned i = (unsigned)(v % 100) * 2;
        v /= 100;
        *--p = pairs[i + 1];
        *--p = pairs[i];
    }
    if (v >= 10) {
        *--p = pairs[v * 2 + 1];
        *--p = pairs[v * 2];
    } else {
        *--p = (char)('0' + v);
    }
}

size_t u64_fmt(uint64_t v, char *buf)
{
    size_t n = u64_digits(v);

    u64_put(v, buf, n);
    return n;
}

/* "$<len>\r\n<bytes>\r\n" */
static size_t resp_bulk(char *p, const char *s, size_t len)
{
    size_t n = 0;

    p[n++] = '$';
    n += u64_fmt(len, p + n);
    p[n++] = '\r';
    p[n++] = '\n';
    memcpy(p + n, s, len);
    n += len;
    p[n++] = '\r';
    p[n++] = '\n';
    return n;
}

size_t resp_rpush(char *buf, const char *key, size_t klen, const uint64_t *ids, size_t n)
{
    char *p = buf;

    *p++ = '*';
    p += u64_fmt(n + 2, p);
    *p++ = '\r';
    *p++ = '\n';
    p += resp_bulk(p, "RPUSH", 5);
    p += resp_bulk(p, key, klen);
    for (size_t i = 0; i < n; i++) {
        size_t d = u64_digits(ids[i]);

        /* "$<d>\r\n<digits>\r\n", the digits formatted in place */
        *p++ = '$';
        if (d >= 10)
            *p++ = (char)('0' + d / 10);
        *p++ = (char)('0' + d % 10);
        *p++ = '\r';
        *p++ = '\n';
        u64_put(ids[i], p, d);
        p += d;
        *p++ = '\r';
        *p++ = '\n';
    }
    return (size_t)(p - buf);
}

int u64_parse(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 20)
        return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}
