"""The Docker runtime class of issue 6: a runtime declared in daemon.json with
`runtimeArgs: ["--profile=agent"]` applies the agent profile to a plain `docker run` (no
annotation, no flag on the docker command line). Asserted from inside the container (read-only
/etc, syscall groups refused, capabilities narrowed) and from the audit log the monitor wrote.

Uses the private dockerd of test_docker.py (its Docker class) with one more runtime; the daemon
is this module's own, so it never disturbs test_docker's.
"""

import json
import os
import tempfile

import pytest

from conftest import IMAGE, Leaks
from test_docker import Docker, running_docker

pytestmark = pytest.mark.docker

# Docker's default capabilities ∩ the agent profile's capabilities.allow, minus CAP_CHOWN and
# CAP_FSETID (no user namespace: no file on a volume may be given away or keep a setuid bit,
# runtime/policy_hostfiles.c): DAC_OVERRIDE FOWNER KILL SETGID SETUID NET_BIND_SERVICE
# (bits 1 3 5 6 7 10)
AGENT_CAPS = 0x4EA


class PolicyDocker(Docker):
    def config(self, live_restore=False):
        c = super().config(live_restore)
        c["runtimes"]["agentsbx-agent"] = {
            "path": self.runtime_paths["agentsbx"],
            "runtimeArgs": ["--profile=agent", "--audit-dir=" + self.audit_dir],
        }
        return c


@pytest.fixture(scope="module")
def pdocker(eng_dir, runtime_paths, rootfs_tar):
    yield from running_docker(PolicyDocker, "dkp-", eng_dir, runtime_paths, rootfs_tar)


def run_agent(pdocker, leaks, script):
    cidfile = os.path.join(pdocker.dir, f"cid.{os.urandom(3).hex()}")
    r = pdocker.cli("run", "--rm", "--runtime=agentsbx-agent", "--network", "none", "--cidfile", cidfile,
                    IMAGE, "sh", "-c", script, check=False)
    with open(cidfile) as f:
        cid = leaks.track(f.read().strip(), *pdocker.state_roots())
    os.unlink(cidfile)
    return r, cid


def test_runtime_class_applies_agent_profile(pdocker):
    leaks = Leaks([pdocker.dir])
    r, cid = run_agent(pdocker, leaks, "; ".join([
        "touch /etc/asbx-x 2>/dev/null && echo etc=writable || echo etc=refused",
        "unshare -U true 2>/dev/null && echo userns=allowed || echo userns=refused",
        "grep CapEff /proc/self/status",
        "echo done",
    ]))
    assert r.returncode == 0 and "done" in r.stdout, r
    assert "etc=refused" in r.stdout, r.stdout
    assert "userns=refused" in r.stdout, r.stdout
    capeff = int(r.stdout.split("CapEff:")[1].split()[0], 16)
    assert capeff == AGENT_CAPS, hex(capeff)
    # the monitor's audit log for this container id: policy from the runtime class, the denial
    log = os.path.join(pdocker.audit_dir, f"{cid}.jsonl")
    assert os.path.exists(log), os.listdir(pdocker.audit_dir)
    with open(log) as f:
        recs = [json.loads(x) for x in f.read().splitlines()]
    pol = [x for x in recs if x["event"] == "policy"][-1]
    assert any("agent" in s for s in pol["sources"]), pol
    assert any(x["event"] == "denial" and x.get("syscall") == "unshare" for x in recs), recs
    assert any(x["event"] == "lifecycle" and x.get("state") == "exited" for x in recs), recs
    leaks.check()


