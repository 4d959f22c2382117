"""Application keys and their Redis key names (src/core/keys.c's mirror)."""

import re

APP_KEY_MAX = 64
KEY_KINDS = ("pool", "meta", "lock")

_KEY_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def key_valid(key):
    """True when key is a valid application key ([A-Za-z0-9_.-]{1,64}, not
    "." or "..", not starting with "-")."""
    return (
        isinstance(key, str)
        and _KEY_RE.fullmatch(key) is not None
        and key not in (".", "..")
        and not key.startswith("-")
    )


def validate_key(key):
    """Return key, or raise ValueError naming what is wrong with it."""
    if not isinstance(key, str):
        raise ValueError(f"application key must be a str, got {type(key).__name__}")
    if not key:
        raise ValueError("application key is empty")
    if len(key) > APP_KEY_MAX:
        raise ValueError(f"application key {key[:20]!r}... is longer than {APP_KEY_MAX} characters")
    bad = re.search(r"[^A-Za-z0-9_.-]", key)
    if bad:
        raise ValueError(
            f"application key {key!r}: character {bad.group()!r} not allowed (use A-Z a-z 0-9 _ . -)"
        )
    if key in (".", ".."):
        raise ValueError(f"application key {key!r} is not allowed")
    if key.startswith("-"):
        raise ValueError(f"application key {key!r} must not start with '-'")
    return key


def redis_key(prefix, key, kind):
    """The Redis key of application key's kind ("pool", "meta" or "lock"):
    "<prefix>:{<key>}:<kind>", the braces a Cluster hash tag. Mirrors
    keys_app() of src/core/keys.c (test/unit/test_pykeys.py holds them
    equal)."""
    if kind not in KEY_KINDS:
        raise ValueError(f"key kind must be one of {', '.join(KEY_KINDS)}, got {kind!r}")
    return f"{prefix}:{{{key}}}:{kind}"
