"""Egress filtering (issue 7; POLICY.md §2 `network`, §3): the nftables table in the container's
network namespace, fresh or engine-given, and (later) the DNS stub of filtered mode.

A fake internet built by the test (TESTING.md "Network tests"): an "upstream" network namespace
and a "container" namespace joined by a veth pair, addresses of our choosing, no default route
anywhere, IP forwarding never touched. The upstream runs egress/upstream.py (DNS for test zones,
HTTP, a ClientHello reader, a UDP counter) and logs every query and connection, so a test can
prove that nothing reached it. The container runs egress/client.py with the host's /usr bound
read-only, and reports what it saw as JSON. No packet leaves loopback and these namespaces."""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# Documentation ranges (RFC 5737, RFC 3849): they route nowhere publicly, and unlike private
# ones the DNS stub lets an allowed name's answer name them (monitor/dns_rebind.h). 192.0.2.0/24
# is not used: CI machines put their own interface there.
UP4, UP4B, C4 = "203.0.113.1", "203.0.113.3", "203.0.113.2"
UP6, UP6B, C6 = "2001:db8:231:7::1", "2001:db8:231:7::3", "2001:db8:231:7::2"
# Python's http.server (never reads a request's body: egress/upstream.py Naive) on port 80 here
UP4N, UP6N = "203.0.113.4", "2001:db8:231:7::4"
# the upstream's side towards the host (the monitor's DNS stub forwards from the host namespace)
HOSTUP4, HOST4 = "198.51.100.1", "198.51.100.2"
# addresses an answer must not open (rebinding / SSRF), each served by the upstream namespace and
# routed to it from the container's: the cloud metadata address and a private (RFC 1918) one
META4, PRIV4, PRIV6 = "169.254.169.254", "10.231.7.1", "fd00:231:7::1"

pytestmark = [pytest.mark.agentsbx_only("agent policy network modes")]


def sh(*argv, check=True):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=check, timeout=60)


class Lab:
    def __init__(self, tag, state):
        self.up, self.c = f"asbxe-{tag}-up", f"asbxe-{tag}-c"
        self.vu, self.vc = f"ae{tag}u", f"ae{tag}c"
        self.vh, self.vx = f"ae{tag}h", f"ae{tag}x"  # host <-> upstream
        self.state = state
        self.zone_path = os.path.join(state, "zone.json")
        self.proc = None

    def zone(self, z):
        with open(self.zone_path + ".tmp", "w") as f:
            json.dump(z, f)
        os.rename(self.zone_path + ".tmp", self.zone_path)

    def log(self, name):
        p = os.path.join(self.state, name)
        return open(p).read().splitlines() if os.path.exists(p) else []

    def queries(self):
        return [line.split()[0] for line in self.log("queries.log")]


@pytest.fixture
def lab(tmp_path, lab_env):
    if not shutil.which("ip"):
        pytest.skip("iproute2 not installed")
    with open("/proc/sys/net/ipv4/ip_forward") as f:
        assert f.read().strip() == "0", "net.ipv4.ip_forward is on: refusing to build a test network"
    # the lab's addresses are fixed: two test runs at once (two checkouts, CI + a developer) take
    # turns, or one would route the other's host side
    lock = open("/run/agentsbx-egress-lab.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    tag = uuid.uuid4().hex[:6]
    state = str(tmp_path / "upstream")
    os.makedirs(state)
    lab = Lab(tag, state)
    lab.zone({})
    try:
        sh("ip", "netns", "add", lab.up)
        sh("ip", "netns", "add", lab.c)
        sh("ip", "link", "add", lab.vu, "netns", lab.up, "type", "veth", "peer", "name", lab.vc, "netns", lab.c)
        for ns, dev, a4, a6 in ((lab.up, lab.vu, (UP4, UP4B, UP4N), (UP6, UP6B, UP6N)), (lab.c, lab.vc, (C4,), (C6,))):
            for a in a4:
                sh("ip", "-n", ns, "addr", "add", f"{a}/25", "dev", dev)
            for a in a6:
                sh("ip", "-n", ns, "-6", "addr", "add", f"{a}/64", "dev", dev, "nodad")
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        for a in (META4, PRIV4):  # the "metadata server" and a private neighbour, one hop away
            sh("ip", "-n", lab.up, "addr", "add", f"{a}/32", "dev", lab.vu)
            sh("ip", "-n", lab.c, "route", "add", f"{a}/32", "dev", lab.vc)
        sh("ip", "-n", lab.up, "-6", "addr", "add", f"{PRIV6}/128", "dev", lab.vu, "nodad")
        sh("ip", "-n", lab.c, "-6", "route", "add", f"{PRIV6}/128", "dev", lab.vc)
        sh("ip", "link", "add", lab.vh, "type", "veth", "peer", "name", lab.vx, "netns", lab.up)
        sh("ip", "-n", lab.up, "addr", "add", f"{HOSTUP4}/25", "dev", lab.vx)
        sh("ip", "-n", lab.up, "link", "set", lab.vx, "up")
        sh("ip", "addr", "add", f"{HOST4}/25", "dev", lab.vh)
        sh("ip", "link", "set", lab.vh, "up")
        # never send to an address outside the lab: the host must reach the upstream over our veth
        route = sh("ip", "-o", "route", "get", HOSTUP4).stdout
        assert f"dev {lab.vh} " in route, f"the host would not reach {HOSTUP4} through the lab: {route}"
        lab.proc = subprocess.Popen(["ip", "netns", "exec", lab.up, "env", f"UPSTREAM_NAIVE={UP4N},{UP6N}",
                                     *[f"{k}={v}" for k, v in lab_env.items()], "python3",
                                     os.path.join(HERE, "egress", "upstream.py"), state, lab.zone_path])
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(state, "ready")):
            assert lab.proc.poll() is None, "upstream.py died"
            assert time.monotonic() < deadline, "upstream.py did not start"
            time.sleep(0.05)
        yield lab
    finally:
        if lab.proc:
            lab.proc.send_signal(signal.SIGKILL)
            lab.proc.wait()
        sh("ip", "link", "del", lab.vh, check=False)
        sh("ip", "netns", "del", lab.up, check=False)
        sh("ip", "netns", "del", lab.c, check=False)
        lock.close()


