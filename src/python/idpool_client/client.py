"""The client (src/lib/client.c's mirror): applications, the shared buffer
and the per-thread blocks of each, the background thread that fills them
through the environments (env) as failover decides, and what a forked
child does with the clients it inherited."""

import collections
import os
import threading
import time
import weakref

from . import env
from .buffer import batch_next, low_water_ids, rate_update
from .failover import IDLE_WAKE, Failover, failover_after, failover_next, failover_plan
from .keys import redis_key, validate_key
from .takereply import DOWN, DRY, EPOCH, IDS, LIMIT, NOAPP, RATE
from .url import redact

MAX_ENVS = 32
BLOCK = 256  # IDs a thread takes from the shared buffer at once (2.6x faster next())
# The counter of each refusal or failure (stats()).
_COUNTERS = {DRY: "empty", EPOCH: "refused_epoch", RATE: "refused_rate", NOAPP: "errors", DOWN: "errors"}


class IdpoolError(Exception):
    """Base class of the errors of idpool_client (besides ValueError)."""


class IdpoolTimeout(IdpoolError):
    """No environment supplied IDs within the timeout."""


class IdpoolNoApp(IdpoolError):
    """No environment serves this application (IDPOOL_NOAPP everywhere)."""


class IdpoolClosed(IdpoolError):
    """The client is closed."""


_clients = weakref.WeakSet()


