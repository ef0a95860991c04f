"""The systemd cgroup driver (`--systemd-cgroup`, cgroupsPath "slice:prefix:name"; issue #3).

With systemd as PID 1 (the VM of tests/vm/systemd/run.sh; contrib/test.sh runs it in CI): the container's
cgroup is a transient scope systemd creates (StartTransientUnit over D-Bus), asserted from
systemd's side (`systemctl show`), from the cgroup2 files, from /proc/PID/cgroup of the init and
from inside the container; `update` reaches both the unit properties and the files; `delete`
stops the scope. A nested slice "a-b.slice:p:n" lands in /a.slice/a-b.slice/p-n.scope.

Without systemd as PID 1 (this CI host): the driver must fail with a clear error and leave
nothing behind (no state dir, no cgroup); the systemd tests skip with that reason.
"""

import os
import subprocess

import pytest

V2 = "/sys/fs/cgroup"


def _systemd_is_pid1():
    try:
        exe = os.readlink("/proc/1/exe")
    except OSError:
        return False
    return exe.endswith("/systemd") and os.path.isdir("/run/systemd/system")


SYSTEMD = _systemd_is_pid1()
needs_systemd = pytest.mark.skipif(
    not SYSTEMD, reason="needs systemd as PID 1 (runs in the VM: tests/vm/systemd/run.sh)")
needs_v2 = pytest.mark.skipif(
    not os.path.exists(os.path.join(V2, "cgroup.subtree_control")) or os.path.isdir(os.path.join(V2, "unified")),
    reason="the file checks read a pure cgroup v2 layout (the systemd VM's default; hybrid: test_scope_on_v1_hierarchies)")

SD = ("--systemd-cgroup",)

# the same assertions against runc (it reaches systemd the same way as root: the private socket)
pytestmark = pytest.mark.runc_reference


def show(unit, *props):
    """systemctl show -p ... UNIT -> dict (systemctl talks to /run/systemd/private as root)."""
    argv = ["systemctl", "show", unit] + [f"--property={p}" for p in props]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def cgfile(path, name):
    with open(os.path.join(V2, path.lstrip("/"), name)) as f:
        return f.read().strip()


def run_detached(rt, bundle, cgroups_path, resources=None, cid=None):
    cid = cid or rt.new_id()
    bundle.linux["cgroupsPath"] = cgroups_path.replace("ID", cid)
    if resources is not None:
        bundle.linux["resources"] = resources
    bundle.args("/probe", "sleep", "600")
    bundle.save()
    rt._track(cid, None)
    r = rt.cmd("run", "--bundle", bundle.path, "--detach", cid, global_args=SD)
    assert r.ok, r
    return cid


def init_pid(rt, cid):
    r = rt.state(cid)
    assert r.ok, r
    return r.json()["pid"]


def stop_and_delete(rt, cid):
    assert rt.kill(cid, "KILL").ok
    rt.wait_status(cid, "stopped")
    r = rt.cmd("delete", cid, global_args=SD)
    assert r.ok, r


# ---- without systemd (this host): a clear error, nothing left ----

@pytest.mark.skipif(SYSTEMD, reason="checks the error on a host without systemd as PID 1")
@pytest.mark.parametrize("how", ["flag", "path"])
def test_no_systemd_clear_error(rt, bundle, how):
    if rt.is_runc and how == "path":
        pytest.skip("runc 1.1.5 takes a slice:prefix:name path without --systemd-cgroup as a cgroupfs path")
    cid = rt.new_id()
    if how == "flag":
        extra = SD
    else:
        extra = ()
        bundle.linux["cgroupsPath"] = f"system.slice:agentsbx:{cid}"
    bundle.save()
    rt._track(cid, None)
    r = rt.cmd("run", "--bundle", bundle.path, cid, global_args=extra)
    assert not r.ok, r
    if rt.is_runc:
        return
    assert "systemd cgroup driver requested but systemd is not running" in r.err, r
    assert r.err.count("\n") <= 2, r  # one message, not a cascade
    assert not os.path.exists(os.path.join(rt.root, cid)), "state dir left"


# ---- with systemd as PID 1 (the VM) ----

