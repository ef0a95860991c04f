"""containerd with a review workspace (issue 18): the runtime class of
contrib/engines/containerd-config.toml's second handler, a two-line wrapper as the runc v2 shim's
binary (`exec agentsbx --profile=agent-review ... "$@"`: the shim has no per-handler flags),
driven by `ctr run --runc-binary WRAPPER` with a bind of a host directory at /workspace. Asserted
from the host: the directory is not written, the container's write is in
<workspacesDir>/<container id>/upper, `agentsbx workspace list` shows the container id (stopped),
and `workspace discard` leaves nothing."""

import json
import os
import subprocess

import pytest

from conftest import IMAGE_FULL, Leaks

pytestmark = pytest.mark.containerd


def test_bind_becomes_review_overlay(containerd, runtime_paths):
    d = os.path.join(containerd.dir, f"review-{os.urandom(3).hex()}")
    os.makedirs(d)
    wsdir, audit = os.path.join(d, "workspaces"), os.path.join(d, "audit")
    config = os.path.join(d, "config.json")
    with open(config, "w") as f:
        json.dump({"workspacesDir": wsdir}, f)
    wrapper = os.path.join(d, "agentsbx-review")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec {runtime_paths["agentsbx"]} --profile=agent-review --config={config} '
                f'--audit-dir={audit} "$@"\n')
    os.chmod(wrapper, 0o755)
    vol = os.path.join(d, "vol")
    os.makedirs(vol)
    with open(os.path.join(vol, "a"), "w") as f:
        f.write("hello\n")
    root = containerd.rt_roots["agentsbx"]
    leaks = Leaks([containerd.dir])
    cid = f"ctr-review-{os.getpid()}-{os.urandom(2).hex()}"
    leaks.track(cid, os.path.join(root, containerd.ns))
    r = containerd.ctr("run", "--rm", "--runtime", "io.containerd.runc.v2", "--runc-binary", wrapper,
                       "--runc-root", root, "--mount", f"type=bind,src={vol},dst=/workspace,options=rbind:rw",
                       IMAGE_FULL, cid, "sh", "-c", "cat /workspace/a; echo n > /workspace/n; ls /workspace",
                       check=False, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r
    assert r.stdout.split() == ["hello", "a", "n"], r
    assert sorted(os.listdir(vol)) == ["a"]
    with open(os.path.join(wsdir, cid, "upper", "n")) as f:
        assert f.read() == "n\n"
    with open(os.path.join(wsdir, cid, "meta.json")) as f:
        m = json.load(f)
    assert m["state"] == "stopped" and m["workspace"] == os.path.realpath(vol), m

    def ws(*args):
        return subprocess.run([runtime_paths["agentsbx"], "--config", config, "--audit-dir", audit, "workspace",
                               *args], capture_output=True, text=True)
    ls = ws("list")
    assert ls.returncode == 0 and cid in ls.stdout and "stopped" in ls.stdout.split(cid, 1)[1].splitlines()[0], ls
    x = ws("discard", cid)
    assert x.returncode == 0, x
    assert not os.path.exists(os.path.join(wsdir, cid))
    leaks.check()
