"""linux.resources on a pure cgroup v2 host (config-linux.md "Control groups" subsections,
Documentation/admin-guide/cgroup-v2.rst), asserted from the cgroup2 files and from inside the
container; update, pause/resume (cgroup.freeze), ps, events --stats and OOM events (memory.events).

This host is hybrid, so these tests skip here: they run in the qemu VM of tests/vm
(`make check-cgroupv2`), which boots with cgroup_no_v1=all and enables every controller in the
root's cgroup.subtree_control. The v1 counterparts are in test_cgroups_resources.py.

Value conversions checked against the formulas runc and crun share (cgroup_convert.c):
cpu.weight = 1 + (shares - 2) * 9999 / 262142, io.weight = 1 + (weight - 10) * 9999 / 990,
memory.swap.max = swap - limit (the spec's swap is memory+swap).
"""

import json
import os
import subprocess
import time

import pytest

from conftest import cgroup_hierarchies

pytestmark = [
    pytest.mark.runc_reference,
    pytest.mark.skipif(not os.path.exists("/sys/fs/cgroup/cgroup.subtree_control")
                       or os.path.isdir("/sys/fs/cgroup/unified"),
                       reason="needs a pure cgroup v2 host (runs in the VM: make check-cgroupv2)"),
]

V2 = "/sys/fs/cgroup"


def cg(path, name):
    with open(os.path.join(V2, path.lstrip("/"), name)) as f:
        return f.read().strip()


def kv(text):
    """'key value' lines (memory.events, cpu.stat, pids.events...) -> dict of ints."""
    return {k: int(v) for k, v in (line.split() for line in text.splitlines())}


def start(rt, bundle, resources, args=("/probe", "sleep", "600"), cid=None):
    cid = cid or rt.new_id()
    path = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = path
    bundle.linux["resources"] = resources
    bundle.args(*args)
    r, _ = rt.run(bundle, cid, "--detach")
    assert r.ok, r
    return cid, path


def refused_and_clean(rt, bundle, resources, *words):
    """create must fail with an error naming each of `words`, leaving no cgroup behind."""
    cid = rt.new_id()
    path = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = path
    bundle.linux["resources"] = resources
    bundle.args("/probe", "sleep", "600")
    r, _ = rt.create(bundle, cid)
    assert not r.ok, r
    for w in words:
        assert w in r.err, (w, r)
    assert not os.path.exists(os.path.join(V2, path.lstrip("/"))), f"cgroup {path} left"
    return r


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout  # hang guard only
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_only_cgroup2_is_mounted():
    # the VM itself: no v1 hierarchy, every controller available to children
    assert cgroup_hierarchies() == [V2]
    enabled = cg("/", "cgroup.subtree_control").split()
    for c in ("cpu", "io", "memory", "pids", "cpuset", "hugetlb"):
        assert c in enabled, enabled


def test_headline_limits_seen_from_inside(rt, bundle):
    """The issue's headline: run with memory 64m, pids 32, cpu quota 0.5: the container sees the
    limits in /sys/fs/cgroup of its own cgroup namespace."""
    bundle.set_namespace("cgroup")
    bundle.linux["cgroupsPath"] = f"/asbx-it-{rt.new_id()}"
    bundle.linux["resources"] = {"memory": {"limit": 64 << 20}, "pids": {"limit": 32},
                                 "cpu": {"quota": 50000, "period": 100000}}
    bundle.args("/bin/sh", "-c", "cat /proc/self/cgroup; for f in memory.max pids.max cpu.max; do "
                "echo $f=$(cat /sys/fs/cgroup/$f); done")
    r, _ = rt.run(bundle)
    assert r.ok, r
    lines = r.out.split()
    assert "0::/" in lines, r.out  # its own cgroup is the root of its cgroup namespace
    assert f"memory.max={64 << 20}" in lines, r.out
    assert "pids.max=32" in lines, r.out
    assert "cpu.max=50000" in lines and "100000" in lines, r.out


