"""network.mode filtered under isolation vm (issue 22; runtime/vm_net.h, docs/policy.md "network in
the vm tier"): the guest's only NIC is QEMU's user-mode one, and QEMU runs in the container's
network namespace on the host, where the nftables table, the DNS stub and the SNI/Host relay run
exactly as for a container.

The egress lab of test_egress.py (its fixtures, imported): QEMU joins the lab's "container"
namespace as an engine-given one. Part of the egress matrix runs here unchanged, the policy's
isolation set to vm (test_egress's own test functions, imported, against this module's
`filtered`). TCG boots take 10-20 s: each VM run carries several observations.

Where the vm tier differs from the container tier (docs/policy.md): the guest's 127.0.0.1 is the
guest's own loopback (no stub or relay there: slirp's gateway 10.0.2.2 is the namespace's
loopback), and a refused UDP datagram is dropped on the host after the guest's sendto succeeded
(no EPERM in the guest). test_egress's tests that dial 127.0.0.1 or expect that EPERM are
replaced here by the vm's equivalents."""
import json
import os
import subprocess

import pytest

from test_egress import (  # noqa: F401 (fixtures and tests used by name)
    HOSTUP4, POLICY, SBX_POLICY, SBX_ZONE, UP4, UP4B, UP6B, ZONE, audit_args, dns_records, lab, nft_table, pasta_pids,
    udp_settled, usr_template, test_dns_rebinding_and_ssrf_refused, test_filtered_allowed_name_resolves_and_connects,
    test_filtered_direct_addresses, test_filtered_refused_names_never_leave, test_tls_sni_v4_v6_and_audit_once)
from test_vm import OWNER, _kernel_release

pytestmark = [pytest.mark.agentsbx_only("the vm isolation tier is agentsbx's")]

TTL = "/proc/sys/net/ipv4/ip_default_ttl"


@pytest.fixture(scope="module")
def vm_kernel():
    return _kernel_release()


@pytest.fixture
def vbundle(make_bundle, usr_template, lab, vm_kernel):  # noqa: F811
    """test_egress's ebundle, owned by the unprivileged user QEMU runs as (vm_jail.h)."""
    b = make_bundle(rootfs_template=usr_template)
    b.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
    b.set_namespace("network", f"/run/netns/{lab.c}")
    caps = b.process.setdefault("capabilities", {})
    for k in ("bounding", "effective", "permitted"):
        # granted by the spec on purpose: the policy must take them away (in the guest too)
        caps[k] = sorted(set(caps.get(k, [])) | {"CAP_NET_ADMIN", "CAP_NET_RAW"})
    orig = b.save

    def save():
        orig()
        subprocess.run(["chown", "-R", f"{OWNER}:{OWNER}", b.path], check=True)
    b.save = save
    return b


def vm_policy(policy):
    """The policy with isolation vm, and without `extends: agent`: the agent profile's filesystem
    rules need more than the 6.1 guest kernel has (allowExec's memfd_noexec, Linux 6.3; denyRead's
    unique mount ids, 6.8: refused in the guest, docs/policy.md §2.8). Its audit events are kept."""
    p = {k: v for k, v in policy.items() if k != "extends"}
    p.setdefault("audit", {"events": ["lifecycle", "policy", "exec", "network", "dns", "denial", "limit",
                                      "approval"]})
    return {**p, "isolation": "vm"}


@pytest.fixture
def filtered(rt, vbundle, lab, tmp_path):  # noqa: F811
    """test_egress's `filtered`, every policy with isolation vm."""
    lab.zone(ZONE)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(vm_policy(POLICY)))
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)

    def go(actions, policy=None):
        if policy:
            pol.write_text(json.dumps(vm_policy(policy)))
        vbundle.args("/usr/bin/python3", "/egress/client.py", json.dumps(actions))
        r, cid = rt.run(vbundle, global_args=audit_args(tmp_path, "--policy", str(pol)), env=env, timeout=300)
        assert r.ok, r
        with open(tmp_path / "audit" / f"{cid}.jsonl") as f:
            recs = [json.loads(line) for line in f]
        return json.loads(r.out.strip().splitlines()[-1]), recs
    return go


