"""Fast failure detection with real processes (docs/core.md, "Fast failure
detection"; docs/batond.md, "Elections and failover").

A killed leader's kernel closes its sockets, so its followers learn of the
death at once and stand within a heartbeat interval: with a long election
timeout, a new leader takes writes well before that timeout could have
fired. A leader stopped with SIGSTOP closes nothing: only the election
timeout catches it, as before. Both tests distinguish the two paths by
what could have happened (a new leader before the timeout fired is the
fast path), not by how fast this machine is.
"""

import os
import signal
import time

import pytest
import redis

from conftest import Deadline, POLL_S, is_tryagain

# Long enough that the timeout cannot be what elects within half of it.
LONG_TIMEOUT_MS = 6000
HEARTBEAT_MS = 100


def write_until_ok(node, key, value, deadline_s):
    """SET through `node` (a follower forwards it to the leader) until it
    succeeds; the seconds it took. Fails the test after deadline_s."""
    start = time.monotonic()
    d = Deadline(deadline_s, f"a write through {node} to succeed")
    last = None
    while not d.expired():
        left = max(0.2, deadline_s - (time.monotonic() - start))
        try:
            if node.client(timeout=left).set(key, value):
                return time.monotonic() - start
        except (redis.ConnectionError, redis.TimeoutError) as e:
            last = e
        except redis.ResponseError as e:
            if not is_tryagain(e):
                raise
            last = e
        time.sleep(POLL_S / 5)
    d.fail(repr(last))


def test_kill9_of_the_leader_elects_before_the_timeout_could(cluster):
    old = cluster.start(3, election_timeout_ms=LONG_TIMEOUT_MS,
                        heartbeat_ms=HEARTBEAT_MS)
    old_term = int(old.info()["term"])
    survivor = next(m for m in cluster.alive() if m is not old)
    write_until_ok(survivor, "before", "1", 10.0)
    # Let a heartbeat round pass, so the followers' leases are fresh: only
    # the close can make them stand within the next LONG_TIMEOUT_MS.
    time.sleep(3 * HEARTBEAT_MS / 1000)
    old.kill9()
    half = LONG_TIMEOUT_MS / 2000
    gap = write_until_ok(survivor, "after", "2", half)
    new = cluster.leader(timeout=5.0)
    assert new is not old
    assert int(new.info()["term"]) > old_term
    assert gap < half, (
        f"the write took {gap:.3f} s: the election timeout "
        f"({LONG_TIMEOUT_MS} ms) fired, the close went unheeded")
    print(f"write gap after kill -9 of the leader: {gap * 1000:.0f} ms "
          f"(election timeout {LONG_TIMEOUT_MS} ms)")
    # The old leader comes back as a follower of the new term.
    old.restart()
    d = Deadline(15.0, f"{old} to follow the new leader")
    while not d.expired():
        info = old.info()
        if info["role"] == "follower" and int(info["term"]) > old_term:
            break
        time.sleep(POLL_S)
    else:
        d.fail(str(old.info()))
    assert new.client().get("after") == "2"


def test_sigstop_of_the_leader_is_caught_by_the_timeout(cluster):
    timeout_ms = 2000
    old = cluster.start(3, election_timeout_ms=timeout_ms,
                        heartbeat_ms=HEARTBEAT_MS)
    old_term = int(old.info()["term"])
    survivor = next(m for m in cluster.alive() if m is not old)
    write_until_ok(survivor, "before", "1", 10.0)
    stopped_at = time.monotonic()
    os.kill(old.proc.pid, signal.SIGSTOP)
    try:
        # No connection closes: the followers wait out their election
        # timeout (at least timeout_ms after the last heartbeat), then
        # elect. A busy machine only makes this later.
        new = cluster.leader(timeout=20.0, exclude=(old,))
        took = time.monotonic() - stopped_at
        assert int(new.info()["term"]) > old_term
        assert took >= (timeout_ms - 2 * HEARTBEAT_MS) / 1000, (
            f"a new leader {took:.3f} s after SIGSTOP, before any election "
            f"timeout could fire: something closed a connection")
        write_until_ok(survivor, "during", "2", 10.0)
    finally:
        os.kill(old.proc.pid, signal.SIGCONT)
    # Woken, the old leader learns the new term and follows.
    d = Deadline(15.0, f"{old} to step down after SIGCONT")
    while not d.expired():
        try:
            info = old.info()
            if info["role"] != "leader" and int(info["term"]) > old_term:
                break
        except (redis.ConnectionError, redis.TimeoutError):
            pass
        time.sleep(POLL_S)
    else:
        d.fail(str(old.info()))
    assert survivor.client().get("during") == "2"


def test_default_timings_hold_a_write_while_no_leader_is_known(cluster):
    # With batond's own timings (no timing flags: 1000 ms election
    # timeout), a write that finds no leader is held for two election
    # timeouts, in case one is elected, before -TRYAGAIN. The hold is a
    # lower bound, which a slow machine only lengthens.
    cluster.start(3, election_timeout_ms=None)
    survivor = cluster.followers()[0]
    for m in [m for m in cluster.alive() if m is not survivor]:
        m.kill9()
    d = Deadline(10, f"{survivor} to forget its leader")
    while int(survivor.info()["leader"]) != 0:
        if d.expired():
            d.fail(survivor.info())
        time.sleep(POLL_S)
    start = time.monotonic()
    with pytest.raises(redis.ResponseError) as e:
        survivor.client(timeout=30).set("held", "v")
    held = time.monotonic() - start
    assert is_tryagain(e.value), e.value
    assert held >= 1.5, f"answered {e.value} after only {held:.3f} s"
