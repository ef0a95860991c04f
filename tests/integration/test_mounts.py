"""Mounts and the root filesystem (runtime-spec config.md "Root", "Mounts"; config-linux.md
"Devices", "Default Devices", "Masked Paths", "Readonly Paths", "Rootfs Mount Propagation"),
as seen from inside through /proc/self/mountinfo, stat and attempted writes.

runc is the reference behaviour.
"""

import json
import os

import pytest

from conftest import mountinfo_by_point, probe_json, probe_report, run

pytestmark = pytest.mark.runc_reference


def host_dir(rt, name, files=None):
    d = os.path.join(rt.workdir, name)
    os.makedirs(d)
    os.chmod(d, 0o755)
    for fname, content in (files or {}).items():
        with open(os.path.join(d, fname), "w") as f:
            f.write(content)
    return d


def write_result(rt, bundle, path):
    r = run(rt, bundle, ["/probe", "write", path, "data"])
    return probe_json(r)["result"]


def test_bind_rw(rt, bundle):
    src = host_dir(rt, "rw", {"existing": "old"})
    bundle.add_mount("/mnt/rw", "bind", src, ["rbind", "rw"])
    assert write_result(rt, bundle, "/mnt/rw/new") == "ok"
    with open(os.path.join(src, "new")) as f:
        assert f.read() == "data"
    r = run(rt, bundle, ["/probe", "catfile", "/mnt/rw/existing"])
    assert r.out == "old"


def test_bind_ro(rt, bundle):
    src = host_dir(rt, "ro", {"existing": "old"})
    bundle.add_mount("/mnt/ro", "bind", src, ["rbind", "ro"])
    assert write_result(rt, bundle, "/mnt/ro/new") == "EROFS"
    assert write_result(rt, bundle, "/mnt/ro/existing") == "EROFS"
    assert sorted(os.listdir(src)) == ["existing"]
    rep = probe_report(rt, bundle)
    m = mountinfo_by_point(rep)["/mnt/ro"]
    assert "ro" in m["options"].split(",")


def test_bind_single_file(rt, bundle):
    src = host_dir(rt, "f", {"file": "content"})
    bundle.add_mount("/etc/injected", "bind", os.path.join(src, "file"), ["bind", "ro"])
    r = run(rt, bundle, ["/probe", "catfile", "/etc/injected"])
    assert r.ok and r.out == "content", r


def test_bind_mount_options(rt, bundle):
    src = host_dir(rt, "opts")
    bundle.add_mount("/mnt/o", "bind", src, ["bind", "nosuid", "nodev", "noexec"])
    rep = probe_report(rt, bundle)
    opts = mountinfo_by_point(rep)["/mnt/o"]["options"].split(",")
    for o in ("nosuid", "nodev", "noexec"):
        assert o in opts, opts


def test_tmpfs_options(rt, bundle):
    bundle.add_mount("/scratch", "tmpfs", "tmpfs",
                     ["nosuid", "nodev", "noexec", "size=1m", "mode=1770"])
    rep = probe_report(rt, bundle)
    m = mountinfo_by_point(rep)["/scratch"]
    assert m["fstype"] == "tmpfs"
    for o in ("nosuid", "nodev", "noexec"):
        assert o in m["options"].split(","), m
    sup = m["super_options"].split(",")
    assert "size=1024k" in sup and "mode=1770" in sup, m
    # (runc 1.1.5 then chmods the tmpfs root to the mode of the directory it covers, so the
    # mode is checked through the superblock options only.)


def test_tmpfs_is_writable_and_private(rt, bundle):
    bundle.add_mount("/scratch", "tmpfs", "tmpfs", ["size=1m"])
    assert write_result(rt, bundle, "/scratch/f") == "ok"
    assert not os.path.exists(os.path.join(bundle.rootfs, "scratch", "f"))


