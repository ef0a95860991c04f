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


# one query for unlisted.invalid in class CH to 127.0.0.1:53 from inside: only a DNS stub answers
# there, at once (class IN would wait for the agent profile's approvals `ask`)
DNS = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); "
       "q = bytes.fromhex('abcd01000001000000000000') + b'\\x08unlisted\\x07invalid\\x00\\x00\\x01\\x00\\x03'; "
       "s.sendto(q, ('127.0.0.1', 53)); print('dns-rcode=%d' % (s.recv(512)[3] & 15))")


def test_network_container_shares_the_egress(podman):  # noqa: F811
    """`--network container:X` (as a Podman pod's containers join the infra container's) under
    the agent profile: the second container joins the first's network namespace by path and uses
    its egress (runtime/egress_share.h): its own DNS query is answered by the first's stub and
    decided in the first's log; a narrower network policy for a third one is refused at create,
    naming the field, with nothing left."""
    leaks = Leaks([podman.dir], ignore_mounts=[os.path.join(podman.dir, "graph", "overlay")])
    audit = os.path.join(podman.dir, "audit-share")
    flags = ["--runtime-flag", "profile=agent", "--runtime-flag", f"audit-dir={audit}"]
    r = podman.cli(*flags, "run", "-d", "--runtime", "agentsbx", "--network", "none", "--no-hosts",
                   IMAGE, "sleep", "600", check=False)
    assert r.returncode == 0, r
    owner = leaks.track(r.stdout.strip(), rt_root_dirs("agentsbx"))
    try:
        r = podman.cli(*flags, "run", "--rm", "--runtime", "agentsbx", "--network", f"container:{owner}",
                       "--no-hosts", IMAGE, "python3", "-c", DNS, check=False)
        assert r.returncode == 0 and "dns-rcode=5" in r.stdout, r
        assert [x for x in records(audit, owner) if x["event"] == "dns" and x["host"] == "unlisted.invalid"
                and x["decision"] == "refused"], records(audit, owner)
        shared = [f for f in os.listdir(audit) if f.endswith(".jsonl") and not f.startswith(owner)]
        pols = [x for f in shared for x in records(audit, f[:-6]) if x["event"] == "policy"]
        assert [p for p in pols if p.get("egressOwner") == owner], pols
        narrow = {"version": 1, "extends": "agent", "network": {"ports": [443]}}
        r = podman.cli(*flags, "run", "--rm", "--runtime", "agentsbx", "--network", f"container:{owner}",
                       "--no-hosts", "--annotation", annotation("io.agentsbx.policy", json.dumps(narrow)),
                       IMAGE, "true", check=False)
        assert r.returncode != 0 and "network.ports" in r.stderr and owner in r.stderr, r
    finally:
        podman.cli("rm", "-f", "-t", "0", owner, check=False)
    leaks.check()
