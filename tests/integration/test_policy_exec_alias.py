"""Agent policy, one directory writable in one place and executable in another (issue 13 §2,
docs/security.md "The same directory writable in one place and executable in another", fixed).

Under filesystem.allowExec the exec rule is decided on mounts, not on paths: an executable mount
on the workspace's device whose root shares a subtree with it is made noexec, or the place inside
it that shows the workspace is covered by a noexec bind. The attacker is the sandboxed command: it
writes its code (copies of a program and of a shared object whose constructor/main create a marker
directory in the workspace; a 44-byte x86-64 routine that does the same) and runs it through the
alias by execve, dlopen and mmap(PROT_EXEC). Judged from outside: a route ran when its marker
exists on the host or its path was printed. OCI bundles: the probe's own execve of the copy writes a
marker on the host; `probe mapx` reports what the kernel said to mmap(PROT_EXEC) through the alias.

The aliases are real mounts this test makes on the host (below /usr/local, under unique names) and
removes in `finally`, lazily if busy; the late-propagation case runs inside a mount namespace of
its own (unshare -m, propagation shared) so the host's mount table never sees it.
"""

import contextlib
import os
import platform
import shutil
import subprocess
import time

import pytest

from policyutil import PROBE, audit_dir, policy_bundle, prun, script, steps_out
from test_policy_native import PAYLOAD_C

pytestmark = [pytest.mark.agentsbx_only("agent policy")]

if platform.machine() != "x86_64":
    pytest.skip("the mmap route's routine is x86-64 machine code", allow_module_level=True)
if not shutil.which("gcc") or not os.path.exists("/usr/bin/python3"):
    pytest.skip("needs gcc and /usr/bin/python3 on the host", allow_module_level=True)
if not os.path.isdir("/usr/local"):
    pytest.skip("needs a /usr/local on the host to place the alias in", allow_module_level=True)

DRIVER = r'''
import ctypes, os, shutil, sys
ws, alias, route = sys.argv[1], sys.argv[2], sys.argv[3]
mark = f"{ws}/M-{route}"
os.environ["ASBX_MARK"] = mark
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]

def code():
    p = mark.encode() + b"\0"
    n = len(mark)
    # mkdir(path, 0755); write(1, path, n); ret   (path follows at offset 44)
    return (b"\x48\x8d\x3d" + (37).to_bytes(4, "little") + b"\xbe\xed\x01\x00\x00" + b"\xb8\x53\x00\x00\x00\x0f\x05"
            + b"\xbf\x01\x00\x00\x00" + b"\x48\x8d\x35" + (13).to_bytes(4, "little") + b"\xba" + n.to_bytes(4, "little")
            + b"\xb8\x01\x00\x00\x00\x0f\x05\xc3" + p)

def written(src):
    """the agent writes its code: a fresh file in the workspace"""
    dst = f"{ws}/w-{route}"
    if src is None:
        open(dst, "wb").write(code())
    else:
        shutil.copyfile(src, dst)
    os.chmod(dst, 0o755)
    return f"{alias}/w-{route}"

def run():
    if route == "execve":
        p = written(f"{ws}/payload"); os.execv(p, [p])
    if route == "ldso":
        os.execv("/lib64/ld-linux-x86-64.so.2", ["ld.so", written(f"{ws}/payload")])
    if route == "dlopen":
        ctypes.CDLL(written(f"{ws}/payload.so"))
    if route == "mmap":
        fd = os.open(written(None), os.O_RDONLY)
        a = libc.mmap(None, 4096, 1 | 4, 2, fd, 0)  # PROT_READ|PROT_EXEC, MAP_PRIVATE
        if a in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap")
        ctypes.CFUNCTYPE(None)(a)()

try:
    run()
    print("route returned", flush=True)
except OSError as e:
    print("route refused", e.errno, flush=True)
'''

ROUTES = ["execve", "ldso", "dlopen", "mmap"]


@pytest.fixture(scope="module")
def payloads(tmp_path_factory):
    d = tmp_path_factory.mktemp("alias")
    src = d / "p.c"
    src.write_text(PAYLOAD_C)
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-DSO", "-o", str(d / "payload.so"), str(src)], check=True)
    subprocess.run(["gcc", "-O1", "-o", str(d / "payload"), str(src)], check=True)
    (d / "driver.py").write_text(DRIVER)
    return d


def uniq(kind):
    return f"asbx-alias-{kind}-{os.getpid()}-{os.urandom(3).hex()}"


def fill(d, payloads):
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o777)
    for f in ("payload.so", "payload", "driver.py"):
        shutil.copy(payloads / f, d)
        os.chmod(os.path.join(d, f), 0o755)


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


@contextlib.contextmanager
def host_bind(src, dst):
    """mount --bind src dst on the host for the block; dst is created (and removed) here"""
    made = not os.path.exists(dst)
    os.makedirs(dst, exist_ok=True)
    try:
        subprocess.run(["mount", "--bind", src, dst], check=True, timeout=30)
        yield dst
    finally:
        for _ in range(20):
            if not mounted(dst):
                break
            if subprocess.run(["umount", dst], timeout=30).returncode != 0:
                subprocess.run(["umount", "-l", dst], timeout=30)
                time.sleep(0.1)
        if made and not mounted(dst):
            shutil.rmtree(dst, ignore_errors=True)


