"""Runtime self-protection and hostile bundles.

- No file descriptor of the runtime (or of its caller, beyond --preserve-fds) reaches the
  container (CVE-2024-21626 class); the runtime's environment does not either.
- The runtime binary cannot be reached for writing through /proc/PID/exe (CVE-2019-5736 class).
- A hostile rootfs (symlinks in place of /proc, /dev, /dev/null, mount destinations, cwd) cannot
  make the runtime touch host paths: each test asserts that the host victim is unchanged.

runc 1.1.5 is the reference where it protects; agentsbx-only tests say why.
"""

import json
import os

import pytest

from conftest import probe_json, probe_report, run

pytestmark = pytest.mark.runc_reference


def test_only_stdio_fds(rt, bundle):
    rep = probe_report(rt, bundle)
    assert sorted(rep["fds"]) == ["0", "1", "2"], rep["fds"]


def test_caller_fds_do_not_leak(rt, bundle, tmp_path):
    """fds the caller leaves open (without --preserve-fds) must not reach the container."""
    f = open(tmp_path / "callerfile", "w")
    try:
        bundle.args("/probe", "report")
        r, _ = rt.run(bundle, None, pass_fds=(f.fileno(),))
    finally:
        f.close()
    assert r.ok, r
    rep = json.loads(r.out.strip().splitlines()[-1])
    assert sorted(rep["fds"]) == ["0", "1", "2"], rep["fds"]


def test_preserve_fds(rt, bundle, tmp_path):
    path = tmp_path / "preserved"
    path.write_text("x")
    fd = os.open(path, os.O_RDONLY)
    try:
        bundle.args("/probe", "report")
        r, _ = rt.run(bundle, None, "--preserve-fds", "1", pass_fds=(3,),
                      preexec_fn=lambda: os.dup2(fd, 3))
    finally:
        os.close(fd)
    assert r.ok, r
    rep = json.loads(r.out.strip().splitlines()[-1])
    assert sorted(rep["fds"]) == ["0", "1", "2", "3"], rep["fds"]
    assert rep["fds"]["3"].endswith("preserved"), rep["fds"]


def test_runtime_env_does_not_leak(rt, bundle):
    env = dict(os.environ, AGENTSBX_TEST_SECRET="do-not-leak")
    bundle.process["env"] = ["PATH=/bin"]
    bundle.args("/probe", "report")
    r, _ = rt.run(bundle, None, env=env)
    assert r.ok, r
    rep = json.loads(r.out.strip().splitlines()[-1])
    assert not any("do-not-leak" in e for e in rep["env"]), rep["env"]


def test_state_dir_not_visible(rt, bundle):
    r = run(rt, bundle, ["/probe", "stat", rt.root])
    assert probe_json(r)["result"] == "ENOENT"


def test_created_init_is_not_the_writable_runtime_binary(rt, bundle):
    """While a container waits in `created`, its init must not execute the runtime's binary
    from a writable mount: a process that got hold of /proc/PID/exe could reopen it for writing
    once the init has exec'ed (CVE-2019-5736). Accepted: a sealed copy (memfd: another inode),
    or the same inode through a read-only bind mount (runc 1.1.5's approach)."""
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    pid = rt.state(cid).json()["pid"]
    exe = os.stat(f"/proc/{pid}/exe")
    on_disk = os.stat(rt.binary)
    if (exe.st_dev, exe.st_ino) == (on_disk.st_dev, on_disk.st_ino):
        assert os.statvfs(f"/proc/{pid}/exe").f_flag & os.ST_RDONLY, \
            "the created container's init runs the runtime binary from a writable mount"
    with pytest.raises(OSError):
        # Opening for write only (no truncate, no write): must be refused.
        fd = os.open(f"/proc/{pid}/exe", os.O_WRONLY)
        os.close(fd)


def test_container_cannot_open_host_exes_for_write(rt, bundle):
    """With the host pid namespace shared, no /proc/*/exe (the runtime's included) can be opened
    for writing from inside with default capabilities."""
    bundle.remove_namespace("pid")
    bundle.args("/bin/sh", "-c",
                "for d in /proc/[0-9]*; do /probe openw $d/exe; done; exit 0")
    r = run(rt, bundle)
    assert r.ok, r
    results = [json.loads(ln) for ln in r.out.splitlines() if ln.startswith("{")]
    assert results, r
    opened = [x["path"] for x in results if x["result"] == "ok"]
    assert not opened, f"opened for write from the container: {opened}"


def snapshot(path):
    """What a host victim looks like: every entry's type, mode, owner, size and content."""
    out = {}
    st = os.lstat(path)
    out["."] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns)
    if os.path.isdir(path) and not os.path.islink(path):
        for name in sorted(os.listdir(path)):
            p = os.path.join(path, name)
            s = os.lstat(p)
            content = None
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    content = f.read()
            out[name] = (s.st_mode, s.st_uid, s.st_gid, s.st_size, content)
    else:
        with open(path, "rb") as f:
            out["content"] = f.read()
    return out


