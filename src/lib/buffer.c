#include "buffer.h"

#include <stdlib.h>
#include <string.h>

int ring_push(struct ring *r, const uint64_t *ids, size_t n)
{
    if (r->n + n > r->cap) {
        size_t cap = r->cap ? r->cap : 64;
        uint64_t *v;

        while (cap < r->n + n)
            cap *= 2;
        v = malloc(cap * sizeof(*v));
        if (v == NULL)
            return -1;
        for (size_t i = 0; i < r->n; i++)
            v[i] = r->v[(r->head + i) & (r->cap - 1)];
        free(r->v);
        r->v = v;
        r->cap = cap;
        r->head = 0;
    }
    for (size_t i = 0; i < n; i++)
        r->v[(r->head + r->n + i) & (r->cap - 1)] = ids[i];
    r->n += n;
    return 0;
}

size_t ring_pop(struct ring *r, uint64_t *out, size_t n)
{
    if (n > r->n)
        n = r->n;
    for (size_t i = 0; i < n; i++)
        out[i] = r->v[(r->head + i) & (r->cap - 1)];
    if (n) {
        r->head = (r->head + n) & (r->cap - 1);
        r->n -= n;
    }
    return n;
}

void ring_free(struct ring *r)
{
    free(r->v);
    memset(r, 0, sizeof(*r));
}

unsigned batch_next(unsigned prev, double rate, unsigned target_ms, unsigned min, unsigned max,
                    int hungry)
{
    double want = rate * (double)target_ms / 1000.0;

    if (hungry && want < 2.0 * prev)
        want = 2.0 * prev;
    if (want < min)
        want = min;
    if (want > max)
        want = max;
    return (unsigned)want;
}

size_t low_water_ids(unsigned batch, unsigned buffer, double rate, unsigned target_ms)
{
    double want = rate * (double)target_ms / 1000.0;
    size_t lw = batch > buffer ? batch : buffer;

    if (want > LOW_WATER_MAX)
        want = LOW_WATER_MAX;
    return want > (double)lw ? (size_t)want : lw;
}

double rate_update(double rate, uint64_t ids, uint64_t ms)
{
    double now;

    if (ms == 0)
        return rate;
    now = (double)ids * 1000.0 / (double)ms;
    /* Weight by the time covered: a long quiet stretch counts more than a blip. */
    {
        double w = (double)ms / 1000.0;
        if (w > 1.0)
            w = 1.0;
        return rate * (1.0 - w) + now * w;
    }
}
