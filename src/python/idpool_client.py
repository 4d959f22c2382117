"""idpool_client -- the Python client of idpool, with libidpool's semantics.

A :class:`Client` takes IDs from one or more *environments* in preference
order (each an independent idpool deployment: its own Redis and MySQL, rows
with the same keys and a different ``remainder`` of the same ``delta``, so
that their IDs never collide). An environment is a Redis
(``redis://[[user]:password@]host[:port][/db]``, the function
``idpool_take``) or an ID issuer (``http[s]://TOKEN@host[:port][/prefix]``,
``GET /v1/ids/{key}?count=N`` with the token; https verified against the
system's CAs or ``ca_file``). A background thread per client keeps a
buffer per application filled from them, so ``app.next()`` is a read from
memory while the buffer holds IDs. It mirrors the C library libidpool
(include/idpool.h, src/lib/client.c); it needs only the standard library
and, for Redis environments, redis-py (Debian's python3-redis).

Usage::

    from idpool_client import Client, IdpoolError

    with Client(["redis://10.0.0.1:6379/0", "redis://10.1.0.1:6379/0"]) as c:
        user = c.app("user")          # the same object for the same key
        uid = user.next()             # one ID (an int)
        ids = user.take(100)          # a list of 100 IDs
        print(user.stats())           # counters, like idpool_stats
        print(user.last_error())      # what the last refusal or failure said

Errors (all subclasses of :class:`IdpoolError`): :class:`IdpoolTimeout`
(no environment supplied IDs within ``timeout`` seconds),
:class:`IdpoolNoApp` (every environment answered IDPOOL_NOAPP, or an
issuer refused the token: see ``last_error()``),
:class:`IdpoolClosed` (the client is closed, or is closed while a caller
waits). A bad URL, key or option raises ``ValueError``. Never a made-up ID.

Guarantees: an ID is returned at most once by all clients of all processes
together; for a monotonic application the IDs one thread gets from one
environment increase, but order is not kept across a failover nor between
threads. IDs still buffered when a client is closed are gaps.

Environments are tried in preference order. A take that brings nothing for
``failover`` seconds (pool dry, not re-validated) or fails outright
(connection lost, IDPOOL_NOAPP) moves the application to the next
environment; every ``failback`` seconds a more preferred one is tried again
and taken back when it supplies IDs. IDPOOL_RATE is waited out where it was
said: another environment's budget is not a way around the limit.

Thread safety: every method may be called from any thread at once (close()
included: it wakes waiting callers with IdpoolClosed). As in libidpool, each
thread keeps a small block of IDs per application (threading.local), so the
common path of next() takes no lock; IDs left in a thread's block when it
exits are gaps. A client is not shared across fork(): in the child every
inherited client is closed at once (calls raise IdpoolClosed; the parent's
buffered IDs are dropped, its connections never used, and no call waits on
a lock another thread of the parent held at the fork); create one per
process. (libidpool's child starts empty and works instead.)

One deadline per call: next() and take(n) wait at most ``timeout`` seconds
in all, however many times take(n) finds the buffer empty.
"""

import collections
import http.client
import json
import os
import re
import ssl
import threading
import time
import urllib.parse
import weakref

try:  # the pure parts (and their unit tests) work without redis-py
    import redis
except ImportError:  # pragma: no cover - Debian: apt-get install python3-redis
    redis = None

__all__ = [
    "Client",
    "App",
    "IdpoolError",
    "IdpoolTimeout",
    "IdpoolNoApp",
    "IdpoolClosed",
    "validate_key",
    "key_valid",
    "redis_key",
    "parse_url",
    "parse_issuer_url",
    "parse_env",
    "classify_http",
    "batch_next",
    "low_water_ids",
    "rate_update",
    "hint_ms",
    "classify_reply",
    "classify_refusal",
    "take_ids",
    "REFUSALS",
    "Failover",
    "failover_plan",
    "failover_next",
    "failover_after",
]

APP_KEY_MAX = 64
REDIS_DB_MAX = 1000000
MAX_ENVS = 32
# DRY_RETRY, IDLE_WAKE and NOAPP_RETRY are failover.h's (test_pyclient.py checks them).
DRY_RETRY = 0.020  # a dry pool is asked again after this (s)
BLOCK = 256  # IDs a thread takes from the shared buffer at once (2.6x faster next())
IDLE_WAKE = 0.100  # the thread looks at every application at least this often (s)
BACKOFF_MIN = 0.100  # a failed environment is not tried again before this (s)
BACKOFF_MAX = 2.000  # ... doubling up to this
NOAPP_RETRY = 1.000  # every environment said IDPOOL_NOAPP: asked again after this (s)

