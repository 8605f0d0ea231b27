"""batond --maxmemory (docs/operations.md, "Memory"): above the bound the
leader refuses writes that grow memory with Redis's -OOM error before
anything is appended, a write forwarded by a follower included; deletes,
reads and admin commands are served, and once deletes made room writes
are taken again. INFO, CONFIG GET and /metrics show the bound, and the
log warns once when usage crosses 80 % of it."""
import subprocess
import time

import pytest
import redis

from conftest import (BATOND, HOST, LEADER_TIMEOUT_S, POLL_S, Cluster,
                      Deadline, free_ports, require_binary, wait_log)
from test_metrics import scrape, start_with_metrics, value

OOM = "OOM command not allowed when used memory > 'maxmemory'."
MAXMEMORY = 2 * 1024 * 1024  # --maxmemory 2mb
VALUE = b"v" * 100_000  # each SET costs about twice this: log and map
FILL_WRITES_MAX = 40  # 2 MiB is reached well before this many
WARNING = "is above 80% of maxmemory"
BACK_UNDER = "is back under 75% of maxmemory"


@pytest.fixture
def small(tmp_path):
    """A 3-node cluster, each node with --maxmemory 2mb and --metrics;
    yields (cluster, {node id: metrics port})."""
    c, mports = start_with_metrics(tmp_path / "cluster",
                                   extra=["--maxmemory", "2mb"])
    try:
        yield c, mports
    finally:
        c.stop_all()


def raw(client):
    """A client of the same node whose replies are bytes."""
    kw = client.connection_pool.connection_kwargs
    return redis.Redis(host=kw["host"], port=kw["port"], socket_timeout=10)


REFUSED_IN_A_ROW = 4  # fill(): refusals 0.25 s apart that mean "full"


def fill(client, prefix="fill"):
    """SET 100 kB values until the node refuses them for good; returns the
    keys written. A refusal makes the node compact its log (a snapshot),
    which may free room: the write is tried again a little later, and the
    node is full once it refused REFUSED_IN_A_ROW times in a row. Fails if
    the writes are never refused."""
    keys, in_a_row = [], 0
    d = Deadline(30, "the node to refuse writes for good")
    while len(keys) < FILL_WRITES_MAX and not d.expired():
        key = f"{prefix}:{len(keys)}"
        try:
            client.set(key, VALUE)
            keys.append(key)
            in_a_row = 0
            continue
        except redis.ResponseError as e:
            assert str(e) == OOM, e
        in_a_row += 1
        if in_a_row == REFUSED_IN_A_ROW:
            return keys
        time.sleep(0.25)
    raise AssertionError(f"{len(keys)} writes of 100 kB taken under "
                         f"--maxmemory 2mb and never refused for good")


def commit_index(node):
    return int(node.info()["commit"])


def quiet_commit(node, settle_s=1.0):
    """The commit index once it held still for settle_s (bounded): the
    entries of a start (versions, addresses) are done."""
    d = Deadline(LEADER_TIMEOUT_S, f"{node}'s commit index to settle")
    last, since = commit_index(node), time.monotonic()
    while not d.expired():
        time.sleep(POLL_S)
        now = commit_index(node)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= settle_s:
            return now
    d.fail(str(last))


