"""Agent policy, native code under filesystem.allowExec (issue 13 §2; docs/policy.md "Native
code under allowExec", docs/security.md).

The attacker is the sandboxed command (quick mode, the host's python3 as the loader, as the
tester did with ctypes). Its payloads stand for code the agent compiled: a shared object whose
constructor, and a program whose main, create a marker file `M-<route>` in the workspace (a host
directory) and print the marker's path; a 44-byte x86-64 routine that does the same with raw
syscalls, for the memory routes. Each route runs in its own child. A route is blocked when no
marker exists on the host and its path was not printed: outside evidence only.

The workspace lies under /var/tmp, so the sandbox saw it read-only at its host path through its
/var bind too (route dlopen-alias: the same file through a second, read-only path); that path is
now an empty read-only tmpfs (docs/policy.md "The workspace at its host path"), so the route is
blocked under every profile and left out of the `open` control.

Matrix: every file/memfd/SysV route is blocked under agent, build and locked; the process-memory
routes (anonymous mmap RWX, mprotect RW->RX, a private RWX mapping of a system library) are
blocked under locked only (syscalls.denyWriteExecMemory)
and, as documented, run under agent/build (control: the routine works). Control: with the `open`
profile every route that needs no /dev/shm runs.
"""

import os
import platform
import shutil
import subprocess
import time

import pytest

from policyutil import audit_dir

pytestmark = [pytest.mark.agentsbx_only("agent policy")]

if platform.machine() != "x86_64":
    pytest.skip("the memory routes' routine is x86-64 machine code", allow_module_level=True)
if not shutil.which("gcc") or not os.path.exists("/usr/bin/python3"):
    pytest.skip("needs gcc and /usr/bin/python3 on the host", allow_module_level=True)

PAYLOAD_C = r"""
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static void ran (void)
{
  const char *m = getenv ("ASBX_MARK");
  if (!m)
    return;
  mkdir (m, 0755);
  write (1, "NATIVE ", 7);
  write (1, m, strlen (m));
  write (1, "\n", 1);
}
#ifdef SO
__attribute__ ((constructor)) static void ctor (void) { ran (); }
#else
int main (void) { ran (); return 0; }
#endif
"""

