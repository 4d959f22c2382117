"""A DNS server that never answers: it binds UDP ADDR:53, counts the
queries it receives and writes the count to COUNT_FILE after each one:

    dns_blackhole.py ADDR COUNT_FILE

A resolver pointed at it waits out its whole timeout, the slow resolver
of t_dns. It runs until killed.
"""
import socket
import sys


def main():
    addr, count_path = sys.argv[1], sys.argv[2]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((addr, 53))
    count = 0
    with open(count_path, "w", encoding="utf-8") as f:
        f.write("0\n")
    while True:
        sock.recvfrom(4096)
        count += 1
        with open(count_path, "w", encoding="utf-8") as f:
            f.write("%d\n" % count)


if __name__ == "__main__":
    main()
