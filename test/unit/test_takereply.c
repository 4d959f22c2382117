/*
 * Unit tests of takereply (takereply.c): the table of refusals, a refusal
 * text's code, wait and limit, and the IDs of an idpool_take array reply.
 *
 * `test_takereply --table` prints the table instead, one refusal a line
 * ("IDPOOL_<CODE> <http> <retry_ms> <outcome>"): the Python client's
 * mirror of it is tested against that (test_pyclient.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "takereply.h"
#include "unit.h"

static void test_table(void)
{
    CHECK_STR(takereply_name(TR_EPOCH), "IDPOOL_EPOCH");
    CHECK_STR(takereply_name(TR_NONE), "");
    CHECK_STR(takereply_name((enum take_refusal)999), "");
    CHECK(takereply_http(TR_RATE) == 429);
    CHECK(takereply_http(TR_EPOCH) == 503);
    CHECK(takereply_http(TR_EMPTY) == 503);
    CHECK(takereply_http(TR_LIMIT) == 400);
    CHECK(takereply_http(TR_AUTH) == 401);
    CHECK(takereply_http(TR_FORBIDDEN) == 403);
    CHECK(takereply_http(TR_NOAPP) == 404);
    CHECK(takereply_outcome(TR_NONE) == T_DOWN);
    CHECK(takereply_outcome(TR_EMPTY) == T_DRY);
    CHECK(takereply_outcome(TR_AUTH) == T_NOAPP);
    CHECK(takereply_outcome(TR_FORBIDDEN) == T_NOAPP);
    CHECK(takereply_outcome(TR_BADARG) == T_DOWN);
    CHECK(takereply_outcome(TR_UNAVAILABLE) == T_DOWN);
    CHECK_EQ_U64(takereply_retry_ms(TR_EPOCH), 200);
    CHECK_EQ_U64(takereply_retry_ms(TR_RATE), 1000);
    CHECK_EQ_U64(takereply_retry_ms(TR_LIMIT), 0);
    CHECK_STR(takereply_outcome_name(T_NOAPP), "noapp");
    /* every row: a name that parses back to it, a meaning, an error status */
    for (int r = TR_NONE + 1; r < TR_COUNT; r++) {
        const char *m;
        CHECK((int)takereply_parse(takereply_name((enum take_refusal)r), &m) == r);
        CHECK_STR(m, "");
        CHECK(strlen(takereply_meaning((enum take_refusal)r)) > 0);
        CHECK(takereply_http((enum take_refusal)r) >= 400);
    }
}

static void test_parse(void)
{
    const char *m = NULL;

    CHECK(takereply_parse("IDPOOL_RATE max_size_per_second 20 reached", &m) == TR_RATE);
    CHECK_STR(m, "max_size_per_second 20 reached");
    CHECK(takereply_parse("IDPOOL_NOAPP no such application: x", NULL) == TR_NOAPP);
    CHECK(takereply_parse("IDPOOL_EPOCH", &m) == TR_EPOCH);
    CHECK_STR(m, "");
    CHECK(takereply_parse("IDPOOL_RATES x", &m) == TR_NONE); /* a whole code, not a prefix */
    CHECK_STR(m, "");
    CHECK(takereply_parse("IDPOOL_", NULL) == TR_NONE);
    CHECK(takereply_parse("ERR Function not found", NULL) == TR_NONE);
    CHECK(takereply_parse("READONLY You can't write against a read only replica.", NULL) ==
          TR_NONE);
    CHECK(takereply_parse(NULL, &m) == TR_NONE);
    CHECK(takereply_parse("", NULL) == TR_NONE);
}

static void test_wait_and_limit(void)
{
    CHECK_EQ_U64(takereply_wait_ms(TR_RATE, "max_size_per_second 20 reached; retry in 340 ms"),
                 340);
    CHECK_EQ_U64(takereply_wait_ms(TR_RATE, "max_size_per_second 20 reached"), 1000);
    CHECK_EQ_U64(takereply_wait_ms(TR_EPOCH, "pool not yet re-validated"), 200);
    CHECK_EQ_U64(takereply_wait_ms(TR_EPOCH, "retry in 60000 ms"), 200); /* out of range */
    CHECK_EQ_U64(takereply_limit("IDPOOL_LIMIT count 9 exceeds max_size_per_times 5", 9), 5);
    CHECK_EQ_U64(takereply_limit("IDPOOL_LIMIT count 9 exceeds", 9), 4);
}

/* A string element of an array reply. */
static redisReply *str(const char *s)
{
    redisReply *y = calloc(1, sizeof(*y));

    y->type = REDIS_REPLY_STRING;
    y->str = (char *)s;
    y->len = strlen(s);
    return y;
}

static char skipped[256];

static void on_skip(const char *entry, void *arg)
{
    (*(int *)arg)++;
    snprintf(skipped + strlen(skipped), sizeof(skipped) - strlen(skipped), "[%s]", entry);
}

static void test_ids(void)
{
    redisReply *el[8], x = {0}, nil = {0};
    uint64_t ids[8];
    int nskip = 0;

    nil.type = REDIS_REPLY_NIL;
    el[0] = str("1");
    el[1] = str("18446744073709551615");
    el[2] = &nil;                        /* not a string: skipped silently */
    el[3] = str("18446744073709551616"); /* overflow */
    el[4] = str("-1");
    el[5] = str(" 7");
    el[6] = str("");
    el[7] = str("42");
    x.type = REDIS_REPLY_ARRAY;
    x.element = el;
    x.elements = 8;
    CHECK_EQ_U64(takereply_ids(&x, ids, on_skip, &nskip), 3);
    CHECK_EQ_U64(ids[0], 1);
    CHECK_EQ_U64(ids[1], UINT64_MAX);
    CHECK_EQ_U64(ids[2], 42);
    CHECK(nskip == 4);
    CHECK_STR(skipped, "[18446744073709551616][-1][ 7][]");
    CHECK_EQ_U64(takereply_ids(&x, ids, NULL, NULL), 3);
    x.elements = 0;
    CHECK_EQ_U64(takereply_ids(&x, ids, NULL, NULL), 0);
    for (int i = 0; i < 8; i++)
        if (i != 2)
            free(el[i]);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--table") == 0) {
        for (int r = TR_NONE + 1; r < TR_COUNT; r++)
            printf("%s %d %u %s\n", takereply_name((enum take_refusal)r),
                   takereply_http((enum take_refusal)r), takereply_retry_ms((enum take_refusal)r),
                   takereply_outcome_name(takereply_outcome((enum take_refusal)r)));
        return 0;
    }
    RUN(test_table);
    RUN(test_parse);
    RUN(test_wait_and_limit);
    RUN(test_ids);
    return unit_done();
}
