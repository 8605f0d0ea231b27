"""baton-relay end to end (docs/relay-server.md): fake nodes speaking the
relay protocol (relaywire.py) register from two clusters, receive numbered
views, exchange unicast and multicast DATA and ACKs through the relay, and
survive a SIGKILL of the relay with view numbers that keep growing; garbage
and malformed peers are refused without disturbing the others."""

import os
import signal
import struct
import subprocess
import time

import pytest

from conftest import HOST, _die_with_parent, build_dir, free_ports
import relaywire as rw

RELAY = build_dir() / "baton-relay"
UNICAST, MULTICAST = 0, 1


class Relay:
    """A baton-relay process this test started (and only that one is ever
    signalled)."""

    def __init__(self, tmp_path, port, *extra):
        self.data = tmp_path / "relay-data"
        self.data.mkdir(exist_ok=True)
        self.log_path = tmp_path / "relay.log"
        self.port = port
        self.extra = list(extra)
        self.proc = None

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(RELAY), "--listen", f"{HOST}:{self.port}", "--data",
             str(self.data), *self.extra],
            stdout=log, stderr=log, preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log()
            try:
                rw.Conn(self.port, timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError("baton-relay did not listen within 10 s\n" +
                             self.log())

    def log(self):
        return self.log_path.read_text(errors="replace")

    def kill(self, sig=signal.SIGKILL):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)

    def signal(self, sig):
        self.proc.send_signal(sig)


@pytest.fixture
def relay(tmp_path):
    if not RELAY.exists():
        pytest.skip(f"{RELAY} not built")
    r = Relay(tmp_path, free_ports(1)[0], "--activate",
              "--handshake-timeout-ms", "500").start()
    yield r
    r.kill()


def register(port, cluster, node, incarnation):
    c = rw.Conn(port)
    c.send(rw.hello(cluster, node, incarnation))
    w = c.expect(rw.WELCOME)
    assert w["code"] == 0 and w["incarnation"] != 0, w
    return c


def members(view):
    return [(n["cluster"], n["node"], n["connected"]) for n in view["nodes"]]


def status(port):
    m = rw.Conn(port)
    m.send(rw.frame(rw.STATUS, b""))
    reply = m.expect(rw.STATUS_REPLY)
    m.close()
    return reply


