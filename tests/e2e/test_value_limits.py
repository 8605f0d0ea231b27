"""The value limit (--max-value-bytes; docs/kv.md "The value limit") on
every path a value takes: the write path refuses, before anything is
appended, a write that would leave a longer value (APPEND, SETRANGE, SET,
HSET, MSET, a transaction), with Redis's error; a value at the limit goes
through a backup and a restore; a restore of a backup holding a value above
the restoring node's limit fails loudly instead of hanging."""
import subprocess
import time

import pytest
import redis

from conftest import (BATOND, HOST, POLL_S, Cluster, Deadline, Node,
                      free_ports, make_secret_file, retry, wait_log)

MIB = 1 << 20
# batond's default: the longest bulk one SET carries.
DEFAULT_LIMIT = 16 * MIB - 64 * 1024
TOO_BIG = "string exceeds maximum allowed size (proto-max-bulk-len)"


def last_index(node):
    return int(node.info()["last_index"])


def settled_index(node):
    """The leader's last index once the entries a new cluster appends by
    itself (addresses, UUID, versions) are in: unchanged for a second."""
    d = Deadline(30, f"{node}'s log to settle")
    seen = last_index(node)
    while not d.expired():
        time.sleep(1.0)
        now = last_index(node)
        if now == seen:
            return now
        seen = now
    d.fail(f"still growing at {seen}")


def refused(fn):
    """The -ERR text of a command that must be refused."""
    with pytest.raises(redis.ResponseError) as e:
        fn()
    return str(e.value)


def test_appends_past_the_limit_refused_nothing_appended(tmp_path):
    c = Cluster(tmp_path)
    try:
        leader = c.start(3)
        follower = next(m for m in c.nodes.values() if m is not leader)
        cl = leader.client(timeout=30)
        chunk = "a" * (8 * MIB)
        assert cl.set("hv", chunk)
        # The report's 32 MiB value: SET 8 MiB, then APPENDs. The first
        # APPEND would make 16 MiB, above the 16 MiB - 64 KiB default.
        before = settled_index(leader)
        assert refused(lambda: cl.append("hv", chunk)) == TOO_BIG
        # Through a follower (forwarded to the leader) too.
        fl = follower.client(timeout=30)
        assert refused(lambda: fl.append("hv", chunk)) == TOO_BIG
        assert last_index(leader) == before, "a refused write was logged"
        assert cl.strlen("hv") == 8 * MIB
        # Writes in flight count: two pipelined APPENDs that each fit the
        # map as applied, but not one after the other.
        p = cl.pipeline(transaction=False)
        p.append("hv", "b" * (4 * MIB))
        p.append("hv", "c" * (4 * MIB))
        out = p.execute(raise_on_error=False)
        assert out[0] == 12 * MIB
        assert isinstance(out[1], redis.ResponseError), out[1]
        assert str(out[1]) == TOO_BIG
        assert cl.strlen("hv") == 12 * MIB
        # Up to the limit exactly is fine.
        assert cl.append("hv", "d" * (DEFAULT_LIMIT - 12 * MIB)) == \
            DEFAULT_LIMIT
        assert refused(lambda: cl.append("hv", "e")) == TOO_BIG
        for m in c.nodes.values():
            d = Deadline(30, f"{m} to apply the last APPEND")
            while m.client(timeout=30).strlen("hv") != DEFAULT_LIMIT:
                assert not d.expired(), "never applied"
                time.sleep(POLL_S)
    finally:
        c.stop_all()


def test_setrange_far_offset_and_other_writes_refused(tmp_path):
    c = Cluster(tmp_path)
    try:
        leader = c.start(1, extra=["--max-value-bytes", "65536"])
        cl = leader.client(timeout=30)
        cl.set("hv", "x")
        before = settled_index(leader)
        # 38 bytes on the wire that used to make a 500 MB value.
        assert refused(lambda: cl.setrange("hv", 500_000_000, "x")) == \
            TOO_BIG
        assert refused(lambda: cl.setrange("hv", 65536, "x")) == TOO_BIG
        big = "v" * 65537
        assert refused(lambda: cl.set("k", big)) == TOO_BIG
        assert refused(lambda: cl.setex("k", 100, big)) == TOO_BIG
        assert refused(lambda: cl.getset("k", big)) == TOO_BIG
        assert refused(lambda: cl.mset({"a": "1", "b": big})) == TOO_BIG
        assert refused(lambda: cl.hset("h", "f", big)) == TOO_BIG
        assert refused(lambda: cl.hset("h", big, "v")) == TOO_BIG
        with pytest.raises(redis.exceptions.ExecAbortError) as e:
            p = cl.pipeline(transaction=True)
            p.set("t", "v" * 40000)
            p.append("t", "w" * 40000)
            p.execute()
        assert TOO_BIG in str(e.value)
        assert last_index(leader) == before, "a refused write was logged"
        assert cl.exists("k", "a", "b", "h", "t") == 0
        # Within the limit all of them work.
        assert cl.setrange("hv", 65535, "x") == 65536
        assert cl.set("k", "v" * 65536)
        assert cl.incrbyfloat("n", 1.5) == 1.5
    finally:
        c.stop_all()