def ttl_in(netns):
    return subprocess.run(["ip", "netns", "exec", netns, "cat", TTL], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_vm_filtered_egress_is_the_hosts(filtered, lab, vbundle):
    """One VM run: an allowed name is fetched through the relay, an unlisted one is refused and
    never asked upstream, a direct address is refused, the guest's /proc/sys/net is the guest's
    own, the table and the records are the host side's, and the guest cannot touch the table."""
    vbundle.linux["readonlyPaths"] = [p for p in vbundle.linux.get("readonlyPaths", []) if p != "/proc/sys"]
    before = ttl_in(lab.c)
    guest_ttl = "33" if before != "33" else "34"
    res, recs = filtered([
        ["http", "pkg.test", 80], ["resolve", "other.test"], ["rawdns", UP4B, "other.test"],
        ["connect", UP4B, 80], ["connect", UP4, 8080],
        ["run", "/bin/sh", "-c", f"echo {guest_ttl} > {TTL} && cat {TTL}"],
        ["run", "nft", "flush", "ruleset"], ["run", "/bin/cat", "/etc/resolv.conf"], ["run", "/bin/uname", "-r"],
        # slirp's gateway is the namespace's loopback: the stub (TCP too), and the relay's port
        # dialled directly is refused by the relay; the guest's own 127.0.0.1 holds neither
        ["tcpdns", "10.0.2.2", "other.test"], ["tcpdns", "127.0.0.1", "other.test"],
        ["http_reqs", "10.0.2.2", 10053, ["GET / HTTP/1.1\r\nHost: pkg.test\r\n\r\n"], False],
        ["udp", UP4, 9999]])
    (http, other, raw, direct, wrong_port, sysctl, flush, resolv, uname, gw_dns, guest_lo, gw_relay,
     udp) = res
    assert uname["ok"] and uname["out"].strip() != os.uname().release, uname  # it ran in the guest
    assert http["ok"] and http["response"].endswith("ok pkg.test\n"), http
    assert not other["ok"] and other["error"].startswith("gai:"), other
    assert raw["ok"] and raw["rcode"] == 5 and raw["answers"] == 0, raw  # REFUSED by the host's stub
    for r in (direct, wrong_port):
        assert not r["ok"] and r["error"] == "ECONNREFUSED", r
    # never asked upstream: only the allowed name reached the lab's DNS server
    assert set(lab.queries()) == {"pkg.test"}, lab.queries()
    # the guest's write took effect in the guest's kernel, not in the host's namespace
    assert sysctl["ok"] and sysctl["rc"] == 0 and sysctl["out"].strip() == guest_ttl, sysctl
    assert ttl_in(lab.c) == before
    # the policy's capability drop holds in the guest too (the spec granted CAP_NET_ADMIN)
    assert flush["ok"] and flush["rc"] != 0 and "Operation not permitted" in flush["err"], flush
    # the resolver is slirp's, i.e. the host's stub; the table is in the host's namespace
    assert resolv["ok"] and "nameserver 10.0.2.3" in resolv["out"], resolv
    table = nft_table(lab.c)
    assert table is not None and "policy drop" in table and "@allow4" in table
    # the host side's records: the stub's answers and refusals, the table's refused connect
    got = dns_records(recs)
    assert ("pkg.test", 1, "allowed", "pkg.test") in got, got
    assert ("other.test", 1, "refused", "unlisted") in got, got
    net = [(r.get("addr"), r.get("port"), r.get("proto"), r.get("rule")) for r in recs if r["event"] == "network"]
    assert (UP4B, 80, "tcp", "default-deny") in net, net
    assert (UP4, 9999, "udp", "default-deny") in net, net
    assert udp["ok"], udp  # the guest's sendto: slirp took it; the host's table dropped it
    assert udp_settled(lab) == []
    assert gw_dns["ok"] and gw_dns["rcode"] == 5 and gw_dns["answers"] == 0, gw_dns
    assert not guest_lo["ok"] and guest_lo["error"] == "ECONNREFUSED", guest_lo
    assert not gw_relay.get("responses"), gw_relay
    loops = [r for r in recs if r["event"] == "network" and r.get("addr") == "127.0.0.1"]
    assert len(loops) == 1 and loops[0]["rule"] == "relay: not a redirected connection", loops


def test_vm_guest_ipv6_ready_before_the_process(filtered):
    """The guest's IPv6 is static like its IPv4 (vm_net.h): at the container's first instruction
    eth0 holds fec0::15 (not tentative: no duplicate address detection to wait for), the default
    route goes via slirp's fec0::2, and a first connect to an unlisted IPv6 address is refused by
    the host's table (ECONNREFUSED), never ENETUNREACH. With SLAAC this raced the router
    advertisement and failed under load (CI, the ASan run)."""
    res, recs = filtered([["run", "/bin/cat", "/proc/net/if_inet6", "/proc/net/ipv6_route"],
                          ["connect", UP6B, 80]])
    net, v6 = res
    assert net["ok"] and net["rc"] == 0, net
    addrs = {f[0]: int(f[4], 16) for f in (line.split() for line in net["out"].splitlines())
             if len(f) == 6 and f[5] == "eth0"}
    assert addrs.get("fec00000000000000000000000000015") is not None, addrs
    assert addrs["fec00000000000000000000000000015"] & 0x40 == 0, "tentative"  # IFA_F_TENTATIVE
    routes = [f for f in (line.split() for line in net["out"].splitlines()) if len(f) == 10]
    assert any(f[0] == "0" * 32 and f[1] == "00" and f[4] == "fec00000000000000000000000000002"
               and f[9] == "eth0" for f in routes), routes
    assert not v6["ok"] and v6["error"] == "ECONNREFUSED", v6
    rec = [(r.get("addr"), r.get("port")) for r in recs if r["event"] == "network"]
    assert (UP6B, 80) in rec, rec


def test_vm_open_network_is_refused(rt, vbundle, tmp_path):
    """network.mode open is not built for the vm tier: refused, nothing left."""
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps({"version": 1, "isolation": "vm", "network": {"mode": "open"}}))
    vbundle.args("/bin/true")
    r, cid = rt.run(vbundle, global_args=["--policy", str(pol)], timeout=120)
    assert r.rc != 0 and 'network.mode "open" is not built yet in the vm tier' in r.err, r