def test_special_filesystems(rt, bundle):
    rep = probe_report(rt, bundle)
    mi = mountinfo_by_point(rep)
    assert mi["/proc"]["fstype"] == "proc"
    assert mi["/sys"]["fstype"] == "sysfs"
    assert mi["/dev"]["fstype"] == "tmpfs"
    assert mi["/dev/pts"]["fstype"] == "devpts"
    assert mi["/dev/mqueue"]["fstype"] == "mqueue"
    assert mi["/dev/shm"]["fstype"] == "tmpfs"
    # The procfs is this container's: its pid 1 is the probe.
    assert rep["pid"] == 1


def test_sysfs_read_only(rt, bundle):
    bundle.remove_mount("/sys")
    bundle.remove_mount("/sys/fs/cgroup")
    bundle.add_mount("/sys", "sysfs", "sysfs", ["nosuid", "noexec", "nodev", "ro"])
    rep = probe_report(rt, bundle)
    sysm = mountinfo_by_point(rep)["/sys"]
    assert sysm["fstype"] == "sysfs"
    assert "ro" in sysm["options"].split(",")
    assert write_result(rt, bundle, "/sys/kernel/uevent_helper") == "EROFS"


def test_devpts_newinstance(rt, bundle):
    rep = probe_report(rt, bundle)
    sup = mountinfo_by_point(rep)["/dev/pts"]["super_options"].split(",")
    assert "ptmxmode=666" in sup or "ptmxmode=0666" in sup, sup


def test_mount_nested_destination_created(rt, bundle):
    bundle.add_mount("/a/b/c", "tmpfs", "tmpfs", [])
    rep = probe_report(rt, bundle)
    assert "/a/b/c" in mountinfo_by_point(rep)


def test_relative_destination(rt, bundle):
    # The spec wants absolute destinations; runc 1.1.5 resolves a relative one against the
    # container's root. Either it lands at /rel or the create is refused: never elsewhere.
    bundle.add_mount("rel", "tmpfs", "tmpfs", ["size=1m"])
    r = probe_report(rt, bundle, check=False)
    if r.rc != 0:
        return
    mi = mountinfo_by_point(json.loads(r.out.strip().splitlines()[-1]))
    assert "/rel" in mi and mi["/rel"]["fstype"] == "tmpfs"


def test_mount_order_later_on_top(rt, bundle):
    first = host_dir(rt, "first", {"first": "1"})
    second = host_dir(rt, "second", {"second": "2"})
    bundle.add_mount("/stack", "bind", first, ["bind"])
    bundle.add_mount("/stack", "bind", second, ["bind"])
    r = run(rt, bundle, ["/probe", "ls", "/stack"])
    assert probe_json(r)["entries"] == ["second"]


@pytest.mark.parametrize("prop,expect_shared", [("private", False), ("shared", True)])
def test_mount_propagation_option(rt, bundle, prop, expect_shared):
    src = host_dir(rt, "prop")
    bundle.add_mount("/mnt/p", "bind", src, ["rbind", prop])
    rep = probe_report(rt, bundle)
    opt = mountinfo_by_point(rep)["/mnt/p"]["optional"]
    assert any(o.startswith("shared:") for o in opt) == expect_shared, opt


@pytest.mark.parametrize("prop", ["private", "slave", pytest.param("shared", marks=[
    pytest.mark.agentsbx_only("runc 1.1.5 leaves / private despite rootfsPropagation shared")])])
def test_rootfs_propagation(rt, bundle, prop):
    bundle.linux["rootfsPropagation"] = prop
    rep = probe_report(rt, bundle)
    opt = mountinfo_by_point(rep)["/"]["optional"]
    assert any(o.startswith("shared:") for o in opt) == (prop == "shared"), opt


