"""Host privilege through the workspace (issue 13 §1): nothing a policy container writes on a
host-visible path may give a host user privilege - no setuid/setgid file or directory, no file
capability, no device node, no file given to another owner than the one the container's users
map to.

Every attempt runs inside the container; the verdict is the HOST's: lstat of what the attempt
left (mode bits, type, st_uid/st_gid), the security.capability xattr, and the written file run
as uid 65534 with setpriv(1) - `id` prints `euid=` only when the effective uid differs.

Two paths (src/runtime/policy_hostfiles.c): quick mode (`agentsbx sandbox --profile agent`, the
workspace bound at /workspace) and OCI mode (a bundle under `--profile agent` with Docker's
default capabilities, a host directory bind-mounted like a volume at /workspace, and a site
policy that lists CAP_MKNOD and CAP_SETFCAP in capabilities.allow: capabilities.allow cannot
grant them back).

"Owner the policy maps to": the owner of a plain file the container creates (`ref`), which is
what the host sees for container root; pre-existing host files keep their owner.
"""

import os
import shutil
import stat
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from policyutil import audit_dir, gflags, pcreate, policy_bundle  # noqa: E402

pytestmark = pytest.mark.agentsbx_only("agent policy (quick mode and --profile)")

OTHER = 12345  # a host uid/gid that is nobody's here
SRC_C = os.path.join(os.path.dirname(__file__), "hostfile_attack.c")


def sandbox(rt, *args, timeout=60):
    return rt.cmd("sandbox", *args, global_args=["--audit-dir", audit_dir(rt)], timeout=timeout)


def have_setpriv():
    return shutil.which("setpriv") is not None


def run_as_nobody(path):
    """Run `path` (a copy of id) as uid/gid 65534 on the host; its output."""
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", path],
                       capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


def fcaps(path):
    try:
        return os.getxattr(path, "security.capability", follow_symlinks=False)
    except OSError:
        return None


def snap(path):
    """(mode, uid, gid, content) of a host file, to tell whether an attempt changed it."""
    st = os.lstat(path)
    with open(path, "rb") as f:
        return (st.st_mode, st.st_uid, st.st_gid, f.read())


