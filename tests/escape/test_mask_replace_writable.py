"""A deny inside the writable workspace survives host-side replacement (issue 13, docs/security.md
"Masks inside a writable grant").

A mask is a mount in the container's namespace on the file as it was at create. When the host
replaces that file by rename (host `git config` rewrites .git/config through config.lock +
rename) or unlink + create, the kernel drops that mount and the agent can write the new file:
an outside tester appended `core.fsmonitor` to a .git/config host git had just rewritten, and
the next host `git status` ran it as root. The runtime now pins each such file in the host's
mount namespace (src/runtime/policy_pin.c): the host's replacement fails with EBUSY, in-place
writes still work, and the pin goes with the sandbox.

Judged from the host only: the host file's content, whether host git ran the agent's payload (a
marker file it would create), the host's mountinfo, the errors host operations get.
"""

import errno
import os
import shutil
import subprocess
import threading
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from policyutil import audit_dir, gflags, policy_bundle  # noqa: E402

pytestmark = pytest.mark.agentsbx_only("agent policy: pins of masked files (quick mode, state layout)")

GUARD = 60  # seconds: hang guards only


def git(ws, *args):
    # safe.directory: the user-owned workspace is not root's (git refuses it otherwise)
    return subprocess.run(["git", "-c", "safe.directory=*", "-C", ws, *args], capture_output=True, text=True,
                          timeout=GUARD)


WS_OWNER = 23456  # a non-root workspace owner: quick mode adds a user namespace mapping root to it


def make_repo(rt, base=None):
    base, owner = base if isinstance(base, tuple) else (base, None)
    ws = os.path.join(base or rt.workdir, f"ws-pin-{os.urandom(3).hex()}")
    os.makedirs(ws)
    os.chmod(ws, 0o777)
    for a in (["init", "-q"], ["config", "user.email", "t@example.invalid"], ["config", "user.name", "t"]):
        assert git(ws, *a).returncode == 0
    with open(os.path.join(ws, "f"), "w") as f:
        f.write("x\n")
    assert git(ws, "add", "f").returncode == 0 and git(ws, "commit", "-qm", "init").returncode == 0
    if owner is not None:
        os.chmod(rt.workdir, 0o711)
        subprocess.run(["chown", "-R", f"{owner}:{owner}", ws], check=True)
        os.chmod(ws, 0o755)
    return ws


