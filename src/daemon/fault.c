#include "fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static const char *const stage_names[] = {"", "locked", "reserved", "pushing", "sweep"};

static struct {
    enum fault_stage stage; /* FAULT_NONE: disarmed */
    int sig;                /* SIGSTOP or SIGKILL */
    unsigned long left;     /* times the stage is still to be reached before firing */
    char spec[64];          /* as given, for the log */
} fault;

int fault_init(char *err, unsigned errlen)
{
    const char *v = getenv("IDPOOL_FAULT");
    char buf[64], *stage, *action, *count, *end;

    fault.stage = FAULT_NONE;
    if (!v || !*v)
        return 0;
    if (strlen(v) >= sizeof(buf))
        goto bad;
    strcpy(buf, v);
    stage = strtok(buf, ":");
    action = strtok(NULL, ":");
    count = strtok(NULL, ":");
    if (!stage || !action || strtok(NULL, ":"))
        goto bad;
    for (int i = 1; i < (int)(sizeof(stage_names) / sizeof(stage_names[0])); i++)
        if (strcmp(stage, stage_names[i]) == 0)
            fault.stage = (enum fault_stage)i;
    if (fault.stage == FAULT_NONE)
        goto bad;
    if (strcmp(action, "stop") == 0)
        fault.sig = SIGSTOP;
    else if (strcmp(action, "kill") == 0)
        fault.sig = SIGKILL;
    else
        goto bad;
    fault.left = 1;
    if (count) {
        fault.left = strtoul(count, &end, 10);
        if (*end || fault.left == 0 || count[0] == '-')
            goto bad;
    }
    snprintf(fault.spec, sizeof(fault.spec), "%s", v);
    log_warn("fault injection armed: IDPOOL_FAULT=%s (for tests only)", fault.spec);
    return 0;
bad:
    fault.stage = FAULT_NONE;
    snprintf(err, errlen,
             "IDPOOL_FAULT: '%s' is not <locked|reserved|pushing>:<stop|kill>[:<n >= 1>]", v);
    return -1;
}

int fault_at(enum fault_stage stage)
{
    if (__builtin_expect(fault.stage != stage, 1))
        return 0;
    if (--fault.left > 0)
        return 0;
    fault.stage = FAULT_NONE;
    return 1;
}

void fault_fire(void)
{
    log_warn("fault injection: IDPOOL_FAULT=%s fires now (%s)", fault.spec,
             fault.sig == SIGSTOP ? "SIGSTOP" : "SIGKILL");
    raise(fault.sig);
}
