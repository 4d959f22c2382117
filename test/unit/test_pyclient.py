#!/usr/bin/env python3
"""Unit tests of the Python client (src/python/idpool_client/) without
servers: the pure parts (key and URL validation, batch rule, reply
classification) and the client's state machine (failover, failback,
refusals, errors, close) driven by a scripted fake in place of Redis.
PYTHONPATH must hold src/python (meson sets it); runs without redis-py
too (a stub stands in for it)."""

import gc
import json
import logging
import os
import subprocess
import sys
import threading
import time
import types
import unittest
import unittest.mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "python"))
import idpool_client as m  # noqa: E402

A = "redis://127.0.0.1:1/0"
B = "redis://127.0.0.1:2/0"


class Keys(unittest.TestCase):
    def test_valid(self):
        for k in ("user", "a", "A.b-c_9", "x" * 64, ".hidden", "a..b", "_", "9"):
            self.assertTrue(m.key_valid(k), k)
            self.assertEqual(m.validate_key(k), k)

    def test_invalid(self):
        cases = {
            "": "empty",
            "x" * 65: "longer than 64",
            "a b": "' '",
            "a/b": "'/'",
            "a:b": "':'",
            "a{b}": "'{'",
            "é": "'é'",
            ".": "not allowed",
            "..": "not allowed",
            "-x": "must not start with '-'",
        }
        for k, msg in cases.items():
            self.assertFalse(m.key_valid(k), k)
            with self.assertRaises(ValueError) as cm:
                m.validate_key(k)
            self.assertIn("application key", str(cm.exception))
            self.assertIn(msg, str(cm.exception))
        for k in (None, 5, b"user"):
            self.assertFalse(m.key_valid(k))
            with self.assertRaisesRegex(ValueError, "must be a str"):
                m.validate_key(k)


class Urls(unittest.TestCase):
    def test_good(self):
        self.assertEqual(
            m.parse_url("redis://h"),
            {"host": "h", "port": 6379, "db": 0, "username": None, "password": None},
        )
        p = m.parse_url("redis://u:p%40w%2F@10.0.0.1:6380/3")
        self.assertEqual((p["host"], p["port"], p["db"], p["username"], p["password"]), ("10.0.0.1", 6380, 3, "u", "p@w/"))
        p = m.parse_url("redis://:pw@h/")
        self.assertEqual((p["username"], p["password"], p["db"]), (None, "pw", 0))
        self.assertEqual(m.parse_url("REDIS://[::1]:7000")["host"], "::1")

    def test_bad(self):
        cases = {
            "rediss://h": "TLS",
            "http://h": "scheme",
            "h:6379": "scheme",
            "redis://": "no host",
            "redis://:pw@": "no host",
            "redis://h:0": "port",
            "redis://h:70000": "port",
            "redis://h:x": "port",
            "redis://h/db": "database",
            "redis://h/1000001": "database",
            "redis://h /0": "space",
            "redis://h/0?x=1": "query",
            "redis://h/u@x": "'@' after the host",
            "redis://[::1": "IPv6",
        }
        for u, msg in cases.items():
            with self.assertRaises(ValueError, msg=u) as cm:
                m.parse_url(u)
            self.assertIn(msg, str(cm.exception), u)
        with self.assertRaises(ValueError):
            m.parse_url(None)
        # With no '@', "user:password" with the host forgotten reads as
        # host:port: the port is not shown (url.c does the same).
        for u in ("redis://admin:topsecret", "redis://[::1]:topsecret/0",
                  "http://idp_x@h", "https://tok:topsecret"):
            try:
                (m.parse_url if u.startswith("redis") else m.parse_issuer_url)(u)
            except ValueError as e:
                self.assertNotIn("topsecret", str(e), u)
        with self.assertRaisesRegex(ValueError, r"port must be an integer in 1\.\.65535 \(not shown"):
            m.parse_url("redis://admin:topsecret")
        with self.assertRaisesRegex(ValueError, r"got 'x'"):
            m.parse_url("redis://u:p@h:x")

    def test_client_names_the_environment_and_hides_the_password(self):
        with self.assertRaises(ValueError) as cm:
            m.Client([A, "redis://u:secret@h:99999/0"])
        s = str(cm.exception)
        self.assertIn("environment 1", s)
        self.assertIn("port", s)
        self.assertNotIn("secret", s)

    def test_client_options(self):
        for kw, msg in (
            ({}, None),
            ({"timeout": 0}, "timeout"),
            ({"io_timeout": -1}, "io_timeout"),
            ({"min_batch": 0}, "min_batch"),
            ({"max_batch": "9"}, "max_batch"),
            ({"buffer": -1}, "buffer"),
            ({"key_prefix": ""}, "key_prefix"),
        ):
            if msg is None:
                continue
            with self.assertRaisesRegex(ValueError, msg):
                m.Client([A], **kw)
        with self.assertRaisesRegex(ValueError, "1 to 32"):
            m.Client([])
        with self.assertRaisesRegex(ValueError, "list"):
            m.Client(A)


class UrlVectors(unittest.TestCase):
    """test/unit/url_vectors.tsv, which test_config.c reads too: the Python
    parser accepts and refuses the URLs url.c does, with the same meaning."""

    def test_vectors(self):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "url_vectors.tsv")
        n = 0
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                url, want, *text = line.split("\t")
                n += 1
                with self.subTest(url=url):
                    if want == "error":
                        with self.assertRaises(ValueError) as cm:
                            m.parse_url(url)
                        if text:
                            self.assertIn(text[0], str(cm.exception))
                        self.assertNotIn("topsecret", str(cm.exception))
                        continue
                    got = dict(m.parse_url(url))
                    got.setdefault("kind", "standalone")
                    for hosts in ("sentinels", "seeds"):
                        if hosts in got:
                            got[hosts] = [list(s) for s in got[hosts]]
                    self.assertEqual(got, json.loads(want))
        self.assertGreaterEqual(n, 40)

    def test_env_of_a_sentinel_url(self):
        self.assertEqual(m.parse_env("redis-sentinel://s1#m")[0], "redis")
        e = m.env.Env(0, "redis-sentinel://:pw@127.0.0.1:1,127.0.0.1:2/0#mymaster", 0.5)
        self.assertEqual(e.name, "mymaster via Sentinel 127.0.0.1:1")
        self.assertIs(e.ops, m.redisenv)

    def test_env_of_a_cluster_url(self):
        """Parsed as url.c parses it (its own errors first), served by clusterenv."""
        self.assertEqual(m.parse_url("redis-cluster://n1,n2:7001")["seeds"], [("n1", 6379), ("n2", 7001)])
        with self.assertRaisesRegex(ValueError, "seed node n1:6379 is listed twice"):
            m.parse_env("redis-cluster://n1,n1")
        self.assertEqual(m.parse_env("redis-cluster://n1")[0], "redis")
        e = m.env.Env(0, "redis-cluster://:pw@127.0.0.1:1,127.0.0.1:2", 0.5)
        self.assertEqual(e.name, "Cluster via 127.0.0.1:1")
        self.assertIs(e.ops, m.clusterenv)
        with self.assertRaises(ValueError) as cm:
            m.Client(["redis-cluster://:topsecret@127.0.0.1:7000/1"])
        self.assertIn("environment 0", str(cm.exception))
        self.assertIn("database 0 only", str(cm.exception))
        self.assertNotIn("topsecret", str(cm.exception))


