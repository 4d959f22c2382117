"""The tests' one Python library: servers, applications, daemons, waits,
processes and key names, and the helpers the shell tests run.

The Python side of test/integration/lib.sh, with its names and meanings,
used by the benchmarks (test/bench/), by the Python the shell tests embed
(lib.sh puts test/lib on PYTHONPATH: `from harness import check`) and by
any Python test that needs throwaway servers and an idpoold. Standard
library only (and the key names of src/python/idpool_client/keys.py, which need
nothing else); what talks to Redis through python3-redis (connect and the
helpers below) imports it when called, so run those with Debian's
/usr/bin/python3 ($PYTHON in lib.sh). The servers come from
scripts/servers.sh (called, not re-implemented), Redis and MariaDB are
reached with redis-cli and the mariadb client, as in lib.sh.

    h = Harness(workdir)               # lib.sh: setup
    h.start_servers()                  # scripts/servers.sh start DIR
    h.add_app("user", step=100)        # lib.sh: add_app user step=100
    d = h.start_daemon("a", idpoold, log=path, http=True)
    wait_until(10, lambda: h.pool_ge("user", 1)) or fail("pool never filled")
    h.stop_daemon(d)
    h.stop_servers()

    h.start_servers(cluster=True)      # a Redis Cluster (SERVERS_CLUSTER=1)
    h.cluster_apps("c")                # {"node1": ["c3"], ...}: one per primary

Run as a script ("$PYTHON" "$HARNESS_PY" SUBCOMMAND ..., HARNESS_PY in
lib.sh), it is the shell tests' helper:

    harness.py hammer PORT POOL META COUNT SECONDS OUT
        One client calling, back to back for SECONDS,
            MULTI / TIME / FCALL idpool_take 2 POOL META COUNT / TIME / EXEC
        and appending one line per call to OUT:
            <sec before> <sec after> granted <n> <ids comma-separated>
            <sec before> <sec after> error <error text>
        The two TIMEs bracket the take inside one transaction, so when they
        name the same second, that is the second the take was counted in.

    harness.py subscribe PORT CHANNEL OUT READY
        SUBSCRIBE CHANNEL; writes each message as one line to OUT (flushed),
        touches READY once subscribed. Runs until killed.

    harness.py webhook PORTFILE OUT ATTEMPTS FAILFILE
        HTTP server on 127.0.0.1:<free port> (written to PORTFILE once it
        listens). Every POST is logged to ATTEMPTS as "<unix time> <code>
        <path> <body>"; if FAILFILE holds a number N > 0 the request is
        answered 500 and N is decremented, otherwise the body is appended as
        one line to OUT and answered 204. Runs until killed.

    harness.py summary FILE
        Prints "app alert state count" for the JSON events in FILE, sorted.

    harness.py events FILE [key=value ...]
        Prints the number of JSON lines in FILE whose fields equal the given
        values; exits 1 if a line is not a JSON object with the fields
        alert, app, state (firing|resolved), message and at (an RFC 3339
        time), all non-empty strings.

Every wait here is bounded. Only loopback addresses.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SERVERS = os.path.join(ROOT, "scripts", "servers.sh")
KEY_PREFIX = os.environ.get("IDPOOL_KEY_PREFIX", "idpool")
sys.path.insert(0, os.path.join(ROOT, "src", "python"))
from idpool_client import redis_key  # noqa: E402  (the key names are the client's)
CLK_TCK = os.sysconf("SC_CLK_TCK")

# urllib without any proxy from the environment: every address is loopback.
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class HarnessError(Exception):
    """A helper could not do its job (a server or daemon did not come up)."""


def check(cond, msg):
    """A test's check, for the tests' Python (their scripts and the ones
    embedded in test/integration/*.sh: lib.sh puts test/lib on PYTHONPATH):
    unlike `assert`, which `python3 -O` removes, it always runs. Unless cond,
    raises SystemExit: the script exits with status 1 and "check failed: MSG"
    on stderr, and no `except Exception` swallows it. A thread's SystemExit
    ends only that thread, silently: in a thread, record the failure for the
    main thread instead."""
    if not cond:
        raise SystemExit("check failed: %s" % (msg,))


# ---------------------------------------------------------------- waits ---


def wait_until(timeout, pred, interval=0.1):
    """Polls pred() every interval seconds; True once it holds, False after
    timeout seconds (lib.sh: wait_until TIMEOUT CMD...)."""
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def free_port():
    """A free loopback TCP port (lib.sh: free_port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------ processes ---


def _stat_fields(pid):
    """/proc/PID/stat after the command name (field 3 "state" first)."""
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(") ", 1)[1].split()


def proc_alive(pid):
    """PID is a live process (zombies count as dead; lib.sh: proc_alive)."""
    try:
        return _stat_fields(pid)[0] != "Z"
    except (OSError, IndexError):
        return False


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (CLK_TCK a second)."""
    f = _stat_fields(pid)
    return int(f[11]) + int(f[12])


def cpu_pct(ticks0, ticks1, secs):
    """% of one core used between two cpu_ticks readings secs apart."""
    return (ticks1 - ticks0) * 100 / CLK_TCK / secs


def rss_mib(pid):
    """Resident set size of a process, MiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def stop_process(proc, timeout=10, sig=signal.SIGTERM):
    """Sends sig to a child (a subprocess.Popen), waits at most timeout
    seconds, then SIGKILL; reaps it and returns its exit status (negative:
    killed by a signal). A child not reaped yet cannot have had its pid
    reused, so signalling it is safe."""
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def run_bounded(argv, timeout, kill_after=5, **kw):
    """Runs argv to completion like timeout(1) -k KILL_AFTER TIMEOUT: SIGTERM
    after timeout seconds, SIGKILL kill_after seconds later. Returns the exit
    status (124 on timeout, as timeout(1))."""
    proc = subprocess.Popen(argv, **kw)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        stop_process(proc, kill_after)
        return 124


# -------------------------------------------------------------- harness ---


class Daemon:
    """One idpoold started by Harness.start_daemon."""

    def __init__(self, name, proc, log, http):
        self.name = name  # the name it was started under (its log's name)
        self.proc = proc  # the subprocess.Popen
        self.log = log  # its stdout/stderr
        self.http = http  # "127.0.0.1:PORT" of its status server, or None
        self.status = None  # exit status once stopped

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def signal(self, sig):
        """Just sends it (lib.sh: signal_daemon NAME SIG)."""
        self.proc.send_signal(sig)

    def get(self, path, timeout=2):
        """The body of GET http://HTTP/PATH (str), or None on any failure."""
        if not self.http:
            return None
        try:
            with _http.open("http://%s%s" % (self.http, path), timeout=timeout) as r:
                return r.read().decode()
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def app_status(self, key, timeout=2):
        """/v1/apps/KEY as raw JSON text, or None."""
        return self.get("/v1/apps/" + key, timeout)

    def app_served(self, key):
        """The daemon serves application KEY (its /v1/apps/KEY says so)."""
        body = self.app_status(key)
        return body is not None and re.search(r'"served": *true', body) is not None

    def app_field(self, key, field, timeout=5):
        """A numeric field of /v1/apps/KEY (first occurrence), or None."""
        body = self.app_status(key, timeout)
        m = body and re.search(r'"%s": *([0-9]+)' % re.escape(field), body)
        return int(m.group(1)) if m else None


class Harness:
    """Throwaway servers in one directory (scripts/servers.sh), the helpers
    that reach them, and the daemons started against them."""

    def __init__(self, workdir):
        self.dir = workdir  # servers.sh's DIR: data, logs, env
        self.env = {}  # DIR/env: IDPOOL_REDIS_URL, REDIS_PORT, ...
        self.daemons = []  # every Daemon started, running or not

    # ------------------------------------------------------ servers ---

    def start_servers(self, only=None, out=None, cluster=False):
        """scripts/servers.sh start DIR [redis|mysql]; loads DIR/env.
        Its output goes to the file out (default: discarded); raises
        HarnessError if they did not start. cluster: a Redis Cluster
        (SERVERS_CLUSTER=1: node1..node6, three primaries with a replica
        each) instead of the one Redis; the daemons then get its URL."""
        argv = [SERVERS, "start", self.dir] + ([only] if only else [])
        env = dict(os.environ, SERVERS_CLUSTER="1") if cluster else None
        with open(out or os.devnull, "w") as f:
            rc = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT, env=env)
        if rc != 0:
            raise HarnessError("servers did not start")
        self.env = {}
        with open(os.path.join(self.dir, "env")) as f:
            for line in f:
                m = re.match(r"export (\w+)=(.*)$", line.rstrip("\n"))
                if m:
                    self.env[m.group(1)] = m.group(2)

    def stop_servers(self, only=None, how="stop"):
        """scripts/servers.sh stop|kill DIR [redis|mysql]; True if it worked."""
        argv = [SERVERS, how, self.dir] + ([only] if only else [])
        return subprocess.call(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0

    @property
    def redis_port(self):
        return int(self.env["REDIS_PORT"])

    @property
    def mysql_port(self):
        return int(self.env["MYSQL_PORT"])

    @property
    def redis_url(self):
        """The daemons' Redis: the Cluster's URL (its seeds) when the
        servers are a Cluster, else the one Redis'."""
        return self.env.get("IDPOOL_REDIS_CLUSTER_URL") or self.env["IDPOOL_REDIS_URL"]

    def redis_pid(self, name="redis"):
        """The pid of redis-server NAME (redis, or a member: node1 ...)."""
        with open(os.path.join(self.dir, name + ".pid")) as f:
            return int(re.sub(r"[^0-9]", "", f.read()))

    def cluster_nodes(self):
        """The Cluster's nodes as node1 tells them (CLUSTER NODES), by
        name (node1..node6, from DIR/env's ports): dicts of port, id,
        primary (True for a primary), of (a replica's primary's name, else
        None) and slots (a primary's (first, last) ranges)."""
        names = {int(v): k[:-len("_PORT")].lower() for k, v in self.env.items()
                 if re.fullmatch(r"NODE[0-9]+_PORT", k)}
        nodes, ids = {}, {}
        for line in self.rcli("CLUSTER", "NODES").splitlines():
            f = line.split()
            if len(f) < 8 or not re.fullmatch(r"[0-9a-f]{40}", f[0]):
                continue
            port = int(f[1].split("@")[0].rsplit(":", 1)[1])
            slots = [tuple(int(x) for x in (r.split("-") * 2)[:2]) for r in f[8:] if re.fullmatch(r"[0-9-]+", r)]
            name = names.get(port, "port%d" % port)
            ids[f[0]] = name
            nodes[name] = dict(port=port, id=f[0], primary="master" in f[2].split(","), of=f[3], slots=slots)
        for n in nodes.values():
            n["of"] = None if n["primary"] else ids.get(n["of"])
        return nodes

    def cluster_owner(self, key, nodes=None):
        """The name of the primary serving KEY's slot (CLUSTER KEYSLOT) in
        nodes (cluster_nodes(); default: read now), or None."""
        slot = int(self.rcli("CLUSTER", "KEYSLOT", key))
        return next((name for name, n in (nodes or self.cluster_nodes()).items()
                     if n["primary"] and any(a <= slot <= b for a, b in n["slots"])), None)

    def cluster_apps(self, prefix, per_primary=1, key=None):
        """Application keys PREFIX1, PREFIX2 ..., per_primary of them on
        each primary (by their pool's slot, or by the slot of key(NAME);
        lib.sh: cluster_apps): a dict primary name -> [names]. Raises
        HarnessError if 200 names do not fill every primary."""
        nodes = self.cluster_nodes()
        apps = {name: [] for name, n in nodes.items() if n["primary"]}
        for i in range(1, 201):
            owner = self.cluster_owner((key or pool_key)("%s%d" % (prefix, i)), nodes)
            if len(apps.get(owner, [per_primary])) < per_primary:
                apps[owner].append("%s%d" % (prefix, i))
            if all(len(v) >= per_primary for v in apps.values()):
                return apps
        raise HarnessError("no %d application(s) %s* on every primary" % (per_primary, prefix))

    # -------------------------------------------------------- redis ---

    def rcli(self, *args, check=True, port=None):
        """redis-cli on the harness' Redis (lib.sh: rcli), or on the one on
        PORT (a cluster node); its output, without the trailing newline.
        check: raise if redis-cli fails."""
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port or self.redis_port)]
                           + [str(a) for a in args], stdout=subprocess.PIPE, check=check)
        return r.stdout.decode().rstrip("\n")

    def rcli_int(self, *args, port=None):
        """An integer reply, or None if there was none (an error reply)."""
        try:
            out = self.rcli(*args, port=port)
        except subprocess.CalledProcessError:
            return None
        return int(out) if re.fullmatch(r"-?[0-9]+", out.strip()) else None

    # -------------------------------------------------------- mysql ---

    def _mariadb(self):
        return ["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(self.mysql_port),
                "-u", "root", "idpool"]

    def sql(self, statements):
        """Runs them in database idpool (lib.sh: sql): tab-separated, no
        header, values raw; returns the output without the last newline."""
        r = subprocess.run(self._mariadb() + ["-N", "-B", "-r", "-e", statements],
                           stdout=subprocess.PIPE, check=True)
        return r.stdout.decode().rstrip("\n")

    def sql_file(self, path):
        """Feeds a file to database idpool (lib.sh: sql_file)."""
        with open(path) as f:
            subprocess.run(self._mariadb(), stdin=f, check=True)

    def add_app(self, key, **cols):
        """Inserts a row into application (lib.sh: add_app KEY col=val...)."""
        names = ["entity_key"] + list(cols)
        vals = [key] + list(cols.values())
        self.sql("INSERT INTO application (%s) VALUES (%s)" % (
            ", ".join("`%s`" % n for n in names), ", ".join(sql_value(v) for v in vals)))

    def set_app(self, key, **cols):
        """Updates an application row (lib.sh: set_app KEY col=val...)."""
        self.sql("UPDATE application SET %s WHERE entity_key = %s" % (
            ", ".join("`%s` = %s" % (k, sql_value(v)) for k, v in cols.items()), sql_value(key)))

    def leases_of(self, pattern):
        """Lease rows of the applications whose key matches a LIKE pattern."""
        return int(self.sql(
            "SELECT COUNT(*) FROM application_lease l JOIN application a "
            "ON a.id = l.application_id WHERE a.entity_key LIKE %s" % sql_value(pattern)))

    # --------------------------------------------------------- pools ---

    def llen(self, key, port=None):
        """Length of KEY's pool (asked of the Redis on PORT: a cluster node);
        None if Redis gave no integer (MOVED: not that node's)."""
        return self.rcli_int("LLEN", pool_key(key), port=port)

    def pool_ge(self, key, n):
        """The pool holds at least n IDs (lib.sh: pool_ge)."""
        have = self.llen(key)
        return have is not None and have >= n

    # ------------------------------------------------------ daemons ---

    def start_daemon(self, name, idpoold, log, args=(), http=False, wrap=(),
                     log_level="debug", instance=None, ready_timeout=30):
        """idpoold in the background against the harness' servers (lib.sh:
        start_daemon NAME ARGS...), its output appended to log. wrap: a
        command it runs under (valgrind ...). http: serve the status on a
        free loopback port and wait until /healthz answers (HarnessError
        after ready_timeout s); else --http ''."""
        if not os.access(idpoold, os.X_OK):
            raise HarnessError("idpoold not built: %s" % idpoold)
        addr = "127.0.0.1:%d" % free_port() if http else None
        argv = list(wrap) + [idpoold] + list(args) + [
            "--redis", self.redis_url, "--mysql", self.env["IDPOOL_MYSQL_URL"],
            "--http", addr or "", "--log-level", log_level]
        if instance:
            argv += ["--instance", instance]
        with open(log, "a") as f:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                    stderr=subprocess.STDOUT)
        d = Daemon(name, proc, log, addr)
        self.daemons.append(d)
        if http and not wait_until(ready_timeout, lambda: d.get("/healthz") is not None, 0.05):
            raise HarnessError("timed out after %s s waiting for idpoold to answer on %s"
                               % (ready_timeout, addr))
        return d

    def stop_daemon(self, d, timeout=10, sig=signal.SIGTERM):
        """Sends sig (lib.sh: kill_daemon), waits at most timeout s, then
        SIGKILL; reaps it. Returns and records its exit status."""
        d.status = stop_process(d.proc, timeout, sig)
        return d.status

    def stop_all(self, timeout=5):
        """Stops every daemon still running (for a cleanup path)."""
        for d in self.daemons:
            if d.status is None:
                self.stop_daemon(d, timeout)


# ---------------------------------------------------------------- pages ---


class Element:
    """An element of a page as a browser rendered it (chromium --dump-dom):
    tag, attrs (a dict), children (elements and strings), parent."""

    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    def text(self):
        """The text of the element and its descendants, as textContent."""
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def classes(self):
        return (self.attrs.get("class") or "").split()

    def all(self, tag=None, cls=None, **attrs):
        """The descendants with that tag, class and attributes (data_app="x"
        is data-app="x"; a value of True: the attribute is there), in order."""
        out = []
        for c in self.children:
            if isinstance(c, str):
                continue
            if ((tag is None or c.tag == tag) and (cls is None or cls in c.classes()) and
                    all((k.replace("_", "-") in c.attrs) if v is True else
                        c.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())):
                out.append(c)
            out.extend(c.all(tag, cls, **attrs))
        return out

    def one(self, tag=None, cls=None, **attrs):
        """The only such descendant (a check fails on none or several)."""
        found = self.all(tag, cls, **attrs)
        check(len(found) == 1, "%d <%s class=%s %s> in <%s %s>" %
              (len(found), tag or "*", cls, attrs, self.tag, self.attrs))
        return found[0]

    def hidden(self):
        """It or an ancestor has the hidden attribute."""
        return "hidden" in self.attrs or (self.parent is not None and self.parent.hidden())


class _DomParser(HTMLParser):
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
            "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Element("#document", {}, None)

    def handle_starttag(self, tag, attrs):
        e = Element(tag, attrs, self.cur)
        self.cur.children.append(e)
        if tag not in self.VOID:
            self.cur = e

    def handle_startendtag(self, tag, attrs):  # <polyline .../> in SVG
        self.cur.children.append(Element(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        e = self.cur
        while e is not None and e.tag != tag:
            e = e.parent
        if e is not None and e.parent is not None:
            self.cur = e.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse_dom(path):
    """The document chromium --dump-dom wrote to path, as an Element."""
    p = _DomParser()
    with open(path, encoding="utf-8") as f:
        p.feed(f.read())
    p.close()
    return p.root


# ------------------------------------------------------------------ IDs ---


def pool_key(key):
    return redis_key(KEY_PREFIX, key, "pool")


def meta_key(key):
    return redis_key(KEY_PREFIX, key, "meta")


def lock_key(key):
    return redis_key(KEY_PREFIX, key, "lock")


def sql_value(v):
    """Quotes a value for SQL: integers and NULL as they are, others as
    strings (lib.sh: sql_value)."""
    s = str(v)
    if isinstance(v, int) or re.fullmatch(r"-?[0-9]+", s) or s == "NULL":
        return s
    return "'%s'" % s.replace("\\", "\\\\").replace("'", "''")


# ------------------------------------------- the shell tests' helpers ---
# (run as a script: see the module's doc)


def read_all(sock):
    """What a server sends on sock until it closes the connection: (bytes,
    how), how "closed", "reset" (the server reset it), "open" (sock's
    timeout passed first) or another error's name."""
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data, "closed"
            data += chunk
    except ConnectionResetError:
        return data, "reset"
    except TimeoutError:
        return data, "open"
    except OSError as e:
        return data, type(e).__name__


def connect(port, timeout=10):
    """A redis-py client of the loopback server (replies decoded to str);
    timeout bounds each reply (None: wait for ever). Imports python3-redis."""
    import redis

    return redis.Redis(host="127.0.0.1", port=int(port), socket_timeout=timeout,
                       socket_connect_timeout=10, decode_responses=True)


def hammer(port, pool, meta, count, seconds, out):
    import redis

    r = connect(port)
    deadline = time.monotonic() + float(seconds)
    lines = []
    while time.monotonic() < deadline:
        p = r.pipeline(transaction=True)
        p.execute_command("TIME")
        p.execute_command("FCALL", "idpool_take", "2", pool, meta, count)
        p.execute_command("TIME")
        try:
            t1, take, t2 = p.execute(raise_on_error=False)
        except redis.RedisError as e:  # MULTI, a queued command or EXEC failed
            raise SystemExit("hammer: %s" % e)
        if isinstance(take, redis.ResponseError):
            lines.append("%s %s error %s" % (t1[0], t2[0], take))
        else:
            lines.append("%s %s granted %d %s" % (t1[0], t2[0], len(take), ",".join(take)))
    with open(out, "a") as f:
        f.write("\n".join(lines) + ("\n" if lines else ""))


def subscribe(port, channel, out, ready):
    r = connect(port, timeout=None)  # messages may be far apart
    ps = r.pubsub()
    ps.subscribe(channel)
    deadline = time.monotonic() + 10
    while True:  # the server's confirmation: from now on messages arrive
        msg = ps.get_message(timeout=1)
        if msg is not None and msg["type"] == "subscribe":
            break
        if time.monotonic() > deadline:
            raise SystemExit("subscribe: no confirmation from the server")
    open(ready, "w").close()
    with open(out, "a") as f:
        for msg in ps.listen():
            if msg["type"] == "message":
                f.write(msg["data"].replace("\n", " ") + "\n")
                f.flush()


def webhook(portfile, out, attempts, failfile):
    lock = threading.Lock()  # one request at a time touches the files

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n).decode("utf-8", "replace").replace("\n", " ")
            with lock:
                code = self.record(body)
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def record(self, body):
            fail = 0
            try:
                with open(failfile) as f:
                    fail = int(f.read().strip() or 0)
            except (OSError, ValueError):
                pass
            if fail > 0:
                with open(failfile, "w") as f:
                    f.write("%d\n" % (fail - 1))
                code = 500
            else:
                code = 204
                with open(out, "a") as f:
                    f.write(body + "\n")
            with open(attempts, "a") as f:
                f.write("%.3f %d %s %s\n" % (time.time(), code, self.path, body))
            return code

        def log_message(self, *args):
            pass

    # Threads: every daemon keeps its own keep-alive connection open.
    ThreadingHTTPServer.daemon_threads = True
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, portfile)
    srv.serve_forever()


def events(path, *filters):
    want = dict(kv.split("=", 1) for kv in filters)
    n = 0
    try:
        f = open(path)
    except OSError:
        print(0)
        return
    with f:
        for i, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError as e:
                raise SystemExit("%s:%d: not JSON (%s): %s" % (path, i, e, line))
            if not isinstance(ev, dict):
                raise SystemExit("%s:%d: not a JSON object: %s" % (path, i, line))
            for k in ("alert", "app", "state", "message", "at"):
                if not isinstance(ev.get(k), str) or not ev[k]:
                    raise SystemExit("%s:%d: field %r missing or not a string: %s" % (path, i, k, line))
            if not re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$", ev["at"]):
                raise SystemExit("%s:%d: 'at' is not an RFC 3339 time: %s" % (path, i, line))
            if ev["state"] not in ("firing", "resolved"):
                raise SystemExit("%s:%d: bad state: %s" % (path, i, line))
            if all(str(ev.get(k)) == v for k, v in want.items()):
                n += 1
    print(n)


def summary(path):
    """"app alert state count" lines, sorted, for every event in the file."""
    n = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                ev = json.loads(line)
                k = (ev["app"], ev["alert"], ev["state"])
                n[k] = n.get(k, 0) + 1
    for k in sorted(n):
        print("%s %s %s %d" % (k + (n[k],)))


def main():
    cmds = {"hammer": hammer, "subscribe": subscribe, "webhook": webhook, "events": events,
            "summary": summary}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](*sys.argv[2:])


if __name__ == "__main__":
    main()
