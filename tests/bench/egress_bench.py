"""The `egress` scenario of tests/bench/bench.py (issue 7): what network.mode filtered costs.

The same container (python3 from the host's /usr, bound read-only) is run in a network namespace
the bench makes, alternately under a policy with `network.mode: filtered` (the name allowed: DNS
through the monitor's stub, TCP through the SNI/Host splice) and the same policy with
`network.mode: open`. Each run measures, inside the container:
  connect   TCP connect() to the name's address (filtered: answered by the splice's listener)
  request   a fresh connection + one small GET until the answer's last byte (filtered: the
            splice reads the Host, connects upstream, relays) - the latency an HTTP client sees
  download  one GET of 64 MiB (MiB/s)
  dns       one A query to the resolver address (filtered: redirected to the stub, which asks the
            upstream from the host's namespace; open: straight to the upstream)
  tls-request-sni / tls-download-sni    a fresh TLS connection + small GET, and 64 MiB over TLS,
            to a name the relay passes opaque after its SNI check (the upstream's own CA)
  tls-request-icpt / tls-download-icpt  the same to a network.credentials host, in a third
            container (`intercepted`, port 443 only): the TLS relay terminates and re-encrypts
  parallel  100 connections at once, each one small GET (wall time of all; failures counted)
  stream-delay / stream-delay-max  one connection, 40 pieces of 16 KiB 100 ms apart, each
            stamped with its send time: each piece's delay to the client, and the largest
With --egress-baseline (bench.py) a second agentsbx binary's runs alternate with this tree's.
Medians per run, then the median over the runs. The fake upstream is the tests' upstream.py in
its own namespace: veths to the container's namespace and to the host (the stub's way there), no
default route anywhere, IP forwarding never touched, addresses 203.0.113.128/25 and
198.51.100.128/26 (documentation ranges, which the DNS stub lets an answer name - private ones it
refuses, monitor/dns_rebind.h - and not the tests' halves of them, so a test run and the bench do
not meet)."""
import json, os, shutil, signal, statistics, subprocess, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
UPSTREAM = os.path.join(TOP, "tests", "integration", "egress", "upstream.py")
UP4, C4, HOSTUP4, HOST4 = "203.0.113.129", "203.0.113.130", "198.51.100.129", "198.51.100.130"
UP4B = "203.0.113.131"  # the intercepted name's address (another name there is refused: splice.c)
NAME, TLS_NAME, ICPT_NAME = "bench.test", "tls.bench.test", "api.bench.test"
STREAM = (40, 16384, 100)  # the streaming case: 40 pieces of 16 KiB, 100 ms apart (4 s)

