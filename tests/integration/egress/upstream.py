#!/usr/bin/python3
"""The fake internet of tests/integration/test_egress.py, run inside the test's "upstream"
network namespace (no default route: it can only answer the host side of its veth).

    upstream.py STATEDIR ZONEFILE

- DNS (UDP and TCP, port 53 on every address of the namespace): authoritative for the names in
  ZONEFILE (JSON {"name": {"A": [...], "AAAA": [...], "CNAME": "target", "extra": [[owner, addr]],
  "ttl": N}}: a CNAME chain is followed within the zone; "extra" adds A/AAAA records of other
  owners to the answer, as a hostile zone would); every query is appended to
  STATEDIR/queries.log as one line "qname qtype" - the tests count them to prove that no query
  for a refused name leaked - and every message as received, byte for byte, to STATEDIR/dns.raw
  (each after its 2-byte length; the tests grep it for markers). Unknown names: NXDOMAIN.
- TCP 80 and 8080: a tiny HTTP/1.1 server (keep-alive; see HTTP) that answers "ok <Host header>"
  and logs each request's Host to STATEDIR/http.log (with $UPSTREAM_WWW, GET/HEAD below /git/
  answer its files, as on 443, and /smart/REPO/... is git's smart protocol by git-http-backend
  over DIR/git, each request logged to STATEDIR/smart.log; /bytes/N: N bytes at once;
  /trickle/COUNT/SIZE/MS: COUNT pieces of SIZE bytes MS ms apart, each starting with its send
  time, for tests/bench/egress_bench.py) - except on the addresses listed in
  $UPSTREAM_NAIVE (comma-separated), where Python's own http.server answers (keep-alive, and like
  most handlers it never reads a request body) and logs "request-line Host" to
  STATEDIR/naive.log; TCP 443: reads the TLS
  ClientHello, records its SNI in STATEDIR/sni.log and closes.
- $UPSTREAM_TLS ("name=cert:key,...") set: TCP 443 is a fake HTTPS API instead (HTTPSReq: every
  request logged as JSON to STATEDIR/https.log), with the certificate of the SNI's name; with
  $UPSTREAM_WWW=DIR, GET/HEAD below /git/, /simple/, /files/ and /npm/ answer the files of DIR
  there (test_egress_credentials.py: a git repository in dumb-HTTP form; test_egress_tools.py: a
  PEP 503 simple index with its wheel, an npm registry document with its tarball): a path ending
  in / is its index.html, the Content-Type follows the name (.html text/html, .json or no
  extension below /npm/ application/json - an npm registry document -, else application/octet-stream).
- UDP 9999: counts datagrams in STATEDIR/udp.log.
Writes STATEDIR/ready when all sockets are bound."""
import http.server
import json
import os
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time

STATE, ZONE = sys.argv[1], sys.argv[2]
LOCK = threading.Lock()


def log(name, line):
    with LOCK, open(os.path.join(STATE, name), "a") as f:
        f.write(line + "\n")


def zone():
    with open(ZONE) as f:
        return {k.lower().rstrip("."): v for k, v in json.load(f).items()}


def parse_question(msg):
    i, labels = 12, []
    while msg[i]:
        n = msg[i]
        labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    qtype, qclass = struct.unpack("!HH", msg[i + 1:i + 5])
    return ".".join(labels).lower(), qtype, msg[12:i + 5]


def wire(name):
    return b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"


def address_rr(owner, a, ttl):
    fam, t = (socket.AF_INET6, 28) if ":" in a else (socket.AF_INET, 1)
    data = socket.inet_pton(fam, a)
    return owner + struct.pack("!HHIH", t, 1, ttl, len(data)) + data


def answer(msg):
    with LOCK, open(os.path.join(STATE, "dns.raw"), "ab") as f:
        f.write(struct.pack("!H", len(msg)) + msg)  # length-prefixed, as over TCP
    qid, = struct.unpack("!H", msg[:2])
    name, qtype, question = parse_question(msg)
    log("queries.log", f"{name} {qtype}")
    z = zone()
    rrs = []
    rcode = 3
    if name in z:
        rcode = 0
        ttl = z[name].get("ttl", 300)
        owner, cur = struct.pack("!H", 0xC00C), name
        while "CNAME" in z.get(cur, {}) and len(rrs) < 8:
            target = z[cur]["CNAME"].lower()
            rrs.append(owner + struct.pack("!HHIH", 5, 1, ttl, len(wire(target))) + wire(target))
            owner, cur = wire(target), target
        kind = {1: "A", 28: "AAAA"}.get(qtype)
        if kind:
            rrs += [address_rr(owner, a, ttl) for a in z.get(cur, {}).get(kind, [])]
            rrs += [address_rr(wire(o), a, ttl) for o, a in z[name].get("extra", [])
                    if (":" in a) == (qtype == 28)]
    hdr = struct.pack("!HHHHHH", qid, 0x8400 | rcode, 1, len(rrs), 0, 0)
    return hdr + question + b"".join(rrs)


