/*
 * unit — a minimal test harness for the pure modules. Each test file defines
 * test functions, lists them in main() with RUN(), and returns unit_done().
 */
#ifndef IDPOOL_UNIT_H
#define IDPOOL_UNIT_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failures;
static int unit_checks;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        unit_checks++;                                                                             \
        if (!(cond)) {                                                                             \
            unit_failures++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        uint64_t a_ = (a), b_ = (b);                                                               \
        unit_checks++;                                                                             \
        if (a_ != b_) {                                                                            \
            unit_failures++;                                                                       \
            fprintf(stderr, "%s:%d: %s == %" PRIu64 ", expected %" PRIu64 "\n", __FILE__,          \
                    __LINE__, #a, a_, b_);                                                         \
        }                                                                                          \
    } while (0)

#define CHECK_STR_CONTAINS(haystack, needle)                                                       \
    do {                                                                                           \
        const char *h_ = (haystack), *n_ = (needle);                                               \
        unit_checks++;                                                                             \
        if (!h_ || !strstr(h_, n_)) {                                                              \
            unit_failures++;                                                                       \
            fprintf(stderr, "%s:%d: '%s' does not contain '%s'\n", __FILE__, __LINE__,             \
                    h_ ? h_ : "(null)", n_);                                                       \
        }                                                                                          \
    } while (0)

/* a is the string want (NULL: absent). */
#define CHECK_STR(a, want)                                                                         \
    do {                                                                                           \
        const char *a_ = (a), *w_ = (want);                                                        \
        unit_checks++;                                                                             \
        if (!(a_ == NULL ? w_ == NULL : w_ != NULL && strcmp(a_, w_) == 0)) {                      \
            unit_failures++;                                                                       \
            fprintf(stderr, "%s:%d: %s == '%s', expected '%s'\n", __FILE__, __LINE__, #a,          \
                    a_ ? a_ : "(null)", w_ ? w_ : "(null)");                                       \
        }                                                                                          \
    } while (0)

#define RUN(fn)                                                                                    \
    do {                                                                                           \
        int before_ = unit_failures;                                                               \
        fn();                                                                                      \
        printf("%s %s\n", unit_failures == before_ ? "ok" : "not ok", #fn);                        \
    } while (0)

/*
 * The source tree's file rel (e.g. "sql/schema.sql") opened for reading:
 * under $IDPOOL_SOURCE_ROOT (meson sets it), else "..". A failed CHECK and
 * NULL when it cannot be read.
 */
static inline FILE *unit_source(const char *rel)
{
    const char *root = getenv("IDPOOL_SOURCE_ROOT");
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root ? root : "..", rel);
    f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f)
        fprintf(stderr, "cannot read %s (set IDPOOL_SOURCE_ROOT)\n", path);
    return f;
}

static inline int unit_done(void)
{
    printf("%d checks, %d failed\n", unit_checks, unit_failures);
    return unit_failures ? 1 : 0;
}

#ifdef IDPOOL_URL_H
#include <stdlib.h>

/* A URL the test knows is good, parsed (url.h included before this file). */
static inline struct redis_url url_of(const char *s)
{
    struct redis_url u;
    char err[256];

    if (redis_url_parse(s, &u, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s: %s\n", s, err);
        exit(1);
    }
    return u;
}
#endif

#endif
