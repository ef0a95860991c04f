"""Mount destinations and special directories through symlinks in a hostile rootfs.

Mechanism guarded: every destination is resolved with openat2(RESOLVE_IN_ROOT |
RESOLVE_NO_MAGICLINKS) from the rootfs fd and mounted on that fd (move_mount), so no symlink,
"..", or swap during setup can send a mount or a created file to the host (src/linux/pathsafe.c,
rootfs.c, mount.c). Each test passes only if the host victim is unchanged and no host mount
appeared; the run itself may be refused or contained.
"""

import ctypes
import os
import threading
import uuid

import pytest

from conftest import json_lines, probe_report, tree_digest


def victim(rt, name):
    d = os.path.join(rt.workdir, name)
    os.makedirs(d)
    with open(os.path.join(d, "marker"), "w") as f:
        f.write("host")
    return d


def test_dest_parent_symlink_to_slash_dotdot(rt, bundle, host_guard):
    uniq = f"asbx-escape-{uuid.uuid4().hex[:8]}"
    os.makedirs(os.path.join(bundle.rootfs, "mnt"), exist_ok=True)
    os.symlink("/..", os.path.join(bundle.rootfs, "mnt", "up"))
    bundle.add_mount(f"/mnt/up/{uniq}", "tmpfs", "tmpfs", ["size=1m"])
    r = probe_report(rt, bundle, check=False)
    assert not os.path.lexists(f"/{uniq}"), f"created /{uniq} on the host"
    if r.rc == 0:
        rep = json_lines(r.out)[-1]
        assert any(m["mountpoint"] == f"/{uniq}" for m in rep["mounts"]), rep["mounts"]


def test_dest_parent_symlink_to_host_root(rt, bundle, host_guard):
    uniq = f"asbx-escape-{uuid.uuid4().hex[:8]}"
    v = victim(rt, "victim-root")
    os.makedirs(os.path.join(bundle.rootfs, "mnt"), exist_ok=True)
    os.symlink("/", os.path.join(bundle.rootfs, "mnt", "host"))
    dest = os.path.join("/mnt/host", v.lstrip("/"), uniq)
    bundle.add_mount(dest, "tmpfs", "tmpfs", ["size=1m"])
    before = tree_digest(v)
    probe_report(rt, bundle, check=False)
    assert tree_digest(v) == before
    assert not os.path.lexists(os.path.join(v, uniq))


def _renameat2_exchange():
    libc = ctypes.CDLL(None, use_errno=True)
    f = libc.renameat2
    f.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    AT_FDCWD, RENAME_EXCHANGE = -100, 2

    def swap(a, b):
        return f(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE)
    return swap


def test_dest_swapped_during_setup(rt, make_bundle, host_guard):
    """A host thread keeps exchanging rootfs/mnt/race between a real directory and a symlink to
    a host victim while containers mounting on /mnt/race/sub are created (bounded loop)."""
    swap = _renameat2_exchange()
    v = victim(rt, "victim-race")
    before = tree_digest(v)
    b = make_bundle()
    mnt = os.path.join(b.rootfs, "mnt")
    os.makedirs(os.path.join(mnt, "race", "sub"), exist_ok=True)
    os.symlink(v, os.path.join(mnt, "race-link"))
    b.add_mount("/mnt/race/sub", "tmpfs", "tmpfs", ["size=1m"])
    b.add_mount("/mnt/race/sub2", "bind", "/etc", ["rbind", "ro"])
    stop = threading.Event()
    swaps = [0]

    def flip():
        while not stop.is_set():
            if swap(os.path.join(mnt, "race"), os.path.join(mnt, "race-link")) == 0:
                swaps[0] += 1

    t = threading.Thread(target=flip)
    t.start()
    try:
        outcomes = []
        for _ in range(12):
            r, cid = rt.run(b, None)
            outcomes.append(r.rc)
            rt.delete(cid, force=True)
    finally:
        stop.set()
        t.join()
    assert swaps[0] > 0
    assert tree_digest(v) == before, "victim changed during the race"
    assert not os.path.lexists(os.path.join(v, "sub")) and not os.path.lexists(os.path.join(v, "sub2"))


@pytest.mark.parametrize("target", ["proc", "sys"])
def test_special_fs_as_regular_file(rt, bundle, target, host_guard):
    p = os.path.join(bundle.rootfs, target)
    os.rmdir(p)
    with open(p, "w") as f:
        f.write("not a directory")
    r = probe_report(rt, bundle, check=False)
    if r.rc == 0:
        rep = json_lines(r.out)[-1]
        fstype = {m["mountpoint"]: m.get("fstype") for m in rep["mounts"]}
        assert fstype.get(f"/{target}") in ("proc", "sysfs"), fstype