def host_mounts_under(path):
    with open("/proc/self/mountinfo") as f:
        return [ln for ln in f if ln.split()[4].startswith(path)]


def victim_dir(rt, name):
    d = os.path.join(rt.workdir, name)
    os.makedirs(d)
    with open(os.path.join(d, "marker"), "w") as f:
        f.write("host")
    return d


def run_hostile(rt, bundle):
    """Runs the hostile bundle; the outcome may be a refusal or a contained run."""
    bundle.args("/probe", "report")
    r, _ = rt.run(bundle)
    return r


@pytest.mark.parametrize("target", ["proc", "sys"])
def test_hostile_special_fs_symlink(rt, bundle, target):
    victim = victim_dir(rt, f"victim-{target}")
    before = snapshot(victim)
    p = os.path.join(bundle.rootfs, target)
    os.rmdir(p)
    os.symlink(victim, p)
    run_hostile(rt, bundle)
    assert snapshot(victim) == before
    assert not host_mounts_under(victim)


@pytest.mark.agentsbx_only("runc 1.1.5 follows a rootfs/dev symlink when it creates the /dev/fd, "
                           "/dev/ptmx, /dev/std* links: the host directory gets them")
def test_hostile_dev_symlink_without_dev_mount(rt, bundle):
    """No /dev tmpfs in the config: the runtime populates rootfs/dev itself. If rootfs/dev is a
    symlink to a host directory, the device nodes must not appear there."""
    victim = victim_dir(rt, "victim-dev")
    before = snapshot(victim)
    for m in list(bundle.config["mounts"]):
        if m["destination"].startswith("/dev"):
            bundle.remove_mount(m["destination"])
    d = os.path.join(bundle.rootfs, "dev")
    os.rmdir(d)
    os.symlink(victim, d)
    run_hostile(rt, bundle)
    assert snapshot(victim) == before
    assert not host_mounts_under(victim)


def test_hostile_dev_null_symlink(rt, bundle):
    """rootfs/dev/null pointing at a host file: the host file must stay as it was."""
    victim = os.path.join(victim_dir(rt, "victim-null"), "file")
    with open(victim, "w") as f:
        f.write("precious")
    os.chmod(victim, 0o600)
    before = snapshot(victim)
    for m in list(bundle.config["mounts"]):
        if m["destination"].startswith("/dev"):
            bundle.remove_mount(m["destination"])
    os.symlink(victim, os.path.join(bundle.rootfs, "dev", "null"))
    run_hostile(rt, bundle)
    assert snapshot(victim) == before


def test_hostile_mount_destination_symlink(rt, bundle):
    victim = victim_dir(rt, "victim-mnt")
    before = snapshot(victim)
    os.makedirs(os.path.join(bundle.rootfs, "mnt"), exist_ok=True)
    os.symlink(victim, os.path.join(bundle.rootfs, "mnt", "escape"))
    bundle.add_mount("/mnt/escape/sub", "tmpfs", "tmpfs", ["size=1m"])
    run_hostile(rt, bundle)
    assert snapshot(victim) == before
    assert not host_mounts_under(victim)


def test_hostile_mount_destination_dotdot_symlink(rt, bundle):
    victim = victim_dir(rt, "victim-dotdot")
    before = snapshot(victim)
    # A relative symlink climbing out of the rootfs to the victim.
    rel = os.path.relpath(victim, os.path.join(bundle.rootfs, "mnt"))
    os.makedirs(os.path.join(bundle.rootfs, "mnt"), exist_ok=True)
    os.symlink(rel, os.path.join(bundle.rootfs, "mnt", "up"))
    bundle.add_mount("/mnt/up/created", "tmpfs", "tmpfs", ["size=1m"])
    run_hostile(rt, bundle)
    assert snapshot(victim) == before


def test_cwd_symlink_resolves_inside_rootfs(rt, bundle):
    """cwd through a symlink to an absolute path: resolved inside the rootfs or refused, never
    the host's directory."""
    victim = victim_dir(rt, "victim-cwd")
    os.makedirs(os.path.join(bundle.rootfs, victim.lstrip("/")))
    with open(os.path.join(bundle.rootfs, victim.lstrip("/"), "inside"), "w") as f:
        f.write("container")
    os.symlink(victim, os.path.join(bundle.rootfs, "link"))
    bundle.process["cwd"] = "/link"
    r = run(rt, bundle, ["/probe", "ls", "."])
    if r.rc != 0 and "result" not in r.out:
        return  # refused: fine
    assert probe_json(r)["entries"] == ["inside"], r
    rep = probe_report(rt, bundle)
    assert not rep["cwd"].startswith("(unreachable)"), rep["cwd"]


def test_cwd_dotdot_symlink_stays_inside(rt, bundle):
    os.symlink("../../../../../../../../", os.path.join(bundle.rootfs, "up"))
    bundle.process["cwd"] = "/up"
    r = probe_report(rt, bundle, check=False)
    if r.rc != 0:
        return  # refused: fine
    rep = json.loads(r.out.strip().splitlines()[-1])
    assert rep["cwd"] == "/", rep["cwd"]
