"""Namespaces (runtime-spec config-linux.md "Namespaces", "User namespace mappings",
"Offset for Time Namespace"): each type new, absent (shared with the runtime), or joined by path,
as seen by readlink(/proc/self/ns/*) inside the container.

runc is the reference behaviour, except time namespaces (runc 1.1.5 has none).
"""

import json
import os
import time

import pytest

from conftest import assert_refused, holder_process, probe_report, run

pytestmark = pytest.mark.runc_reference

# OCI namespace type -> /proc/PID/ns entry
NS = {"pid": "pid", "network": "net", "ipc": "ipc", "uts": "uts", "mount": "mnt",
      "cgroup": "cgroup"}


def host_ns(name):
    return os.readlink(f"/proc/self/ns/{name}")


def test_all_new(rt, bundle):
    bundle.linux["namespaces"] = [{"type": t} for t in NS]
    rep = probe_report(rt, bundle)
    for t, name in NS.items():
        assert rep["namespaces"][name] != host_ns(name), t
    assert rep["pid"] == 1


@pytest.mark.parametrize("t", ["network", "ipc", "uts", "cgroup"])
def test_absent_namespace_is_shared(rt, bundle, t):
    bundle.remove_namespace(t)
    if t == "uts":
        bundle.config.pop("hostname", None)
    rep = probe_report(rt, bundle)
    assert rep["namespaces"][NS[t]] == host_ns(NS[t])


def test_no_pid_namespace(rt, bundle):
    bundle.remove_namespace("pid")
    rep = probe_report(rt, bundle)
    assert rep["namespaces"]["pid"] == host_ns("pid")
    assert rep["pid"] != 1


@pytest.mark.parametrize("t,flag", [("network", "--net"), ("ipc", "--ipc"), ("uts", "--uts")])
def test_join_by_path(rt, bundle, t, flag):
    with holder_process(flag) as pid:
        target = os.readlink(f"/proc/{pid}/ns/{NS[t]}")
        assert target != host_ns(NS[t])
        bundle.set_namespace(t, f"/proc/{pid}/ns/{NS[t]}")
        if t == "uts":
            bundle.config.pop("hostname", None)
        rep = probe_report(rt, bundle)
        assert rep["namespaces"][NS[t]] == target


def test_join_two_containers_share_netns(rt, make_bundle):
    """A second container joins the first one's netns through /proc/PID/ns/net (the pod case)."""
    first = make_bundle(args=("/probe", "sleep", "600"))
    r, cid = rt.create(first)
    assert r.ok, r
    pid = rt.state(cid).json()["pid"]
    second = make_bundle()
    second.set_namespace("network", f"/proc/{pid}/ns/net")
    rep = probe_report(rt, second)
    assert rep["namespaces"]["net"] == os.readlink(f"/proc/{pid}/ns/net")


def test_join_missing_path_fails(rt, bundle):
    bundle.set_namespace("network", "/proc/999999999/ns/net")
    r = probe_report(rt, bundle, check=False)
    assert_refused(rt, r, "linux.namespaces", "/proc/999999999/ns/net")


def test_join_wrong_type_fails(rt, bundle):
    with holder_process("--uts") as pid:
        bundle.set_namespace("network", f"/proc/{pid}/ns/uts")
        r = probe_report(rt, bundle, check=False)
        assert_refused(rt, r, "linux.namespaces", f"/proc/{pid}/ns/uts")


def test_join_non_namespace_file_fails(rt, bundle, tmp_path):
    f = tmp_path / "not-a-ns"
    f.write_text("")
    bundle.set_namespace("ipc", str(f))
    r = probe_report(rt, bundle, check=False)
    assert_refused(rt, r, "linux.namespaces", str(f))


