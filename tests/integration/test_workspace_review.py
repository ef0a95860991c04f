"""Review workspaces (issue 18; docs/policy.md §2.1a, agentsbx-workspace(8)): the workspace mount
is an overlay whose upper layer agentsbx keeps in <workspacesDir>/<id>/; the host directory is not
written during the run. What is judged: what the command inside prints, what the host directory
holds afterwards, what the upper layer holds (files, whiteouts, owners), meta.json, and what the
`workspace` verbs print and leave behind."""

import json
import os
import signal
import stat
import subprocess
import time

import pytest

from policyutil import audit_dir, sandbox_run

pytestmark = pytest.mark.agentsbx_only("review workspaces are an agentsbx extension")

REVIEW = {"version": 1, "filesystem": {"workspace": {"mode": "review"}}}


@pytest.fixture
def wsdir(rt):
    """the workspaces directory of this test (host config workspacesDir)"""
    return os.path.join(rt.workdir, "workspaces")


@pytest.fixture
def config(rt, wsdir):
    p = os.path.join(rt.workdir, "review-config.json")
    with open(p, "w") as f:
        json.dump({"workspacesDir": wsdir}, f)
    return p


@pytest.fixture
def ws(rt):
    d = os.path.join(rt.workdir, "ws")
    os.makedirs(d)
    os.chmod(d, 0o777)
    with open(os.path.join(d, "a.txt"), "w") as f:
        f.write("hello\n")
    with open(os.path.join(d, "del.txt"), "w") as f:
        f.write("keep\n")
    return d


def review_run(rt, config, sid, ws, script, *extra, **kw):
    return sandbox_run(rt, "--review", "--id", sid, "--workspace", ws, *extra, "--", "/bin/sh", "-c", script,
                       global_args=["--config", config], **kw)


def wcmd(rt, config, *args):
    return rt.cmd("workspace", *args, global_args=["--config", config, "--audit-dir", audit_dir(rt)])


