/*
 * ctl_take — `idpoolctl take`: IDs the way an application gets them,
 * through libidpool (include/idpool.h), the one client implementation: the
 * limits are enforced where the IDs come from (idpool_take in Redis, or an
 * issuer), refusals are handled as the library handles them (IDPOOL_LIMIT
 * brings the takes down to max_size_per_times, IDPOOL_RATE and a dry pool
 * are waited out up to --timeout-ms), and environments fail over in order.
 *
 * Each take asks for min(N, 1000) IDs, so a short command wastes little:
 * the library may have taken one more batch ahead when the command exits,
 * and those IDs are gaps, never handed out again.
 *
 * A failure names what every environment said (idpool_app_env_error), not
 * only the last one. A take that lasts more than a second shows its
 * progress on stderr when that is a terminal: one line, overwritten, and
 * blanked before the IDs are printed.
 */
#include "ctl_take.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "app.h"
#include "clock.h"
#include "idpool.h"

#define TAKE_MAX_ENVS     32
#define TAKE_BATCH_MAX    1000
#define TAKE_TIMEOUT_MS   2000
#define TAKE_TIMEOUT_MAX  3600000
#define TAKE_TOKEN_MAX    512  /* bytes of a token from IDPOOL_TOKEN or --token-file */
#define PROGRESS_AFTER_MS 1000 /* a take this long shows its progress (stderr a terminal) */
#define PROGRESS_EVERY_MS 200

enum { O_ENV, O_TIMEOUT, O_CA_FILE, O_TOKEN_FILE };

static const struct ctl_opt take_opts[] = {
    {"env", 1, O_ENV},
    {"timeout-ms", 1, O_TIMEOUT},
    {"ca-file", 1, O_CA_FILE},
    {"token-file", 1, O_TOKEN_FILE},
    {NULL, 0, 0},
};

struct take_args {
    const char *envs[TAKE_MAX_ENVS];
    size_t nenv;
    int64_t timeout_ms;
    const char *ca_file;
    const char *token_file;
};

static int on_take_opt(struct ctl *c, int id, const char *name, const char *value, void *arg)
{
    struct take_args *t = arg;

    (void)name;
    switch (id) {
    case O_ENV:
        if (t->nenv == TAKE_MAX_ENVS)
            return ctl_usage(c, "--env: at most %d environments", TAKE_MAX_ENVS);
        t->envs[t->nenv++] = value;
        break;
    case O_TIMEOUT:
        if (ctl_parse_i64(value, &t->timeout_ms) != 0 || t->timeout_ms < 1 ||
            t->timeout_ms > TAKE_TIMEOUT_MAX)
            return ctl_usage(c, "--timeout-ms: must be an integer in 1..%d, got '%.64s'",
                             TAKE_TIMEOUT_MAX, value);
        break;
    case O_CA_FILE:
        t->ca_file = value;
        break;
    case O_TOKEN_FILE:
        t->token_file = value;
        break;
    }
    return 0;
}

/*
 * The issuer token given outside the command line (which `ps` shows):
 * --token-file FILE, else IDPOOL_TOKEN, into tok (TAKE_TOKEN_MAX + 1
 * bytes; "" when neither is given). A trailing newline or blanks are cut.
 * 0, or a usage error that never shows the token.
 */
