"""Agent policy, filesystem (POLICY.md §2 filesystem, §3 mount + Landlock layers; issue 6).

Every rule is asserted from inside by the probe: writes inside and outside the grants, the
credential masks, symlinks and `..` pointing out of the workspace, hard links and renames, and the
exec allowlist (noexec on writable mounts AND Landlock EXECUTE, each shown on its own). A test
passes only when the attempt was blocked (and the host file is unchanged).
"""

import os

import pytest

from conftest import mountinfo_by_point
from policyutil import (PROBE, SECRET, last_json, policy_bundle, prun, script, steps_out)

pytestmark = pytest.mark.agentsbx_only("agent policy")


@pytest.fixture
def pb(make_bundle):
    return policy_bundle(make_bundle)


def run_steps(rt, b, steps, **kw):
    r, cid = prun(rt, b, script(steps), **kw)
    assert r.rc == 0, r
    return steps_out(r, len(steps))


def test_write_grants_and_read_only_rest(rt, pb):
    res = run_steps(rt, pb, [
        [PROBE, "write", "/workspace/ok"],
        [PROBE, "write", "/tmp/ok"],
        [PROBE, "write", "/etc/passwd"],
        [PROBE, "write", "/new-at-root"],
        [PROBE, "write", "/usr/bin/probe"],
    ])
    assert [j["result"] for _, j in res[:2]] == ["ok", "ok"]
    for rc, j in res[2:]:
        assert rc == 1 and j["result"] in ("EROFS", "EACCES"), j
    assert os.path.exists(os.path.join(pb.rootfs, "workspace", "ok"))
    assert not os.path.exists(os.path.join(pb.rootfs, "new-at-root"))
    with open(os.path.join(pb.rootfs, "etc", "passwd")) as f:
        assert "root:x:0:0" in f.read()


def test_credentials_hidden(rt, pb):
    res = run_steps(rt, pb, [
        [PROBE, "read", "/root/.ssh/id_rsa"],
        [PROBE, "read", "/home/user/.aws/credentials"],
        [PROBE, "read", "/etc/shadow"],
        [PROBE, "write", "/etc/shadow"],
        [PROBE, "read", "/etc/passwd"],
    ])
    for rc, j in res[:3]:
        # a masked directory is an empty tmpfs (ENOENT), a masked file reads empty
        assert j["result"] == "ENOENT" or (j["result"] == "ok" and j["data"] == ""), j
        assert SECRET.strip() not in str(j)
    # a masked file is the null device: a write goes nowhere, the file is untouched
    with open(os.path.join(pb.rootfs, "etc", "shadow")) as f:
        assert f.read() == SECRET
    assert res[4][1]["result"] == "ok" and "root:x:0:0" in res[4][1]["data"]


def test_symlink_and_dotdot_out_of_workspace(rt, pb):
    # links planted in the workspace before the run (as a hostile repo would ship them) and
    # made from inside
    ws = os.path.join(pb.rootfs, "workspace")
    os.symlink("/etc", os.path.join(ws, "etc-link"))
    os.symlink("/root/.ssh/id_rsa", os.path.join(ws, "key-link"))
    os.symlink("../../../../etc/shadow", os.path.join(ws, "shadow-link"))
    res = run_steps(rt, pb, [
        [PROBE, "write", "/workspace/etc-link/evil"],
        [PROBE, "write", "/workspace/../etc/evil"],
        [PROBE, "write", "/workspace/../../../workspace/../etc/evil"],
        [PROBE, "read", "/workspace/key-link"],
        [PROBE, "read", "/workspace/shadow-link"],
        [PROBE, "read", "/workspace/../root/.ssh/id_rsa"],
        [PROBE, "symlink", "/etc/passwd", "/workspace/pw-link"],
        [PROBE, "write", "/workspace/pw-link"],
        [PROBE, "symlink", "/", "/tmp/root-link"],
        [PROBE, "write", "/tmp/root-link/etc/evil"],
    ])
    for i in (0, 1, 2, 7, 9):
        assert res[i][1]["result"] in ("EROFS", "EACCES"), (i, res[i])
    for i in (3, 4, 5):
        j = res[i][1]
        assert SECRET.strip() not in str(j), (i, j)
    assert res[6][1]["result"] == "ok"  # making the link is fine; following it to write is not
    assert not os.path.exists(os.path.join(pb.rootfs, "etc", "evil"))
    with open(os.path.join(pb.rootfs, "etc", "passwd")) as f:
        assert "probe" not in f.read()


def test_hard_links_and_renames(rt, pb):
    res = run_steps(rt, pb, [
        [PROBE, "link", "/etc/passwd", "/workspace/pw"],       # another mount: EXDEV
        [PROBE, "link", "/etc/shadow", "/workspace/sh"],
        [PROBE, "link", "/root/.ssh/id_rsa", "/workspace/k"],
        [PROBE, "rename", "/etc/passwd", "/workspace/pw"],
        [PROBE, "write", "/workspace/mine"],
        [PROBE, "rename", "/workspace/mine", "/etc/mine"],
        [PROBE, "rename", "/workspace/mine", "/tmp/mine"],       # another mount: EXDEV
        [PROBE, "rename", "/workspace", "/workspace2"],
    ])
    for i in (0, 1, 2, 3, 5, 6, 7):
        assert res[i][1]["result"] != "ok", (i, res[i])
    assert not os.path.exists(os.path.join(pb.rootfs, "etc", "mine"))
    assert os.path.exists(os.path.join(pb.rootfs, "etc", "passwd"))
    assert not os.path.exists(os.path.join(pb.rootfs, "workspace", "sh"))


