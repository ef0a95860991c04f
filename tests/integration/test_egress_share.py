"""One egress per network namespace (issue 21, runtime/egress_share.h): a container whose
config.json joins (by path) the network namespace of another live agentsbx container with the same
network policy uses that container's egress (its table, DNS stub and sets); a different policy is
refused at create with nothing left behind; when the owner's monitor exits, the sharer is killed.
What is asserted is what the sharer's client sees and what the upstream and the audit logs hold."""
import json
import os
import subprocess
import time

import pytest

from test_egress import (HOSTUP4, POLICY, UP4, ZONE, audit_args, ebundle, lab, nft_table,  # noqa: F401
                         usr_template)

pytestmark = [pytest.mark.agentsbx_only("agent policy network modes")]


@pytest.fixture
def pair(rt, ebundle, make_bundle, usr_template, lab, tmp_path):
    """The owner: created (not started) in the lab's namespace under POLICY; share(policy,
    actions, detach) creates the sharer joining /proc/<owner init>/ns/net."""
    lab.zone(ZONE)
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(POLICY))
    ebundle.args("/usr/bin/sleep", "600")
    r, owner = rt.create(ebundle, global_args=audit_args(tmp_path, "--policy", str(pol)), env=env)
    assert r.ok, r
    pid = rt.state(owner).json()["pid"]

    def share(policy, actions=None, detach=False, caps=(), other_root=None):
        p2 = tmp_path / "policy2.json"
        p2.write_text(json.dumps(policy))
        b = make_bundle(rootfs_template=usr_template)
        b.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
        b.set_namespace("network", f"/proc/{pid}/ns/net")
        if caps:
            c = b.process.setdefault("capabilities", {})
            for k in ("bounding", "effective", "permitted"):
                c[k] = sorted(set(c.get(k, [])) | set(caps))
        args = audit_args(tmp_path, *(["--policy", str(p2)] if policy is not None else []))
        if other_root:
            b.args("/usr/bin/python3", "/egress/client.py", json.dumps(actions))
            b.save()
            cid = rt.new_id()
            return rt.cmd("run", "--bundle", b.path, cid, root=False, global_args=["--root", other_root, *args],
                          env=env), cid
        if detach:
            b.args("/usr/bin/sleep", "600")
            r, cid = rt.create(b, global_args=args, env=env)
            return r, cid
        b.args("/usr/bin/python3", "/egress/client.py", json.dumps(actions))
        return rt.run(b, global_args=args, env=env)
    share.pid = pid
    return owner, share


def records(tmp_path, cid):
    with open(tmp_path / "audit" / f"{cid}.jsonl") as f:
        return [json.loads(line) for line in f]


def test_same_policy_shares_the_owners_egress(rt, pair, lab, tmp_path):
    owner, share = pair
    r, cid = share(POLICY, [["resolve", "pkg.test"], ["http", "pkg.test", 80], ["resolve", "other.test"],
                            ["rawdns", UP4, "other.test"]])
    assert r.ok, r
    resolved, http, refused, raw = json.loads(r.out.strip().splitlines()[-1])
    assert resolved["ok"] and UP4 in resolved["addrs"], resolved
    assert http["ok"] and http["response"].endswith("ok pkg.test\n"), http
    assert not refused["ok"] and refused["error"].startswith("gai:"), refused
    assert raw["ok"] and raw["rcode"] == 5, raw  # REFUSED by the owner's stub, never forwarded
    assert "other.test" not in lab.queries() and "pkg.test" in lab.queries(), lab.queries()
    # the sharer's log names whose egress it used; the DNS records are in the owner's log
    pol = [x for x in records(tmp_path, cid) if x["event"] == "policy"]
    assert pol and pol[0]["egressOwner"] == owner, pol
    assert not [x for x in records(tmp_path, cid) if x["event"] == "dns"]
    odns = {(x["host"], x["decision"]) for x in records(tmp_path, owner) if x["event"] == "dns"}
    assert ("pkg.test", "allowed") in odns and ("other.test", "refused") in odns, odns
    # the owner's table is still the one in the namespace (the sharer did not replace it):
    # the address the sharer's lookup opened is in its set
    assert UP4 in (nft_table(lab.c) or ""), nft_table(lab.c)