def judge(path, owner, before=None):
    """The host's verdict on one path the container created or changed: a list of problems.
    `before`: the snap() of a planted host file - left unchanged, it is no finding."""
    if not os.path.lexists(path):
        return []
    if before is not None and os.path.isfile(path) and snap(path) == before:
        return []
    st = os.lstat(path)
    bad = []
    if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
        bad.append(f"{path}: mode {oct(st.st_mode)} has S_ISUID/S_ISGID")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        bad.append(f"{path}: a device node {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
    if (st.st_uid, st.st_gid) != owner:
        bad.append(f"{path}: owned by {st.st_uid}:{st.st_gid}, expected {owner[0]}:{owner[1]}")
    if fcaps(path) is not None:
        bad.append(f"{path}: carries security.capability")
    if stat.S_ISREG(st.st_mode) and st.st_size > 0 and st.st_mode & 0o001 and have_setpriv():
        out = run_as_nobody(path)
        if "euid=" in out or "egid=" in out:
            bad.append(f"{path} run as 65534 on the host: {out.strip()}")
    return bad


def plant(ws):
    """Host files the attempts start from: a 12345-owned setuid copy of id (for cp -a, tar -p),
    a 12345-owned victim (for chown/chmod) and a 12345-owned setuid `true` (overwritten with id)."""
    os.makedirs(os.path.join(ws, "src"))
    for name, mode, src in (("src/id-suid", 0o4755, "/usr/bin/id"), ("victim", 0o755, "/usr/bin/id"),
                            ("suidvictim", 0o4755, "/usr/bin/true")):
        p = os.path.join(ws, name)
        shutil.copy(src, p)
        os.chown(p, OTHER, OTHER)
        os.chmod(p, mode)


# (case, shell command run in /workspace, [(path, whose owner: "ref" | "host")])
QUICK = [
    ("chmod-4755", "cp /usr/bin/id f; chmod 4755 f", [("f", "ref")]),
    ("chmod-2755", "cp /usr/bin/id f; chmod 2755 f", [("f", "ref")]),
    ("chmod-gs-dir", "mkdir d; chmod g+s d", [("d", "ref")]),
    ("chmod-host-owned", "chmod 4755 victim", [("victim", "host")]),
    ("chown-to-0", "chown 0:0 victim", [("victim", "host")]),
    ("chown-to-other", f"touch f; chown {OTHER}:{OTHER} f", [("f", "ref")]),
    ("chgrp-to-other", f"touch f; chgrp {OTHER} f", [("f", "ref")]),
    ("cp-a-setuid", "cp -a src/id-suid f", [("f", "ref")]),
    ("tar-p-setuid", "tar -C src -cf - id-suid | tar -xpf - -C .; mv id-suid f", [("f", "ref")]),
    ("install-m-4755", "install -m 4755 /usr/bin/id f", [("f", "ref")]),
    ("overwrite-setuid", "cat /usr/bin/id > suidvictim", [("suidvictim", "host")]),
    ("mkfifo-6666", "python3 -c \"import os; os.mkfifo('f', 0o6666)\"", [("f", "ref")]),
    ("openat-creat-04755", "python3 -c \"import os,shutil; fd=os.open('f', os.O_CREAT|os.O_WRONLY, 0o4755); "
     "os.write(fd, open('/usr/bin/id','rb').read())\"", [("f", "ref")]),
    ("fchmodat2", "cp /usr/bin/id f; python3 -c \"import ctypes; "
     "ctypes.CDLL(None, use_errno=True).syscall(452, -100, b'f', 0o4755, 0)\"", [("f", "ref")]),
]


WS_OWNER = 23456  # a non-root workspace owner: quick mode maps container root to it


def make_ws(rt, owner=None):
    d = os.path.join(rt.workdir, f"ws-priv-{os.urandom(3).hex()}")
    os.makedirs(d)
    plant(d)
    if owner is None:
        os.chmod(d, 0o777)
    else:
        # the owner must reach its workspace by itself (the test's own dir is 0700)
        os.chmod(rt.workdir, 0o711)
        os.chown(d, owner, owner)
        os.chmod(d, 0o755)
    return d


@pytest.fixture
def ws(rt):
    return make_ws(rt)


def owners(ws, rt, profile):
    """The owner of a plain file the container created (container root, as the host sees it)."""
    r = sandbox(rt, "--profile", profile, "--workspace", ws, "--", "/bin/sh", "-c", "touch /workspace/ref")
    assert r.rc == 0, r
    st = os.lstat(os.path.join(ws, "ref"))
    return {"ref": (st.st_uid, st.st_gid), "host": (OTHER, OTHER)}


@pytest.mark.parametrize("owner", ["root-owned", "user-owned"])
@pytest.mark.parametrize("profile", ["agent", "build"])
@pytest.mark.parametrize("case,script,paths", QUICK, ids=[c[0] for c in QUICK])
def test_quick_mode(rt, profile, owner, case, script, paths):
    """root-owned workspace: no user namespace, the host-file layer holds (container root is
    host root); user-owned: container root is the workspace's owner (a user namespace)."""
    ws = make_ws(rt, None if owner == "root-owned" else WS_OWNER)
    own = owners(ws, rt, profile)
    if owner == "user-owned":
        assert own["ref"] == (WS_OWNER, WS_OWNER), own
    before = {p: snap(os.path.join(ws, p)) for p, who in paths if who == "host"}
    r = sandbox(rt, "--profile", profile, "--workspace", ws, "--", "/bin/sh", "-c",
                f"cd /workspace && {{ {script}; }}; echo done")
    assert "done" in r.out, r
    bad = [b for p, who in paths for b in judge(os.path.join(ws, p), own[who], before.get(p))]
    assert not bad, f"{case} under {profile}: {bad}\n{r}"


# OCI mode: hostfile_attack OP PATH [SRC] (one syscall each), /id-src = the host's id
OCI = ["openat", "open", "creat", "openat2", "mknod-reg", "mknod-chr", "mkfifo", "mkdir-sgid", "fchmodat2",
       "fchmod", "setcap", "chmod-int80"]
DOCKER_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
               "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",
               "CAP_AUDIT_WRITE"]
SITE_POLICY = {"version": 1, "extends": "agent",
               "capabilities": {"allow": DOCKER_CAPS}}


@pytest.fixture(scope="module")
def attack_bin(tmp_path_factory):
    if not shutil.which("gcc"):
        pytest.skip("gcc needed for the static helper")
    out = str(tmp_path_factory.mktemp("hfa") / "hostfile_attack")
    cc = subprocess.run(["gcc", "-static", "-O", "-o", out, SRC_C], capture_output=True, text=True)
    if cc.returncode != 0:
        pytest.skip(f"no static libc: {cc.stderr[-200:]}")
    return out


