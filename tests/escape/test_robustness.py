"""Crash safety, concurrency, a full state filesystem, and openat2 missing.

- The runtime SIGKILLed at each named step of create/start/delete (AGENTSBX_TEST_STOP_AT, a
  hook in src/runtime/container.c): `list` stays parseable, and `delete --force` afterwards
  leaves no state dir, cgroup, mount or process (the rt fixture's leak checks).
- 50 containers created, started and deleted in parallel; 10 commands racing on one id: every
  command succeeds or fails cleanly (exit 1 with a message, never a signal), no corruption.
- --root on a tiny full tmpfs: create fails cleanly and leaves nothing half-written.
- openat2 forced to ENOSYS (tests/tools/no-openat2): agentsbx resolves container paths with its
  userspace fallback (src/linux/pathsafe_fallback.c); a container runs, the debug log says the
  fallback was taken, and hostile-rootfs symlinks (to "/", "../../..") still cannot send a mount
  to the host. `make check-noopenat2` runs the whole integration and escape suites that way.
"""

import concurrent.futures
import json
import os
import subprocess

import pytest

from conftest import TOP, one_line_error

pytestmark = pytest.mark.agentsbx_only("agentsbx's test hook, state layout and openat2 policy")

CREATE_STEPS = ["create:state-dir", "create:spawned", "create:hooks", "create:ready",
                "create:recorded"]
START_STEPS = ["start:opened", "start:released"]
DELETE_STEPS = ["delete:opened", "delete:killed", "delete:cgroup"]


def _env(step):
    return dict(os.environ, AGENTSBX_TEST_STOP_AT=step)


def _list_ok(rt):
    r = rt.cmd("list", "--format", "json")
    assert r.ok, r
    entries = json.loads(r.out or "[]") or []
    for e in entries:
        assert e.get("id") and e.get("status") in ("creating", "created", "running", "stopped",
                                                    "paused"), e
    return entries


def _cleanup_and_check(rt, cid):
    r = rt.delete(cid, force=True)
    assert r.ok, r
    assert not os.path.exists(os.path.join(rt.root, cid))
    assert cid not in [e["id"] for e in _list_ok(rt)]


@pytest.mark.parametrize("step", CREATE_STEPS)
def test_killed_during_create(rt, bundle, step):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle, None, env=_env(step))
    assert r.rc == -9, f"the hook did not fire at {step}: {r}"
    _list_ok(rt)
    _cleanup_and_check(rt, cid)


@pytest.mark.parametrize("step", START_STEPS)
def test_killed_during_start(rt, bundle, step):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    r = rt.cmd("start", cid, env=_env(step))
    assert r.rc == -9, r
    _list_ok(rt)
    _cleanup_and_check(rt, cid)


@pytest.mark.parametrize("step", DELETE_STEPS)
def test_killed_during_delete(rt, bundle, step):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    r = rt.cmd("delete", "--force", cid, env=_env(step))
    assert r.rc == -9, r
    _list_ok(rt)
    _cleanup_and_check(rt, cid)


def test_fifty_parallel_containers(rt, make_bundle):
    b = make_bundle(args=("/probe", "sleep", "600"))
    b.save()
    ids = [rt.new_id() for _ in range(50)]
    rt.created += ids

    def life(cid):
        out = []
        for argv in (("create", "--bundle", b.path, cid), ("start", cid), ("state", cid),
                     ("delete", "--force", cid)):
            out.append(rt.cmd(*argv, stdout_path=os.devnull))
        return out

    with concurrent.futures.ThreadPoolExecutor(50) as ex:
        results = list(ex.map(life, ids))
    bad = [rs for rs in results if not all(r.ok for r in rs)]
    assert not bad, [(r.argv[-1], r.argv[-2], r.rc, r.err.strip()) for r in bad[0]]
    assert _list_ok(rt) == []


def test_ten_commands_racing_on_one_id(rt, make_bundle):
    b = make_bundle(args=("/probe", "sleep", "600"))
    b.save()
    cid = rt.new_id()
    rt.created.append(cid)
    cmds = [("create", "--bundle", b.path, cid)] * 3 + [("start", cid)] * 2 + \
        [("state", cid), ("kill", cid, "KILL"), ("delete", cid), ("delete", "--force", cid),
         ("list",)]
    for _round in range(3):
        with concurrent.futures.ThreadPoolExecutor(10) as ex:
            results = list(ex.map(lambda a: rt.cmd(*a, stdout_path=os.devnull), cmds))
        for r in results:
            assert r.ok or one_line_error(r), r
        creates = [r for r in results if r.argv[-4:-1] == ["create", "--bundle", b.path]]
        deletes = [r for r in results if "delete" in r.argv]
        # one id, one container at a time: a second create can only succeed after a delete
        # removed the first (create -> delete -> create is a legal interleaving)
        assert sum(r.ok for r in creates) <= 1 + sum(r.ok for r in deletes), creates
        _list_ok(rt)
        st = rt.state(cid)
        if st.ok:
            assert st.json()["id"] == cid
        _cleanup_and_check(rt, cid)


