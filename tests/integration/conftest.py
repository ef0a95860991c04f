"""Fixtures for the integration suite: runtimes, bundles, the probe, and leak checks.

Every test drives a real runtime binary on a real bundle and asserts on what the probe (a static
program copied into the rootfs as /probe) or the kernel observes -- never on the runtime's own
report of what it did.

Runtime under test: $AGENTSBX_RUNTIME (default: ./agentsbx in the top build dir). The suite is
written against runc 1.1.5 as the reference: `AGENTSBX_RUNTIME=runc pytest-3 tests/integration`
must pass apart from tests marked `agentsbx_only`. Tests marked `runc_reference` also run against
runc (when installed and not already the runtime under test) to catch drift.

Teardown of every test force-deletes the containers it created and then fails the test if any
state dir, cgroup directory named after the container, mount under the bundle or process rooted
in the bundle is left.
"""

import contextlib
import copy
import hashlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import uuid

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CACHE_DIR = os.environ.get("AGENTSBX_TEST_CACHE", "/var/cache/agentsbx-tests")
DEBIAN_PACKAGES = ("python3",)
HANG_GUARD = 120  # seconds; an upper bound against hangs, never an assertion on speed

CAP_BITS = {
    "CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3,
    "CAP_FSETID": 4, "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8,
    "CAP_LINUX_IMMUTABLE": 9, "CAP_NET_BIND_SERVICE": 10, "CAP_NET_BROADCAST": 11,
    "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_IPC_LOCK": 14, "CAP_IPC_OWNER": 15,
    "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17, "CAP_SYS_CHROOT": 18, "CAP_SYS_PTRACE": 19,
    "CAP_SYS_PACCT": 20, "CAP_SYS_ADMIN": 21, "CAP_SYS_BOOT": 22, "CAP_SYS_NICE": 23,
    "CAP_SYS_RESOURCE": 24, "CAP_SYS_TIME": 25, "CAP_SYS_TTY_CONFIG": 26, "CAP_MKNOD": 27,
    "CAP_LEASE": 28, "CAP_AUDIT_WRITE": 29, "CAP_AUDIT_CONTROL": 30, "CAP_SETFCAP": 31,
    "CAP_MAC_OVERRIDE": 32, "CAP_MAC_ADMIN": 33, "CAP_SYSLOG": 34, "CAP_WAKE_ALARM": 35,
    "CAP_BLOCK_SUSPEND": 36, "CAP_AUDIT_READ": 37, "CAP_PERFMON": 38, "CAP_BPF": 39,
    "CAP_CHECKPOINT_RESTORE": 40,
}


def caps_mask(names):
    """Capability names -> the integer mask /proc/self/status shows in hex."""
    m = 0
    for n in names:
        m |= 1 << CAP_BITS[n]
    return m


def pytest_configure(config):
    config.addinivalue_line("markers", "runc_reference: runc is the reference behaviour; the "
                            "test also runs against runc when it is installed")
    config.addinivalue_line("markers", "agentsbx_only(reason): behaviour runc 1.1.5 lacks; "
                            "skipped (with the reason) when the runtime is runc")
    config.addinivalue_line("markers", "cgroups_pending: resource limits; agentsbx may refuse "
                            "them clearly until the cgroups work lands")
    config.addinivalue_line("markers", "debian: needs the mmdebstrap Debian rootfs")


# ---------------------------------------------------------------------------------------------
# Runtime binaries

def _subject_binary():
    b = os.environ.get("AGENTSBX_RUNTIME") or os.path.join(TOP, "agentsbx")
    if os.sep not in b:
        b = shutil.which(b) or b
    return os.path.abspath(b)


def _is_runc(binary):
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.startswith("runc version")


SUBJECT = _subject_binary()
RUNC = shutil.which("runc")
SUBJECT_IS_RUNC = _is_runc(SUBJECT)


def pytest_report_header(config):
    return [f"runtime under test: {SUBJECT}" + (" (runc)" if SUBJECT_IS_RUNC else
                                                " (run from a private copy)"),
            f"reference runc: {RUNC or 'not installed'}"]


def pytest_generate_tests(metafunc):
    """Tests using `rt` run against the runtime under test; `runc_reference` tests also run
    against runc when it is installed and is not already the runtime under test."""
    if "rt_kind" not in metafunc.fixturenames:
        return
    kinds = ["subject"]
    if (metafunc.definition.get_closest_marker("runc_reference") and RUNC
            and not SUBJECT_IS_RUNC):
        kinds.append("runc")
    metafunc.parametrize("rt_kind", kinds)


