#include "ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "ledgercheck.h"

int ledger_on_lattice(const struct ledger_lattice *l, uint64_t id)
{
    uint64_t first = l->start > APP_ID_MIN ? l->start : APP_ID_MIN;

    return l->known && l->delta >= 1 && id >= first && id % l->delta == l->remainder;
}

uint64_t ledger_lattice_count(const struct ledger_lattice *l, uint64_t lo, uint64_t hi)
{
    struct lc_lattice c = {1, l->delta, l->remainder, l->start};
    uint64_t first = l->start > APP_ID_MIN ? l->start : APP_ID_MIN, x;

    if (lo < first)
        lo = first;
    if (!l->known || l->delta < 1 || l->remainder >= l->delta || lo >= hi ||
        lc_align(&c, lo, &x) != 0 || x >= hi) /* x: the first on l at or above lo */
        return 0;
    return (hi - 1 - x) / l->delta + 1;
}

const char *ledger_verdict_name(enum ledger_verdict v)
{
    static const char *const names[] = {
        "in_pool",           "not_yet_pushed", "not_pushed",  "issued",
        "issued_or_skipped", "leased",         "off_lattice", "never_leased",
    };

    return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "?";
}

/*
 * Meta's next is the pool's progress: every ID pushed so far is below it
 * (gen.h). At or above it, an ID of the current lease [next, hi) or of the
 * prefetched one [nlo, nhi) is still to come; one of another lease was
 * never pushed. Below it, the pool has passed it: handed out, unless the
 * application skips IDs (the ledger records ranges, not IDs). No meta: the
 * pool starts again above every lease, so a leased ID is behind it.
 */
enum ledger_verdict ledger_judge(const struct ledger_facts *f, uint64_t id)
{
    const struct gen_state *st = &f->st;

    if (f->lat->known && !ledger_on_lattice(f->lat, id))
        return LEDGER_OFF_LATTICE;
    if (!f->pool_read)
        return LEDGER_LEASED;
    if (f->in_pool)
        return LEDGER_IN_POOL;
    if (!f->have_meta)
        return LEDGER_ISSUED_OR_SKIPPED;
    if (id >= st->next) {
        if (id < st->hi || (gen_has_next(st) && id >= st->nlo && id < st->nhi))
            return LEDGER_NOT_YET_PUSHED;
        return LEDGER_NOT_PUSHED;
    }
    return f->gaps ? LEDGER_ISSUED_OR_SKIPPED : LEDGER_ISSUED;
}

/* n decimal digits at s, and their value into *v (n <= 9). */
static int digits(const char *s, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        *v = *v * 10 + (s[i] - '0');
    }
    return 1;
}

static int days_in(int y, int m)
{
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    return m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0) ? 29 : d[m - 1];
}

int ledger_time_sql(const char *t, char *buf, size_t len)
{
    static const char units[] = "smhd";
    static const char *const unit_sql[] = {"SECOND", "MINUTE", "HOUR", "DAY"};
    size_t n = strlen(t);
    int y, mo, d, h = 0, mi = 0, s = 0, ms = 0, v;
    const char *u;

    if (len)
        buf[0] = '\0';
    if (strcmp(t, "now") == 0) {
        snprintf(buf, len, "UTC_TIMESTAMP(3)");
        return 0;
    }
    if (strncmp(t, "now-", 4) == 0) {
        if (n < 6 || n > 12 || !(u = strchr(units, t[n - 1])) || !digits(t + 4, (int)n - 5, &v))
            return -1;
        snprintf(buf, len, "UTC_TIMESTAMP(3) - INTERVAL %d %s", v, unit_sql[u - units]);
        return 0;
    }
    if (n > 10 && t[n - 1] == 'Z')
        n--;
    if (n < 10 || !digits(t, 4, &y) || t[4] != '-' || !digits(t + 5, 2, &mo) || t[7] != '-' ||
        !digits(t + 8, 2, &d))
        return -1;
    if (n > 10) {
        if ((t[10] != 'T' && t[10] != ' ') || n < 16 || !digits(t + 11, 2, &h) || t[13] != ':' ||
            !digits(t + 14, 2, &mi))
            return -1;
        if (n > 16 && (n < 19 || t[16] != ':' || !digits(t + 17, 2, &s)))
            return -1;
        if (n > 19 && (n != 23 || t[19] != '.' || !digits(t + 20, 3, &ms)))
            return -1;
    }
    if (y < 1000 || mo < 1 || mo > 12 || d < 1 || d > days_in(y, mo) || h > 23 || mi > 59 || s > 59)
        return -1;
    snprintf(buf, len, "CAST('%04d-%02d-%02d %02d:%02d:%02d.%03d' AS DATETIME(3))", y, mo, d, h, mi,
             s, ms);
    return 0;
}
