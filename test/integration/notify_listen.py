"""A stand-in for systemd's end of the notify protocol (sd_notify(3)): an
AF_UNIX datagram socket, as NOTIFY_SOCKET names it, whose messages are
logged one field a line:

    notify_listen.py SOCKET LOG REDIS_PORT POOL_KEY

Each line of LOG is "<milliseconds since the epoch> <FIELD=value>", in
arrival order (a message of several fields gives several lines with one
time). On READY=1 it also reads LLEN POOL_KEY at once, before the next
message, and logs it as "<ms> llen=<n>": the pool's length when the daemon
said it was ready. It runs until SOCKET is removed or it is killed.
"""
import os
import socket
import sys
import time

import redis


def main():
    path, log_path, port, pool_key = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    with open(log_path, "a", encoding="utf-8") as log:
        while os.path.exists(path):
            try:
                data = sock.recv(4096)
            except socket.timeout:
                continue
            now = int(time.time() * 1000)
            fields = data.decode("utf-8", "replace").split("\n")
            for f in fields:
                if f:
                    log.write(f"{now} {f}\n")
            if "READY=1" in fields:
                try:
                    log.write(f"{now} llen={r.llen(pool_key)}\n")
                except redis.exceptions.RedisError as e:
                    log.write(f"{now} llen=error {e}\n")
            log.flush()


if __name__ == "__main__":
    main()