@pytest.fixture(scope="session")
def usr_template(session_dir):
    """A rootfs of symlinks onto /usr (bound read-only from the host by each bundle): python3
    and nft inside the container, with /etc files of the test's own."""
    root = os.path.join(session_dir, "egress-rootfs")
    if os.path.exists(root):
        return root
    for d in ("etc", "proc", "sys", "dev", "tmp", "usr", "root", "workspace", "egress", "run", "var"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    for link in ("bin", "sbin", "lib", "lib64"):
        os.symlink(f"usr/{link}", os.path.join(root, link))
    files = {"passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
             "group": "root:x:0:\nnogroup:x:65534:\n", "hosts": "127.0.0.1 localhost\n::1 localhost\n",
             "nsswitch.conf": "hosts: files dns\n", "resolv.conf": f"nameserver {UP4}\n"}
    for name, text in files.items():
        with open(os.path.join(root, "etc", name), "w") as f:
            f.write(text)
    shutil.copy2(os.path.join(HERE, "egress", "client.py"), os.path.join(root, "egress", "client.py"))
    return root


@pytest.fixture
def ebundle(make_bundle, usr_template, lab):
    b = make_bundle(rootfs_template=usr_template)
    b.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
    b.set_namespace("network", f"/run/netns/{lab.c}")
    caps = b.process.setdefault("capabilities", {})
    for k in ("bounding", "effective", "permitted"):
        # granted by the spec on purpose: the policy must take them away
        caps[k] = sorted(set(caps.get(k, [])) | {"CAP_NET_ADMIN", "CAP_NET_RAW"})
    return b


def client(rt, bundle, actions, policy_args=(), tmp=None):
    bundle.args("/usr/bin/python3", "/egress/client.py", json.dumps(actions))
    r, cid = rt.run(bundle, global_args=list(policy_args))
    assert r.ok, r
    return json.loads(r.out.strip().splitlines()[-1]), cid


def audit_args(tmp_path, *policy):
    return [*policy, "--audit-dir", str(tmp_path / "audit")]


def nft_table(netns):
    r = sh("ip", "netns", "exec", netns, "nft", "list", "table", "inet", "agentsbx", check=False)
    return r.stdout if r.returncode == 0 else None


def udp_settled(lab):
    """udp.log once every datagram sent before now has been handled, waited on as a condition
    rather than a fixed pause: a sync datagram sent to the UDP counter from inside the upstream
    namespace (v4 and v6; logged with the upstream's own address as the source, which no
    container uses) is queued behind anything already delivered to those sockets, so once both
    are logged so has every datagram the container sent before it exited. Returns the log
    without the sync entries."""
    for addr, fam in ((UP4, "AF_INET"), (UP6, "AF_INET6")):
        sh("ip", "netns", "exec", lab.up, "python3", "-c",
           f"import socket; socket.socket(socket.{fam}, socket.SOCK_DGRAM).sendto(b'sync', ('{addr}', 9999))")
    deadline = time.monotonic() + 30
    while not {UP4, UP6} <= set(lab.log("udp.log")):
        assert time.monotonic() < deadline, f"the upstream did not count the sync datagrams: {lab.log('udp.log')}"
        time.sleep(0.05)
    return [a for a in lab.log("udp.log") if a not in (UP4, UP6)]


# ---- the table, in an engine-given (joined) namespace -------------------------------------------

def test_control_without_policy(rt, ebundle, lab):
    """The lab works: without a policy the container reaches the upstream (v4, v6, UDP)."""
    res, _ = client(rt, ebundle, [["connect", UP4, 8080], ["connect", UP6, 8080], ["udp", UP4, 9999]])
    assert [r["ok"] for r in res] == [True, True, True], res
    assert nft_table(lab.c) is None
    deadline = time.monotonic() + 10
    while not lab.log("udp.log") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lab.log("udp.log"), "the control datagram did not arrive"


@pytest.mark.parametrize("profile", ["agent", "locked"])
def test_joined_netns_only_loopback(rt, ebundle, lab, tmp_path, profile):
    """`filtered` with nothing allowed (agent) and `none` (locked) in a namespace the engine
    gave: TCP v4/v6 to the upstream refused at once, UDP never arrives, loopback works (agent:
    allowLocalBinding), and the container cannot delete or flush the table."""
    actions = [["connect", UP4, 8080], ["connect", UP6, 8080], ["udp", UP4, 9999], ["udp", UP6, 9999],
               ["connect", f"::ffff:{UP4}", 8080], ["loopback"],
               ["run", "nft", "flush", "ruleset"], ["run", "nft", "delete", "table", "inet", "agentsbx"]]
    res, _ = client(rt, ebundle, actions, audit_args(tmp_path, "--profile", profile))
    v4, v6, u4, u6, mapped, lo, flush, delete = res
    for r in (v4, v6, mapped):
        assert not r["ok"] and r["error"] in ("ECONNREFUSED", "EHOSTUNREACH", "EACCES", "EPERM"), r
    assert lo["ok"] is (profile == "agent"), lo
    for r in (flush, delete):
        assert r["ok"] and r["rc"] != 0 and "Operation not permitted" in r["err"], r
    table = nft_table(lab.c)
    assert table is not None and "policy drop" in table
    assert ("@allow4" in table) is (profile == "agent")
    # the datagrams were sent before the container exited: wait until the upstream has handled
    # everything sent before now, then nothing of the container's may be there
    assert udp_settled(lab) == [] and lab.log("http.log") == []


# ---- filtered: the DNS stub and the sets -------------------------------------------------------

ZONE = {
    "pkg.test": {"A": [UP4], "AAAA": [UP6], "ttl": 120},
    "a.mirror.test": {"A": [UP4], "ttl": 5},
    # one address under two names and two TTLs (test_filtered_set_element_keeps_later_expiry)
    "long.mirror.test": {"A": [UP4], "ttl": 75},
    "short.mirror.test": {"A": [UP4], "ttl": 5},
    "bad.mirror.test": {"A": [UP4B]},
    "mirror.test": {"A": [UP4B]},
    "other.test": {"A": [UP4B], "AAAA": [UP6B]},
    "naive.mirror.test": {"A": [UP4N], "AAAA": [UP6N]},
    # rebinding / SSRF: allowed names (*.mirror.test) whose answers name what they must not open
    "meta.mirror.test": {"A": [META4]},
    "priv.mirror.test": {"A": [PRIV4], "AAAA": [PRIV6]},
    "loop.mirror.test": {"A": ["127.0.0.1"], "AAAA": ["::1"]},
    "mapped.mirror.test": {"AAAA": [f"::ffff:{META4}", f"64:ff9b::{PRIV4}"]},
    "mcast.mirror.test": {"A": ["224.0.0.1", "255.255.255.255"], "AAAA": ["ff02::1", "fe80::1"]},
    "cgnat.mirror.test": {"A": ["100.64.0.1", "0.0.0.0"]},
    "host.mirror.test": {"A": [HOST4]},
    "stuffed.mirror.test": {"A": [UP4], "extra": [["other.test", UP4B]]},
    "chain.mirror.test": {"CNAME": "edge.cdn.test"},
    "edge.cdn.test": {"A": [UP4B]},
    "cmeta.mirror.test": {"CNAME": "meta.elsewhere.test"},
    "meta.elsewhere.test": {"A": [META4]},
}
POLICY = {
    "version": 1, "extends": "agent",
    "network": {"mode": "filtered", "allowedDomains": ["pkg.test", "*.mirror.test"],
                "deniedDomains": ["bad.mirror.test"], "allowedCidrs": [f"{UP4B}/32:8080", f"[{UP6B}]/128:8080"],
                "ports": [80, 443]},
    "approvals": {"network": "deny"},
}


@pytest.fixture
def filtered(rt, ebundle, lab, tmp_path):
    """run(actions) -> (results, audit records) under POLICY, upstream = the lab's DNS server."""
    lab.zone(ZONE)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(POLICY))
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)

    def go(actions, policy=None):
        if policy:
            pol.write_text(json.dumps(policy))
        ebundle.args("/usr/bin/python3", "/egress/client.py", json.dumps(actions))
        r, cid = rt.run(ebundle, global_args=audit_args(tmp_path, "--policy", str(pol)), env=env)
        assert r.ok, r
        with open(tmp_path / "audit" / f"{cid}.jsonl") as f:
            recs = [json.loads(line) for line in f]
        return json.loads(r.out.strip().splitlines()[-1]), recs
    return go


def dns_records(recs):
    return [(r["host"], r["qtype"], r["decision"], r["rule"]) for r in recs if r["event"] == "dns"]


def test_filtered_allowed_name_resolves_and_connects(filtered, lab):
    res, recs = filtered([["http", "pkg.test", 80], ["resolve", "pkg.test"], ["connect", UP6, 80],
                          ["connect", UP4, 8080], ["http", "a.mirror.test", 80]])
    http4, resolved, v6, wrong_port, wild = res
    assert http4["ok"] and http4["response"].endswith("ok pkg.test\n"), http4
    assert resolved["ok"] and set(resolved["addrs"]) == {UP4, UP6}, resolved
    assert v6["ok"], v6                      # the AAAA answer opened [UP6]:80
    assert not wrong_port["ok"] and wrong_port["error"] == "ECONNREFUSED", wrong_port  # ports: 80, 443 only
    assert wild["ok"] and wild["response"].endswith("ok a.mirror.test\n"), wild
    assert set(lab.queries()) == {"pkg.test", "a.mirror.test"}
    got = dns_records(recs)
    assert ("pkg.test", 1, "allowed", "pkg.test") in got and ("pkg.test", 28, "allowed", "pkg.test") in got
    assert ("a.mirror.test", 1, "allowed", "*.mirror.test") in got
    addrs = {a for r in recs if r["event"] == "dns" for a in r.get("addrs", [])}
    assert {UP4, UP6} <= addrs


def test_filtered_set_element_keeps_later_expiry(filtered, lab):
    """An address answered twice with different TTLs keeps access until the later expiry, and is
    refused after it (issue 20: the stub skips the set update while the element outlives the
    answer, and hands out no TTL longer than the element still lives). long.mirror.test (TTL 75)
    then short.mirror.test (TTL 5, an element of the 60 s floor) name UP4: before, the second
    answer replaced the element's timeout (access until ~60 s); now the element keeps the first
    one's end (75 s), whatever the later, shorter answer said. ~80 s: the kernel's timeouts."""
    res, recs = filtered([["resolve", "long.mirror.test"], ["at", 3], ["rawdns", UP4B, "long.mirror.test"],
                          ["rawdns", UP4B, "short.mirror.test"], ["at", 66], ["connect", UP4, 80],
                          ["at", 80], ["connect", UP4, 80]])
    first, _, again, short, at_live, live, _, gone = res
    assert first["ok"] and first["addrs"] == [UP4], first
    # the element lives ~72 s more: the TTL handed out is no longer than that, never the 75 asked
    assert again["ok"] and again["answers"] == 1 and 0 < again["ttls"][0] <= 72, again
    assert short["ok"] and short["ttls"] == [5], short
    assert at_live["at"] < 74, at_live  # a precondition: the client kept its schedule
    assert live["ok"], (live, at_live)  # past the shorter answer's 60 s, before the longer's 75 s
    assert not gone["ok"] and gone["error"] == "ECONNREFUSED", gone  # after the later expiry
    assert {"long.mirror.test", "short.mirror.test"} == set(lab.queries())
    got = dns_records(recs)
    assert got.count(("long.mirror.test", 1, "allowed", "*.mirror.test")) == 2, got
    assert ("short.mirror.test", 1, "allowed", "*.mirror.test") in got, got