def oci_bundle(rt, make_bundle, attack_bin, vol, args):
    b = policy_bundle(make_bundle, args=args)
    shutil.copy2(attack_bin, os.path.join(b.rootfs, "usr", "bin", "hostfile_attack"))
    shutil.copy2("/usr/bin/id", os.path.join(b.rootfs, "id-src"))
    b.process["capabilities"] = {k: list(DOCKER_CAPS) for k in ("bounding", "effective", "permitted")}
    b.process["user"] = {"uid": 0, "gid": 0}
    b.add_mount("/workspace", "bind", vol, ["rbind", "rw"])
    return b


def oci_run(rt, b, policy):
    b.save()
    cid = rt.new_id()
    rt.created.append(cid)
    return rt.cmd("run", "--bundle", b.path, cid, timeout=60, global_args=gflags(rt, policy=policy))


@pytest.mark.parametrize("op", OCI)
def test_oci_volume(rt, make_bundle, attack_bin, ws, op):
    b = oci_bundle(rt, make_bundle, attack_bin, ws, ["/bin/sh", "-c", "touch /workspace/ref; "
                                                     f"/usr/bin/hostfile_attack {op} /workspace/f /id-src"])
    r = oci_run(rt, b, SITE_POLICY)
    assert r.rc == 0 and f"{op} " in r.out, r
    st = os.lstat(os.path.join(ws, "ref"))
    bad = judge(os.path.join(ws, "f"), (st.st_uid, st.st_gid))
    assert not bad, f"{op}: {bad}\n{r}"



def test_oci_controls_without_policy(rt, make_bundle, attack_bin, ws):
    """Control: without a policy the same helper does make a setuid file and a device node on the
    volume (so the tests above can fail), as runc would."""
    b = oci_bundle(rt, make_bundle, attack_bin, ws, ["/bin/sh", "-c",
                                                     "/usr/bin/hostfile_attack openat /workspace/f /id-src; "
                                                     "/usr/bin/hostfile_attack mknod-chr /workspace/c"])
    b.save()
    r, _ = rt.run(b)
    assert r.rc == 0, r
    assert os.stat(os.path.join(ws, "f")).st_mode & stat.S_ISUID, r
    assert stat.S_ISCHR(os.lstat(os.path.join(ws, "c")).st_mode), r


