"""Snapshots written in slices between the event loop's other work (issue
13, "no pause"; docs/node.md, "Snapshots off the event loop").

- With a small --snapshot-entries and the smallest --snapshot-slice-bytes,
  every node takes snapshots of many slices while a writer overwrites,
  creates and deletes keys on the leader: writes are applied between the
  slices (INFO snapshot_preimages > 0: keys were copied before a write
  changed them), no node starts an election, and after kill -9 of all three
  nodes every acknowledged write is there, recovered from a sliced snapshot
  plus the log.
- A follower far behind (killed while the leader wrote past a snapshot and
  compacted its log) gets the leader's snapshot, which the leader reads
  back from its file in chunks, and ends with the leader's data.

Nothing here asserts a duration: how long a slice or a snapshot takes is
for bench/snapshot_pause.py.
"""

import random
import re
import threading
import time

import redis

from conftest import POLL_S, Deadline, mset_load, retry

# batond's default timing rather than the tests' quicker one: the claim
# is that a snapshot costs no election, and on a busy 2-core machine a
# 500 ms timeout can run out for reasons that have nothing to do with it.
ELECTION_TIMEOUT_MS = 1000
HEARTBEAT_MS = 100

SNAPSHOT_ENTRIES = 20000
SLICE_BYTES = 4096  # the smallest allowed: a snapshot takes thousands
VALUE = "L" * 100
MSET_KEYS = 100
MSETS_IN_FLIGHT = 50
BATCH = 200  # commands per pipelined batch of the writer
INFO_POLL_S = 0.01


def loaded_key(n):
    return f"k:{n:06d}"


def start(cluster, extra=()):
    return cluster.start(3, election_timeout_ms=ELECTION_TIMEOUT_MS,
                         heartbeat_ms=HEARTBEAT_MS,
                         snapshot_entries=SNAPSHOT_ENTRIES,
                         extra=("--snapshot-slice-bytes", str(SLICE_BYTES))
                         + tuple(extra))


def load(leader, keys, model):
    """MSET keys 0..keys-1 (MSET_KEYS a command, pipelined): few entries,
    so no snapshot falls in the load."""
    mset_load(leader.client(timeout=30), keys, loaded_key, VALUE,
              per_command=MSET_KEYS, in_flight=MSETS_IN_FLIGHT)
    for n in range(keys):
        model[loaded_key(n)] = VALUE


def persistence(node):
    """INFO as a dict (its "# Persistence" fields among the others)."""
    return node.client(timeout=5).info()


class Writer:
    """Pipelined batches of single-key commands on the leader (one entry
    each): overwrites of loaded keys, new keys and DELs, in a fixed
    random order. `model` holds the last acknowledged value of every key
    (None: deleted). Stops after `commands` or `seconds`, whichever first;
    `acks` holds the monotonic time of each acknowledged batch."""

    def __init__(self, leader, loaded, model, commands, seconds, seed):
        self.leader, self.loaded, self.model = leader, loaded, model
        self.commands, self.seconds = commands, seconds
        self.rng = random.Random(seed)
        self.acks = []
        self.sent = 0
        self.error = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def ops(self, first):
        out = []
        for i in range(first, first + BATCH):
            kind = self.rng.randrange(4)
            if kind <= 1:
                out.append(("set", loaded_key(self.rng.randrange(
                    self.loaded)), f"w{i}-" + "x" * 90))
            elif kind == 2:
                out.append(("set", f"new:{i}", f"n{i}"))
            else:
                out.append(("del", loaded_key(self.rng.randrange(
                    self.loaded)), None))
        return out

    def run(self):
        try:
            c = self.leader.client(timeout=30)
            end = time.monotonic() + self.seconds
            while self.sent < self.commands and time.monotonic() < end:
                ops = self.ops(self.sent)
                p = c.pipeline(transaction=False)
                for op, key, value in ops:
                    if op == "set":
                        p.set(key, value)
                    else:
                        p.delete(key)
                # No retry: no election is expected, so a refused or lost
                # batch is a failure of the test, not something to ride out.
                replies = p.execute()
                self.acks.append(time.monotonic())
                for (op, key, value), reply in zip(ops, replies):
                    if op == "set":
                        assert reply is True, (key, reply)
                    else:
                        assert reply in (0, 1), (key, reply)
                    self.model[key] = value
                self.sent += len(ops)
        except Exception as e:  # reported by the test
            self.error = e

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.thread.join(timeout=self.seconds + 30)
        assert not self.thread.is_alive(), "the writer did not stop"


