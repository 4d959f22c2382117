"""The environments: where a take goes, and what came back (src/lib/env.h's
mirror). An environment is reached by a transport, one module each:
redisenv (redis:// and redis-sentinel://, FCALL idpool_take), clusterenv
(redis-cluster://, FCALL idpool_take on the primary of the application's
slot) and issuer (http[s]://, GET /v1/ids/{key}?count=N), listed in
TRANSPORTS; a new kind of environment is a new module and a row there. A
transport module has KIND, SCHEMES, USAGE, parse(url), prepare(envs,
ca_file), take(e, a, count, now) and close(e); every take answers
(outcome, ids, arg, message) with the outcomes of takereply. Used by the
client's background thread only: blocking I/O, bounded by io_timeout."""

import time

from . import clusterenv, issuer, redisenv
from .takereply import DOWN
from .url import hostport_str

BACKOFF_MIN = 0.100  # a failed environment is not tried again before this (s)
BACKOFF_MAX = 2.000  # ... doubling up to this
SKIPPED = "skipped"  # DOWN's arg when the environment was not tried (backing off)

# The transports, by URL scheme (the first also reads what is no URL of any).
TRANSPORTS = (redisenv, clusterenv, issuer)


def _transport(url):
    """The transport of url's scheme; ValueError for a scheme none serves."""
    if isinstance(url, str):
        for t in TRANSPORTS:
            if any(url[: len(s)].lower() == s for s in t.SCHEMES):
                return t
        if "://" in url[:20]:
            forms = " or ".join(t.USAGE for t in TRANSPORTS)
            raise ValueError(f"unsupported scheme {url.split('://', 1)[0] + '://'!r}, expected {forms}")
    return TRANSPORTS[0]  # whose parse says what is wrong


def parse_env(url):
    """An environment URL: ("redis", parse_url()) or ("http", parse_issuer_url())."""
    t = _transport(url)
    return t.KIND, t.parse(url)


def prepare(envs, ca_file):
    """Once every URL was read: each transport readies its environments
    (ImportError without redis-py; ValueError for a ca_file that cannot be
    read)."""
    for t in TRANSPORTS:
        mine = [e for e in envs if e.ops is t]
        if mine:
            t.prepare(mine, ca_file)


class Env:
    """One environment (env.h's struct env): its transport (ops), its
    connection and its back-off. ValueError for a bad URL."""

    __slots__ = (
        "index",
        "name",
        "url",
        "kind",
        "parts",
        "ops",
        "io_timeout",
        "tls",
        "conn",
        "used",
        "down_until",
        "backoff",
        "refresh_at",
    )

    def __init__(self, index, url, io_timeout):
        self.index = index
        self.ops = _transport(url)
        self.kind = self.ops.KIND  # "redis" or "http" (an issuer)
        self.parts = self.ops.parse(url)
        self.name = hostport_str(self.parts["host"], self.parts["port"])
        if "master" in self.parts:  # redis-sentinel://: the primary's name, the first sentinel
            self.name = f"{self.parts['master']} via Sentinel {self.name}"
        elif "seeds" in self.parts:  # redis-cluster://: the first seed
            self.name = f"Cluster via {self.name}"
        self.url = url
        self.io_timeout = io_timeout  # every step of a take (s)
        self.tls = None  # an https issuer's ssl.SSLContext (prepare)
        self.conn = None  # the transport's connection, made at the first use
        self.used = False  # a connection may be open
        self.down_until = 0.0
        self.backoff = 0.0
        self.refresh_at = 0.0  # clusterenv: the slot table is not read again before this

    def take(self, a, count, now):
        """One take of count IDs of application a (env.c's env_take):
        (outcome, ids, arg, message); (DOWN, [], SKIPPED, ...) without a
        try while this environment is backing off."""
        if not self.used and now < self.down_until:
            return DOWN, [], SKIPPED, f"down, next try in {int((self.down_until - now) * 1000)} ms"
        return self.ops.take(self, a, count, now)

    def retry_at(self):
        """When this environment may be tried again (0: it may have a connection, or is not backing off)."""
        return 0.0 if self.used else self.down_until

    def close(self):
        """Close the connection (no back-off)."""
        self.ops.close(self)

    def fail(self, now):
        """For the transports: close the connection and back off before the
        next try, counted from now, not from the take's start (`now`): a
        timeout may have used up the whole back-off."""
        self.close()
        self.used = False
        self.backoff = min(self.backoff * 2 if self.backoff else BACKOFF_MIN, BACKOFF_MAX)
        self.down_until = max(now, time.monotonic()) + self.backoff

    def forget(self):
        """In a forked child: drop the connection (the parent's) unread."""
        self.conn = None
        self.used = False
