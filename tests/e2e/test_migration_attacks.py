"""A stranger at the relay port against a migration (docs/relay.md, "Threat
model"). The stranger registers at baton-relay under any cluster and node
id, with an address of its own where a fake server records every byte it
is sent, and speaks the migration's messages: those of the unsealed format
the attacks were first made with, and sealed-looking ones it cannot
authenticate (it holds no migration secret). Each attack must be refused
and cost nothing: acknowledged writes all readable, the old cluster still
taking writes, no key or value and no password sent to the stranger.

Then the operator's undo: `batonctl migrate abort` and `resume` on both
sides, and `batonctl migrate unfence` of a fence no authority followed
(refused once one did)."""

import os
import socket
import struct
import subprocess
import threading
import time

import pytest
import redis

import conftest as e2e
import relaywire as rw
from test_relay import Relay

HOST = e2e.HOST
PASSWORD = "migration-attacks-pw"
OLD_RELEASE = "1.3.0"
UNICAST, MULTICAST = 0, 1
HOOKS = e2e.build_dir() / "batond-test-hooks"

# Message types (src/server/migration.h).
EXPORT_REQ, BEGIN, CHUNK, END, ENTRY, HEAD, ACK, HANDOFF, FENCED, \
    AUTHORITY = range(1, 11)


def unsealed(mtype, session=0, applied=0, index=0, value=0, data=b""):
    """A message as the unsealed format 1 had it (what the attacks used)."""
    return struct.pack("<BQQQQI", mtype, session, applied, index, value,
                       len(data)) + data


def forged(mtype, frm, to, node, session=0, seq=1, index=0, value=0,
           data=b"x" * 16, to_node=0):
    """A sealed-looking message (format 2) with random ciphertext and tag:
    what anyone without the migration secret can make."""
    f, t = frm.encode(), to.encode()
    head = (bytes([0xBA, 2, mtype, len(f)]) + f + bytes([len(t)]) + t +
            struct.pack("<QQQQQQQ", node, to_node, session, seq, 0, index,
                        value) +
            os.urandom(12) + struct.pack("<I", len(data)))
    return head + os.urandom(len(data)) + os.urandom(16)


def session_of(payload):
    """The session in the clear header of a sealed message."""
    assert payload[:2] == bytes([0xBA, 2]), payload[:8]
    p = 3
    p += 1 + payload[p]  # sender cluster
    p += 1 + payload[p]  # receiver cluster
    node, _to_node, session = struct.unpack_from("<QQQ", payload, p)
    return node, session