def test_vm_fresh_netns_pasta(rt, make_bundle, usr_template, lab, vm_kernel, tmp_path):  # noqa: F811
    """A bundle asking for a new network namespace (the sandbox's case): QEMU's clone makes it,
    the monitor attaches pasta at the stub's first activity (the host's routes: the lab's
    upstream over the test veth), an allowed name is fetched, a lab address dialled directly is
    refused, and pasta is gone after the run."""
    lab.zone(SBX_ZONE)
    b = make_bundle(rootfs_template=usr_template)
    b.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
    b.args("/usr/bin/python3", "/egress/client.py",
           json.dumps([["http", "sbx.test", 80], ["connect", UP4, 80], ["resolve", "other.test"]]))
    b.save()
    subprocess.run(["chown", "-R", f"{OWNER}:{OWNER}", b.path], check=True)
    b.save = lambda: None  # keep the owner: rt.run saves again
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(vm_policy(SBX_POLICY)))
    before = pasta_pids()
    r, cid = rt.run(b, global_args=audit_args(tmp_path, "--policy", str(pol)),
                    env=dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4), timeout=300)
    assert r.ok, r
    http, lab_direct, other = json.loads(r.out.strip().splitlines()[-1])
    assert http["ok"] and http["response"].endswith("ok sbx.test\n"), http
    assert not lab_direct["ok"] and lab_direct["error"] == "ECONNREFUSED", lab_direct
    assert not other["ok"] and other["error"].startswith("gai:"), other
    assert set(lab.queries()) == {"sbx.test"}, lab.queries()
    assert pasta_pids() <= before, "pasta outlived the VM"
    with open(tmp_path / "audit" / f"{cid}.jsonl") as f:
        recs = [json.loads(line) for line in f]
    assert ("sbx.test", 1, "allowed", "sbx.test") in dns_records(recs)


# ---- the detached path an engine uses: create, start, delete (runtime/vm_supervisor.h) ----

def _ns(pid):
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def _qemu_pid(root, cid):
    with open(os.path.join(root, cid, "vm-qemu")) as f:
        return int(f.read().split()[0])


def _egress_records(root):
    d = os.path.join(root, "@egress")
    return [e for e in os.listdir(d) if e != "lock"] if os.path.isdir(d) else []


def _create_start_delete(rt, b, pol, tmp_path, at_created):
    """create (the supervisor S boots QEMU and the guest holds the container at its gate), the
    caller's checks while `created`, start, the process's end, delete; returns its last output
    line (client.py's results), the audit records and what the caller's checks returned."""
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)
    r, cid = rt.create(b, global_args=audit_args(tmp_path, "--policy", str(pol)), env=env, timeout=300)
    assert r.ok, r
    st = rt.state(cid).json()
    assert st["status"] == "created", st
    sup, qemu = st["pid"], _qemu_pid(rt.root, cid)
    # QEMU is in S's namespace (the one the hooks are given), never the runtime's own
    assert _ns(qemu) == _ns(sup) != _ns(os.getpid()), (sup, qemu)
    # before the process starts: the table is loaded there, the monitor runs, the namespace's
    # egress owner is recorded
    assert os.path.exists(os.path.join(rt.root, cid, "monitor.pid"))
    table = subprocess.run(["nsenter", f"--net=/proc/{sup}/ns/net", "nft", "list", "table", "inet", "agentsbx"],
                           capture_output=True, text=True)
    assert table.returncode == 0 and "policy drop" in table.stdout, table
    assert len(_egress_records(rt.root)) == 1, _egress_records(rt.root)
    seen = at_created(sup)
    assert rt.start(cid).ok
    rt.wait_status(cid, "stopped", timeout=300)
    out = b.container_output()
    with open(tmp_path / "audit" / f"{cid}.jsonl") as f:
        recs = [json.loads(line) for line in f]
    d = rt.delete(cid)
    assert d.ok, d
    # delete removed the state dir, the namespace's egress record, the VM's run dir
    assert not os.path.exists(os.path.join(rt.root, cid))
    assert _egress_records(rt.root) == [], _egress_records(rt.root)
    assert not os.path.exists(os.path.join(rt.root, "vm", cid))
    for pid in (sup, qemu):
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    return json.loads(out.strip().splitlines()[-1]), recs, seen