static int token_get(struct ctl *c, const struct take_args *t, char *tok)
{
    const char *env = getenv("IDPOOL_TOKEN");
    size_t n = 0;

    tok[0] = '\0';
    if (t->token_file) {
        FILE *f = fopen(t->token_file, "r");

        if (f == NULL)
            return ctl_usage(c, "--token-file %s: %s", t->token_file, strerror(errno));
        n = fread(tok, 1, TAKE_TOKEN_MAX + 1, f);
        fclose(f);
        if (n > TAKE_TOKEN_MAX)
            return ctl_usage(c, "--token-file %s: longer than %d bytes: not a token", t->token_file,
                             TAKE_TOKEN_MAX);
    } else if (env && env[0]) {
        n = strlen(env);
        if (n > TAKE_TOKEN_MAX)
            return ctl_usage(c, "IDPOOL_TOKEN: longer than %d bytes: not a token", TAKE_TOKEN_MAX);
        memcpy(tok, env, n);
    }
    while (n > 0 && strchr(" \t\r\n", tok[n - 1]))
        n--;
    tok[n] = '\0';
    if (strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") != n)
        return ctl_usage(c, "%s: the token holds characters other than A-Z a-z 0-9 - . _ ~",
                         t->token_file ? "--token-file" : "IDPOOL_TOKEN");
    if (t->token_file && n == 0)
        return ctl_usage(c, "--token-file %s: empty", t->token_file);
    return 0;
}

/* Wipe and free a string that holds a token (NULL ok). */
static void free_secret(char *s)
{
    if (s == NULL)
        return;
    explicit_bzero(s, strlen(s));
    free(s);
}

/* 1 when url is http[s]:// without a token (no '@' before the path). */
static int issuer_without_token(const char *url)
{
    const char *h;
    size_t auth;

    if (strncasecmp(url, "http://", 7) == 0)
        h = url + 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        h = url + 8;
    else
        return 0;
    auth = strcspn(h, "/?#");
    return memchr(h, '@', auth) == NULL;
}

/* The library's counters of a, as a JSON object. */
static void stats_json(cJSON *doc, struct idpool_app *a)
{
    struct idpool_stats st;
    cJSON *o = ctl_jcheck(cJSON_AddObjectToObject(doc, "client"));

    st.size = sizeof(st);
    idpool_app_stats(a, &st);
    ctl_json_i64(o, "env", st.env);
    ctl_json_i64(o, "takes", (int64_t)st.takes);
    ctl_json_i64(o, "refused_epoch", (int64_t)st.refused_epoch);
    ctl_json_i64(o, "refused_rate", (int64_t)st.refused_rate);
    ctl_json_i64(o, "empty", (int64_t)st.empty);
    ctl_json_i64(o, "errors", (int64_t)st.errors);
    ctl_json_i64(o, "failovers", (int64_t)st.failovers);
}

/*
 * Why the take came short: the library's error, then what each environment
 * said (its last refusal or failure: with every one down, each one's
 * reason), and a hint.
 */
static void short_reason(enum idpool_rc rc, struct idpool_app *a, size_t nenv, char *buf,
                         size_t len)
{
    char said[400];
    size_t n = (size_t)snprintf(buf, len, "%s", idpool_strerror(rc)), named = 0;
    int nofunc = 0;

    for (size_t i = 0; i < nenv && n < len; i++) {
        if (idpool_app_env_error(a, i, said, sizeof(said)) == 0)
            continue;
        n += (size_t)snprintf(buf + n, len - n, "; %s", said);
        nofunc |= strstr(said, "unction not found") != NULL;
        named++;
    }
    if (named == 0 && idpool_app_last_error(a, said, sizeof(said)) > 0 && n < len) {
        n += (size_t)snprintf(buf + n, len - n, "; %s", said);
        nofunc = strstr(said, "unction not found") != NULL;
    }
    if (nofunc && n < len)
        snprintf(buf + n, len - n,
                 " (no idpool_take function: idpoold loads the idpool library when it starts)");
}

/* The progress line of a long take: a thread that looks at the library's counters. */
struct progress {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    int done;          /* the take returned */
    struct idpool_app *a;
    const char *key;
    uint64_t n, start_ms;
    int width; /* of the line shown (0: none yet) */
};

/* Wait on p->cv until `at_ms` (clock_ms) or done; p->mu held. */
static void progress_wait(struct progress *p, uint64_t at_ms)
{
    uint64_t now;

    while (!p->done && (now = clock_ms()) < at_ms) {
        struct timespec ts = clock_deadline_in(at_ms - now);

        if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT)
            break;
    }
}