def test_filtered_refused_names_never_leave(filtered, lab):
    res, recs = filtered([["resolve", "other.test"], ["resolve", "bad.mirror.test"], ["resolve", "mirror.test"],
                          ["rawdns", UP4B, "other.test"], ["rawdns", "192.0.2.53", "exfil.other.test"],
                          ["rawdns", UP4B, "pkg.test"]])
    other, bad, bare, raw, raw_elsewhere, raw_allowed = res
    for r in (other, bad, bare):
        assert not r["ok"] and r["error"].startswith("gai:"), r
    assert raw["ok"] and raw["rcode"] == 5 and raw["answers"] == 0, raw      # REFUSED by the stub
    assert raw_allowed["ok"] and raw_allowed["rcode"] == 0 and raw_allowed["answers"] == 1, raw_allowed
    # a hard-coded resolver the namespace cannot even route to: unreachable, never forwarded
    assert lab.queries() == ["pkg.test"], lab.queries()
    got = dns_records(recs)
    assert ("other.test", 1, "refused", "unlisted") in got
    assert ("bad.mirror.test", 1, "refused", "bad.mirror.test") in got
    assert ("mirror.test", 1, "refused", "unlisted") in got


def test_filtered_direct_addresses(filtered, lab):
    """Unlisted addresses fail fast whatever the family; allowedCidrs with a port open exactly
    that port; UDP to a random port never arrives."""
    res, _ = filtered([["connect", UP4B, 80], ["connect", UP6B, 80], ["connect", f"::ffff:{UP4B}", 80],
                       ["connect", UP4B, 8080], ["connect", UP6B, 8080], ["udp", UP4, 9999],
                       ["connect", UP4, 80]])
    v4, v6, mapped, cidr4, cidr6, udp, not_resolved = res
    for r in (v4, v6, mapped, not_resolved):
        assert not r["ok"] and r["error"] == "ECONNREFUSED", r
    assert cidr4["ok"] and cidr6["ok"], (cidr4, cidr6)
    assert udp_settled(lab) == []
    deadline = time.monotonic() + 10
    while len(lab.log("http.log")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lab.log("http.log") == ["", ""]  # only the two allowedCidrs connects reached a server


def test_refused_flood_beyond_the_log_cap_is_counted(filtered, lab):
    """policy.md §2.2: the table logs refused packets to the monitor at most 50/s (burst 100). A
    flood of refused SYNs beyond that, with distinct refused connects inside it, must still be
    on record: every refused packet is a `network` record or counted in `suppressed.network`
    (on main the kernel's limit dropped them from NFLOG unseen: neither recorded nor counted)."""
    n, ports = 3000, list(range(9001, 9006))
    res, recs = filtered([["flood", UP4B, 81, n]] + [["connect", UP4B, p] for p in ports])
    assert res[0]["ok"] and res[0]["sent"] == n, res[0]
    for r in res[1:]:
        assert not r["ok"] and r["error"] == "ECONNREFUSED", r
    net = [r for r in recs if r["event"] == "network" and r["addr"] == UP4B and r.get("proto") == "tcp"]
    # the counters are cumulative: the last record that carries them has the total
    counts = [r["suppressed"] for r in recs if isinstance(r.get("suppressed"), dict)]
    assert counts, recs[-3:]
    sup = counts[-1].get("network", 0)
    flood = sum(1 for r in net if r.get("port") == 81)
    missing = [p for p in ports if not any(r.get("port") == p for r in net)]
    # one SYN per connect (a reset answers it at once): all n + 5 are either records or counted
    assert flood + (len(ports) - len(missing)) + sup >= n + len(ports), (flood, missing, counts[-1])
    assert len(missing) <= sup, (missing, counts[-1])


# ---- a namespace agentsbx creates: `agentsbx sandbox` with pasta as the way out -----------------

SBX_ZONE = {"sbx.test": {"A": [HOSTUP4], "ttl": 60}, "other.test": {"A": [HOSTUP4]}}
SBX_POLICY = {"version": 1, "extends": "agent",
              "network": {"mode": "filtered", "allowedDomains": ["sbx.test"], "ports": [80]},
              "approvals": {"network": "deny"}}


def pasta_pids():
    r = sh("pgrep", "-x", "pasta", check=False)
    return set(r.stdout.split())


def sandbox_client(rt, tmp_path, actions, policy, env_extra=None):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    os.chmod(ws, 0o777)
    shutil.copy2(os.path.join(HERE, "egress", "client.py"), ws / "client.py")
    pol = tmp_path / "sbx-policy.json"
    pol.write_text(json.dumps(policy))
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4, **(env_extra or {}))
    r = rt.cmd("sandbox", "--workspace", str(ws), "--", "/usr/bin/python3", "/workspace/client.py",
               json.dumps(actions), global_args=audit_args(tmp_path, "--policy", str(pol)), env=env)
    return r


def test_sandbox_new_netns_pasta(rt, lab, tmp_path):
    """`agentsbx sandbox` makes its own network namespace: the monitor attaches pasta (the host's
    routes, so the lab's upstream over the test veth is reachable), the container's resolver is
    the stub, an allowed name resolves and connects, other names and ports are refused, and
    pasta is gone after the run. Every address involved is the lab's (asserted by the fixture's
    `ip route get`)."""
    lab.zone(SBX_ZONE)
    before = pasta_pids()
    r = sandbox_client(rt, tmp_path, [["run", "cat", "/etc/resolv.conf"], ["http", "sbx.test", 80],
                                      ["connect", HOSTUP4, 8080], ["resolve", "other.test"],
                                      ["rawdns", HOSTUP4, "other.test"]], SBX_POLICY)
    assert r.rc == 0, r
    resolv, http, port, other, raw = json.loads(r.out.strip().splitlines()[-1])
    assert resolv["ok"] and resolv["out"].splitlines()[-1] == "nameserver 127.0.0.1", resolv
    assert http["ok"] and http["addr"] == HOSTUP4 and http["response"].endswith("ok sbx.test\n"), http
    assert not port["ok"] and port["error"] == "ECONNREFUSED", port
    assert not other["ok"] and other["error"].startswith("gai:"), other
    assert raw["ok"] and raw["rcode"] == 5, raw  # a hard-coded resolver: the stub answers REFUSED
    assert set(lab.queries()) == {"sbx.test"}, lab.queries()
    assert lab.log("http.log") == ["sbx.test"]
    assert pasta_pids() <= before, "pasta outlived the sandbox"


def test_sandbox_pasta_missing_fails_clearly(rt, lab, tmp_path):
    """filtered with something allowed in a namespace nobody wires, and no pasta: `create`
    fails naming the package, nothing is run."""
    r = sandbox_client(rt, tmp_path, [["resolve", "sbx.test"]], SBX_POLICY,
                       {"AGENTSBX_PASTA": "/nonexistent/pasta"})
    assert r.rc != 0 and "passt" in r.err, r
    assert lab.queries() == []


def test_bundle_new_netns_pasta(rt, make_bundle, usr_template, lab, tmp_path):
    """A bundle asking for a new network namespace (nobody wires it) under `filtered`: the same
    way out as the sandbox (pasta from the monitor), the resolver bound over the bundle's own
    /etc/resolv.conf (which names the lab's address: never asked), the bundle's file untouched."""
    lab.zone(SBX_ZONE)
    b = make_bundle(rootfs_template=usr_template)
    b.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(SBX_POLICY))
    b.args("/usr/bin/python3", "/egress/client.py",
           json.dumps([["run", "cat", "/etc/resolv.conf"], ["http", "sbx.test", 80], ["connect", UP4, 80]]))
    r, _ = rt.run(b, global_args=audit_args(tmp_path, "--policy", str(pol)),
                  env=dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4))
    assert r.ok, r
    resolv, http, lab_direct = json.loads(r.out.strip().splitlines()[-1])
    assert resolv["out"].splitlines()[-1] == "nameserver 127.0.0.1", resolv
    assert http["ok"] and http["response"].endswith("ok sbx.test\n"), http
    assert not lab_direct["ok"], lab_direct
    assert lab.queries() == ["sbx.test"] or set(lab.queries()) == {"sbx.test"}
    with open(os.path.join(usr_template, "etc", "resolv.conf")) as f:
        assert f.read() == f"nameserver {UP4}\n"


# ---- approvals.network: ask (POLICY.md §5) ------------------------------------------------------

import socket  # noqa: E402
import threading  # noqa: E402