try:  # the transport against scripted servers needs the real redis-py
    import redis as _redis  # noqa: F401

    HAVE_REDIS = True
except ImportError:
    HAVE_REDIS = False


class FakeRedis:
    """A scripted RESP server on 127.0.0.1 (a sentinel or a data server):
    reply(cmd) answers each command (a list of str) with what resp()
    sends, or None to close the connection without a reply. Every command is
    kept, and the connection it came on."""

    def __init__(self, reply):
        import socket

        self.reply = reply
        self.cmds = []
        self.conn_of = []  # the connection (1, 2, ... in the order accepted) of each command
        self.conns = 0  # connections accepted
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns += 1
            threading.Thread(target=self._serve, args=(c, self.conns), daemon=True).start()

    def _serve(self, c, conn):
        f = c.makefile("rb")
        try:
            while True:
                line = f.readline()
                if not line.startswith(b"*"):
                    return
                cmd = []
                for _ in range(int(line[1:])):
                    n = int(f.readline()[1:])
                    cmd.append(f.read(n + 2)[:-2].decode())
                self.cmds.append(cmd)
                self.conn_of.append(conn)
                out = self.reply(cmd)
                if out is None:
                    return
                c.sendall(resp(out))
        finally:
            f.close()
            c.close()

    def count(self, name):
        return sum(1 for c in self.cmds if c[0].upper() == name)

    def close(self):
        import socket

        try:  # wakes the accepting thread (close alone does not)
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def resp(x):
    """x in RESP: a list is an array, bytes a simple string or error as written, else a bulk string."""
    if isinstance(x, list):
        return b"*%d\r\n" % len(x) + b"".join(resp(i) for i in x)
    if isinstance(x, bytes):
        return x + b"\r\n"
    x = str(x).encode()
    return b"$%d\r\n%s\r\n" % (len(x), x)


@unittest.skipUnless(HAVE_REDIS, "redis-py (python3-redis) not importable")
class SentinelTransport(unittest.TestCase):
    """The Redis transport on a redis-sentinel:// URL against scripted
    servers: the sentinel names a server, ROLE is asked once per new
    connection, a replica, READONLY or a lost reply is DOWN, and a take is
    never sent twice."""

    def setUp(self):
        import redis

        m.redisenv.redis = redis  # a test before may have left the stub
        self.role = "master"
        self.fcall = lambda cmd: ["7", "8", "9"]
        self.data = FakeRedis(self._data)
        self.sentinel = FakeRedis(self._sentinel)
        self.addCleanup(self.data.close)
        self.addCleanup(self.sentinel.close)
        url = (f"redis-sentinel://app:datapw@127.0.0.1:{self.sentinel.port}/2"
               "?sentinel_user=sen&sentinel_password=s%23pw#mymaster")
        self.e = m.env.Env(0, url, 0.5)
        self.addCleanup(self.e.close)
        self.app = types.SimpleNamespace(_k_pool="p", _k_meta="m")

    def _sentinel(self, cmd):
        if cmd[0].upper() == "AUTH":
            return b"+OK"
        if cmd[:2] == ["SENTINEL", "MASTERS"]:
            return [["name", "mymaster", "ip", "127.0.0.1", "port", self.data.port,
                     "flags", "master", "num-other-sentinels", 2]]
        return b"-ERR unknown"

    def _data(self, cmd):
        name = cmd[0].upper()
        if name in ("AUTH", "SELECT"):
            return b"+OK"
        if name == "PING":
            return b"+PONG"
        if name == "ROLE":
            return [self.role, b":0", []] if self.role == "master" else [self.role, "127.0.0.1", b":1", "connected", b":0"]
        if name == "FCALL":
            return self.fcall(cmd)
        return b"-ERR unknown"

    def take(self):
        return m.redisenv.take(self.e, self.app, 3, time.monotonic())

    def test_primary_found_checked_and_taken_from(self):
        self.assertEqual(self.take()[:2], (m.IDS, [7, 8, 9]))
        self.assertEqual(self.take()[:2], (m.IDS, [7, 8, 9]))
        self.assertIn(["AUTH", "sen", "s#pw"], self.sentinel.cmds)
        self.assertEqual(self.data.cmds[:4], [["AUTH", "app", "datapw"], ["SELECT", "2"], ["PING"], ["ROLE"]])
        self.assertEqual(self.data.count("ROLE"), 1)  # once per connection, not per take
        self.assertEqual(self.data.count("FCALL"), 2)
        self.assertEqual(self.data.cmds[-1], ["FCALL", "idpool_take", "2", "p", "m", "3"])

    def test_a_replica_is_down_and_never_taken_from(self):
        self.role = "slave"
        o, ids, _, msg = self.take()
        self.assertEqual((o, ids), (m.DOWN, []))
        self.assertIn("is not the primary (ROLE: 'slave')", msg)
        self.assertEqual(self.data.count("FCALL"), 0)
        self.assertGreater(self.e.down_until, 0)
        # The next take asks the sentinels again, and ROLE again.
        self.role = "master"
        self.e.down_until = 0.0
        self.assertEqual(self.take()[0], m.IDS)
        self.assertEqual(self.sentinel.count("SENTINEL"), 2)
        self.assertEqual(self.data.count("ROLE"), 2)

    def test_a_lost_reply_is_down_and_the_take_is_not_resent(self):
        self.assertEqual(self.take()[0], m.IDS)
        self.fcall = lambda cmd: None  # the connection is cut before the reply
        self.assertEqual(self.take()[:2], (m.DOWN, []))
        self.assertEqual(self.data.count("FCALL"), 2)  # not resent
        self.fcall = lambda cmd: ["1"]
        self.e.down_until = 0.0
        self.assertEqual(self.take()[:2], (m.IDS, [1]))
        self.assertEqual(self.sentinel.count("SENTINEL"), 2)  # asked again
        self.assertEqual(self.data.count("ROLE"), 2)

    def test_readonly_and_noreplicas_are_down_and_not_resent(self):
        for err in (b"-READONLY You can't write against a read only replica.",
                    b"-NOREPLICAS Not enough good replicas to write."):
            before = self.data.count("FCALL")
            self.fcall = lambda cmd, err=err: err
            self.e.down_until = 0.0
            self.assertEqual(self.take()[:2], (m.DOWN, []), err)
            self.assertEqual(self.data.count("FCALL"), before + 1, err)
            self.assertFalse(self.e.used, err)  # closed: the next take asks the sentinels again

    def test_no_sentinel_answers(self):
        import socket

        quiet = socket.socket()  # bound, not listening: connections are refused
        self.addCleanup(quiet.close)
        quiet.bind(("127.0.0.1", 0))
        self.e = m.env.Env(0, f"redis-sentinel://127.0.0.1:{quiet.getsockname()[1]}#mymaster", 0.5)
        self.addCleanup(self.e.close)
        o, _, _, msg = self.take()
        self.assertEqual(o, m.DOWN)
        self.assertIn("mymaster", msg)


