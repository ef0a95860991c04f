"""Kernel attack surface from inside: io_uring, ptrace, user namespaces, keyrings, mount; and
32-bit (int 0x80) / x32 entry points around a native-only seccomp profile.

Two halves for the policy classes:
- under `agentsbx --profile agent` (the agent policy profile): runs when the runtime accepts the
  flag, else skips with the reason;
- under an equivalent plain OCI config (a seccomp profile denying the same syscalls and the
  default capability set, no CAP_SYS_ADMIN / CAP_SYS_PTRACE): must pass now, with any runtime.
Each attempt passes only when the probe reports it refused and the host is unchanged.
"""

import os
import subprocess

import pytest

from conftest import json_lines, probe_json, profile_agent_reason

ATTEMPTS = ["io_uring", "ptrace", "userns", "keyctl", "add_key", "mount", "fsopen"]

DENY = ["io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace", "process_vm_readv",
        "process_vm_writev", "unshare", "setns", "keyctl", "add_key", "request_key", "mount",
        "umount2", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount",
        "mount_setattr", "pivot_root", "bpf", "perf_event_open", "userfaultfd", "kexec_load",
        "init_module", "finit_module", "delete_module"]


def agent_equivalent_seccomp():
    """The refusals the `agent` profile promises, as a plain OCI seccomp profile: default allow,
    the listed syscalls EPERM, clone/clone3 with a new user namespace refused."""
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": [
            {"names": DENY, "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
            {"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
             "args": [{"index": 0, "value": 0x10000000, "valueTwo": 0x10000000,
                       "op": "SCMP_CMP_MASKED_EQ"}]},
            {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
        ],
    }


@pytest.mark.parametrize("attempt", ATTEMPTS)
def test_refused_under_oci_equivalent(rt, bundle, attempt, host_guard):
    bundle.linux["seccomp"] = agent_equivalent_seccomp()
    bundle.args("/probe", "escape", attempt)
    r, _ = rt.run(bundle)
    res = probe_json(r)
    assert res["result"] != "ok", f"{attempt} worked inside the container: {res}"
    assert r.rc == 1, r


@pytest.mark.parametrize("attempt", ATTEMPTS)
def test_control_without_filter(rt, bundle, attempt):
    """Control: without the filter, the attempts that need no capability work here, so the
    refusals above are the filter's doing (mount/fsopen need CAP_SYS_ADMIN: refused anyway)."""
    bundle.args("/probe", "escape", attempt)
    r, _ = rt.run(bundle)
    res = probe_json(r)
    if attempt in ("mount", "fsopen"):
        assert res["result"] == "EPERM", res
    else:
        assert res["result"] == "ok", f"control: {attempt} refused even without a filter: {res}"


@pytest.mark.agent_profile
@pytest.mark.parametrize("attempt", ATTEMPTS)
def test_refused_under_agent_profile(rt, bundle, attempt, host_guard):
    reason = profile_agent_reason(rt)
    if reason:
        pytest.skip(reason)
    bundle.args("/probe", "escape", attempt)
    bundle.save()
    cid = rt.new_id()
    rt.created.append(cid)
    r = rt.cmd("--profile", "agent", "run", "--bundle", bundle.path, cid)
    res = [x for x in json_lines(r.out) if x.get("op") == "escape"]
    assert r.rc != 0, r
    assert not res or res[-1]["result"] != "ok", f"{attempt} worked under --profile agent: {res}"


# ---- 32-bit and x32 entry points ---------------------------------------------------------

def _host_probe(probe, *args):
    return subprocess.run([probe, *args], capture_output=True, text=True, timeout=30)


NATIVE_ONLY = {
    "defaultAction": "SCMP_ACT_ALLOW",
    "architectures": ["SCMP_ARCH_X86_64"],
    "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}],
}


def test_int80_under_native_only_profile(rt, bundle, probe_binary, tmp_path):
    """i386 mkdir (nr 39) through int 0x80 under a profile that lists only x86_64: the filter
    must not let the foreign arch through (libseccomp kills a non-listed arch)."""
    # control on the host: is IA32 emulation on here?
    ctl = _host_probe(probe_binary, "int80", "20")  # getpid
    ctl_res = json_lines(ctl.stdout)[-1]
    if ctl_res["result"] == "signal":
        pytest.skip("this kernel has no IA32 emulation: int 0x80 cannot be exercised here")
    bundle.linux["seccomp"] = NATIVE_ONLY
    # the path argument is read by the kernel as a 32-bit pointer: use a low static address
    # is impossible from a 64-bit probe, so pass NULL-ish garbage: EFAULT means "allowed"
    bundle.args("/bin/sh", "-c", "/probe int80 39 0; /probe stat /pwned32; exit 0")
    r, _ = rt.run(bundle)
    res = [x for x in json_lines(r.out) if x.get("op") == "int80"][-1]
    assert res["result"] == "signal" and res["signal"] == 31 or res["result"] in ("EPERM", "ENOSYS"), \
        f"int 0x80 mkdir reached the kernel under a native-only profile: {res}"


def test_x32_under_native_only_profile(rt, bundle, probe_binary):
    """x32 mkdir (0x40000000 | 83) under a native-only profile."""
    ctl = _host_probe(probe_binary, "syscall", str(0x40000000 | 39))  # x32 getpid
    ctl_res = json_lines(ctl.stdout)[-1]
    if ctl_res["result"] == "ENOSYS":
        pytest.skip("this kernel has no x32 ABI (x32 getpid is ENOSYS on the host): the x32 "
                    "entry point cannot be exercised here")
    bundle.linux["seccomp"] = NATIVE_ONLY
    bundle.args("/bin/sh", "-c", f"/probe syscall {0x40000000 | 83} /pwnedx32 493; exit 0")
    r, _ = rt.run(bundle)
    assert not os.path.exists(os.path.join(bundle.rootfs, "pwnedx32"))