static void *progress_main(void *arg)
{
    struct progress *p = arg;
    uint64_t at = p->start_ms + PROGRESS_AFTER_MS;

    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct idpool_stats st;

        progress_wait(p, at);
        if (p->done)
            break;
        st.size = sizeof(st);
        idpool_app_stats(p->a, &st);
        if (st.taken > p->n) /* the library takes up to a batch ahead */
            st.taken = p->n;
        /* IDs brought from the environments so far: what the take is waiting for. */
        p->width =
            fprintf(stderr, "\rtake %s: %" PRIu64 " of %" PRIu64 " IDs (%d%%), %" PRIu64 " s",
                    p->key, st.taken, p->n, (int)(st.taken * 100 / p->n),
                    (clock_ms() - p->start_ms) / 1000) -
            1;
        fflush(stderr);
        at = clock_ms() + PROGRESS_EVERY_MS;
    }
    if (p->width > 0) /* blanked: no escape sequences, any terminal */
        fprintf(stderr, "\r%*s\r", p->width, "");
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Start the progress line of a's take of n IDs: 0, or -1 (stderr no terminal, or no thread). */
static int progress_start(struct progress *p, struct idpool_app *a, const char *key, uint64_t n)
{
    pthread_condattr_t at;

    memset(p, 0, sizeof(*p));
    if (!isatty(STDERR_FILENO))
        return -1;
    p->a = a;
    p->key = key;
    p->n = n;
    p->start_ms = clock_ms();
    if (pthread_condattr_init(&at) != 0)
        return -1;
    if (pthread_condattr_setclock(&at, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&p->cv, &at) != 0) {
        pthread_condattr_destroy(&at);
        return -1;
    }
    pthread_condattr_destroy(&at);
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        pthread_cond_destroy(&p->cv);
        return -1;
    }
    if (pthread_create(&p->thread, NULL, progress_main, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        return -1;
    }
    return 0;
}

/* The take returned: the line blanked (if one was shown), the thread gone. */
static void progress_stop(struct progress *p)
{
    pthread_mutex_lock(&p->mu);
    p->done = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
}

int ctl_take(struct ctl *c, int argc, char **argv)
{
    struct take_args t = {.timeout_ms = TAKE_TIMEOUT_MS};
    char *pos[2], shown[260], err[512], why[CTL_MSG_MAX], tok[TAKE_TOKEN_MAX + 1];
    char *withtok[TAKE_MAX_ENVS] = {NULL};
    const char *count = "1";
    struct idpool_options o;
    struct idpool_client *cl = NULL;
    struct idpool_app *a;
    uint64_t *ids;
    size_t got = 0;
    int64_t n = 1;
    int npos, rc, progress;
    enum idpool_rc lrc; /* libidpool's */
    struct progress pr;

    rc = ctl_opts_parse(c, argc, argv, take_opts, on_take_opt, &t, pos, 2, &npos);
    if (rc != 0)
        return rc;
    if (npos < 1)
        return ctl_usage(c, "missing KEY");
    if (npos == 2) {
        count = pos[1];
        if (ctl_parse_i64(count, &n) != 0 || n < 1 || n > 10000000)
            return ctl_usage(c, "N: must be an integer in 1..10000000, got '%.64s'", count);
    }
    if (!app_key_valid(pos[0]))
        return ctl_usage(c, "'%s' is not an application key: must match [A-Za-z0-9_.-]{1,64}",
                         ctl_printable(pos[0], shown, sizeof(shown)));
    if ((rc = ctl_setup(c)) != 0)
        return rc;
    if (t.nenv == 0) /* the configured Redis */
        t.envs[t.nenv++] = c->cfg.redis_url;
    if ((rc = token_get(c, &t, tok)) != 0)
        return rc;
    for (size_t i = 0; i < t.nenv; i++) {
        const char *u = t.envs[i], *rest;

        if (!issuer_without_token(u))
            continue;
        if (tok[0] == '\0') {
            explicit_bzero(tok, sizeof(tok));
            for (size_t j = 0; j < i; j++)
                free_secret(withtok[j]);
            return ctl_usage(c,
                             "--env %s: an issuer needs a token: set IDPOOL_TOKEN or give "
                             "--token-file FILE (http[s]://TOKEN@host also works, but shows the "
                             "token to every user of ps)",
                             ctl_printable(u, shown, sizeof(shown)));
        }
        rest = strstr(u, "://") + 3;
        withtok[i] = ctl_strf("%.*s%s@%s", (int)(rest - u), u, tok, rest);
        t.envs[i] = withtok[i];
    }
    explicit_bzero(tok, sizeof(tok));
    idpool_options_init(&o);
    o.timeout_ms = (unsigned)t.timeout_ms;
    o.max_batch = o.min_batch = n < TAKE_BATCH_MAX ? (unsigned)n : TAKE_BATCH_MAX;
    o.key_prefix = c->cfg.key_prefix;
    o.ca_file = t.ca_file;
    lrc = idpool_client_new(t.envs, t.nenv, &o, &cl, err, sizeof(err));
    for (size_t i = 0; i < t.nenv; i++)
        free_secret(withtok[i]);
    if (lrc != IDPOOL_OK)
        return ctl_usage(c, "%s", err);
    ids = malloc((size_t)n * sizeof(*ids));
    if (ids == NULL || idpool_app_get(cl, pos[0], &a) != IDPOOL_OK) /* the key is valid */
        ctl_oom();
    progress = progress_start(&pr, a, pos[0], (uint64_t)n) == 0;
    lrc = idpool_next_n(a, ids, (size_t)n, &got);
    if (progress)
        progress_stop(&pr);
    if (lrc != IDPOOL_OK)
        short_reason(lrc, a, t.nenv, why, sizeof(why));
    if (c->json) {
        cJSON *doc = ctl_jcheck(cJSON_CreateObject()), *arr;
        char num[24];

        ctl_jcheck(cJSON_AddStringToObject(doc, "key", pos[0]));
        ctl_json_i64(doc, "requested", n);
        arr = ctl_jcheck(cJSON_AddArrayToObject(doc, "ids"));
        for (size_t i = 0; i < got; i++) /* strings: JavaScript loses digits above 2^53 */
            cJSON_AddItemToArray(arr, ctl_jcheck(cJSON_CreateString(ctl_u64(ids[i], num))));
        stats_json(doc, a);
        if (lrc != IDPOOL_OK) {
            char msg[CTL_MSG_MAX + 100];
            snprintf(msg, sizeof(msg), "got %zu of %s IDs: %s", got, count, why);
            ctl_jcheck(cJSON_AddStringToObject(doc, "error", msg));
        }
        ctl_json_print(c, doc);
    } else {
        for (size_t i = 0; i < got; i++)
            printf("%" PRIu64 "\n", ids[i]);
    }
    idpool_client_free(cl);
    free(ids);
    if (lrc != IDPOOL_OK)
        return ctl_fail(c, CTL_ERROR, "application '%s': got %zu of %s IDs: %s", pos[0], got, count,
                        why);
    return 0;
}

