/*
 * check_report — idpool-check's verdict and how it is said: the text
 * report, whose last line is the summary line the tests parse, or one
 * JSON object with the same fields and the details (--json).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

bool violated(const struct result *r)
{
    return r->duplicates || r->order || r->cross_order || r->arith || r->unleased ||
           r->lease_overlaps || r->count_mismatch || r->above_offset || r->bad_gaps ||
           r->gap_missing || r->bad_blocks;
}

/* The counts of the further checks given, as " name=N" fields (or JSON members). */
static void more_fields(const struct check *c, cJSON *j)
{
    const struct opts *o = &c->o;
    const struct result *r = &c->r;
    struct {
        bool on;
        const char *name;
        uint64_t v;
    } f[] = {
        {o->has_count, "count_mismatch", r->count_mismatch},
        {o->has_cur, "above_offset", r->above_offset},
        {o->has_gap, "bad_gaps", r->bad_gaps},
        {o->gap_all, "gap_missing", r->gap_missing},
        {o->blocks != 0, "bad_blocks", r->bad_blocks},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].on)
            continue;
        if (j) {
            char buf[24];
            snprintf(buf, sizeof buf, "%" PRIu64, f[i].v);
            cJSON_AddRawToObject(j, f[i].name, buf);
        } else {
            printf(" %s=%" PRIu64, f[i].name, f[i].v);
        }
    }
}

static void print_last_line(const struct check *c)
{
    const struct result *r = &c->r;
    printf("check: ids=%" PRIu64 " consumers=%zu duplicates=%" PRIu64 " order=%" PRIu64
           " cross_order=%" PRIu64 " arith=%" PRIu64 " unleased=%" PRIu64 " lease_overlaps=%" PRIu64
           " gaps=%" PRIu64 " empty_pops=%" PRIu64 " below_low_ms=%" PRIu64 " exposed=%" PRIu64,
           r->ids, c->o.nlogs, r->duplicates, r->order, r->cross_order, r->arith, r->unleased,
           r->lease_overlaps, r->gaps, r->empty_pops, r->below_low_ns / 1000000, r->exposed);
    printf(" exposed_lpop=%" PRIu64 " exposed_take=%" PRIu64, r->exposed_kind[POPLOG_LPOP],
           r->exposed_kind[POPLOG_TAKE]);
    more_fields(c, NULL);
    printf("\n");
}

static void print_pop(const struct check *c, const char *what, const struct pop *p, uint64_t t0)
{
    const struct logfile *lf = &c->files[p->file];

    if (!p->set) {
        printf("      %s: ?\n", what);
        return;
    }
    printf("      %s: %s (consumer %" PRIu32 ") %s %" PRIu64
           "%s%s, sent +%.3f ms, received +%.3f ms\n",
           what, lf->path, lf->consumer, unit(lf), p->offset, lf->is_list ? "" : ", ",
           lf->is_list ? "" : poplog_kind_names[lf->kind], rel_ms(p->t_send, t0),
           rel_ms(p->t_recv, t0));
}

static void print_examples(const struct example *ex, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf("    %s\n", ex[i].text);
}

