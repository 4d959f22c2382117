/*
 * Unit tests of what the test tools share (test/tools/): the latency
 * histogram (hist.c) in the two shapes idpool-load and idpool-clientbench
 * use, held against the bucket formulas each tool had before it, and the
 * pop log's encoding (poplog.c) byte by byte.
 */
#include <stdlib.h>

#include "hist.h"
#include "poplog.h"
#include "unit.h"

/* idpool-load's former buckets (us): 1 us below 1024, 128 per power of two to 2^24. */
static unsigned load_index(uint64_t us)
{
    unsigned k, idx;

    if (us < 1024)
        return (unsigned)us;
    k = 63u - (unsigned)__builtin_clzll(us);
    idx = 1024 + ((k - 10) << 7) + (unsigned)((us >> (k - 7)) & 127);
    return idx < 2816 ? idx : 2815;
}

/* idpool-clientbench's former buckets (ns): exact below 64, 32 per power of two. */
static unsigned bench_index(uint64_t v)
{
    unsigned e;

    if (v < 64)
        return (unsigned)v;
    e = 63u - (unsigned)__builtin_clzll(v);
    return (e - 5 + 1) * 32 + (unsigned)(v >> (e - 5)) - 32;
}

static uint64_t bench_upper(unsigned i)
{
    unsigned e;

    if (i < 64)
        return i;
    e = i / 32 + 5 - 1;
    return (((uint64_t)(i % 32 + 32) + 1) << (e - 5)) - 1;
}

/* Values spread over every power of two, and the edges of each. */
static uint64_t sample(unsigned k)
{
    unsigned bit = k % 64, off = k / 64;
    uint64_t p = 1ULL << bit;

    return off == 0 ? p : off == 1 ? p - 1 : p + (p >> (off % 8 + 1)) * (off % 3);
}

static void test_hist_shapes(void)
{
    struct hist *l = hist_new(10, 7, 24), *b = hist_new(6, 5, 64);

    CHECK(l != NULL && b != NULL);
    CHECK_EQ_U64(l->nbuckets, 2816);
    CHECK_EQ_U64(b->nbuckets, 1920);
    for (unsigned k = 0; k < 64 * 40; k++) {
        uint64_t v = sample(k);
        unsigned i = hist_index(l, v), j = hist_index(b, v);

        CHECK_EQ_U64(i, load_index(v));
        CHECK_EQ_U64(j, bench_index(v));
        CHECK_EQ_U64(hist_hi(b, j), bench_upper(j));
        CHECK(hist_lo(b, j) <= v && v <= hist_hi(b, j));
        if (v < (1ULL << 24))
            CHECK(hist_lo(l, i) <= v && v <= hist_hi(l, i));
    }
    CHECK_EQ_U64(hist_hi(b, b->nbuckets - 1), UINT64_MAX);
    CHECK_EQ_U64(hist_index(l, UINT64_MAX), l->nbuckets - 1);
    free(l);
    free(b);
}

static void test_hist_quantile(void)
{
    struct hist *h = hist_new(10, 7, 24), *m = hist_new(10, 7, 24);

    CHECK_EQ_U64(hist_quantile(h, 0.5), 0);
    for (uint64_t v = 1; v <= 100; v++)
        hist_add(h, v);
    CHECK_EQ_U64(hist_total(h), 100);
    CHECK_EQ_U64(hist_quantile(h, 0.5), 50);  /* the 50th value */
    CHECK_EQ_U64(hist_quantile(h, 0.99), 99); /* the 99th */
    CHECK_EQ_U64(hist_quantile(h, 0.999), 100);
    CHECK_EQ_U64(hist_quantile(h, 0), 1);
    hist_add(h, 5000); /* bucket [4992, 5023]: the maximum caps it */
    CHECK_EQ_U64(hist_quantile(h, 1), 5000);
    CHECK_EQ_U64(hist_above(h, 100), 2);
    hist_merge(m, h);
    hist_merge(m, h);
    CHECK_EQ_U64(hist_total(m), 202);
    CHECK_EQ_U64(m->max, 5000);
    free(h);
    free(m);
}

static void test_poplog(void)
{
    static const unsigned char hdr[POPLOG_HEADER_LEN] = {
        'I', 'D', 'P', 'L', 'O', 'G', '1', '\n', 1, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0};
    static const unsigned char rec[POPLOG_RECORD_LEN] = {1, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x01, 0, 0,
                                                         0, 0, 0, 0, 3, 0, 0, 0, 0,    0,    0, 0};
    unsigned char b[POPLOG_HEADER_LEN + POPLOG_RECORD_LEN + 24];
    const uint64_t ids[3] = {5, 1ULL << 62, 7};
    FILE *f;

    poplog_header(b, 7, POPLOG_TAKE);
    CHECK(memcmp(b, hdr, sizeof hdr) == 0);
    poplog_record(b, 1, 0x102, 3);
    CHECK(memcmp(b, rec, sizeof rec) == 0);
    CHECK_STR(poplog_kind_names[POPLOG_LPOP], "lpop");
    CHECK_STR(poplog_kind_names[POPLOG_TAKE], "take");

    /* poplog_write: the same bytes through stdio. */
    f = tmpfile();
    CHECK(f != NULL);
    if (f == NULL)
        return;
    {
        unsigned char h2[POPLOG_HEADER_LEN];

        poplog_header(h2, 7, POPLOG_TAKE);
        CHECK(fwrite(h2, 1, sizeof h2, f) == sizeof h2);
    }
    CHECK(poplog_write(f, 1, 0x102, ids, 3) == 0);
    rewind(f);
    CHECK(fread(b, 1, sizeof b, f) == sizeof b);
    CHECK(memcmp(b, hdr, sizeof hdr) == 0);
    CHECK(memcmp(b + POPLOG_HEADER_LEN, rec, sizeof rec) == 0);
    CHECK_EQ_U64(poplog_get64(b + POPLOG_HEADER_LEN + POPLOG_RECORD_LEN + 8), 1ULL << 62);
    CHECK_EQ_U64(poplog_get32(b + 12), 7);
    fclose(f);
}

int main(void)
{
    RUN(test_hist_shapes);
    RUN(test_hist_quantile);
    RUN(test_poplog);
    return unit_done();
}