const char ctl_take_help[] =
    "Usage: %s [global options] take KEY [N] [--env URL]... [--timeout-ms MS]\n"
    "                                  [--ca-file PEM] [--token-file FILE] [--json]\n"
    "\n"
    "Take N IDs (default 1, at most 10000000) of application KEY the way an application\n"
    "does: through libidpool, from the environments given with --env in preference\n"
    "order (Redis URLs redis://..., redis-sentinel://... or redis-cluster://..., or ID issuers\n"
    "http[s]://host:port), by default from the configured Redis (--redis,\n"
    "IDPOOL_REDIS_URL). Prints one ID per line.\n"
    "\n"
    "An issuer's token: from --token-file FILE (the token alone; a trailing newline is\n"
    "fine), else from the environment variable IDPOOL_TOKEN; used for every issuer URL\n"
    "that carries none.\n"
    "http[s]://TOKEN@host:port works too, but a token on the command line shows in\n"
    "ps and /proc to every user of the machine.\n"
    "\n"
    "The application's limits are enforced where the IDs come from: takes of at most\n"
    "max_size_per_times (the library comes down to it on IDPOOL_LIMIT), and\n"
    "max_size_per_second (IDPOOL_RATE is waited out). A dry pool, a pool not yet\n"
    "re-validated after a Redis restart, or an environment down is waited out too, up\n"
    "to --timeout-ms (default 2000), moving to the next --env when one cannot supply.\n"
    "Then it exits 1 with the IDs it got printed and the reason (what each environment\n"
    "said last). --ca-file: the CAs that verify an https issuer.\n"
    "\n"
    "A take that lasts more than a second shows its progress on stderr when that is a\n"
    "terminal (one line, blanked before the IDs are printed); never otherwise.\n"
    "\n"
    "The IDs taken are gone from the pool (this is for checks and scripts, not a way to\n"
    "peek), and up to one take more may be left unused when the command exits: gaps.\n";
