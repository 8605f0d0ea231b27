"""Replication, failover, catch-up, membership and shutdown with real nodes."""

import re
import signal
import time

import redis

from conftest import Deadline, POLL_S, retry


def set_via(node, key, value):
    """SET through `node`, retrying -TRYAGAIN; returns once acknowledged."""
    c = node.client()
    assert retry(lambda: c.set(key, value), what=f"SET {key} via {node}")


def test_bootstrap_elects_exactly_one_leader(cluster):
    leader = cluster.start(3)
    # Every node comes to name the same leader, and only it says it leads.
    d = Deadline(10, "all nodes to agree on the leader")
    while not d.expired():
        infos = {m.id: m.info() for m in cluster.alive()}
        named = {i["leader"] for i in infos.values()}
        leaders = [n for n, i in infos.items() if i["role"] == "leader"]
        if named == {str(leader.id)} and leaders == [leader.id]:
            break
        time.sleep(POLL_S)
    else:
        d.fail(f"BATON.NODE replies: {infos}")
    terms = {i["term"] for i in infos.values()}
    assert len(terms) == 1, f"nodes disagree on the term: {infos}"


def test_writes_through_every_node(cluster):
    cluster.start(3)
    # Followers forward writes to the leader.
    for m in cluster.alive():
        set_via(m, f"written-via-{m.id}", f"value-{m.id}")
        c = m.client()
        assert retry(lambda: c.incr("counter")) >= 1
    for m in cluster.alive():
        c = m.client()
        for w in cluster.alive():
            assert retry(lambda: c.get(f"written-via-{w.id}")) == \
                f"value-{w.id}", f"{m} reading the write made via {w}"
        assert retry(lambda: c.get("counter")) == "3"


def test_reads_see_the_latest_acknowledged_write_from_every_node(cluster):
    cluster.start(3)
    nodes = cluster.alive()
    clients = {m.id: m.client() for m in nodes}
    for r in range(30):
        writer = nodes[r % len(nodes)]
        value = f"round-{r}"
        assert retry(lambda: clients[writer.id].set("register", value))
        # Linearizable: once the write is acknowledged, every node's read
        # (with no retry but -TRYAGAIN) returns it, never an older value.
        for m in nodes:
            got = retry(lambda: clients[m.id].get("register"))
            assert got == value, (
                f"round {r}: {m} read {got!r} after {writer} acknowledged "
                f"{value!r}")


def test_kill9_leader_then_new_leader_and_old_node_catches_up(cluster):
    old = cluster.start(3)
    for i in range(20):
        set_via(old, f"before-{i}", str(i))
    old.kill9()
    new = cluster.leader(timeout=10)
    assert new is not old
    # Writes continue, through the new leader and the other follower.
    survivors = cluster.alive()
    for i in range(50):
        set_via(survivors[i % len(survivors)], f"after-{i}", str(i))
    old.restart()
    # The restarted node catches up by itself: read its local state.
    c = old.client()
    assert c.execute_command("BATON.STALE", "ON") == "OK"
    d = Deadline(15, f"{old} to catch up with the writes made while down")
    while not d.expired():
        if c.get("after-49") == "49":
            break
        time.sleep(POLL_S)
    else:
        d.fail(f"{old} applied {old.info()['applied']}")
    for i in range(50):
        assert c.get(f"after-{i}") == str(i)
    for i in range(20):
        assert c.get(f"before-{i}") == str(i)
    # And its linearizable reads agree.
    c2 = old.client()
    assert retry(lambda: c2.get("after-49")) == "49"
    # The old leader rejoined as a follower of the new one (or, at worst,
    # some node leads and writes keep working).
    set_via(old, "after-restart", "yes")
    assert retry(lambda: new.client().get("after-restart")) == "yes"


def test_lagging_node_catches_up_by_snapshot_after_compaction(cluster):
    leader = cluster.start(3, snapshot_entries=100,
                           extra=("--snapshot-trailing", "10"))
    lagging = [m for m in cluster.alive() if m is not leader][0]
    assert lagging.terminate() == 0
    keys = 600
    c = leader.client()
    for start in range(0, keys, 50):
        def batch():
            p = c.pipeline(transaction=False)
            for i in range(start, start + 50):
                p.set(f"snap-{i}", f"v{i}")
            return p.execute()
        assert all(retry(batch, what=f"keys {start}..{start + 49}"))
    # The leader has snapshotted and compacted past the lagging node's log.
    d = Deadline(10, f"{leader} to take a snapshot")
    while not d.expired():
        if int(leader.info()["snapshot_index"]) >= 100:
            break
        time.sleep(POLL_S)
    else:
        d.fail(str(leader.info()))
    log_before = len(lagging.log_text())
    lagging.restart()
    lc = lagging.client()
    assert lc.execute_command("BATON.STALE", "ON") == "OK"
    d = Deadline(20, f"{lagging} to catch up by snapshot")
    while not d.expired():
        if lc.get(f"snap-{keys - 1}") == f"v{keys - 1}":
            break
        time.sleep(POLL_S)
    else:
        d.fail(f"{lagging}: {lagging.info()}")
    values = lc.mget([f"snap-{i}" for i in range(keys)])
    missing = [i for i, v in enumerate(values) if v != f"v{i}"]
    assert not missing, f"{lagging} lacks keys {missing[:10]}..."
    info = lagging.info()
    assert int(info["snapshot_index"]) >= 100, info
    since_restart = lagging.log_text()[log_before:]
    assert re.search(r"installed a snapshot at index \d+", since_restart), (
        f"{lagging} caught up without installing a snapshot from the "
        f"leader (BATON.NODE: {info}); its log since the restart:\n"
        f"{since_restart[-3000:]}")


