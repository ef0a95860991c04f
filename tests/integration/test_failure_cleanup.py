"""A create that fails at any step leaves nothing behind: no state dir, no cgroup, no process,
no mount (runtime.md "Operations": create errors; ARCHITECTURE.md "bad input ... leaves nothing
behind"). Each case breaks one step, from parsing the config to running a hook, and names the
cgroupsPath so its removal can be checked. The fixture teardown also checks processes and
mounts under the test's directory.

runc is the reference behaviour.
"""

import os

import pytest

from conftest import cgroup_hierarchies

pytestmark = pytest.mark.runc_reference


def break_invalid_json(b):
    b.save = lambda: open(os.path.join(b.path, "config.json"), "w").write('{"ociVersion": ')


def break_not_an_object(b):
    b.save = lambda: open(os.path.join(b.path, "config.json"), "w").write('[1, 2]')


def break_wrong_type(b):
    b.process["args"] = "not-a-list"


def break_missing_root(b):
    del b.config["root"]


def break_missing_rootfs(b):
    b.config["root"]["path"] = "/does/not/exist/rootfs"


def break_rootfs_is_file(b):
    f = os.path.join(b.path, "rootfs-file")
    open(f, "w").close()
    b.config["root"]["path"] = f


def break_bind_source_missing(b):
    b.add_mount("/mnt/x", "bind", "/does/not/exist", ["bind"])


def break_unknown_fs_type(b):
    b.add_mount("/mnt/x", "nosuchfilesystem", "none", [])


def break_bad_mount_option(b):
    b.add_mount("/mnt/x", "tmpfs", "tmpfs", ["size=notanumber"])


def break_missing_executable(b):
    b.args("/no/such/executable")


def break_ns_path(b):
    b.set_namespace("network", "/does/not/exist/netns")


def break_unknown_sysctl(b):
    b.linux["sysctl"] = {"net.no.such.key": "1"}


def break_failing_hook(b):
    b.hook("createRuntime", "/bin/false")


def break_failing_late_hook(b):
    b.hook("createContainer", "/bin/false")


def break_bad_uid_map(b):
    b.set_namespace("user")
    b.linux["uidMappings"] = [{"containerID": 0, "hostID": 0, "size": 0}]
    b.linux["gidMappings"] = [{"containerID": 0, "hostID": 0, "size": 0}]


def break_cwd_relative(b):
    b.process["cwd"] = "relative/dir"


CASES = [break_invalid_json, break_not_an_object, break_wrong_type, break_missing_root,
         break_missing_rootfs, break_rootfs_is_file, break_bind_source_missing,
         break_unknown_fs_type, break_bad_mount_option, break_missing_executable,
         break_ns_path, break_unknown_sysctl, break_failing_hook, break_failing_late_hook,
         break_bad_uid_map, break_cwd_relative]


@pytest.mark.parametrize("breaker", CASES, ids=[c.__name__[6:] for c in CASES])
def test_failed_create_leaves_nothing(rt, bundle, breaker):
    cid = rt.new_id()
    cg = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = cg
    bundle.args("/probe", "sleep", "600")
    breaker(bundle)
    r, _ = rt.create(bundle, cid)
    assert r.rc != 0, r
    assert r.err.strip(), "a failed create must say why on stderr"
    assert not rt.state(cid).ok
    assert not os.path.exists(os.path.join(rt.root, cid)), "state dir left"
    for h in cgroup_hierarchies():
        assert not os.path.exists(os.path.join(h, cg.lstrip("/"))), f"cgroup {h}{cg} left"
    # `list` does not show it either.
    lst = rt.cmd("list", "--quiet")
    assert cid not in lst.out.split()


@pytest.mark.parametrize("breaker", [break_missing_executable, break_bind_source_missing,
                                     break_failing_hook],
                         ids=["missing_executable", "bind_source_missing", "failing_hook"])
def test_failed_run_leaves_nothing(rt, bundle, breaker):
    cid = rt.new_id()
    cg = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = cg
    breaker(bundle)
    r, _ = rt.run(bundle, cid)
    assert r.rc != 0, r
    assert not rt.state(cid).ok
    for h in cgroup_hierarchies():
        assert not os.path.exists(os.path.join(h, cg.lstrip("/"))), f"cgroup {h}{cg} left"


def test_id_in_use_leaves_first_intact(rt, make_bundle):
    first = make_bundle(args=("/probe", "sleep", "600"))
    r, cid = rt.create(first)
    assert r.ok, r
    pid = rt.state(cid).json()["pid"]
    second = make_bundle(args=("/probe", "sleep", "600"))
    r2, _ = rt.create(second, cid)
    assert r2.rc != 0
    st = rt.state(cid).json()
    assert st["pid"] == pid and st["status"] == "created"
    assert os.path.realpath(st["bundle"]) == os.path.realpath(first.path)


@pytest.mark.parametrize("verb", ["create", "run"])
def test_tiny_memory_limit_fails_promptly(rt, bundle, verb):
    """A memory limit far below what the init needs to set up: the kernel OOM-kills the init
    during setup. The runtime must fail at once with a reason (runc: "unable to set memory limit
    to 4096"), not wait forever on the sync socket, and leave nothing behind."""
    cid = rt.new_id()
    cg = f"/asbx-it-{cid}"
    bundle.linux["cgroupsPath"] = cg
    bundle.args("/probe", "sleep", "600")
    bundle.linux.setdefault("resources", {})["memory"] = {"limit": 4096}
    if verb == "create":
        r, _ = rt.create(bundle, cid, timeout=30)
    else:
        r, _ = rt.run(bundle, cid, timeout=30)
    assert r.rc != 0, r
    assert "memory" in r.err, r
    if not rt.is_runc:
        assert "4096" in r.err, r
    assert not rt.state(cid).ok
    assert not os.path.exists(os.path.join(rt.root, cid)), "state dir left"
    for h in cgroup_hierarchies():
        assert not os.path.exists(os.path.join(h, cg.lstrip("/"))), f"cgroup {h}{cg} left"


@pytest.mark.agentsbx_only("agentsbx sandbox")
def test_sandbox_tiny_memory_policy_fails_promptly(rt):
    """The same through a policy (limits.memoryBytes 1, accepted by the policy checker today):
    `sandbox` fails at once with the reason and leaves no state, sandbox dir or cgroup."""
    import json
    from conftest import leftover_cgroups
    from policyutil import audit_dir
    cid = rt.new_id()
    ws = os.path.join(rt.workdir, "ws")
    os.makedirs(ws)
    pol = os.path.join(rt.workdir, "tiny-policy.json")
    with open(pol, "w") as f:
        json.dump({"version": 1, "extends": "agent", "limits": {"memoryBytes": 1}}, f)
    r = rt.cmd("sandbox", "--id", cid, "--workspace", ws, "--", "/bin/true",
               global_args=["--audit-dir", audit_dir(rt), "--policy", pol], timeout=30)
    assert r.rc != 0, r
    assert "OOM" in r.err or "memory" in r.err, r
    assert not os.path.exists(os.path.join(rt.root, cid)), "state dir left"
    assert not os.path.exists(os.path.join(rt.root, "sandbox", cid)), "sandbox dir left"
    assert not leftover_cgroups(cid)