# Outcomes of one take (src/core/takereply.h's TAKE_OUTCOMES).
IDS, DRY, EPOCH, RATE, LIMIT, NOAPP, DOWN = ("ids", "dry", "epoch", "rate", "limit", "noapp", "down")
# The refusals of a take, src/core/takereply.h's TAKE_REFUSALS mirrored
# (test_pyclient.py checks it against the C table): code -> (HTTP status an
# issuer answers it with, the wait it asks for when its message names none
# in ms (0: asking again soon will not help), what a client does).
REFUSALS = {
    "IDPOOL_EMPTY": (503, 100, DRY),
    "IDPOOL_EPOCH": (503, 200, EPOCH),
    "IDPOOL_RATE": (429, 1000, RATE),
    "IDPOOL_LIMIT": (400, 0, LIMIT),
    "IDPOOL_NOAPP": (404, 0, NOAPP),
    "IDPOOL_BADARG": (400, 0, DOWN),
    "IDPOOL_AUTH": (401, 0, NOAPP),
    "IDPOOL_FORBIDDEN": (403, 0, NOAPP),
    "IDPOOL_UNAVAILABLE": (503, 200, DOWN),
    "IDPOOL_NOTFOUND": (404, 0, DOWN),
    "IDPOOL_METHOD": (405, 0, DOWN),
    "IDPOOL_BADREQUEST": (400, 0, DOWN),
    "IDPOOL_INTERNAL": (500, 0, DOWN),
}
SKIPPED = "skipped"  # DOWN's arg when the environment was not tried (backing off)
# The counter of each refusal or failure (stats()).
_COUNTERS = {DRY: "empty", EPOCH: "refused_epoch", RATE: "refused_rate", NOAPP: "errors", DOWN: "errors"}


class IdpoolError(Exception):
    """Base class of the errors of this module (besides ValueError)."""


class IdpoolTimeout(IdpoolError):
    """No environment supplied IDs within the timeout."""


class IdpoolNoApp(IdpoolError):
    """No environment serves this application (IDPOOL_NOAPP everywhere)."""


class IdpoolClosed(IdpoolError):
    """The client is closed."""


# --- pure parts (unit-tested in test/unit/test_pyclient.py) ---------------

_KEY_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def key_valid(key):
    """True when key is a valid application key ([A-Za-z0-9_.-]{1,64}, not
    "." or "..", not starting with "-")."""
    return (
        isinstance(key, str)
        and _KEY_RE.fullmatch(key) is not None
        and key not in (".", "..")
        and not key.startswith("-")
    )


def validate_key(key):
    """Return key, or raise ValueError naming what is wrong with it."""
    if not isinstance(key, str):
        raise ValueError(f"application key must be a str, got {type(key).__name__}")
    if not key:
        raise ValueError("application key is empty")
    if len(key) > APP_KEY_MAX:
        raise ValueError(f"application key {key[:20]!r}... is longer than {APP_KEY_MAX} characters")
    bad = re.search(r"[^A-Za-z0-9_.-]", key)
    if bad:
        raise ValueError(
            f"application key {key!r}: character {bad.group()!r} not allowed (use A-Z a-z 0-9 _ . -)"
        )
    if key in (".", ".."):
        raise ValueError(f"application key {key!r} is not allowed")
    if key.startswith("-"):
        raise ValueError(f"application key {key!r} must not start with '-'")
    return key


KEY_KINDS = ("pool", "meta", "lock")


def redis_key(prefix, key, kind):
    """The Redis key of application key's kind ("pool", "meta" or "lock"):
    "<prefix>:{<key>}:<kind>", the braces a Cluster hash tag. Mirrors
    keys_app() of src/core/keys.c (test/unit/test_pykeys.py holds them
    equal)."""
    if kind not in KEY_KINDS:
        raise ValueError(f"key kind must be one of {', '.join(KEY_KINDS)}, got {kind!r}")
    return f"{prefix}:{{{key}}}:{kind}"


_USAGE = "redis://[[user]:password@]host[:port][/db]"


