"""The Redis Cluster transport (issue 21): redis-cluster:// environments,
taken from with FCALL idpool_take on the primary of the application's
slot. A row of env.TRANSPORTS; what an answer means is redisenv's
(fcall_take).

It stands on redis-py's cluster client (redis.cluster; Debian 12's
python3-redis 4.3.4): its NodesManager reads the slot table (INFO, then
CLUSTER SLOTS, from the URL's seeds in turn until one tells every slot's
primary) and keeps one connection pool per node, each authenticated with
the URL's user and password and bounded by io_timeout as a redis://
environment's is; its ClusterParser reads MOVED, ASK, TRYAGAIN and
CLUSTERDOWN as exceptions; a MOVED patches its slot in the table.

The take is sent here (_fcall), not by RedisCluster.execute_command, which
routes FCALL by the slot of its keys but, on 4.3.4 (measured on
servers.sh's cluster, a take's reply held back past socket_timeout 0.5 s):
  * sends a command again after a ConnectionError or TimeoutError, four
    times 0.25 s apart, whatever cluster_error_retry_attempts says (that
    one bounds only an outer loop): the take ran five times and the call
    came back after 3.5 s; RedisCluster() itself sends COMMAND through
    that loop;
  * asks the table's first primary COMMAND GETKEYS before every FCALL (its
    keys are "movable"): a second round trip per take, to a node that may
    be the one down.
A take sent again never hands out an ID twice: the connection whose reply
was lost is closed before anything else is read on it, so that reply's IDs
are never received. But each lost take's IDs are a gap of a whole batch,
and the client's one background thread, which fills every application,
would stall for seconds. So here, as in every transport, a take that may
have run is never sent again:
  * MOVED, ASK and TRYAGAIN say that it did not run. MOVED: the slot is
    patched and the take sent to the owner named; ASK: ASKING and the
    take on one connection to the node named, the table untouched (at most
    REDIRECTS_MAX of the two in one take); TRYAGAIN (the slot is migrating
    and its two keys are apart, or one of them does not exist): sent again
    after a pause while io_timeout lasts.
  * Anything else that is not an answer of idpool_take's (connection
    refused, a timeout, a lost reply, CLUSTERDOWN, a slot without a
    primary, the redirections or the pauses used up) makes the environment
    DOWN: its table is dropped with its connections, and the next take,
    after the back-off, reads the table from the seeds again, a second
    after the last read at the earliest (REFRESH_MIN, as
    core/cluster.h's cluster_refresh). A killed
    primary is so left at once, and its promoted replica is found as soon
    as the seeds name it.
A forked child drops the table it inherited unread (env.Env.forget): the
connections of redis-py close only the child's copies of the sockets
(they check the pid), and dropping the table takes no lock a thread of the
parent may have held at the fork.
"""

import random
import time

from . import redisenv
from .url import CLUSTER_USAGE, parse_url

try:  # the pure parts (and their unit tests) work without redis-py
    import redis
    import redis.cluster
    import redis.crc
except ImportError:  # pragma: no cover - Debian: apt-get install python3-redis
    redis = None

KIND = "redis"
SCHEMES = ("redis-cluster://",)
USAGE = CLUSTER_USAGE
parse = parse_url  # url.c's checks: kind "cluster", seeds

REDIRECTS_MAX = 5  # MOVED and ASK followed in one take (hiredis-cluster's budget)
REFRESH_MIN = 1.0  # the slot table is read at most once a second (core/cluster.h)
TRYAGAIN_PAUSE = 0.020  # the first pause after a TRYAGAIN (s), doubling ...
TRYAGAIN_PAUSE_MAX = 0.160  # ... up to this, while the take's io_timeout lasts


def prepare(envs, ca_file):
    """Cluster environments need redis-py with redis.cluster (4.1 or later)."""
    if redis is None:
        raise ImportError(redisenv.missing_redis_py() +
                          "; redis-cluster:// needs 4.1 or later, with redis.cluster")


def _on_connect(conn):
    """Every node connection, when made: Cluster errors read as exceptions
    (RedisCluster.on_connect does the same), then AUTH as redis-py does."""
    conn.set_parser(redis.cluster.ClusterParser)
    conn.on_connect()