DRIVER = r'''
import ctypes, os, shutil, sys
ws, alias, route = sys.argv[1], sys.argv[2], sys.argv[3]
mark = f"{ws}/M-{route}"
os.environ["ASBX_MARK"] = mark
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PR, PW, PX = 1, 2, 4
MAP_SHARED, MAP_PRIVATE, MAP_ANON = 1, 2, 0x20
MFD_NOEXEC_SEAL, MFD_ALLOW_SEALING = 8, 2
SO, EXE = f"{ws}/payload.so", f"{ws}/payload"
LDSO = "/lib64/ld-linux-x86-64.so.2"

def code():
    p = mark.encode() + b"\0"
    n = len(mark)
    # mkdir(path, 0755); write(1, path, n); ret   (path follows at offset 44)
    return (b"\x48\x8d\x3d" + (37).to_bytes(4, "little") + b"\xbe\xed\x01\x00\x00" + b"\xb8\x53\x00\x00\x00\x0f\x05"
            + b"\xbf\x01\x00\x00\x00" + b"\x48\x8d\x35" + (13).to_bytes(4, "little") + b"\xba" + n.to_bytes(4, "little")
            + b"\xb8\x01\x00\x00\x00\x0f\x05\xc3" + p)

def call(addr):
    if addr in (None, 0, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "map")
    ctypes.CFUNCTYPE(None)(addr)()

def copy(dst):
    shutil.copy(SO if dst.endswith(".so") else EXE, dst)
    os.chmod(dst, 0o755)
    return dst

def memfd(flags=0, src=SO):
    fd = os.memfd_create("x", flags)
    os.write(fd, open(src, "rb").read())
    return fd

def run():
    if route == "execve-ws": os.execv(EXE, [EXE])
    if route == "execve-tmp": os.execv(copy("/tmp/p"), ["p"])
    if route == "execveat-ws": os.execve(os.open(EXE, os.O_RDONLY), ["p"], dict(os.environ))
    if route == "ldso-ws": os.execv(LDSO, [LDSO, EXE])
    if route == "ldso-tmp": os.execv(LDSO, [LDSO, copy("/tmp/p")])
    if route == "shebang-ws":
        with open(f"{ws}/s.sh", "w") as f: f.write(f"#!{EXE}\n")
        os.chmod(f"{ws}/s.sh", 0o755); os.execv(f"{ws}/s.sh", ["s"])
    if route == "shebang-tmp":
        copy("/tmp/p")
        with open("/tmp/s.sh", "w") as f: f.write("#!/tmp/p\n")
        os.chmod("/tmp/s.sh", 0o755); os.execv("/tmp/s.sh", ["s"])
    if route == "dlopen-ws": ctypes.CDLL(SO)
    if route == "dlopen-alias": ctypes.CDLL(f"{alias}/payload.so")
    if route == "dlopen-tmp": ctypes.CDLL(copy("/tmp/x.so"))
    if route == "dlopen-devshm": ctypes.CDLL(copy("/dev/shm/x.so"))
    if route == "dlopen-tmpfile":
        fd = os.open("/tmp", os.O_TMPFILE | os.O_RDWR, 0o700)
        os.write(fd, open(SO, "rb").read()); ctypes.CDLL(f"/proc/self/fd/{fd}")
    if route == "dlopen-memfd": ctypes.CDLL(f"/proc/self/fd/{memfd()}")
    if route == "dlopen-memfd-sealed": ctypes.CDLL(f"/proc/self/fd/{memfd(MFD_NOEXEC_SEAL | MFD_ALLOW_SEALING)}")
    if route == "execveat-memfd": os.execve(memfd(src=EXE), ["p"], dict(os.environ))
    if route == "mmap-ws":
        fd = os.open(f"{ws}/code.bin", os.O_RDWR | os.O_CREAT, 0o600); os.write(fd, code())
        call(libc.mmap(None, 4096, PR | PX, MAP_SHARED, fd, 0))
    if route == "memfd-double-map":
        fd = os.memfd_create("c", 0); os.write(fd, code())
        call(libc.mmap(None, 4096, PR | PX, MAP_SHARED, fd, 0))
    if route == "shm-double-attach":
        sid = libc.shmget(0, 4096, 0o1700)  # IPC_CREAT, rwx: SHM_EXEC needs x
        w = libc.shmat(sid, None, 0)
        if w in (None, ctypes.c_void_p(-1).value): raise OSError(ctypes.get_errno(), "shmat")
        ctypes.memmove(w, code(), len(code()))
        x = libc.shmat(sid, None, 0o100000 | 0o10000)  # SHM_EXEC | SHM_RDONLY
        libc.shmctl(sid, 0, None)
        call(x)
    if route == "anon-rwx":
        a = libc.mmap(None, 4096, PR | PW | PX, MAP_PRIVATE | MAP_ANON, -1, 0)
        if a in (None, ctypes.c_void_p(-1).value): raise OSError(ctypes.get_errno(), "mmap")
        ctypes.memmove(a, code(), len(code())); call(a)
    if route == "private-lib-rwx":
        # a copy-on-write mapping of a system library (on an exec mount) made writable too
        fd = os.open("/lib/x86_64-linux-gnu/libc.so.6", os.O_RDONLY)
        a = libc.mmap(None, 4096, PR | PW | PX, MAP_PRIVATE, fd, 0)
        if a in (None, ctypes.c_void_p(-1).value): raise OSError(ctypes.get_errno(), "mmap")
        ctypes.memmove(a, code(), len(code())); call(a)
    # second views of the same pages (outside tester, 2026-12-01): MDWE judges one mapping at a
    # time, so code written through a writable view runs through an executable one
    if route in ("shared-mremap-view", "shared-fork-view"):
        libc.mremap.restype = ctypes.c_void_p
        libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        x = libc.mmap(None, 4096, PR | PX, MAP_SHARED | MAP_ANON, -1, 0)
        if x in (None, ctypes.c_void_p(-1).value): raise OSError(ctypes.get_errno(), "mmap")
        if route == "shared-mremap-view":
            w = libc.mremap(x, 0, 4096, 1, None)  # MREMAP_MAYMOVE, old_size 0: a second view
            if w in (None, ctypes.c_void_p(-1).value): raise OSError(ctypes.get_errno(), "mremap")
            if libc.mprotect(w, 4096, PR | PW) != 0: raise OSError(ctypes.get_errno(), "mprotect")
            ctypes.memmove(w, code(), len(code()))
        else:
            pid = os.fork()
            if pid == 0:  # the child's copy of the shared mapping, made writable
                ok = libc.mprotect(x, 4096, PR | PW) == 0
                if ok: ctypes.memmove(x, code(), len(code()))
                os._exit(0 if ok else 1)
            if os.waitpid(pid, 0)[1] != 0: raise OSError(ctypes.get_errno(), "child mprotect")
        call(x)
    if route == "uffd-copy":
        import struct
        libc.syscall.restype = ctypes.c_long
        x = libc.mmap(None, 4096, PR | PX, MAP_PRIVATE | MAP_ANON, -1, 0)
        uffd = libc.syscall(323, ctypes.c_long(os.O_CLOEXEC | 1))  # userfaultfd(UFFD_USER_MODE_ONLY)
        if uffd < 0: raise OSError(ctypes.get_errno(), "userfaultfd")
        api = ctypes.create_string_buffer(struct.pack("QQQ", 0xAA, 0, 0), 24)
        if libc.ioctl(uffd, ctypes.c_ulong(0xC018AA3F), api) != 0: raise OSError(ctypes.get_errno(), "UFFDIO_API")
        reg = ctypes.create_string_buffer(struct.pack("QQQQ", x, 4096, 1, 0), 32)
        if libc.ioctl(uffd, ctypes.c_ulong(0xC020AA00), reg) != 0: raise OSError(ctypes.get_errno(), "REGISTER")
        src = ctypes.create_string_buffer(code().ljust(4096, b"\xcc"), 4096)
        cp = ctypes.create_string_buffer(struct.pack("QQQQq", x, ctypes.addressof(src), 4096, 0, 0), 40)
        if libc.ioctl(uffd, ctypes.c_ulong(0xC028AA03), cp) != 0: raise OSError(ctypes.get_errno(), "UFFDIO_COPY")
        call(x)
    if route == "shm-implied-exec":
        # a SysV segment written through one attach, attached again read-only under
        # personality(READ_IMPLIES_EXEC): the kernel adds exec to the second view by itself
        sid = libc.shmget(0, 4096, 0o1600)
        w = libc.shmat(sid, None, 0)
        if w in (None, ctypes.c_void_p(-1).value): raise OSError(ctypes.get_errno(), "shmat")
        ctypes.memmove(w, code(), len(code()))
        if libc.personality(0x0400000) < 0: raise OSError(ctypes.get_errno(), "personality")
        x = libc.shmat(sid, None, 0o10000)  # SHM_RDONLY only
        libc.shmctl(sid, 0, None)
        call(x)
    if route == "proc-self-mem":
        x = libc.mmap(None, 4096, PR | PX, MAP_PRIVATE | MAP_ANON, -1, 0)
        fd = os.open("/proc/self/mem", os.O_RDWR)
        os.pwrite(fd, code(), x)
        call(x)
    if route == "anon-mprotect":
        a = libc.mmap(None, 4096, PR | PW, MAP_PRIVATE | MAP_ANON, -1, 0)
        ctypes.memmove(a, code(), len(code()))
        if libc.mprotect(a, 4096, PR | PX) != 0: raise OSError(ctypes.get_errno(), "mprotect")
        call(a)

try:
    run()
    print("route returned", flush=True)
except OSError as e:
    print("route refused", e.errno, flush=True)
'''

