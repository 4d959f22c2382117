#!/usr/bin/env bash
# The Cluster slot of a key (keys_slot in src/core/keys.c) is Redis' own:
# for a few hundred keys — every kind of key idpool names, under random
# prefixes and applications, and random bytes with braces in random places
# (hash tags empty, nested, unclosed, repeated; NUL and high bytes) — the
# slot idpool-keys computes equals CLUSTER KEYSLOT of a cluster-enabled
# redis-server (a plain one refuses the command). Positive controls: keys
# with and without a hash tag are both well represented, the slots are
# spread, and a key's slot is its tag's.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
IDPOOL_KEYS=${IDPOOL_KEYS:-$IDPOOL_SOURCE_ROOT/build/test/idpool-keys}
[[ -x $IDPOOL_KEYS ]] || fail "idpool-keys not built: $IDPOOL_KEYS"
export IDPOOL_KEYS
# The cluster bus listens on its own port (by default the port + 10000, which
# may not exist), loopback too (--bind).
SERVERS_REDIS_ARGS="--cluster-enabled yes --cluster-port $(free_port)" setup redis
"$PYTHON" -c 'import redis' 2>/dev/null || skip "$PYTHON cannot import redis (python3-redis)"

"$PYTHON" - "$REDIS_PORT" <<'EOF' || fail "keys_slot differs from CLUSTER KEYSLOT"
import os
import random
import subprocess
import sys

import redis
from harness import check
from idpool_client import redis_key  # src/python, on the path through harness

r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
rnd = random.Random(19)


def word(chars, lo, hi):
    return "".join(rnd.choice(chars) for _ in range(rnd.randint(lo, hi)))


keys = [b"foo", b"somekey", b"{user1000}.following", b"foo{}{bar}", b"foo{{bar}}zap",
        b"foo{bar}{zap}", b"", b"{", b"}", b"{}", b"}{a}", b"{a"]
for _ in range(150):  # the names idpool gives its keys
    prefix = word("abcXYZ019_.:-", 1, 64)
    app = word("abcXYZ019_.-", 1, 64)
    keys += [redis_key(prefix, app, kind).encode() for kind in ("pool", "meta", "lock")]
    keys.append(("%s:revoked-tokens" % prefix).encode())
for _ in range(300):  # any bytes, braces anywhere
    b = bytearray(rnd.choice(b"ab{}\x00\xff:") if rnd.random() < 0.4 else rnd.randrange(256)
                  for _ in range(rnd.randint(0, 40)))
    keys.append(bytes(b))

out = subprocess.run([os.environ["IDPOOL_KEYS"], "slot"], input="".join(k.hex() + "\n" for k in keys),
                     capture_output=True, text=True, check=True).stdout.split()
check(len(out) == len(keys), "idpool-keys answered %d of %d keys" % (len(out), len(keys)))
p = r.pipeline(transaction=False)
for k in keys:
    p.execute_command("CLUSTER", "KEYSLOT", k)
want = p.execute()
bad = [(k, int(o), w) for k, o, w in zip(keys, out, want) if int(o) != w]
check(not bad, "%d keys differ (key, keys_slot, CLUSTER KEYSLOT), e.g. %r" % (len(bad), bad[:5]))

def tagged(k):
    i = k.find(b"{")
    return i >= 0 and k.find(b"}", i + 1) > i + 1

ntag = sum(map(tagged, keys))
check(ntag >= 200 and len(keys) - ntag >= 100, "keys with a hash tag: %d of %d" % (ntag, len(keys)))
check(len(set(want)) >= 300, "only %d distinct slots" % len(set(want)))
check(want[2] == r.execute_command("CLUSTER", "KEYSLOT", "user1000"), "a tag's slot")
print("%d keys (%d with a hash tag), %d distinct slots: keys_slot == CLUSTER KEYSLOT"
      % (len(keys), ntag, len(set(want))))
EOF
pass "keys_slot agrees with Redis' CLUSTER KEYSLOT"
