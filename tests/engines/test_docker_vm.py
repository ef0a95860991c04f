"""The vm isolation tier through an engine (issue 22): a Docker runtime class whose runtimeArgs are
`--isolation=vm --vm-user=UID:GID --policy=FILE` runs every container in a QEMU microVM with its
own kernel (runtime/vm_supervisor.h: create boots the VM, the supervisor is the container's pid,
Docker's shim reaps it and takes its status).

Observed from outside: `uname -r` inside is the guest kernel's, not the host's; the process's exit
status is `docker run`'s; a detached container is `running` for Docker, `docker stop` delivers
SIGTERM to the process inside the VM (its trap's exit status comes back), `docker rm` leaves no
state dir, no <root>/vm/<id>, no process, no mount; `docker kill` gives 137 and the shim's delete
removes what the killed VM left. Three boots in all (TCG: 10-20 s each).

Docker 20.10 (Debian 12) has no `--annotation`: the policy (network none; a policy without a
network part is `open`, which the tier refuses) is the runtime class's ceiling.
"""

import json
import os
import shutil
import subprocess

import pytest

from conftest import IMAGE, TOP, Leaks, wait_for
from test_docker import Docker, running_docker

pytestmark = pytest.mark.docker

CACHE = os.environ.get("AGENTSBX_VM_CACHE", "/var/cache/agentsbx-vm")
# QEMU's ids for Docker's root-owned bundles (runtime/vm_jail.h); no account on the host uses them
VM_USER = "47313:47313"
RT = "agentsbx-vm"


def _need_vm():
    """qemu and the guest kernel (fetched once, as tests/integration/test_vm.py does)."""
    why = None
    if not shutil.which("qemu-system-x86_64"):
        why = "qemu-system-x86_64 not installed (apt-get install -y qemu-system-x86)"
    else:
        r = subprocess.run([os.path.join(TOP, "contrib", "vm", "fetch-kernel.sh"), CACHE],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            why = f"no guest kernel in {CACHE}: fetch-kernel.sh failed: {r.stderr.strip()[-300:]}"
    if why and os.environ.get("CI"):
        pytest.fail(why)
    if why:
        pytest.skip(why)


class VmDocker(Docker):
    def config(self, live_restore=False):
        c = super().config(live_restore)
        pol = os.path.join(self.dir, "vm-policy.json")
        with open(pol, "w") as f:
            json.dump({"version": 1, "network": {"mode": "none"}}, f)
        c["runtimes"][RT] = {
            "path": self.runtime_paths["agentsbx"],
            "runtimeArgs": ["--isolation=vm", "--vm-user=" + VM_USER, "--policy=" + pol],
        }
        return c

    def vm_root(self, cid):
        """the --root Docker passed for the container (where its state dir is)"""
        roots = [r for r in self.state_roots() if os.path.isdir(os.path.join(r, cid))]
        assert roots, (cid, self.state_roots())
        return roots[0]


@pytest.fixture(scope="module")
def vdocker(eng_dir, runtime_paths, rootfs_tar):
    _need_vm()
    yield from running_docker(VmDocker, "dkv-", eng_dir, runtime_paths, rootfs_tar)


def _cid(vdocker, leaks, cidfile):
    with open(cidfile) as f:
        cid = f.read().strip()
    os.unlink(cidfile)
    return leaks.track(cid, *vdocker.state_roots())


def _nothing_left(vdocker, cid):
    for root in vdocker.state_roots():
        assert not os.path.exists(os.path.join(root, "vm", cid)), "the VM's run directory was left"


def test_vm_tier_runs_the_guest_kernel_and_returns_the_status(vdocker):
    leaks = Leaks([vdocker.dir])
    cidfile = os.path.join(vdocker.dir, "cid.vm-fg")
    r = vdocker.cli("run", "--rm", f"--runtime={RT}", "--network", "none", "--cidfile", cidfile, IMAGE,
                    "sh", "-c", "echo release=$(uname -r); echo out-line; echo err-line >&2; exit 7",
                    check=False, stdin=subprocess.DEVNULL)
    cid = _cid(vdocker, leaks, cidfile)
    assert r.returncode == 7, r
    release = [x.split("=", 1)[1] for x in r.stdout.splitlines() if x.startswith("release=")]
    assert release and release[0], r.stdout
    assert release[0] != os.uname().release, (release, os.uname().release)
    assert "out-line" in r.stdout and "err-line" in r.stderr, r
    leaks.check()
    _nothing_left(vdocker, cid)


def test_vm_tier_detached_stop_and_remove(vdocker):
    leaks = Leaks([vdocker.dir])
    cidfile = os.path.join(vdocker.dir, "cid.vm-bg")
    # the shell forwards nothing by itself: its TERM trap is what `docker stop` must reach
    r = vdocker.cli("run", "-d", f"--runtime={RT}", "--network", "none", "--cidfile", cidfile, IMAGE,
                    "sh", "-c", "trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 1; done",
                    check=False, stdin=subprocess.DEVNULL)
    cid = _cid(vdocker, leaks, cidfile)
    assert r.returncode == 0, r
    st = json.loads(vdocker.cli("inspect", cid).stdout)[0]["State"]
    assert st["Status"] == "running" and st["Pid"] > 0, st
    # the runtime's own view: running, the supervisor's pid (the one Docker reports)
    state = json.loads(subprocess.run([vdocker.runtime_paths["agentsbx"], "--root", vdocker.vm_root(cid), "state", cid],
                                      capture_output=True, text=True, check=True).stdout)
    assert state["status"] == "running" and state["pid"] == st["Pid"], (state, st)
    # exec is refused with the tier's error, nothing runs on the host
    ex = vdocker.cli("exec", cid, "true", check=False)
    assert ex.returncode != 0 and "vm tier" in (ex.stdout + ex.stderr), ex
    # the trap is set once "ready" is out (a TERM before it is ignored by the namespace's init)
    wait_for(lambda: "ready" in vdocker.cli("logs", cid).stdout, "the container's trap to be set")
    vdocker.cli("stop", "-t", "60", cid)
    code = vdocker.cli("wait", cid).stdout.strip()
    assert code == "3", code
    logs = vdocker.cli("logs", cid)
    assert "ready" in logs.stdout and "got-term" in logs.stdout, logs
    vdocker.cli("rm", cid)
    leaks.check()
    _nothing_left(vdocker, cid)


def test_vm_tier_docker_kill(vdocker):
    """`docker kill` (SIGKILL: the supervisor dies and QEMU with it) gives 137, and the shim's
    delete removes the VM's run directory the supervisor could not"""
    leaks = Leaks([vdocker.dir])
    cidfile = os.path.join(vdocker.dir, "cid.vm-kill")
    r = vdocker.cli("run", "-d", f"--runtime={RT}", "--network", "none", "--cidfile", cidfile, IMAGE,
                    "sleep", "1000", check=False, stdin=subprocess.DEVNULL)
    cid = _cid(vdocker, leaks, cidfile)
    assert r.returncode == 0, r
    assert json.loads(vdocker.cli("inspect", cid).stdout)[0]["State"]["Status"] == "running"
    vdocker.cli("kill", cid)
    code = vdocker.cli("wait", cid).stdout.strip()
    assert code == "137", code
    vdocker.cli("rm", "-f", cid)
    leaks.check()
    _nothing_left(vdocker, cid)
