"""Spec 1.1-1.3 process fields: process.scheduler (sched_setattr), process.ioPriority (ioprio_set)
and linux.memoryPolicy (set_mempolicy), issue 15.

Asserted from the host on the container's processes (the init and an exec'd process): the
scheduling policy and nice value (sched_getscheduler, getpriority), the I/O priority
(ioprio_get(2)) and the NUMA policy the kernel reports in /proc/PID/numa_maps. runc 1.1.5
predates all three (it ignores them), so these are agentsbx-only; bad values are refused at
create naming the JSON path, with nothing left behind (the conftest leak checks).
"""

import ctypes
import os

import pytest

pytestmark = pytest.mark.agentsbx_only("runc 1.1.5 predates process.scheduler, ioPriority and memoryPolicy")

LIBC = ctypes.CDLL(None, use_errno=True)
SYS_IOPRIO_GET = 252  # x86_64
IOPRIO_WHO_PROCESS = 1


def ioprio(pid):
    v = LIBC.syscall(SYS_IOPRIO_GET, IOPRIO_WHO_PROCESS, pid)
    assert v >= 0, os.strerror(ctypes.get_errno())
    return v >> 13, v & 0x1fff


def numa_policy(pid):
    """The task policy as numa_maps prints it for a mapping without its own (the first one)."""
    with open(f"/proc/{pid}/numa_maps") as f:
        return f.readline().split()[1]


def started(rt, b):
    b.args("/probe", "sleep", "600")
    r, cid = rt.create(b)
    assert r.ok, r
    assert rt.start(cid).ok
    return cid, rt.state(cid).json()["pid"]


def exec_detached(rt, cid):
    pidfile = os.path.join(rt.workdir, f"exec-{os.urandom(3).hex()}.pid")
    r = rt.cmd("exec", "--detach", "--pid-file", pidfile, cid, "/probe", "sleep", "600")
    assert r.ok, r
    with open(pidfile) as f:
        return int(f.read())


def test_scheduler_batch_nice(rt, bundle):
    bundle.process["scheduler"] = {"policy": "SCHED_BATCH", "nice": 7}
    cid, pid = started(rt, bundle)
    assert os.sched_getscheduler(pid) == os.SCHED_BATCH
    assert os.getpriority(os.PRIO_PROCESS, pid) == 7
    # exec's process is built from the container's process (runc's exec): same class
    epid = exec_detached(rt, cid)
    assert os.sched_getscheduler(epid) == os.SCHED_BATCH
    assert os.getpriority(os.PRIO_PROCESS, epid) == 7


def test_scheduler_idle_reset_on_fork(rt, bundle):
    bundle.process["scheduler"] = {"policy": "SCHED_IDLE", "flags": ["SCHED_FLAG_RESET_ON_FORK"]}
    _, pid = started(rt, bundle)
    # sched_getscheduler reports SCHED_RESET_ON_FORK ored into the policy
    assert os.sched_getscheduler(pid) == os.SCHED_IDLE | os.SCHED_RESET_ON_FORK


def test_scheduler_fifo_with_rt_budget(rt, bundle):
    bundle.linux.setdefault("resources", {})["cpu"] = {"realtimeRuntime": 10000,
                                                       "realtimePeriod": 1000000}
    bundle.process["scheduler"] = {"policy": "SCHED_FIFO", "priority": 10}
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    if not r.ok and "realtimeRuntime" in r.err:
        pytest.skip(f"the cpu cgroup refuses the RT budget itself (not the scheduler): {r.err.strip()}")
    assert r.ok, r
    pid = rt.state(cid).json()["pid"]
    assert os.sched_getscheduler(pid) == os.SCHED_FIFO
    assert os.sched_getparam(pid).sched_priority == 10


@pytest.mark.skipif(not os.path.exists("/sys/fs/cgroup/cpu/cpu.rt_runtime_us"),
                    reason="no RT group scheduling (cpu.rt_runtime_us) on this host")
def test_scheduler_fifo_without_rt_budget_fails_clearly(rt, bundle):
    """RT group scheduling gives a new cgroup no RT time: sched_setattr is EPERM, and create
    says which field and why rather than starting the container at another class."""
    bundle.process["scheduler"] = {"policy": "SCHED_FIFO", "priority": 10}
    r, _ = rt.create(bundle)
    assert r.rc != 0 and "process.scheduler" in r.err and "realtimeRuntime" in r.err, r


