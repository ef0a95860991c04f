"""network.mode filtered under isolation vm (issue 22; runtime/vm_net.h, docs/policy.md "network in
the vm tier"): the guest's only NIC is QEMU's user-mode one, and QEMU runs in the container's
network namespace on the host, where the nftables table, the DNS stub and the SNI/Host relay run
exactly as for a container.

The egress lab of test_egress.py (its fixtures, imported): QEMU joins the lab's "container"
namespace as an engine-given one. Part of the egress matrix runs here unchanged, the policy's
isolation set to vm (test_egress's own test functions, imported, against this module's
`filtered`). TCG boots take 10-20 s: each VM run carries several observations."""
import json
import os
import subprocess

import pytest

from test_egress import (  # noqa: F401 (fixtures and tests used by name)
    C4, HOSTUP4, POLICY, UP4, UP4B, UP6B, ZONE, audit_args, dns_records, lab, nft_table, udp_settled, usr_template,
    test_filtered_allowed_name_resolves_and_connects, test_filtered_direct_addresses,
    test_filtered_refused_names_never_leave)
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
        ["run", "nft", "flush", "ruleset"], ["run", "/bin/cat", "/etc/resolv.conf"], ["run", "/bin/uname", "-r"]])
    http, other, raw, direct, wrong_port, sysctl, flush, resolv, uname = res
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
    refused = [r for r in recs if r["event"] == "network" and r.get("addr") == UP4B and r.get("port") == 80]
    assert refused, [r for r in recs if r["event"] == "network"]
    assert udp_settled(lab) == []


def test_vm_open_network_is_refused(rt, vbundle, tmp_path):
    """network.mode open is not built for the vm tier: refused, nothing left."""
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps({"version": 1, "isolation": "vm", "network": {"mode": "open"}}))
    vbundle.args("/bin/true")
    r, cid = rt.run(vbundle, global_args=["--policy", str(pol)], timeout=120)
    assert r.rc != 0 and 'network.mode "open" is not built yet in the vm tier' in r.err, r
