"""The Redis transport (src/lib/redisenv.c's mirror): redis:// environments,
taken from with FCALL idpool_take on redis-py (Debian's python3-redis).
A row of env.TRANSPORTS."""

from .takereply import DOWN, DRY, IDS, classify_refusal, take_ids
from .url import REDIS_USAGE, parse_url

try:  # the pure parts (and their unit tests) work without redis-py
    import redis
except ImportError:  # pragma: no cover - Debian: apt-get install python3-redis
    redis = None

KIND = "redis"
SCHEMES = ("redis://",)
USAGE = REDIS_USAGE
parse = parse_url


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


def prepare(envs, ca_file):
    """Redis environments need redis-py."""
    if redis is None:
        raise ImportError("idpool_client needs redis-py (Debian: apt-get install python3-redis)")


def take(e, a, count, now):
    """FCALL idpool_take of application a on Redis e: env.Env.take()'s result."""
    try:
        if e.conn is None:
            e.conn = redis.Redis.from_url(
                e.url,
                socket_timeout=e.io_timeout,
                socket_connect_timeout=e.io_timeout,
                retry_on_timeout=False,
            )
        e.used = True
        reply = e.conn.execute_command("FCALL", "idpool_take", 2, a._k_pool, a._k_meta, count)
    except redis.ResponseError as err:
        e.backoff = 0.0
        msg = str(err)
        res = classify_reply(msg, count)
    except Exception as err:  # noqa: BLE001 - connection refused, timeout, protocol, ...
        e.fail(now)
        return DOWN, [], None, f"{type(err).__name__}: {err}"
    else:
        e.backoff = 0.0
        res = classify_reply(reply, count)
        msg = "the pool is empty" if res[0] == DRY else f"unexpected reply to idpool_take: {reply!r:.80}"
    if res[0] == DOWN:
        e.fail(now)
    return res + (msg,)


def close(e):
    """Disconnect e's connections (redis.Redis connects again when next used)."""
    if e.conn is not None:
        try:
            e.conn.connection_pool.disconnect()
        except Exception:  # noqa: BLE001 - closing anyway
            pass