def test_oci_user_namespace(rt, make_bundle, attack_bin, ws):
    """With an isolating user namespace (container 0 = host 200000) the kernel keeps ownership
    inside the mapping, so CAP_CHOWN stays; setuid bits and file capabilities (a v3
    security.capability for rootid 200000, which CAP_SETFCAP in the namespace could write) are
    still refused. The policy has no allowExec (vm.memfd_noexec cannot be set from a user
    namespace)."""
    b = oci_bundle(rt, make_bundle, attack_bin, ws, ["/bin/sh", "-c",
                                                     "touch /workspace/ref; "
                                                     "hostfile_attack openat /workspace/f /id-src; "
                                                     "hostfile_attack setcap /workspace/g /id-src; "
                                                     "chown 1:1 /workspace/ref && echo chown-ok; "
                                                     "grep CapEff /proc/self/status"])
    b.set_namespace("user")
    b.linux["uidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    b.linux["gidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    pol = {"version": 1, "network": {"mode": "none"}, "capabilities": {"allow": DOCKER_CAPS}}
    r = oci_run(rt, b, pol)
    assert r.rc == 0, r
    assert "chown-ok" in r.out, r  # CAP_CHOWN kept: the kernel maps ids, host 200001 is in the range
    assert os.lstat(os.path.join(ws, "ref")).st_uid == 200001, r
    bad = judge(os.path.join(ws, "f"), (200000, 200000)) + judge(os.path.join(ws, "g"), (200000, 200000))
    assert not bad, f"{bad}\n{r}"


def test_quick_mode_user_namespace_keeps_memfd_noexec(rt):
    """In the user namespace the init cannot write /proc/sys, so the runtime sets
    vm.memfd_noexec=2 from outside (setns into the container's pid namespace): a memfd written by
    the agent still cannot be executed, the host's value is unchanged, the skeleton is gone."""
    if not os.path.exists("/proc/sys/vm/memfd_noexec"):
        pytest.skip("kernel < 6.3: no vm.memfd_noexec")
    from test_policy_memfd import PY
    ws = make_ws(rt, WS_OWNER)
    with open("/proc/sys/vm/memfd_noexec") as f:
        host_before = f.read()
    cid = f"sbx-userns-{os.getpid()}-{os.urandom(2).hex()}"
    r = rt.cmd("sandbox", "--id", cid, "--profile", "agent", "--workspace", ws, "--", "/bin/sh", "-c",
               "cat /proc/self/uid_map /proc/sys/vm/memfd_noexec; "
               f"/usr/bin/python3 -c '{PY}' /workspace",
               global_args=["--audit-dir", audit_dir(rt)], timeout=60)
    assert r.rc == 0, r
    lines = r.out.split("\n")
    assert lines[0].split() == ["0", str(WS_OWNER), "1"], r  # the user namespace is in force
    assert lines[1] == "2", r  # the kernel's value in the container's pid namespace
    # the memfd is noexec (EACCES), or - where allowExec also refuses memfd_create (ENOSYS,
    # issue 13 §2) - there is none: either way nothing the agent wrote ran
    assert ("exec 13" in lines and "exec status 3" in lines) or "memfd 38" in lines, r
    assert "exec status 0" not in r.out, r
    with open("/proc/sys/vm/memfd_noexec") as f:
        assert f.read() == host_before
    assert not os.path.exists(f"/run/agentsbx-sandbox/{cid}")


# a policy that denies no syscall group and grants every Docker capability: the host-file rules
# are not a group, they hold anyway (io_uring included, though the io_uring group is not denied)
BARE_POLICY = {"version": 1, "network": {"mode": "open"}, "capabilities": {"allow": DOCKER_CAPS}}


BARE_OPS = ("openat", "fchmodat2", "mknod-chr", "setcap", "userns-setcap", "userns-other")


def test_oci_bare_policy(rt, make_bundle, attack_bin, ws):
    steps = ["touch /workspace/ref"] + [f"hostfile_attack {op} /workspace/{op} /id-src" for op in BARE_OPS]
    b = oci_bundle(rt, make_bundle, attack_bin, ws, ["/bin/sh", "-c", "; ".join(steps + [
        "hostfile_attack io_uring /workspace/u"])])
    r = oci_run(rt, b, BARE_POLICY)
    assert r.rc == 0, r
    st = os.lstat(os.path.join(ws, "ref"))
    bad = [x for op in BARE_OPS for x in judge(os.path.join(ws, op), (st.st_uid, st.st_gid))]
    assert not bad, f"{bad}\n{r}"
    assert "io_uring errno 1" in r.out.split("\n"), r  # EPERM, seen by the helper inside



def test_oci_exec_process(rt, make_bundle, attack_bin, ws):
    """`agentsbx exec` into a policy container: the exec'd process gets the same rules."""
    b = oci_bundle(rt, make_bundle, attack_bin, ws, ["/bin/sleep", "30"])
    r, cid = pcreate(rt, b, profile=None, policy=SITE_POLICY)
    assert r.rc == 0, r
    assert rt.start(cid).rc == 0
    r = rt.cmd("exec", cid, "/usr/bin/hostfile_attack", "openat", "/workspace/f", "/id-src", timeout=60)
    assert r.rc == 0 and "openat " in r.out, r
    r2 = rt.cmd("exec", cid, "/bin/touch", "/workspace/ref", timeout=60)
    assert r2.rc == 0, r2
    st = os.lstat(os.path.join(ws, "ref"))
    bad = judge(os.path.join(ws, "f"), (st.st_uid, st.st_gid))
    rt.kill(cid, 9)
    assert not bad, f"{bad}\n{r}"


def test_oci_user_namespace_mapping_host_root(rt, make_bundle, attack_bin, ws):
    """A user namespace whose mapping covers host uid 0 is no isolation: container root is host
    root, so CAP_CHOWN goes as without one (a file cannot be given to 12345)."""
    b = oci_bundle(rt, make_bundle, attack_bin, ws, ["/bin/sh", "-c",
                                                     "touch /workspace/ref; chown 12345:12345 /workspace/ref; "
                                                     "hostfile_attack openat /workspace/f /id-src"])
    b.set_namespace("user")
    b.linux["uidMappings"] = [{"containerID": 0, "hostID": 0, "size": 65536}]
    b.linux["gidMappings"] = [{"containerID": 0, "hostID": 0, "size": 65536}]
    pol = {"version": 1, "network": {"mode": "none"}, "capabilities": {"allow": DOCKER_CAPS}}
    r = oci_run(rt, b, pol)
    assert r.rc == 0, r
    bad = judge(os.path.join(ws, "ref"), (0, 0)) + judge(os.path.join(ws, "f"), (0, 0))
    assert not bad, f"{bad}\n{r}"