def fork_next(a, in_child=None):
    """Fork; in the child a.next() (application a of an inherited client)
    must raise IdpoolClosed, then in_child() runs. The child's exit status:
    0 when it did, 1 for an ID, 2 for another error."""
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            a.next()
            code = 1
        except m.IdpoolClosed:
            if in_child is not None:
                in_child()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@unittest.skipUnless(HAVE_REDIS, "redis-py (python3-redis) not importable")
class ClusterTransport(unittest.TestCase):
    """The Cluster transport on a redis-cluster:// URL against two scripted
    primaries, A (slots 0-8191) and B (8192-16383), and a node C outside
    the table: the table is read from the first seed that answers, every
    connection authenticated; a take goes to its slot's primary without
    asking COMMAND GETKEYS; MOVED patches the slot, ASK is followed on one
    connection and leaves the table, TRYAGAIN is waited out within
    io_timeout; a lost or late reply is DOWN and the take is never sent
    again; a DOWN drops the table, read from the seeds at the next take."""

    IO = 0.3  # the environments' io_timeout (s)

    def setUp(self):
        import socket

        log = logging.getLogger("redis.cluster")  # a traceback for each seed that refuses
        log.disabled = True
        self.addCleanup(setattr, log, "disabled", False)
        self.next_id = 1
        self.fcall = {}  # node name -> cmd -> reply (default: IDs)
        self.nodes = {}
        for name in "ABC":
            self.nodes[name] = FakeRedis(lambda cmd, name=name: self._reply(name, cmd))
            self.addCleanup(self.nodes[name].close)
        self.A, self.B, self.C = (self.nodes[n] for n in "ABC")
        quiet = socket.socket()  # bound, not listening: connections are refused
        self.addCleanup(quiet.close)
        quiet.bind(("127.0.0.1", 0))
        self.dead = quiet.getsockname()[1]
        self.e = self.env(f"redis-cluster://app:pw@127.0.0.1:{self.dead},127.0.0.1:{self.A.port}")
        self.a = self.app_in(0, 8191)  # served by A
        self.b = self.app_in(8192, 16383)  # served by B

    def env(self, url):
        e = m.env.Env(0, url, self.IO)
        self.addCleanup(e.close)
        return e

    @staticmethod
    def app_in(lo, hi):
        """An application whose keys' slot lies in lo..hi."""
        from redis.crc import key_slot

        for i in range(1000):
            pool = m.redis_key("idpool", f"k{i}", "pool")
            slot = key_slot(pool.encode())
            if lo <= slot <= hi:
                meta = m.redis_key("idpool", f"k{i}", "meta")
                return types.SimpleNamespace(key=f"k{i}", _k_pool=pool, _k_meta=meta, slot=slot)
        raise LookupError(f"no key in slots {lo}..{hi}")

    def _reply(self, name, cmd):
        c = cmd[0].upper()
        if c in ("AUTH", "ASKING"):
            return b"+OK"
        if c == "INFO":
            return "# Cluster\r\ncluster_enabled:1\r\n"
        if cmd[:2] == ["CLUSTER", "SLOTS"]:
            return [[b":0", b":8191", ["127.0.0.1", b":%d" % self.A.port, "a" * 40]],
                    [b":8192", b":16383", ["127.0.0.1", b":%d" % self.B.port, "b" * 40]]]
        if c == "FCALL":
            script = self.fcall.get(name)
            return script(cmd) if script else self.ids(int(cmd[-1]))
        return b"-ERR unknown command"

    def ids(self, n):
        out = [str(i) for i in range(self.next_id, self.next_id + n)]
        self.next_id += n
        return out

    def take(self, app, e=None):
        return m.clusterenv.take(e or self.e, app, 3, time.monotonic())

    def fcalls(self, node):
        return [c for c in node.cmds if c[0] == "FCALL"]

    @staticmethod
    def sent(app):
        """The take of 3 IDs of app as a node receives it."""
        return ["FCALL", "idpool_take", "2", app._k_pool, app._k_meta, "3"]

    def test_routed_by_slot_authenticated_once_per_connection(self):
        self.assertEqual(self.take(self.a)[:2], (m.IDS, [1, 2, 3]))
        self.assertEqual(self.take(self.b)[:2], (m.IDS, [4, 5, 6]))
        self.assertEqual(self.fcalls(self.A), [self.sent(self.a)])
        self.assertEqual(self.fcalls(self.B), [self.sent(self.b)])
        for node in (self.A, self.B):
            firsts = [node.cmds[node.conn_of.index(n)] for n in set(node.conn_of)]
            self.assertEqual(firsts, [["AUTH", "app", "pw"]] * len(firsts))
            self.assertFalse([c for c in node.cmds if c[0] == "COMMAND"], node.cmds)
        self.assertEqual(self.A.count("CLUSTER"), 1)  # from A, the second seed: the first refuses
        conns = self.A.conns
        self.assertEqual(self.take(self.a)[0], m.IDS)
        self.assertEqual((self.A.count("CLUSTER"), self.A.conns), (1, conns))  # the table and connection kept

    def test_moved_patches_the_slot(self):
        self.fcall["A"] = lambda cmd: b"-MOVED %d 127.0.0.1:%d" % (self.a.slot, self.B.port)
        self.assertEqual(self.take(self.a)[:2], (m.IDS, [1, 2, 3]))
        self.assertEqual((len(self.fcalls(self.A)), len(self.fcalls(self.B))), (1, 1))
        self.assertEqual(self.take(self.a)[0], m.IDS)
        self.assertEqual((len(self.fcalls(self.A)), len(self.fcalls(self.B))), (1, 2))  # straight to B
        self.assertEqual(self.take(self.b)[0], m.IDS)
        self.assertEqual(self.A.count("CLUSTER") + self.B.count("CLUSTER"), 1)  # patched, not read again

    def test_ask_is_followed_on_one_connection_and_leaves_the_table(self):
        self.fcall["A"] = lambda cmd: b"-ASK %d 127.0.0.1:%d" % (self.a.slot, self.C.port)

        def c_node(cmd):  # as an importing node: served only right after ASKING on that connection
            i = len(self.C.cmds) - 1
            prev = [self.C.cmds[j] for j in range(i) if self.C.conn_of[j] == self.C.conn_of[i]]
            if prev and prev[-1] == ["ASKING"]:
                return self.ids(3)
            return b"-MOVED %d 127.0.0.1:%d" % (self.a.slot, self.A.port)

        self.fcall["C"] = c_node
        self.assertEqual(self.take(self.a)[:2], (m.IDS, [1, 2, 3]))
        self.assertEqual(self.C.cmds[-2:], [["ASKING"], self.sent(self.a)])
        self.assertEqual(self.C.conn_of[-2], self.C.conn_of[-1])
        self.assertEqual(self.take(self.a)[0], m.IDS)
        self.assertEqual((len(self.fcalls(self.A)), self.C.count("ASKING")), (2, 2))  # A first again

    def test_tryagain_is_waited_out(self):
        tryagain = b"-TRYAGAIN Multiple keys request during rehashing of slot"
        self.fcall["A"] = lambda cmd: tryagain if len(self.fcalls(self.A)) <= 2 else self.ids(3)
        self.assertEqual(self.take(self.a)[:2], (m.IDS, [1, 2, 3]))
        self.assertEqual(len(self.fcalls(self.A)), 3)
        self.fcall["A"] = lambda cmd: tryagain
        t0 = time.monotonic()
        o, _, _, msg = self.take(self.a)
        dt = time.monotonic() - t0
        self.assertEqual(o, m.DOWN)
        self.assertIn("TRYAGAIN for", msg)
        self.assertGreater(dt, self.IO / 3)
        self.assertLess(dt, self.IO + 0.2)
        self.assertIsNone(self.e.conn)  # the table is read again at the next take

    def test_a_lost_reply_is_down_and_the_take_is_not_resent(self):
        self.assertEqual(self.take(self.a)[0], m.IDS)
        self.fcall["A"] = lambda cmd: None  # the connection is cut before the reply
        o, ids, _, msg = self.take(self.a)
        self.assertEqual((o, ids), (m.DOWN, []))
        self.assertIn("ConnectionError", msg)
        self.assertEqual(len(self.fcalls(self.A)), 2)  # not resent
        self.assertIsNone(self.e.conn)
        self.assertFalse(self.e.used)
        del self.fcall["A"]
        o, _, _, msg = self.take(self.a)  # within a second of the last read: not read yet
        self.assertEqual(o, m.DOWN)
        self.assertIn("next read in", msg)
        self.assertEqual(self.A.count("CLUSTER"), 1)
        self.e.refresh_at = 0.0  # a second later
        self.assertEqual(self.take(self.a)[0], m.IDS)
        self.assertEqual(self.A.count("CLUSTER"), 2)  # the table read again from the seeds

    def test_a_late_reply_is_down_within_io_timeout_and_not_resent(self):
        self.fcall["A"] = lambda cmd: time.sleep(3 * self.IO)  # then closes, without a reply
        t0 = time.monotonic()
        o, _, _, msg = self.take(self.a)
        dt = time.monotonic() - t0
        self.assertEqual(o, m.DOWN)
        self.assertIn("TimeoutError", msg)
        self.assertLess(dt, 2 * self.IO)
        self.assertEqual(len(self.fcalls(self.A)), 1)

    def test_answers_that_end_a_take(self):
        self.fcall["A"] = lambda cmd: b"-IDPOOL_EPOCH pool not yet re-validated; retry in 50 ms"
        self.assertEqual(self.take(self.a)[:3], (m.EPOCH, [], 0.05))
        self.assertIsNotNone(self.e.conn)  # a refusal of ours keeps the table
        self.fcall["A"] = lambda cmd: []
        self.assertEqual(self.take(self.a)[:2], (m.DRY, []))
        self.fcall["A"] = lambda cmd: b"-CLUSTERDOWN The cluster is down"
        self.assertEqual(self.take(self.a)[0], m.DOWN)
        self.assertIsNone(self.e.conn)
        # MOVED back and forth: given up after REDIRECTS_MAX, sent once more than that
        self.fcall["A"] = lambda cmd: b"-MOVED %d 127.0.0.1:%d" % (self.a.slot, self.B.port)
        self.fcall["B"] = lambda cmd: b"-MOVED %d 127.0.0.1:%d" % (self.a.slot, self.A.port)
        before = len(self.fcalls(self.A)) + len(self.fcalls(self.B))
        self.e.refresh_at = 0.0  # a second later: the table is read again
        o, _, _, msg = self.take(self.a)
        self.assertEqual(o, m.DOWN)
        self.assertIn(f"after {m.clusterenv.REDIRECTS_MAX} redirections", msg)
        sent = len(self.fcalls(self.A)) + len(self.fcalls(self.B)) - before
        self.assertEqual(sent, m.clusterenv.REDIRECTS_MAX + 1)

    def test_clusterdown_backs_off_and_the_table_is_read_once_a_second(self):
        """No refresh storm while the cluster is down (chaos 30): each
        CLUSTERDOWN drops the table, but the back-off grows as after any
        failure (an error reply that is not idpool_take's does not reset
        it), and the table is read again a second after the last read at
        the earliest (core/cluster.h CLUSTER_REFRESH_MIN_MS)."""
        self.fcall["A"] = lambda cmd: b"-CLUSTERDOWN The cluster is down"

        reads = []
        connect = m.clusterenv._connect

        def counted(e):
            reads.append(time.monotonic())
            return connect(e)

        tries, t_end = 0, time.monotonic() + 1.6
        with unittest.mock.patch.object(m.clusterenv, "_connect", counted):
            while time.monotonic() < t_end:  # as a client's thread: a take whenever the env may be tried
                o, _, arg, _ = self.e.take(self.a, 3, time.monotonic())
                self.assertEqual(o, m.DOWN)
                tries += arg != m.env.SKIPPED
                time.sleep(0.005)
        self.assertGreaterEqual(tries, 3)  # it kept trying, backing off
        self.assertLessEqual(len(reads), 2)  # at 0, and a second later at the earliest
        self.assertTrue(len(reads) < 2 or reads[1] - reads[0] >= m.clusterenv.REFRESH_MIN)
        self.assertGreater(self.e.backoff, m.env.BACKOFF_MIN)

    def test_no_seed_answers(self):
        e = self.env(f"redis-cluster://127.0.0.1:{self.dead}")
        o, _, _, msg = self.take(self.a, e)
        self.assertEqual(o, m.DOWN)
        self.assertIn("cannot be connected", msg)
        self.assertGreater(e.down_until, 0)

    @unittest.skipUnless(hasattr(os, "fork"), "no fork")
    def test_a_forked_child_leaves_the_parents_connections(self):
        """The child's client is closed (no ID of the parent's); dropping the
        table it inherited closes only its own copies of the sockets: the
        parent goes on taking on the connections it had."""
        with m.Client([f"redis-cluster://app:pw@127.0.0.1:{self.A.port}"], timeout=2.0) as c:
            a = c.app(self.a.key)
            a.next()
            conns = self.A.conns
            self.assertEqual(fork_next(a, gc.collect), 0)  # the child finalizes what it dropped
            ids = a.next_n(3000)  # more takes than were buffered
            self.assertEqual(len(set(ids)), 3000)
            self.assertEqual(self.A.conns, conns)


