/*
 * sbuf — a growable, NUL-terminated text buffer for the renderers
 * (/metrics, JSON bodies, idpoolctl tables). Pure.
 */
#ifndef IDPOOL_SBUF_H
#define IDPOOL_SBUF_H

#include <stddef.h>

/*
 * A growable, NUL-terminated text buffer. Errors are sticky: after a failed
 * allocation every append does nothing and `failed` is 1, so a renderer
 * checks once at the end.
 */
struct sbuf {
    char *p;    /* heap, NUL-terminated; NULL until the first append */
    size_t len; /* bytes of text, without the NUL */
    size_t cap; /* bytes allocated */
    int failed; /* an allocation failed: the text is incomplete */
};

void sbuf_init(struct sbuf *b);
void sbuf_free(struct sbuf *b);
void sbuf_append(struct sbuf *b, const char *s, size_t n);
void sbuf_puts(struct sbuf *b, const char *s);
void sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append s (NULL = "") with every byte that is not part of valid UTF-8 replaced by U+FFFD. */
void sbuf_put_utf8(struct sbuf *b, const char *s);
/* The same, also escaping backslash, quote and newline as a Prometheus label value must be. */
void sbuf_put_label(struct sbuf *b, const char *s);
/*
 * Hand the text over to the caller (free() it; "" when empty) and reset b.
 * NULL when an append failed (b is then freed).
 */
char *sbuf_detach(struct sbuf *b) __attribute__((warn_unused_result));

#endif