class Result:
    def __init__(self, rc, out, err, argv):
        self.rc, self.out, self.err, self.argv = rc, out, err, argv

    def __repr__(self):
        return (f"Result(rc={self.rc}, argv={self.argv!r},\n  stdout={self.out[-2000:]!r},\n"
                f"  stderr={self.err[-2000:]!r})")

    def json(self):
        return json.loads(self.out)

    @property
    def ok(self):
        return self.rc == 0


class Runtime:
    """One runtime binary with a private --root state directory.

    Output goes to files, not pipes: a detached container inherits the runtime's stdout, and a
    pipe would keep the caller waiting until the container exits."""

    def __init__(self, binary, root, workdir, is_runc):
        self.binary, self.root, self.workdir, self.is_runc = binary, root, workdir, is_runc
        self.name = "runc" if is_runc else "agentsbx"
        self.created = []          # container ids to force-delete at teardown
        self.cgroup_paths = []     # cgroupsPath values used, checked at teardown
        self._n = itertools.count()

    def new_id(self):
        return f"it{os.getpid()}-{next(self._n)}-{uuid.uuid4().hex[:6]}"

    def cmd(self, *args, root=True, stdin=subprocess.DEVNULL, timeout=HANG_GUARD, cwd=None,
            stdout_path=None, global_args=(), pass_fds=(), preexec_fn=None, env=None):
        argv = [self.binary]
        if root:
            argv += ["--root", self.root]
        argv += list(global_args) + [str(a) for a in args]
        n = next(self._n)
        out_path = stdout_path or os.path.join(self.workdir, f"out.{n}")
        err_path = os.path.join(self.workdir, f"err.{n}")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            p = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err, cwd=cwd,
                                 pass_fds=pass_fds, preexec_fn=preexec_fn, env=env)
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise AssertionError(f"hang guard: {argv} still running after {timeout}s")
        return Result(rc, _read(out_path), _read(err_path), argv)

    def _track(self, cid, bundle):
        if cid not in self.created:
            self.created.append(cid)
        if bundle is not None and bundle.cgroups_path:
            self.cgroup_paths.append(bundle.cgroups_path)

    def create(self, bundle, cid=None, *extra, **kw):
        cid = self.new_id() if cid is None else cid
        bundle.save()
        self._track(cid, bundle)
        kw.setdefault("stdout_path", bundle.stdout_path)
        return self.cmd("create", "--bundle", bundle.path, *extra, cid, **kw), cid

    def run(self, bundle, cid=None, *extra, **kw):
        cid = self.new_id() if cid is None else cid
        bundle.save()
        self._track(cid, bundle)
        return self.cmd("run", "--bundle", bundle.path, *extra, cid, **kw), cid

    def start(self, cid):
        return self.cmd("start", cid)

    def state(self, cid):
        return self.cmd("state", cid)

    def status(self, cid):
        r = self.state(cid)
        return r.json()["status"] if r.ok else None

    def kill(self, cid, sig=None, *extra):
        return self.cmd("kill", *extra, cid, *([str(sig)] if sig is not None else []))

    def delete(self, cid, force=False):
        return self.cmd("delete", *(["--force"] if force else []), cid)

    def wait_status(self, cid, want, timeout=HANG_GUARD):
        """Polls `state` until the status is `want`; a hang guard, not a timing assertion."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.status(cid)
            if st == want:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"container {cid} status {st!r}, wanted {want!r}")
            time.sleep(0.05)


def _read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


# ---------------------------------------------------------------------------------------------
# Root filesystems

@pytest.fixture(scope="session")
def session_dir():
    # Not under pytest's 0700 tmp dirs: a container in a user namespace runs as an unmapped
    # host uid and must be able to traverse the path of its bundle.
    d = tempfile.mkdtemp(prefix="agentsbx-it-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def probe_binary(session_dir):
    p = os.environ.get("AGENTSBX_PROBE") or os.path.join(TOP, "tests", "probe", "probe")
    d = os.path.join(TOP, "tests", "probe")
    srcs = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith((".c", ".h")))
    if not os.path.exists(p) or os.path.getmtime(p) < max(os.path.getmtime(s) for s in srcs):
        p = os.path.join(session_dir, "probe")
        subprocess.run(["gcc", "-static", "-O2", "-D_GNU_SOURCE", "-o", p]
                       + [s for s in srcs if s.endswith(".c")], check=True)
    return p


PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" \
         "user:x:1000:1000:user:/home/user:/bin/sh\n"
GROUP = "root:x:0:\ntty:x:5:\nnogroup:x:65534:\nuser:x:1000:\n"


@pytest.fixture(scope="session")
def busybox_template(session_dir, probe_binary):
    bb = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(bb):
        pytest.fail("busybox not found: apt-get install -y busybox-static")
    out = subprocess.run(["file", "-L", bb], capture_output=True, text=True).stdout \
        if shutil.which("file") else "statically linked"
    if "statically linked" not in out and "static-pie" not in out:
        pytest.fail(f"{bb} is not static: apt-get install -y busybox-static")
    root = os.path.join(session_dir, "busybox-rootfs")
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "proc", "sys", "dev", "tmp",
              "root", "home/user", "var"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    shutil.copy2(bb, os.path.join(root, "bin", "busybox"))
    applets = subprocess.run([bb, "--list-full"], capture_output=True, text=True,
                             check=True).stdout.split()
    for a in applets:
        dst = os.path.join(root, a)
        if not os.path.lexists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.symlink("/bin/busybox", dst)
    shutil.copy2(probe_binary, os.path.join(root, "probe"))
    with open(os.path.join(root, "etc", "passwd"), "w") as f:
        f.write(PASSWD)
    with open(os.path.join(root, "etc", "group"), "w") as f:
        f.write(GROUP)
    return root


def _debian_tarball():
    """Builds (once, cached by package list) a minbase Debian rootfs tarball with mmdebstrap.
    Returns (path, None) or (None, reason)."""
    key = "-".join(DEBIAN_PACKAGES)
    tar = os.path.join(CACHE_DIR, f"debian-bookworm-minbase-{key}.tar")
    if os.path.exists(tar):
        return tar, None
    if not shutil.which("mmdebstrap"):
        return None, "mmdebstrap not installed (apt-get install -y mmdebstrap)"
    os.makedirs(CACHE_DIR, exist_ok=True)
    tmp = tar[:-len(".tar")] + f".tmp{os.getpid()}.tar"  # mmdebstrap picks the format by suffix
    r = subprocess.run(["mmdebstrap", "--variant=minbase", "--include=" + ",".join(DEBIAN_PACKAGES),
                        "bookworm", tmp], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return None, f"mmdebstrap failed (rc {r.returncode}): {r.stderr.strip()[-800:]}"
    os.rename(tmp, tar)
    return tar, None


@pytest.fixture(scope="session")
def debian_rootfs(session_dir, probe_binary):
    tar, reason = _debian_tarball()
    if tar is None:
        if os.environ.get("CI"):
            pytest.fail(f"Debian rootfs unavailable in CI: {reason}")
        pytest.skip(f"Debian rootfs unavailable: {reason}")
    root = os.path.join(session_dir, "debian-rootfs")
    os.makedirs(root)
    subprocess.run(["tar", "-C", root, "-xf", tar], check=True)
    shutil.copy2(probe_binary, os.path.join(root, "probe"))
    return root


# ---------------------------------------------------------------------------------------------
# Bundles

class Bundle:
    """A bundle directory: config.json (generated by the runtime's own `spec`, then edited as
    a dict in `self.config`) and rootfs/. `save()` writes config.json."""

    def __init__(self, path, rootfs, config):
        self.path, self.rootfs, self.config = path, rootfs, config
        self.stdout_path = os.path.join(path, "container.out")

    @property
    def process(self):
        return self.config["process"]

    @property
    def linux(self):
        return self.config.setdefault("linux", {})

    @property
    def cgroups_path(self):
        return self.config.get("linux", {}).get("cgroupsPath")

    def args(self, *argv):
        self.process["args"] = [str(a) for a in argv]
        return self

    def add_mount(self, destination, type_, source, options=None):
        m = {"destination": destination, "type": type_, "source": source}
        if options is not None:
            m["options"] = options
        self.config.setdefault("mounts", []).append(m)
        return m

    def remove_mount(self, destination):
        self.config["mounts"] = [m for m in self.config.get("mounts", [])
                                 if m["destination"] != destination]

    def set_namespace(self, type_, path=None):
        ns = [n for n in self.linux.setdefault("namespaces", []) if n["type"] != type_]
        ns.append({"type": type_, **({"path": path} if path else {})})
        self.linux["namespaces"] = ns

    def remove_namespace(self, type_):
        self.linux["namespaces"] = [n for n in self.linux.get("namespaces", [])
                                    if n["type"] != type_]

    def hook(self, kind, path, args=None, env=None, timeout=None):
        h = {"path": path}
        if args is not None:
            h["args"] = args
        if env is not None:
            h["env"] = env
        if timeout is not None:
            h["timeout"] = timeout
        self.config.setdefault("hooks", {}).setdefault(kind, []).append(h)
        return h

    def save(self):
        with open(os.path.join(self.path, "config.json"), "w") as f:
            json.dump(self.config, f, indent=2)

    def container_output(self):
        return _read(self.stdout_path) if os.path.exists(self.stdout_path) else ""


_SPEC_CACHE = {}


def spec_config(rt):
    """config.json as produced by `<runtime> spec` (cached per binary)."""
    if rt.binary not in _SPEC_CACHE:
        d = tempfile.mkdtemp(prefix="spec-", dir=rt.workdir)
        r = rt.cmd("spec", "--bundle", d, root=False)
        assert r.ok, f"`spec` failed: {r}"
        with open(os.path.join(d, "config.json")) as f:
            _SPEC_CACHE[rt.binary] = json.load(f)
    return copy.deepcopy(_SPEC_CACHE[rt.binary])


@pytest.fixture
def rt_kind():
    return "subject"


@pytest.fixture(scope="session")
def subject_binary(session_dir):
    """A private copy of the runtime under test, taken once per session, so that a rebuild
    in the working tree during the run cannot swap the binary between (or during) tests."""
    if not os.path.exists(SUBJECT):
        pytest.fail(f"runtime binary {SUBJECT} not found (build it with make, or set "
                    "AGENTSBX_RUNTIME)")
    if SUBJECT_IS_RUNC:
        return SUBJECT
    d = os.path.join(session_dir, "bin")
    os.makedirs(d, exist_ok=True)
    copy_path = os.path.join(d, os.path.basename(SUBJECT))
    shutil.copy2(SUBJECT, copy_path)
    return copy_path


@pytest.fixture
def rt(request, rt_kind, session_dir, subject_binary):
    """The runtime for this test, with a private --root; leak checks at teardown."""
    binary, is_runc = (RUNC, True) if rt_kind == "runc" else (subject_binary, SUBJECT_IS_RUNC)
    m = request.node.get_closest_marker("agentsbx_only")
    if m and is_runc:
        pytest.skip(f"agentsbx-only (runc 1.1.5 does not do this): "
                    f"{m.args[0] if m.args else m.kwargs.get('reason', '')}")
    work = tempfile.mkdtemp(prefix="t-", dir=session_dir)
    os.chmod(work, 0o755)
    root = os.path.join(work, "state")
    r = Runtime(binary, root, work, is_runc)
    yield r
    problems = []
    for cid in r.created:
        r.cmd("delete", "--force", cid, timeout=60)
        if "/" in cid or cid in ("", ".", ".."):
            continue  # an invalid id the test expected to be refused
        if os.path.exists(os.path.join(root, cid)):
            problems.append(f"state dir {root}/{cid} left after delete --force")
        problems += leftover_cgroups(cid, r.cgroup_paths)
    problems += leftover_mounts(work)
    problems += leftover_processes(work)
    reap_leaked_cgroups(r.created, r.cgroup_paths)
    if not problems:
        shutil.rmtree(work, ignore_errors=True)
    assert not problems, "leaked after the test:\n  " + "\n  ".join(problems)


def cgroup_hierarchies():
    """Mount points of every cgroup (v1) and cgroup2 hierarchy on the host."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            if right.split()[0] in ("cgroup", "cgroup2"):
                out.append(left.split()[4])
    return out


