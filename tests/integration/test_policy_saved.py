"""Agent policy: what a container was created with is what every process in it gets (issue 15).

`exec` applies the effective policy saved in the state dir at create, never a policy resolved
again against the host config of today. The host config is the fixed path
/etc/agentsbx/config.json for exec (no engine passes --config to every verb), so these tests run
the runtime in a private mount namespace whose /etc is an overlay carrying that file: the host's
/etc is never touched.

And an allowWrite grant whose path does not exist in the container at create is reported at
create, on stderr and in the audit log (it stays read-only: grants create nothing).
"""

import json
import os
import shlex
import stat

import pytest

from policyutil import (PROBE, audit_records, gflags, last_json, policy_bundle, script,
                        steps_out)

pytestmark = pytest.mark.agentsbx_only("agent policy")


@pytest.fixture
def pb(make_bundle):
    return policy_bundle(make_bundle)


@pytest.fixture
def host_config(rt):
    """host_config(cfg): from now on every call of `rt` sees /etc/agentsbx/config.json = cfg
    (a wrapper runs the runtime in a private mount namespace with an overlay on /etc)."""
    real = rt.binary

    def install(cfg):
        d = os.path.join(rt.workdir, f"etc-{os.urandom(3).hex()}")
        for sub in ("upper/agentsbx", "work"):
            os.makedirs(os.path.join(d, sub))
        with open(os.path.join(d, "upper", "agentsbx", "config.json"), "w") as f:
            json.dump(cfg, f)
        w = os.path.join(d, "runtime")
        mnt = (f"mount -t overlay overlay -o lowerdir=/etc,upperdir={d}/upper,workdir={d}/work /etc")
        with open(w, "w") as f:
            f.write("#!/bin/sh\nexec unshare -m --propagation private sh -c "
                    + shlex.quote(mnt + ' && exec "$0" "$@"') + f" {shlex.quote(real)} \"$@\"\n")
        os.chmod(w, 0o755)
        rt.binary = w

    yield install
    rt.binary = real


def create_sleeping(rt, b, **kw):
    b.args(PROBE, "sleep", "600")
    b.save()
    cid = rt.new_id()
    rt.created.append(cid)
    r = rt.cmd("create", "--bundle", b.path, cid, stdout_path=b.stdout_path,
               global_args=gflags(rt, **kw))
    assert r.rc == 0, r
    assert rt.start(cid).rc == 0
    return r, cid


def test_exec_uses_saved_policy_not_host_default(rt, pb, host_config):
    """Created under --profile build (the flag beats the host's defaultProfile agent): exec must
    not re-check the saved policy against `agent` (it widens agent's allowedDomains, so the
    re-check refuses every exec)."""
    host_config({"defaultProfile": "agent"})
    _, cid = create_sleeping(rt, pb, profile="build")
    r = rt.cmd("exec", cid, PROBE, "write", "/workspace/from-exec")
    assert r.rc == 0, r
    assert last_json(r)["result"] == "ok", r
    assert os.path.exists(os.path.join(pb.rootfs, "workspace", "from-exec"))


def test_exec_not_clamped_narrower_than_init(rt, pb, host_config):
    """onWiden clamp + defaultProfile agent on the host, container created with a --policy that
    also grants /var/tmp: the exec'd process may write /var/tmp like the init (a clamp against
    agent at exec would drop the grant from its Landlock ruleset)."""
    os.makedirs(os.path.join(pb.rootfs, "var", "tmp"), exist_ok=True)
    os.chmod(os.path.join(pb.rootfs, "var", "tmp"), 0o1777)
    host_config({"defaultProfile": "agent", "onWiden": "clamp"})
    pol = {"version": 1, "extends": "agent",
           "filesystem": {"allowWrite": ["/workspace", "/tmp", "/var/tmp"]}}
    _, cid = create_sleeping(rt, pb, policy=pol)
    r = rt.cmd("exec", cid, PROBE, "write", "/var/tmp/from-exec")
    assert r.rc == 0 and last_json(r)["result"] == "ok", r
    assert os.path.exists(os.path.join(pb.rootfs, "var", "tmp", "from-exec"))
    # control: outside every grant the exec'd process is still confined
    r = rt.cmd("exec", cid, PROBE, "write", "/etc/from-exec")
    assert r.rc != 0 and last_json(r)["result"] in ("EROFS", "EACCES"), r


def test_exec_refused_when_saved_policy_unreadable(rt, pb):
    """A policy.json that exists but cannot be read must not let exec run unconfined."""
    _, cid = create_sleeping(rt, pb, profile="agent")
    p = os.path.join(rt.root, cid, "policy.json")
    assert os.path.exists(p)
    os.rename(p, p + ".away")
    os.mkdir(p)  # read fails with EISDIR, not ENOENT
    try:
        r = rt.cmd("exec", cid, PROBE, "exit", "0")
        assert r.rc != 0 and "saved policy" in r.err, r
    finally:
        os.rmdir(p)
        os.rename(p + ".away", p)


def test_missing_allow_write_reported_at_create(rt, pb):
    """allowWrite /tmp/x/** under agent: /tmp/x does not exist, so nothing is bound there and
    the grant creates nothing. create says so on stderr and the audit log's policy record lists
    it; the container still starts, and /tmp/x is indeed not creatable from inside."""
    pol = {"version": 1, "extends": "agent",
           "filesystem": {"allowWrite": ["/workspace", "/tmp/x/**"]}}
    os.makedirs(os.path.join(pb.rootfs, "tmp"), exist_ok=True)
    assert not os.path.exists(os.path.join(pb.rootfs, "tmp", "x"))
    r, cid = create_sleeping(rt, pb, policy=pol)
    assert "/tmp/x" in r.err and "does not exist" in r.err, r
    pol_recs = [x for x in audit_records(rt, cid) if x["event"] == "policy"]
    assert pol_recs and pol_recs[-1].get("missingWrites") == ["/tmp/x"], pol_recs
    r = rt.cmd("exec", cid, PROBE, "mkdir", "/tmp/x")
    assert r.rc != 0 and last_json(r)["result"] in ("EROFS", "EACCES"), r
    # a grant whose path exists is not reported
    pol["filesystem"]["allowWrite"] = ["/workspace"]
    r, cid = create_sleeping(rt, pb, policy=pol)
    assert "does not exist" not in r.err, r
    pol_recs = [x for x in audit_records(rt, cid) if x["event"] == "policy"]
    assert pol_recs and "missingWrites" not in pol_recs[-1], pol_recs
