"""Running without a mount namespace of its own, and joining one by path (issue 15).

Without a policy both are supported as runc supports them: no `mount` entry = the runtime's
mount namespace (the container chroots into its rootfs there; its mounts below the rootfs are
detached again at delete), a `path` = that namespace (the rootfs is set up and pivoted there).
Under an agent policy both are refused with the reason. The probe reports its namespaces and
root from inside; the host checks its own mount table.
"""

import json
import os
import subprocess

import pytest

from conftest import holder_process, probe_report, run
from policyutil import PROBE, pcreate, policy_bundle


def host_ns(kind):
    return os.readlink(f"/proc/self/ns/{kind}")


def mounts_below(path):
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].replace("\\040", " ")
            if mp.startswith(path.rstrip("/") + "/"):
                out.append(mp)
    return out


@pytest.mark.runc_reference
def test_no_mount_namespace_runs_in_the_runtimes(rt, bundle):
    bundle.remove_namespace("mount")
    # masks need a private mount namespace (runc: "unable to restrict sys entries")
    bundle.linux.pop("maskedPaths", None)
    bundle.linux.pop("readonlyPaths", None)
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    pid = rt.state(cid).json()["pid"]
    try:
        assert os.readlink(f"/proc/{pid}/ns/mnt") == host_ns("mnt")
        # the container's root is its rootfs (chroot), not the host's /
        assert os.stat(f"/proc/{pid}/root/probe").st_ino == os.stat(
            os.path.join(bundle.rootfs, "probe")).st_ino
        # its /proc is mounted below the rootfs in our namespace while it runs
        assert os.path.join(bundle.rootfs, "proc") in mounts_below(bundle.rootfs)
        if rt.is_runc:
            return  # runc's exec'd process gets the host's root here (stat /probe: ENOENT)
        # an exec'd process gets the same root
        e = rt.cmd("exec", cid, "/probe", "stat", "/probe")
        assert e.ok and json.loads(e.out.strip().splitlines()[-1])["result"] == "ok", e
        rep = rt.cmd("exec", cid, "/probe", "report")
        assert rep.ok, rep
        assert json.loads(rep.out.strip().splitlines()[-1])["namespaces"]["mnt"] == host_ns("mnt")
    finally:
        try:
            rt.kill(cid, 9)
            rt.wait_status(cid, "stopped")
            deleted = rt.delete(cid)
            left = mounts_below(bundle.rootfs)
        finally:
            if rt.is_runc:
                # runc leaves its mounts (and a bind of the rootfs onto itself) in the host's
                # namespace: detach them whatever happened, so nothing outlives the test
                for mp in sorted(mounts_below(bundle.rootfs), key=len, reverse=True) + [bundle.rootfs]:
                    subprocess.run(["umount", "-l", mp], check=False, capture_output=True)
    assert deleted.ok, deleted
    assert rt.is_runc or left == [], left


@pytest.mark.agentsbx_only("root.readonly without a mount namespace: runc remounts the host's mount")
def test_no_mount_namespace_refuses_readonly_root(rt, bundle):
    bundle.remove_namespace("mount")
    bundle.linux.pop("maskedPaths", None)
    bundle.linux.pop("readonlyPaths", None)
    bundle.config["root"]["readonly"] = True
    r = run(rt, bundle, ["/probe", "exit", "0"])
    assert r.rc != 0 and "root.readonly" in r.err and "mount namespace" in r.err, r
    assert mounts_below(bundle.rootfs) == []


@pytest.mark.runc_reference
def test_no_mount_namespace_refuses_masks(rt, bundle):
    bundle.remove_namespace("mount")
    bundle.linux["maskedPaths"] = ["/proc/kcore"]
    r = run(rt, bundle, ["/probe", "exit", "0"])
    assert r.rc != 0 and "mount namespace" in r.err.replace("MNT namespace", "mount namespace"), r
    if not rt.is_runc:
        assert "linux.maskedPaths" in r.err, r
    assert mounts_below(bundle.rootfs) == []


@pytest.mark.runc_reference
def test_join_mount_namespace_by_path(rt, bundle):
    with holder_process("--mount") as hpid:
        want = os.readlink(f"/proc/{hpid}/ns/mnt")
        assert want != host_ns("mnt")
        bundle.set_namespace("mount", f"/proc/{hpid}/ns/mnt")
        rep = probe_report(rt, bundle)
        assert rep["namespaces"]["mnt"] == want
        # the rootfs was set up in that namespace: its own /proc, not the host's mounts
        assert any(m["mountpoint"] == "/proc" for m in rep["mounts"])
    # nothing of the container's landed in ours
    assert mounts_below(bundle.rootfs) == []


@pytest.mark.agentsbx_only("agent policy")
@pytest.mark.parametrize("mode", ["none", "path"])
def test_policy_refuses_shared_mount_namespace(rt, make_bundle, mode):
    pb = policy_bundle(make_bundle)
    if mode == "none":
        pb.remove_namespace("mount")
        r, _ = pcreate(rt, pb, [PROBE, "exit", "0"], profile="agent")
        assert r.rc != 0 and "no `mount` entry" in r.err and "mount namespace" in r.err, r
    else:
        with holder_process("--mount") as hpid:
            pb.set_namespace("mount", f"/proc/{hpid}/ns/mnt")
            r, _ = pcreate(rt, pb, [PROBE, "exit", "0"], profile="agent")
        assert r.rc != 0 and "joins the mount namespace" in r.err, r
    assert mounts_below(pb.rootfs) == []
