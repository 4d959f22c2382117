#include "takereply.h"

#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "resp.h"
#include "text.h"

#define PREFIX     "IDPOOL_"
#define PREFIX_LEN 7

static const struct {
    const char *name, *meaning;
    int http;
    unsigned retry_ms;
    enum take_outcome outcome;
} refusals[TR_COUNT] = {[TR_NONE] = {"", "not a refusal of idpool", 503, 0, T_DOWN},
#define X(code, http, retry, outcome, meaning)                                                     \
    [TR_##code] = {PREFIX #code, meaning, http, retry, T_##outcome},
                        TAKE_REFUSALS(X)
#undef X
};

static const char *const outcomes[] = {
#define X(id, name) [T_##id] = name,
    TAKE_OUTCOMES(X)
#undef X
};

static int known(enum take_refusal r)
{
    return (unsigned)r < TR_COUNT;
}

const char *takereply_name(enum take_refusal r)
{
    return refusals[known(r) ? r : TR_NONE].name;
}

const char *takereply_meaning(enum take_refusal r)
{
    return refusals[known(r) ? r : TR_NONE].meaning;
}

int takereply_http(enum take_refusal r)
{
    return refusals[known(r) ? r : TR_NONE].http;
}

unsigned takereply_retry_ms(enum take_refusal r)
{
    return refusals[known(r) ? r : TR_NONE].retry_ms;
}

enum take_outcome takereply_outcome(enum take_refusal r)
{
    return refusals[known(r) ? r : TR_NONE].outcome;
}

const char *takereply_outcome_name(enum take_outcome o)
{
    return (unsigned)o < sizeof(outcomes) / sizeof(outcomes[0]) ? outcomes[o] : "?";
}

enum take_refusal takereply_parse(const char *text, const char **msg)
{
    size_t n;

    if (msg)
        *msg = "";
    if (text == NULL || strncmp(text, PREFIX, PREFIX_LEN) != 0)
        return TR_NONE;
    n = strcspn(text, " ");
    for (int r = TR_NONE + 1; r < TR_COUNT; r++)
        if (strlen(refusals[r].name) == n && memcmp(text, refusals[r].name, n) == 0) {
            if (msg)
                *msg = text[n] ? text + n + 1 : text + n;
            return (enum take_refusal)r;
        }
    return TR_NONE;
}

unsigned takereply_wait_ms(enum take_refusal r, const char *text)
{
    return (unsigned)text_retry_ms(text, (long)takereply_retry_ms(r));
}

unsigned takereply_limit(const char *text, unsigned count)
{
    const char *p = strstr(text, "max_size_per_times ");

    return p ? (unsigned)strtoul(p + 19, NULL, 10) : count / 2;
}

size_t takereply_ids(const struct redisReply *x, uint64_t *ids,
                     void (*skip)(const char *entry, void *arg), void *arg)
{
    size_t n = 0;

    for (size_t i = 0; i < x->elements; i++) {
        const redisReply *y = x->element[i];

        if (y->type != REDIS_REPLY_STRING)
            continue;
        if (u64_parse(y->str, y->len, &ids[n]) == 0)
            n++;
        else if (skip)
            skip(y->str, arg);
    }
    return n;
}