def test_different_policy_is_refused_and_leaves_nothing(rt, pair, lab, tmp_path):
    owner, share = pair
    other = json.loads(json.dumps(POLICY))
    other["network"]["allowedDomains"] = ["pkg.test", "other.test"]
    r, cid = share(other, [["resolve", "other.test"]])
    assert not r.ok, r
    assert owner in r.err and cid in r.err and "network.allowedDomains" in r.err, r.err
    assert not rt.state(cid).ok
    assert not os.path.exists(os.path.join(rt.root, cid))
    assert not os.path.exists(tmp_path / "audit" / f"{cid}.jsonl") or not [
        x for x in records(tmp_path, cid) if x["event"] == "lifecycle" and x.get("state") == "created"]
    assert "other.test" not in lab.queries()
    # the owner's egress is untouched: a sharer with the same policy still resolves
    r, _ = share(POLICY, [["resolve", "pkg.test"]])
    assert r.ok and json.loads(r.out.strip().splitlines()[-1])[0]["ok"], r


def test_sharer_killed_when_the_owner_stops(rt, pair, lab, tmp_path):
    owner, share = pair
    r, cid = share(POLICY, detach=True)
    assert r.ok, r
    assert rt.start(cid).ok
    rt.wait_status(cid, "running")
    assert rt.kill(owner, "KILL").ok
    rt.wait_status(owner, "stopped")
    rt.wait_status(cid, "stopped")  # its monitor saw the owner's monitor exit
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        recs = records(tmp_path, cid)
        if any(x["event"] == "lifecycle" and x.get("state") == "exited" for x in recs):
            break
        time.sleep(0.05)
    exited = [x for x in recs if x["event"] == "lifecycle" and x.get("state") == "exited"]
    assert exited and exited[0]["exitReason"] == "killed", exited
    assert [x for x in recs if x["event"] == "network" and x.get("egressOwner") == owner], recs
    # a container joining now gets no stale egress: it becomes the namespace's owner itself
    # (the old owner's record names a dead monitor), so it is not refused


def test_owner_in_a_fresh_namespace(rt, make_bundle, usr_template, tmp_path):
    """The owner's namespace is one agentsbx made (pasta attaches it at the first query; no lab
    upstream here): a sharer joining /proc/<owner init>/ns/net is answered by the owner's stub
    (REFUSED for an unlisted name, sent to 127.0.0.1:53 directly)."""
    # no allowedCidrs and no `network` audit: the owner's table is deferred (see below)
    fresh = {"version": 1,
             "network": {"mode": "filtered", "allowedDomains": ["pkg.test"], "allowLocalBinding": True},
             "approvals": {"network": "deny"},
             "audit": {"events": ["lifecycle", "policy", "dns"]}}
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(fresh))
    args = audit_args(tmp_path, "--policy", str(pol))
    b = make_bundle(rootfs_template=usr_template)
    b.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
    b.args("/usr/bin/sleep", "600")
    r, owner = rt.create(b, global_args=args)
    assert r.ok, r
    pid = rt.state(owner).json()["pid"]

    def table():
        r = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "nft", "list", "table", "inet", "agentsbx"],
                           capture_output=True, text=True, timeout=60)
        return r.stdout if r.returncode == 0 else None
    # the owner's table waits for its first DNS activity (runtime/init.c network_table_deferred);
    # a sharer (whose hooks could wire the namespace) gets it loaded at its create
    assert table() is None
    s = make_bundle(rootfs_template=usr_template)
    s.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
    s.set_namespace("network", f"/proc/{pid}/ns/net")
    s.args("/usr/bin/sleep", "600")
    r, held = rt.create(s, global_args=args)
    assert r.ok, r
    assert "policy drop" in (table() or ""), table()
    assert rt.delete(held, force=True).ok
    s.args("/usr/bin/python3", "/egress/client.py", json.dumps([["rawdns", "127.0.0.1", "unlisted.invalid"]]))
    r, cid = rt.run(s, global_args=args)
    assert r.ok, r
    raw, = json.loads(r.out.strip().splitlines()[-1])
    assert raw["ok"] and raw["rcode"] == 5, raw
    odns = {(x["host"], x["decision"]) for x in records(tmp_path, owner) if x["event"] == "dns"}
    assert ("unlisted.invalid", "refused") in odns, odns
    # the owner's record (runtime/egress_share.h) is under the state root until its delete
    assert owned_records(rt, owner) and not owned_records(rt, cid)
    assert rt.delete(owner, force=True).ok
    assert not owned_records(rt, owner)