def workspace_records(rt, sid):
    with open(os.path.join(audit_dir(rt), f"{sid}.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["event"] == "workspace"]


def meta(wsdir, sid):
    with open(os.path.join(wsdir, sid, "meta.json")) as f:
        return json.load(f)


def test_writes_land_in_upper_not_on_host(rt, config, wsdir, ws):
    sid = rt.new_id()
    t0 = time.time_ns()
    r = review_run(rt, config, sid, ws,
                   "cat a.txt; echo new > b.txt; echo more >> a.txt; rm del.txt; ls; cat a.txt")
    t1 = time.time_ns()
    assert r.rc == 0, r
    # inside: the host file's content, then the command's own changes
    assert r.out.split() == ["hello", "a.txt", "b.txt", "hello", "more"], r
    # the host directory is as it was
    assert sorted(os.listdir(ws)) == ["a.txt", "del.txt"]
    with open(os.path.join(ws, "a.txt")) as f:
        assert f.read() == "hello\n"
    # the upper: full copies, a whiteout for the deleted name
    up = os.path.join(wsdir, sid, "upper")
    with open(os.path.join(up, "a.txt")) as f:
        assert f.read() == "hello\nmore\n"
    with open(os.path.join(up, "b.txt")) as f:
        assert f.read() == "new\n"
    st = os.lstat(os.path.join(up, "del.txt"))
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == 0, st
    m = meta(wsdir, sid)
    wst = os.stat(ws)
    assert m["id"] == sid and m["workspace"] == os.path.realpath(ws)
    assert (m["lowerDev"], m["lowerIno"]) == (wst.st_dev, wst.st_ino)
    assert t0 <= m["startedNs"] <= t1, (t0, m["startedNs"], t1)
    assert m["state"] == "stopped" and m["xattr"] == "trusted" and m["snapshots"] == []
    # the agent profile's denyWrite rules inside the workspace
    assert ".git/hooks" in m["protect"] and ".git/config" in m["protect"], m
    d = os.stat(os.path.join(wsdir, sid))
    assert stat.S_IMODE(d.st_mode) == 0o700


def test_user_owned_workspace_uses_user_xattrs(rt, config, wsdir, ws):
    """a workspace owned by a user runs in a user namespace (container root = its owner): the
    overlay is mounted there with userxattr, and the upper's files are the owner's"""
    nobody = 65534
    for root, dirs, files in os.walk(ws):
        for n in dirs + files:
            os.chown(os.path.join(root, n), nobody, nobody)
    os.chown(ws, nobody, nobody)
    os.chmod(ws, 0o755)
    sid = rt.new_id()
    r = review_run(rt, config, sid, ws, "id -u; echo x > n; rm del.txt; mkdir d; echo y > d/f")
    if r.rc != 0 and "cannot reach" in r.err:
        pytest.skip(f"the workdir is not searchable by uid {nobody}: {r.err.strip()}")
    assert r.rc == 0, r
    assert r.out.split()[0] == "0", r
    up = os.path.join(wsdir, sid, "upper")
    for n in ("n", "d", "d/f"):
        assert os.lstat(os.path.join(up, n)).st_uid == nobody, n
    assert not os.path.exists(os.path.join(ws, "n")) and os.path.exists(os.path.join(ws, "del.txt"))
    assert meta(wsdir, sid)["xattr"] == "user"


def test_list_and_discard_leave_nothing(rt, config, wsdir, ws):
    sid = rt.new_id()
    r = review_run(rt, config, sid, ws, "echo x > f; mkdir -p d/e")
    assert r.rc == 0, r
    r = wcmd(rt, config, "list")
    assert r.rc == 0, r
    row = [line.split() for line in r.out.splitlines() if line.startswith(sid)]
    assert row and row[0][1] == "stopped" and row[0][-1] == os.path.realpath(ws), r
    r = wcmd(rt, config, "list", "--json")
    assert r.rc == 0, r
    entry = [e for e in json.loads(r.out) if e["id"] == sid]
    assert entry and entry[0]["changed"] == 2 and entry[0]["state"] == "stopped", r
    r = wcmd(rt, config, "discard", sid)
    assert r.rc == 0, r
    assert not os.path.exists(os.path.join(wsdir, sid))
    r = wcmd(rt, config, "list", "--json")
    assert r.rc == 0 and [e for e in json.loads(r.out) if e["id"] == sid] == [], r
    r = wcmd(rt, config, "discard", sid)
    assert r.rc != 0 and "does not exist" in r.err, r
    assert sorted(os.listdir(ws)) == ["a.txt", "del.txt"]


def test_snapshot_rollback_round_trip(rt, config, wsdir, ws):
    sid = rt.new_id()
    assert review_run(rt, config, sid, ws, "echo v1 > state").rc == 0
    r = wcmd(rt, config, "snapshot", sid, "first")
    assert r.rc == 0 and r.out.strip() == "first", r
    with open(os.path.join(wsdir, sid, "snapshots", "first", "meta.json")) as f:
        sm = json.load(f)
    assert sm["name"] == "first" and sm["files"] == 1 and sm["bytes"] == 3, sm
    # the next run with the id resumes from the upper: it sees v1
    r = review_run(rt, config, sid, ws, "cat state; echo v2 > state; rm a.txt")
    assert r.rc == 0 and r.out.split() == ["v1"], r
    r = wcmd(rt, config, "snapshot", sid)
    assert r.rc == 0 and r.out.strip() == "snap-2", r
    assert meta(wsdir, sid)["snapshots"] == ["first", "snap-2"]
    r = wcmd(rt, config, "rollback", sid, "first")
    assert r.rc == 0, r
    r = review_run(rt, config, sid, ws, "cat state; cat a.txt")
    assert r.rc == 0 and r.out.split() == ["v1", "hello"], r
    # rollback to the later one: a.txt deleted again (the whiteout came back with it)
    assert wcmd(rt, config, "rollback", sid, "snap-2").rc == 0
    r = review_run(rt, config, sid, ws, "cat state; ls")
    assert r.rc == 0 and r.out.split() == ["v2", "del.txt", "state"], r
    # the audit log: a `workspace` record at each stop and each snapshot
    recs = [(r["action"], r.get("snapshot")) for r in workspace_records(rt, sid)]
    assert recs == [("stopped", None), ("snapshot", "first"), ("stopped", None), ("snapshot", "snap-2"),
                    ("stopped", None), ("stopped", None)], recs
    assert workspace_records(rt, sid)[0]["changed"] == 1
    r = wcmd(rt, config, "rollback", sid, "nosuch")
    assert r.rc != 0 and "no snapshot" in r.err, r
    r = wcmd(rt, config, "snapshot", sid, ".bad")
    assert r.rc != 0 and "snapshot name" in r.err, r
    assert sorted(os.listdir(ws)) == ["a.txt", "del.txt"]


def test_snapshot_while_running_freezes(rt, config, wsdir, ws):
    sid = rt.new_id()
    argv = [rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "--config", config, "sandbox", "--review",
            "--id", sid, "--workspace", ws, "--", "/bin/sh", "-c", "echo one > f; sleep 60"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        up = os.path.join(wsdir, sid, "upper", "f")
        deadline = time.monotonic() + 30
        while not os.path.exists(up) and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert os.path.exists(up), "the sandbox never wrote f"
        r = wcmd(rt, config, "list", "--json")
        assert [e["state"] for e in json.loads(r.out) if e["id"] == sid] == ["running"], r
        r = wcmd(rt, config, "rollback", sid, "x")
        assert r.rc != 0 and "running" in r.err, r
        r = wcmd(rt, config, "discard", sid)
        assert r.rc != 0 and "running" in r.err, r
        r = wcmd(rt, config, "snapshot", sid, "live")
        assert r.rc == 0, r
        with open(os.path.join(wsdir, sid, "snapshots", "live", "upper", "f")) as f:
            assert f.read() == "one\n"
        # thawed again: still running, not paused
        assert rt.status(sid) == "running"
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    assert meta(wsdir, sid)["state"] == "stopped"


def _ws_bundle(make_bundle, host_dir, dest="/workspace", annotation=REVIEW, args=None):
    b = make_bundle(args=args or ["/bin/sh", "-c", "cat /workspace/a.txt; echo n > /workspace/n"])
    if dest:
        b.add_mount(dest, "bind", host_dir, ["rbind", "rw"])
    if annotation is not None:
        b.config.setdefault("annotations", {})["io.agentsbx.policy"] = json.dumps(annotation)
    b.save()
    return b


def test_oci_run_policy_annotation(rt, config, wsdir, ws, make_bundle):
    """an engine's path: `run` on a bundle whose policy (here its annotation, as a runtime-class
    profile would give it) asks for review: the bind at /workspace becomes the overlay"""
    b = _ws_bundle(make_bundle, ws)
    cid = rt.new_id()
    r, _ = rt.run(b, cid, global_args=["--config", config, "--audit-dir", audit_dir(rt)])
    assert r.rc == 0, r
    assert r.out.split() == ["hello"], r
    assert not os.path.exists(os.path.join(ws, "n"))
    with open(os.path.join(wsdir, cid, "upper", "n")) as f:
        assert f.read() == "n\n"
    assert meta(wsdir, cid)["state"] == "stopped"
    assert wcmd(rt, config, "discard", cid).rc == 0


def test_oci_review_source_holding_the_workspaces_dir_refused(rt, make_bundle):
    """A bundle whose review bind source holds the workspacesDir: the agent read and rewrote
    other workspaces' meta.json and upper through /workspace/.wsd (outside tester, attack 20)."""
    proj = os.path.join(rt.workdir, f"proj-{os.urandom(2).hex()}")
    inside = os.path.join(proj, ".wsd")
    os.makedirs(os.path.join(inside, "victim"))
    with open(os.path.join(inside, "victim", "meta.json"), "w") as f:
        f.write("VICTIM-META\n")
    with open(os.path.join(proj, "a.txt"), "w") as f:
        f.write("hello\n")
    cfg = os.path.join(rt.workdir, f"cfg-{os.urandom(2).hex()}.json")
    with open(cfg, "w") as f:
        json.dump({"workspacesDir": inside}, f)
    b = _ws_bundle(make_bundle, proj, args=["/bin/sh", "-c", "cat /workspace/.wsd/victim/meta.json; "
                                                             "echo forged > /workspace/.wsd/victim/meta.json"])
    cid = rt.new_id()
    r, _ = rt.run(b, cid, global_args=["--config", cfg, "--audit-dir", audit_dir(rt)])
    assert r.rc != 0, r
    assert "VICTIM-META" not in r.out and "the review workspaces directory" in r.err, r
    assert not os.path.exists(os.path.join(inside, cid))
    with open(os.path.join(inside, "victim", "meta.json")) as f:
        assert f.read() == "VICTIM-META\n"
    assert rt.cmd("state", cid).rc != 0


def test_oci_review_without_mount_refused(rt, config, wsdir, ws, make_bundle):
    pol = {"version": 1, "filesystem": {"workspace": {"path": "/data", "mode": "review"}}}
    b = _ws_bundle(make_bundle, ws, annotation=pol)
    cid = rt.new_id()
    r, _ = rt.run(b, cid, global_args=["--config", config, "--audit-dir", audit_dir(rt)])
    assert r.rc != 0, r
    assert "filesystem.workspace.path" in r.err and "/data" in r.err, r
    assert not os.path.exists(os.path.join(wsdir, cid))
    assert rt.cmd("state", cid).rc != 0


def test_review_to_direct_widening_refused(rt, config, wsdir, ws, make_bundle):
    ceiling = os.path.join(rt.workdir, "review-ceiling.json")
    with open(ceiling, "w") as f:
        json.dump(REVIEW, f)
    b = _ws_bundle(make_bundle, ws, annotation={"version": 1, "filesystem": {"workspace": {"mode": "direct"}}})
    cid = rt.new_id()
    r, _ = rt.run(b, cid, global_args=["--config", config, "--audit-dir", audit_dir(rt), "--policy", ceiling])
    assert r.rc != 0, r
    assert "filesystem.workspace.mode" in r.err and "direct" in r.err, r
    assert not os.path.exists(os.path.join(ws, "n"))
    assert not os.path.exists(os.path.join(wsdir, cid))


def test_resume_refused_over_another_workspace(rt, config, wsdir, ws):
    sid = rt.new_id()
    assert review_run(rt, config, sid, ws, "echo x > f").rc == 0
    other = os.path.join(rt.workdir, "ws2")
    os.makedirs(other)
    os.chmod(other, 0o777)
    r = review_run(rt, config, sid, other, "echo y > g")
    assert r.rc != 0 and "already exists" in r.err, r
    assert sorted(os.listdir(os.path.join(wsdir, sid, "upper"))) == ["f"]
    assert meta(wsdir, sid)["state"] == "stopped"


def test_deny_write_holds_inside_review_workspace(rt, config, wsdir, ws):
    """the agent profile's denyWrite of .git/config and .git/hooks lies on the overlay: refused
    inside, nothing reaches the upper or the host (and no host pin is needed for it)"""
    os.makedirs(os.path.join(ws, ".git", "hooks"))
    with open(os.path.join(ws, ".git", "config"), "w") as f:
        f.write("cfg\n")
    sid = rt.new_id()
    r = review_run(rt, config, sid, ws,
                   "echo evil > .git/config || echo refused; echo x > .git/hooks/post-checkout || echo refused; "
                   "cat .git/config")
    assert r.rc == 0, r
    assert r.out.split() == ["refused", "refused", "cfg"], r
    with open(os.path.join(ws, ".git", "config")) as f:
        assert f.read() == "cfg\n"
    assert not os.path.exists(os.path.join(wsdir, sid, "upper", ".git", "config"))
    assert not os.path.exists(os.path.join(wsdir, sid, "upper", ".git", "hooks", "post-checkout"))