def test_deny_write_inside_workspace_survives_renames(rt, pb):
    """denyWrite ?/workspace/.git/hooks: the hooks dir is read-only, and neither it nor its
    parent can be moved away to plant a fresh .git/hooks the host's git would run later."""
    hooks = os.path.join(pb.rootfs, "workspace", ".git", "hooks")
    os.makedirs(hooks)
    with open(os.path.join(pb.rootfs, "workspace", ".git", "config"), "w") as f:
        f.write("[core]\n")
    res = run_steps(rt, pb, [
        [PROBE, "write", "/workspace/.git/hooks/pre-commit"],
        [PROBE, "write", "/workspace/.git/config"],
        [PROBE, "write", "/workspace/.git/HEAD"],                 # the rest of .git is writable
        [PROBE, "rename", "/workspace/.git/hooks", "/workspace/.git/h2"],
        [PROBE, "rename", "/workspace/.git", "/workspace/g2"],
        [PROBE, "rename", "/workspace/.git/config", "/workspace/.git/c2"],
        [PROBE, "link", "/workspace/.git/config", "/workspace/c3"],
    ])
    assert res[0][1]["result"] in ("EROFS", "EACCES"), res[0]
    assert res[1][1]["result"] in ("EROFS", "EACCES"), res[1]
    assert res[2][1]["result"] == "ok", res[2]
    for i in (3, 4, 5, 6):
        assert res[i][1]["result"] != "ok", (i, res[i])
    assert os.path.isdir(hooks) and not os.listdir(hooks)
    assert not os.path.exists(os.path.join(pb.rootfs, "workspace", "g2"))


def test_exec_allowlist_landlock_and_noexec(rt, pb):
    """A binary or script written to the workspace or /tmp cannot be executed (noexec on the
    writable mounts); /probe on the read-only root mount cannot either (Landlock EXECUTE only on
    allowExec, and since issue 13 §2 every mount outside allowExec is noexec too, so that
    mmap(PROT_EXEC) is refused as well: tests/integration/test_policy_native.py)."""
    with open(os.path.join(pb.rootfs, "workspace", "s.sh"), "w") as f:
        f.write("#!/bin/sh\necho ran\n")
    os.chmod(os.path.join(pb.rootfs, "workspace", "s.sh"), 0o755)
    res = run_steps(rt, pb, [
        "cp /usr/bin/probe /workspace/p && chmod 755 /workspace/p",
        [PROBE, "exec", "/workspace/p", "exit", "0"],
        [PROBE, "exec", "/workspace/s.sh"],
        "cp /usr/bin/probe /tmp/p && chmod 755 /tmp/p",
        [PROBE, "exec", "/tmp/p", "exit", "0"],
        [PROBE, "exec", "/probe", "exit", "0"],          # root mount: noexec and Landlock
        [PROBE, "exec", "/usr/bin/probe", "exit", "0"],  # control: allowed path
        [PROBE, "report"],
    ])
    assert res[0][0] == 0
    for i in (1, 2, 4, 5):
        assert res[i][1] and res[i][1]["result"] == "EACCES", (i, res[i])
    assert res[6] == (0, None)
    mi = mountinfo_by_point(res[7][1])
    for mp in ("/workspace", "/tmp"):
        assert "noexec" in mi[mp]["options"] or "noexec" in str(mi[mp]), mi[mp]
    assert "noexec" in mi["/"]["options"], mi["/"]         # outside allowExec
    assert "noexec" not in mi["/usr"]["options"], mi["/usr"]  # the exec bind of allowExec /usr
    assert "ro" in mi["/usr"]["options"].split(","), mi["/usr"]


def test_exec_allowed_where_explicitly_writable_and_exec(rt, pb):
    """Control for the above: a path in both allowWrite and allowExec runs what is written."""
    pol = {"version": 1, "extends": "agent",
           "filesystem": {"allowRead": ["/"], "allowWrite": ["/workspace"],
                          "allowExec": ["/usr", "/bin", "/workspace"]}}
    res = run_steps(rt, pb, [
        "cp /usr/bin/probe /workspace/p && chmod 755 /workspace/p",
        [PROBE, "exec", "/workspace/p", "exit", "0"],
        [PROBE, "exec", "/probe", "exit", "0"],
    ], profile=None, policy=pol)
    assert res[1] == (0, None), res
    assert res[2][1]["result"] == "EACCES", res


def test_missing_deny_under_writable_parent_fails_create(rt, pb):
    """A non-optional denyWrite on a missing path under a writable grant cannot be enforced:
    create fails naming the rule (never silently dropped)."""
    pol = {"version": 1, "extends": "agent",
           "filesystem": {"denyWrite": ["/workspace/missing/dir"]}}
    r, _ = prun(rt, pb, [PROBE, "exit", "0"], profile=None, policy=pol)
    assert r.rc != 0
    assert "/workspace/missing/dir" in r.err, r


def test_landlock_denies_write_through_another_mount(rt, pb, tmp_path):
    """A config.json bind mount that is writable but outside the grants: the mount layer alone
    would allow the write, Landlock refuses it."""
    host = tmp_path / "extra"
    host.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(host, 0o777)
    os.makedirs(os.path.join(pb.rootfs, "mnt"), exist_ok=True)
    pb.add_mount("/mnt", "bind", str(host), ["rbind", "rw"])
    res = run_steps(rt, pb, [[PROBE, "write", "/mnt/x"], [PROBE, "read", "/etc/passwd"]])
    assert res[0][1]["result"] in ("EACCES", "EROFS"), res[0]
    assert not (host / "x").exists()
