"""Docker with a review workspace (issue 18): a runtime class declared in daemon.json with
`runtimeArgs: ["--profile=agent-review", ...]` (the built-in profile whose
filesystem.workspace.mode is "review"); a plain `docker run -v HOST:/workspace` on it gets the
overlay. Asserted from the host: the volume's directory is not written, the container's writes
are in <workspacesDir>/<container id>/upper, `agentsbx workspace list` shows the container id
(stopped) after `docker run --rm`, `workspace diff` names the changes, and `workspace discard`
leaves nothing.

Uses a private dockerd of test_docker.py's Docker class with one more runtime; the daemon is this
module's own."""

import json
import os
import subprocess

import pytest

from conftest import IMAGE, Leaks
from test_docker import Docker, running_docker

pytestmark = pytest.mark.docker


class ReviewDocker(Docker):
    def __init__(self, d, runtime_paths):
        super().__init__(d, runtime_paths)
        self.wsdir = os.path.join(d, "workspaces")
        self.host_config = os.path.join(d, "review-config.json")
        with open(self.host_config, "w") as f:
            json.dump({"workspacesDir": self.wsdir}, f)

    def config(self, live_restore=False):
        c = super().config(live_restore)
        c["runtimes"]["agentsbx-review"] = {
            "path": self.runtime_paths["agentsbx"],
            "runtimeArgs": ["--profile=agent-review", "--audit-dir=" + self.audit_dir,
                            "--config=" + self.host_config],
        }
        return c

    def workspace(self, *args):
        return subprocess.run([self.runtime_paths["agentsbx"], "--config", self.host_config, "--audit-dir",
                               self.audit_dir, "workspace", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def rdocker(eng_dir, runtime_paths, rootfs_tar):
    yield from running_docker(ReviewDocker, "dkr-", eng_dir, runtime_paths, rootfs_tar)


def test_volume_becomes_review_overlay(rdocker):
    leaks = Leaks([rdocker.dir], ignore_mounts=[os.path.join(rdocker.data_root, "overlay2")])
    vol = os.path.join(rdocker.dir, "vol")
    os.makedirs(vol, exist_ok=True)
    with open(os.path.join(vol, "a"), "w") as f:
        f.write("hello\n")
    before = {n: os.lstat(os.path.join(vol, n)).st_mtime_ns for n in os.listdir(vol)}
    cidfile = os.path.join(rdocker.dir, f"cid-{os.urandom(4).hex()}")
    r = rdocker.cli("run", "--rm", "--runtime=agentsbx-review", "--network", "none", "--cidfile", cidfile,
                    "-v", f"{vol}:/workspace", IMAGE, "sh", "-c",
                    "cat /workspace/a; echo n > /workspace/n; echo more >> /workspace/a; ls /workspace",
                    check=False, stdin=subprocess.DEVNULL)
    with open(cidfile) as f:
        cid = leaks.track(f.read().strip(), *rdocker.state_roots())
    assert r.returncode == 0, r
    assert r.stdout.split() == ["hello", "a", "n"], r
    # the host directory: as it was
    assert {n: os.lstat(os.path.join(vol, n)).st_mtime_ns for n in os.listdir(vol)} == before
    with open(os.path.join(vol, "a")) as f:
        assert f.read() == "hello\n"
    # the changes: in the upper kept under the container id
    with open(os.path.join(rdocker.wsdir, cid, "upper", "n")) as f:
        assert f.read() == "n\n"
    with open(os.path.join(rdocker.wsdir, cid, "meta.json")) as f:
        m = json.load(f)
    assert m["state"] == "stopped" and m["workspace"] == os.path.realpath(vol), m
    ls = rdocker.workspace("list")
    assert ls.returncode == 0 and cid in ls.stdout and "stopped" in ls.stdout.split(cid, 1)[1].splitlines()[0], ls
    d = rdocker.workspace("diff", "--json", cid)
    assert d.returncode == 0, d
    ops = {x["path"]: x["op"] for x in map(json.loads, d.stdout.splitlines()) if "path" in x}
    assert ops == {"a": "modified", "n": "added"}, d.stdout
    x = rdocker.workspace("discard", cid)
    assert x.returncode == 0, x
    assert not os.path.exists(os.path.join(rdocker.wsdir, cid))
    assert cid not in rdocker.workspace("list").stdout
    leaks.check()
