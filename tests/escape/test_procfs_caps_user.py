"""procfs writes through a fake /proc, inheritable capabilities after exec, `exec --user` parsing.

- LSM labels, sysctls and oom_score_adj are written through a procfs fd verified with fstatfs
  (PROC_SUPER_MAGIC) and openat2 beneath it (src/linux/lsm_procattr.c, sysctl.c): a config that
  replaces /proc with a bind of a host directory of fake files must be refused or leave it
  untouched.
- `exec --cap` must not hand capabilities on through execve (CVE-2022-29162 class): CapInh and
  CapAmb stay empty unless process.json asks.
- `exec --user` takes decimal uid[:gid]; hostile strings are refused with one clear error and
  never fall back to root (setresuid(-1) is a no-op: "4294967295" must not mean "stay root").
"""

import json
import os

import pytest

from conftest import json_lines, one_line_error, tree_digest


def _fake_proc(rt):
    d = os.path.join(rt.workdir, "fakeproc")
    for sub in ("self/attr/apparmor", "thread-self/attr/apparmor", "sys/kernel", "sys/net/ipv4"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    for f in ("self/attr/exec", "self/attr/apparmor/exec", "thread-self/attr/exec",
              "thread-self/attr/apparmor/exec", "self/oom_score_adj", "sys/kernel/domainname",
              "sys/kernel/core_pattern", "sys/net/ipv4/ip_forward"):
        with open(os.path.join(d, f), "w") as fh:
            fh.write("original\n")
    return d


@pytest.mark.parametrize("what", ["sysctl", "apparmor", "selinux", "oom"])
def test_procfs_writes_through_fake_proc(rt, bundle, what, host_guard):
    fake = _fake_proc(rt)
    before = tree_digest(fake)
    bundle.remove_mount("/proc")
    bundle.add_mount("/proc", "bind", fake, ["rbind", "rw"])
    if what == "sysctl":
        bundle.linux["sysctl"] = {"kernel.domainname": "pwned", "net.ipv4.ip_forward": "1"}
    elif what == "apparmor":
        bundle.process["apparmorProfile"] = "pwned"
    elif what == "selinux":
        bundle.process["selinuxLabel"] = "system_u:system_r:pwned_t:s0"
    else:
        bundle.process["oomScoreAdj"] = 500
    bundle.args("/probe", "exit", "0")
    rt.run(bundle)
    assert tree_digest(fake) == before, "a procfs write went to the fake /proc on the host"


def _exec_report(rt, bundle, *extra):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    return rt.cmd("exec", *extra, cid, "/probe", "report"), cid


@pytest.mark.runc_reference
def test_exec_inheritable_caps_empty(rt, bundle):
    r, _ = _exec_report(rt, bundle)
    assert r.ok, r
    st = json_lines(r.out)[-1]["status"]
    assert int(st["CapInh"], 16) == 0 and int(st["CapAmb"], 16) == 0, st


@pytest.mark.runc_reference
def test_exec_cap_flag_not_inheritable(rt, bundle):
    r, _ = _exec_report(rt, bundle, "--cap", "CAP_SYS_ADMIN")
    assert r.ok, r
    st = json_lines(r.out)[-1]["status"]
    assert int(st["CapInh"], 16) == 0, f"exec --cap gave inheritable caps: {st}"
    assert int(st["CapAmb"], 16) == 0, f"exec --cap gave ambient caps: {st}"
    assert int(st["CapEff"], 16) & (1 << 21), st


HOSTILE_USERS = [
    "4294967295", "4294967295:4294967295", "-1", "-1:-1", "0x3e8", "1e3", " 1000", "1000 ",
    "1000:", ":1000", "1000::1000", "1000:1000:1000", "abc", "../../etc/passwd", "%n%n%s",
    "99999999999999999999999", "1000\n0", "1000\t", "+1000", "0001000:-0", "",
    "A" * 10000, "1000:" + "9" * 400,
]


@pytest.mark.parametrize("user", HOSTILE_USERS, ids=lambda u: repr(u)[:30])
def test_exec_user_hostile(rt, bundle, user):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    r = rt.cmd("exec", "--user", user, cid, "/probe", "report")
    if r.rc == 0:
        rep = json_lines(r.out)[-1]
        # accepted: must be exactly a sane decimal reading of the string, never a silent root
        uid = user.split(":")[0].strip()
        assert uid.isdigit() and int(uid) < 2**32 - 1, f"accepted {user!r}: {rep['uid']}"
        assert rep["uid"] == int(uid), (user, rep["uid"])
    else:
        assert one_line_error(r), r
        assert "Traceback" not in r.err and r.err.startswith("agentsbx: "), r.err
    # the container is unharmed either way
    assert rt.status(cid) == "running"
