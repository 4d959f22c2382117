#include "rng.h"

#include <errno.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rng_seed(struct rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

void rng_seed_os(struct rng *r)
{
    size_t got = 0;

    while (got < sizeof(r->s)) {
        ssize_t n = getrandom((char *)r->s + got, sizeof(r->s) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        got += (size_t)n;
    }
    if (got < sizeof(r->s)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        rng_seed(r, (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid());
    }
    /* xoshiro must not start from the all-zero state. */
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
        rng_seed(r, 1);
}

uint64_t rng_next(struct rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Lemire's nearly divisionless method: uniform, no modulo bias. */
uint64_t rng_below(struct rng *r, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
    uint64_t low = (uint64_t)m;

    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (unsigned __int128)rng_next(r) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}
