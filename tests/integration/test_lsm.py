"""LSM labels (config.md process.apparmorProfile / selinuxLabel, config-linux.md mountLabel).

On a host where the LSM is not enabled we ignore the label (debug message): the container runs
and the probe sees no confinement change. NOTE: runc 1.1.5 on this host does NOT ignore them: it
fails `run` for each of the three ("write /proc/self/attr/exec: invalid argument", "selinux label
is specified in config, but selinux is disabled", and the context= option makes the /dev tmpfs
mount fail with EINVAL). The tests record runc's failure rather than hide it. The enabled paths (AppArmor
change-onexec, SELinux exec context, context= mount option) cannot run here; their label and
option building and the fake-/proc refusal are unit-tested in tests/unit/test_lsm.c.

runc is the reference behaviour.
"""

import os

import pytest

from conftest import probe_report, run

pytestmark = pytest.mark.runc_reference


def apparmor_enabled():
    try:
        with open("/sys/module/apparmor/parameters/enabled") as f:
            return f.read().strip() == "Y"
    except OSError:
        return False


def selinux_enabled():
    return os.path.exists("/sys/fs/selinux/enforce")


def test_apparmor_profile_ignored_when_disabled(rt, bundle):
    if apparmor_enabled():
        pytest.skip("AppArmor is enabled on this host: the ignore path does not apply")
    bundle.process["apparmorProfile"] = "agentsbx-test-profile"
    if rt.is_runc:
        r = run(rt, bundle, ["/probe", "exit", "0"])
        assert not r.ok and "apparmor" in r.err, r  # runc 1.1.5 writes the attr regardless
        return
    rep = probe_report(rt, bundle)
    assert rep["status"]["NoNewPrivs"] == "1"
    r = run(rt, bundle, ["/probe", "catfile", "/proc/self/attr/current"])
    assert "agentsbx-test-profile" not in r.out


def test_selinux_labels_ignored_when_disabled(rt, bundle):
    if selinux_enabled():
        pytest.skip("SELinux is enabled on this host: the ignore path does not apply")
    bundle.process["selinuxLabel"] = "system_u:system_r:container_t:s0:c1,c2"
    bundle.linux["mountLabel"] = "system_u:object_r:container_file_t:s0:c1,c2"
    bundle.add_mount("/scratch", "tmpfs", "tmpfs", ["size=1m"])
    r = run(rt, bundle, ["/probe", "catfile", "/proc/self/mountinfo"])
    if rt.is_runc:
        assert not r.ok and "selinux" in r.err, r  # runc 1.1.5 refuses labels without SELinux
        return
    assert r.ok, r
    assert "context=" not in r.out


def test_apparmor_enabled_path_not_exercisable_here():
    if not apparmor_enabled() and not selinux_enabled():
        pytest.skip("neither AppArmor nor SELinux is enabled on this host: the enabled label paths "
                    "(change-onexec, setexeccon, context= mounts) cannot be exercised here")
    pytest.skip("enabled-LSM integration test not written yet")


def test_exec_apparmor_label_reaches_the_lsm_step(rt, bundle, tmp_path):
    """`exec --apparmor P` goes through the same LSM step as the init (it used to be parsed and
    then dropped): on this host AppArmor is off, so the step's ignore path is what we can see."""
    if apparmor_enabled():
        pytest.skip("AppArmor is enabled on this host: the ignore path does not apply")
    if rt.is_runc:
        pytest.skip("runc 1.1.5 writes the attr regardless and fails; this checks our exec path")
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.run(bundle, None, "--detach")
    assert r.ok, r
    rt.wait_status(cid, "running")
    log = str(tmp_path / "exec.log")
    r = rt.cmd("--debug", "--log", log, "exec", "--apparmor", "agentsbx-exec-profile", cid,
               "/probe", "exit", "0")
    assert r.ok, r
    with open(log) as f:
        text = f.read()
    assert "apparmorProfile `agentsbx-exec-profile` ignored" in text, text[-2000:]
