"""`exec` must never show the container a process that still has the host's root (outside
attack 13; CVE-2016-9962 class).

The direct exec path (src/runtime/exec.c) forks the exec'd process E straight into the
container's pid namespace, where it waits, non-dumpable, until P has moved it into the
container's cgroup, and only then joins the mount namespace. Non-dumpable keeps out only the
processes without CAP_SYS_PTRACE over E's user namespace: a container root without a user
namespace of its own that was given CAP_SYS_PTRACE (`docker run --cap-add SYS_PTRACE`) opened
/proc/<E>/root, i.e. the host's /, and wrote host files. Such a container must take the path on
which E appears only once it is inside; one with a user namespace below the runtime's may keep
the direct path (its root has no capability over the host's user namespace).

The container's init (proc_root_racer.c, static) walks /proc without pause and tries to create a
file through /proc/PID/root in a host directory; the host runs `exec` 40 times. The verdict is
the host's: the file must not exist.
"""

import os
import shutil
import subprocess

import pytest

SRC_C = os.path.join(os.path.dirname(__file__), "proc_root_racer.c")
EXECS = 40


@pytest.fixture(scope="module")
def racer_bin(tmp_path_factory):
    if not shutil.which("gcc"):
        pytest.skip("gcc needed for the static racer")
    out = str(tmp_path_factory.mktemp("racer") / "proc_root_racer")
    cc = subprocess.run(["gcc", "-static", "-O2", "-o", out, SRC_C], capture_output=True, text=True)
    if cc.returncode != 0:
        pytest.skip(f"no static libc: {cc.stderr[-200:]}")
    return out


@pytest.mark.parametrize("userns", [False, True], ids=["no-userns", "userns"])
def test_exec_child_never_reachable_through_proc_root(rt, bundle, racer_bin, tmp_path, userns):
    host_dir = tmp_path / "host-only"
    host_dir.mkdir()
    os.chmod(tmp_path, 0o755)
    shutil.copy2(racer_bin, os.path.join(bundle.rootfs, "racer"))
    os.chmod(os.path.join(bundle.rootfs, "racer"), 0o755)
    bundle.args("/racer", str(host_dir).lstrip("/"))
    caps = bundle.process.setdefault("capabilities", {})
    for k in ("bounding", "effective", "permitted"):
        caps[k] = sorted(set(caps.get(k, [])) | {"CAP_SYS_PTRACE"})
    if userns:
        bundle.linux["namespaces"].append({"type": "user"})
        bundle.linux["uidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
        bundle.linux["gidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
    r, cid = rt.create(bundle)
    assert r.ok, r
    try:
        assert rt.start(cid).ok
        for _ in range(EXECS):
            e = rt.cmd("exec", cid, "/probe", "exit", "0")
            assert e.rc == 0, e
            if (host_dir / "pwned").exists():
                break
    finally:
        rt.kill(cid, "KILL")
        rt.delete(cid, force=True)
    assert not (host_dir / "pwned").exists(), (host_dir / "pwned").read_text()