class MissingRedisPy(unittest.TestCase):
    """Without redis-py, the error names the interpreter that lacks it and
    the way to get it there: apt-get only for Debian's own python3."""

    def message(self, exe):
        from idpool_client import redisenv

        saved = sys.executable
        sys.executable = exe
        try:
            return redisenv.missing_redis_py()
        finally:
            sys.executable = saved

    def test_other_python(self):
        msg = self.message("/opt/venv/bin/python3")
        self.assertIn("which /opt/venv/bin/python3 (Python ", msg)
        self.assertIn("/opt/venv/bin/python3 -m pip install redis", msg)
        self.assertIn("python3-redis is Debian's /usr/bin/python3 only", msg)

    def test_debian_python(self):
        msg = self.message("/usr/bin/python3.11")
        self.assertIn("which /usr/bin/python3.11 (Python ", msg)
        self.assertIn("(Debian: apt-get install python3-redis)", msg)
        self.assertNotIn("pip", msg)


class IssuerUrls(unittest.TestCase):
    def test_good(self):
        p = m.parse_issuer_url("http://idp_tok@10.0.0.1:8080")
        self.assertEqual(p, {"host": "10.0.0.1", "port": 8080, "tls": False, "token": "idp_tok", "prefix": ""})
        p = m.parse_issuer_url("HTTPS://:idp%2Dx@[::1]/api/ids/")
        self.assertEqual((p["host"], p["port"], p["tls"], p["token"], p["prefix"]), ("::1", 443, True, "idp-x", "/api/ids"))
        self.assertEqual(m.parse_issuer_url("http://t@h/")["prefix"], "")
        self.assertEqual(m.parse_env("http://t@h")[0], "http")
        self.assertEqual(m.parse_env("redis://h")[0], "redis")

    def test_bad(self):
        for url, msg in (
            ("http://10.0.0.1:8080", "needs a token"),
            ("http://u:SECRET@h", "token alone"),
            ("http://@h", "token alone"),
            ("http://SECRET@h:0", "port"),
            ("http://SECRET@h/a b", "space"),
            ("http://SECRET@h/a%20b", "may not contain '%'"),
            ("http://SE%0D%0AX%3A%20CRET@h", "may not contain a space or control"),
            ("http://SECRET@h?x=1", "query"),
            ("http://SECRET@", "no host"),
        ):
            with self.assertRaisesRegex(ValueError, msg, msg=url) as cm:
                m.parse_issuer_url(url)
            self.assertNotIn("SECRET", str(cm.exception))
        with self.assertRaisesRegex(ValueError, "unsupported scheme 'ftp://'"):
            m.parse_env("ftp://x@h")
        with self.assertRaisesRegex(ValueError, "environment 1 .*needs a token"):
            m.Client([A, "http://h:1"])


