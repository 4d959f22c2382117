/*
 * url — the URLs and addresses of the settings: redis://, mysql://, the
 * alert webhook's http:// and host:port listeners. Pure: no I/O, fuzzed
 * (test/fuzz/fuzz_url.c). Errors never echo a password.
 */
#ifndef IDPOOL_URL_H
#define IDPOOL_URL_H

#include <stddef.h>

/* A Redis deployment: one server, a primary found through Sentinel, or a Cluster. */
enum redis_kind {
    REDIS_STANDALONE, /* redis://: the server itself */
    REDIS_SENTINEL,   /* redis-sentinel://: the primary the sentinels name */
    REDIS_CLUSTER,    /* redis-cluster://: the primaries of a Cluster, found from seed nodes */
};

/* The most hosts (sentinels, seed nodes) a URL may list. */
#define REDIS_HOSTS_MAX 16

/* host:port of one server; host is heap, without brackets. */
struct redis_hostport {
    char *host;
    int port;
};

/*
 * redis://[[user]:password@]host[:port][/db], or
 * redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db][?params][#master]
 * (params: master=NAME, sentinelMasterId=NAME as lettuce writes it,
 * sentinel_user=U, sentinel_password=PW), or
 * redis-cluster://[[user]:password@]host[:port][,host[:port]...][/0] (seed
 * nodes: any of the Cluster's nodes; a Cluster has database 0 only); a host
 * may be [v6addr]. The userinfo is the data servers' (every node of a
 * Cluster); sentinels get their own credentials only from
 * sentinel_user/sentinel_password.
 */
struct redis_url {
    enum redis_kind kind;
    char *host;     /* heap; without brackets. Sentinel, Cluster: the first of hosts */
    int port;       /* default 6379; Sentinel: the first sentinel's (default 26379) */
    char *user;     /* heap or NULL (ACL user) */
    char *password; /* heap or NULL; percent-decoded */
    int db;         /* default 0 */
    /* REDIS_SENTINEL: the sentinels; REDIS_CLUSTER: the seed nodes (else NULL, 0): */
    struct redis_hostport *hosts; /* heap: in the URL's order, no two the same */
    size_t nhosts;
    /* REDIS_SENTINEL only (else NULL): */
    char *master;            /* heap: the primary's name as the sentinels know it */
    char *sentinel_user;     /* heap or NULL; percent-decoded */
    char *sentinel_password; /* heap or NULL; percent-decoded */
};

/* mysql://user[:password]@host[:port]/db; host may be [v6addr]. */
struct mysql_url {
    char *host;     /* heap */
    int port;       /* default 3306 */
    char *user;     /* heap; default "root" */
    char *password; /* heap or NULL; percent-decoded */
    char *db;       /* heap; default "idpool" */
};

/* http://host[:port][/path][?query] */
struct webhook_url {
    char *host; /* heap; without brackets */
    int port;   /* default 80 */
    char *path; /* heap; the request target: starts with '/', with the query if any */
};

/*
 * http[s]://[token@]host[:port][/prefix]: an ID issuer (idpoold --api), an
 * environment of libidpool. The token is the userinfo (its user part, or
 * ":token"); prefix is where the API is mounted behind a proxy.
 */
struct issuer_url {
    char *host;   /* heap; without brackets */
    int port;     /* default 80, or 443 with https */
    int tls;      /* https */
    char *token;  /* heap or NULL; percent-decoded */
    char *prefix; /* heap: "" or "/a/b" (no trailing '/'), prepended to /v1/ids/{key} */
};

/* 0 on success, -1 with a message in err naming the part that is wrong. */
int redis_url_parse(const char *s, struct redis_url *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

void redis_url_free(struct redis_url *u);
int mysql_url_parse(const char *s, struct mysql_url *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void mysql_url_free(struct mysql_url *u);
int webhook_url_parse(const char *s, struct webhook_url *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void webhook_url_free(struct webhook_url *u);
int issuer_url_parse(const char *s, struct issuer_url *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void issuer_url_free(struct issuer_url *u);
/* "host:port", or "[v6]:port" when host is an IPv6 address, for messages; returns buf. */
#define HOSTPORT_STR_MAX 280
const char *hostport_str(char *buf, size_t len, const char *host, int port);
/*
 * Where a redis_url points, for logs (no credentials): "host:port",
 * "master 'NAME' via sentinels h1:p1,h2:p2" or "cluster via seeds
 * h1:p1,h2:p2"; returns buf (truncated to len).
 */
const char *redis_url_where(char *buf, size_t len, const struct redis_url *u);
/* The scheme of a kind of Redis URL, without "://": "redis", "redis-sentinel", "redis-cluster". */
const char *redis_kind_scheme(enum redis_kind kind);

/* "host:port" or "[v6]:port"; host is heap-allocated. */
int hostport_parse(const char *s, char **host, int *port, char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
