"""A client's commands answered by another cluster's node (src/server/proxy.c).

Node A (batond-test-hooks, a single-node cluster) proxies the commands sent
as `BATON.TEST.PROXY <addr> <command> [args...]` to the node at addr: node
B of another single-node cluster, or a fake server in this process that
answers what a test wants (a reply split byte by byte, RESP3 types, a
malformed reply, a connection closed with a read in flight). Replies must
come back byte for byte, in order, and every failure must be the
documented error, with node A still serving.
"""

import signal
import socket
import threading
import time

import pytest

import conftest
from conftest import Cluster, Deadline, HOST, POLL_S

HOOKS = conftest.build_dir() / "batond-test-hooks"
PASSWORD = "proxy-pw"


# ---- raw RESP -----------------------------------------------------------------


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Raw:
    """A client socket reading replies as their exact bytes."""

    def __init__(self, port, password=PASSWORD, timeout=20.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.buf = b""
        if password:
            self.send("AUTH", password)
            assert self.reply() == b"+OK\r\n"

    def close(self):
        self.sock.close()

    def send(self, *args):
        self.sock.sendall(encode(*args))

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed while reading a reply")
            self.buf += chunk
        i = self.buf.index(b"\r\n") + 2
        line, self.buf = self.buf[:i], self.buf[i:]
        return line

    def _exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed while reading a reply")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def reply(self):
        """One whole reply (RESP2 and RESP3), as its bytes."""
        line = self._line()
        kind, body = line[:1], line[1:-2]
        if kind in b"$!=" and int(body) >= 0:
            return line + self._exact(int(body) + 2)
        if kind in b"*~>%|" and int(body) > 0:
            n = int(body) * (2 if kind in b"%|" else 1) + (kind == b"|")
            return line + b"".join(self.reply() for _ in range(n))
        return line

    def call(self, *args):
        self.send(*args)
        return self.reply()


def proxied(addr, *args):
    return ("BATON.TEST.PROXY", addr) + args


# ---- fixtures -----------------------------------------------------------------


@pytest.fixture
def two(tmp_path, monkeypatch):
    """Node A (test hooks) and node B, each its own one-node cluster, both
    with the same password."""
    conftest.require_binary(HOOKS)
    b_cluster = Cluster(tmp_path / "b")
    monkeypatch.setattr(conftest, "BATOND", HOOKS)
    a_cluster = Cluster(tmp_path / "a")
    try:
        a = a_cluster.start(1, password=PASSWORD)
        b = b_cluster.start(1, password=PASSWORD)
        yield a, b
    finally:
        a_cluster.stop_all()
        b_cluster.stop_all()


def silent_node():
    """A FakeNode that never answers, and the list of the commands it
    received."""
    received = []
    return FakeNode(lambda conn, args: received.append(args)), received


class FakeNode:
    """A server on a free port that takes the proxy's handshake (AUTH,
    BATON.PROXIED) and then calls `script(conn, request_bytes)` for each
    command received, on each connection, in a thread."""

    def __init__(self, script):
        self.script = script
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((HOST, 0))
        self.lsock.listen(8)
        self.lsock.settimeout(0.2)
        self.addr = f"{HOST}:{self.lsock.getsockname()[1]}"
        self.connections = 0
        self.closed = 0  # connections ended (by either side)
        self.handshakes = []
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def close(self):
        self.stop = True
        self.thread.join(timeout=5)
        self.lsock.close()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.lsock.accept()
            except socket.timeout:
                continue
            self.connections += 1
            threading.Thread(target=self._conn, args=(conn,),
                             daemon=True).start()

    @staticmethod
    def _read_command(f):
        line = f.readline()
        if not line:
            return None
        assert line[:1] == b"*", line
        args = []
        for _ in range(int(line[1:-2])):
            n = int(f.readline()[1:-2])
            args.append(f.read(n + 2)[:-2])
        return args

    def _conn(self, conn):
        f = conn.makefile("rb")
        try:
            while not self.stop:
                args = self._read_command(f)
                if args is None:
                    return
                if args[0] in (b"AUTH", b"BATON.PROXIED"):
                    self.handshakes.append(args)
                    conn.sendall(b"+OK\r\n")
                    continue
                if self.script(conn, args) is False:
                    return
        except OSError:
            pass
        finally:
            self.closed += 1
            conn.close()


def assert_serves(node):
    c = node.client()
    assert c.ping()
    c.set("still-serving", "yes")
    assert c.get("still-serving") == "yes"


# ---- through a real node ------------------------------------------------------


def test_set_lands_on_the_other_node_and_get_reads_it(two):
    a, b = two
    raw = Raw(a.client_port)
    assert raw.call(*proxied(b.client_addr, "SET", "k", "v1")) == b"+OK\r\n"
    assert b.client().get("k") == "v1"
    assert a.client().get("k") is None
    assert raw.call(*proxied(b.client_addr, "GET", "k")) == b"$2\r\nv1\r\n"
    # The same connection runs its own commands here, in between.
    assert raw.call("SET", "k", "here") == b"+OK\r\n"
    assert raw.call(*proxied(b.client_addr, "GET", "k")) == b"$2\r\nv1\r\n"
    assert raw.call("GET", "k") == b"$4\r\nhere\r\n"


def test_replies_of_every_type_pass_byte_for_byte(two):
    a, b = two
    setup = [("SET", "s", "x" * 70000), ("MSET", "l1", "a", "l2", "b"),
             ("SET", "n", "41")]
    direct = Raw(b.client_port)
    for cmd in setup:
        direct.call(*cmd)
    raw = Raw(a.client_port)
    # Commands that change nothing: B's own reply is the one to pass on.
    same = [
        ("GET", "s"),                      # a bulk larger than one read
        ("GET", "missing"),                # nil
        ("MGET", "n", "missing", "s"),     # an array with a nil
        ("KEYS", "l*"),
        ("KEYS", "nomatch*"),              # an empty array
        ("SCAN", "0", "COUNT", "100"),     # nested arrays
        ("TTL", "n"),
        ("EXISTS", "n", "s", "missing"),   # integer
        ("INCR", "s"),                     # an error
        ("NOSUCHCOMMAND", "x"),            # an unknown command's error
        ("GET",),                          # wrong number of arguments
        ("PING",),
        ("ECHO", "bytes \x00\r\n inside"),
    ]
    for cmd in same:
        got = raw.call(*proxied(b.client_addr, *cmd))
        assert got == direct.call(*cmd), cmd
    # Writes: their known replies, and their effects on B.
    assert raw.call(*proxied(b.client_addr, "INCR", "n")) == b":42\r\n"
    assert raw.call(*proxied(b.client_addr, "SET", "n", "1", "NX")) == \
        b"$-1\r\n"
    assert raw.call(*proxied(b.client_addr, "DEL", "l1", "nope")) == b":1\r\n"
    assert direct.call("GET", "n") == b"$2\r\n42\r\n"
    assert direct.call("EXISTS", "l1") == b":0\r\n"
    # INFO: a bulk written by B (its port, its process), not by A.
    info = raw.call(*proxied(b.client_addr, "INFO"))
    assert info.startswith(b"$")
    assert f"tcp_port:{b.client_port}\r\n".encode() in info
    assert f"process_id:{b.proc.pid}\r\n".encode() in info


def test_a_pipelined_burst_keeps_its_order(two):
    a, b = two
    raw = Raw(a.client_port)
    n = 1000
    burst = []
    for i in range(n):
        if i % 2 == 0:
            burst.append(encode(*proxied(b.client_addr, "INCR", "ctr")))
        else:
            burst.append(encode(*proxied(b.client_addr, "GET", "ctr")))
    raw.sock.sendall(b"".join(burst))
    for i in range(n):
        want = (i // 2) + 1
        got = raw.reply()
        if i % 2 == 0:
            assert got == b":%d\r\n" % want, (i, got)
        else:
            s = str(want).encode()
            assert got == b"$%d\r\n%s\r\n" % (len(s), s), (i, got)
    assert b.client().get("ctr") == str(n // 2)


def test_proxied_and_local_commands_in_one_pipeline_keep_their_order(two):
    """The proxied commands of one read are written together once the read's
    commands have run; local writes and reads between them (a read waits for
    the write before it) still answer in request order, and the proxied
    commands arrive in theirs."""
    a, b = two
    raw = Raw(a.client_port)
    rounds = 300
    burst = []
    for i in range(rounds):
        burst += [encode("SET", f"here:{i % 7}", i),
                  encode(*proxied(b.client_addr, "SET", f"there:{i % 7}", i)),
                  encode("GET", f"here:{i % 7}"),
                  encode(*proxied(b.client_addr, "INCR", "there-count")),
                  encode(*proxied(b.client_addr, "GET", f"there:{i % 7}"))]
    raw.sock.sendall(b"".join(burst))
    for i in range(rounds):
        s = str(i).encode()
        bulk = b"$%d\r\n%s\r\n" % (len(s), s)
        got = [raw.reply() for _ in range(5)]
        want = [b"+OK\r\n", b"+OK\r\n", bulk, b":%d\r\n" % (i + 1), bulk]
        assert got == want, (i, got)
    assert a.client().get("there-count") is None
    assert b.client().get("there-count") == str(rounds)


def test_the_other_node_killed_with_commands_in_flight(two):
    a, b = two
    raw = Raw(a.client_port)
    addr = b.client_addr
    # The first half is answered; then B stops answering (SIGSTOP) and
    # the second half is in flight when it is killed.
    half = 300
    raw.sock.sendall(b"".join(encode(*proxied(addr, "INCR", "c"))
                              for _ in range(half)))
    for i in range(half):
        assert raw.reply() == b":%d\r\n" % (i + 1)
    b.proc.send_signal(signal.SIGSTOP)
    raw.sock.sendall(b"".join(encode(*proxied(addr, "INCR", "c"))
                              for _ in range(half)))
    time.sleep(0.5)
    b.kill9()
    lost = (f"-ERR the other cluster's node at {addr} closed the "
            f"connection; the outcome is unknown\r\n").encode()
    for i in range(half):
        assert raw.reply() == lost, i
    # Later commands find nobody there: retry, nothing was sent.
    got = raw.call(*proxied(addr, "INCR", "c"))
    assert got.startswith(
        f"-TRYAGAIN could not reach the other cluster's node at {addr}: "
        .encode()), got
    assert got.endswith(b"; retry\r\n"), got
    assert_serves(a)
    # B comes back: the same connection is served again.
    b.restart()
    d = Deadline(10, "the proxy to reach B again")
    while not d.expired():
        got = raw.call(*proxied(addr, "GET", "c"))
        if not got.startswith(b"-TRYAGAIN"):
            break
        time.sleep(POLL_S)
    assert got == b"$3\r\n300\r\n", got


def test_a_wrong_address_is_refused_clearly(two):
    a, _ = two
    raw = Raw(a.client_port)
    closed = conftest.free_ports(1)[0]
    got = raw.call(*proxied(f"{HOST}:{closed}", "GET", "k"))
    assert got == (f"-TRYAGAIN could not reach the other cluster's node at "
                   f"{HOST}:{closed}: connection refused; retry\r\n").encode()
    for bad in ("127.0.0.1", "127.0.0.1:0", "127.0.0.1:99999", "no address",
                "::1:6379", "[::1"):
        got = raw.call(*proxied(bad, "GET", "k"))
        assert got.startswith(b"-ERR the other cluster's node's address '"
                              + bad.encode() + b"' is not HOST:PORT: "), got
    assert raw.call("PING") == b"+PONG\r\n"


def test_wrong_password_on_the_other_side(tmp_path, monkeypatch):
    conftest.require_binary(HOOKS)
    b_cluster = Cluster(tmp_path / "b")
    monkeypatch.setattr(conftest, "BATOND", HOOKS)
    a_cluster = Cluster(tmp_path / "a")
    try:
        a = a_cluster.start(1, password=PASSWORD)
        b = b_cluster.start(1, password="another")
        raw = Raw(a.client_port)
        got = raw.call(*proxied(b.client_addr, "SET", "k", "v"))
        assert got == (
            f"-TRYAGAIN could not reach the other cluster's node at "
            f"{b.client_addr}: it answered AUTH with '-WRONGPASS invalid "
            f"username-password pair or user is disabled.'; retry\r\n"
        ).encode(), got
        assert b.client(password="another").get("k") is None
    finally:
        a_cluster.stop_all()
        b_cluster.stop_all()


def test_a_proxied_connection_is_never_proxied_again(two):
    a, b = two
    noauth = Raw(a.client_port, password=None)
    assert noauth.call("BATON.PROXIED").startswith(b"-NOAUTH")
    raw = Raw(a.client_port)
    assert raw.call("BATON.PROXIED") == b"+OK\r\n"
    got = raw.call(*proxied(b.client_addr, "GET", "k"))
    assert got.startswith(b"-ERR this connection is another node's proxy"), got
    assert raw.call("BATON.PROXIED", "x").startswith(
        b"-ERR wrong number of arguments")


# ---- through a fake node ------------------------------------------------------


def test_replies_split_byte_by_byte_and_resp3_types(two):
    a, _ = two
    replies = [
        b"%2\r\n+first\r\n:1\r\n$6\r\nsecond\r\n*2\r\n_\r\n#t\r\n",
        b"~2\r\n,3.5\r\n(12345678901234567890\r\n",
        b"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n",
        b"=7\r\ntxt:abc\r\n",
        b"!5\r\nOOPS!\r\n",
        b"*3\r\n*1\r\n*0\r\n$-1\r\n*-1\r\n",
    ]
    it = iter(replies)

    def script(conn, args):
        for i in range(len(r := next(it))):
            conn.sendall(r[i:i + 1])
            time.sleep(0.001)

    fake = FakeNode(script)
    try:
        raw = Raw(a.client_port)
        for want in replies:
            assert raw.call(*proxied(fake.addr, "GET", "x")) == want
        assert fake.handshakes == [[b"AUTH", PASSWORD.encode()],
                                   [b"BATON.PROXIED"]]
    finally:
        fake.close()


def test_a_read_in_flight_is_resent_once_on_a_new_connection(two):
    a, _ = two
    seen = []

    def script(conn, args):
        seen.append(args)
        if len(seen) == 1:
            return False  # close without answering
        conn.sendall(b"$6\r\nanswer\r\n")

    fake = FakeNode(script)
    try:
        raw = Raw(a.client_port)
        assert raw.call(*proxied(fake.addr, "GET", "k")) == \
            b"$6\r\nanswer\r\n"
        assert seen == [[b"GET", b"k"], [b"GET", b"k"]]
        assert fake.connections == 2
    finally:
        fake.close()


def test_a_write_in_flight_is_not_resent(two):
    a, _ = two
    seen = []

    def script(conn, args):
        seen.append(args)
        return False

    fake = FakeNode(script)
    try:
        raw = Raw(a.client_port)
        got = raw.call(*proxied(fake.addr, "SET", "k", "v"))
        assert got == (f"-ERR the other cluster's node at {fake.addr} "
                       f"closed the connection; the outcome is "
                       f"unknown\r\n").encode()
        assert seen == [[b"SET", b"k", b"v"]]
    finally:
        fake.close()


def test_a_malformed_reply_closes_the_upstream(two):
    a, _ = two
    bad = iter([b"?what\r\n", b"$5\r\nabcdefg\r\n", b":1\r\n"])

    def script(conn, args):
        conn.sendall(next(bad))

    fake = FakeNode(script)
    try:
        raw = Raw(a.client_port)
        for _ in range(2):
            got = raw.call(*proxied(fake.addr, "SET", "k", "v"))
            assert got.startswith(
                f"-ERR the other cluster's node at {fake.addr} sent a "
                f"reply this node cannot pass on".encode()), got
        # A new connection after each: the third reply is fine.
        assert raw.call(*proxied(fake.addr, "SET", "k", "v")) == b":1\r\n"
        assert fake.connections == 3
        assert_serves(a)
    finally:
        fake.close()


def test_a_command_for_another_address_waits_for_the_replies_in_flight(two):
    a, _ = two
    events = []

    def slow(conn, args):
        time.sleep(0.3)
        events.append(("slow replies", args[1]))
        conn.sendall(b"+slow\r\n")

    def fast(conn, args):
        events.append(("fast receives", args[1]))
        conn.sendall(b"+fast\r\n")

    f1, f2 = FakeNode(slow), FakeNode(fast)
    try:
        raw = Raw(a.client_port)
        raw.sock.sendall(encode(*proxied(f1.addr, "GET", "1")) +
                         encode(*proxied(f1.addr, "GET", "2")) +
                         encode(*proxied(f2.addr, "GET", "3")) +
                         encode(*proxied(f1.addr, "GET", "4")))
        assert [raw.reply() for _ in range(4)] == [
            b"+slow\r\n", b"+slow\r\n", b"+fast\r\n", b"+slow\r\n"]
        assert events == [("slow replies", b"1"), ("slow replies", b"2"),
                          ("fast receives", b"3"), ("slow replies", b"4")]
        # One upstream at a time: f1's first connection was closed
        # before f2's was opened, and f2's before f1's second.
        assert (f1.connections, f2.connections) == (2, 1)
        d = Deadline(5, "the replaced upstreams to be closed")
        while (f1.closed, f2.closed) != (1, 1) and not d.expired():
            time.sleep(POLL_S)
        assert (f1.closed, f2.closed) == (1, 1)
    finally:
        f1.close()
        f2.close()


def test_unanswered_commands_time_out_and_the_in_flight_bound_holds(two):
    a, _ = two
    fake, received = silent_node()
    try:
        raw = Raw(a.client_port, timeout=60)
        limit = 10000  # PROXY_INFLIGHT_MAX
        raw.sock.sendall(b"".join(
            encode(*proxied(fake.addr, "SET", "k", str(i)))
            for i in range(limit + 1)))
        timed_out = (f"-ERR the other cluster's node at {fake.addr} did not "
                     f"answer within 10000 ms; the outcome is "
                     f"unknown\r\n").encode()
        for i in range(limit):
            assert raw.reply() == timed_out, i
        over = raw.reply()
        assert over.startswith(b"-TRYAGAIN 10000 commands of this "
                               b"connection wait"), over
        assert len(received) == limit
        assert_serves(a)
    finally:
        fake.close()


def test_a_client_leaving_closes_its_upstream(two):
    a, _ = two
    fake, received = silent_node()
    try:
        raw = Raw(a.client_port)
        raw.send(*proxied(fake.addr, "GET", "k"))
        d = Deadline(5, "the command to reach the fake node")
        while not received and not d.expired():
            time.sleep(POLL_S)
        assert received == [[b"GET", b"k"]]
        raw.close()
        d = Deadline(5, "the upstream to be closed")
        while fake.closed == 0 and not d.expired():
            time.sleep(POLL_S)
        assert fake.closed == 1
        assert_serves(a)
    finally:
        fake.close()
