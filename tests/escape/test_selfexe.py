"""CVE-2019-5736 class: the runtime binary reached from inside the container through
/proc/self/exe or /proc/<pid>/exe and reopened for writing.

Mechanism: while the runtime (exec, or the init before its execve) is a process of the container's
pid namespace, the container can open /proc/<pid>/exe with O_PATH, wait for the runtime to exit
(the kernel refuses writes to a running binary with ETXTBSY only while it runs) and reopen it for
writing through /proc/self/fd/N. A container entrypoint `#!/proc/self/exe` makes the runtime
execute itself inside the container. agentsbx runs from a sealed memfd copy (src/runtime/selfexe.c):
what the container can reach is an anonymous, write-sealed file, never the host binary.

Each test passes only if nothing was opened for writing AND the host binary's hash is unchanged.
"""

import os
import time

import pytest

from conftest import file_digest, json_lines

pytestmark = pytest.mark.agentsbx_only("runc 1.1.5 protects with a read-only bind/clone; "
                                       "the watcher's expectations are agentsbx's memfd")


def _watch_while(rt, bundle, cid_cmds, secs=6):
    """Runs `/probe exewatch secs` as the container init, runs each command list with
    `exec` while it watches, and returns the watcher's report."""
    bundle.args("/probe", "exewatch", str(secs))
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    results = []
    for argv in cid_cmds:
        results.append(rt.cmd("exec", cid, *argv))
    deadline = time.monotonic() + secs + 60
    while rt.status(cid) not in ("stopped", None):
        assert time.monotonic() < deadline, "watcher did not finish"
        time.sleep(0.1)
    reps = [x for x in json_lines(bundle.container_output()) if x.get("op") == "exewatch"]
    assert reps, f"no watcher report: {bundle.container_output()!r}"
    rep = reps[-1]
    # Files of the container's own rootfs (e.g. /bin/busybox) are the container's to write;
    # what must never be writable is anything else: the runtime (memfd or host path).
    rep["writable"] = [w for w in rep["writable"]
                       if not os.path.lexists(os.path.join(bundle.rootfs, w.lstrip("/")))
                       or "agentsbx" in w or w.startswith("/memfd:")]
    return rep, results


def test_exec_runtime_not_writable_from_container(rt, bundle, subject_binary, host_guard):
    """Twenty `exec`s while a process inside holds every /proc/PID/exe it sees and keeps trying
    to reopen it for writing, also after the process exited."""
    before = file_digest(subject_binary)
    rep, results = _watch_while(rt, bundle, [["/probe", "exit", "0"]] * 20)
    assert all(x.ok for x in results), [x for x in results if not x.ok][:1]
    assert rep["writable"] == [], f"reopened for writing from the container: {rep['writable']}"
    assert file_digest(subject_binary) == before
    # the host path of the binary must never be what the container sees as an exe
    assert not any(e == subject_binary for e in rep["exes"]), rep["exes"]


def test_proc_self_exe_entrypoint(rt, bundle, subject_binary, host_guard):
    """`exec` of a script whose interpreter is /proc/self/exe: the kernel resolves it to the
    runtime itself, so the runtime binary runs as a container process. It must be the sealed
    copy, and neither it nor the watcher may get it open for writing."""
    evil = os.path.join(bundle.rootfs, "evil")
    with open(evil, "w") as f:
        f.write("#!/proc/self/exe\n")
    os.chmod(evil, 0o755)
    before = file_digest(subject_binary)
    rep, results = _watch_while(rt, bundle, [["/evil"]] * 10 + [["/bin/sh", "/evil"]] * 2)
    assert rep["writable"] == [], f"reopened for writing from the container: {rep['writable']}"
    assert file_digest(subject_binary) == before
    assert not any(e == subject_binary for e in rep["exes"]), rep["exes"]


def test_runtime_exe_seen_is_sealed_memfd(rt, bundle):
    """While a container is `created`, its init is the runtime: /proc/PID/exe must be the
    sealed memfd (F_SEAL_WRITE), and a writable open of it must not give a writable file."""
    import fcntl
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    pid = rt.state(cid).json()["pid"]
    link = os.readlink(f"/proc/{pid}/exe")
    assert link.startswith("/memfd:"), link
    fd = os.open(f"/proc/{pid}/exe", os.O_RDONLY)
    try:
        F_GET_SEALS = 1034
        seals = fcntl.fcntl(fd, F_GET_SEALS)
        F_SEAL_WRITE = 0x8
        assert seals & F_SEAL_WRITE, f"seals {seals:#x}"
    finally:
        os.close(fd)
