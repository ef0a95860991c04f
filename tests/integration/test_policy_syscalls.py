"""Agent policy, syscall groups (POLICY.md §2 syscalls.deny, §3; issue 6).

Each group is shown on its own: a policy denying only that group, on a bundle that grants the
capabilities the call would otherwise need, must refuse each of the group's attempts with the
group's errno -- while the same bundle without a policy (the control run) gets past the filter
(success, or the kernel's own answer such as EINVAL for a malformed bpf command). Then every
escape attempt of the issue must fail under `--profile agent`.
"""

import json
import os
import subprocess

import pytest

from policyutil import PROBE, policy_bundle, prun, script, steps_out

pytestmark = pytest.mark.agentsbx_only("agent policy")


def _table_groups():
    """The groups of the runtime's own table (`agentsbx policy groups`), none for runc."""
    b = os.environ.get("AGENTSBX_RUNTIME") or os.path.join(os.path.dirname(__file__), "..", "..", "agentsbx")
    try:
        r = subprocess.run([b, "policy", "groups"], capture_output=True, text=True, timeout=30)
    except OSError:
        return []
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()] if r.returncode == 0 else []


TABLE_GROUPS = _table_groups()


@pytest.fixture(scope="module")
def attempts(probe_binary):
    """group -> [(attempt, errno the policy answers, answers without a policy)], in the probe's
    order (`probe escape list`, tests/probe/probe_escape.c)."""
    r = subprocess.run([probe_binary, "escape", "list"], capture_output=True, text=True, check=True)
    groups = {}
    for a in json.loads(r.stdout)["attempts"]:
        groups.setdefault(a["group"], []).append((a["name"], a["refused"], tuple(a["control"])))
    return groups


@pytest.fixture(scope="module")
def GROUPS(attempts):
    return {g: [(n, e) for n, e, _ in v] for g, v in attempts.items()}


@pytest.fixture(scope="module")
def ALL(GROUPS):
    return [a for g in GROUPS.values() for a, _ in g]

EXTRA_CAPS = ["CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_NET_RAW", "CAP_BPF", "CAP_PERFMON",
              "CAP_SYS_MODULE"]


def attempt_step(name):
    if name == "ptrace_sibling":
        return (f"{PROBE} sleep 30 & S=$!; SIBLING=$S {PROBE} escape ptrace_sibling; "
                f"rc=$?; kill -9 $S; wait $S; (exit $rc)")
    return [PROBE, "escape", name]


@pytest.fixture
def capbundle(make_bundle):
    b = policy_bundle(make_bundle)
    for s in ("bounding", "effective", "permitted"):
        caps = b.process["capabilities"].setdefault(s, [])
        caps += [c for c in EXTRA_CAPS if c not in caps]
    return b


def run_attempts(rt, b, names, **kw):
    r, _ = prun(rt, b, script([attempt_step(n) for n in names]), **kw)
    assert r.rc == 0, r
    out = steps_out(r, len(names))
    return {n: (j["result"] if j else f"no output (rc {rc})") for n, (rc, j) in zip(names, out)}


@pytest.fixture
def control(rt, capbundle, attempts, ALL):
    """Without any policy the attempts get past seccomp (the refusals below are the policy's)."""
    res = run_attempts(rt, capbundle, ALL, profile=None)
    for n, _, want in (a for v in attempts.values() for a in v):
        assert res[n] in want, f"control: {n} -> {res[n]} without a policy"
    return res


def test_every_group_has_an_attempt(rt, attempts):
    """Each group of the runtime's table has a probe attempt, and each attempt names a group."""
    assert TABLE_GROUPS, "agentsbx policy groups listed nothing"
    assert sorted(attempts) == sorted(TABLE_GROUPS), \
        f"probe escape list covers {sorted(attempts)}, agentsbx policy groups lists {sorted(TABLE_GROUPS)}"


@pytest.mark.parametrize("group", sorted(TABLE_GROUPS))
def test_group_refused_with_its_errno(rt, capbundle, control, group, GROUPS):
    assert group in GROUPS, f"no probe attempt for group {group} (tests/probe/probe_escape.c)"
    pol = {"version": 1, "syscalls": {"deny": [group]}}
    names = [a for a, _ in GROUPS[group]]
    res = run_attempts(rt, capbundle, names, profile=None, policy=pol)
    for name, errno in GROUPS[group]:
        assert res[name] == errno, f"{group}/{name}: {res[name]} (control {control[name]})"
    # the other groups are untouched by this one (a group is exactly its members); io_uring and a
    # new user namespace are refused under every policy (IORING_OP_OPENAT takes a file mode, a
    # nested user namespace has CAP_SETFCAP again: runtime/policy_hostfiles.c)
    others = [a for g, v in GROUPS.items() if g not in (group, "io_uring", "userns") for a, _ in v][:4]
    res2 = run_attempts(rt, capbundle, others, profile=None, policy=pol)
    for n in others:
        assert res2[n] == control[n], f"deny [{group}] also changed {n}: {res2[n]}"


def agent_groups():
    """The groups `--profile agent` denies, as its plan says (contrib/profiles/agent.json)."""
    b = os.environ.get("AGENTSBX_RUNTIME") or os.path.join(os.path.dirname(__file__), "..", "..", "agentsbx")
    r = subprocess.run([b, "policy", "explain", "--profile", "agent", "--json"], capture_output=True,
                       text=True, check=True, timeout=30)
    return json.loads(r.stdout)["denyGroups"]


def test_agent_profile_refuses_every_escape(rt, capbundle, GROUPS):
    """The escapes of every group the agent profile denies (today: all of them), under --profile
    agent, on a bundle asking for powerful caps."""
    denied = agent_groups()
    assert denied, "agent denies no syscall group"
    names = [a for g in denied for a, _ in GROUPS.get(g, [])]
    res = run_attempts(rt, capbundle, names, profile="agent")
    worked = {n: v for n, v in res.items() if v == "ok"}
    assert not worked, f"escapes that worked under --profile agent: {worked}"
    for group in denied:
        assert group in GROUPS, f"no probe attempt for group {group}"
        for name, errno in GROUPS[group]:
            assert res[name] == errno, f"{group}/{name} under agent: {res[name]}"


def test_unshare_U_and_remount_refused_under_agent(rt, capbundle):
    steps = ["unshare -U true",
             "unshare -m true",
             "mount -o remount,rw /",
             "mount -o remount,rw /workspace",
             "mount -o remount,exec /tmp",
             [PROBE, "write", "/etc/remounted"]]
    r, _ = prun(rt, capbundle, script(steps), profile="agent")
    assert r.rc == 0, r
    out = steps_out(r, len(steps))
    for i in range(5):
        assert out[i][0] != 0, (steps[i], r)
    assert out[5][1]["result"] in ("EROFS", "EACCES"), out[5]
