"""`make demo` (scripts/demo) and its page (scripts/demo_page.py).

The page is opened in headless Chromium (Debian's `chromium`, installed by
scripts/setup) and the test checks what the browser made of it: the DOM
after the page's script ran (--dump-dom) holds the timeline's SVG marks,
the summary table's numbers and the script's "rendered" marker, and a
screenshot of the size asked for is taken. Then the demo runs once end to
end: it must exit 0, print the page's path last, say the history is
linearizable and that every node reached the newest release a rolling
upgrade reaches (1.3.0 for a 2.0.0 binary: 2.0.0 talks to no 1.x node).
"""

import importlib.machinery
import importlib.util
import json
import re
import shutil
import struct
import subprocess
import sys
import types
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import BATOND, REPO, build_dir, require_binary

DEMO = REPO / "scripts" / "demo"
CHROMIUM_TIMEOUT_S = 90
DEMO_TIMEOUT_S = 240  # the demo bounds itself at about a minute


def load_page_module():
    spec = importlib.util.spec_from_file_location(
        "demo_page", REPO / "scripts" / "demo_page.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


demo_page = load_page_module()


def load_demo_module():
    loader = importlib.machinery.SourceFileLoader("baton_demo", str(DEMO))
    spec = importlib.util.spec_from_loader("baton_demo", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def chromium():
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium not found: install it (scripts/setup lists "
                    "Debian's chromium package; run make setup as root)")
    return path


def chromium_run(tmp_path, page, *what):
    """Headless Chromium on the page; flags that work as root in a
    container (no sandbox, no GPU, a profile of its own)."""
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-dev-shm-usage", "--no-first-run",
           f"--user-data-dir={tmp_path / 'chromium-profile'}",
           *what, page.resolve().as_uri()]
    p = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=CHROMIUM_TIMEOUT_S)
    assert p.returncode == 0, (f"{' '.join(cmd)} exited {p.returncode}:\n"
                               f"{p.stderr[-3000:]}")
    return p


class Dom(HTMLParser):
    """The elements of a dumped DOM: (tag, attrs, text inside)."""

    VOID = {"meta", "br", "img", "input", "link", "hr"}

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.elements = []
        self.open = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        e = {"tag": tag, "attrs": dict(attrs), "text": ""}
        self.elements.append(e)
        if tag not in self.VOID:
            self.open.append(e)

    def handle_startendtag(self, tag, attrs):
        self.elements.append({"tag": tag, "attrs": dict(attrs), "text": ""})

    def handle_endtag(self, tag):
        for k in range(len(self.open) - 1, -1, -1):
            if self.open[k]["tag"] == tag:
                del self.open[k:]
                return

    def handle_data(self, data):
        for e in self.open:
            e["text"] += data

    def with_class(self, cls):
        return [e for e in self.elements
                if cls in (e["attrs"].get("class") or "").split()]

    def by_id(self, ident):
        found = [e for e in self.elements if e["attrs"].get("id") == ident]
        assert len(found) == 1, f"{len(found)} elements with id {ident!r}"
        return found[0]

    def body(self):
        return next(e for e in self.elements if e["tag"] == "body")


def made_up_timeline():
    tp = [30 + (k * 7) % 13 for k in range(150)]
    return {
        "title": "made-up roll </script><b>not bold</b>",
        "t_end": 15.0, "bucket_ms": 100, "throughput": tp,
        "failed": [0] * 60 + [4] + [0] * 89,
        "nodes": [1, 2, 3],
        "releases": {
            "1": [[0.0, "1.0.0"], [4.0, None], [4.3, "1.1.0"]],
            "2": [[0.0, "1.0.0"], [6.0, None], [6.3, "1.1.0"]],
            "3": [[0.0, "1.0.0"], [8.0, None], [8.2, "1.1.0"],
                  [11.0, None], [11.4, "1.1.0"]]},
        "restarts": [
            {"t": 4.0, "node": 1, "release": "1.1.0", "gap_ms": 31.0},
            {"t": 6.0, "node": 2, "release": "1.1.0", "gap_ms": None},
            {"t": 8.0, "node": 3, "release": "1.1.0", "gap_ms": 47.6},
            {"t": 11.0, "node": 3, "release": "1.1.0", "gap_ms": 12.0}],
        "leaders": [
            {"t": 0.1, "node": 3, "term": 2, "release": "1.0.0"},
            {"t": 7.9, "node": 1, "term": 3, "release": "1.1.0"},
            {"t": 10.9, "node": 2, "term": 4, "release": "1.1.0"}],
        "floor": [[0.1, "1.0.0"], [7.9, "1.1.0"]],
        "machine": [[0.1, 1], [8.5, 2]],
        "summary": {"ok": 4321, "failed": 17, "indeterminate": 3,
                    "verdict": "linearizable", "path": ["1.0.0", "1.1.0"],
                    "roll": "rolled", "duration_s": 15.0,
                    "errors": [["TRYAGAIN no leader elected yet; retry", 17]],
                    "final_releases": {"1": "1.1.0", "2": "1.1.0",
                                       "3": "1.1.0"}},
    }