class Approver(threading.Thread):
    """Connects to <root>/<cid>/approvals.sock as soon as it exists and answers each question
    with decide(question) -> "allow-once" | "allow-always" | "deny" | None (no answer)."""

    def __init__(self, rt, cid, decide):
        super().__init__(daemon=True)
        self.path = os.path.join(rt.root, cid, "approvals.sock")
        self.decide, self.questions, self.replies = decide, [], []
        self.stop = threading.Event()

    def run(self):
        deadline = time.monotonic() + 60
        while not os.path.exists(self.path):
            if self.stop.is_set() or time.monotonic() > deadline:
                return
            time.sleep(0.02)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.path)
        s.settimeout(0.2)
        buf = b""
        while not self.stop.is_set():
            try:
                data = s.recv(4096)
            except socket.timeout:
                continue
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                if "kind" in msg:
                    self.questions.append(msg)
                    d = self.decide(msg)
                    if d:
                        s.sendall(json.dumps({"id": msg["id"], "decision": d}).encode() + b"\n")
                else:
                    self.replies.append(msg)
        s.close()


ASK_POLICY = dict(POLICY, approvals={"network": "ask", "timeoutSeconds": 30, "onTimeout": "deny"})


@pytest.fixture
def asking(rt, ebundle, lab, tmp_path):
    """run(actions, decide, approvals=...) -> (results, audit records, approver)"""
    lab.zone(ZONE)
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)

    def go(actions, decide, approvals=None):
        pol = tmp_path / f"policy-{uuid.uuid4().hex[:6]}.json"
        pol.write_text(json.dumps(dict(ASK_POLICY, approvals=approvals or ASK_POLICY["approvals"])))
        cid = f"appr-{uuid.uuid4().hex[:8]}"
        ap = Approver(rt, cid, decide) if decide else None
        if ap:
            ap.start()
        ebundle.args("/usr/bin/python3", "/egress/client.py", json.dumps(actions))
        try:
            r, _ = rt.run(ebundle, cid, global_args=audit_args(tmp_path, "--policy", str(pol)), env=env)
        finally:
            if ap:
                ap.stop.set()
                ap.join(10)
        assert r.ok, r
        with open(tmp_path / "audit" / f"{cid}.jsonl") as f:
            recs = [json.loads(line) for line in f]
        return json.loads(r.out.strip().splitlines()[-1]), recs, ap
    return go


def approval_records(recs):
    return [(r["action"], r["host"], r.get("decision"), r.get("by")) for r in recs if r["event"] == "approval"]


def test_approval_allow_once_then_deny(asking, lab):
    """The first question for other.test is allowed once: the held answer arrives and the
    address opens; the next lookup of the same name asks again and is denied. Denied names never
    ask; every question and decision is audited once."""
    answers = iter(["allow-once", "deny"])
    res, recs, ap = asking([["http", "other.test", 80], ["resolve", "other.test"], ["resolve", "bad.mirror.test"]],
                           lambda q: next(answers))
    http, again, denied = res
    assert http["ok"] and http["response"].endswith("ok other.test\n"), http
    assert not again["ok"] and again["error"].startswith("gai:"), again
    assert not denied["ok"], denied
    assert [(q["host"], q["kind"]) for q in ap.questions] == [("other.test", "network")] * 2, ap.questions
    assert all(set(q) >= {"id", "kind", "host", "port", "pid", "exe"} for q in ap.questions)
    # the querier: the client's python, found by its socket in the container's namespace
    assert all(isinstance(q["pid"], int) and "python3" in (q["exe"] or "") for q in ap.questions), ap.questions
    assert [r["ok"] for r in ap.replies] == [True, True]
    assert approval_records(recs) == [("asked", "other.test", None, None),
                                      ("decided", "other.test", "allow-once", "approver"),
                                      ("asked", "other.test", None, None),
                                      ("decided", "other.test", "deny", "approver")]
    got = dns_records(recs)
    assert ("other.test", 1, "allowed", "approval:allow-once") in got
    assert ("other.test", 1, "refused", "approval:deny") in got
    assert ("bad.mirror.test", 1, "refused", "bad.mirror.test") in got
    assert "bad.mirror.test" not in lab.queries() and lab.queries().count("other.test") >= 1


def test_approval_allow_always(asking, lab):
    res, recs, ap = asking([["resolve", "other.test"], ["resolve", "other.test"], ["connect", UP4B, 443]],
                           lambda q: "allow-always")
    first, second, conn = res
    assert first["ok"] and UP4B in first["addrs"], first
    assert second["ok"], second
    assert conn["ok"], conn  # the approved name's address, on a policy port
    assert len(ap.questions) == 1, ap.questions
    assert ("other.test", 1, "allowed", "approval:allow-always") in dns_records(recs)


def test_approval_deny(asking, lab):
    res, recs, ap = asking([["resolve", "other.test"], ["connect", UP4B, 80]], lambda q: "deny")
    resolved, conn = res
    assert not resolved["ok"] and not conn["ok"], res
    assert "other.test" not in lab.queries()
    assert ("decided", "other.test", "deny", "approver") in approval_records(recs)


@pytest.mark.parametrize("timeout", [0, 1])
def test_approval_timeout_without_approver(asking, lab, timeout):
    """No approver connected: the question is decided by onTimeout (deny) after timeoutSeconds
    (0 = at once); the agent never hangs."""
    res, recs, _ = asking([["resolve", "other.test"]], None,
                          approvals={"network": "ask", "timeoutSeconds": timeout, "onTimeout": "deny"})
    assert not res[0]["ok"], res
    assert "other.test" not in lab.queries()
    assert ("decided", "other.test", "deny", "timeout-no-approver") in approval_records(recs)


def test_approval_timeout_approver_silent(asking, lab):
    res, recs, ap = asking([["resolve", "other.test"]], lambda q: None,
                           approvals={"network": "ask", "timeoutSeconds": 1, "onTimeout": "deny"})
    assert not res[0]["ok"] and len(ap.questions) == 1, (res, ap.questions)
    assert ("decided", "other.test", "deny", "timeout") in approval_records(recs)


def test_approval_cli(rt, ebundle, lab, tmp_path):
    """`agentsbx approvals ID` lists the pending question, `agentsbx approve ID QID` answers it;
    `deny` of an unknown QID fails clearly."""
    lab.zone(ZONE)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(ASK_POLICY))
    cid = f"apcli-{uuid.uuid4().hex[:8]}"
    ebundle.args("/usr/bin/python3", "/egress/client.py", json.dumps([["resolve", "other.test"]]))
    out = {}

    def cli():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = rt.cmd("approvals", cid)
            lines = r.out.splitlines()[1:] if r.rc == 0 else []
            if lines:
                out["list"] = r.out
                qid = lines[0].split()[0]
                out["bad"] = rt.cmd("deny", cid, "999")
                out["approve"] = rt.cmd("approve", cid, qid)
                return
            time.sleep(0.05)
    t = threading.Thread(target=cli, daemon=True)
    t.start()
    r, _ = rt.run(ebundle, cid, global_args=audit_args(tmp_path, "--policy", str(pol)),
                  env=dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4))
    t.join(30)
    assert r.ok, r
    assert "other.test" in out["list"], out
    assert out["bad"].rc != 0 and "no such pending question" in out["bad"].err, out["bad"]
    assert out["approve"].rc == 0, out["approve"]
    assert json.loads(r.out.strip().splitlines()[-1])[0]["ok"], r.out


def test_dns_over_tcp(filtered, lab):
    """TCP port 53 to any address reaches the stub too (redirected): an allowed name is answered
    with the client's own id, an unlisted one REFUSED and never forwarded."""
    res, recs = filtered([["tcpdns", UP4B, "pkg.test"], ["tcpdns", "127.0.0.1", "other.test"],
                          ["tcpdns", f"{UP6B}", "a.mirror.test"], ["connect", UP4, 80]])
    allowed, refused, v6, conn = res
    assert allowed["ok"] and allowed["rcode"] == 0 and allowed["answers"] == 1 and allowed["id"] == 0x4321, allowed
    assert refused["ok"] and refused["rcode"] == 5 and refused["answers"] == 0, refused
    assert v6["ok"] and v6["rcode"] == 0 and v6["answers"] == 1, v6
    assert conn["ok"], conn  # the TCP answer opened the address like a UDP one
    assert sorted(lab.queries()) == ["a.mirror.test", "pkg.test"], lab.queries()
    assert ("other.test", 1, "refused", "unlisted") in dns_records(recs)


