"""`agentsbx sandbox --seed-git REPO[@REV]` (issue 18): what can be observed before the review
workspace of rv-mount is merged: a network URL is refused naming it, before anything is made.
The clone itself (hooks, revisions, file:// URLs, refusals) is tested against the real git
binary in tests/unit/test_workspace_seed.c."""

import os
import uuid

import pytest

from policyutil import sandbox_run

pytestmark = pytest.mark.agentsbx_only("agentsbx sandbox --seed-git")

WS_ROOT = "/var/lib/agentsbx/workspaces"


@pytest.mark.parametrize("url,what", [
    ("https://example.com/r.git", "network URLs are not supported yet"),
    ("https://example.com/r.git@v1", "network URLs are not supported yet"),
    ("ssh://git@example.com/r", "network URLs are not supported yet"),
    ("git@example.com:o/r.git", "network URL, not supported yet"),
    ("ext::sh -c id", "network URLs are not supported yet"),
])
def test_network_url_refused(rt, url, what):
    sid = f"seed-{uuid.uuid4().hex[:8]}"
    r = sandbox_run(rt, "--id", sid, "--seed-git", url, "--", "/bin/true")
    assert r.rc != 0, r
    assert what in r.err and url.split("@v1")[0] in r.err, r
    assert not os.path.exists(os.path.join(WS_ROOT, sid))
    assert not os.path.isdir(os.path.join(rt.root, "sandbox", sid))


def test_seed_and_workspace_exclusive(rt, tmp_path):
    r = sandbox_run(rt, "--seed-git", str(tmp_path), "--workspace", str(tmp_path), "--", "/bin/true")
    assert r.rc != 0 and "exclusive" in r.err, r