def path_points(d):
    return len(re.findall(r"[ML]\s*-?[\d.]+\s+-?[\d.]+", d))


def check_rendered(dom, tl):
    """What the browser drew from timeline tl."""
    body = dom.body()["attrs"]
    assert "data-render-error" not in body, body["data-render-error"]
    assert body.get("data-rendered") == "ok", \
        "the page's script did not finish drawing"
    assert dom.by_id("timeline")["tag"] == "svg"
    restarts = dom.with_class("restart")
    for node in tl["nodes"]:
        want = sum(1 for r in tl["restarts"] if r["node"] == node)
        got = [e for e in restarts if e["attrs"].get("data-node") == str(node)]
        assert len(got) == want, (node, got)
    assert len(restarts) == len(tl["restarts"])
    changes = dom.with_class("leader-change")
    assert [e["attrs"]["data-node"] for e in changes] == \
        [str(ld["node"]) for ld in tl["leaders"]]
    tp = dom.by_id("throughput")
    assert tp["tag"] == "path"
    assert int(tp["attrs"]["data-points"]) == len(tl["throughput"])
    assert path_points(tp["attrs"]["d"]) == len(tl["throughput"])
    assert [e["attrs"]["data-value"] for e in dom.with_class(
        "floor-change")] == [str(f) for _, f in tl["floor"]]
    assert [e["attrs"]["data-value"] for e in dom.with_class(
        "machine-change")] == [str(v) for _, v in tl["machine"]]
    s = tl["summary"]
    assert dom.by_id("sum-ok")["text"] == str(s["ok"])
    assert dom.by_id("sum-failed")["text"] == str(s["failed"])
    assert dom.by_id("sum-indeterminate")["text"] == str(s["indeterminate"])
    assert dom.by_id("sum-total")["text"] == \
        str(s["ok"] + s["failed"] + s["indeterminate"])
    assert dom.by_id("sum-verdict")["text"] == s["verdict"]
    assert dom.by_id("status")["text"].startswith("drawn: ")


def png_size(path):
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_page_renders_in_headless_chromium(tmp_path):
    tl = made_up_timeline()
    page = demo_page.write(tl, tmp_path / "page.html")
    text = page.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text, "the page must not fetch anything"
    dom = Dom(chromium_run(tmp_path, page, "--dump-dom").stdout)
    check_rendered(dom, tl)
    # The title is text, not markup, and did not end the data's script.
    h1 = next(e for e in dom.elements if e["tag"] == "h1")
    assert h1["text"] == tl["title"]
    assert not [e for e in dom.elements if e["tag"] == "b"]
    gaps = [e["text"] for e in dom.elements
            if (e["attrs"].get("id") or "").startswith("sum-gap-")]
    assert gaps == ["31 ms", "no writes around it", "48 ms", "12 ms"]
    shot = tmp_path / "page.png"
    chromium_run(tmp_path, page, "--window-size=1200,900",
                 f"--screenshot={shot}")
    assert png_size(shot) == (1200, 900)


def test_page_refuses_a_malformed_timeline():
    tl = made_up_timeline()
    del tl["leaders"]
    with pytest.raises(ValueError, match="lacks leaders"):
        demo_page.render(tl)
    tl = made_up_timeline()
    tl["bucket_ms"] = 0
    with pytest.raises(ValueError, match="bucket_ms must be positive"):
        demo_page.render(tl)


def test_demo_rolls_through_releases_that_can_talk():
    demo = load_demo_module()
    # release: (peer protocol min, max, machine_max), as batond --version
    table = {"0.1.0": (1, 1, 1), "1.0.0": (1, 1, 1), "1.1.0": (1, 2, 2),
             "1.2.0": (2, 3, 2), "1.3.0": (2, 3, 2)}
    assert demo.choose_start(table, "1.3.0") == "0.1.0"
    assert demo.roll_path(table, "0.1.0", "1.3.0") == \
        ["0.1.0", "1.1.0", "1.3.0"]
    assert demo.roll_path(table, "1.2.0", "1.3.0") == ["1.2.0", "1.3.0"]
    # An oldest release nothing newer can talk to is not a start.
    table["0.0.9"] = (0, 0, 1)
    assert demo.roll_path(table, "0.0.9", "1.3.0") == []
    assert demo.choose_start(table, "1.3.0") == "0.1.0"
    with pytest.raises(demo.DemoError, match="not in the binary's table"):
        demo.choose_start(table, "1.3.0", "2.0.0")
    assert demo.roll_target(table) == "1.3.0"