def test_refused_connections_audited(filtered, lab):
    """Every refused connection attempt is a `network` record from the table's NFLOG (the monitor
    listens in the container's namespace): TCP and UDP, IPv4 and IPv6, with address, port,
    protocol, decision and rule; an allowed connection is not one."""
    res, recs = filtered([["connect", UP4B, 80], ["connect", UP6B, 443], ["udp", UP4, 9999],
                          ["connect", UP4B, 8080]])
    assert [r["ok"] for r in res] == [False, False, False, True], res  # UDP: sendto gets EPERM
    net = [(r["addr"], r.get("port"), r["proto"], r["decision"], r["rule"]) for r in recs if r["event"] == "network"]
    assert (UP4B, 80, "tcp", "refused", "default-deny") in net, net
    assert (UP6B, 443, "tcp", "refused", "default-deny") in net, net
    assert (UP4, 9999, "udp", "refused", "default-deny") in net, net
    assert not any(a == UP4B and p == 8080 for a, p, *_ in net), net  # allowedCidrs: not refused


def test_sni_and_host_tell_shared_address_apart(filtered, lab):
    """pkg.test (allowed) resolves to UP4, which opens UP4:80/443; evil.test, never resolved,
    shares that address (the CDN case). Through the monitor's splice: HTTP with Host evil.test
    gets 403 + X-Agentsbx-Blocked and never reaches the server, TLS with SNI evil.test a reset
    before any byte reaches it; pkg.test passes both ways, the bytes unchanged."""
    res, recs = filtered([["resolve", "pkg.test"], ["http_as", UP4, 80, "pkg.test"], ["http_as", UP4, 80, "evil.test"],
                          ["tls_as", UP4, "pkg.test"], ["tls_as", UP4, "evil.test"],
                          ["http_as", UP4, 80, "bad.mirror.test"]])
    _, good, evil, tls_good, tls_evil, denied = res
    assert good["ok"] and good["response"].endswith("ok pkg.test\n"), good
    for r in (evil, denied):
        assert r["ok"] and r["response"].startswith("HTTP/1.1 403 "), r
        assert "X-Agentsbx-Blocked: host not allowed: " in r["response"], r
    assert tls_good["ok"], tls_good
    assert tls_evil["ok"] and tls_evil["handshake"] in ("ECONNRESET", "ssl-error", "EPIPE"), tls_evil
    deadline = time.monotonic() + 10
    while "pkg.test" not in lab.log("sni.log") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lab.log("sni.log") == ["pkg.test"], lab.log("sni.log")
    assert lab.log("http.log") == ["pkg.test"], lab.log("http.log")
    net = [(r["addr"], r["port"], r.get("host"), r["decision"], r["rule"]) for r in recs
           if r["event"] == "network" and r.get("host") is not None]
    assert (UP4, 80, "pkg.test", "allowed", "host") in net, net
    assert (UP4, 80, "evil.test", "refused", "host") in net, net
    assert (UP4, 443, "pkg.test", "allowed", "sni") in net, net
    assert (UP4, 443, "evil.test", "refused", "sni") in net, net
    assert (UP4, 80, "bad.mirror.test", "refused", "host") in net, net


# ---- keep-alive: every request on a connection is checked (splice.c http_scan) -----------------

def req(host, extra="", body="", method="GET"):
    return f"{method} / HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n{body}"


def chunked(body):
    return f"{len(body):x}\r\n{body}\r\n0\r\n\r\n"


def host_records(recs):
    return [(r["addr"], r["port"], r.get("host"), r["decision"], r["rule"]) for r in recs
            if r["event"] == "network" and r.get("host") is not None]


