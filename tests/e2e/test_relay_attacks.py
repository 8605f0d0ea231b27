"""baton-relay against a stranger at its port (docs/relay-server.md,
"Threat model"): a peer that resets its connection while the relay writes
to it, 1,100 connections that never say HELLO, and HELLOs that cannot
prove their cluster's relay secret (none, a wrong one, a replay, a stale
one, a cluster without a secret). The stranger speaks the relay protocol
from relaywire.py; the proof is computed here from the specification
(docs/relay-protocol.md, HELLO_PROOF) with Python's hmac, apart from the C
code."""

import hashlib
import hmac
import os
import resource
import socket
import struct
import subprocess
import time

import pytest

from conftest import HOST, BATOND, Cluster, free_ports, make_secret_file
import relaywire as rw
from test_relay import RELAY, Relay, status

REFUSED = 36
TAG_HELLO_PROOF = 0x0100
PROOF_LEN = 56


def relay_key(secret):
    """The key of HELLO proofs: HMAC-SHA-256(secret, label NUL)."""
    return hmac.new(secret, b"baton relay key v1\0", hashlib.sha256).digest()


def hello_fields(cluster, node, incarnation, release=(1, 3, 0),
                 address=None):
    address = address or f"127.0.0.1:{7000 + node}"
    return (rw.s(cluster) + struct.pack("<QQ", node, incarnation) +
            struct.pack("<HHH", *release) + rw.s(address))


def proven_hello(key, cluster, node, incarnation, ts_ms=None, nonce=None):
    """A HELLO frame with a HELLO_PROOF entry made with key."""
    fields = hello_fields(cluster, node, incarnation)
    nonce = nonce if nonce is not None else os.urandom(16)
    ts_ms = ts_ms if ts_ms is not None else int(time.time() * 1000)
    stamp = struct.pack("<Q", ts_ms)
    mac = hmac.new(key, b"baton relay hello proof v1\0" + fields + nonce +
                   stamp, hashlib.sha256).digest()
    value = nonce + stamp + mac
    assert len(value) == PROOF_LEN
    return rw.frame(rw.HELLO, fields + struct.pack("<HH", TAG_HELLO_PROOF,
                                                  len(value)) + value)


def welcome(port, raw):
    c = rw.Conn(port, timeout=5)
    c.send(raw)
    w = c.expect(rw.WELCOME)
    return c, w


@pytest.fixture
def secrets(tmp_path):
    """Two relay secret files: the cluster's and a wrong one."""
    good = make_secret_file(tmp_path / "relay-secret-old")
    wrong = make_secret_file(tmp_path / "relay-secret-wrong")
    return good, wrong


def start_relay(tmp_path, *extra):
    if not RELAY.exists():
        pytest.skip(f"{RELAY} not built")
    return Relay(tmp_path, free_ports(1)[0], "--activate", *extra).start()


# ---- (a) a peer that closes while the relay writes ---------------------------


def test_a_peer_that_resets_while_the_relay_writes_does_not_kill_it(
        tmp_path):
    relay = start_relay(tmp_path)
    try:
        pings = b"".join(rw.frame(rw.PING, struct.pack("<Q", i))
                         for i in range(2000))
        for i in range(20):
            sock = socket.create_connection((HOST, relay.port), timeout=5)
            # Little room to receive, and a reset (not a FIN) on close,
            # with every PONG the relay owes still to be written.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            sock.sendall(rw.hello("old", 100 + i, 1000 + i) + pings)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                            struct.pack("ii", 1, 0))
            sock.close()
            assert relay.proc.poll() is None, (
                f"baton-relay exited with {relay.proc.returncode} after "
                f"reset {i + 1}\n{relay.log()[-2000:]}")
        time.sleep(0.3)
        assert relay.proc.poll() is None, (
            f"baton-relay exited with {relay.proc.returncode}\n"
            f"{relay.log()[-2000:]}")
        st = status(relay.port)  # it still answers
        assert st["incarnation"] != 0
        # Every close is one line with the peer and, once registered,
        # the node it was.
        log = relay.log()
        assert "closed 127.0.0.1:" in log and " old/1" in log, log[-2000:]
    finally:
        relay.kill()


# ---- (b) idle connections ------------------------------------------------------

IDLE_CONNECTIONS = 1100
REGISTER_WITHIN_S = 5.0


