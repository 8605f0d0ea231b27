"""A node whose wall clock runs an hour fast (docs/operations.md, "Clocks";
docs/kv.md, "Machine time").

One node of three runs under libfaketime (FAKETIME=+1h through LD_PRELOAD,
which shifts CLOCK_REALTIME, the clock batond reads for wall time;
FAKETIME_DONT_FAKE_MONOTONIC=1 leaves CLOCK_MONOTONIC, libuv's timers,
alone). The test checks, each against what the code before the clock check
did:

- the skew is measured from heartbeats and shown: a warning in the logs of
  the skewed node and of the leader, `clock_offset_ms` in INFO;
- one skewed follower does not depose a correct leader;
- made leader (batonctl transfer), the skewed node neither expires keys
  written with EX 100 (before: its first sweep stamped machine time an
  hour ahead and every key expired at once) nor keeps leading: a majority
  disagrees with its clock, it hands leadership over and does not stand
  again;
- the correct leader after it counts TTLs down: SET EX 2 expires in about
  2 s (before: machine time stayed an hour ahead, frozen, and the key
  lived on).
"""

import time
from pathlib import Path

import pytest

from conftest import BATOND, retry, wait_for, wait_log

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
SKEW_S = 3600
KEYS = 20


def faketime_wrapper(root):
    """An executable that runs batond with its wall clock SKEW_S ahead
    (exec: the PID the fixture started and will stop is batond's)."""
    if not LIBFAKETIME.exists():
        pytest.fail(f"{LIBFAKETIME} is missing: install the Debian package "
                    "faketime (scripts/setup)")
    path = Path(root) / "batond-fast-clock"
    path.write_text("#!/bin/sh\n"
                    f"export LD_PRELOAD={LIBFAKETIME}\n"
                    f"export FAKETIME=+{SKEW_S}s\n"
                    "export FAKETIME_DONT_FAKE_MONOTONIC=1\n"
                    # A sanitizer build wants its runtime first among
                    # the libraries; libfaketime only wraps clock calls,
                    # which the sanitizers leave alone.
                    "export ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}"
                    "verify_asan_link_order=0\"\n"
                    f"exec {BATOND} \"$@\"\n")
    path.chmod(0o755)
    return path


def replication(node):
    return node.client(timeout=2.0).info("replication")



def test_a_fast_clock_is_warned_about_and_does_not_cost_data(cluster):
    cluster.start(3)
    fast = cluster.node(3)
    # Node 3 comes back with a clock an hour fast, on its own data.
    fast.terminate()
    fast.binary = faketime_wrapper(cluster.root)
    fast.restart()
    leader = cluster.leader(exclude=(fast,))
    # The wrapper works: the node's own wall clock is ahead.
    t = fast.client().time()
    assert t[0] > time.time() + SKEW_S - 60, f"faketime not in effect: {t}"

    # Measured and shown on the skewed follower and on the leader.
    info = wait_for("node 3 to measure its offset",
                    lambda: (lambda i: i if i.get("clock_offset_known") == 1
                             else None)(replication(fast)))
    assert abs(info["clock_offset_ms"] - SKEW_S * 1000) < 5000, info
    assert info["max_clock_offset_ms"] == 500
    wait_log(fast, "clock offset: the wall clock of node", timeout=15.0)
    wait_log(leader, "clock offset: the wall clock of node 3", timeout=15.0)
    assert replication(fast)["clock_skew_warnings"] >= 1
    # One skewed follower deposes nobody.
    time.sleep(2.0)
    assert cluster.leader() is leader
    lead_info = replication(leader)
    assert lead_info["clock_barred"] == 0
    assert abs(lead_info["clock_offset_ms"]) < 1000, lead_info

    c = leader.client()
    for i in range(KEYS):
        assert c.set(f"ttl:{i}", "v", ex=100)

    # The skewed node leads for a moment: long enough, before the check,
    # for its sweeper to stamp machine time an hour ahead.
    term = int(leader.info()["term"])
    cluster.batonctl("transfer", fast.id, node=leader, check=False)
    wait_for("node 3 to lead once",
             lambda: int(fast.info()["term"]) > term)
    fast.client().set("through-the-fast-node", "x")
    wait_log(fast, "hands leadership over", timeout=15.0)
    new = wait_for("a leader other than node 3",
                   lambda: (lambda m: m if m is not None and m is not fast
                            else None)(cluster.find_leader()))
    assert replication(fast)["clock_barred"] == 1
    # It does not stand again while its clock stays off.
    time.sleep(3.0)
    assert cluster.find_leader() is not fast
    assert replication(fast)["clock_barred"] == 1

    # Nothing written with EX 100 expired early, on any node.
    c = new.client()
    for i in range(KEYS):
        ttl = retry(lambda: c.ttl(f"ttl:{i}"))
        assert 60 <= ttl <= 100, f"ttl:{i} has TTL {ttl}"
    for m in cluster.alive():
        m.client().execute_command("BATON.NODE")  # alive
    # A new TTL counts down on the correct leader: not frozen.
    start = time.monotonic()
    assert c.set("short", "v", ex=2)
    time.sleep(1.0)
    assert c.exists("short") == 1, "SET EX 2 expired within 1 s"
    wait_for("SET EX 2 to expire", lambda: c.exists("short") == 0,
             timeout=6.0)
    took = time.monotonic() - start
    assert 1.5 <= took <= 4.0, f"SET EX 2 expired after {took:.1f} s"
    assert c.get("through-the-fast-node") == "x"


def test_a_leader_after_a_fast_one_does_not_freeze_ttls(cluster):
    """With the check off on the fast node (--max-clock-offset 0: its
    wall clock is trusted, as every leader's was before the check), its
    leadership stamps machine time an hour ahead. The correct leader after
    it continues from there at the speed of real time: SET EX 2 expires in
    about 2 s (before: machine time stayed where the fast leader left it
    until the new leader's wall clock caught up, an hour later)."""
    cluster.start(3)
    fast = cluster.node(3)
    fast.terminate()
    fast.binary = faketime_wrapper(cluster.root)
    fast.args = fast.args + ["--max-clock-offset", "0"]
    fast.restart()
    leader = cluster.leader(exclude=(fast,))
    term = int(leader.info()["term"])
    cluster.batonctl("transfer", fast.id, node=leader)
    wait_for("node 3 to lead", lambda: cluster.find_leader() is fast)
    c = fast.client()
    assert c.set("stamped-by-the-fast-node", "x")
    # Machine time is now an hour ahead of the correct clocks.
    assert c.set("probe", "v", exat=int(time.time()) + 600)
    assert c.exists("probe") == 0, "machine time did not move ahead"
    # Its clock is off only for itself: nothing bars it.
    time.sleep(1.0)
    assert cluster.find_leader() is fast
    cluster.batonctl("transfer", leader.id, node=fast)
    wait_for("node 1 or 2 to lead again",
             lambda: (lambda m: m if m is not None and m is not fast
                      else None)(cluster.find_leader()))
    new = cluster.find_leader()
    assert int(new.info()["term"]) > term
    c = new.client()
    start = time.monotonic()
    assert c.set("short", "v", ex=2)
    time.sleep(1.0)
    assert c.exists("short") == 1, "SET EX 2 expired within 1 s"
    wait_for("SET EX 2 to expire", lambda: c.exists("short") == 0,
             timeout=6.0)
    took = time.monotonic() - start
    assert 1.5 <= took <= 4.0, f"SET EX 2 expired after {took:.1f} s"
    # TTL counts down too.
    assert c.set("ttl", "v", ex=100)
    time.sleep(1.5)
    assert 95 <= c.ttl("ttl") <= 99