def test_user_namespace_mappings(rt, bundle):
    bundle.set_namespace("user")
    bundle.linux["uidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    bundle.linux["gidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    bundle.process["user"] = {"uid": 0, "gid": 0}
    bundle.args("/probe", "report")
    r = run(rt, bundle)
    assert r.ok, r
    rep = json.loads(r.out.strip().splitlines()[-1])
    assert rep["namespaces"]["user"] != host_ns("user")
    assert rep["uid"] == 0 and rep["gid"] == 0
    bundle.args("/probe", "catfile", "/proc/self/uid_map")
    r = run(rt, bundle)
    assert r.ok, r
    assert r.out.split() == ["0", "200000", "65536"]
    bundle.args("/probe", "catfile", "/proc/self/gid_map")
    r = run(rt, bundle)
    assert r.out.split() == ["0", "200000", "65536"]


def test_user_namespace_file_owner_seen_unmapped(rt, bundle):
    """Host root's files show up as the overflow uid inside a user namespace without uid 0."""
    bundle.set_namespace("user")
    bundle.linux["uidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    bundle.linux["gidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    r = run(rt, bundle, ["/probe", "stat", "/probe"])
    assert r.ok, r
    st = json.loads(r.out.strip().splitlines()[-1])
    assert st["uid"] == 65534


@pytest.mark.agentsbx_only("runc 1.1.5 has no time namespace support")
def test_time_namespace_offsets(rt, bundle):
    offset = 10 * 86400
    bundle.set_namespace("time")
    bundle.linux["timeOffsets"] = {"monotonic": {"secs": offset, "nanosecs": 0},
                                   "boottime": {"secs": 2 * offset, "nanosecs": 0}}
    before = (time.clock_gettime(time.CLOCK_MONOTONIC), time.clock_gettime(time.CLOCK_BOOTTIME))
    r = run(rt, bundle, ["/probe", "clock"])
    after = (time.clock_gettime(time.CLOCK_MONOTONIC), time.clock_gettime(time.CLOCK_BOOTTIME))
    assert r.ok, r
    c = json.loads(r.out.strip().splitlines()[-1])
    mono, boot = float(c["clocks"]["monotonic"]), float(c["clocks"]["boottime"])
    # Ordering bounds, not timings: the container's clocks lie between the host's readings taken
    # before and after, shifted by the offsets.
    assert before[0] + offset <= mono <= after[0] + offset
    assert before[1] + 2 * offset <= boot <= after[1] + 2 * offset
    up = float(c["uptime"].split()[0])
    assert up >= before[1] + 2 * offset - 1


@pytest.mark.agentsbx_only("runc 1.1.5 has no time namespace support")
def test_time_offsets_without_time_namespace_refused(rt, bundle):
    bundle.remove_namespace("time")
    bundle.linux["timeOffsets"] = {"monotonic": {"secs": 100, "nanosecs": 0}}
    r = probe_report(rt, bundle, check=False)
    assert_refused(rt, r, "linux.timeOffsets")


def test_cgroup_namespace_root(rt, bundle):
    bundle.set_namespace("cgroup")
    rep = probe_report(rt, bundle)
    # Inside a new cgroup namespace the container's own cgroup is its root.
    for line in rep["cgroup"].splitlines():
        assert line.split(":", 2)[2] == "/", rep["cgroup"]


def test_duplicate_namespace_refused(rt, bundle):
    bundle.linux["namespaces"] = bundle.linux["namespaces"] + [{"type": "ipc"}, {"type": "ipc"}]
    r = probe_report(rt, bundle, check=False)
    assert_refused(rt, r, "linux.namespaces", "ipc")


def lo_flags(r):
    assert r.ok, r
    return int(r.out.strip().splitlines()[-1], 16)


def test_new_network_namespace_has_lo_up(rt, bundle):
    """A network namespace the runtime creates has `lo` up (IFF_UP), as seen through the
    container's own sysfs; runc does this for every new network namespace."""
    assert any(n["type"] == "network" for n in bundle.linux["namespaces"])
    r = run(rt, bundle, ["/bin/cat", "/sys/class/net/lo/flags"])
    assert lo_flags(r) & 0x1, r


@pytest.mark.agentsbx_only("agent policies are agentsbx's")
def test_new_network_namespace_lo_up_under_policy_none(rt, make_bundle):
    from policyutil import policy_bundle, prun
    pb = policy_bundle(make_bundle)
    r, _ = prun(rt, pb, ["/bin/cat", "/sys/class/net/lo/flags"], profile=None,
                policy={"version": 1, "network": {"mode": "none"}})
    assert lo_flags(r) & 0x1, r


@pytest.mark.parametrize("opt", ["bind", "rbind"])
def test_user_namespace_bind_source_opened_as_host_root(rt, bundle, opt):
    """In a user namespace, bind sources are opened by the runtime as the host's root: a source
    below a root-only (0700) directory, which the container's mapped root cannot traverse, is
    still bound and readable through the mount (the file is world-readable)."""
    bundle.set_namespace("user")
    bundle.linux["uidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    bundle.linux["gidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    locked = os.path.join(rt.workdir, "locked")
    src = os.path.join(locked, "data")
    os.makedirs(src)
    os.chmod(locked, 0o700)
    with open(os.path.join(src, "f"), "w") as f:
        f.write("host-only-path")
    os.chmod(os.path.join(src, "f"), 0o644)
    os.chmod(src, 0o755)
    bundle.add_mount("/tmp/locked", "bind", src, [opt, "ro"])  # /tmp: 1777, creatable
    r = run(rt, bundle, ["/probe", "catfile", "/tmp/locked/f"])
    assert r.ok and r.out == "host-only-path", r
