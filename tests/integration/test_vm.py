"""The vm isolation tier (issue 22; docs/security.md "Isolation tiers"): `isolation: "vm"` runs the
container in a QEMU microvm with Debian's guest kernel (bookworm-backports' 6.12), agentsbx being
the guest's init and applying the same config.json and policy inside.

Needs qemu-system-x86_64 and the guest kernel in /var/cache/agentsbx-vm (or $AGENTSBX_VM_CACHE);
the fixture fetches the kernel with contrib/vm/fetch-kernel.sh (a private apt setup under the
cache: a fresh CI machine fetches it here, once). TCG here (no KVM):
one boot is 10-20 s, so one VM run serves the observations of several tests."""
import ctypes
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import stat
import struct
import time

import pytest

from conftest import TOP

CACHE = os.environ.get("AGENTSBX_VM_CACHE", "/var/cache/agentsbx-vm")
MARKER_PREFIX = "asbx-vm-host-marker-"
MARKER = MARKER_PREFIX + "7391"
# kernel.printk_ratelimit: global (no namespace has its own copy), harmless (seconds between
# rate-limited kernel messages)
SYSCTL = "/proc/sys/kernel/printk_ratelimit"
# the bundles' owner: QEMU runs as the bundle's owner, never as root (docs/security.md
# "Isolation tiers"); an id no account on the host uses
OWNER = 47311

pytestmark = pytest.mark.agentsbx_only("the vm isolation tier is agentsbx's")


# QEMU's host cgroup (runtime/vm_cgroup.h): the guest's -m plus this much for QEMU itself
QEMU_OVERHEAD_MIB = 256
DEFAULT_GUEST_MIB = 512  # -m without a policy memory limit (runtime/vm.c)


def qemu_cgroup(pid):
    """(the cgroup path /proc/<pid>/cgroup names for the memory controller, its memory limit in
    bytes, its pids.max, the directory in the memory hierarchy) as the host's kernel reports them."""
    with open(f"/proc/{pid}/cgroup") as f:
        lines = [ln.split(":", 2) for ln in f.read().splitlines()]
    v1 = {c: p for _, ctl, p in lines for c in ctl.split(",") if ctl}
    if "memory" in v1:
        mdir = "/sys/fs/cgroup/memory" + v1["memory"]
        limit = open(mdir + "/memory.limit_in_bytes").read().strip()
        pids = open("/sys/fs/cgroup/pids" + v1["pids"] + "/pids.max").read().strip()
        return v1["memory"], int(limit), pids, mdir
    path = next(p for _, ctl, p in lines if not ctl)
    mdir = "/sys/fs/cgroup" + path
    return path, int(open(mdir + "/memory.max").read()), open(mdir + "/pids.max").read().strip(), mdir


def _kernel_release():
    """The guest kernel's release as the cache names it, fetching it once if needed."""
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("qemu-system-x86_64 not installed (apt-get install -y qemu-system-x86)")
    r = subprocess.run([os.path.join(TOP, "contrib", "vm", "fetch-kernel.sh"), CACHE],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"no guest kernel in {CACHE}: fetch-kernel.sh failed: {r.stderr.strip()[-300:]}")
    kdir = r.stdout.strip().splitlines()[-1]
    return os.listdir(os.path.join(kdir, "lib", "modules"))[0]


@pytest.fixture(scope="module")
def vm_env(session_dir, subject_binary, busybox_template):
    release = _kernel_release()
    work = tempfile.mkdtemp(prefix="vm-", dir=session_dir)
    os.chmod(work, 0o755)
    yield {"release": release, "work": work, "bin": subject_binary, "rootfs": busybox_template}
    shutil.rmtree(work, ignore_errors=True)


def _bundle(env, name, script, policy, extra_mounts=(), caps=(), devices=False):
    b = os.path.join(env["work"], name)
    os.makedirs(b)
    subprocess.run(["cp", "-a", env["rootfs"], os.path.join(b, "rootfs")], check=True)
    os.makedirs(os.path.join(b, "rootfs", "workspace"))  # a policy with filesystem makes / read-only
    ws = os.path.join(b, "ws")
    os.makedirs(ws)
    subprocess.run([env["bin"], "spec"], cwd=b, check=True)
    with open(os.path.join(b, "config.json")) as f:
        cfg = json.load(f)
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = ["/bin/sh", "-c", script]
    cfg["root"] = {"path": "rootfs", "readonly": False}
    cfg["mounts"].append({"destination": "/workspace", "type": "bind", "source": ws,
                          "options": ["rbind", "rw"]})
    cfg["mounts"] += list(extra_mounts)
    for k in ("bounding", "effective", "permitted"):
        cfg["process"]["capabilities"][k] = sorted(set(cfg["process"]["capabilities"][k]) | set(caps))
    if caps:
        cfg["linux"]["readonlyPaths"] = [p for p in cfg["linux"].get("readonlyPaths", [])
                                         if p != "/proc/sys"]
    if devices:
        cfg["linux"]["resources"]["devices"] = [{"allow": True, "access": "rwm"}]
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(cfg, f)
    subprocess.run(["chown", "-R", f"{OWNER}:{OWNER}", b], check=True)
    pol = os.path.join(b, "policy.json")
    with open(pol, "w") as f:
        json.dump(policy, f)
    return b, ws, pol


