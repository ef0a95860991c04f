"""`agentsbx sandbox --image DIR[:TAG]` (issue 18, reproducible starts): an OCI image layout is
verified against its digests, unpacked (whiteouts applied, escaping entries refused) into the
cache keyed by the manifest digest, and used as the read-only rootfs. Observed from inside the
sandbox (busybox) and on the host (the cache, the targets an escape would have written)."""

import json
import os
import shutil
import subprocess
import uuid

import pytest

from ociutil import (ROOT_IMAGES, blob_path, cache_entry, tar_of_entries, tar_of_tree,
                     write_layout)
from policyutil import sandbox_run

pytestmark = pytest.mark.agentsbx_only("agentsbx sandbox --image")


@pytest.fixture
def ws(rt):
    d = os.path.join(rt.workdir, f"ws-{uuid.uuid4().hex[:6]}")
    os.makedirs(d)
    os.chmod(d, 0o777)
    return d


@pytest.fixture(scope="module")
def base_tar(busybox_template):
    return tar_of_tree(busybox_template)


@pytest.fixture
def cache():
    """Cache entries the test made (by manifest descriptor) are removed at the end."""
    made = []
    yield made
    for desc in made:
        shutil.rmtree(cache_entry(desc), ignore_errors=True)


def marker_layer(text):
    return tar_of_entries([("etc/image-marker", "file", text.encode())])


def temps_left():
    if not os.path.isdir(ROOT_IMAGES):
        return []
    return [n for n in os.listdir(ROOT_IMAGES) if n.startswith(".tmp-")]


def test_image_is_the_readonly_root(rt, ws, base_tar, cache):
    tag = uuid.uuid4().hex
    layout = os.path.join(rt.workdir, "img-ro")
    im = write_layout(layout, [base_tar, marker_layer(tag)], tags=("v1",))
    cache.append(im["manifest"])
    r = sandbox_run(rt, "--image", f"{layout}:v1", "--workspace", ws, "--", "/bin/sh", "-c",
                    "cat /etc/image-marker; echo; test -x /bin/busybox && echo bb; "
                    "echo x > /etc/new 2>/dev/null && echo wrote || echo ro; "
                    "echo y > /workspace/out && echo ws-ok")
    assert r.rc == 0, r
    assert r.out.split() == [tag, "bb", "ro", "ws-ok"], r
    entry = cache_entry(im["manifest"])
    with open(os.path.join(entry, "complete")) as f:
        assert f.read() == im["manifest"]["digest"] + "\nmodes: no group or other write\n"
    assert not os.path.exists(os.path.join(entry, "rootfs", "etc", "new"))
    with open(os.path.join(ws, "out")) as f:
        assert f.read() == "y\n"


def test_whiteouts_remove_lower_layer_files(rt, ws, base_tar, cache):
    layout = os.path.join(rt.workdir, "img-wh")
    lower = tar_of_entries([("etc/lower-a", "file", b"a"), ("etc/lower-b", "file", b"b"),
                            ("opt/d", "dir", None), ("opt/d/x", "file", b"x"),
                            ("opt/d/y", "file", b"y"), ("opt/gone", "dir", None),
                            ("opt/gone/deep", "file", b"z")])
    upper = tar_of_entries([("etc/.wh.lower-a", "file", b""), ("opt/d/z", "file", b"new"),
                            ("opt/d/.wh..wh..opq", "file", b""), ("opt/.wh.gone", "file", b""),
                            ("etc/same", "file", b"kept"), ("etc/.wh.same", "file", b""),
                            ("etc/" + uuid.uuid4().hex, "file", b"")])
    im = write_layout(layout, [base_tar, lower, upper])
    cache.append(im["manifest"])
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/sh", "-c",
                    "ls /etc/lower-a 2>/dev/null || echo a-gone; cat /etc/lower-b; echo; "
                    "ls /opt/d; ls /opt/gone 2>/dev/null || echo dir-gone; cat /etc/same")
    assert r.rc == 0, r
    # the same layer's file survives its own layer's whiteout (layer.md)
    assert r.out.split() == ["a-gone", "b", "z", "dir-gone", "kept"], r


