"""Limits of a non-root caller's container through its systemd user manager (issue 17: a
transient scope with Delegate=yes over the user's bus, as crun and Podman do).

Needs systemd as PID 1 on a pure cgroup v2 host: the VM of tests/vm/systemd/run.sh (this CI host
has no systemd). The test starts the throw-away user's manager as root (/run/user/UID and
`systemctl start user@UID.service`: what logind does at a login or for `loginctl enable-linger`),
then runs a rootless OCI bundle as the user, from inside the user's own subtree, with
XDG_RUNTIME_DIR=/run/user/UID, and judges from outside: the cgroup the kernel lists for the
container's process (/proc/PID/cgroup) is a scope below the manager's user@UID.service, its
memory.max / pids.max are the bundle's limits, the manager knows the scope (`systemctl --user
show`, as the user) and it is gone after delete; a probe allocation past the limit is OOM-killed.
Quick mode does not run in this VM (Debian 12's 6.1 kernel: no nftables modules in the guest, no
unique mount ids for the policy's masks). On main every case fails: a non-root caller's limits
are refused (no cgroup is delegated)."""

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

from test_rootless_sandbox import HANG_GUARD, as_user, binary, user  # noqa: F401

V2 = "/sys/fs/cgroup"


def _systemd_v2():
    try:
        exe = os.readlink("/proc/1/exe")
    except OSError:
        return False
    return (exe.endswith("/systemd") and os.path.isdir("/run/systemd/system")
            and os.path.exists(os.path.join(V2, "cgroup.subtree_control")))


pytestmark = pytest.mark.skipif(
    not _systemd_v2(), reason="needs systemd as PID 1 on pure cgroup v2 (runs in the VM: tests/vm/systemd/run.sh)")

PAM = "/etc/pam.d/systemd-user"


def _sh(*argv):
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=HANG_GUARD)


def _start_manager(user, unit):
    """What logind does at a login or for `loginctl enable-linger USER`: the user's runtime
    directory (user-runtime-dir@UID's job, 0700, owned by the user), then user@UID.service. Done
    by hand with --job-mode=ignore-dependencies: the VM boots only agentsbx-test.service, and
    starting dbus and logind there pulls in sysinit.target and local-fs.target, whose tmp.mount
    mounts a fresh /tmp over the running test's. None, or why it failed."""
    xdg = f"/run/user/{user.pw_uid}"
    os.makedirs(xdg, exist_ok=True)
    os.chown(xdg, user.pw_uid, user.pw_gid)
    os.chmod(xdg, 0o700)
    r = _sh("systemctl", "start", "--job-mode=ignore-dependencies", unit)
    return None if r.returncode == 0 else f"systemctl start {unit}: {r.stderr.strip()}"


