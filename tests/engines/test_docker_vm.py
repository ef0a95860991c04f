"""The vm isolation tier through an engine (issue 22): a Docker runtime class whose runtimeArgs are
`--isolation=vm --vm-user=UID:GID --policy=FILE` runs every container in a QEMU microVM with its
own kernel (runtime/vm_supervisor.h: create boots the VM, the supervisor is the container's pid,
Docker's shim reaps it and takes its status).

Observed from outside: `uname -r` inside is the guest kernel's, not the host's; the process's exit
status is `docker run`'s; a detached container is `running` for Docker, `docker stop` delivers
SIGTERM to the process inside the VM (its trap's exit status comes back), `docker rm` leaves no
state dir, no <root>/vm/<id>, no process, no mount; `docker kill` gives 137 and the shim's delete
removes what the killed VM left. With Docker's default bridge network (a bridge of this module's
own, an upstream namespace on it): `docker run` works end to end, and under network.mode filtered
the policy's table and QEMU are in the namespace Docker wired, an unlisted name is refused by the
host side's stub and never asked upstream. Five boots in all (TCG: 10-20 s each).

Docker 20.10 (Debian 12) has no `--annotation`: the policy (network none; a policy without a
network part is `open`, which the tier refuses) is the runtime class's ceiling.
"""

import json
import os
import shutil
import subprocess
import sys

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
    # docker exec runs in the guest (runtime/vm_exec.h): its kernel, its output and status back
    ex = vdocker.cli("exec", cid, "sh", "-c", "uname -r; echo exec-err >&2; exit 6", check=False)
    assert ex.returncode == 6, ex
    assert len(ex.stdout.split()) == 1 and ex.stdout.strip() != os.uname().release, ex
    assert "exec-err" in ex.stderr, ex
    # stdin through `docker exec -i`, and `exec -d` (the shim reaps the host relay)
    cat = vdocker.cli("exec", "-i", cid, "cat", input="through-stdin\n", stdin=None, check=False)
    assert cat.returncode == 0 and cat.stdout == "through-stdin\n", cat
    assert vdocker.cli("exec", "-d", cid, "sh", "-c", "echo bg > /tmp/exec-d").returncode == 0
    wait_for(lambda: vdocker.cli("exec", cid, "cat", "/tmp/exec-d", check=False).stdout == "bg\n",
             "the detached exec's file")
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


# ---- network.mode filtered with Docker's default bridge network ----

BRIDGE = "asbxvm69"          # this module's own bridge (the range given to this work: 10.69.0.0/16)
BRIDGE_ADDR = "10.69.0.1/24"
UPNS = "asbxvm69up"          # the fake internet (tests/integration/egress/upstream.py) on the bridge
UPADDR = "10.69.0.2"
RT_F = "agentsbx-vm-filtered"
# an unlisted name asked of slirp's resolver (10.0.2.3: the host side's stub) from inside the VM
GUEST_DNS = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(20); "
             "q = bytes.fromhex('abcd01000001000000000000') + b'\\x08unlisted\\x07invalid\\x00\\x00\\x01\\x00\\x01'; "
             "s.sendto(q, ('10.0.2.3', 53)); print('dns-rcode=%d' % (s.recv(512)[3] & 15), flush=True)")

GUEST_DIRECT = ("import socket\ntry:\n socket.create_connection(('" + UPADDR + "', 80), timeout=20); print('direct=open')"
                "\nexcept Exception as e:\n print('direct=' + type(e).__name__, flush=True)")


class BridgeVmDocker(VmDocker):
    """VmDocker with a default bridge network on BRIDGE (no iptables, no forwarding, no NAT: the
    container's eth0 reaches the addresses on the bridge and nothing else) and a runtime class
    whose policy is network.mode filtered; the stub's upstream is UPADDR"""

    def __init__(self, d, runtime_paths):
        super().__init__(d, runtime_paths)
        self.daemon_env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=UPADDR)

    def config(self, live_restore=False):
        c = super().config(live_restore)
        c["bridge"] = BRIDGE
        pol = os.path.join(self.dir, "vm-filtered.json")
        with open(pol, "w") as f:
            json.dump({"version": 1, "network": {"mode": "filtered", "allowedDomains": ["allowed.invalid"],
                                                 "ports": [80]},
                       "audit": {"events": ["lifecycle", "network", "dns"]}}, f)
        c["runtimes"][RT_F] = {
            "path": self.runtime_paths["agentsbx"],
            "runtimeArgs": ["--isolation=vm", "--vm-user=" + VM_USER, "--policy=" + pol,
                            "--audit-dir=" + self.audit_dir],
        }
        return c


def _sh(*argv):
    subprocess.run(argv, check=True)


