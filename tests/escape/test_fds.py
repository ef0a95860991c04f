"""CVE-2024-21626 class: a host fd of the runtime leaked into the container and used as the
working directory (`process.cwd` = /proc/self/fd/N), giving the process a cwd outside its root.

Mechanism guarded: the init and exec'd processes chdir() after pivot_root/setns with no host
directory fd open (the state dir and rootfs fds are closed in the stage child; close_range runs
before execve). Each case must be refused, or run with a cwd inside the container; a marker file
written through the cwd must not appear anywhere on the host side of the test.
"""

import os

import pytest

from conftest import json_lines, probe_report

FDS = list(range(3, 21))


def _host_markers(rt, name):
    found = []
    for top in (rt.workdir, "/run", "/sys/fs/cgroup"):
        for dirpath, dirnames, filenames in os.walk(top):
            if "rootfs" in dirnames and dirpath.startswith(rt.workdir):
                dirnames.remove("rootfs")  # inside the container: fine
            if name in filenames:
                found.append(os.path.join(dirpath, name))
            if dirpath.count("/") > 8:
                dirnames[:] = []
    return found


@pytest.mark.parametrize("fd", FDS)
def test_process_cwd_proc_self_fd(rt, bundle, fd, host_guard):
    bundle.process["cwd"] = f"/proc/self/fd/{fd}"
    bundle.args("/bin/sh", "-c", "/probe write escaped-cwd-marker pwned; /probe report")
    r, _ = rt.run(bundle)
    leaked = _host_markers(rt, "escaped-cwd-marker")
    assert not leaked, f"wrote through a leaked host fd: {leaked}"
    if r.rc == 0:
        rep = [x for x in json_lines(r.out) if "cwd" in x][-1]
        assert not rep["cwd"].startswith("(unreachable)"), rep["cwd"]
        assert sorted(rep["fds"]) == ["0", "1", "2"], rep["fds"]


@pytest.mark.parametrize("fd", FDS)
def test_exec_cwd_proc_self_fd(rt, bundle, fd, host_guard):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    r = rt.cmd("exec", "--cwd", f"/proc/self/fd/{fd}", cid, "/bin/sh", "-c",
               "/probe write escaped-exec-marker pwned; /probe report")
    leaked = _host_markers(rt, "escaped-exec-marker")
    assert not leaked, f"wrote through a leaked host fd: {leaked}"
    if r.rc == 0:
        rep = [x for x in json_lines(r.out) if "cwd" in x][-1]
        assert not rep["cwd"].startswith("(unreachable)"), rep["cwd"]
        assert sorted(rep["fds"]) == ["0", "1", "2"], rep["fds"]


def test_exec_sees_only_stdio(rt, bundle):
    """An exec'd process sees stdio only: no fd of the runtime, the caller or the init."""
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    extra = os.open("/etc/hostname", os.O_RDONLY)
    try:
        r = rt.cmd("exec", cid, "/probe", "report", pass_fds=(extra,))
    finally:
        os.close(extra)
    assert r.ok, r
    rep = json_lines(r.out)[-1]
    assert sorted(rep["fds"]) == ["0", "1", "2"], rep["fds"]


def test_exec_preserve_fds_only_those(rt, bundle, tmp_path):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    p = tmp_path / "pf"
    p.write_text("x")
    fd = os.open(p, os.O_RDONLY)
    other = os.open("/etc/hostname", os.O_RDONLY)
    try:
        r = rt.cmd("exec", "--preserve-fds", "1", cid, "/probe", "report", pass_fds=(3, other),
                   preexec_fn=lambda: os.dup2(fd, 3))
    finally:
        os.close(fd)
        os.close(other)
    assert r.ok, r
    rep = json_lines(r.out)[-1]
    assert sorted(rep["fds"]) == ["0", "1", "2", "3"], rep["fds"]

