"""A real distribution rootfs: Debian bookworm minbase + python3, built by mmdebstrap and cached
under /var/cache/agentsbx-tests (keyed by the package list). Shared read-only between the tests
of this module, with a tmpfs /tmp.

runc is the reference behaviour.
"""

import json

import pytest

from conftest import run

pytestmark = [pytest.mark.runc_reference, pytest.mark.debian]


@pytest.fixture
def deb(make_bundle, debian_rootfs):
    b = make_bundle(shared_rootfs=debian_rootfs)
    b.config["root"]["readonly"] = True
    b.add_mount("/tmp", "tmpfs", "tmpfs", ["nosuid", "nodev", "size=16m", "mode=1777"])
    b.process["env"] = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        "HOME=/root", "LANG=C.UTF-8"]
    return b


def test_shell(rt, deb):
    r = run(rt, deb, ["sh", "-c", "echo hello from $(cat /etc/debian_version | cut -c1-2)"])
    assert r.ok, r
    assert r.out.strip() == "hello from 12"


@pytest.mark.parametrize("code", [0, 3, 42])
def test_exit_codes(rt, deb, code):
    r = run(rt, deb, ["sh", "-c", f"exit {code}"])
    assert r.rc == code, r


def test_apt_get(rt, deb):
    r = run(rt, deb, ["apt-get", "--version"])
    assert r.ok, r
    assert r.out.startswith("apt "), r


def test_python(rt, deb):
    r = run(rt, deb, ["python3", "-c", "print(1)"])
    assert r.ok, r
    assert r.out == "1\n"


def test_python_exit_code_and_stderr(rt, deb):
    r = run(rt, deb, ["python3", "-c", "import sys; print('oops', file=sys.stderr); sys.exit(42)"])
    assert r.rc == 42, r
    assert "oops" in r.err


def test_python_tmpfs_and_readonly_root(rt, deb):
    r = run(rt, deb, ["python3", "-c", """
import errno, tempfile
with tempfile.NamedTemporaryFile(dir='/tmp') as f:
    f.write(b'x')
try:
    open('/etc/x', 'w')
    print('root-writable')
except OSError as e:
    print(errno.errorcode[e.errno])
"""])
    assert r.ok, r
    assert r.out.strip() == "EROFS"


def test_probe_in_debian(rt, deb):
    r = run(rt, deb, ["/probe", "report"])
    assert r.ok, r
    rep = json.loads(r.out.strip().splitlines()[-1])
    assert rep["uid"] == 0 and rep["pid"] == 1
    assert sorted(rep["fds"]) == ["0", "1", "2"]


def test_stdin_is_passed(rt, deb, tmp_path):
    inp = tmp_path / "in"
    inp.write_text("from stdin\n")
    deb.args("sh", "-c", "read line; echo got: $line")
    with open(inp) as f:
        r, _ = rt.run(deb, None, stdin=f)
    assert r.ok, r
    assert r.out == "got: from stdin\n"