class FakeServer:
    """Listens where the stranger says it is; records everything it gets and
    answers every read with an error. Bounded: a daemon thread, stopped by
    close()."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.addr = f"{HOST}:{self.sock.getsockname()[1]}"
        self.received = b""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        conns = []
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
                c.settimeout(0.05)
                conns.append(c)
            except OSError:
                pass
            for c in list(conns):
                try:
                    b = c.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    b = b""
                if not b:
                    conns.remove(c)
                    c.close()
                    continue
                self.received += b
                try:
                    c.sendall(b"-ERR unknown command\r\n")
                except OSError:
                    pass
        for c in conns:
            c.close()

    def close(self):
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


class Stranger:
    """A relay client under any identity, reading (and answering PINGs) in
    a thread; every DATA frame it is sent is kept."""

    def __init__(self, port, cluster, node, address):
        self.conn = rw.Conn(port)
        self.conn.send(rw.hello(cluster, node, 0x5EED + node,
                                address=address))
        w = self.conn.expect(rw.WELCOME)
        assert w["code"] == 0, w
        self.conn.timeout = 0.3
        self.seqs = {}  # per stream (docs/relay-protocol.md): from 1
        self.data = []
        self.views = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            try:
                f = self.conn.recv()
            except TimeoutError:
                continue
            except (OSError, ConnectionError, AssertionError):
                return
            if f["type"] == "DATA":
                self.data.append(f)
            elif f["type"] == "VIEW":
                self.views.append(f)

    def incarnation(self, cluster, node):
        for v in reversed(self.views):
            for n in v["nodes"]:
                if n["cluster"] == cluster and n["node"] == node:
                    return n["incarnation"]
        raise AssertionError(f"no {cluster}/{node} in {self.views[-1:]}")

    def send(self, kind, to, payload):
        seq = self.seqs[(kind, to)] = self.seqs.get((kind, to), 0) + 1
        self.conn.send(rw.data(kind, to, seq, seq, payload))

    def multicast(self, cluster, payload):
        self.send(MULTICAST, (cluster, 0, 0), payload)

    def unicast(self, cluster, node, payload):
        self.send(UNICAST, (cluster, node, self.incarnation(cluster, node)),
                  payload)

    def leave(self):
        self.stop.set()
        self.thread.join(timeout=5)
        self.conn.close()


def secret_file(root):
    path = root / "migration-secret"
    path.write_bytes(b"attack-tests-migration-secret-32")
    path.chmod(0o600)
    return str(path)


def status(node):
    text = node.client(timeout=2.0).execute_command("BATON.MIGRATION",
                                                    "STATUS")
    return dict(line.split(":", 1) for line in text.splitlines()
                if ":" in line)


def wait_status(node, pred, what, timeout=20.0):
    d = e2e.Deadline(timeout, what)
    last = None
    while not d.expired():
        try:
            last = status(node)
            if pred(last):
                return last
        except (redis.ConnectionError, redis.TimeoutError,
                redis.ResponseError) as e:
            last = repr(e)
        time.sleep(0.05)
    d.fail(f"{node}: {last}")


def dropped(st):
    return int(st["migration_bad_msgs"]) + int(st["migration_forged"]) + \
        int(st["migration_refused"])


def batonctl(node, *args):
    return subprocess.run([str(e2e.BATONCTL), "-h", HOST, "-p",
                           str(node.client_port), "-a", PASSWORD, *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def relay(tmp_path):
    if not (e2e.build_dir() / "baton-relay").exists():
        pytest.skip("baton-relay not built")
    r = Relay(tmp_path, e2e.free_ports(1)[0], "--activate").start()
    yield r
    r.kill()


def old_cluster(tmp_path, relay, n=3):
    old = e2e.Cluster(tmp_path / "old")
    extra = ["--as-release", OLD_RELEASE, "--relay", f"{HOST}:{relay.port}",
             "--relay-cluster", "old", "--migrate-to", "new",
             "--migration-secret-file", secret_file(tmp_path)]
    old.start(n, password=PASSWORD, extra=extra)
    for node in old.nodes.values():
        wait_status(node, lambda st: st.get("relay_active") == "1",
                    "the old node active at the relay")
    return old


def new_node(tmp_path, relay):
    new = e2e.Cluster(tmp_path / "new")
    new.password = PASSWORD
    new.common_args = ["--password", PASSWORD, "--election-timeout-ms",
                       "300", "--heartbeat-ms", "50"]
    cport, pport = e2e.free_ports(2)
    b = e2e.Node(new, 11, cport, pport)
    new.nodes[b.id] = b
    b.start(["--relay", f"{HOST}:{relay.port}", "--relay-cluster", "new",
             "--migrate-from", "old", "--cluster-id", "new",
             "--migration-secret-file", secret_file(tmp_path), "--bootstrap",
             f"{b.id}={b.peer_addr}/{b.client_addr}"])
    return new, b


def set_all(nodes, prefix, n, acked):
    """n acknowledged SETs spread over the nodes (each retried on TRYAGAIN
    for a bounded time); every one must be acknowledged."""
    for i in range(n):
        node = nodes[i % len(nodes)]
        key, value = f"{prefix}{i}", f"value-{prefix}{i}"
        e2e.retry(lambda: node.client().set(key, value),
                  what=f"SET {key} on {node}")
        acked[key] = value


def assert_all_readable(node, acked):
    c = node.client()
    for key, value in acked.items():
        got = e2e.retry(lambda: c.get(key), what=f"GET {key}")
        assert got == value, (key, got, value)


def tear_down(strangers, fake, clusters):
    """A test's end: the strangers (None: never joined) leave the relay,
    the fake old server closes, the clusters started (None: not started)
    stop."""
    for s in strangers:
        if s is not None:
            s.leave()
    fake.close()
    for c in clusters:
        if c is not None:
            c.stop_all()


def test_a_stranger_cannot_take_write_authority(tmp_path, relay):
    """Attack 1: a stranger registered as a node of the cluster the old one
    migrates to (or of any other) multicasts AUTHORITY naming itself. No old
    node believes it, none sends a client's command (or the password) to the
    stranger's address, and no write is lost or refused, before or after the
    stranger leaves; a node with --relay alone ignores every message."""
    fake = FakeServer()
    old = lone = None
    strangers = []
    try:
        old = old_cluster(tmp_path, relay)
        lone = e2e.Cluster(tmp_path / "lone")
        lone.start(1, password=PASSWORD,
                   extra=["--relay", f"{HOST}:{relay.port}",
                          "--relay-cluster", "lone"])
        lone_node = lone.nodes[1]
        wait_status(lone_node, lambda st: st.get("relay_active") == "1",
                    "the lone node active at the relay")
        nodes = list(old.nodes.values())
        acked = {}
        set_all(nodes, "before-", 12, acked)
        for cluster in ("new", "evil"):
            strangers.append(Stranger(relay.port, cluster, 9, fake.addr))
        time.sleep(0.3)  # the view with the strangers reaches every node
        for round_ in range(5):
            for s, cluster in zip(strangers, ("new", "evil")):
                for target in ("old", "lone"):
                    s.multicast(target, unsealed(AUTHORITY, index=1, value=9,
                                                 data=cluster.encode()))
                    s.multicast(target, forged(AUTHORITY, cluster, target, 9,
                                               seq=round_ + 1, index=1,
                                               value=9, data=b"new"))
            set_all(nodes, f"during{round_}-", 4, acked)
            time.sleep(0.1)
        for node in nodes:
            st = wait_status(node, lambda st: dropped(st) >= 10,
                             "the forged AUTHORITY messages dropped")
            assert st["migration_phase"] in ("idle", "exporting"), st
            assert st["migration_msgs_in"] == "0", st
            assert "holds write authority" not in node.log_text()
        assert int(status(nodes[0])["migration_forged"]) >= 5
        e2e.wait_log(lone_node, "this node takes part in no migration")
        assert "holds write authority" not in lone_node.log_text()
        for s in strangers:
            s.leave()
        strangers = []
        set_all(nodes, "after-", 12, acked)
        assert_all_readable(nodes[0], acked)
        assert_all_readable(nodes[2], acked)
        assert fake.received == b"", fake.received[:200]
    finally:
        tear_down(strangers, fake, (old, lone))


def test_a_stranger_gets_no_export_and_cannot_fence(tmp_path, relay):
    """Attack 2: a stranger registered as a node of the new cluster asks for
    the export and then for hand-off. It receives nothing (no key, no value,
    not even a sealed message), the old cluster does not fence, and it keeps
    taking writes across a restart."""
    fake = FakeServer()
    old = None
    s = None
    try:
        old = old_cluster(tmp_path, relay)
        nodes = list(old.nodes.values())
        acked = {}
        set_all(nodes, "secret-key-", 30, acked)
        s = Stranger(relay.port, "new", 9, fake.addr)
        time.sleep(0.3)
        for i in range(6):
            session = 0xABCD00 + i
            s.multicast("old", unsealed(EXPORT_REQ, session=session,
                                        data=b"new"))
            s.multicast("old", forged(EXPORT_REQ, "new", "old", 9,
                                      session=session, seq=2 * i + 1,
                                      data=b"new"))
            time.sleep(0.2)
            for node in nodes:
                s.unicast("old", node.id, unsealed(HANDOFF, session=session,
                                                   index=10 ** 6))
                s.unicast("old", node.id, forged(HANDOFF, "new", "old", 9,
                                                 session=session,
                                                 seq=2 * i + 2,
                                                 index=10 ** 6))
        time.sleep(1.0)
        assert s.data == [], [d["payload"][:40] for d in s.data]
        for node in nodes:
            st = status(node)
            assert st["fenced"] == "0" and st["export_session"] == "0", st
            assert st["migration_phase"] == "idle", st
            assert dropped(st) > 0, st
        set_all(nodes, "after-", 9, acked)
        # The fence would have been replicated state: a restart shows none.
        leader = old.leader()
        leader.kill9()
        leader.restart()
        set_all(nodes, "restarted-", 9, acked)
        assert_all_readable(nodes[1], acked)
        assert fake.received == b""
    finally:
        tear_down([s], fake, [old])


def test_a_stranger_cannot_feed_the_import_nor_get_the_password(tmp_path,
                                                                relay):
    """Attack 3: a stranger registered as a node of the old cluster learns
    the session from the new leader's EXPORT_REQ (its header is in clear)
    and answers with a forged snapshot and FENCED. The new cluster imports
    none of it and takes no authority; and when it proxies a client's write
    to the "old cluster", the stranger's address is asked for a proof of
    the migration secret first, fails it, and never sees the password."""
    fake = FakeServer()
    new = None
    s = None
    try:
        s = Stranger(relay.port, "old", 9, fake.addr)
        new, b = new_node(tmp_path, relay)
        d = e2e.Deadline(20, "the new leader's EXPORT_REQ at the stranger")
        while not d.expired() and not s.data:
            time.sleep(0.05)
        assert s.data, "no EXPORT_REQ came"
        req = s.data[0]["payload"]
        assert req[0] == 0xBA, "the EXPORT_REQ is not sealed"
        node, session = session_of(req)
        assert node == b.id
        record = (bytes([1]) + struct.pack("<I", 6) + b"forged" +
                  struct.pack("<I", 5) + b"value" + struct.pack("<Q", 0))
        for seq, (mtype, index, value, data) in enumerate([
                (BEGIN, 5, 0, b"\0" * 16), (CHUNK, 5, 0, record),
                (END, 5, 1, b""), (FENCED, 5, 0, b"")], start=1):
            s.unicast("new", b.id, unsealed(mtype, session=session,
                                            index=index, value=value,
                                            data=data))
            s.unicast("new", b.id, forged(mtype, "old", "new", 9,
                                          session=session, seq=seq,
                                          index=index, value=value,
                                          data=data or b"z"))
        time.sleep(1.0)
        st = status(b)
        assert st["import_index"] == "0", st
        assert st["migration_phase"] not in ("authority", "handoff",
                                             "snapshot", "mirror"), st
        assert int(st["migration_forged"]) >= 4, st
        assert int(st["migration_bad_msgs"]) >= 4, st
        # A client's write goes to "the old cluster": the stranger alone.
        c = b.client(timeout=10.0)
        with pytest.raises(redis.ResponseError) as err:
            c.set("k", "v")
        assert "TRYAGAIN" in str(err.value), err.value
        e2e.wait_log(b, "did not prove it holds the migration secret")
        assert b"BATON.MIGRATION.PROVE" in fake.received
        assert PASSWORD.encode() not in fake.received
        assert b"AUTH" not in fake.received
    finally:
        tear_down([s], fake, [new])


def test_abort_and_resume_on_both_sides(tmp_path, relay):
    """batonctl migrate abort stops the new side's import and the old side's
    export (a hand-off asked meanwhile fences nothing); resume on both lets
    the migration finish; and once the new cluster announced authority, an
    unfence of the old cluster is refused."""
    old = new = None
    try:
        old = old_cluster(tmp_path, relay, n=1)
        a = old.nodes[1]
        acked = {}
        set_all([a], "k", 20, acked)
        new, b = new_node(tmp_path, relay)
        wait_status(b, lambda st: st["migration_ready"] == "1",
                    "the import caught up")
        r = batonctl(b, "migrate", "abort")
        assert r.returncode == 0 and "aborted" in r.stdout, r.stdout + r.stderr
        st = wait_status(b, lambda st: st["migration_phase"] == "aborted",
                         "the new side aborted")
        stopped_at = st["import_index"]
        set_all([a], "while-aborted-", 20, acked)
        b.client().execute_command("BATON.MIGRATION", "HANDOFF")
        time.sleep(1.5)
        assert status(b)["import_index"] == stopped_at
        assert status(a)["fenced"] == "0"
        # The old side aborts too: it refuses the resumed import's request.
        r = batonctl(a, "migrate", "abort")
        assert r.returncode == 0, r.stdout + r.stderr
        wait_status(a, lambda st: st["migration_phase"] == "aborted",
                    "the old side aborted")
        assert batonctl(b, "migrate", "resume").returncode == 0
        e2e.wait_log(a, "the migration was aborted here")
        assert status(b)["import_index"] == stopped_at
        set_all([a], "still-old-", 5, acked)
        assert batonctl(a, "migrate", "resume").returncode == 0
        r = batonctl(b, "migrate", "--handoff", "--wait-s", "30")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "holds write authority" in r.stdout
        wait_status(a, lambda st: st["migration_phase"] == "fenced",
                    "the old side fenced")
        e2e.wait_log(a, "sealing it")
        assert_all_readable(b, acked)
        set_all([b, a], "after-", 10, acked)
        assert_all_readable(a, acked)
        r = batonctl(a, "migrate", "unfence")
        assert r.returncode == 1 and "refused" in r.stderr, \
            r.stdout + r.stderr
        assert status(a)["fenced"] == "1"
    except AssertionError as e:
        logs = (old.logs_tail() if old else "") + \
            (new.logs_tail() if new else "")
        raise AssertionError(f"{e}\n{logs}") from None
    finally:
        for c in (old, new):
            if c is not None:
                c.stop_all()


def fence_payload(target):
    """'K' + a FENCE kv payload (docs/kv.md, "Migration"): format 2, stamp,
    kind 4, the target's length and bytes."""
    t = target.encode()
    return (b"K" + bytes([2]) + struct.pack("<Q", int(time.time() * 1000)) +
            bytes([4, len(t)]) + t)