def leftover_cgroups(cid, paths=()):
    found = []
    for h in cgroup_hierarchies():
        for p in paths:
            d = os.path.join(h, p.lstrip("/")) if p.startswith("/") else None
            if d and os.path.isdir(d):
                found.append(f"cgroup {d} left")
        base_depth = h.rstrip("/").count("/")
        for dirpath, dirnames, _ in os.walk(h):
            if dirpath.count("/") - base_depth >= 3:
                dirnames[:] = []
            if cid in dirnames or any(cid in d for d in dirnames):
                found += [f"cgroup {dirpath}/{d} left" for d in dirnames if cid in d]
    return found


def reap_leaked_cgroups(cids, paths):
    """After a leak was recorded: kill the processes left in cgroups named after this test's
    containers (they were started by this test) and remove those cgroups, so one failing test
    does not leave the machine dirty for the next ones."""
    dirs = []
    for h in cgroup_hierarchies():
        for p in paths:
            if p.startswith("/"):
                dirs.append(os.path.join(h, p.lstrip("/")))
        base_depth = h.rstrip("/").count("/")
        for dirpath, dirnames, _ in os.walk(h):
            if dirpath.count("/") - base_depth >= 3:
                dirnames[:] = []
            dirs += [os.path.join(dirpath, d) for d in dirnames
                     if any(c in d for c in cids if "/" not in c and c not in ("", ".", ".."))]
    dirs = [d for d in set(dirs) if os.path.isdir(d)]
    for d in dirs:
        with contextlib.suppress(OSError):
            with open(os.path.join(d, "cgroup.procs")) as f:
                for pid in f.read().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)
    deadline = time.monotonic() + 10
    for d in sorted(dirs, key=len, reverse=True):
        while os.path.isdir(d):
            try:
                os.rmdir(d)
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)


