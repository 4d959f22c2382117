/*
 * idpool-popper: a test client that pops IDs from one pool the way real
 * clients do (LPOP, single or batch) and checks what it gets.
 *
 *   idpool-popper --port P --key 'idpool:{demo}:pool' --count 100000 \
 *                 --batch 100 --timeout-ms 10000 --out ids.bin --check-increasing
 *
 * IDs are parsed strictly (canonical decimal, no sign, no leading zeros,
 * < 2^63). The dump is one little-endian uint64 per ID, or one decimal per
 * line with --text ("-" writes to stdout). A one-line summary goes to stderr.
 *
 * Exit status: 0 all IDs popped and checked; 1 error or timeout; 2 a check
 * failed (--check-increasing, --min, --delta/--remainder); 64 bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#define EXIT_TIMEOUT 1
#define EXIT_CHECK   2
#define EXIT_USAGE   64

/* Command-line options. */
struct opts {
    const char *host;      /* Redis host */
    int port;              /* Redis port */
    int db;                /* SELECT this database */
    const char *password;  /* AUTH with this, if set */
    const char *key;       /* the pool list */
    uint64_t count;        /* IDs to pop in total */
    uint64_t batch;        /* IDs per LPOP (1 = LPOP without count) */
    uint64_t timeout_ms;   /* give up after this long */
    const char *out;       /* dump file, or NULL */
    bool text;             /* dump as decimal lines instead of binary */
    bool check_increasing; /* every ID > the previous one */
    bool has_min;          /* --min given */
    uint64_t min;          /* every ID >= min */
    uint64_t delta;        /* every ID % delta == remainder */
    uint64_t remainder;    /* see delta */
    bool quiet;            /* no summary line */
};

/* What one run saw. */
struct stats {
    uint64_t popped;   /* IDs received */
    uint64_t empties;  /* nil or empty replies */
    uint64_t commands; /* LPOP commands sent */
    bool have_prev;    /* prev is valid */
    uint64_t prev;     /* last ID popped */
    bool violated;     /* a check failed */
};

static void usage(FILE *f)
{
    fprintf(f, "usage: idpool-popper --key KEY --count N [options]\n"
               "  --host H            Redis host (127.0.0.1)\n"
               "  --port P            Redis port (6379)\n"
               "  --db N              database (0)\n"
               "  --password PW       AUTH password\n"
               "  --key KEY           pool list, e.g. 'idpool:{user}:pool'\n"
               "  --count N           IDs to pop\n"
               "  --batch B           IDs per LPOP (1 = plain LPOP; default 1)\n"
               "  --timeout-ms T      fail if N IDs have not arrived after T ms (10000)\n"
               "  --out FILE          write IDs: little-endian uint64 each, '-' = stdout\n"
               "  --text              write decimal lines instead\n"
               "  --check-increasing  exit 2 unless each ID > the previous one\n"
               "  --min N             exit 2 if an ID is below N\n"
               "  --delta D           exit 2 unless ID %% D == remainder\n"
               "  --remainder R       see --delta (0)\n"
               "  --quiet             no summary line\n");
}