def test_unfence_lifts_a_fence_that_no_authority_followed(tmp_path, relay):
    """The old cluster fenced and the new cluster died before it took
    authority: writes are refused, across restarts and even without
    --relay (the fence is in the log), until batonctl migrate unfence,
    which is replicated too (it holds across a restart)."""
    if not HOOKS.exists():
        pytest.skip(f"{HOOKS} not built")
    old = e2e.Cluster(tmp_path / "old")
    try:
        extra = ["--as-release", OLD_RELEASE, "--relay",
                 f"{HOST}:{relay.port}", "--relay-cluster", "old",
                 "--migrate-to", "new", "--migration-secret-file",
                 secret_file(tmp_path)]
        ports = e2e.free_ports(2)
        a = e2e.Node(old, 1, ports[0], ports[1])
        a.binary = HOOKS
        old.nodes[1] = a
        old.password = PASSWORD
        old.common_args = ["--password", PASSWORD] + extra
        a.start(["--bootstrap", f"1={a.peer_addr}/{a.client_addr}"])
        old.leader()
        acked = {}
        set_all([a], "k", 10, acked)
        # The fence, as the old leader commits it at hand-off.
        c = a.client()
        assert c.execute_command("BATON.TEST.PROPOSE",
                                 fence_payload("new")) == "OK"
        assert status(a)["fenced"] == "1"
        with pytest.raises(redis.ResponseError) as err:
            c.set("k0", "lost?")
        assert "TRYAGAIN" in str(err.value)
        # Restarted without the migration's flags: still fenced.
        a.kill9()
        old.common_args = ["--password", PASSWORD, "--as-release",
                           OLD_RELEASE]
        a.restart()
        old.leader()
        with pytest.raises(redis.ResponseError) as err:
            a.client().set("k0", "lost?")
        assert "TRYAGAIN" in str(err.value)
        r = batonctl(a, "migrate", "unfence")
        assert r.returncode == 0 and "unfenced" in r.stdout, \
            r.stdout + r.stderr
        set_all([a], "after-", 10, acked)
        a.kill9()
        old.common_args = ["--password", PASSWORD] + extra
        a.restart()
        old.leader()
        st = status(a)
        assert st["fenced"] == "0" and st["migration_phase"] == "aborted", st
        set_all([a], "restarted-", 5, acked)
        assert_all_readable(a, acked)
        # Unfenced, so not fenced: a second unfence is refused.
        r = batonctl(a, "migrate", "unfence")
        assert r.returncode == 1 and "not fenced" in r.stderr, r.stderr
    except AssertionError as e:
        raise AssertionError(f"{e}\n{old.logs_tail()}") from None
    finally:
        old.stop_all()