CLIENT = r'''
import json, socket, ssl, struct, sys, threading, time
a = json.loads(sys.argv[1])
name, n, size = a["name"], a["n"], a["bytes"]
def query(qid, qname):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in qname.split(".")) + b"\0" + struct.pack("!HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    t = time.perf_counter()
    s.sendto(q, (a["resolver"], 53))
    r = s.recv(512)
    dt = time.perf_counter() - t
    assert r[3] & 0xF == 0 and struct.unpack("!H", r[6:8])[0] >= 1, r
    return dt, socket.inet_ntoa(r[-4:])
def http_get(addr, path, host, tls=None, bufsize=65536):
    s = socket.create_connection((addr, 443 if tls else 80), timeout=10)
    if tls:
        s = tls.wrap_socket(s, server_hostname=host)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    got = 0
    while (b := s.recv(bufsize)):
        got += len(b)
    s.close()
    return got
parts = a["parts"]  # what this run measures: "plain", "sni", "icpt"
out = {"dns": [], "connect": [], "request": []}
if "plain" in parts:
    for i in range(n):
        dt, addr = query(i + 1, name)
        out["dns"].append(dt)
else:
    out = {}
if "sni" in parts:
    _, tls_addr = query(1000, a["tls_name"])
if "icpt" in parts:
    _, icpt_addr = query(1001, a["icpt_name"])
def tls_cases():
    if "sni" in parts:
        yield "sni", a["tls_name"], tls_addr, ssl.create_default_context(cafile=a["upstream_ca"])
    if "icpt" in parts:
        yield "icpt", a["icpt_name"], icpt_addr, ssl.create_default_context(cafile=a["icpt_ca"])
for i in range(n if "plain" in parts else 0):
    t = time.perf_counter()
    s = socket.create_connection((addr, 80), timeout=10)
    out["connect"].append(time.perf_counter() - t)
    s.close()
for i in range(n if "plain" in parts else 0):
    t = time.perf_counter()
    s = socket.create_connection((addr, 80), timeout=10)
    s.sendall(f"GET / HTTP/1.0\r\nHost: {name}\r\n\r\n".encode())
    while s.recv(65536):
        pass
    out["request"].append(time.perf_counter() - t)
    s.close()
out["stalls"] = 0
def download(fn):
    t = time.perf_counter()
    try:
        got = fn()
    except TimeoutError:
        out["stalls"] += 1  # no byte for the socket's timeout: counted, the rate is 0
        return 0.0
    dt = time.perf_counter() - t
    assert got >= size, got
    return size / dt / (1 << 20)
def plain():
    s = socket.create_connection((addr, 80), timeout=30)
    s.sendall(f"GET /bytes/{size} HTTP/1.0\r\nHost: {name}\r\n\r\n".encode())
    got = 0
    while (b := s.recv(1 << 20)):
        got += len(b)
    return got
if "plain" in parts:
    out["download"] = download(plain)
# TLS: the SNI-only name (relayed opaque; the upstream's own CA) and the intercepted one (the
# relay terminates TLS with the container's CA and re-encrypts; open: the upstream directly)
for key, host, ip, ctx in tls_cases():
    out["tls-request-" + key] = []
    for i in range(n):
        t = time.perf_counter()
        assert http_get(ip, "/", host, ctx) > 0
        out["tls-request-" + key].append(time.perf_counter() - t)
    out["tls-download-" + key] = download(lambda: http_get(ip, f"/big/{size}", host, ctx, 1 << 20))
if "plain" not in parts:
    print(json.dumps(out))
    sys.exit(0)
# 100 parallel connections at once, each one small GET read to its end (a package manager)
par = a["parallel"]
ok, errs = [], []
go = threading.Barrier(par + 1)
def one():
    go.wait()
    try:
        s = socket.create_connection((addr, 80), timeout=30)
        s.sendall(f"GET / HTTP/1.0\r\nHost: {name}\r\n\r\n".encode())
        got = b""
        while (b := s.recv(65536)):
            got += b
        s.close()
        (ok if got.endswith(b"ok " + name.encode() + b"\n") else errs).append(len(got))
    except OSError as e:
        errs.append(repr(e))
th = [threading.Thread(target=one) for _ in range(par)]
for x in th:
    x.start()
go.wait()
t = time.perf_counter()
for x in th:
    x.join()
out["parallel"] = time.perf_counter() - t
out["parallel-failed"] = len(errs)
# streaming: one connection, COUNT pieces MS ms apart; each piece's delay from the upstream's
# send (the clocks are the same: namespaces share CLOCK_REALTIME) and the largest gap
count, piece, ms = a["stream"]
s = socket.create_connection((addr, 80), timeout=30)
s.sendall(f"GET /trickle/{count}/{piece}/{ms} HTTP/1.0\r\nHost: {name}\r\n\r\n".encode())
buf, head, delays, arrivals = b"", None, [], []
t = time.perf_counter()
while (b := s.recv(1 << 16)):
    buf += b
    if head is None:
        if b"\r\n\r\n" not in buf:
            continue
        head, buf = buf.split(b"\r\n\r\n", 1)
    while len(buf) >= piece:
        now = time.time()
        delays.append(now - struct.unpack("!d", buf[:8])[0])
        arrivals.append(now)
        buf = buf[piece:]
assert len(delays) == count, len(delays)
out["stream-delay"] = delays
out["stream-gap"] = max(b - a for a, b in zip(arrivals, arrivals[1:]))
out["stream-rate"] = count * piece / (time.perf_counter() - t) / (1 << 20)
print(json.dumps(out))
'''


def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True)