def test_views_data_acks_and_restart(relay):
    a = register(relay.port, "old", 1, 11)
    v1 = a.expect(rw.VIEW)
    assert v1["number"] == 1 and members(v1) == [("old", 1, 1)]
    a.expect(rw.ACTIVATE)

    b = register(relay.port, "new", 1, 21)
    v2 = b.expect(rw.VIEW)
    assert v2["number"] == 2
    assert members(v2) == [("new", 1, 1), ("old", 1, 1)]
    assert v2["nodes"][0]["release"] == (1, 3, 0)
    b.expect(rw.ACTIVATE)
    assert a.expect(rw.VIEW) == v2

    c = register(relay.port, "old", 2, 12)
    v3 = c.expect(rw.VIEW)
    c.expect(rw.ACTIVATE)
    assert v3["number"] == 3 and a.expect(rw.VIEW) == v3
    assert b.expect(rw.VIEW) == v3

    # Unicast: the payload arrives unchanged, `peer` names the source.
    a.send(rw.data(UNICAST, ("new", 1, 21), 1, 1, b"export 1..9"))
    d = b.expect(rw.DATA)
    assert d["peer"] == ("old", 1, 11) and d["payload"] == b"export 1..9"
    assert (d["kind"], d["seq"], d["first"]) == (UNICAST, 1, 1)
    # ACK forwarded to the source, `peer` naming the receiver.
    b.send(rw.ack(UNICAST, ("old", 1, 11), 1))
    k = a.expect(rw.ACK)
    assert k["peer"] == ("new", 1, 21) and k["seq"] == 1

    # Multicast to "old": every node of it but none of "new".
    b.send(rw.data(MULTICAST, ("old", 0, 0), 1, 1, b"authority: new"))
    for n in (a, c):
        d = n.expect(rw.DATA)
        assert d["peer"] == ("new", 1, 21) and d["kind"] == MULTICAST
        assert d["payload"] == b"authority: new"

    # A stale incarnation is not delivered: counted as dropped.
    a.send(rw.data(UNICAST, ("new", 1, 99), 2, 1, b"stale"))
    st = status(relay.port)
    assert st["view"] == 3 and st["active"] == 1
    assert (st["relayed"], st["dropped"]) == (3, 1)
    assert st["bytes"] == len(b"export 1..9") + 2 * len(b"authority: new")
    by_node = {(n["cluster"], n["node"]): n for n in st["nodes"]}
    assert by_node[("old", 1)]["messages_in"] == 2
    assert by_node[("new", 1)]["messages_out"] == 1
    assert by_node[("old", 2)]["messages_out"] == 1

    # LEAVE: a new view without the node, its connection closed.
    c.send(rw.leave("drained"))
    assert c.closed()
    v4 = a.expect(rw.VIEW)
    assert v4["number"] == 4 and b.expect(rw.VIEW) == v4
    assert members(v4) == [("new", 1, 1), ("old", 1, 1)]

    # SIGKILL, then a restart on the same data directory (without
    # --activate: the state file kept it): view numbers continue above.
    relay.kill()
    assert a.closed() and b.closed()
    relay.extra = []
    relay.start()
    a2 = register(relay.port, "old", 1, 11)
    v5 = a2.expect(rw.VIEW)
    assert v5["number"] > v4["number"], v5
    a2.expect(rw.ACTIVATE)
    b2 = register(relay.port, "new", 1, 21)
    v6 = b2.expect(rw.VIEW)
    assert v6["number"] > v5["number"] and a2.expect(rw.VIEW) == v6
    a2.send(rw.data(UNICAST, ("new", 1, 21), 2, 2, b"after restart"))
    assert b2.expect(rw.ACTIVATE) and b2.expect(rw.DATA)["seq"] == 2
    assert f"state file read: last view {v4['number']}, active" in relay.log()


def test_garbage_peers_are_refused_and_others_keep_working(relay):
    a = register(relay.port, "old", 1, 11)
    assert a.expect(rw.VIEW)["number"] == 1
    a.expect(rw.ACTIVATE)
    b = register(relay.port, "new", 1, 21)
    b.expect(rw.VIEW), b.expect(rw.ACTIVATE), a.expect(rw.VIEW)

    http = rw.Conn(relay.port)
    http.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    e = http.expect(rw.ERROR)
    assert e["code"] == rw.BAD_MAGIC and "0x47" in e["text"], e
    assert http.closed()

    bad_type = rw.Conn(relay.port)
    bad_type.send(rw.MAGIC + struct.pack("<HHI", 99, 0, 0) + bytes(8))
    assert bad_type.expect(rw.ERROR)["code"] == rw.BAD_TYPE
    assert bad_type.closed()

    # A registered node sending a frame with a broken checksum is refused
    # and disconnected: the others see it go.
    c = register(relay.port, "old", 2, 12)
    c.expect(rw.VIEW), c.expect(rw.ACTIVATE)
    a.expect(rw.VIEW), b.expect(rw.VIEW)
    broken = bytearray(rw.data(UNICAST, ("new", 1, 21), 1, 1, b"x"))
    broken[-1] ^= 0xFF
    c.send(bytes(broken))
    e = c.expect(rw.ERROR)
    assert e["code"] == rw.CHECKSUM and e["frame_type"] == rw.DATA, e
    assert c.closed()
    gone = a.expect(rw.VIEW)
    assert ("old", 2, 0) in members(gone) and b.expect(rw.VIEW) == gone

    # Frames out of place.
    early = rw.Conn(relay.port)
    early.send(rw.data(UNICAST, ("new", 1, 21), 1, 1, b"x"))
    assert early.expect(rw.ERROR)["code"] == rw.NOT_REGISTERED
    silent = rw.Conn(relay.port)
    assert silent.expect(rw.ERROR)["code"] == rw.TIMEOUT
    assert silent.closed()

    a.send(rw.data(UNICAST, ("new", 1, 21), 1, 1, b"still here"))
    assert b.expect(rw.DATA)["payload"] == b"still here"
    a.send(rw.frame(rw.PING, struct.pack("<Q", 7)))
    assert a.recv()["token"] == 7
    assert relay.proc.poll() is None
    assert "BAD_MAGIC" in relay.log() and "CHECKSUM" in relay.log()