def parse_url(url):
    """Check a Redis URL as libidpool does; return a dict (host, port, db,
    username, password) or raise ValueError (the message never shows a
    password)."""
    if not isinstance(url, str):
        raise ValueError(f"expected a str ({_USAGE}), got {type(url).__name__}")
    if url[:9].lower() == "rediss://":
        raise ValueError("rediss:// (TLS) is not supported, use redis://")
    if url[:8].lower() != "redis://":
        raise ValueError(f"expected {_USAGE}, got scheme {url.split(':', 1)[0][:16]!r}")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise ValueError("URL contains a space or control character")
    rest = url[8:]
    if "?" in rest or "#" in rest:
        raise ValueError(f"query or fragment not supported ({_USAGE})")
    hostpart, _, path = rest.partition("/")
    userinfo, at, hostport = hostpart.rpartition("@")
    if not at:
        userinfo, hostport = "", hostpart
    if "@" in path:
        raise ValueError("'@' after the host (percent-encode '/' in a password as %2F)")
    username = password = None
    if at:
        user, colon, pw = userinfo.partition(":")
        if user:
            username = urllib.parse.unquote(user, errors="strict")
        if colon and pw:
            password = urllib.parse.unquote(pw, errors="strict")
    host, port = _hostport(hostport, 6379)
    db = 0
    if path:
        if not path.isdigit() or int(path) > REDIS_DB_MAX:
            raise ValueError(f"database must be an integer in 0..{REDIS_DB_MAX}, got {path[:32]!r}")
        db = int(path)
    return {"host": host, "port": port, "db": db, "username": username, "password": password}


def redact(url):
    """url with any password replaced by '***' (for messages)."""
    if not isinstance(url, str):
        return repr(url)
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@]*:)[^/]*@", r"\1***@", url)


_ISSUER_USAGE = "http[s]://TOKEN@host[:port][/prefix]"
_PREFIX_OK = re.compile(r"[A-Za-z0-9/\-._~!$&'()*+,;=:]*")


def parse_issuer_url(url):
    """Check an issuer URL as libidpool does (url.c's issuer_url_parse);
    return a dict (host, port, tls, token, prefix) or raise ValueError (the
    message never shows the token)."""
    if not isinstance(url, str):
        raise ValueError(f"expected a str ({_ISSUER_USAGE}), got {type(url).__name__}")
    low = url[:8].lower()
    if low.startswith("https://"):
        tls, rest = True, url[8:]
    elif low.startswith("http://"):
        tls, rest = False, url[7:]
    else:
        raise ValueError(f"expected {_ISSUER_USAGE}, got scheme {url.split(':', 1)[0][:16]!r}")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise ValueError("URL contains a space or control character")
    if "?" in rest or "#" in rest:
        raise ValueError(f"query or fragment not supported ({_ISSUER_USAGE})")
    hostpart, slash, path = rest.partition("/")
    userinfo, at, hostport = hostpart.rpartition("@")
    if not at:
        raise ValueError(f"an issuer needs a token: {_ISSUER_USAGE}")
    user, colon, pw = userinfo.partition(":")
    if (colon and user) or not (pw if colon else user):
        raise ValueError(f"the userinfo must be the token alone ({_ISSUER_USAGE})")
    token = urllib.parse.unquote(pw if colon else user, errors="strict")
    # It goes into "Authorization: Bearer <token>": an escaped CR LF would end that line.
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in token):
        raise ValueError("the token may not contain a space or control character (percent-escaped or not)")
    path = path.rstrip("/")
    if not _PREFIX_OK.fullmatch(path):
        bad = re.search(r"[^A-Za-z0-9/\-._~!$&'()*+,;=:]", path).group()
        raise ValueError(f"the path prefix may not contain {bad!r} (only letters, digits and /-._~!$&'()*+,;=:)")
    host, port = _hostport(hostport, 443 if tls else 80)
    return {"host": host, "port": port, "tls": tls, "token": token, "prefix": "/" + path if path else ""}


def _hostport(hostport, default_port):
    """(host, port) of host[:port] or [v6][:port]; ValueError when bad."""
    if hostport.startswith("["):
        host, close, tail = hostport[1:].partition("]")
        if not close or not host:
            raise ValueError("bad IPv6 address in brackets")
        if tail and not tail.startswith(":"):
            raise ValueError("junk after the IPv6 address")
        portstr, has_port = (tail[1:], True) if tail else ("", False)
    else:
        host, colon, portstr = hostport.partition(":")
        has_port = bool(colon)
    if not host:
        raise ValueError("no host")
    port = default_port
    if has_port:
        if not portstr.isdigit() or not 1 <= int(portstr) <= 65535:
            raise ValueError(f"port must be an integer in 1..65535, got {portstr[:16]!r}")
        port = int(portstr)
    return host, port


