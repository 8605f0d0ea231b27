"""A node given data of a future release stops applying and says so.

The cluster runs batond-test-hooks (batond plus BATON.TEST.PROPOSE, which
proposes raw payload bytes; never in a release build). An entry of a
payload kind no release of batond writes is committed: every node must stop
applying at its index, report the stall (BATON.NODE, INFO, batonctl status,
one ERROR line in its log), keep answering status, refuse reads and writes
at once with a clear -STALLED error, and keep every earlier write: after a
restart it reports the same stall and still holds the data.
"""

import json
import re
import time

import pytest
import redis

import conftest
from conftest import Deadline, POLL_S, retry

HOOKS = conftest.build_dir() / "batond-test-hooks"
KEYS = 60
FUTURE_PAYLOAD = b"Z\x01from a future release"


@pytest.fixture
def hooks_cluster(cluster, monkeypatch):
    conftest.require_binary(HOOKS)
    monkeypatch.setattr(conftest, "BATOND", HOOKS)
    return cluster


def wait_stalled(node, timeout=20):
    """Wait until `node` reports a stall; returns its BATON.NODE."""
    d = Deadline(timeout, f"{node} to report a stall")
    info = None
    while not d.expired():
        try:
            info = node.info()
            if info["stalled_index"] != "0":
                return info
        except (redis.ConnectionError, redis.TimeoutError):
            pass
        time.sleep(POLL_S)
    d.fail(f"last BATON.NODE: {info}")


def assert_refuses(node, index):
    """Reads and writes fail at once, naming the stall."""
    c = node.client(timeout=5.0)
    want = f"STALLED this node stopped applying at index {index}: "
    for cmd in (("GET", "key-1"), ("SET", "key-new", "x"),
                ("MGET", "key-1", "key-2"), ("INCR", "counter")):
        start = time.monotonic()
        with pytest.raises(redis.ResponseError) as e:
            c.execute_command(*cmd)
        took = time.monotonic() - start
        assert str(e.value).startswith(want), (node, cmd, str(e.value))
        assert "kind 0x5a" in str(e.value), str(e.value)
        assert took < 1.0, f"{node} took {took:.2f} s to refuse {cmd}"


def assert_data_kept(node):
    """Every write before the stall is in the node's state (stale reads
    serve what it applied)."""
    c = node.client()
    assert c.execute_command("BATON.STALE", "ON") == "OK"
    values = c.mget([f"key-{i}" for i in range(KEYS)])
    missing = [i for i, v in enumerate(values) if v != f"value-{i}"]
    assert not missing, f"{node} lost keys {missing[:10]}"


def stall_lines(node):
    return [line for line in node.log_text().splitlines()
            if " error " in line and "stopped applying at index" in line]


def test_future_entry_stalls_every_node_and_loses_nothing(hooks_cluster):
    cluster = hooks_cluster
    leader = cluster.start(3, snapshot_entries=20)
    c = leader.client()
    for i in range(KEYS):
        assert retry(lambda: c.set(f"key-{i}", f"value-{i}"),
                     what=f"SET key-{i}")
    # Everyone has applied the writes (and taken snapshots) before.
    applied = int(leader.info()["applied"])
    for m in cluster.alive():
        cluster.wait_applied(m, applied)

    # The entry of a future release: its proposer stalls too.
    with pytest.raises(redis.ResponseError) as e:
        c.execute_command("BATON.TEST.PROPOSE", FUTURE_PAYLOAD)
    assert str(e.value).startswith("STALLED"), str(e.value)

    infos = {m.id: wait_stalled(m) for m in cluster.alive()}
    index = {i["stalled_index"] for i in infos.values()}
    assert len(index) == 1, f"nodes stalled at different indexes: {infos}"
    index = int(index.pop())
    assert index > applied
    for m in cluster.alive():
        info = infos[m.id]
        why = info["stalled"]
        # Which data, which release it runs, what to do.
        assert why.startswith(f"stopped applying at index {index}: "), why
        assert "kind 0x5a" in why, why
        assert "this node runs release" in why, why
        assert "upgrade this node" in why, why
        # Nothing at or after the stall is applied; the log is kept.
        assert int(info["applied"]) == index - 1, info
        assert int(info["last_index"]) >= index, info
        # INFO says it too, and the node keeps answering.
        text = m.client().info("replication")
        assert text["stalled_index"] == index, text
        assert "kind 0x5a" in text["stalled_reason"], text
        assert_refuses(m, index)
        assert_data_kept(m)
        assert len(stall_lines(m)) == 1, m.log_tail()

    # batonctl status shows every stalled member and why.
    out = cluster.batonctl("status").stdout
    assert out.count("stalled: stopped applying at index") == 3, out
    assert "3 stalled" in out, out
    rows = json.loads(cluster.batonctl("status", "--json").stdout)
    assert sorted(r["stalled_index"] for r in rows) == [index] * 3, rows
    assert all(r["role"] == "stalled" for r in rows), rows
    r = cluster.batonctl("health", check=False)
    assert r.returncode == 1, r
    assert r.stdout.count(f"stalled at index {index}: ") == 3, r.stdout

    # After a restart the nodes meet the entry again, stall at the same
    # index, and still hold everything written before it.
    for m in cluster.alive():
        assert m.terminate() == 0
    log_sizes = {m.id: len(m.log_text()) for m in cluster.nodes.values()}
    for m in cluster.nodes.values():
        m.restart()
    for m in cluster.nodes.values():
        info = wait_stalled(m)
        assert int(info["stalled_index"]) == index, info
        assert int(info["applied"]) == index - 1, info
        assert "kind 0x5a" in info["stalled"], info
        assert_refuses(m, index)
        assert_data_kept(m)
        since = m.log_text()[log_sizes[m.id]:]
        assert len([line for line in since.splitlines()
                    if " error " in line and
                    re.search(r"stopped applying at index \d+", line)]) == 1