def test_replace_and_activation(relay):
    a = register(relay.port, "old", 1, 11)
    a.expect(rw.VIEW), a.expect(rw.ACTIVATE)
    # The same node again (a restart: new incarnation) replaces the old
    # connection.
    a2 = register(relay.port, "old", 1, 12)
    e = a.expect(rw.ERROR)
    assert e["code"] == rw.REPLACED and a.closed()
    v = a2.expect(rw.VIEW)
    assert v["number"] == 2 and v["nodes"][0]["incarnation"] == 12
    a2.expect(rw.ACTIVATE)

    relay.signal(signal.SIGUSR2)
    a2.expect(rw.DEACTIVATE)
    assert status(relay.port)["active"] == 0
    a2.send(rw.data(MULTICAST, ("old", 0, 0), 1, 1, b"x"))
    assert a2.expect(rw.ERROR)["code"] == rw.UNEXPECTED
    b = register(relay.port, "new", 1, 21)
    b.expect(rw.VIEW)
    relay.signal(signal.SIGUSR1)
    b.expect(rw.ACTIVATE)


def test_state_file_refused_and_bad_flags(tmp_path):
    if not RELAY.exists():
        pytest.skip(f"{RELAY} not built")
    port = str(free_ports(1)[0])
    r = subprocess.run([str(RELAY), "--listen", f"{HOST}:{port}",
                        "--data", str(tmp_path), "--bogus"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "unknown flag '--bogus'" in r.stderr
    r = subprocess.run([str(RELAY), "--data", str(tmp_path)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "--listen" in r.stderr

    state = tmp_path / "relay-state"
    for content, needle in ((b"GARBAGE!" * 8, "not a baton relay state"),
                            (b"", "not a baton relay state")):
        state.write_bytes(content)
        r = subprocess.run([str(RELAY), "--listen", f"{HOST}:{port}",
                            "--data", str(tmp_path)],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 1 and needle in r.stderr, r.stderr
        assert state.read_bytes() == content  # never silently reset


def test_a_node_that_stops_reading_is_disconnected_not_skipped(tmp_path):
    if not RELAY.exists():
        pytest.skip(f"{RELAY} not built")
    relay = Relay(tmp_path, free_ports(1)[0], "--activate",
                  "--queue-bytes-max", str(4 << 20)).start()
    try:
        a = register(relay.port, "old", 1, 11)
        a.expect(rw.VIEW), a.expect(rw.ACTIVATE)
        b = register(relay.port, "new", 1, 21)  # then never reads
        a.expect(rw.VIEW)
        payload = bytes(1 << 20)
        overloaded = None
        for seq in range(1, 200):  # far more than the socket buffers hold
            a.send(rw.data(UNICAST, ("new", 1, 21), seq, 1, payload))
            if "OVERLOADED" in relay.log():
                overloaded = seq
                break
        assert overloaded is not None, relay.log()
        v = a.expect(rw.VIEW)
        assert ("new", 1, 0) in members(v), v
        st = status(relay.port)
        assert st["dropped"] >= 1 and relay.proc.poll() is None
        b.close()
    finally:
        relay.kill()


def test_a_disconnected_node_is_forgotten_after_the_grace(tmp_path):
    if not RELAY.exists():
        pytest.skip(f"{RELAY} not built")
    relay = Relay(tmp_path, free_ports(1)[0], "--forget-after-ms",
                  "300").start()
    try:
        a = register(relay.port, "old", 1, 11)
        a.expect(rw.VIEW)
        b = register(relay.port, "new", 1, 21)
        a.expect(rw.VIEW)
        b.close()
        gone = a.expect(rw.VIEW)
        assert members(gone) == [("new", 1, 0), ("old", 1, 1)], gone
        forgotten = a.expect(rw.VIEW)
        assert forgotten["number"] == gone["number"] + 1
        assert members(forgotten) == [("old", 1, 1)], forgotten
        assert "forgot 1 node" in relay.log()
    finally:
        relay.kill()