class InfoPoller:
    """INFO of every node every INFO_POLL_S: the terms seen, the largest
    snapshot_preimages, whether a snapshot was seen in progress, and the
    leader's observations (sent, answered, in_progress, snapshots_taken)
    to count the batches acknowledged while one snapshot was open."""

    def __init__(self, nodes, leader):
        self.nodes, self.leader = nodes, leader
        self.terms = {m.id: set() for m in nodes}
        self.preimages = {m.id: 0 for m in nodes}
        self.in_progress_seen = {m.id: 0 for m in nodes}
        self.leader_obs = []
        self.errors = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        clients = {m.id: m.client(timeout=5) for m in self.nodes}
        while not self.stop.is_set():
            for m in self.nodes:
                sent = time.monotonic()
                try:
                    info = clients[m.id].info()
                except (redis.ConnectionError, redis.TimeoutError) as e:
                    self.errors.append(f"node {m.id}: {e!r}")
                    continue
                answered = time.monotonic()
                self.terms[m.id].add(int(info["term"]))
                self.preimages[m.id] = max(self.preimages[m.id],
                                           int(info["snapshot_preimages"]))
                self.in_progress_seen[m.id] += int(
                    info["snapshot_in_progress"])
                if m is self.leader:
                    self.leader_obs.append(
                        (sent, answered, int(info["snapshot_in_progress"]),
                         int(info["snapshots_taken"])))
            self.stop.wait(INFO_POLL_S)

    def acks_during_a_snapshot(self, acks):
        """Batches acknowledged between two consecutive leader
        observations that both saw the same snapshot in progress (the
        same snapshots_taken): certainly while it was being written."""
        count = 0
        for (_, a_end, a_busy, a_taken), (b_sent, _, b_busy, b_taken) in zip(
                self.leader_obs, self.leader_obs[1:]):
            if a_busy and b_busy and a_taken == b_taken:
                count += sum(1 for t in acks if a_end < t < b_sent)
        return count

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=10)


def check_model(node, model):
    """Every key of the model has its last acknowledged value on node
    (deleted keys absent), and node holds no other key."""
    c = node.client(timeout=30)
    keys = sorted(model)
    wrong = []
    for first in range(0, len(keys), 1000):
        chunk = keys[first:first + 1000]
        got = retry(lambda: c.mget(chunk), what="an MGET of the model")
        wrong += [(k, model[k], v) for k, v in zip(chunk, got)
                  if v != model[k]]
    assert not wrong, (f"{len(wrong)} keys differ from the last "
                       f"acknowledged write on {node} (key, expected, got): "
                       f"{wrong[:5]}")
    present = sum(1 for v in model.values() if v is not None)
    assert retry(c.dbsize) == present


def recovered_snapshot_index(node, since):
    m = re.search(r"recovered term \d+, snapshot (\d+)",
                  node.log_text()[since:])
    assert m, f"{node} logged no recovery line since its restart"
    return int(m.group(1))