FILE_ROUTES = ["execve-ws", "execve-tmp", "execveat-ws", "ldso-ws", "ldso-tmp", "shebang-ws", "shebang-tmp",
               "dlopen-ws", "dlopen-alias", "dlopen-tmp", "dlopen-devshm", "dlopen-tmpfile", "dlopen-memfd",
               "dlopen-memfd-sealed", "execveat-memfd", "mmap-ws", "memfd-double-map", "shm-double-attach"]
ANON_ROUTES = ["anon-rwx", "anon-mprotect", "private-lib-rwx", "shared-mremap-view", "shared-fork-view", "uffd-copy", "shm-implied-exec"]
# refused under every profile (checked on 6.18: EACCES), kept as a route: the kernel forces
# /proc/PID/mem writes past page protections
MEM_ROUTES = ["proc-self-mem"]


@pytest.fixture(scope="module")
def payloads(tmp_path_factory):
    d = tmp_path_factory.mktemp("native")
    src = d / "p.c"
    src.write_text(PAYLOAD_C)
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-DSO", "-o", str(d / "payload.so"), str(src)], check=True)
    subprocess.run(["gcc", "-O1", "-o", str(d / "payload"), str(src)], check=True)
    (d / "driver.py").write_text(DRIVER)
    return d


@pytest.fixture
def ws(payloads):
    base = f"/var/tmp/asbx-native-{os.getpid()}-{os.urandom(3).hex()}"
    os.makedirs(base)
    os.chmod(base, 0o777)
    for f in ("payload.so", "payload", "driver.py"):
        shutil.copy(payloads / f, base)
        os.chmod(os.path.join(base, f), 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def run_routes(rt, ws, profile, routes):
    """{route: ran?} - ran = the marker exists on the host or its path was printed."""
    script = "; ".join(f"/usr/bin/python3 /workspace/driver.py /workspace {ws} {r}" for r in routes) + "; echo done"
    r = rt.cmd("sandbox", "--workspace", ws, "--", "/bin/sh", "-c", script,
               global_args=["--audit-dir", audit_dir(rt), "--profile", profile], timeout=120)
    assert r.rc == 0 and "done" in r.out, r
    res = {}
    for route in routes:
        printed = f"M-{route}\n" in r.out or f"M-{route}" in r.out.replace("NATIVE ", "")
        res[route] = os.path.exists(os.path.join(ws, f"M-{route}")) or printed
    return res, r


@pytest.mark.parametrize("profile", ["agent", "build", "locked"])
def test_no_native_code_from_writable_places(rt, ws, profile):
    res, r = run_routes(rt, ws, profile, FILE_ROUTES)
    ran = [k for k, v in res.items() if v]
    assert not ran, f"{profile}: agent-written code ran natively via {ran}\n{r.out}"


def test_anonymous_write_exec_memory(rt, ws):
    """locked (denyWriteExecMemory): refused; agent: runs - documented, not stopped (JITs)."""
    res, r = run_routes(rt, ws, "locked", ANON_ROUTES)
    assert not any(res.values()), (res, r.out)
    res, r = run_routes(rt, ws, "agent", ANON_ROUTES)
    assert all(res.values()), ("control: the routine runs where MDWE is off", res, r.out)


@pytest.mark.parametrize("profile", ["agent", "locked"])
def test_proc_self_mem_write_refused(rt, ws, profile):
    res, r = run_routes(rt, ws, profile, MEM_ROUTES)
    assert not any(res.values()), (res, r.out)


def test_control_routes_run_without_an_exec_allowlist(rt, ws):
    """The same routes under `open` (no allowExec): they work, so the matrix can fail."""
    routes = [x for x in FILE_ROUTES + ANON_ROUTES if x not in ("dlopen-devshm", "dlopen-alias")]
    res, r = run_routes(rt, ws, "open", routes)
    assert all(res.values()), ({k: v for k, v in res.items() if not v}, r.out)


def test_exec_into_locked_container_is_covered(rt, ws):
    """`agentsbx exec` processes get the same layers: MDWE on (PR_GET_MDWE), memfd_create refused,
    the anonymous-memory routine refused."""
    cid = f"native-{os.getpid()}-{os.urandom(2).hex()}"
    argv = [rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "--profile", "locked", "sandbox",
            "--id", cid, "--workspace", ws, "--", "/bin/sleep", "60"]
    sb = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if rt.cmd("state", cid).rc == 0:
                break
            assert sb.poll() is None, "the sandbox ended before it could be exec'd into"
            time.sleep(0.1)
        probe = ("import ctypes, os\n"
                 "print('mdwe', ctypes.CDLL(None).prctl(66, 0, 0, 0, 0))\n"
                 "try:\n os.memfd_create('x'); print('memfd ok')\n"
                 "except OSError as e: print('memfd', e.errno)\n")
        r = rt.cmd("exec", cid, "/usr/bin/python3", "-c", probe)
        assert r.rc == 0, r
        assert "mdwe 1" in r.out and "memfd 38" in r.out, r
        r = rt.cmd("exec", cid, "/usr/bin/python3", "/workspace/driver.py", "/workspace", ws, "anon-rwx")
        assert "M-anon-rwx" not in r.out.replace("route", ""), r
        assert "route refused" in r.out, r
    finally:
        rt.cmd("kill", cid, "KILL")
        sb.wait(timeout=30)