def _diagnose(user, unit, xdg):
    """Why the manager failed: the journal, and the manager run by hand under strace (the VM keeps
    the trace in its results directory)."""
    trace = os.path.join(user.pw_dir, "strace-um.txt")
    by_hand = as_user(user, ["timeout", "10", "strace", "-f", "-o", trace, "/lib/systemd/systemd", "--user"],
                      env={"XDG_RUNTIME_DIR": xdg, "SYSTEMD_LOG_TARGET": "console", "SYSTEMD_LOG_LEVEL": "debug"})
    if os.path.isdir("/asbx-out") and os.path.exists(trace):
        shutil.copy(trace, "/asbx-out/")
    return (_sh("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit).stdout[-3000:]
            + "\n--- the manager run by hand:\n" + str(by_hand)[-4000:])


@pytest.fixture(scope="module")
def manager(user):
    """The user's systemd manager (user@UID.service) and its XDG_RUNTIME_DIR; stopped after."""
    if not os.path.exists(PAM):
        if not os.environ.get("ASBX_SYSTEMD_VM"):
            pytest.skip(f"no {PAM} on this host (libpam-systemd's file): user@.service cannot start")
        # the VM's overlay /etc (tests/vm): the PAM stack user@.service names, minimal
        with open(PAM, "w") as f:
            f.write("account required pam_permit.so\nsession required pam_permit.so\n")
    unit = f"user@{user.pw_uid}.service"
    if os.environ.get("ASBX_SYSTEMD_VM"):
        # what pam_systemd does at a real login (the VM's minimal PAM stack does not): the
        # manager's XDG_RUNTIME_DIR; and its log where the host can read it (the results share)
        os.makedirs("/etc/systemd/system/user@.service.d", exist_ok=True)
        with open("/etc/systemd/system/user@.service.d/asbx-vm.conf", "w") as f:
            f.write("[Service]\nEnvironment=XDG_RUNTIME_DIR=/run/user/%i\n")
            if os.path.isdir("/asbx-out"):
                f.write("Environment=SYSTEMD_LOG_TARGET=console\n"
                        "StandardOutput=append:/asbx-out/user-manager.log\nStandardError=inherit\n")
        _sh("systemctl", "daemon-reload")
    why = _start_manager(user, unit)
    xdg = f"/run/user/{user.pw_uid}"
    deadline = time.monotonic() + HANG_GUARD
    while not os.path.exists(os.path.join(xdg, "systemd", "private")):
        if time.monotonic() > deadline or _sh("systemctl", "is-failed", "--quiet", unit).returncode == 0:
            pytest.fail(f"{unit} did not start ({why or 'started'}): " + _diagnose(user, unit, xdg),
                        pytrace=False)
        time.sleep(0.2)
    yield xdg
    _sh("systemctl", "stop", unit)
    shutil.rmtree(xdg, ignore_errors=True)


def in_session(user, xdg, argv):
    """argv run as the user from inside its manager's delegated subtree (a cgroup below
    user@UID.service, placed there by root as systemd does for the user's own services): the
    kernel lets a user move only processes whose source and target share an ancestor it owns
    (cgroup-v2.rst "Delegation Containment"). A login shell sits in session-N.scope instead, and
    the user manager then asks the system manager (AttachProcessesToUnit over the system bus),
    which this VM does not run."""
    session = os.path.join(V2, f"user.slice/user-{user.pw_uid}.slice/user@{user.pw_uid}.service/asbx-session")
    os.makedirs(session, exist_ok=True)
    cmd = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "env", "-i",
           f"HOME={user.pw_dir}", f"USER={user.pw_name}", "PATH=/usr/bin:/bin:/usr/sbin:/sbin",
           f"XDG_RUNTIME_DIR={xdg}"] + list(argv)
    sh = ["/bin/sh", "-c", f'echo $$ > {session}/cgroup.procs && exec "$@"', "sh"] + cmd
    # files, not pipes: a detached container (run -d) and its monitor keep what they inherited
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.run(sh, cwd=user.pw_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=err, text=True,
                           timeout=HANG_GUARD)
        out.seek(0)
        err.seek(0)
        return type("R", (), {"rc": p.returncode, "out": out.read(), "err": err.read(),
                              "__repr__": lambda self: f"rc={self.rc}\n{self.out}\n{self.err}"})()


def left_over(user):
    """The user's processes other than its manager's own (user@UID.service/init.scope)."""
    left = []
    for e in os.listdir("/proc"):
        try:
            if e.isdigit() and os.stat(f"/proc/{e}").st_uid == user.pw_uid and not cg_of(e).endswith("/init.scope"):
                left.append(e)
        except (OSError, IndexError):
            pass
    return left


def no_left_over(user, within=15):
    deadline = time.monotonic() + within
    while left_over(user) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left_over(user)


def cg_of(pid):
    with open(f"/proc/{pid}/cgroup") as f:
        return [line.split(":", 2)[2].strip() for line in f if line.startswith("0::")][0]


