"""Agent policy, exec allowlist vs memfd exec (POLICY.md §2 filesystem.allowExec).

A binary the agent wrote is refused by noexec on the writable mounts and Landlock EXECUTE, but a
memfd lives on no mount the allowlist sees: memfd_create + write + execve("/proc/self/fd/N")
would run it. With allowExec set the init writes vm.memfd_noexec=2 in the container's new pid
namespace (runtime/policy_memfd.c policy_apply_memfd_noexec): MFD_EXEC is refused and every
memfd is noexec-sealed; since issue 13 §2 memfd_create itself is refused too (ENOSYS, the
allowExec seccomp rules), because a sealed memfd can still be mmapped PROT_EXEC. Controls:
without a policy the same exec succeeds, and the host's
sysctl is unchanged.
"""

import os
import shutil
import subprocess

import pytest

from policyutil import pcreate, policy_bundle
from policyutil import sandbox_run as sandbox

pytestmark = pytest.mark.agentsbx_only("agent policy")

SYSCTL = "/proc/sys/vm/memfd_noexec"

if not os.path.exists(SYSCTL):
    pytest.skip("kernel < 6.3: no vm.memfd_noexec", allow_module_level=True)

# the tester's reproducer, plus MFD_EXEC (0x10; os.MFD_EXEC is missing in Python 3.11)
PY = r"""
import os, shutil, sys
try:
    os.close(os.memfd_create("e", 0x10)); print("mfd_exec ok", flush=True)
except OSError as e:
    print("mfd_exec", e.errno, flush=True)
mybin = sys.argv[1] + "/mybin"
shutil.copy("/bin/true", mybin)
try:
    fd = os.memfd_create("x")
except OSError as e:
    print("memfd", e.errno, flush=True); sys.exit(0)
os.write(fd, open(mybin, "rb").read())
pid = os.fork()
if pid == 0:
    try:
        os.execv(f"/proc/self/fd/{fd}", ["x"])
    except OSError as e:
        print("exec", e.errno, flush=True); os._exit(3)
print("exec status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""

# the same steps as a static binary, for a busybox rootfs without a policy (the control)
C_SRC = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>
int main (void)
{
  struct stat st;
  int fd = memfd_create ("e", 0x10U);
  printf ("mfd_exec %s\n", fd < 0 ? "refused" : "ok");
  fd = memfd_create ("x", 0);
  int src = open ("/bin/busybox", O_RDONLY);
  if (fd < 0 || src < 0 || fstat (src, &st) < 0 || sendfile (fd, src, NULL, st.st_size) != st.st_size)
    return 2;
  char path[64], *av[] = { (char *) "true", NULL }, *ev[] = { NULL };
  snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
  printf ("exec start\n");
  fflush (stdout);
  execve (path, av, ev);
  printf ("exec %d\n", errno);
  return 1;
}
"""


def host_value():
    with open(SYSCTL) as f:
        return f.read().strip()


@pytest.mark.parametrize("profile,writable", [("agent", "/workspace"), ("locked", "/tmp")])
def test_memfd_exec_refused_in_sandbox(rt, profile, writable):
    ws = os.path.join(rt.workdir, f"ws-memfd-{profile}")
    os.makedirs(ws)
    os.chmod(ws, 0o777)
    before = host_value()
    r = sandbox(rt, "--profile", profile, "--workspace", ws, "--", "/usr/bin/python3", "-c", PY, writable)
    assert r.rc == 0, r
    lines = r.out.split("\n")
    # since issue 13 §2 allowExec also refuses memfd_create itself (ENOSYS, seccomp): a
    # noexec-sealed memfd can still be mapped PROT_EXEC (test_policy_native.py)
    assert "mfd_exec 38" in lines and "memfd 38" in lines, r
    assert "exec status" not in r.out, r
    assert host_value() == before


def test_memfd_exec_allowed_without_policy(rt, make_bundle, tmp_path):
    """Control: the same exec runs in a plain OCI container (so the test above can fail)."""
    if not shutil.which("gcc"):
        pytest.skip("gcc needed for the static helper")
    b = make_bundle(args=("/mfdx",))
    src = tmp_path / "mfdx.c"
    src.write_text(C_SRC)
    cc = subprocess.run(["gcc", "-static", "-O", "-o", os.path.join(b.rootfs, "mfdx"), str(src)],
                        capture_output=True, text=True)
    if cc.returncode != 0:
        pytest.skip(f"no static libc: {cc.stderr[-200:]}")
    before = host_value()
    r, _ = rt.run(b)
    assert r.rc == 0, r
    assert r.out.split("\n")[:2] == ["mfd_exec ok", "exec start"], r
    assert host_value() == before


def test_policy_without_new_pid_namespace_fails_create(rt, make_bundle):
    """Fail closed: in the host's pid namespace the sysctl cannot be set for the container alone,
    and the agent could signal the host's processes of its uid: any policy refuses it up front."""
    pb = policy_bundle(make_bundle)
    pb.linux["namespaces"] = [n for n in pb.linux["namespaces"] if n["type"] != "pid"]
    pb.save()
    before = host_value()
    r, _ = pcreate(rt, pb)
    assert r.rc != 0, r
    assert "linux.namespaces has no `pid` entry" in r.err and "pid namespace" in r.err, r
    assert host_value() == before


def test_policy_joining_the_hosts_pid_namespace_fails_create(rt, make_bundle):
    """A pid namespace named by path that is the runtime's own: the agent could see and signal
    the host's processes of its uid (outside tester, by path after the missing-entry check)."""
    pb = policy_bundle(make_bundle)
    pb.linux["namespaces"] = [n for n in pb.linux["namespaces"] if n["type"] != "pid"] + [
        {"type": "pid", "path": f"/proc/{os.getpid()}/ns/pid"}]  # the test's: the runtime's own
    pb.save()
    r, _ = pcreate(rt, pb)
    assert r.rc != 0 and f"joins the pid namespace `/proc/{os.getpid()}/ns/pid`" in r.err, r
