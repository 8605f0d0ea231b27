"""Backup and restore (docs/backup.md): `batonctl snapshot save FILE`
through the leader, `batonctl snapshot status FILE`, and `batond --restore
FILE` founding a new cluster, with real processes."""
import os
import struct
import subprocess
import threading
import time

import pytest
import redis

from conftest import (BATOND, HOST, POLL_S, Cluster, Deadline, Node,
                      free_ports, retry, wait_log)

KEYS = 100_000
TTL_KEYS = 5_000
HASH_KEYS = 5_000
BATCH = 2_000


def string_key(i):
    return f"k:{i}"


def load(client):
    """KEYS keys: strings (some with a TTL) and hashes, pipelined."""
    n_strings = KEYS - HASH_KEYS
    for first in range(0, n_strings, BATCH):
        def batch(first=first):
            p = client.pipeline(transaction=False)
            last = min(n_strings, first + BATCH)
            p.mset({string_key(i): f"value-{i}-" + "x" * (i % 50)
                    for i in range(first, last)})
            for i in range(first, last):
                if i < TTL_KEYS:
                    p.pexpire(string_key(i), 3_600_000 + i)
            return p.execute()
        retry(batch, what=f"the load from {first}")
    for first in range(0, HASH_KEYS, BATCH):
        def hashes(first=first):
            p = client.pipeline(transaction=False)
            for i in range(first, min(HASH_KEYS, first + BATCH)):
                p.hset(f"h:{i}", mapping={"a": str(i), "b": f"bee{i}"})
            return p.execute()
        retry(hashes, what=f"the hashes from {first}")


def dump(client):
    """Every key's type, value and whether it has a TTL, read pipelined."""
    keys = sorted(client.keys("*"))
    out = {}
    for first in range(0, len(keys), BATCH):
        part = keys[first:first + BATCH]
        p = client.pipeline(transaction=False)
        for k in part:
            if k.startswith("h:"):
                p.hgetall(k)
            else:
                p.get(k)
            p.pttl(k)
        replies = p.execute()
        for i, k in enumerate(part):
            value, pttl = replies[2 * i], replies[2 * i + 1]
            out[k] = (value, pttl > 0)
    return out


def uuid_of(node):
    return node.client().info("identity").get("cluster_uuid")


def restore_cluster(root, backup, n=3):
    """A new cluster: node 1 restores `backup` as a one-member cluster,
    the others join it. Returns (cluster, node 1)."""
    c = Cluster(root)
    c.common_args = ["--election-timeout-ms", "500", "--heartbeat-ms", "50"]
    ports = free_ports(2)
    first = Node(c, 1, ports[0], ports[1])
    c.nodes[1] = first
    boot = f"1={first.peer_addr}/{first.client_addr}"
    first.start(["--bootstrap", boot, "--restore", str(backup)])
    wait_log(first, "restore: done", timeout=60)
    for _ in range(n - 1):
        c.add_and_promote(c.new_joiner())
    return c, first


def test_round_trip_100k_keys(tmp_path):
    src = Cluster(tmp_path / "src")
    new = None
    try:
        leader = src.start(3)
        load(leader.client(timeout=30))
        old_uuid = retry(lambda: uuid_of(leader))
        before = dump(leader.client(timeout=30))
        assert len(before) == KEYS
        backup = tmp_path / "baton.backup"
        # Asked of a follower: batonctl follows -NOTLEADER to the leader.
        follower = next(m for m in src.nodes.values() if m is not leader)
        r = src.batonctl("snapshot", "save", backup, node=follower)
        assert f"{KEYS} keys" in r.stdout, r.stdout
        assert "checksum" in r.stdout and "index" in r.stdout
        assert not os.path.exists(f"{backup}.tmp")
        r = src.batonctl("snapshot", "status", backup)
        assert f"keys: {KEYS}" in r.stdout, r.stdout
        assert "(verified)" in r.stdout
        # An existing FILE is kept unless --force.
        r = src.batonctl("snapshot", "save", backup, check=False)
        assert r.returncode == 1
        assert "exists: give --force" in r.stderr, r.stderr
        src.batonctl("snapshot", "save", backup, "--force")
        src.stop_all()

        new, first = restore_cluster(tmp_path / "new", backup)
        after = dump(first.client(timeout=30))
        assert after == before
        new_uuid = retry(lambda: uuid_of(first))
        assert new_uuid and new_uuid != old_uuid
        # Every member holds the map, and the new cluster takes writes.
        for m in new.nodes.values():
            assert retry(lambda m=m: m.client().dbsize()) == KEYS
        retry(lambda: first.client().set("after-restore", "yes"))
    finally:
        src.stop_all()
        if new is not None:
            new.stop_all()