def leftover_mounts(prefix):
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == prefix or mp.startswith(prefix + "/"):
                found.append(f"mount {mp} left")
    return found


def leftover_processes(prefix):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            root = os.readlink(f"/proc/{pid}/root")
            if root.startswith(prefix + "/"):
                found.append(f"process {pid} rooted at {root} left")
    return found


@pytest.fixture
def make_bundle(rt, busybox_template):
    """Factory: make_bundle(args=[...], rootfs=None, kind='busybox') -> Bundle.

    The config comes from the runtime's own `spec`, edited to: the given args, terminal false,
    root not read-only (tests that need it set it), rootfs a private copy of the template."""
    def make(args=("/probe", "report"), rootfs_template=None, shared_rootfs=None):
        b = tempfile.mkdtemp(prefix="bundle-", dir=rt.workdir)
        os.chmod(b, 0o755)
        if shared_rootfs:
            rootfs = shared_rootfs
        else:
            rootfs = os.path.join(b, "rootfs")
            subprocess.run(["cp", "-a", rootfs_template or busybox_template, rootfs], check=True)
        cfg = spec_config(rt)
        cfg["process"]["terminal"] = False
        cfg["process"]["args"] = list(args)
        cfg["root"] = {"path": rootfs if shared_rootfs else "rootfs", "readonly": False}
        bundle = Bundle(b, rootfs, cfg)
        bundle.save()
        return bundle
    return make


