"""`agentsbx sandbox` run by an ordinary user (issue 17): the per-user config
(~/.config/agentsbx/config.json, only able to narrow) and a git workspace without root
(docs/policy.md "User config", docs/security.md "When the caller is not root").

The throw-away user and the helpers are test_rootless_sandbox.py's. Judged by what the command
inside prints (a planted secret), what the host sees (a marker file, the content and owner of
.git/config and of the files written), and for refusals by the error naming the file and key
together with the command never having run."""

import json
import os
import shutil
import subprocess
import threading
import time
import uuid

import pytest

from test_rootless_sandbox import (  # noqa: F401  (fixtures)
    HANG_GUARD, NONE_DEGRADED, as_user, binary, no_user_processes, sandbox, tun, user, ws)

SECRET = "USERCONF-SECRET-7c1e"


@pytest.fixture
def user_config(user):
    """Writes ~/.config/agentsbx/config.json as the user (owner and mode as given); removed after."""
    d = os.path.join(user.pw_dir, ".config", "agentsbx")
    path = os.path.join(d, "config.json")

    def write(doc, mode=0o644, owner=None):
        os.makedirs(d, exist_ok=True)
        for p in (os.path.dirname(d), d):
            os.chown(p, user.pw_uid, user.pw_gid)
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        uid = user.pw_uid if owner is None else owner
        os.chown(path, uid, uid if owner is not None else user.pw_gid)
        os.chmod(path, mode)
        return path

    yield write
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def secret_dir(user):
    d = os.path.join(user.pw_dir, f"notes-{uuid.uuid4().hex[:6]}")
    os.mkdir(d, 0o755)
    with open(os.path.join(d, "s.txt"), "w") as f:
        f.write(SECRET + "\n")
    for p in (d, os.path.join(d, "s.txt")):
        os.chown(p, user.pw_uid, user.pw_gid)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_user_config_denies_an_extra_path(user, binary, ws, user_config, secret_dir):
    cat = ["/bin/sh", "-c", f"cat {secret_dir}/s.txt; ls {secret_dir}; echo done"]
    # control: without the user config the sandbox reads it (rootless/agent do not mask it)
    c = sandbox(user, binary, ws, *cat)
    assert c.rc == 0 and SECRET in c.out, c
    user_config({"restrict": {"filesystem": {"denyRead": [secret_dir]}}})
    r = sandbox(user, binary, ws, *cat)
    assert r.rc == 0 and "done" in r.out, r
    assert SECRET not in r.out and "s.txt" not in r.out, r


def test_user_config_lowers_a_limit(user, binary, ws, user_config):
    # wallClockSeconds 3600 in rootless, 2 in the user config: the command is killed at 2 s
    user_config({"restrict": {"limits": {"wallClockSeconds": 2}}})
    r = sandbox(user, binary, ws, "/bin/sh", "-c", "sleep 60; touch /workspace/late")
    assert r.rc == 124, r
    assert not os.path.exists(os.path.join(ws, "late"))
    assert not no_user_processes(user.pw_uid)


@pytest.mark.parametrize("doc,key", [
    ({"restrict": {"limits": {"wallClockSeconds": 999999}}}, "restrict.limits.wallClockSeconds"),
    ({"restrict": {"network": {"mode": "open"}}}, "restrict.network.mode"),
    ({"restrict": {"filesystem": {"allowWrite": ["/etc"]}}}, "restrict.filesystem.allowWrite"),
    ({"restrict": {"degrade": ["landlock"]}}, "restrict.degrade"),
    ({"enableKernelAudit": True}, "enableKernelAudit: not accepted in a user config"),
    ({"auditDir": "/tmp/elsewhere"}, "auditDir: not accepted in a user config"),
    ({"onWiden": "clamp"}, "onWiden: not accepted in a user config"),
], ids=["limit", "network", "allowWrite", "degrade", "kernelAudit", "auditDir", "onWiden"])
def test_user_config_widening_refused(user, binary, ws, user_config, doc, key):
    path = user_config(doc)
    marker = os.path.join(ws, "ran")
    r = sandbox(user, binary, ws, "/bin/sh", "-c", f"touch {marker}")
    assert r.rc != 0, r
    assert f"{path}: {key}" in r.err, r
    assert not os.path.exists(marker), r
    assert not no_user_processes(user.pw_uid)


@pytest.mark.parametrize("kind", ["group-writable", "world-writable", "other-owner"])
def test_user_config_others_can_write_refused(user, binary, ws, user_config, kind):
    path = user_config({"restrict": {}}, mode={"group-writable": 0o664, "world-writable": 0o646}.get(kind, 0o644),
                       owner=65534 if kind == "other-owner" else None)
    marker = os.path.join(ws, "ran")
    r = sandbox(user, binary, ws, "/bin/sh", "-c", f"touch {marker}")
    assert r.rc != 0, r
    assert path in r.err and "refused" in r.err, r
    assert not os.path.exists(marker), r


def test_user_config_default_profile(user, binary, ws, user_config):
    # without it, `sandbox` with no --profile is `agent` (refused without root); with
    # defaultProfile rootless it runs, and a --profile on the command line still wins
    user_config({"defaultProfile": "rootless"})
    # (rootless is agent's filtered network: the resolver inside is the monitor's DNS stub)
    r = sandbox(user, binary, ws, "/bin/sh", "-c", "touch /workspace/ran; cat /etc/resolv.conf", profile=None)
    assert r.rc == 0, r
    assert os.path.exists(os.path.join(ws, "ran"))
    assert r.out.splitlines()[-1] == "nameserver 127.0.0.1", r
    f = sandbox(user, binary, ws, "/bin/true", profile="agent")
    assert f.rc != 0 and "limits.memoryBytes" in f.err, f


