"""Host daemons' unix sockets (issue 13 section 4): under network.mode none and filtered, no
pathname unix socket outside the container's writable grants and its own tmpfs is reachable -
connect (stream, seqpacket), sendto/sendmsg of a datagram, through a symlink, /proc/self/root,
a relative path after chdir, a path racing between an allowed and a forbidden name - unless
network.allowUnixSockets names it.

Evidence is the host-side server's own log (a python process started by the test, listening on
pathname sockets and appending one line per accepted connection / received datagram): a test of
a refused path passes only when that log stays empty. The positive tests check the same log
for the connection that must arrive."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from policyutil import audit_dir

pytestmark = pytest.mark.agentsbx_only("agent policy: unix socket confinement")

SERVER = r"""
import os, socket, sys, threading
log = sys.argv[1]
def serve(path, kind):
    t = {"stream": socket.SOCK_STREAM, "seqpacket": socket.SOCK_SEQPACKET, "dgram": socket.SOCK_DGRAM}[kind]
    s = socket.socket(socket.AF_UNIX, t)
    if path.startswith("@"):  # abstract
        s.bind("\0" + path[1:])
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        s.bind(path)
        os.chmod(path, 0o666)
    if kind == "dgram":
        while True:
            s.recv(4096)
            with open(log, "a") as f:
                f.write(f"{path} {kind}\n")
    s.listen(64)
    while True:
        c, _ = s.accept()
        with open(log, "a") as f:
            f.write(f"{path} {kind}\n")
        try:
            c.sendall(b"hello")
        except OSError:
            pass
        c.close()