def test_keepalive_each_request_checked(filtered, lab):
    """One keep-alive connection to pkg.test's address: requests for pkg.test pass (a POST with
    a Content-Length body, one with a body in two chunks), then a request naming evil.test (shares the
    address, never resolved) gets 403 after the earlier answers and the connection ends;
    pipelined the same. Framing the relay cannot be sure of (both length headers, a bare LF) is
    refused too. Nothing for evil.test reaches the server; each decision is one audit record.
    (Bodies that read as a request: test_smuggling_against_a_server_that_ignores_bodies.)"""
    body = '{"name": "evil.test", "q": "GET / HTTP/1.1"}'
    seq = [req("pkg.test"), req("pkg.test", f"Content-Length: {len(body)}\r\n", body, "POST"),
           req("pkg.test", "Transfer-Encoding: chunked\r\n", f"{len(body) // 2:x}\r\n{body[:len(body) // 2]}\r\n"
               + chunked(body[len(body) // 2:]), "POST"),
           req("evil.test"), req("pkg.test")]
    res, recs = filtered([["resolve", "pkg.test"], ["http_reqs", UP4, 80, seq, False],
                          ["http_reqs", UP4, 80, [req("pkg.test"), req("evil.test"), req("pkg.test")], True],
                          ["http_reqs", UP4, 80, [req("pkg.test"), req("pkg.test", "Content-Length: 3\r\n"
                                                                         "Transfer-Encoding: chunked\r\n", "0\r\n\r\n")],
                           False],
                          ["http_reqs", UP4, 80, [req("pkg.test"), "GET / HTTP/1.1\nHost: pkg.test\n\n"], False],
                          # a chunked body arriving in pieces, a chunk-size line cut in two
                          ["http_reqs", UP4, 80, [[req("pkg.test", "Transfer-Encoding: chunked\r\n", "3\r\nabc\r\n1",
                                                       "POST"), "0\r\n", "0123456789abcdef\r\n0\r\n\r\n"],
                                                  req("pkg.test", "Connection: close\r\n")], False]])
    resolved, one, pipe, te_cl, bare_lf, pieces = res
    assert [r[0][9:] for r in pieces["responses"]] == ["200 OK"] * 2, pieces
    assert resolved["ok"], res
    assert one["ok"] and [r[0] for r in one["responses"]] == ["HTTP/1.1 200 OK"] * 3 + ["HTTP/1.1 403 Forbidden"], one
    assert one["responses"][3][1] == "host not allowed: evil.test" and one["closed"] is True, one
    assert pipe["ok"] and [r[0] for r in pipe["responses"]] == ["HTTP/1.1 200 OK", "HTTP/1.1 403 Forbidden"], pipe
    for r in (te_cl, bare_lf):
        assert r["ok"] and [x[0] for x in r["responses"]] == ["HTTP/1.1 200 OK", "HTTP/1.1 403 Forbidden"], r
        assert r["responses"][1][1] == "ambiguous request framing", r
    assert "evil.test" not in lab.log("http.log"), lab.log("http.log")
    assert lab.log("http.log") == ["pkg.test"] * 8, lab.log("http.log")
    net = host_records(recs)
    # one allowed record per connection (the name does not change), one per refusal
    assert net.count((UP4, 80, "pkg.test", "allowed", "host")) == 5, net
    assert net.count((UP4, 80, "evil.test", "refused", "host")) == 2, net
    assert net.count((UP4, 80, "pkg.test", "refused", "http: framing")) == 2, net
    assert len(net) == 9, net


def test_tls_sni_v4_v6_and_audit_once(filtered, lab):
    """A ClientHello naming an allowed name reaches the upstream through the splice over IPv4 and
    IPv6 (the fake 443 server records the SNI); a refused SNI gets a reset on both families and
    never reaches it. Every decision is ONE audit record with addr, port, proto, decision, rule."""
    res, recs = filtered([["resolve", "pkg.test"], ["tls_as", UP4, "pkg.test"], ["tls_as", UP6, "pkg.test"],
                          ["tls_as", UP4, "evil.test"], ["tls_as", UP6, "evil.test"], ["connect", UP4B, 443]])
    _, ok4, ok6, evil4, evil6, direct = res
    assert ok4["ok"] and ok6["ok"], (ok4, ok6)
    for r in (evil4, evil6):
        assert r["ok"] and r["handshake"] in ("ECONNRESET", "ssl-error", "EPIPE"), r
    assert not direct["ok"] and direct["error"] == "ECONNREFUSED", direct
    deadline = time.monotonic() + 10
    while len(lab.log("sni.log")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lab.log("sni.log") == ["pkg.test", "pkg.test"], lab.log("sni.log")
    net = [r for r in recs if r["event"] == "network"]
    for r in net:
        assert {"addr", "port", "proto", "decision", "rule"} <= set(r), r
    keys = [(r["addr"], r["port"], r["proto"], r.get("host"), r["decision"], r["rule"]) for r in net]
    for want in [(UP4, 443, "tcp", "pkg.test", "allowed", "sni"), (UP6, 443, "tcp", "pkg.test", "allowed", "sni"),
                 (UP4, 443, "tcp", "evil.test", "refused", "sni"), (UP6, 443, "tcp", "evil.test", "refused", "sni"),
                 (UP4B, 443, "tcp", None, "refused", "default-deny")]:
        assert keys.count(want) == 1, (want, keys)
    dns = [(r["host"], r["qtype"], r["decision"]) for r in recs if r["event"] == "dns"]
    assert len(dns) == len(set(dns)), dns


def test_filtered_raw_socket_and_table_locked(filtered, lab):
    """Under filtered the spec's CAP_NET_RAW/CAP_NET_ADMIN are gone: a raw ICMP socket cannot be
    made (v4, v6), and `nft flush ruleset` / `nft delete table` fail; the table still works
    afterwards (an allowed name connects, an unlisted address does not)."""
    res, _ = filtered([["raw", UP4], ["raw", UP6], ["run", "nft", "flush", "ruleset"],
                       ["run", "nft", "delete", "table", "inet", "agentsbx"], ["http", "pkg.test", 80],
                       ["connect", UP4B, 80]])
    raw4, raw6, flush, delete, http, direct = res
    for r in (raw4, raw6):
        assert not r["ok"] and r["error"] == "EPERM", r
    for r in (flush, delete):
        assert r["ok"] and r["rc"] != 0 and "Operation not permitted" in r["err"], r
    assert http["ok"] and http["response"].endswith("ok pkg.test\n"), http
    assert not direct["ok"] and direct["error"] == "ECONNREFUSED", direct
    assert "policy drop" in nft_table(lab.c)


def test_explain_prints_the_loaded_ruleset(rt, ebundle, lab, tmp_path):
    """`agentsbx policy explain` shows the nftables text that the runtime loads: every rule line
    of the table found in the container's namespace is in the explanation."""
    lab.zone(ZONE)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(POLICY))
    r = rt.cmd("policy", "explain", "--policy", str(pol))
    assert r.rc == 0 and "nftables ruleset" in r.out, r
    explained = {line.strip() for line in r.out.splitlines()}
    ebundle.args("/bin/true")
    run, _ = rt.run(ebundle, global_args=audit_args(tmp_path, "--policy", str(pol)),
                    env=dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4))
    assert run.ok, run
    loaded = nft_table(lab.c)
    rule = "ip daddr {} meta l4proto {{ tcp, udp }} th dport 8080 accept"
    assert rule.format(f"{UP4B}/32") in explained, r.out   # nft lists a /32 as the address
    assert rule.format(UP4B) in loaded, loaded
    for want in ("ip daddr . tcp dport @allow4 accept", "ip6 daddr . tcp dport @allow6 accept",
                 "meta l4proto tcp reject with tcp reset", 'oifname "lo" accept', "ct state established,related accept"):
        assert want in explained, (want, r.out)
        assert want in loaded, (want, loaded)


@pytest.mark.parametrize("profile", ["agent", "locked"])
def test_joined_host_netns_refused(rt, make_bundle, tmp_path, profile):
    """A bundle that joins the runtime's own network namespace (host networking by path) under
    `none`/`filtered` is refused before anything runs: the drop-all table must never land in the
    host's namespace. `open` may join it."""
    before = sh("nft", "list", "tables").stdout
    b = make_bundle()
    b.set_namespace("network", f"/proc/{os.getpid()}/ns/net")
    b.args("/bin/true")
    r, _ = rt.run(b, global_args=audit_args(tmp_path, "--profile", profile))
    assert not r.ok and "runtime's own (host) network namespace" in r.err, r
    assert sh("nft", "list", "tables").stdout == before
    r, _ = rt.run(b, global_args=audit_args(tmp_path, "--profile", "open"))
    assert r.ok, r


# ---- issue 14: the DNS stub is no tunnel, an allowed name is no way to the host's neighbours -----

def dns_query(name, qtype=1, qclass=1, qid=0x5151, flags=0x0100, an=0, ar=0, extra=b""):
    import struct
    q = struct.pack("!HHHHHH", qid, flags, 1, an, 0, ar)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack("!HH", qtype, qclass)
    return q + extra


def edns_opt(code, data):
    import struct
    return b"\0" + struct.pack("!HHIH", 41, 4096, 0, 4 + len(data)) + struct.pack("!HH", code, len(data)) + data


def captured(lab):
    """every DNS message the upstream received, as sent (egress/upstream.py dns.raw)"""
    import struct
    path = os.path.join(lab.state, "dns.raw")
    raw = open(path, "rb").read() if os.path.exists(path) else b""
    msgs, i = [], 0
    while i + 2 <= len(raw):
        n = struct.unpack("!H", raw[i:i + 2])[0]
        msgs.append(raw[i + 2:i + 2 + n])
        i += 2 + n
    return raw, msgs


def test_dns_stub_is_no_tunnel(filtered, lab):
    """Each shape a query could carry data in, for allowed names, over UDP and TCP, with a marker
    of its own: trailing bytes after the question, an EDNS option, another record in the query,
    class CHAOS, a type the stub does not forward (TXT), letter case, client flags. The
    upstream's capture of every message it received holds none of the markers: the stub sends
    only queries it made itself (lowercase name, type, class IN, its own EDNS, RD). Queries of
    an allowed shape are answered (the client's id and letter case kept); the others REFUSED."""
    import struct
    rr = b"\xc0\x0c" + struct.pack("!HHIH", 16, 1, 0, 12) + b"TUNNELMARK5r"
    shapes = [
        ("udp", dns_query("pkg.test") + b"TUNNELMARK1-trailing", 0),
        ("udp", dns_query("pkg.test", ar=1, extra=edns_opt(65001, b"TUNNELMARK2-edns")), 0),
        ("udp", dns_query("tunnelmark3.mirror.test", qclass=3), 5),
        ("udp", dns_query("TuNnElMaRk4.MiRrOr.TeSt"), 3),
        ("udp", dns_query("pkg.test", an=1, extra=rr), 5),
        ("udp", dns_query("tunnelmark6.mirror.test", qtype=16), 5),
        ("udp", dns_query("pkg.test", ar=2, extra=edns_opt(1, b"x") + edns_opt(65001, b"TUNNELMARK7-two")), 5),
        ("udp", dns_query("pkg.test", flags=0x0130, qid=0x7777), 0),
        ("tcp", dns_query("pkg.test") + b"TUNNELMARK8-tcp-trailing", 0),
        ("tcp", dns_query("pkg.test", ar=1, extra=edns_opt(65001, b"TUNNELMARK9-tcp-edns")), 0),
        ("tcp", dns_query("TuNnElMaRkA.MiRrOr.TeSt", qtype=28), 3),
        ("tcp", dns_query("tunnelmarkb.mirror.test", qclass=3), 5),
    ]
    res, recs = filtered([["dnsmsg", UP4B, q.hex(), proto] for proto, q, _ in shapes])
    raw, msgs = captured(lab)
    for mark in (b"TUNNELMARK1", b"TUNNELMARK2", b"tunnelmark3", b"TuNnElMaRk4", b"TUNNELMARK5", b"tunnelmark6",
                 b"TUNNELMARK7", b"TUNNELMARK8", b"TUNNELMARK9", b"TuNnElMaRkA", b"tunnelmarkb"):
        assert mark not in raw, (mark, msgs)
    for (proto, q, rcode), r in zip(shapes, res):
        assert r["ok"] and r["rcode"] == rcode, (proto, q, r)
        assert r["id"] == struct.unpack("!H", q[:2])[0], r
        assert bytes.fromhex(r["question"]) == q[12:12 + len(bytes.fromhex(r["question"]))], r  # case kept
        if rcode == 0:
            assert r["answers"] == 1, r
    assert b"tunnelmark4" in raw and b"tunnelmarka" in raw  # the allowed shapes did go, lowercased
    for m in msgs:
        flags, qd, an, ns, ar = struct.unpack("!HHHHH", m[2:12])
        assert (flags, qd, an, ns, ar) == (0x0100, 1, 0, 0, 1), m   # RD only; one question, one OPT
        assert m[-11:] == b"\0\0\x29\x04\xd0\0\0\0\0\0\0", m       # the stub's own OPT, no options
        assert struct.unpack("!H", m[-15:-13])[0] in (1, 28) and m[-13:-11] == b"\0\x01", m  # type, class IN
    got = dns_records(recs)
    assert ("tunnelmark3.mirror.test", 1, "refused", "dns: class not IN") in got, got
    assert ("tunnelmark6.mirror.test", 16, "refused", "dns: type not forwarded") in got, got


def test_dns_malformed_names_on_record(filtered, lab):
    """Queries whose name is no host name - a '"', '\\', newline, NUL, 0xff or a '.' inside a
    label, a label forging audit JSON, a name past 255 bytes - over UDP and TCP: each answered
    REFUSED and each one `dns` record, the name in presentation format with \\DDD escapes
    (printable, no forged field); a message that is no query (QDCOUNT 0) is one `dropped` record.
    None of the names reaches the upstream."""
    import struct

    def raw_q(labels, qid=0x4242):
        return (struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(x)]) + x for x in labels)
                + b"\0" + struct.pack("!HH", 1, 1))
    forged = b'","event":"lifecycle","state":"exited","FORGED":"1'
    shapes = [(b'a"b', "a\\034b"), (b"a\\b", "a\\092b"), (b"a\nb", "a\\010b"), (b"a\0b", "a\\000b"),
              (b"\xff\xfe", "\\255\\254"), (b"a.b", "a\\046b"),
              (forged, "".join(chr(c) if chr(c).isalnum() or c in b"-_" else "\\%03d" % c for c in forged))]
    acts = [["dnsmsg", UP4B, raw_q([lab_, b"mirror", b"test"]).hex(), "udp"] for lab_, _ in shapes]
    acts += [["dnsmsg", UP4B, raw_q([b"a\"b", b"mirror", b"test"]).hex(), "tcp"],
             ["dnsmsg", UP4B, raw_q([b"a" * 63] * 4).hex(), "udp"],
             ["dnsmsg", UP4B, struct.pack("!HHHHHH", 0x4343, 0x0100, 0, 0, 0, 0).hex(), "udp"]]
    res, recs = filtered(acts)
    for a, r in zip(acts[:-1], res[:-1]):
        assert r["ok"] and r["rcode"] == 5 and r["id"] == 0x4242, (a, r)
    got = dns_records(recs)
    for _, text in shapes:
        assert (text + ".mirror.test", 1, "refused", "dns: not a host name") in got, (text, got)
    assert got.count(("a\\034b.mirror.test", 1, "refused", "dns: not a host name")) == 2, got  # UDP and TCP
    assert [g for g in got if g[0] == ".".join(["a" * 63] * 4) and g[2] == "refused"], got  # (as unlisted)
    assert ("", 0, "dropped", "dns: malformed query") in got, got
    assert not [r for r in recs if "FORGED" in r or r.get("state") == "exited" and r["event"] != "lifecycle"], recs
    raw, _ = captured(lab)
    assert b"a\"b" not in raw and b"aaaaaaaaaaaa" not in raw and b"FORGED" not in raw


