"""Secrets from the runtime's environment under Docker (issue 19; docs/policy.md "Secrets from
the runtime's environment"): dockerd is started with AGENTSBX_SECRET_gh in its environment, which
containerd, the runc v2 shim and so agentsbx inherit; a runtime class gives a policy whose
network.credentials names ${secret:gh} and a host config whose secretsDir does not exist. So the
container is created only if the secret came through the engine's environment, and neither the
container's process nor a `docker exec`'d one (the shim runs `agentsbx exec` with the same
environment) finds the variable in any /proc/*/environ. The header injection itself is judged
against the fake HTTPS API in tests/integration/test_egress_secret_env.py (the engine's network
here is --network none).

Uses the private dockerd of test_docker.py (its Docker class), this module's own.
"""

import json
import os
import uuid

import pytest

from conftest import IMAGE, Leaks
from test_docker import Docker, running_docker

pytestmark = pytest.mark.docker

VALUE = "ghp_dk" + uuid.uuid4().hex
# every environment block of the container's processes, one variable a line, the matches counted
SCAN = "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null | grep -c AGENTSBX_SECRET; echo scanned"


class SecretDocker(Docker):
    def __init__(self, d, runtime_paths):
        super().__init__(d, runtime_paths)
        self.daemon_env = dict(os.environ, AGENTSBX_SECRET_gh=VALUE)

    def config(self, live_restore=False):
        c = super().config(live_restore)
        host = os.path.join(self.dir, "host-config.json")
        with open(host, "w") as f:
            json.dump({"secretsDir": os.path.join(self.dir, "no-secrets-dir")}, f)
        pol = os.path.join(self.dir, "cred-policy.json")
        with open(pol, "w") as f:
            json.dump({"version": 1, "extends": "agent", "network": {
                "mode": "filtered", "allowedDomains": ["api.test"], "ports": [443],
                "credentials": [{"host": "api.test", "header": "Authorization", "value": "Bearer ${secret:gh}"}]}}, f)
        c["runtimes"]["agentsbx-cred"] = {
            "path": self.runtime_paths["agentsbx"],
            "runtimeArgs": ["--config=" + host, "--policy=" + pol, "--audit-dir=" + self.audit_dir],
        }
        return c


@pytest.fixture(scope="module")
def sdocker(eng_dir, runtime_paths, rootfs_tar):
    yield from running_docker(SecretDocker, "dks-", eng_dir, runtime_paths, rootfs_tar)


def test_engine_environment_secret_reaches_the_monitor_only(sdocker):
    leaks = Leaks([sdocker.dir])
    cidfile = os.path.join(sdocker.dir, f"cid.{os.urandom(3).hex()}")
    r = sdocker.cli("run", "-d", "--runtime=agentsbx-cred", "--network", "none", "--cidfile", cidfile,
                    IMAGE, "sh", "-c", f"{SCAN}; sleep 60", check=False)
    assert r.returncode == 0, r   # created: the secret was found in the runtime's environment
    with open(cidfile) as f:
        cid = leaks.track(f.read().strip(), *sdocker.state_roots())
    os.unlink(cidfile)
    try:
        x = sdocker.cli("exec", cid, "sh", "-c", SCAN, check=False)
        assert x.returncode == 0 and x.stdout.split() == ["0", "scanned"], x
        # the control: a variable of that name that IS in a process's environment is counted
        x = sdocker.cli("exec", "-e", "AGENTSBX_SECRET_planted=1", cid, "sh", "-c", SCAN, check=False)
        assert x.returncode == 0 and x.stdout.split()[0] != "0", x
        logs = sdocker.cli("logs", cid, check=False)
        assert logs.stdout.split() == ["0", "scanned"], logs
    finally:
        sdocker.cli("rm", "-f", cid, check=False)
    audit = os.path.join(sdocker.audit_dir, f"{cid}.jsonl")
    with open(audit) as f:
        text = f.read()
    assert '"policy"' in text and VALUE not in text
    leaks.check()
