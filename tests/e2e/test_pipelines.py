"""Deep pipelines on one connection (docs/benchmarks.md, "Pipelines").

A connection's replies finished in one loop turn leave in one write, straight
from their slots when the socket takes them, else queued; a connection reads
into the node's one read buffer. These tests check what that must keep:

- replies to a pipeline far bigger than the socket's buffers (so writes are
  partial and queued, a reply split across writes) arrive complete and in
  request order, on the leader and on a follower, the client reading slowly;
- a pipeline mixing writes, reads and increments keeps the connection's
  order;
- clients that hang up in the middle of a pipeline (before reading, after
  reading part of the replies, with a reset) leave the node serving, and the
  writes they sent are applied in order or not at all past a prefix.
"""

import socket
import struct
import time

import pytest

from conftest import HOST, Deadline, resp, retry

REPLY_TIMEOUT_S = 30.0
BIG_VALUE_BYTES = 6000
BIG_KEYS = 1500  # ~9 MB of replies: many times any socket buffer
MIXED_ROUNDS = 3000


class Replies:
    """Reads RESP2 replies (simple, error, integer, bulk) from a socket."""

    def __init__(self, sock, timeout=REPLY_TIMEOUT_S):
        self.sock = sock
        self.buf = bytearray()
        self.at = 0
        sock.settimeout(timeout)

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise AssertionError(
                f"the node closed the connection with {len(self.buf) - self.at}"
                " bytes of a reply unparsed")
        if self.at > (1 << 20):
            del self.buf[:self.at]
            self.at = 0
        self.buf += chunk

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n", self.at)
            if end >= 0:
                line = bytes(self.buf[self.at:end])
                self.at = end + 2
                return line
            self._fill()

    def next(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-"):
            return (kind, rest.decode())
        if kind == b":":
            return (kind, int(rest))
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return (kind, None)
            while len(self.buf) - self.at < n + 2:
                self._fill()
            body = bytes(self.buf[self.at:self.at + n])
            assert self.buf[self.at + n:self.at + n + 2] == b"\r\n"
            self.at += n + 2
            return (kind, body)
        raise AssertionError(f"unexpected reply line {line[:80]!r}")


def connect(node):
    sock = socket.create_connection((HOST, node.client_port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class Sender:
    """Sends data from a thread while the test reads (or not): a blocking
    sendall of a pipeline whose replies fill both directions' buffers would
    deadlock. stop() ends it early, before the test hangs up."""

    def __init__(self, sock, data):
        import threading
        self.sock, self.data = sock, memoryview(data)
        self.stopping = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import select
        at = 0
        try:
            while at < len(self.data) and not self.stopping.is_set():
                _, ready, _ = select.select([], [self.sock], [], 0.1)
                if ready:
                    at += self.sock.send(self.data[at:at + (1 << 16)])
        except OSError as e:
            self.error = e

    def join(self):
        self.thread.join(REPLY_TIMEOUT_S)
        assert not self.thread.is_alive(), "the pipeline was not sent"
        assert self.error is None, self.error

    def stop(self):
        self.stopping.set()
        self.thread.join(REPLY_TIMEOUT_S)


def big_value(i):
    return (b"%06d" % i) * (BIG_VALUE_BYTES // 6)


@pytest.fixture(scope="module")
def loaded(shared_cluster):
    """BIG_KEYS keys of BIG_VALUE_BYTES, written by one pipeline of SETs
    on the leader (its replies checked in order)."""
    lead = shared_cluster.leader()
    sock = connect(lead)
    try:
        data = b"".join(resp("SET", f"big:{i}", big_value(i))
                        for i in range(BIG_KEYS))
        sender = Sender(sock, data)
        r = Replies(sock)
        for i in range(BIG_KEYS):
            got = r.next()
            assert got == (b"+", "OK"), f"SET {i} answered {got!r}"
        sender.join()
    finally:
        sock.close()
    return shared_cluster


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_replies_bigger_than_the_socket_arrive_whole_and_in_order(
        loaded, role):
    node = (loaded.leader() if role == "leader" else loaded.followers()[0])
    sock = connect(node)
    try:
        order = [(i * 7919) % BIG_KEYS for i in range(BIG_KEYS)]
        data = b"".join(resp("GET", f"big:{i}") for i in order)
        sender = Sender(sock, data)
        # Read nothing for a while: the node's socket buffer fills, its
        # writes go partial, then queued behind each other.
        time.sleep(0.5)
        r = Replies(sock)
        for n, i in enumerate(order):
            kind, body = r.next()
            assert kind == b"$" and body == big_value(i), (
                f"reply {n} of {len(order)} (GET big:{i}) on the {role}: "
                f"{kind!r} {body[:24] if body else body!r}...")
        sender.join()
        sock.settimeout(0.2)
        try:
            extra = sock.recv(1)
        except socket.timeout:
            extra = b""
        assert extra == b"", "bytes after the last reply"
    finally:
        sock.close()


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_mixed_pipeline_keeps_the_connection_order(shared_cluster, role):
    """SET k v, GET k, INCR n, GET other, many times in one pipeline: every
    GET sees the SET just before it, the INCRs count up by one."""
    node = (shared_cluster.leader()
            if role == "leader" else shared_cluster.followers()[0])
    counter = f"mixed-count-{role}"
    c = node.client()
    retry(lambda: c.set(counter, 0), what="resetting the counter")
    sock = connect(node)
    try:
        parts = []
        for i in range(MIXED_ROUNDS):
            key = f"mixed-{role}:{i % 10}"
            parts += [resp("SET", key, f"v{i}"), resp("GET", key),
                      resp("INCR", counter), resp("PING")]
        sender = Sender(sock, b"".join(parts))
        r = Replies(sock)
        for i in range(MIXED_ROUNDS):
            got = [r.next() for _ in range(4)]
            want = [(b"+", "OK"), (b"$", b"v%d" % i), (b":", i + 1),
                    (b"+", "PONG")]
            assert got == want, f"round {i} on the {role}: {got!r}"
        sender.join()
    finally:
        sock.close()


def hang_up(sock, how):
    if how == "reset":
        # SO_LINGER 0: close sends a reset, not a FIN.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.parametrize("how", ["fin", "reset"])
@pytest.mark.parametrize("read_first", [0, 500])
def test_client_hanging_up_mid_pipeline_leaves_the_node_serving(
        loaded, how, read_first):
    lead = loaded.leader()
    nodes = [lead] + loaded.followers()
    counter = f"hangup-{how}-{read_first}"
    for node in nodes:
        sock = connect(node)
        sends = b"".join(resp("INCR", counter) + resp("GET", f"big:{i}")
                         for i in range(BIG_KEYS))
        sender = Sender(sock, sends)
        if read_first:
            r = Replies(sock)
            for i in range(read_first):
                kind, n = r.next()
                assert kind == b":", f"reply {2 * i}: {kind!r} {n!r}"
                kind, body = r.next()
                assert body == big_value(i), f"reply {2 * i + 1}"
        sender.stop()
        hang_up(sock, how)
    c = lead.client()
    # The INCRs that went in were applied in order: the count is some
    # number up to all of them, the same on every node once applied.
    d = Deadline(REPLY_TIMEOUT_S, "the counter to settle")
    last = None
    while not d.expired():
        now = retry(lambda: c.get(counter), what="GET the counter")
        if now == last:
            break
        last = now
        time.sleep(0.3)
    total = int(last or 0)
    assert 0 <= total <= len(nodes) * BIG_KEYS
    if read_first:
        assert total >= read_first, (
            f"{total} INCRs applied, but {read_first} were answered")
    for node in nodes:
        assert node.alive, f"{node} exited:\n{node.log_tail()}"
        got = retry(lambda: node.client().get(counter),
                    what=f"GET the counter on {node}")
        assert int(got or 0) == total, f"{node} sees {got}, leader {total}"
        assert retry(lambda: node.client().ping()), f"{node} serves"