def test_dns_stub_queries_from_fresh_ports(filtered, lab):
    """Off-path answer spoofing must guess the source port as well as the id: the upstream's
    log of where each UDP query came from shows a port of its own for (nearly) every query of
    the stub, not one fixed port for the container; the answers still arrive."""
    res, _ = filtered([["resolve", "pkg.test"] for _ in range(6)])
    assert all(r["ok"] for r in res), res
    srcs = [line.split() for line in lab.log("dns-src.log")]
    assert len(srcs) >= 6, srcs
    ports = {p for _, p in srcs}
    assert len(ports) >= len(srcs) - 1, srcs  # random ports may collide, rarely


def refused_addrs(recs):
    return {(r["host"], r["addr"], r["reason"]) for r in recs if r["event"] == "dns" and r["decision"] == "refused"
            and "addr" in r}


def test_dns_rebinding_and_ssrf_refused(filtered, lab):
    """Allowed names whose answers name the cloud metadata address, a private neighbour, loopback,
    IPv4-mapped / NAT64 forms, multicast, broadcast, CGNAT, the host's own address, or records of
    another owner (out of the question's CNAME chain): none of those addresses opens, the
    metadata and private servers (real ones, in the lab) never see a request, and each refusal
    is a `dns` record with the address and the reason. A CNAME chain to a global address works;
    one to the metadata address does not."""
    res, recs = filtered([["http", "meta.mirror.test", 80], ["http", "priv.mirror.test", 80],
                          ["http", "cmeta.mirror.test", 80], ["http_as", META4, 80, "meta.mirror.test"],
                          ["resolve", "loop.mirror.test"], ["resolve", "mapped.mirror.test"],
                          ["resolve", "mcast.mirror.test"], ["resolve", "cgnat.mirror.test"],
                          ["resolve", "host.mirror.test"], ["resolve", "stuffed.mirror.test"],
                          ["connect", UP4B, 80], ["http", "chain.mirror.test", 80]])
    *blocked, stuffed, other_owner, chain = res
    for r in blocked:
        assert not r["ok"], r
    assert stuffed["ok"] and stuffed["addrs"] == [UP4], stuffed
    assert not other_owner["ok"] and other_owner["error"] == "ECONNREFUSED", other_owner
    assert chain["ok"] and chain["addr"] == UP4B and chain["response"].endswith("ok chain.mirror.test\n"), chain
    assert lab.log("http.log") == ["chain.mirror.test"], lab.log("http.log")  # nothing reached META4 / PRIV4
    want = {("meta.mirror.test", META4, "link-local"), ("priv.mirror.test", PRIV4, "private"),
            ("priv.mirror.test", PRIV6, "ula"), ("cmeta.mirror.test", META4, "link-local"),
            ("loop.mirror.test", "127.0.0.1", "loopback"), ("loop.mirror.test", "::1", "loopback"),
            ("mapped.mirror.test", f"::ffff:{META4}", "ipv4-mapped link-local"),
            ("mapped.mirror.test", "64:ff9b::ae7:701", "nat64 private"),
            ("mcast.mirror.test", "224.0.0.1", "multicast"), ("mcast.mirror.test", "255.255.255.255", "reserved"),
            ("mcast.mirror.test", "ff02::1", "multicast"), ("mcast.mirror.test", "fe80::1", "link-local"),
            ("cgnat.mirror.test", "100.64.0.1", "cgnat"), ("cgnat.mirror.test", "0.0.0.0", "unspecified"),
            ("host.mirror.test", HOST4, "host address"),
            ("stuffed.mirror.test", UP4B, "not in the question's CNAME chain")}
    got = refused_addrs(recs)
    assert want <= got, want - got


def test_dns_private_answer_allowed_by_cidr(filtered, lab):
    """An allowedCidrs entry (here with a port) covering a private address lets an allowed name's
    answer open it on the policy's ports, like any other answer; the metadata address, not
    listed, stays closed."""
    pol = dict(POLICY, network=dict(POLICY["network"], allowedCidrs=POLICY["network"]["allowedCidrs"]
                                    + [f"{PRIV4}/32:8080"]))
    res, recs = filtered([["http", "priv.mirror.test", 80], ["http", "meta.mirror.test", 80]], policy=pol)
    priv, meta = res
    assert priv["ok"] and priv["addr"] == PRIV4 and priv["response"].endswith("ok priv.mirror.test\n"), priv
    assert not meta["ok"], meta
    assert lab.log("http.log") == ["priv.mirror.test"], lab.log("http.log")
    assert ("priv.mirror.test", PRIV4, "private") not in refused_addrs(recs)


# ---- issue 14: no request the server could read as another one gets through -------------------

