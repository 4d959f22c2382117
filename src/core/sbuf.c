#include "sbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sbuf_init(struct sbuf *b)
{
    memset(b, 0, sizeof(*b));
}

void sbuf_free(struct sbuf *b)
{
    free(b->p);
    sbuf_init(b);
}

/* Make room for `more` bytes of text plus the NUL; 0, or -1 (sticky). */
static int sbuf_reserve(struct sbuf *b, size_t more)
{
    size_t need, cap;
    char *p;

    if (b->failed)
        return -1;
    if (more > SIZE_MAX - b->len - 1)
        goto fail;
    need = b->len + more + 1;
    if (need <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    p = realloc(b->p, cap);
    if (p == NULL)
        goto fail;
    b->p = p;
    b->cap = cap;
    return 0;
fail:
    b->failed = 1;
    return -1;
}

void sbuf_append(struct sbuf *b, const char *s, size_t n)
{
    if (sbuf_reserve(b, n) < 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sbuf_puts(struct sbuf *b, const char *s)
{
    sbuf_append(b, s, strlen(s));
}

void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (sbuf_reserve(b, 64) < 0)
        return;
    va_start(ap, fmt);
    n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->p[b->len] = '\0';
        b->failed = 1;
        return;
    }
    if ((size_t)n >= b->cap - b->len) {
        if (sbuf_reserve(b, (size_t)n) < 0)
            return;
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

char *sbuf_detach(struct sbuf *b)
{
    char *p = b->p;

    if (b->failed) {
        sbuf_free(b);
        return NULL;
    }
    if (p == NULL)
        p = strdup("");
    sbuf_init(b);
    return p;
}

/*
 * Length of the valid UTF-8 sequence at s (1..4), or 0 when s[0] does not
 * start one (stray continuation byte, overlong form, surrogate, > U+10FFFF,
 * or truncated, e.g. by a column cut in the middle of a character).
 */
static size_t utf8_seq(const unsigned char *s)
{
    unsigned c = s[0];

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80 ? 4 : 0;
    }
    return 0;
}

#define UTF8_REPLACEMENT "\xef\xbf\xbd"

/*
 * Append s as text, replacing invalid UTF-8 with U+FFFD; with `label`, also
 * escape \ " and newline as a Prometheus label value must be.
 */
static void put_text(struct sbuf *b, const char *s, int label)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");

    while (*p) {
        const unsigned char *run = p;
        size_t n;

        /* Copy the longest run that needs no change in one append. */
        while (*p && (n = utf8_seq(p)) != 0 && !(label && (*p == '\\' || *p == '"' || *p == '\n')))
            p += n;
        sbuf_append(b, (const char *)run, (size_t)(p - run));
        if (*p == '\0')
            break;
        if (label && *p == '\\')
            sbuf_puts(b, "\\\\");
        else if (label && *p == '"')
            sbuf_puts(b, "\\\"");
        else if (label && *p == '\n')
            sbuf_puts(b, "\\n");
        else
            sbuf_puts(b, UTF8_REPLACEMENT);
        p++;
    }
}

void sbuf_put_utf8(struct sbuf *b, const char *s)
{
    put_text(b, s, 0);
}

void sbuf_put_label(struct sbuf *b, const char *s)
{
    put_text(b, s, 1);
}
