"""Environment URLs: a Redis's and an issuer's, checked as libidpool checks
them (src/core/url.c's mirror). Which kind a URL is: env.parse_env."""

import re
import urllib.parse

REDIS_DB_MAX = 1000000
REDIS_USAGE = "redis://[[user]:password@]host[:port][/db]"
ISSUER_USAGE = "http[s]://TOKEN@host[:port][/prefix]"

_PREFIX_OK = re.compile(r"[A-Za-z0-9/\-._~!$&'()*+,;=:]*")


def _has_ctl(s):
    """True when s holds a space or a control character."""
    return any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in s)


def parse_url(url):
    """Check a Redis URL as libidpool does; return a dict (host, port, db,
    username, password) or raise ValueError (the message never shows a
    password)."""
    if not isinstance(url, str):
        raise ValueError(f"expected a str ({REDIS_USAGE}), got {type(url).__name__}")
    if url[:9].lower() == "rediss://":
        raise ValueError("rediss:// (TLS) is not supported, use redis://")
    if url[:8].lower() != "redis://":
        raise ValueError(f"expected {REDIS_USAGE}, got scheme {url.split(':', 1)[0][:16]!r}")
    if _has_ctl(url):
        raise ValueError("URL contains a space or control character")
    rest = url[8:]
    if "?" in rest or "#" in rest:
        raise ValueError(f"query or fragment not supported ({REDIS_USAGE})")
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
    host, port = _hostport(hostport, 6379, show_port=bool(at))
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
    token = urllib.parse.unquote(pw if colon else user, errors="strict")
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
    """(host, port) of host[:port] or [v6][:port]; ValueError when bad. A
    bad port is shown only when show_port: with no '@' before the host,
    "user:password" with the host forgotten reads as host:port (url.c's
    hostport_split)."""
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
            if not show_port:
                raise ValueError("port must be an integer in 1..65535 (not shown: with no '@' "
                                 "before the host it may be a password)")
            raise ValueError(f"port must be an integer in 1..65535, got {portstr[:16]!r}")
        port = int(portstr)
    return host, port


def hostport_str(host, port):
    """host:port for messages, [v6]:port for an IPv6 address (url.c's hostport_str)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