@pytest.fixture(scope="module")
def bdocker(eng_dir, runtime_paths, rootfs_tar, tmp_path_factory):
    """the bridge, an upstream namespace on it (a veth, no route beyond the bridge's /24) running
    upstream.py with allowed.invalid -> UPADDR, and the daemon"""
    _need_vm()
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode == 0:
        pytest.fail(f"{BRIDGE} exists already (a previous run's?)")
    st = tmp_path_factory.mktemp("vm-upstream")
    zone = st / "zone.json"
    zone.write_text(json.dumps({"allowed.invalid": {"A": [UPADDR]}, "other.invalid": {"A": [UPADDR]}}))
    up = None
    _sh("ip", "link", "add", BRIDGE, "type", "bridge")
    try:
        _sh("ip", "addr", "add", BRIDGE_ADDR, "dev", BRIDGE)
        _sh("ip", "link", "set", BRIDGE, "up")
        _sh("ip", "netns", "add", UPNS)
        _sh("ip", "link", "add", "asbxvm69u", "type", "veth", "peer", "name", "eth0", "netns", UPNS)
        _sh("ip", "link", "set", "asbxvm69u", "master", BRIDGE, "up")
        _sh("ip", "-n", UPNS, "addr", "add", UPADDR + "/24", "dev", "eth0")
        _sh("ip", "-n", UPNS, "link", "set", "eth0", "up")
        _sh("ip", "-n", UPNS, "link", "set", "lo", "up")
        up = subprocess.Popen(["ip", "netns", "exec", UPNS, sys.executable,
                               os.path.join(TOP, "tests", "integration", "egress", "upstream.py"), str(st), str(zone)],
                              stdout=subprocess.DEVNULL, stderr=open(st / "upstream.err", "w"))
        wait_for(lambda: (st / "ready").exists() or up.poll() is not None, "the upstream to bind")
        assert up.poll() is None, (st / "upstream.err").read_text()
        for dk in running_docker(BridgeVmDocker, "dkb-", eng_dir, runtime_paths, rootfs_tar):
            dk.upstream_state = st
            yield dk
    finally:
        if up:
            up.terminate()
            up.wait()
        subprocess.run(["ip", "netns", "del", UPNS], check=False)
        subprocess.run(["ip", "link", "del", BRIDGE], check=False)


def _netns(pid):
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def test_vm_tier_filtered_on_the_bridge_network(bdocker):
    """`docker run` of the vm tier under network.mode filtered on Docker's default bridge network:
    the container's namespace (Docker wired eth0 on the bridge into it) holds the policy's table
    and QEMU; the guest's unlisted name is refused by the host side's stub (a `dns` record in the
    host's audit log); the process's status comes back; `docker rm` leaves nothing."""
    leaks = Leaks([bdocker.dir])
    cidfile = os.path.join(bdocker.dir, "cid.vm-bridge")
    r = bdocker.cli("run", "-d", f"--runtime={RT_F}", "--cidfile", cidfile, IMAGE, "sh", "-c",
                    f"cat /etc/resolv.conf; python3 -c \"{GUEST_DNS}\"; python3 -c \"{GUEST_DIRECT}\"; "
                    "echo done; while :; do sleep 1; done",
                    check=False, stdin=subprocess.DEVNULL)
    cid = _cid(bdocker, leaks, cidfile)
    assert r.returncode == 0, r
    st = json.loads(bdocker.cli("inspect", cid).stdout)[0]
    assert st["State"]["Status"] == "running", st["State"]
    sup = st["State"]["Pid"]
    addr = st["NetworkSettings"]["IPAddress"]
    assert addr.startswith("10.69.0."), st["NetworkSettings"]
    wait_for(lambda: "done" in bdocker.cli("logs", cid).stdout, "the guest's DNS query")
    out = bdocker.cli("logs", cid)
    logs = out.stdout
    with open(os.path.join(bdocker.audit_dir, f"{cid}.jsonl")) as f:
        recs = [json.loads(x) for x in f.read().splitlines()]
    assert "dns-rcode=5" in logs, (out, recs)  # REFUSED by the host side's stub
    assert "nameserver 10.0.2.3" in logs, logs  # slirp's resolver: the host side's stub
    assert "direct=ConnectionRefusedError" in logs, logs  # the upstream's address dialled directly
    ql = bdocker.upstream_state / "queries.log"
    names = {x.split()[0] for x in ql.read_text().splitlines()} if ql.exists() else set()
    assert "unlisted.invalid" not in names, names  # the unlisted name never left
    # the namespace Docker wired: its eth0 holds the bridge address, the table, and QEMU
    ns = ["nsenter", f"--net=/proc/{sup}/ns/net"]
    link = subprocess.run(ns + ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True)
    assert addr in link.stdout, link.stdout
    table = subprocess.run(ns + ["nft", "list", "table", "inet", "agentsbx"], capture_output=True, text=True)
    assert table.returncode == 0 and "policy drop" in table.stdout, table
    with open(os.path.join(bdocker.vm_root(cid), cid, "vm-qemu")) as f:
        qemu = int(f.read().split()[0])
    assert _netns(qemu) == _netns(sup) != _netns(os.getpid())
    assert [x for x in recs if x["event"] == "dns" and x["host"] == "unlisted.invalid"
            and x["decision"] == "refused"], recs
    bdocker.cli("rm", "-f", cid)
    leaks.check()
    _nothing_left(bdocker, cid)
    for root in bdocker.state_roots():
        d = os.path.join(root, "@egress")
        assert not os.path.isdir(d) or set(os.listdir(d)) <= {"lock"}, os.listdir(d)


def test_vm_tier_bridge_network_end_to_end(bdocker):
    """the bridge network under the class whose policy is network.mode none: `docker run` of the
    vm tier with Docker's network hooks acting on the supervisor's namespace, and the status
    comes back"""
    leaks = Leaks([bdocker.dir])
    cidfile = os.path.join(bdocker.dir, "cid.vm-bridge-none")
    r = bdocker.cli("run", "--rm", f"--runtime={RT}", "--cidfile", cidfile, IMAGE, "sh", "-c", "exit 5",
                    check=False, stdin=subprocess.DEVNULL)
    cid = _cid(bdocker, leaks, cidfile)
    assert r.returncode == 5, r
    leaks.check()
    _nothing_left(bdocker, cid)
