"""Environment URLs: a Redis's (redis://, redis-sentinel:// or
redis-cluster://) and an issuer's, checked as libidpool checks them
(src/core/url.c's mirror; the two parsers read the same vectors,
test/unit/url_vectors.tsv). Which kind a URL is: env.parse_env."""

import re
import socket
import string

REDIS_DB_MAX = 1000000
REDIS_DEFAULT_PORT = 6379
SENTINEL_DEFAULT_PORT = 26379  # Sentinel's own, and lettuce's
HOSTS_MAX = 16  # sentinels or seed nodes: url.h's REDIS_HOSTS_MAX
REDIS_USAGE = "redis://[[user]:password@]host[:port][/db]"
SENTINEL_USAGE = "redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master"
CLUSTER_USAGE = "redis-cluster://[[user]:password@]host[:port][,host[:port]...]"
ISSUER_USAGE = "http[s]://TOKEN@host[:port][/prefix]"

_PREFIX_OK = re.compile(r"[A-Za-z0-9/\-._~!$&'()*+,;=:]*")
_HOST_OK = re.compile(r"[A-Za-z0-9._-]{1,253}")  # url.c's hostname_char, HOSTNAME_MAX
_MASTER_OK = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # a Sentinel master's name
_INT = re.compile(r"-?[0-9]+")


def _has_ctl(s):
    """True when s holds a space or a control character."""
    return any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in s)


def _text_int(s, lo, hi):
    """s as an integer in lo..hi (text.c's text_int), or None."""
    if len(s) >= 64 or not _INT.fullmatch(s):
        return None
    v = int(s)
    return v if lo <= v <= hi else None


def _pct_decode(s, what):
    """Percent-decode s (url.c's pct_decode: a bad escape or %00 is an
    error); `what` names the part, s itself is never shown. Python strings
    hold text: the decoded bytes must be UTF-8."""
    out = bytearray()
    i = 0
    while i < len(s):
        if s[i] != "%":
            out += s[i].encode()
            i += 1
            continue
        hx = s[i + 1 : i + 3]
        if len(hx) < 2 or not all(c in string.hexdigits for c in hx) or hx == "00":
            raise ValueError(f"bad percent-escape in the {what} (write '%' itself as %25; %00 is not allowed)")
        out.append(int(hx, 16))
        i += 3
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"the {what} is not UTF-8 once percent-decoded") from None


def _split(rest, sentinel):
    """The part after "scheme://" as url.c's url_split cuts it (RFC 3986:
    the authority ends at the first '/', '?' or '#', the last '@' in it ends
    the userinfo): (userinfo or None, hostport, path or None, query or None,
    fragment or None). A query or fragment only in a Sentinel URL."""
    auth = re.match(r"[^/?#]*", rest).group()
    after = rest[len(auth) :]
    userinfo, at, hostport = auth.rpartition("@")
    if not at:
        userinfo, hostport = None, auth
    path = query = fragment = None
    if after.startswith("/"):
        path = re.match(r"[^?#]*", after[1:]).group()
        after = after[1 + len(path) :]
        if "@" in path:
            raise ValueError("'@' after the host (percent-encode '/' in a password as %2F)")
    if after.startswith("?") and not sentinel:
        hint = " (percent-encode '?' in a password as %3F)" if at else ""
        raise ValueError(f"query strings ('?...') are not supported{hint}")
    if after.startswith("#") and not sentinel:
        raise ValueError("fragments ('#...') are not supported (percent-encode '#' in a password as %23)")
    if after.startswith("?"):
        query = re.match(r"[^#]*", after[1:]).group()
        after = after[1 + len(query) :]
    if after.startswith("#"):
        fragment = after[1:]
    return userinfo, hostport, path, query, fragment


# The kinds of Redis URL by scheme (url.c's redis_schemes).
_KINDS = (("standalone", "redis://"), ("sentinel", "redis-sentinel://"), ("cluster", "redis-cluster://"))


def _hosts(hostport, default_port, what, show_port):
    """The comma-separated hosts of a Sentinel or Cluster URL (url.c's
    url_hosts): [(host, port), ...], 1..HOSTS_MAX of them, no two the same;
    `what` names one in errors."""
    hosts = []
    for hp in hostport.split(","):
        if len(hosts) == HOSTS_MAX:
            raise ValueError(f"more than {HOSTS_MAX} {what}s")
        host, port = _hostport(hp, default_port, show_port)
        if any(p == port and h.lower() == host.lower() for h, p in hosts):
            raise ValueError(f"{what} {hostport_str(host, port)} is listed twice")
        hosts.append((host, port))
    return hosts


