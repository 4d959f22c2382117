/*
 * libidpool's public API without servers (include/idpool.h): the argument
 * checks of every call, idpool_app_get's errors and handles,
 * idpool_strerror's names and idpool_options_init. The environments are
 * closed loopback ports: the background thread's connects are refused, and
 * only test_env_error waits for IDs (its timeout_ms: what each one said).
 */
#include <stdint.h>
#include <string.h>

#include "idpool.h"
#include "unit.h"

static const char *const envs[] = {"redis://127.0.0.1:1/0"};

static void test_options_init(void)
{
    struct idpool_options o;

    memset(&o, 0xa5, sizeof(o));
    idpool_options_init(&o);
    CHECK_EQ_U64(o.size, sizeof(o));
    CHECK_EQ_U64(o.timeout_ms, 0);
    CHECK_EQ_U64(o.max_batch, 0);
    CHECK_EQ_U64(o.buffer, 0);
    CHECK(o.key_prefix == NULL);
    CHECK(o.ca_file == NULL);
}

static void test_strerror(void)
{
    static const enum idpool_rc all[] = {IDPOOL_OK,        IDPOOL_EINVAL, IDPOOL_ENOMEM,
                                         IDPOOL_ETIMEDOUT, IDPOOL_ENOAPP, IDPOOL_ECLOSED};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        CHECK(strcmp(idpool_strerror(all[i]), "unknown error") != 0);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(idpool_strerror(all[i]), idpool_strerror(all[j])) != 0);
    }
    CHECK_STR(idpool_strerror(IDPOOL_ETIMEDOUT), "timed out: no environment supplied IDs in time");
    CHECK_STR(idpool_strerror((enum idpool_rc) - 99), "unknown error");
    CHECK_STR(idpool_strerror((enum idpool_rc)7), "unknown error");
}

static void test_client_new(void)
{
    struct idpool_client *c = (struct idpool_client *)&c;
    char err[256];

    CHECK(idpool_client_new(NULL, 1, NULL, &c, err, sizeof(err)) == IDPOOL_EINVAL);
    CHECK_STR_CONTAINS(err, "give 1 to 32 environments");
    CHECK(idpool_client_new(envs, 0, NULL, &c, err, sizeof(err)) == IDPOOL_EINVAL);
    CHECK(idpool_client_new(envs, 1, NULL, NULL, err, sizeof(err)) == IDPOOL_EINVAL);
    {
        const char *bad[] = {"ftp://x"};
        CHECK(idpool_client_new(bad, 1, NULL, &c, err, sizeof(err)) == IDPOOL_EINVAL);
        CHECK(c == NULL);
        CHECK_STR_CONTAINS(err, "environment 0: ");
    }
    {
        /* A Cluster is a Redis environment: nothing connected before a take. */
        const char *cluster[] = {"redis-cluster://127.0.0.1:7000,127.0.0.1:7001"};
        CHECK(idpool_client_new(cluster, 1, NULL, &c, err, sizeof(err)) == IDPOOL_OK);
        CHECK(c != NULL);
        idpool_client_free(c);
    }
    {
        const char *cluster[] = {"redis-cluster://127.0.0.1:7000/1"};
        CHECK(idpool_client_new(cluster, 1, NULL, &c, err, sizeof(err)) == IDPOOL_EINVAL);
        CHECK(c == NULL);
        CHECK_STR_CONTAINS(err, "environment 0: ");
        CHECK_STR_CONTAINS(err, "database");
    }
}

/* idpool_app_get: EINVAL for NULLs and bad keys (*out untouched), one handle per key. */
static void test_app_get(void)
{
    struct idpool_client *c;
    struct idpool_app *a, *b, *mark = (struct idpool_app *)&mark;
    char err[256], long_key[66];

    CHECK(idpool_client_new(envs, 1, NULL, &c, err, sizeof(err)) == IDPOOL_OK);
    if (c == NULL)
        return;
    memset(long_key, 'k', 65);
    long_key[65] = '\0';
    a = mark;
    CHECK(idpool_app_get(NULL, "user", &a) == IDPOOL_EINVAL);
    CHECK(idpool_app_get(c, NULL, &a) == IDPOOL_EINVAL);
    CHECK(idpool_app_get(c, "user", NULL) == IDPOOL_EINVAL);
    CHECK(idpool_app_get(c, "", &a) == IDPOOL_EINVAL);
    CHECK(idpool_app_get(c, "us er", &a) == IDPOOL_EINVAL);
    CHECK(idpool_app_get(c, "a{b}", &a) == IDPOOL_EINVAL);
    CHECK(idpool_app_get(c, long_key, &a) == IDPOOL_EINVAL);
    CHECK(a == mark); /* set only on IDPOOL_OK */
    long_key[64] = '\0';
    CHECK(idpool_app_get(c, long_key, &a) == IDPOOL_OK);
    CHECK(a != mark && a != NULL);
    CHECK(idpool_app_get(c, "user.v2_x-1", &a) == IDPOOL_OK);
    CHECK(idpool_app_get(c, "user.v2_x-1", &b) == IDPOOL_OK);
    CHECK(a == b); /* the same handle for the same key */
    CHECK(idpool_app_get(c, "other", &b) == IDPOOL_OK);
    CHECK(a != b);
    idpool_client_free(c);
}