def parse_env(url):
    """An environment URL: ("redis", parse_url()) or ("http", parse_issuer_url())."""
    if isinstance(url, str) and url[:8].lower().startswith(("http://", "https://")):
        return "http", parse_issuer_url(url)
    if isinstance(url, str) and url[:8].lower() != "redis://" and "://" in url[:20]:
        raise ValueError(
            f"unsupported scheme {url.split('://', 1)[0] + '://'!r}, expected {_USAGE} or {_ISSUER_USAGE}"
        )
    return "redis", parse_url(url)


def batch_next(prev, rate, target, min_batch, max_batch, hungry):
    """How many IDs the next take asks for (buffer.c's batch_next): enough
    for `target` seconds of the measured demand (rate, IDs/s), at least twice
    the previous batch when a caller had to wait since the last take
    (hungry), clamped to [min_batch, max_batch]."""
    want = rate * target
    if hungry and want < 2.0 * prev:
        want = 2.0 * prev
    if want < min_batch:
        want = min_batch
    if want > max_batch:
        want = max_batch
    return int(want)


LOW_WATER_MAX = 1000000


def low_water_ids(batch, buffer, rate, target):
    """Below how many buffered IDs a take is sent (buffer.c's
    low_water_ids): `target` seconds of the measured demand (at most
    LOW_WATER_MAX), never less than one batch or the `buffer` option; above
    max_batch per target it is reached by several takes in a row."""
    want = min(rate * target, LOW_WATER_MAX)
    lw = batch if batch > buffer else buffer
    return int(want) if want > lw else lw


def rate_update(rate, ids, seconds):
    """Demand as an exponentially weighted rate (buffer.c's rate_update):
    `ids` consumed over `seconds`, weighted by the time covered."""
    if seconds <= 0:
        return rate
    now = ids / seconds
    w = min(seconds, 1.0)
    return rate * (1.0 - w) + now * w


_HINT_RE = re.compile(r"retry in (-?\d+)")


def hint_ms(msg, default):
    """The N of "... retry in N ms" in a refusal, or default (outside 1..59999)."""
    m = _HINT_RE.search(msg)
    if not m:
        return default
    v = int(m.group(1))
    return v if 0 < v < 60000 else default


def take_ids(reply):
    """The IDs of idpool_take's array reply (takereply.c's takereply_ids):
    its items that are decimal uint64 strings (or ints), in order; others
    are skipped."""
    ids = []
    for x in reply:
        if isinstance(x, bytes):
            try:
                x = x.decode("ascii")
            except UnicodeDecodeError:
                continue
        if isinstance(x, str) and x.isdigit() and x.isascii():
            x = int(x)
        if type(x) is int and 0 <= x < 1 << 64:
            ids.append(x)
    return ids


def classify_refusal(text, count):
    """What a refusal "IDPOOL_<CODE> <message>" means to a client (REFUSALS;
    lib/env.c's env_refusal): (outcome, arg), arg the wait in seconds for
    EPOCH and RATE (the message's "retry in N ms", else the table's),
    max_size_per_times for LIMIT (count // 2 when not said), else None.
    Anything not ours is (DOWN, None)."""
    row = REFUSALS.get(text.split(" ", 1)[0])
    if row is None:
        return DOWN, None  # another error: no library, a read-only replica, ...
    _, wait, o = row
    if o in (EPOCH, RATE):
        return o, hint_ms(text, wait) / 1000.0
    if o == LIMIT:
        m = re.search(r"max_size_per_times (\d+)", text)
        return o, int(m.group(1)) if m else count // 2
    return o, None


def classify_reply(reply, count):
    """Classify an idpool_take reply as the C client's Redis transport does.

    reply: the list the command returned (items bytes/str/int), or the error
    text (str) of an error reply, or None. Returns (outcome, ids, arg):
    (IDS, [ids], None); (DRY, [], None) for an empty or ID-less array;
    a refusal as classify_refusal() says, ids []; (DOWN, [], None) for
    anything else.
    """
    if isinstance(reply, (list, tuple)):
        ids = take_ids(reply)
        return (IDS, ids, None) if ids else (DRY, [], None)
    if isinstance(reply, bytes):
        reply = reply.decode("utf-8", "replace")
    if isinstance(reply, str):
        o, arg = classify_refusal(reply, count)
        return o, [], arg
    return DOWN, [], None