@needs_v2
@needs_systemd
def test_scope_created_with_limits_and_removed(rt, bundle):
    cid = run_detached(rt, bundle, "system.slice:agentsbx:ID",
                       {"memory": {"limit": 64 << 20}, "pids": {"limit": 64}, "cpu": {"shares": 512}})
    unit = f"agentsbx-{cid}.scope"
    path = f"/system.slice/{unit}"
    p = show(unit, "ActiveState", "ControlGroup", "Delegate", "Slice", "MemoryMax", "TasksMax", "CPUWeight",
             "DefaultDependencies")
    assert p["ActiveState"] == "active", p
    assert p["ControlGroup"] == path, p
    assert p["Slice"] == "system.slice", p
    assert p["Delegate"] == "yes", p
    assert p["DefaultDependencies"] == "no", p
    # the unit properties (SetUnitProperties) agree with the files (a daemon-reload keeps them)
    assert p["MemoryMax"] == str(64 << 20), p
    assert p["TasksMax"] == "64", p
    assert p["CPUWeight"] == str(1 + (512 - 2) * 9999 // 262142), p
    assert cgfile(path, "memory.max") == str(64 << 20)
    assert cgfile(path, "pids.max") == "64"
    assert cgfile(path, "cpu.weight") == str(1 + (512 - 2) * 9999 // 262142)
    pid = init_pid(rt, cid)
    with open(f"/proc/{pid}/cgroup") as f:
        assert f.read().strip() == f"0::{path}"
    assert str(pid) in cgfile(path, "cgroup.procs").split()

    stop_and_delete(rt, cid)
    assert show(unit, "LoadState")["LoadState"] == "not-found"
    assert not os.path.exists(os.path.join(V2, path.lstrip("/"))), "scope cgroup left after delete"


@needs_v2
@needs_systemd
def test_container_sees_the_scope_inside(rt, bundle):
    """Without a cgroup namespace the container's /proc/self/cgroup names the scope; the
    foreground run's delete leaves no unit behind."""
    cid = rt.new_id()
    bundle.remove_namespace("cgroup")
    bundle.linux["cgroupsPath"] = f"system.slice:agentsbx:{cid}"
    bundle.args("/bin/cat", "/proc/self/cgroup")
    bundle.save()
    rt._track(cid, None)
    r = rt.cmd("run", "--bundle", bundle.path, cid, global_args=SD, stdout_path=bundle.stdout_path)
    assert r.ok, r
    assert bundle.container_output().strip() == f"0::/system.slice/agentsbx-{cid}.scope"
    assert show(f"agentsbx-{cid}.scope", "LoadState")["LoadState"] == "not-found"


@needs_v2
@needs_systemd
def test_exec_joins_the_scope(rt, bundle):
    cid = run_detached(rt, bundle, "system.slice:agentsbx:ID")
    path = f"/system.slice/agentsbx-{cid}.scope"
    r = rt.cmd("exec", cid, "/bin/cat", "/proc/self/cgroup", global_args=SD)
    assert r.ok, r
    # the spec's default cgroup namespace is rooted at the scope: "/" inside
    assert r.out.strip() in ("0::/", f"0::{path}"), r
    pids = cgfile(path, "cgroup.procs").split()
    assert str(init_pid(rt, cid)) in pids
    stop_and_delete(rt, cid)


@needs_v2
@needs_systemd
@pytest.mark.agentsbx_only("runc 1.1.5 ignores realtime values on cgroup v2 instead of refusing them")
def test_failed_create_stops_the_unit(rt, bundle):
    """A create that fails after systemd started the scope (here: a v1-only resource on cgroup
    v2, refused when the files are written) stops the unit again: nothing is left."""
    cid = rt.new_id()
    bundle.linux["cgroupsPath"] = f"system.slice:agentsbx:{cid}"
    bundle.linux["resources"] = {"cpu": {"realtimeRuntime": 1000, "realtimePeriod": 100000}}
    bundle.args("/probe", "sleep", "600")
    bundle.save()
    rt._track(cid, None)
    r = rt.cmd("create", "--bundle", bundle.path, cid, global_args=SD, stdout_path=bundle.stdout_path)
    assert not r.ok, r
    if not rt.is_runc:
        assert "realtime" in r.err, r
    assert show(f"agentsbx-{cid}.scope", "LoadState")["LoadState"] == "not-found"
    assert not os.path.exists(os.path.join(V2, "system.slice", f"agentsbx-{cid}.scope"))
    assert not os.path.exists(os.path.join(rt.root, cid))


@needs_v2
@needs_systemd
def test_nested_slice(rt, bundle):
    cid = run_detached(rt, bundle, "a-b.slice:p:ID", {"memory": {"limit": 32 << 20}})
    unit = f"p-{cid}.scope"
    path = f"/a.slice/a-b.slice/{unit}"
    p = show(unit, "ActiveState", "ControlGroup", "Slice")
    assert p == {"ActiveState": "active", "ControlGroup": path, "Slice": "a-b.slice"}, p
    assert cgfile(path, "memory.max") == str(32 << 20)
    with open(f"/proc/{init_pid(rt, cid)}/cgroup") as f:
        assert f.read().strip() == f"0::{path}"
    stop_and_delete(rt, cid)
    assert not os.path.exists(os.path.join(V2, path.lstrip("/")))


@needs_v2
@needs_systemd
@pytest.mark.agentsbx_only("runc 1.1.5 puts a slice unit under the parent slice's path, where systemd does not")
def test_slice_unit(rt, bundle):
    """A name ending in .slice makes the unit a slice (runc's rule): its cgroup follows its own
    name (systemd.slice(5)), the container's processes are moved into it by the runtime."""
    cid = run_detached(rt, bundle, "system.slice:p:sl-ID.slice", {"pids": {"limit": 20}})
    unit = f"sl-{cid}.slice"
    parts = unit[: -len(".slice")].split("-")
    path = "".join("/" + "-".join(parts[: i + 1]) + ".slice" for i in range(len(parts)))
    p = show(unit, "ActiveState", "ControlGroup")
    assert p == {"ActiveState": "active", "ControlGroup": path}, p
    assert cgfile(path, "pids.max") == "20"
    with open(f"/proc/{init_pid(rt, cid)}/cgroup") as f:
        assert f.read().strip() == f"0::{path}"
    stop_and_delete(rt, cid)
    assert not os.path.exists(os.path.join(V2, path.lstrip("/")))


@needs_v2
@needs_systemd
def test_default_path_and_update(rt, bundle):
    """--systemd-cgroup without cgroupsPath: system.slice:agentsbx:ID (runc: its own name as
    the prefix); update writes the files and the unit's properties."""
    cid = rt.new_id()
    bundle.linux.pop("cgroupsPath", None)
    bundle.args("/probe", "sleep", "600")
    bundle.save()
    rt._track(cid, None)
    r = rt.cmd("run", "--bundle", bundle.path, "--detach", cid, global_args=SD)
    assert r.ok, r
    unit = f"{rt.name}-{cid}.scope"  # the prefix is the runtime's name (runc: runc-ID.scope)
    path = f"/system.slice/{unit}"
    assert show(unit, "ControlGroup")["ControlGroup"] == path
    r = rt.cmd("update", "--memory", "48m", "--pids-limit", "33", cid, global_args=SD)
    assert r.ok, r
    assert cgfile(path, "memory.max") == str(48 << 20)
    assert cgfile(path, "pids.max") == "33"
    p = show(unit, "MemoryMax", "TasksMax")
    assert p == {"MemoryMax": str(48 << 20), "TasksMax": "33"}, p
    stop_and_delete(rt, cid)


@needs_systemd
@pytest.mark.parametrize("path", ["a--b.slice:p:ID", "system.slice:p:a/b", "system.slice:p:ID:x", "/not/systemd"])
def test_bad_systemd_path_refused_cleanly(rt, bundle, path):
    cid = rt.new_id()
    bundle.linux["cgroupsPath"] = path.replace("ID", cid)
    bundle.save()
    rt._track(cid, None)
    r = rt.cmd("run", "--bundle", bundle.path, cid, global_args=SD)
    assert not r.ok, r
    if not rt.is_runc:
        assert "linux.cgroupsPath" in r.err, r
        assert not os.path.exists(os.path.join(rt.root, cid))
    units = subprocess.run(["systemctl", "list-units", "--all", "--no-legend", f"*{cid}*"], capture_output=True,
                           text=True, timeout=120).stdout
    assert cid not in units, units


# ---- systemd on a hybrid/legacy host (v1 controllers): tests/vm/systemd/run.sh with
# ASBX_VM_SD_LAYOUT=hybrid ----

V1 = os.path.isdir("/sys/fs/cgroup/memory") and os.path.isdir("/sys/fs/cgroup/systemd")


@pytest.mark.skipif(not V1, reason="needs v1 controller hierarchies (ASBX_VM_SD_LAYOUT=hybrid)")
@needs_systemd
def test_scope_on_v1_hierarchies(rt, bundle):
    """systemd creates the scope in name=systemd and the hierarchies it accounts; the runtime
    joins (or creates) it in every other one; the v1 unit properties (MemoryLimit, CPUShares)
    and files agree; delete leaves no directory in any hierarchy."""
    cid = run_detached(rt, bundle, "system.slice:agentsbx:ID",
                       {"memory": {"limit": 64 << 20}, "pids": {"limit": 64}, "cpu": {"shares": 512}})
    unit = f"agentsbx-{cid}.scope"
    path = f"/system.slice/{unit}"
    p = show(unit, "ActiveState", "ControlGroup", "MemoryLimit", "CPUShares", "TasksMax")
    assert p["ActiveState"] == "active" and p["ControlGroup"] == path, p
    assert p["MemoryLimit"] == str(64 << 20) and p["CPUShares"] == "512" and p["TasksMax"] == "64", p
    with open(f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes") as f:
        assert f.read().strip() == str(64 << 20)
    with open(f"/sys/fs/cgroup/pids{path}/pids.max") as f:
        assert f.read().strip() == "64"
    with open(f"/proc/{init_pid(rt, cid)}/cgroup") as f:
        lines = [line.split(":", 2) for line in f.read().split("\n") if line]
    for _, ctl, p in lines:
        if rt.is_runc and ctl == "misc":
            continue  # runc 1.1.5 has no misc subsystem (kernel 5.13): it leaves the process at /
        assert p == path, (ctl, p)
    stop_and_delete(rt, cid)
    for h in os.listdir("/sys/fs/cgroup"):
        assert not os.path.exists(f"/sys/fs/cgroup/{h}{path}"), f"{h}{path} left"
