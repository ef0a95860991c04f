"""`agentsbx workspace diff` and `workspace apply` (issue 18): the change engine over the review
layout, against a layout made here as `sandbox --review` makes it: a real overlay mount
(lowerdir = a temp host workspace, upperdir/workdir in <workspacesDir>/<id>/, the documented
options) written through, unmounted, and meta.json written by hand. Every assertion is on what
the host file system holds afterwards, on the JSON lines, or on the exit status. Needs root
(overlay mounts, mknod, chown).
"""

import hashlib
import json
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import uuid

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WSDIR = "/var/lib/agentsbx/workspaces"
OWNER = 4242  # the host workspace's owner: applied files must get it, not root's

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="overlay mounts, mknod and chown need root")


def _binary():
    b = os.environ.get("AGENTSBX_RUNTIME") or os.path.join(TOP, "agentsbx")
    return os.path.abspath(shutil.which(b) or b) if os.sep not in b else os.path.abspath(b)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def fsha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


class Workspace:
    """A host workspace (lower) and its review layout <WSDIR>/<id>/."""

    def __init__(self, tmp):
        self.id = "rvd-" + uuid.uuid4().hex[:12]
        self.lower = os.path.join(tmp, "host")
        self.merged = os.path.join(tmp, "merged")
        self.audit = os.path.join(tmp, "audit")
        self.dir = os.path.join(WSDIR, self.id)
        self.upper = os.path.join(self.dir, "upper")
        os.makedirs(self.lower)
        os.chown(self.lower, OWNER, OWNER)
        os.makedirs(self.merged)
        os.makedirs(os.path.join(self.dir, "upper"))
        os.makedirs(os.path.join(self.dir, "work"))
        os.chmod(self.dir, 0o700)
        self.started = None
        self.protect = []
        self.state = "stopped"

    def host(self, rel, data=b"", mode=0o644):
        p = os.path.join(self.lower, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        return p

    def run(self, fn):
        """Mount the overlay as the review run does, call fn(merged), unmount, write meta.json."""
        self.started = time.time_ns()
        time.sleep(0.02)  # ctime granularity: the host's own files stay older than startedNs
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={self.lower},upperdir={self.upper},"
                        f"workdir={os.path.join(self.dir, 'work')},index=off,redirect_dir=off,"
                        "metacopy=off,xino=off", self.merged], check=True)
        try:
            fn(self.merged)
        finally:
            subprocess.run(["umount", self.merged], check=True)
        self.write_meta()

    def write_meta(self):
        st = os.stat(self.lower)
        meta = {"id": self.id, "workspace": self.lower, "lowerDev": st.st_dev, "lowerIno": st.st_ino,
                "created": "2026-01-01T00:00:00Z", "startedNs": self.started, "xattr": "trusted",
                "state": self.state, "snapshots": [], "image": None, "seed": None,
                "protect": self.protect}
        with open(os.path.join(self.dir, "meta.json"), "w") as f:
            json.dump(meta, f)

    def cmd(self, *args, wrapper=None, timeout=120):
        argv = ([wrapper] if wrapper else []) + [_binary(), "--audit-dir", self.audit, "workspace", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)

    def diff_json(self, *extra):
        r = self.cmd("diff", "--json", self.id, *extra)
        assert r.returncode == 0, r.stderr
        return [json.loads(line) for line in r.stdout.splitlines()]

    def audit_records(self):
        p = os.path.join(self.audit, self.id + ".jsonl")
        if not os.path.exists(p):
            return []
        with open(p) as f:
            return [json.loads(line) for line in f if line.strip()]

    def cleanup(self):
        subprocess.run(["umount", self.merged], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def ws():
    tmp = tempfile.mkdtemp(prefix="asbx-wsapply.")
    w = Workspace(tmp)
    try:
        yield w
    finally:
        w.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def host_tree(root):
    """{relative path: (type, mode, sha256 or link target)} of a host tree, never following links."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", 0, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode), None)
            else:
                out[rel] = ("f", stat.S_IMODE(st.st_mode), fsha(p))
    return out


# ---------------------------------------------------------------------------------------------
# diff

def test_diff_json_fields_and_rename(ws):
    ws.host("a.txt", b"hello\n")
    ws.host("move.txt", b"moving content\n")
    ws.host("run.sh", b"#!/bin/sh\n")
    ws.host("gone/y", b"y\n")

    def agent(m):
        with open(os.path.join(m, "a.txt"), "ab") as f:
            f.write(b"world\n")
        with open(os.path.join(m, "bin.dat"), "wb") as f:
            f.write(b"\0\1\2binary")
        os.rename(os.path.join(m, "move.txt"), os.path.join(m, "moved.txt"))
        os.chmod(os.path.join(m, "run.sh"), 0o755)
        shutil.rmtree(os.path.join(m, "gone"))
        os.symlink("a.txt", os.path.join(m, "link"))
    ws.run(agent)

    lines = {(d["op"], d["path"]): d for d in ws.diff_json()}
    assert set(lines) == {("modified", "a.txt"), ("added", "bin.dat"), ("renamed", "moved.txt"),
                          ("mode", "run.sh"), ("deleted", "gone/y"), ("deleted", "gone"),
                          ("added", "link")}, lines
    m = lines[("modified", "a.txt")]
    assert (m["type"], m["mode"], m["size"], m["sha256"]) == ("file", "0644", 12, sha(b"hello\nworld\n"))
    assert (m["oldType"], m["oldMode"], m["oldSize"], m["oldSha256"]) == ("file", "0644", 6, sha(b"hello\n"))
    b = lines[("added", "bin.dat")]
    assert (b["type"], b["size"], b["sha256"]) == ("file", 9, sha(b"\0\1\2binary"))
    assert "oldSha256" not in b
    r = lines[("renamed", "moved.txt")]
    assert r["oldPath"] == "move.txt" and r["sha256"] == r["oldSha256"] == sha(b"moving content\n")
    md = lines[("mode", "run.sh")]
    assert (md["mode"], md["oldMode"], md["sha256"]) == ("0755", "0644", md["oldSha256"])
    assert lines[("deleted", "gone")]["type"] == "dir"
    assert lines[("deleted", "gone/y")]["sha256"] == sha(b"y\n")
    ln = lines[("added", "link")]
    assert (ln["type"], ln["target"], ln["sha256"], ln["size"]) == ("symlink", "a.txt", sha(b"a.txt"), 5)
    # the deletion of a directory's contents comes before the directory's
    order = [(d["op"], d["path"]) for d in ws.diff_json()]
    assert order.index(("deleted", "gone/y")) < order.index(("deleted", "gone"))

    # PATH restricts; the human form has the unified diff and the binary summary
    assert [(d["op"], d["path"]) for d in ws.diff_json("a.txt")] == [("modified", "a.txt")]
    h = ws.cmd("diff", ws.id)
    assert h.returncode == 0, h.stderr
    assert "--- a/a.txt\n+++ b/a.txt\n" in h.stdout and "+world\n" in h.stdout
    bin_sha = sha(b"\0\1\2binary")
    assert f"binary: now 9 bytes sha256:{bin_sha}" in h.stdout
    assert "move.txt -> moved.txt" in h.stdout
    # diff changes nothing
    assert open(os.path.join(ws.lower, "a.txt"), "rb").read() == b"hello\n"


def test_diff_snapshots(ws):
    ws.host("f", b"v0\n")

    def agent(m):
        with open(os.path.join(m, "f"), "wb") as f:
            f.write(b"v1\n")
    ws.run(agent)
    snap = os.path.join(ws.dir, "snapshots", "s1", "upper")
    os.makedirs(os.path.dirname(snap))
    subprocess.run(["cp", "-a", ws.upper, snap], check=True)

    def agent2(m):
        with open(os.path.join(m, "f"), "wb") as f:
            f.write(b"v2\n")
        with open(os.path.join(m, "g"), "wb") as f:
            f.write(b"g\n")
    ws.run(agent2)
    d = ws.diff_json("--from", "s1")
    assert [(x["op"], x["path"], x["oldSha256"] if "oldSha256" in x else None, x["sha256"]) for x in d] == [
        ("modified", "f", sha(b"v1\n"), sha(b"v2\n")), ("added", "g", None, sha(b"g\n"))]
    d = ws.diff_json("--to", "s1")
    assert [(x["op"], x["path"], x["sha256"]) for x in d] == [("modified", "f", sha(b"v1\n"))]
    bad = ws.cmd("diff", "--from", "../x", ws.id)
    assert bad.returncode != 0 and "snapshot name" in bad.stderr


# ---------------------------------------------------------------------------------------------
# apply: each refusal leaves the host exactly as it was

def _write(m, rel, data=b"x\n", mode=None):
    p = os.path.join(m, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(p, mode)


REFUSALS = {
    "symlink_abs": (lambda m: os.symlink("/etc/shadow", os.path.join(m, "evil")), "leaves the workspace"),
    "symlink_dotdot": (lambda m: (os.makedirs(os.path.join(m, "d")),
                                  os.symlink("../../etc", os.path.join(m, "d", "up"))), "leaves the workspace"),
    "hardlink": (lambda m: (_write(m, "h1"), os.link(os.path.join(m, "h1"), os.path.join(m, "h2"))), "hard link"),
    "device": (lambda m: os.mknod(os.path.join(m, "null2"), 0o600 | stat.S_IFCHR, os.makedev(1, 3)), "device node"),
    "fifo": (lambda m: os.mkfifo(os.path.join(m, "pipe")), "a fifo"),
    "setuid": (lambda m: _write(m, "suid", b"#!/bin/sh\n", 0o4755), "setuid"),
    "setgid_dir": (lambda m: (os.makedirs(os.path.join(m, "sg")), os.chmod(os.path.join(m, "sg"), 0o2755)),
                   "setuid, setgid or sticky"),
    "world_writable": (lambda m: _write(m, "ww", b"w\n", 0o666), "world-writable"),
    "git_hooks": (lambda m: _write(m, ".git/hooks/pre-commit", b"#!/bin/sh\ncurl evil\n", 0o755), "protected"),
    "git_config": (lambda m: _write(m, ".git/config", b"[core]\nfsmonitor = evil\n"), "protected"),
    "protect": (lambda m: _write(m, "secrets/token", b"t\n"), "protected path `secrets`"),
    "gitdir_file": (lambda m: (shutil.rmtree(os.path.join(m, ".git")), _write(m, ".git", b"gitdir: evil\n")),
                    "not a directory"),
    "symlink_to_hooks": (lambda m: os.symlink(".git/hooks", os.path.join(m, "h")), "symlink to the protected"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_apply_refuses(ws, name):
    make, reason = REFUSALS[name]
    ws.host("ok.txt", b"old\n")
    ws.host(".git/HEAD", b"ref: refs/heads/main\n")
    ws.protect = ["secrets"]

    def agent(m):
        _write(m, "ok.txt", b"new\n")
        make(m)
    ws.run(agent)
    before = host_tree(ws.lower)
    r = ws.cmd("apply", "--git-data", ws.id)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert reason in r.stdout, r.stdout
    assert "nothing applied" in r.stdout
    assert host_tree(ws.lower) == before, "a refused apply changed the host"
    assert os.path.isdir(ws.dir), "a refused apply removed the review workspace"
    rec = [x for x in ws.audit_records() if x["event"] == "workspace"]
    assert rec and rec[-1]["op"] == "apply" and not any(p["applied"] for p in rec[-1]["paths"])


def test_apply_conflict_host_edit(ws):
    ws.host("shared.txt", b"base\n")
    ws.host("other.txt", b"o\n")

    def agent(m):
        _write(m, "shared.txt", b"agent version\n")
        _write(m, "other.txt", b"o2\n")
    ws.run(agent)
    # the host edits the file after the run started
    with open(os.path.join(ws.lower, "shared.txt"), "wb") as f:
        f.write(b"host version\n")
    before = host_tree(ws.lower)
    r = ws.cmd("apply", ws.id)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "shared.txt: conflict: changed on the host since the run started" in r.stdout
    hsha, asha = sha(b"host version\n"), sha(b"agent version\n")
    assert f"<<<<<<< host   shared.txt sha256:{hsha}" in r.stdout
    assert f">>>>>>> agent  shared.txt sha256:{asha}" in r.stdout
    assert "-host version\n+agent version\n" in r.stdout
    assert host_tree(ws.lower) == before
    # --skip-refused applies the rest and says so with exit 3
    r = ws.cmd("apply", "--skip-refused", ws.id)
    assert r.returncode == 3, r.stdout + r.stderr
    assert open(os.path.join(ws.lower, "other.txt"), "rb").read() == b"o2\n"
    assert open(os.path.join(ws.lower, "shared.txt"), "rb").read() == b"host version\n"
    assert os.path.isdir(ws.dir), "something was skipped: the review workspace must stay"


def test_apply_conflict_vanished(ws):
    ws.host("v.txt", b"v\n")
    ws.run(lambda m: _write(m, "v.txt", b"agent\n"))
    os.unlink(os.path.join(ws.lower, "v.txt"))
    r = ws.cmd("apply", ws.id)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "vanished on the host" in r.stdout
    assert not os.path.exists(os.path.join(ws.lower, "v.txt"))


def test_apply_skip_refused_partial(ws):
    ws.host("keep.txt", b"k\n")

    def agent(m):
        _write(m, "good.txt", b"good\n")
        os.symlink("/etc/passwd", os.path.join(m, "bad"))
        os.mkfifo(os.path.join(m, "f"))
    ws.run(agent)
    d = ws.cmd("apply", "--dry-run", "--skip-refused", ws.id)
    assert d.returncode == 3 and not os.path.exists(os.path.join(ws.lower, "good.txt")), d.stdout
    r = ws.cmd("apply", "--skip-refused", ws.id)
    assert r.returncode == 3, r.stdout + r.stderr
    assert open(os.path.join(ws.lower, "good.txt"), "rb").read() == b"good\n"
    assert not os.path.lexists(os.path.join(ws.lower, "bad"))
    assert not os.path.lexists(os.path.join(ws.lower, "f"))
    rec = [x for x in ws.audit_records() if x["event"] == "workspace"][-1]
    applied = {p["path"]: p["applied"] for p in rec["paths"]}
    assert applied == {"good.txt": True, "bad": False, "f": False}, applied


def test_apply_full_leaves_nothing_and_owner(ws):
    ws.host("a.txt", b"a\n")
    ws.host("old/x", b"x\n")
    ws.host("mv", b"rename me\n")

    def agent(m):
        _write(m, "a.txt", b"a2\n")
        _write(m, "new/deep/file", b"deep\n", 0o640)
        shutil.rmtree(os.path.join(m, "old"))
        os.rename(os.path.join(m, "mv"), os.path.join(m, "mv2"))
        os.symlink("new/deep/file", os.path.join(m, "lnk"))
        os.chmod(os.path.join(m, "a.txt"), 0o600)
    ws.run(agent)
    expect = {p["path"] for p in ws.diff_json()}
    r = ws.cmd("apply", ws.id)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not os.path.exists(ws.dir), "a full apply must leave nothing"
    t = host_tree(ws.lower)
    assert t["a.txt"] == ("f", 0o600, sha(b"a2\n"))
    assert t["new/deep/file"] == ("f", 0o640, sha(b"deep\n"))
    assert t["lnk"] == ("l", 0, "new/deep/file")
    assert t["mv2"][2] == sha(b"rename me\n") and "mv" not in t
    assert "old" not in t and "old/x" not in t
    for rel in ("a.txt", "new", "new/deep", "new/deep/file", "lnk", "mv2"):
        st = os.lstat(os.path.join(ws.lower, rel))
        assert (st.st_uid, st.st_gid) == (OWNER, OWNER), rel
    # no temporary is left in the host directories
    assert not [p for p in t if ".agentsbx-apply" in p]
    rec = [x for x in ws.audit_records() if x["event"] == "workspace"][-1]
    assert rec["op"] == "apply" and {p["path"] for p in rec["paths"]} == expect
    assert all(p["applied"] for p in rec["paths"])
    assert rec["paths"][0]["sha256"] is None or len(rec["paths"][0]["sha256"]) == 64


def test_apply_paths_removes_applied_from_upper(ws):
    ws.host("a", b"a\n")

    def agent(m):
        _write(m, "a", b"a2\n")
        _write(m, "dir/b", b"b\n")
        _write(m, "c", b"c\n")
    ws.run(agent)
    r = ws.cmd("apply", ws.id, "dir/b", "a")
    assert r.returncode == 0, r.stdout + r.stderr
    assert open(os.path.join(ws.lower, "dir", "b"), "rb").read() == b"b\n"
    assert open(os.path.join(ws.lower, "a"), "rb").read() == b"a2\n"
    assert not os.path.exists(os.path.join(ws.lower, "c"))
    assert [(d["op"], d["path"]) for d in ws.diff_json()] == [("added", "c")]
    assert not os.path.exists(os.path.join(ws.upper, "dir")) and not os.path.exists(os.path.join(ws.upper, "a"))


def test_apply_refuses_running_and_lock(ws):
    ws.host("a", b"a\n")
    ws.state = "running"
    ws.run(lambda m: _write(m, "a", b"b\n"))
    r = ws.cmd("apply", ws.id)
    assert r.returncode != 0 and "still running" in r.stderr, r.stderr
    assert open(os.path.join(ws.lower, "a"), "rb").read() == b"a\n"
    ws.state = "stopped"
    ws.write_meta()
    import fcntl
    with open(os.path.join(ws.dir, "lock"), "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        r = ws.cmd("apply", ws.id)
        assert r.returncode != 0 and "lock is held" in r.stderr, r.stderr
    assert ws.cmd("apply", ws.id).returncode == 0


def test_apply_host_dir_swapped_for_symlink(ws):
    """A host directory replaced by a symlink after the diff is never written through."""
    ws.host("d/f", b"f\n")
    outside = tempfile.mkdtemp(prefix="asbx-outside.")
    try:
        ws.run(lambda m: _write(m, "d/f", b"agent\n"))
        shutil.rmtree(os.path.join(ws.lower, "d"))
        os.symlink(outside, os.path.join(ws.lower, "d"))
        r = ws.cmd("apply", "--skip-refused", ws.id)
        assert r.returncode in (1, 3), r.stdout + r.stderr
        assert os.listdir(outside) == []
    finally:
        shutil.rmtree(outside)


def _no_openat2(tmp):
    out = os.path.join(tmp, "no-openat2")
    subprocess.run(["gcc", "-O2", "-o", out, os.path.join(TOP, "tests", "tools", "no-openat2.c"), "-lseccomp"],
                   check=True)
    return out


def test_apply_without_openat2(ws):
    ws.host("d/f", b"f\n")
    ws.run(lambda m: (_write(m, "d/f", b"agent\n"), _write(m, "e/g", b"g\n")))
    w = _no_openat2(os.path.dirname(ws.lower))
    d = ws.cmd("diff", ws.id, wrapper=w)
    assert d.returncode == 0 and "+agent" in d.stdout, d.stdout + d.stderr
    r = ws.cmd("apply", ws.id, wrapper=w)
    assert r.returncode == 0, r.stdout + r.stderr
    assert open(os.path.join(ws.lower, "d", "f"), "rb").read() == b"agent\n"
    assert open(os.path.join(ws.lower, "e", "g"), "rb").read() == b"g\n"


def test_apply_sigkill_mid_file_is_old_or_new(ws):
    """SIGKILL while the big file is being copied: the host file is the old one or the new one."""
    size = 256 << 20
    old = os.urandom(1 << 20) * 256
    ws.host("big.bin", old)
    old_sha = fsha(os.path.join(ws.lower, "big.bin"))

    def agent(m):
        with open(os.path.join(m, "big.bin"), "r+b") as f:
            f.seek(size // 2)
            f.write(b"AGENT WAS HERE")
    ws.run(agent)
    new_sha = fsha(os.path.join(ws.upper, "big.bin"))
    killed_mid_copy = 0
    for attempt in range(3):
        p = subprocess.Popen([_binary(), "--audit-dir", ws.audit, "workspace", "apply", ws.id],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # wait for the unnamed temporary in the host directory (the copy has begun), then kill
        deadline = time.time() + 60
        seen = False
        while time.time() < deadline and p.poll() is None and not seen:
            try:
                for fd in os.listdir(f"/proc/{p.pid}/fd"):
                    t = os.readlink(f"/proc/{p.pid}/fd/{fd}")
                    if t.startswith(ws.lower + "/#") or (t.startswith(ws.lower + "/.agentsbx-apply")):
                        seen = True
            except (FileNotFoundError, ProcessLookupError):
                pass
        if seen and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            killed_mid_copy += 1
        p.wait()
        h = fsha(os.path.join(ws.lower, "big.bin"))
        assert h in (old_sha, new_sha), "a half-written file on the host"
        if h == new_sha:
            break
        assert h == old_sha
    assert killed_mid_copy >= 1, "never caught the apply in the middle of the copy"
    assert not [n for n in os.listdir(ws.lower) if n.startswith(".agentsbx-apply")]


def test_diff_hostile_names(ws):
    """File names are bytes: invalid UTF-8 stays valid JSON (U+FFFD, exact bytes in pathHex) and a
    terminal escape in a name is printed escaped, never raw."""
    raw = b"bad\xff\x1b[31mname"

    def agent(m):
        with open(os.path.join(m.encode(), raw), "wb") as f:
            f.write(b"x\n")
    ws.run(agent)
    r = ws.cmd("diff", "--json", ws.id)
    assert r.returncode == 0, r.stderr
    (d,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert d["path"] == "bad\ufffd\x1b[31mname"
    assert bytes.fromhex(d["pathHex"]) == raw
    h = subprocess.run([_binary(), "--audit-dir", ws.audit, "workspace", "diff", ws.id], capture_output=True)
    assert h.returncode == 0
    assert b"\x1b" not in h.stdout and b"bad\\xff\\x1b[31mname" in h.stdout, h.stdout


@pytest.fixture
def user_tmp():
    """A temp dir a non-root user can reach (pytest's tmp_path lies under a 0700 root dir)."""
    t = tempfile.mkdtemp(prefix="asbx-wsuser.")
    os.chmod(t, 0o755)
    try:
        yield pathlib.Path(t)
    finally:
        shutil.rmtree(t, ignore_errors=True)


def test_rootless_user_xattr_layout(user_tmp):
    """A non-root caller: the overlay mounted in its own user namespace (`userxattr`, whiteouts
    made there), its workspaces under $XDG_DATA_HOME, diff and apply run as that user."""
    uid = 65534
    if subprocess.run(["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups", "unshare", "-Urm",
                       "true"], capture_output=True).returncode != 0:
        pytest.skip("no unprivileged user namespaces here: the rootless layout cannot be made")
    top = user_tmp / "u"
    top.mkdir()
    os.chown(top, uid, uid)
    lower, data, audit = top / "host", top / "data", top / "audit"
    cid = "rvd-" + uuid.uuid4().hex[:12]
    d = data / "agentsbx" / "workspaces" / cid
    env = dict(os.environ, XDG_DATA_HOME=str(data), HOME=str(top), XDG_RUNTIME_DIR="")
    script = f"""set -e
mkdir -p {lower}/sub {d}/upper {d}/work {top}/m {audit}
chmod 700 {d}
echo keep > {lower}/keep; echo old > {lower}/mod; echo bye > {lower}/sub/gone
"""
    as_user = ["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups"]
    subprocess.run(as_user + ["sh", "-c", script], check=True)
    started = time.time_ns()
    time.sleep(0.02)
    # the documented option set, with redirect_dir=nofollow: this kernel refuses userxattr with
    # redirect_dir=off ("conflicting options: userxattr,redirect_dir=follow")
    mnt = (f"mount -t overlay overlay -o lowerdir={lower},upperdir={d}/upper,workdir={d}/work,userxattr,"
           f"index=off,redirect_dir=nofollow,metacopy=off,xino=off {top}/m && "
           f"echo new > {top}/m/mod && echo add > {top}/m/add && rm {top}/m/sub/gone && umount {top}/m")
    subprocess.run(as_user + ["unshare", "-Urm", "sh", "-c", mnt], check=True)
    st = os.stat(lower)
    with open(d / "meta.json", "w") as f:
        json.dump({"id": cid, "workspace": str(lower), "lowerDev": st.st_dev, "lowerIno": st.st_ino,
                   "created": "2026-01-01T00:00:00Z", "startedNs": started, "xattr": "user",
                   "state": "stopped", "snapshots": [], "image": None, "seed": None}, f)
    os.chown(d / "meta.json", uid, uid)
    base = as_user + [_binary(), "--audit-dir", str(audit), "workspace"]
    r = subprocess.run(base + ["diff", "--json", cid], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    got = sorted((x["op"], x["path"]) for x in map(json.loads, r.stdout.splitlines()))
    assert got == [("added", "add"), ("deleted", "sub/gone"), ("modified", "mod")], got
    r = subprocess.run(base + ["apply", cid], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (lower / "mod").read_bytes() == b"new\n" and (lower / "add").read_bytes() == b"add\n"
    assert not (lower / "sub" / "gone").exists()
    assert os.stat(lower / "add").st_uid == uid
    assert not d.exists(), "a full apply must leave nothing (work/work is mode 0 and not root's)"


# outside attack 02: git configuration through `.git/` (B1, B2), symlink chains (B3), terminal
# controls in diff content (B4)

GIT = ["git", "-c", "safe.directory=*", "-c", "user.email=a@b", "-c", "user.name=a",
       "-c", "protocol.file.allow=always"]


def _git(cwd, *args):
    subprocess.run(GIT + list(args), cwd=cwd, check=True, capture_output=True)


def _host_repo(ws):
    _git(ws.lower, "init", "-q")
    _git(ws.lower, "commit", "-q", "--allow-empty", "-m", "init")


def _fsmonitor(pwned):
    return f'[core]\n\tfsmonitor = "id > {pwned}; false"\n'.encode()


def _host_git_status(ws, cwd=None):
    subprocess.run(GIT + ["status"], cwd=cwd or ws.lower, capture_output=True, timeout=60)


def test_apply_git_commondir_redirect_refused(ws):
    """B1: `.git/commondir` pointing at an agent-written copy of .git whose config sets
    core.fsmonitor; the host's `git status` must not run it."""
    _host_repo(ws)
    pwned = os.path.join(os.path.dirname(ws.lower), "PWNED-commondir")

    def agent(m):
        shutil.copytree(os.path.join(m, ".git"), os.path.join(m, "evilc"), symlinks=True)
        with open(os.path.join(m, "evilc", "config"), "ab") as f:
            f.write(_fsmonitor(pwned))
        _write(m, ".git/commondir", b"../evilc\n")
    ws.run(agent)
    r = ws.cmd("apply", "--git-data", "--skip-refused", ws.id)
    assert "refused" in r.stdout and ".git/commondir" in r.stdout, r.stdout
    assert "git's data" in r.stdout, r.stdout
    assert not os.path.exists(os.path.join(ws.lower, ".git", "commondir"))
    _host_git_status(ws)
    assert not os.path.exists(pwned), "the host's git ran the agent's core.fsmonitor"


def test_apply_git_submodule_config_refused(ws, tmp_path):
    """B2: `.git/modules/sub/config` (a submodule's git dir) is configuration too."""
    src = str(tmp_path / "subsrc")
    os.makedirs(src)
    _git(src, "init", "-q")
    _git(src, "commit", "-q", "--allow-empty", "-m", "s")
    _host_repo(ws)
    _git(ws.lower, "submodule", "add", "-q", src, "sub")
    _git(ws.lower, "commit", "-q", "-m", "sub")
    pwned = str(tmp_path / "PWNED-modules")

    def agent(m):
        with open(os.path.join(m, ".git", "modules", "sub", "config"), "ab") as f:
            f.write(_fsmonitor(pwned))
    ws.run(agent)
    r = ws.cmd("apply", "--git-data", ws.id)
    assert r.returncode == 1 and ".git/modules/sub/config" in r.stdout, r.stdout
    _host_git_status(ws)
    _host_git_status(ws, os.path.join(ws.lower, "sub"))
    assert not os.path.exists(pwned), "the host's git ran the agent's core.fsmonitor"


GIT_REFUSED = [".git/config.worktree", ".git/info/attributes", ".git/worktrees/w/config",
               ".git/objects/info/alternates", ".git/description", "nested/.git/config",
               ".git/rebase-merge/git-rebase-todo"]


@pytest.mark.parametrize("rel", GIT_REFUSED)
def test_apply_git_allow_list_refuses(ws, rel):
    _host_repo(ws)
    ws.run(lambda m: _write(m, rel, b"agent\n"))
    before = host_tree(ws.lower)
    r = ws.cmd("apply", "--git-data", ws.id)
    assert r.returncode == 1 and "git's data" in r.stdout, r.stdout
    assert host_tree(ws.lower) == before


def test_apply_git_symlink_under_git_refused(ws):
    _host_repo(ws)
    ws.run(lambda m: os.symlink("../../../evil", os.path.join(m, ".git", "refs", "heads", "x")))
    r = ws.cmd("apply", "--git-data", ws.id)
    assert r.returncode == 1 and "git's data" in r.stdout, r.stdout


def test_apply_git_commit_applies(ws):
    """An agent's commit is git data (objects, refs, logs, HEAD...): it applies, and the host's
    git sees it. The index is never written (kept, not a refusal: a plain apply goes through):
    the reviewer's `git reset` rebuilds it from the applied commit."""
    _host_repo(ws)
    _write(ws.lower, ".git/packed-refs", b"# pack-refs with: peeled fully-peeled sorted\n")

    def agent(m):
        _write(m, "f.txt", b"agent\n")
        _git(m, "add", "f.txt")
        _git(m, "commit", "-q", "-m", "agent commit")
        _git(m, "tag", "-a", "-m", "t", "v1")
        _git(m, "pack-refs", "--all")
    ws.run(agent)
    r = ws.cmd("apply", "--git-data", ws.id)
    assert r.returncode == 0 and "kept     modified .git/index" in r.stdout, (r.stdout, r.stderr)
    assert "refused  " not in r.stdout, r.stdout
    assert "applied  modified .git/packed-refs" in r.stdout, r.stdout
    _git(ws.lower, "reset", "-q")
    log = subprocess.run(GIT + ["log", "--format=%s"], cwd=ws.lower, capture_output=True, text=True)
    assert log.stdout.splitlines()[0] == "agent commit", log.stdout
    st = subprocess.run(GIT + ["status", "--porcelain"], cwd=ws.lower, capture_output=True, text=True)
    assert st.returncode == 0 and st.stdout == "", st.stdout


def test_apply_repository_outside_dot_git_refused(ws, tmp_path):
    """A directory git takes for a repository whatever its name (HEAD, objects/, refs/): the agent
    making one (`src/` with its own config) is refused, and in a bare repository the host keeps
    in the project (`remote.git`) only git's data is written, not its hooks (outside retest: the
    host's `git status` in src/ and its `git push ./remote.git` ran the agent's commands)."""
    pwned = tmp_path / "PWNED"
    _host_repo(ws)
    _git(ws.lower, "init", "-q", "--bare", "remote.git")

    def agent(m):
        _write(m, "src/HEAD", b"ref: refs/heads/master\n")
        os.makedirs(os.path.join(m, "src", "objects"), exist_ok=True)
        os.makedirs(os.path.join(m, "src", "refs", "heads"), exist_ok=True)
        _write(m, "src/config", b"[core]\n\tworktree = .\n" + _fsmonitor(pwned)[7:])
        _write(m, "remote.git/hooks/post-receive", f"#!/bin/sh\nid > {pwned}\n".encode(), 0o755)
        _write(m, "notes.txt", b"fine\n")
    ws.run(agent)
    r = ws.cmd("apply", "--skip-refused", "--git-data", ws.id)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "makes `src` a git repository" in r.stdout and "lies in `remote.git`" in r.stdout, r.stdout
    assert os.path.exists(os.path.join(ws.lower, "notes.txt"))
    for rel in ("src/HEAD", "src/config", "src/objects", "src/refs"):
        assert not os.path.lexists(os.path.join(ws.lower, rel)), rel
    assert not os.path.lexists(os.path.join(ws.lower, "remote.git", "hooks", "post-receive"))
    _git(ws.lower, "push", "-q", "./remote.git", "HEAD:refs/heads/x")
    assert not pwned.exists()


def test_apply_symlink_chain_refused(ws):
    """B3: each link stays inside lexically, but resolved through one another (or through a host
    symlink) they leave the workspace. Whatever is applied resolves inside the workspace."""
    os.makedirs(os.path.join(ws.lower, "h", "b"))
    os.symlink("../..", os.path.join(ws.lower, "h", "b", "hs"))  # the host's own: the workspace root

    def agent(m):
        os.makedirs(os.path.join(m, "a", "b", "c"))
        os.symlink("../../..", os.path.join(m, "a", "b", "c", "s2"))
        os.symlink("s2/../../../..", os.path.join(m, "a", "b", "c", "s1"))
        os.symlink("a/b/c/s1/etc", os.path.join(m, "etc"))
        os.symlink("hs/../..", os.path.join(m, "h", "b", "y"))
    ws.run(agent)
    r = ws.cmd("apply", ws.id)
    assert r.returncode == 1 and "through the symlink" in r.stdout, r.stdout
    r = ws.cmd("apply", "--skip-refused", ws.id)
    assert "a/b/c/s1: a symlink whose target" in r.stdout, r.stdout
    root = os.path.realpath(ws.lower)
    for dp, dns, fns in os.walk(ws.lower):
        for n in dns + fns:
            p = os.path.join(dp, n)
            if os.path.islink(p):
                real = os.path.realpath(p)
                assert real == root or real.startswith(root + "/"), f"{p} -> {real}"
    assert not os.path.lexists(os.path.join(ws.lower, "etc"))
    assert os.path.islink(os.path.join(ws.lower, "a", "b", "c", "s2")), "a link to the root is fine"


def test_apply_symlink_down_and_up_refused(ws):
    """A target with `..` after a name (`s2/../..`) is refused even while `s2` is absent: a later
    session's applied `s2 -> ../../..` made such a link, applied earlier, point outside the
    workspace (outside retest: a host write through it landed outside). Leading `..` only is fine."""
    def agent(m):
        os.makedirs(os.path.join(m, "a", "b", "c"))
        os.symlink("s2/../../../../victim", os.path.join(m, "a", "b", "c", "s1"))
        os.symlink("../../x", os.path.join(m, "a", "b", "c", "ok"))
    ws.run(agent)
    r = ws.cmd("apply", "--skip-refused", ws.id)
    assert r.returncode == 3 and "has `..` after a name" in r.stdout, r.stdout
    assert not os.path.lexists(os.path.join(ws.lower, "a", "b", "c", "s1"))
    assert os.readlink(os.path.join(ws.lower, "a", "b", "c", "ok")) == "../../x"


HOSTILE = (b"hello\n\x1b]0;OWNED-TITLE\x07\x1b[2J\x1b[31mall good\x1b[0m\n"
           b"c1 \xc2\x9b2J raw \x9b2J del \x7f cr \r end\n"
           b"euro \xe2\x82\xac tab\tok\n")


def _no_controls(out):
    assert b"\x1b" not in out and b"\x07" not in out and b"\x7f" not in out and b"\r" not in out, out
    assert b"\xc2\x9b" not in out and b"\x9b" not in out, out


def test_diff_content_controls_escaped(ws):
    """B4: the bytes a diff sends to the reviewer's terminal carry no control sequences: C0 but
    TAB and LF, DEL and C1 (UTF-8 or raw) are shown as \\xNN; other UTF-8 stays as it is."""
    ws.host("a.txt", b"hello\n")
    name = b"n\xc2\x9bB\x1b[1m"

    def agent(m):
        with open(os.path.join(m, "a.txt"), "wb") as f:
            f.write(HOSTILE)
        with open(os.path.join(m.encode(), name), "wb") as f:
            f.write(b"\x1b[8mhidden\x1b[0m\n")
        os.symlink(b"x\x1b[31mRED\xc2\x9b", os.path.join(m.encode(), b"lnk"))
    ws.run(agent)
    h = subprocess.run([_binary(), "workspace", "diff", ws.id], capture_output=True)
    assert h.returncode == 0, h.stderr
    _no_controls(h.stdout)
    assert b"\\x1b]0;OWNED-TITLE\\x07" in h.stdout and b"\\xc2\\x9b2J raw \\x9b2J del \\x7f cr \\x0d" in h.stdout
    assert b"euro \xe2\x82\xac tab\tok" in h.stdout, h.stdout
    assert b"\\x1b[8mhidden" in h.stdout
    j = subprocess.run([_binary(), "workspace", "diff", "--json", ws.id], capture_output=True)
    assert j.returncode == 0, j.stderr
    _no_controls(j.stdout)
    recs = {d["path"]: d for d in (json.loads(line) for line in j.stdout.splitlines())}
    assert name.decode() in recs and recs["lnk"]["target"] == "x\x1b[31mRED\u009b", recs
    d = subprocess.run([_binary(), "--audit-dir", ws.audit, "workspace", "apply", "--dry-run", ws.id],
                       capture_output=True)
    _no_controls(d.stdout + d.stderr)


def test_apply_conflict_view_controls_escaped(ws):
    ws.host("a.txt", b"hello\n")

    def agent(m):
        with open(os.path.join(m, "a.txt"), "wb") as f:
            f.write(HOSTILE)
        os.symlink(b"/x\x1b[2Jy", os.path.join(m.encode(), b"lnk"))
    ws.run(agent)
    time.sleep(0.02)
    with open(os.path.join(ws.lower, "a.txt"), "wb") as f:
        f.write(b"host \x1b[2J edit\n")
    r = subprocess.run([_binary(), "--audit-dir", ws.audit, "workspace", "apply", ws.id], capture_output=True)
    assert r.returncode == 1 and b"conflict" in r.stdout, r.stdout
    assert b"\\x1b]0;OWNED-TITLE" in r.stdout and b"host \\x1b[2J edit" in r.stdout, r.stdout
    _no_controls(r.stdout + r.stderr)


def test_diff_filter_keeps_utf8_across_reads(ws):
    """The filter reads diff's output in pieces: a UTF-8 character cut by a read boundary is
    carried to the next piece, never escaped or mangled."""
    body = ("€" * 999 + "\n").encode() * 200  # ~600 KB: many pipe reads
    ws.run(lambda m: _write(m, "euro.txt", body))
    h = subprocess.run([_binary(), "workspace", "diff", ws.id], capture_output=True)
    assert h.returncode == 0, h.stderr
    assert b"\\x" not in h.stdout
    assert h.stdout.count("€".encode()) == 999 * 200


# ---------------------------------------------------------------------------------------------
# outside attack 06: repositories made outside `.git` through commondir (1) or at the root once
# .git/HEAD is broken (5), the race under --running (3), a crafted .git/index (4, 4b), raw paths
# in error messages (2). Judged from the host: the payload's marker file is absent after the
# reviewer's git command.

def _commondir_repo(m, d, pwned, worktree):
    """src/HEAD + commondir "c" + config.worktree (core.fsmonitor) and c/{objects,refs,config}"""
    pre = d + "/" if d else ""
    _write(m, pre + "HEAD", b"ref: refs/heads/main\n")
    _write(m, pre + "commondir", b"c\n")
    os.makedirs(os.path.join(m, pre + "c", "objects"), exist_ok=True)
    os.makedirs(os.path.join(m, pre + "c", "refs"), exist_ok=True)
    _write(m, pre + "c/config", b"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n")
    _write(m, pre + "config.worktree",
           f'[core]\n\tbare = false\n\tworktree = {worktree}\n\tfsmonitor = "id > {pwned}; echo"\n'.encode())


def test_apply_commondir_repository_refused(ws, tmp_path):
    """Break 1: `src/` made a repository through `commondir` (no objects/ or refs/ of its own):
    the entries named HEAD, commondir, config.worktree are refused; the host's `git status` in
    src/ runs nothing of the agent's."""
    pwned = tmp_path / "PWNED-commondir"
    _host_repo(ws)
    ws.host("src/main.c", b"int main(){}\n")
    ws.run(lambda m: _commondir_repo(m, "src", pwned, ".."))
    r = ws.cmd("apply", "--skip-refused", ws.id)
    _host_git_status(ws, os.path.join(ws.lower, "src"))
    assert not pwned.exists(), "the host's git ran the agent's core.fsmonitor"
    assert r.returncode == 3, (r.stdout, r.stderr)
    for n in ("src/HEAD", "src/commondir", "src/config.worktree"):
        assert f"refused  added    {n}: an entry named" in r.stdout, r.stdout
        assert not os.path.lexists(os.path.join(ws.lower, n)), n


def test_apply_root_head_broken_and_commondir_refused(ws, tmp_path):
    """Break 5: .git/HEAD rewritten to `ref: heads/main` (git then rejects .git and takes the
    workspace root, with HEAD, commondir, config.worktree, c/, for the repository): the invalid
    HEAD and the root's markers are refused; the host's `git status` runs nothing."""
    pwned = tmp_path / "PWNED-rootgit"
    _host_repo(ws)
    head = open(os.path.join(ws.lower, ".git", "HEAD"), "rb").read()

    def agent(m):
        _write(m, ".git/HEAD", b"ref: heads/main\n")
        _commondir_repo(m, "", pwned, ".")
        _write(m, "notes.txt", b"fine\n")
    ws.run(agent)
    r = ws.cmd("apply", "--git-data", "--skip-refused", ws.id)
    _host_git_status(ws)
    assert not pwned.exists(), "the host's git ran the agent's core.fsmonitor"
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "refused  modified .git/HEAD: its content is not a ref git accepts" in r.stdout, r.stdout
    assert open(os.path.join(ws.lower, ".git", "HEAD"), "rb").read() == head
    for n in ("HEAD", "commondir", "config.worktree"):
        assert not os.path.lexists(os.path.join(ws.lower, n)), n
    assert open(os.path.join(ws.lower, "notes.txt"), "rb").read() == b"fine\n"
    _host_git_status(ws)
    assert not pwned.exists(), "the host's git ran the agent's core.fsmonitor"


def test_apply_running_gitdir_race_refused(ws, tmp_path):
    """Break 3: under `apply --running` the agent removes src/refs after the walk listed it (the
    walker's read of src/refs updates its atime) and before the repository check; apply then made
    src/ a full repository with the agent's config. src/HEAD is refused from the walk's list
    whatever the upper holds later."""
    pwned = tmp_path / "PWNED-race"
    _host_repo(ws)
    ws.host("src/main.c", b"int main(){}\n")
    ws.state = "running"

    def agent(m):
        os.makedirs(os.path.join(m, "src", "objects"))
        os.makedirs(os.path.join(m, "src", "refs"))
        _write(m, "src/HEAD", b"ref: refs/heads/main\n")
        _write(m, "src/config", b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n"
               + f'\tfsmonitor = "id > {pwned}; echo"\n'.encode())
        with open(os.path.join(m, "zzz.bin"), "wb") as f:  # hashed after src/: the window
            for _ in range(200):
                f.write(b"\0" * (1 << 20))
    ws.run(agent)
    refs = os.path.join(ws.upper, "src", "refs")
    os.utime(refs, (1, os.stat(refs).st_mtime))
    p = subprocess.Popen([_binary(), "--audit-dir", ws.audit, "workspace", "apply", "--running", "--skip-refused",
                          ws.id], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while os.stat(refs).st_atime == 1 and time.time() < deadline and p.poll() is None:
        time.sleep(0.001)
    time.sleep(0.05)
    os.rmdir(refs)
    out, err = p.communicate(timeout=120)
    _host_git_status(ws, os.path.join(ws.lower, "src"))
    assert not pwned.exists(), "the host's git ran the agent's core.fsmonitor"
    assert "src/HEAD: an entry named `HEAD`" in out, (out, err)
    assert not os.path.lexists(os.path.join(ws.lower, "src", "HEAD"))


def _craft_index(m, fake, real):
    """Rename index entry `fake` to `real` (same length) and recompute the SHA-1 trailer"""
    p = os.path.join(m, ".git", "index")
    d = open(p, "rb").read()[:-20]
    assert fake.encode() in d
    d = d.replace(fake.encode(), real.encode())
    with open(p, "wb") as f:
        f.write(d + hashlib.sha1(d).digest())


def _agent_stages(m, body, fake, real, mode="100755"):
    b = subprocess.run(GIT + ["hash-object", "-w", "--stdin"], cwd=m, input=body, capture_output=True,
                       check=True).stdout.decode().strip()
    _git(m, "update-index", "--add", "--cacheinfo", f"{mode},{b},{fake}")
    _craft_index(m, fake, real)


def test_apply_git_index_hook_refused(ws, tmp_path):
    """Break 4: an index entry named `.git/hooks/post-checkout`: the reviewer's `git checkout --
    .` wrote the hook and ran it. .git/index is never written: it is kept as the host's."""
    pwned = tmp_path / "PWNED-index"
    ws.host("README", b"hello\n")
    _git(ws.lower, "init", "-q")
    _git(ws.lower, "add", "-A")
    _git(ws.lower, "commit", "-q", "-m", "init")

    def agent(m):
        _write(m, "README", b"hello, world\n")
        _agent_stages(m, f"#!/bin/sh\nid > {pwned}\n".encode(), "xgit/hooks/post-checkout",
                      ".git/hooks/post-checkout")
    ws.run(agent)
    r = ws.cmd("apply", "--git-data", "--skip-refused", ws.id)
    subprocess.run(GIT + ["checkout", "--", "."], cwd=ws.lower, capture_output=True, timeout=60)
    assert not pwned.exists(), "the host's git ran the agent's hook"
    assert not os.path.lexists(os.path.join(ws.lower, ".git", "hooks", "post-checkout"))
    assert r.returncode == 0 and "kept     modified .git/index" in r.stdout, (r.stdout, r.stderr)


def test_apply_git_index_outside_path_refused(ws, tmp_path):
    """Break 4b: an index entry `sub/../../OUTSIDE-index`: the reviewer's `git checkout -- .`
    wrote outside the workspace. Nothing is written outside."""
    outside = os.path.join(os.path.dirname(ws.lower), "OUTSIDE-index")
    ws.host("sub/f", b"hi\n")
    _git(ws.lower, "init", "-q")
    _git(ws.lower, "add", "-A")
    _git(ws.lower, "commit", "-q", "-m", "init")
    ws.run(lambda m: _agent_stages(m, b"* * * * * root id > /tmp/pwned\n", "sub/xx/xx/OUTSIDE-index",
                                   "sub/../../OUTSIDE-index", "100644"))
    r = ws.cmd("apply", "--git-data", "--skip-refused", ws.id)
    subprocess.run(GIT + ["checkout", "--", "."], cwd=ws.lower, capture_output=True, timeout=60)
    try:
        assert not os.path.lexists(outside), "the reviewer's git wrote outside the workspace"
    finally:
        if os.path.lexists(outside):
            os.unlink(outside)
    assert "kept     modified .git/index" in r.stdout, (r.stdout, r.stderr)


def test_diff_error_path_escaped(ws):
    """Break 2: a path longer than PATH_MAX (reached by the walker through directory fds) cannot
    be opened by path to diff it: the error names it escaped, no raw ESC/BEL reaches stderr."""
    name = b"\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[H\x1b[32mworkspace: no changes\x1b[8m"

    def agent(m):
        fd = os.open(m, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(30):
                os.mkdir("0" * 200, dir_fd=fd)
                nfd = os.open("0" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = nfd
            f = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(f, b"x\n")
            os.close(f)
        finally:
            os.close(fd)
    ws.run(agent)
    r = subprocess.run([_binary(), "--audit-dir", ws.audit, "workspace", "diff", ws.id], capture_output=True,
                       timeout=120)
    assert b"\x1b" not in r.stderr and b"\x07" not in r.stderr, r.stderr[-300:]
    assert r.returncode != 0 and b"open to diff" in r.stderr, r.stderr[-300:]
    assert b"\\x1b]0;PWNED-TITLE\\x07" in r.stderr, r.stderr[-300:]


MARKERS = ["src/HEAD", "src/head", "src/Head", "src/CommonDir", "src/gitdir", "src/config.worktree",
           "src/CONFIG.WORKTREE", "src/.GIT/config", "deep/er/.git/config"]


@pytest.mark.parametrize("rel", MARKERS)
def test_apply_git_marker_names_refused(ws, rel):
    """Rule: outside `.git`, an entry named HEAD, commondir, gitdir, config.worktree or .git (any
    case) is refused, and so is a symlink whose target ends in one."""
    _host_repo(ws)
    ws.run(lambda m: _write(m, rel, b"agent\n"))
    before = host_tree(ws.lower)
    r = ws.cmd("apply", ws.id)
    assert r.returncode == 1 and "outside `.git`" in r.stdout, r.stdout
    assert host_tree(ws.lower) == before


def test_apply_symlink_to_marker_refused(ws):
    _host_repo(ws)
    ws.run(lambda m: os.symlink(".git/HEAD", os.path.join(m, "h")))
    r = ws.cmd("apply", ws.id)
    assert r.returncode == 1 and "ends in a git repository marker" in r.stdout, r.stdout


BAD_REFS = {
    ".git/HEAD": [b"ref: heads/main\n", b"ref: refs/heads/main", b"ref: refs/heads/../x\n",
                  b"ref: refs/heads/a b\n", b"ref: refs/heads/x.lock\n", b"A" * 40 + b"\n",
                  b"ref: refs/heads/main\n[core]\n"],
    ".git/refs/heads/x": [b"0" * 39 + b"\n", b"ref: refs/heads/.hidden\n", b"0" * 40 + b"\n" + b"1" * 40 + b"\n"],
    ".git/ORIG_HEAD": [b"gitdir: /x\n"],
    ".git/packed-refs": [b"0" * 40 + b" refs/heads/a\n[core]\n", b"0" * 40 + b" heads/a\n"],
}


@pytest.mark.parametrize("rel,data", [(k, v) for k, vs in sorted(BAD_REFS.items()) for v in vs])
def test_apply_git_ref_content_refused(ws, rel, data):
    """Rule: HEAD, *_HEAD, refs/ files and packed-refs are written only with content git takes
    for a ref (check-ref-format names, lowercase hex)."""
    _host_repo(ws)
    ws.run(lambda m: _write(m, rel, data))
    before = host_tree(ws.lower)
    r = ws.cmd("apply", "--git-data", ws.id)
    assert r.returncode == 1 and f"{rel}: " in r.stdout and ("not a ref" in r.stdout or "packed-refs" in r.stdout), \
        r.stdout
    assert host_tree(ws.lower) == before


def test_apply_git_fetch_head_refused(ws):
    _host_repo(ws)
    ws.run(lambda m: _write(m, ".git/FETCH_HEAD", b"0" * 40 + b"\t\tbranch 'x' of y\n"))
    r = ws.cmd("apply", "--git-data", ws.id)
    assert r.returncode == 1 and "`.git/FETCH_HEAD` is protected" in r.stdout, r.stdout


# outside attack 09 (after the fixes of attack 06): the agent's commits planted a repository
# through git itself; a symlink to `.git/.`; a rename applied by its old path.


def test_apply_keeps_the_agents_git_data_by_default(ws, tmp_path):
    """Break 05: the agent commits src/HEAD + src/config (core.fsmonitor) + objects/ + refs/,
    deletes them from its worktree and changes a file. Applied as git data, its commit made the
    reviewer's `git reset; git checkout -- .` write the repository and `git status` in src/ ran
    the fsmonitor as root. By default the agent's git data is kept out (one `kept` line): the
    file change applies, the host's HEAD does not move, and the reviewer's git writes nothing of
    the commit."""
    pwned = tmp_path / "PWNED-commit"
    ws.host("src/main.c", b"int main(){return 1;}\n")
    _git(ws.lower, "init", "-q")
    _git(ws.lower, "add", "-A")
    _git(ws.lower, "commit", "-q", "-m", "init")
    head = subprocess.run(GIT + ["rev-parse", "HEAD"], cwd=ws.lower, capture_output=True, text=True).stdout

    def agent(m):
        _write(m, "src/main.c", b"int main(){return 0;}\n")
        _write(m, "src/objects/.keep", b"")
        _write(m, "src/refs/.keep", b"")
        _write(m, "src/HEAD", b"ref: refs/heads/main\n")
        _write(m, "src/config", b"[core]\n\tbare = false\n\tworktree = ..\n" + _fsmonitor(pwned)[7:])
        _git(m, "add", "-A")
        _git(m, "commit", "-q", "-m", "fix main, add build metadata")
        for f in ("src/HEAD", "src/config", "src/objects/.keep", "src/refs/.keep"):
            os.unlink(os.path.join(m, f))
    ws.run(agent)
    r = ws.cmd("apply", ws.id)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "applied  modified src/main.c" in r.stdout and "in git repositories" in r.stdout, r.stdout
    assert subprocess.run(GIT + ["rev-parse", "HEAD"], cwd=ws.lower, capture_output=True, text=True).stdout == head
    _git(ws.lower, "reset", "-q")
    _git(ws.lower, "checkout", "--", ".")
    _host_git_status(ws, os.path.join(ws.lower, "src"))
    assert not pwned.exists(), "the host's git ran the agent's core.fsmonitor"
    assert not os.path.lexists(os.path.join(ws.lower, "src", "HEAD"))
    with open(os.path.join(ws.lower, "src", "main.c"), "rb") as f:
        assert f.read() == b"int main(){return 1;}\n"  # checkout -- . gave the host's version back


def test_apply_symlink_to_dot_git_dot_refused(ws):
    """Break 02: a symlink `gd -> .git/.` ended in "." and passed the marker rule."""
    _host_repo(ws)
    ws.run(lambda m: (os.symlink(".git/.", os.path.join(m, "gd")), os.symlink(".git/./", os.path.join(m, "gd2"))))
    r = ws.cmd("apply", "--skip-refused", ws.id)
    assert not os.path.lexists(os.path.join(ws.lower, "gd")) and not os.path.lexists(os.path.join(ws.lower, "gd2"))
    assert r.stdout.count("git repository marker") == 2, r.stdout


def test_apply_path_selects_a_rename_by_its_new_path(ws):
    """Break 04: `apply ID docs/` applied the rename docs/a.md -> run-me.sh (selected by its old
    path) and created run-me.sh outside the selection. Now neither side of it is applied."""
    ws.host("docs/a.md", b"doc\n")
    ws.host("keep.txt", b"k\n")
    ws.run(lambda m: (os.rename(os.path.join(m, "docs/a.md"), os.path.join(m, "run-me.sh")),
                      _write(m, "docs/b.md", b"new doc\n")))
    r = ws.cmd("apply", ws.id, "docs/")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert not os.path.lexists(os.path.join(ws.lower, "run-me.sh")), r.stdout
    assert os.path.exists(os.path.join(ws.lower, "docs", "a.md")), r.stdout  # not half a rename
    assert os.path.exists(os.path.join(ws.lower, "docs", "b.md")), r.stdout


def test_apply_keeps_a_host_bare_repositorys_data_by_default(ws):
    """Without --git-data the agent's writes into a repository the host keeps under another name
    (a bare `remote.git`: its objects carry trees the reviewer would clone and check out) are kept
    out like its `.git`, counted on the `kept` line; its file changes apply."""
    _host_repo(ws)
    _git(ws.lower, "init", "-q", "--bare", "remote.git")
    ws.run(lambda m: (_write(m, "remote.git/refs/heads/x", b"0" * 40 + b"\n"), _write(m, "notes.txt", b"fine\n")))
    r = ws.cmd("apply", ws.id)
    assert r.returncode == 0 and "in git repositories" in r.stdout, (r.stdout, r.stderr)
    assert os.path.exists(os.path.join(ws.lower, "notes.txt"))
    assert not os.path.lexists(os.path.join(ws.lower, "remote.git", "refs", "heads", "x"))


def test_apply_path_selects_a_rename_only_with_both_paths(ws):
    """A rename writes its new path and removes its old one: `apply ID docs/` of
    src/main.c -> docs/main.c removed src/main.c, outside the selection (outside attack 10).
    Selected by both paths it applies; by one of them nothing of it does."""
    ws.host("src/main.c", b"int main(){}\n")
    ws.host("docs/a.md", b"doc\n")
    ws.run(lambda m: os.rename(os.path.join(m, "src/main.c"), os.path.join(m, "docs/main.c")))
    r = ws.cmd("apply", ws.id, "docs/")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert os.path.exists(os.path.join(ws.lower, "src", "main.c")), r.stdout
    assert not os.path.exists(os.path.join(ws.lower, "docs", "main.c")), r.stdout
    r = ws.cmd("apply", ws.id, "docs/", "src/")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert not os.path.exists(os.path.join(ws.lower, "src", "main.c")), r.stdout
    assert os.path.exists(os.path.join(ws.lower, "docs", "main.c")), r.stdout
