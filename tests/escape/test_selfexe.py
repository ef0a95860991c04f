"""CVE-2019-5736 class: the runtime binary reached from inside the container through
/proc/self/exe or /proc/<pid>/exe and reopened for writing.

Mechanism: while the runtime (exec, or the init before its execve) is a process of the container's
pid namespace, the container can open /proc/<pid>/exe with O_PATH, wait for the runtime to exit
(the kernel refuses writes to a running binary with ETXTBSY only while it runs) and reopen it for
writing through /proc/self/fd/N. A container entrypoint `#!/proc/self/exe` makes the runtime
execute itself inside the container. agentsbx runs from a lower-only overlayfs of its directory, or
from a sealed memfd copy (src/runtime/selfexe.c): what the container can reach is a file on a
read-only superblock or an anonymous, write-sealed file, never the host binary.

Each test passes only if nothing was opened for writing AND the host binary's hash is unchanged.
"""

import os
import time

import pytest

from conftest import file_digest, json_lines

pytestmark = pytest.mark.agentsbx_only("runc 1.1.5 protects with a read-only bind/clone; "
                                       "the watcher's expectations are agentsbx's overlay/memfd")


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


OVERLAYFS_SUPER_MAGIC = 0x794C7630
SYS_open_tree, SYS_fspick, SYS_fsconfig, SYS_mount_setattr = 428, 433, 431, 442


def _libc():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return ctypes, libc


def _fs_type(fd):
    ctypes, libc = _libc()
    buf = ctypes.create_string_buffer(256)  # struct statfs; f_type is the first field (long)
    assert libc.fstatfs(fd, buf) == 0, os.strerror(ctypes.get_errno())
    return ctypes.c_long.from_buffer(buf).value


def _assert_overlay_not_writable(pid, fd):
    """The exe is on a read-only overlayfs superblock: a writable open fails with EROFS, and
    neither clearing MOUNT_ATTR_RDONLY on a clone of its mount nor reconfiguring that mount rw
    gives a writable file (a read-only bind mount would fail the first of these)."""
    import errno
    ctypes, libc = _libc()
    assert _fs_type(fd) == OVERLAYFS_SUPER_MAGIC, hex(_fs_type(fd))
    assert os.fstatvfs(fd).f_flag & os.ST_RDONLY
    with pytest.raises(OSError) as e:
        os.close(os.open(f"/proc/{pid}/exe", os.O_WRONLY))
    assert e.value.errno == errno.EROFS, e.value
    # a clone of the exe's mount, read-only flag cleared: the superblock still refuses writes.
    # The kernel may refuse the clone itself (the mount is in no mount namespace of ours: EINVAL)
    OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC, AT_EMPTY_PATH = 1, os.O_CLOEXEC, 0x1000
    mnt = libc.syscall(SYS_open_tree, fd, b"", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH)
    if mnt < 0:
        assert ctypes.get_errno() in (errno.EINVAL, errno.EPERM), os.strerror(ctypes.get_errno())
        mnt = os.dup(fd)  # still try the rw reconfigure below on what we have
    try:
        MOUNT_ATTR_RDONLY = 1
        attr = (ctypes.c_uint64 * 4)(0, MOUNT_ATTR_RDONLY, 0, 0)  # attr_set, attr_clr, propagation, userns_fd
        libc.syscall(SYS_mount_setattr, mnt, b"", AT_EMPTY_PATH, attr, ctypes.sizeof(attr))
        with pytest.raises(OSError) as e:
            os.close(os.open(f"/proc/self/fd/{mnt}", os.O_WRONLY))
        assert e.value.errno == errno.EROFS, e.value
        # remount the superblock rw: refused (an overlay without an upper layer stays read-only)
        FSPICK_CLOEXEC, FSPICK_EMPTY_PATH = 1, 8
        fc = libc.syscall(SYS_fspick, mnt, b"", FSPICK_CLOEXEC | FSPICK_EMPTY_PATH)
        if fc >= 0:
            FSCONFIG_SET_FLAG, FSCONFIG_CMD_RECONFIGURE = 0, 7
            libc.syscall(SYS_fsconfig, fc, FSCONFIG_SET_FLAG, b"rw", None, 0)
            r = libc.syscall(SYS_fsconfig, fc, FSCONFIG_CMD_RECONFIGURE, None, None, 0)
            os.close(fc)
            assert r < 0, "the exe's overlay was reconfigured read-write"
        with pytest.raises(OSError) as e:
            os.close(os.open(f"/proc/self/fd/{mnt}", os.O_WRONLY))
        assert e.value.errno == errno.EROFS, e.value
        with pytest.raises(OSError) as e:
            os.close(os.open(f"/proc/{pid}/exe", os.O_WRONLY))
        assert e.value.errno == errno.EROFS, e.value
    finally:
        os.close(mnt)


def test_runtime_exe_seen_is_sealed_memfd(rt, bundle):
    """While a container is `created`, its init is the runtime: /proc/PID/exe must be either the
    sealed memfd (F_SEAL_WRITE) or a file on a read-only overlayfs superblock (no upper layer)
    that neither a writable open, nor clearing the read-only flag of a clone of its mount, nor a
    rw reconfigure makes writable. Anything else - the host binary, a read-only bind - fails."""
    import fcntl
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    pid = rt.state(cid).json()["pid"]
    link = os.readlink(f"/proc/{pid}/exe")
    fd = os.open(f"/proc/{pid}/exe", os.O_RDONLY)
    try:
        if link.startswith("/memfd:"):
            F_GET_SEALS = 1034
            seals = fcntl.fcntl(fd, F_GET_SEALS)
            F_SEAL_WRITE = 0x8
            assert seals & F_SEAL_WRITE, f"seals {seals:#x}"
        else:
            _assert_overlay_not_writable(pid, fd)
    finally:
        os.close(fd)


def test_runtime_exe_memfd_fallback_is_sealed(rt, bundle):
    """The fallback (no overlayfs: no CAP_SYS_ADMIN, an old kernel; forced here with
    AGENTSBX_SELFEXE_MEMFD=1) is the sealed memfd, which a writable open cannot get around."""
    import errno
    import fcntl
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle, env=dict(os.environ, AGENTSBX_SELFEXE_MEMFD="1"))
    assert r.ok, r
    pid = rt.state(cid).json()["pid"]
    link = os.readlink(f"/proc/{pid}/exe")
    assert link.startswith("/memfd:"), link
    fd = os.open(f"/proc/{pid}/exe", os.O_RDONLY)
    try:
        F_GET_SEALS, F_SEAL_WRITE = 1034, 0x8
        assert fcntl.fcntl(fd, F_GET_SEALS) & F_SEAL_WRITE
    finally:
        os.close(fd)
    with pytest.raises(OSError) as e:
        os.close(os.open(f"/proc/{pid}/exe", os.O_WRONLY))
    assert e.value.errno in (errno.EPERM, errno.ETXTBSY), e.value
