/*
 * tools — what the test tools in test/tools/ share.
 */
#ifndef IDPOOL_TOOLS_H
#define IDPOOL_TOOLS_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns: system-wide, so comparable across processes. */
static inline uint64_t tools_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * A pop log of a libidpool consumer (the format idpool-check reads, see
 * test/tools/check.c): the header of consumer `consumer`, client kind 1
 * (idpool_take). NULL on an error (errno set).
 */
static inline FILE *tools_log_open(const char *path, uint32_t consumer)
{
    uint32_t h[6] = {1, consumer, 1, 0, 0, 0}; /* version, consumer, kind take, reserved */
    FILE *f = fopen(path, "wb");

    if (f && (fwrite("IDPLOG1\n", 1, 8, f) != 8 || fwrite(h, 4, 6, f) != 6)) {
        fclose(f);
        return NULL;
    }
    return f;
}

/* One pop log record: times, count, flags, the IDs. 0, or -1 on a write error. */
static inline int tools_log_record(FILE *f, uint64_t t0, uint64_t t1, const uint64_t *ids,
                                   uint32_t n)
{
    uint32_t hdr[2] = {n, 0};

    return fwrite(&t0, 8, 1, f) == 1 && fwrite(&t1, 8, 1, f) == 1 && fwrite(hdr, 4, 2, f) == 2 &&
                   fwrite(ids, 8, n, f) == n
               ? 0
               : -1;
}

#endif
