"""Machine version 2 of the key-value store through real batond processes:
expiry with Redis 7's replies (decided from leader-stamped machine time,
swept by the leader on every node alike), MULTI/EXEC/WATCH applied as one
log entry (redis-py's default pipeline() on the leader and on a
follower), and the gate: under machine version 1 (a 1.0.0 cluster) these
commands are refused with the needed and the effective version, and
nothing is appended.
"""

import time

import pytest
import redis

from conftest import (Cluster, Deadline, POLL_S, release_profiles,
                      release_table, retry)

VERSION_TIMEOUT_S = 30.0
EXPIRY_TIMEOUT_S = 10.0


def info_versions(node):
    """INFO's `# Versions` section as a dict of strings."""
    c = node.client(timeout=2.0)
    c.set_response_callback("INFO", lambda r, **kw: r)  # the raw text
    text = c.execute_command("INFO")
    out, inside = {}, False
    for line in text.splitlines():
        if line.startswith("#"):
            inside = line[1:].strip() == "Versions"
            continue
        if inside and ":" in line:
            k, v = line.split(":", 1)
            out[k] = v
    return out


def wait_machine_version(cluster, version):
    """Wait until every node's INFO says machine_version:<version>."""
    d = Deadline(VERSION_TIMEOUT_S, f"machine_version:{version} everywhere")
    last = None
    while not d.expired():
        try:
            last = {m.id: info_versions(m).get("machine_version")
                    for m in cluster.alive()}
            if all(v == str(version) for v in last.values()):
                return
        except (redis.ConnectionError, redis.TimeoutError,
                redis.ResponseError) as e:
            last = e
        time.sleep(POLL_S * 2)
    d.fail(f"last: {last!r}")


@pytest.fixture(scope="module")
def v2(tmp_path_factory):
    """A 3-node cluster of this binary's own release once its
    effective machine version is the release's machine_max: 2 or later
    (3 from release 2.0.0 on), each of which keeps version 2's commands."""
    c = Cluster(tmp_path_factory.mktemp("kv2"))
    try:
        c.start(3)
        machine_max = release_profiles()[release_table()[-1]][2]
        assert machine_max >= 2
        wait_machine_version(c, machine_max)
        yield c
    finally:
        c.stop_all()


def leader_and_follower(cluster):
    lead = cluster.leader()
    follower = next(m for m in cluster.alive() if m is not lead)
    return lead, follower


# ---- expiry ------------------------------------------------------------------


def test_expiry_commands_reply_as_redis_7(v2):
    lead, follower = leader_and_follower(v2)
    for node, p in ((lead, "l:"), (follower, "f:")):
        r = node.client()
        k = p + "k"
        assert retry(lambda: r.set(k, "v", ex=100)) is True
        assert r.ttl(k) in (99, 100)
        assert 99000 <= r.pttl(k) <= 100000
        assert r.ttl(p + "missing") == -2
        assert r.pttl(p + "missing") == -2
        assert r.set(p + "plain", "x") is True
        assert r.ttl(p + "plain") == -1
        # EXPIRE and its Redis 7 options.
        assert r.expire(p + "missing", 10) is False
        assert r.expire(p + "plain", 10, xx=True) is False  # no TTL yet
        assert r.expire(p + "plain", 50, nx=True) is True
        assert r.expire(p + "plain", 40, gt=True) is False
        assert r.expire(p + "plain", 60, gt=True) is True
        assert r.expire(p + "plain", 30, lt=True) is True
        assert r.ttl(p + "plain") in (29, 30)
        assert r.persist(p + "plain") is True
        assert r.persist(p + "plain") is False
        assert r.ttl(p + "plain") == -1
        # Absolute times.
        at = int(time.time()) + 1000
        assert r.expireat(p + "plain", at) is True
        assert r.execute_command("EXPIRETIME", p + "plain") == at
        assert r.execute_command("PEXPIRETIME", p + "plain") == at * 1000
        assert r.execute_command("EXPIRETIME", p + "missing") == -2
        assert r.pexpire(p + "plain", 5000) is True
        assert 4000 <= r.pttl(p + "plain") <= 5000
        # SET's options: GET, KEEPTTL, and a bad expire time.
        assert r.set(k, "w", get=True) == "v"
        assert r.ttl(k) == -1  # a plain SET drops the TTL
        assert r.set(k, "u", ex=100) is True
        assert r.set(k, "t", keepttl=True) is True
        assert r.ttl(k) in (99, 100) and r.get(k) == "t"
        with pytest.raises(redis.ResponseError,
                           match="invalid expire time in 'set' command"):
            r.set(k, "x", ex=0)
        # GETEX.
        assert r.execute_command("GETEX", k, "PERSIST") == "t"
        assert r.ttl(k) == -1
        assert r.execute_command("GETEX", k, "EX", "20") == "t"
        assert r.ttl(k) in (19, 20)
        # A TTL in the past deletes at once (Redis 7).
        assert r.expire(k, -1) is True
        assert r.get(k) is None and r.exists(k) == 0