def test_save_while_writing_restores(tmp_path):
    src = Cluster(tmp_path / "src")
    new = None
    stop = threading.Event()
    written = [0]

    def writer(client):
        i = 0
        while not stop.is_set():
            p = client.pipeline(transaction=False)
            for j in range(200):
                p.set(f"w:{i}:{j}", "v" * (j % 30))
            try:
                p.execute()
                written[0] += 200
            except redis.RedisError:
                pass
            i += 1

    try:
        leader = src.start(1)
        t = threading.Thread(target=writer, args=(leader.client(),))
        t.start()
        d = Deadline(10, "the writer to write")
        while written[0] < 2_000 and not d.expired():
            time.sleep(POLL_S)
        backup = tmp_path / "during.backup"
        r = src.batonctl("snapshot", "save", backup)
        saved_keys = int(r.stdout.split(" keys")[0].rsplit(" ", 1)[1])
        stop.set()
        t.join(timeout=10)
        assert saved_keys > 0
        src.stop_all()
        new, first = restore_cluster(tmp_path / "new", backup, n=1)
        assert first.client().dbsize() == saved_keys
    finally:
        stop.set()
        src.stop_all()
        if new is not None:
            new.stop_all()


def test_save_while_the_node_snapshots(tmp_path):
    # The node's own snapshots and a backup read the map through its one
    # view. With a snapshot every 300 entries written in 4 KiB slices, the
    # node's snapshot holds the view much of the time: a save must wait for
    # it (TRYAGAIN, retried by batonctl) and then succeed, and the node's
    # snapshots must wait for a save the same way, never fail.
    src = Cluster(tmp_path / "src")
    stop = threading.Event()

    def writer(client):
        i = 0
        while not stop.is_set() and i < 100_000:
            try:
                client.set(f"w:{i % 5_000}", "v" * 40)
            except redis.RedisError:
                pass
            i += 1

    def taken(client):
        return client.info("persistence")["snapshots_taken"]

    try:
        leader = src.start(1, snapshot_entries=300,
                           extra=["--snapshot-slice-bytes", "4096"])
        c = leader.client()
        retry(lambda: c.mset({f"k:{i}": "x" * 60 for i in range(20_000)}))
        t = threading.Thread(target=writer, args=(leader.client(),))
        t.start()
        d = Deadline(20, "the node's first snapshots")
        while taken(c) < 2 and not d.expired():
            time.sleep(POLL_S)
        before = taken(c)
        for n in range(4):
            backup = tmp_path / f"b{n}.backup"
            r = src.batonctl("snapshot", "save", backup)
            assert "saved" in r.stdout, r
        assert taken(c) > before >= 2, (before, taken(c))
        stop.set()
        t.join(timeout=30)
        failures = [line for line in leader.log_text().splitlines()
                    if "snapshot at index" in line and " failed: " in line]
        assert not failures, failures
    finally:
        stop.set()
        src.stop_all()


@pytest.fixture(scope="module")
def small_backup(tmp_path_factory):
    root = tmp_path_factory.mktemp("small")
    src = Cluster(root / "src")
    try:
        leader = src.start(1)
        c = leader.client()
        retry(lambda: c.mset({f"s:{i}": str(i) for i in range(100)}))
        path = root / "small.backup"
        src.batonctl("snapshot", "save", path)
        return path, src.batonctl
    finally:
        src.stop_all()


