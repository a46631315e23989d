#!/usr/bin/env python3
"""A loopback HTTP server for the model store's tests: files from --root with Range, ETag and
If-Range, and faults chosen by the URL, so one server serves every case of a test suite.

  /NAME                        the file, well behaved
  /f/MODES/NAME                the file with faults; MODES is a comma list (or '-'):
      norange        ignore Range (always 200 with the whole file)
      len=+N, len=-N Content-Length N bytes more or less than what is sent (Content-Range stays right)
      status=N       always answer status N (404, 500, ...)
      fail=K         the first K requests of this URL answer 500, then it behaves
      corrupt=OFF    the byte at offset OFF of the file is flipped in every response
      corruptonce=OFF  ... in the first response only
      drop=N         each response closes the connection after N body bytes
      dropfirst=N    only the first response drops after N bytes
      slow=BPS       send at about BPS bytes per second
      noetag         no ETag or Last-Modified (a validator-less server)
  /ORG/REPO/resolve/REV/NAME   Hugging Face's layout: a 302 to /blobs/REV/NAME with the LFS file's
                               SHA-256 and size as the hub sends them (X-Linked-Etag, X-Linked-Size;
                               none when REPO is "nosha", a wrong digest when it is "wrongsha"); with
                               --hf-token, a request without "Authorization: Bearer TOKEN" gets 401
  /blobs/REV/NAME              the file
  /r/NAME                      a 302 to --redirect-to + /NAME (another server, http or https)

With --tls CERT KEY it serves https.

Prints the port on stdout once listening; --log FILE appends one JSON line per request.
"""
import argparse
import hashlib
import http.server
import json
import os
import socketserver
import sys
import threading
import time
import urllib.parse

COUNTS = {}
LOCK = threading.Lock()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client that hangs up (a killed pull, a transfer given up) is part of the tests.
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)


def parse_modes(text):
    modes = {}
    if text in ("", "-"):
        return modes
    for item in text.split(","):
        key, _, value = item.partition("=")
        modes[key] = value
    return modes


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self, path):
        if self.server.log_path:
            line = json.dumps({"path": path, "range": self.headers.get("Range"), "if_range": self.headers.get("If-Range"),
                               "auth": self.headers.get("Authorization")})
            with LOCK, open(self.server.log_path, "a") as f:
                f.write(line + "\n")

    def plain(self, status, body=b"", extra=None):
        self.send_response(status)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        path = urllib.parse.urlparse(self.path).path
        self.record(path)
        parts = path.lstrip("/").split("/")
        if parts[0] == "r" and len(parts) >= 2 and self.server.redirect_to:
            return self.plain(302, extra={"Location": self.server.redirect_to + "/" + "/".join(parts[1:])})
        if len(parts) >= 5 and parts[2] == "resolve":
            token = self.server.hf_token
            if token and self.headers.get("Authorization") != "Bearer " + token:
                return self.plain(401, b"gated repository\n")
            extra = {"Location": "/blobs/" + parts[3] + "/" + "/".join(parts[4:])}
            blob = os.path.join(self.server.root, "/".join(parts[4:]))
            if parts[1] != "nosha" and ".." not in parts and os.path.isfile(blob):
                with open(blob, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                extra["X-Linked-Etag"] = '"%s"' % ("0" * 64 if parts[1] == "wrongsha" else digest)
                extra["X-Linked-Size"] = str(os.path.getsize(blob))
            return self.plain(302, extra=extra)
        modes = {}
        if parts[0] == "f" and len(parts) >= 3:
            modes = parse_modes(parts[1])
            name = "/".join(parts[2:])
        elif parts[0] == "blobs" and len(parts) >= 3:
            name = "/".join(parts[2:])
        else:
            name = "/".join(parts)
        with LOCK:
            COUNTS[path] = COUNTS.get(path, 0) + 1
            count = COUNTS[path]
        if "status" in modes:
            return self.plain(int(modes["status"]), b"fault\n")
        if "fail" in modes and count <= int(modes["fail"]):
            return self.plain(500, b"fault\n")
        file = os.path.join(self.server.root, name)
        if ".." in name.split("/") or not os.path.isfile(file):
            return self.plain(404, b"not found\n")
        with open(file, "rb") as f:
            data = bytearray(f.read())
        st = os.stat(file)
        for key in ("corrupt", "corruptonce"):
            if key in modes and (key == "corrupt" or count == 1):
                off = int(modes[key])
                if off < len(data):
                    data[off] ^= 0xFF
        size = len(data)
        headers = {}
        etag = '"' + hashlib.sha256(bytes(open(file, "rb").read())).hexdigest()[:16] + '"'
        last_modified = self.date_time_string(int(st.st_mtime))
        if "noetag" not in modes:
            headers["ETag"] = etag
            headers["Last-Modified"] = last_modified
        start = 0
        status = 200
        rng = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        range_ok = if_range is None or if_range in (etag, last_modified)
        if rng and "norange" not in modes and range_ok and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= size:
                return self.plain(416, extra={"Content-Range": "bytes */%d" % size})
            status = 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, size - 1, size)
        body = bytes(data[start:])
        length = len(body)
        if "len" in modes:
            length = max(0, length + int(modes["len"]))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if self.command == "HEAD":
            return
        drop = None
        if "drop" in modes:
            drop = int(modes["drop"])
        if "dropfirst" in modes and count == 1:
            drop = int(modes["dropfirst"])
        send = body if drop is None else body[:drop]
        if "len" in modes and int(modes["len"]) < 0:
            send = send[:length]
        bps = int(modes.get("slow", 0))
        chunk = 16384 if not bps else max(1024, bps // 20)
        try:
            for i in range(0, len(send), chunk):
                self.wfile.write(send[i:i + chunk])
                if bps:
                    self.wfile.flush()
                    time.sleep(len(send[i:i + chunk]) / bps)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return
        if drop is not None or ("len" in modes and int(modes["len"]) != 0):
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log")
    ap.add_argument("--hf-token")
    ap.add_argument("--redirect-to")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    args = ap.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    server.redirect_to = args.redirect_to
    if args.tls:
        import ssl
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls[0], args.tls[1])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.root = args.root
    server.log_path = args.log
    server.hf_token = args.hf_token
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
