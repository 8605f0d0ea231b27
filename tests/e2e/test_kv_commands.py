"""Machine version 3's further string and key commands (docs/kv.md)
through a real 3-node cluster with redis-py, written through the leader
and through a follower: every reply is the one redis-server 7.0 gives for
the same commands (the expected values below were taken from it), and
every node reads back the same map."""

import time

import pytest
import redis

from conftest import POLL_S, Deadline, retry
from test_redis_compat import wait_newest_machine_version

WRONGTYPE = ("WRONGTYPE Operation against a key holding the wrong kind "
             "of value")


@pytest.fixture(scope="module")
def nodes(shared_cluster):
    wait_newest_machine_version(shared_cluster)
    leader = shared_cluster.leader()
    follower = next(m for m in shared_cluster.alive() if m is not leader)
    return shared_cluster, leader, follower


def run(client, *args):
    """The reply, or the error's text, of one command (retried while the
    cluster answers TRYAGAIN)."""
    try:
        return retry(lambda: client.execute_command(*args),
                     what=" ".join(map(str, args)))
    except redis.ResponseError as e:
        return "ERR: " + str(e)


def check(client, script):
    for args, want in script:
        got = run(client, *args)
        if callable(want):  # a time left, which a busy machine may shorten
            assert want(got), f"{args}: got {got!r}"
            continue
        if isinstance(want, bytes):  # the clients decode replies
            want = want.decode()
        assert got == want, f"{args}: got {got!r}, Redis gives {want!r}"


def about_100(ttl):
    """The expiry of SETEX 100 was carried (Redis: 100, baton rounds to
    the nearest second; a slow machine may have used a few)."""
    return 90 <= ttl <= 100


def script(p):
    """Commands on keys prefixed by p and Redis 7.0's replies."""
    a, b, c, h, f = (p + x for x in "abchf")
    return [
        (("SETNX", a, "1"), 1),
        (("SETNX", a, "2"), 0),
        (("GETSET", a, "v"), b"1"),
        (("GETSET", b, "x"), None),
        (("GETDEL", b), b"x"),
        (("GETDEL", b), None),
        (("SETEX", a, "100", "Hello"), True),
        (("SETRANGE", a, "1", "ipp"), 5),
        (("GET", a), b"Hippo"),
        (("TTL", a), about_100),
        (("GETRANGE", a, "-3", "-1"), b"ppo"),
        (("GETRANGE", a, "10", "20"), b""),
        (("RENAME", a, b), True),
        (("TTL", b), about_100),
        (("RENAMENX", b, a), 1),
        (("RENAME", b, c), "ERR: no such key"),
        (("COPY", a, c), 1),
        (("TTL", c), about_100),
        (("COPY", a, c), 0),
        (("COPY", a, a), "ERR: source and destination objects are the "
                         "same"),
        (("GETSET", c, "w"), b"Hippo"),
        (("TTL", c), -1),
        (("PSETEX", c, "0", "v"), "ERR: invalid expire time in 'psetex' "
                                  "command"),
        (("SETEX", c, "x", "v"), "ERR: value is not an integer or out of "
                                 "range"),
        (("SETRANGE", c, "-1", "v"), "ERR: offset is out of range"),
        (("MSETNX", b, "1", f, "2"), 1),
        (("MSETNX", b, "1", p + "g", "2"), 0),
        (("INCRBYFLOAT", f, "0.1"), 2.1),  # redis-py makes it a float
        (("INCRBYFLOAT", f, "5.0e3"), 5002.1),
        (("GET", f), b"5002.10000000000000009"),  # Redis's %.17Lf text
        (("INCRBYFLOAT", f, "x"), "ERR: value is not a valid float"),
        (("INCRBYFLOAT", f, "inf"), "ERR: increment would produce NaN or "
                                    "Infinity"),
        (("HSET", h, "k", "v"), 1),
        (("GETSET", h, "v"), "ERR: " + WRONGTYPE),
        (("GETDEL", h), "ERR: " + WRONGTYPE),
        (("GETRANGE", h, "0", "1"), "ERR: " + WRONGTYPE),
        (("SETRANGE", h, "0", "1"), "ERR: " + WRONGTYPE),
        (("INCRBYFLOAT", h, "1"), "ERR: " + WRONGTYPE),
        (("COPY", h, p + "h2"), 1),
        (("HGET", p + "h2", "k"), b"v"),
        (("UNLINK", a, b, c, p + "none"), 3),
    ]


def same_everywhere(cluster, keys):
    """Every node reads the same values (followers catch up)."""
    want = None
    d = Deadline(30.0, "the nodes to agree")
    while not d.expired():
        seen = [[run(m.client(), "HGETALL" if run(m.client(), "TYPE", k)
                     == "hash" else "GET", k) for k in keys]
                for m in cluster.alive()]
        want = seen[0]
        if all(s == want for s in seen):
            return
        time.sleep(POLL_S)
    d.fail(str(seen))


