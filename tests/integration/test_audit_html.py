"""`agentsbx audit --html ID` (issue 21): one self-contained page of a run's audit log. The run is
a real sandbox with a known denial (unshare under agent) and an argv carrying HTML; the page is
checked as text (nothing fetched, the argv escaped) and, when Debian's chromium is installed, as
the DOM a headless browser builds from it: one row per record of the log, the counts on top equal
to the log's, the fragment filters (#denied, #event=exec) hiding exactly the other rows, and a
screenshot it can take."""

import json
import os
import re
import shutil
import subprocess

import pytest

from policyutil import audit_dir

pytestmark = pytest.mark.agentsbx_only("audit --html")
CHROMIUM = shutil.which("chromium")
NASTY = "<script>alert(1)</script>&<b>"


@pytest.fixture
def run_page(rt):
    ws = os.path.join(rt.workdir, f"ws-{os.urandom(3).hex()}")
    os.makedirs(ws)
    cid = f"html-{os.urandom(4).hex()}"
    g = ["--audit-dir", audit_dir(rt)]
    r = rt.cmd("sandbox", "--id", cid, "--workspace", ws, "--", "/bin/sh", "-c",
               f"unshare -U true; /bin/echo '{NASTY}' >/dev/null; exit 0", global_args=g, timeout=60)
    assert r.rc == 0, r
    with open(os.path.join(audit_dir(rt), f"{cid}.jsonl")) as f:
        recs = [json.loads(x) for x in f.read().splitlines()]
    h = rt.cmd("audit", "--html", cid, global_args=g, timeout=30)
    assert h.rc == 0, h
    path = os.path.join(rt.workdir, f"{cid}.html")
    with open(path, "w") as f:
        f.write(h.out)
    return cid, recs, h.out, path


def test_page_is_self_contained_and_escaped(run_page):
    cid, recs, page, _ = run_page
    assert page.startswith("<!DOCTYPE html>") and cid in page
    assert "default-src 'none'" in page  # the browser itself refuses any fetch
    assert not re.search(r"(?i)\b(src|href)\s*=|https?://|@import|url\(", page), "the page references something"
    assert page.count("<script>") == 1 and NASTY not in page, "container text reached the page unescaped"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;&lt;b&gt;" in page
    assert page.count("<tr data-event=") == len(recs)


def test_html_refuses_json_and_follow(rt):
    r = rt.cmd("audit", "--html", "--json", "x", timeout=30)
    assert r.rc != 0 and "--html" in r.err, r


def chromium(*args, tmp):
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp}/prof",
                        *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def _rows(dom):
    return re.findall(r'<tr data-event="([^"]*)" data-decision="([^"]*)"[^>]*?( hidden="")?>', dom)


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (apt-get install chromium; CI installs it)")
def test_dom_in_headless_chromium(run_page, tmp_path):
    cid, recs, _, path = run_page
    dom = chromium("--dump-dom", f"file://{path}", tmp=tmp_path)
    rows = _rows(dom)
    assert [e for e, _, _ in rows] == [r["event"] for r in recs], "one row per record, in log order"
    assert not any(h for _, _, h in rows), "a filter hid a row with no filter set"
    denials = [r for r in recs if r["event"] == "denial"]
    assert denials and denials[0]["syscall"] == "unshare", recs
    assert f'id="count-denied" class="bad" data-count="{len(denials)}"' in dom
    assert f'id="count-total" data-count="{len(recs)}"' in dom
    n_exec = sum(r["event"] == "exec" for r in recs)
    assert f'data-event="exec" data-count="{n_exec}"' in dom
    assert "&lt;script&gt;alert(1)" in dom and "<script>alert" not in dom  # text, not an element

    dom = chromium("--dump-dom", f"file://{path}#denied", tmp=tmp_path)
    shown = [(e, d) for e, d, h in _rows(dom) if not h]
    assert shown and all(d == "denied" for _, d in shown) and len(shown) == len(denials), shown
    assert f'id="shown">{len(denials)}<' in dom

    dom = chromium("--dump-dom", f"file://{path}#event=exec", tmp=tmp_path)
    shown = [e for e, _, h in _rows(dom) if not h]
    assert shown == ["exec"] * n_exec, shown

    png = tmp_path / "report.png"
    chromium(f"--screenshot={png}", "--window-size=1280,900", f"file://{path}", tmp=tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000
