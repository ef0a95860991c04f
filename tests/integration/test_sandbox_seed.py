"""`agentsbx sandbox --seed-git REPO[@REV]` (issue 18, agentsbx-sandbox(8)): the review workspace's
lower is a fresh clone of REPO at REV. What is judged: what the command inside sees and writes in
/workspace, the source repository afterwards (git's own view), `workspace diff`'s output, meta.json
and the audit log's `workspace` records; and that a refused seed (a URL the policy does not
reach, an ssh URL, an unknown revision, an existing workspace) leaves nothing behind; URL seeds
through the egress lab: test_sandbox_seed_url.py. The clone itself (hooks, file:// URLs) is
tested against the real git binary in tests/unit/test_workspace_seed.c."""

import json
import os
import subprocess
import uuid

import pytest

from policyutil import audit_dir, sandbox_run

pytestmark = pytest.mark.agentsbx_only("agentsbx sandbox --seed-git")

WS_ROOT = "/var/lib/agentsbx/workspaces"


@pytest.fixture
def wsdir(rt):
    return os.path.join(rt.workdir, "workspaces")


@pytest.fixture
def config(rt, wsdir):
    p = os.path.join(rt.workdir, "seed-config.json")
    with open(p, "w") as f:
        json.dump({"workspacesDir": wsdir}, f)
    return p


def git(repo, *args):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture
def repo(rt):
    """a repository with two commits: v1 (a.txt "one") and HEAD (a.txt "two", b.txt)"""
    d = os.path.join(rt.workdir, "src-repo")
    os.makedirs(d)
    git(d, "init", "-q", "-b", "main")
    with open(os.path.join(d, "a.txt"), "w") as f:
        f.write("one\n")
    git(d, "add", "a.txt")
    git(d, "commit", "-q", "-m", "v1")
    git(d, "tag", "v1")
    v1 = git(d, "rev-parse", "HEAD")
    with open(os.path.join(d, "a.txt"), "w") as f:
        f.write("two\n")
    with open(os.path.join(d, "b.txt"), "w") as f:
        f.write("bee\n")
    git(d, "add", "a.txt", "b.txt")
    git(d, "commit", "-q", "-m", "v2")
    return d, v1, git(d, "rev-parse", "HEAD")


def seed_run(rt, config, sid, seed, script):
    return sandbox_run(rt, "--id", sid, "--seed-git", seed, "--", "/bin/sh", "-c", script,
                       global_args=["--config", config])


def wcmd(rt, config, *args):
    return rt.cmd("workspace", *args, global_args=["--config", config, "--audit-dir", audit_dir(rt)])


def test_agent_sees_rev_source_unchanged_diff_shows_change(rt, config, wsdir, repo):
    src, v1, head = repo
    before = (git(src, "rev-parse", "HEAD"), git(src, "status", "--porcelain"), sorted(os.listdir(src)))
    sid = rt.new_id()
    r = seed_run(rt, config, sid, f"{src}@v1",
                 "cat a.txt; ls; git rev-parse HEAD 2>/dev/null || true; echo agent >> a.txt; echo new > c.txt")
    assert r.rc == 0, r
    out = r.out.split()
    # the tree at v1: a.txt "one", no b.txt (HEAD's), the clone's .git
    assert out[0] == "one" and "a.txt" in out and "b.txt" not in out and "c.txt" not in out, r
    # the source repository: the same commit, a clean tree, no new file
    assert (git(src, "rev-parse", "HEAD"), git(src, "status", "--porcelain"), sorted(os.listdir(src))) == before
    with open(os.path.join(src, "a.txt")) as f:
        assert f.read() == "two\n"
    # the clone (the lower) is unchanged too; the change is in the upper
    lower = os.path.join(wsdir, sid, "lower")
    with open(os.path.join(lower, "a.txt")) as f:
        assert f.read() == "one\n"
    assert not os.path.exists(os.path.join(lower, "c.txt"))
    m = json.load(open(os.path.join(wsdir, sid, "meta.json")))
    assert m["seed"] == {"repo": f"{src}", "rev": v1}, m
    assert m["workspace"] == lower and m["state"] == "stopped", m
    lst = os.stat(lower)
    assert (m["lowerDev"], m["lowerIno"]) == (lst.st_dev, lst.st_ino)
    # diff: a.txt modified, c.txt added, nothing else (the clone's own files are not changes)
    d = wcmd(rt, config, "diff", "--json", sid)
    assert d.rc == 0, d
    recs = {x["path"]: x for x in map(json.loads, d.out.splitlines()) if "path" in x}
    assert set(recs) == {"a.txt", "c.txt"}, d.out
    assert recs["a.txt"]["op"] == "modified" and recs["c.txt"]["op"] == "added", recs
    # the audit log: the seed record with the full sha, before the stop record
    with open(os.path.join(audit_dir(rt), f"{sid}.jsonl")) as f:
        ws = [x for x in map(json.loads, f) if x["event"] == "workspace"]
    seed = [x for x in ws if x.get("op") == "seed"]
    assert len(seed) == 1 and seed[0]["rev"] == v1 and seed[0]["requested"] == "v1", ws
    assert seed[0]["repo"] == f"{src}"
    assert ws.index(seed[0]) < max(i for i, x in enumerate(ws) if x.get("action") == "stopped"), ws
    r = wcmd(rt, config, "discard", sid)
    assert r.rc == 0, r
    assert not os.path.exists(os.path.join(wsdir, sid))