def test_corrupted_blob_refused_naming_it(rt, ws, base_tar, cache):
    layout = os.path.join(rt.workdir, "img-bad")
    im = write_layout(layout, [base_tar, marker_layer(uuid.uuid4().hex)])
    cache.append(im["manifest"])
    p = blob_path(layout, im["layers"][0])
    with open(p, "r+b") as f:  # same size, one byte flipped
        f.seek(1000)
        b = f.read(1)
        f.seek(1000)
        f.write(bytes([b[0] ^ 0xFF]))
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/true")
    assert r.rc != 0, r
    assert im["layers"][0]["digest"] in r.err and "digest mismatch" in r.err, r
    assert not os.path.exists(cache_entry(im["manifest"])), "a corrupt image was cached"
    assert not temps_left(), temps_left()


def test_corrupted_manifest_refused(rt, ws, base_tar, cache):
    layout = os.path.join(rt.workdir, "img-badm")
    im = write_layout(layout, [base_tar])
    cache.append(im["manifest"])
    with open(blob_path(layout, im["manifest"]), "ab") as f:
        f.write(b" ")
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/true")
    assert r.rc != 0 and im["manifest"]["digest"] in r.err and "size mismatch" in r.err, r


@pytest.mark.parametrize("name", ["../asbx-escape-{}", "/asbx-escape-{}", "etc/../../asbx-escape-{}"])
def test_entry_escaping_the_root_refused(rt, ws, base_tar, cache, name):
    name = name.format(uuid.uuid4().hex[:8])
    layout = os.path.join(rt.workdir, "img-dotdot")
    im = write_layout(layout, [base_tar, tar_of_entries([(name, "file", b"pwned")])])
    cache.append(im["manifest"])
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/true")
    assert r.rc != 0, r
    assert "escapes the root" in r.err and name in r.err, r
    base = os.path.basename(name)
    for d in ("/", ROOT_IMAGES, os.path.dirname(ROOT_IMAGES)):
        assert not os.path.exists(os.path.join(d, base)), f"escape wrote {d}/{base}"
    assert not os.path.exists(cache_entry(im["manifest"]))
    assert not temps_left(), temps_left()


def test_file_through_absolute_symlink_refused(rt, ws, base_tar, cache):
    target = os.path.join(rt.workdir, f"host-target-{uuid.uuid4().hex[:6]}")
    os.makedirs(target)
    layout = os.path.join(rt.workdir, "img-symlink")
    # the symlink in a lower layer, the file through it in the next (a tool would put it there)
    im = write_layout(layout, [base_tar, tar_of_entries([("evil", "symlink", target)]),
                               tar_of_entries([("evil/pwned", "file", b"pwned")])])
    cache.append(im["manifest"])
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/true")
    assert r.rc != 0, r
    assert "symlink" in r.err and "evil/pwned" in r.err, r
    assert os.listdir(target) == [], "the entry was written through the symlink on the host"
    assert not os.path.exists(cache_entry(im["manifest"]))


def test_hardlink_to_outside_refused(rt, ws, base_tar, cache):
    layout = os.path.join(rt.workdir, "img-hardlink")
    im = write_layout(layout, [base_tar, tar_of_entries([("etc/pw", "hardlink", "../../etc/passwd")])])
    cache.append(im["manifest"])
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/true")
    assert r.rc != 0 and "escapes the root" in r.err, r


def test_device_nodes_skipped(rt, ws, base_tar, cache):
    layout = os.path.join(rt.workdir, "img-dev")
    im = write_layout(layout, [base_tar, tar_of_entries([("opt/mem", "chr", (1, 1)),
                                                         ("opt/ok", "file", b"ok")])])
    cache.append(im["manifest"])
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/sh", "-c",
                    "ls /opt/mem 2>/dev/null || echo no-dev; cat /opt/ok")
    assert r.rc == 0 and r.out.split() == ["no-dev", "ok"], r
    assert not os.path.lexists(os.path.join(cache_entry(im["manifest"]), "rootfs", "opt", "mem"))


def test_setuid_bits_not_restored(rt, ws, base_tar, cache):
    """A setuid-root file of the image would be a root shell for any host user who can reach the
    cache: its setuid bit is dropped, on the host and so inside."""
    layout = os.path.join(rt.workdir, "img-suid")
    with open("/bin/busybox", "rb") as f:
        bb = f.read()
    im = write_layout(layout, [base_tar, tar_of_entries([("opt/rootsh", "suid", bb)])])
    cache.append(im["manifest"])
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/stat", "-c", "%a", "/opt/rootsh")
    assert r.rc == 0 and r.out.strip() == "755", r
    st = os.stat(os.path.join(cache_entry(im["manifest"]), "rootfs", "opt", "rootsh"))
    assert st.st_mode & 0o6000 == 0 and st.st_uid == 0, oct(st.st_mode)