def test_masked_paths(rt, bundle):
    os.makedirs(os.path.join(bundle.rootfs, "secretdir"))
    with open(os.path.join(bundle.rootfs, "secretdir", "key"), "w") as f:
        f.write("secret")
    with open(os.path.join(bundle.rootfs, "secretfile"), "w") as f:
        f.write("secret")
    bundle.linux["maskedPaths"] = ["/secretdir", "/secretfile", "/proc/timer_list",
                                   "/does/not/exist"]
    r = run(rt, bundle, ["/probe", "ls", "/secretdir"])
    assert r.ok and probe_json(r)["entries"] == [], r
    r = run(rt, bundle, ["/probe", "catfile", "/secretfile"])
    assert r.ok and r.out == "", r
    r = run(rt, bundle, ["/probe", "catfile", "/proc/timer_list"])
    assert r.ok and r.out == "", r
    assert write_result(rt, bundle, "/secretfile") != "ok" or \
        open(os.path.join(bundle.rootfs, "secretfile")).read() == "secret"
    assert write_result(rt, bundle, "/secretdir/new") != "ok"


def test_readonly_paths(rt, bundle):
    os.makedirs(os.path.join(bundle.rootfs, "data"))
    bundle.linux["readonlyPaths"] = ["/data", "/proc/sys", "/does/not/exist"]
    assert write_result(rt, bundle, "/data/x") == "EROFS"
    assert write_result(rt, bundle, "/proc/sys/kernel/hostname") == "EROFS"
    assert write_result(rt, bundle, "/tmp/x") == "ok"
    assert not os.path.exists(os.path.join(bundle.rootfs, "data", "x"))


def test_root_readonly(rt, bundle):
    bundle.config["root"]["readonly"] = True
    assert write_result(rt, bundle, "/x") == "EROFS"
    assert write_result(rt, bundle, "/tmp/x") == "EROFS"
    assert write_result(rt, bundle, "/dev/shm/x") == "ok"  # its own tmpfs
    rep = probe_report(rt, bundle)
    assert "ro" in mountinfo_by_point(rep)["/"]["options"].split(",")


def test_root_writable(rt, bundle):
    bundle.config["root"]["readonly"] = False
    assert write_result(rt, bundle, "/x") == "ok"
    assert os.path.exists(os.path.join(bundle.rootfs, "x"))


@pytest.mark.parametrize("path,major,minor", [
    ("/dev/null", 1, 3), ("/dev/zero", 1, 5), ("/dev/full", 1, 7), ("/dev/random", 1, 8),
    ("/dev/urandom", 1, 9), ("/dev/tty", 5, 0)])
def test_default_devices(rt, bundle, path, major, minor):
    r = run(rt, bundle, ["/probe", "stat", path])
    st = probe_json(r)
    assert st["result"] == "ok", st
    assert (st["type"], st["major"], st["minor"]) == ("char", major, minor)


def test_dev_null_usable(rt, bundle):
    assert write_result(rt, bundle, "/dev/null") == "ok"


@pytest.mark.parametrize("link,target", [
    ("/dev/fd", "/proc/self/fd"), ("/dev/stdin", "/proc/self/fd/0"),
    ("/dev/stdout", "/proc/self/fd/1"), ("/dev/stderr", "/proc/self/fd/2"),
    ("/dev/ptmx", "pts/ptmx")])
def test_dev_symlinks(rt, bundle, link, target):
    r = run(rt, bundle, ["/probe", "readlink", link])
    assert probe_json(r).get("target") == target, r


def test_linux_devices(rt, bundle):
    bundle.linux["devices"] = [
        {"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229, "fileMode": 0o666,
         "uid": 0, "gid": 0},
        {"path": "/dev/custom/mydev", "type": "c", "major": 1, "minor": 3, "fileMode": 0o600,
         "uid": 1000, "gid": 1000},
    ]
    r = run(rt, bundle, ["/probe", "stat", "/dev/fuse"])
    st = probe_json(r)
    assert (st["type"], st["major"], st["minor"], st["mode"]) == ("char", 10, 229, 0o666), st
    r = run(rt, bundle, ["/probe", "stat", "/dev/custom/mydev"])
    st = probe_json(r)
    assert (st["type"], st["major"], st["minor"]) == ("char", 1, 3), st
    assert (st["mode"], st["uid"], st["gid"]) == (0o600, 1000, 1000), st


def test_no_host_devices_leak(rt, bundle):
    r = run(rt, bundle, ["/probe", "ls", "/dev"])
    entries = set(probe_json(r)["entries"])
    # Nothing of the host's /dev beyond the default set (e.g. no block devices).
    for host_only in ("vda", "sda", "kmsg", "mem", "kvm"):
        assert host_only not in entries, entries


