"""Control groups, basic placement (config-linux.md "Control groups", "cgroupsPath") on this
host's hybrid layout (v1 controllers + cgroup2 at /sys/fs/cgroup/unified), and on a pure v2
host (the qemu VM of tests/vm, make check-cgroupv2), where every test here runs as well.

The container is placed in the cgroup named by cgroupsPath in every hierarchy, seen from the
kernel (cgroup.procs) and from the inside (/proc/self/cgroup), and the cgroups are removed on
delete. Resource limits: runc applies them; agentsbx may instead refuse them clearly (fail
closed) until its cgroup controllers land -- then the limit must be visible in the cgroup files.

runc is the reference behaviour.
"""

import json
import os

import pytest

from conftest import cgroup_hierarchies, probe_report

pytestmark = pytest.mark.runc_reference


def hierarchy_names():
    """{mountpoint: name as in /proc/self/cgroup's second field} for every hierarchy."""
    names = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            fstype, _src, sup = right.split()[:3]
            mp = left.split()[4]
            if fstype == "cgroup2":
                names[mp] = ""
            elif fstype == "cgroup":
                opts = [o for o in sup.split(",") if o not in ("rw", "ro") and "=" not in o
                        or o.startswith("name=")]
                names[mp] = ",".join(sorted(opts))
    return names


def proc_cgroups(text):
    """/proc/PID/cgroup -> {sorted controller list joined by ',': path}."""
    out = {}
    for line in text.splitlines():
        _, ctrls, path = line.split(":", 2)
        out[",".join(sorted(ctrls.split(","))) if ctrls else ""] = path
    return out


def test_cgroups_path_in_every_hierarchy(rt, bundle):
    cid = rt.new_id()
    path = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = path
    bundle.remove_namespace("cgroup")
    bundle.args("/probe", "sleep", "600")
    r, _ = rt.create(bundle, cid)
    assert r.ok, r
    pid = rt.state(cid).json()["pid"]
    hier = cgroup_hierarchies()
    assert hier, "no cgroup hierarchy mounted on this host"
    for h in hier:
        procs = os.path.join(h, path.lstrip("/"), "cgroup.procs")
        assert os.path.exists(procs), f"no cgroup {path} in {h}"
        with open(procs) as f:
            assert str(pid) in f.read().split(), f"pid {pid} not in {procs}"
    with open(f"/proc/{pid}/cgroup") as f:
        seen = proc_cgroups(f.read())
    for h, name in hierarchy_names().items():
        assert seen.get(name) == path, (h, name, seen)
    assert rt.delete(cid, force=True).ok
    for h in hier:
        assert not os.path.exists(os.path.join(h, path.lstrip("/"))), f"{h}{path} left"


def test_probe_sees_its_cgroup(rt, bundle):
    cid = rt.new_id()
    path = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = path
    bundle.remove_namespace("cgroup")
    bundle.args("/probe", "report")
    r, _ = rt.run(bundle, cid)
    assert r.ok, r
    rep = json.loads(r.out.strip().splitlines()[-1])
    for name, p in proc_cgroups(rep["cgroup"]).items():
        assert p == path, (name, rep["cgroup"])


def test_default_cgroup_is_not_the_callers(rt, bundle):
    bundle.linux.pop("cgroupsPath", None)
    bundle.remove_namespace("cgroup")
    rep = probe_report(rt, bundle)
    with open("/proc/self/cgroup") as f:
        mine = proc_cgroups(f.read())
    theirs = proc_cgroups(rep["cgroup"])
    assert any(theirs[k] != mine.get(k) for k in theirs), (mine, theirs)


def test_cgroup_removed_after_run(rt, bundle):
    cid = rt.new_id()
    path = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = path
    bundle.args("/probe", "exit", "0")
    r, _ = rt.run(bundle, cid)
    assert r.ok, r
    for h in cgroup_hierarchies():
        assert not os.path.exists(os.path.join(h, path.lstrip("/")))


@pytest.mark.cgroups_pending
def test_resource_limits_applied_or_refused_clearly(rt, bundle):
    cid = rt.new_id()
    path = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = path
    bundle.linux["resources"] = {"memory": {"limit": 64 << 20}, "pids": {"limit": 50}}
    bundle.args("/probe", "sleep", "600")
    r, _ = rt.create(bundle, cid)
    if not r.ok:
        assert not rt.is_runc, f"runc applies these limits: {r}"
        msg = r.err.lower()
        assert "memory" in msg or "pids" in msg or "resources" in msg or "cgroup" in msg, r
        for h in cgroup_hierarchies():
            assert not os.path.exists(os.path.join(h, path.lstrip("/"))), f"{h}{path} left"
        return
    if os.path.exists("/sys/fs/cgroup/cgroup.subtree_control"):  # pure v2 (the VM of tests/vm)
        mem, pids = (f"/sys/fs/cgroup/{path.lstrip('/')}/{n}" for n in ("memory.max", "pids.max"))
    else:
        mem = f"/sys/fs/cgroup/memory/{path.lstrip('/')}/memory.limit_in_bytes"
        pids = f"/sys/fs/cgroup/pids/{path.lstrip('/')}/pids.max"
    with open(mem) as f:
        assert int(f.read()) == 64 << 20
    with open(pids) as f:
        assert f.read().strip() == "50"


def test_failed_cgroup_move_leaves_no_cgroup(rt, bundle):
    """A create that fails while moving the container into its cgroups (here: a SCHED_FIFO
    caller, which a v1 cpu cgroup without rt_runtime refuses with EINVAL) moves the process
    back to the caller's cgroup and removes every leaf it made. Moving it to the leaf's parent
    instead is refused on cgroup2 (EBUSY: the parent has controllers in cgroup.subtree_control),
    and the leaf then survived the undo."""
    import shutil
    import subprocess
    if not shutil.which("chrt") or subprocess.run(["chrt", "-f", "1", "true"]).returncode != 0:
        pytest.skip("cannot run SCHED_FIFO here")
    cid = rt.new_id()
    path = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = path
    bundle.args("/probe", "exit", "0")
    bundle.save()
    rt._track(cid, bundle)
    p = subprocess.run(["chrt", "-f", "10", rt.binary, "--root", rt.root, "run", "--bundle",
                        bundle.path, cid], capture_output=True, text=True, timeout=120)
    if p.returncode == 0:
        return  # this kernel let the RT task in (no RT group scheduling): nothing to undo
    assert "cgroup" in p.stderr, p.stderr
    for h in cgroup_hierarchies():
        assert not os.path.exists(os.path.join(h, path.lstrip("/"))), f"{h}{path} left"