def test_demo_rolls_to_the_newest_release_an_older_one_talks_to():
    """2.0.0 speaks peer protocol 4 only: no 1.x release can be rolled to
    it (the relay moves 1.x clusters), so the demo stops at 1.3.0."""
    demo = load_demo_module()
    table = {"0.1.0": (1, 1, 1), "1.0.0": (1, 1, 1), "1.1.0": (1, 2, 2),
             "1.2.0": (2, 3, 2), "1.3.0": (2, 3, 2), "2.0.0": (4, 4, 3)}
    assert demo.roll_target(table) == "1.3.0"
    assert demo.roll_path(table, "1.3.0", "2.0.0") == []
    assert demo.choose_start(table, "1.3.0") == "0.1.0"
    # A later 2.x that still speaks 4 is reached from 2.0.0.
    table["2.1.0"] = (4, 5, 3)
    assert demo.roll_target(table) == "2.1.0"
    assert demo.choose_start(table, "2.1.0") == "2.0.0"


def test_demo_counts_each_write_gap_for_one_restart():
    demo = load_demo_module()

    def write(ms, f="set", status="ok"):
        return types.SimpleNamespace(f=f, status=status,
                                     complete_ns=ms * 1_000_000)

    ops = [write(ms) for ms in (0, 100, 200, 2000, 2300, 2350, 2500,
                                2600, 9000, 9040)]
    ops += [write(2400, f="get"), write(2450, status="info")]
    restarts = [{"ns": 2000 * 10**6, "ready_ns": 2400 * 10**6},
                {"ns": 2450 * 10**6, "ready_ns": 2700 * 10**6},
                {"ns": 9000 * 10**6, "ready_ns": 9100 * 10**6}]
    # Windows: [1.0 s, 2.4 s) (the second's starts when the first node is
    # back), [2.4 s, 5.45 s), [8.0 s, 12.0 s). The gap of 1800 ms ends at
    # 2.0 s, 150 ms at 2.5 s, 6400 ms at 9.0 s; reads and indeterminate
    # writes are not acknowledged writes.
    assert demo.write_gaps(ops, restarts) == [1800.0, 150.0, 6400.0]
    assert demo.write_gaps(ops[:1], restarts) == [None, None, None]


def newest_release():
    """The release the demo rolls to: the binary's newest that an older
    release can be rolled to (asked of the binary, as the demo does)."""
    demo = load_demo_module()
    table, _ = demo.release_table(BATOND)
    return demo.roll_target(table)


def run_demo(build, out_dir):
    return subprocess.run([sys.executable, str(DEMO), "--build", str(build),
                           "--out", str(out_dir)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True,
                          timeout=DEMO_TIMEOUT_S)


def test_demo_fails_when_the_roll_fails(tmp_path):
    """A batonctl whose roll refuses: the demo still stops, checks and
    writes its page, and exits 1 saying the roll failed."""
    require_binary(BATOND)
    build = tmp_path / "build"
    build.mkdir()
    for name in ("batond", "baton-lincheck"):
        (build / name).symlink_to(build_dir() / name)
    fake = build / "batonctl"
    fake.write_text("#!/bin/sh\necho '[+0.0s] pre-check refused: made up'\n"
                    "exit 3\n")
    fake.chmod(0o755)
    p = run_demo(build, tmp_path / "demo")
    assert p.returncode == 1, (p.stdout + p.stderr)[-4000:]
    assert "roll: FAILED: batonctl roll --to" in p.stdout
    assert "exited 3 (a pre-check refused, nothing changed)" in p.stdout
    assert f"every node at {newest_release()}: NO" in p.stdout
    assert "roll: [+0.0s] pre-check refused: made up" in p.stdout
    assert Path(p.stdout.strip().splitlines()[-1]).is_file()


def test_demo_end_to_end(tmp_path):
    require_binary(BATOND)
    out_dir = tmp_path / "demo"
    p = run_demo(build_dir(), out_dir)
    said = p.stdout + p.stderr
    assert p.returncode == 0, said[-6000:]
    lines = p.stdout.strip().splitlines()
    page = Path(lines[-1])
    assert page.is_absolute() and page.suffix == ".html" and page.is_file(), \
        lines[-1]
    assert "\033[" not in p.stdout, "colours without a terminal"
    newest = newest_release()
    assert "linearizability (baton-lincheck): linearizable" in p.stdout
    assert f"every node at {newest}: yes" in p.stdout, said[-4000:]
    tl = json.loads((out_dir / "timeline.json").read_text())
    for node in tl["nodes"]:
        assert tl["releases"][str(node)][-1][1] == newest
        assert any(r["node"] == node and r["release"] == newest
                   for r in tl["restarts"])
    assert tl["summary"]["ok"] > 0
    dom = Dom(chromium_run(tmp_path, page, "--dump-dom").stdout)
    check_rendered(dom, tl)
