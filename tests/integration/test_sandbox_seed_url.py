"""`agentsbx sandbox --seed-git URL[@REV]` (issue 18, agentsbx-sandbox(8), runtime/sandbox_seed_fetch.h):
the clone of a network repository is made inside a throwaway sandbox under the run's policy, so it
reaches the network through that policy's egress (DNS stub allowlist, nftables, Host check) and
nothing else. The egress lab of test_egress.py is the network: its upstream serves bare repositories
($UPSTREAM_WWW over plain HTTP on port 80: dumb HTTP below /git/, git-http-backend's smart HTTP
below /smart/) at a lab name the policy allows, through
the sandbox's own network namespace and pasta (as test_sandbox_new_netns_pasta). What is judged: the
lower's files and the recorded full commit id, read from the host; the lab's logs (the fetch went
through the policy's DNS and HTTP path); and that a refused seed (an unlisted host, a policy without
network, ssh) leaves no workspace, state, bundle or pasta behind. The repository is hostile: a hook
in it and a submodule must not run or be fetched."""

import json
import os
import subprocess
import uuid

import pytest

from policyutil import audit_dir, sandbox_run
from test_egress import HOSTUP4, lab, pasta_pids  # noqa: F401 (fixtures)

pytestmark = pytest.mark.agentsbx_only("agentsbx sandbox --seed-git URL")

ZONE = {"seed.test": {"A": [HOSTUP4]}, "other.test": {"A": [HOSTUP4]}}
POLICY = {"version": 1, "extends": "agent",
          "network": {"mode": "filtered", "allowedDomains": ["seed.test"], "ports": [80]},
          "approvals": {"network": "deny"}}
GIT_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def git(repo, *args):
    return subprocess.run(["git", "-c", "safe.directory=*", "-C", str(repo), *args], check=True,
                          capture_output=True, text=True, env=GIT_ENV).stdout.strip()


@pytest.fixture
def served(tmp_path):
    """www/git/repo.git (bare, dumb HTTP): v1 (README "one", a .gitmodules naming sub.git and its
    gitlink at sub/, a .gitattributes asking for a filter), then HEAD (README "two"). The bare
    repository carries a post-checkout hook (and a hooks/ template), as does sub.git: none may run."""
    d = tmp_path / "served"
    www = d / "www" / "git"
    www.mkdir(parents=True)
    marker = d / "hook-ran"
    hook = f"#!/bin/sh\ntouch {marker} /workspace/HOOK-RAN 2>/dev/null\n"
    sub = d / "sub"
    git(d, "init", "-q", "-b", "main", str(sub))
    (sub / "S").write_text("submodule content\n")
    git(sub, "add", "S")
    git(sub, "commit", "-q", "-m", "sub")
    work = d / "work"
    git(d, "init", "-q", "-b", "main", str(work))
    (work / "README").write_text("one\n")
    (work / ".gitmodules").write_text('[submodule "sub"]\n\tpath = sub\n\turl = http://seed.test/git/sub.git\n')
    (work / ".gitattributes").write_text("* filter=evil\n")
    git(work, "add", "README", ".gitmodules", ".gitattributes")
    git(work, "update-index", "--add", "--cacheinfo", f"160000,{git(sub, 'rev-parse', 'HEAD')},sub")
    git(work, "commit", "-q", "-m", "v1")
    git(work, "tag", "v1")
    v1 = git(work, "rev-parse", "HEAD")
    (work / "README").write_text("two\n")
    git(work, "commit", "-q", "-am", "v2")
    head = git(work, "rev-parse", "HEAD")
    for name, src in (("repo.git", work), ("sub.git", sub)):
        subprocess.run(["git", "clone", "-q", "--bare", str(src), str(www / name)], check=True, env=GIT_ENV)
        for h in ("post-checkout", "post-merge", "reference-transaction"):
            p = www / name / "hooks" / h
            p.write_text(hook)
            p.chmod(0o755)
        git(www / name, "update-server-info")
    # evil.git: repo.git plus a tag on a commit object that fails git's fsck (no author email or
    # date), kept loose, so the dumb-HTTP walker (which checks nothing itself) fetches it as is
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(work), str(www / "evil.git")], check=True,
                   env=GIT_ENV)
    tree = git(work, "rev-parse", "v1^{tree}")
    bad = subprocess.run(["git", "-C", str(www / "evil.git"), "hash-object", "-w", "-t", "commit", "--literally",
                          "--stdin"], input=f"tree {tree}\nauthor nobody\ncommitter nobody\n\nevil\n", check=True,
                         capture_output=True, text=True, env=GIT_ENV).stdout.strip()
    git(www / "evil.git", "update-ref", "refs/tags/evil", bad)
    git(www / "evil.git", "update-server-info")
    return {"www": str(d / "www"), "v1": v1, "head": head, "marker": marker}