def member_ids(node, role=None):
    return {int(m["id"]) for m in node.members()
            if role is None or m["role"] == role}


def test_add_and_remove_a_member_live(cluster):
    leader = cluster.start(3)
    follower = [m for m in cluster.alive() if m is not leader][0]
    joiner = cluster.new_joiner()
    # Sent to a follower on purpose: batonctl follows -NOTLEADER.
    r = cluster.batonctl("add", joiner.id, joiner.peer_addr,
                         joiner.client_addr, node=follower)
    assert f"node {joiner.id}" in r.stdout
    assert joiner.id in member_ids(leader, "learner")
    # Promotion needs the learner caught up; allow a few attempts.
    d = Deadline(15, f"promotion of {joiner}", max_tries=30)
    while not d.expired():
        r = cluster.batonctl("promote", joiner.id, node=leader, check=False)
        if r.returncode == 0:
            break
        assert r.returncode == 1, r.stderr
        time.sleep(0.2)
    else:
        d.fail(r.stderr)
    assert member_ids(leader, "voter") == {1, 2, 3, joiner.id}
    # The new voter serves reads and writes.
    set_via(joiner, "from-the-joiner", "hello")
    assert retry(lambda: joiner.client().get("from-the-joiner")) == "hello"
    # Every node learns the new configuration.
    d = Deadline(10, "every node to list the new member")
    while not d.expired():
        if all(joiner.id in member_ids(m, "voter") for m in cluster.alive()):
            break
        time.sleep(POLL_S)
    else:
        d.fail({m.id: m.members() for m in cluster.alive()})
    # Remove it again.
    cluster.batonctl("remove", joiner.id, node=follower)
    leader = cluster.leader()
    assert member_ids(leader) == {1, 2, 3}
    d = Deadline(10, "every remaining node to drop the member")
    while not d.expired():
        if all(member_ids(m) == {1, 2, 3} for m in cluster.alive()
               if m is not joiner):
            break
        time.sleep(POLL_S)
    else:
        d.fail({m.id: m.members() for m in cluster.alive()})
    assert joiner.terminate() == 0
    set_via(follower, "after-removal", "ok")
    assert retry(lambda: leader.client().get("after-removal")) == "ok"


def test_sigterm_leader_hands_over_leadership_and_exits_0(cluster):
    # A long election timeout: a new leader sooner than that can only come
    # from the handover, not from an election after a timeout.
    election_timeout_ms = 3000
    old = cluster.start(3, election_timeout_ms=election_timeout_ms,
                        heartbeat_ms=100)
    set_via(old, "before-handover", "1")
    t0 = time.monotonic()
    old.proc.send_signal(signal.SIGTERM)
    others = [m for m in cluster.nodes.values() if m is not old]
    new = None
    d = Deadline(election_timeout_ms / 1000.0, "a new leader after SIGTERM")
    while not d.expired():
        new = cluster.find_leader(others)
        if new is not None:
            break
        time.sleep(0.02)
    elapsed = time.monotonic() - t0
    assert new is not None, (
        f"no new leader within the election timeout "
        f"({election_timeout_ms} ms) of SIGTERM: no handover")
    assert elapsed < 1.5, f"handover took {elapsed:.2f} s"
    code = old.proc.wait(timeout=10)
    old.exit_codes.append(code)
    assert code == 0, f"{old} exited {code} after SIGTERM"
    log = old.log_text()
    assert "SIGTERM" in log
    set_via(new, "after-handover", "2")
    assert retry(lambda: new.client().get("before-handover")) == "1"


def test_batonctl_transfer_moves_leadership(cluster):
    old = cluster.start(3)
    target = [m for m in cluster.alive() if m is not old][0]
    r = cluster.batonctl("transfer", target.id, node=target)
    assert f"node {target.id}" in r.stdout
    assert cluster.leader() is target
    r = cluster.batonctl("transfer", node=old)
    new = cluster.leader()
    assert new is not target, "transfer without an id kept the leader"
    set_via(old, "after-transfer", "x")


