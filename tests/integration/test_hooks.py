"""POSIX-platform hooks (runtime-spec config.md "POSIX-platform Hooks", runtime.md "Lifecycle"):
each kind runs at its step, gets the container state on stdin, exactly its own env and args;
a timeout kills the hook and fails the operation; a failing create-time hook fails the create
and leaves nothing behind.

runc is the reference behaviour. Hooks record what they received into files; the tests read
those files, never the runtime's output.
"""

import json
import os

import pytest

from conftest import HANG_GUARD  # noqa: F401  (documented upper bound used by rt.cmd)

pytestmark = pytest.mark.runc_reference

HOST_KINDS = ["prestart", "createRuntime", "createContainer", "poststart", "poststop"]


def host_hook(rt, kind, outdir, exit_code=0, extra=""):
    """A /bin/sh hook on the host recording stdin, env and args under outdir/KIND.*."""
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(rt.workdir, f"hook-{kind}.sh")
    with open(path, "w") as f:
        f.write(f"""#!/bin/sh
cat > {outdir}/{kind}.state
env > {outdir}/{kind}.env
printf '%s\\n' "$0" "$@" > {outdir}/{kind}.args
echo {kind} >> {outdir}/order
{extra}
exit {exit_code}
""")
    os.chmod(path, 0o755)
    return path


def container_hook(bundle, kind, exit_code=0):
    """A hook inside the rootfs (startContainer paths resolve in the container)."""
    path = os.path.join(bundle.rootfs, f"hook-{kind}.sh")
    with open(path, "w") as f:
        f.write(f"""#!/bin/sh
mkdir -p /hook-out
cat > /hook-out/{kind}.state
echo {kind} >> /hook-out/order
exit {exit_code}
""")
    os.chmod(path, 0o755)
    return f"/hook-{kind}.sh"


def read_state(outdir, kind):
    with open(os.path.join(outdir, f"{kind}.state")) as f:
        return json.load(f)


def test_all_hooks_run_in_order_with_state(rt, bundle):
    out = os.path.join(rt.workdir, "hooks")
    for kind in HOST_KINDS:
        bundle.hook(kind, host_hook(rt, kind, out), args=[f"{kind}-argv0", "a1", "a 2"],
                    env=["HOOK_KIND=" + kind, "PATH=/usr/bin:/bin"])
    bundle.hook("startContainer", container_hook(bundle, "startContainer"))
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    pid = rt.state(cid).json()["pid"]
    with open(os.path.join(out, "order")) as f:
        order = f.read().split()
    if rt.is_runc:
        # runc 1.1.5 runs poststart hooks at the end of `create` (fixed in runc 1.2); the spec
        # runs them after the user process started.
        assert order == ["prestart", "createRuntime", "createContainer", "poststart"]
    else:
        assert order == ["prestart", "createRuntime", "createContainer"]
    assert rt.start(cid).ok
    rt.wait_status(cid, "running")
    assert rt.kill(cid, "KILL").ok
    rt.wait_status(cid, "stopped")
    assert rt.delete(cid).ok
    with open(os.path.join(out, "order")) as f:
        assert f.read().split() == ["prestart", "createRuntime", "createContainer",
                                    "poststart", "poststop"]
    with open(os.path.join(bundle.rootfs, "hook-out", "order")) as f:
        assert f.read().split() == ["startContainer"]

    for kind in HOST_KINDS:
        st = read_state(out, kind)
        assert st["id"] == cid, (kind, st)
        assert os.path.realpath(st["bundle"]) == os.path.realpath(bundle.path), (kind, st)
        assert st["ociVersion"], (kind, st)
        if kind == "createContainer":
            # runs in the container's namespaces: runc reports the pid as seen there (1)
            assert st["pid"] in (pid, 1), (kind, st)
        elif kind != "poststop":
            assert st["pid"] == pid, (kind, st)
        with open(os.path.join(out, f"{kind}.args")) as f:
            args = f.read().splitlines()
        assert args[1:] == ["a1", "a 2"], (kind, args)
        with open(os.path.join(out, f"{kind}.env")) as f:
            env = f.read().splitlines()
        assert f"HOOK_KIND={kind}" in env, (kind, env)
    st = read_state(os.path.join(bundle.rootfs, "hook-out"), "startContainer")
    assert st["id"] == cid and st["pid"] in (pid, 1)
    if not rt.is_runc:  # runc 1.1.5 runs poststart during create, with status "created"
        assert read_state(out, "poststart")["status"] == "running"
    assert read_state(out, "poststop")["status"] == "stopped"