def pins_under(path):
    """Mount points at or below `path` in the test's (the host's) mount namespace."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == path or mp.startswith(path + "/"):
                out.append(mp)
    return out


@pytest.fixture(params=["private", "shared", "user-owned"])
def base(request, rt):
    """Where the workspace lies: on the test's own directory (a private mount here), or on a
    tmpfs made shared, as / is on a systemd host: the pin then propagates into the container's
    rslave binds, and must land under its read-only masks, never over them; or owned by a
    non-root user (quick mode's user namespace: the init masks as the mapped root)."""
    if request.param == "private":
        yield None
        return
    if request.param == "user-owned":
        yield (None, WS_OWNER)
        return
    d = os.path.join(rt.workdir, f"shared-{os.urandom(3).hex()}")
    os.makedirs(d)
    assert subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", d]).returncode == 0
    try:
        assert subprocess.run(["mount", "--make-shared", d]).returncode == 0
        yield d
    finally:
        subprocess.run(["umount", "-l", d])


class Sandbox:
    """`agentsbx sandbox --profile agent` running `script` in the background. The script touches
    /workspace/started first; stop() creates /workspace/stop and waits for the exit."""

    def __init__(self, rt, ws, script, policy=None):
        self.ws, self.cid = ws, rt.new_id()
        rt.created.append(self.cid)
        g = gflags(rt, policy=policy) if policy else ["--audit-dir", audit_dir(rt)]
        prof = [] if policy else ["--profile", "agent"]
        argv = [rt.binary, "--root", rt.root, *g, "sandbox", "--id", self.cid, *prof, "--workspace", ws, "--", "/bin/sh", "-c", "touch /workspace/started; " + script]
        self.err = os.path.join(rt.workdir, f"sandbox-{self.cid}.err")
        with open(self.err, "wb") as e:
            self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=e, stderr=e)
        deadline = time.monotonic() + GUARD
        while not os.path.exists(os.path.join(ws, "started")):
            assert self.p.poll() is None, f"sandbox exited early: {self.log()}"
            assert time.monotonic() < deadline, "hang guard: the sandbox did not start"
            time.sleep(0.05)

    def log(self):
        with open(self.err, errors="replace") as f:
            return f.read()

    def stop(self):
        with open(os.path.join(self.ws, "stop"), "w"):
            pass
        try:
            return self.p.wait(timeout=GUARD)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError("hang guard: the sandbox did not stop")


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def test_host_git_rewrite_does_not_unmask_config(rt, base):
    """The tester's attack: while host git rewrites .git/config (lock file + rename) and a host
    script renames a new file over it, the agent keeps appending a core.fsmonitor payload. No
    host git run executes it, the host file never holds the agent's text, and the host's
    replacement fails visibly (EBUSY) instead of silently dropping the mask."""
    ws = make_repo(rt, base)
    cfg = os.path.join(ws, ".git", "config")
    marker = os.path.join(rt.workdir, f"fsmonitor-ran-{os.urandom(3).hex()}")
    payload = f"[core]\\n\\tfsmonitor = touch {marker}; false\\n"
    sb = Sandbox(rt, ws, f"while [ ! -e /workspace/stop ]; do printf '{payload}' >> /workspace/.git/config "
                         "2>/dev/null; sleep 0.02; done")
    busy, seen = [], []
    try:
        for i in range(15):
            r = git(ws, "config", f"x.y{i}", "z")
            busy.append("busy" in r.stderr.lower())
            new = cfg + ".new"
            with open(new, "w") as f:
                f.write(read(cfg) + f"[t]\n\tn = {i}\n")
            try:
                os.rename(new, cfg)
                busy.append(False)
            except OSError as e:
                busy.append(e.errno == errno.EBUSY)
                os.unlink(new)
            time.sleep(0.1)
            seen.append(read(cfg))
            git(ws, "status")  # the host user's next git command
    finally:
        assert sb.stop() == 0, sb.log()
    git(ws, "status")
    seen.append(read(cfg))
    assert not os.path.exists(marker), "host git ran the agent's core.fsmonitor payload"
    assert not any("fsmonitor" in s for s in seen), "the agent wrote the host's .git/config"
    assert all(busy), f"a host replacement of .git/config was not refused with EBUSY: {busy}"


def test_host_delete_and_recreate_of_denied_paths(rt, base):
    """unlink + recreate of .git/config, a rename of .git/hooks and of a denyRead .env by the host
    while the sandbox runs: refused with EBUSY, or (before the fix) the agent writes the new
    config, plants a hook and reads the new secret."""
    ws = make_repo(rt, base)
    secret = "NEWSECRET-" + os.urandom(4).hex()
    with open(os.path.join(ws, ".env"), "w") as f:
        f.write("OLD\n")
    policy = {"version": 1, "extends": "agent", "filesystem": {"denyRead": ["/workspace/.env"]}}
    sb = Sandbox(rt, ws, "while [ ! -e /workspace/go ]; do sleep 0.05; done; "
                         "echo AGENTTEXT >> /workspace/.git/config; "
                         "echo 'touch /tmp/x' > /workspace/.git/hooks/post-checkout; "
                         "cat /workspace/.env > /workspace/leak; touch /workspace/done; "
                         "while [ ! -e /workspace/stop ]; do sleep 0.05; done", policy=policy)
    errs = {}
    cfg, hooks, env = (os.path.join(ws, p) for p in (".git/config", ".git/hooks", ".env"))
    try:
        for name, undo, redo in (
                ("unlink .git/config", lambda: os.unlink(cfg),
                 lambda: open(cfg, "w").write("[core]\n\tbare = false\n")),
                ("rename .git/hooks", lambda: os.rename(hooks, hooks + ".old"), lambda: os.mkdir(hooks)),
                ("unlink .env", lambda: os.unlink(env), lambda: open(env, "w").write(secret + "\n"))):
            try:
                undo()
                redo()
                errs[name] = 0
            except OSError as e:
                errs[name] = e.errno
        with open(os.path.join(ws, "go"), "w"):
            pass
        deadline = time.monotonic() + GUARD
        while not os.path.exists(os.path.join(ws, "done")):
            assert sb.p.poll() is None, sb.log()
            assert time.monotonic() < deadline, "hang guard"
            time.sleep(0.05)
    finally:
        assert sb.stop() == 0, sb.log()
    assert "AGENTTEXT" not in read(cfg), "the agent wrote the recreated .git/config"
    assert not os.path.exists(os.path.join(hooks, "post-checkout")), "the agent planted a hook"
    assert secret not in read(os.path.join(ws, "leak")), "the agent read the recreated .env"
    assert errs == {k: errno.EBUSY for k in errs}, f"host replacement not refused with EBUSY: {errs}"