for spec in sys.argv[2:]:
    path, kind = spec.rsplit(":", 1)
    threading.Thread(target=serve, args=(path, kind), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""


class Server:
    """Host-side listeners; `hits()` is the log of what reached them."""

    def __init__(self, workdir, specs):
        self.log = os.path.join(workdir, f"usock-log-{os.urandom(3).hex()}")
        open(self.log, "w").close()
        script = os.path.join(workdir, "usock-server.py")
        with open(script, "w") as f:
            f.write(SERVER)
        self.proc = subprocess.Popen([sys.executable, script, self.log] + [f"{p}:{k}" for p, k in specs],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        for p, _ in [x for x in specs if not x[0].startswith("@")]:
            deadline = time.monotonic() + 30
            while not os.path.exists(p) and time.monotonic() < deadline:
                time.sleep(0.05)

    def hits(self):
        with open(self.log) as f:
            return f.read().splitlines()

    def stop(self):
        self.proc.kill()  # only the server this test started, by its own handle
        self.proc.wait()


@pytest.fixture
def ws(rt):
    d = os.path.join(rt.workdir, "ws")
    os.makedirs(d)
    os.chmod(d, 0o777)
    return d


def sandbox(rt, *args, profile=None, policy=None, timeout=90):
    g = ["--audit-dir", audit_dir(rt)]
    if profile:
        g += ["--profile", profile]
    if policy is not None:
        p = os.path.join(rt.workdir, f"usock-policy-{os.urandom(3).hex()}.json")
        with open(p, "w") as f:
            json.dump(policy, f)
        g += ["--policy", p]
    return rt.cmd("sandbox", *args, global_args=g, timeout=timeout)


# a filtered policy that is neither built-in profile: the `build` profile narrowed
FILTERED = {"version": 1, "extends": "build", "network": {"mode": "filtered", "allowedDomains": ["example.com"]}}
POLICIES = [("locked", None), ("agent", None), (None, FILTERED)]
POLICY_IDS = ["locked", "agent", "filtered-policy"]

MODES = ["stream", "seqpacket", "dgram-sendto", "dgram-sendmsg", "dgram-connect", "pair-sendto", "raw-sendto"]


@pytest.fixture
def daemon_rootfs(rt, busybox_template):
    """A --rootfs with the probe runnable (/usr/bin) and a host daemon's socket directory in it."""
    root = os.path.join(rt.workdir, "usock-rootfs")
    subprocess.run(["cp", "-a", busybox_template, root], check=True)
    os.makedirs(os.path.join(root, "usr", "bin"), exist_ok=True)
    shutil.copy2(os.path.join(root, "probe"), os.path.join(root, "usr", "bin", "probe"))
    for d in ("workspace", "tmp", "run", "var/lib/daemon"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    return root


@pytest.fixture
def rootfs_server(rt, daemon_rootfs):
    d = os.path.join(daemon_rootfs, "var", "lib", "daemon")
    specs = [(os.path.join(d, "s.sock"), "stream"), (os.path.join(d, "q.sock"), "seqpacket"),
             (os.path.join(d, "d.sock"), "dgram")]
    s = Server(rt.workdir, specs)
    yield s
    s.stop()


def probe_lines(r):
    return [l for l in r.out.splitlines() if l.startswith("unix")]


@pytest.mark.parametrize("profile,policy", POLICIES, ids=POLICY_IDS)
def test_rootfs_daemon_sockets_unreachable(rt, ws, daemon_rootfs, rootfs_server, profile, policy):
    """Every way the probe knows to reach the rootfs daemon's sockets; the daemon hears nothing."""
    target = {"stream": "s.sock", "seqpacket": "q.sock"}
    steps = []
    for m in MODES:
        name = target.get(m, "d.sock")
        steps += [["unix", m, f"/var/lib/daemon/{name}"]]
    # other spellings of the same socket
    steps += [
        ["unix", "stream", "/proc/self/root/var/lib/daemon/s.sock"],
        ["unix", "stream", "/proc/1/root/var/lib/daemon/s.sock"],
        ["unix", "stream", "//var/./lib/../lib/daemon//s.sock"],
        ["unix", "stream", "daemon/s.sock", "/var/lib"],
        ["unix", "stream", "s.sock", "/var/lib/daemon"],
        ["unix", "dgram-sendto", "d.sock", "/var/lib/daemon"],
        ["unix", "stream", "/tmp/link.sock"],
        ["unix", "stream", "/tmp/dirlink/s.sock"],
        ["unix", "stream", "/proc/self/cwd/../var/lib/daemon/s.sock"],
    ]
    script = "ln -s /var/lib/daemon/s.sock /tmp/link.sock; ln -s /var/lib/daemon /tmp/dirlink; " + \
        "; ".join("/usr/bin/probe " + " ".join(s) for s in steps)
    r = sandbox(rt, "--rootfs", daemon_rootfs, "--workspace", ws, "--", "/bin/sh", "-c", script,
                profile=profile, policy=policy)
    assert r.rc == 0, r
    lines = probe_lines(r)
    assert len(lines) == len(steps), r
    assert rootfs_server.hits() == [], (lines, r)
    assert not any(l.endswith(" ok") for l in lines), lines


@pytest.mark.parametrize("profile,policy", POLICIES, ids=POLICY_IDS)
def test_address_race_never_reaches_denied(rt, ws, daemon_rootfs, rootfs_server, profile, policy):
    """A second process flips the shared address buffer between an allowed socket (the
    workspace's or the container's /tmp) and the daemon's: a check-then-continue supervisor
    loses this race; ours acts on its copy."""
    r = sandbox(rt, "--rootfs", daemon_rootfs, "--workspace", ws, "--", "/usr/bin/probe", "unixrace",
                "/tmp/own.sock", "/var/lib/daemon/s.sock", "2000", profile=profile, policy=policy)
    assert r.rc == 0, r
    assert "unixrace ok=" in r.out and "listen" not in r.out, r
    assert rootfs_server.hits() == [], r.out
    # the race was run: connects to the container's own listener went through
    ok = int(r.out.split("ok=")[1].split()[0])
    assert ok > 0, r.out


@pytest.mark.parametrize("profile,policy", POLICIES, ids=POLICY_IDS)
def test_host_view_daemon_socket_unreachable(rt, ws, profile, policy):
    """Quick mode over the host's / : a daemon socket under /var/lib (visible read-only)."""
    d = f"/var/lib/asbx-usock-{os.getpid()}-{os.urandom(2).hex()}"
    srv = Server(rt.workdir, [(f"{d}/s.sock", "stream"), (f"{d}/d.sock", "dgram")])
    try:
        client = os.path.join(ws, "client.py")
        with open(client, "w") as f:
            f.write(CLIENT)
        r = sandbox(rt, "--workspace", ws, "--", "/usr/bin/python3", "/workspace/client.py", d,
                    profile=profile, policy=policy)
        assert r.rc == 0, r
        assert "done" in r.out, r
        assert srv.hits() == [], r.out
    finally:
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)


CLIENT = r"""
import os, socket, sys
d = sys.argv[1]
def tryit(what, fn):
    try:
        fn()
        print(what, "ok")
    except OSError as e:
        print(what, "errno", e.errno)
def stream(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(p)
def dgram(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b"x", p)
def sendmsg(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendmsg([b"x"], [], 0, p)
tryit("stream", lambda: stream(d + "/s.sock"))
tryit("dgram", lambda: dgram(d + "/d.sock"))
tryit("sendmsg", lambda: sendmsg(d + "/d.sock"))
tryit("procroot", lambda: stream("/proc/self/root" + d + "/s.sock"))
try:
    os.symlink(d + "/s.sock", "/tmp/l.sock")
except OSError:
    pass
tryit("symlink", lambda: stream("/tmp/l.sock"))
def highbit(family, p):
    # socket(2)'s family is an int: the kernel reads only the low 32 bits of the register
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(41, ctypes.c_long(family), ctypes.c_long(socket.SOCK_DGRAM), ctypes.c_long(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "socket")
    s = socket.socket(fileno=fd)
    s.sendto(b"x", p)
tryit("highbit", lambda: highbit(0x100000001, d + "/d.sock"))
tryit("highbit2", lambda: highbit(-0xffffffff, d + "/d.sock"))
os.chdir(d)
tryit("relative", lambda: stream("s.sock"))
print("done")
"""


FAMILIES = r"""
import socket
for name, fam in (("vsock", 40), ("tipc", 30), ("alg", 38), ("packet", 17)):
    try:
        socket.socket(fam, socket.SOCK_STREAM if fam != 17 else socket.SOCK_DGRAM).close()
        print(name, "ok")
    except OSError as e:
        print(name, "errno", e.errno)
"""


@pytest.mark.parametrize("profile,policy", POLICIES, ids=POLICY_IDS)
def test_other_socket_families_refused(rt, ws, profile, policy):
    """AF_VSOCK reached the host's vsock port space past every network rule (an outside tester
    held a port the host then could not bind): under none/filtered only AF_UNIX, AF_INET(6) and
    AF_NETLINK sockets can be made; the probe sees EAFNOSUPPORT for the others."""
    client = os.path.join(ws, "families.py")
    with open(client, "w") as f:
        f.write(FAMILIES)
    r = sandbox(rt, "--workspace", ws, "--", "/usr/bin/python3", "/workspace/families.py",
                profile=profile, policy=policy)
    assert r.rc == 0, r
    got = dict(l.split(" ", 1) for l in r.out.splitlines() if l.split(" ")[0] in ("vsock", "tipc", "alg", "packet"))
    # AF_PACKET: the raw-sockets group's EPERM (every profile here denies it)
    assert got == {"vsock": "errno 97", "tipc": "errno 97", "alg": "errno 97", "packet": "errno 1"}, r.out


def test_named_and_workspace_sockets_still_work(rt, ws):
    """allowUnixSockets names a host socket (an ssh-agent's, say); the workspace's sockets and
    the container's own /tmp stay reachable; an unnamed neighbour of the named one does not."""
    d = f"/var/lib/asbx-usock-{os.getpid()}-{os.urandom(2).hex()}"
    named, other, wsock = f"{d}/agent.sock", f"{d}/other.sock", os.path.join(ws, "dev.sock")
    srv = Server(rt.workdir, [(named, "stream"), (other, "stream"), (wsock, "stream")])
    pol = {"version": 1, "extends": "agent", "network": {"mode": "filtered", "allowUnixSockets": [named]}}
    script = r"""
import socket, threading
def stream(p, greeting=True):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p)
        print(p, "ok", s.recv(5).decode() if greeting else "")
    except OSError as e:
        print(p, "errno", e.errno)
import sys
for p in sys.argv[1:]:
    stream(p)
own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
own.bind("/tmp/own.sock"); own.listen(1)
stream("/tmp/own.sock", greeting=False)
"""
    try:
        client = os.path.join(ws, "named.py")
        with open(client, "w") as f:
            f.write(script)
        r = sandbox(rt, "--workspace", ws, "--", "/usr/bin/python3", "/workspace/named.py", named,
                    "/workspace/dev.sock", "dev.sock", other, policy=pol)
        assert r.rc == 0, r
        out = r.out.splitlines()
        assert f"{named} ok hello" in out, r
        assert "/workspace/dev.sock ok hello" in out and "dev.sock ok hello" in out, r
        assert "/tmp/own.sock ok " in out, r
        assert f"{other} errno 13" in out, r
        hits = srv.hits()
        assert hits.count(f"{named} stream") == 1 and hits.count(f"{wsock} stream") == 2, hits
        assert not any(h.startswith(other) for h in hits), hits
    finally:
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("profile,policy", POLICIES, ids=POLICY_IDS)
def test_connect_from_a_second_thread(rt, ws, profile, policy):
    """connect(2) from a thread that does not lead its process is supervised like the first
    thread's (seccomp_notif.pid is a thread id: the monitor's pidfd_open once refused it, and
    every connect of curl's or git's resolver thread, or of a Python thread, failed with ESRCH):
    the container's own /tmp listener is reached from a second thread, a TCP connect to a closed
    loopback port gets the kernel's ECONNREFUSED, not ESRCH."""
    script = r"""
import errno, socket, threading
own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
own.bind("/tmp/own.sock"); own.listen(4)
out = {}
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("/tmp/own.sock"); out["unix"] = "ok"
    except OSError as e:
        out["unix"] = errno.errorcode.get(e.errno, str(e.errno))
def tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.connect(("127.0.0.1", 9)); out["tcp"] = "ok"
    except OSError as e:
        out["tcp"] = errno.errorcode.get(e.errno, str(e.errno))
for f in (unix, tcp):
    t = threading.Thread(target=f); t.start(); t.join()
print("unix", out["unix"], "tcp", out["tcp"])
"""
    client = os.path.join(ws, "thread.py")
    with open(client, "w") as f:
        f.write(script)
    r = sandbox(rt, "--workspace", ws, "--", "/usr/bin/python3", "/workspace/thread.py", profile=profile, policy=policy)
    assert r.rc == 0, r
    assert "unix ok tcp ECONNREFUSED" in r.out.splitlines(), r


def test_oci_init_and_exec_cannot_reach_daemon(rt, make_bundle):
    """OCI mode (create/start/exec) under `locked`: the init's process tree and every `exec`'d
    process are supervised (exec hands its filter's notify fd to the monitor over the state
    dir's unixsock.sock): the daemon hears nothing, the container's own /tmp socket works."""
    from policyutil import pcreate, policy_bundle
    pb = policy_bundle(make_bundle)
    d = os.path.join(pb.rootfs, "var", "lib", "daemon")
    srv = Server(rt.workdir, [(os.path.join(d, "s.sock"), "stream"), (os.path.join(d, "d.sock"), "dgram")])
    try:
        r, cid = pcreate(rt, pb, ["/bin/sh", "-c", "/usr/bin/probe unix stream /var/lib/daemon/s.sock; "
                                  "/usr/bin/probe unix dgram-sendto /var/lib/daemon/d.sock; exec sleep 60"],
                         profile="locked")
        assert r.ok, r
        assert rt.start(cid).ok
        e = rt.cmd("exec", cid, "/usr/bin/probe", "unix", "stream", "/var/lib/daemon/s.sock")
        assert e.rc == 0, e
        assert "unix stream errno=13" in e.out, e
        e = rt.cmd("exec", cid, "/usr/bin/probe", "unix", "dgram-sendto", "/var/lib/daemon/d.sock")
        assert "unix dgram-sendto errno=13" in e.out, e
        e = rt.cmd("exec", cid, "/usr/bin/probe", "unixrace", "/tmp/exec-own.sock", "/var/lib/daemon/s.sock", "300")
        assert e.rc == 0 and "unixrace ok=" in e.out and "listen" not in e.out, e
        assert int(e.out.split("ok=")[1].split()[0]) > 0, e.out
        time.sleep(0.5)
        assert srv.hits() == [], srv.hits()
        assert rt.kill(cid, "KILL").ok
    finally:
        srv.stop()


def test_host_abstract_socket_unreachable_with_shared_netns(rt, make_bundle):
    """Mode open in the host's network namespace (an OCI bundle without a network namespace):
    the host's abstract sockets (containerd shims, X11 ...) are out of the sandbox's Landlock
    scope (LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET)."""
    from policyutil import prun, policy_bundle
    name = f"@asbx-usock-{os.getpid()}-{os.urandom(2).hex()}"
    srv = Server(rt.workdir, [(name, "stream")])
    try:
        pb = policy_bundle(make_bundle)
        pb.config["linux"]["namespaces"] = [n for n in pb.config["linux"]["namespaces"] if n["type"] != "network"]
        pol = {"version": 1, "extends": "agent", "network": {"mode": "open"}}
        r, _ = prun(rt, pb, ["/usr/bin/probe", "unix", "stream", name], profile=None, policy=pol)
        assert r.rc == 0, r
        assert "unix stream errno=" in r.out, r
        assert srv.hits() == [], r
    finally:
        srv.stop()


def test_exec_cannot_steal_a_supervised_socket(rt, make_bundle):
    """An `exec`'d process whose monitor channel is missing gets the unsupervised filter; no
    process may take an unconnected AF_UNIX socket out of another's supervision (pidfd_getfd,
    same uid, no Yama) and connect it itself. Here the channel is removed before the exec."""
    from policyutil import pcreate, policy_bundle
    pb = policy_bundle(make_bundle)
    d = os.path.join(pb.rootfs, "var", "lib", "daemon")
    srv = Server(rt.workdir, [(os.path.join(d, "s.sock"), "stream")])
    try:
        # no Landlock (its ptrace scoping would refuse) and the ptrace group (which holds
        # pidfd_getfd) not denied: the unix-socket filter must hold by itself
        pol = {"version": 1, "network": {"mode": "none"}, "syscalls": {"deny": ["io_uring", "userns", "bpf"]}}
        r, cid = pcreate(rt, pb, ["/usr/bin/probe", "unixhold", "60"], profile=None, policy=pol)
        assert r.ok, r
        assert rt.start(cid).ok
        out = ""
        deadline = time.monotonic() + 30
        while "unixhold pid=" not in out and time.monotonic() < deadline:
            time.sleep(0.1)
            with open(pb.stdout_path) as f:
                out = f.read()
        assert "unixhold pid=" in out, out
        pid, fd = [x.split("=")[1] for x in out.split("unixhold ")[1].split()[:2]]
        sock = os.path.join(rt.root, cid, "unixsock.sock")
        assert os.path.exists(sock), "the monitor's exec channel"
        os.unlink(sock)  # this exec goes unsupervised
        e = rt.cmd("exec", cid, "/usr/bin/probe", "unixsteal", pid, fd, "/var/lib/daemon/s.sock")
        assert e.rc == 0, e
        assert "unixsteal" in e.out and "unixsteal ok" not in e.out, e
        time.sleep(0.5)
        assert srv.hits() == [], (e.out, srv.hits())
        assert rt.kill(cid, "KILL").ok
    finally:
        srv.stop()


def test_own_tmpfs_reachable_without_a_grant(rt, make_bundle):
    """A policy with no filesystem section (no Landlock, no writable grants): a socket on a
    tmpfs the container was given (/dev/shm) is its own and reachable; the rootfs daemon's is
    not. The probe listens on its own socket and races the address as above."""
    from policyutil import prun, policy_bundle
    pb = policy_bundle(make_bundle)
    d = os.path.join(pb.rootfs, "var", "lib", "daemon")
    srv = Server(rt.workdir, [(os.path.join(d, "s.sock"), "stream")])
    try:
        pol = {"version": 1, "network": {"mode": "none"}}
        r, _ = prun(rt, pb, ["/usr/bin/probe", "unixrace", "/dev/shm/own.sock", "/var/lib/daemon/s.sock", "300"],
                    profile=None, policy=pol)
        assert r.rc == 0, r
        assert "unixrace ok=" in r.out and "listen" not in r.out, r
        assert int(r.out.split("ok=")[1].split()[0]) > 0, r.out
        assert srv.hits() == [], r.out
    finally:
        srv.stop()


def test_oci_listener_with_confining_policy_refused_at_create(rt, make_bundle):
    """The kernel allows one seccomp listener per process: a bundle's linux.seccomp listenerPath
    and the confinement's supervisor cannot both be had, so `create` fails naming both (fail
    closed, nothing left behind - the conftest teardown checks) instead of failing at `start`."""
    import socket
    import threading
    from policyutil import pcreate, policy_bundle
    path = os.path.join(rt.workdir, f"listener-{os.urandom(3).hex()}.sock")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(4)
    held = []
    t = threading.Thread(target=lambda: held.append(ls.accept()), daemon=True)
    t.start()
    try:
        pb = policy_bundle(make_bundle)
        pb.linux["seccomp"] = {"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": path,
                               "syscalls": [{"names": ["getppid"], "action": "SCMP_ACT_NOTIFY"}]}
        r, cid = pcreate(rt, pb, ["/usr/bin/probe", "report"], profile="locked")
        assert not r.ok, r
        assert "one listener per process" in r.err and "listenerPath" in r.err, r
        assert rt.status(cid) is None
    finally:
        ls.close()
