#!/usr/bin/env python3
"""The Python client as a chaos consumer: takes IDs of one application
through idpool_client and writes the pop log that idpool-check reads
(test/tools/poplog.h: client kind take), as idpool-clientload does for
libidpool.

pytake.py APP ENV OUT STOP_FILE [N [PAUSE_MS]]
    App.next_n(N) (default 100) every PAUSE_MS (default 5) ms until
    STOP_FILE exists; an error is retried 1 ms later (the IDs a failed
    call got are recorded too: they were handed out). Times are
    CLOCK_MONOTONIC (time.monotonic_ns), as every consumer's. Prints one
    line "pytake: ids=N calls=N errors=N" at the end.
"""
import os
import struct
import sys
import time

from idpool_client import Client, IdpoolError

MAGIC = b"IDPLOG1\n"
KIND_TAKE = 1


def main(app_key, env, out, stop_file, n="100", pause_ms="5"):
    n, pause = int(n), int(pause_ms) / 1000.0
    ids_total = calls = errors = 0
    client = Client([env], timeout=1.0)
    app = client.app(app_key)
    with open(out, "wb") as f:
        f.write(MAGIC + struct.pack("<III", 1, 0, KIND_TAKE) + bytes(12))
        last_check = 0.0
        while True:
            now = time.monotonic()
            if now - last_check >= 0.02:
                last_check = now
                if os.path.exists(stop_file):
                    break
            t_send = time.monotonic_ns()
            try:
                got = app.next_n(n)
            except IdpoolError as e:
                got = getattr(e, "ids", [])
                errors += 1
                time.sleep(0.001)
            calls += 1
            if got:
                f.write(struct.pack("<QQII", t_send, time.monotonic_ns(), len(got), 0))
                f.write(struct.pack("<%dQ" % len(got), *got))
                ids_total += len(got)
            if pause:
                time.sleep(pause)
    client.close()
    print(f"pytake: ids={ids_total} calls={calls} errors={errors}")


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
