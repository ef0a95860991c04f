"""Podman with a review workspace (issue 18): the runtime class's ceiling is the built-in
`agent-review` (`--runtime-flag profile=agent-review`); the volume at /workspace becomes the
overlay. Asserted from the host: the volume's directory is not written, the container's writes are
in <workspacesDir>/<container id>/upper, meta.json says stopped after `podman run --rm`, and
`agentsbx workspace discard` leaves nothing.

Uses the private Podman of test_podman.py (its Podman class and module fixture)."""

import json
import os
import subprocess

import pytest

from conftest import IMAGE, Leaks, rt_root_dirs
from test_podman import podman  # noqa: F401  (the module-scoped private podman fixture)

pytestmark = pytest.mark.podman


def test_volume_becomes_review_overlay(podman, runtime_paths):  # noqa: F811
    leaks = Leaks([podman.dir], ignore_mounts=[os.path.join(podman.dir, "graph", "overlay")])
    audit = os.path.join(podman.dir, "audit")
    wsdir = os.path.join(podman.dir, "workspaces")
    config = os.path.join(podman.dir, "review-config.json")
    with open(config, "w") as f:
        json.dump({"workspacesDir": wsdir}, f)
    vol = os.path.join(podman.dir, "vol")
    os.makedirs(vol, exist_ok=True)
    with open(os.path.join(vol, "a"), "w") as f:
        f.write("hello\n")
    cidfile = os.path.join(podman.dir, f"cid-{os.urandom(4).hex()}")
    r = podman.cli("--runtime-flag", "profile=agent-review", "--runtime-flag", f"audit-dir={audit}",
                   "--runtime-flag", f"config={config}", "run", "--rm", "--runtime", "agentsbx", "--network", "none",
                   "--no-hosts", "--cidfile", cidfile, "-v", f"{vol}:/workspace", IMAGE, "sh", "-c",
                   "cat /workspace/a; echo n > /workspace/n; rm /workspace/a; ls /workspace",
                   check=False, stdin=subprocess.DEVNULL)
    with open(cidfile) as f:
        cid = f.read().strip()
    leaks.track(cid, rt_root_dirs("agentsbx"))
    assert r.returncode == 0, r
    assert r.stdout.split() == ["hello", "n"], r
    assert sorted(os.listdir(vol)) == ["a"]
    with open(os.path.join(wsdir, cid, "upper", "n")) as f:
        assert f.read() == "n\n"
    with open(os.path.join(wsdir, cid, "meta.json")) as f:
        m = json.load(f)
    assert m["state"] == "stopped" and m["workspace"] == os.path.realpath(vol), m
    d = subprocess.run([runtime_paths["agentsbx"], "--config", config, "workspace", "discard", cid], capture_output=True, text=True)
    assert d.returncode == 0, d
    assert not os.path.exists(os.path.join(wsdir, cid))
    leaks.check()