class UDPDNS(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        log("dns-src.log", f"{self.client_address[0]} {self.client_address[1]}")  # the querier's port
        sock.sendto(answer(data), self.client_address)


class TCPDNS(socketserver.StreamRequestHandler):
    def handle(self):
        n, = struct.unpack("!H", self.rfile.read(2))
        out = answer(self.rfile.read(n))
        self.wfile.write(struct.pack("!H", len(out)) + out)


class HTTP(socketserver.StreamRequestHandler):
    """HTTP/1.1 with keep-alive (HTTP/1.0 or `Connection: close`: one request): request bodies
    by Content-Length or chunked are read and dropped. GET /bytes/N answers N bytes (the bench's
    download), /simple/<file> a small fixed "package" (the demo), anything else "ok <Host>"."""

    def body(self, headers):
        data = b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while (n := int(self.rfile.readline(100).split(b";")[0], 16)) > 0:
                data += self.rfile.read(n + 2)[:n]
            while self.rfile.readline(4096) not in (b"\r\n", b"\n", b""):
                pass  # trailers
        elif "content-length" in headers:
            data = self.rfile.read(int(headers["content-length"]))
        return data

    def smart(self, method, path, headers, data):
        """/smart/...: git's smart HTTP protocol, git-http-backend as a CGI over $UPSTREAM_WWW/git"""
        info, _, query = path[len("/smart"):].partition("?")
        env = {"PATH": "/usr/bin:/bin", "GIT_PROJECT_ROOT": os.path.join(WWW, "git"), "GIT_HTTP_EXPORT_ALL": "1",
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": "/nonexistent",
               "REQUEST_METHOD": method, "PATH_INFO": info, "QUERY_STRING": query,
               "CONTENT_TYPE": headers.get("content-type", ""), "CONTENT_LENGTH": str(len(data)),
               "GIT_PROTOCOL": headers.get("git-protocol", ""), "REMOTE_ADDR": "203.0.113.2"}
        out = subprocess.run(["/usr/lib/git-core/git-http-backend"], input=data, capture_output=True, env=env,
                             timeout=60).stdout
        head, _, body = out.partition(b"\r\n\r\n")
        status, lines = "200 OK", []
        for line in head.decode("latin-1").split("\r\n"):
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = v.strip()
            elif k:
                lines.append(f"{k}:{v}")
        log("smart.log", f"{method} {info}")
        return status, lines, body

    def handle(self):
        served = 0
        while True:
            first = self.rfile.readline(4096)
            if not first:
                if not served:
                    log("http.log", "")  # a bare connect: counted like a request without Host
                return
            served += 1
            headers = {}
            while True:
                line = self.rfile.readline(4096)
                if not line or line in (b"\r\n", b"\n"):
                    break
                k, _, v = line.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            host = headers.get("host", "")
            log("http.log", host)
            data = self.body(headers)
            parts = first.decode("latin-1").split()
            path = parts[1] if len(parts) > 1 else "/"
            keep = first.rstrip().endswith(b"HTTP/1.1") and headers.get("connection", "").lower() != "close"
            status = "HTTP/1.1 200 OK" if keep else "HTTP/1.0 200 OK"
            if WWW and path.startswith("/smart/"):
                code, lines, out = self.smart(parts[0], path, headers, data)
                self.wfile.write((f"{status.split()[0]} {code}\r\n" + "".join(f"{x}\r\n" for x in lines)
                                  + f"Content-Length: {len(out)}\r\n\r\n").encode() + out)
            elif WWW and path.startswith("/git/") and parts[0] in ("GET", "HEAD"):
                # $UPSTREAM_WWW over plain HTTP too (test_sandbox_seed_url.py: a dumb-HTTP clone)
                data = www_file(path)
                code = status if data is not None else status.replace("200 OK", "404 Not Found")
                self.wfile.write(f"{code}\r\nContent-Length: {len(data or b'')}\r\n\r\n".encode())
                if data and parts[0] == "GET":
                    self.wfile.write(data)
            elif path.startswith("/trickle/"):
                # /trickle/COUNT/SIZE/MS: COUNT pieces of SIZE bytes, one every MS ms, each
                # starting with its send time (time.time(), 8 bytes, big-endian double): the
                # bench's streaming case measures each piece's delay through the relay
                count, size, ms = (int(x) for x in path[9:].split("/"))
                self.wfile.write(f"{status}\r\nContent-Length: {count * size}\r\n\r\n".encode())
                self.wfile.flush()
                for _ in range(count):
                    self.wfile.write(struct.pack("!d", time.time()) + b"t" * (size - 8))
                    self.wfile.flush()
                    time.sleep(ms / 1000)
            elif path.startswith("/bytes/"):
                n = int(path[7:])
                self.wfile.write(f"{status}\r\nContent-Length: {n}\r\n\r\n".encode())
                chunk = b"x" * 65536
                while n > 0:
                    self.wfile.write(chunk[:n])
                    n -= min(n, len(chunk))
            else:
                body = (PACKAGE if path.startswith("/simple/") else f"ok {host}\n").encode()
                self.wfile.write(f"{status}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            self.wfile.flush()
            if not keep:
                return


PACKAGE = "pkg-1.0: a fake package from the demo registry\n"
NAIVE = {a for a in os.environ.get("UPSTREAM_NAIVE", "").split(",") if a}


class Naive(http.server.BaseHTTPRequestHandler):
    """Python's http.server as most of its users run it: HTTP/1.1 keep-alive, handlers that answer
    without reading the request's body (which the server then reads as the next request)."""
    protocol_version = "HTTP/1.1"

    def answer(self):
        log("naive.log", f"{self.requestline} {self.headers.get('Host', '')}")
        if self.path == "/slow101":
            # a response whose body, sent late, reads as the 101 answering an Upgrade request
            # the client pipelined meanwhile (an echo service, a file download)
            late = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
            self.send_response(200)
            self.send_header("Content-Length", str(8 + len(late)))
            self.end_headers()
            self.wfile.write(b"started\n")
            self.wfile.flush()
            time.sleep(0.6)
            self.wfile.write(late)
            return
        body = f"naive {self.headers.get('Host', '')}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_HEAD = do_PATCH = answer

    def log_message(self, *args):
        pass


class HTTPOrNaive(socketserver.BaseRequestHandler):
    def handle(self):
        addr = self.request.getsockname()[0]
        (Naive if addr in NAIVE else HTTP)(self.request, self.client_address, self.server)


def sni_of(hello):
    # TLS record(5) handshake(4) version(2) random(32) session id, ciphers, compression, exts
    try:
        i = 5 + 4 + 2 + 32
        i += 1 + hello[i]
        i += 2 + struct.unpack("!H", hello[i:i + 2])[0]
        i += 1 + hello[i]
        end = i + 2 + struct.unpack("!H", hello[i:i + 2])[0]
        i += 2
        while i < end:
            t, n = struct.unpack("!HH", hello[i:i + 4])
            if t == 0:
                ln = struct.unpack("!H", hello[i + 7:i + 9])[0]
                return hello[i + 9:i + 9 + ln].decode("ascii", "replace")
            i += 4 + n
    except (IndexError, struct.error):
        pass
    return ""


class TLS(socketserver.BaseRequestHandler):
    def handle(self):
        log("sni.log", sni_of(self.request.recv(16384)))


class HTTPSReq(http.server.BaseHTTPRequestHandler):
    """The fake HTTPS API ($UPSTREAM_TLS): logs every request as one JSON line to
    STATEDIR/https.log (method, path, headers, body length, the SNI) after reading its whole body,
    and answers "ok METHOD PATH" (/big/N: N bytes; /chunked: a chunked answer). A body cut short (the relay's cap) is not logged."""
    protocol_version = "HTTP/1.1"

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            want = int(self.headers.get("Content-Length", "0"))
            got = len(self.rfile.read(want))
            if got != want:
                raise ValueError("short body")
            return got
        n = 0
        while True:
            size = int(self.rfile.readline().split(b";")[0], 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b""):
                    pass
                return n
            n += len(self.rfile.read(size))
            if self.rfile.readline() != b"\r\n":
                raise ValueError("bad chunk")

    def answer(self):
        try:
            n = self.read_body()
        except ValueError:
            self.close_connection = True
            return
        log("https.log", json.dumps({"method": self.command, "path": self.path, "body": n,
                                     "sni": getattr(self.request, "sni", None),
                                     "headers": [[k, v] for k, v in self.headers.items()]}))
        if WWW and self.command in ("GET", "HEAD") and self.path.startswith(WWW_PREFIXES):
            return self.www()
        if self.path == "/chunked":  # a chunked response, in pieces
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b"first ", b"second ", b"third\n"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
                time.sleep(0.05)
            self.wfile.write(b"0\r\n\r\n")
            return
        body = f"ok {self.command} {self.path}\n".encode()
        if self.path.startswith("/big/"):  # /big/N: N bytes, more than the relay buffers
            body = b"z" * int(self.path[5:])
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def www(self):
        """$UPSTREAM_WWW: the files under DIR/git/, DIR/simple/, DIR/files/, DIR/npm/"""
        rel = self.path.split("?")[0].lstrip("/")
        if rel.endswith("/"):
            rel += "index.html"
        local = os.path.join(WWW, rel)
        data = www_file(self.path)
        self.send_response(200 if data is not None else 404)
        base = os.path.basename(local)
        ctype = ("text/html" if base.endswith(".html") else
                 "application/json" if base.endswith(".json") or (rel.startswith("npm/") and "." not in base)
                 else "application/octet-stream")
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data or b"")))
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = answer

    def log_message(self, *args):
        pass