def _run(env, b, pol, cid, timeout=300):
    root = os.path.join(env["work"], "state-" + cid)
    t0 = time.monotonic()
    r = subprocess.run([env["bin"], "--root", root, "--policy", pol, "run", "--bundle", b, cid],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    r.seconds = time.monotonic() - t0
    assert not os.path.exists(os.path.join(root, "vm", cid)), "the run's vm directory was left behind"
    return r


@pytest.fixture(scope="module")
def vm_run(vm_env):
    """One VM run; its stdout has one KEY=VALUE line per observation, the script exits 7."""
    with open(SYSCTL) as f:
        host_sysctl = f.read().strip()
    guest_value = "7" if host_sysctl != "7" else "8"
    marker = subprocess.Popen([MARKER, "600"], executable="/bin/sleep")
    try:
        # until the child has exec'd (before, its cmdline is still python's: seen under load)
        deadline, host_sees = time.monotonic() + 10, False
        while not host_sees and time.monotonic() < deadline:
            with open(f"/proc/{marker.pid}/cmdline") as f:
                host_sees = MARKER in f.read()
            if not host_sees:
                time.sleep(0.02)
        script = (
            "echo release=$(uname -r); "
            f"echo marker_pid=$(test -e /proc/{marker.pid}/cmdline && cat /proc/{marker.pid}/cmdline || echo none); "
            # every cmdline into a file first, then grep for the marker spelled so that neither this
            # script's nor grep's own command line holds it
            "cat /proc/[0-9]*/cmdline > /tmp/cmdlines 2>/dev/null; "
            f"echo marker_cmdline=$(tr '\\0' ' ' < /tmp/cmdlines | grep -c {MARKER_PREFIX}$((7000+391))); "
            f"echo {guest_value} > {SYSCTL}; echo sysctl_write=$?; echo sysctl=$(cat {SYSCTL}); "
            "echo from-the-guest > /workspace/written-in-vm; echo ws_write=$?; "
            "exit 7")
        b, ws, pol = _bundle(vm_env, "main", script,
                             {"version": 1, "isolation": "vm", "network": {"mode": "none"}},
                             caps=("CAP_SYS_ADMIN",))
        r = _run(vm_env, b, pol, "vm-main")
        with open(SYSCTL) as f:
            host_after = f.read().strip()
    finally:
        marker.kill()
        marker.wait()
    obs = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    return {"r": r, "obs": obs, "ws": ws, "marker": marker.pid, "host_sees": host_sees, "host_sysctl": host_sysctl,
            "host_after": host_after, "guest_value": guest_value}


def test_features_reports_the_vm_tier(vm_env):
    out = subprocess.run([vm_env["bin"], "features"], capture_output=True, text=True, check=True).stdout
    ann = json.loads(out)["annotations"]
    assert ann["io.agentsbx.isolation"] == "container,vm"
    assert ann["io.agentsbx.isolation.vm.accel"] in ("kvm", "tcg")


def test_exit_status_propagates(vm_run):
    r = vm_run["r"]
    assert r.returncode == 7, f"rc {r.returncode}, stderr: {r.stderr[-2000:]}"


def test_uname_is_the_guest_kernel(vm_run, vm_env):
    rel = vm_run["obs"].get("release")
    assert rel == vm_env["release"], vm_run["r"]
    assert rel != os.uname().release


def test_host_processes_are_invisible(vm_run):
    obs = vm_run["obs"]
    assert vm_run["host_sees"], "the marker process is not visible on the host: the test proves nothing"
    assert obs.get("marker_pid") == "none", obs
    assert obs.get("marker_cmdline") == "0", obs


def test_proc_sys_write_stays_in_the_guest(vm_run):
    obs = vm_run["obs"]
    # the write took effect in the guest's kernel...
    assert obs.get("sysctl_write") == "0", (obs, vm_run["r"].stderr[-2000:])
    assert obs.get("sysctl") == vm_run["guest_value"], obs
    # ...and not in the host's
    assert vm_run["host_after"] == vm_run["host_sysctl"]


def test_workspace_write_reaches_the_host(vm_run):
    assert vm_run["obs"].get("ws_write") == "0"
    with open(os.path.join(vm_run["ws"], "written-in-vm")) as f:
        assert f.read() == "from-the-guest\n"


def test_create_with_a_terminal_is_refused(vm_env):
    """create/start work in the tier (test_vm_lifecycle.py); a terminal is not built: refused
    before anything boots, nothing left"""
    b, _, pol = _bundle(vm_env, "create", "true",
                        {"version": 1, "isolation": "vm", "network": {"mode": "none"}})
    with open(os.path.join(b, "config.json")) as f:
        cfg = json.load(f)
    cfg["process"]["terminal"] = True
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(cfg, f)
    root = os.path.join(vm_env["work"], "state-create")
    r = subprocess.run([vm_env["bin"], "--root", root, "--policy", pol, "create", "--bundle", b, "vm-c"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "process.terminal is not built yet in the vm tier" in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(root, "vm-c"))
    assert not os.path.exists(os.path.join(root, "vm", "vm-c"))


def test_wall_clock_is_enforced_from_the_host(vm_env):
    b, _, pol = _bundle(vm_env, "wall", "sleep 600",
                        {"version": 1, "isolation": "vm", "network": {"mode": "none"},
                         "limits": {"wallClockSeconds": 5}})
    r = _run(vm_env, b, pol, "vm-wall", timeout=200)
    assert r.returncode == 124, (r.returncode, r.stderr[-2000:])
    assert r.seconds < 120


def test_vm_size_follows_the_policy_limits(vm_env):
    """memoryBytes + 192 MiB of guest RAM, ceil(cpus) vCPUs (docs/policy.md §2.8)."""
    want_cpus = 2 if (os.cpu_count() or 1) >= 2 else 1
    b, _, pol = _bundle(vm_env, "limits",
                        "echo memtotal=$(sed -n 's/^MemTotal: *\\([0-9]*\\) kB/\\1/p' /proc/meminfo); "
                        "echo cpus=$(grep -c ^processor /proc/cpuinfo); "
                        "echo cgmem=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || echo none)",
                        {"version": 1, "isolation": "vm", "network": {"mode": "none"},
                         "limits": {"memoryBytes": 128 << 20, "cpus": 1.5}})
    r = _run(vm_env, b, pol, "vm-limits")
    assert r.returncode == 0, r.stderr[-2000:]
    obs = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    # 128 + 192 = 320 MiB of RAM; the kernel reserves some of it, never more than this
    assert 200 * 1024 < int(obs["memtotal"]) <= 320 * 1024, obs
    assert int(obs["cpus"]) == want_cpus, obs
    # and inside, the container's own cgroup carries the policy's limit, as on a host
    assert obs["cgmem"] == str(128 << 20), obs


@pytest.mark.parametrize("deny", [False, True], ids=["control", "mount-denied"])
def test_policy_applies_inside_the_guest(vm_env, deny):
    """The guest's agentsbx enforces the same policy: with the seccomp group `mount` denied,
    mount(2) fails with EPERM in the guest even with CAP_SYS_ADMIN; the control run (same
    capability, group not denied) mounts. (The filesystem layers: the agent-profile tests.)"""
    policy = {"version": 1, "isolation": "vm", "network": {"mode": "none"}}
    if deny:
        policy["syscalls"] = {"deny": ["mount"]}
    b, _, pol = _bundle(vm_env, "deny" if deny else "control",
                        "/bin/busybox mount -t tmpfs none /tmp 2>/tmp/err; echo mount=$?; "
                        "echo err=$(cat /tmp/err)", policy, caps=("CAP_SYS_ADMIN",))
    r = _run(vm_env, b, pol, "vm-deny" if deny else "vm-control")
    assert r.returncode == 0, r.stderr[-2000:]
    obs = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    if deny:
        assert obs.get("mount") not in (None, "0"), obs
        # EPERM as busybox words it (the seccomp group's errno; ENOSYS would read otherwise)
        assert "permission denied" in obs.get("err", ""), obs
    else:
        assert obs.get("mount") == "0", obs


# The `agent` profile (sandbox's default) inside the guest, unchanged: its `filtered` network is
# the host side's (vm_net.c, test_vm_net.py). The script's observations, one KEY=VALUE line each.
AGENT_SSH_SECRET = "ASBX-VM-SSH-KEY-SECRET"
AGENT_SCRIPT = (
    "echo release=$(uname -r); "
    "echo x > /etc/from-the-guest 2>/dev/null; echo etc_write=$?; "
    "cat /home/user/.ssh/id_ed25519; echo ssh_read=$?; "
    "echo ssh_entries=$(ls -A /home/user/.ssh 2>/dev/null | wc -l); "
    "echo from-the-agent > /workspace/agent-wrote; echo ws_write=$?; "
    # Landlock (allowExec): a copy of busybox in the workspace is not in the profile's exec paths
    "cp /bin/busybox /workspace/bb && /workspace/bb true 2>/dev/null; echo ws_exec=$?; "
    "rm -f /workspace/bb; "
    # seccomp (the profile's `userns` group): unshare -U is refused
    "unshare -U true 2>/dev/null; echo userns=$?; "
    # limits: RLIMIT_NOFILE (the hard one: openFiles) and the container's cgroup inside the guest
    "echo nofile=$(ulimit -Hn); echo cgmem=$(cat /sys/fs/cgroup/memory.max); "
    "echo cgpids=$(cat /sys/fs/cgroup/pids.max)")


@pytest.fixture(scope="module")
def agent_run(vm_env):
    """One VM run of AGENT_SCRIPT under `extends: agent`; the guest's own `agentsbx features` (a
    createRuntime hook runs /init, the guest's agentsbx, in the guest's initial namespaces) is
    written to the workspace."""
    policy = {"version": 1, "extends": "agent", "isolation": "vm"}
    b, ws, pol = _bundle(vm_env, "agent", AGENT_SCRIPT, policy)
    ssh = os.path.join(b, "rootfs", "home", "user", ".ssh")
    os.makedirs(ssh)
    with open(os.path.join(ssh, "id_ed25519"), "w") as f:
        f.write(AGENT_SSH_SECRET + "\n")
    with open(os.path.join(b, "config.json")) as f:
        cfg = json.load(f)
    busybox = os.path.join(b, "rootfs", "bin", "busybox")
    cfg["hooks"] = {"createRuntime": [{"path": busybox, "args": [
        "busybox", "sh", "-c", f"/init features > {ws}/guest-features.json"]}]}
    # more than the profile's openFiles (4096): the guest's agentsbx must bring it down
    cfg["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "hard": 65536, "soft": 65536}]
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(cfg, f)
    subprocess.run(["chown", "-R", f"{OWNER}:{OWNER}", b], check=True)
    r = _run(vm_env, b, pol, "vm-agent")
    obs = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    features = {}
    fpath = os.path.join(ws, "guest-features.json")
    if os.path.exists(fpath):
        with open(fpath) as f:
            features = json.load(f)
    return {"r": r, "obs": obs, "ws": ws, "features": features}


def _agent_ran(a):
    assert a["r"].returncode == 0, (a["r"].returncode, a["r"].stderr[-3000:])


def test_agent_profile_runs_on_the_guest_kernel(agent_run, vm_env):
    _agent_ran(agent_run)
    assert agent_run["obs"].get("release") == vm_env["release"], agent_run["obs"]
    assert agent_run["obs"]["release"] != os.uname().release


def test_agent_profile_guest_kernel_has_the_layers(agent_run):
    """What the guest's agentsbx finds in the guest kernel: Landlock of ABI 3 or more (the
    profile's rules need fs.truncate), enabled at boot (CONFIG_LSM lists it: no lsm= needed)."""
    _agent_ran(agent_run)
    ann = agent_run["features"].get("annotations", {})
    assert int(ann.get("io.agentsbx.landlock.abi", "0")) >= 3, ann


def test_agent_profile_etc_is_read_only(agent_run):
    _agent_ran(agent_run)
    assert agent_run["obs"].get("etc_write") not in (None, "0"), agent_run["obs"]


def test_agent_profile_hides_ssh_keys(agent_run):
    _agent_ran(agent_run)
    obs = agent_run["obs"]
    assert AGENT_SSH_SECRET not in agent_run["r"].stdout, obs
    assert obs.get("ssh_read") not in (None, "0"), obs
    assert obs.get("ssh_entries") == "0", obs


def test_agent_profile_workspace_is_writable_not_executable(agent_run):
    _agent_ran(agent_run)
    obs = agent_run["obs"]
    assert obs.get("ws_write") == "0", obs
    with open(os.path.join(agent_run["ws"], "agent-wrote")) as f:
        assert f.read() == "from-the-agent\n"
    assert obs.get("ws_exec") not in (None, "0"), obs


def test_agent_profile_seccomp_and_limits(agent_run):
    _agent_ran(agent_run)
    obs = agent_run["obs"]
    assert obs.get("userns") not in (None, "0"), obs
    assert obs.get("nofile") == "4096", obs
    assert obs.get("cgmem") == str(2 << 30), obs
    assert obs.get("cgpids") == "512", obs


def _fake_cache(tmp_path, release, builtin=()):
    """A cache holding one kernel entry named for `release` whose package ships no module at all
    (an empty kernel/ directory; modules.builtin lists `builtin`): enough for the host side,
    which resolves the modules before QEMU starts."""
    k = tmp_path / "cache" / f"kernel-linux-image-{release}"
    (k / "boot").mkdir(parents=True)
    (k / "boot" / f"vmlinuz-{release}").write_bytes(b"")
    mods = k / "lib" / "modules" / release
    (mods / "kernel").mkdir(parents=True)
    if builtin:
        (mods / "modules.builtin").write_text("".join(f"kernel/{m}\n" for m in builtin))
    return str(tmp_path / "cache")


def _run_with_cache(env, b, pol, cid, cache):
    root = os.path.join(env["work"], "state-" + cid)
    r = subprocess.run([env["bin"], "--root", root, "--policy", pol, "run", "--bundle", b, cid],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, AGENTSBX_VM_CACHE=cache))
    assert not os.path.exists(os.path.join(root, "vm", cid)), "the run's vm directory was left behind"
    return r


def test_kernel_older_than_6_8_is_passed_over(vm_env, tmp_path):
    """A cache holding only an older kernel (tests/vm's Debian 12 6.1) offers no vm tier: the
    guest could not enforce the policy's filesystem layers (docs/security.md "Isolation tiers")."""
    cache = _fake_cache(tmp_path, "6.1.0-99-amd64")
    out = subprocess.run([vm_env["bin"], "features"], capture_output=True, text=True, check=True,
                         env=dict(os.environ, AGENTSBX_VM_CACHE=cache)).stdout
    ann = json.loads(out)["annotations"]
    assert ann["io.agentsbx.isolation"] == "container", ann
    assert "6.8 or newer" in ann["io.agentsbx.isolation.vm.error"], ann
    b, _, pol = _bundle(vm_env, "oldkernel", "true", {"version": 1, "isolation": "vm", "network": {"mode": "none"}})
    r = _run_with_cache(vm_env, b, pol, "vm-oldkernel", cache)
    assert r.returncode != 0
    assert "no guest kernel >= 6.8 in the cache" in r.stderr, r.stderr


def test_missing_module_is_named(vm_env, tmp_path):
    """A module the tier needs that the kernel package neither ships (.ko, .ko.xz...) nor builds
    in is an error naming it, before QEMU starts. The three modules.builtin lists are skipped:
    the first missing one is the next of the list, virtio_mmio."""
    cache = _fake_cache(tmp_path, "6.99.0-1-amd64", builtin=(
        "drivers/virtio/virtio_ring.ko", "drivers/virtio/virtio.ko", "drivers/char/virtio_console.ko"))
    b, _, pol = _bundle(vm_env, "nomodule", "true", {"version": 1, "isolation": "vm", "network": {"mode": "none"}})
    r = _run_with_cache(vm_env, b, pol, "vm-nomodule", cache)
    assert r.returncode != 0
    assert "the guest kernel has no module drivers/virtio/virtio_mmio.ko" in r.stderr, r.stderr


# Root's `sandbox --isolation vm` under its default profile (agent): QEMU runs as the workspace's
# owner (docs/security.md "Isolation tiers"), the host's system directories shared read-only, the
# homes not shared at all. A key is planted in a home the owner (QEMU's uid) may read on the host:
# only the sandbox keeps it from the guest.
SANDBOX_SSH_SECRET = "ASBX-VM-SANDBOX-SSH-KEY"
SANDBOX_HOME = "/home/asbx-vm-sandbox-test"
# the sandbox workspace's owner, QEMU's uid: unused, and used by no other test (OWNER, and
# test_docker_vm's 47313: another run's QEMU may hold those while this one's processes are counted)
SANDBOX_OWNER = 47357


def _owner_processes():
    """pids of processes whose real uid is SANDBOX_OWNER (QEMU's, while the sandbox's VM runs)."""
    pids = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/status") as f:
                uid = next(l.split()[1] for l in f if l.startswith("Uid:"))
        except (OSError, StopIteration, ValueError):
            continue
        if uid == str(SANDBOX_OWNER):
            pids.append(int(d))
    return pids


@pytest.fixture(scope="module")
def sandbox_vm(vm_env):
    ws = os.path.join(vm_env["work"], "sandbox-ws")
    os.makedirs(ws)
    os.chown(ws, SANDBOX_OWNER, SANDBOX_OWNER)
    if os.path.lexists(SANDBOX_HOME):
        pytest.skip(f"{SANDBOX_HOME} exists on this host: not ours to plant a key in")
    key = os.path.join(SANDBOX_HOME, ".ssh", "id_ed25519")
    os.makedirs(os.path.dirname(key))
    with open(key, "w") as f:
        f.write(SANDBOX_SSH_SECRET + "\n")
    for p in (SANDBOX_HOME, os.path.dirname(key), key):
        os.chown(p, SANDBOX_OWNER, SANDBOX_OWNER)
    os.chmod(os.path.dirname(key), 0o700)
    os.chmod(key, 0o600)
    script = (
        "echo release=$(uname -r); "
        "echo x > /etc/asbx-from-the-sandbox 2>/dev/null; echo etc_write=$?; "
        f"cat {key}; echo ssh_read=$?; "
        "echo from-the-sandbox > /workspace/sandbox-wrote; echo ws_write=$?; "
        "exit 7")
    root = os.path.join(vm_env["work"], "state-sandbox")
    cid = "vm-sandbox"
    try:
        r = subprocess.run([vm_env["bin"], "--root", root, "sandbox", "--isolation", "vm", "--id", cid, "--",
                            "/bin/sh", "-c", script], cwd=ws,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(SANDBOX_HOME)
    left = [p for p in (os.path.join(root, "sandbox", cid), os.path.join(root, "vm", cid), os.path.join(root, cid))
            if os.path.lexists(p)]
    obs = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    return {"r": r, "obs": obs, "ws": ws, "left": left, "procs": _owner_processes()}


def test_sandbox_runs_on_the_guest_kernel_and_exits_with_its_status(sandbox_vm, vm_env):
    r = sandbox_vm["r"]
    assert r.returncode == 7, (r.returncode, r.stderr[-3000:])
    assert sandbox_vm["obs"].get("release") == vm_env["release"], sandbox_vm["obs"]
    assert vm_env["release"] != os.uname().release


def test_sandbox_workspace_write_is_the_owners(sandbox_vm):
    assert sandbox_vm["obs"].get("ws_write") == "0", (sandbox_vm["obs"], sandbox_vm["r"].stderr[-3000:])
    path = os.path.join(sandbox_vm["ws"], "sandbox-wrote")
    with open(path) as f:
        assert f.read() == "from-the-sandbox\n"
    st = os.lstat(path)
    assert (st.st_uid, st.st_gid) == (SANDBOX_OWNER, SANDBOX_OWNER), (st.st_uid, st.st_gid)


def test_sandbox_etc_is_read_only(sandbox_vm):
    assert sandbox_vm["obs"].get("etc_write") not in (None, "0"), sandbox_vm["obs"]
    assert not os.path.lexists("/etc/asbx-from-the-sandbox")


def test_sandbox_hides_a_homes_ssh_key(sandbox_vm):
    obs = sandbox_vm["obs"]
    assert obs.get("ssh_read") not in (None, "0"), (obs, sandbox_vm["r"].stderr[-3000:])
    assert SANDBOX_SSH_SECRET not in sandbox_vm["r"].stdout + sandbox_vm["r"].stderr


def test_sandbox_leaves_nothing(sandbox_vm):
    assert sandbox_vm["r"].returncode == 7, sandbox_vm["r"].stderr[-3000:]
    assert sandbox_vm["left"] == [], sandbox_vm["left"]
    assert sandbox_vm["procs"] == [], "processes of QEMU's uid left: %s" % sandbox_vm["procs"]


def test_sandbox_stopped_by_sigterm_leaves_nothing(vm_env):
    """SIGTERM to a running `sandbox --isolation vm` (timeout(1), a CI runner): QEMU is killed, the
    run ends with 128 + 15 and removes what a normal end removes - before, the signal's default
    action left <root>/sandbox/<id>, <root>/<id> and <root>/vm/<id>, and the id refused to run
    again. Sent once the guest's command has started (its marker file in the workspace)."""
    ws = os.path.join(vm_env["work"], "sandbox-term-ws")
    os.makedirs(ws)
    os.chown(ws, SANDBOX_OWNER, SANDBOX_OWNER)
    root = os.path.join(vm_env["work"], "state-sandbox-term")
    cid = "vm-sandbox-term"
    p = subprocess.Popen([vm_env["bin"], "--root", root, "sandbox", "--isolation", "vm", "--id", cid, "--",
                          "/bin/sh", "-c", "touch /workspace/started; sleep 600"], cwd=ws,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not os.path.exists(os.path.join(ws, "started")) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert os.path.exists(os.path.join(ws, "started")), p.communicate(timeout=30)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGTERM, (p.returncode, err[-3000:])
    left = [x for x in (os.path.join(root, "sandbox", cid), os.path.join(root, "vm", cid), os.path.join(root, cid))
            if os.path.lexists(x)]
    assert left == [], left
    deadline = time.monotonic() + 10
    while _owner_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _owner_processes() == [], "processes of QEMU's uid left"


def test_sandbox_of_a_root_workspace_is_refused(vm_env):
    """QEMU never runs as root, and as another uid it could not write root's workspace: refused
    before anything runs (nothing left in the state root)."""
    ws = os.path.join(vm_env["work"], "sandbox-root-ws")
    os.makedirs(ws)
    root = os.path.join(vm_env["work"], "state-sandbox-rootws")
    r = subprocess.run([vm_env["bin"], "--root", root, "sandbox", "--isolation", "vm", "--",
                        "/bin/sh", "-c", f"touch {ws}/ran"], cwd=ws,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "belongs to root: QEMU runs as the workspace's owner and never as root" in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(ws, "ran"))
    for d in ("sandbox", "vm"):
        assert not os.path.exists(os.path.join(root, d)) or not os.listdir(os.path.join(root, d))


def test_sandbox_policy_asking_vm_needs_the_flag(vm_env):
    """A policy asking `isolation: vm` of a sandbox run without --isolation vm gets no VM of the
    bundle made for a container (its user namespace, its view): refused naming the flag."""
    ws = os.path.join(vm_env["work"], "sandbox-policy-ws")
    os.makedirs(ws)
    os.chown(ws, SANDBOX_OWNER, SANDBOX_OWNER)
    pol = os.path.join(vm_env["work"], "sandbox-policy-vm.json")
    with open(pol, "w") as f:
        json.dump({"version": 1, "extends": "agent", "isolation": "vm"}, f)
    root = os.path.join(vm_env["work"], "state-sandbox-policy")
    r = subprocess.run([vm_env["bin"], "--root", root, "sandbox", "--policy", pol, "--",
                        "/bin/sh", "-c", "touch /workspace/ran"], cwd=ws,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "the policy asks for the vm tier: give sandbox --isolation vm" in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(ws, "ran"))
    for d in ("sandbox", "vm"):
        assert not os.path.exists(os.path.join(root, d)) or not os.listdir(os.path.join(root, d))


def test_sandbox_vm_needs_root(vm_env):
    """A non-root caller's sandbox cannot build QEMU's jail (namespaces, mounts, the uid drop are
    host root's): refused with an error saying so, nothing run."""
    top = pathlib.Path(vm_env["work"]) / "sandbox-nonroot"  # a path the caller can reach
    ws, home = top / "ws", top / "home"
    ws.mkdir(parents=True)
    home.mkdir()
    for p in (top, ws, home):
        os.chown(p, OWNER, OWNER)
    r = subprocess.run(["setpriv", f"--reuid={OWNER}", f"--regid={OWNER}", "--clear-groups",
                        vm_env["bin"], "sandbox", "--isolation", "vm", "--", "/bin/sh", "-c", "touch ran"],
                       cwd=ws, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                       env={"PATH": os.environ["PATH"], "HOME": str(home), "XDG_RUNTIME_DIR": str(home)})
    assert r.returncode != 0
    assert "sandbox --isolation vm: needs root" in r.stderr, r.stderr
    assert not (ws / "ran").exists()


# A compromised guest: a createRuntime hook runs as the guest's root in the guest's initial
# namespaces, outside the container's policy (no seccomp, every capability), as guest code that
# owns the guest kernel would: its chmod/mknod/link reach QEMU's 9p server as such. What counts
# is what the host then holds. On main's binary (QEMU as root, security_model=none) the file is
# root-owned and set-ID, the device node and the link exist, and QEMU's uid is 0.
COMPROMISED = (
    "cd {ws} || exit 1; "
    "echo x > suid; chmod 4755 suid; echo chmod_suid=$? >> r; "
    "echo x > sgid; chmod 2755 sgid; echo chmod_sgid=$? >> r; "
    "echo x > owned; chown 0:0 owned; echo chown=$? >> r; "
    "mknod null c 1 3; echo mknod=$? >> r; "
    "ln secret hl; echo link=$? >> r; "
    "echo '{{}}' >> {bundle}/config.json; echo config=$? >> r; "
    "echo done >> r")


IN_CREATE = 0x100


def _inotify_creates(path):
    """An inotify fd watching `path` for IN_CREATE (the kernel's record of every name made in it,
    even one removed at once), or None without inotify."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0 or libc.inotify_add_watch(fd, path.encode(), IN_CREATE) < 0:
        pytest.fail(f"inotify on {path}: {os.strerror(ctypes.get_errno())}")
    return fd


def _created_names(fd):
    names, buf = [], b""
    try:
        while True:
            buf += os.read(fd, 65536)
    except BlockingIOError:
        pass
    off = 0
    while off + 16 <= len(buf):
        _wd, mask, _cookie, n = struct.unpack_from("iIII", buf, off)
        if mask & IN_CREATE:
            names.append(buf[off + 16:off + 16 + n].rstrip(b"\0").decode())
        off += 16 + n
    return names


def _qemu_child(pid, deadline):
    """The pid of QEMU under agentsbx `pid` once it has exec'd, else None."""
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                kids = f.read().split()
        except OSError:
            return None
        for k in kids:
            try:
                if os.path.basename(os.readlink(f"/proc/{k}/exe")).startswith("qemu-system"):
                    return int(k)
            except OSError:
                pass
        time.sleep(0.1)
    return None


@pytest.fixture(scope="module")
def compromised(vm_env):
    b = os.path.join(vm_env["work"], "evil")
    ws = os.path.join(b, "ws")
    busybox = os.path.join(b, "rootfs", "bin", "busybox")
    b, ws, pol = _bundle(vm_env, "evil", "sleep 8",
                         {"version": 1, "isolation": "vm", "network": {"mode": "none"}}, devices=True)
    # root's file inside the share: a hard link to it would keep it reachable and let the
    # workspace owner's tools act on root's inode
    secret = os.path.join(ws, "secret")
    with open(secret, "w") as f:
        f.write("root's\n")
    os.chown(secret, 0, 0)
    os.chmod(secret, 0o600)
    with open(os.path.join(b, "config.json")) as f:
        cfg = json.load(f)
    cfg["hooks"] = {"createRuntime": [{"path": busybox,
                                       "args": ["busybox", "sh", "-c", COMPROMISED.format(ws=ws, bundle=b)]}]}
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(cfg, f)
    os.chown(os.path.join(b, "config.json"), OWNER, OWNER)
    with open(os.path.join(b, "config.json"), "rb") as f:
        config_before = f.read()
    root = os.path.join(vm_env["work"], "state-evil")
    ino = _inotify_creates(ws)
    p = subprocess.Popen([vm_env["bin"], "--root", root, "--policy", pol, "run", "--bundle", b, "vm-evil"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    q = {}
    try:
        qpid = _qemu_child(p.pid, time.monotonic() + 120)
        if qpid:
            q["pid"] = qpid
            with open(f"/proc/{qpid}/status") as f:
                q["status"] = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
            q["ns"] = {n: os.readlink(f"/proc/{qpid}/ns/{n}") for n in ("mnt", "pid", "net", "ipc", "user")}
            with open(f"/proc/{qpid}/mountinfo") as f:
                q["mountinfo"] = f.read()
            with open(f"/proc/{qpid}/uid_map") as f:
                q["uid_map"] = f.read()
            q["cgroup"] = qemu_cgroup(qpid)
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    created = _created_names(ino)
    os.close(ino)
    results = {}
    rpath = os.path.join(ws, "r")
    if os.path.exists(rpath):
        with open(rpath) as f:
            results = dict(line.split("=", 1) for line in f.read().split() if "=" in line)
    with open(os.path.join(b, "config.json"), "rb") as f:
        config_after = f.read()
    return {"rc": p.returncode, "stderr": err, "ws": ws, "created": created, "secret": secret, "qemu": q,
            "guest": results, "config": (config_before, config_after)}


def _ran(c):
    assert c["rc"] == 0, (c["rc"], c["stderr"][-2000:])
    assert "done" in open(os.path.join(c["ws"], "r")).read(), "the guest's hook did not run"


def test_guest_chmod_leaves_no_setid_file_on_the_host(compromised):
    _ran(compromised)
    for name in ("suid", "sgid", "owned"):
        st = os.lstat(os.path.join(compromised["ws"], name))
        assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), (name, oct(st.st_mode), compromised["guest"])
        # made by QEMU: the bundle's owner's, never root's (the guest's chown cannot give it to root)
        assert (st.st_uid, st.st_gid) == (OWNER, OWNER), (name, st.st_uid, st.st_gid)


def test_qemu_runs_in_a_cgroup_of_its_own(compromised):
    """QEMU's memory is the host's to bound (outside attack 12: libslirp grew QEMU's heap past
    1 GB under -m 256): from outside, QEMU's /proc/<pid>/cgroup names the VM's cgroup, whose
    memory limit is the guest's RAM plus QEMU's overhead, and the cgroup is gone after the run"""
    _ran(compromised)
    q = compromised["qemu"]
    assert q, "QEMU was not seen running under agentsbx"
    path, limit, pids, mdir = q["cgroup"]
    assert path == "/agentsbx/vm-vm-evil", path  # the default parent, as a container's
    assert limit == (DEFAULT_GUEST_MIB + QEMU_OVERHEAD_MIB) << 20, limit
    assert pids == str(128 + 1), pids  # VM_CGROUP_PIDS_BASE + one vCPU
    assert not os.path.exists(mdir), "QEMU's cgroup was left behind"


def test_qemu_killed_at_its_memory_limit_ends_the_run(vm_env):
    """A QEMU that needs more than its cgroup allows is OOM-killed by the host's kernel, and the
    run ends with an error saying so (not a hang, not QEMU unlimited). The limit is lowered below
    what a boot needs (AGENTSBX_VM_QEMU_LIMIT_MIB may only lower it)."""
    cid = "vm-oom"
    b, _, pol = _bundle(vm_env, "oom", "echo must-not-finish",
                        {"version": 1, "isolation": "vm", "network": {"mode": "none"}})
    root = os.path.join(vm_env["work"], "state-" + cid)
    argv = [vm_env["bin"], "--root", root, "--policy", pol, "run", "--bundle", b, cid]
    env = dict(os.environ, AGENTSBX_VM_QEMU_LIMIT_MIB="48")
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode != 0 and "OOM killer" in r.stderr and "48 MiB" in r.stderr, (r.returncode, r.stderr[-2000:])
    assert "must-not-finish" not in r.stdout
    assert not os.path.exists(os.path.join(root, "vm", cid))
    for h in ("memory", "pids", "cpu"):
        assert not os.path.exists(f"/sys/fs/cgroup/{h}/agentsbx/vm-{cid}"), h
    assert not os.path.exists(f"/sys/fs/cgroup/agentsbx/vm-{cid}")
    # raising it is refused before anything runs
    env["AGENTSBX_VM_QEMU_LIMIT_MIB"] = str(1 << 20)
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode != 0 and "may only lower" in r.stderr, r.stderr[-2000:]


def test_guest_makes_no_device_node_on_the_host(compromised):
    _ran(compromised)
    p = os.path.join(compromised["ws"], "null")
    assert not os.path.lexists(p) or not (stat.S_ISCHR(os.lstat(p).st_mode) or stat.S_ISBLK(os.lstat(p).st_mode))
    assert compromised["guest"].get("mknod") not in (None, "0"), compromised["guest"]
    # not even for a moment: QEMU 7.2 as root made the node, then refused to open it for the
    # guest's chmod and unlinked it (its CVE-2023-2861 check); the kernel saw the name made
    assert "suid" in compromised["created"], compromised["created"]  # the watch works
    assert "null" not in compromised["created"], compromised["created"]


def test_guest_cannot_hard_link_roots_file(compromised):
    _ran(compromised)
    st = os.lstat(compromised["secret"])
    assert st.st_nlink == 1 and not os.path.lexists(os.path.join(compromised["ws"], "hl")), compromised["guest"]
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)
    with open(compromised["secret"]) as f:
        assert f.read() == "root's\n"


def test_qemu_holds_no_privilege_on_the_host(compromised):
    _ran(compromised)
    q = compromised["qemu"]
    assert q, "QEMU was not seen running under agentsbx"
    st = q["status"]
    assert st["Uid"].split() == [str(OWNER)] * 4, st["Uid"]
    assert st["Gid"].split() == [str(OWNER)] * 4, st["Gid"]
    assert st["Groups"].split() == [], st["Groups"]
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[k], 16) == 0, (k, st[k])
    assert st["NoNewPrivs"].strip() == "1"
    assert st["Seccomp"].strip() == "2"
    for n in ("mnt", "pid", "net", "ipc", "user"):
        assert q["ns"][n] != os.readlink(f"/proc/self/ns/{n}"), n
    # its user namespace maps the bundle's owner alone (to its uid 0: the guest's root owns the
    # owner's files); read from the host, /proc shows the host's ids
    assert q["uid_map"].split() == ["0", str(OWNER), "1"], q["uid_map"]


def test_qemu_sees_its_shares_nosuid_nodev(compromised):
    _ran(compromised)
    mounts = [line.split() for line in compromised["qemu"]["mountinfo"].splitlines()]
    shares = [m for m in mounts if m[4].startswith("/run/agentsbx-vm/")]
    assert any(m[4] == "/run/agentsbx-vm/s0" for m in shares), compromised["qemu"]["mountinfo"]
    for m in shares:
        opts = m[5].split(",")
        assert "nosuid" in opts and "nodev" in opts, m
    # nothing else of the host: QEMU's root is a tmpfs holding /usr (and the host's /lib, /bin...
    # directories where they are not links into /usr), ld.so.cache, a few device nodes, its own
    # /proc and the shares
    allowed = {"/", "/usr", "/proc", "/etc/ld.so.cache"} | {"/" + d for d in ("bin", "sbin", "lib", "lib32", "lib64", "libx32")} \
        | {"/dev/" + d for d in ("null", "zero", "full", "random", "urandom", "kvm")}
    others = [m[4] for m in mounts if m[4] not in allowed and not m[4].startswith("/run/agentsbx-vm/")]
    assert others == [], others
    root = [m for m in mounts if m[4] == "/"]
    assert root and root[0][root[0].index("-") + 1] == "tmpfs" and "ro" in root[0][5].split(","), root
    # the host's own mount namespace is not changed: nothing of QEMU's shows here
    with open("/proc/self/mountinfo") as f:
        assert "/run/agentsbx-vm" not in f.read()


def test_root_owned_bundle_is_refused(vm_env):
    """QEMU never runs as root: it takes the bundle owner's uid, so a root-owned bundle is an
    error before anything starts (on main's binary it boots, QEMU as root)."""
    b, _, pol = _bundle(vm_env, "rootowned", "true",
                        {"version": 1, "isolation": "vm", "network": {"mode": "none"}})
    subprocess.run(["chown", "-R", "0:0", b], check=True)
    r = _run(vm_env, b, pol, "vm-rootowned", timeout=120)
    assert r.returncode != 0
    assert f"the bundle {b} is owned by root" in r.stderr, r.stderr


def test_guest_cannot_rewrite_the_bundle_config(compromised):
    """The bundle is shared read-only whatever root.readonly says (the rootfs is a share of its
    own): a guest that rewrote config.json planted a prestart hook, which a later container run
    of that bundle ran on the host as root (outside attack 08)."""
    _ran(compromised)
    before, after = compromised["config"]
    assert after == before, "the guest changed the host's config.json"
    assert compromised["guest"].get("config") not in (None, "0"), compromised["guest"]


@pytest.mark.parametrize("swap", ["symlinks", "fifos"])
def test_run_dir_swapped_by_qemus_uid_is_not_followed_by_root(vm_env, tmp_path, swap):
    """The run directory is QEMU's uid's while it runs (reachable by the bundle owner through
    /proc/<qemu>/root). After QEMU ends, root reads console.log and status and removes the
    directory: through fds, never following a symlink, never blocking on a FIFO (outside attack
    11: `share` swapped for a symlink to a root-only directory was emptied by root's removal,
    console.log as a symlink printed a root-only file, and a FIFO hung `run` past its wall
    clock). Simulated here by root itself doing what the owner could, then killing QEMU."""
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (victim / "important").write_text("keep me\n")
    secret = victim / "secret"
    secret.write_text("ROOT-ONLY-VM-SECRET\n")
    os.chmod(secret, 0o600)
    b, _, pol = _bundle(vm_env, f"swap-{swap}", "sleep 60",
                        {"version": 1, "isolation": "vm", "network": {"mode": "none"},
                         "limits": {"wallClockSeconds": 40}})
    cid = f"vm-swap-{swap}"
    root = os.path.join(vm_env["work"], "state-" + cid)
    run_dir = os.path.join(root, "vm", cid)
    p = subprocess.Popen([vm_env["bin"], "--root", root, "--policy", pol, "run", "--bundle", b, cid],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    try:
        qpid = _qemu_child(p.pid, time.monotonic() + 120)
        assert qpid, "QEMU did not start"
        time.sleep(1)  # QEMU has opened its chardev files
        assert p.poll() is None, ("the run ended early", p.returncode, p.stderr.read()[-3000:])
        os.rename(os.path.join(run_dir, "share"), os.path.join(run_dir, "share.x"))
        os.symlink(str(victim), os.path.join(run_dir, "share"))
        for name in ("console.log", "status"):
            if os.path.lexists(os.path.join(run_dir, name)):
                os.unlink(os.path.join(run_dir, name))
            if swap == "symlinks":
                os.symlink(str(secret), os.path.join(run_dir, name))
            else:
                os.mkfifo(os.path.join(run_dir, name))
        os.kill(qpid, signal.SIGKILL)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert time.monotonic() - t0 < 35, "root blocked on what QEMU's uid put in the run directory"
    assert p.returncode != 0
    assert sorted(os.listdir(victim)) == ["important", "secret"], "root's removal followed the symlink"
    assert "ROOT-ONLY-VM-SECRET" not in err and "ROOT-ONLY-VM-SECRET" not in out, err[-2000:]
    assert not os.path.lexists(run_dir), os.listdir(run_dir)