class HttpAnswers(unittest.TestCase):
    def test_ids(self):
        self.assertEqual(m.classify_http(200, b"1\n22\n", None, 10), (m.IDS, [1, 22], None, None))
        self.assertEqual(m.classify_http(200, b"7\r\n", None, 10)[:2], (m.IDS, [7]))
        self.assertEqual(m.classify_http(200, b"", None, 10)[0], m.DRY)
        for body in (b"1\n2", b"1\nx\n", b"\n", b"18446744073709551616\n", b"1\n2\n3\n", b"\xff\n"):
            self.assertEqual(m.classify_http(200, body, None, 2)[0], m.DOWN, body)

    def test_refusals(self):
        def err(code, msg):
            return ('{"error":"%s","message":"%s"}\n' % (code, msg)).encode()

        o, _, h, msg = m.classify_http(429, err("IDPOOL_RATE", "max_size_per_second 20 reached; retry in 636 ms"), "1", 5)
        self.assertEqual((o, h), (m.RATE, 0.636))
        self.assertEqual(msg, "429 IDPOOL_RATE: max_size_per_second 20 reached; retry in 636 ms")
        self.assertEqual(m.classify_http(503, err("IDPOOL_EPOCH", "not yet"), "3", 5)[:3], (m.EPOCH, [], 3))
        self.assertEqual(m.classify_http(503, err("IDPOOL_EMPTY", "dry"), "1", 5)[0], m.DRY)
        self.assertEqual(m.classify_http(503, err("IDPOOL_UNAVAILABLE", "Redis down"), "1", 5)[0], m.DOWN)
        self.assertEqual(m.classify_http(400, err("IDPOOL_LIMIT", "count 500 exceeds max_size_per_times 300"), None, 500)[:3], (m.LIMIT, [], 300))
        for status, code in ((401, "IDPOOL_AUTH"), (403, "IDPOOL_FORBIDDEN"), (404, "IDPOOL_NOAPP")):
            self.assertEqual(m.classify_http(status, err(code, "no"), None, 5)[0], m.NOAPP)
        o, _, _, msg = m.classify_http(502, b"<html>Bad Gateway</html>", None, 5)
        self.assertEqual(o, m.DOWN)
        self.assertIn("HTTP 502 without an idpool error body", msg)
        self.assertEqual(m.classify_http(500, b"[1]", None, 5)[0], m.DOWN)


