"""linux.resources applied on this hybrid host (config-linux.md "Control groups" subsections),
asserted from the cgroup files and from inside the container; update, pause/resume, ps and
events --stats compared with runc's output shape.

Layout here: v1 controllers under /sys/fs/cgroup/<controller>, cgroup2 at
/sys/fs/cgroup/unified holding only hugetlb. The v2 writers are covered by
tests/unit/test_cgroup_resources.c against a fake cgroup2 tree, and on a real pure v2 kernel by
test_cgroups_v2.py in the qemu VM of tests/vm (make check-cgroupv2), where the tests below that
read v1 files skip; the layout-independent ones (device rules seen from inside, the unsupported
net_cls field, OOM events) run there too.
"""

import json
import os
import time

import pytest

from conftest import cgroup_hierarchies

pytestmark = pytest.mark.runc_reference

V1 = "/sys/fs/cgroup"
# On a pure cgroup v2 host (the VM of tests/vm) the v1 file names below do not exist; the v2
# counterpart of every such test is in test_cgroups_v2.py.
UNIFIED = os.path.exists(os.path.join(V1, "cgroup.subtree_control"))
v1_only = pytest.mark.skipif(UNIFIED, reason="reads cgroup v1 files; v2 counterpart in "
                             "test_cgroups_v2.py")


def wait_for(pred, timeout, what):
    """Poll `pred` until it holds (a condition, not a fixed pause); fail naming `what` after
    `timeout` seconds (a generous guard against hangs only)."""
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def cg(ctl, path, name):
    with open(os.path.join(V1, ctl, path.lstrip("/"), name)) as f:
        return f.read().strip()


def start(rt, bundle, resources, args=("/probe", "sleep", "600")):
    cid = rt.new_id()
    path = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = path
    bundle.linux["resources"] = resources
    bundle.args(*args)
    r, _ = rt.run(bundle, cid, "--detach")
    assert r.ok, r
    return cid, path


@v1_only
def test_memory_pids_cpu_written(rt, bundle):
    cid, path = start(rt, bundle, {
        "memory": {"limit": 64 << 20, "reservation": 32 << 20, "swap": 96 << 20, "swappiness": 10,
                   "kernelTCP": 16 << 20, "disableOOMKiller": False},
        "pids": {"limit": 32},
        "cpu": {"shares": 512, "quota": 50000, "period": 100000, "cpus": "0", "mems": "0"},
    })
    assert int(cg("memory", path, "memory.limit_in_bytes")) == 64 << 20
    assert int(cg("memory", path, "memory.soft_limit_in_bytes")) == 32 << 20
    assert int(cg("memory", path, "memory.memsw.limit_in_bytes")) == 96 << 20
    if not rt.is_runc:  # runc 1.1 ignores kernelTCP
        assert int(cg("memory", path, "memory.kmem.tcp.limit_in_bytes")) == 16 << 20
    assert cg("memory", path, "memory.swappiness") == "10"
    assert cg("pids", path, "pids.max") == "32"
    assert cg("cpu", path, "cpu.shares") == "512"
    assert cg("cpu", path, "cpu.cfs_quota_us") == "50000"
    assert cg("cpu", path, "cpu.cfs_period_us") == "100000"
    assert cg("cpuset", path, "cpuset.cpus") == "0"
    rt.delete(cid, force=True)


@v1_only
def test_memory_hog_killed_at_limit(rt, bundle):
    # dd with a 64 MiB block needs a 64 MiB buffer: the OOM killer stops it at 32 MiB
    lim = 32 << 20
    cid, path = start(rt, bundle, {"memory": {"limit": lim, "swap": lim}},
                      args=("/bin/sh", "-c", "dd if=/dev/zero of=/dev/null bs=64M count=1; echo rc=$?; sleep 600"))
    deadline = time.time() + 30
    while time.time() < deadline and "oom_kill 0" in cg("memory", path, "memory.oom_control"):
        time.sleep(0.1)
    assert "oom_kill 0" not in cg("memory", path, "memory.oom_control")
    assert int(cg("memory", path, "memory.max_usage_in_bytes")) <= lim
    rt.delete(cid, force=True)