def run_routes(rt, ws, inner_ws, alias, profile="agent", routes=ROUTES):
    """{route: ran?} with the sandbox's workspace `ws`; the driver writes in inner_ws (a path in
    the container) and runs through alias (a path in the container)"""
    script_ = "; ".join(f"/usr/bin/python3 {inner_ws}/driver.py {inner_ws} {alias} {r}" for r in routes)
    script_ += "; /usr/bin/true && echo system-exec-ok; echo done"
    r = rt.cmd("sandbox", "--workspace", ws, "--", "/bin/sh", "-c", script_,
               global_args=["--audit-dir", audit_dir(rt), "--profile", profile], timeout=120)
    assert r.rc == 0 and "done" in r.out, r
    # the negative: /usr, an exec mount on the same device, keeps exec
    assert "system-exec-ok" in r.out, r
    return r


def refused_as_bind(rt, ws, shown):
    """quick mode refuses ws up front, naming the bind mount that shows it below /usr (the
    workspace check judges every host path of the directory, runtime/sandbox_wsalias.h), and no
    route ran: the mount rule stays the second line for what the check cannot see (OCI bundles)"""
    script_ = "; ".join(f"/usr/bin/python3 /workspace/driver.py /workspace {shown} {r}" for r in ROUTES)
    r = rt.cmd("sandbox", "--workspace", ws, "--", "/bin/sh", "-c", script_,
               global_args=["--audit-dir", audit_dir(rt), "--profile", "agent"], timeout=120)
    assert r.rc != 0 and f"is also `{shown}` (a bind mount)" in r.err, r
    return r


def ran(host_dir, out, routes=ROUTES):
    out = out.replace("NATIVE ", "")
    return [x for x in routes if os.path.exists(os.path.join(host_dir, f"M-{x}")) or f"/M-{x}" in out]


@pytest.mark.parametrize("owner", [0, 65534], ids=["root-owned", "user-owned"])
def test_host_bind_of_the_workspace_under_usr(rt, payloads, owner):
    """mount --bind WS /usr/local/X on the host: X is executable in the sandbox's /usr bind
    (a user-owned workspace: quick mode's user namespace, whose copied mounts are locked)"""
    ws = f"/var/tmp/{uniq('ws')}"
    fill(ws, payloads)
    os.chown(ws, owner, owner)
    try:
        with host_bind(ws, f"/usr/local/{uniq('bind')}") as alias:
            r = refused_as_bind(rt, ws, alias)
            assert not ran(ws, r.out), f"agent-written code ran through {alias}: {ran(ws, r.out)}\n{r.out}"
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_usr_directory_bound_elsewhere_as_workspace(rt, payloads):
    """a /usr/local directory bound to /var/tmp/W and W given as the workspace: the path check
    sees /var/tmp, mountinfo shows the workspace's root is below /usr"""
    src = f"/usr/local/{uniq('src')}"
    fill(src, payloads)
    ws = f"/var/tmp/{uniq('ws')}"
    try:
        with host_bind(src, ws):
            r = refused_as_bind(rt, ws, src)
            assert not ran(src, r.out), f"agent-written code ran through {src}: {ran(src, r.out)}\n{r.out}"
    finally:
        shutil.rmtree(src, ignore_errors=True)


