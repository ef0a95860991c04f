"""Podman with the agent-policy annotations (issue 6): `--annotation io.agentsbx.profile=locked`
and `io.agentsbx.policy=<json>` narrow the policy under a ceiling the host gives the runtime
(podman's global `--runtime-flag profile=agent`, passed by conmon to every runtime call).
Asserted from inside (capabilities, /etc, userns) and from the monitor's audit log.

Uses the private Podman of test_podman.py (its Podman class and module fixture)."""

import json
import os

import pytest

from conftest import IMAGE, Leaks, rt_root_dirs
from test_podman import podman  # noqa: F401  (the module-scoped private podman fixture)

pytestmark = pytest.mark.podman

# Under a policy the root is read-only (root.readonly); its mount targets (Podman's /etc/hosts,
# /run/.containerenv, ...) are created before that, as runc does.
# (`podman run --read-only` without a policy still fails: tmpcopyup is not supported.)

# podman defaults ∩ locked, minus CHOWN and FSETID (rootful, no user namespace: nothing on a volume
# may be given away or keep a setuid bit, runtime/policy_hostfiles.c): DAC_OVERRIDE FOWNER KILL
# SETGID SETUID
LOCKED_CAPS = 0xEA
AGENT_CAPS = 0x4EA   # ... ∩ agent: the same + NET_BIND_SERVICE


def prun(podman, leaks, audit, *args):  # noqa: F811
    cidfile = os.path.join(podman.dir, f"cid-{os.urandom(4).hex()}")
    r = podman.cli("--runtime-flag", "profile=agent", "--runtime-flag", f"audit-dir={audit}",
                   "run", "--rm", "--runtime", "agentsbx", "--network", "none", "--no-hosts", "--cidfile", cidfile,
                   *args, check=False, stdin=__import__("subprocess").DEVNULL)
    cid = None
    if os.path.exists(cidfile):
        with open(cidfile) as f:
            cid = f.read().strip()
        os.unlink(cidfile)
        leaks.track(cid, rt_root_dirs("agentsbx"))
    return r, cid


def annotation(key, value):
    """podman parses --annotation as one CSV field: quote it, inner quotes doubled"""
    return '"' + f"{key}={value}".replace('"', '""') + '"'


def records(audit, cid):
    with open(os.path.join(audit, f"{cid}.jsonl")) as f:
        return [json.loads(x) for x in f.read().splitlines()]


SCRIPT = ("touch /etc/x 2>/dev/null && echo etc=writable || echo etc=refused; "
          "unshare -U true 2>/dev/null && echo userns=allowed || echo userns=refused; "
          "grep CapEff /proc/self/status")


def capeff(out):
    return int(out.split("CapEff:")[1].split()[0], 16)


def test_ceiling_alone_and_profile_annotation_narrows(podman):  # noqa: F811
    leaks = Leaks([podman.dir], ignore_mounts=[os.path.join(podman.dir, "graph", "overlay")])
    audit = os.path.join(podman.dir, "audit")
    r, cid = prun(podman, leaks, audit, IMAGE, "sh", "-c", SCRIPT)
    assert r.returncode == 0 and "etc=refused" in r.stdout and "userns=refused" in r.stdout, r
    assert capeff(r.stdout) == AGENT_CAPS, r.stdout
    r, cid = prun(podman, leaks, audit, "--annotation", "io.agentsbx.profile=locked", IMAGE, "sh", "-c", SCRIPT)
    assert r.returncode == 0 and "etc=refused" in r.stdout and "userns=refused" in r.stdout, r
    assert capeff(r.stdout) == LOCKED_CAPS, r.stdout
    pol = [x for x in records(audit, cid) if x["event"] == "policy"][-1]
    assert any("locked" in s for s in pol["sources"]) and any("agent" in s for s in pol["sources"]), pol
    leaks.check()


def test_policy_annotation_narrows_and_widening_refused(podman):  # noqa: F811
    leaks = Leaks([podman.dir], ignore_mounts=[os.path.join(podman.dir, "graph", "overlay")])
    audit = os.path.join(podman.dir, "audit")
    # CAP_KILL: CAP_CHOWN would go anyway (no isolating user namespace: issue 13 §1's host-file layer)
    narrow = {"version": 1, "extends": "agent", "capabilities": {"allow": ["CAP_KILL"]}}
    r, cid = prun(podman, leaks, audit, "--annotation", annotation("io.agentsbx.policy", json.dumps(narrow)),
                  IMAGE, "sh", "-c", SCRIPT)
    assert r.returncode == 0 and capeff(r.stdout) == 0x20, r
    wide = {"version": 1, "extends": "agent", "capabilities": {"allow": ["CAP_SYS_ADMIN"]}}
    r, _ = prun(podman, leaks, audit, "--annotation", annotation("io.agentsbx.policy", json.dumps(wide)),
                IMAGE, "true")
    assert r.returncode != 0 and "capabilities" in (r.stderr + r.stdout), r
    leaks.check()
