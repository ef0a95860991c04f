"""Fixtures for the engine suite: PRIVATE Docker, Podman and containerd instances driving
agentsbx, with runc as the control in the same run.

Nothing global is changed: every daemon gets its own data root, exec/state root, sockets and
pidfile under one temporary directory (short, for the 108-byte socket path limit), Docker runs
with iptables/ip-forward/ip-masq off and no bridge, containerd with a private namespace. Daemons
are stopped by the PID we started them with, never by name. See design/TESTING.md "Engines".

Every engine test is parametrized over `engine_rt` = "agentsbx" (a private copy of the binary
under test, $AGENTSBX_RUNTIME or ./agentsbx) and "runc" (the control). After each test the
`leaks` fixture checks, for every container id the test registered: no state dir under the
--root the engine passed, no cgroup named after it, no new mount under the engine dirs, no
process (shim, conmon, runtime, container) naming it.

Images: the Debian minbase tarball tests/integration/conftest.py caches under
/var/cache/agentsbx-tests (its builder is reused), imported with `docker import` / `podman
import`, and for containerd turned into an OCI archive here (ctr images import).
"""

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
HANG_GUARD = 180  # seconds; an upper bound against hangs, never an assertion on speed
IMAGE = "asbx-debian:test"
IMAGE_FULL = "docker.io/library/asbx-debian:test"

# Debian's docker client; /usr/local/bin may hold another (newer) docker CLI.
DOCKER_CLI = "/usr/bin/docker"
RUNC = shutil.which("runc") or "/usr/sbin/runc"


