"""bench/roll (docs/benchmarks.md, "Rolling upgrades") still runs: one
quick roll of 3 nodes, its report parses, and no acknowledged write is
lost. Nothing here asserts a gap or a duration: those are the
benchmark's to measure, not a test's."""

import re
import subprocess
import sys

from conftest import BATONCTL, BATOND, REPO, build_dir, require_binary

BENCH_TIMEOUT_S = 90  # one roll takes a few seconds; a busy machine more


def test_one_quick_roll_reports_and_loses_nothing():
    require_binary(BATOND)
    require_binary(BATONCTL)
    r = subprocess.run([sys.executable, str(REPO / "bench" / "roll"),
                        "--build", str(build_dir()), "--quick", "--rolls",
                        "1", "--rolls-5", "0"],
                       capture_output=True, text=True,
                       timeout=BENCH_TIMEOUT_S)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert re.search(r"^roll  1 \(3 nodes\): ok;", r.stdout, re.M), out
    rows = dict(re.findall(r"^\| (all restarts|3 nodes) \| (\d+) \|",
                           r.stdout, re.M))
    assert rows == {"all restarts": "3", "3 nodes": "1"}, out
    writes = re.search(r"^writes: (\d+) acknowledged, lost (\d+), not "
                       r"acknowledged after \S+ s of retries (\d+);",
                       r.stdout, re.M)
    assert writes, out
    assert int(writes.group(1)) > 0, out
    assert writes.group(2) == "0", out  # no acknowledged write lost
    assert writes.group(3) == "0", out  # every write acknowledged in the end
    assert re.search(r"^goal \(.*\): (met|NOT met): p99 [\d.]+ ms",
                     r.stdout, re.M), out