def _as_user(uid, fn):
    """fn() in a child process running as uid (a local user of the host, not the cache's owner)"""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            fn()
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def test_cache_keeps_no_group_or_other_writable_mode(rt, ws, base_tar, cache):
    """An image's 1777 /var/tmp, 0666 file and 0666 FIFO were cached with those modes under the
    host's searchable cache, so any local user changed what a later root run of the image saw
    (outside tester, attack 06). Judged on the host (modes; a write as another uid) and inside (what
    a cache-hit run reads)."""
    layout = os.path.join(rt.workdir, "img-modes")
    im = write_layout(layout, [base_tar, tar_of_entries([
        ("var", "dir", None), ("var/tmp", "tmpdir", None), ("wwf", "wwfile", b"ORIGINAL\n"),
        ("opt", "dir", None), ("opt/ww.fifo", "wwfifo", None)])])
    cache.append(im["manifest"])
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/stat", "-c", "%a", "/var/tmp", "/wwf",
                    "/opt/ww.fifo")
    assert r.rc == 0 and r.out.split() == ["755", "644", "644"], r
    rootfs = os.path.join(cache_entry(im["manifest"]), "rootfs")
    for rel in ("var/tmp", "wwf", "opt/ww.fifo"):
        st = os.lstat(os.path.join(rootfs, rel))
        assert st.st_mode & 0o1022 == 0, (rel, oct(st.st_mode))

    def tamper():
        with open(os.path.join(rootfs, "wwf"), "w") as f:
            f.write("TAMPERED\n")

    def plant():
        with open(os.path.join(rootfs, "var/tmp/planted"), "w") as f:
            f.write("planted\n")

    assert not _as_user(4243, tamper)
    assert not _as_user(4243, plant)
    # a cache hit uses the entry as it is: the same content, the same modes
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/sh", "-c",
                    "cat /wwf; ls -a /var/tmp; stat -c %a /var/tmp")
    assert r.rc == 0 and r.out.split() == ["ORIGINAL", ".", "..", "755"], r


def test_entry_of_an_earlier_unpacker_refused(rt, ws, base_tar, cache):
    """An entry marked by an agentsbx that kept group/other-writable modes is refused on a hit,
    naming it, and not used."""
    layout = os.path.join(rt.workdir, "img-oldmark")
    im = write_layout(layout, [base_tar, marker_layer("old")])
    cache.append(im["manifest"])
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/true")
    assert r.rc == 0, r
    with open(os.path.join(cache_entry(im["manifest"]), "complete"), "w") as f:
        f.write(im["manifest"]["digest"] + "\n")
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/sh", "-c", "echo RAN")
    assert r.rc != 0 and "RAN" not in r.out and "unpacked by an earlier agentsbx" in r.err, r


def test_cache_hit_reuses_the_unpacked_tree(rt, ws, base_tar, cache):
    layout = os.path.join(rt.workdir, "img-cache")
    im = write_layout(layout, [base_tar, marker_layer("one")])
    cache.append(im["manifest"])
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/cat", "/etc/image-marker")
    assert r.rc == 0 and r.out.strip() == "one", r
    rootfs = os.path.join(cache_entry(im["manifest"]), "rootfs")
    ino = os.stat(rootfs).st_ino
    # a file the host put into the cached tree is seen: the second run did not unpack again
    with open(os.path.join(rootfs, "etc", "host-added"), "w") as f:
        f.write("cached\n")
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/cat", "/etc/host-added")
    assert r.rc == 0 and r.out.strip() == "cached", r
    assert os.stat(rootfs).st_ino == ino
    # an entry without its marker is refused, not used nor silently rebuilt
    os.unlink(os.path.join(cache_entry(im["manifest"]), "complete"))
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/true")
    assert r.rc != 0 and "not a complete entry" in r.err, r


def test_tag_selection(rt, ws, base_tar, cache):
    layout = os.path.join(rt.workdir, "img-tags")
    im = write_layout(layout, [base_tar, marker_layer("tagged")], tags=("a", "b"))
    cache.append(im["manifest"])
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/true")
    assert r.rc != 0 and "ambiguous" in r.err, r
    r = sandbox_run(rt, "--image", f"{layout}:nope", "--workspace", ws, "--", "/bin/true")
    assert r.rc != 0 and "org.opencontainers.image.ref.name = `nope`" in r.err, r
    r = sandbox_run(rt, "--image", f"{layout}:b", "--workspace", ws, "--", "/bin/cat", "/etc/image-marker")
    assert r.rc == 0 and r.out.strip() == "tagged", r


