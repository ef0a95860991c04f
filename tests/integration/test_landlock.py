"""Landlock: no CLI surface of its own yet (the policy compiler will feed the C API in
src/linux/landlock_ruleset.h; allow/deny per right and per ABI is tested by tests/unit/test_landlock,
which enforces real rulesets in forked children). Here: `features` reports the running kernel's
Landlock ABI as the io.agentsbx.landlock.abi annotation, and the seccomp part is complete."""

import ctypes
import json

import pytest


def kernel_landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    return max(r, 0)


def test_features_landlock_abi(rt):
    if rt.is_runc:
        pytest.skip("agentsbx annotation")
    r = rt.cmd("features", root=False)
    assert r.ok, r
    f = json.loads(r.out)
    assert f["annotations"]["io.agentsbx.landlock.abi"] == str(kernel_landlock_abi())
    sc = f["linux"]["seccomp"]
    assert sc["enabled"] is True
    assert "SCMP_ACT_NOTIFY" in sc["actions"] and "SCMP_CMP_MASKED_EQ" in sc["operators"]
    assert "SCMP_ARCH_X86" in sc["archs"] and "SCMP_ARCH_X32" in sc["archs"]
    assert set(sc["supportedFlags"]) <= set(sc["knownFlags"])
    assert "SECCOMP_FILTER_FLAG_TSYNC" in sc["supportedFlags"]
