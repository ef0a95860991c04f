#!/usr/bin/python3
"""In-container client for test_egress.py: runs the actions given as one JSON list on argv[1]
and prints one JSON list of results (the container's own view, never the runtime's report).

Actions: ["connect", host, port] | ["udp", host, port] | ["resolve", name] |
         ["http", name, port] (resolve + GET with Host: name) | ["tls", name] (resolve + a
         ClientHello with SNI name) | ["loopback"] (listen on 127.0.0.1 and connect to it) |
         ["run", argv...] (exit code and output of a program) | ["rawdns", server, name] (one
         A query sent to server:53 directly; its rcode and its A records' TTLs) | ["tcpdns", server, name] (the same over TCP) |
         ["http_as", addr, port, host] / ["tls_as", addr, sni] (a literal address, a name of our choosing) |
         ["http_reqs", addr, port, [raw request, ...], pipelined] (several requests on ONE
         connection: one after the other, each answer awaited (a request given as a list of strings
         is sent in those pieces, 0.2 s apart), or all sent at once; the status
         line and X-Agentsbx-Blocked of every answer until the server closes) |
         ["raw", addr] (an ICMP echo from a raw socket) | ["dnsmsg", server, hex, "udp"|"tcp"] (a DNS
         message of the test's making, byte for byte; the answer's rcode, counts, id, question) |
         ["http_expect", addr, port, head, body] (the body sent after the server's 100 Continue) |
         ["flood", addr, port, n] (n non-blocking TCP connects, each socket closed at once: one SYN
         each, as fast as Python goes; how many connect calls returned) |
         ["https", name, cafile, request, alpn, chunks] (one request over verified TLS: the answer) |
         ["https_count", name, cafile, request] (the same, the answer's bytes counted, not kept:
         its status line and how many bytes came) |
         ["wait_file", path] (until path exists: the test acts on the host meanwhile) |
         ["at", secs] (sleep until secs after the client started; the action's "at" is when it ended) |
         ["hold", "hello"|"tls"|"noread", name, cafile, request] (a connection left stalled)"""
import errno
import json
import os
import socket
import ssl
import subprocess
import sys
import time

START = time.monotonic()


def err_name(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if getattr(e, "errno", None) else type(e).__name__


def timed(fn):
    t = time.monotonic()
    try:
        r = {"ok": True, **(fn() or {})}
    except (OSError, ssl.SSLError) as e:
        r = {"ok": False, "error": err_name(e) if not isinstance(e, socket.gaierror) else f"gai:{e.args[0]}",
             "msg": str(e)}
    r["secs"] = round(time.monotonic() - t, 3)
    return r


def connect(host, port):
    s = socket.create_connection((host, int(port)), timeout=10)
    s.close()


def udp(host, port):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.connect((host, int(port)))
    for _ in range(3):
        s.send(b"ping")
    try:
        s.recv(16)  # an ICMP error queued by the reject surfaces here
    except socket.timeout:
        pass


def resolve(name):
    infos = socket.getaddrinfo(name, 80, proto=socket.IPPROTO_TCP)
    return {"addrs": sorted({i[4][0] for i in infos})}


def http(name, port):
    addrs = resolve(name)["addrs"]
    s = socket.create_connection((addrs[0], int(port)), timeout=10)
    s.sendall(f"GET / HTTP/1.0\r\nHost: {name}\r\n\r\n".encode())
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    s.close()
    return {"addr": addrs[0], "response": data.decode("latin-1")}


def tls(name):
    addrs = resolve(name)["addrs"]
    s = socket.create_connection((addrs[0], 443), timeout=10)
    ctx = ssl.create_default_context()
    try:
        ctx.wrap_socket(s, server_hostname=name)
    except (ssl.SSLError, OSError) as e:
        return {"addr": addrs[0], "handshake": err_name(e) if isinstance(e, OSError) else "ssl-error"}
    return {"addr": addrs[0], "handshake": "done"}


def http_as(addr, port, host):
    """A GET to a literal address with a Host header of our choosing (the shared-address case)."""
    s = socket.create_connection((addr, int(port)), timeout=10)
    s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    s.close()
    return {"response": data.decode("latin-1")}


def tls_as(addr, sni):
    """A ClientHello with SNI `sni` to a literal address (certificate checks off: only the
    handshake's first flight matters)."""
    s = socket.create_connection((addr, 443), timeout=10)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        ctx.wrap_socket(s, server_hostname=sni)
    except ssl.SSLError:
        return {"handshake": "ssl-error"}
    except OSError as e:
        return {"handshake": err_name(e)}
    return {"handshake": "done"}


def read_response(f):
    """One HTTP response from file f: (status line, X-Agentsbx-Blocked or None), None at EOF."""
    status = f.readline()
    if not status:
        return None
    length, blocked = 0, None
    while (line := f.readline()) not in (b"\r\n", b"\n", b""):
        k, _, v = line.decode("latin-1").partition(":")
        if k.lower() == "content-length":
            length = int(v)
        if k.lower() == "x-agentsbx-blocked":
            blocked = v.strip()
    f.read(length)
    return [status.decode("latin-1").strip(), blocked]


def http_reqs(addr, port, reqs, pipelined=False):
    s = socket.create_connection((addr, int(port)), timeout=10)
    f = s.makefile("rb")
    out = []
    try:
        if pipelined:
            s.sendall("".join(reqs).encode("latin-1"))
        for r in reqs:
            if not pipelined:
                for piece in ([r] if isinstance(r, str) else r):  # a list: pieces, 0.2 s apart
                    s.sendall(piece.encode("latin-1"))
                    if not isinstance(r, str):
                        time.sleep(0.2)
            resp = read_response(f)
            if resp is None:
                break
            out.append(resp)
        closed = read_response(f) is None
    except OSError as e:
        return {"responses": out, "closed": err_name(e)}
    return {"responses": out, "closed": closed}


def http_expect(addr, port, head, body):
    """`Expect: 100-continue` as curl does it: the head, then the body only after the server's
    100 (or 3 s); the status line of every answer until the server closes."""
    s = socket.create_connection((addr, int(port)), timeout=10)
    f = s.makefile("rb")
    s.sendall(head.encode("latin-1"))
    s.settimeout(3)
    try:
        interim = read_response(f)
    except OSError:
        interim = None
    s.settimeout(10)
    s.sendall(body.encode("latin-1"))
    out = [interim[0] if interim else None]
    try:
        while (r := read_response(f)) is not None:
            out.append(r[0])
    except OSError as e:
        out.append(err_name(e))
    return {"statuses": out}


def http_expect_now(addr, port, head, body, wait=3, half_close=False):
    """`Expect: 100-continue` with the body (or its start) sent right after the head, by a
    client that does not wait for the 100 (`half_close`: then shuts its sending side down):
    every byte the server sends until it closes or `wait` s pass; the socket is closed then."""
    s = socket.create_connection((addr, int(port)), timeout=10)
    s.sendall((head + body).encode("latin-1"))
    if half_close:
        s.shutdown(socket.SHUT_WR)
    s.settimeout(float(wait))
    data = b""
    try:
        while (chunk := s.recv(65536)):
            data += chunk
    except OSError as e:
        closed = err_name(e)
    else:
        closed = "eof"
    s.close()
    text = data.decode("latin-1")
    return {"continues": text.count("100 Continue"), "bytes": len(data), "closed": closed,
            "statuses": [ln for ln in text.split("\r\n") if ln.startswith("HTTP/1.")]}


def raw(addr):
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_RAW, socket.IPPROTO_ICMPV6 if fam == socket.AF_INET6 else socket.IPPROTO_ICMP)
    s.sendto(bytes([128 if fam == socket.AF_INET6 else 8, 0, 0, 0, 0, 1, 0, 1]), (addr, 0))


