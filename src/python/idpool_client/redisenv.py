"""The Redis transport (src/lib/redisenv.c's mirror): redis:// and
redis-sentinel:// environments, taken from with FCALL idpool_take on
redis-py (Debian's python3-redis). A row of env.TRANSPORTS; fcall_take,
what a take's answer makes of an environment, serves clusterenv too.

A Sentinel environment is one environment: redis.sentinel.Sentinel asks
the sentinels (SENTINEL MASTERS) for the primary at every new connection,
which is then checked with ROLE (the Sentinel client guide's step 3: a
primary just demoted still looks like one to a stale sentinel). A replica
there, READONLY, NOREPLICAS or a lost reply make the environment DOWN: the
connection closes, and the next take, after the back-off, asks the
sentinels again. A take is never resent (redis-py retries nothing without
retry_on_timeout or retry_on_error): a lost take's IDs are a gap."""

from .takereply import DOWN, DRY, IDS, classify_refusal, take_ids
from .url import REDIS_USAGE, SENTINEL_USAGE, hostport_str, parse_url

try:  # the pure parts (and their unit tests) work without redis-py
    import redis
    import redis.sentinel
except ImportError:  # pragma: no cover - Debian: apt-get install python3-redis
    redis = None

KIND = "redis"
SCHEMES = ("redis://", "redis-sentinel://")
USAGE = f"{REDIS_USAGE} or {SENTINEL_USAGE}"
parse = parse_url  # url.c's checks (env sends redis-cluster:// to clusterenv)

SENTINEL_TIMEOUT = 0.300  # a sentinel's connect, and its answer, at most (s; less when io_timeout is)


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


def missing_redis_py():
    """What to do when redis-py cannot be imported, naming the interpreter
    that lacks it: Debian's python3-redis serves only Debian's own python3
    (/usr/bin/python3); a venv or another Python needs pip's redis."""
    import sys

    exe = sys.executable or "this Python"
    if exe.startswith("/usr/bin/python3"):
        how = "Debian: apt-get install python3-redis"
    else:
        how = "python3-redis is Debian's /usr/bin/python3 only: %s -m pip install redis" % exe
    return "idpool_client needs redis-py, which %s (Python %d.%d) cannot import (%s)" % (
        exe, sys.version_info[0], sys.version_info[1], how)


def prepare(envs, ca_file):
    """Redis environments need redis-py."""
    if redis is None:
        raise ImportError(missing_redis_py())


def _role_checked(base):
    """A redis-py connection class of the primary that asks ROLE once it is
    connected (after AUTH and SELECT): anything but "master" is a
    ConnectionError, and the connection is closed."""

    class PrimaryConnection(base):
        def connect_to(self, address):
            super().connect_to(address)
            self.send_command("ROLE")
            role = self.read_response()
            role = role[0] if isinstance(role, (list, tuple)) and role else role
            if isinstance(role, bytes):
                role = role.decode("utf-8", "replace")
            if role != "master":
                self.disconnect()
                raise redis.ConnectionError(
                    f"{hostport_str(str(address[0]), int(address[1]))}, named by the sentinels, "
                    f"is not the primary (ROLE: {role!r:.40})"
                )

    return PrimaryConnection


def _connect(e):
    """A redis.Redis of environment e: the server of a redis:// URL, or
    the primary the sentinels name for a redis-sentinel:// one. Nothing is
    retried: no retry_on_timeout, no retry_on_error."""
    common = {
        "socket_timeout": e.io_timeout,
        "socket_connect_timeout": e.io_timeout,
        "retry_on_timeout": False,
    }
    p = e.parts
    if p.get("kind") != "sentinel":
        return redis.Redis.from_url(e.url, **common)
    st = min(e.io_timeout, SENTINEL_TIMEOUT)
    sentinels = redis.sentinel.Sentinel(
        p["sentinels"],
        sentinel_kwargs={
            "username": p["sentinel_username"],
            "password": p["sentinel_password"],
            "socket_timeout": st,
            "socket_connect_timeout": st,
            "retry_on_timeout": False,
        },
        socket_timeout=e.io_timeout,
    )
    return sentinels.master_for(
        p["master"],
        connection_class=_role_checked(redis.sentinel.SentinelManagedConnection),
        username=p["username"],
        password=p["password"],
        db=p["db"],
        check_connection=True,
        **common,
    )


def take(e, a, count, now):
    """FCALL idpool_take of application a on Redis e: env.Env.take()'s result."""
    return fcall_take(
        e, count, now, _connect,
        lambda conn: conn.execute_command("FCALL", "idpool_take", 2, a._k_pool, a._k_meta, count),
    )


def fcall_take(e, count, now, connect, send):
    """One take of count IDs on e: send(conn) sends it on e's connection
    (made by connect(e) when e has none) and returns the reply. What came
    back as env.Env.take() answers it: an error reply is read by
    classify_reply; one that is not ours, or any other exception (refused,
    timed out, lost reply ...), is DOWN, and e fails: its connection closes,
    it backs off (longer each time: only an answer of idpool_take's resets
    the back-off, so that a cluster down, CLUSTERDOWN on every take, does
    not have it reconnect every 100 ms). Shared by the Redis transports (this one, clusterenv)."""
    try:
        if e.conn is None:
            e.conn = connect(e)
        e.used = True
        reply = send(e.conn)
    except redis.ResponseError as err:
        msg = str(err)
        res = classify_reply(msg, count)
    except Exception as err:  # noqa: BLE001 - connection refused, timeout, protocol, ...
        e.fail(now)
        return DOWN, [], None, f"{type(err).__name__}: {err}"
    else:
        res = classify_reply(reply, count)
        msg = "the pool is empty" if res[0] == DRY else f"unexpected reply to idpool_take: {reply!r:.80}"
    if res[0] == DOWN:  # an error reply not ours (CLUSTERDOWN, LOADING ...): the back-off grows
        e.fail(now)
    else:
        e.backoff = 0.0
    return res + (msg,)


def close(e):
    """Disconnect e's connections (redis.Redis connects again when next used)."""
    if e.conn is not None:
        try:
            e.conn.connection_pool.disconnect()
        except Exception:  # noqa: BLE001 - closing anyway
            pass
