#!/usr/bin/env python3
"""Write the seed corpora test/fuzz/corpus/{app,config,url,apireq,httpreq,httpresp,cluster,sqlerr,ledger}/
(run from anywhere).

Each seed is encoded the way its target decodes the input (see the comments
at the top of test/fuzz/fuzz_*.c and the reader in test/fuzz/fuzz.h): valid
rows, configs and URLs, plus a few near misses, so that the fuzzer starts
from the interesting paths instead of discovering the formats byte by byte.
Seeds are named seed-*; inputs merged later by `FUZZ_MERGE=1 scripts/fuzz.sh`
have hash names and are kept when this script is run again.
"""
import hashlib
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
INT64_MAX = 2**63 - 1


def i64(v):
    """fz_i64(): 0..63 in one byte, anything else as selector 143 + 8 raw bytes."""
    if 0 <= v < 64:
        return bytes([v])
    return bytes([143]) + struct.pack("<q", v)


def s(b):
    """fz_str(): a length byte, then the bytes; 255 + 4k bytes as 255, k."""
    if isinstance(b, str):
        b = b.encode()
    if len(b) < 255:
        return bytes([len(b)]) + b
    assert (len(b) - 255) % 4 == 0 and len(b) <= 255 + 4 * 255
    return bytes([255, (len(b) - 255) // 4]) + b


ROW_FIELDS = ["increasing_type", "start_offset", "step", "current_offset",
              "max_size_per_times", "max_size_per_second", "min_size_percent",
              "interval", "max_pool_size", "delta", "remainder", "increment_max",
              "max_id", "version"]


def row(**kw):
    r = dict(id=3, deleted_at=0, key="user", name="user ids", increasing_type=1,
             start_offset=0, step=1000, current_offset=0, max_size_per_times=0,
             max_size_per_second=0, min_size_percent=0, interval=0, max_pool_size=0,
             delta=1, remainder=0, increment_max=1, max_id=0, version=0)
    r.update(kw)
    return r


def app_struct(r, tick=100, raw_name=False):
    """Mode 0: how (0: key and name as strings; 6: the name fills its buffer
    unterminated), tick, errlen 255 (full), the fields."""
    how = 6 if raw_name else 0
    out = bytes([0, how]) + struct.pack("<H", tick - 1) + bytes([255])
    out += i64(r["id"]) + i64(r["deleted_at"]) + s(r["key"])
    if raw_name:
        name = r["name"] if isinstance(r["name"], bytes) else r["name"].encode()
        assert len(name) == 256
        out += bytes([255]) + name
    else:
        out += s(r["name"])
    for f in ROW_FIELDS:
        out += i64(r[f])
    return out


def app_text(r, tick=100):
    """Mode 2: every column as decimal text (kind 1) or a string (kind 3)."""
    out = bytes([2]) + struct.pack("<H", tick - 1) + bytes([255])
    out += bytes([1]) + i64(r["id"]) + bytes([1]) + i64(r["deleted_at"])
    out += bytes([3]) + s(r["key"]) + bytes([3]) + s(r["name"])
    for f in ROW_FIELDS:
        out += bytes([1]) + i64(r[f])
    return out


def app_seeds():
    rows = [
        row(),
        row(increasing_type=2, step=500, delta=3, remainder=2),
        row(increment_max=7, max_pool_size=100000, max_size_per_times=100),
        row(start_offset=INT64_MAX // 10 * 9 + 1),
        row(current_offset=INT64_MAX - 60 * 5000 - 1),
        row(max_size_per_second=1, max_pool_size=0, step=60),
        row(min_size_percent=99, max_pool_size=100000, step=1000),
        row(delta=2**32, remainder=2**32 - 1, max_pool_size=2000, step=100),
        row(interval=86400000, version=12, id=0),
        row(key="a" * 64, name="é" * 100),
        row(key="bad key"),
        row(step=0, max_size_per_times=0, max_size_per_second=0, delta=0, increment_max=0),
        row(step=-1),
        row(remainder=1),
        row(max_pool_size=999),
        row(increasing_type=3),
        row(max_pool_size=10**8, delta=2**32, increment_max=10**6),
        row(max_id=2**53 - 1),
        row(max_id=2**53 - 1, current_offset=2**53 - 100),
        row(start_offset=1000, delta=10, remainder=3, max_id=1002),
        row(max_id=-1),
    ]
    seeds = {}
    for i, r in enumerate(rows):
        seeds["seed-row-%02d" % i] = app_struct(r)
        seeds["seed-text-%02d" % i] = app_text(r)
    # A name longer than 255 bytes (VARCHAR(255) utf8mb4), cut inside "é".
    seeds["seed-text-longname"] = app_text(row(name="é" * 151 + "x"))
    # The name buffer full and unterminated, cut inside "é".
    seeds["seed-row-rawname"] = app_struct(row(name=b"n" * 254 + "é".encode()), raw_name=True)
    # Mode 3: app_span_for(type, delta, increment_max, count).
    for i, (t, d, inc, n) in enumerate([(1, 1, 1, 1000), (2, 3, 1, 60000),
                                        (1, 2**32, 10**6, 10**8), (0, 0, 0, 0)]):
        seeds["seed-span-%d" % i] = bytes([3, t]) + i64(d) + i64(inc) + i64(n)
    # Mode 4: idspace_first_common(d1, r1, d2, r2, lo, hi); each delta as
    # 5 bytes and a byte whose bit 0 picks large (mod 2^32) or small (mod 64).
    def delta(d):
        large = d > 64
        return (d - 1).to_bytes(5, "little") + bytes([1 if large else 0])
    for i, (d1, r1, d2, r2, lo, hi) in enumerate([
            (2, 0, 2, 1, 1, 10**6), (2, 0, 3, 0, 7, 100), (4, 1, 6, 3, 10, 100),
            (4294967291, 5, 4294967279, 7, 0, INT64_MAX),
            (2**32, 2**32 - 1, 1, 0, INT64_MAX - 2**32, INT64_MAX)]):
        seeds["seed-meet-%d" % i] = (bytes([4]) + delta(d1) + delta(d2) + r1.to_bytes(5, "little")
                                     + r2.to_bytes(5, "little") + i64(lo) + i64(hi))
    return seeds


CONFIG_FILE = b"""# idpoold config
redis = redis://:secret@127.0.0.1:6380/2
redis-timeout-ms = 1500
key-prefix = idp:test
mysql = "mysql://idpool:p%40ss@[::1]:3307/idpool_db"
mysql-password = other
mysql-timeout-ms = 3000
; timers
tick-ms = 50
lock-ttl-ms = 500
reload-ms = 1000
instance = host-1:42
http = 0.0.0.0:9471
alert-webhook = http://127.0.0.1:8080/hooks/idpool
stall-ms = 2000
alert-resolve-ms = 0
log-level = debug
"""

SETTINGS = ["redis", "redis-password", "redis-timeout-ms", "key-prefix", "mysql",
            "mysql-password", "mysql-timeout-ms", "tick-ms", "lock-ttl-ms", "reload-ms",
            "instance", "http", "alert-webhook", "stall-ms", "alert-resolve-ms", "log-level"]

SETTING_VALUES = {
    "redis": ["redis://127.0.0.1:6379/0", "redis://u:p@[::1]:7000/3", "redis://u@h",
              "redis-cluster://n1:7000,n2"],
    "redis-password": ["pw", ""],
    "redis-timeout-ms": ["10", "600001"],
    "key-prefix": ["idpool", "a{b}"],
    "mysql": ["mysql://root@127.0.0.1:3306/idpool", "mariadb://h/d$b"],
    "mysql-password": ["s3cret"],
    "mysql-timeout-ms": ["1000"],
    "tick-ms": ["100", "600", "-1"],
    "lock-ttl-ms": ["150", "abc"],
    "reload-ms": ["100"],
    "instance": ["node-a", ""],
    "http": ["127.0.0.1:9471", "", "[::]:80", "::1:80"],
    "alert-webhook": ["http://h/p", "", "https://h/"],
    "stall-ms": ["100"],
    "alert-resolve-ms": ["0"],
    "log-level": ["warn", "verbose"],
}


def config_seeds():
    seeds = {
        "seed-file-full": b"\x00" + CONFIG_FILE,
        "seed-file-empty": b"\x00",
        "seed-file-errors": b"\x00tick-ms = 5\nbogus\n",
        "seed-file-quote": b'\x00instance = "a b"\nredis-password = "#x"\r\n',
        "seed-argv": b"\x01" + b"\x00".join([
            b"--redis=redis://127.0.0.1:6380/1", b"--tick-ms", b"200",
            b"IDPOOL_MYSQL_URL=mysql://u:p@h/db", b"--http=[::1]:9000",
            b"IDPOOL_REDIS_PASSWORD=pw", b"--log-level", b"warn"]),
        "seed-argv-config": b"\x01--config\x00x\x00--lock-ttl-ms=100",
        "seed-argv-help": b"\x01--tick-ms=1\x00--help",
        "seed-argv-bad": b"\x01-x\x00--\x00y",
    }
    for i, name in enumerate(SETTINGS):
        for j, v in enumerate(SETTING_VALUES[name]):
            seeds["seed-value-%s-%d" % (name, j)] = bytes([2, i]) + v.encode()
    return seeds


def url_seeds():
    raw = [
        (0, "redis://127.0.0.1:6379/0"), (0, "redis://:pw@host:6380/2"),
        (0, "redis://user:p%40ss@[::1]:6379/1"), (0, "REDIS://localhost"),
        (0, "redis://u@h/"), (0, "rediss://h"),
        (0, "redis-sentinel://s1,[::1]:26380,s3/2#mymaster"),
        (0, "redis-sentinel://u:p@s?master=m&sentinel_user=su&sentinel_password=p%23w"),
        (0, "redis-sentinel://s?sentinelMasterId=m#m"), (0, "redis-sentinel://s1,s1#m"),
        (1, "mysql://root@127.0.0.1:3306/idpool"), (1, "mariadb://u:p@[::1]/db_1"),
        (1, "mysql://h"), (1, "mysql://u:p@h:1/d?x"),
        (2, "http://127.0.0.1:8080/hook"), (2, "http://[::1]/a/b"), (2, "http://h:80"),
        (3, "127.0.0.1:9471"), (3, "[::1]:80"), (3, ":80"), (3, "host_name.example:65535"),
        (0, "redis-cluster://u:p%40w@n1:7000,[::1]:7001,n3/0"), (0, "redis-cluster://n1/1"),
        (0, "redis-cluster://n1,N1:6379?x#y"),
    ]
    # Mode 5: issuer URLs.
    issuer = [
        "http://127.0.0.1:9472", "https://idp_abc@issuer.example.com/api/",
        "http://:idp_a%2Fb%3D@[::1]:8080/a/b", "HTTPS://h//", "http://u:p@h",
        "http://:t%0D%0A@h", "http://h/a%20b", "https://:tok@h:0/x?y",
    ]
    seeds = {}
    for i, (mode, u) in enumerate(raw):
        seeds["seed-raw-%02d" % i] = bytes([mode]) + u.encode()
    for i, u in enumerate(issuer):
        seeds["seed-issuer-%d" % i] = bytes([5]) + u.encode()
    # Mode 4: kind, flags (bit 0: a path, 1: "@host" forgotten, 2: the issuer's token
    # alone), scheme index, user, pw1, pw2, hostport, path.
    secret = [
        (0, 1, 0, "", "a", "b", "127.0.0.1:6379", "0"),
        (1, 1, 3, "root", "x", "", "[::1]:3306", "idpool"),
        (2, 0, 6, "u", "", "", "h", ""),
        (0, 1, 0, "u", "p/q", "", "h", "x"),
        (3, 1, 7, "", "idp_", "x", "h:8443", "api/"),
        (3, 5, 6, "", "tok", "%41", "[::1]", "a b"),
        (3, 2, 7, "idp", "", "", "", "api"),
        (0, 1, 11, "u", "pw", "x", "s1,s2:26380", "0#m"),
        (0, 3, 12, "u", "pw", "x", "n1:7000,n2", "0"),
    ]
    for i, (kind, has_path, scheme, *pieces) in enumerate(secret):
        seeds["seed-secret-%d" % i] = bytes([4, kind, has_path, scheme]) + b"".join(
            s(p) for p in pieces)
    return seeds


def apireq_seeds():
    """flags (bit 0/1/2: no query/Accept/Authorization), path, query, Accept,
    Authorization, error buffer length (0: full), then the IDs (fz_i64)."""
    def req(path, query, accept, authz, flags=0, errlen=0, ids=()):
        return (bytes([flags]) + s(path) + s(query) + s(accept) + s(authz) + bytes([errlen])
                + b"".join(i64(v) for v in ids))

    return {
        "seed-json": req("/v1/ids/user", "", "application/json", "Bearer idp_" + "A" * 43,
                         ids=[1]),
        "seed-text-3": req("/v1/ids/order.v-2", "count=3", "text/plain;q=0.5, application/json",
                           "bearer  idp_abc-_~+/==  ", ids=[0, 2**62, -1]),
        "seed-absent": req("/v1/ids/a", "", "", "", flags=7),
        "seed-form": req("/v1/ids/" + "k" * 64, "&&count=2&", "TEXT/PLAIN", "Bearer\tx=",
                         ids=[INT64_MAX, -2**63]),
        "seed-big-count": req("/v1/ids/user", "count=9999999999", "*/*", "Basic dXNlcjpw")
        + bytes([64]),
        "seed-bad-count": req("/v1/ids/..", "count=5&count=6", "text/*, text/plain", "Bearer a b",
                              errlen=20),
        "seed-bad-param": req("/v1/ids/-x", "foo=1", "garbage", "Bearer ==", errlen=1),
        "seed-bad-value": req("/v2/ids/user", "count=+5", "", "Bearerxyz", flags=2),
        "seed-pct": req("/%76%31/ids/demo%5Fmono", "co%75nt=%31%30", "", "Bearer x", ids=[7]),
        "seed-pct-slash": req("/v1/ids/a%2Fb", "count=%2", "", "", flags=6),
        "seed-pct-bad": req("/v1/ids/us%zzer", "count=%00", "", "", flags=6, errlen=40),
        "seed-accept-q": req("/v1/ids/a", "", "text/plain;q=0.5, application/json;q=0.501",
                             "", flags=4),
        "seed-accept-none": req("/v1/ids/a", "", "application/xml, text/plain;Q=0", "", flags=4),
        "seed-accept-quoted": req("/v1/ids/a", "", 'text/*;x="a,\\"b";q=1.0, */*;q=0.', "",
                                  flags=4),
    }


def httpreq_seeds():
    """A byte that picks max_head (255: 8192, the server's limit; 0..127: 16 + it),
    then the request bytes as they arrived."""
    def req(head, limit=255):
        if isinstance(head, str):
            head = head.encode("latin-1")
        return bytes([limit]) + head

    api = ("POST /v1/ids/user?count=5 HTTP/1.1\r\nHost: idpool:9480\r\n"
           "Authorization: Bearer idp_" + "A" * 43 + "\r\nAccept: text/plain\r\n"
           "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n"
           "Expect: 100-continue\r\nConnection: keep-alive\r\n\r\ncount=3")
    return {
        "seed-get": req("GET / HTTP/1.1\r\n\r\n"),
        "seed-api": req(api),
        "seed-api-prefix": req(api[:60]),
        "seed-http10": req("GET /v1/ids/a HTTP/1.0\r\nConnection: Keep-Alive, Upgrade\r\n\r\n"),
        "seed-close": req("GET / HTTP/1.1\r\nConnection: Upgrade , close\r\nAccept: */*\r\n\r\n"),
        "seed-lf": req("\r\n\nGET /x HTTP/1.1\nHost: h\nAccept:  text/plain \t\n\n"),
        "seed-pipelined": req("GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\n"),
        "seed-cl-dup": req("POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 005\r\n"
                           "\r\nhello"),
        "seed-cl-conflict": req("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n"
                                "\r\n"),
        "seed-cl-long": req("POST / HTTP/1.1\r\nContent-Length: 1000000000000000000\r\n\r\n"),
        "seed-te": req("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        "seed-h2": req("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        "seed-obs-fold": req("GET / HTTP/1.1\r\nAccept: a\r\n b\r\n\r\n"),
        "seed-ctl": req("GET / HTTP/1.1\r\nAuthorization: Bearer \x01\x7f\xe9\r\n\r\n"),
        "seed-nul": req("GET /\x00 HTTP/1.1\r\n\r\n"),
        "seed-bare-cr": req("GET / HTTP/1.1\rX: y\r\n\r\n"),
        "seed-small-limit": req("GET / HTTP/1.1\r\nHost: example\r\n\r\n", limit=0),
        "seed-at-limit": req("GET / HTTP/1.1\r\nX: 12345\r\n\r\n", limit=28 - 16),
        "seed-big": req("GET / HTTP/1.1\r\nX: " + "v" * 8169 + "\r\n\r\n"),
        "seed-pct": req("GET /v1%2Fapps/%75ser/%zz/%00?x=%41 HTTP/1.1\r\n\r\n"),
        "seed-segs": req("GET /1/2/3/4/5/6/7/8 HTTP/1.1\r\n\r\n"),
        "seed-two-authz": req("GET / HTTP/1.1\r\nAuthorization: Bearer a\r\n"
                              "authorization: Bearer b\r\n\r\n"),
    }


def httpresp_seeds():
    """Mode 0: a response head (and what follows it); 1: cap, a body of IDs;
    2: the sizes of the code and message buffers, a JSON error body."""
    def head(b):
        return bytes([0]) + (b.encode("latin-1") if isinstance(b, str) else b)

    def ids(cap, b):
        return bytes([1, cap]) + b.encode()

    def error(code_len, msg_len, b):
        return bytes([2, code_len, msg_len]) + b.encode()

    ok = ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n"
          "Connection: keep-alive\r\n\r\n1\n2\n3\n")
    rate = ("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
            "Retry-After: 2\r\nContent-Length: 63\r\n\r\n"
            '{"error":"IDPOOL_RATE","message":"over 100 IDs/s, retry in 200 ms"}')
    return {
        "seed-head-ok": head(ok),
        "seed-head-prefix": head(ok[:40]),
        "seed-head-rate": head(rate),
        "seed-head-http10": head("HTTP/1.0 503 Service Unavailable\nConnection: Keep-Alive, x"
                                 "\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\n\n"),
        "seed-head-close": head("HTTP/1.1 204\r\nconnection: Upgrade , close\r\n\r\n"),
        "seed-head-cl-dup": head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length:"
                                 " 005\r\n\r\nhello"),
        "seed-head-cl-conflict": head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                                      "Content-Length: 6\r\n\r\n"),
        "seed-head-cl-big": head("HTTP/1.1 200 OK\r\nContent-Length: 1048577\r\n\r\n"),
        "seed-head-te": head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        "seed-head-fold": head("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n"),
        "seed-head-badname": head("HTTP/1.1 200 OK\r\nX y: a\r\n\r\n"),
        "seed-head-h2": head("HTTP/2.0 200 OK\r\n\r\n"),
        "seed-head-html": head("<html><body>502 Bad Gateway</body></html>\n"),
        "seed-head-big": head("HTTP/1.1 200 OK\r\nX: " + "v" * 8168 + "\r\n\r\n"),
        "seed-head-over": head("HTTP/1.1 200 OK\r\nX: " + "v" * 8169 + "\r\n\r\n"),
        "seed-ids-3": ids(3, "1\n2\n3\n"),
        "seed-ids-crlf": ids(64, "7\r\n18446744073709551615\r\n0\n"),
        "seed-ids-over": ids(64, "18446744073709551616\n"),
        "seed-ids-cap": ids(1, "1\n2\n"),
        "seed-ids-nolf": ids(5, "1\n2"),
        "seed-ids-empty": ids(0, ""),
        "seed-ids-zeros": ids(2, "007\n00000000000000000001\n"),
        "seed-ids-many": ids(255, "".join("%d\n" % (2**63 + i) for i in range(200))),
        "seed-error": error(32, 200, '{"error":"IDPOOL_RATE","message":"retry in 200 ms"}'),
        "seed-error-small": error(5, 3, '{"message":"caf\\u00e9","error":"IDPOOL_EMPTY","x":[1]}'),
        "seed-error-type": error(32, 200, '{"error":1,"message":null}'),
        "seed-error-cut": error(32, 200, '{"error":"IDPOOL_AUTH","message":"no'),
        "seed-error-none": error(0, 0, '{"error":"a","message":"b"}'),
    }


def resp(v):
    """v in RESP2, as a server writes it: int, bytes/str (bulk), None (nil),
    list (array), or ("-", text) for an error reply."""
    if isinstance(v, tuple):
        return b"-" + v[1].encode() + b"\r\n"
    if isinstance(v, int):
        return b":%d\r\n" % v
    if v is None:
        return b"$-1\r\n"
    if isinstance(v, str):
        v = v.encode()
    if isinstance(v, bytes):
        return b"$%d\r\n" % len(v) + v + b"\r\n"
    return b"*%d\r\n" % len(v) + b"".join(resp(x) for x in v)


def cluster_seeds():
    """A byte that picks the node asked ("10.0.0.9", none, "", "::1"), then
    the replies a router may get: CLUSTER SLOTS answers and error replies."""
    def node(host, port, *meta):
        return [host, port, "07c37dfeb235213a872192d90877d0cd55635b91"] + list(meta)

    three = [[0, 5460, node("127.0.0.1", 7000), node("127.0.0.1", 7003)],
             [5461, 10922, node("127.0.0.1", 7001), node("127.0.0.1", 7004)],
             [10923, 16383, node("127.0.0.1", 7002), node("127.0.0.1", 7005)]]
    redis7 = [[0, 8191, node("n1.example", 6379, ["ip", "10.0.0.1"])],
              [8192, 16383, node(None, 6380, ["hostname", "n2.example"]), node("?", 6381)]]
    odd = [[0, 99, node("", 1)], [50, 60, node("a", 2)], [200, 200, node("?", 3)],
           [300, 400, node("::1", 4)], [16383, 16383, node("A", 2)]]
    errors = [("-", "MOVED 3999 127.0.0.1:6381"), ("-", "ASK 3999 ::1:6381"),
              ("-", "MOVED 3999 :6381"), ("-", "ASK 1 [2001:db8::1]:7000"),
              ("-", "TRYAGAIN Multiple keys request during rehashing of slot"),
              ("-", "CLUSTERDOWN The cluster is down"), ("-", "CLUSTERDOWN Hash slot not served"),
              ("-", "MOVED 16384 h:1"), ("-", "ERR This instance has cluster support disabled")]

    def seed(asked, *replies):
        return bytes([asked]) + b"".join(resp(r) for r in replies)

    seeds = {
        "seed-three": seed(0, three),
        "seed-redis7": seed(1, redis7),
        "seed-odd": seed(2, odd),
        "seed-empty": seed(3, []),
        "seed-errors": seed(0, *errors),
        "seed-moved-then-table": seed(3, errors[2], three, errors[0], redis7),
        "seed-bad-range": seed(0, three, [[7, 6, node("b", 2)]]),
        "seed-bad-node": seed(0, [[0, 1, ["b", "2"]], [0, 1, node("b", 0)], [0, 1, ["b"]]]),
        "seed-not-array": seed(1, "OK", 5, None, ("-", "NOAUTH Authentication required.")),
        "seed-many": seed(0, [[i, i, node("10.0.%d.%d" % (i // 256, i % 256), 6379)]
                              for i in range(257)]),
    }
    return seeds


def sqlerr_seeds():
    """fuzz_sqlerr: error number (byte % 6 of 1044 1045 1142 1143 1146 0), db, buffer size, message."""
    def seed(num, db, cap, msg):
        return bytes([[1044, 1045, 1142, 1143, 1146, 0].index(num), db, cap]) + msg.encode()
    return {
        "seed-table": seed(1142, 1, 0, "SELECT command denied to user 'idpool'@'localhost' "
                                       "for table `idpool`.`api_token`"),
        "seed-table-old": seed(1142, 0, 0, "INSERT command denied to user 'x'@'%' for table "
                                           "'application_lease'"),
        "seed-prefixed": seed(1142, 1, 0, "MySQL error 1142: UPDATE command denied to user "
                                          "'i'@'h' for table `idpool`.`application`"),
        "seed-short": seed(1142, 1, 5, "SELECT command denied to user 'a'@'b' for table `d`.`t`"),
        "seed-column": seed(1143, 1, 0, "SELECT command denied to user 'i'@'h' for column 'x' "
                                        "in table 't'"),
        "seed-db": seed(1044, 1, 0, "Access denied for user 'i'@'h' to database 'idpool'"),
        "seed-login": seed(1045, 1, 0, "Access denied for user 'i'@'h' (using password: YES)"),
    }


def ledger_seeds():
    """fuzz_ledger: mode byte (even: a TIME follows; odd: a lattice count)."""
    def time(t):
        return b"\x00" + t.encode()

    def count(how, *fields):
        return b"\x01" + bytes([how]) + b"".join(fields)

    u8 = lambda v: bytes([v])  # noqa: E731
    u64 = lambda v: struct.pack("<Q", v)  # noqa: E731
    return {
        "seed-now": time("now"),
        "seed-ago": time("now-90s"),
        "seed-date": time("2026-11-29"),
        "seed-minute": time("2026-11-29T10:00Z"),
        "seed-ms": time("2026-11-29T10:30:00.500Z"),
        "seed-space": time("2026-11-29 23:59:59"),
        "seed-leap": time("2024-02-29"),
        "seed-bad-day": time("2026-02-29"),
        "seed-offset": time("2026-11-29T10:00:00+01:00"),
        "seed-quote": time("2026-11-29T10:00'"),
        "seed-count-small": count(0, u8(3), u8(1), u8(1), u64(100), u64(300)),
        "seed-count-near": count(8, u8(10), u8(9), u8(0), u64(2**64 - 1000), u8(200)),
        "seed-count-top": count(15, u64(2**63), u64(2**63 - 1), u64(5), u64(2**64 - 4), u8(1)),
    }


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        if name.startswith("seed-"):
            os.remove(os.path.join(d, name))
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    print("%s: %d seeds (%s)" % (target, len(seeds),
                                 hashlib.sha1(b"".join(seeds.values())).hexdigest()[:8]))


if __name__ == "__main__":
    write("app", app_seeds())
    write("config", config_seeds())
    write("url", url_seeds())
    write("apireq", apireq_seeds())
    write("httpreq", httpreq_seeds())
    write("httpresp", httpresp_seeds())
    write("cluster", cluster_seeds())
    write("sqlerr", sqlerr_seeds())
    write("ledger", ledger_seeds())