/* The human report; its last line is the summary line of the interface. */
void report_text(const struct check *c)
{
    const struct opts *o = &c->o;
    const struct result *r = &c->r;
    uint64_t t0 = t0_of(c);

    printf("idpool-check: %zu logs, %" PRIu64 " records, %" PRIu64 " IDs (%" PRIu64
           " distinct), type %s, %.1f s of pops\n",
           o->nlogs, r->records, r->ids, r->distinct, o->monotonic ? "monotonic" : "trend",
           r->has_t_first ? ms(r->t_last - r->t_first) / 1000 : 0.0);
    printf("  U unique:     duplicates=%" PRIu64 " exposed=%" PRIu64 " (lpop %" PRIu64
           ", take %" PRIu64 ")",
           r->duplicates, r->exposed, r->exposed_kind[POPLOG_LPOP], r->exposed_kind[POPLOG_TAKE]);
    if (o->has_exposure)
        printf(" (window %" PRIu64 "..%" PRIu64 " ns, +%.3f..+%.3f ms)", o->exp_from, o->exp_to,
               rel_ms(o->exp_from, t0), rel_ms(o->exp_to, t0));
    printf("\n");
    for (size_t i = 0; i < r->n_ex_dup; i++) {
        const struct dup_example *ex = &r->ex_dup[i];
        const struct dup *d = &c->dups[ex->dup];
        printf("    id %" PRIu64 " popped %" PRIu64 " times%s\n", d->id, d->n,
               ex->exposed ? " (exposed)" : "");
        print_pop(c, "first", &ex->first, t0);
        print_pop(c, "again", &ex->again, t0);
    }
    if (o->monotonic) {
        printf("  M monotonic:  order=%" PRIu64 " cross_order=%" PRIu64 " (records)\n", r->order,
               r->cross_order);
        print_examples(r->ex_order, r->n_ex_order);
        print_examples(r->ex_cross, r->n_ex_cross);
    } else {
        printf("  M monotonic:  not checked (--type trend)\n");
    }
    printf("  A arithmetic: arith=%" PRIu64 " (start_offset=%" PRIu64 " delta=%" PRIu64
           " remainder=%" PRIu64 ")\n",
           r->arith, o->start_offset, o->delta, o->remainder);
    print_examples(r->ex_arith, r->n_ex_arith);
    if (o->leases) {
        printf("  L leased:     unleased=%" PRIu64 " lease_overlaps=%" PRIu64 " (%" PRIu64
               " leases, %" PRIu64 " leased IDs never popped)\n",
               r->unleased, r->lease_overlaps, r->leases, r->missing_leased);
        print_examples(r->ex_lease, r->n_ex_lease);
    } else {
        printf("  L leased:     not checked (no --leases)\n");
    }
    printf("  gaps=%" PRIu64 " (sorted neighbours more than delta apart)\n", r->gaps);
    printf("  empty pops=%" PRIu64, r->empty_pops);
    if (r->empty_pops)
        printf(", longest run %.3f ms (%s)", ms(r->longest_empty),
               c->files[r->longest_empty_file].path);
    printf("\n");
    if (o->llen)
        printf("  below low-water %" PRIu64 ": %.3f ms in %" PRIu64
               " stretches, longest %.3f ms (%" PRIu64 " samples)\n",
               o->low_water, ms(r->below_low_ns), r->below_low_runs, ms(r->below_low_longest),
               r->llen_samples);
    if (o->alerts) {
        printf("  alerts: %zu (ms after t0 %" PRIu64 ")\n", c->nalerts, t0);
        for (size_t i = 0; i < c->nalerts; i++) {
            const cJSON *ev = c->alerts[i].event;
            printf("    %+10.3f ms  %-20s %-9s %s\n", rel_ms(c->alerts[i].t_ns, t0),
                   alert_str(ev, "alert", "kind"), alert_str(ev, "state", NULL),
                   alert_str(ev, "app", NULL));
        }
    }
    if (o->has_count || o->has_cur || o->has_gap || o->blocks) {
        printf("  further:");
        more_fields(c, NULL);
        printf("\n");
        print_examples(r->ex_more, r->n_ex_more);
    }
    printf("  verdict: %s\n", violated(r) ? "VIOLATION" : "ok");
    print_last_line(c);
}

/* Adds a uint64 as a JSON number without going through a double. */
static void json_u64(cJSON *obj, const char *name, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    cJSON_AddRawToObject(obj, name, buf);
}

static cJSON *json_pop(const struct check *c, const struct pop *p, uint64_t t0)
{
    cJSON *o = cJSON_CreateObject();
    if (!p->set)
        return o;
    cJSON_AddStringToObject(o, "log", c->files[p->file].path);
    cJSON_AddNumberToObject(o, "consumer", c->files[p->file].consumer);
    json_u64(o, "offset", p->offset);
    json_u64(o, "t_send_ns", p->t_send);
    json_u64(o, "t_recv_ns", p->t_recv);
    cJSON_AddNumberToObject(o, "t_send_ms", rel_ms(p->t_send, t0));
    return o;
}

static void json_examples(cJSON *obj, const char *name, const struct example *ex, size_t n)
{
    cJSON *a = cJSON_AddArrayToObject(obj, name);
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(ex[i].text));
}