/* idpool_next and idpool_next_n refuse bad arguments at once, *got 0. */
static void test_next_args(void)
{
    struct idpool_client *c;
    struct idpool_app *a = NULL;
    char err[256];
    uint64_t id, ids[4];
    size_t got = 99;

    CHECK(idpool_next(NULL, &id) == IDPOOL_EINVAL);
    CHECK(idpool_next_n(NULL, ids, 4, &got) == IDPOOL_EINVAL);
    CHECK_EQ_U64(got, 0);
    CHECK(idpool_next_n(NULL, ids, 4, NULL) == IDPOOL_EINVAL);
    CHECK(idpool_client_new(envs, 1, NULL, &c, err, sizeof(err)) == IDPOOL_OK);
    if (c == NULL || idpool_app_get(c, "user", &a) != IDPOOL_OK) {
        CHECK(0);
        idpool_client_free(c);
        return;
    }
    CHECK(idpool_next(a, NULL) == IDPOOL_EINVAL);
    got = 99;
    CHECK(idpool_next_n(a, ids, 0, &got) == IDPOOL_EINVAL);
    CHECK_EQ_U64(got, 0);
    got = 99;
    CHECK(idpool_next_n(a, NULL, 4, &got) == IDPOOL_EINVAL);
    CHECK_EQ_U64(got, 0);
    CHECK(idpool_next_n(a, ids, 4, NULL) == IDPOOL_EINVAL);
    idpool_client_free(c);
}

/* idpool_app_env_error: each environment's own reason, "" out of range or for NULLs. */
static void test_env_error(void)
{
    static const char *const two[] = {"redis://127.0.0.1:1/0", "redis://127.0.0.1:2/0"};
    struct idpool_options o;
    struct idpool_client *c;
    struct idpool_app *a = NULL;
    char err[256], buf[400];
    uint64_t id;

    idpool_options_init(&o);
    o.timeout_ms = 500;
    CHECK(idpool_client_new(two, 2, &o, &c, err, sizeof(err)) == IDPOOL_OK);
    if (c == NULL || idpool_app_get(c, "user", &a) != IDPOOL_OK) {
        CHECK(0);
        idpool_client_free(c);
        return;
    }
    CHECK_EQ_U64(idpool_app_env_error(a, 0, buf, sizeof(buf)), 0); /* not tried yet */
    CHECK(idpool_next(a, &id) == IDPOOL_ETIMEDOUT);
    CHECK(idpool_app_env_error(a, 0, buf, sizeof(buf)) == strlen(buf));
    CHECK_STR_CONTAINS(buf, "environment 0 (127.0.0.1:1: ");
    CHECK(idpool_app_env_error(a, 1, buf, sizeof(buf)) > 0);
    CHECK_STR_CONTAINS(buf, "environment 1 (127.0.0.1:2: ");
    strcpy(buf, "x");
    CHECK_EQ_U64(idpool_app_env_error(a, 2, buf, sizeof(buf)), 0);
    CHECK_STR(buf, "");
    CHECK_EQ_U64(idpool_app_env_error(NULL, 0, buf, sizeof(buf)), 0);
    CHECK_EQ_U64(idpool_app_env_error(a, 0, NULL, 10), 0);
    CHECK_EQ_U64(idpool_app_env_error(a, 0, buf, 0), 0);
    CHECK(idpool_app_env_error(a, 0, buf, 8) == 7); /* truncated */
    idpool_client_free(c);
}

int main(void)
{
    RUN(test_options_init);
    RUN(test_strerror);
    RUN(test_client_new);
    RUN(test_app_get);
    RUN(test_next_args);
    RUN(test_env_error);
    return unit_done();
}