@pytest.fixture
def lab_env(served):
    return {"UPSTREAM_WWW": served["www"]}


@pytest.fixture
def config(rt):
    p = os.path.join(rt.workdir, "seed-url-config.json")
    with open(p, "w") as f:
        json.dump({"workspacesDir": os.path.join(rt.workdir, "workspaces")}, f)
    return p


def seed(rt, config, sid, url, script="true", policy=POLICY):
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)
    return sandbox_run(rt, "--id", sid, "--seed-git", url, "--", "/bin/sh", "-c", script, policy=policy,
                       global_args=["--config", config], env=env, timeout=120)


def left_behind(rt, config, sid):
    """what of a refused seed run is still there: its workspace, state or bundle dirs, the seed sandbox's"""
    ws = json.load(open(config))["workspacesDir"]
    paths = [os.path.join(ws, sid), os.path.join(rt.root, sid), os.path.join(rt.root, f"{sid}-seed"),
             os.path.join(rt.root, "sandbox", sid), os.path.join(rt.root, "sandbox", f"{sid}-seed")]
    return [p for p in paths if os.path.exists(p)]


def test_url_seed_at_tag(rt, lab, config, served):
    lab.zone(ZONE)
    sid = f"su-{uuid.uuid4().hex[:8]}"
    url = "http://seed.test/git/repo.git"
    r = seed(rt, config, sid, f"{url}@v1", "cat README; ls -A sub | wc -l")
    try:
        assert r.rc == 0, r.err
        assert r.out.split() == ["one", "0"], r
        wsd = os.path.join(json.load(open(config))["workspacesDir"], sid)
        lower = os.path.join(wsd, "lower")
        # from the host: the lower holds v1's tree at v1, detached, the full id recorded
        with open(os.path.join(lower, "README")) as f:
            assert f.read() == "one\n"
        assert git(lower, "rev-parse", "HEAD") == served["v1"]
        assert open(os.path.join(lower, ".git", "HEAD")).read().strip() == served["v1"]
        m = json.load(open(os.path.join(wsd, "meta.json")))
        assert m["seed"] == {"repo": url, "rev": served["v1"]}, m
        assert m["workspace"] == lower, m
        with open(os.path.join(audit_dir(rt), f"{sid}.jsonl")) as f:
            recs = [x for x in map(json.loads, f) if x["event"] == "workspace" and x.get("op") == "seed"]
        assert len(recs) == 1 and recs[0]["rev"] == served["v1"] and recs[0]["requested"] == "v1", recs
        assert recs[0]["repo"] == url
        # the fetch went through the policy's path: the stub forwarded seed.test, the upstream saw
        # it as the Host of every request, and no other name
        assert set(lab.queries()) == {"seed.test"}, lab.queries()
        assert lab.log("http.log") and set(lab.log("http.log")) == {"seed.test"}, lab.log("http.log")
        # hostile content: no hook ran, the submodule was not fetched, the filter not configured
        assert not served["marker"].exists() and not os.path.exists(os.path.join(lower, "HOOK-RAN"))
        assert os.listdir(os.path.join(lower, "sub")) == []
        hooks = os.path.join(lower, ".git", "hooks")
        assert not os.path.exists(hooks) or os.listdir(hooks) == [], "hooks copied into the clone"
        cfg = open(os.path.join(lower, ".git", "config")).read()
        assert "filter" not in cfg and "submodule" not in cfg, cfg
        # the seed sandbox is gone: no state, bundle or pasta of it
        assert not os.path.exists(os.path.join(rt.root, f"{sid}-seed"))
        assert not os.path.exists(os.path.join(rt.root, "sandbox", f"{sid}-seed"))
    finally:
        rt.cmd("workspace", "discard", sid, global_args=["--config", config, "--audit-dir", audit_dir(rt)])