def test_default_rev_is_head(rt, config, wsdir, repo):
    src, _, head = repo
    sid = rt.new_id()
    r = seed_run(rt, config, sid, src, "cat a.txt b.txt")
    assert r.rc == 0 and r.out.split() == ["two", "bee"], r
    m = json.load(open(os.path.join(wsdir, sid, "meta.json")))
    assert m["seed"]["rev"] == head, m
    assert wcmd(rt, config, "discard", sid).rc == 0


def test_unknown_rev_leaves_nothing(rt, config, wsdir, repo):
    src, _, _ = repo
    sid = rt.new_id()
    r = seed_run(rt, config, sid, f"{src}@no-such-branch", "echo ran")
    assert r.rc != 0 and "ran" not in r.out, r
    assert "no-such-branch" in r.err, r
    assert not os.path.exists(os.path.join(wsdir, sid))
    assert not os.path.isdir(os.path.join(rt.root, "sandbox", sid))


def test_existing_workspace_refused(rt, config, wsdir, repo):
    src, _, _ = repo
    sid = rt.new_id()
    assert seed_run(rt, config, sid, src, "echo x > x").rc == 0
    r = seed_run(rt, config, sid, src, "echo ran")
    assert r.rc != 0 and "ran" not in r.out and "already exists" in r.err, r
    # the first run's work is still there to review
    assert os.path.isfile(os.path.join(wsdir, sid, "upper", "x"))
    assert wcmd(rt, config, "discard", sid).rc == 0


@pytest.mark.parametrize("url,what", [
    # a URL is fetched under the policy (test_sandbox_seed_url.py); `agent`'s allowlist is empty
    ("https://example.com/r.git", "not in the policy's network.allowedDomains"),
    ("https://example.com/r.git@v1", "not in the policy's network.allowedDomains"),
    ("ssh://git@example.com/r", "no keys reach the seed sandbox"),
    ("git@example.com:o/r.git", "no keys reach the seed sandbox"),
    ("ext::sh -c id", "remote helper"),
])
def test_network_url_refused(rt, url, what):
    sid = f"seed-{uuid.uuid4().hex[:8]}"
    r = sandbox_run(rt, "--id", sid, "--seed-git", url, "--", "/bin/true")
    assert r.rc != 0, r
    assert what in r.err and url.split("@v1")[0] in r.err, r
    assert not os.path.exists(os.path.join(WS_ROOT, sid))
    assert not os.path.isdir(os.path.join(rt.root, "sandbox", sid))


def test_seed_and_workspace_exclusive(rt, tmp_path):
    r = sandbox_run(rt, "--seed-git", str(tmp_path), "--workspace", str(tmp_path), "--", "/bin/true")
    assert r.rc != 0 and "exclusive" in r.err, r


def test_apply_refused_on_a_seeded_workspace(rt, config, wsdir, repo):
    src, _, _ = repo
    sid = rt.new_id()
    assert seed_run(rt, config, sid, src, "echo x > x").rc == 0
    r = wcmd(rt, config, "apply", sid)
    assert r.rc != 0 and "seeded clone" in r.err, r
    assert os.path.isfile(os.path.join(wsdir, sid, "upper", "x"))
    assert not os.path.exists(os.path.join(wsdir, sid, "lower", "x"))
    assert not os.path.exists(os.path.join(src, "x"))
    assert wcmd(rt, config, "discard", sid).rc == 0