def dbsize_stale(node):
    """DBSIZE on this node's own applied state (expired keys not yet
    swept still count, so it drops only as sweep entries apply)."""
    c = node.client()
    assert c.execute_command("BATON.STALE", "ON") == "OK"
    return c.dbsize()


def test_keys_expire_on_every_node(v2):
    lead = v2.leader()
    r = lead.client()
    n = 500
    keys = [f"exp:{i}" for i in range(n)]

    def load():  # a fresh pipeline per try: execute() empties it
        pipe = r.pipeline(transaction=False)
        for i, k in enumerate(keys):
            pipe.set(k, "v", px=600 + i)
        return pipe.execute()
    assert all(retry(load))
    # Present everywhere before they expire (linearizable reads).
    for m in v2.alive():
        assert m.client().exists(keys[0], keys[-1]) == 2
    # Then gone everywhere: deleted from every node's own map by the
    # leader's sweep entries (stale DBSIZE counts unswept keys too).
    d = Deadline(EXPIRY_TIMEOUT_S, "the keys to be swept on every node")
    while True:
        left = {m.id: dbsize_stale(m) for m in v2.alive()}
        if all(v == left[lead.id] for v in left.values()) and \
                lead.client().exists(*keys) == 0 and \
                all(not m.client().keys("exp:*") for m in v2.alive()):
            break
        if d.expired():
            d.fail(f"stale dbsize per node: {left}")
        time.sleep(0.1)
    for m in v2.alive():
        s = m.client()
        assert s.execute_command("BATON.STALE", "ON") == "OK"
        assert s.exists(*keys) == 0
        assert s.ttl(keys[-1]) == -2 and s.get(keys[0]) is None


def test_ttl_counts_down_while_idle(v2):
    """Machine time moves while nobody writes (the leader's sweeper
    stamps it), so TTL counts down as in Redis."""
    r = v2.leader().client()
    assert retry(lambda: r.set("idle", "v", ex=100)) is True
    time.sleep(2.2)
    # Without the sweeper's stamps TTL would stay at 100.
    assert 95 <= r.ttl("idle") <= 99
    assert 95000 <= r.pttl("idle") <= 99000


# ---- transactions ------------------------------------------------------------


@pytest.mark.parametrize("where", ["leader", "follower"])
def test_pipeline_transaction(v2, where):
    lead, follower = leader_and_follower(v2)
    node = lead if where == "leader" else follower
    r = node.client()
    k = f"tx:{where}"

    def transaction():
        # A fresh pipeline per try (execute() empties it), which sets
        # every key it changes first, so a retry gives the same replies.
        pipe = r.pipeline()  # transaction=True: MULTI ... EXEC
        pipe.set(k + ":n", 0)
        pipe.set(k, "a")
        pipe.append(k, "b")
        pipe.get(k)
        pipe.incr(k + ":n")
        pipe.incrby(k + ":n", 10)
        pipe.expire(k, 100)
        pipe.ttl(k)
        return pipe.execute()
    assert retry(transaction) == [True, True, 2, "ab", 1, 11, True, 100]
    # Applied on every node (linearizable reads).
    for m in v2.alive():
        assert m.client().mget(k, k + ":n") == ["ab", "11"]
    # An error inside the transaction is in EXEC's array; the rest ran.
    pipe = r.pipeline()
    pipe.set(k, "not a number")
    pipe.incr(k)
    pipe.get(k)
    res = retry(lambda: pipe.execute(raise_on_error=False))
    assert res[0] is True and res[2] == "not a number"
    assert isinstance(res[1], redis.ResponseError)


@pytest.mark.parametrize("where", ["leader", "follower"])
def test_watch(v2, where):
    lead, follower = leader_and_follower(v2)
    node = lead if where == "leader" else follower
    r, other = node.client(), lead.client()
    k = f"watched:{where}"
    retry(lambda: r.set(k, "1"))
    # Untouched: EXEC runs.
    with r.pipeline() as pipe:
        pipe.watch(k)
        v = int(pipe.get(k))
        pipe.multi()
        pipe.set(k, str(v + 1))
        assert pipe.execute() == [True]
    assert r.get(k) == "2"
    # Changed by another client between WATCH and EXEC: aborted, nothing
    # applied.
    with r.pipeline() as pipe:
        pipe.watch(k)
        assert pipe.get(k) == "2"
        assert other.set(k, "changed") is True
        pipe.multi()
        pipe.set(k, "mine")
        pipe.set(k + ":side", "x")
        with pytest.raises(redis.WatchError):
            pipe.execute()
    assert r.get(k) == "changed" and r.exists(k + ":side") == 0
    # A watched key expiring aborts too (Redis 7).
    retry(lambda: r.set(k, "e", px=300))
    with r.pipeline() as pipe:
        pipe.watch(k)
        time.sleep(0.6)
        pipe.multi()
        pipe.set(k + ":side", "y")
        with pytest.raises(redis.WatchError):
            pipe.execute()
    # UNWATCH forgets the keys.
    with r.pipeline() as pipe:
        pipe.watch(k)
        other.set(k, "again")
        pipe.unwatch()
        pipe.multi()
        pipe.set(k + ":side", "z")
        assert pipe.execute() == [True]
    assert r.get(k + ":side") == "z"