def test_idle_connections_do_not_lock_out_a_genuine_node(tmp_path):
    # The handshake deadline is far away: only the connection limits can
    # make room for the genuine node.
    relay = start_relay(tmp_path, "--handshake-timeout-ms", "600000")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = IDLE_CONNECTIONS + 256
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            relay.kill()
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {want}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    idle = []
    try:
        deadline = time.monotonic() + 60
        while len(idle) < IDLE_CONNECTIONS and time.monotonic() < deadline:
            try:
                idle.append(socket.create_connection((HOST, relay.port),
                                                     timeout=5))
            except OSError:
                time.sleep(0.01)
        assert len(idle) == IDLE_CONNECTIONS
        time.sleep(0.5)  # every connection accepted by now
        assert relay.proc.poll() is None, relay.log()[-2000:]
        start = time.monotonic()
        c, w = welcome(relay.port, rw.hello("old", 1, 11))
        took = time.monotonic() - start
        assert w["code"] == 0, w
        assert took < REGISTER_WITHIN_S, took
        assert c.expect(rw.VIEW)["number"] >= 1
        c.close()
        log = relay.log()
        assert "evicted before registering" in log, log[-2000:]
    finally:
        for s in idle:
            s.close()
        relay.kill()


def test_a_connection_that_trickles_bytes_still_meets_the_deadline(tmp_path):
    relay = start_relay(tmp_path, "--handshake-timeout-ms", "600")
    try:
        raw = rw.hello("old", 1, 11)
        c = rw.Conn(relay.port, timeout=5)
        start = time.monotonic()
        closed = False
        # One byte every 100 ms: never idle, never a whole HELLO in time.
        for b in raw[:30]:
            try:
                c.send(bytes([b]))
            except OSError:
                closed = True
                break
            time.sleep(0.1)
        assert closed or c.closed()
        assert time.monotonic() - start < 4.0
        assert "no HELLO or STATUS within 600 ms" in relay.log()
    finally:
        relay.kill()


# ---- (c) proof of the cluster's relay secret --------------------------------


def test_registration_needs_a_proof_of_the_clusters_secret(tmp_path,
                                                          secrets):
    good, wrong = secrets
    relay = start_relay(tmp_path, "--cluster-secret", f"old={good}")
    try:
        key = relay_key(good.read_bytes())

        # No proof at all: today's HELLO.
        c, w = welcome(relay.port, rw.hello("old", 1, 11))
        assert w["code"] == REFUSED and "no proof" in w["reason"], w
        assert c.closed()

        # A proof made with another secret.
        c, w = welcome(relay.port, proven_hello(
            relay_key(wrong.read_bytes()), "old", 1, 11))
        assert w["code"] == REFUSED and "wrong proof" in w["reason"], w

        # A valid proof, but the fields changed after it was made (the
        # MAC covers every field): another node id.
        raw = proven_hello(key, "old", 1, 11)
        forged = bytearray(raw)
        forged[20 + 2 + 3] = 2  # node id 1 -> 2
        forged = rw.frame(rw.HELLO, bytes(forged[20:]))
        c, w = welcome(relay.port, forged)
        assert w["code"] == REFUSED and "wrong proof" in w["reason"], w

        # The valid one registers...
        c, w = welcome(relay.port, raw)
        assert w["code"] == 0, w
        assert c.expect(rw.VIEW)["nodes"][0]["node"] == 1
        c.close()
        # ...and the same bytes, captured and sent again, do not.
        c2, w = welcome(relay.port, raw)
        assert w["code"] == REFUSED and "already used" in w["reason"], w

        # A proof from long ago (a stale capture), and from the future.
        for skew_ms in (-3600_000, 3600_000):
            c, w = welcome(relay.port, proven_hello(
                key, "old", 1, 11, ts_ms=int(time.time() * 1000) + skew_ms))
            assert w["code"] == REFUSED and "clocks apart" in w["reason"], w

        # A cluster the relay has no secret for.
        c, w = welcome(relay.port, proven_hello(key, "new", 1, 21))
        assert w["code"] == REFUSED and "no secret for cluster new" in \
            w["reason"], w

        # A malformed proof entry (wrong length).
        fields = hello_fields("old", 1, 11)
        c, w = welcome(relay.port, rw.frame(
            rw.HELLO, fields + struct.pack("<HH", TAG_HELLO_PROOF, 3) +
            b"abc"))
        assert w["code"] == REFUSED and "HELLO_PROOF" in w["reason"], w

        log = relay.log()
        for why in ("no proof", "wrong proof", "already used",
                    "clocks apart", "no secret for cluster new"):
            assert f"refused old/1: authentication failed" in log or \
                why in log
            assert why in log, why
        # Monitors still read counters without registering.
        assert status(relay.port)["view"] >= 1
    finally:
        relay.kill()