def classify_http(status, body, retry_after, count):
    """Classify an issuer's answer as issuer.c does. status: the HTTP status;
    body: bytes; retry_after: the Retry-After header (str) or None. Returns
    (outcome, ids, arg, message): IDS with the IDs of a text/plain body (one
    per line); a refusal as REFUSALS says (DRY for IDPOOL_EMPTY; NOAPP for
    IDPOOL_NOAPP, IDPOOL_AUTH and IDPOOL_FORBIDDEN: this environment will
    not serve it to us), EPOCH/RATE with the wait in seconds (the message's
    "retry in N ms", else Retry-After), LIMIT with max_size_per_times; DOWN
    for anything else. message: "<status> <code>: <text>" (None for IDS)."""
    if status == 200:
        try:
            text = body.decode("ascii")
            if text and not text.endswith("\n"):
                raise ValueError
            lines = text.splitlines()
            if not all(x.isascii() and x.isdigit() for x in lines):
                raise ValueError
            ids = [int(x) for x in lines]
        except (UnicodeDecodeError, ValueError):
            return DOWN, [], None, "the 200 answer is not a list of IDs (one per line)"
        if len(ids) > count or any(i >= 1 << 64 for i in ids):
            return DOWN, [], None, "the 200 answer is not a list of IDs (one per line)"
        return (IDS, ids, None, None) if ids else (DRY, [], None, "a 200 answer with no IDs")
    try:
        err = json.loads(body)
        code, text = err["error"], err["message"]
        if not isinstance(code, str) or not isinstance(text, str):
            raise TypeError
    except (ValueError, TypeError, KeyError):
        return DOWN, [], None, f"HTTP {status} without an idpool error body (not an issuer?)"
    message = f"{status} {code}: {text}"
    o, arg = classify_refusal(f"{code} {text}", count)
    if o in (EPOCH, RATE) and "retry in " not in text and retry_after and retry_after.isdigit():
        arg = int(retry_after)
    return o, [], arg, message


# --- where takes go: the failover decision (src/lib/failover.c) ---------------


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