/* Parses a canonical unsigned decimal below 2^63; -1 on anything else. */
static int parse_id(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    size_t i;

    if (len == 0 || len > 19 || (s[0] == '0' && len > 1))
        return -1;
    for (i = 0; i < len; i++) {
        unsigned d;

        if (s[i] < '0' || s[i] > '9')
            return -1;
        d = (unsigned)(s[i] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int parse_opt_u64(const char *name, const char *s, uint64_t *out)
{
    if (parse_id(s, strlen(s), out) != 0) {
        fprintf(stderr, "popper: %s: not a number: '%s'\n", name, s);
        return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    int i;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;

        if (strcmp(a, "--text") == 0) {
            o->text = true;
            continue;
        } else if (strcmp(a, "--check-increasing") == 0) {
            o->check_increasing = true;
            continue;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = true;
            continue;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (v == NULL) {
            fprintf(stderr, "popper: unknown option or missing value: %s\n", a);
            return -1;
        }
        i++;
        if (strcmp(a, "--host") == 0) {
            o->host = v;
        } else if (strcmp(a, "--password") == 0) {
            o->password = v;
        } else if (strcmp(a, "--key") == 0) {
            o->key = v;
        } else if (strcmp(a, "--out") == 0) {
            o->out = v;
        } else if (strcmp(a, "--port") == 0) {
            if (parse_opt_u64(a, v, &n) != 0 || n == 0 || n > 65535)
                return -1;
            o->port = (int)n;
        } else if (strcmp(a, "--db") == 0) {
            if (parse_opt_u64(a, v, &n) != 0 || n > 65535)
                return -1;
            o->db = (int)n;
        } else if (strcmp(a, "--count") == 0) {
            if (parse_opt_u64(a, v, &o->count) != 0)
                return -1;
        } else if (strcmp(a, "--batch") == 0) {
            if (parse_opt_u64(a, v, &o->batch) != 0 || o->batch == 0)
                return -1;
        } else if (strcmp(a, "--timeout-ms") == 0) {
            if (parse_opt_u64(a, v, &o->timeout_ms) != 0)
                return -1;
        } else if (strcmp(a, "--min") == 0) {
            if (parse_opt_u64(a, v, &o->min) != 0)
                return -1;
            o->has_min = true;
        } else if (strcmp(a, "--delta") == 0) {
            if (parse_opt_u64(a, v, &o->delta) != 0 || o->delta == 0)
                return -1;
        } else if (strcmp(a, "--remainder") == 0) {
            if (parse_opt_u64(a, v, &o->remainder) != 0)
                return -1;
        } else {
            fprintf(stderr, "popper: unknown option: %s\n", a);
            return -1;
        }
    }
    if (o->key == NULL || o->count == 0) {
        fprintf(stderr, "popper: --key and --count (> 0) are required\n");
        return -1;
    }
    if (o->remainder >= o->delta) {
        fprintf(stderr, "popper: --remainder must be below --delta\n");
        return -1;
    }
    return 0;
}

static uint64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void sleep_1ms(void)
{
    struct timespec ts = {0, 1000000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Checks one ID, remembers it and writes it out; -1 on a write error. */
static int take_id(const struct opts *o, struct stats *st, FILE *out, uint64_t id)
{
    /* Report the first violation only; keep popping so the dump is whole. */
    if (!st->violated) {
        if (o->check_increasing && st->have_prev && id <= st->prev) {
            fprintf(stderr,
                    "popper: not increasing: ID #%" PRIu64 " = %" PRIu64 " after %" PRIu64 "\n",
                    st->popped + 1, id, st->prev);
            st->violated = true;
        } else if (o->has_min && id < o->min) {
            fprintf(stderr, "popper: ID #%" PRIu64 " = %" PRIu64 " is below --min %" PRIu64 "\n",
                    st->popped + 1, id, o->min);
            st->violated = true;
        } else if (id % o->delta != o->remainder) {
            fprintf(stderr,
                    "popper: ID #%" PRIu64 " = %" PRIu64 ": %% %" PRIu64 " != %" PRIu64 "\n",
                    st->popped + 1, id, o->delta, o->remainder);
            st->violated = true;
        }
    }
    st->prev = id;
    st->have_prev = true;
    st->popped++;
    if (out == NULL)
        return 0;
    if (o->text)
        return fprintf(out, "%" PRIu64 "\n", id) < 0 ? -1 : 0;

    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(id >> (8 * i));
    return fwrite(le, sizeof le, 1, out) == 1 ? 0 : -1;
}

/* Takes the IDs out of one string reply; -1 if it is not a valid ID. */
static int take_elem(const struct opts *o, struct stats *st, FILE *out, const redisReply *r)
{
    uint64_t id;

    if (r->type != REDIS_REPLY_STRING || parse_id(r->str, (size_t)r->len, &id) != 0) {
        if (r->type == REDIS_REPLY_STRING)
            fprintf(stderr, "popper: not an ID: '%.*s'\n", r->len > 40 ? 40 : (int)r->len, r->str);
        else
            fprintf(stderr, "popper: unexpected reply element type %d\n", r->type);
        return -1;
    }
    if (take_id(o, st, out, id) != 0) {
        fprintf(stderr, "popper: write failed: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* Pops until count IDs arrived, an error, or the deadline. */
static int pop_all(const struct opts *o, redisContext *c, struct stats *st, FILE *out,
                   uint64_t deadline)
{
    char nbuf[24];

    while (st->popped < o->count) {
        uint64_t want = o->count - st->popped;
        redisReply *r;
        int rc = 0;

        if (want > o->batch)
            want = o->batch;
        if (o->batch == 1) {
            r = redisCommand(c, "LPOP %s", o->key);
        } else {
            snprintf(nbuf, sizeof nbuf, "%" PRIu64, want);
            r = redisCommand(c, "LPOP %s %s", o->key, nbuf);
        }
        st->commands++;
        if (r == NULL) {
            fprintf(stderr, "popper: redis: %s\n", c->errstr[0] ? c->errstr : "no reply");
            return 1;
        }
        switch (r->type) {
        case REDIS_REPLY_NIL:
            st->empties++;
            break;
        case REDIS_REPLY_STRING:
            rc = take_elem(o, st, out, r);
            break;
        case REDIS_REPLY_ARRAY:
            if (r->elements == 0)
                st->empties++;
            if (r->elements > want) {
                fprintf(stderr, "popper: asked for %" PRIu64 " IDs, got %zu\n", want, r->elements);
                rc = -1;
            }
            for (size_t i = 0; rc == 0 && i < r->elements; i++)
                rc = take_elem(o, st, out, r->element[i]);
            break;
        case REDIS_REPLY_ERROR:
            fprintf(stderr, "popper: redis error: %s\n", r->str);
            rc = -1;
            break;
        default:
            fprintf(stderr, "popper: unexpected reply type %d\n", r->type);
            rc = -1;
            break;
        }
        bool empty =
            r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_ARRAY && r->elements == 0);
        freeReplyObject(r);
        if (rc != 0)
            return 1;
        if (st->popped >= o->count)
            break;
        if (now_us() >= deadline) {
            fprintf(stderr,
                    "popper: timeout: %" PRIu64 " of %" PRIu64 " IDs after %" PRIu64 " ms\n",
                    st->popped, o->count, o->timeout_ms);
            return EXIT_TIMEOUT;
        }
        if (empty)
            sleep_1ms();
    }
    return 0;
}

/* Runs one command during setup (AUTH, SELECT); -1 unless it says OK. */
static int setup_cmd(redisContext *c, const char *what, redisReply *r)
{
    int rc = 0;

    if (r == NULL) {
        fprintf(stderr, "popper: %s: %s\n", what, c->errstr);
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "popper: %s: %s\n", what, r->str);
        rc = -1;
    }
    freeReplyObject(r);
    return rc;
}

int main(int argc, char **argv)
{
    struct opts o = {
        .host = "127.0.0.1",
        .port = 6379,
        .batch = 1,
        .timeout_ms = 10000,
        .delta = 1,
    };
    struct stats st = {0};
    redisContext *c = NULL;
    FILE *out = NULL;
    int rc = 1;

    if (parse_args(argc, argv, &o) != 0) {
        usage(stderr);
        return EXIT_USAGE;
    }

    uint64_t t0 = now_us();
    uint64_t deadline = t0 + o.timeout_ms * 1000;
    struct timeval tv = {(time_t)(o.timeout_ms / 1000) + 1, 0};

    c = redisConnectWithTimeout(o.host, o.port, tv);
    if (c == NULL || c->err) {
        fprintf(stderr, "popper: connect %s:%d: %s\n", o.host, o.port,
                c ? c->errstr : "out of memory");
        goto out;
    }
    /* Bounds every command, so a hung server cannot hang the test. */
    if (redisSetTimeout(c, tv) != REDIS_OK) {
        fprintf(stderr, "popper: cannot set the socket timeout\n");
        goto out;
    }
    if (o.password && setup_cmd(c, "AUTH", redisCommand(c, "AUTH %s", o.password)) != 0)
        goto out;
    if (o.db != 0 && setup_cmd(c, "SELECT", redisCommand(c, "SELECT %d", o.db)) != 0)
        goto out;

    if (o.out != NULL) {
        out = strcmp(o.out, "-") == 0 ? stdout : fopen(o.out, o.text ? "w" : "wb");
        if (out == NULL) {
            fprintf(stderr, "popper: %s: %s\n", o.out, strerror(errno));
            goto out;
        }
    }

    rc = pop_all(&o, c, &st, out, deadline);

    if (out != NULL && fflush(out) != 0) {
        fprintf(stderr, "popper: %s: %s\n", o.out, strerror(errno));
        rc = 1;
    }

    uint64_t elapsed = (now_us() - t0) / 1000; /* ms */
    if (!o.quiet)
        fprintf(stderr,
                "popper: popped=%" PRIu64 " empties=%" PRIu64 " commands=%" PRIu64
                " elapsed=%" PRIu64 ".%03" PRIu64 "s rate=%.0f ids/s\n",
                st.popped, st.empties, st.commands, elapsed / 1000, elapsed % 1000,
                (double)st.popped * 1e6 / (double)(now_us() - t0 + 1));
    if (st.violated)
        rc = EXIT_CHECK;

out:
    if (out != NULL && out != stdout && fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "popper: %s: %s\n", o.out, strerror(errno));
        rc = 1;
    }
    if (c != NULL)
        redisFree(c);
    return rc;
}