def bundle(user):
    """A bundle directory of the user's."""
    d = os.path.join(user.pw_dir, f"b-{uuid.uuid4().hex[:6]}")
    os.mkdir(d)
    os.chown(d, user.pw_uid, user.pw_gid)
    return d


def write_config(user, d, binary, xdg, args, memory, pids=None):
    """`agentsbx spec --rootless` as the user, the host's / read-only as rootfs (plain OCI: the
    VM's 6.1 kernel lacks what a quick-mode policy needs, nftables modules and unique mount ids),
    args and linux.resources memory/pids limits."""
    r = as_user(user, [binary, "spec", "--rootless"], cwd=d, env={"XDG_RUNTIME_DIR": xdg})
    assert r.rc == 0, r
    p = os.path.join(d, "config.json")
    with open(p) as f:
        c = json.load(f)
    c["root"] = {"path": "/", "readonly": True}
    c["process"]["terminal"] = False
    c["process"]["args"] = args
    res = c["linux"].setdefault("resources", {})
    res["memory"] = {"limit": memory}
    if pids:
        res["pids"] = {"limit": pids}
    with open(p, "w") as f:
        json.dump(c, f)


def test_user_manager_scope_holds_the_limits(user, binary, manager):
    cid = f"rl-{uuid.uuid4().hex[:8]}"
    d = bundle(user)
    write_config(user, d, binary, manager, ["/bin/sleep", "300"], 48 << 20, 24)
    r = in_session(user, manager, [binary, "run", "-d", "--bundle", d, cid])
    assert r.rc == 0, r
    top = None
    try:
        sleeps = []
        for e in os.listdir("/proc"):
            try:
                if e.isdigit() and os.stat(f"/proc/{e}").st_uid == user.pw_uid:
                    with open(f"/proc/{e}/cmdline", "rb") as f:
                        if f.read() == b"/bin/sleep\x00300\x00":
                            sleeps.append(e)
            except OSError:
                pass
        assert len(sleeps) == 1, sleeps
        cg = cg_of(sleeps[0])
        scope = f"agentsbx-{cid}.scope"
        assert cg.startswith(f"/user.slice/user-{user.pw_uid}.slice/user@{user.pw_uid}.service/"), cg
        assert cg.endswith("/" + scope) or f"/{scope}/" in cg, cg
        top = cg[:cg.index(scope) + len(scope)]
        with open(os.path.join(V2, top.lstrip("/"), "memory.max")) as f:
            assert int(f.read()) == 48 << 20
        with open(os.path.join(V2, top.lstrip("/"), "pids.max")) as f:
            assert f.read().strip() == "24"
        # the user's manager knows the scope (asked over its private socket, as the user)
        r = as_user(user, ["systemctl", "--user", "show", scope, "--property=ControlGroup,MemoryMax,TasksMax"],
                    env={"XDG_RUNTIME_DIR": manager})
        props = dict(line.split("=", 1) for line in r.out.splitlines() if "=" in line)
        assert props.get("ControlGroup") == top and props.get("MemoryMax") == str(48 << 20), (props, r)
        assert props.get("TasksMax") == "24", props
    finally:
        in_session(user, manager, [binary, "kill", cid, "KILL"])
        time.sleep(0.5)
        r = in_session(user, manager, [binary, "delete", "--force", cid])
    assert r.rc == 0, r
    assert top and not os.path.exists(os.path.join(V2, top.lstrip("/")))  # the scope was stopped
    assert not no_left_over(user)


def test_user_manager_memory_limit_oom(user, binary, manager):
    """A probe allocation past the memory limit is OOM-killed in the scope (SIGKILL: exit 137)."""
    cid = f"rl-{uuid.uuid4().hex[:8]}"
    d = bundle(user)
    write_config(user, d, binary, manager, ["/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=128M", "count=1"],
                 32 << 20)
    r = in_session(user, manager, [binary, "run", "--bundle", d, cid])
    assert r.rc == 137, r
    in_session(user, manager, [binary, "delete", "--force", cid])
    assert not no_left_over(user)
