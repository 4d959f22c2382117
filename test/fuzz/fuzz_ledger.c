/*
 * fuzz_ledger — libFuzzer target for ledger.c: ledger_time_sql(), which
 * turns an operator's TIME (idpoolctl explain --from/--to) into SQL, and
 * ledger_lattice_count().
 *
 * Byte 0 picks the mode. Mode even: the rest is TIME. Invariants: refused
 * (-1) leaves buf empty; accepted, the expression is one of the three
 * shapes, NUL-terminated in the buffer, and quotes nothing but digits,
 * '-', ':', ' ' and '.' (only digits of the input reach MySQL). Mode odd:
 * a lattice (delta 1..64 or any, remainder, start) and a range [lo, hi)
 * from fz_uint, small or near 2^64: the count equals a loop over the range
 * when it is short, and never exceeds hi - lo.
 */
#include "fuzz.h"
#include "ledger.h"

static void time_case(const uint8_t *data, size_t size)
{
    char t[64], buf[160];
    size_t n = size < sizeof(t) - 1 ? size : sizeof(t) - 1;
    const char *q1, *q2;

    memcpy(t, data, n);
    t[n] = '\0';
    memset(buf, 'X', sizeof(buf));
    if (ledger_time_sql(t, buf, sizeof(buf)) != 0) {
        CHECK(buf[0] == '\0');
        return;
    }
    CHECK(memchr(buf, '\0', sizeof(buf)) != NULL);
    if (strncmp(buf, "UTC_TIMESTAMP(3)", 16) == 0) {
        CHECK(strchr(buf, '\'') == NULL);
        return;
    }
    CHECK(strncmp(buf, "CAST('", 6) == 0);
    q1 = buf + 5;
    q2 = strchr(q1 + 1, '\'');
    CHECK(q2 != NULL && strcmp(q2, "' AS DATETIME(3))") == 0);
    for (const char *p = q1 + 1; p < q2; p++)
        CHECK((*p >= '0' && *p <= '9') || *p == '-' || *p == ':' || *p == ' ' || *p == '.');
}

static void count_case(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    struct ledger_lattice l = {1, "lease", 0, 0, 0};
    uint64_t lo, hi, c, brute = 0;
    uint8_t how = fz_u8(&f);

    l.delta = (how & 1) ? fz_uint(&f, 8) : (uint64_t)(fz_u8(&f) % 64) + 1;
    l.remainder = (how & 2) ? fz_uint(&f, 8) : fz_u8(&f) % (l.delta ? l.delta : 1);
    l.start = (how & 4) ? fz_uint(&f, 8) : fz_u8(&f);
    lo = fz_uint(&f, 8);
    hi = (how & 8) ? lo + fz_u8(&f) * 4u : fz_uint(&f, 8);
    if (hi < lo && (how & 8))
        hi = UINT64_MAX; /* wrapped past the top */
    c = ledger_lattice_count(&l, lo, hi);
    CHECK(hi <= lo ? c == 0 : c <= hi - lo);
    if (hi > lo && hi - lo <= 1024) {
        for (uint64_t x = lo; x < hi; x++)
            brute += (uint64_t)ledger_on_lattice(&l, x);
        if (l.delta >= 1 && l.remainder < l.delta)
            CHECK(c == brute);
        else
            CHECK(c == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        count_case(data + 1, size - 1);
    else
        time_case(data + 1, size - 1);
    return 0;
}