def test_sliced_snapshots_during_writes_no_election_nothing_lost(cluster):
    leader = start(cluster)
    nodes = list(cluster.alive())
    model = {}
    loaded = 100_000
    load(leader, loaded, model)

    before = {m.id: persistence(m) for m in nodes}
    terms_before = {m.id: int(m.info()["term"]) for m in nodes}
    # About three snapshots' worth of entries on every node.
    with InfoPoller(nodes, leader) as poller:
        with Writer(leader, loaded, model, commands=3 * SNAPSHOT_ENTRIES,
                    seconds=25, seed=13) as writer:
            pass
        # A follower's snapshot may still be in progress: let it end.
        d = Deadline(20, "every node to finish its snapshot")
        while not d.expired():
            infos = {m.id: persistence(m) for m in nodes}
            if not any(i["snapshot_in_progress"] for i in infos.values()):
                break
            time.sleep(POLL_S)
        else:
            d.fail(str({k: i["snapshot_in_progress"]
                        for k, i in infos.items()}))
    assert writer.error is None, f"the writer failed: {writer.error!r}"
    assert writer.sent > SNAPSHOT_ENTRIES, (
        f"the writer sent only {writer.sent} commands in its time, fewer "
        f"than --snapshot-entries {SNAPSHOT_ENTRIES}")

    for m in nodes:
        i = infos[m.id]
        assert i["snapshots_taken"] > before[m.id]["snapshots_taken"], (
            f"{m} took no snapshot during the writes: {i}")
        assert i["snapshot_last_slices"] > 1, (
            f"{m}'s last snapshot was written in one slice: {i}")
        assert i["snapshot_last_bytes"] > SLICE_BYTES, i
        assert i["snapshots_abandoned"] == 0, (
            f"{m} abandoned a snapshot with no reason to: {i}")
    # Applies ran between slices: keys not yet written out were copied
    # before a write changed them.
    assert max(poller.preimages.values()) > 0, (
        f"no node copied a key before a write during a snapshot "
        f"(largest snapshot_preimages seen: {poller.preimages}; in "
        f"progress seen: {poller.in_progress_seen})")
    # No election: every node stayed in the term it started the writes in.
    for m in nodes:
        assert poller.terms[m.id] <= {terms_before[m.id]}, (
            f"{m} went through terms {sorted(poller.terms[m.id])} during "
            f"the writes (before: {terms_before[m.id]})")
        assert int(m.info()["term"]) == terms_before[m.id]
    assert cluster.find_leader() is leader
    print(f"writer: {writer.sent} commands in {len(writer.acks)} batches; "
          f"batches acknowledged while one snapshot was in progress on the "
          f"leader: {poller.acks_during_a_snapshot(writer.acks)}; largest "
          f"snapshot_preimages: {poller.preimages}")

    # kill -9 everything, restart: every acknowledged write is there.
    offsets = {m.id: len(m.log_text()) for m in nodes}
    for m in nodes:
        m.kill9()
    for m in nodes:
        m.start(wait=False)
    for m in nodes:
        m.wait_ready()
    restored = {m.id: recovered_snapshot_index(m, offsets[m.id])
                for m in nodes}
    assert max(restored.values()) > 0, (
        f"no node recovered from a snapshot: {restored}")
    for m in nodes:
        assert int(m.info()["snapshot_index"]) >= restored[m.id]
    check_model(cluster.leader(), model)


def test_far_behind_follower_catches_up_from_the_snapshot_file(cluster):
    trailing = 1000
    leader = start(cluster, extra=("--snapshot-trailing", str(trailing)))
    model = {}
    loaded = 50_000
    load(leader, loaded, model)
    lagging = [m for m in cluster.alive() if m is not leader][0]
    cluster.wait_applied(lagging, int(leader.info()["commit"]))
    left_at = int(lagging.info()["last_index"])
    lagging.kill9()

    # Past a snapshot and beyond what the leader keeps behind it.
    with Writer(leader, loaded, model, commands=SNAPSHOT_ENTRIES + 4000,
                seconds=25, seed=31) as writer:
        pass
    assert writer.error is None, f"the writer failed: {writer.error!r}"
    d = Deadline(20, f"{leader} to snapshot past index {left_at + trailing}")
    while not d.expired():
        if int(leader.info()["snapshot_index"]) > left_at + trailing:
            break
        time.sleep(POLL_S)
    else:
        d.fail(str(leader.info()))
    leader_log_at = len(leader.log_text())

    since = len(lagging.log_text())
    lagging.restart()
    target = int(leader.info()["applied"])
    cluster.wait_applied(lagging, target, timeout=30)
    lagging_log = lagging.log_text()[since:]
    assert re.search(r"installed a snapshot at index \d+", lagging_log), (
        f"{lagging} caught up without installing the leader's snapshot; "
        f"its log since the restart:\n{lagging_log[-3000:]}")
    leader_log = leader.log_text()[leader_log_at:]
    assert "could not be read back" not in leader_log, leader_log[-3000:]

    # Its data is the leader's: every key, by SCAN on both.
    def all_keys(c):
        return set(c.scan_iter(count=1000))
    lc = leader.client(timeout=30)
    fc = lagging.client(timeout=30)
    assert fc.execute_command("BATON.STALE", "ON") == "OK"
    assert lc.execute_command("BATON.STALE", "ON") == "OK"
    leader_keys, follower_keys = all_keys(lc), all_keys(fc)
    assert follower_keys == leader_keys, (
        f"keys only on the leader: {sorted(leader_keys - follower_keys)[:5]}"
        f"; only on {lagging}: {sorted(follower_keys - leader_keys)[:5]}")
    assert fc.dbsize() == lc.dbsize() == len(leader_keys)
    keys = sorted(leader_keys)
    for first in range(0, len(keys), 1000):
        chunk = keys[first:first + 1000]
        assert fc.mget(chunk) == lc.mget(chunk), (
            f"values differ among keys {chunk[0]}..{chunk[-1]}")
    check_model(lagging, model)