@pytest.fixture
def bundle(make_bundle):
    return make_bundle()


def probe_report(rt, bundle, check=True):
    """Runs `/probe report` (or the bundle's args if they already start with /probe report)
    in the foreground and returns the parsed JSON."""
    if bundle.process["args"][:2] != ["/probe", "report"]:
        bundle.args("/probe", "report")
    r, _ = rt.run(bundle)
    if not check:
        return r
    assert r.ok, f"probe report failed: {r}"
    return json.loads(r.out.strip().splitlines()[-1])


def run(rt, bundle, args=None):
    """Runs the bundle (optionally with new args) in the foreground: Result(rc, out, err)."""
    if args is not None:
        bundle.args(*args)
    r, _ = rt.run(bundle)
    return r


def assert_refused(rt, r, *names):
    """A refusal: a non-zero exit and, under agentsbx, an error message naming each of `names`
    (the field, option or value at fault, as the house rule asks: one clear message naming what
    was wrong). runc's wording is its own, so against runc only the exit status is checked."""
    assert r.rc != 0, r
    if not rt.is_runc:
        for n in names:
            assert n in r.err, f"the refusal does not name {n!r}: {r}"


def probe_json(result):
    """The last JSON line a probe active check printed."""
    return json.loads(result.out.strip().splitlines()[-1])


def mountinfo_by_point(report):
    """Probe report mounts as {mountpoint: last mount entry} (the top of the stack)."""
    return {m["mountpoint"]: m for m in report["mounts"]}


@contextlib.contextmanager
def holder_process(*unshare_flags):
    """A host process in fresh namespaces (via unshare) for join-by-path tests; killed by PID."""
    p = subprocess.Popen(["unshare", *unshare_flags, "sleep", "600"])
    try:
        # Wait until unshare has exec'ed sleep, so /proc/PID/ns/* are the new namespaces.
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{p.pid}/exe").endswith("sleep"):
                    break
            assert time.monotonic() < deadline, "unshare holder did not start"
            time.sleep(0.02)
        yield p.pid
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()


def file_digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---------------------------------------------------------------------------------------------
# A run in which no test passed is a failure, never a green run (e.g. everything skipped or
# deselected because a prerequisite was missing).

_PASSED = []


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed:
        _PASSED.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and not _PASSED and not session.config.option.collectonly:
        session.config._asbx_none_passed = True
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if getattr(config, "_asbx_none_passed", False):
        terminalreporter.write_line("FAILED: no integration test passed in this run (all "
                                    "skipped or deselected)", red=True)


@pytest.fixture
def lab_env():
    """Extra environment of the egress lab's upstream.py (test_egress.py `lab`); a test module
    overrides it (test_egress_tls.py: UPSTREAM_TLS). Here, not in test_egress.py, so that every
    module importing `lab` resolves it."""
    return {}