def _load_integration_conftest():
    """The integration suite's conftest as a plain module (for its rootfs builder and cgroup
    helpers), under a unique name so it does not clash with this conftest."""
    path = os.path.join(TOP, "tests", "integration", "conftest.py")
    spec = importlib.util.spec_from_file_location("asbx_integration_conftest", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


IT = _load_integration_conftest()


def pytest_configure(config):
    config.addinivalue_line("markers", "docker: needs docker.io")
    config.addinivalue_line("markers", "podman: needs podman")
    config.addinivalue_line("markers", "containerd: needs containerd and ctr")



def write_podman_conf(d, runtime_paths, graph, run, tmp, static=True):
    """containers.conf and storage.conf for a private Podman in d (the same for root and for a
    rootless user; static: libpod's static_dir and volume_path inside graph). Returns their paths."""
    conf, storage = os.path.join(d, "containers.conf"), os.path.join(d, "storage.conf")
    paths = f'static_dir = "{graph}/libpod"\nvolume_path = "{graph}/volumes"\n' if static else ""
    with open(conf, "w") as f:
        f.write(f"""[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
log_driver = "k8s-file"
[network]
network_config_dir = "{d}/net"
[engine]
runtime = "agentsbx"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{d}/events.log"
lock_type = "file"
tmp_dir = "{tmp}"
{paths}runtime_supports_json = ["agentsbx", "runc"]
[engine.runtimes]
agentsbx = ["{runtime_paths['agentsbx']}"]
runcref = ["{runtime_paths['runc']}"]
""")
    with open(storage, "w") as f:
        f.write(f"""[storage]
driver = "overlay"
graphroot = "{graph}"
runroot = "{run}"
""")
    return conf, storage

def _need(binary, pkg):
    if shutil.which(binary) or os.path.exists(binary):
        return
    msg = f"{binary} not installed (apt-get install -y {pkg})"
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


# ---------------------------------------------------------------------------------------------
# Runtimes and the image

@pytest.fixture(scope="session")
def eng_dir():
    d = tempfile.mkdtemp(prefix="asbxe-", dir="/tmp")
    os.chmod(d, 0o755)
    # the cgroup parents the engines create (Docker's cgroupfs driver: /docker, CRI: /k8s.io);
    # the ones this session made are removed at the end (rmdir: only when empty)
    parents = [os.path.join(h, n) for h in IT.cgroup_hierarchies() for n in ("docker", "k8s.io")]
    preexisting = {p for p in parents if os.path.isdir(p)}
    yield d
    for p in parents:
        if p not in preexisting:
            with contextlib.suppress(OSError):
                os.rmdir(p)
    _umount_under(d)
    # rm(1) is much faster than shutil.rmtree on the unpacked image copies; it never crosses
    # into a mount that could not be removed
    subprocess.run(["rm", "-rf", "--one-file-system", d], capture_output=True)


@pytest.fixture(scope="session")
def runtime_paths(eng_dir):
    """{"agentsbx": private copy of the binary under test, "runc": runc}. The copy keeps a
    rebuild in the tree from swapping the binary mid-run; its path has no spaces (Docker writes
    a wrapper script with unquoted $@)."""
    src = os.environ.get("AGENTSBX_RUNTIME") or os.path.join(TOP, "agentsbx")
    if os.sep not in src:
        src = shutil.which(src) or src
    if not os.path.exists(src):
        pytest.fail(f"runtime binary {src} not found (make, or set AGENTSBX_RUNTIME)")
    d = os.path.join(eng_dir, "bin")
    os.makedirs(d, exist_ok=True)
    dst = os.path.join(d, "agentsbx")
    shutil.copy2(src, dst)
    _need(RUNC, "runc")
    return {"agentsbx": dst, "runc": RUNC}


@pytest.fixture(params=["agentsbx", "runc"])
def engine_rt(request):
    """The runtime an engine test drives: agentsbx, and runc as the control."""
    return request.param


@pytest.fixture(scope="session")
def rootfs_tar():
    tar, reason = IT._debian_tarball()
    if tar is None:
        if os.environ.get("CI"):
            pytest.fail(f"Debian rootfs unavailable in CI: {reason}")
        pytest.skip(f"Debian rootfs unavailable: {reason}")
    return tar


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_oci_archive(rootfs_tar, out, name=IMAGE_FULL, cmd=("sleep", "infinity")):
    """Writes an OCI image-layout tar (one uncompressed layer = the rootfs tar) that `ctr images
    import` accepts; the image is named `name` through the index annotations."""
    layer = _sha256_file(rootfs_tar)
    size = os.path.getsize(rootfs_tar)
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Cmd": list(cmd), "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                                             "/usr/bin:/sbin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + layer]},
    }).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": "sha256:" + hashlib.sha256(config).hexdigest(), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": "sha256:" + layer, "size": size}],
    }).encode()
    index = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": "sha256:" + hashlib.sha256(manifest).hexdigest(),
                       "size": len(manifest),
                       "annotations": {"io.containerd.image.name": name,
                                       "org.opencontainers.image.ref.name": name.split(":")[-1]}}],
    }).encode()

    def add_bytes(t, path, data):
        ti = tarfile.TarInfo(path)
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))

    with tarfile.open(out, "w") as t:
        add_bytes(t, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add_bytes(t, "index.json", index)
        add_bytes(t, "blobs/sha256/" + hashlib.sha256(config).hexdigest(), config)
        add_bytes(t, "blobs/sha256/" + hashlib.sha256(manifest).hexdigest(), manifest)
        t.add(rootfs_tar, "blobs/sha256/" + layer)
    return out


# ---------------------------------------------------------------------------------------------
# Processes, mounts, cgroups

def sh(argv, check=True, timeout=HANG_GUARD, **kw):
    """subprocess.run with text output captured; a failure shows the whole command result."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("stdin", subprocess.DEVNULL)
    r = subprocess.run(argv, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{argv} -> rc {r.returncode}\nstdout: {r.stdout[-3000:]}\n"
                             f"stderr: {r.stderr[-3000:]}")
    return r


def start_daemon(argv, log_path, env=None):
    """Starts a daemon in its own session; returns the Popen (we stop it by its pid)."""
    log = open(log_path, "ab")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         start_new_session=True, env=env)
    log.close()
    return p


def stop_daemon(p, timeout=60):
    """SIGTERM by pid, then SIGKILL after `timeout` s."""
    if p.poll() is not None:
        return
    os.kill(p.pid, signal.SIGTERM)
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()


def wait_for(pred, what, timeout=HANG_GUARD, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def mounts_under(prefix):
    out = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == prefix or mp.startswith(prefix + "/"):
                out.add(mp)
    return out


def _umount_under(prefix):
    for mp in sorted(mounts_under(prefix), key=len, reverse=True):
        subprocess.run(["umount", "-l", mp], capture_output=True)


def processes_naming(word):
    """PIDs (other than ours) whose command line contains `word`."""
    found = []
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            if word in cmd:
                found.append(f"process {pid}: {cmd[:200]}")
    return found


def cgroups_naming(word):
    found = []
    for h in IT.cgroup_hierarchies():
        base = h.rstrip("/").count("/")
        for dirpath, dirnames, _ in os.walk(h):
            if dirpath.count("/") - base >= 4:
                dirnames[:] = []
            found += [f"cgroup {dirpath}/{d}" for d in dirnames if word in d]
    return found


class Leaks:
    """Per-test registry: ids to check, --root dirs to look in, the mount baseline."""

    def __init__(self, watch_dirs, ignore_mounts=()):
        self.ignore_mounts = set(ignore_mounts)
        self.ids = []
        self.roots = []
        self.watch_dirs = watch_dirs
        self.baseline = set().union(*(mounts_under(d) for d in watch_dirs))

    def track(self, cid, *roots):
        self.ids.append(cid)
        self.roots += [r for r in roots if r not in self.roots]
        return cid

    def problems(self):
        p = []
        for cid in self.ids:
            for root in self.roots:
                if os.path.exists(os.path.join(root, cid)):
                    p.append(f"state dir {root}/{cid}")
            p += cgroups_naming(cid)
            p += processes_naming(cid)
        now = set().union(*(mounts_under(d) for d in self.watch_dirs))
        p += [f"mount {m}" for m in sorted(now - self.baseline - self.ignore_mounts)]
        return p

    def check(self, timeout=60):
        """Polls (shims and conmon exit asynchronously after removal) and fails with the list
        of what is left."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.problems()
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        assert not left, "left after the container was removed:\n  " + "\n  ".join(left)


def rt_root_dirs(name):
    """Default --root of each runtime (used when an engine passes none, as podman/conmon)."""
    return {"agentsbx": "/run/agentsbx", "runc": "/run/runc"}[name]


def has_pty():
    return os.path.exists("/dev/ptmx")


@pytest.fixture
def tty_run():
    """tty_run(argv, input=b"") -> (rc, output): runs argv with a pty as its controlling
    terminal and stdin/stdout (what `-t` wants), collects everything it prints."""
    import pty

    def run(argv, timeout=HANG_GUARD, env=None):
        pid, fd = pty.fork()
        if pid == 0:
            try:
                if env:
                    os.execve(argv[0], argv, env)
                os.execv(argv[0], argv)
            finally:
                os._exit(127)
        out = b""
        deadline = time.monotonic() + timeout
        import select
        while True:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(fd)
                raise AssertionError(f"hang guard: {argv}")
            r, _, _ = select.select([fd], [], [], 0.5)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                out += chunk
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")
    return run


# ---------------------------------------------------------------------------------------------
# containerd (shared by the ctr and CRI tests): one private daemon with the CRI plugin

class Containerd:
    """A private containerd: own root, state, grpc/ttrpc sockets; the CRI plugin with runtime
    handlers `agentsbx` and `runcref` (io.containerd.runc.v2 with options.BinaryName and a
    private options.Root), host-network pods only (no CNI)."""

    def __init__(self, d, runtime_paths, sandbox_image):
        self.dir = d
        self.sock = os.path.join(d, "c.sock")
        self.root = os.path.join(d, "root")
        self.state = os.path.join(d, "state")
        self.runtime_paths = runtime_paths
        self.rt_roots = {n: os.path.join(d, f"rt-{n}") for n in runtime_paths}
        self.ns = f"asbx-ctr-{os.getpid()}"
        handlers = ""
        for n, path in runtime_paths.items():
            handler = "agentsbx" if n == "agentsbx" else "runcref"
            handlers += f"""
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{handler}]
  runtime_type = "io.containerd.runc.v2"
  pod_annotations = ["io.agentsbx.*"]
  container_annotations = ["io.agentsbx.*"]
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{handler}.options]
  BinaryName = "{path}"
  Root = "{self.rt_roots[n]}"
"""
        os.makedirs(os.path.join(d, "cni-conf"), exist_ok=True)
        os.makedirs(os.path.join(d, "cni-bin"), exist_ok=True)
        self.config = os.path.join(d, "config.toml")
        with open(self.config, "w") as f:
            f.write(f"""version = 2
root = "{self.root}"
state = "{self.state}"
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.sock}.ttrpc"
[debug]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runcref"
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "{d}/cni-bin"
  conf_dir = "{d}/cni-conf"
{handlers}""")
        self.proc = None

    def start(self):
        self.proc = start_daemon(["containerd", "--config", self.config],
                                 os.path.join(self.dir, "containerd.log"))

        def up():
            assert self.proc.poll() is None, "containerd exited:\n" + self.log()[-3000:]
            return self.ctr("version", check=False).returncode == 0
        wait_for(up, "containerd to answer")

    def log(self):
        with open(os.path.join(self.dir, "containerd.log"), errors="replace") as f:
            return f.read()

    def ctr(self, *args, ns=None, check=True, timeout=HANG_GUARD, **kw):
        return sh(["ctr", "--address", self.sock, "--namespace", ns or self.ns,
                   *map(str, args)], check=check, timeout=timeout, **kw)

    def bundle(self, ns, cid):
        return os.path.join(self.state, "io.containerd.runtime.v2.task", ns, cid)


@pytest.fixture(scope="session")
def containerd(eng_dir, runtime_paths, rootfs_tar):
    _need("containerd", "containerd")
    _need("ctr", "containerd")
    d = tempfile.mkdtemp(prefix="cd-", dir=eng_dir)
    cd = Containerd(d, runtime_paths, IMAGE_FULL)
    cd.start()
    try:
        archive = make_oci_archive(rootfs_tar, os.path.join(d, "image.oci.tar"))
        for ns in (cd.ns, "k8s.io"):
            cd.ctr("images", "import", archive, ns=ns)
        os.unlink(archive)
        yield cd
    finally:
        stop_daemon(cd.proc)
        # shims outlive containerd by design; a test that failed may leave one: stop those
        # whose command line names our private socket (they are ours), by pid
        for line in processes_naming(cd.sock):
            pid = int(line.split()[1].rstrip(":"))
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        _umount_under(d)


# A run in which no engine test passed (all skipped: engines missing outside CI) is a failure.
_PASSED = []


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed:
        _PASSED.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and not _PASSED and not session.config.option.collectonly:
        session.exitstatus = 1