def _master(cur, name, how):
    """The master's name given as `how` (#, master=, sentinelMasterId=);
    a second, different one is an error (url.c's master_set)."""
    if not _MASTER_OK.fullmatch(name):
        raise ValueError(f"the master's name ({how}) must be 1..64 characters of A-Z a-z 0-9 _ . -, got '{name[:80]}'")
    if cur is not None and cur != name:
        raise ValueError(f"the master's name is given twice, differently: '{cur}' and '{name}' ({how})")
    return name


def parse_url(url):
    """Check a Redis URL as libidpool does (url.c's redis_url_parse); raise
    ValueError (the message never shows a password) or return a dict:

    redis://[[user]:password@]host[:port][/db]: host, port (6379), db,
    username, password (None when absent or empty).

    redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]
    [?params][#master] (params: master=NAME, sentinelMasterId=NAME as
    lettuce writes it, sentinel_user=U, sentinel_password=PW): the same keys
    (username and password are the data server's; host and port are the
    first sentinel's) and kind "sentinel", sentinels [(host, port), ...]
    (port 26379 by default; 1..16 of them, no duplicates), master (#NAME,
    ?master=NAME or ?sentinelMasterId=NAME: 1..64 of A-Z a-z 0-9 _ . -),
    sentinel_username and sentinel_password (the sentinels' own credentials,
    only ever from the parameters).

    redis-cluster://[[user]:password@]host[:port][,host[:port]...][/0]:
    the keys of redis:// (username and password are every node's; host and
    port are the first seed's; db is 0, the only one a Cluster has) and kind
    "cluster", seeds [(host, port), ...] (port 6379 by default; 1..16 of
    them, no duplicates); no query, no fragment."""
    if not isinstance(url, str):
        raise ValueError(f"expected a str ({REDIS_USAGE}), got {type(url).__name__}")
    low = url[:17].lower()
    if low.startswith("rediss://"):
        raise ValueError("rediss:// (TLS) is not supported, use redis://")
    kind = next((k for k, scheme in _KINDS if low.startswith(scheme)), None)
    if kind is None:
        raise ValueError(
            f"expected {REDIS_USAGE} or {SENTINEL_USAGE} or {CLUSTER_USAGE}, "
            f"got scheme {url.split(':', 1)[0][:16]!r}"
        )
    if _has_ctl(url):
        raise ValueError("URL contains a space or control character")
    sentinel = kind == "sentinel"
    userinfo, hostport, path, query, fragment = _split(url[url.index("://") + 3 :], sentinel)
    username = password = None
    if userinfo is not None:
        user, colon, pw = userinfo.partition(":")
        if user:
            username = _pct_decode(user, "user")
        if colon and pw:
            password = _pct_decode(pw, "password")
    db = 0
    if path:
        db = _text_int(path, 0, 0 if kind == "cluster" else REDIS_DB_MAX)
        if db is None and kind == "cluster":
            raise ValueError(f"Redis Cluster has database 0 only, got '/{path[:32]}'")
        if db is None:
            raise ValueError(f"database must be an integer in 0..{REDIS_DB_MAX}, got '{path[:32]}'")
    show_port = userinfo is not None
    if kind == "standalone":
        host, port = _hostport(hostport, REDIS_DEFAULT_PORT, show_port)
        return {"host": host, "port": port, "db": db, "username": username, "password": password}
    if kind == "cluster":
        hosts = _hosts(hostport, REDIS_DEFAULT_PORT, "seed node", show_port)
    else:
        hosts = _hosts(hostport, SENTINEL_DEFAULT_PORT, "sentinel", show_port)
    out = {"kind": kind, "host": hosts[0][0], "port": hosts[0][1], "db": db,
           "username": username, "password": password}
    if kind == "cluster":
        out["seeds"] = hosts
        return out
    master = None
    if fragment is not None:
        master = _master(master, fragment, "#")
    creds = {"sentinel_user": None, "sentinel_password": None}
    for param in (query or "").split("&"):
        if not param:
            continue
        key, eq, value = param.partition("=")
        if not eq:
            raise ValueError(f"parameter '{key[:40]}' has no '=VALUE'")
        if key in ("master", "sentinelMasterId"):
            master = _master(master, value, key + "=")
        elif key in creds:
            if creds[key] is not None:
                raise ValueError(f"parameter {key} given twice")
            if value:  # an empty one counts as none
                creds[key] = _pct_decode(value, key)
        else:
            raise ValueError(
                f"unknown parameter '{key[:40]}' (expected master, sentinelMasterId, sentinel_user, sentinel_password)"
            )
    if master is None:
        raise ValueError("a redis-sentinel:// URL needs the master's name (#NAME or ?master=NAME)")
    out.update(
        sentinels=hosts,
        master=master,
        sentinel_username=creds["sentinel_user"],
        sentinel_password=creds["sentinel_password"],
    )
    return out