def test_pins_gone_after_exit(rt):
    """While the sandbox runs the host's .git/config is a mount point (the pin) and git cannot
    rewrite it; after the sandbox exits no pin is left and host git config works again."""
    ws = make_repo(rt)
    sb = Sandbox(rt, ws, "while [ ! -e /workspace/stop ]; do sleep 0.05; done")
    try:
        during = pins_under(ws)
        r_during = git(ws, "config", "x.y", "during")
    finally:
        assert sb.stop() == 0, sb.log()
    assert os.path.join(ws, ".git", "config") in during, f"no pin while running: {during}"
    assert r_during.returncode != 0 and "busy" in r_during.stderr.lower(), r_during
    assert pins_under(ws) == [], "pins left after the sandbox exited"
    r = git(ws, "config", "x.y", "after")
    assert r.returncode == 0, r
    assert git(ws, "config", "x.y").stdout.strip() == "after"
    assert not os.path.exists(os.path.join(rt.root, sb.cid)), "state dir left"


def test_crashed_runtime_pins_removed_by_delete_force(rt, make_bundle):
    """The runtime SIGKILLed right after pinning (OCI create, --profile agent, the workspace a
    bind): the pins stay, and `delete --force` removes them."""
    ws = make_repo(rt)
    b = policy_bundle(make_bundle, args=("/usr/bin/probe", "sleep", "600"))
    b.add_mount("/workspace", "bind", ws, ["rbind", "rw"])
    r, cid = rt.create(b, None, global_args=gflags(rt, "agent"),
                       env=dict(os.environ, AGENTSBX_TEST_STOP_AT="create:pinned"))
    assert r.rc == -9, f"the runtime was not killed after pinning: {r}"
    left = pins_under(ws)
    assert os.path.join(ws, ".git", "config") in left, f"no pin at the crash: {left}"
    r = rt.delete(cid, force=True)
    assert r.ok, r
    assert pins_under(ws) == [], "delete --force left pins"
    assert git(ws, "config", "x.y", "z").returncode == 0