class Lab:
    """Upstream namespace `up`, container namespace `c`; torn down by close()."""

    def __init__(self, work):
        with open("/proc/sys/net/ipv4/ip_forward") as f:
            if f.read().strip() != "0":
                raise RuntimeError("net.ipv4.ip_forward is on: refusing to build the bench network")
        tag = f"{os.getpid() % 100000}"
        self.up, self.c, self.vh = f"asbxb-{tag}-up", f"asbxb-{tag}-c", f"ab{tag}h"
        self.state = os.path.join(work, "upstream")
        os.makedirs(self.state)
        self.proc = None
        try:
            sh("ip", "netns", "add", self.up)
            sh("ip", "netns", "add", self.c)
            sh("ip", "link", "add", f"ab{tag}u", "netns", self.up, "type", "veth", "peer", "name", f"ab{tag}c",
               "netns", self.c)
            sh("ip", "-n", self.up, "addr", "add", f"{UP4}/25", "dev", f"ab{tag}u")
            sh("ip", "-n", self.up, "addr", "add", f"{UP4B}/25", "dev", f"ab{tag}u")
            sh("ip", "-n", self.c, "addr", "add", f"{C4}/25", "dev", f"ab{tag}c")
            for ns, dev in ((self.up, f"ab{tag}u"), (self.c, f"ab{tag}c")):
                sh("ip", "-n", ns, "link", "set", dev, "up")
                sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "link", "add", self.vh, "type", "veth", "peer", "name", f"ab{tag}x", "netns", self.up)
            sh("ip", "-n", self.up, "addr", "add", f"{HOSTUP4}/26", "dev", f"ab{tag}x")
            sh("ip", "-n", self.up, "link", "set", f"ab{tag}x", "up")
            sh("ip", "addr", "add", f"{HOST4}/26", "dev", self.vh)
            sh("ip", "link", "set", self.vh, "up")
            route = subprocess.run(["ip", "-o", "route", "get", HOSTUP4], capture_output=True, text=True).stdout
            if f"dev {self.vh} " not in route:
                raise RuntimeError(f"the host would not reach {HOSTUP4} over the bench's veth: {route}")
            zone = os.path.join(self.state, "zone.json")
            with open(zone, "w") as f:
                json.dump({NAME: {"A": [UP4], "ttl": 600}, TLS_NAME: {"A": [UP4], "ttl": 600},
                           ICPT_NAME: {"A": [UP4B], "ttl": 600}}, f)
            self.certs = make_certs(os.path.join(work, "certs"))
            cert = f"{self.certs}/server.pem:{self.certs}/server.key"
            env = dict(os.environ, UPSTREAM_TLS=f"{TLS_NAME}={cert},{ICPT_NAME}={cert}")
            self.proc = subprocess.Popen(["ip", "netns", "exec", self.up, "/usr/bin/python3", UPSTREAM, self.state, zone],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            deadline = time.monotonic() + 30
            while not os.path.exists(os.path.join(self.state, "ready")):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("upstream.py did not start")
                time.sleep(0.05)
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.proc:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        subprocess.run(["ip", "link", "del", self.vh], capture_output=True)
        for ns in (self.up, self.c):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def make_certs(d):
    """The upstream's own CA (the host config's upstreamCaFile) and one certificate for both TLS names."""
    os.makedirs(d)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    sh("openssl", "req", "-x509", *ec, "-days", "2", "-subj", "/CN=agentsbx bench upstream CA", "-keyout",
       f"{d}/ca.key", "-out", f"{d}/ca.pem", "-addext", "basicConstraints=critical,CA:TRUE",
       "-addext", "keyUsage=critical,keyCertSign")
    sh("openssl", "req", *ec, "-subj", f"/CN={TLS_NAME}", "-keyout", f"{d}/server.key", "-out", f"{d}/server.csr")
    with open(f"{d}/ext.cnf", "w") as f:
        f.write(f"subjectAltName=DNS:{TLS_NAME},DNS:{ICPT_NAME}\nextendedKeyUsage=serverAuth\n")
    sh("openssl", "x509", "-req", "-in", f"{d}/server.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
       "-CAcreateserial", "-days", "2", "-extfile", f"{d}/ext.cnf", "-out", f"{d}/server.pem")
    return d


def make_bundle(d, runtime, netns, args, upstream_ca):
    root = os.path.join(d, "rootfs")
    for x in ("etc", "etc/ssl/certs", "proc", "sys", "dev", "tmp", "usr", "egress", "run", "workspace"):
        os.makedirs(os.path.join(root, x), exist_ok=True)
    for link in ("bin", "sbin", "lib", "lib64"):
        os.symlink(f"usr/{link}", os.path.join(root, link))
    with open(os.path.join(root, "etc", "resolv.conf"), "w") as f:
        f.write(f"nameserver {UP4}\n")
    with open(os.path.join(root, "egress", "client.py"), "w") as f:
        f.write(CLIENT)
    shutil.copy(upstream_ca, os.path.join(root, "egress", "upstream-ca.pem"))
    subprocess.run([runtime, "spec", "--bundle", d], check=True)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = args
    cfg["process"]["capabilities"].pop("ambient", None)
    cfg["mounts"].append({"destination": "/usr", "type": "bind", "source": "/usr",
                          "options": ["rbind", "ro", "nosuid", "nodev"]})
    cfg["linux"]["namespaces"] = [n for n in cfg["linux"]["namespaces"] if n["type"] != "network"]
    cfg["linux"]["namespaces"].append({"type": "network", "path": f"/run/netns/{netns}"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


METRICS = (  # key, unit, scale, lower is better, note
    ("connect", "µs", 1e6, True, "TCP connect() to the allowed name's address (filtered: the splice accepts)"),
    ("request", "µs", 1e6, True, "fresh connection + small GET to the last byte (filtered: via the SNI/Host splice)"),
    ("download", "MiB/s", 1, False, "one 64 MiB GET over plain HTTP (filtered: relayed by the splice)"),
    ("dns", "µs", 1e6, True, "one A query (filtered: the stub, which asks the upstream; open: the upstream)"),
    ("tls-request-sni", "µs", 1e6, True, "fresh TLS connection + small GET (filtered: SNI checked, then relayed opaque)"),
    ("tls-request-icpt", "µs", 1e6, True, "fresh TLS connection + small GET to a network.credentials host "
     "(filtered: the TLS relay terminates, checks, injects, re-encrypts)"),
    ("tls-download-sni", "MiB/s", 1, False, "one 64 MiB GET over TLS, SNI-only path"),
    ("tls-download-icpt", "MiB/s", 1, False, "one 64 MiB GET over TLS, intercepted path"),
    ("parallel", "ms", 1e3, True, "100 connections at once, each one small GET to its last byte: wall time of all"),
    ("stream-delay", "µs", 1e6, True, f"streaming, one connection: {STREAM[0]} pieces of {STREAM[1]} B "
     f"{STREAM[2]} ms apart, each piece's delay from the upstream's send to the client's recv"),
    ("stream-delay-max", "µs", 1e6, True, "the same: the largest delay of a piece (a stall shows here)"),
)


def run(bench, rounds, n=20, size=64 << 20, baseline=None):
    """Records egress-KEY for every METRICS key in bench.results: `filtered` and `open` runs
    alternated; with `baseline` (another agentsbx binary) its runs too (labels `filtered@base`,
    `open@base`), alternated with this tree's, binary by binary inside each round."""
    binaries = [("", os.path.join(TOP, "agentsbx"))] + ([("@base", os.path.abspath(baseline))] if baseline else [])
    work = tempfile.mkdtemp(prefix="agentsbx-bench-egress-")
    lab = None
    try:
        lab = Lab(work)
        args = {"name": NAME, "tls_name": TLS_NAME, "icpt_name": ICPT_NAME, "n": n, "bytes": size, "resolver": UP4,
                "parallel": bench.a.parallel, "stream": STREAM, "upstream_ca": "/egress/upstream-ca.pem"}
        # the intercepted host's credential: a secret of the bench's own (root-owned, 0700)
        secrets = os.path.join(work, "secrets")
        os.makedirs(secrets, mode=0o700)
        with open(os.path.join(secrets, "tok"), "w") as f:
            f.write("bench-secret-value\n")
        os.chmod(os.path.join(secrets, "tok"), 0o600)
        hostcfg = os.path.join(work, "hostconfig.json")
        with open(hostcfg, "w") as f:
            json.dump({"secretsDir": secrets, "upstreamCaFile": os.path.join(lab.certs, "ca.pem")}, f)
        pols, bundles = {}, {}
        # filtered: plain HTTP and the SNI-only TLS name; intercepted: the network.credentials
        # host (credentials only ride TLS: a policy of its own, port 443 only); open: all of them
        for mode in ("filtered", "intercepted", "open"):
            net = {"mode": "open"}
            if mode == "filtered":
                net = {"mode": mode, "allowedDomains": [NAME, TLS_NAME], "ports": [80, 443]}
            elif mode == "intercepted":
                net = {"mode": "filtered", "allowedDomains": [ICPT_NAME], "ports": [443],
                       "credentials": [{"host": ICPT_NAME, "header": "X-Bench-Key", "value": "${secret:tok}"}]}
            pols[mode] = os.path.join(work, f"{mode}.json")
            with open(pols[mode], "w") as f:
                json.dump({"version": 1, "extends": "agent", "network": net, "approvals": {"network": "deny"}}, f)
            # intercepted: the leaf is the container's CA's, in the bundle the runtime binds at
            # the distro path; open: the upstream's own certificate
            a = dict(args, icpt_ca="/etc/ssl/certs/ca-certificates.crt" if mode == "intercepted" else args["upstream_ca"],
                     parts={"filtered": ["plain", "sni"], "intercepted": ["icpt"], "open": ["plain", "sni", "icpt"]}[mode])
            bundles[mode] = os.path.join(work, f"bundle-{mode}")
            make_bundle(bundles[mode], binaries[0][1], lab.c, ["/usr/bin/python3", "/egress/client.py", json.dumps(a)],
                        os.path.join(lab.certs, "ca.pem"))
        env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)
        labels = [mode + tag for tag, _ in binaries for mode in pols]
        per = {lb: {k[0]: [] for k in METRICS} for lb in labels}
        failed = {lb: 0 for lb in labels}
        stalls = {lb: 0 for lb in labels}
        for i in range(rounds + 1):  # the first round warms caches up and is not counted
            for tag, runtime in (binaries if i % 2 == 0 else binaries[::-1]):
                for mode in pols:
                    cid = f"bench-egress-{os.getpid()}-{i}-{mode}{tag.replace('@', '-')}"
                    r = subprocess.run([runtime, "--root", os.path.join(work, "state"), "--config", hostcfg,
                                        "--policy", pols[mode], "--audit-dir", os.path.join(work, "audit"),
                                        "run", "--bundle", bundles[mode], cid],
                                       capture_output=True, text=True, env=env, timeout=600)
                    if r.returncode != 0:
                        raise RuntimeError(f"egress {mode}{tag} run failed ({r.returncode}): {r.stderr.strip()[-600:]}")
                    # the table stays in a joined namespace after the container (the engine's
                    # namespace): take it out so the next `open` run meets a plain namespace
                    subprocess.run(["ip", "netns", "exec", lab.c, "nft", "delete", "table", "inet", "agentsbx"],
                                   capture_output=True)
                    out = json.loads(r.stdout.strip().splitlines()[-1])
                    if i == 0:
                        continue
                    lb = mode + tag
                    failed[lb] += out.get("parallel-failed", 0)
                    stalls[lb] += out.get("stalls", 0)
                    if "stream-delay" in out:
                        out["stream-delay-max"] = max(out["stream-delay"])
                    for key, *_ in METRICS:
                        if key in out:
                            v = out[key]
                            per[lb][key].append(statistics.median(v) if isinstance(v, list) else v)
        for key, unit, scale, lower, note in METRICS:
            bench.record(f"egress-{key}", unit, {lb: per[lb][key] for lb in labels if per[lb][key]}, scale,
                         lower_better=lower,
                         note=f"{note}; {'median of ' + str(n) if key in ('connect', 'request', 'dns') or key.startswith('tls-request') else 'one'} "
                              f"per run, {rounds} runs alternated")
            for tag, _ in binaries:
                mode = "intercepted" if key.endswith("-icpt") else "filtered"
                f, o = (statistics.median(per[m + tag][key]) for m in (mode, "open"))
                print(f"  {mode}{tag} / open{tag}: {f / o:5.2f}x")
        for tag, _ in binaries:
            for k in ("tls-request", "tls-download"):
                icpt = statistics.median(per["intercepted" + tag][f"{k}-icpt"])
                sni = statistics.median(per["filtered" + tag][f"{k}-sni"])
                print(f"egress-{k}{tag}: intercepted / SNI-only {icpt / sni:5.2f}x")
        bench.results["egress-parallel-failed"] = {"unit": "connections", "note": "of the 100 parallel ones, "
                                                   "over all counted runs: refused, reset or cut short",
                                                   "runtimes": failed}
        bench.results["egress-download-stalls"] = {"unit": "downloads", "note": "64 MiB downloads that received "
                                                   "nothing for 10 s (counted as 0 MiB/s), over all counted runs",
                                                   "runtimes": stalls}
        print(f"egress-parallel-failed: {failed}\negress-download-stalls: {stalls}")
    finally:
        if lab:
            lab.close()
        shutil.rmtree(work, ignore_errors=True)
