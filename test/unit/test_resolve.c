/*
 * Unit tests of resolve (src/lib/resolve.c) without Redis: sentinels that
 * refuse connections (a bound socket that does not listen), and one fake
 * sentinel on a thread of this test that answers get-master-addr-by-name
 * and SENTINEL sentinels. Checked: the order the sentinels are tried in,
 * the one that answered moves to the front, the sentinels it knows are
 * added, every socket is reported open then closed (libidpool's fork
 * safety), and an error names the sentinels tried, never a password.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "resolve.h"
#include "unit.h"
#include "unit_net.h"

static int open_fds, reports;

static void on_fd(void *arg, int fd)
{
    (void)arg;
    reports++;
    open_fds += fd >= 0 ? 1 : -1;
}

static void test_refused(void)
{
    int p1, p2, s1 = unit_bound(0, &p1), s2 = unit_bound(0, &p2), port = 0;
    char url[256], err[1024], host[256], want[64];
    struct redis_url u;
    struct resolver r;

    snprintf(url, sizeof(url),
             "redis-sentinel://:datapw@127.0.0.1:%d,127.0.0.1:%d?sentinel_password=hunter2#m", p1,
             p2);
    u = url_of(url);
    open_fds = reports = 0;
    CHECK(resolve_init(&r, &u, on_fd, NULL) == 0);
    CHECK(resolve_primary(&r, 1000, host, sizeof(host), &port, err, sizeof(err)) == -1);
    snprintf(want, sizeof(want), "(tried 127.0.0.1:%d, 127.0.0.1:%d)", p1, p2);
    CHECK_STR_CONTAINS(err, want);
    CHECK_STR_CONTAINS(err, "no sentinel named the master 'm'");
    CHECK_STR_CONTAINS(err, "cannot connect");
    CHECK(strstr(err, "hunter2") == NULL);
    CHECK(strstr(err, "datapw") == NULL);
    CHECK(open_fds == 0);         /* every socket reported was reported closed */
    CHECK(r.set.a[0].port == p1); /* nobody answered: the order stays */

    CHECK(resolve_primary(&r, 0, host, sizeof(host), &port, err, sizeof(err)) == -1);
    CHECK_STR_CONTAINS(err, "(tried none)");
    redis_url_free(&u);

    u = url_of("redis://127.0.0.1");
    CHECK(resolve_init(&r, &u, NULL, NULL) == -1);
    redis_url_free(&u);
    close(s1);
    close(s2);
}

/* The fake sentinel: answers each request by what it asks for, until its socket is shut down. */
static int fake_sentinels_seen;
static void *fake(void *arg)
{
    int ls = *(int *)arg;
    char buf[1024];
    static const char addr[] = "*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6390\r\n";
    static const char peers[] = "*1\r\n*4\r\n$2\r\nip\r\n$8\r\n10.9.9.9\r\n$4\r\nport\r\n$5\r\n"
                                "26390\r\n";

    for (;;) {
        int c = accept(ls, NULL, NULL);
        ssize_t n;

        if (c < 0)
            return NULL;
        while ((n = read(c, buf, sizeof(buf) - 1)) > 0) {
            const char *out = "-ERR unknown\r\n";

            buf[n] = '\0';
            if (strstr(buf, "get-master-addr-by-name"))
                out = addr;
            else if (strstr(buf, "sentinels")) {
                out = peers;
                fake_sentinels_seen++;
            }
            if (write(c, out, strlen(out)) < 0)
                break;
        }
        close(c);
    }
}

static void test_answer(void)
{
    int p1, p2, s1 = unit_bound(0, &p1), s2 = unit_bound(1, &p2), port = 0;
    char url[256], err[1024] = "", host[256] = "";
    struct redis_url u;
    struct resolver r;
    pthread_t th;

    pthread_create(&th, NULL, fake, &s2);
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d#m", p1, p2);
    u = url_of(url);
    open_fds = reports = 0;
    CHECK(resolve_init(&r, &u, on_fd, NULL) == 0);
    CHECK(resolve_primary(&r, 2000, host, sizeof(host), &port, err, sizeof(err)) == 0);
    CHECK_STR(host, "127.0.0.1");
    CHECK(port == 6390);
    CHECK(r.set.a[0].port == p2); /* it answered: now first */
    CHECK(r.set.a[1].port == p1);
    CHECK_EQ_U64(r.set.n, 3); /* and the sentinel it knows was added */
    CHECK_STR(r.set.a[2].host, "10.9.9.9");
    CHECK(fake_sentinels_seen == 1);
    CHECK(open_fds == 0);
    CHECK(reports >= 2);

    /* Asked again within RESOLVE_REFRESH_MS: the first answers, no refresh. */
    CHECK(resolve_primary(&r, 2000, host, sizeof(host), &port, err, sizeof(err)) == 0);
    CHECK(fake_sentinels_seen == 1);
    CHECK(open_fds == 0);
    redis_url_free(&u);
    shutdown(s2, SHUT_RDWR); /* the fake's accept fails: it returns */
    pthread_join(th, NULL);
    close(s1);
    close(s2);
}

int main(void)
{
    RUN(test_refused);
    RUN(test_answer);
    return unit_done();
}