@pytest.fixture
def tiny_root(rt):
    d = os.path.join(rt.workdir, "tinyroot")
    os.makedirs(d)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,nr_inodes=64", "tmpfs", d], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", d], check=False)


@pytest.mark.parametrize("leave", ["nothing", "inodes-only"])
def test_full_state_filesystem(rt, bundle, tiny_root, leave):
    from conftest import Runtime
    state = os.path.join(tiny_root, "state")
    os.makedirs(state)
    # fill the data blocks; "inodes-only" leaves inodes (so mkdir works) but no block
    fd = os.open(os.path.join(tiny_root, "fill"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    if leave == "nothing":
        i = 0
        while True:
            try:
                os.mkdir(os.path.join(tiny_root, f"d{i}"))
                i += 1
            except OSError:
                break
    small = Runtime(rt.binary, state, rt.workdir, rt.is_runc)
    bundle.args("/probe", "sleep", "600")
    r, cid = small.create(bundle)
    try:
        if r.ok:
            pytest.fail(f"create succeeded on a full filesystem: {r}")
        assert one_line_error(r), r
        assert os.listdir(state) == [], f"half-written state: {os.listdir(state)}"
        lr = small.cmd("list", "--format", "json")
        assert lr.ok and json.loads(lr.out or "[]") in ([], None), lr
    finally:
        small.cmd("delete", "--force", cid)


def _no_openat2_wrapper(rt):
    src = os.path.join(TOP, "tests", "tools", "no-openat2.c")
    out = os.path.join(rt.workdir, "no-openat2")
    subprocess.run(["gcc", "-O2", "-o", out, src, "-lseccomp"], check=True)
    return out


def _run_no_openat2(rt, bundle, w, *extra):
    bundle.save()
    cid = rt.new_id()
    rt.created.append(cid)
    log = os.path.join(rt.workdir, f"log-{cid}")
    p = subprocess.run([w, rt.binary, "--root", rt.root, "--debug", "--log", log, *extra, "run",
                        "--bundle", bundle.path, cid], capture_output=True, text=True, timeout=120)
    with open(log) if os.path.exists(log) else open(os.devnull) as f:
        return p, f.read()


def test_openat2_enosys_uses_fallback(rt, bundle):
    w = _no_openat2_wrapper(rt)
    bundle.args("/probe", "report")
    os.makedirs(os.path.join(bundle.rootfs, "mnt", "real"), exist_ok=True)
    os.symlink("real", os.path.join(bundle.rootfs, "mnt", "rel"))
    bundle.add_mount("/mnt/rel/t", "tmpfs", "tmpfs", ["size=1m"])
    bundle.process["cwd"] = "/mnt/rel"
    p, log = _run_no_openat2(rt, bundle, w)
    assert p.returncode == 0, (p.returncode, p.stdout[-500:], p.stderr[-500:], log[-2000:])
    assert "openat2 unavailable" in log, log[-2000:]
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    assert any(m["mountpoint"] == "/mnt/real/t" for m in rep["mounts"]), rep["mounts"]


@pytest.mark.parametrize("link", ["/", "../../../../../../../..", "/.."])
def test_openat2_enosys_fallback_contains_symlinks(rt, bundle, link):
    """The test_mount_paths cases, with openat2 refused: the fallback keeps the mount inside."""
    w = _no_openat2_wrapper(rt)
    uniq = f"asbx-noopenat2-{os.getpid()}-{rt.new_id()[-6:]}"
    v = os.path.join(rt.workdir, "victim")
    os.makedirs(v)
    bundle.args("/probe", "report")
    os.makedirs(os.path.join(bundle.rootfs, "mnt"), exist_ok=True)
    os.symlink(link, os.path.join(bundle.rootfs, "mnt", "host"))
    dest = os.path.join("/mnt/host", v.lstrip("/"), uniq)
    bundle.add_mount(dest, "tmpfs", "tmpfs", ["size=1m"])
    p, log = _run_no_openat2(rt, bundle, w)
    assert os.listdir(v) == [], f"the fallback let a mount reach the host: {os.listdir(v)}"
    assert not os.path.lexists(f"/{uniq}")
    assert "openat2 unavailable" in log, log[-2000:]
    assert p.returncode == 0, (p.returncode, p.stderr[-500:], log[-2000:])
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    assert any(m["mountpoint"] == os.path.join("/", v.lstrip("/"), uniq) for m in rep["mounts"]), \
        rep["mounts"]