def owned_records(rt, cid):
    d = os.path.join(rt.root, "@egress")
    names = [n for n in os.listdir(d) if ":" in n and not n.startswith(".")] if os.path.isdir(d) else []
    return [n for n in names if open(os.path.join(d, n)).read().startswith(f"owner {cid}\n")]


def owner_table(pid):
    r = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "nft", "list", "table", "inet", "agentsbx"],
                       capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


DELETE_TABLE = [["run", "/usr/sbin/nft", "delete", "table", "inet", "agentsbx"]]


@pytest.mark.parametrize("policy", [None, {"version": 1, "network": {"mode": "open"}}], ids=["no-policy", "open"])
def test_joiner_without_the_same_egress_is_refused(rt, pair, tmp_path, policy):
    """A container that joins the namespace of another container's egress without sharing it (no
    policy, or network.mode open) is refused at create, whatever its capabilities: with
    CAP_NET_ADMIN one deleted the owner's table, and the owner then reached unlisted hosts
    (outside attack 07). The owner's table is what it was."""
    owner, share = pair
    before = owner_table(share.pid)
    assert before is not None
    r, cid = share(policy, DELETE_TABLE, caps=["CAP_NET_ADMIN"])
    assert not r.ok, r
    assert owner in r.err and "one namespace has one egress" in r.err, r.err
    assert not os.path.exists(os.path.join(rt.root, cid))
    assert owner_table(share.pid) == before


def test_joiner_under_another_root_is_refused_before_its_table(rt, pair, tmp_path):
    """A create under another --root cannot see the owner's record; it used to fail at its DNS
    stub's bind after its init had loaded its own, wider table over the running owner's (outside
    attack 07: allowedCidrs of the joiner's policy reached by the owner's agent). Now the table in
    the namespace refuses it before anything is loaded."""
    owner, share = pair
    before = owner_table(share.pid)
    wider = json.loads(json.dumps(POLICY))
    wider["network"]["allowedCidrs"] = [f"{UP4}/32"]
    r, cid = share(wider, [["resolve", "pkg.test"]], other_root=str(tmp_path / "root2"))
    assert not r.ok, r
    assert "already holds an agentsbx egress" in r.err, r.err
    assert owner_table(share.pid) == before


def test_owner_refused_when_another_container_runs_in_the_namespace_first(rt, ebundle, make_bundle, usr_template,
                                                                         lab, tmp_path):
    """The container made first is judged too: an `open` container with CAP_NET_ADMIN running in
    the lab's namespace before an egress owner arrives deleted the owner's table afterwards, and
    the owner's agent reached unlisted hosts (outside attack 10). An owner of a joined namespace
    must be the first process in it: refused, and no table is loaded there."""
    lab.zone(ZONE)
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)
    first = make_bundle(rootfs_template=usr_template)
    first.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
    first.set_namespace("network", f"/run/netns/{lab.c}")
    first.args("/usr/bin/sleep", "600")
    p_open = tmp_path / "open.json"
    p_open.write_text(json.dumps({"version": 1, "network": {"mode": "open"}}))
    r, pre = rt.create(first, global_args=audit_args(tmp_path, "--policy", str(p_open)), env=env)
    assert r.ok, r
    assert rt.start(pre).ok
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(POLICY))
    ebundle.args("/usr/bin/sleep", "600")
    r, owner = rt.create(ebundle, global_args=audit_args(tmp_path, "--policy", str(pol)), env=env)
    assert not r.ok, r
    assert "already runs, outside any agentsbx egress" in r.err, r.err
    assert nft_table(lab.c) is None
    assert not os.path.exists(os.path.join(rt.root, owner))