def run_restore(tmp_path, backup, data_dir=None):
    """batond --restore on its own; returns (exit code, its output, the
    data directory)."""
    cport, pport = free_ports(2)
    data = data_dir or tmp_path / "data"
    cmd = [str(BATOND), "--id", "1", "--listen", f"{HOST}:{cport}",
           "--peer-listen", f"{HOST}:{pport}", "--data", str(data),
           "--bootstrap", f"1={HOST}:{pport}/{HOST}:{cport}",
           "--restore", str(backup)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr, data


def damaged(tmp_path, small_backup, name, change):
    data = bytearray(small_backup[0].read_bytes())
    change(data)
    path = tmp_path / name
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("name,change,message", [
    ("corrupt", lambda b: b.__setitem__(len(b) // 2, b[len(b) // 2] ^ 1),
     "checksum mismatch"),
    ("truncated", lambda b: b.__delitem__(slice(len(b) - 100, None)),
     "truncated"),
    ("magic", lambda b: b.__setitem__(0, ord("X")), "not a baton backup"),
])
def test_bad_file_refused(tmp_path, small_backup, name, change, message):
    path = damaged(tmp_path, small_backup, name, change)
    code, out, data = run_restore(tmp_path, path)
    assert code == 3, out
    assert message in out and "nothing was written" in out, out
    assert not data.exists() or not any(data.iterdir())
    ctl = small_backup[1]
    r = ctl("snapshot", "status", path, check=False)
    assert r.returncode == 1 and message in r.stderr, r.stderr


def test_non_empty_data_dir_refused(tmp_path, small_backup):
    data = tmp_path / "used"
    # A data directory with state: a node that ran once.
    c = Cluster(tmp_path / "c")
    try:
        leader = c.start(1)
        used = leader.data_dir
    finally:
        c.stop_all()
    code, out, _ = run_restore(tmp_path, small_backup[0], data_dir=used)
    assert code == 3, out
    assert "holds state already" in out and "empty data directory" in out
    del data


def test_restore_needs_one_founder(tmp_path, small_backup):
    cport, pport = free_ports(2)
    cmd = [str(BATOND), "--id", "1", "--listen", f"{HOST}:{cport}",
           "--peer-listen", f"{HOST}:{pport}", "--data",
           str(tmp_path / "d"), "--bootstrap",
           f"1={HOST}:{pport}/{HOST}:{cport},2={HOST}:1/{HOST}:2",
           "--restore", str(small_backup[0])]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "one-member cluster" in r.stderr, r.stderr


def test_machine_version_this_release_cannot_run_refused(tmp_path,
                                                          small_backup):
    # The backup holds machine version 3; a node run as release 1.2.0
    # implements machine versions 1..2 only.
    cport, pport = free_ports(2)
    data = tmp_path / "d"
    cmd = [str(BATOND), "--id", "1", "--listen", f"{HOST}:{cport}",
           "--peer-listen", f"{HOST}:{pport}", "--data", str(data),
           "--bootstrap", f"1={HOST}:{pport}/{HOST}:{cport}",
           "--as-release", "1.2.0", "--restore", str(small_backup[0])]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 3, r.stderr
    assert "holds machine version 3" in r.stderr, r.stderr
    assert "nothing was written" in r.stderr
    assert not data.exists() or not any(data.iterdir())


def test_backup_commands_one_at_a_time(tmp_path):
    c = Cluster(tmp_path / "c")
    try:
        leader = c.start(1)
        cl = leader.client()
        retry(lambda: cl.mset({f"x:{i}": "v" for i in range(10)}))
        begun = dict(zip(*[iter(cl.execute_command("BATON.BACKUP",
                                                   "BEGIN"))] * 2))
        assert begun["keys"] == "10" and int(begun["index"]) > 0
        with pytest.raises(redis.ResponseError, match="TRYAGAIN"):
            cl.execute_command("BATON.BACKUP", "BEGIN")
        # Writes go on while the backup holds its view.
        cl.set("x:new", "later")
        raw = redis.Redis(host=HOST, port=leader.client_port,
                          socket_timeout=5)
        done, chunk = raw.execute_command("BATON.BACKUP", "NEXT",
                                          begun["id"])
        assert done == 1 and chunk.startswith(b"BKVS")
        # The map as of BEGIN: the key written after it is not in it.
        assert struct.unpack_from("<Q", chunk, 16)[0] == 10
        assert b"x:new" not in chunk
        with pytest.raises(redis.ResponseError, match="no backup"):
            cl.execute_command("BATON.BACKUP", "NEXT", begun["id"])
        again = dict(zip(*[iter(cl.execute_command("BATON.BACKUP",
                                                   "BEGIN"))] * 2))
        assert again["keys"] == "11"
        assert cl.execute_command("BATON.BACKUP", "END", again["id"])
        with pytest.raises(redis.ResponseError, match="usage"):
            cl.execute_command("BATON.BACKUP", "NEXT", "x")
    finally:
        c.stop_all()
