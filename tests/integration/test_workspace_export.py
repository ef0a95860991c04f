"""`agentsbx workspace export ID --oci DIR` (issue 18): a review workspace's upper layer as an OCI
image layer. The upper is made here by the kernel (an overlay mount with REVIEW.md's options,
changes written through it, unmounted), with a meta.json as REVIEW.md describes, until the review
mount of rv-mount is merged. The layout is checked by readers other than ours (skopeo inspect,
umoci unpack) and by the tar itself, and re-imported with `sandbox --image`."""

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
import uuid

import pytest

from ociutil import cache_entry, tar_of_entries, tar_of_tree, write_layout
from policyutil import audit_dir, sandbox_run

pytestmark = pytest.mark.agentsbx_only("agentsbx workspace export")

WS_ROOT = "/var/lib/agentsbx/workspaces"
OVL_OPTS = "index=off,redirect_dir=off,metacopy=off,xino=off"


def write_meta(d, wid, lower, xattr="trusted", state="stopped"):
    st = os.stat(lower)
    meta = {"id": wid, "workspace": lower, "lowerDev": st.st_dev, "lowerIno": st.st_ino,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "startedNs": time.time_ns(),
            "xattr": xattr, "state": state, "snapshots": [], "image": None, "seed": None}
    with open(os.path.join(d, "meta.json.tmp"), "w") as f:
        json.dump(meta, f)
    os.rename(os.path.join(d, "meta.json.tmp"), os.path.join(d, "meta.json"))


LOWER = {"keep.txt": b"old\n", "del.txt": b"bye\n", "dir/a": b"a", "dir/b": b"b",
         "olddir/x": b"x", "same.txt": b"same\n"}


def fill_lower(lower):
    for rel, data in LOWER.items():
        p = os.path.join(lower, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)


@pytest.fixture
def workspace(rt):
    """A stopped review workspace <WS_ROOT>/<id> whose upper the kernel wrote: keep.txt modified,
    del.txt deleted, dir/ replaced (opaque), olddir renamed to newdir (copied up, old name whited
    out), new.txt, a symlink and a hard link added. Yields (id, lower, dir)."""
    wid = f"exp-{uuid.uuid4().hex[:10]}"
    d = os.path.join(WS_ROOT, wid)
    os.makedirs(d, mode=0o700)
    lower = os.path.join(rt.workdir, f"lower-{wid}")
    mnt = os.path.join(rt.workdir, f"mnt-{wid}")
    os.makedirs(lower)
    os.makedirs(mnt)
    fill_lower(lower)
    for sub in ("upper", "work"):
        os.makedirs(os.path.join(d, sub), mode=0o755)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={lower},upperdir={d}/upper,workdir={d}/work,{OVL_OPTS}", mnt], check=True)
    try:
        sh = ("set -e; echo new > keep.txt; rm del.txt; rm -r dir; mkdir dir; echo c > dir/c; "
              "mv olddir newdir; echo hello > new.txt; ln -s new.txt link; ln new.txt hard; "
              "mkdir -p deep/er; echo d > deep/er/f; chmod 0750 deep")
        subprocess.run(["sh", "-c", sh], cwd=mnt, check=True)
    finally:
        subprocess.run(["umount", mnt], check=True)
    write_meta(d, wid, lower)
    yield wid, lower, d
    shutil.rmtree(d, ignore_errors=True)


def export(rt, wid, out, *extra):
    return rt.cmd("workspace", "export", wid, "--oci", out, *extra, global_args=["--audit-dir", audit_dir(rt)])


def layer_members(out, manifest_digest):
    """{name: TarInfo} of the last layer of the manifest, and the config."""
    blobs = os.path.join(out, "blobs", "sha256")
    with open(os.path.join(blobs, manifest_digest.split(":")[1])) as f:
        man = json.load(f)
    layer = man["layers"][-1]
    with open(os.path.join(blobs, layer["digest"].split(":")[1]), "rb") as f:
        blob = f.read()
    assert hashlib.sha256(blob).hexdigest() == layer["digest"].split(":")[1] and len(blob) == layer["size"]
    raw = gzip.decompress(blob)
    with open(os.path.join(blobs, man["config"]["digest"].split(":")[1])) as f:
        cfg = json.load(f)
    assert cfg["rootfs"]["diff_ids"][-1] == "sha256:" + hashlib.sha256(raw).hexdigest(), "diff_id mismatch"
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        return {m.name: m for m in t.getmembers()}, man, cfg


