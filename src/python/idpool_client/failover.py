"""Which environment an application's takes go to, and when it is looked at
again (src/lib/failover.h's mirror): the decision of the client's
background thread, apart from its locks, buffers and network. Pure: time
(s, monotonic) is passed in. test_pyclient.py drives it through the
sequences of outcomes of test_failover.c and holds its constants equal to
failover.h's."""

from .takereply import DOWN, DRY, EPOCH, IDS, LIMIT, NOAPP, RATE

# failover.h's IDLE_WAKE_MS, DRY_RETRY_MS and NOAPP_RETRY_MS, in seconds.
IDLE_WAKE = 0.100  # an application is looked at least this often (s)
DRY_RETRY = 0.020  # a dry pool is asked again after this (s)
NOAPP_RETRY = 1.000  # every environment said IDPOOL_NOAPP: asked again after this (s)


class Failover:
    """One application's route (failover.h's struct failover). Times in s."""

    __slots__ = ("env", "retry_at", "trouble", "failback_at", "noapp")

    def __init__(self):
        self.env = 0  # environment takes go to
        self.retry_at = 0.0  # no take before this (a refusal's hint)
        self.trouble = 0.0  # env has supplied nothing since (0: fine)
        self.failback_at = 0.0  # when a more preferred environment is tried again
        self.noapp = set()  # environments that answered IDPOOL_NOAPP

    def nowhere(self, nenv):
        """Every environment answered IDPOOL_NOAPP: callers fail at once."""
        return len(self.noapp) >= nenv


def failover_plan(f, now, low):
    """Whether to take now (failover.c's failover_plan): when `low` (the
    buffer is below its low water, or a caller waits) and no refusal's wait
    runs, or when a failback is due. Returns (take, from, back, wake): take
    from environment `from` (back: a failback, from 0 up to the current
    one, in order), or look again at `wake`."""
    back = f.env > 0 and now >= f.failback_at
    if not back and (not low or now < f.retry_at):
        wake = now + IDLE_WAKE
        if now < f.retry_at < wake:
            wake = f.retry_at
        return False, f.env, False, wake
    return True, 0 if back else f.env, back, None


def failover_next(f, back, e, o):
    """During a failback: the environment to try after e answered o, or None
    (IDs came, or no more preferred one is left)."""
    if not back or o == IDS or e + 1 >= f.env:
        return None
    return e + 1


def _move_on(f, nenv, failback, now):
    """Move to the next environment (wrapping), when there is another: True when moved."""
    f.trouble = 0.0
    if nenv < 2:
        return False
    f.env = (f.env + 1) % nenv
    f.failback_at = now + failback
    return True


def failover_after(f, nenv, failover, failback, back, now, e, o, hint, retry_at):
    """After the take planned with `back`: environment e answered o (hint:
    EPOCH's and RATE's wait, s); retry_at(i): when environment i may be
    tried again. Updates f (failover.c's failover_after); returns (wake,
    failed_over, failed_back)."""
    wake, moved, home = now + IDLE_WAKE, False, False
    if back and o != IDS:  # the preferred ones are still out: stay, try later
        f.failback_at = now + failback
        return now, False, False  # serve the current environment at once
    if o == IDS:
        f.trouble = 0.0
        f.noapp.discard(e)
        if e < f.env:
            f.env = e
            home = True
    elif o == DRY:
        f.retry_at = now + DRY_RETRY
    elif o in (EPOCH, RATE):  # RATE is not a reason to leave: the limit is the application's
        f.retry_at = now + hint
    elif o == NOAPP:
        f.noapp.add(e)
        moved = _move_on(f, nenv, failback, now)
        if f.nowhere(nenv):  # callers fail at once meanwhile
            f.retry_at = now + NOAPP_RETRY
    elif o == DOWN:
        moved = _move_on(f, nenv, failback, now)
    if o in (DRY, EPOCH):
        if f.trouble == 0.0:
            f.trouble = now
        elif now - f.trouble >= failover:
            moved = _move_on(f, nenv, failback, now)
    if f.env > 0 and f.failback_at == 0.0:
        f.failback_at = now + failback
    if now < f.retry_at < wake:
        wake = f.retry_at
    if o in (IDS, LIMIT) or (o in (NOAPP, DOWN) and f.retry_at <= now):
        wake = now  # more may be needed, or another environment to try
    if o == DOWN and retry_at(f.env) > now:
        wake = retry_at(f.env)  # no spinning on the down
    return wake, moved, home