def test_image_made_by_umoci(rt, ws, busybox_template, cache):
    """A layout written by umoci (its own tar writer, gzip, index, config) unpacked by ours."""
    if not shutil.which("umoci"):
        pytest.skip("umoci not installed (apt-get install -y umoci)")
    layout = os.path.join(rt.workdir, "img-umoci")
    bundle = os.path.join(rt.workdir, "umoci-bundle")
    mark = uuid.uuid4().hex
    subprocess.run(["umoci", "init", "--layout", layout], check=True)
    subprocess.run(["umoci", "new", "--image", f"{layout}:t"], check=True)
    subprocess.run(["umoci", "unpack", "--image", f"{layout}:t", bundle], check=True)
    rootfs = os.path.join(bundle, "rootfs")
    subprocess.run(["cp", "-a", busybox_template + "/.", rootfs], check=True)
    with open(os.path.join(rootfs, "etc", "image-marker"), "w") as f:
        f.write(mark)
    subprocess.run(["umoci", "repack", "--image", f"{layout}:t", bundle], check=True)
    # a second layer deleting a file of the first: umoci writes the .wh. entry
    os.unlink(os.path.join(rootfs, "bin", "vi"))
    subprocess.run(["umoci", "repack", "--image", f"{layout}:t", bundle], check=True)
    st = subprocess.run(["umoci", "stat", "--image", f"{layout}:t", "--json"], capture_output=True, text=True)
    assert st.returncode == 0, st
    r = sandbox_run(rt, "--image", f"{layout}:t", "--workspace", ws, "--", "/bin/sh", "-c",
                    "cat /etc/image-marker; echo; test -e /bin/vi || echo vi-gone")
    entry = None
    with open(os.path.join(layout, "index.json")) as f:
        import json
        entry = {"digest": json.load(f)["manifests"][0]["digest"]}
    cache.append(entry)
    assert r.rc == 0 and r.out.split() == [mark, "vi-gone"], r
    shutil.rmtree(bundle, ignore_errors=True)


def test_image_index_followed_to_this_platform(rt, ws, base_tar, cache):
    """index.json -> an image index (multi-platform) -> the linux/amd64 manifest; the arm64
    entry (whose blob is not even there) is not touched."""
    import platform
    from ociutil import MT_INDEX, MT_MANIFEST, REF_NAME, put_blob
    if platform.machine() != "x86_64":
        pytest.skip("the test's platform entries are for an x86_64 host")
    layout = os.path.join(rt.workdir, "img-index")
    im = write_layout(layout, [base_tar, marker_layer("amd64")], tags=("unused",))
    cache.append(im["manifest"])
    other = {"mediaType": MT_MANIFEST, "digest": "sha256:" + "0" * 64, "size": 123,
             "platform": {"os": "linux", "architecture": "arm64"}}
    mine = {**im["manifest"], "platform": {"os": "linux", "architecture": "amd64"}}
    idx = {"schemaVersion": 2, "mediaType": MT_INDEX, "manifests": [other, mine]}
    idesc = put_blob(layout, json.dumps(idx).encode())
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [{"mediaType": MT_INDEX, **idesc,
                                                       "annotations": {REF_NAME: "multi"}}]}, f)
    r = sandbox_run(rt, "--image", f"{layout}:multi", "--workspace", ws, "--", "/bin/cat", "/etc/image-marker")
    assert r.rc == 0 and r.out.strip() == "amd64", r