@v1_only
def test_fork_bomb_stopped_at_pids_max(rt, bundle):
    cid, path = start(rt, bundle, {"pids": {"limit": 8}},
                      args=("/bin/sh", "-c", "i=0; while [ $i -lt 40 ]; do sleep 600 & i=$((i+1)); done; sleep 600"))
    # the shell forks 40 sleepers: wait until the controller has refused a fork ("max N")
    wait_for(lambda: int(cg("pids", path, "pids.events").split()[-1]) > 0, 30, "a fork refused at pids.max")
    assert int(cg("pids", path, "pids.current")) <= 8
    assert int(cg("pids", path, "pids.events").split()[-1]) > 0  # "max N": forks refused
    rt.delete(cid, force=True)


@v1_only
def test_cpu_quota_throttles(rt, bundle):
    cid, path = start(rt, bundle, {"cpu": {"quota": 10000, "period": 100000}},
                      args=("/bin/sh", "-c", "while :; do :; done"))

    def throttled():
        return int(dict(l.split() for l in cg("cpu", path, "cpu.stat").splitlines())["nr_throttled"])
    wait_for(lambda: throttled() > 0, 30, "the busy loop throttled at its 10% quota")
    assert throttled() > 0
    rt.delete(cid, force=True)


def test_device_rule_denies_open(rt, bundle):
    # mknod is allowed by the default rules ("c *:* m"); opening /dev/mem (1:1) is not
    bundle.process["capabilities"]["bounding"].append("CAP_MKNOD")
    bundle.process["capabilities"]["effective"].append("CAP_MKNOD")
    bundle.process["capabilities"]["permitted"].append("CAP_MKNOD")
    bundle.linux["resources"] = {"devices": [{"allow": False, "access": "rwm"},
                                             {"allow": True, "type": "c", "major": 1, "minor": 7, "access": "r"}]}
    bundle.args("/bin/sh", "-c", "mknod /tmp/m c 1 1 && (head -c1 /tmp/m >/dev/null 2>&1 && echo mem-open || "
                "echo mem-denied); head -c1 /dev/full >/dev/null && echo full-ok")
    r, _ = rt.run(bundle)
    assert r.ok, r
    assert "mem-denied" in r.out and "full-ok" in r.out, r


def test_unsupported_field_is_clear_error_and_leaves_nothing(rt, bundle):
    if rt.is_runc:
        pytest.skip("runc ignores network.classID when net_cls is not mounted")
    cid = rt.new_id()
    path = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = path
    bundle.linux["resources"] = {"network": {"classID": 5}}
    r, _ = rt.run(bundle, cid)
    assert not r.ok
    assert "linux.resources.network.classID" in r.err and "net_cls" in r.err, r
    for h in cgroup_hierarchies():
        assert not os.path.exists(os.path.join(h, path.lstrip("/")))


@v1_only
def test_hugetlb_on_cgroup2(rt, bundle):
    if rt.is_runc:
        pytest.skip("runc 1.1 does not use the hybrid cgroup2 mount for hugetlb")
    cid, path = start(rt, bundle, {"hugepageLimits": [{"pageSize": "2MB", "limit": 4 << 20}]})
    with open(f"{V1}/unified{path}/hugetlb.2MB.max") as f:
        assert int(f.read()) == 4 << 20
    rt.delete(cid, force=True)


@v1_only
def test_update_pause_resume(rt, bundle):
    cid, path = start(rt, bundle, {"memory": {"limit": 64 << 20}, "pids": {"limit": 32}})
    r = rt.cmd("update", "--memory", "100m", "--pids-limit", "50", "--cpu-share", "256",
               "--cpu-quota", "20000", "--cpu-period", "100000", cid)
    assert r.ok, r
    assert int(cg("memory", path, "memory.limit_in_bytes")) == 100 << 20
    assert cg("pids", path, "pids.max") == "50"
    assert cg("cpu", path, "cpu.shares") == "256"
    assert cg("cpu", path, "cpu.cfs_quota_us") == "20000"
    res = os.path.join(rt.workdir, f"res-{cid}.json")
    with open(res, "w") as f:
        json.dump({"pids": {"limit": 40}}, f)
    assert rt.cmd("update", "-r", res, cid).ok
    assert cg("pids", path, "pids.max") == "40"
    assert rt.cmd("pause", cid).ok
    assert cg("freezer", path, "freezer.state") == "FROZEN"
    assert not rt.cmd("pause", cid).ok or rt.is_runc
    assert rt.cmd("resume", cid).ok
    assert cg("freezer", path, "freezer.state") == "THAWED"
    r = rt.cmd("resume", cid)
    assert not r.ok and "not paused" in r.err, r
    rt.delete(cid, force=True)


