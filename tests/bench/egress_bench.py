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
NAME = "bench.test"

CLIENT = r'''
import json, socket, struct, sys, time
a = json.loads(sys.argv[1])
name, n, size = a["name"], a["n"], a["bytes"]
def query(qid):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack("!HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    t = time.perf_counter()
    s.sendto(q, (a["resolver"], 53))
    r = s.recv(512)
    dt = time.perf_counter() - t
    assert r[3] & 0xF == 0 and struct.unpack("!H", r[6:8])[0] >= 1, r
    return dt, socket.inet_ntoa(r[-4:])
out = {"dns": [], "connect": [], "request": []}
for i in range(n):
    dt, addr = query(i + 1)
    out["dns"].append(dt)
for i in range(n):
    t = time.perf_counter()
    s = socket.create_connection((addr, 80), timeout=10)
    out["connect"].append(time.perf_counter() - t)
    s.close()
for i in range(n):
    t = time.perf_counter()
    s = socket.create_connection((addr, 80), timeout=10)
    s.sendall(f"GET / HTTP/1.0\r\nHost: {name}\r\n\r\n".encode())
    while s.recv(65536):
        pass
    out["request"].append(time.perf_counter() - t)
    s.close()
s = socket.create_connection((addr, 80), timeout=30)
t = time.perf_counter()
s.sendall(f"GET /bytes/{size} HTTP/1.0\r\nHost: {name}\r\n\r\n".encode())
got = 0
while (b := s.recv(1 << 20)):
    got += len(b)
dt = time.perf_counter() - t
assert got > size, got
out["download"] = size / dt / (1 << 20)
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
                json.dump({NAME: {"A": [UP4], "ttl": 600}}, f)
            self.proc = subprocess.Popen(["ip", "netns", "exec", self.up, "/usr/bin/python3", UPSTREAM, self.state, zone],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


def make_bundle(d, runtime, netns, args):
    root = os.path.join(d, "rootfs")
    for x in ("etc", "proc", "sys", "dev", "tmp", "usr", "egress", "run", "workspace"):
        os.makedirs(os.path.join(root, x), exist_ok=True)
    for link in ("bin", "sbin", "lib", "lib64"):
        os.symlink(f"usr/{link}", os.path.join(root, link))
    with open(os.path.join(root, "etc", "resolv.conf"), "w") as f:
        f.write(f"nameserver {UP4}\n")
    with open(os.path.join(root, "egress", "client.py"), "w") as f:
        f.write(CLIENT)
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


def run(bench, rounds, n=20, size=64 << 20):
    """Records egress-connect, egress-request, egress-download and egress-dns in bench.results."""
    runtime = os.path.join(TOP, "agentsbx")
    work = tempfile.mkdtemp(prefix="agentsbx-bench-egress-")
    lab = None
    try:
        lab = Lab(work)
        args = {"name": NAME, "n": n, "bytes": size, "resolver": UP4}
        b = os.path.join(work, "bundle")
        make_bundle(b, runtime, lab.c, ["/usr/bin/python3", "/egress/client.py", json.dumps(args)])
        pols = {}
        for mode in ("filtered", "open"):
            net = {"mode": mode, "allowedDomains": [NAME], "ports": [80]} if mode == "filtered" else {"mode": "open"}
            pols[mode] = os.path.join(work, f"{mode}.json")
            with open(pols[mode], "w") as f:
                json.dump({"version": 1, "extends": "agent", "network": net, "approvals": {"network": "deny"}}, f)
        env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)
        per = {m: {"connect": [], "request": [], "download": [], "dns": []} for m in pols}
        for i in range(rounds + 1):  # the first round warms caches up and is not counted
            for mode in pols:
                cid = f"bench-egress-{os.getpid()}-{i}-{mode}"
                r = subprocess.run([runtime, "--root", os.path.join(work, "state"), "--policy", pols[mode],
                                    "--audit-dir", os.path.join(work, "audit"), "run", "--bundle", b, cid],
                                   capture_output=True, text=True, env=env, timeout=300)
                if r.returncode != 0:
                    raise RuntimeError(f"egress {mode} run failed ({r.returncode}): {r.stderr.strip()[-300:]}")
                # the table stays in a joined namespace after the container (the engine's
                # namespace): take it out so the next `open` run meets a plain namespace
                subprocess.run(["ip", "netns", "exec", lab.c, "nft", "delete", "table", "inet", "agentsbx"],
                               capture_output=True)
                out = json.loads(r.stdout.strip().splitlines()[-1])
                if i == 0:
                    continue
                for k in ("connect", "request", "dns"):
                    per[mode][k].append(statistics.median(out[k]))
                per[mode]["download"].append(out["download"])
        label = {"filtered": "filtered", "open": "open"}
        for key, unit, scale, lower, note in (
                ("connect", "µs", 1e6, True, "TCP connect() to the allowed name's address (filtered: the splice accepts)"),
                ("request", "µs", 1e6, True, "fresh connection + small GET to the last byte (filtered: via the SNI/Host splice)"),
                ("download", "MiB/s", 1, False, f"one {size >> 20} MiB GET (filtered: relayed by the splice)"),
                ("dns", "µs", 1e6, True, "one A query (filtered: the stub, which asks the upstream; open: the upstream)")):
            bench.record(f"egress-{key}", unit, {label[m]: per[m][key] for m in pols}, scale, lower_better=lower,
                         note=f"{note}; {'one' if key == 'download' else f'median of {n}'} per run, "
                              f"{rounds} runs alternated")
            f, o = (statistics.median(per[m][key]) for m in ("filtered", "open"))
            print(f"  filtered / open: {f / o:5.2f}x")
    finally:
        if lab:
            lab.close()
        shutil.rmtree(work, ignore_errors=True)