def rawdns(server, name):
    """A query sent straight to a resolver address of our choosing (not /etc/resolv.conf)."""
    import struct
    q = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack("!HH", 1, 1)
    s = socket.socket(socket.AF_INET6 if ":" in server else socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(q, (server, 53))
    r = s.recv(4096)
    return {"rcode": r[3] & 0xF, "answers": struct.unpack("!H", r[6:8])[0], "ttls": a_ttls(r)}


def a_ttls(r):
    """The TTL of every A record of the answer r (names may be compressed)."""
    import struct

    def skip_name(i):
        while r[i]:
            if r[i] >= 0xC0:
                return i + 2
            i += 1 + r[i]
        return i + 1
    i, ttls = skip_name(12) + 4, []
    for _ in range(struct.unpack("!H", r[6:8])[0]):
        i = skip_name(i)
        rtype, _, ttl, rdlen = struct.unpack("!HHIH", r[i:i + 10])
        if rtype == 1:
            ttls.append(ttl)
        i += 10 + rdlen
    return ttls


def at(secs):
    time.sleep(max(0.0, START + secs - time.monotonic()))
    return {"at": round(time.monotonic() - START, 3)}


def tcpdns(server, name):
    """The same query over TCP (RFC 7766 framing: a 2-byte length before each message)."""
    import struct
    q = struct.pack("!HHHHHH", 0x4321, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack("!HH", 1, 1)
    s = socket.create_connection((server, 53), timeout=5)
    s.sendall(struct.pack("!H", len(q)) + q)
    data = b""
    while len(data) < 2 or len(data) < 2 + struct.unpack("!H", data[:2])[0]:
        b = s.recv(4096)
        if not b:
            raise ConnectionResetError(104, "closed before the answer")
        data += b
    r = data[2:]
    s.close()
    return {"rcode": r[3] & 0xF, "answers": struct.unpack("!H", r[6:8])[0], "id": struct.unpack("!H", r[:2])[0]}


def dnsmsg(server, hexmsg, proto):
    import struct
    q = bytes.fromhex(hexmsg)
    fam = socket.AF_INET6 if ":" in server else socket.AF_INET
    if proto == "udp":
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.settimeout(5)
        s.sendto(q, (server, 53))
        r = s.recv(65535)
    else:
        s = socket.create_connection((server, 53), timeout=5)
        s.sendall(struct.pack("!H", len(q)) + q)
        data = b""
        while len(data) < 2 or len(data) < 2 + struct.unpack("!H", data[:2])[0]:
            b = s.recv(4096)
            if not b:
                raise ConnectionResetError(104, "closed before the answer")
            data += b
        r = data[2:]
    s.close()
    i = 12
    while i < len(r) and r[i]:
        i += 1 + r[i]
    return {"rcode": r[3] & 0xF, "flags": struct.unpack("!H", r[2:4])[0], "answers": struct.unpack("!H", r[6:8])[0],
            "id": struct.unpack("!H", r[:2])[0], "question": r[12:i + 5].hex(), "len": len(r)}


def loopback():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    c = socket.create_connection(srv.getsockname(), timeout=5)
    c.close()
    srv.close()


def flood(host, port, n):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    done = 0
    for _ in range(int(n)):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect((host, int(port)))
        except OSError:
            pass  # EINPROGRESS, or the reset already in
        s.close()
        done += 1
    return {"sent": done}


def https(name, cafile, request, alpn=None, chunks=None):
    """One request over TLS to name:443, verified against cafile (the container's egress CA):
    `request` (a str, sent as is; with `chunks`, each chunk is sent after it, 0.1 s apart) ->
    the status line, the header lines and the body of the answer, read until the end."""
    addrs = resolve(name)["addrs"]
    ctx = ssl.create_default_context(cafile=cafile)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    s = ctx.wrap_socket(socket.create_connection((addrs[0], 443), timeout=10), server_hostname=name)
    proto = s.selected_alpn_protocol()
    s.sendall(request.encode())
    for c in chunks or []:
        time.sleep(0.1)
        try:
            s.sendall(c.encode())
        except OSError:
            break
    data = b""
    while True:
        try:
            b = s.recv(65536)
        except (ssl.SSLError, OSError):
            break
        if not b:
            break
        data += b
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    return {"status": lines[0], "headers": lines[1:], "body": body.decode("latin-1"),
            "alpn": proto}


def https_as(addr, sni, request):
    """One request over TLS to a literal address with SNI `sni` (certificates not checked: the
    fronting case, where only what reaches the server matters) -> the answer's status line, or
    how the connection ended."""
    s = socket.create_connection((addr, 443), timeout=10)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        s = ctx.wrap_socket(s, server_hostname=sni)
        s.sendall(request.encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except ssl.SSLError:
        return {"handshake": "ssl-error", "status": None}
    except OSError as e:
        return {"handshake": err_name(e), "status": None}
    finally:
        s.close()
    return {"handshake": "done", "status": data.decode("latin-1").split("\r\n")[0]}


def https_count(name, cafile, request):
    """One request over verified TLS to name:443; the answer is read to its end and counted (a
    big download without keeping it): the status line and the number of bytes after the head.
    Nothing for 10 s is an error (the socket's timeout)."""
    addrs = resolve(name)["addrs"]
    s = ssl.create_default_context(cafile=cafile).wrap_socket(socket.create_connection((addrs[0], 443), timeout=10),
                                                              server_hostname=name)
    s.sendall(request.encode())
    head, n = b"", None
    while (b := s.recv(1 << 20)):
        if n is None:
            head += b
            if b"\r\n\r\n" in head:
                head, _, rest = head.partition(b"\r\n\r\n")
                n = len(rest)
        else:
            n += len(b)
    s.close()
    return {"status": head.decode("latin-1").split("\r\n")[0], "bytes": n}


HELD = []


def hold(kind, name, cafile=None, request=None):
    """Open a connection to name:443 and leave it stalled for the rest of the run: "hello" (half a
    ClientHello), "tls" (the handshake done, then nothing), "noread" (a request sent, the answer
    never read)."""
    addrs = resolve(name)["addrs"]
    s = socket.create_connection((addrs[0], 443), timeout=10)
    if kind == "hello":
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    else:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s = ssl.create_default_context(cafile=cafile).wrap_socket(s, server_hostname=name)
        if kind == "noread":
            s.sendall(request.encode())
    HELD.append(s)


def wait_file(path, secs=30):
    deadline = time.monotonic() + secs
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(path)
        time.sleep(0.05)


def run(*argv):
    p = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    return {"rc": p.returncode, "out": p.stdout[-2000:], "err": p.stderr[-2000:]}


ACTIONS = {"connect": connect, "udp": udp, "resolve": resolve, "http": http, "tls": tls,
           "loopback": loopback, "run": run, "rawdns": rawdns, "tcpdns": tcpdns,
           "http_as": http_as, "tls_as": tls_as, "https_as": https_as, "http_reqs": http_reqs, "raw": raw, "dnsmsg": dnsmsg,
           "http_expect": http_expect, "http_expect_now": http_expect_now,
           "flood": flood, "https": https, "https_count": https_count, "wait_file": wait_file, "at": at,
           "hold": hold}
print(json.dumps([timed(lambda a=a: ACTIONS[a[0]](*a[1:])) for a in json.loads(sys.argv[1])]))