def test_vm_filtered_create_start_joined_netns(rt, vbundle, lab, tmp_path):  # noqa: F811
    """create/start of a bundle naming the lab's namespace by path (an engine's case): the
    supervisor joins it, QEMU is there, the table is loaded before the guest's process runs; an
    allowed name is fetched, an unlisted one refused and never asked upstream, the records are
    the host side's; delete leaves nothing (the @egress record included)."""
    lab.zone(ZONE)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(vm_policy(POLICY)))
    vbundle.args("/usr/bin/python3", "/egress/client.py",
                 json.dumps([["http", "pkg.test", 80], ["resolve", "other.test"], ["rawdns", UP4B, "other.test"],
                             ["connect", UP4B, 80], ["run", "/bin/cat", "/etc/resolv.conf"]]))
    lab_ns = os.stat(f"/run/netns/{lab.c}").st_ino
    res, recs, sup_ns = _create_start_delete(rt, vbundle, pol, tmp_path, _ns)
    assert sup_ns == lab_ns
    http, other, raw, direct, resolv = res
    assert http["ok"] and http["response"].endswith("ok pkg.test\n"), http
    assert not other["ok"] and other["error"].startswith("gai:"), other
    assert raw["ok"] and raw["rcode"] == 5 and raw["answers"] == 0, raw
    assert not direct["ok"] and direct["error"] == "ECONNREFUSED", direct
    assert resolv["ok"] and "nameserver 10.0.2.3" in resolv["out"], resolv
    assert set(lab.queries()) == {"pkg.test"}, lab.queries()
    got = dns_records(recs)
    assert ("pkg.test", 1, "allowed", "pkg.test") in got, got
    assert ("other.test", 1, "refused", "unlisted") in got, got
    net = [(r.get("addr"), r.get("port"), r.get("rule")) for r in recs if r["event"] == "network"]
    assert (UP4B, 80, "default-deny") in net, net


def test_vm_filtered_create_start_fresh_netns(rt, make_bundle, usr_template, lab, vm_kernel, tmp_path):  # noqa: F811
    """create/start of a bundle asking for a new namespace (Docker's bridge case, whose prestart
    hook wires /proc/<pid>/ns/net): the supervisor makes it and QEMU joins it; nothing wires it
    here, so the monitor's deferred pasta is the way out, as for a container; pasta is gone after
    delete."""
    lab.zone(SBX_ZONE)
    b = make_bundle(rootfs_template=usr_template)
    b.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
    b.args("/usr/bin/python3", "/egress/client.py",
           json.dumps([["http", "sbx.test", 80], ["connect", UP4, 80], ["resolve", "other.test"]]))
    b.save()
    subprocess.run(["chown", "-R", f"{OWNER}:{OWNER}", b.path], check=True)
    b.save = lambda: None  # keep the owner: rt.create saves again
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(vm_policy(SBX_POLICY)))
    before = pasta_pids()

    def lo_up(sup):
        r = subprocess.run(["nsenter", f"--net=/proc/{sup}/ns/net", "ip", "-o", "link", "show", "lo"],
                           capture_output=True, text=True, check=True)
        return "UP" in r.stdout.split("<", 1)[1].split(">", 1)[0].split(",")
    res, recs, lo = _create_start_delete(rt, b, pol, tmp_path, lo_up)
    assert lo, "the fresh namespace's lo is down"
    http, lab_direct, other = res
    assert http["ok"] and http["response"].endswith("ok sbx.test\n"), http
    assert not lab_direct["ok"] and lab_direct["error"] == "ECONNREFUSED", lab_direct
    assert not other["ok"] and other["error"].startswith("gai:"), other
    assert set(lab.queries()) == {"sbx.test"}, lab.queries()
    assert ("sbx.test", 1, "allowed", "sbx.test") in dns_records(recs)
    assert ("other.test", 1, "refused", "unlisted") in dns_records(recs)
    assert pasta_pids() <= before, "pasta outlived the VM"