def test_a_captured_hello_is_refused_after_a_relay_restart(tmp_path,
                                                          secrets):
    good, _ = secrets
    relay = start_relay(tmp_path, "--cluster-secret", f"old={good}")
    try:
        key = relay_key(good.read_bytes())
        raw = proven_hello(key, "old", 1, 11)
        c, w = welcome(relay.port, raw)
        assert w["code"] == 0, w
        c.close()
        # The relay forgets its nonces when it restarts; the capture
        # must not work on the new process either.
        relay.kill()
        time.sleep(0.05)
        relay.start()
        c, w = welcome(relay.port, raw)
        assert w["code"] == REFUSED and "already used" in w["reason"], w
        # A fresh proof registers.
        c, w = welcome(relay.port, proven_hello(key, "old", 1, 11))
        assert w["code"] == 0, w
    finally:
        relay.kill()


def test_open_clusters_only_when_asked(tmp_path, secrets):
    good, _ = secrets
    relay = start_relay(tmp_path, "--cluster-secret", f"old={good}",
                        "--allow-open-clusters")
    try:
        c, w = welcome(relay.port, rw.hello("new", 1, 21))
        assert w["code"] == 0, w
        c, w = welcome(relay.port, rw.hello("old", 1, 11))
        assert w["code"] == REFUSED and "no proof" in w["reason"], w
    finally:
        relay.kill()


def test_secret_files_must_be_regular_files(tmp_path):
    if not RELAY.exists() or not BATOND.exists():
        pytest.skip("baton-relay or batond not built")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    folder = tmp_path / "dir"
    folder.mkdir(mode=0o700)
    data = tmp_path / "relay-data"
    data.mkdir()
    port = free_ports(1)[0]
    for bad in (fifo, folder):
        r = subprocess.run(
            [str(RELAY), "--listen", f"{HOST}:{port}", "--data", str(data),
             "--cluster-secret", f"old={bad}"],
            capture_output=True, text=True, timeout=10)
        assert r.returncode == 2, r
        assert "not a regular file" in r.stderr, r.stderr
        p = free_ports(3)
        r = subprocess.run(
            [str(BATOND), "--id", "1", "--listen", f"{HOST}:{p[0]}",
             "--peer-listen", f"{HOST}:{p[1]}", "--data",
             str(tmp_path / "node"), "--relay", f"{HOST}:{p[2]}",
             "--relay-cluster", "old", "--relay-secret-file", str(bad)],
            capture_output=True, text=True, timeout=10)
        assert r.returncode == 2, r
        assert "--relay-secret-file" in r.stderr and \
            "not a regular file" in r.stderr, r.stderr


def test_a_node_with_the_relay_secret_registers(tmp_path, secrets):
    good, wrong = secrets
    relay = start_relay(tmp_path, "--cluster-secret", f"old={good}")
    cluster = Cluster(tmp_path / "c")
    try:
        common = ["--relay", f"{HOST}:{relay.port}", "--relay-cluster", "old"]
        cluster.start(1, extra=common + ["--relay-secret-file", str(good)])
        deadline = time.monotonic() + 15
        nodes = []
        while time.monotonic() < deadline:
            nodes = [(n["cluster"], n["node"], n["connected"])
                     for n in status(relay.port)["nodes"]]
            if nodes == [("old", 1, 1)]:
                break
            time.sleep(0.1)
        assert nodes == [("old", 1, 1)], relay.log()[-3000:]
        assert "join old/1" in relay.log()

        # The same node with the wrong file is refused, and says so.
        other = Cluster(tmp_path / "d")
        try:
            other.start(1, extra=["--relay", f"{HOST}:{relay.port}",
                                  "--relay-cluster", "old",
                                  "--relay-secret-file", str(wrong),
                                  "--cluster-id", "other"])
            node = other.nodes[1]
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if "wrong proof" in node.log_text():
                    break
                time.sleep(0.1)
            assert "refused registration" in node.log_text() and \
                "wrong proof" in node.log_text(), node.log_tail()
        finally:
            other.stop_all()
    finally:
        cluster.stop_all()
        relay.kill()