def test_writes_refused_over_the_bound_before_append(small):
    c, _ = small
    leader = c.leader()
    r = raw(leader.client())
    keys = fill(r)
    assert keys, "some writes fit under 2 MiB"
    before = quiet_commit(leader)
    # Every write that grows memory is refused, and nothing is appended:
    # the commit index does not move and the keys never appear.
    refused = [("SET", "new", "x"), ("APPEND", keys[0], "more"),
               ("INCR", "counter"), ("MSET", "a", "1", "b", "2"),
               ("SETNX", "n", "1"), ("HSET", "h", "f", "v")]
    for cmd in refused:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*cmd)
        assert str(e.value) == OOM, cmd
    # A transaction holding such a write is refused whole.
    p = r.pipeline(transaction=True)
    p.set("in-multi", "1")
    with pytest.raises(redis.ResponseError) as e:
        p.execute()
    assert OOM in str(e.value)
    time.sleep(0.5)
    assert commit_index(leader) == before
    for n in c.nodes.values():
        v = raw(n.client())
        assert v.exists("new", "counter", "a", "b", "n", "h",
                        "in-multi") == 0, n
        assert v.strlen(keys[0]) == len(VALUE), n
    # Reads, admin commands and writes that shrink memory are served.
    assert r.get(keys[0]) == VALUE
    assert r.dbsize() == len(keys)
    assert leader.info()["role"] == "leader"
    assert r.expire(keys[1], 1000) is True
    assert r.delete(*keys[:-3]) == len(keys) - 3
    # There is room again.
    assert r.set("after-del", "fits") is True
    assert r.get("after-del") == b"fits"
    assert commit_index(leader) > before


def test_a_forwarded_write_is_judged_at_the_leader(small):
    c, _ = small
    leader = c.leader()
    follower = c.followers()[0]
    keys = fill(raw(leader.client()))
    f = raw(follower.client())
    with pytest.raises(redis.ResponseError) as e:
        f.set("via-follower", "x")
    assert str(e.value) == OOM
    assert raw(leader.client()).exists("via-follower") == 0
    # A delete through the follower goes through, and makes room.
    assert f.delete(*keys) == len(keys)
    assert f.set("via-follower", "x") is True
    assert raw(leader.client()).get("via-follower") == b"x"


def test_info_config_get_and_metrics_show_the_bound(small):
    c, mports = small
    leader = c.leader()
    cl = leader.client()
    mem = cl.info("memory")
    assert mem["maxmemory"] == MAXMEMORY
    assert mem["maxmemory_human"] == "2.00M"
    assert mem["maxmemory_policy"] == "noeviction"
    used_before = mem["used_memory"]
    assert 0 < used_before < MAXMEMORY
    assert mem["used_memory_human"]
    assert cl.config_get("maxmemory") == {"maxmemory": str(MAXMEMORY)}
    assert cl.config_get("maxmemory*")["maxmemory-policy"] == "noeviction"
    f = scrape(mports[leader.id])
    assert value(f, "baton_memory_max_bytes") == MAXMEMORY
    assert value(f, "baton_memory_refused_writes_total") == 0
    fill(raw(cl))
    mem = cl.info("memory")
    # used_memory follows the data: the map and the log kept in memory.
    assert mem["used_memory"] > MAXMEMORY > used_before
    assert mem["used_memory_dataset"] > MAXMEMORY * 0.8
    refused = mem["oom_refused_writes"]
    assert refused >= 1
    f = scrape(mports[leader.id])
    assert value(f, "baton_memory_used_bytes") > MAXMEMORY
    assert value(f, "baton_memory_refused_writes_total") == refused
    # Every replica holds the data, so every replica's figure grew too.
    for n in c.followers():
        assert n.client().info("memory")["used_memory"] > MAXMEMORY * 0.8


def test_the_log_warns_once_per_crossing_of_80_percent(small):
    c, _ = small
    leader = c.leader()
    follower = c.followers()[0]
    r = raw(leader.client())
    keys = fill(r)
    wait_log(leader, WARNING)
    wait_log(follower, WARNING)  # a follower watches its own usage too
    # Above the bound for good (nothing left to compact): more refused
    # writes and housekeeping ticks (500 ms) warn no more.
    warned = leader.log_text().count(WARNING)
    for i in range(5):
        with pytest.raises(redis.ResponseError):
            r.set(f"more:{i}", VALUE)
    time.sleep(1.5)
    assert leader.log_text().count(WARNING) == warned
    assert leader.log_text().count(BACK_UNDER) == warned - 1
    # Under 75 % again, then over 80 % again: one more warning.
    r.delete(*keys)
    d = Deadline(10, "usage back under 75 %")
    while leader.log_text().count(BACK_UNDER) < warned and not d.expired():
        time.sleep(POLL_S)
    assert leader.log_text().count(BACK_UNDER) == warned
    fill(r, prefix="again")
    d = Deadline(10, "a second warning")
    while leader.log_text().count(WARNING) <= warned and not d.expired():
        time.sleep(POLL_S)
    assert leader.log_text().count(WARNING) > warned


