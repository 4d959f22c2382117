#include "poolstate.h"

const char *pool_state_name(enum pool_state s)
{
    static const char *const names[] = {
#define X(id, name) name,
        POOL_STATES(X)
#undef X
    };

    return (unsigned)s < POOL_NSTATES ? names[s] : "?";
}

int pool_state_allowed(enum pool_state from, enum pool_state to)
{
#define B(s) (1u << POOL_##s)
    static const unsigned next[POOL_NSTATES] = {
        [POOL_IDLE] = B(CHECK) | B(LOCK),
        [POOL_CHECK] = B(IDLE) | B(LOCK),
        [POOL_LOCK] = B(IDLE) | B(RESERVE) | B(PUSHQ) | B(UNLOCK),
        [POOL_RESERVE] = B(PUSHQ) | B(UNLOCK),
        [POOL_PUSHQ] = B(PUSH),
        [POOL_PUSH] = B(PREFETCH) | B(LOCK) | B(UNLOCK),
        [POOL_PREFETCH] = B(INSTALL) | B(LOCK) | B(UNLOCK),
        [POOL_INSTALL] = B(LOCK) | B(UNLOCK),
        [POOL_UNLOCK] = B(IDLE),
    };
#undef B

    if ((unsigned)from >= POOL_NSTATES || (unsigned)to >= POOL_NSTATES)
        return 0;
    return (next[from] >> to) & 1u;
}
