/*
 * check_timing — what idpool-check reports without judging: the time the
 * pool spent below its low-water mark (--low-water, --llen) and the alert
 * events (--alerts).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

struct sample {
    uint64_t t;
    uint64_t len;
};

static int cmp_sample(const void *pa, const void *pb)
{
    const struct sample *a = pa, *b = pb;
    return (a->t > b->t) - (a->t < b->t);
}

/*
 * --llen: time the pool spent below --low-water. A sample below the mark
 * counts until the next sample; the last sample counts nothing.
 */
int llen_check(struct check *c)
{
    struct result *r = &c->r;
    struct sample *s = NULL;
    size_t n = 0, cap = 0, lineno = 0, len = 0;
    char *line = NULL;
    int rc = -1;
    FILE *f = open_text(c->o.llen);

    if (!f)
        return -1;
    while (getline(&line, &len, f) > 0) {
        lineno++;
        if (skip_line(line))
            continue;
        if (grow(&s, &cap, n + 1, sizeof *s) < 0)
            goto out;
        if (two_numbers(line, &s[n].t, &s[n].len) < 0) {
            fprintf(stderr, "idpool-check: %s:%zu: expected \"t_ns len\"\n", c->o.llen, lineno);
            goto out;
        }
        n++;
    }
    r->llen_samples = n;
    if (n)
        qsort(s, n, sizeof *s, cmp_sample);
    uint64_t run = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i].len < c->o.low_water) {
            uint64_t d = s[i + 1].t - s[i].t;
            if (run == 0)
                r->below_low_runs++;
            run += d;
            r->below_low_ns += d;
            if (run > r->below_low_longest)
                r->below_low_longest = run;
        } else {
            run = 0;
        }
    }
    rc = 0;
out:
    free(s);
    free(line);
    fclose(f);
    return rc;
}

/* --alerts: lines "t_ns <json message>". */
int alerts_load(struct check *c)
{
    size_t cap = 0, lineno = 0, len = 0;
    char *line = NULL;
    int rc = -1;
    FILE *f = open_text(c->o.alerts);

    if (!f)
        return -1;
    while (getline(&line, &len, f) > 0) {
        char *sp, *end;
        lineno++;
        if (skip_line(line))
            continue;
        sp = line + strcspn(line, " \t");
        if (*sp)
            *sp++ = '\0';
        end = sp + strlen(sp);
        while (end > sp && (end[-1] == '\n' || end[-1] == '\r'))
            *--end = '\0';
        uint64_t t;
        cJSON *ev = cJSON_Parse(sp);
        if (parse_u64(line, &t) < 0 || !cJSON_IsObject(ev)) {
            cJSON_Delete(ev);
            fprintf(stderr, "idpool-check: %s:%zu: expected \"t_ns <json object>\"\n", c->o.alerts,
                    lineno);
            goto out;
        }
        if (grow(&c->alerts, &cap, c->nalerts + 1, sizeof *c->alerts) < 0) {
            cJSON_Delete(ev);
            goto out;
        }
        c->alerts[c->nalerts++] = (struct alert_ev){t, ev};
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

/* A string member of an alert, "?" if absent. */
const char *alert_str(const cJSON *ev, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ev, a);
    if (!cJSON_IsString(v) && b)
        v = cJSON_GetObjectItemCaseSensitive(ev, b);
    return cJSON_IsString(v) ? v->valuestring : "?";
}
