"""Building OCI image layouts (image-spec v1.1) in tests, with digests computed here, so
`sandbox --image` is fed layouts whose every byte the test controls (and can corrupt)."""

import gzip
import hashlib
import io
import json
import os
import tarfile

MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_TAR = "application/vnd.oci.image.layer.v1.tar"
MT_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"
ROOT_IMAGES = "/var/lib/agentsbx/images"


def sha(data):
    return hashlib.sha256(data).hexdigest()


def put_blob(layout, data):
    d = os.path.join(layout, "blobs", "sha256")
    os.makedirs(d, exist_ok=True)
    h = sha(data)
    with open(os.path.join(d, h), "wb") as f:
        f.write(data)
    return {"digest": "sha256:" + h, "size": len(data)}


def tar_of_tree(root):
    """A tar (bytes) of the directory root, entries relative ("./bin/busybox")."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        t.add(root, arcname=".")
    return buf.getvalue()


def tar_of_entries(entries):
    """entries: list of (name, kind, value): kind 'file' (value: bytes), 'suid' (a 04755 file), 'wwfile' (a 0666 file), 'dir', 'rodir' (0555), 'tmpdir' (01777), 'wwfifo' (a 0666 FIFO), 'symlink' (value:
    target), 'hardlink' (value: target name), 'chr' (value: (major, minor)). Written in order, as
    given (so a test can put anything in any order)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, value in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            if kind in ("file", "suid", "wwfile"):
                ti.size, ti.mode = len(value), {"file": 0o644, "suid": 0o4755, "wwfile": 0o666}[kind]
                t.addfile(ti, io.BytesIO(value))
                continue
            if kind in ("dir", "rodir", "tmpdir"):
                ti.type, ti.mode = tarfile.DIRTYPE, {"dir": 0o755, "rodir": 0o555, "tmpdir": 0o1777}[kind]
            elif kind == "wwfifo":
                ti.type, ti.mode = tarfile.FIFOTYPE, 0o666
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, value
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, value
            elif kind == "chr":
                ti.type, (ti.devmajor, ti.devminor) = tarfile.CHRTYPE, value
            t.addfile(ti)
    return buf.getvalue()


def write_layout(layout, layers, tags=("latest",), compress=True, arch="amd64"):
    """An OCI layout at `layout` whose image has `layers` (tar bytes, bottom first), gzip'ed when
    `compress`. index.json lists one manifest per tag (the same manifest). Returns a dict with
    the manifest descriptor, the layer descriptors, and the config descriptor."""
    os.makedirs(layout, exist_ok=True)
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    ldescs, diff_ids = [], []
    for tar in layers:
        diff_ids.append("sha256:" + sha(tar))
        blob = gzip.compress(tar, mtime=0) if compress else tar
        ldescs.append({"mediaType": MT_GZIP if compress else MT_TAR, **put_blob(layout, blob)})
    config = {"architecture": arch, "os": "linux", "config": {"Env": ["PATH=/bin"]},
              "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    cdesc = {"mediaType": MT_CONFIG, **put_blob(layout, json.dumps(config).encode())}
    manifest = {"schemaVersion": 2, "mediaType": MT_MANIFEST, "config": cdesc, "layers": ldescs}
    mdesc = {"mediaType": MT_MANIFEST, **put_blob(layout, json.dumps(manifest).encode())}
    index = {"schemaVersion": 2, "mediaType": MT_INDEX,
             "manifests": [{**mdesc, "annotations": {REF_NAME: t}} for t in tags]}
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump(index, f)
    return {"manifest": mdesc, "layers": ldescs, "config": cdesc}


def blob_path(layout, desc):
    return os.path.join(layout, "blobs", "sha256", desc["digest"].split(":", 1)[1])


def cache_entry(desc, images=ROOT_IMAGES):
    return os.path.join(images, desc["digest"].split(":", 1)[1])