@pytest.mark.parametrize("sched,needle", [
    ({"policy": "SCHED_BOGUS"}, "process.scheduler.policy"),
    ({"policy": "SCHED_OTHER", "flags": ["SCHED_FLAG_UTIL_CLAMP_MIN"]}, "process.scheduler.flags[0]"),
    ({"policy": "SCHED_DEADLINE", "runtime": 1000000}, "SCHED_DEADLINE needs runtime and deadline"),
    ({"policy": "SCHED_OTHER", "nice": 40}, "process.scheduler.nice"),
])
def test_scheduler_bad_values_refused(rt, bundle, sched, needle):
    bundle.process["scheduler"] = sched
    r, _ = rt.create(bundle)
    assert r.rc != 0 and needle in r.err, r


def test_io_priority(rt, bundle):
    bundle.process["ioPriority"] = {"class": "IOPRIO_CLASS_IDLE", "priority": 0}
    cid, pid = started(rt, bundle)
    assert ioprio(pid) == (3, 0)
    assert ioprio(exec_detached(rt, cid)) == (3, 0)


def test_io_priority_best_effort_level(rt, bundle):
    bundle.process["ioPriority"] = {"class": "IOPRIO_CLASS_BE", "priority": 6}
    _, pid = started(rt, bundle)
    assert ioprio(pid) == (2, 6)


@pytest.mark.parametrize("prio,needle", [
    ({"class": "IOPRIO_CLASS_NOPE", "priority": 0}, "process.ioPriority.class"),
    ({"class": "IOPRIO_CLASS_BE", "priority": 8}, "process.ioPriority.priority"),
])
def test_io_priority_bad_values_refused(rt, bundle, prio, needle):
    bundle.process["ioPriority"] = prio
    r, _ = rt.create(bundle)
    assert r.rc != 0 and needle in r.err, r


@pytest.mark.parametrize("mp,want", [
    ({"mode": "MPOL_BIND", "nodes": "0"}, "bind:0"),
    ({"mode": "MPOL_INTERLEAVE", "nodes": "0"}, "interleave:0"),
    ({"mode": "MPOL_PREFERRED", "nodes": "0", "flags": ["MPOL_F_STATIC_NODES"]}, "prefer=static:0"),
    ({"mode": "MPOL_LOCAL"}, "local"),
])
def test_memory_policy_applied(rt, bundle, mp, want):
    if not os.path.exists("/proc/self/numa_maps"):
        pytest.skip("kernel without CONFIG_NUMA: no /proc/PID/numa_maps to read the policy from")
    bundle.linux["memoryPolicy"] = mp
    cid, pid = started(rt, bundle)
    assert numa_policy(pid) == want
    assert numa_policy(exec_detached(rt, cid)) == want


@pytest.mark.parametrize("mp,needle", [
    ({"mode": "MPOL_NOPE"}, "linux.memoryPolicy.mode"),
    ({"mode": "MPOL_BIND"}, "linux.memoryPolicy.nodes"),
    ({"mode": "MPOL_DEFAULT", "nodes": "0"}, "linux.memoryPolicy.nodes"),
    ({"mode": "MPOL_BIND", "nodes": "0-x"}, "linux.memoryPolicy.nodes"),
    ({"mode": "MPOL_BIND", "nodes": "0", "flags": ["MPOL_F_NOPE"]}, "linux.memoryPolicy.flags[0]"),
    ({"mode": "MPOL_BIND", "nodes": "1000"}, "linux.memoryPolicy"),  # no such node online
])
def test_memory_policy_bad_values_refused(rt, bundle, mp, needle):
    bundle.linux["memoryPolicy"] = mp
    bundle.args("/probe", "exit", "0")
    r, _ = rt.create(bundle)
    assert r.rc != 0 and needle in r.err, r


def test_features_lists_memory_policy(rt):
    r = rt.cmd("features", root=False)
    assert r.ok, r
    mp = r.json()["linux"]["memoryPolicy"]
    assert "MPOL_BIND" in mp["modes"] and "MPOL_F_STATIC_NODES" in mp["flags"], mp