# --- the client ---------------------------------------------------------------

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
            e.r = e.conn = None
            e.used = False
        for a in c._apps.values():
            a._cv = threading.Condition(threading.Lock())
            a._buf.clear()
            a._tls = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Env:
    __slots__ = ("index", "name", "url", "kind", "parts", "r", "conn", "used", "down_until", "backoff")

    def __init__(self, index, url, kind, parts):
        self.index = index
        host = parts["host"]
        self.name = f"[{host}]:{parts['port']}" if ":" in host else f"{host}:{parts['port']}"
        self.url = url
        self.kind = kind  # "redis" or "http" (an issuer)
        self.parts = parts
        self.r = None  # redis.Redis, created at the first use
        self.conn = None  # an issuer's http.client connection
        self.used = False  # a connection may be open
        self.down_until = 0.0
        self.backoff = 0.0


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

    def take(self, n):
        """A list of n IDs. On an error the exception's `ids` attribute holds
        the IDs taken so far (they are gaps if not used)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"take: n must be an integer >= 1, got {n!r}")
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

    def last_error(self):
        """What this application's last refusal or failure said, naming the
        environment ("environment 1 (10.0.0.2:8080: 401 IDPOOL_AUTH: unknown
        or revoked token)"); "" when none yet (idpool_app_last_error)."""
        with self._cv:
            return self._last_error

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
            nxt = failover_next(self._fo, back, e, o)
            if nxt is None:
                break
            e = nxt

        with self._cv:
            if o != IDS and arg is not SKIPPED:  # a skip would hide why it is backing off
                self._last_error = f"environment {e} ({c._envs[e].name}: {msg})"
            st = self._st
            key = _COUNTERS.get(o)  # refusals and failures, failback tries too
            if key and not (o == DOWN and arg is SKIPPED):
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
    (redis://[[user]:password@]host[:port][/db]) or issuer URLs
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
                parsed.append(_Env(i, url, *parse_env(url)))
            except ValueError as e:
                raise ValueError(f"environment {i} ({redact(url)}): {e}") from None
        if redis is None and any(e.kind == "redis" for e in parsed):
            raise ImportError("idpool_client needs redis-py (Debian: apt-get install python3-redis)")
        self._tls = None
        if any(e.kind == "http" and e.parts["tls"] for e in parsed):
            try:
                self._tls = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as e:
                raise ValueError(f"ca_file {ca_file!r}: {e}") from None
        self._envs = parsed
        self._timeout = float(timeout)
        self._io_timeout = float(io_timeout)
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
            self._env_close(e)

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

    @staticmethod
    def _env_close(e):
        if e.r is not None:
            try:
                e.r.connection_pool.disconnect()
            except Exception:  # noqa: BLE001 - closing anyway
                pass
        if e.conn is not None:
            e.conn.close()
            e.conn = None

    def _retry_at(self, i):
        """When environment i may be tried again (0: it may have a connection, or is not backing off)."""
        e = self._envs[i]
        return 0.0 if e.used else e.down_until

    def _env_fail(self, e, now):
        self._env_close(e)
        e.used = False
        e.backoff = min(e.backoff * 2 if e.backoff else BACKOFF_MIN, BACKOFF_MAX)
        # from now, not from the take's start: a timeout may have used up the back-off
        e.down_until = max(now, time.monotonic()) + e.backoff

    def _take_from(self, a, e, count, now):
        """One take of count IDs from environment e (without a's lock: it
        blocks on the network). Returns (outcome, ids, arg, message), as
        classify_reply() and classify_http() say; (DOWN, [], SKIPPED, ...)
        when e is backing off."""
        if not e.used and now < e.down_until:
            return DOWN, [], SKIPPED, f"down, next try in {int((e.down_until - now) * 1000)} ms"
        if e.kind == "http":
            return self._take_http(a, e, count, now)
        return self._take_redis(a, e, count, now)

    def _take_redis(self, a, e, count, now):
        """FCALL idpool_take on Redis e: _take_from()'s result."""
        try:
            if e.r is None:
                e.r = redis.Redis.from_url(
                    e.url,
                    socket_timeout=self._io_timeout,
                    socket_connect_timeout=self._io_timeout,
                    retry_on_timeout=False,
                )
            e.used = True
            reply = e.r.execute_command("FCALL", "idpool_take", 2, a._k_pool, a._k_meta, count)
        except redis.ResponseError as err:
            e.backoff = 0.0
            msg = str(err)
            res = classify_reply(msg, count)
        except Exception as err:  # noqa: BLE001 - connection refused, timeout, protocol, ...
            self._env_fail(e, now)
            return DOWN, [], None, f"{type(err).__name__}: {err}"
        else:
            e.backoff = 0.0
            res = classify_reply(reply, count)
            msg = "the pool is empty" if res[0] == DRY else f"unexpected reply to idpool_take: {reply!r:.80}"
        if res[0] == DOWN:
            self._env_fail(e, now)
        return res + (msg,)

    def _take_http(self, a, e, count, now):
        """One GET {prefix}/v1/ids/{key}?count=N from issuer e, on a kept-alive
        connection (once more on a fresh one when a reused one was closed by
        the server). IDs lost with a cut answer are gaps: the issuer hands
        each ID out once, whether or not it is read."""
        p = e.parts
        path = f"{p['prefix']}/v1/ids/{a.key}?count={count}"
        headers = {"Authorization": "Bearer " + p["token"], "Accept": "text/plain", "User-Agent": "idpool_client"}
        for attempt in (0, 1):
            reused = e.conn is not None
            try:
                if e.conn is None:
                    if p["tls"]:
                        e.conn = http.client.HTTPSConnection(
                            p["host"], p["port"], timeout=self._io_timeout, context=self._tls
                        )
                    else:
                        e.conn = http.client.HTTPConnection(p["host"], p["port"], timeout=self._io_timeout)
                e.used = True
                e.conn.request("GET", path, headers=headers)
                resp = e.conn.getresponse()
                body = resp.read()
                retry_after = resp.getheader("Retry-After")
                if resp.will_close:
                    e.conn.close()
                    e.conn = None
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as err:
                self._env_close(e)
                if reused and attempt == 0:
                    continue  # the server closed an idle connection: once more, afresh
                self._env_fail(e, now)
                return DOWN, [], None, f"{type(err).__name__}: {err}"
            except ssl.SSLCertVerificationError as err:
                self._env_fail(e, now)
                return DOWN, [], None, f"TLS: certificate not verified: {err.verify_message}"
            except (OSError, http.client.HTTPException) as err:  # refused, timeout, TLS, protocol
                self._env_fail(e, now)
                return DOWN, [], None, f"{type(err).__name__}: {err}"
        e.backoff = 0.0
        o, ids, arg, msg = classify_http(resp.status, body, retry_after, count)
        if o == DOWN:
            self._env_fail(e, now)
        return o, ids, arg, msg
