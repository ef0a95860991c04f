"""The foreground terminal proxy (src/runtime/tty.c): `run`/`exec` with process.terminal and no
--console-socket, from a real terminal (a pty this test owns), against agentsbx and runc as the
control. Engines never take this path (they always pass --console-socket); people at a shell
do. Checked from both sides: what the container sees on its pty (name, size, resize, input)
and that the caller's terminal settings are restored afterwards."""

import json
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import time

import fcntl
import termios
import pytest

from conftest import HANG_GUARD

BUSYBOX = shutil.which("busybox") or "/bin/busybox"


@pytest.fixture
def term_bundle(runtime_paths, engine_rt, eng_dir):
    if not os.path.exists(BUSYBOX):
        pytest.skip("busybox-static not installed")
    rt = runtime_paths[engine_rt]
    d = tempfile.mkdtemp(prefix=f"tty-{engine_rt}-", dir=eng_dir)
    os.chmod(d, 0o755)
    root = os.path.join(d, "rootfs")
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy2(BUSYBOX, os.path.join(root, "bin", "busybox"))
    for a in ("sh", "stty", "tty", "sleep", "cat", "echo", "true"):
        os.symlink("busybox", os.path.join(root, "bin", a))
    subprocess.run([rt, "spec", "--bundle", d], check=True, capture_output=True)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["process"]["terminal"] = True
    cfg["root"] = {"path": "rootfs", "readonly": False}
    state = os.path.join(d, "state")

    def set_args(*args):
        cfg["process"]["args"] = list(args)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
    ids = []
    yield rt, d, state, set_args, ids
    for cid in ids:
        subprocess.run([rt, "--root", state, "delete", "--force", cid], capture_output=True)
        assert not os.path.exists(os.path.join(state, cid)), f"state dir of {cid} left"
    shutil.rmtree(d, ignore_errors=True)


class Term:
    """A child running argv with a pty (rows x cols) as its controlling terminal."""

    def __init__(self, argv, rows=24, cols=80):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.execv(argv[0], argv)
            finally:
                os._exit(127)
        self.resize(rows, cols, signal_child=False)
        self.out = b""

    def resize(self, rows, cols, signal_child=True):
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def read_until(self, needle, timeout=HANG_GUARD):
        deadline = time.monotonic() + timeout
        while needle.encode() not in self.out:
            assert time.monotonic() < deadline, f"no {needle!r} in {self.out!r}"
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    chunk = b""
                assert chunk, f"EOF before {needle!r}: {self.out!r}"
                self.out += chunk
        return self.out.decode("utf-8", "replace")

    def write(self, data):
        os.write(self.fd, data.encode())

    def wait(self, timeout=HANG_GUARD):
        deadline = time.monotonic() + timeout
        while True:
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    chunk = b""
                self.out += chunk
                if not chunk:
                    break
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                raise AssertionError(f"hang guard: {self.out!r}")
        _, st = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(st), self.out.decode("utf-8", "replace")


def wrap(inner):
    """sh around the runtime: records the terminal settings before and after, and its rc."""
    return ["/bin/sh", "-c", 'stty -g > "$0.before"; "$@"; rc=$?; stty -g > "$0.after"; '
            'echo "rc=$rc"', inner[0] + ".tty"] + inner


def test_run_foreground_terminal(term_bundle):
    rt, d, state, set_args, ids = term_bundle
    ids.append("t1")
    # runc sets the pty size asynchronously after start (agentsbx before): wait for a size
    set_args("sh", "-c", "tty; n=0; until [ \"$(stty size 2>/dev/null)\" = '33 91' ] || [ $n = 400 ]; do "
             "sleep 0.05; n=$((n+1)); done; stty size; trap 'stty size' WINCH; echo ready; "
             "while [ -z \"$line\" ]; do read line; done; echo got-$line; exit 7")
    t = Term(wrap([rt, "--root", state, "run", "--bundle", d, "t1"]), rows=33, cols=91)
    out = t.read_until("ready")
    assert "/dev/pts/0" in out and "33 91" in out, out
    t.resize(40, 120)  # the runtime copies the new size to the container's pty
    t.read_until("40 120")
    t.write("hello\r")
    rc, out = t.wait()
    assert "got-hello" in out and "rc=7" in out, out
    with open(rt + ".tty.before") as f, open(rt + ".tty.after") as g:
        assert f.read() == g.read(), "the caller's terminal was not restored"
    assert not os.path.exists(os.path.join(state, "t1"))  # run deletes after the exit


def test_exec_foreground_terminal(term_bundle):
    rt, d, state, set_args, ids = term_bundle
    ids.append("t2")
    set_args("sleep", "1000")
    # detached run with a terminal and no console socket: refused, as runc does
    r = subprocess.run([rt, "--root", state, "run", "-d", "--bundle", d, "t2"],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "cannot allocate tty" in r.stderr, r
    ids.append("t3")
    cfg_path = os.path.join(d, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["process"]["terminal"] = False
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    # output to a file: the detached container inherits it, a pipe would never see EOF
    with open(os.path.join(d, "t3.err"), "w+") as err:
        r = subprocess.run([rt, "--root", state, "run", "-d", "--bundle", d, "t3"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                           timeout=HANG_GUARD)
        err.seek(0)
        assert r.returncode == 0, err.read()
    t = Term(wrap([rt, "--root", state, "exec", "-t", "t3", "sh", "-c",
                   "tty; n=0; until [ \"$(stty size 2>/dev/null)\" = '21 77' ] || [ $n = 400 ]; "
                   "do sleep 0.05; n=$((n+1)); done; stty size; exit 5"]),
             rows=21, cols=77)
    rc, out = t.wait()
    assert "/dev/pts/" in out and "21 77" in out and "rc=5" in out, out
    with open(rt + ".tty.before") as f, open(rt + ".tty.after") as g:
        assert f.read() == g.read()
    r = subprocess.run([rt, "--root", state, "exec", "-d", "-t", "t3", "true"],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "cannot allocate tty" in r.stderr, r


def test_run_terminal_signal_proxy(term_bundle):
    """SIGTERM to a foreground `run` that proxies a terminal reaches the container's process;
    its exit code comes back."""
    rt, d, state, set_args, ids = term_bundle
    ids.append("t4")
    set_args("sh", "-c", "trap 'echo got-term; exit 9' TERM; echo ready; "
             "while :; do sleep 0.1; done")
    t = Term([rt, "--root", state, "run", "--bundle", d, "t4"])
    t.read_until("ready")
    os.kill(t.pid, signal.SIGTERM)
    rc, out = t.wait()
    assert rc == 9 and "got-term" in out, (rc, out)