def test_a_migration_needs_a_secret_in_a_regular_file(tmp_path):
    """--migrate-to and --migrate-from refuse to start without
    --migration-secret-file (exit 2, saying why), and so does a secret that
    is a FIFO (without blocking on it) or a directory."""
    e2e.require_binary(e2e.BATOND)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    cport, pport = e2e.free_ports(2)
    base = [str(e2e.BATOND), "--id", "1", "--listen", f"{HOST}:{cport}",
            "--peer-listen", f"{HOST}:{pport}", "--data",
            str(tmp_path / "data"), "--join", "--relay", f"{HOST}:1"]
    for side, extra, needle in [
            ("--migrate-to", [], "need --migration-secret-file"),
            ("--migrate-from", [], "need --migration-secret-file"),
            ("--migrate-to", ["--migration-secret-file", str(fifo)],
             "is not a regular file"),
            ("--migrate-from", ["--migration-secret-file", str(tmp_path)],
             "is not a regular file")]:
        r = subprocess.run(base + [side, "other"] + extra,
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and needle in r.stderr, (side, extra, r)


def test_the_import_comes_from_the_first_old_cluster_only(tmp_path, relay):
    """The new cluster pins the UUID of the cluster it first imported from:
    another cluster registered under the old one's name later (even one
    holding the migration secret) is refused, and the import stays."""
    old = other = new = None
    try:
        old = old_cluster(tmp_path, relay, n=1)
        acked = {}
        set_all([old.nodes[1]], "first-", 10, acked)
        new, b = new_node(tmp_path, relay)
        st = wait_status(b, lambda st: st["migration_ready"] == "1",
                         "the import caught up")
        index = st["import_index"]
        old.stop_all()
        other = e2e.Cluster(tmp_path / "other")
        other.start(1, password=PASSWORD, extra=[
            "--as-release", OLD_RELEASE, "--relay", f"{HOST}:{relay.port}",
            "--relay-cluster", "old", "--migrate-to", "new",
            "--migration-secret-file", secret_file(tmp_path)])
        e2e.wait_log(b, "that cluster's UUID is not the one this cluster "
                     "imported from first", timeout=20)
        st = status(b)
        assert st["import_index"] == index, st
        assert st["migration_phase"] == "mirror", st
        assert int(st["migration_refused"]) >= 1, st
    except AssertionError as e:
        logs = "".join(c.logs_tail() for c in (old, other, new) if c)
        raise AssertionError(f"{e}\n{logs}") from None
    finally:
        for c in (old, other, new):
            if c is not None:
                c.stop_all()