def test_export_layer_holds_the_changes(rt, workspace):
    wid, _, _ = workspace
    out = os.path.join(rt.workdir, "oci-out")
    r = export(rt, wid, out, "--tag", "t1")
    assert r.rc == 0, r
    digest = r.out.strip()
    assert digest.startswith("sha256:"), r
    m, man, cfg = layer_members(out, digest)
    w = "workspace/"
    assert m[w + "keep.txt"].isfile(), sorted(m)
    assert m[w + ".wh.del.txt"].isfile() and m[w + ".wh.del.txt"].size == 0, sorted(m)
    assert w + "dir/.wh..wh..opq" in m and w + "dir/c" in m and w + "dir/a" not in m, sorted(m)
    assert w + ".wh.olddir" in m and w + "newdir/x" in m, sorted(m)
    assert m[w + "link"].issym() and m[w + "link"].linkname == "new.txt"
    # one inode, two names: the first in name order is the file, the other a hard link to it
    assert m[w + "hard"].isfile() and m[w + "new.txt"].islnk() and m[w + "new.txt"].linkname == w + "hard"
    assert (m[w + "deep"].mode & 0o7777) == 0o750
    assert w + "same.txt" not in m  # never copied up
    assert cfg["os"] == "linux" and len(cfg["rootfs"]["diff_ids"]) == 1 and len(man["layers"]) == 1
    with open(os.path.join(audit_dir(rt), f"{wid}.jsonl")) as f:
        recs = [json.loads(line) for line in f if '"workspace"' in line]
    assert recs and recs[-1]["op"] == "export" and recs[-1]["manifest"] == digest and recs[-1]["tag"] == "t1", recs
    assert recs[-1]["deleted"] >= 2 and recs[-1]["opaque"] == 1, recs
    # the same upper gives the same bytes (no timestamps in the gzip header)
    out2 = os.path.join(rt.workdir, "oci-out2")
    r2 = export(rt, wid, out2, "--tag", "t1")
    assert r2.rc == 0 and r2.out.strip() == digest, (r, r2)


def test_skopeo_and_umoci_read_the_export(rt, workspace, busybox_template):
    if not shutil.which("skopeo") or not shutil.which("umoci"):
        pytest.skip("skopeo or umoci not installed (apt-get install -y skopeo umoci)")
    wid, lower, _ = workspace
    base = os.path.join(rt.workdir, "base")
    lower_layer = tar_of_entries([("srv/app/" + k, "file", v) for k, v in LOWER.items()])
    write_layout(base, [tar_of_tree(busybox_template), lower_layer], tags=("v1",))
    out = os.path.join(rt.workdir, "oci-combined")
    r = export(rt, wid, out, "--tag", "rev", "--base", f"{base}:v1", "--path", "/srv/app")
    assert r.rc == 0, r
    digest = r.out.strip()
    ins = subprocess.run(["skopeo", "inspect", f"oci:{out}:rev"], capture_output=True, text=True)
    assert ins.returncode == 0, ins.stderr
    info = json.loads(ins.stdout)
    assert info["Digest"] == digest and len(info["Layers"]) == 3, info
    bundle = os.path.join(rt.workdir, "umoci-unpacked")
    un = subprocess.run(["umoci", "unpack", "--image", f"{out}:rev", bundle], capture_output=True, text=True)
    assert un.returncode == 0, un.stderr
    app = os.path.join(bundle, "rootfs", "srv", "app")
    assert sorted(os.listdir(app)) == sorted(["keep.txt", "dir", "newdir", "new.txt", "link", "hard", "deep",
                                              "same.txt"]), os.listdir(app)
    assert os.listdir(os.path.join(app, "dir")) == ["c"]
    with open(os.path.join(app, "keep.txt")) as f:
        assert f.read() == "new\n"
    shutil.rmtree(bundle, ignore_errors=True)
    # and ours: the agent's result as the next run's starting point
    ws = os.path.join(rt.workdir, "ws-reimport")
    os.makedirs(ws)
    r = sandbox_run(rt, "--image", f"{out}:rev", "--workspace", ws, "--", "/bin/sh", "-c",
                    "cd /srv/app; ls; echo; cat keep.txt new.txt; ls dir; test -e del.txt || echo del-gone")
    try:
        assert r.rc == 0, r
        assert r.out.split() == ["deep", "dir", "hard", "keep.txt", "link", "new.txt", "newdir", "same.txt",
                                 "new", "hello", "c", "del-gone"], r
    finally:
        shutil.rmtree(cache_entry({"digest": digest}), ignore_errors=True)