@pytest.mark.parametrize("through", ["leader", "follower"])
def test_replies_match_redis(nodes, through):
    cluster, leader, follower = nodes
    node = leader if through == "leader" else follower
    p = f"{through}:"
    check(node.client(), script(p))
    same_everywhere(cluster, [p + x for x in "abcfgh"] + [p + "h2"])


def test_flushdb_and_flushall(nodes):
    cluster, leader, follower = nodes
    check(follower.client(), [
        (("SET", "z1", "1"), True),
        (("FLUSHDB", "ASYNC"), True),
        (("DBSIZE",), 0),
        (("FLUSHDB", "now"), "ERR: syntax error"),
        (("FLUSHALL", "SYNC"), True),
    ])
    assert run(leader.client(), "DBSIZE") == 0


def test_options_errors_and_expiries(nodes):
    """COPY's DB 0 and REPLACE, the size limit of SETRANGE, arity and
    parse errors, and expiries that RENAME and COPY carry for a hash and
    PSETEX sets in ms: Redis 7.0's replies, through a follower."""
    cluster, leader, follower = nodes
    p = "opt:"
    a, b, h = p + "a", p + "b", p + "h"
    check(follower.client(), [
        (("SET", a, "1"), True),
        (("SET", b, "2"), True),
        (("COPY", a, b, "DB", "0"), 0),
        (("COPY", a, b, "DB", "0", "REPLACE"), 1),
        (("GET", b), b"1"),
        (("COPY", a, b, "DB", "1"), "ERR: DB index is out of range"),
        (("COPY", a, b, "DB", "x"), "ERR: value is not an integer or out "
                                    "of range"),
        (("COPY", a, b, "NOW"), "ERR: syntax error"),
        # offset + length past proto-max-bulk-len (512 MB)
        (("SETRANGE", a, str(512 * 1024 * 1024), "x"),
         "ERR: string exceeds maximum allowed size (proto-max-bulk-len)"),
        (("SETRANGE", p + "none", "5", ""), 0),
        (("EXISTS", p + "none"), 0),
        (("GETRANGE", a, "x", "1"), "ERR: value is not an integer or out "
                                    "of range"),
        (("MSETNX", a, "1", b), "ERR: wrong number of arguments for "
                                "'msetnx' command"),
        (("SETEX", a, "0", "v"), "ERR: invalid expire time in 'setex' "
                                 "command"),
        (("SET", a, "abc"), True),
        (("INCRBYFLOAT", a, "1"), "ERR: value is not a valid float"),
        (("SET", a, "-1.5"), True),
        (("INCRBYFLOAT", a, "1.5"), 0.0),
        (("GET", a), b"0"),  # "-0" is written "0"
        (("HSET", h, "f", "v"), 1),
        (("EXPIRE", h, "100"), 1),
        (("RENAME", h, p + "h2"), True),
        (("TTL", p + "h2"), about_100),
        (("COPY", p + "h2", p + "h3"), 1),
        (("TTL", p + "h3"), about_100),
        (("TYPE", p + "h3"), "hash"),
        (("SETEX", p + "h3", "100", "s"), True),  # replaces the hash
        (("TYPE", p + "h3"), "string"),
        (("PSETEX", b, "100000", "v"), True),
        (("PTTL", b), lambda ms: 90000 <= ms <= 100000),
        (("RENAMENX", a, a), 0),
        (("RENAME", a, a), True),
    ])
    same_everywhere(cluster, [a, b, p + "h2", p + "h3"])


def test_in_a_transaction_and_under_watch(nodes):
    """The new writes queue and run in MULTI/EXEC as Redis runs them, and a
    RENAME of a watched key aborts the watcher's EXEC (through a
    follower)."""
    cluster, leader, follower = nodes
    p = "txn:"
    c = follower.client()
    pipe = c.pipeline(transaction=True)
    pipe.setnx(p + "a", "1")
    pipe.execute_command("SETEX", p + "b", "100", "x")
    pipe.execute_command("SETRANGE", p + "b", "2", "yz")
    pipe.execute_command("GETRANGE", p + "b", "0", "-1")
    pipe.execute_command("INCRBYFLOAT", p + "a", "0.25")
    pipe.execute_command("RENAME", p + "b", p + "c")
    pipe.execute_command("COPY", p + "c", p + "d")
    pipe.execute_command("GETDEL", p + "a")
    got = retry(pipe.execute, what="MULTI/EXEC")
    assert got == [True, True, 4, "x\x00yz", 1.25, True, 1, "1.25"], got

    watcher = c.pipeline(transaction=True)
    watcher.watch(p + "d")
    run(leader.client(), "RENAME", p + "d", p + "e")
    watcher.multi()
    watcher.set(p + "d", "mine")
    with pytest.raises(redis.WatchError):
        watcher.execute()
    assert run(c, "EXISTS", p + "d") == 0
    assert run(c, "TTL", p + "e") > 0