def test_memory_pids_cpu_written(rt, bundle):
    cid, path = start(rt, bundle, {
        "memory": {"limit": 64 << 20, "reservation": 32 << 20, "swap": 96 << 20},
        "pids": {"limit": 32},
        "cpu": {"shares": 512, "quota": 50000, "period": 100000, "cpus": "0", "mems": "0"},
    })
    assert int(cg(path, "memory.max")) == 64 << 20
    assert int(cg(path, "memory.low")) == 32 << 20
    assert int(cg(path, "memory.swap.max")) == 32 << 20  # 96m memory+swap - 64m memory
    assert cg(path, "pids.max") == "32"
    assert cg(path, "cpu.weight") == str(1 + (512 - 2) * 9999 // 262142)
    assert cg(path, "cpu.max") == "50000 100000"
    assert cg(path, "cpuset.cpus") == "0"
    assert cg(path, "cpuset.mems") == "0"
    rt.delete(cid, force=True)


def test_swap_equal_to_limit_means_no_swap(rt, bundle):
    cid, path = start(rt, bundle, {"memory": {"limit": 64 << 20, "swap": 64 << 20}})
    assert cg(path, "memory.swap.max") == "0"
    rt.delete(cid, force=True)


def test_unlimited_values_written_as_max(rt, bundle):
    cid, path = start(rt, bundle, {"memory": {"limit": -1, "swap": -1}, "pids": {"limit": -1},
                                   "cpu": {"quota": -1, "period": 100000}})
    assert cg(path, "memory.max") == "max"
    assert cg(path, "memory.swap.max") == "max"
    assert cg(path, "pids.max") == "max"
    assert cg(path, "cpu.max") == "max 100000"
    rt.delete(cid, force=True)


def test_io_weight_and_max(rt, bundle):
    if not os.path.exists("/dev/ram0"):
        pytest.skip("no /dev/ram0 (the VM loads brd)")
    st = os.stat("/dev/ram0")
    dev = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    maj, mnr = os.major(st.st_rdev), os.minor(st.st_rdev)
    cid, path = start(rt, bundle, {"blockIO": {
        "weight": 500,
        "throttleReadBpsDevice": [{"major": maj, "minor": mnr, "rate": 1 << 20}],
        "throttleWriteIOPSDevice": [{"major": maj, "minor": mnr, "rate": 100}],
    }})
    lines = {l.split()[0]: l.split()[1:] for l in cg(path, "io.max").splitlines()}
    assert lines.get(dev) == [f"rbps={1 << 20}", "wbps=max", "riops=max", "wiops=100"], lines
    if os.path.exists(os.path.join(V2, path.lstrip("/"), "io.bfq.weight")):
        assert cg(path, "io.bfq.weight").split()[:2] == ["default", "500"]
    else:
        assert cg(path, "io.weight").splitlines()[0] == f"default {1 + (500 - 10) * 9999 // 990}"
    rt.delete(cid, force=True)


def test_hugetlb_max(rt, bundle):
    if not os.path.isdir("/sys/kernel/mm/hugepages/hugepages-2048kB"):
        pytest.skip("no 2MB huge pages on this kernel")
    cid, path = start(rt, bundle, {"hugepageLimits": [{"pageSize": "2MB", "limit": 4 << 20}]})
    assert int(cg(path, "hugetlb.2MB.max")) == 4 << 20
    if os.path.exists(os.path.join(V2, path.lstrip("/"), "hugetlb.2MB.rsvd.max")) and not rt.is_runc:
        assert int(cg(path, "hugetlb.2MB.rsvd.max")) == 4 << 20  # runc 1.1 leaves rsvd alone
    rt.delete(cid, force=True)


def test_rdma_max_unknown_device_refused(rt, bundle):
    """rdma.max exists on v2; the kernel refuses a device it does not have (the VM has no RDMA
    device), and that must be a clear error naming the field, not a silent skip."""
    if rt.is_runc:
        pytest.skip("runc 1.1 ignores linux.resources.rdma")
    refused_and_clean(rt, bundle, {"rdma": {"mlx5_0": {"hcaHandles": 2, "hcaObjects": 100}}},
                      "linux.resources.rdma", "mlx5_0", "rdma.max")


def test_rdma_max_written(rt, bundle):
    """rdma.max for a device the rdma controller knows (the VM adds a soft-RoCE device over lo);
    a limit not given is written as "max"."""
    if rt.is_runc:
        pytest.skip("runc 1.1 ignores linux.resources.rdma")
    devs = sorted(os.listdir("/sys/class/infiniband")) if os.path.isdir("/sys/class/infiniband") else []
    if not devs:
        pytest.skip("no RDMA device (the VM adds one with rdma_rxe)")
    cid, path = start(rt, bundle, {"rdma": {devs[0]: {"hcaHandles": 2, "hcaObjects": 100}}})
    lines = {l.split()[0]: l.split()[1:] for l in cg(path, "rdma.max").splitlines()}
    assert lines.get(devs[0]) == ["hca_handle=2", "hca_object=100"], lines
    rt.delete(cid, force=True)
    cid, path = start(rt, bundle, {"rdma": {devs[0]: {"hcaObjects": 7}}})
    lines = {l.split()[0]: l.split()[1:] for l in cg(path, "rdma.max").splitlines()}
    assert lines.get(devs[0]) == ["hca_handle=max", "hca_object=7"], lines
    rt.delete(cid, force=True)


def test_unified_keys_written_and_checked(rt, bundle):
    cid, path = start(rt, bundle, {"memory": {"limit": 64 << 20},
                                   "unified": {"memory.high": str(48 << 20), "pids.max": "17",
                                               "cpu.weight": "300"}})
    assert int(cg(path, "memory.high")) == 48 << 20
    assert cg(path, "pids.max") == "17"
    assert cg(path, "cpu.weight") == "300"
    rt.delete(cid, force=True)


@pytest.mark.parametrize("key", ["memory.nosuchfile", "cgroup.procs", "../memory.max"])
def test_unified_bad_key_refused(rt, bundle, key):
    if rt.is_runc and key != "memory.nosuchfile":
        pytest.skip("runc 1.1 does not check unified keys beyond the file's existence")
    refused_and_clean(rt, bundle, {"unified": {key: "1"}}, key)


def test_v1_only_fields_refused(rt, bundle):
    if rt.is_runc:
        pytest.skip("runc 1.1 ignores kernelTCP and realtime values on cgroup v2")
    refused_and_clean(rt, bundle, {"memory": {"limit": 64 << 20, "kernelTCP": 16 << 20}},
                      "linux.resources.memory.kernelTCP", "cgroup v2")
    refused_and_clean(rt, bundle, {"cpu": {"realtimeRuntime": 1000, "realtimePeriod": 10000}},
                      "linux.resources.cpu.realtime", "cgroup v2")
    refused_and_clean(rt, bundle, {"blockIO": {"leafWeight": 100}},
                      "linux.resources.blockIO.leafWeight", "cgroup v2")


def _caps(bundle, *names):
    for n in names:
        for k in ("bounding", "effective", "permitted"):
            bundle.process["capabilities"][k].append(n)


def test_device_program_denies_open(rt, bundle):
    """The eBPF device program: mknod is allowed by the default rules (b *:* m), opening the
    node follows the rules: /dev/ram0 (block 1:0) allowed read-only by the config, so an open for
    reading works and one for writing is refused; /dev/mem (char 1:1) is refused outright."""
    if not os.path.exists("/dev/ram0"):
        pytest.skip("no /dev/ram0 (the VM loads brd)")
    _caps(bundle, "CAP_MKNOD")
    bundle.linux["resources"] = {"devices": [{"allow": False, "access": "rwm"},
                                             {"allow": True, "type": "b", "major": 1, "minor": 0,
                                              "access": "r"}]}
    bundle.args("/bin/sh", "-c",
                "mknod /tmp/ram b 1 0 && echo mknod-ok; "
                "head -c1 /tmp/ram >/dev/null && echo ram-read-ok || echo ram-read-denied; "
                "(: >>/tmp/ram) 2>/dev/null && echo ram-write-ok || echo ram-write-denied; "
                "mknod /tmp/mem c 1 1 && (head -c1 /tmp/mem >/dev/null 2>&1 && echo mem-open || "
                "echo mem-denied); head -c1 /dev/full >/dev/null && echo full-ok")
    r, _ = rt.run(bundle)
    assert r.ok, r
    for w in ("mknod-ok", "ram-read-ok", "ram-write-denied", "mem-denied", "full-ok"):
        assert w in r.out.split(), (w, r.out)


def test_device_deny_w_refuses_rdwr(rt, bundle):
    """A later deny of "w" must refuse an O_RDWR open (any requested bit in a deny rule)."""
    if not os.path.exists("/dev/ram0"):
        pytest.skip("no /dev/ram0 (the VM loads brd)")
    _caps(bundle, "CAP_MKNOD")
    bundle.linux["resources"] = {"devices": [{"allow": False, "access": "rwm"},
                                             {"allow": True, "type": "b", "major": 1, "minor": 0,
                                              "access": "rw"},
                                             {"allow": False, "type": "b", "major": 1, "minor": 0,
                                              "access": "w"}]}
    bundle.args("/bin/sh", "-c",
                "mknod /tmp/ram b 1 0; head -c1 /tmp/ram >/dev/null && echo read-ok; "
                "(exec 3<>/tmp/ram) 2>/dev/null && echo rdwr-ok || echo rdwr-denied")
    r, _ = rt.run(bundle)
    assert r.ok, r
    assert "read-ok" in r.out.split() and "rdwr-denied" in r.out.split(), r.out


def test_memory_hog_killed_and_counted(rt, bundle):
    lim = 32 << 20
    cid, path = start(rt, bundle, {"memory": {"limit": lim, "swap": lim}},
                      args=("/bin/sh", "-c", "dd if=/dev/zero of=/dev/null bs=64M count=1; "
                            "echo rc=$?; sleep 600"))
    wait_for(lambda: kv(cg(path, "memory.events")).get("oom_kill", 0) > 0, 60, "an OOM kill")
    assert int(cg(path, "memory.current")) <= lim
    rt.delete(cid, force=True)


def test_fork_bomb_stopped_at_pids_max(rt, bundle):
    cid, path = start(rt, bundle, {"pids": {"limit": 8}},
                      args=("/bin/sh", "-c", "i=0; while [ $i -lt 40 ]; do sleep 600 & i=$((i+1)); "
                            "done; sleep 600"))
    wait_for(lambda: kv(cg(path, "pids.events"))["max"] > 0, 60, "a refused fork (pids.events)")
    assert int(cg(path, "pids.current")) <= 8
    rt.delete(cid, force=True)


def test_cpu_max_throttles(rt, bundle):
    cid, path = start(rt, bundle, {"cpu": {"quota": 10000, "period": 100000}},
                      args=("/bin/sh", "-c", "while :; do :; done"))
    wait_for(lambda: kv(cg(path, "cpu.stat")).get("nr_throttled", 0) > 0, 60, "throttling")
    rt.delete(cid, force=True)


def test_update_pause_resume(rt, bundle):
    cid, path = start(rt, bundle, {"memory": {"limit": 64 << 20}, "pids": {"limit": 32}})
    r = rt.cmd("update", "--memory", "100m", "--pids-limit", "50", "--cpu-share", "256",
               "--cpu-quota", "20000", "--cpu-period", "100000", cid)
    assert r.ok, r
    assert int(cg(path, "memory.max")) == 100 << 20
    assert cg(path, "pids.max") == "50"
    assert cg(path, "cpu.weight") == str(1 + (256 - 2) * 9999 // 262142)
    assert cg(path, "cpu.max") == "20000 100000"
    res = os.path.join(rt.workdir, f"res-{cid}.json")
    with open(res, "w") as f:
        json.dump({"pids": {"limit": 40}, "memory": {"limit": 80 << 20, "swap": 100 << 20}}, f)
    r = rt.cmd("update", "-r", res, cid)
    assert r.ok, r
    assert cg(path, "pids.max") == "40"
    assert int(cg(path, "memory.max")) == 80 << 20
    assert int(cg(path, "memory.swap.max")) == 20 << 20
    assert rt.cmd("pause", cid).ok
    assert cg(path, "cgroup.freeze") == "1"
    assert kv(cg(path, "cgroup.events"))["frozen"] == 1
    assert rt.status(cid) == "paused"
    assert rt.cmd("resume", cid).ok
    assert cg(path, "cgroup.freeze") == "0"
    assert kv(cg(path, "cgroup.events"))["frozen"] == 0
    assert rt.status(cid) == "running"
    r = rt.cmd("resume", cid)
    assert not r.ok and "not paused" in r.err, r
    rt.delete(cid, force=True)


def test_update_devices_replaces_program(rt, bundle):
    """update with device rules attaches a new program and detaches the old one: the new rules
    apply from the next open on."""
    if rt.is_runc:
        pytest.skip("runc update has no device rules")
    if not os.path.exists("/dev/ram0"):
        pytest.skip("no /dev/ram0 (the VM loads brd)")
    _caps(bundle, "CAP_MKNOD")
    cid, path = start(rt, bundle, {"devices": [{"allow": False, "access": "rwm"}]},
                      args=("/bin/sh", "-c", "mknod /tmp/ram b 1 0; sleep 600"))
    def can_read():
        return rt.cmd("exec", cid, "/bin/sh", "-c", "head -c1 /tmp/ram >/dev/null").ok
    wait_for(lambda: rt.cmd("exec", cid, "test", "-b", "/tmp/ram").ok, 30, "mknod")
    assert not can_read()
    res = os.path.join(rt.workdir, f"res-{cid}.json")
    with open(res, "w") as f:
        json.dump({"devices": [{"allow": False, "access": "rwm"},
                               {"allow": True, "type": "b", "major": 1, "minor": 0, "access": "r"}]}, f)
    r = rt.cmd("update", "-r", res, cid)
    assert r.ok, r
    assert can_read()
    rt.delete(cid, force=True)


def test_ps_and_events_stats(rt, bundle):
    cid, path = start(rt, bundle, {"memory": {"limit": 64 << 20}, "pids": {"limit": 32}})
    r = rt.cmd("ps", "--format", "json", cid)
    assert r.ok, r
    assert sorted(json.loads(r.out)) == sorted(int(x) for x in cg(path, "cgroup.procs").split())
    r = rt.cmd("events", "--stats", cid)
    assert r.ok, r
    ev = json.loads(r.out)
    assert ev["type"] == "stats" and ev["id"] == cid
    d = ev["data"]
    assert d["pids"] == {"current": 1, "limit": 32}
    assert d["memory"]["usage"]["limit"] == 64 << 20
    assert d["memory"]["usage"]["usage"] > 0
    assert "total" in d["cpu"]["usage"] and d["cpu"]["usage"]["total"] > 0
    raw = d["memory"].get("raw", {})
    assert "anon" in raw or "file" in raw, raw  # memory.stat keys on v2
    rt.delete(cid, force=True)


def test_events_reports_oom(rt, bundle):
    lim = 32 << 20
    cid, path = start(rt, bundle, {"memory": {"limit": lim, "swap": lim}},
                      args=("/bin/sh", "-c", "sleep 3; dd if=/dev/zero of=/dev/null bs=64M count=1; "
                            "sleep 600"))
    p = subprocess.Popen([rt.binary, "--root", rt.root, "events", "--interval", "1s", cid],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = []
    deadline = time.monotonic() + 60  # hang guard
    try:
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(json.loads(line))
            if any(x["type"] == "oom" for x in lines):
                break
    finally:
        p.kill()
        p.wait()
    assert any(x["type"] == "oom" and x["id"] == cid for x in lines), lines[-1:] if lines else None
    assert kv(cg(path, "memory.events"))["oom_kill"] > 0
    rt.delete(cid, force=True)


def test_delete_kills_whole_cgroup(rt, bundle):
    """delete --force empties and removes the cgroup, with processes that left the init's
    process tree (cgroup.kill on 5.14+)."""
    cid, path = start(rt, bundle, {"pids": {"limit": 16}},
                      args=("/bin/sh", "-c", "(setsid sleep 600 &); (sleep 600 &); sleep 600"))
    wait_for(lambda: len(cg(path, "cgroup.procs").split()) >= 3, 30, "three processes")
    assert rt.delete(cid, force=True).ok
    assert not os.path.exists(os.path.join(V2, path.lstrip("/")))


def test_nested_path_enables_controllers(rt, bundle):
    """A cgroupsPath several levels below the root: every level on the way must have the
    controllers in its cgroup.subtree_control (the "no internal process" rule allows that, as
    the intermediate levels hold no process), or the leaf has no memory.max to write."""
    cid = rt.new_id()
    path = f"/asbx-it-{cid}/pod/ctr"
    bundle.linux["cgroupsPath"] = path
    bundle.linux["resources"] = {"memory": {"limit": 48 << 20}, "pids": {"limit": 20},
                                 "cpu": {"shares": 1024}}
    bundle.args("/probe", "sleep", "600")
    r, _ = rt.run(bundle, cid, "--detach")
    assert r.ok, r
    try:
        assert int(cg(path, "memory.max")) == 48 << 20
        assert cg(path, "pids.max") == "20"
        for level in (f"/asbx-it-{cid}", f"/asbx-it-{cid}/pod"):
            enabled = cg(level, "cgroup.subtree_control").split()
            assert {"memory", "pids", "cpu"} <= set(enabled), (level, enabled)
            assert cg(level, "cgroup.procs") == "", level
    finally:
        rt.delete(cid, force=True)
    assert not os.path.exists(os.path.join(V2, path.lstrip("/")))
    for level in (f"/asbx-it-{cid}/pod", f"/asbx-it-{cid}"):
        d = os.path.join(V2, level.lstrip("/"))
        if os.path.isdir(d):
            os.rmdir(d)  # intermediate levels the runtime made: runc keeps them too


def test_update_swap_keeps_memory_limit(rt, bundle):
    """update with a memory+swap value only: memory.swap.max is computed against the memory
    limit the container already has (memory.max)."""
    if rt.is_runc:
        pytest.skip("runc 1.1.5 refuses it on v2: unable to set swap limit without memory limit")
    cid, path = start(rt, bundle, {"memory": {"limit": 64 << 20, "swap": 96 << 20}})
    r = rt.cmd("update", "--memory-swap", str(128 << 20), cid)
    assert r.ok, r
    assert int(cg(path, "memory.max")) == 64 << 20
    assert int(cg(path, "memory.swap.max")) == 64 << 20
    rt.delete(cid, force=True)
