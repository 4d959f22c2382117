/*
 * fuzz — helpers shared by the libFuzzer targets in test/fuzz/: a reader that
 * decodes the fuzz input into values (integers biased towards the boundaries
 * the validators care about, strings), and CHECK(), which aborts with a
 * message when an invariant does not hold (that is what turns a logic bug
 * into a crash libFuzzer can report and minimise).
 *
 * Built only with -Dfuzz=true (clang, see scripts/fuzz.sh).
 */
#ifndef IDPOOL_FUZZ_H
#define IDPOOL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort with the failed condition: libFuzzer saves the input as a crash. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The unread rest of the fuzz input. Reads past the end yield zeros. */
struct fz {
    const uint8_t *p;
    size_t n;
};

static inline uint8_t fz_u8(struct fz *f)
{
    uint8_t b = 0;

    if (f->n) {
        b = *f->p++;
        f->n--;
    }
    return b;
}

/* n bytes, little endian, into a uint64 (n <= 8). */
static inline uint64_t fz_uint(struct fz *f, unsigned n)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)fz_u8(f) << (8 * i);
    return v;
}

/*
 * A signed 64-bit value: one selector byte picks a small value, a boundary
 * (INT64_MIN/MAX, powers of two and the limits of the project's ranges, +-1)
 * or 1..8 raw bytes, sign-extended. The boundaries are what the range checks
 * and the saturating arithmetic must get right.
 */
static inline int64_t fz_i64(struct fz *f)
{
    static const int64_t edges[] = {
        0,
        1,
        2,
        -1,
        99,
        100,
        101,
        1000,
        5000,
        60000,
        1000000,
        1000001,
        100000000,
        100000001,
        86400000,
        86400001,
        4294967296,
        4294967297,
        INT64_MAX,
        INT64_MIN,
        INT64_MAX - 1,
        INT64_MIN + 1,
        INT32_MAX,
        (int64_t)INT32_MAX + 1,
        INT32_MIN,
        3037000499,
        3037000500,
        INT64_MAX / 10 * 9,
        INT64_MAX / 2,
        (int64_t)1 << 53,
        6000000000,
    };
    uint8_t sel = fz_u8(f);
    uint64_t v;
    unsigned n;

    if (sel < 64)
        return (int64_t)sel;
    if (sel < 128)
        return edges[sel % (sizeof(edges) / sizeof(edges[0]))];
    if (sel < 136)
        return -(int64_t)fz_u8(f) - 1;
    n = 1 + (sel & 7);
    v = fz_uint(f, n);
    if (n < 8 && (v >> (8 * n - 1)) & 1) /* sign-extend */
        v |= ~(uint64_t)0 << (8 * n);
    return (int64_t)v;
}

/*
 * A string of up to max bytes (any values, NUL included) into a new heap
 * buffer with a NUL after them: a length byte (255: a second one adds 4 x
 * its value), then the bytes. *len gets the length.
 */
static inline char *fz_str(struct fz *f, size_t max, size_t *len)
{
    size_t n = fz_u8(f);
    char *s;

    if (n == 255) /* longer strings: a second length byte */
        n += fz_u8(f) * 4u;
    if (n > max)
        n = max;
    if (n > f->n)
        n = f->n;
    s = malloc(n + 1);
    if (s == NULL)
        abort();
    memcpy(s, f->p, n);
    s[n] = '\0';
    f->p += n;
    f->n -= n;
    if (len)
        *len = n;
    return s;
}

/* The rest of the input as a NUL-terminated heap string (NUL bytes kept inside). */
static inline char *fz_rest(struct fz *f, size_t *len)
{
    char *s = malloc(f->n + 1);

    if (s == NULL)
        abort();
    memcpy(s, f->p, f->n);
    s[f->n] = '\0';
    if (len)
        *len = f->n;
    f->p += f->n;
    f->n = 0;
    return s;
}

/* 1 when the n bytes at s are well-formed UTF-8 (RFC 3629: no overlongs, no surrogates). */
static inline int fz_utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        unsigned char c = s[i];
        size_t need;
        uint32_t cp;

        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i - 1 < need)
            return 0;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += need + 1;
    }
    return 1;
}

/* 1 when the n bytes at s contain the NUL-terminated needle. */
static inline int fz_contains(const char *s, size_t n, const char *needle)
{
    size_t m = strlen(needle);

    if (m == 0)
        return 1;
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(s + i, needle, m) == 0)
            return 1;
    return 0;
}

/* The n bytes at s in a heap buffer of exactly n bytes, no NUL after them (ASan: no overread). */
static inline char *fz_copy(const void *s, size_t n)
{
    char *b = malloc(n ? n : 1);

    if (b == NULL)
        abort();
    memcpy(b, s, n);
    return b;
}

/* A parser's error message: non-empty, printable ASCII. */
static inline void fz_check_err(const char *err)
{
    CHECK(err != NULL && err[0] != '\0');
    for (const char *c = err; *c; c++)
        CHECK(*c >= 0x20 && *c < 0x7f);
}

/* ---- pieces of the reference statements of HTTP's grammar (RFC 9110) ---- */

static inline int fz_lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* The n bytes at s are t (lower case), ignoring case. */
static inline int fz_case_eq(const char *s, size_t n, const char *t)
{
    if (n != strlen(t))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (fz_lower((unsigned char)s[i]) != t[i])
            return 0;
    return 1;
}

/*
 * Percent-decoding as RFC 3986 2.1 states it, minus %00: "%" HEXDIG HEXDIG
 * is one byte, any other '%' is an error. out gets the bytes (room for n).
 * 0, or -1.
 */
static inline int fz_pct_decode(const char *s, size_t n, char *out, size_t *len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        const char *hi, *lo;

        if (s[i] != '%') {
            out[o++] = s[i];
            continue;
        }
        if (n - i < 3 || s[i + 1] == '\0' || s[i + 2] == '\0')
            return -1;
        hi = strchr(hex, fz_lower((unsigned char)s[i + 1]));
        lo = strchr(hex, fz_lower((unsigned char)s[i + 2]));
        if (hi == NULL || lo == NULL || (hi == hex && lo == hex))
            return -1;
        out[o++] = (char)((hi - hex) << 4 | (lo - hex));
        i += 2;
    }
    *len = o;
    return 0;
}

/* tchar: a byte of a token (a method, a header name). */
static inline int fz_tchar(unsigned char c)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";

    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1;
    for (size_t i = 0; i < sizeof(extra) - 1; i++)
        if (c == (unsigned char)extra[i])
            return 1;
    return 0;
}

/* The comma-separated list at s[0..n) has the element t (lower case), ignoring case and OWS. */
static inline int fz_list_has(const char *s, size_t n, const char *t)
{
    size_t i = 0;

    while (i <= n) {
        size_t j = i, a, b;

        while (j < n && s[j] != ',')
            j++;
        a = i;
        b = j;
        while (a < b && (s[a] == ' ' || s[a] == '\t'))
            a++;
        while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'))
            b--;
        if (fz_case_eq(s + a, b - a, t))
            return 1;
        i = j + 1;
    }
    return 0;
}

#endif
