/*
 * dns — host names looked up off the event loop. hiredis 0.14's
 * redisAsyncConnect resolves a name with a blocking getaddrinfo on the
 * loop: a slow resolver would stall every refill, the timers and the
 * watchdog (systemd's WatchdogSec) behind it. Every Redis connection of the
 * daemon looks its host up here first and connects to the numeric address;
 * the name stays in its logs.
 *
 * libevent's evdns, with /etc/resolv.conf and /etc/hosts read when the first
 * name is looked up (numeric addresses never are). An IPv4 address is
 * preferred, as hiredis does.
 */
#ifndef IDPOOL_DNS_H
#define IDPOOL_DNS_H

#include <stddef.h>

#include <event2/event.h>

/* "ffff:...:255.255.255.255" and its NUL */
#define DNS_IP_MAX 46

struct dns_req;

/* The answer: ip (numeric) or NULL and err (why not). */
typedef void dns_fn(const char *ip, const char *err, void *arg);

/*
 * Look host up. 0: host is numeric, or the answer was known at once (the
 * hosts file): ip holds the address, fn is never called. 1: pending, *req
 * set; fn is called once, later, from the loop (unless cancelled). -1:
 * failed at once, why in err; fn is never called.
 */
int dns_lookup(struct event_base *base, const char *host, dns_fn *fn, void *arg,
               struct dns_req **req, char *ip, size_t iplen, char *err, size_t errlen)
    __attribute__((warn_unused_result));
/* Forget a pending lookup: its fn is not called. */
void dns_cancel(struct dns_req *req);
/*
 * Frees the resolver: at exit, after every lookup was cancelled and every
 * other module freed its events, before the event base is freed.
 */
void dns_free(struct event_base *base);

#endif