def test_symlink_swap_cannot_redirect_cleanup(rt, tmp_path):
    """The agent cannot swap .git for a symlink (EBUSY: it is pinned in the container), and when
    .git is moved and replaced by a symlink to a directory whose `config` is another mount (done
    here on the host, the one place it can be done), the cleanup removes the moved pins through
    their mount ids and leaves the other mount alone."""
    ws = make_repo(rt)
    decoy = os.path.join(rt.workdir, f"decoy-{os.urandom(3).hex()}")
    os.makedirs(os.path.join(decoy, "hooks"))
    src = os.path.join(rt.workdir, "decoy-src")
    for p in (src, os.path.join(decoy, "config")):
        with open(p, "w") as f:
            f.write("decoy\n")
    assert subprocess.run(["mount", "--bind", src, os.path.join(decoy, "config")]).returncode == 0
    try:
        sb = Sandbox(rt, ws, f"mv /workspace/.git /workspace/.git.old 2>/dev/null; echo $? > /workspace/mv.rc; "
                             f"ln -s {decoy} /workspace/.git 2>/dev/null; touch /workspace/attempted; "
                             "while [ ! -e /workspace/stop ]; do sleep 0.05; done")
        try:
            deadline = time.monotonic() + GUARD
            while not os.path.exists(os.path.join(ws, "attempted")):
                assert sb.p.poll() is None and time.monotonic() < deadline, sb.log()
                time.sleep(0.05)
            agent_refused = read(os.path.join(ws, "mv.rc")).strip() != "0" and not os.path.islink(
                os.path.join(ws, ".git"))
            pinned = os.path.join(ws, ".git", "config") in pins_under(ws)
            if not os.path.islink(os.path.join(ws, ".git")):
                os.rename(os.path.join(ws, ".git"), os.path.join(ws, ".git.moved"))
                os.symlink(decoy, os.path.join(ws, ".git"))
        finally:
            assert sb.stop() == 0, sb.log()
        assert agent_refused, "the agent moved .git away"
        assert pinned, "no pin of .git/config while the sandbox ran"
        assert os.path.join(decoy, "config") in pins_under(decoy), "the cleanup unmounted another mount"
        assert pins_under(ws) == [], f"pins left: {pins_under(ws)}"
        assert read(os.path.join(decoy, "config")) == "decoy\n"
    finally:
        subprocess.run(["umount", "-l", os.path.join(decoy, "config")])


def test_two_sandboxes_on_one_workspace_share_the_pin(rt):
    """Two sandboxes on one workspace: the first to exit leaves the file pinned for the other
    (host replacement still EBUSY); after the second exits no pin is left."""
    ws = make_repo(rt)
    cfg = os.path.join(ws, ".git", "config")
    a = Sandbox(rt, ws, "while [ ! -e /workspace/stop ]; do sleep 0.05; done")
    os.unlink(os.path.join(ws, "started"))
    b = Sandbox(rt, ws, "while [ ! -e /workspace/stop-b ]; do sleep 0.05; done")
    try:
        assert a.stop() == 0, a.log()
        r_between = git(ws, "config", "x.y", "between")
        between = pins_under(ws)
    finally:
        with open(os.path.join(ws, "stop-b"), "w"):
            pass
        assert b.p.wait(timeout=GUARD) == 0, b.log()
    assert cfg in between, f"the second sandbox lost its pin when the first exited: {between}"
    assert r_between.returncode != 0 and "busy" in r_between.stderr.lower(), r_between
    assert "between" not in read(cfg)
    assert pins_under(ws) == [], f"pins left after both exited: {pins_under(ws)}"
    assert git(ws, "config", "x.y", "z").returncode == 0


def test_failed_create_removes_its_pins(rt, make_bundle):
    """A create that fails after pinning (its prestart hook, run in the runtime's namespaces,
    sees the pin in mountinfo and fails) leaves no pin."""
    ws = make_repo(rt)
    seen = os.path.join(rt.workdir, f"hook-saw-pin-{os.urandom(3).hex()}")
    hook = os.path.join(rt.workdir, "prestart-fail.sh")
    with open(hook, "w") as f:
        f.write(f"#!/bin/sh\ngrep -q ' {ws}/.git/config ' /proc/self/mountinfo && touch {seen}\nexit 1\n")
    os.chmod(hook, 0o755)
    b = policy_bundle(make_bundle, args=("/usr/bin/probe", "sleep", "600"))
    b.add_mount("/workspace", "bind", ws, ["rbind", "rw"])
    b.hook("prestart", hook)
    r, cid = rt.create(b, None, global_args=gflags(rt, "agent"))
    assert not r.ok, r
    assert os.path.exists(seen), "the file was not pinned during create"
    assert pins_under(ws) == [], "the failed create left pins"
    assert git(ws, "config", "x.y", "z").returncode == 0


