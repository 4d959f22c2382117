/*
 * ctl_common — the plumbing every idpoolctl command shares: the command
 * context (settings, --json, connections), error reporting with the exit
 * code convention, strict argument parsing, the connections to MySQL and
 * Redis, and output helpers (aligned tables, JSON documents).
 *
 * Exit codes: 0 success, 1 error (unknown application, validation failure,
 * server unreachable, refused by the server), 2 usage (unknown command or
 * option, missing or malformed argument).
 */
#ifndef IDPOOL_CTL_COMMON_H
#define IDPOOL_CTL_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>
#include <hiredis.h>
#include <mysql.h>

#include "config.h"

struct router;

enum ctl_exit {
    CTL_OK = 0,
    CTL_ERROR = 1,
    CTL_USAGE = 2,
    CTL_HELP = 100, /* internal: --help was given, the caller prints it and exits 0 */
};

#define CTL_MSG_MAX 1024

/* One run of idpoolctl. */
struct ctl {
    const char *prog;         /* argv[0] as shown in messages: "idpoolctl" */
    int gargc;                /* global options (before the command), for config_load */
    char **gargv;             /* gargv[0] is the program name */
    struct config cfg;        /* settings in force, after ctl_setup() */
    int cfg_loaded;           /* cfg holds something to free */
    int json;                 /* --json: one JSON document on stdout */
    int json_done;            /* that document has been printed */
    const char *cmd;          /* "apps add", for messages */
    char errmsg[CTL_MSG_MAX]; /* the last error, for the --json error document */
    MYSQL *db;                /* after ctl_db_open() */
    redisContext *rds;        /* after ctl_redis_open() (not a Cluster) */
    struct router *route;     /* after ctl_redis_open() of a Cluster: its primaries (route.h) */
    char rds_host[256];       /* the server c->rds is connected to (Sentinel: the primary) */
    int rds_port;             /* ... and its port; "" and 0 before ctl_redis_open(), Cluster */
    char rds_where[400];      /* "Redis at H:P", "Redis NAME via Sentinel (primary H:P)",
                                 "Redis cluster via seeds H:P,..." */
};

/*
 * Report an error on stderr as "idpoolctl: CMD: message" and keep it for
 * the --json error document. Returns `code`, so: return ctl_fail(c, 1, ...).
 */
