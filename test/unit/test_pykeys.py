#!/usr/bin/env python3
"""The key names of the other languages against src/core/keys.c, without
servers: the Python client's redis_key() (src/python/idpool_client/keys.py;
the test harness test/lib/harness.py uses it too) and the shell harness'
pool_key, meta_key and lock_key (test/integration/lib.sh) name every
application's pool, meta and lock exactly as keys_app() does, asked through
idpool-keys (IDPOOL_KEYS, set by meson)."""

import os
import random
import subprocess
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "src", "python"))
import idpool_client as m  # noqa: E402

TOOL = os.environ.get("IDPOOL_KEYS", os.path.join(ROOT, "build", "test", "idpool-keys"))
LIB_SH = os.path.join(ROOT, "test", "integration", "lib.sh")
KINDS = ("pool", "meta", "lock")


def cases():
    """(prefix, key) pairs: the default, edges of both alphabets and lengths, random ones."""
    prefix_chars = "abcXYZ019_.:-"
    key_chars = "abcXYZ019_.-"
    rnd = random.Random(19)
    out = [
        ("idpool", "user"),
        ("idp:test", "order.v-2"),
        ("p" * 64, "k" * 64),
        ("a", "b"),
        (":", "_"),
        ("a:b:c", "..a"),
    ]
    for _ in range(40):
        prefix = "".join(rnd.choice(prefix_chars) for _ in range(rnd.randint(1, 64)))
        key = "".join(rnd.choice(key_chars) for _ in range(rnd.randint(1, 64)))
        out.append((prefix, key))
    return out


def c_keys(pairs):
    """For each (prefix, key), the pool, meta and lock keys as keys.c names them."""
    args = [s for pair in pairs for s in pair]
    r = subprocess.run([TOOL, "app"] + args, capture_output=True, text=True, check=True)
    out = r.stdout.splitlines()
    assert len(out) == 3 * len(pairs), out
    return [out[i : i + 3] for i in range(0, len(out), 3)]


class KeyNames(unittest.TestCase):
    def test_python_is_c(self):
        pairs = cases()
        for (prefix, key), want in zip(pairs, c_keys(pairs)):
            self.assertEqual([m.redis_key(prefix, key, k) for k in KINDS], want, (prefix, key))

    def test_shell_is_c(self):
        script = 'source "$1"; shift; while (($#)); do\n'
        script += '  IDPOOL_KEY_PREFIX=$1; pool_key "$2"; meta_key "$2"; lock_key "$2"; shift 2\n'
        script += "done\n"
        pairs = cases()
        args = [s for pair in pairs for s in pair]
        want = [k for three in c_keys(pairs) for k in three]
        r = subprocess.run(["bash", "-c", script, "bash", LIB_SH] + args, capture_output=True, text=True, check=True)
        self.assertEqual(r.stdout.splitlines(), want)

    def test_client_uses_it(self):
        c = m.Client(["http://token@127.0.0.1:1"], key_prefix="p:q")  # no redis-py needed
        try:
            a = c.app("user")
            self.assertEqual([a._k_pool, a._k_meta], c_keys([("p:q", "user")])[0][:2])
        finally:
            c.close()

    def test_kind(self):
        with self.assertRaises(ValueError):
            m.redis_key("idpool", "user", "pools")


if __name__ == "__main__":
    unittest.main(verbosity=1)
