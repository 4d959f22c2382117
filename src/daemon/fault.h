/*
 * fault — fault injection for the chaos tests, armed by the environment:
 *
 *   IDPOOL_FAULT=<stage>:<action>[:<n>]
 *
 * stage: locked   (a refill holds the lock, before its MySQL reservation)
 *        reserved (a lease was committed in MySQL, before it is pushed)
 *        pushing  (the first chunk of a refill was written to Redis with its EXEC, the
 *                  rest not yet)
 *        sweep    (a node's main connection validated its server, before the epoch
 *                  sweep's first SCAN)
 * action: stop (raise SIGSTOP: the test decides when to SIGCONT) or kill (SIGKILL).
 * n: fire the n-th time the stage is reached (default 1); it fires once.
 *
 * Unset (production), fault_at() is one predictable branch.
 */
#ifndef IDPOOL_FAULT_H
#define IDPOOL_FAULT_H

enum fault_stage { FAULT_NONE, FAULT_LOCKED, FAULT_RESERVED, FAULT_PUSHING, FAULT_SWEEP };

/* Reads IDPOOL_FAULT: 0, or -1 (and a message in err) when it is malformed. */
int fault_init(char *err, unsigned errlen);

/* True when the armed fault fires now; the caller prepares, then calls fault_fire(). */
int fault_at(enum fault_stage stage);
void fault_fire(void);

#endif