def test_host_bind_of_a_workspace_subdirectory(rt, payloads):
    """a bind of a subdirectory of the workspace at an exec location"""
    ws = f"/var/tmp/{uniq('ws')}"
    os.makedirs(ws)
    os.chmod(ws, 0o777)
    fill(os.path.join(ws, "sub"), payloads)
    try:
        with host_bind(os.path.join(ws, "sub"), f"/usr/local/{uniq('sub')}") as alias:
            r = refused_as_bind(rt, ws, alias)
            assert not ran(os.path.join(ws, "sub"), r.out), f"ran through {alias}: {r.out}"
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_host_bind_made_after_start_does_not_propagate(rt, payloads, tmp_path):
    """the alias appears on the host while the sandbox runs: in a mount namespace of the test's
    own whose mounts are shared, the sandbox starts, then `mount --bind WS /usr/local/X` there;
    the sandbox's mounts are rprivate, so X never appears executable inside"""
    if not shutil.which("unshare"):
        pytest.skip("needs unshare(1) for a mount namespace of the test's own")
    ws = f"/var/tmp/{uniq('ws')}"
    fill(ws, payloads)
    alias = f"/usr/local/{uniq('late')}"
    os.makedirs(alias)
    argv = [rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "--profile", "agent", "sandbox",
            "--workspace", ws, "--", "/bin/sh", "-c",
            "touch /workspace/ready; i=0; while [ ! -e /workspace/go ] && [ $i -lt 600 ]; do sleep 0.05; "
            f"i=$((i+1)); done; /usr/bin/python3 /workspace/driver.py /workspace {alias} execve; echo done"]
    outer = ("set -e; \"$@\" & pid=$!; i=0; while [ ! -e \"$WS/ready\" ] && [ $i -lt 600 ]; do sleep 0.05; "
             "i=$((i+1)); done; mount --bind \"$WS\" \"$ALIAS\"; touch \"$WS/go\"; wait $pid")
    try:
        p = subprocess.run(["unshare", "-m", "--propagation", "shared", "sh", "-c", outer, "sh"] + argv,
                           capture_output=True, text=True, timeout=120, env=dict(os.environ, WS=ws, ALIAS=alias))
        assert "done" in p.stdout, (p.stdout, p.stderr)
        assert os.path.exists(os.path.join(ws, "go")), "the late bind was not made"
        assert not ran(ws, p.stdout, ["execve"]), f"a host bind made after start ran agent code: {p.stdout}"
    finally:
        if not mounted(alias):
            shutil.rmtree(alias, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


# ---- OCI bundles (annotation-free: the ceiling is --profile agent) ----

def bundle_steps(alias_dir):
    copy = f"{alias_dir}/p"
    return [
        "cp /usr/bin/probe /workspace/p",
        [copy, "write", "/workspace/M-execve", "ran\n"],  # the agent's copy, through the alias
        [PROBE, "mapx", copy],                              # mmap(PROT_EXEC) through the alias
        [PROBE, "mapx", PROBE],                             # control: /usr keeps exec
        [PROBE, "exit", "0"],
    ]


def run_bundle(rt, make_bundle, mounts, alias_dir, profile):
    b = policy_bundle(make_bundle)
    for dest, src, opts in mounts:
        b.add_mount(dest, "bind", src, opts)
    r, _ = prun(rt, b, script(bundle_steps(alias_dir)), profile=profile)
    assert r.rc == 0, r
    return steps_out(r, 5), r


@pytest.mark.parametrize("profile", ["agent", "build"])
def test_bundle_mounting_one_directory_twice(rt, make_bundle, profile):
    """rw at /workspace and ro at /usr/local/tool (under the allowExec path /usr)"""
    d = f"/var/tmp/{uniq('oci')}"
    os.makedirs(d)
    os.chmod(d, 0o777)
    try:
        steps, r = run_bundle(rt, make_bundle, [("/workspace", d, ["rbind", "rw"]),
                                                ("/usr/local/tool", d, ["rbind", "ro"])], "/usr/local/tool", profile)
        assert steps[0][0] == 0, r  # the agent could write its copy
        assert not os.path.exists(os.path.join(d, "M-execve")) and steps[1][0] != 0, r
        assert steps[2][1] and steps[2][1]["result"] == "EPERM", r
        assert steps[3][1] and steps[3][1]["result"] == "ok", r
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_bundle_writable_subdirectory_of_an_exec_mount(rt, make_bundle):
    """T ro at /usr/local/tool, T/plugins rw at /workspace: /usr/local/tool/plugins shows it"""
    t = f"/var/tmp/{uniq('oci')}"
    os.makedirs(os.path.join(t, "plugins"))
    os.chmod(os.path.join(t, "plugins"), 0o777)
    try:
        steps, r = run_bundle(rt, make_bundle, [("/usr/local/tool", t, ["rbind", "ro"]),
                                                ("/workspace", os.path.join(t, "plugins"), ["rbind", "rw"])],
                              "/usr/local/tool/plugins", "agent")
        assert steps[0][0] == 0, r
        assert not os.path.exists(os.path.join(t, "plugins", "M-execve")) and steps[1][0] != 0, r
        assert steps[2][1] and steps[2][1]["result"] == "EPERM", r
        assert steps[3][1] and steps[3][1]["result"] == "ok", r
    finally:
        shutil.rmtree(t, ignore_errors=True)


def test_explicit_exec_grant_on_a_writable_one_keeps_exec(rt, make_bundle):
    """Control: a path in both allowWrite and allowExec is the policy's own choice (docs/policy.md):
    the mount rule leaves /workspace executable although the same directory is also mounted at
    /usr/local/tool"""
    d = f"/var/tmp/{uniq('oci')}"
    os.makedirs(d)
    os.chmod(d, 0o777)
    pol = {"version": 1, "extends": "agent",
           "filesystem": {"allowExec": ["/usr", "/bin", "/workspace"]}}
    b = policy_bundle(make_bundle)
    b.add_mount("/workspace", "bind", d, ["rbind", "rw"])
    b.add_mount("/usr/local/tool", "bind", d, ["rbind", "ro"])
    steps = ["cp /usr/bin/probe /workspace/p",
             ["/workspace/p", "write", "/workspace/M-granted", "ran\n"],
             [PROBE, "exit", "0"]]
    try:
        r, _ = prun(rt, b, script(steps), profile=None, policy=pol)
        assert r.rc == 0, r
        res = steps_out(r, 3)
        assert res[0][0] == 0 and res[1][0] == 0 and res[2][0] == 0, r
        assert os.path.exists(os.path.join(d, "M-granted")), r
    finally:
        shutil.rmtree(d, ignore_errors=True)