def test_diff_applies_to_the_repository_as_a_patch(rt, config, wsdir, repo):
    """what apply's refusal points to: `workspace diff ID` is a patch git applies at REV"""
    src, v1, _ = repo
    sid = rt.new_id()
    r = seed_run(rt, config, sid, f"{src}@v1", "echo agent >> a.txt; echo new > c.txt")
    assert r.rc == 0, r
    d = wcmd(rt, config, "diff", sid)
    assert d.rc == 0, d
    work = os.path.join(rt.workdir, "patched")
    subprocess.run(["git", "clone", "-q", src, work], check=True, capture_output=True)
    git(work, "checkout", "-q", "--detach", v1)
    p = subprocess.run(["git", "-C", work, "apply", "-"], input=d.out, capture_output=True, text=True)
    assert p.returncode == 0, p
    with open(os.path.join(work, "a.txt")) as f:
        assert f.read() == "one\nagent\n"
    with open(os.path.join(work, "c.txt")) as f:
        assert f.read() == "new\n"
    assert wcmd(rt, config, "discard", sid).rc == 0


def test_default_workspaces_dir_is_hidden_inside(rt, repo):
    """root's default workspacesDir (/var/lib, which --workspace refuses): the seed works there,
    and the agent sees neither its own clone nor any other workspace at the host path"""
    src, _, head = repo
    sid = rt.new_id()
    try:
        r = sandbox_run(rt, "--id", sid, "--seed-git", src, "--", "/bin/sh", "-c",
                        f"cat a.txt; ls -A {WS_ROOT} | wc -l; test -e {WS_ROOT}/{sid} && echo seen || echo hidden")
        assert r.rc == 0 and r.out.split() == ["two", "0", "hidden"], r
        with open(os.path.join(WS_ROOT, sid, "meta.json")) as f:
            m = json.load(f)
        assert m["seed"]["rev"] == head and m["workspace"] == os.path.join(WS_ROOT, sid, "lower"), m
    finally:
        d = rt.cmd("workspace", "discard", sid, global_args=["--audit-dir", audit_dir(rt)])
    assert d.rc == 0, d
    assert not os.path.exists(os.path.join(WS_ROOT, sid))


def test_commit_id_pin_not_taken_for_a_branch_of_that_name(rt, config, wsdir, repo):
    """A REV of hex digits is a commit id: a hostile repository with a branch named like the pinned
    id (and no such commit) must not be seeded from that branch (outside attack 08: git takes the
    ref first, and the seed recorded the branch's commit). Refused, nothing left; the commit's
    own full id and a prefix of it still work."""
    src, v1, head = repo
    pin = "1" * 40
    git(src, "branch", pin, v1)
    sid = rt.new_id()
    r = seed_run(rt, config, sid, f"{src}@{pin}", "echo ran")
    assert r.rc != 0 and "ran" not in r.out, r
    assert pin in r.err and "commit id" in r.err, r
    assert not os.path.exists(os.path.join(wsdir, sid))
    for rev in (head, head[:12]):
        sid = rt.new_id()
        r = seed_run(rt, config, sid, f"{src}@{rev}", "cat a.txt")
        assert r.rc == 0 and r.out.split() == ["two"], r
        assert json.load(open(os.path.join(wsdir, sid, "meta.json")))["seed"]["rev"] == head
        assert wcmd(rt, config, "discard", sid).rc == 0


@pytest.mark.parametrize("marker", ["sub/HEAD", "sub/commondir", "deep/er/config.worktree", "sub/Head", "x/gitdir"])
def test_tree_with_a_repository_marker_refused(rt, config, wsdir, repo, tmp_path, marker):
    """A seeded tree holding an embedded repository (sub/HEAD + sub/config with core.fsmonitor +
    objects/ + refs/): git run in that directory of the clone ran the remote's fsmonitor as root
    (outside attack 08). Any entry named like a repository's own file outside the top .git is
    refused, as workspace apply refuses it; nothing is left, and git in the source directory is
    not run by us (no marker file)."""
    src, _, _ = repo
    pwned = tmp_path / "PWNED"
    d = os.path.dirname(os.path.join(src, marker))
    os.makedirs(os.path.join(d, "objects"), exist_ok=True)
    os.makedirs(os.path.join(d, "refs"), exist_ok=True)
    for f, text in ((os.path.join(src, marker), "ref: refs/heads/main\n"),
                    (os.path.join(d, "config"), f"[core]\n\tbare = false\n\tworktree = ..\n"
                                                f"\tfsmonitor = \"id > {pwned}; false\"\n"),
                    (os.path.join(d, "objects", "keep"), ""), (os.path.join(d, "refs", "keep"), "")):
        with open(f, "w") as fh:
            fh.write(text)
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "embedded repository")
    sid = rt.new_id()
    r = seed_run(rt, config, sid, src, "echo ran")
    assert r.rc != 0 and "ran" not in r.out, r
    assert os.path.basename(marker) in r.err and "outside the top-level .git" in r.err, r
    assert not os.path.exists(os.path.join(wsdir, sid))
    assert not pwned.exists()
