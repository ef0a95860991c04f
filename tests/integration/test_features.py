"""`agentsbx features` (issue 21): everything runc 1.1's `features` reports, and the io.agentsbx.*
annotations of this host's policy capabilities, each compared with what the host itself answers
when asked independently here (netlink, unshare, nft, statfs), never with a constant."""

import ctypes
import json
import os
import shutil
import subprocess

import pytest

from conftest import RUNC, mountinfo_by_point, probe_report
from test_denials import AUDIT_GET, _audit_req

pytestmark = pytest.mark.agentsbx_only("io.agentsbx annotations")

# runc 1.1 options we do not list, and why (docs/man/agentsbx-features.8.md): iversion has no
# fs-context flag (the kernel sets SB_I_VERSION itself where it matters), tmpcopyup is refused.
NOT_OURS = {"iversion", "noiversion", "tmpcopyup"}


def features(rt, **kw):
    r = rt.cmd("features", root=False, **kw)
    assert r.ok, r
    return r.json()


def _paths(d, p=""):
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _paths(v, f"{p}.{k}")
    else:
        yield p, d


@pytest.mark.skipif(not RUNC, reason="runc is not installed: nothing to compare with")
def test_everything_runc_reports(rt):
    ours = dict(_paths(features(rt)))
    runc = json.loads(subprocess.run([RUNC, "features"], capture_output=True, text=True, check=True).stdout)
    for path, val in _paths(runc):
        if path.startswith(".annotations."):
            continue  # runc's own keys; ours below
        assert path in ours, f"runc reports {path}, we do not"
        if isinstance(val, list):
            missing = set(val) - set(ours[path]) - (NOT_OURS if path == ".mountOptions" else set())
            assert not missing, f"{path}: runc lists {sorted(missing)}, we do not"
        elif isinstance(val, bool) and path.endswith(".enabled") and val:
            # a feature runc has built in and we do not is named in the man page; these we have
            assert ours[path] is True or path in (".linux.cgroup.systemdUser",), (path, ours[path])
    ann = features(rt)["annotations"]
    assert ann["io.agentsbx.version"] and ann["io.agentsbx.checkpoint.enabled"] == "true", ann


def test_seccomp_notify_matches_kernel(rt):
    libc = ctypes.CDLL(None, use_errno=True)
    action = ctypes.c_uint(0x7FC00000)  # SECCOMP_RET_USER_NOTIF
    ok = libc.syscall(317, 2, 0, ctypes.byref(action)) == 0  # seccomp(SECCOMP_GET_ACTION_AVAIL)
    assert features(rt)["annotations"]["io.agentsbx.seccomp.notify"] == ("true" if ok else "false")


def test_audit_state_matches_netlink(rt):
    ann = features(rt)["annotations"]
    try:
        state = _audit_req(AUDIT_GET)
    except OSError as e:
        assert ann["io.agentsbx.audit.enabled"] == "unavailable", (e, ann)
        return
    assert ann["io.agentsbx.audit.enabled"] == str(state), ann
    abi = int(ann["io.agentsbx.landlock.abi"])
    want = "true" if abi >= 7 and state > 0 else "false"
    assert ann["io.agentsbx.landlock.denials.reported"] == want, ann


def test_audit_unavailable_to_nobody(rt):
    """as uid 65534 AUDIT_GET is refused: reported as such, with the kernel's reason"""
    r = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                        rt.binary, "features"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r
    ann = json.loads(r.stdout)["annotations"]
    assert ann["io.agentsbx.audit.enabled"] == "unavailable", ann
    assert "Operation not permitted" in ann["io.agentsbx.audit.enabled.error"], ann
    assert ann["io.agentsbx.landlock.denials.reported"] == "false", ann


def _sh_ok(argv):
    return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0


@pytest.mark.parametrize("as_nobody", [False, True])
def test_userns_probe_matches_unshare(rt, as_nobody):
    """what an unprivileged uid gets from unshare(1) -U is what we report, root or not"""
    want = _sh_ok(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "unshare", "-U", "true"])
    pre = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"] if as_nobody else []
    r = subprocess.run(pre + [rt.binary, "features"], capture_output=True, text=True, timeout=30)
    ann = json.loads(r.stdout)["annotations"]
    assert ann["io.agentsbx.userns.unprivileged"] == ("true" if want else "false"), ann


@pytest.mark.skipif(not shutil.which("nft"), reason="nft(8) is not installed: no independent probe")
def test_nftables_matches_nft(rt):
    want = _sh_ok(["unshare", "-n", "nft", "add", "table", "inet", "t"])
    ann = features(rt)["annotations"]
    assert ann["io.agentsbx.nftables"] == ("true" if want else "false"), ann


def test_nftables_probe_as_nobody(rt):
    """as uid 65534 the probe loads its table in a user + network namespace of its own: true where
    unprivileged user namespaces work, else false naming the refused unshare(2)"""
    r = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                        "--", "sh", "-c", f"exec {rt.binary} features"], capture_output=True, text=True)
    ann = json.loads(r.stdout)["annotations"]
    if ann["io.agentsbx.userns.unprivileged"] == "true":
        assert ann["io.agentsbx.nftables"] == "true", ann  # nobody's own user+net namespace
    else:
        assert ann["io.agentsbx.nftables"] == "false" and "unshare" in ann["io.agentsbx.nftables.error"], ann


def test_pasta_matches_path(rt):
    found = any(os.access(p, os.X_OK) for p in ("/usr/bin/pasta", "/usr/sbin/pasta", "/usr/local/bin/pasta"))
    ann = features(rt)["annotations"]
    assert ann["io.agentsbx.pasta"] == ("true" if found else "false"), ann
    if not found:
        assert "passt" in ann["io.agentsbx.pasta.error"]


def test_cgroup_layout_matches_statfs(rt):
    def fstype(p):
        return subprocess.run(["stat", "-f", "-c", "%T", p], capture_output=True, text=True).stdout.strip()
    top = fstype("/sys/fs/cgroup")
    if top == "cgroup2fs":
        want = "unified"
        with open("/sys/fs/cgroup/cgroup.controllers") as f:
            ctl = f.read().split()
    else:
        want = "hybrid" if os.path.isdir("/sys/fs/cgroup/unified") and \
            fstype("/sys/fs/cgroup/unified") == "cgroup2fs" else "legacy"
        with open("/proc/cgroups") as f:
            ctl = [x.split()[0] for x in f if not x.startswith("#") and x.split()[1] != "0" and x.split()[3] == "1"]
    ann = features(rt)["annotations"]
    assert ann["io.agentsbx.cgroup.layout"] == want, ann
    assert ann["io.agentsbx.cgroup.controllers"].split() == ctl, ann


def test_lazytime_reaches_the_superblock(rt, bundle):
    """a listed option does what it says: lazytime on a new tmpfs shows in its superblock options"""
    assert {"lazytime", "nolazytime", "silent", "loud", "acl", "noacl"} <= set(features(rt)["mountOptions"])
    bundle.add_mount("/scratch", "tmpfs", "tmpfs", ["lazytime", "silent", "size=1m"])
    bundle.add_mount("/scratch2", "tmpfs", "tmpfs", ["lazytime", "nolazytime", "size=1m"])
    rep = mountinfo_by_point(probe_report(rt, bundle))
    # the kernel shows SB_LAZYTIME among the per-mount flags of mountinfo (show_sb_opts)
    assert "lazytime" in (rep["/scratch"]["options"] + "," + rep["/scratch"]["super_options"]).split(","), rep
    assert "lazytime" not in (rep["/scratch2"]["options"] + "," + rep["/scratch2"]["super_options"]).split(",")
