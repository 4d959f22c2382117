/*
 * unit_bytes — helpers of the parser tests that feed bytes as they arrive
 * from a socket (test_httpreq.c, test_httpresp.c): exact-size heap copies,
 * so that ASan sees any read past the end, the input shown escaped when a
 * check fails, and heads of a chosen length.
 */
#ifndef IDPOOL_UNIT_BYTES_H
#define IDPOOL_UNIT_BYTES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The n bytes at s in a new heap buffer of exactly n bytes (no NUL after them); old is freed. */
static inline char *unit_copy(char *old, const char *s, size_t n)
{
    char *b;

    free(old);
    b = malloc(n ? n : 1);
    if (b == NULL)
        exit(1);
    memcpy(b, s, n);
    return b;
}

/* The n bytes at s, escaped, on stderr after what: which input failed. */
static inline void unit_show(const char *what, const char *s, size_t n)
{
    fprintf(stderr, "  %s: \"", what);
    for (size_t i = 0; i < n && i < 200; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\r')
            fputs("\\r", stderr);
        else if (c == '\n')
            fputs("\\n", stderr);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(stderr, "\\x%02x", c);
        else
            fputc(c, stderr);
    }
    fprintf(stderr, "%s\" (%zu bytes)\n", n > 200 ? "..." : "", n);
}

/* The n bytes at s end with an empty line: "\n\n" or "\n\r\n". */
static inline int unit_ends_head(const char *s, size_t n)
{
    return n >= 2 && s[n - 1] == '\n' &&
           (s[n - 2] == '\n' || (n >= 3 && s[n - 2] == '\r' && s[n - 3] == '\n'));
}

/*
 * A head of exactly n bytes, NUL-terminated: first, eol, "X: vvv...", eol,
 * eol (n >= strlen(first) + 3 x strlen(eol) + 3). The caller frees it.
 */
static inline char *unit_head_of(const char *first, size_t n, const char *eol)
{
    char *s = malloc(n + 1);
    size_t e = strlen(eol), pre = strlen(first) + e + 3, post = 2 * e;

    if (s == NULL)
        exit(1);
    snprintf(s, n + 1, "%s%sX: ", first, eol);
    memset(s + pre, 'v', n - pre - post);
    memcpy(s + n - post, eol, e);
    memcpy(s + n - e, eol, e);
    s[n] = '\0';
    return s;
}

#endif