def test_image_copied_by_skopeo(rt, ws, base_tar, cache):
    """skopeo copy oci:A:v1 oci:B:copied writes its own index.json and copies (or re-encodes) the
    blobs: the copy runs as the original does."""
    if not shutil.which("skopeo"):
        pytest.skip("skopeo not installed (apt-get install -y skopeo)")
    src = os.path.join(rt.workdir, "img-skopeo-src")
    dst = os.path.join(rt.workdir, "img-skopeo-dst")
    mark = uuid.uuid4().hex
    write_layout(src, [base_tar, marker_layer(mark)], tags=("v1",))
    cp = subprocess.run(["skopeo", "copy", f"oci:{src}:v1", f"oci:{dst}:copied"], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    with open(os.path.join(dst, "index.json")) as f:
        cache.append({"digest": json.load(f)["manifests"][0]["digest"]})
    r = sandbox_run(rt, "--image", f"{dst}:copied", "--workspace", ws, "--", "/bin/cat", "/etc/image-marker")
    assert r.rc == 0 and r.out.strip() == mark, r


def test_image_and_rootfs_exclusive(rt, ws, busybox_template):
    r = sandbox_run(rt, "--image", "/nonexistent", "--rootfs", busybox_template, "--workspace", ws,
                    "--", "/bin/true")
    assert r.rc != 0 and "exclusive" in r.err, r


def test_not_a_layout(rt, ws):
    r = sandbox_run(rt, "--image", ws, "--workspace", ws, "--", "/bin/true")
    assert r.rc != 0 and "not an OCI image layout" in r.err and "oci-layout" in r.err, r


def test_unpack_on_the_openat2_fallback(rt, ws, base_tar, cache):
    """openat2 answering ENOSYS (kernels < 5.6, tests/tools/no-openat2): the unpacker resolves
    through the userspace fallback, applies whiteouts, and still refuses a file through a symlink."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    w = os.path.join(rt.workdir, "no-openat2")
    subprocess.run(["gcc", "-O2", "-o", w, os.path.join(top, "tests", "tools", "no-openat2.c"), "-lseccomp"],
                   check=True)
    from policyutil import audit_dir

    def run(layout, *cmd):
        return subprocess.run([w, rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "sandbox",
                               "--image", layout, "--workspace", ws, "--", *cmd],
                              capture_output=True, text=True, timeout=120)

    good = os.path.join(rt.workdir, "img-fb")
    im = write_layout(good, [base_tar, tar_of_entries([("opt/a", "file", b"a"), ("opt/b", "file", b"b")]),
                             tar_of_entries([("opt/.wh.a", "file", b""), ("opt/" + uuid.uuid4().hex, "dir", None)])])
    cache.append(im["manifest"])
    p = run(good, "/bin/sh", "-c", "ls /opt/a 2>/dev/null || echo a-gone; cat /opt/b")
    assert p.returncode == 0 and p.stdout.split() == ["a-gone", "b"], p
    target = os.path.join(rt.workdir, f"fb-target-{uuid.uuid4().hex[:6]}")
    os.makedirs(target)
    bad = os.path.join(rt.workdir, "img-fb-bad")
    im = write_layout(bad, [base_tar, tar_of_entries([("evil", "symlink", target)]),
                            tar_of_entries([("evil/pwned", "file", b"pwned")])])
    cache.append(im["manifest"])
    p = run(bad, "/bin/true")
    assert p.returncode != 0 and "symlink" in p.stderr, p
    assert os.listdir(target) == []


def test_concurrent_unpacks_make_one_entry(rt, base_tar, cache):
    """Four sandboxes start at once on a new image: each unpacks into its own temp dir, one
    rename wins, the others use the winner's entry; no temp dir is left."""
    layout = os.path.join(rt.workdir, "img-race")
    big = tar_of_entries([(f"opt/f{i}", "file", os.urandom(256 << 10)) for i in range(24)])
    im = write_layout(layout, [base_tar, big, marker_layer("raced")])
    cache.append(im["manifest"])
    from policyutil import audit_dir
    procs = []
    for i in range(4):
        w = os.path.join(rt.workdir, f"ws-race-{i}")
        os.makedirs(w)
        procs.append(subprocess.Popen([rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "sandbox",
                                       "--image", layout, "--workspace", w, "--", "/bin/cat", "/etc/image-marker"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.strip() == "raced", (p.returncode, out, err)
    assert os.path.isfile(os.path.join(cache_entry(im["manifest"]), "complete"))
    assert not temps_left(), temps_left()


def test_killed_unpack_leaves_no_entry_and_is_reaped(rt, ws, base_tar, cache):
    """SIGKILL while the layers are written: no entry under the digest's name (the next run
    unpacks again), and the dead unpack's temp dir is removed by the next unpack."""
    import signal
    import time
    layout = os.path.join(rt.workdir, "img-kill")
    big = tar_of_entries([(f"opt/k{i}", "file", os.urandom(1 << 20)) for i in range(160)])
    im = write_layout(layout, [base_tar, big], compress=False)
    cache.append(im["manifest"])
    from policyutil import audit_dir
    p = subprocess.Popen([rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "sandbox", "--image", layout,
                          "--workspace", ws, "--", "/bin/true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    hexd = im["manifest"]["digest"].split(":")[1]
    deadline = time.monotonic() + 30
    mine = []
    while time.monotonic() < deadline and not mine and p.poll() is None:
        mine = [n for n in temps_left() if n.startswith(f".tmp-{hexd}-{p.pid}-")]
        time.sleep(0.01)
    if not mine:
        p.wait()
        pytest.skip("the unpack finished before the test saw its temp dir (host too fast to interrupt it)")
    time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not os.path.exists(cache_entry(im["manifest"])), "a killed unpack left an entry"
    r = sandbox_run(rt, "--image", layout, "--workspace", ws, "--", "/bin/sh", "-c", "ls /opt | wc -l")
    assert r.rc == 0 and r.out.strip() == "160", r
    assert not [n for n in temps_left() if n.startswith(f".tmp-{hexd}-{p.pid}-")], temps_left()


def test_image_as_a_non_root_user(rt, base_tar, tmp_path):
    """A caller other than root: the cache is $XDG_DATA_HOME/agentsbx/images, owned by the caller,
    and the image's root is the caller's (container root in the user namespace)."""
    import pwd
    for t in ("useradd", "userdel", "setpriv"):
        if not shutil.which(t):
            pytest.skip(f"{t} not installed")
    name = f"asbxim{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True)
    pw = pwd.getpwnam(name)
    try:
        home = pw.pw_dir
        layout = os.path.join(home, "img")
        # a 0555 directory, and a later layer writing into it: the caller must still create there
        im = write_layout(layout, [base_tar, tar_of_entries([("opt/ro", "rodir", None)]),
                                   tar_of_entries([("opt/ro/f", "file", b"in-ro")]), marker_layer("mine")])
        ws = os.path.join(home, "proj")
        os.makedirs(ws)
        pol = os.path.join(home, "pol.json")
        with open(pol, "w") as f:
            f.write('{"version": 1, "extends": "rootless", "network": {"mode": "none"}}')
        subprocess.run(["chown", "-R", f"{pw.pw_uid}:{pw.pw_gid}", home], check=True)
        data = os.path.join(home, "data")
        env = ["env", "-i", f"HOME={home}", "PATH=/usr/bin:/bin", f"XDG_DATA_HOME={data}"]
        p = subprocess.run(["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", *env,
                            rt.binary, "sandbox", "--policy", pol, "--image", layout, "--workspace", ws, "--",
                            "/bin/sh", "-c", "cat /etc/image-marker; echo; id -u; stat -c %u /bin/busybox; cat /opt/ro/f"],
                           cwd=ws, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert p.stdout.split() == ["mine", "0", "0", "in-ro"], (p.stdout, p.stderr)
        entry = cache_entry(im["manifest"], images=os.path.join(data, "agentsbx", "images"))
        st = os.stat(os.path.join(entry, "rootfs", "bin", "busybox"))
        assert st.st_uid == pw.pw_uid, "the unpacked files belong to the caller"
        assert os.stat(os.path.join(data, "agentsbx", "images")).st_mode & 0o077 == 0
    finally:
        subprocess.run(["userdel", "-r", "-f", name], check=False, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(f"/tmp/agentsbx-{pw.pw_uid}", ignore_errors=True)


def test_review_meta_records_the_image_digest(rt, ws, base_tar, cache):
    layout = os.path.join(rt.workdir, "img-review")
    im = write_layout(layout, [base_tar, marker_layer("r")], tags=("v1",))
    cache.append(im["manifest"])
    wsdir = os.path.join(rt.workdir, "workspaces")
    config = os.path.join(rt.workdir, "image-review-config.json")
    with open(config, "w") as f:
        f.write('{"workspacesDir": "%s"}' % wsdir)
    sid = rt.new_id()
    r = sandbox_run(rt, "--image", f"{layout}:v1", "--review", "--id", sid, "--workspace", ws, "--",
                    "/bin/sh", "-c", "echo y > /workspace/out", global_args=["--config", config])
    assert r.rc == 0, r
    assert not os.path.exists(os.path.join(ws, "out"))
    with open(os.path.join(wsdir, sid, "meta.json")) as f:
        m = json.load(f)
    assert m["image"] == im["manifest"]["digest"], m