def _after_fork_in_child():
    # A forked child shares its parent's buffered IDs: returning them would
    # hand out IDs twice, so every client it inherited is closed there, its
    # buffers dropped and its connections (the parent's) forgotten, never
    # read (redis-py and the socket close only the child's copies). Its
    # locks are made anew: another thread of the parent (the background
    # thread, a caller) may have held one at the fork, and it does not
    # exist here to release it.
    for c in list(_clients):
        c._closed = True
        c._cv = threading.Condition(threading.Lock())
        for e in c._envs:
            e.forget()
        for a in c._apps.values():
            a._cv = threading.Condition(threading.Lock())
            a._buf.clear()
            a._tls = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class App:
    """The handle of one application of a client: next(), take(n), stats()."""

    def __init__(self, client, key):
        self._c = client
        self.key = key
        self._k_pool = redis_key(client._prefix, key, "pool")
        self._k_meta = redis_key(client._prefix, key, "meta")
        self._cv = threading.Condition(threading.Lock())
        self._tls = threading.local()  # .q: this thread's block (a deque)
        self._buf = collections.deque()  # the shared buffer
        self._batch = client._min_batch  # IDs per take now
        self._cap_batch = client._max_batch  # max_batch, or less after IDPOOL_LIMIT
        self._hungry = False  # a caller waited since the last take
        self._asked = False  # a caller kicked the thread since the last take
        self._waiting = 0  # callers waiting now
        self._rate = 0.0  # demand, IDs/s
        self._consumed = 0  # IDs handed out since the last rate update
        self._rate_at = time.monotonic()
        self._fo = Failover()  # where takes go, when the next is due
        self._last_error = ""  # what the last refusal or failure said
        # per environment: what its last refusal or failure said; "" once it supplied IDs
        self._env_errors = [""] * len(client._envs)
        self._st = dict.fromkeys(
            (
                "takes",
                "taken",
                "waits",
                "timeouts",
                "refused_epoch",
                "refused_rate",
                "empty",
                "errors",
                "failovers",
                "failbacks",
            ),
            0,
        )

    def __repr__(self):
        return f"<idpool_client.App {self.key!r}>"

    # -- callers (with self._cv held) --

    def _low_water(self):
        c = self._c
        return low_water_ids(self._batch, c._buffer, self._rate, c._target)

    def _raise_if_dead(self):
        c = self._c
        if c._closed:
            raise IdpoolClosed("the client is closed")
        if self._fo.nowhere(len(c._envs)):
            raise IdpoolNoApp(f"no environment serves application {self.key!r}")

    def _pop_wait(self, n, dl):
        """Up to n (>= 1) IDs from the buffer, waiting while it is empty
        until the call's deadline: dl is a one-item list shared by the waits
        of one call, its deadline (None: set here, the timeout after the
        call first waits)."""
        c = self._c
        buf = self._buf
        if c._closed:
            raise IdpoolClosed("the client is closed")
        asked = False
        if not buf:
            if dl[0] is None:
                dl[0] = time.monotonic() + c._timeout
            deadline = dl[0]
            self._st["waits"] += 1
            self._hungry = True
            while not buf:
                self._raise_if_dead()
                if not asked:  # once: the thread then keeps at it (a kick per wake-up would spin)
                    asked = True
                    c._kick()
                left = deadline - time.monotonic()
                if left > 0:
                    self._waiting += 1
                    try:
                        self._cv.wait(left)
                    finally:
                        self._waiting -= 1
                if not buf and time.monotonic() >= deadline:
                    self._raise_if_dead()
                    self._st["timeouts"] += 1
                    raise IdpoolTimeout(
                        f"{self.key!r}: no environment supplied IDs in {c._timeout:g} s"
                    )
        if n == 1:
            out = [buf.popleft()]
        else:
            k = min(n, len(buf))
            out = [buf.popleft() for _ in range(k)]
        self._consumed += len(out)
        if not asked and not self._asked and len(buf) < self._low_water():  # ask ahead
            self._asked = True
            c._kick()
        return out

    def next(self):
        """One ID (an int). Waits at most the client's timeout when the buffer
        is empty; raises IdpoolTimeout, IdpoolNoApp or IdpoolClosed."""
        try:  # the common path: this thread's block, no lock
            if not self._c._closed:
                return self._tls.q.popleft()
        except (AttributeError, IndexError):
            pass
        q = self._block()
        with self._cv:
            q.extend(self._pop_wait(BLOCK, [None]))
        return q.popleft()

    def _block(self):
        """This thread's block of IDs (a deque, created at the first use)."""
        q = getattr(self._tls, "q", None)
        if q is None:
            q = self._tls.q = collections.deque()
        return q

    def next_n(self, n):
        """A list of n IDs (idpool_next_n). On an error the exception's `ids`
        attribute holds the IDs taken so far (they are gaps if not used)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"next_n: n must be an integer >= 1, got {n!r}")
        if self._c._closed:
            raise IdpoolClosed("the client is closed")
        q = self._block()
        got = []
        while q and len(got) < n:  # this thread's block first: its IDs are older
            got.append(q.popleft())
        dl = [None]  # one deadline for the whole call, however many waits
        with self._cv:
            try:
                while len(got) < n:
                    got.extend(self._pop_wait(n - len(got), dl))
            except IdpoolError as e:
                e.ids = got
                raise
        return got

    # The name before the C API's idpool_take() became idpool_next_n() (the
    # Redis function idpool_take fills the buffer; this hands IDs out of it).
    take = next_n

    def last_error(self):
        """What this application's last refusal or failure said, naming the
        environment ("environment 1 (10.0.0.2:8080: 401 IDPOOL_AUTH: unknown
        or revoked token)"); "" when none yet (idpool_app_last_error)."""
        with self._cv:
            return self._last_error

    def env_error(self, e):
        """What environment e (an index into the client's environments) said
        when it last refused or failed a take, in the form of last_error();
        "" when it has supplied IDs since, was never tried, or e is out of
        range (idpool_app_env_error)."""
        with self._cv:
            return self._env_errors[e] if 0 <= e < len(self._env_errors) else ""

    def stats(self):
        """Counters since the client was created (like idpool_stats): takes,
        taken, waits, timeouts, refused_epoch, refused_rate, empty, errors,
        failovers, failbacks, and now: env, batch, buffered (IDs in the
        shared buffer, not counting the threads' blocks)."""
        with self._cv:
            st = dict(self._st)
            st["env"] = self._fo.env
            st["batch"] = self._batch
            st["buffered"] = len(self._buf)
        return st

    # -- the background thread --

    def _service(self, now):
        """Take when the buffer is below the low water or a caller waits, from
        the environment failover_plan() says (or, when due, a more preferred
        one); returns when it wants to be looked at again (client.c's
        service())."""
        c = self._c
        with self._cv:
            if now > self._rate_at:
                self._rate = rate_update(self._rate, self._consumed, now - self._rate_at)
                self._consumed = 0
                self._rate_at = now
            # (A waiter counts only while the buffer is empty: IDs pushed for
            # it but not yet popped must not bring another take.)
            take, e, back, wake = failover_plan(self._fo, now, len(self._buf) < self._low_water())
            if not take:
                return wake
            self._batch = batch_next(
                self._batch, self._rate, c._target, c._min_batch, self._cap_batch, self._hungry
            )
            self._hungry = False
            self._asked = False
            count = self._batch

        # Without the lock: a take blocks on the network. A failback tries the preferred in order.
        while True:
            o, ids, arg, msg = c._take_from(self, c._envs[e], count, now)
            with self._cv:  # a skip (e backing off) tried nothing: what it said before stands
                if o == IDS:
                    self._env_errors[e] = ""
                elif arg is not env.SKIPPED:
                    self._env_errors[e] = f"environment {e} ({c._envs[e].name}: {msg})"
            nxt = failover_next(self._fo, back, e, o)
            if nxt is None:
                break
            e = nxt

        with self._cv:
            if o != IDS and arg is not env.SKIPPED:  # a skip would hide why it is backing off
                self._last_error = self._env_errors[e]
            st = self._st
            key = _COUNTERS.get(o)  # refusals and failures, failback tries too
            if key and not (o == DOWN and arg is env.SKIPPED):
                st[key] += 1
            hint = arg if o in (EPOCH, RATE) else None
            wake, moved, home = failover_after(
                self._fo, len(c._envs), c._failover_s, c._failback, back, now, e, o, hint, c._retry_at
            )
            if back and o != IDS:  # a failback brought nothing: nothing else changed
                return wake
            if o == IDS:
                self._buf.extend(ids)
                st["takes"] += 1
                st["taken"] += len(ids)
            elif o == LIMIT:
                self._cap_batch = arg if arg > 0 else 1  # the row's max_size_per_times
            st["failovers"] += moved
            st["failbacks"] += home
            self._cv.notify_all()
        return wake