@v1_only
def test_ps_and_events_shape(rt, bundle):
    cid, path = start(rt, bundle, {"memory": {"limit": 64 << 20}, "pids": {"limit": 32}})
    r = rt.cmd("ps", "--format", "json", cid)
    assert r.ok, r
    pids = json.loads(r.out)
    with open(os.path.join(V1, "pids", path.lstrip("/"), "cgroup.procs")) as f:
        assert sorted(pids) == sorted(int(x) for x in f.read().split())
    r = rt.cmd("ps", cid)
    assert r.ok and r.out.splitlines()[0].split()[:3] == ["UID", "PID", "PPID"], r
    assert str(pids[0]) in r.out
    r = rt.cmd("events", "--stats", cid)
    assert r.ok, r
    ev = json.loads(r.out)
    assert ev["type"] == "stats" and ev["id"] == cid
    d = ev["data"]
    for k in ("cpu", "memory", "pids", "blkio", "hugetlb"):
        assert k in d
    assert d["pids"] == {"current": 1, "limit": 32}
    assert d["memory"]["usage"]["limit"] == 64 << 20
    assert set(d["memory"]) >= {"usage", "swap", "kernel", "kernelTCP", "raw"}
    assert "total" in d["cpu"]["usage"] and "throttling" in d["cpu"]
    rt.delete(cid, force=True)


def test_events_reports_oom(rt, bundle):
    lim = 32 << 20
    cid, path = start(rt, bundle, {"memory": {"limit": lim, "swap": lim}},
                      args=("/bin/sh", "-c", "while [ ! -e /oom-go ]; do sleep 0.1; done; "
                            "dd if=/dev/zero of=/dev/null bs=64M count=1; sleep 600"))
    import subprocess
    p = subprocess.Popen([rt.binary, "--root", rt.root, "events", "--interval", "1s", cid],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = []
    deadline = time.time() + 20
    try:
        while time.time() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(json.loads(line))
            # events is watching once it printed its first record: only then let the container
            # run into its limit (instead of a fixed pause before the dd)
            if len(lines) == 1:
                open(os.path.join(bundle.rootfs, "oom-go"), "w").close()
            if any(x["type"] == "oom" for x in lines):
                break
    finally:
        p.kill()
        p.wait()
    assert any(x["type"] == "oom" and x["id"] == cid for x in lines), lines[-1:] if lines else None
    rt.delete(cid, force=True)


@v1_only
def test_realtime_runtime_in_default_cgroup_parent(rt, bundle):
    """cpu.rt_runtime_us in the default cgroup (under the runtime's own parent, which starts with
    no realtime budget): the parent is given what the child asks, the child gets its value, and
    a SCHED_RR process can run in it (checked from the host: the value and the task's cgroup)."""
    parent = os.path.join(V1, "cpu", "agentsbx", "cpu.rt_runtime_us")
    if not rt.is_runc and os.path.exists(parent):
        try:  # back to a fresh host's 0 (refused while a child still holds a budget: fine)
            with open(parent, "w") as f:
                f.write("0")
        except OSError:
            pass
    bundle.linux.pop("cgroupsPath", None)
    bundle.linux["resources"] = {"cpu": {"realtimeRuntime": 10000, "realtimePeriod": 1000000}}
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.run(bundle, None, "--detach")
    assert r.ok, r
    pid = rt.state(cid).json()["pid"]
    with open(f"/proc/{pid}/cgroup") as f:
        cpu = [ln.split(":", 2)[2].strip() for ln in f if ":cpu," in ln or ":cpu:" in ln
               or ",cpu," in ln or ln.split(":")[1].startswith("cpu,")][0]
    assert cg("cpu", cpu, "cpu.rt_runtime_us") == "10000"
    assert cg("cpu", cpu, "cpu.rt_period_us") == "1000000"
    rt.delete(cid, force=True)
