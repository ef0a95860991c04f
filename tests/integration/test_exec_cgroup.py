"""`exec --cgroup [CONTROLLERS:]PATH`: the exec'd process joins an existing sub-cgroup of the
container's cgroup (runc 1.1's exec --cgroup), never a cgroup outside it (issue 15).

Asserted from the host: /proc/PID/cgroup of the exec'd process (pid from --pid-file), per
hierarchy. The sub-cgroups are made by the test (as an engine would), cpuset filled from the
parent so a v1 cpuset child accepts tasks.
"""

import contextlib
import os

import pytest

pytestmark = pytest.mark.runc_reference


def hierarchies():
    """[(mountpoint, root, kind)] with kind "" for cgroup2, else the v1 controllers/name."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            l, r = left.split(), right.split()
            if r[0] == "cgroup2":
                out.append((l[4], l[3], ""))
            elif r[0] == "cgroup":
                opts = [o for o in r[2].split(",") if o not in ("rw", "ro") and "=" not in o
                        or o.startswith("name=")]
                out.append((l[4], l[3], ",".join(sorted(opts))))
    return out


def proc_cgroups(pid):
    """{kind: path} from /proc/PID/cgroup (kind sorted like hierarchies())."""
    res = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            res[",".join(sorted(ctrls.split(","))) if ctrls else ""] = path
    return res


def host_dirs(pid):
    """{kind: host directory of pid's cgroup} for every mounted hierarchy."""
    cg = proc_cgroups(pid)
    out = {}
    for mnt, root, kind in hierarchies():
        if kind in cg and cg[kind].startswith(root.rstrip("/") + "/" if root != "/" else "/"):
            rel = cg[kind][len(root.rstrip("/")):] if root != "/" else cg[kind]
            out[kind] = os.path.join(mnt, rel.lstrip("/"))
    return out


@contextlib.contextmanager
def sub_cgroups(dirs, name):
    made = []
    try:
        for kind, d in dirs.items():
            p = os.path.join(d, name)
            os.mkdir(p)
            made.append(p)
            if "cpuset" in kind.split(","):
                for f in ("cpuset.cpus", "cpuset.mems"):
                    with open(os.path.join(d, f)) as src, open(os.path.join(p, f), "w") as dst:
                        dst.write(src.read())
        yield
    finally:
        for p in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(p)


def started(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    return cid, rt.state(cid).json()["pid"]


def exec_cg(rt, cid, *cg):
    pidfile = os.path.join(rt.workdir, f"exec-{os.urandom(3).hex()}.pid")
    args = []
    for c in cg:
        args += ["--cgroup", c]
    r = rt.cmd("exec", "--detach", "--pid-file", pidfile, *args, cid, "/probe", "sleep", "600")
    pid = None
    if r.ok:
        with open(pidfile) as f:
            pid = int(f.read())
    return r, pid


def test_exec_into_sub_cgroup_everywhere(rt, bundle):
    cid, init = started(rt, bundle)
    dirs = host_dirs(init)
    assert dirs, "no cgroup hierarchy found for the container"
    with sub_cgroups(dirs, "sub"):
        r, pid = exec_cg(rt, cid, "sub")
        assert r.ok, r
        mine, theirs = proc_cgroups(pid), proc_cgroups(init)
        for kind in dirs:
            assert mine[kind] == theirs[kind].rstrip("/") + "/sub", (kind, mine, theirs)
        rt.kill(cid, 9)
        rt.wait_status(cid, "stopped")


def test_exec_into_one_controllers_sub_cgroup(rt, bundle):
    cid, init = started(rt, bundle)
    dirs = host_dirs(init)
    if "memory" not in dirs:
        pytest.skip("no cgroup v1 memory hierarchy on this host")
    with sub_cgroups({"memory": dirs["memory"]}, "m"):
        r, pid = exec_cg(rt, cid, "memory:/m")
        assert r.ok, r
        mine, theirs = proc_cgroups(pid), proc_cgroups(init)
        assert mine["memory"] == theirs["memory"].rstrip("/") + "/m"
        for kind in dirs:
            if kind != "memory":
                assert mine[kind] == theirs[kind], (kind, mine, theirs)
        rt.kill(cid, 9)
        rt.wait_status(cid, "stopped")


def test_exec_cgroup_cannot_leave_the_container(rt, bundle):
    """`../escape` names a sibling of the container's cgroup, which exists: the exec fails and
    nothing ever runs outside the container's cgroup."""
    cid, init = started(rt, bundle)
    dirs = host_dirs(init)
    parents = {k: os.path.dirname(d) for k, d in dirs.items()}
    with sub_cgroups(parents, f"esc-{cid}"):
        r, pid = exec_cg(rt, cid, f"../esc-{cid}")
        assert not r.ok, r
        for d in parents.values():
            with open(os.path.join(d, f"esc-{cid}", "cgroup.procs")) as f:
                assert f.read().strip() == ""
    if not rt.is_runc:
        assert "leave the container's cgroup" in r.err, r


def test_exec_cgroup_missing_sub_cgroup_fails(rt, bundle):
    cid, _ = started(rt, bundle)
    r, _ = exec_cg(rt, cid, "does-not-exist")
    assert not r.ok, r
    if not rt.is_runc:
        assert "does-not-exist" in r.err, r
