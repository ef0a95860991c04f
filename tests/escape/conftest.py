"""Fixtures for the escape suite: the integration suite's fixtures (runtime with a private --root,
busybox bundles with /probe, leak checks at teardown), plus host-side helpers.

The integration conftest is loaded under its own module name (`asbx_it`) so that both suites can
run in one pytest session; its fixtures and hooks are re-exported from here. Every escape test
passes only when the attempt was refused AND nothing outside the container changed.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

_IT = os.path.join(os.path.dirname(__file__), "..", "integration", "conftest.py")
if "asbx_it" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("asbx_it", _IT)
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["asbx_it"] = _mod
    _spec.loader.exec_module(_mod)

from asbx_it import *  # noqa: F401,F403  fixtures and hooks (rt, make_bundle, bundle, ...)
from asbx_it import SUBJECT_IS_RUNC, TOP, probe_json  # noqa: F401


def pytest_configure(config):  # noqa: F811  (the integration one registers the markers)
    sys.modules["asbx_it"].pytest_configure(config)
    config.addinivalue_line("markers", "agent_profile: needs `agentsbx --profile agent`")


# ---------------------------------------------------------------------------------------------
# Host state: what must not change

def tree_digest(path, max_files=20000):
    """A digest of every entry under path (type, mode, owner, size, content of regular files,
    symlink targets). Used to prove a host directory is unchanged by an attempt."""
    h = hashlib.sha256()
    n = 0
    if not os.path.lexists(path):
        return "absent"
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in [""] + sorted(filenames) + sorted(dirnames):
            p = os.path.join(dirpath, name) if name else dirpath
            try:
                st = os.lstat(p)
            except OSError:
                continue
            h.update(f"{os.path.relpath(p, path)}|{st.st_mode}|{st.st_uid}|{st.st_gid}|"
                     f"{st.st_size}\n".encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            elif os.path.isfile(p) and name:
                with open(p, "rb") as f:
                    h.update(f.read())
            n += 1
            if n > max_files:
                return h.hexdigest()
    return h.hexdigest()


# Host files an escape would typically target; hashed before and after each test that uses
# `host_guard`. Only files that exist here and are readable are taken.
HOST_FILES = ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
              "/proc/sys/fs/binfmt_misc/status", "/etc/passwd", "/etc/shadow", "/etc/hostname",
              "/etc/resolv.conf", "/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname")


def host_snapshot(extra=()):
    snap = {}
    for p in HOST_FILES + tuple(extra):
        try:
            if os.path.isdir(p):
                snap[p] = tree_digest(p)
            else:
                with open(p, "rb") as f:
                    snap[p] = hashlib.sha256(f.read()).hexdigest()
        except OSError as e:
            snap[p] = f"unreadable:{e.errno}"
    return snap


def host_mounts():
    with open("/proc/self/mountinfo") as f:
        return sorted(" ".join(ln.split()[3:5]) for ln in f)


@pytest.fixture
def host_guard(rt, subject_binary):
    """Hashes sensitive host files, the runtime binary and the host mount table before the test
    and asserts they are unchanged after it. `host_guard.watch(path)` adds a victim."""
    class Guard:
        def __init__(self):
            self.extra = [subject_binary]
            self.before = None

        def watch(self, *paths):
            self.extra += list(paths)
            self.before = host_snapshot(self.extra)

    g = Guard()
    g.before = host_snapshot(g.extra)
    mounts = host_mounts()
    yield g
    after = host_snapshot(g.extra)
    changed = [p for p in g.before if g.before[p] != after.get(p)]
    assert not changed, f"host files changed by the attempt: {changed}"
    # Other suites (engine tests) may mount under /tmp, /run or /var on this shared machine at
    # the same time: a new mount counts when it is under this test's dir (where the victims
    # live) or anywhere outside those three trees.
    new_mounts = [m for m in host_mounts() if m not in mounts and
                  (m.split()[1].startswith(rt.workdir + "/") or
                   m.split()[1].split("/")[1] not in ("tmp", "run", "var"))]
    assert not new_mounts, f"new host mounts after the attempt: {new_mounts}"


def json_lines(text):
    out = []
    for ln in text.splitlines():
        ln = ln.strip()
        if ln.startswith("{"):
            try:
                out.append(json.loads(ln))
            except ValueError:
                pass
    return out


def one_line_error(result):
    """A clean failure: non-zero exit (not a signal, not a shell's 128+N), something on stderr.
    255 is allowed: runc's (and our) `exec` exit status when the process could not be started."""
    return result.rc > 0 and (result.rc < 128 or result.rc == 255) and result.err.strip() != ""


def profile_agent_reason(rt):
    """None when `--profile agent` is accepted by the runtime under test, else why not."""
    if rt.is_runc:
        return "runc has no --profile"
    r = rt.cmd("--profile", "agent", "features", root=False)
    if r.ok:
        return None
    return ("`agentsbx --profile agent` is not accepted yet (the agent policy profile is "
            f"being written): {r.err.strip()[:200]}")


def have(cmd):
    return shutil.which(cmd) is not None


def run_host(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)