def test_smuggling_against_a_server_that_ignores_bodies(filtered, lab):
    """naive.mirror.test (allowed) is served by Python's http.server, whose handlers answer
    without reading a request's body - which it then reads as the next request - and which logs
    every request line and Host. A second request for evil.test (same address, never resolved)
    hidden in a body (GET/HEAD/POST/DELETE, Content-Length or chunked, after blank lines), or a
    Host value that only starts with the allowed name (`ok:80@evil`, `ok evil`), never reaches
    it: the relay refuses with 403. A POST with an ordinary body passes."""
    smuggled = "GET /smuggled HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"

    def one(method, extra="", body="", host="naive.mirror.test", target="/front"):
        return ["http_reqs", UP4N, 80, [f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n{body}"], False]
    cl = f"Content-Length: {len(smuggled)}\r\n"
    cases = [one("GET", cl, smuggled), one("HEAD", cl, smuggled), one("POST", cl, smuggled),
             one("DELETE", cl, smuggled),
             one("POST", f"Content-Length: {len(smuggled) + 2}\r\n", "\r\n" + smuggled),
             one("POST", "Transfer-Encoding: chunked\r\n", chunked(smuggled)),
             one("GET", host="naive.mirror.test:80@evil.test"), one("GET", host="naive.mirror.test evil.test"),
             one("GET", host="naive.mirror.test:80 evil.test"), one("GET", host="naive.mirror.test\tevil.test"),
             one("GET", host="naive.mirror.test:"), one("GET", host="naive.mirror.test:80:81"),
             one("GET", "Host : evil.test\r\n")]
    # a body whose first line any lenient parser reads as a request line (Python's: words =
    # line.split(), 3 words and "HTTP/..." for any target, `GET x` as HTTP/0.9): leading bytes
    # and separators str.split() takes for blanks, targets that do not start with '/'
    ev = "Host: evil.test\r\nConnection: close\r\n\r\n"
    lenient = ([b + smuggled for b in "\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\x00\x7f"]
               + [f"GET{b}/smuggled{b}HTTP/1.1\r\n{ev}" for b in "\x0b\x0c\x1c\x1f\x85\xa0"]
               + [f"GET {t}smuggled HTTP/1.1\r\n{ev}" for t in ("", "?", ".", "%2f", "#", "~")]
               + ["GET smuggled\r\n\r\n", "get /smuggled http/1.0\r\n" + ev])
    cases += [one("POST", f"Content-Length: {len(b)}\r\n", b) for b in lenient]
    cases += [one("PUT", f"Content-Length: {len(lenient[-3])}\r\n", lenient[-3]),
              one("POST", "Transfer-Encoding: chunked\r\n", chunked("\x0b" + smuggled))]
    cases += [["http_reqs", UP4N, 80, [req("naive.mirror.test"), req("evil.test")], True],
             # the second chunk's data (the first passed, and with it the head: the server
             # answered the head, then failed on the chunk-size line)
             one("POST", "Transfer-Encoding: chunked\r\n", f"5\r\nhello\r\n{chunked(smuggled)}"),
             one("POST", "Transfer-Encoding: chunked\r\n", "3\r\n{\"a\r\n6\r\n\": 1}\n\r\n0\r\n\r\n",
                 target="/chunks"),
             one("POST", 'Content-Length: 13\r\n', '{"a": "GET"}\n', target="/json")]
    res, recs = filtered([["resolve", "naive.mirror.test"]] + cases)
    resolved, *smuggles, pipelined, second_chunk, chunks, ok = res
    assert resolved["ok"], resolved
    log = lab.log("naive.log")
    assert not [line for line in log if "evil" in line or "smuggled" in line], log
    for c, r in zip(cases, smuggles):
        assert r["ok"] and r["responses"] and r["responses"][-1][0] == "HTTP/1.1 403 Forbidden", (c, r)
    assert [x[0] for x in pipelined["responses"]] == ["HTTP/1.1 200 OK", "HTTP/1.1 403 Forbidden"], pipelined
    assert ok["ok"] and ok["responses"][0][0] == "HTTP/1.1 200 OK", ok
    assert chunks["ok"] and chunks["responses"][0][0] == "HTTP/1.1 200 OK", chunks
    assert second_chunk["ok"], second_chunk
    assert "POST /json HTTP/1.1 naive.mirror.test" in log and "POST /chunks HTTP/1.1 naive.mirror.test" in log, log
    rules = {r["rule"] for r in recs if r["event"] == "network" and r["decision"] == "refused"}
    assert {"http: body on a method without one", "http: body reads as a request", "host: none"} <= rules, rules


def test_upgrade_only_as_the_first_request(filtered, lab):
    """An Upgrade request pipelined while an earlier response still streams: the relay took the
    server's next bytes for the answer to the Upgrade, and a body reading `HTTP/1.1 101 ...`
    (sent late by the allowed server) made the rest of the client's stream opaque, so a request
    for evil.test on the same address reached the server (outside tester, 2026-12-01). An
    Upgrade is honoured only as a connection's first request; a later one is refused (403,
    audited) and nothing after it leaves. An Upgrade as the first request still passes."""
    up = ("GET /up HTTP/1.1\r\nHost: naive.mirror.test\r\nUpgrade: websocket\r\n"
          "Connection: Upgrade\r\n\r\n")
    smuggled = "GET /smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n"
    slow = "GET /slow101 HTTP/1.1\r\nHost: naive.mirror.test\r\n\r\n"
    res, recs = filtered([["resolve", "naive.mirror.test"],
                          ["http_reqs", UP4N, 80, [[slow, up, smuggled]], False],
                          ["http_reqs", UP4N, 80, [up], False]])
    _, smuggle, first = res
    log = lab.log("naive.log")
    assert not [line for line in log if "evil" in line or "smuggled" in line], log
    assert "GET /up HTTP/1.1 naive.mirror.test" in log, log  # the first-request Upgrade passed
    assert smuggle["ok"] and smuggle["responses"][0][0] == "HTTP/1.1 200 OK", smuggle
    assert first["ok"] and first["responses"][0][0] == "HTTP/1.1 200 OK", first
    rules = [r["rule"] for r in recs if r["event"] == "network" and r["decision"] == "refused"]
    assert "http: upgrade after the first request" in rules, rules


def test_relay_refuses_a_direct_connection(filtered, lab):
    """The relay's own port on the container's loopback (open for the redirect) dialled directly:
    refused at once, one audit record - not a relay to itself over and over (which filled the
    audit log and every relay slot); the relay still serves the next real connection."""
    direct = [f"GET /direct HTTP/1.1\r\nHost: naive.mirror.test\r\n\r\n"]
    res, recs = filtered([["resolve", "naive.mirror.test"], ["http_reqs", "127.0.0.1", 10053, direct, False],
                          ["http_reqs", UP4N, 80, [req("naive.mirror.test", "Connection: close\r\n")], False]])
    _, d, after = res
    loops = [r for r in recs if r["event"] == "network" and r.get("addr") == "127.0.0.1"]
    assert len(loops) == 1 and loops[0]["rule"] == "relay: not a redirected connection", loops
    assert not d.get("responses"), d
    assert after["ok"] and after["responses"][0][0] == "HTTP/1.1 200 OK", after
    assert lab.log("naive.log") == ["GET / HTTP/1.1 naive.mirror.test"], lab.log("naive.log")


def test_expect_100_continue_head_not_held(filtered, lab):
    """`Expect: 100-continue` (curl, for large uploads): the head reaches the server at once, which
    answers 100, and the body that follows is checked like any - an ordinary one passes, one that
    reads as a request for evil.test is refused and never reaches Python's http.server."""
    smuggled = "GET /smuggled HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"
    head = ("POST /up HTTP/1.1\r\nHost: naive.mirror.test\r\nExpect: 100-continue\r\n"
            "Content-Length: {}\r\n{}\r\n")
    res, _ = filtered([["resolve", "naive.mirror.test"],
                       ["http_expect", UP4N, 80, head.format(8, "Connection: close\r\n"), '{"a": 1}'],
                       ["http_expect", UP4N, 80, head.format(len(smuggled), ""), smuggled],
                       ["http_expect", UP4N, 80, head.format(len(smuggled) + 1, ""), "\x0b" + smuggled]])
    _, ok, bad, vt = res
    assert "evil.test" not in " ".join(lab.log("naive.log")), lab.log("naive.log")
    # (what follows the 100 is the naive server's: it answers without reading the body and
    # closes with the body unread, which the kernel turns into a reset)
    assert ok["ok"] and ok["statuses"][0] == "HTTP/1.1 100 Continue", ok
    assert bad["ok"] and bad["statuses"][0] == "HTTP/1.1 100 Continue", bad
    assert "HTTP/1.1 403 Forbidden" in bad["statuses"], bad
    assert vt["ok"] and "HTTP/1.1 403 Forbidden" in vt["statuses"], vt  # a leading VT: still a request


def monitor_ticks(rt, cid):
    """utime + stime (clock ticks) of the container's monitor, from the host; None when gone."""
    try:
        with open(os.path.join(rt.root, cid, "monitor.pid")) as f:
            pid = int(f.read().split()[0])
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None


def test_expect_100_body_sent_at_once_no_busy_loop(rt, ebundle, lab, tmp_path):
    """`Expect: 100-continue` from a client that does not wait: the head and the start of its
    body at once, then the client shuts down its side and, after the server's answer, closes.
    Exactly one `100 Continue` reaches it, and the relay does not spin afterwards: on main the
    bytes held for the body check kept the connection open and the client's EPOLLHUP woke the
    monitor in a loop (a whole core while the container slept 4 s). Judged from the host: the
    monitor's CPU time (/proc/PID/stat) over the run."""
    import threading
    lab.zone(ZONE)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(POLICY))
    head = ("POST /up HTTP/1.1\r\nHost: naive.mirror.test\r\nExpect: 100-continue\r\n"
            "Content-Length: 8\r\nConnection: close\r\n\r\n")
    ebundle.args("/usr/bin/python3", "/egress/client.py",
                 json.dumps([["resolve", "naive.mirror.test"], ["http_expect_now", UP4N, 80, head, "abc", 5, True],
                             ["run", "/bin/sleep", "4"]]))
    cid = f"e100-{uuid.uuid4().hex[:8]}"
    out, ticks = {}, []
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)
    t = threading.Thread(target=lambda: out.update(r=rt.run(ebundle, cid, global_args=audit_args(
        tmp_path, "--policy", str(pol)), env=env)[0]))
    t.start()
    while t.is_alive():
        v = monitor_ticks(rt, cid)
        if v is not None:
            ticks.append(v)
        time.sleep(0.1)
    t.join()
    r = out["r"]
    assert r.ok, r
    res = json.loads(r.out.strip().splitlines()[-1])
    assert res[1]["ok"] and res[1]["continues"] == 1, res[1]
    assert res[1]["statuses"][:2] == ["HTTP/1.1 100 Continue", "HTTP/1.1 200 OK"], res[1]
    assert ticks, "the monitor was never seen"
    hz = os.sysconf("SC_CLK_TCK")
    assert ticks[-1] < hz, f"the monitor used {ticks[-1] / hz:.2f} s of CPU in a run that mostly slept"