/* --json: one object with the fields of the summary line and the details. */
int report_json(const struct check *c)
{
    const struct opts *o = &c->o;
    const struct result *r = &c->r;
    uint64_t t0 = t0_of(c);
    cJSON *j = cJSON_CreateObject();

    json_u64(j, "ids", r->ids);
    cJSON_AddNumberToObject(j, "consumers", (double)o->nlogs);
    json_u64(j, "duplicates", r->duplicates);
    json_u64(j, "order", r->order);
    json_u64(j, "cross_order", r->cross_order);
    json_u64(j, "arith", r->arith);
    json_u64(j, "unleased", r->unleased);
    json_u64(j, "lease_overlaps", r->lease_overlaps);
    json_u64(j, "gaps", r->gaps);
    json_u64(j, "empty_pops", r->empty_pops);
    json_u64(j, "below_low_ms", r->below_low_ns / 1000000);
    json_u64(j, "exposed", r->exposed);
    json_u64(j, "exposed_lpop", r->exposed_kind[POPLOG_LPOP]);
    json_u64(j, "exposed_take", r->exposed_kind[POPLOG_TAKE]);
    more_fields(c, j);
    cJSON_AddBoolToObject(j, "ok", !violated(r));
    cJSON_AddStringToObject(j, "type", o->monotonic ? "monotonic" : "trend");
    json_u64(j, "records", r->records);
    json_u64(j, "distinct", r->distinct);
    json_u64(j, "t0_ns", t0);
    if (o->leases) {
        json_u64(j, "leases", r->leases);
        json_u64(j, "missing_leased", r->missing_leased);
    }
    cJSON_AddNumberToObject(j, "longest_empty_ms", ms(r->longest_empty));
    if (o->llen) {
        cJSON_AddNumberToObject(j, "below_low_longest_ms", ms(r->below_low_longest));
        json_u64(j, "below_low_stretches", r->below_low_runs);
    }
    if (o->has_exposure) {
        json_u64(j, "exposure_from_ns", o->exp_from);
        json_u64(j, "exposure_to_ns", o->exp_to);
    }
    cJSON *dups = cJSON_AddArrayToObject(j, "duplicate_examples");
    for (size_t i = 0; i < r->n_ex_dup; i++) {
        const struct dup_example *ex = &r->ex_dup[i];
        cJSON *e = cJSON_CreateObject();
        json_u64(e, "id", c->dups[ex->dup].id);
        json_u64(e, "pops", c->dups[ex->dup].n);
        cJSON_AddBoolToObject(e, "exposed", ex->exposed);
        cJSON_AddItemToObject(e, "first", json_pop(c, &ex->first, t0));
        cJSON_AddItemToObject(e, "again", json_pop(c, &ex->again, t0));
        cJSON_AddItemToArray(dups, e);
    }
    json_examples(j, "order_examples", r->ex_order, r->n_ex_order);
    json_examples(j, "cross_order_examples", r->ex_cross, r->n_ex_cross);
    json_examples(j, "arith_examples", r->ex_arith, r->n_ex_arith);
    json_examples(j, "lease_examples", r->ex_lease, r->n_ex_lease);
    json_examples(j, "further_examples", r->ex_more, r->n_ex_more);
    cJSON *logs = cJSON_AddArrayToObject(j, "logs");
    for (size_t i = 0; i < o->nlogs; i++) {
        const struct logfile *lf = &c->files[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "log", lf->path);
        cJSON_AddNumberToObject(e, "consumer", lf->consumer);
        json_u64(e, "records", lf->records);
        json_u64(e, "ids", lf->ids);
        json_u64(e, "empty_pops", lf->empties);
        cJSON_AddNumberToObject(e, "longest_empty_ms", ms(lf->longest_empty));
        cJSON_AddItemToArray(logs, e);
    }
    cJSON *al = cJSON_AddArrayToObject(j, "alerts");
    for (size_t i = 0; i < c->nalerts; i++) {
        const cJSON *ev = c->alerts[i].event;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "kind", alert_str(ev, "alert", "kind"));
        cJSON_AddStringToObject(e, "state", alert_str(ev, "state", NULL));
        cJSON_AddStringToObject(e, "app", alert_str(ev, "app", NULL));
        cJSON_AddNumberToObject(e, "t_ms", rel_ms(c->alerts[i].t_ns, t0));
        json_u64(e, "t_ns", c->alerts[i].t_ns);
        cJSON_AddItemToArray(al, e);
    }
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) {
        fprintf(stderr, "idpool-check: out of memory\n");
        return -1;
    }
    printf("%s\n", s);
    free(s);
    return 0;
}
