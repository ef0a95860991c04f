"""The process object (runtime-spec config.md "Process") and the uts/sysctl/oom settings, as the
probe sees them from inside: args, env, cwd, user, umask, capabilities, noNewPrivileges,
rlimits, oomScoreAdj, hostname, domainname, sysctl.

runc is the reference behaviour.
"""

import os
import resource

import pytest

from conftest import assert_refused, caps_mask, probe_json, probe_report, run

pytestmark = pytest.mark.runc_reference


def status_hex(rep, key):
    return int(rep["status"][key], 16)


def test_args_passed_verbatim(rt, bundle):
    r = run(rt, bundle, ["/bin/sh", "-c", 'printf "%s|" "$@"', "sh", "a b", "", "c\"d", "$HOME"])
    assert r.ok, r
    assert r.out == 'a b||c"d|$HOME|'


def test_env(rt, bundle):
    bundle.process["env"] = ["PATH=/bin:/usr/bin", "FOO=bar baz", "EMPTY=", "X=1=2"]
    rep = probe_report(rt, bundle)
    for e in bundle.process["env"]:
        assert e in rep["env"], rep["env"]


def test_cwd(rt, bundle):
    bundle.process["cwd"] = "/home/user"
    rep = probe_report(rt, bundle)
    assert rep["cwd"] == "/home/user"


def test_cwd_created_if_missing_on_readonly_root(rt, bundle):
    """runc creates a missing cwd before the rootfs turns read-only: root.readonly true and a cwd
    absent from the image still start, in that directory, and the root stays read-only."""
    bundle.config["root"]["readonly"] = True
    bundle.process["cwd"] = "/new/work/dir"
    rep = probe_report(rt, bundle)
    assert rep["cwd"] == "/new/work/dir"
    assert os.path.isdir(os.path.join(bundle.rootfs, "new/work/dir"))
    root = [m for m in rep["mounts"] if m["mountpoint"] == "/"][-1]
    assert "ro" in root["options"].split(","), root


def test_cwd_created_if_missing(rt, bundle):
    # runc creates a missing cwd inside the rootfs.
    bundle.process["cwd"] = "/does/not/exist"
    rep = probe_report(rt, bundle)
    assert rep["cwd"] == "/does/not/exist"


def test_user_ids_and_groups(rt, bundle):
    bundle.process["user"] = {"uid": 1000, "gid": 1001, "additionalGids": [10, 20, 1001]}
    rep = probe_report(rt, bundle)
    assert (rep["uid"], rep["euid"], rep["gid"], rep["egid"]) == (1000, 1000, 1001, 1001)
    assert set(rep["groups"]) == {10, 20, 1001}
    assert rep["status"]["Uid"].split() == ["1000"] * 4


def test_root_has_no_supplementary_groups_by_default(rt, bundle):
    bundle.process["user"] = {"uid": 0, "gid": 0}
    rep = probe_report(rt, bundle)
    assert rep["groups"] in ([], [0])


def test_umask(rt, bundle):
    bundle.process["user"] = {"uid": 0, "gid": 0, "umask": 0o077}
    rep = probe_report(rt, bundle)
    assert rep["status"]["Umask"] == "0077"


def test_umask_default(rt, bundle):
    bundle.process["user"] = {"uid": 0, "gid": 0}
    rep = probe_report(rt, bundle)
    assert rep["status"]["Umask"] == "0022"


def test_capabilities_root(rt, bundle):
    caps = ["CAP_CHOWN", "CAP_KILL"]
    bundle.process["capabilities"] = {k: caps for k in
                                      ("bounding", "effective", "permitted")}
    rep = probe_report(rt, bundle)
    assert status_hex(rep, "CapBnd") == caps_mask(caps)
    assert status_hex(rep, "CapEff") == caps_mask(caps)
    assert status_hex(rep, "CapPrm") == caps_mask(caps)
    assert status_hex(rep, "CapInh") == 0
    assert status_hex(rep, "CapAmb") == 0