class Client:
    """A client of environments `envs` in preference order: Redis URLs
    (redis://[[user]:password@]host[:port][/db], or
    redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master
    for the primary a set of sentinels names, or
    redis-cluster://[[user]:password@]host[:port][,host[:port]...] for a
    Redis Cluster by its seed nodes: url.parse_url) or issuer URLs
    (http[s]://TOKEN@host[:port][/prefix]; ca_file: the CAs, PEM, that
    verify an https issuer, default the system's). Times are in seconds.
    Nothing is connected until an application is first used."""

    def __init__(
        self,
        envs,
        *,
        timeout=1.0,
        io_timeout=0.5,
        failover=0.5,
        failback=1.0,
        target=0.5,
        min_batch=100,
        max_batch=1000,
        buffer=0,
        key_prefix="idpool",
        ca_file=None,
    ):
        if isinstance(envs, str) or not isinstance(envs, (list, tuple)):
            raise ValueError("envs must be a list of environment URLs (1 to 32), in preference order")
        if not 1 <= len(envs) <= MAX_ENVS:
            raise ValueError(f"give 1 to {MAX_ENVS} environments, got {len(envs)}")
        for name, v in (
            ("timeout", timeout),
            ("io_timeout", io_timeout),
            ("failover", failover),
            ("failback", failback),
            ("target", target),
        ):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"{name} must be a number of seconds > 0, got {v!r}")
        for name, v, lo in (("min_batch", min_batch, 1), ("max_batch", max_batch, 1), ("buffer", buffer, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        if not isinstance(key_prefix, str) or not key_prefix:
            raise ValueError(f"key_prefix must be a non-empty str, got {key_prefix!r}")
        if ca_file is not None and not isinstance(ca_file, str):
            raise ValueError(f"ca_file must be a path (str) or None, got {ca_file!r}")
        parsed = []
        for i, url in enumerate(envs):
            try:
                parsed.append(env.Env(i, url, float(io_timeout)))
            except ValueError as e:
                raise ValueError(f"environment {i} ({redact(url)}): {e}") from None
        env.prepare(parsed, ca_file)
        self._envs = parsed
        self._timeout = float(timeout)
        self._failover_s = float(failover)
        self._failback = float(failback)
        self._target = float(target)
        self._max_batch = max_batch
        self._min_batch = min(min_batch, max_batch)
        self._buffer = buffer
        self._prefix = key_prefix
        self._cv = threading.Condition(threading.Lock())  # _apps, _kicked, _closed
        self._apps = {}
        self._kicked = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="idpool-client", daemon=True)
        _clients.add(self)
        self._thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<idpool_client.Client {[e.name for e in self._envs]}{' closed' if self._closed else ''}>"

    def app(self, key):
        """The handle of application `key` (the same object for the same key).
        ValueError for a bad key, IdpoolClosed after close()."""
        validate_key(key)
        with self._cv:
            if self._closed:
                raise IdpoolClosed("the client is closed")
            a = self._apps.get(key)
            if a is None:
                a = self._apps[key] = App(self, key)
                self._kicked = True
                self._cv.notify()
            return a

    def close(self):
        """Stop the background thread, close the connections; callers waiting
        for IDs get IdpoolClosed, later calls too. Idempotent."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            apps = list(self._apps.values())
            self._cv.notify_all()
        for a in apps:  # wake waiting callers
            with a._cv:
                a._cv.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        for e in self._envs:
            e.close()

    # Lock order: an app's _cv, then the client's _cv (never the reverse).
    def _kick(self):
        with self._cv:
            self._kicked = True
            self._cv.notify()

    def _run(self):
        while True:
            with self._cv:
                if self._closed:
                    return
                self._kicked = False
                apps = list(self._apps.values())
            wake = time.monotonic() + IDLE_WAKE
            for a in apps:
                w = a._service(time.monotonic())
                if w < wake:
                    wake = w
            with self._cv:
                now = time.monotonic()
                if not self._kicked and not self._closed and wake > now:
                    self._cv.wait(wake - now)

    def _retry_at(self, i):
        """When environment i may be tried again (failover_after's retry_at)."""
        return self._envs[i].retry_at()

    def _take_from(self, a, e, count, now):
        """One take of count IDs from environment e (without a's lock: it
        blocks on the network): env.Env.take()'s (outcome, ids, arg,
        message)."""
        return e.take(a, count, now)