def test_export_into_an_existing_layout_keeps_other_tags(rt, workspace):
    wid, _, _ = workspace
    out = os.path.join(rt.workdir, "oci-multi")
    a = export(rt, wid, out, "--tag", "a")
    b = export(rt, wid, out, "--tag", "b")
    a2 = export(rt, wid, out, "--tag", "a")
    assert a.rc == 0 and b.rc == 0 and a2.rc == 0, (a, b, a2)
    with open(os.path.join(out, "index.json")) as f:
        tags = [m["annotations"]["org.opencontainers.image.ref.name"] for m in json.load(f)["manifests"]]
    assert sorted(tags) == ["a", "b"], tags


def test_xattr_whiteouts_and_opaque(rt, workspace):
    """The xattr forms (user namespace overlays, `userxattr`): a zero-size file with
    user.overlay.whiteout, a directory with user.overlay.opaque=y."""
    wid, _, d = workspace
    up = os.path.join(d, "upper")
    with open(os.path.join(up, "xwh"), "w"):
        pass
    os.setxattr(os.path.join(up, "xwh"), "user.overlay.whiteout", b"y")
    os.makedirs(os.path.join(up, "xop"))
    os.setxattr(os.path.join(up, "xop"), "user.overlay.opaque", b"y")
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    meta["xattr"] = "user"
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f)
    out = os.path.join(rt.workdir, "oci-xattr")
    r = export(rt, wid, out)
    assert r.rc == 0, r
    m, _, _ = layer_members(out, r.out.strip())
    assert "workspace/.wh.xwh" in m and "workspace/xwh" not in m, sorted(m)
    assert "workspace/xop/.wh..wh..opq" in m, sorted(m)
    # the chr 0:0 whiteouts the kernel made still count, whatever the namespace
    assert "workspace/.wh.del.txt" in m


def test_wh_name_in_upper_refused(rt, workspace):
    wid, _, d = workspace
    with open(os.path.join(d, "upper", ".wh.passwd"), "w") as f:
        f.write("agent's file\n")
    out = os.path.join(rt.workdir, "oci-wh")
    r = export(rt, wid, out)
    assert r.rc != 0 and ".wh.passwd" in r.err and "whiteout" in r.err, r
    assert not os.path.exists(os.path.join(out, "index.json"))


def test_running_or_locked_workspace_refused(rt, workspace):
    import fcntl
    wid, lower, d = workspace
    out = os.path.join(rt.workdir, "oci-busy")
    with open(os.path.join(d, "lock"), "a") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        r = export(rt, wid, out)
        assert r.rc != 0 and "in use" in r.err, r
    write_meta(d, wid, lower, state="running")
    r = export(rt, wid, out)
    assert r.rc != 0 and "running" in r.err, r


def test_bad_arguments(rt, workspace, tmp_path):
    wid, _, _ = workspace
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "file").write_text("x")
    r = export(rt, wid, str(junk))
    assert r.rc != 0 and "not an OCI image layout" in r.err, r
    assert sorted(os.listdir(junk)) == ["file"]
    r = export(rt, "no-such-" + uuid.uuid4().hex[:6], str(tmp_path / "o"))
    assert r.rc != 0 and "no workspace" in r.err, r
    r = rt.cmd("workspace", "export", wid)
    assert r.rc != 0 and "--oci" in r.err, r
