"""The Kubernetes node installer's script (contrib/kubernetes/install.sh, issue 21) against a
private containerd: `install` copies the binary into BIN_DIR and adds the handlers of
runtimeclasses.yaml; containerd (restarted by the test, as RESTART would on a node) reads them
(`containerd config dump`) and runs a container through a profile handler's binary with that
profile in force (read-only /etc, seen from inside); `uninstall` gives config.toml back byte for
byte and removes the binary and the wrappers. HOST=/ with private directories, so nothing of the
machine is touched."""

import os
import re
import tempfile

import pytest

from conftest import IMAGE_FULL, TOP, Containerd, _need, make_oci_archive, sh, stop_daemon

pytestmark = pytest.mark.containerd
SCRIPT = os.path.join(TOP, "contrib", "kubernetes", "install.sh")


def test_runtimeclasses_match_the_installer():
    with open(os.path.join(TOP, "contrib", "kubernetes", "runtimeclasses.yaml")) as f:
        handlers = re.findall(r"^handler: (\S+)$", f.read(), re.M)
    with open(SCRIPT) as f:
        profiles = re.search(r'PROFILES=\$\{PROFILES-([^}]*)\}', f.read()).group(1).split()
    assert handlers == ["agentsbx"] + [f"agentsbx-{p}" for p in profiles]


def test_install_run_uninstall(eng_dir, runtime_paths, rootfs_tar):
    _need("containerd", "containerd")
    _need("ctr", "containerd")
    d = tempfile.mkdtemp(prefix="k8s-", dir=eng_dir)
    cd = Containerd(d, {"runc": runtime_paths["runc"]}, IMAGE_FULL)
    before = open(cd.config, "rb").read()
    env = dict(os.environ, HOST="/", BIN_SRC=runtime_paths["agentsbx"], BIN_DIR=os.path.join(d, "bin"),
               WRAPPER_DIR=os.path.join(d, "wrap"), PROFILES="agent build", CONTAINERD_CONFIG=cd.config,
               RESTART="")
    r = sh(["sh", SCRIPT, "install"], env=env)
    binary = os.path.join(d, "bin", "agentsbx")
    assert os.access(binary, os.X_OK) and "installed agentsbx version" in r.stdout, r
    dump = sh(["containerd", "--config", cd.config, "config", "dump"]).stdout
    for h, b in (("agentsbx", binary), ("agentsbx-agent", os.path.join(d, "wrap", "agentsbx-agent")),
                 ("agentsbx-build", os.path.join(d, "wrap", "agentsbx-build"))):
        assert f"runtimes.{h}.options]" in dump and f'BinaryName = "{b}"' in dump, (h, dump)
    cd.start()
    try:
        archive = make_oci_archive(rootfs_tar, os.path.join(d, "image.oci.tar"))
        cd.ctr("images", "import", archive)
        os.unlink(archive)
        r = cd.ctr("run", "--rm", "--runtime", "io.containerd.runc.v2", "--runc-binary",
                   os.path.join(d, "wrap", "agentsbx-agent"), IMAGE_FULL, f"k8s-{os.getpid()}", "sh", "-c",
                   "touch /etc/x 2>/dev/null && echo etc=writable || echo etc=refused")
        assert "etc=refused" in r.stdout, r
    finally:
        stop_daemon(cd.proc)
    r = sh(["sh", SCRIPT, "uninstall"], env=env)
    assert open(cd.config, "rb").read() == before, "uninstall did not restore config.toml"
    assert not os.path.exists(binary) and not os.path.exists(os.path.join(d, "wrap")), os.listdir(d)
    # a node without the binary's libraries: install refuses before touching containerd
    env2 = dict(env, BIN_SRC="/bin/false")
    r = sh(["sh", SCRIPT, "install"], env=env2, check=False)
    assert r.returncode != 0 and "does not run on this node" in r.stderr, r
    assert open(cd.config, "rb").read() == before