def redact(url):
    """url with any password replaced by '***' (for messages)."""
    if not isinstance(url, str):
        return repr(url)
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@]*:)[^/]*@", r"\1***@", url)


def parse_issuer_url(url):
    """Check an issuer URL as libidpool does (url.c's issuer_url_parse);
    return a dict (host, port, tls, token, prefix) or raise ValueError (the
    message never shows the token)."""
    if not isinstance(url, str):
        raise ValueError(f"expected a str ({ISSUER_USAGE}), got {type(url).__name__}")
    low = url[:8].lower()
    if low.startswith("https://"):
        tls, rest = True, url[8:]
    elif low.startswith("http://"):
        tls, rest = False, url[7:]
    else:
        raise ValueError(f"expected {ISSUER_USAGE}, got scheme {url.split(':', 1)[0][:16]!r}")
    if _has_ctl(url):
        raise ValueError("URL contains a space or control character")
    if "?" in rest or "#" in rest:
        raise ValueError(f"query or fragment not supported ({ISSUER_USAGE})")
    hostpart, slash, path = rest.partition("/")
    userinfo, at, hostport = hostpart.rpartition("@")
    if not at:
        raise ValueError(f"an issuer needs a token: {ISSUER_USAGE}")
    user, colon, pw = userinfo.partition(":")
    if (colon and user) or not (pw if colon else user):
        raise ValueError(f"the userinfo must be the token alone ({ISSUER_USAGE})")
    token = _pct_decode(pw if colon else user, "token")
    # It goes into "Authorization: Bearer <token>": an escaped CR LF would end that line.
    if _has_ctl(token):
        raise ValueError("the token may not contain a space or control character (percent-escaped or not)")
    path = path.rstrip("/")
    if not _PREFIX_OK.fullmatch(path):
        bad = re.search(r"[^A-Za-z0-9/\-._~!$&'()*+,;=:]", path).group()
        raise ValueError(f"the path prefix may not contain {bad!r} (only letters, digits and /-._~!$&'()*+,;=:)")
    host, port = _hostport(hostport, 443 if tls else 80, show_port=bool(at))
    return {"host": host, "port": port, "tls": tls, "token": token, "prefix": "/" + path if path else ""}


def _hostport(hostport, default_port, show_port):
    """(host, port) of host[:port] or [v6][:port] (url.c's hostport_split);
    ValueError when bad. A bad port is shown only when show_port: with no
    '@' before the host, "user:password" with the host forgotten reads as
    host:port."""
    if hostport.startswith("["):
        host, close, tail = hostport[1:].partition("]")
        if not close:
            raise ValueError("missing ']' after IPv6 address")
        try:
            socket.inet_pton(socket.AF_INET6, host)
        except (OSError, ValueError):
            raise ValueError(f"bad IPv6 address '{host[:64]}'") from None
        if tail and not tail.startswith(":"):
            if not show_port:  # as a bad port: with no '@' it may be part of a password
                raise ValueError(
                    "expected ':PORT' after ']' (what follows is not shown: "
                    "with no '@' before the host it may be a password)"
                )
            raise ValueError(f"expected ':PORT' after ']', got '{tail[:32]}'")
        portstr, has_port = (tail[1:], True) if tail else ("", False)
    else:
        host, colon, portstr = hostport.partition(":")
        has_port = bool(colon)
        if ":" in portstr:
            raise ValueError("an IPv6 address must be in brackets, e.g. [::1]:PORT")
        if not host:
            raise ValueError("no host")
        if not _HOST_OK.fullmatch(host):
            raise ValueError(f"bad host name '{host[:64]}'")
    port = default_port
    if has_port:
        if not portstr:
            raise ValueError("missing port after ':'")
        port = _text_int(portstr, 1, 65535)
        if port is None:
            if not show_port:
                raise ValueError("port must be an integer in 1..65535 (not shown: with no '@' "
                                 "before the host it may be a password)")
            raise ValueError(f"port must be an integer in 1..65535, got '{portstr[:32]}'")
    return host, port


def hostport_str(host, port):
    """host:port for messages, [v6]:port for an IPv6 address (url.c's hostport_str)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