def _connect(e):
    """The slot table of environment e, read from its seeds in a random order (a
    redis.cluster.NodesManager); the seeds' own connections are closed
    once it is read. Nothing is retried: no retry_on_timeout."""
    p = e.parts
    # shuffled, as libidpool's route.c starts at a random node: the clients
    # of one URL do not all ask its first seed (NodesManager asks in order)
    seeds = random.sample(p["seeds"], len(p["seeds"]))
    nm = redis.cluster.NodesManager(
        [redis.cluster.ClusterNode(host, port) for host, port in seeds],
        require_full_coverage=False,  # a slot without a primary fails only its takes
        dynamic_startup_nodes=False,  # nm.startup_nodes stays the seeds (closed below)
        username=p["username"],
        password=p["password"],
        socket_timeout=e.io_timeout,
        socket_connect_timeout=e.io_timeout,
        retry_on_timeout=False,
        redis_connect_func=_on_connect,
    )
    _disconnect(nm.startup_nodes.values())
    return nm


def _disconnect(nodes):
    """Close the connections of the ClusterNodes `nodes` (a pool connects again when next used)."""
    for n in nodes:
        if n.redis_connection is not None:
            try:
                n.redis_connection.connection_pool.disconnect()
            except Exception:  # noqa: BLE001 - closing anyway
                pass


def _pool(nm, node):
    """The connection pool of node, made for a node that a MOVED or an ASK
    named first."""
    if node.redis_connection is None:
        nm.create_redis_connections([node])
    return node.redis_connection.connection_pool


def _fcall(nm, keys, count, deadline):
    """FCALL idpool_take of keys (an application's pool and meta) on the
    primary of their slot by table nm, following MOVED and ASK and waiting
    out TRYAGAIN until deadline (time.monotonic()): the reply, or an
    exception: a ResponseError (a refusal of idpool_take's, CLUSTERDOWN
    ...), a ClusterError when the redirections or the pauses ran out, or a
    connection's error. The take is sent again only after an answer that
    says it did not run."""
    slot = redis.crc.key_slot(keys[0].encode())
    ask = None  # the node an ASK named: ASKING, then the take, on one connection
    redirects, pause, t0 = 0, TRYAGAIN_PAUSE, time.monotonic()
    while True:
        node = ask or nm.get_node_from_slot(slot)
        pool = _pool(nm, node)
        conn = pool.get_connection("FCALL")  # connects: an error here sent nothing
        try:
            if ask is not None:
                conn.send_command("ASKING")
                conn.read_response()
            conn.send_command("FCALL", "idpool_take", 2, *keys, count)
            return conn.read_response()
        except redis.exceptions.AskError as err:  # MOVED is one too
            kind = "MOVED" if isinstance(err, redis.exceptions.MovedError) else "ASK"
            if redirects == REDIRECTS_MAX:
                raise redis.exceptions.ClusterError(
                    f"slot {slot}: {kind} {err} after {REDIRECTS_MAX} redirections"
                ) from None
            redirects += 1
            if not err.host:  # no endpoint named: the node that answered's host
                err.host = node.host
            if kind == "MOVED":  # for good: the next get_node_from_slot patches the slot
                nm.update_moved_exception(err)
                ask = None
            else:  # on its way there: the table is left as it is
                ask = nm.get_node(host=err.host, port=err.port) or redis.cluster.ClusterNode(
                    err.host, err.port, redis.cluster.PRIMARY
                )
        except redis.exceptions.TryAgainError:
            if time.monotonic() + pause > deadline:
                raise redis.exceptions.ClusterError(
                    f"slot {slot}: TRYAGAIN for {(time.monotonic() - t0) * 1000:.0f} ms "
                    "(the slot is migrating: the pool and the meta are not both on one node)"
                ) from None
            time.sleep(pause)
            pause = min(2 * pause, TRYAGAIN_PAUSE_MAX)
            ask = None  # the table's node first: the migration may have ended
        finally:
            pool.release(conn)


def _read_table(e):
    """The slot table of e read again (_connect), at most once per
    REFRESH_MIN (as core/cluster.h's cluster_refresh: refresh storms are the
    most reported failure of cluster clients); sooner, a ClusterError (the
    take is DOWN: e backs off)."""
    now = time.monotonic()
    if now < e.refresh_at:
        raise redis.exceptions.ClusterError(
            f"the slot table was read less than {REFRESH_MIN:.0f} s ago; "
            f"next read in {int((e.refresh_at - now) * 1000)} ms"
        )
    e.refresh_at = now + REFRESH_MIN
    return _connect(e)


def take(e, a, count, now):
    """FCALL idpool_take of application a in Cluster e: env.Env.take()'s result."""
    keys = (a._k_pool, a._k_meta)
    return redisenv.fcall_take(
        e, count, now, _read_table, lambda nm: _fcall(nm, keys, count, time.monotonic() + e.io_timeout)
    )


def close(e):
    """Drop e's slot table and close its connections: the next take reads
    the table from the seeds again."""
    nm, e.conn = e.conn, None
    if nm is not None:
        _disconnect(nm.nodes_cache.values())
