"""The issuer transport (src/lib/issuer.c's mirror): http[s]:// environments,
ID issuers taken from with GET {prefix}/v1/ids/{key}?count=N and the
token, on a kept-alive connection; https verified against the system's
CAs or ca_file. A row of env.TRANSPORTS."""

import http.client
import json
import ssl

from .takereply import DOWN, DRY, EPOCH, IDS, RATE, classify_refusal
from .url import ISSUER_USAGE, parse_issuer_url

KIND = "http"
SCHEMES = ("http://", "https://")
USAGE = ISSUER_USAGE
parse = parse_issuer_url


def classify_http(status, body, retry_after, count):
    """Classify an issuer's answer as issuer.c does. status: the HTTP status;
    body: bytes; retry_after: the Retry-After header (str) or None. Returns
    (outcome, ids, arg, message): IDS with the IDs of a text/plain body (one
    per line); a refusal as REFUSALS says (DRY for IDPOOL_EMPTY; NOAPP for
    IDPOOL_NOAPP, IDPOOL_AUTH and IDPOOL_FORBIDDEN: this environment will
    not serve it to us), EPOCH/RATE with the wait in seconds (the message's
    "retry in N ms", else Retry-After), LIMIT with max_size_per_times; DOWN
    for anything else. message: "<status> <code>: <text>" (None for IDS)."""
    if status == 200:
        try:
            text = body.decode("ascii")
            if text and not text.endswith("\n"):
                raise ValueError
            lines = text.splitlines()
            if not all(x.isascii() and x.isdigit() for x in lines):
                raise ValueError
            ids = [int(x) for x in lines]
        except (UnicodeDecodeError, ValueError):
            return DOWN, [], None, "the 200 answer is not a list of IDs (one per line)"
        if len(ids) > count or any(i >= 1 << 64 for i in ids):
            return DOWN, [], None, "the 200 answer is not a list of IDs (one per line)"
        return (IDS, ids, None, None) if ids else (DRY, [], None, "a 200 answer with no IDs")
    try:
        err = json.loads(body)
        code, text = err["error"], err["message"]
        if not isinstance(code, str) or not isinstance(text, str):
            raise TypeError
    except (ValueError, TypeError, KeyError):
        return DOWN, [], None, f"HTTP {status} without an idpool error body (not an issuer?)"
    message = f"{status} {code}: {text}"
    o, arg = classify_refusal(f"{code} {text}", count)
    if o in (EPOCH, RATE) and "retry in " not in text and retry_after and retry_after.isdigit():
        arg = int(retry_after)
    return o, [], arg, message


def prepare(envs, ca_file):
    """One TLS context for the https issuers: the CAs of ca_file (PEM), else the system's."""
    if not any(e.parts["tls"] for e in envs):
        return
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as err:
        raise ValueError(f"ca_file {ca_file!r}: {err}") from None
    for e in envs:
        e.tls = ctx


def take(e, a, count, now):
    """One GET {prefix}/v1/ids/{key}?count=N of application a from issuer e,
    on a kept-alive connection (once more on a fresh one when a reused one
    was closed by the server): env.Env.take()'s result. IDs lost with a cut
    answer are gaps: the issuer hands each ID out once, whether or not it
    is read."""
    p = e.parts
    path = f"{p['prefix']}/v1/ids/{a.key}?count={count}"
    headers = {"Authorization": "Bearer " + p["token"], "Accept": "text/plain", "User-Agent": "idpool_client"}
    for attempt in (0, 1):
        reused = e.conn is not None
        try:
            if e.conn is None:
                if p["tls"]:
                    e.conn = http.client.HTTPSConnection(p["host"], p["port"], timeout=e.io_timeout, context=e.tls)
                else:
                    e.conn = http.client.HTTPConnection(p["host"], p["port"], timeout=e.io_timeout)
            e.used = True
            e.conn.request("GET", path, headers=headers)
            resp = e.conn.getresponse()
            body = resp.read()
            retry_after = resp.getheader("Retry-After")
            if resp.will_close:
                close(e)
            break
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as err:
            close(e)
            if reused and attempt == 0:
                continue  # the server closed an idle connection: once more, afresh
            e.fail(now)
            return DOWN, [], None, f"{type(err).__name__}: {err}"
        except ssl.SSLCertVerificationError as err:
            e.fail(now)
            return DOWN, [], None, f"TLS: certificate not verified: {err.verify_message}"
        except (OSError, http.client.HTTPException) as err:  # refused, timeout, TLS, protocol
            e.fail(now)
            return DOWN, [], None, f"{type(err).__name__}: {err}"
    e.backoff = 0.0
    o, ids, arg, msg = classify_http(resp.status, body, retry_after, count)
    if o == DOWN:
        e.fail(now)
    return o, ids, arg, msg


def close(e):
    """Close e's connection."""
    if e.conn is not None:
        e.conn.close()
        e.conn = None