def test_url_seed_smart_http(rt, lab, config, served):
    """git's smart protocol (git-http-backend behind the lab's HTTP), the one real servers speak:
    the tag resolves to the same full id, and the objects came as a pack through it"""
    lab.zone(ZONE)
    sid = f"su-{uuid.uuid4().hex[:8]}"
    url = "http://seed.test/smart/repo.git"
    r = seed(rt, config, sid, f"{url}@v1", "cat README")
    try:
        assert r.rc == 0 and r.out.split() == ["one"], r.err
        wsd = os.path.join(json.load(open(config))["workspacesDir"], sid)
        assert git(os.path.join(wsd, "lower"), "rev-parse", "HEAD") == served["v1"]
        assert json.load(open(os.path.join(wsd, "meta.json")))["seed"] == {"repo": url, "rev": served["v1"]}
        assert any(x.startswith("POST /repo.git/git-upload-pack") for x in lab.log("smart.log")), lab.log("smart.log")
        assert not served["marker"].exists()
    finally:
        rt.cmd("workspace", "discard", sid, global_args=["--config", config, "--audit-dir", audit_dir(rt)])


def test_url_seed_default_head(rt, lab, config, served):
    lab.zone(ZONE)
    sid = f"su-{uuid.uuid4().hex[:8]}"
    r = seed(rt, config, sid, "http://seed.test/git/repo.git", "cat README")
    try:
        assert r.rc == 0 and r.out.split() == ["two"], r
        m = json.load(open(os.path.join(json.load(open(config))["workspacesDir"], sid, "meta.json")))
        assert m["seed"]["rev"] == served["head"], m
    finally:
        rt.cmd("workspace", "discard", sid, global_args=["--config", config, "--audit-dir", audit_dir(rt)])


def test_unlisted_host_refused_leaves_nothing(rt, lab, config):
    lab.zone(ZONE)
    before = pasta_pids()
    sid = f"su-{uuid.uuid4().hex[:8]}"
    r = seed(rt, config, sid, "http://other.test/git/repo.git@v1", "echo ran")
    assert r.rc != 0 and "ran" not in r.out, r
    assert "other.test" in r.err and "network.allowedDomains" in r.err, r
    assert len(r.err.strip().splitlines()) == 1, r  # one error
    assert left_behind(rt, config, sid) == []
    assert pasta_pids() <= before
    # nothing was even asked: the refusal comes before the seed sandbox
    assert lab.queries() == [] and lab.log("http.log") == []


def test_unknown_rev_leaves_nothing(rt, lab, config):
    lab.zone(ZONE)
    sid = f"su-{uuid.uuid4().hex[:8]}"
    r = seed(rt, config, sid, "http://seed.test/git/repo.git@no-such-tag", "echo ran")
    assert r.rc != 0 and "ran" not in r.out, r
    assert "no-such-tag" in r.err, r
    assert left_behind(rt, config, sid) == []


@pytest.mark.parametrize("kind", ["git", "smart"])
def test_object_failing_fsck_refused(rt, lab, config, kind):
    """a hostile object (a commit git's fsck rejects) fails the seed, whatever the transport: over
    smart HTTP transfer.fsckObjects rejects the pack, over dumb HTTP the fsck before the checkout"""
    lab.zone(ZONE)
    sid = f"su-{uuid.uuid4().hex[:8]}"
    r = seed(rt, config, sid, f"http://seed.test/{kind}/evil.git@v1", "echo ran")
    assert r.rc != 0 and "ran" not in r.out, r
    assert "fsck" in r.err or "error in commit" in r.err or "missing" in r.err.lower(), r
    assert left_behind(rt, config, sid) == []


def test_policy_without_network_refused(rt, config):
    sid = f"su-{uuid.uuid4().hex[:8]}"
    pol = {"version": 1, "extends": "agent", "network": {"mode": "none"}}
    r = seed(rt, config, sid, "https://seed.test/r.git", policy=pol)
    assert r.rc != 0 and "network.mode none" in r.err, r
    assert left_behind(rt, config, sid) == []


@pytest.mark.parametrize("url,what", [
    ("ssh://seed.test/r.git", "no keys"),
    ("git@seed.test:r.git", "no keys"),
    ("https://user:pw@seed.test/r.git", "user or password"),
    ("ext::sh -c id", "remote helper"),
    ("ftp://seed.test/r.git", "scheme `ftp` refused"),
    ("http://203.0.113.3/r.git", "address literal"),
])
def test_refused_urls(rt, config, url, what):
    sid = f"su-{uuid.uuid4().hex[:8]}"
    r = seed(rt, config, sid, url)
    assert r.rc != 0 and what in r.err and url in r.err, r
    assert left_behind(rt, config, sid) == []
