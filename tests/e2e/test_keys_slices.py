"""KEYS over a big map answered in slices between the event loop's other
work (issue 13, "no pause"; docs/kv.md, "KEYS").

On a 3-node cluster holding 300k keys, with snapshots due every few
hundred entries (so KEYS and snapshots take turns at the map's one view):

- KEYS * returns every key and KEYS with a pattern the right subset,
  while another client's writes keep being acknowledged: some write
  acknowledged before the first byte of KEYS's reply created a key that
  the reply does not hold, so it was applied after KEYS began and before
  it answered (the old one-call KEYS could not let that happen). No
  node's term moves (no election).
- On one connection, KEYS then SET of a new key, pipelined: the KEYS
  reply does not hold the key, and the SET is applied after it.

Nothing here asserts a duration.
"""

import select
import socket
import threading
import time

import pytest
import redis

from conftest import POLL_S, Deadline, mset_load

ELECTION_TIMEOUT_MS = 1000  # batond's default: a busy machine is no fault
HEARTBEAT_MS = 100
SNAPSHOT_ENTRIES = 300
KEYS_TOTAL = 300_000
MSET_KEYS = 1000
VALUE = "v" * 8


def key(n):
    return f"k:{n:06d}"


def load(leader):
    mset_load(leader.client(timeout=60), KEYS_TOTAL, key, VALUE,
              per_command=MSET_KEYS, in_flight=20)


class Writer:
    """SETs of new keys w:N, one at a time, each acknowledged before the
    next; acked holds the keys acknowledged, in order."""

    def __init__(self, leader):
        self.client = leader.client(timeout=10)
        self.acked = []
        self.stop = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        n = 0
        try:
            while not self.stop.is_set():
                k = f"w:{n:07d}"
                assert self.client.set(k, "x") is True
                self.acked.append(k)
                n += 1
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)


def read_reply(f):
    """One RESP reply (arrays of bulks, simple values) from a file."""
    line = f.readline()
    assert line, "connection closed"
    kind, rest = line[:1], line[1:-2]
    if kind == b"*":
        return [read_reply(f) for _ in range(int(rest))]
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if kind == b"-":
        raise AssertionError(f"error reply: {rest.decode()}")
    return rest


def keys_raw(node, pattern, writer):
    """KEYS over a raw socket: the reply, and the writer's acked keys as
    of the first byte of the reply."""
    with socket.create_connection(("127.0.0.1", node.client_port),
                                  timeout=60) as sock:
        p = pattern.encode()
        sock.sendall(b"*2\r\n$4\r\nKEYS\r\n$%d\r\n%s\r\n" % (len(p), p))
        # A short select: the reply's first byte is noticed at once.
        d = Deadline(60, "the first byte of KEYS's reply",
                     max_tries=60_000_000)
        while not select.select([sock], [], [], 0.001)[0]:
            if d.expired():
                d.fail()
        acked_then = list(writer.acked)
        f = sock.makefile("rb")
        return read_reply(f), acked_then


def terms(cluster):
    return {m.id: int(m.info()["term"]) for m in cluster.alive()}


def test_keys_in_slices_while_writes_go_on(cluster):
    leader = cluster.start(3, election_timeout_ms=ELECTION_TIMEOUT_MS,
                           heartbeat_ms=HEARTBEAT_MS,
                           snapshot_entries=SNAPSHOT_ENTRIES)
    load(leader)
    before = terms(cluster)
    interleaved = 0
    with Writer(leader) as w:
        d = Deadline(30, "the writer's first acknowledgements")
        while w.error is None and len(w.acked) < 10:
            if d.expired():
                d.fail(f"{len(w.acked)} writes acknowledged")
            time.sleep(POLL_S)
        for _ in range(3):
            reply, acked_then = keys_raw(leader, "*", w)
            got = {k.decode() for k in reply}
            assert len(got) == len(reply), "KEYS listed a key twice"
            loaded = {k for k in got if k.startswith("k:")}
            assert len(loaded) == KEYS_TOTAL
            news = {k for k in got if k.startswith("w:")}
            # Every write acknowledged before KEYS was sent is there...
            assert set(w.acked[:1]) <= news
            # ...and some acknowledged before its reply came after it.
            interleaved += len(set(acked_then) - news)
        reply, _ = keys_raw(leader, "k:0012*", w)
        assert sorted(k.decode() for k in reply) == \
            [key(n) for n in range(1200, 1300)]
        follower = cluster.followers()[0]
        reply, _ = keys_raw(follower, "k:29999?", w)
        assert sorted(k.decode() for k in reply) == \
            [key(n) for n in range(299990, 300000)]
    assert w.error is None, f"the writer failed: {w.error!r}"
    assert interleaved > 0, \
        "no write was applied while a KEYS was being answered"
    assert terms(cluster) == before, "a node started an election"
    for m in cluster.alive():
        failed = [line for line in m.log_text().splitlines()
                  if "snapshot at index" in line and "failed" in line]
        assert not failed, failed


def test_keys_then_set_on_one_connection(cluster):
    leader = cluster.start(1, election_timeout_ms=ELECTION_TIMEOUT_MS,
                           heartbeat_ms=HEARTBEAT_MS)
    c = leader.client(timeout=60)
    p = c.pipeline(transaction=False)
    for s in range(0, 40_000, MSET_KEYS):
        p.mset({key(n): VALUE for n in range(s, s + MSET_KEYS)})
    assert all(p.execute())
    for round_ in range(3):
        new = f"k:new{round_}"
        p = c.pipeline(transaction=False)
        p.keys("k:*")
        p.set(new, "after")
        p.get(new)
        listed, ok, value = p.execute()
        assert ok is True and value == "after"
        assert new not in listed
        assert len(listed) == 40_000 + round_
    assert c.dbsize() == 40_003
    with pytest.raises(redis.ResponseError, match="wrong number of arg"):
        c.execute_command("KEYS")