int ctl_fail(struct ctl *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A usage error: the message plus a pointer to --help; returns CTL_USAGE. */
int ctl_usage(struct ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Load the settings (defaults, config file, environment, global flags). 0 or an exit code. */
int ctl_setup(struct ctl *c) __attribute__((warn_unused_result));

/* Connect to MySQL / Redis as configured. 0, or CTL_ERROR after reporting (naming the server). */
int ctl_db_open(struct ctl *c) __attribute__((warn_unused_result));
int ctl_redis_open(struct ctl *c) __attribute__((warn_unused_result));

/*
 * Connect to the MySQL at u (the timeouts of c's config) into *out: 0, or
 * CTL_ERROR (reported, naming host, port and database). The caller closes it.
 */
int ctl_db_connect(struct ctl *c, const struct mysql_url *u, MYSQL **out)
    __attribute__((warn_unused_result));

/*
 * Redis by key and by server, whichever the deployment: one server (the
 * URL's, or the primary a Sentinel set names) or a Cluster (the primary of
 * a key's slot; ACL users and such on every primary). After
 * ctl_redis_open().
 *
 * ctl_redis_for_key: the connection of the server of key (a Cluster: of
 * its slot's primary, connected as needed), its name for messages into
 * where ("Redis at H:P", "Redis cluster node H:P"); NULL after reporting.
 */
redisContext *ctl_redis_for_key(struct ctl *c, const char *key, char *where, size_t wlen);
/* A Cluster's name of the primary of key's slot into where, as routed messages say it: 0, or -1. */
int ctl_redis_where_key(const struct ctl *c, const char *key, char *where, size_t wlen);
/* As ctl_redis_for_key, but NULL with err saying why and nothing reported. */
redisContext *ctl_redis_try_key(struct ctl *c, const char *key, char *where, size_t wlen, char *err,
                                size_t errlen);
/*
 * One command about key where key lives, a Cluster's redirections followed
 * (MOVED, ASK, TRYAGAIN and CLUSTERDOWN within the Redis timeout): 0 with
 * the reply in *out (an error reply of the command's own, maybe; the
 * caller frees it) and the server that answered into where, or -1 with err
 * naming Redis and the command (nothing reported).
 */
int ctl_redis_keyed(struct ctl *c, const char *key, int argc, const char **argv, redisReply **out,
                    char *where, size_t wlen, char *err, size_t errlen)
    __attribute__((warn_unused_result));
/* The name of connection x (from the calls here) for messages, into where. */
void ctl_redis_where(const struct ctl *c, const redisContext *x, char *where, size_t wlen);
/* The servers that commands like ACL SETUSER go to: 1, or a Cluster's primaries. */
size_t ctl_redis_servers(const struct ctl *c);
/* Server i's connection (< ctl_redis_servers), its name into where: NULL with err. */
redisContext *ctl_redis_server(struct ctl *c, size_t i, char *where, size_t wlen, char *err,
                               size_t errlen);

/* Close whatever is open and free the settings. */
void ctl_close(struct ctl *c);

/* Run one SQL statement. 0, or CTL_ERROR after reporting the MySQL error. */
int ctl_db_exec(struct ctl *c, const char *sql) __attribute__((warn_unused_result));
/* Report the connection's last MySQL error: CTL_ERROR. */
int ctl_db_fail(struct ctl *c);

/* printf into a new heap string (never NULL). */
char *ctl_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* 'value' escaped for MySQL and wrapped in single quotes, heap-allocated (NULL: out of memory). */
char *ctl_db_quote(struct ctl *c, const char *value);

/*
 * Strict decimal integer: optional '-', digits, nothing else, no overflow.
 * 0 or -1.
 */
int ctl_parse_i64(const char *s, int64_t *out) __attribute__((warn_unused_result));

/* Decimal text of v (buf >= 24 bytes); returns buf. */
const char *ctl_i64(int64_t v, char *buf);
const char *ctl_u64(uint64_t v, char *buf);

/* Copy s into buf with control characters shown as '?' (safe on a terminal). */
const char *ctl_printable(const char *s, char *buf, size_t len);

/* ---- command options ---- */

/* One option of a command: --name [VALUE]. */
struct ctl_opt {
    const char *name; /* without the dashes */
    int has_arg;      /* takes a value: --name VALUE or --name=VALUE */
    int id;           /* passed to the callback */
};

typedef int ctl_opt_fn(struct ctl *c, int id, const char *name, const char *value, void *arg);

/*
 * Parse a command's arguments: options from `opts` (plus --json and
 * -h/--help, accepted by every command) go to fn, which returns 0 or an exit
 * code; everything else is collected in pos[] (at most maxpos; "--" ends the
 * options). Returns 0, CTL_USAGE (reported) or CTL_HELP.
 */
int ctl_opts_parse(struct ctl *c, int argc, char **argv, const struct ctl_opt *opts, ctl_opt_fn *fn,
                   void *arg, char **pos, int maxpos, int *npos)
    __attribute__((warn_unused_result));

/* ---- output ---- */

/* A text table: columns padded to their widest cell, the last one not padded. */
struct ctl_table;

struct ctl_table *ctl_table_new(int ncols, const char *const *headers);
/* Add a row of ncols cells (copied; NULL shows as "-"). */
void ctl_table_add(struct ctl_table *t, const char *const *cells);
size_t ctl_table_rows(const struct ctl_table *t);
void ctl_table_print(const struct ctl_table *t, FILE *out);
void ctl_table_free(struct ctl_table *t);

/* Print doc on stdout (the one --json document of this run) and free it. */
void ctl_json_print(struct ctl *c, cJSON *doc);

/*
 * The JSON rule (as /v1/apps): values in the ID space (IDs, offsets, lease
 * bounds) are decimal strings, as they may exceed 2^53; counts, sizes, row
 * ids and versions are numbers.
 */
void ctl_json_i64(cJSON *obj, const char *name, int64_t v);     /* a number */
void ctl_json_u64(cJSON *obj, const char *name, uint64_t v);    /* a number */
void ctl_json_offset(cJSON *obj, const char *name, uint64_t v); /* a string */

/* Out of memory: report and exit 1 (idpoolctl is a short-lived CLI). */
void ctl_oom(void) __attribute__((noreturn));

/* Never NULL: ctl_oom() otherwise. */
void *ctl_xcalloc(size_t n, size_t size);
cJSON *ctl_jcheck(cJSON *j);

#endif