def save_big_value(tmp_path, size):
    """A one-node cluster allowing `size`, a value of exactly that size
    built with SET and APPENDs and a 24 MiB hash, saved with batonctl;
    returns the path and the value."""
    src = Cluster(tmp_path / "src")
    try:
        leader = src.start(1, extra=["--max-value-bytes", str(size)])
        cl = leader.client(timeout=60)
        piece = 8 * MIB
        cl.set("big", "s" * piece)
        have = piece
        while have < size:
            n = min(piece, size - have)
            have = cl.append("big", chr(ord("a") + have // piece % 26) * n)
        assert refused(lambda: cl.append("big", "z")) == TOO_BIG
        cl.set("small", "ok")
        # A hash bigger than a log entry, of fields within the limit.
        for i in range(24):
            cl.hset("bighash", f"f{i}", chr(ord("A") + i) * MIB)
        path = tmp_path / "big.backup"
        r = src.batonctl("snapshot", "save", path, timeout=120)
        assert "3 keys" in r.stdout, r.stdout
        return path, cl.get("big")
    finally:
        src.stop_all()


def test_value_at_the_limit_survives_save_and_restore(tmp_path):
    size = 40 * MIB  # above one log entry and one bulk
    path, value = save_big_value(tmp_path, size)
    new = Cluster(tmp_path / "new")
    try:
        new.common_args = ["--max-value-bytes", str(size)]
        cport, pport = free_ports(2)
        first = Node(new, 1, cport, pport)
        new.nodes[1] = first
        first.start(["--bootstrap", f"1={first.peer_addr}/"
                     f"{first.client_addr}", "--restore", str(path)])
        wait_log(first, "restore: done", timeout=120)
        cl = first.client(timeout=60)
        assert cl.strlen("big") == size
        assert cl.get("big") == value
        assert cl.get("small") == "ok"
        assert cl.hgetall("bighash") == {f"f{i}": chr(ord("A") + i) * MIB
                                         for i in range(24)}
        # A member added later gets it by the log or a snapshot.
        new.add_and_promote(new.new_joiner(), timeout=120)
        joined = new.nodes[2]
        assert retry(lambda: joined.client(timeout=60).strlen("big")) == \
            size
    finally:
        new.stop_all()


def test_restore_of_a_value_above_the_limit_fails_loudly(tmp_path):
    size = 20 * MIB
    path, _ = save_big_value(tmp_path, size)
    cport, pport = free_ports(2)
    data = tmp_path / "data"
    cmd = [str(BATOND), "--id", "1", "--listen", f"{HOST}:{cport}",
           "--peer-listen", f"{HOST}:{pport}", "--data", str(data),
           "--bootstrap", f"1={HOST}:{pport}/{HOST}:{cport}",
           "--restore", str(path)]  # the default limit: 16 MiB - 64 KiB
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode == 3, out
    assert "--max-value-bytes" in out and str(size) in out, out
    assert "nothing was written" in out, out


def migration_status(node):
    text = node.client(timeout=5.0).execute_command("BATON.MIGRATION",
                                                    "STATUS")
    return dict(line.partition(":")[::2] for line in text.splitlines()
                if ":" in line)


def test_relay_migration_exports_a_12_mib_value(tmp_path):
    # One 12 MiB value made every export chunk too big to send: the
    # export restarted every 1.5 s for ever and the import never caught
    # up. In pieces it goes through like any other key.
    relay_port = free_ports(1)[0]
    relay_addr = f"{HOST}:{relay_port}"
    relay_dir = tmp_path / "relay-data"
    relay_dir.mkdir()
    old = Cluster(tmp_path / "old")
    new = Cluster(tmp_path / "new")
    sealing = ["--migration-secret-file",
               str(make_secret_file(tmp_path / "migration-secret"))]
    with open(tmp_path / "relay.log", "ab") as log:
        relay = subprocess.Popen(
            [str(BATOND.parent / "baton-relay"), "--listen", relay_addr,
             "--data", str(relay_dir), "--activate"],
            stdout=log, stderr=log)
    try:
        leader = old.start(1, extra=["--as-release", "1.3.0", "--relay",
                                     relay_addr, "--relay-cluster", "old",
                                     "--migrate-to", "new"] + sealing)
        value = "".join(chr(ord("a") + i % 26) * 4096
                        for i in range(12 * 256))
        cl = leader.client(timeout=30)
        assert cl.set("big", value)
        cl.set("small", "ok")
        cport, pport = free_ports(2)
        b = Node(new, 11, cport, pport)
        new.nodes[b.id] = b
        b.start(["--relay", relay_addr, "--relay-cluster", "new",
                 "--migrate-from", "old", "--cluster-id", "new",
                 "--bootstrap", f"{b.id}={b.peer_addr}/{b.client_addr}"]
                + sealing)
        d = Deadline(60, "the import to catch up")
        status = {}
        while not d.expired():
            status = migration_status(b)
            if status.get("migration_ready") == "1":
                break
            time.sleep(0.2)
        else:
            d.fail(f"not ready: {status}\n{old.nodes[1].log_tail()}")
        # The new map as imported (before hand-off, which needs two new
        # voters, its reads go to the old cluster): a backup of it.
        path = tmp_path / "new.backup"
        r = new.batonctl("snapshot", "save", path, node=b)
        assert "2 keys" in r.stdout, r.stdout
        assert path.stat().st_size > len(value)
        assert value.encode() in path.read_bytes()
        # After the snapshot, each write goes as one ENTRY message; one
        # longer than a relay message (8 MiB) goes in parts.
        later = value[::-1]
        assert cl.set("big-later", later)
        applied = int(leader.info()["applied"])
        d = Deadline(60, "the 12 MiB write to be imported")
        while int(migration_status(b).get("import_index", 0)) < applied:
            if d.expired():
                d.fail(f"{migration_status(b)}\n{b.log_tail()}")
            time.sleep(0.2)
        path2 = tmp_path / "new-after.backup"
        r = new.batonctl("snapshot", "save", path2, node=b)
        assert "3 keys" in r.stdout, r.stdout
        assert later.encode() in path2.read_bytes()
    finally:
        old.stop_all()
        new.stop_all()
        relay.kill()
        relay.wait(timeout=10)