def test_pin_of_another_inode_refused(rt, make_bundle):
    """Fail closed: when the host's file at the masked path is not the inode the container masks
    (here a host mount over .git/config that the container's non-recursive bind does not show),
    nothing can be pinned for the container's mask: create is refused, naming the path."""
    ws = make_repo(rt)
    other = os.path.join(rt.workdir, f"other-config-{os.urandom(3).hex()}")
    with open(other, "w") as f:
        f.write("[core]\n")
    cfg = os.path.join(ws, ".git", "config")
    assert subprocess.run(["mount", "--bind", other, cfg]).returncode == 0
    try:
        b = policy_bundle(make_bundle, args=("/usr/bin/probe", "sleep", "600"))
        b.add_mount("/workspace", "bind", ws, ["bind", "rw"])
        r, cid = rt.create(b, None, global_args=gflags(rt, "agent"))
        if r.ok:
            rt.delete(cid, force=True)
        assert not r.ok and "/workspace/.git/config" in r.err and "not the file the container masks" in r.err, r
    finally:
        subprocess.run(["umount", "-l", cfg])
    assert pins_under(ws) == [], "pins left"


def test_host_git_loop_during_starts_never_unmasks(rt, base):
    """The outside tester's race: host `git config` (lock file + rename) in a tight loop while
    sandboxes start on the repository. A replacement after the init masked .git/config and before
    the runtime pinned it made the kernel drop the container's mask, and the new file could reuse
    the old inode number, so the runtime's inode check passed: the sandbox started with the file
    writable, the agent appended core.fsmonitor and host git ran it. A start may fail (closed);
    every sandbox that starts must show the mask (the agent's write fails), and host git never
    runs the payload. On a private, a shared and a user-owned workspace (the pin's copy then
    propagates into the container, and a re-made deny must land over it)."""
    ws = make_repo(rt, base)
    cfg = os.path.join(ws, ".git", "config")
    marker = os.path.join(rt.workdir, f"fsmonitor-ran-{os.urandom(3).hex()}")
    payload = f"[core]\\n\\tfsmonitor = \\\"touch {marker}; false\\\"\\n"
    agent = ("for k in 1 2 3 4 5; do printf '" + payload + "' >> /workspace/.git/config 2>/dev/null && "
             "{ echo AGENT-WROTE; break; }; sleep 0.05; done; echo STARTED")
    stop, writes = threading.Event(), [0]

    def host_loop():
        while not stop.is_set():
            git(ws, "config", "asbx.n", str(writes[0]))
            writes[0] += 1

    t = threading.Thread(target=host_loop)
    t.start()
    started, wrote, refused = 0, [], []
    try:
        for i in range(15):
            cid = rt.new_id()
            rt.created.append(cid)
            r = subprocess.run([rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "sandbox", "--id", cid,
                                "--profile", "agent", "--workspace", ws, "--", "/bin/sh", "-c", agent],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=GUARD)
            if "STARTED" in r.stdout:
                started += 1
                if "AGENT-WROTE" in r.stdout:
                    wrote.append(i)
            else:
                refused.append(r.stderr[-300:])
    finally:
        stop.set()
        t.join(timeout=GUARD)
    git(ws, "status")
    print(f"race: {started} of 15 started, {len(refused)} refused, {writes[0]} host writes, agent wrote in {wrote}; {refused[:1]}")
    assert writes[0] > 0, "the host git loop did not run"
    assert not os.path.exists(marker), f"host git ran the agent's core.fsmonitor payload (agent wrote in starts {wrote})"
    assert "fsmonitor" not in read(cfg), f"the agent wrote the host's .git/config (starts {wrote})"
    assert not wrote, f"started sandboxes {wrote} of {started} could write .git/config"
    assert started > 0, f"no sandbox started (a refusal is fail-closed, but all 15 refused): {refused[:2]}"