WWW = os.path.realpath(os.environ["UPSTREAM_WWW"]) if os.environ.get("UPSTREAM_WWW") else None
WWW_PREFIXES = ("/git/", "/simple/", "/files/", "/npm/")


def www_file(path):
    """the bytes of $UPSTREAM_WWW/PATH (query dropped; a directory's index.html), None when not a
    file below it"""
    rel = path.split("?")[0].lstrip("/")
    if rel.endswith("/"):
        rel += "index.html"
    local = os.path.realpath(os.path.join(WWW, rel))
    return open(local, "rb").read() if local.startswith(WWW + "/") and os.path.isfile(local) else None


def tls_contexts():
    """$UPSTREAM_TLS: "name=cert:key,..." (the first is the default): one server context per name"""
    import ssl
    ctxs = {}
    for item in os.environ.get("UPSTREAM_TLS", "").split(","):
        if item:
            name, files = item.split("=", 1)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*files.split(":"))
            ctxs.setdefault("", ctx)
            ctxs[name] = ctx
    if ctxs:
        def pick(sock, name, _ctx):
            sock.sni = name
            sock.context = ctxs.get(name or "", ctxs[""])
        ctxs[""].sni_callback = pick
    return ctxs


CTXS = tls_contexts()


class HTTPS(socketserver.BaseRequestHandler):
    def handle(self):
        try:
            s = CTXS[""].wrap_socket(self.request, server_side=True)
        except OSError:
            return
        HTTPSReq(s, self.client_address, self.server)


class UDPCount(socketserver.BaseRequestHandler):
    def handle(self):
        log("udp.log", self.client_address[0])


class T(socketserver.ThreadingMixIn):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # the listen backlog (socketserver's default 5 dropped 100 parallel SYNs)


def serve(kind, handler, family, port):
    base = socketserver.UDPServer if kind == "udp" else socketserver.TCPServer
    cls = type("S", (T, base), {"address_family": family})
    srv = cls(("::" if family == socket.AF_INET6 else "0.0.0.0", port), handler, bind_and_activate=False)
    if family == socket.AF_INET6:
        srv.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    srv.server_bind()
    srv.server_activate()
    threading.Thread(target=srv.serve_forever, daemon=True).start()


for fam in (socket.AF_INET, socket.AF_INET6):
    serve("udp", UDPDNS, fam, 53)
    serve("tcp", TCPDNS, fam, 53)
    serve("tcp", HTTPOrNaive, fam, 80)
    serve("tcp", HTTP, fam, 8080)
    serve("tcp", HTTPS if CTXS else TLS, fam, 443)
    serve("udp", UDPCount, fam, 9999)
open(os.path.join(STATE, "ready"), "w").close()
threading.Event().wait()