def test_hook_env_is_exactly_its_own(rt, bundle):
    out = os.path.join(rt.workdir, "hooks")
    bundle.hook("createRuntime", host_hook(rt, "createRuntime", out), env=["ONLY=this"])
    env = dict(os.environ, AGENTSBX_TEST_LEAK="leaked")
    r, _ = rt.run(bundle, None, env=env)
    assert r.ok, r
    with open(os.path.join(out, "createRuntime.env")) as f:
        lines = f.read().splitlines()
    assert "ONLY=this" in lines
    assert not any(ln.startswith("AGENTSBX_TEST_LEAK=") for ln in lines), lines


def pid_recording_hook(rt, kind, outdir, cmd):
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(rt.workdir, f"slow-{kind}.sh")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho $$ > {outdir}/{kind}.pid\nexec {cmd}\n")
    os.chmod(path, 0o755)
    return path


@pytest.mark.parametrize("kind", ["prestart", "createRuntime", "createContainer"])
def test_hook_timeout_kills_hook_and_fails_create(rt, bundle, kind):
    out = os.path.join(rt.workdir, "hooks")
    bundle.hook(kind, pid_recording_hook(rt, kind, out, "/bin/sleep 600"), timeout=1)
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.rc != 0, r
    assert not rt.state(cid).ok
    if kind != "createContainer":  # (that one runs in the container's pid namespace)
        with open(os.path.join(out, f"{kind}.pid")) as f:
            hook_pid = int(f.read())
        assert not os.path.exists(f"/proc/{hook_pid}") or \
            open(f"/proc/{hook_pid}/stat").read().split(") ")[1][0] == "Z", "hook left running"
    assert not os.path.exists(os.path.join(rt.root, cid))


@pytest.mark.parametrize("kind", ["prestart", "createRuntime", "createContainer"])
def test_failing_create_hook_fails_create_and_leaves_nothing(rt, bundle, kind):
    out = os.path.join(rt.workdir, "hooks")
    bundle.hook(kind, host_hook(rt, kind, out, exit_code=3))
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.rc != 0, r
    assert os.path.exists(os.path.join(out, f"{kind}.state")), "the hook did not run"
    assert not rt.state(cid).ok
    assert not os.path.exists(os.path.join(rt.root, cid))
    # (teardown also checks cgroups, mounts and processes)


def test_failing_start_container_hook_stops_process(rt, bundle):
    bundle.hook("startContainer", container_hook(bundle, "startContainer", exit_code=1))
    bundle.args("/probe", "write", "/ran", "yes")
    r, cid = rt.create(bundle)
    assert r.ok, r
    rt.start(cid)
    rt.wait_status(cid, "stopped")
    assert os.path.exists(os.path.join(bundle.rootfs, "hook-out", "order")), "hook did not run"
    assert not os.path.exists(os.path.join(bundle.rootfs, "ran")), "process ran after a " \
        "failed startContainer hook"


@pytest.mark.agentsbx_only("runc 1.1.5's `start` returns 0 when a startContainer hook fails")
def test_failing_start_container_hook_fails_start(rt, bundle):
    bundle.hook("startContainer", container_hook(bundle, "startContainer", exit_code=1))
    bundle.args("/probe", "write", "/ran", "yes")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).rc != 0
    assert not os.path.exists(os.path.join(bundle.rootfs, "ran"))


def test_failing_poststop_hook_does_not_block_delete(rt, bundle):
    out = os.path.join(rt.workdir, "hooks")
    bundle.hook("poststop", host_hook(rt, "poststop", out, exit_code=1))
    bundle.args("/probe", "exit", "0")
    r, cid = rt.run(bundle, None, "--keep")
    assert r.ok, r
    rt.delete(cid)
    assert not rt.state(cid).ok
    assert os.path.exists(os.path.join(out, "poststop.state"))