class RefusalTable(unittest.TestCase):
    @unittest.skipUnless(os.environ.get("IDPOOL_TAKEREPLY"), "IDPOOL_TAKEREPLY (test_takereply) not set")
    def test_mirrors_the_c_table(self):
        out = subprocess.run(
            [os.environ["IDPOOL_TAKEREPLY"], "--table"], check=True, capture_output=True, text=True
        ).stdout
        c = {}
        for line in out.splitlines():
            code, status, wait, outcome = line.split()
            c[code] = (int(status), int(wait), outcome)
        self.assertEqual(m.REFUSALS, c)

    def test_every_refusal_classified_as_the_table_says(self):
        for code, (_, wait, o) in m.REFUSALS.items():
            self.assertEqual(m.classify_refusal(code + " x", 10)[0], o, code)
            if o in (m.EPOCH, m.RATE):
                self.assertEqual(m.classify_refusal(code + " x", 10)[1], wait / 1000.0, code)
        self.assertEqual(m.classify_refusal("IDPOOL_RATES x", 10), (m.DOWN, None))


class FailoverDecision(unittest.TestCase):
    """failover_plan/next/after through sequences of outcomes (test_failover.c's, in seconds)."""

    FO, FB = 0.5, 1.0

    @unittest.skipUnless(os.environ.get("IDPOOL_FAILOVER"), "IDPOOL_FAILOVER (test_failover) not set")
    def test_mirrors_the_c_constants(self):
        out = subprocess.run(
            [os.environ["IDPOOL_FAILOVER"], "--constants"], check=True, capture_output=True, text=True
        ).stdout
        c = {k: int(v) for k, v in (line.split() for line in out.splitlines())}
        py = {"IDLE_WAKE_MS": m.IDLE_WAKE, "DRY_RETRY_MS": m.DRY_RETRY, "NOAPP_RETRY_MS": m.NOAPP_RETRY}
        self.assertEqual({k: round(v * 1000) for k, v in py.items()}, c)

    def turn(self, f, nenv, now, outs, hint=None, down=None):
        take, e, back, _ = m.failover_plan(f, now, True)
        self.assertTrue(take)
        asked = []
        for o in outs:
            asked.append(e)
            nxt = m.failover_next(f, back, e, o)
            if nxt is None:
                break
            e = nxt
        down = down or {}
        res = m.failover_after(f, nenv, self.FO, self.FB, back, now, e, o, hint, lambda i: down.get(i, 0.0))
        return res + (asked,)

    def test_plan(self):
        f = m.Failover()
        self.assertEqual(m.failover_plan(f, 10.0, False), (False, 0, False, 10.0 + m.IDLE_WAKE))
        self.assertEqual(m.failover_plan(f, 10.0, True)[:3], (True, 0, False))
        f.retry_at = 10.05
        self.assertEqual(m.failover_plan(f, 10.0, True), (False, 0, False, 10.05))

    def test_dry_fails_over_after_failover_s(self):
        f = m.Failover()
        wake, moved, _, _ = self.turn(f, 2, 10.0, [m.DRY])
        self.assertEqual((wake, moved, f.env, f.trouble), (10.0 + m.DRY_RETRY, False, 0, 10.0))
        wake, moved, _, _ = self.turn(f, 2, 10.0 + self.FO, [m.EPOCH], hint=0.2)
        self.assertEqual((moved, f.env, f.trouble, f.failback_at), (True, 1, 0.0, 10.0 + self.FO + self.FB))

    def test_rate_is_waited_out_in_place(self):
        f = m.Failover()
        for i in range(10):
            now = 10.0 + i * 0.25  # binary fractions: sums are exact
            wake, moved, _, _ = self.turn(f, 2, now, [m.RATE], hint=0.25)
            self.assertEqual((moved, f.env, f.retry_at, wake), (False, 0, now + 0.25, now + m.IDLE_WAKE))
            self.assertFalse(m.failover_plan(f, now + 0.125, True)[0])

    def test_down_noapp_and_failback(self):
        f = m.Failover()
        wake, moved, _, _ = self.turn(f, 3, 10.0, [m.DOWN], down={1: 10.07})
        self.assertEqual((wake, moved, f.env), (10.07, True, 1))  # no spinning on the down
        wake, moved, _, _ = self.turn(f, 3, 10.1, [m.NOAPP])
        self.assertEqual((wake, moved, f.env, f.noapp), (10.1, True, 2, {1}))
        # a failback tries 0 then 1, never 2; 1 supplies: it stays there
        wake, moved, home, asked = self.turn(f, 3, f.failback_at, [m.DOWN, m.IDS])
        self.assertEqual((asked, home, moved, f.env, f.noapp), ([0, 1], True, False, 1, set()))
        # a failback that brings nothing: stay, try later, keep nothing of its answer
        now = f.failback_at + 1.0
        wake, moved, home, asked = self.turn(f, 3, now, [m.DRY])
        self.assertEqual((wake, asked, f.env, f.failback_at, f.trouble), (now, [0], 1, now + self.FB, 0.0))

    def test_noapp_everywhere(self):
        f = m.Failover()
        self.turn(f, 2, 10.0, [m.NOAPP])
        self.assertFalse(f.nowhere(2))
        wake, _, _, _ = self.turn(f, 2, 10.0, [m.NOAPP])
        self.assertTrue(f.nowhere(2))
        self.assertEqual((f.env, f.retry_at, wake), (0, 10.0 + m.NOAPP_RETRY, 10.0 + m.IDLE_WAKE))
        self.turn(f, 2, 11.0, [m.IDS])
        self.assertEqual(f.noapp, {1})


class Batch(unittest.TestCase):
    def test_batch_next(self):
        bn = m.batch_next
        self.assertEqual(bn(100, 0.0, 0.5, 100, 1000, False), 100)  # idle: min
        self.assertEqual(bn(100, 1000.0, 0.5, 100, 1000, False), 500)  # rate x target
        self.assertEqual(bn(100, 1e9, 0.5, 100, 1000, False), 1000)  # clamped to max
        self.assertEqual(bn(300, 0.0, 0.5, 100, 1000, True), 600)  # hungry: doubled
        self.assertEqual(bn(300, 2000.0, 0.5, 100, 1000, True), 1000)  # demand above double
        self.assertEqual(bn(800, 0.0, 0.5, 100, 1000, True), 1000)
        self.assertEqual(bn(100, 0.0, 0.5, 100, 50, False), 50)  # cap below min wins

    def test_low_water(self):
        lw = m.low_water_ids
        self.assertEqual(lw(100, 0, 0.0, 0.5), 100)
        self.assertEqual(lw(100, 5000, 0.0, 0.5), 5000)
        self.assertEqual(lw(1000, 0, 500000.0, 0.5), 250000)
        self.assertEqual(lw(1000, 0, 1e12, 0.5), m.LOW_WATER_MAX)

    def test_rate_update(self):
        ru = m.rate_update
        self.assertEqual(ru(5.0, 100, 0), 5.0)  # no time: unchanged
        self.assertAlmostEqual(ru(0.0, 1000, 1.0), 1000.0)  # a full second replaces
        self.assertAlmostEqual(ru(0.0, 3000, 2.0), 1500.0)
        self.assertAlmostEqual(ru(1000.0, 0, 0.5), 500.0)  # half a second weighs half
        self.assertAlmostEqual(ru(1000.0, 50, 0.1), 900.0 + 50.0)