def test_user_config_default_profile_wider_than_the_host_config_refused(user, binary, ws, user_config):
    sysconf = os.path.join(user.pw_dir, f"sys-{uuid.uuid4().hex[:6]}.json")
    with open(sysconf, "w") as f:
        json.dump({"defaultProfile": "locked"}, f)
    try:
        path = user_config({"defaultProfile": "rootless"})
        r = as_user(user, [binary, "--config", sysconf, "sandbox", "--workspace", ws, "--", "/bin/sh", "-c",
                           "touch /workspace/ran"], cwd=ws)
        assert r.rc != 0, r
        assert f'{path}: defaultProfile "rootless": ' in r.err and "must narrow the host config's" in r.err, r
        assert not os.path.exists(os.path.join(ws, "ran"))
    finally:
        os.unlink(sysconf)


# ---- a git workspace without root (docs/security.md "When the caller is not root") ----

def git_ws(user, ws):
    """A real repository with one commit, owned by the user."""
    for argv in (["git", "init", "-q", ws], ["git", "-C", ws, "config", "user.email", "t@example.invalid"],
                 ["git", "-C", ws, "config", "user.name", "t"]):
        r = as_user(user, argv, cwd=ws)
        assert r.rc == 0, r
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("a\n")
    os.chown(os.path.join(ws, "a.txt"), user.pw_uid, user.pw_gid)
    r = as_user(user, ["/bin/sh", "-c", "git add a.txt && git commit -qm one"], cwd=ws)
    assert r.rc == 0, r
    with open(os.path.join(ws, ".git", "config")) as f:
        return f.read()


AGENT = r"""
cd /workspace
printf '[core]\n\tfsmonitor = touch /tmp/PWNED\n' >> .git/config && echo CONFIG-WRITTEN
printf '#!/bin/sh\ntouch /tmp/PWNED\n' > .git/hooks/pre-commit && echo HOOK-WRITTEN
mv .git/config .git/config.old && echo CONFIG-MOVED
rm -rf .git/hooks && echo HOOKS-REMOVED
mv .git .git-old && echo GIT-MOVED
echo b > b.txt && git add b.txt && git commit -qm two && echo COMMITTED
"""


def test_git_workspace_as_user(user, binary, ws):
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    before = git_ws(user, ws)
    hooks_before = sorted(os.listdir(os.path.join(ws, ".git", "hooks")))
    r = sandbox(user, binary, ws, "/bin/sh", "-c", AGENT)
    assert r.rc == 0, r
    assert "was replaced" not in r.err, r  # nothing replaced on the host: nothing reported
    for bad in ("CONFIG-WRITTEN", "HOOK-WRITTEN", "CONFIG-MOVED", "HOOKS-REMOVED", "GIT-MOVED"):
        assert bad not in r.out, r
    assert "COMMITTED" in r.out, r  # the rest of the repository is the agent's to write
    with open(os.path.join(ws, ".git", "config")) as f:
        assert f.read() == before
    assert sorted(os.listdir(os.path.join(ws, ".git", "hooks"))) == hooks_before
    assert not os.path.exists(os.path.join(ws, ".git-old"))
    log = as_user(user, ["git", "log", "--format=%s"], cwd=ws)
    assert log.out.split() == ["two", "one"], log
    bad = []
    for root, dirs, files in os.walk(ws):
        for n in dirs + files:
            st = os.lstat(os.path.join(root, n))
            if (st.st_uid, st.st_gid) != (user.pw_uid, user.pw_gid):
                bad.append((os.path.join(root, n), st.st_uid, st.st_gid))
    assert not bad, bad
    # and the user's own git on the host afterwards runs nothing of the agent's
    s = as_user(user, ["git", "status", "--short"], cwd=ws)
    assert s.rc == 0 and not os.path.exists("/tmp/PWNED"), s


def test_git_workspace_without_pin_degrade_refused(user, binary, ws):
    """A policy that does not accept running without the host-side pin (degrade `pin`) is
    refused on a git workspace, naming the path and the way out; the command never runs."""
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    before = git_ws(user, ws)
    r = sandbox(user, binary, ws, "/bin/sh", "-c", "echo x >> /workspace/.git/config; touch /workspace/ran",
                policy=NONE_DEGRADED)
    assert r.rc != 0, r
    assert "/workspace/.git/config" in r.err and '"pin"' in r.err and "non-root" in r.err, r
    assert not os.path.exists(os.path.join(ws, "ran"))
    with open(os.path.join(ws, ".git", "config")) as f:
        assert f.read() == before
    assert not no_user_processes(user.pw_uid)


def test_git_config_replaced_on_the_host_is_reported(user, binary, ws):
    """The residual of running without a host pin: the user's own `git config` on the host
    replaces .git/config while the sandbox runs. The sandbox keeps starting; at exit the user is
    told which file was replaced (docs/security.md)."""
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    git_ws(user, ws)
    flag = os.path.join(ws, "up")
    # the agent waits until the host's git config is done, so the replacement is during the session
    p = sandbox(user, binary, ws, "/bin/sh", "-c",
                "touch /workspace/up; while [ ! -e /workspace/go ]; do sleep 0.1; done", wait=False)
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not os.path.exists(flag):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        g = as_user(user, ["git", "config", "user.name", "other"], cwd=ws)
        assert g.rc == 0, g  # no pin: the host's rename succeeds (as root it fails with EBUSY)
        as_user(user, ["touch", os.path.join(ws, "go")])
    finally:
        out, err = p.communicate(timeout=HANG_GUARD)
    assert p.returncode == 0, (out, err)
    assert f"`{ws}/.git/config` was replaced or removed on the host while the sandbox ran" in err, err