def test_capabilities_each_set_non_root(rt, bundle):
    """A non-root user keeps only its ambient set across execve, so every set is observable
    separately."""
    bnd = ["CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_SETUID"]
    inh = ["CAP_KILL", "CAP_NET_BIND_SERVICE"]
    amb = ["CAP_NET_BIND_SERVICE"]
    bundle.process["user"] = {"uid": 1000, "gid": 1000}
    bundle.process["capabilities"] = {"bounding": bnd, "effective": bnd, "permitted": bnd,
                                      "inheritable": inh, "ambient": amb}
    rep = probe_report(rt, bundle)
    assert status_hex(rep, "CapBnd") == caps_mask(bnd)
    assert status_hex(rep, "CapInh") == caps_mask(inh)
    assert status_hex(rep, "CapAmb") == caps_mask(amb)
    assert status_hex(rep, "CapPrm") == caps_mask(amb)
    assert status_hex(rep, "CapEff") == caps_mask(amb)


def test_capabilities_none(rt, bundle):
    bundle.process["capabilities"] = {}
    bundle.process["user"] = {"uid": 1000, "gid": 1000}
    rep = probe_report(rt, bundle)
    for k in ("CapBnd", "CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert status_hex(rep, k) == 0, (k, rep["status"])


@pytest.mark.agentsbx_only("runc 1.1.5 only warns about an unknown capability name; agentsbx "
                           "fails closed")
def test_unknown_capability_refused(rt, bundle):
    bundle.process["capabilities"] = {"bounding": ["CAP_NOT_A_CAP"]}
    r = probe_report(rt, bundle, check=False)
    assert r.rc != 0
    assert "CAP_NOT_A_CAP" in r.err, r


@pytest.mark.parametrize("nnp", [True, False])
def test_no_new_privileges(rt, bundle, nnp):
    bundle.process["noNewPrivileges"] = nnp
    rep = probe_report(rt, bundle)
    assert rep["status"]["NoNewPrivs"] == ("1" if nnp else "0")


def test_rlimits(rt, bundle):
    bundle.process["rlimits"] = [
        {"type": "RLIMIT_NOFILE", "soft": 512, "hard": 1000},
        {"type": "RLIMIT_CORE", "soft": 0, "hard": 0},
        {"type": "RLIMIT_NPROC", "soft": 1000, "hard": 2000},
        {"type": "RLIMIT_STACK", "soft": 4 << 20, "hard": 8 << 20},
    ]
    rep = probe_report(rt, bundle)
    for rl in bundle.process["rlimits"]:
        got = rep["rlimits"][rl["type"]]
        assert (got["soft"], got["hard"]) == (rl["soft"], rl["hard"]), rl["type"]


def test_rlimits_all_reported(rt, bundle):
    rep = probe_report(rt, bundle)
    assert len(rep["rlimits"]) == 16


def test_rlimit_above_hard_limit_fails_clearly(rt, bundle):
    """Raising a hard limit needs CAP_SYS_RESOURCE, which this machine does not have: the
    create must fail (not silently clamp) and say which limit."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("RLIMIT_NOFILE hard limit is unlimited here: nothing above it to ask for")
    bundle.process["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": hard + 1, "hard": hard + 1}]
    r, cid = rt.create(bundle)
    if r.ok:
        # A runtime with CAP_SYS_RESOURCE may legitimately raise it; then it must be applied.
        rep = probe_report(rt, bundle)
        assert rep["rlimits"]["RLIMIT_NOFILE"]["hard"] == hard + 1
        return
    assert "rlimit" in r.err.lower() or "nofile" in r.err.lower(), r
    assert not rt.state(cid).ok


def test_unknown_rlimit_refused(rt, bundle):
    bundle.process["rlimits"] = [{"type": "RLIMIT_BOGUS", "soft": 1, "hard": 1}]
    r = probe_report(rt, bundle, check=False)
    assert_refused(rt, r, "process.rlimits", "RLIMIT_BOGUS")


def test_oom_score_adj(rt, bundle):
    with open("/proc/self/oom_score_adj") as f:
        current = int(f.read())
    want = min(current + 300, 1000)  # raising needs no privilege
    bundle.process["oomScoreAdj"] = want
    rep = probe_report(rt, bundle)
    assert int(rep["oom_score_adj"]) == want


def test_hostname(rt, bundle):
    bundle.config["hostname"] = "probe-host"
    rep = probe_report(rt, bundle)
    assert rep["hostname"] == "probe-host"


@pytest.mark.agentsbx_only("runc 1.1.5 ignores the domainname field")
def test_domainname(rt, bundle):
    bundle.config["domainname"] = "probe.example"
    rep = probe_report(rt, bundle)
    assert rep["domainname"] == "probe.example"


def test_hostname_without_uts_namespace_refused(rt, bundle):
    bundle.remove_namespace("uts")
    bundle.config["hostname"] = "must-not-reach-host"
    r = probe_report(rt, bundle, check=False)
    assert_refused(rt, r, "hostname", "UTS namespace")
    with open("/proc/sys/kernel/hostname") as f:
        assert f.read().strip() != "must-not-reach-host"


def test_sysctl_net_in_new_netns(rt, bundle):
    bundle.linux["sysctl"] = {"net.ipv4.ip_unprivileged_port_start": "80"}
    bundle.args("/probe", "sysctl", "net.ipv4.ip_unprivileged_port_start")
    r = run(rt, bundle)
    assert r.ok, r
    assert probe_json(r)["value"] == "80"


def test_sysctl_ipc_in_new_ipcns(rt, bundle):
    bundle.linux["sysctl"] = {"kernel.msgmax": "4096"}
    bundle.args("/probe", "sysctl", "kernel.msgmax")
    r = run(rt, bundle)
    assert r.ok, r
    assert probe_json(r)["value"] == "4096"


def test_sysctl_in_host_netns_refused(rt, bundle):
    with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
        before = f.read()
    bundle.remove_namespace("network")
    bundle.linux["sysctl"] = {"net.ipv4.ip_unprivileged_port_start": "81"}
    r = probe_report(rt, bundle, check=False)
    assert_refused(rt, r, "linux.sysctl", "net.ipv4.ip_unprivileged_port_start")
    with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
        assert f.read() == before


def test_sysctl_not_namespaced_refused(rt, bundle):
    with open("/proc/sys/kernel/panic") as f:
        before = f.read()
    bundle.linux["sysctl"] = {"kernel.panic": "17"}
    r = probe_report(rt, bundle, check=False)
    assert_refused(rt, r, "linux.sysctl", "kernel.panic")
    with open("/proc/sys/kernel/panic") as f:
        assert f.read() == before


def test_terminal_false_no_tty(rt, bundle):
    rep = probe_report(rt, bundle)
    assert not any(rep["tty"][k]["isatty"] for k in ("0", "1", "2"))


def test_missing_executable_fails(rt, bundle):
    r = run(rt, bundle, ["/no/such/binary"])
    assert r.rc != 0
    assert "/no/such/binary" in r.err or "no such file" in r.err.lower(), r


def test_path_lookup(rt, bundle):
    bundle.process["env"] = ["PATH=/bin"]
    r = run(rt, bundle, ["true"])
    assert r.ok, r


def test_stdio_files_chowned_to_container_user(rt, bundle):
    """stdout redirected to a regular file is given to the container's uid and gid (runc), so a
    non-root process can reopen /dev/stdout; /dev/null on stdin keeps its owner and mode."""
    bundle.process["user"] = {"uid": 1000, "gid": 1001}
    out = os.path.join(rt.workdir, "stdout.file")
    bundle.args("/bin/sh", "-c", "echo reopened >> /dev/stdout")
    r, _ = rt.run(bundle, None, stdout_path=out)
    assert r.ok, r
    assert r.out.strip() == "reopened", r
    st = os.stat(out)
    if not rt.is_runc:  # runc's foreground run copies through pipes of its own (chowned)
        assert (st.st_uid, st.st_gid) == (1000, 1001)
    null = os.stat("/dev/null")
    assert (null.st_uid, null.st_gid, null.st_mode & 0o777) == (0, 0, 0o666)