class Replies(unittest.TestCase):
    def test_ids(self):
        self.assertEqual(m.classify_reply([b"1", b"22", "333"], 10), (m.IDS, [1, 22, 333], None))
        self.assertEqual(m.classify_reply([b"7", b"x", b"-1", b"", None, b"18446744073709551616"], 10), (m.IDS, [7], None))

    def test_dry(self):
        self.assertEqual(m.classify_reply([], 10)[0], m.DRY)
        self.assertEqual(m.classify_reply([b"junk"], 10)[0], m.DRY)

    def test_refusals(self):
        o, _, h = m.classify_reply("IDPOOL_EPOCH pool not re-validated; retry in 50 ms", 10)
        self.assertEqual((o, h), (m.EPOCH, 0.05))
        self.assertEqual(m.classify_reply("IDPOOL_EPOCH no hint", 10)[2], 0.2)
        o, _, h = m.classify_reply(
            "IDPOOL_RATE max_size_per_second 5000 reached (4900 granted this second); retry in 230 ms", 10
        )
        self.assertEqual((o, h), (m.RATE, 0.23))
        self.assertEqual(m.classify_reply("IDPOOL_RATE retry in 0 ms", 10)[2], 1.0)
        self.assertEqual(m.classify_reply("IDPOOL_RATE retry in 99999 ms", 10)[2], 1.0)
        o, _, cap = m.classify_reply("IDPOOL_LIMIT count 5000 exceeds max_size_per_times 1000", 5000)
        self.assertEqual((o, cap), (m.LIMIT, 1000))
        self.assertEqual(m.classify_reply("IDPOOL_LIMIT what", 600), (m.LIMIT, [], 300))
        self.assertEqual(m.classify_reply(b"IDPOOL_NOAPP no such application: x", 1)[0], m.NOAPP)

    def test_down(self):
        for r in (None, 5, "ERR Function not found", "READONLY You can't write", "IDPOOL_BADARG count", b"x"):
            self.assertEqual(m.classify_reply(r, 10)[0], m.DOWN, r)

    def test_hint(self):
        self.assertEqual(m.hint_ms("retry in 12 ms", 7), 12)
        self.assertEqual(m.hint_ms("nothing", 7), 7)
        self.assertEqual(m.hint_ms("retry in -3 ms", 7), 7)


# --- the state machine, with a scripted fake in place of Redis ---------------


class Fake:
    """Per environment: a function (count) -> reply as classify_reply takes it,
    or the string "DOWN" (a connection error)."""

    def __init__(self, envs):
        self.lock = threading.Lock()
        self.envs = envs
        self.next_id = [1000000 * (i + 1) for i in range(len(envs))]
        self.calls = [0] * len(envs)

    def ids(self, i, count):
        with self.lock:
            v = list(range(self.next_id[i], self.next_id[i] + count))
            self.next_id[i] += count
        return v

    def take_from(self, client, a, e, count, now):
        with self.lock:
            self.calls[e.index] += 1
            mode = self.envs[e.index]
        if callable(mode):
            mode = mode(count)
        if mode == "ok":
            mode = self.ids(e.index, count)
        if mode == "DOWN":
            e.fail(now)  # as the real transports do: e backs off
            return m.DOWN, [], None, "connection refused"
        return m.classify_reply(mode, count) + ("scripted",)


def fake_client(envs, **kw):
    if m.redisenv.redis is None:  # the stub is never called: the transport is replaced
        m.redisenv.redis = types.SimpleNamespace(Redis=None, ResponseError=Exception)
    f = Fake(envs)
    c = m.Client([f"redis://127.0.0.1:{i + 1}/0" for i in range(len(envs))], **kw)
    fake = types.SimpleNamespace(take=lambda e, a, count, now: f.take_from(c, a, e, count, now), close=lambda e: None)
    for e in c._envs:
        e.ops = fake
    return c, f