@pytest.mark.parametrize("target", ["proc", "sys"])
def test_special_fs_symlink_to_host_proc(rt, bundle, target, host_guard):
    """rootfs/proc -> /proc (absolute): resolved in the root, i.e. onto itself; never the host.
    host_guard checks that no host mount appeared; the outcome itself is checked here: either the
    run is refused naming the mount and why (agentsbx: a special filesystem's destination must be
    a directory), or the container sees its own procfs/sysfs there. Either way the rootfs entry is
    still the same symlink (nothing was mounted onto or created through it)."""
    p = os.path.join(bundle.rootfs, target)
    os.rmdir(p)
    link = f"/{target}/../{target}"
    os.symlink(link, p)
    r = probe_report(rt, bundle, check=False)
    if r.rc == 0:
        rep = json_lines(r.out)[-1]
        fstype = {m["mountpoint"]: m.get("fstype") for m in rep["mounts"]}
        assert fstype.get(f"/{target}") == {"proc": "proc", "sys": "sysfs"}[target], fstype
    elif not rt.is_runc:
        assert f"(/{target}): destination must be a directory, not a symlink" in r.err, r
    assert os.path.islink(p) and os.readlink(p) == link, "the rootfs's symlink was replaced"


def test_dev_symlink_with_dev_mount(rt, bundle, host_guard):
    v = victim(rt, "victim-dev2")
    before = tree_digest(v)
    d = os.path.join(bundle.rootfs, "dev")
    os.rmdir(d)
    os.symlink(v, d)
    probe_report(rt, bundle, check=False)
    assert tree_digest(v) == before


MASKED_CHECK = ("/proc/timer_list", "/proc/keys", "/proc/sched_debug", "/proc/latency_stats",
                "/proc/acpi", "/sys/firmware", "/proc/scsi")


@pytest.mark.parametrize("keep_dev_mount", [True, False])
def test_dev_null_symlink_to_procfs_file(rt, bundle, keep_dev_mount, host_guard):
    """/dev/null -> /proc/sys/kernel/core_pattern: masking binds /dev/null over masked files;
    following the symlink would bind a writable core_pattern there (CVE-2025-31133 class).
    Masked paths must stay masked and core_pattern unchanged on the host."""
    if not keep_dev_mount:
        for m in list(bundle.config["mounts"]):
            if m["destination"].startswith("/dev"):
                bundle.remove_mount(m["destination"])
    nul = os.path.join(bundle.rootfs, "dev", "null")
    if os.path.lexists(nul):
        os.unlink(nul)
    os.symlink("/proc/sys/kernel/core_pattern", nul)
    bundle.linux["maskedPaths"] = list(MASKED_CHECK)
    script = "; ".join(f"/probe write {p} '|/tmp/pwned'; /probe stat {p}" for p in MASKED_CHECK)
    script += "; /probe write /proc/sys/kernel/core_pattern '|/tmp/pwned'; exit 0"
    bundle.args("/bin/sh", "-c", script)
    r, _ = rt.run(bundle)
    if r.rc != 0 and not json_lines(r.out):
        return  # refused: fine (host_guard checks core_pattern)
    res = json_lines(r.out)
    writes = {x["path"]: x["result"] for x in res if x.get("op") == "write"}
    stats = {x["path"]: x for x in res if x.get("op") == "stat" and x["result"] == "ok"}
    assert writes.get("/proc/sys/kernel/core_pattern") not in (None, "ok"), writes
    for p, st in stats.items():
        if st["type"] == "char":
            # a masked file is the null device itself; writing to it is harmless
            assert (st["major"], st["minor"]) == (1, 3), st
        else:
            assert st["type"] == "dir" and writes.get(p) != "ok", (st, writes.get(p))


def test_dev_pts_symlink_with_terminal(rt, bundle, tmp_path, host_guard):
    """/dev/pts pre-created as a symlink to a host dir, terminal: true: the console must be a
    pty of the container's devpts, and the host dir unchanged."""
    import socket
    import array
    v = victim(rt, "victim-pts")
    before = tree_digest(v)
    for m in list(bundle.config["mounts"]):
        if m["destination"] == "/dev/pts":
            pass
    pts = os.path.join(bundle.rootfs, "dev", "pts")
    if os.path.isdir(pts) and not os.path.islink(pts):
        os.rmdir(pts)
    os.symlink(v, pts)
    bundle.process["terminal"] = True
    bundle.args("/probe", "sleep", "600")
    sock_path = str(tmp_path / "console.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(1)
    srv.settimeout(60)
    master = None
    try:
        r, cid = rt.create(bundle, None, "--console-socket", sock_path)
        if r.ok:
            conn, _ = srv.accept()
            fds = array.array("i")
            msg, anc, _, _ = conn.recvmsg(16, socket.CMSG_LEN(4))
            for lvl, typ, data in anc:
                fds.frombytes(data[:4])
            conn.close()
            assert len(fds) == 1
            master = fds[0]
            pid = rt.state(cid).json()["pid"]
            assert rt.start(cid).ok
            # the init's stdin is the pty slave of the container's devpts
            target = os.readlink(f"/proc/{pid}/fd/0")
            assert target.startswith("/dev/pts/"), target
            st = os.stat(f"/proc/{pid}/fd/0")
            assert os.major(st.st_rdev) == 136, st
    finally:
        srv.close()
        if master is not None:
            os.close(master)
    assert tree_digest(v) == before
