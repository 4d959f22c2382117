"""A proxy in front of idpoold's status server for t_page, which fails
requests for /v1/apps on purpose:

    page_proxy.py PORT UPSTREAM_PORT MODE [HOLD_MS]

MODE "500:N": the N-th GET /v1/apps (from 1) gets an HTTP 500 JSON error,
every other request goes through; "500from:N": the N-th and every later
one; "hang:N": from the N-th on, no answer at all (a daemon that accepts
and never answers). The others go through.

HOLD_MS: the page (GET /) gets an <img src="/__hold"> that is answered
(404) only after HOLD_MS of real time: the page's load event, at which
headless chromium without virtual time dumps the DOM, comes that late.
(Virtual time would stall on the hung request: the page's 5 s abort
timer never fires in it.) The image is markup, not script: the page's
Content-Security-Policy (default-src 'self') allows it, and the hash of
its inline script is unchanged. Each request on
a connection of its own (HTTP/1.0). Runs until killed.
"""
import http.client
import http.server
import sys
import threading

PORT, UPSTREAM, MODE = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
HOLD_MS = int(sys.argv[4]) if len(sys.argv) > 4 else 0
KIND, N = MODE.split(":")[0], int(MODE.split(":")[1])
lock = threading.Lock()
seen = {"apps": 0}


class Proxy(http.server.BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):  # quiet
        pass

    def do_GET(self):
        if self.path.split("?")[0] == "/v1/apps":
            with lock:
                seen["apps"] += 1
                n = seen["apps"]
            if (KIND == "500" and n == N) or (KIND == "500from" and n >= N):
                body = b'{"error":"injected by page_proxy.py"}\n'
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            if KIND == "hang" and n >= N:
                threading.Event().wait(120)
                return
        if self.path == "/__hold":
            threading.Event().wait(HOLD_MS / 1000)
            self.send_error(404)
            return
        up = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=10)
        up.request("GET", self.path, headers={"Accept": self.headers.get("Accept", "*/*")})
        r = up.getresponse()
        body = r.read()
        if HOLD_MS and self.path == "/":
            body = body.replace(b"</body>", b'<img src="/__hold" alt="" hidden></body>')
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("connection", "keep-alive", "date", "server", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        up.close()


srv = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Proxy)
srv.daemon_threads = True
srv.serve_forever()
