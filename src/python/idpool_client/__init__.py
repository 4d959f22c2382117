"""idpool_client -- the Python client of idpool, with libidpool's semantics.

A :class:`Client` takes IDs from one or more *environments* in preference
order (each an independent idpool deployment: its own Redis and MySQL, rows
with the same keys and a different ``remainder`` of the same ``delta``, so
that their IDs never collide). An environment is a Redis
(``redis://[[user]:password@]host[:port][/db]``, the function
``idpool_take``), a Redis primary found through Sentinel
(``redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master``,
``?sentinel_user=U&sentinel_password=PW`` for the sentinels' own
credentials: see url.parse_url), a Redis Cluster
(``redis-cluster://[[user]:password@]host[:port][,host[:port]...]``, the
seed nodes; each take on the primary of the application's slot) or an
ID issuer (``http[s]://TOKEN@host[:port][/prefix]``,
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
        ids = user.next_n(100)        # a list of 100 IDs
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

The package is split as libidpool is, one module per part of it
(docs/architecture.md lists them). Everything in __all__ is imported from
here, and so are the constants: the outcomes (IDS ... DOWN) and the
limits and times that the tests hold against libidpool's.
"""

# The constants beside __all__ are imported only to be idpool_client.NAME.

from .buffer import LOW_WATER_MAX, batch_next, low_water_ids, rate_update
from .client import (
    BLOCK,
    MAX_ENVS,
    App,
    Client,
    IdpoolClosed,
    IdpoolError,
    IdpoolNoApp,
    IdpoolTimeout,
)
from .env import BACKOFF_MAX, BACKOFF_MIN, SKIPPED, parse_env
from .failover import (
    DRY_RETRY,
    IDLE_WAKE,
    NOAPP_RETRY,
    Failover,
    failover_after,
    failover_next,
    failover_plan,
)
from .issuer import classify_http
from .keys import APP_KEY_MAX, KEY_KINDS, key_valid, redis_key, validate_key
from .redisenv import classify_reply
from .takereply import (
    DOWN,
    DRY,
    EPOCH,
    IDS,
    LIMIT,
    NOAPP,
    RATE,
    REFUSALS,
    classify_refusal,
    hint_ms,
    take_ids,
)
from .url import REDIS_DB_MAX, parse_issuer_url, parse_url, redact

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