def test_tmpfs_without_mode_keeps_mount_point_mode(rt, bundle):
    """A tmpfs without mode= takes the mode of the directory it is mounted on (runc), not
    tmpfs's 1777; with mode= the option wins."""
    os.makedirs(os.path.join(bundle.rootfs, "private"), mode=0o700, exist_ok=True)
    os.chmod(os.path.join(bundle.rootfs, "private"), 0o700)
    os.makedirs(os.path.join(bundle.rootfs, "given"), exist_ok=True)
    os.chmod(os.path.join(bundle.rootfs, "given"), 0o700)
    bundle.add_mount("/private", "tmpfs", "tmpfs", ["nosuid", "size=1m"])
    bundle.add_mount("/given", "tmpfs", "tmpfs", ["mode=750"])
    r = run(rt, bundle, ["/bin/sh", "-c", "/probe stat /private; /probe stat /given; "
                         "grep -c ' /private .* tmpfs' /proc/self/mountinfo"])
    assert r.ok, r
    js = [json.loads(ln) for ln in r.out.splitlines() if ln.startswith("{")]
    assert js[0]["mode"] == 0o700, js
    if not rt.is_runc:  # runc 1.1.5 lets the mount point's mode override an explicit mode=
        assert js[1]["mode"] == 0o750, js
    assert r.out.splitlines()[-1] == "1", "the tmpfs is not mounted on /private"


@pytest.mark.parametrize("link", ["/target/in/root", "rel/target"])
def test_dangling_symlink_destination_created_in_rootfs(rt, bundle, link):
    """A destination that is a dangling symlink resolves inside the rootfs: the target is created
    there (absolute targets taken from the rootfs, relative ones from the link's directory), the
    mount lands on it, and nothing is created on the host."""
    host_target = os.path.join("/", link.lstrip("/").split("/")[0])
    assert not os.path.exists(host_target) or link.startswith("rel")
    os.makedirs(os.path.join(bundle.rootfs, "links"), exist_ok=True)
    os.symlink(link, os.path.join(bundle.rootfs, "links", "dl"))
    src = host_dir(rt, "dlsrc", {"marker": "here"})
    bundle.add_mount("/links/dl", "bind", src, ["rbind", "ro"])
    inside = link if link.startswith("/") else "/links/" + link
    r = run(rt, bundle, ["/probe", "catfile", inside + "/marker"])
    assert r.ok and r.out == "here", r
    assert os.path.isdir(os.path.join(bundle.rootfs, inside.lstrip("/")))
    if link.startswith("/"):
        assert not os.path.exists(host_target), "created on the host"


def test_dangling_symlink_file_destination(rt, bundle):
    """A file bind onto a dangling symlink: the target file is created inside the rootfs."""
    os.symlink("/etc/made-by-runtime", os.path.join(bundle.rootfs, "etc", "dlfile"))
    src = os.path.join(rt.workdir, "srcfile")
    with open(src, "w") as f:
        f.write("filedata")
    bundle.add_mount("/etc/dlfile", "bind", src, ["bind", "ro"])
    r = run(rt, bundle, ["/probe", "catfile", "/etc/made-by-runtime"])
    assert r.ok and r.out == "filedata", r
    assert os.path.isfile(os.path.join(bundle.rootfs, "etc", "made-by-runtime"))
    assert not os.path.exists("/etc/made-by-runtime")


def test_relative_destination_taken_as_rooted(rt, bundle):
    """runc takes a relative destination as rooted (with a warning); so do we."""
    bundle.add_mount("reltmp/sub", "tmpfs", "tmpfs", ["size=1m"])
    r = run(rt, bundle, ["/bin/sh", "-c", "grep -c ' /reltmp/sub .* tmpfs' /proc/self/mountinfo"])
    assert r.ok and r.out.strip() == "1", r
    if not rt.is_runc:
        assert "reltmp/sub" in r.err and "not absolute" in r.err, r