def test_batonctl_status_shows_a_down_member(cluster):
    leader = cluster.start(3)
    victim = [m for m in cluster.alive() if m is not leader][0]
    victim.kill9()
    r = cluster.batonctl("status", node=leader)
    rows = {int(line.split()[0]): line.split()
            for line in r.stdout.splitlines()
            if line.split() and line.split()[0].isdigit()}
    assert set(rows) == {1, 2, 3}, r.stdout
    assert rows[victim.id][2] == "down", r.stdout
    assert rows[leader.id][2] == "leader", r.stdout
    assert "1 down" in r.stdout


def test_password_is_required_by_clients_and_batonctl(cluster):
    cluster.start(3, password="open sesame")
    node = cluster.nodes[2]
    anonymous = node.client(password=None)
    try:
        anonymous.get("x")
        raise AssertionError("a client without AUTH was served")
    except redis.AuthenticationError:
        pass
    set_via(node, "secret", "kept")
    r = cluster.batonctl("status", node=node)
    assert "leader" in r.stdout
    r = cluster.batonctl("status", node=node, password="", check=False)
    assert r.returncode == 1 and "NOAUTH" in r.stderr, r
    r = cluster.batonctl("members", node=node, password="wrong", check=False)
    assert r.returncode == 1 and "AUTH" in r.stderr, r


def test_no_acknowledged_write_is_lost_when_the_leader_is_killed(cluster):
    """Writers keep going through every node while the leader is killed
    with -9; every write acknowledged with +OK must be readable after."""
    import threading

    old = cluster.start(3)
    acked = {}  # key -> value, acknowledged
    stop = threading.Event()
    errors = []

    def writer(node, wid):
        c = node.client(timeout=2.0)
        i = 0
        while not stop.is_set() and i < 100000:
            key, value = f"w{wid}-{i}", f"v{i}"
            try:
                if c.set(key, value):
                    acked[key] = value
            except (redis.ConnectionError, redis.TimeoutError):
                c = [m for m in cluster.alive()][wid % 2].client(timeout=2.0)
            except redis.ResponseError as e:
                if not str(e).startswith("TRYAGAIN"):
                    errors.append(repr(e))
                time.sleep(0.01)
            i += 1

    threads = [threading.Thread(target=writer, args=(m, wid), daemon=True)
               for wid, m in enumerate(cluster.alive())]
    for t in threads:
        t.start()
    time.sleep(0.5)
    before = len(acked)
    old.kill9()
    cluster.leader(timeout=10)
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors[:5]
    assert before > 0 and len(acked) > before, (before, len(acked))
    old.restart()
    for m in cluster.alive():
        c = m.client()
        keys = sorted(acked)
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            values = retry(lambda: c.mget(chunk))
            lost = [k for k, v in zip(chunk, values) if v != acked[k]]
            assert not lost, f"{m} lost acknowledged writes: {lost[:10]}"


def test_whole_cluster_restart_after_kill9_keeps_every_write(cluster):
    leader = cluster.start(3, snapshot_entries=100)
    c = leader.client()
    for start in range(0, 350, 50):
        def batch():
            p = c.pipeline(transaction=False)
            for i in range(start, start + 50):
                p.set(f"durable-{i}", f"v{i}")
            return p.execute()
        assert all(retry(batch))
    for m in cluster.alive():
        m.kill9()
    for m in cluster.nodes.values():
        m.restart()
    cluster.leader()
    for m in cluster.alive():
        mc = m.client()
        values = retry(lambda: mc.mget([f"durable-{i}" for i in range(350)]))
        lost = [i for i, v in enumerate(values) if v != f"v{i}"]
        assert not lost, f"{m} lost keys {lost[:10]} after a restart"
    set_via(cluster.nodes[1], "after-full-restart", "yes")


def test_paused_old_leader_serves_no_stale_read(cluster):
    """SIGSTOP the leader, let the others elect a new one and overwrite a
    key, SIGCONT the old leader and read from it at once: a linearizable
    read must see the new value (or be refused with -TRYAGAIN), never the
    old one."""
    old = cluster.start(3)
    set_via(old, "k", "old")
    reader = old.client(timeout=5.0)
    assert reader.get("k") == "old"  # connected before the pause
    old.proc.send_signal(signal.SIGSTOP)
    try:
        others = [m for m in cluster.alive() if m is not old]
        d = Deadline(10, "a new leader while the old one is paused")
        new = None
        while not d.expired():
            new = cluster.find_leader(others)
            if new is not None:
                break
            time.sleep(POLL_S)
        else:
            d.fail()
        set_via(new, "k", "new")
    finally:
        old.proc.send_signal(signal.SIGCONT)
    try:
        got = reader.get("k")
    except redis.ResponseError as e:
        assert str(e).startswith("TRYAGAIN"), e
        got = retry(lambda: reader.get("k"))
    assert got == "new", f"the resumed old leader served a stale read: {got!r}"