def test_multi_errors(v2):
    node = v2.leader()
    c = node.client()
    conn = c.connection_pool.get_connection("_")

    def call(*args):
        conn.send_command(*args)
        try:
            return conn.read_response()
        except redis.ResponseError as e:
            return e

    assert str(call("EXEC")) == "EXEC without MULTI"
    assert str(call("DISCARD")) == "DISCARD without MULTI"
    assert call("MULTI") == "OK"
    assert str(call("MULTI")) == "MULTI calls can not be nested"
    assert str(call("WATCH", "k")) == "WATCH inside MULTI is not allowed"
    assert call("SET", "me:1", "x") == "QUEUED"
    assert "wrong number of arguments" in str(call("SET", "me:1"))
    assert "unknown command" in str(call("NOSUCHCOMMAND"))
    assert str(call("EXEC")).startswith(
        "Transaction discarded because of previous errors")
    assert c.exists("me:1") == 0  # nothing ran
    # DISCARD drops the queue.
    assert call("MULTI") == "OK"
    assert call("SET", "me:2", "x") == "QUEUED"
    assert call("DISCARD") == "OK"
    assert c.exists("me:2") == 0
    # An empty transaction.
    assert call("MULTI") == "OK"
    assert call("EXEC") == []
    c.connection_pool.release(conn)


# ---- machine version 1: the gate ---------------------------------------------


def last_index(node):
    return int(node.info()["last_index"])


def quiet_last_index(node, quiet_s=1.0):
    """The leader's last index once it has not moved for quiet_s."""
    d = Deadline(VERSION_TIMEOUT_S, f"{node}'s log to be quiet")
    last, since = last_index(node), time.monotonic()
    while not d.expired():
        time.sleep(0.1)
        now = last_index(node)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return last
    d.fail()


def test_gated_under_machine_version_1(cluster):
    lead = cluster.start(3, extra=["--as-release", "1.0.0"])
    assert info_versions(lead).get("machine_version") == "1"
    follower = next(m for m in cluster.alive() if m is not lead)
    retry(lambda: lead.client().set("k", "v"))
    before = quiet_last_index(lead)
    for node in (lead, follower):
        r = node.client()
        want = ("command 'expire' needs machine version 2; the effective "
                "machine version is 1")
        with pytest.raises(redis.ResponseError) as e:
            r.expire("k", 10)
        assert str(e.value) == want
        for cmd in (["TTL", "k"], ["PERSIST", "k"], ["GETEX", "k"],
                    ["WATCH", "k"], ["EXEC"], ["MULTI"]):
            with pytest.raises(redis.ResponseError,
                               match="needs machine version 2; the "
                                     "effective machine version is 1"):
                r.execute_command(*cmd)
        # After a refused MULTI the transaction's commands are refused,
        # not run one by one, until DISCARD (or EXEC) ends it.
        with pytest.raises(redis.ResponseError, match="not queued"):
            r.set("k", "inside-refused-multi")
        assert r.execute_command("DISCARD") == "OK"
        with pytest.raises(redis.ResponseError,
                           match="needs machine version 2"):
            r.set("k", "w", ex=10)
        # redis-py's pipeline: MULTI is refused, so are the commands
        # after it, and nothing is applied one by one.
        pipe = r.pipeline()
        pipe.set("k", "from-pipeline")
        pipe.incr("n")
        with pytest.raises(redis.ResponseError):
            pipe.execute()
        # The connection is usable afterwards.
        assert r.get("k") == "v" and r.get("n") is None
    assert last_index(lead) == before, "a refused command was appended"


def test_transaction_forwarded_over_protocol_2(cluster):
    """1.1.0 speaks peer protocols 1-2: a follower forwards EXEC as one
    transaction in protocol 2 (clusters of 1.2.0 and newer use 3)."""
    cluster.start(3, extra=["--as-release", "1.1.0"])
    wait_machine_version(cluster, 2)
    _, follower = leader_and_follower(cluster)
    r = follower.client()

    def transaction():  # a fresh pipeline per try: execute() empties it
        pipe = r.pipeline()
        pipe.set("p2", "a", ex=100)
        pipe.append("p2", "b")
        pipe.ttl("p2")
        return pipe.execute()
    assert retry(transaction) == [True, 2, 100]
    with r.pipeline() as pipe:
        pipe.watch("p2")
        pipe.multi()
        pipe.get("p2")
        assert pipe.execute() == ["ab"]
