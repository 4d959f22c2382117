"""What a take's answer means (src/core/takereply.h's mirror): the outcomes
of one take, the table of refusals, a refusal's meaning to a client and
the IDs of an idpool_take reply. Each transport (redisenv, issuer) reads
its answers with these."""

import re

# Outcomes of one take (src/core/takereply.h's TAKE_OUTCOMES).
IDS, DRY, EPOCH, RATE, LIMIT, NOAPP, DOWN = ("ids", "dry", "epoch", "rate", "limit", "noapp", "down")
# The refusals of a take, src/core/takereply.h's TAKE_REFUSALS mirrored
# (test_pyclient.py checks it against the C table): code -> (HTTP status an
# issuer answers it with, the wait it asks for when its message names none
# in ms (0: asking again soon will not help), what a client does).
REFUSALS = {
    "IDPOOL_EMPTY": (503, 100, DRY),
    "IDPOOL_EPOCH": (503, 200, EPOCH),
    "IDPOOL_RATE": (429, 1000, RATE),
    "IDPOOL_LIMIT": (400, 0, LIMIT),
    "IDPOOL_NOAPP": (404, 0, NOAPP),
    "IDPOOL_BADARG": (400, 0, DOWN),
    "IDPOOL_AUTH": (401, 0, NOAPP),
    "IDPOOL_FORBIDDEN": (403, 0, NOAPP),
    "IDPOOL_UNAVAILABLE": (503, 200, DOWN),
    "IDPOOL_NOTFOUND": (404, 0, DOWN),
    "IDPOOL_METHOD": (405, 0, DOWN),
    "IDPOOL_NOTACCEPTABLE": (406, 0, DOWN),
    "IDPOOL_BADREQUEST": (400, 0, DOWN),
    "IDPOOL_INTERNAL": (500, 0, DOWN),
}

_HINT_RE = re.compile(r"retry in (-?\d+)")


def hint_ms(msg, default):
    """The N of "... retry in N ms" in a refusal, or default (outside 1..59999)."""
    m = _HINT_RE.search(msg)
    if not m:
        return default
    v = int(m.group(1))
    return v if 0 < v < 60000 else default


def take_ids(reply):
    """The IDs of idpool_take's array reply (takereply.c's takereply_ids):
    its items that are decimal uint64 strings (or ints), in order; others
    are skipped."""
    ids = []
    for x in reply:
        if isinstance(x, bytes):
            try:
                x = x.decode("ascii")
            except UnicodeDecodeError:
                continue
        if isinstance(x, str) and x.isdigit() and x.isascii():
            x = int(x)
        if type(x) is int and 0 <= x < 1 << 64:
            ids.append(x)
    return ids


def classify_refusal(text, count):
    """What a refusal "IDPOOL_<CODE> <message>" means to a client (REFUSALS;
    lib/env.c's env_refusal): (outcome, arg), arg the wait in seconds for
    EPOCH and RATE (the message's "retry in N ms", else the table's),
    max_size_per_times for LIMIT (count // 2 when not said), else None.
    Anything not ours is (DOWN, None)."""
    row = REFUSALS.get(text.split(" ", 1)[0])
    if row is None:
        return DOWN, None  # another error: no library, a read-only replica, ...
    _, wait, o = row
    if o in (EPOCH, RATE):
        return o, hint_ms(text, wait) / 1000.0
    if o == LIMIT:
        m = re.search(r"max_size_per_times (\d+)", text)
        return o, int(m.group(1)) if m else count // 2
    return o, None
