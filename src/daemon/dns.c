#include "dns.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/dns.h>
#include <event2/util.h>

#include "log.h"

/* One resolver for the process's one event loop, made at the first name. */
static struct evdns_base *resolver;

struct dns_req {
    struct evdns_getaddrinfo_request *req; /* NULL once answered */
    dns_fn *fn;                            /* NULL: cancelled, or answered at once */
    void *arg;
    int answered; /* the answer came inside evdns_getaddrinfo (sync is set) */
    int failed;   /* that answer was an error */
    char ip[DNS_IP_MAX];
    char err[128];
};

/* The first IPv4 address of the answer, else the first IPv6 one; 0, or -1. */
static int pick(const struct evutil_addrinfo *ai, char *ip, size_t iplen)
{
    const struct evutil_addrinfo *p, *v6 = NULL;

    for (p = ai; p; p = p->ai_next) {
        if (p->ai_family == AF_INET)
            break;
        if (p->ai_family == AF_INET6 && !v6)
            v6 = p;
    }
    if (!p)
        p = v6;
    if (!p)
        return -1;
    if (p->ai_family == AF_INET)
        return evutil_inet_ntop(AF_INET, &((const struct sockaddr_in *)p->ai_addr)->sin_addr, ip,
                                iplen)
                   ? 0
                   : -1;
    return evutil_inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)p->ai_addr)->sin6_addr, ip,
                            iplen)
               ? 0
               : -1;
}

static void on_answer(int code, struct evutil_addrinfo *ai, void *arg)
{
    struct dns_req *d = arg;

    d->req = NULL;
    d->failed = 1;
    if (code != 0)
        snprintf(d->err, sizeof(d->err), "cannot resolve the host name: %s",
                 evutil_gai_strerror(code));
    else if (pick(ai, d->ip, sizeof(d->ip)) != 0)
        snprintf(d->err, sizeof(d->err), "the host name has no IPv4 or IPv6 address");
    else
        d->failed = 0;
    if (ai)
        evutil_freeaddrinfo(ai);
    d->answered = 1;
    if (!d->fn) {
        /* cancelled: free it; answered inside dns_lookup (arg == d): that frees it */
        if (d->arg != d)
            free(d);
        return;
    }
    d->fn(d->failed ? NULL : d->ip, d->failed ? d->err : NULL, d->arg);
    free(d);
}

int dns_lookup(struct event_base *base, const char *host, dns_fn *fn, void *arg,
               struct dns_req **req, char *ip, size_t iplen, char *err, size_t errlen)
{
    struct evutil_addrinfo hints;
    unsigned char buf[sizeof(struct in6_addr)];
    struct evdns_getaddrinfo_request *r;
    struct dns_req *d;
    int rc;

    *req = NULL;
    if (inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1) {
        snprintf(ip, iplen, "%s", host);
        return 0;
    }
    if (!resolver) {
        /* reads /etc/resolv.conf, and /etc/hosts with it (DNS_OPTION_HOSTSFILE) */
        resolver = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                            EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        if (!resolver) {
            snprintf(err, errlen, "cannot set up the resolver (/etc/resolv.conf)");
            return -1;
        }
    }
    if (!(d = calloc(1, sizeof(*d)))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    /* an answer inside the call (the hosts file, an error) is kept for the return: arg == d */
    d->arg = d;
    r = evdns_getaddrinfo(resolver, host, NULL, &hints, on_answer, d);
    if (d->answered) {
        rc = d->failed ? -1 : 0;
        if (d->failed)
            snprintf(err, errlen, "%s", d->err);
        else
            snprintf(ip, iplen, "%s", d->ip);
        free(d);
        return rc;
    }
    if (!r) {
        free(d);
        snprintf(err, errlen, "cannot start the host name lookup");
        return -1;
    }
    d->req = r;
    d->fn = fn;
    d->arg = arg;
    *req = d;
    return 1;
}

void dns_cancel(struct dns_req *d)
{
    if (!d)
        return;
    d->fn = NULL;
    d->arg = NULL;
    /* the answer comes back later as EVUTIL_EAI_CANCEL and frees d */
    if (d->req)
        evdns_getaddrinfo_cancel(d->req);
}

void dns_free(struct event_base *base)
{
    if (!resolver)
        return;
    /*
     * A cancelled lookup's answer (EVUTIL_EAI_CANCEL) is a deferred callback
     * of the loop, which frees it: run what is due once. Every other module
     * has freed its events by now, so nothing else can run.
     */
    event_base_loop(base, EVLOOP_NONBLOCK);
    evdns_base_free(resolver, 0);
    resolver = NULL;
}