class StateMachine(unittest.TestCase):
    def test_ids_unique_and_stats(self):
        c, f = fake_client(["ok"])
        with c:
            a = c.app("user")
            self.assertIs(c.app("user"), a)
            self.assertIsNot(c.app("other"), a)
            got = [a.next() for _ in range(500)] + a.next_n(1500)
            self.assertEqual(len(got), 2000)
            self.assertEqual(a.take, a.next_n)  # the name before idpool_next_n
            self.assertEqual(len(set(got)), 2000)
            st = a.stats()
            for k in ("takes", "taken", "waits", "timeouts", "refused_epoch", "refused_rate", "empty",
                      "errors", "failovers", "failbacks", "env", "batch", "buffered"):
                self.assertIn(k, st)
            self.assertGreaterEqual(st["taken"], 2000)
            self.assertEqual(st["taken"], 2000 + st["buffered"])
            self.assertEqual((st["env"], st["timeouts"], st["errors"]), (0, 0, 0))

    def test_threads(self):
        c, f = fake_client(["ok"], max_batch=200)
        out = []
        lock = threading.Lock()

        def work():
            a = c.app("t")
            mine = [a.next() for _ in range(3000)] + a.next_n(2000)
            with lock:
                out.extend(mine)

        ts = [threading.Thread(target=work) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        c.close()
        self.assertEqual(len(out), 40000)
        self.assertEqual(len(set(out)), 40000)

    def test_failover_on_down_and_failback(self):
        envs = ["DOWN", "ok"]
        c, f = fake_client(envs, failback=0.1)
        with c:
            a = c.app("u")
            x = a.next()
            self.assertGreaterEqual(x, 2000000)  # from B
            st = a.stats()
            self.assertLessEqual(st["buffered"], 2 * 1000)  # a waiter brings one take, not many
            self.assertEqual(st["env"], 1)
            self.assertGreaterEqual(st["failovers"], 1)
            self.assertGreaterEqual(st["errors"], 1)
            f.envs[0] = "ok"  # A is back: taken back within failback
            deadline = time.monotonic() + 3
            while a.stats()["env"] != 0 and time.monotonic() < deadline:
                a.next_n(50)
                time.sleep(0.01)
            st = a.stats()
            self.assertEqual(st["env"], 0)
            self.assertGreaterEqual(st["failbacks"], 1)
            ids = a.next_n(5000)
            self.assertTrue(any(1000000 <= i < 2000000 for i in ids))

    def test_failover_when_dry(self):
        c, f = fake_client([[], "ok"], failover=0.1)
        with c:
            a = c.app("u")
            t0 = time.monotonic()
            x = a.next()
            self.assertGreaterEqual(x, 2000000)
            self.assertGreaterEqual(time.monotonic() - t0, 0.09)  # dry for `failover` first
            st = a.stats()
            self.assertGreater(st["empty"], 1)
            self.assertEqual(st["failovers"], 1)
            self.assertEqual(st["errors"], 0)

    def test_epoch_retries_then_fails_over(self):
        c, f = fake_client(["IDPOOL_EPOCH not re-validated; retry in 30 ms", "ok"], failover=0.2)
        with c:
            a = c.app("u")
            self.assertGreaterEqual(a.next(), 2000000)
            st = a.stats()
            self.assertGreaterEqual(st["refused_epoch"], 2)
            self.assertLessEqual(st["refused_epoch"], 12)  # the hint was honoured
            self.assertEqual(st["failovers"], 1)

    def test_rate_never_fails_over(self):
        state = {"n": 0}

        def a_env(count):
            state["n"] += 1
            return "IDPOOL_RATE max_size_per_second 10 reached; retry in 50 ms" if state["n"] <= 5 else "ok"

        c, f = fake_client([a_env, "ok"], failover=0.05, timeout=2.0)
        with c:
            a = c.app("u")
            x = a.next()
            self.assertLess(x, 2000000)  # from A, after waiting
            st = a.stats()
            self.assertEqual(st["refused_rate"], 5)
            self.assertEqual(st["failovers"], 0)
            self.assertEqual(f.calls[1], 0)

    def test_limit_caps_the_batch(self):
        seen = []

        def env(count):
            seen.append(count)
            return "IDPOOL_LIMIT count %d exceeds max_size_per_times 150" % count if count > 150 else "ok"

        c, f = fake_client([env], min_batch=100, max_batch=1000)
        with c:
            a = c.app("u")
            ids = a.next_n(5000)
            self.assertEqual(len(set(ids)), 5000)
            self.assertLessEqual(a.stats()["batch"], 150)
            self.assertTrue(any(n > 150 for n in seen))
            first = next(i for i, n in enumerate(seen) if n > 150)
            self.assertLessEqual(max(seen[first + 1:]), 150)  # never asked for more again

    def test_noapp_everywhere(self):
        c, f = fake_client(["IDPOOL_NOAPP no such application: u", "IDPOOL_NOAPP no such application: u"],
                           timeout=5.0)
        with c:
            a = c.app("u")
            t0 = time.monotonic()
            with self.assertRaises(m.IdpoolNoApp):
                a.next()
            self.assertLess(time.monotonic() - t0, 1.0)
            with self.assertRaises(m.IdpoolError):
                a.next_n(3)

    def test_all_down_does_not_spin(self):
        c, f = fake_client(["DOWN", "DOWN"], timeout=0.5)
        looks = [0]  # takes asked of the transports, tried or skipped (backing off)
        take_from = c._take_from

        def counted(*args):
            looks[0] += 1
            return take_from(*args)

        c._take_from = counted
        with c:
            a = c.app("u")
            with self.assertRaises(m.IdpoolTimeout):
                a.next()
            time.sleep(0.5)
            # backing off (100, 200, 400 ms ... per environment): a handful of
            # looks in a second, not a busy loop
            self.assertLess(looks[0], 40)
            self.assertLess(sum(f.calls), 30)
            st = a.stats()
            self.assertEqual(st["errors"], sum(f.calls))  # skipped tries are not errors
            self.assertIn("environment", a.last_error())
            self.assertIn("connection refused", a.last_error())
            # every environment's own reason, not only the last one's
            for e in (0, 1):
                self.assertTrue(a.env_error(e).startswith(f"environment {e} (127.0.0.1:{e + 1}"), a.env_error(e))
                self.assertIn("connection refused", a.env_error(e))
            self.assertEqual((a.env_error(2), a.env_error(-1)), ("", ""))

    def test_env_error_cleared_by_ids(self):
        c, f = fake_client(["DOWN", "ok"])
        with c:
            a = c.app("u")
            a.next()
            self.assertIn("connection refused", a.env_error(0))
            self.assertEqual(a.env_error(1), "")

    def test_noapp_in_one_fails_over(self):
        c, f = fake_client(["IDPOOL_NOAPP no such application: u", "ok"])
        with c:
            self.assertGreaterEqual(c.app("u").next(), 2000000)

    def test_timeout(self):
        c, f = fake_client([[]], timeout=0.3)
        with c:
            a = c.app("u")
            t0 = time.monotonic()
            with self.assertRaises(m.IdpoolTimeout) as cm:
                a.next_n(10)
            dt = time.monotonic() - t0
            self.assertGreaterEqual(dt, 0.29)
            self.assertLess(dt, 1.0)
            self.assertEqual(cm.exception.ids, [])
            st = a.stats()
            self.assertEqual((st["timeouts"], st["waits"]), (1, 1))

    def test_close_wakes_a_waiter(self):
        c, f = fake_client([[]], timeout=10.0)
        a = c.app("u")
        res = {}

        def wait():
            t0 = time.monotonic()
            try:
                a.next()
            except m.IdpoolError as e:
                res["e"] = e
            res["dt"] = time.monotonic() - t0

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(0.2)
        c.close()
        t.join(5)
        self.assertFalse(t.is_alive())
        self.assertIsInstance(res["e"], m.IdpoolClosed)
        self.assertLess(res["dt"], 2.0)
        with self.assertRaises(m.IdpoolClosed):
            a.next()
        with self.assertRaises(m.IdpoolClosed):
            c.app("v")
        c.close()  # idempotent

    def test_closed_with_ids_in_the_block(self):
        c, f = fake_client(["ok"])
        a = c.app("u")
        a.next()  # this thread's block now holds IDs
        self.assertTrue(a._tls.q)
        c.close()
        with self.assertRaises(m.IdpoolClosed):
            a.next()
        with self.assertRaises(m.IdpoolClosed):
            a.next_n(1)

    @unittest.skipUnless(hasattr(os, "fork"), "no fork")
    def test_fork_closes_inherited_clients(self):
        c, f = fake_client(["ok"])
        with c:
            a = c.app("u")
            a.next()
            self.assertEqual(fork_next(a), 0)  # the child must not hand out the parent's buffered IDs
            a.next()  # the parent goes on

    def test_bad_take(self):
        c, f = fake_client(["ok"])
        with c:
            a = c.app("u")
            for n in (0, -1, 1.5, True, "3"):
                with self.assertRaises(ValueError):
                    a.next_n(n)
            with self.assertRaisesRegex(ValueError, "application key"):
                c.app("bad key")


if __name__ == "__main__":
    unittest.main(verbosity=1)