def test_the_default_bound_is_a_share_of_memory_and_said_at_start(
        shared_cluster):
    leader = shared_cluster.leader()
    mem = leader.client().info("memory")
    assert mem["maxmemory"] > 0
    assert mem["maxmemory_policy"] == "noeviction"
    assert mem["used_memory"] < mem["maxmemory"]
    text = leader.log_text()
    assert "memory: bound " in text and "50% of the " in text, \
        text[-2000:]


def test_a_bad_maxmemory_is_refused_at_start(tmp_path):
    require_binary(BATOND)
    port, peer = free_ports(2)
    for bad, why in (("lots", "want a number of bytes"),
                     ("2tb", "want a number of bytes"),
                     ("1000", "below the smallest bound")):
        p = subprocess.run(
            [str(BATOND), "--id", "1", "--listen", f"{HOST}:{port}",
             "--peer-listen", f"{HOST}:{peer}", "--data",
             str(tmp_path / "d"), "--bootstrap",
             f"1={HOST}:{peer}/{HOST}:{port}", "--maxmemory", bad],
            capture_output=True, text=True, timeout=10)
        assert p.returncode == 2, (bad, p.stderr)
        assert f"--maxmemory {bad}: {why}" in p.stderr, p.stderr


def test_the_log_is_compacted_by_bytes_so_overwrites_fit(tmp_path):
    """The log is held in memory until a snapshot compacts it: under a
    bound, a snapshot is due once a quarter of the bound was applied, so
    overwriting one key again and again (the map stays small, the log
    grows by each write) never reaches the bound."""
    c, _ = start_with_metrics(
        tmp_path / "cluster",
        extra=["--maxmemory", "2mb", "--snapshot-trailing", "0"])
    try:
        r = raw(c.leader().client())
        for i in range(30):  # 3 MB of writes: above the bound
            r.set("one-key", VALUE[:-2] + b"%02d" % i)
        assert r.get("one-key").endswith(b"29")
        d = Deadline(10, "the log to be compacted")
        while True:
            mem = c.leader().client().info("memory")
            if mem["used_memory_log"] < MAXMEMORY // 2:
                break
            if d.expired():
                d.fail(str(mem))
            time.sleep(POLL_S)
        assert mem["used_memory"] < MAXMEMORY
    finally:
        c.stop_all()


def test_the_leader_takes_the_smallest_bound_of_the_members(tmp_path):
    """A member given less memory than the leader is not pushed past its
    own bound: each member tells the leader its --maxmemory in its info
    replies, and the leader refuses at the smallest."""
    c = Cluster(tmp_path / "cluster")
    c.start(n=3, extra=["--maxmemory", "8mb"])
    try:
        small = c.node(3)
        small.terminate()
        small.args = small.args + ["--maxmemory", "2mb"]  # the last wins
        small.start()
        # A new term, led by a node with 8mb: it asks every member.
        leader = c.leader()
        target = 1 if leader.id != 1 else 2
        leader.client().execute_command("BATON.TRANSFER", str(target))
        d = Deadline(LEADER_TIMEOUT_S, "the smallest bound to be in force")
        while True:
            leader = c.leader()
            mem = leader.client().info("memory")
            if leader.id != 3 and mem["maxmemory_in_force"] == MAXMEMORY:
                break
            if d.expired():
                d.fail(str(mem))
            time.sleep(POLL_S)
        assert mem["maxmemory"] == 8 * 1024 * 1024
        assert mem["maxmemory_in_force_of"] == 3
        assert small.client().info("memory")["maxmemory"] == MAXMEMORY
        keys = fill(raw(leader.client()))
        # Refused near 2 MiB, far below 8 MiB (80 writes of 100 kB).
        assert len(keys) <= 30, len(keys)
        wait_log(leader, "node 3's --maxmemory, the smallest")
    finally:
        c.stop_all()
