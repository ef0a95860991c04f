"""OpenSSL and libnftables are loaded when a policy needs them, not at every start (issue 20:
the start path; core/openssl_dl.c, linux/nft.c). What the dynamic loader reports (LD_DEBUG=files)
shows which objects a start loads; a library made unloadable in a private mount namespace (an
empty file bound over it, for the runtime's process only) shows the policy that needs it fails
closed with one clear error and leaves nothing behind."""

import ctypes
import os
import subprocess

import pytest

from policyutil import sandbox_run

pytestmark = pytest.mark.agentsbx_only("agentsbx sandbox and its policies")

libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, MS_REC, MS_PRIVATE, MS_BIND = 0x20000, 0x4000, 0x40000, 0x1000

HTTP_POLICY = {"version": 1, "extends": "agent",
               "network": {"mode": "filtered", "ports": [443], "allowedDomains": ["example.com"],
                           "http": [{"host": "example.com",
                                     "allow": [{"methods": ["GET"], "paths": ["/*"]}]}]}}


def lib_path(soname):
    """the file the loader would map for soname (ldconfig's cache)"""
    out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.split(" ", 1)[0].strip() == soname and "=>" in line:
            return os.path.realpath(line.rsplit("=>", 1)[1].strip())
    pytest.skip(f"{soname} is not installed (ldconfig -p)")


def without(path, empty):
    """preexec_fn: the child sees an empty file at path (its own mount namespace)"""
    def fn():
        if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0 \
                or libc.mount(empty.encode(), path.encode(), None, MS_BIND, None) != 0:
            os._exit(125)
    return fn


@pytest.fixture
def ws(rt):
    d = os.path.join(rt.workdir, "ws")
    os.makedirs(d)
    return d


@pytest.fixture
def rootfs(rt, busybox_template):
    d = os.path.join(rt.workdir, "rootfs")
    subprocess.run(["cp", "-a", busybox_template, d], check=True)
    return d


@pytest.fixture
def empty(rt):
    p = os.path.join(rt.workdir, "empty.so")
    open(p, "w").close()
    return p


def loaded(stderr, soname):
    """the loader's LD_DEBUG=files lines that map soname"""
    return [l for l in stderr.splitlines() if f"file={soname}" in l]


def test_plain_run_loads_neither(rt, bundle):
    bundle.args("/bin/true")
    r, _ = rt.run(bundle, env=dict(os.environ, LD_DEBUG="files"))
    assert r.rc == 0, r
    assert "file=libyajl.so.2" in r.err, "LD_DEBUG=files reported nothing: the check would prove nothing"
    for so in ("libssl.so.3", "libcrypto.so.3", "libnftables.so.1"):
        assert not loaded(r.err, so), (so, loaded(r.err, so))


def test_http_policy_loads_openssl(rt, ws, rootfs):
    env = dict(os.environ, LD_DEBUG="files")
    r = sandbox_run(rt, "--workspace", ws, "--rootfs", rootfs, "--", "/bin/true", policy=HTTP_POLICY,
                    env=env)
    assert r.rc == 0, r
    assert any("dynamically loaded" in l for l in loaded(r.err, "libssl.so.3")), r.err[-2000:]
    assert any("dynamically loaded" in l for l in loaded(r.err, "libnftables.so.1")), r.err[-2000:]


def test_http_policy_without_openssl_fails_closed(rt, ws, empty, rootfs):
    r = sandbox_run(rt, "--workspace", ws, "--rootfs", rootfs, "--", "/bin/true", policy=HTTP_POLICY,
                    preexec_fn=without(lib_path("libssl.so.3"), empty))
    assert r.rc not in (0, 125), r
    assert "network.http/network.credentials rules (the container's egress CA) needs OpenSSL" in r.err, r
    assert "libssl.so.3" in r.err, r
    sb = os.path.join(rt.root, "sandbox")
    assert not [e for e in os.listdir(rt.root) if not e.startswith("@") and e != "sandbox"], os.listdir(rt.root)
    assert not os.path.isdir(sb) or not os.listdir(sb), os.listdir(sb)


def test_filtered_network_without_libnftables_fails_closed(rt, ws, empty, rootfs):
    r = sandbox_run(rt, "--workspace", ws, "--rootfs", rootfs, "--", "/bin/true",
                    preexec_fn=without(lib_path("libnftables.so.1"), empty))
    assert r.rc not in (0, 125), r
    assert "nft: the policy's network table needs libnftables" in r.err, r
    sb = os.path.join(rt.root, "sandbox")
    assert not [e for e in os.listdir(rt.root) if not e.startswith("@") and e != "sandbox"], os.listdir(rt.root)
    assert not os.path.isdir(sb) or not os.listdir(sb), os.listdir(sb)
    # a policy without a network table (mode open; `none` has one too) does not need it
    r = sandbox_run(rt, "--workspace", ws, "--rootfs", rootfs, "--", "/bin/true",
                    policy={"version": 1, "extends": "agent", "network": {"mode": "open"}},
                    preexec_fn=without(lib_path("libnftables.so.1"), empty))
    assert r.rc == 0, r
