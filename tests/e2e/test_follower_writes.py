"""Writes through a follower in bulk (docs/benchmarks.md, "Followers:
forwarded writes"): the follower sends the writes of a loop turn to the
leader together, the leader's replies come back together, and each finds
its write by request id.

- Deep pipelines on several connections of one follower at once: every
  write acknowledged, each connection's in order, every value where it
  should be on the leader.
- A write bigger than the transport's coalescing bound (256 KiB) amid
  small ones: it goes and comes back whole, the small ones around it in
  their places.
- With --password, the same through a follower (each forward carries the
  proof of the password, which each node makes once).
"""

import threading

from conftest import retry

CONNECTIONS = 4
ROUNDS = 1500  # per connection: a SET and an INCR each
BIG_BYTES = 1 << 20


def pipelined_rounds(node, tag, out):
    """SET tag:i and INCR tag:count in one pipeline of 2 * ROUNDS commands;
    out[tag] gets the replies."""
    c = node.client(timeout=30.0)
    p = c.pipeline(transaction=False)
    for i in range(ROUNDS):
        p.set(f"{tag}:{i}", f"{tag}-value-{i}")
        p.incr(f"{tag}:count")
    out[tag] = p.execute()


def test_deep_pipelines_on_a_follower_all_acknowledged_in_order(
        shared_cluster):
    follower = shared_cluster.followers()[0]
    leader = shared_cluster.leader()
    out = {}
    threads = [threading.Thread(target=pipelined_rounds,
                                args=(follower, f"deep{k}", out))
               for k in range(CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(out) == [f"deep{k}" for k in range(CONNECTIONS)], (
        f"connections that got every reply: {sorted(out)}")
    for tag, replies in out.items():
        assert len(replies) == 2 * ROUNDS
        sets, counts = replies[0::2], replies[1::2]
        assert sets == [True] * ROUNDS, (
            f"{tag}: {ROUNDS - sets.count(True)} SETs not acknowledged: "
            f"{[r for r in sets if r is not True][:3]}")
        assert counts == list(range(1, ROUNDS + 1)), (
            f"{tag}: INCR replies out of order: {counts[:10]}...")
    c = retry(lambda: leader.client(), what="a client of the leader")
    for tag in out:
        keys = [f"{tag}:{i}" for i in range(ROUNDS)]
        got = c.mget(keys)
        want = [f"{tag}-value-{i}" for i in range(ROUNDS)]
        assert got == want, (
            f"{tag}: {sum(g != w for g, w in zip(got, want))} values "
            f"differ on the leader")
        assert c.get(f"{tag}:count") == str(ROUNDS)


def test_a_write_bigger_than_the_coalescing_bound_via_a_follower(
        shared_cluster):
    follower = shared_cluster.followers()[0]
    leader = shared_cluster.leader()
    big = "".join(chr(ord("a") + i % 26) for i in range(BIG_BYTES))
    c = follower.client(timeout=30.0)
    p = c.pipeline(transaction=False)
    for i in range(200):
        p.incr("around-big")
    p.set("big", big)
    for i in range(200):
        p.incr("around-big")
    p.get("big")
    got = p.execute()
    assert got[:200] == list(range(1, 201))
    assert got[200] is True
    assert got[201:401] == list(range(201, 401))
    assert got[401] == big, "the big value read back through the follower"
    lc = leader.client(timeout=30.0)
    assert lc.get("big") == big


def test_pipelined_writes_via_a_follower_with_a_password(cluster):
    """With --password every forward carries the proof of it (made once
    per node), and the leader takes each."""
    cluster.start(3, password="open sesame")
    follower = cluster.followers()[0]
    out = {}
    pipelined_rounds(follower, "pw", out)
    replies = out["pw"]
    assert replies[0::2] == [True] * ROUNDS
    assert replies[1::2] == list(range(1, ROUNDS + 1))
    assert cluster.leader().client().get(f"pw:{ROUNDS - 1}") == (
        f"pw-value-{ROUNDS - 1}")
