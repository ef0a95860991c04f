"""linux.seccomp (config-linux.md "Seccomp"): actions, errno values, argument filters,
architectures, flags, the listenerPath handshake, profile errors, and the containers-common default
profile running a Debian userland. The probe makes the syscalls from inside the container and
reports errno (`probe syscall`, `probe int80`) and the seccomp mode (`probe report`).

runc is the reference behaviour.
"""

import array
import fcntl
import json
import os
import platform
import socket
import struct
import threading

import pytest

from conftest import assert_refused, probe_json, probe_report, run

pytestmark = pytest.mark.runc_reference

SIGSYS = 31
CONTAINERS_PROFILE = "/usr/share/containers/seccomp.json"


def allow_all(*rules, **kw):
    s = {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": list(rules)}
    s.update(kw)
    return s


def rule(names, action, **kw):
    r = {"names": [names] if isinstance(names, str) else list(names), "action": action}
    r.update(kw)
    return r


def sys_result(rt, bundle, *args):
    r = run(rt, bundle, ["/probe", "syscall", *map(str, args)])
    return r, (probe_json(r) if r.out.strip() else None)


def killed_by_sigsys(r):
    # runc and we both report a signal death as 128 + signal
    return r.rc == 128 + SIGSYS


def test_filter_installed_mode_2(rt, bundle):
    bundle.linux["seccomp"] = allow_all(rule("kcmp", "SCMP_ACT_ERRNO"))
    rep = probe_report(rt, bundle)
    assert rep["status"]["Seccomp"] == "2"
    assert rep["status"]["Seccomp_filters"] == "1"


@pytest.mark.parametrize("errno_ret,want", [(None, "EPERM"), (38, "ENOSYS"), (6, "ENXIO")])
def test_errno_values(rt, bundle, errno_ret, want):
    kw = {} if errno_ret is None else {"errnoRet": errno_ret}
    bundle.linux["seccomp"] = allow_all(rule(["mkdir", "mkdirat"], "SCMP_ACT_ERRNO", **kw))
    r, j = sys_result(rt, bundle, "mkdir", "/newdir", 0o755)
    assert r.rc == 1, r
    assert j["result"] == want


def test_default_errno_ret(rt, bundle):
    """defaultAction ERRNO with defaultErrnoRet: everything not allowed gets that errno."""
    prof = json.load(open(CONTAINERS_PROFILE)) if os.path.exists(CONTAINERS_PROFILE) else None
    if prof is None:
        pytest.skip(f"{CONTAINERS_PROFILE} missing (apt-get install golang-github-containers-common)")
    names = [n for s in prof["syscalls"] if s["action"] == "SCMP_ACT_ALLOW" and not s.get("args")
             and not s.get("includes") and not s.get("excludes") for n in s["names"]]
    names = [n for n in names if n != "getcpu"] + ["arch_prctl"]
    bundle.linux["seccomp"] = {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 6,
                               "syscalls": [rule(names, "SCMP_ACT_ALLOW")]}
    r, j = sys_result(rt, bundle, "getcpu", 0, 0, 0)
    assert j["result"] == "ENXIO", r


@pytest.mark.parametrize("action", ["SCMP_ACT_KILL", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_KILL_PROCESS",
                                    "SCMP_ACT_TRAP"])
def test_kill_actions(rt, bundle, action):
    bundle.linux["seccomp"] = allow_all(rule("getppid", action))
    r, _ = sys_result(rt, bundle, "getppid")
    assert killed_by_sigsys(r), r
    assert '"result"' not in r.out


def test_log_allows(rt, bundle):
    bundle.linux["seccomp"] = allow_all(rule("getppid", "SCMP_ACT_LOG"))
    r, j = sys_result(rt, bundle, "getppid")
    assert r.ok and j["result"] == "ok", r


def test_trace_without_tracer_is_enosys(rt, bundle):
    bundle.linux["seccomp"] = allow_all(rule("getppid", "SCMP_ACT_TRACE"))
    r, j = sys_result(rt, bundle, "getppid")
    assert j["result"] == "ENOSYS", r


def test_arg_filters(rt, bundle):
    """EQ on arg0, MASKED_EQ (value = mask, valueTwo = datum), and two rules for one syscall."""
    bundle.linux["seccomp"] = allow_all(
        rule("getpriority", "SCMP_ACT_ERRNO", errnoRet=7,
             args=[{"index": 0, "value": 2, "op": "SCMP_CMP_EQ"}]),
        rule("getpriority", "SCMP_ACT_ERRNO", errnoRet=33,
             args=[{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]),
        rule("dup", "SCMP_ACT_ERRNO", errnoRet=6,
             args=[{"index": 0, "value": 0xf0, "valueTwo": 0x10, "op": "SCMP_CMP_MASKED_EQ"}]),
        rule("umask", "SCMP_ACT_ERRNO", errnoRet=34,
             args=[{"index": 0, "value": 0o100, "op": "SCMP_CMP_GE"}]))
    assert sys_result(rt, bundle, "getpriority", 2, 0)[1]["errno"] == 7
    assert sys_result(rt, bundle, "getpriority", 1, 0)[1]["errno"] == 33
    assert sys_result(rt, bundle, "getpriority", 0, 0)[1]["result"] == "ok"
    assert sys_result(rt, bundle, "dup", 0x13)[1]["errno"] == 6
    assert sys_result(rt, bundle, "dup", 0x23)[1]["result"] == "EBADF"
    assert sys_result(rt, bundle, "umask", 0o200)[1]["errno"] == 34
    assert sys_result(rt, bundle, "umask", 0o22)[1]["result"] == "ok"


def test_unknown_syscall_name_skipped(rt, bundle):
    bundle.linux["seccomp"] = allow_all(rule(["no_such_syscall_2099", "getppid"], "SCMP_ACT_ERRNO"))
    r, j = sys_result(rt, bundle, "getppid")
    assert j["result"] == "EPERM", r


def test_unknown_action_names_path(rt, bundle):
    bundle.linux["seccomp"] = allow_all(rule("getppid", "SCMP_ACT_ERRNO"), rule("kcmp", "SCMP_ACT_FOO"))
    r, cid = rt.create(bundle)
    assert not r.ok
    if not rt.is_runc:
        assert 'linux.seccomp.syscalls[1].action: unknown action "SCMP_ACT_FOO"' in r.err, r
    assert rt.status(cid) is None


def test_unknown_operator_and_arch(rt, bundle):
    bundle.linux["seccomp"] = allow_all(rule("getppid", "SCMP_ACT_ERRNO",
                                             args=[{"index": 0, "value": 1, "op": "SCMP_CMP_XX"}]))
    r, _ = rt.create(bundle)
    assert not r.ok
    if not rt.is_runc:
        assert 'linux.seccomp.syscalls[0].args[0].op: unknown operator "SCMP_CMP_XX"' in r.err, r
    bundle.linux["seccomp"] = allow_all(architectures=["SCMP_ARCH_X86_64", "SCMP_ARCH_VAX"])
    r, _ = rt.create(bundle)
    assert not r.ok
    if not rt.is_runc:
        assert 'linux.seccomp.architectures[1]: unknown architecture "SCMP_ARCH_VAX"' in r.err, r


def test_flags(rt, bundle):
    if rt.is_runc:
        pytest.skip("runc 1.1.5 refuses every flag: 'seccomp flags are not yet supported by runc'")
    bundle.linux["seccomp"] = allow_all(rule("getppid", "SCMP_ACT_ERRNO"),
                                        flags=["SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG",
                                               "SECCOMP_FILTER_FLAG_SPEC_ALLOW"])
    r, j = sys_result(rt, bundle, "getppid")
    assert j["result"] == "EPERM", r


def test_flag_wait_killable_recv(rt, bundle):
    if rt.is_runc:
        pytest.skip("runc 1.1.5 predates SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV")
    bundle.linux["seccomp"] = allow_all(rule("getppid", "SCMP_ACT_ERRNO"),
                                        flags=["SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"])
    r, j = sys_result(rt, bundle, "getppid")
    assert j["result"] == "EPERM", r


def test_flag_wait_killable_recv_with_listener(rt, bundle):
    if rt.is_runc:
        pytest.skip("runc 1.1.5 refuses every flag")
    path = os.path.join(rt.workdir, f"agent-wk-{os.getpid()}.sock")
    agent = Listener(path, reply=77)
    agent.start()
    bundle.linux["seccomp"] = allow_all(rule("getppid", "SCMP_ACT_NOTIFY"), listenerPath=path,
                                        flags=["SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"])
    r, j = sys_result(rt, bundle, "getppid")
    agent.join(30)
    os.unlink(path)
    assert r.ok and j["ret"] == 77, r


def test_no_new_privileges_false_still_filtered(rt, bundle):
    """Without no_new_privs the filter is installed while CAP_SYS_ADMIN is held (runc's order),
    and the process still runs with it and without the NNP bit, as a non-root user."""
    bundle.process["noNewPrivileges"] = False
    bundle.process["user"] = {"uid": 1000, "gid": 1000}
    bundle.linux["seccomp"] = allow_all(rule("kcmp", "SCMP_ACT_ERRNO"))
    rep = probe_report(rt, bundle)
    assert rep["status"]["Seccomp"] == "2"
    assert rep["status"]["NoNewPrivs"] == "0"


@pytest.mark.parametrize("nnp", [False, True])
@pytest.mark.parametrize("action", ["SCMP_ACT_ERRNO", "SCMP_ACT_KILL"])
def test_profile_without_close_range_runs(rt, bundle, nnp, action):
    """A profile that denies (or, as older and custom profiles do, simply lacks) close_range and
    fcntl still starts the container, with or without no_new_privs: the runtime's fds are marked
    close-on-exec before any filter goes in, and none leaks into the process (CVE-2024-21626)."""
    if rt.is_runc and action == "SCMP_ACT_KILL" and not nnp:
        pytest.skip("runc 1.1.5 hangs here: the filter kills its init at close_range and `runc run` waits "
                    "forever (a runc bug, not a reference behaviour)")
    bundle.process["noNewPrivileges"] = nnp
    bundle.linux["seccomp"] = allow_all(rule(["close_range", "fcntl"], action))
    rep = probe_report(rt, bundle)
    assert rep["status"]["Seccomp"] == "2"
    leaked = {fd: t for fd, t in rep["fds"].items() if int(fd) > 2}
    assert not leaked, f"runtime fds leaked into the container: {leaked}"


def test_whitelist_profile_lacking_close_range(rt, bundle):
    """The containers-common default profile minus close_range (what a profile older than Linux
    5.9 looks like) under noNewPrivileges false: the container runs, the call is refused inside."""
    if not os.path.exists(CONTAINERS_PROFILE):
        pytest.skip(f"{CONTAINERS_PROFILE} missing (apt-get install golang-github-containers-common)")
    with open(CONTAINERS_PROFILE) as f:
        prof = json.load(f)
    for r in prof["syscalls"]:
        r["names"] = [n for n in r["names"] if n != "close_range"]
    prof["syscalls"] = [r for r in prof["syscalls"] if r["names"]]
    bundle.process["noNewPrivileges"] = False
    bundle.linux["seccomp"] = prof
    rep = probe_report(rt, bundle)
    assert rep["status"]["Seccomp"] == "2"
    assert not {fd for fd in rep["fds"] if int(fd) > 2}, rep["fds"]


# ---- architectures ---------------------------------------------------------------------------

def ia32_available(rt, bundle):
    """Whether this kernel runs int 0x80 (i386 ABI) calls at all (IA32 emulation)."""
    r = run(rt, bundle, ["/probe", "int80", "20"])
    j = probe_json(r)
    return j["result"] != "signal", j


def test_foreign_arch_native_only_killed(rt, bundle):
    """A native-only profile: an i386 call through int 0x80 hits the bad-arch action (kill), so a
    32-bit call cannot slip past a rule written for x86_64 numbers."""
    if platform.machine() != "x86_64":
        pytest.skip("x86_64-only case")
    ok, j = ia32_available(rt, bundle)
    if not ok:
        pytest.skip(f"kernel without IA32 emulation (int 0x80 ended by signal {j['signal']}): "
                    "the foreign-arch case cannot be exercised here")
    bundle.linux["seccomp"] = allow_all(rule("getpid", "SCMP_ACT_ERRNO"),
                                        architectures=["SCMP_ARCH_X86_64"])
    j = probe_json(run(rt, bundle, ["/probe", "int80", "20"]))
    assert j["result"] == "signal" and j["signal"] == SIGSYS, j


def test_foreign_arch_added_gets_rules(rt, bundle):
    """With SCMP_ARCH_X86 added, the same rule (by name) applies to the i386 number of getpid."""
    if platform.machine() != "x86_64":
        pytest.skip("x86_64-only case")
    ok, j = ia32_available(rt, bundle)
    if not ok:
        pytest.skip(f"kernel without IA32 emulation (int 0x80 ended by signal {j['signal']}): "
                    "the foreign-arch case cannot be exercised here")
    bundle.linux["seccomp"] = allow_all(rule("getpid", "SCMP_ACT_ERRNO", errnoRet=6),
                                        architectures=["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"])
    j = probe_json(run(rt, bundle, ["/probe", "int80", "20"]))
    assert j["result"] == "ENXIO", j
    j = probe_json(run(rt, bundle, ["/probe", "int80", "64"]))  # i386 getppid: allowed
    assert j["result"] == "ok", j


def test_x32_call_under_native_profile(rt, bundle):
    """x32 numbers (bit 30 set) under an x86_64-only profile: libseccomp's filter sends them to
    the bad-arch action. Whether the kernel itself has the x32 ABI does not matter for this."""
    if platform.machine() != "x86_64":
        pytest.skip("x86_64-only case")
    x32_getppid = 0x40000000 | 110
    plain = probe_json(run(rt, bundle, ["/probe", "syscall", str(x32_getppid)]))
    x32_abi = plain["result"] == "ok"
    bundle.linux["seccomp"] = allow_all(rule("getppid", "SCMP_ACT_ERRNO"),
                                        architectures=["SCMP_ARCH_X86_64"])
    r = run(rt, bundle, ["/probe", "syscall", str(x32_getppid)])
    assert killed_by_sigsys(r), (r, "x32 ABI in kernel: %s" % x32_abi)


# ---- listener --------------------------------------------------------------------------------

SECCOMP_IOCTL_NOTIF_RECV = 0xC0502100
SECCOMP_IOCTL_NOTIF_SEND = 0xC0182101
SYS_GETPPID = 110


class Listener(threading.Thread):
    """A seccomp agent: accepts one connection, reads the containerProcessState and the notify
    fd, then answers every notification with `reply`."""

    def __init__(self, path, reply=4242):
        super().__init__(daemon=True)
        self.path, self.reply = path, reply
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(1)
        self.sock.settimeout(60)
        self.state, self.nfds, self.seen, self.error = None, 0, [], None

    def run(self):
        try:
            conn, _ = self.sock.accept()
            fds = array.array("i")
            msg, anc, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(4 * fds.itemsize))
            for level, typ, data in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
            self.state = json.loads(msg.decode())
            self.nfds = len(fds)
            nfd = fds[0]
            while True:
                req = bytearray(80)
                try:
                    fcntl.ioctl(nfd, SECCOMP_IOCTL_NOTIF_RECV, req)
                except OSError:
                    break  # the filter's last user is gone
                nid, pid, _flags, nr = struct.unpack_from("=QIIi", req)
                self.seen.append(nr)
                resp = struct.pack("=QqiI", nid, self.reply, 0, 0)
                try:
                    fcntl.ioctl(nfd, SECCOMP_IOCTL_NOTIF_SEND, resp)
                except OSError:
                    pass
            os.close(nfd)
            conn.close()
        except Exception as e:  # reported by the test
            self.error = e


def test_listener_handshake(rt, bundle):
    path = os.path.join(rt.workdir, f"agent-{os.getpid()}.sock")
    agent = Listener(path)
    agent.start()
    bundle.linux["seccomp"] = allow_all(rule("getppid", "SCMP_ACT_NOTIFY"), listenerPath=path,
                                        listenerMetadata="hello agent")
    r, j = sys_result(rt, bundle, "getppid")
    agent.join(30)
    os.unlink(path)
    assert agent.error is None, agent.error
    assert r.ok and j["ret"] == 4242, r
    st = agent.state
    assert st["fds"] == ["seccompFd"] and agent.nfds == 1
    assert st["metadata"] == "hello agent"
    assert st["pid"] > 0 and st["pid"] == st["state"]["pid"]
    assert st["state"]["status"] in ("creating", "created")
    assert st["state"]["bundle"] == bundle.path
    assert "ociVersion" in st and "id" in st["state"]
    assert SYS_GETPPID in agent.seen


def test_listener_missing_fails_create(rt, bundle):
    path = os.path.join(rt.workdir, "no-agent.sock")
    bundle.linux["seccomp"] = allow_all(rule("getppid", "SCMP_ACT_NOTIFY"), listenerPath=path)
    r, cid = rt.create(bundle)
    assert not r.ok, r
    if not rt.is_runc:
        assert f"linux.seccomp.listenerPath: connect `{path}`" in r.err, r
    assert rt.status(cid) is None


def test_notify_without_listener_path_refused(rt, bundle):
    bundle.linux["seccomp"] = allow_all(rule("getppid", "SCMP_ACT_NOTIFY"))
    r, _ = rt.create(bundle)
    assert_refused(rt, r, "linux.seccomp", "listenerPath")


# ---- the containers-common default profile on Debian -----------------------------------------

def oci_from_docker_profile(prof, caps, arch="amd64"):
    """Docker/Podman profile format -> linux.seccomp, as the engines do for the given caps."""
    native = {"amd64": "SCMP_ARCH_X86_64"}[arch]
    archs = []
    for m in prof.get("archMap", []):
        if m["architecture"] == native:
            archs = [native] + m.get("subArchitectures", [])
    out = []
    for s in prof["syscalls"]:
        inc, exc = s.get("includes") or {}, s.get("excludes") or {}
        if inc.get("arches") and arch not in inc["arches"]:
            continue
        if exc.get("arches") and arch in exc["arches"]:
            continue
        if inc.get("caps") and not all(c in caps for c in inc["caps"]):
            continue
        if exc.get("caps") and any(c in caps for c in exc["caps"]):
            continue
        r = {"names": s["names"], "action": s["action"]}
        if s.get("args"):
            r["args"] = s["args"]
        if "errnoRet" in s:
            r["errnoRet"] = s["errnoRet"]
        out.append(r)
    o = {"defaultAction": prof["defaultAction"], "architectures": archs, "syscalls": out}
    if "defaultErrnoRet" in prof:
        o["defaultErrnoRet"] = prof["defaultErrnoRet"]
    return o


@pytest.fixture
def deb_profiled(make_bundle, debian_rootfs):
    if not os.path.exists(CONTAINERS_PROFILE):
        pytest.skip(f"{CONTAINERS_PROFILE} missing (apt-get install golang-github-containers-common)")
    b = make_bundle(shared_rootfs=debian_rootfs)
    b.config["root"]["readonly"] = True
    b.add_mount("/tmp", "tmpfs", "tmpfs", ["nosuid", "nodev", "size=16m", "mode=1777"])
    b.process["env"] = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        "HOME=/root", "LANG=C.UTF-8"]
    caps = b.process["capabilities"]["bounding"]
    b.linux["seccomp"] = oci_from_docker_profile(json.load(open(CONTAINERS_PROFILE)), caps)
    return b