def test_missing_hook_binary_fails_create(rt, bundle):
    bundle.hook("createRuntime", "/no/such/hook")
    r, cid = rt.create(bundle)
    assert r.rc != 0
    assert not os.path.exists(os.path.join(rt.root, cid))


def named_hook(rt, name, outdir, exit_code=0):
    """A host /bin/sh hook NAME that records its stdin and env under outdir and exits exit_code."""
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(rt.workdir, f"hook-{name}.sh")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\ncat > {outdir}/{name}.state\nenv > {outdir}/{name}.env\n"
                f"echo {name} >> {outdir}/order\nexit {exit_code}\n")
    os.chmod(path, 0o755)
    return path


def read_order(outdir):
    with open(os.path.join(outdir, "order")) as f:
        return f.read().split()


@pytest.mark.agentsbx_only("runc 1.1.5 stops at a failing poststart hook and kills the container")
def test_failing_poststart_hook_later_hooks_still_run(rt, bundle):
    """runtime.md: a failing poststart hook is logged; the remaining hooks and the lifecycle go on."""
    out = os.path.join(rt.workdir, "hooks")
    bundle.hook("poststart", named_hook(rt, "ps1", out, exit_code=1))
    bundle.hook("poststart", named_hook(rt, "ps2", out))
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    s = rt.start(cid)
    assert s.ok, s
    assert "ps1" in s.err, "the failing hook must be reported (a warning)"
    assert read_order(out) == ["ps1", "ps2"]
    assert rt.state(cid).json()["status"] == "running"
    assert rt.kill(cid, "KILL").ok
    rt.wait_status(cid, "stopped")
    assert rt.delete(cid).ok


@pytest.mark.agentsbx_only("runc 1.1.5 stops running poststop hooks at the first failing one")
def test_failing_poststop_hook_later_hooks_still_run(rt, bundle):
    out = os.path.join(rt.workdir, "hooks")
    bundle.hook("poststop", named_hook(rt, "pst1", out, exit_code=1))
    bundle.hook("poststop", named_hook(rt, "pst2", out))
    bundle.args("/probe", "exit", "0")
    r, cid = rt.run(bundle, None, "--keep")
    assert r.ok, r
    rt.delete(cid)
    assert not rt.state(cid).ok
    assert read_order(out) == ["pst1", "pst2"]


@pytest.mark.parametrize("kind", ["prestart", "createRuntime", "poststart", "poststop"])
def test_hook_without_env_gets_runtime_environment(rt, bundle, kind):
    """A hook with no `env` runs with the runtime's own environment (runc: exec.Cmd, nil Env)."""
    out = os.path.join(rt.workdir, "hooks")
    bundle.hook(kind, named_hook(rt, kind, out))
    env = dict(os.environ, AGENTSBX_TEST_HOOKENV="from-the-runtime")
    r, _ = rt.run(bundle.args("/probe", "exit", "0"), None, env=env)
    assert r.ok, r
    with open(os.path.join(out, f"{kind}.env")) as f:
        lines = f.read().splitlines()
    assert "AGENTSBX_TEST_HOOKENV=from-the-runtime" in lines, lines


@pytest.mark.agentsbx_only("runc 1.1.5 passes status `creating` to prestart/createRuntime hooks")
def test_create_hooks_state_says_created(rt, bundle):
    """runtime-tools hooks_stdin: the state on a prestart/createRuntime hook's stdin has status
    `created` (the container exists), poststart `running`, poststop `stopped`."""
    out = os.path.join(rt.workdir, "hooks")
    for kind in ("prestart", "createRuntime", "poststart", "poststop"):
        bundle.hook(kind, named_hook(rt, kind, out))
    r, _ = rt.run(bundle.args("/probe", "exit", "0"))
    assert r.ok, r
    got = {k: read_state(out, k)["status"] for k in ("prestart", "createRuntime", "poststart", "poststop")}
    assert got == {"prestart": "created", "createRuntime": "created", "poststart": "running",
                   "poststop": "stopped"}, got