def test_volume_gets_no_setuid_file(pdocker):
    """Issue 13 §1 through a Docker volume (-v HOST:/workspace) under the runtime class: the
    container's root cannot leave a setuid, setgid, device or chowned file on the host directory
    (judged on the host: mode, type, owner, and the copy of id run as uid 65534)."""
    import shutil
    import stat
    import subprocess
    leaks = Leaks([pdocker.dir])
    vol = tempfile.mkdtemp(prefix="vol-", dir=pdocker.dir)
    os.chmod(vol, 0o777)
    shutil.copy("/usr/bin/id", os.path.join(vol, "id"))
    cidfile = os.path.join(pdocker.dir, f"cid.{os.urandom(3).hex()}")
    r = pdocker.cli("run", "--rm", "--runtime=agentsbx-agent", "--network", "none", "--cidfile", cidfile,
                    "-v", f"{vol}:/workspace", IMAGE, "sh", "-c",
                    "cd /workspace; cp id x; chmod 4755 x; cp id y; chmod 2755 y; mkdir d; chmod g+s d; "
                    "touch o; chown 12345:12345 o; mknod c c 1 3; echo done", check=False)
    with open(cidfile) as f:
        leaks.track(f.read().strip(), *pdocker.state_roots())
    os.unlink(cidfile)
    assert r.returncode == 0 and "done" in r.stdout, r
    for name in ("x", "y", "d", "o", "c"):
        p = os.path.join(vol, name)
        if not os.path.lexists(p):
            continue
        st = os.lstat(p)
        assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), (name, oct(st.st_mode))
        assert not stat.S_ISCHR(st.st_mode), name
        assert (st.st_uid, st.st_gid) == (0, 0), (name, st.st_uid, st.st_gid)
    if shutil.which("setpriv"):
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              os.path.join(vol, "x")], capture_output=True, text=True).stdout
        assert "euid=" not in out, out
    leaks.check()


def test_plain_runtime_stays_plain(pdocker):
    """control: the same daemon's plain agentsbx runtime applies no profile (Docker's own caps)"""
    leaks = Leaks([pdocker.dir])
    cidfile = os.path.join(pdocker.dir, f"cid.{os.urandom(3).hex()}")
    r = pdocker.cli("run", "--rm", "--runtime=agentsbx", "--network", "none", "--cidfile", cidfile,
                    IMAGE, "sh", "-c", "touch /etc/asbx-x && echo etc=writable; grep CapEff /proc/self/status",
                    check=False)
    with open(cidfile) as f:
        leaks.track(f.read().strip(), *pdocker.state_roots())
    os.unlink(cidfile)
    assert r.returncode == 0 and "etc=writable" in r.stdout, r
    assert int(r.stdout.split("CapEff:")[1].split()[0], 16) & (1 << 13), r.stdout  # NET_RAW kept
    leaks.check()


# one query for unlisted.invalid in class CH to 127.0.0.1:53 from inside: only a DNS stub answers
# there, at once (class IN would wait for the agent profile's approvals `ask`)
DNS = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); "
       "q = bytes.fromhex('abcd01000001000000000000') + b'\\x08unlisted\\x07invalid\\x00\\x00\\x01\\x00\\x03'; "
       "s.sendto(q, ('127.0.0.1', 53)); print('dns-rcode=%d' % (s.recv(512)[3] & 15))")


def test_network_container_shares_the_egress(pdocker):
    """`docker run --network container:X` under the runtime class: the second container joins X's
    network namespace by path (after Docker's prestart hook) and uses X's egress
    (runtime/egress_share.h): its own DNS query is answered by X's stub and decided in X's log."""
    leaks = Leaks([pdocker.dir])
    r = pdocker.cli("run", "-d", "--runtime=agentsbx-agent", "--network", "none", IMAGE, "sleep", "600",
                    check=False)
    assert r.returncode == 0, r
    owner = leaks.track(r.stdout.strip(), *pdocker.state_roots())
    try:
        r = pdocker.cli("run", "--rm", "--runtime=agentsbx-agent", "--network", f"container:{owner}", IMAGE,
                        "python3", "-c", DNS, check=False)
        assert r.returncode == 0 and "dns-rcode=5" in r.stdout, r
        with open(os.path.join(pdocker.audit_dir, f"{owner}.jsonl")) as f:
            recs = [json.loads(x) for x in f.read().splitlines()]
        assert [x for x in recs if x["event"] == "dns" and x["host"] == "unlisted.invalid"
                and x["decision"] == "refused"], recs
    finally:
        pdocker.cli("rm", "-f", owner, check=False)
    leaks.check()