@pytest.mark.debian
def test_default_profile_debian_userland(rt, deb_profiled):
    r = run(rt, deb_profiled, ["sh", "-c", "apt-get --version | head -1 && python3 -c '"
                                           "import threading, subprocess\n"
                                           "t = threading.Thread(target=lambda: print(\"thread ok\"))\n"
                                           "t.start(); t.join()\n"
                                           "print(subprocess.run([\"true\"]).returncode)'"])
    assert r.ok, r
    assert r.out.splitlines()[0].startswith("apt ")
    assert "thread ok" in r.out and r.out.strip().endswith("0")


@pytest.mark.debian
def test_default_profile_errnos(rt, deb_profiled):
    """Explicit EPERM rules (no CAP_SYS_PTRACE: kcmp), the defaultErrnoRet ENOSYS for a syscall
    the profile does not list (io_pgetevents is EPERM explicitly; quotactl_fd (443) is unlisted),
    and a clone3 rule answering ENOSYS as Docker's profile does without CAP_SYS_ADMIN: glibc then
    falls back to clone, so threads still work."""
    b = deb_profiled
    assert probe_json(run(rt, b, ["/probe", "syscall", "kcmp", 0, 0, 0, 0, 0]))["result"] == "EPERM"
    assert probe_json(run(rt, b, ["/probe", "syscall", "443", 0, 0, 0, 0]))["result"] == "ENOSYS"
    for s in b.linux["seccomp"]["syscalls"]:
        s["names"] = [n for n in s["names"] if n != "clone3"]
    b.linux["seccomp"]["syscalls"] = [s for s in b.linux["seccomp"]["syscalls"] if s["names"]]
    b.linux["seccomp"]["syscalls"].append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38})
    assert probe_json(run(rt, b, ["/probe", "syscall", "clone3", 0, 0]))["result"] == "ENOSYS"
    r = run(rt, b, ["python3", "-c", "import threading; t = threading.Thread(target=print, args=('t',));"
                                     " t.start(); t.join()"])
    assert r.ok and r.out.strip() == "t", r
