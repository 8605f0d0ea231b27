"""Bad input on the client and peer ports: an error or a closed connection,
never a crash, and the node keeps serving everyone else."""

import socket
import time

import peerwire
from conftest import HOST, Deadline, POLL_S, retry

REPLY_TIMEOUT_S = 5.0


def resp(*args):
    """A command as a RESP array of bulk strings."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def send_raw(port, data, timeout=REPLY_TIMEOUT_S):
    """Send bytes on a fresh connection; return the first reply line, or
    b"" if the node closed the connection without one. A node that neither
    answers nor closes within the timeout fails the test."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.settimeout(timeout)
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we were still sending: read what came
        got = b""
        try:
            while b"\r\n" not in got:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except ConnectionResetError:
            pass
        except socket.timeout:
            raise AssertionError(
                f"no reply and no close within {timeout} s after sending "
                f"{data[:60]!r} (got {got!r})")
        return got.split(b"\r\n")[0]


def assert_error_or_closed(reply, what):
    assert reply == b"" or reply.startswith(b"-ERR"), (
        f"{what}: expected an -ERR reply or a closed connection, got "
        f"{reply!r}")


def assert_serving(cluster, bystander=None):
    """Every live node answers, writes and reads still work, and a client
    connected before the bad input is still served."""
    if bystander is not None:
        assert bystander.ping()
    for m in cluster.alive():
        c = m.client()
        assert c.ping()
        assert retry(lambda: c.set(f"still-serving-{m.id}", "1"))
        assert retry(lambda: c.get(f"still-serving-{m.id}")) == "1"


def test_garbage_bytes_on_the_client_port(shared_cluster):
    node = shared_cluster.leader()
    bystander = node.client()
    assert bystander.ping()
    cases = {
        "binary garbage": bytes(range(256)) + b"\r\n",
        "garbage with no line end": b"\x00\xff\xfe\xfd" * 64,
        "bulk not ended by CRLF": b"*1\r\n$3\r\nabcXY\r\n",
        "bad bulk prefix": b"*1\r\n!3\r\nabc\r\n",
        "negative array length": b"*-5\r\n$3\r\nabc\r\n",
        "non-numeric length": b"*x\r\n",
    }
    for what, data in cases.items():
        if what == "garbage with no line end":
            # No line end yet: the node may wait for more, so close our
            # side and check only that it copes.
            with socket.create_connection((HOST, node.client_port)) as s:
                s.sendall(data)
            continue
        assert_error_or_closed(send_raw(node.client_port, data), what)
    assert_serving(shared_cluster, bystander)


def test_oversized_bulk_and_array_lengths(shared_cluster):
    node = shared_cluster.nodes[1]
    bystander = node.client()
    assert bystander.ping()
    cases = {
        "bulk of 10 GB": b"*1\r\n$10000000000\r\n",
        "bulk of 2^63": b"*2\r\n$3\r\nGET\r\n$9223372036854775807\r\n",
        "bulk beyond int64": b"*1\r\n$99999999999999999999999\r\n",
        "array of 2^31 elements": b"*2147483648\r\n",
        "inline line of 1 MiB": b"A" * (1 << 20) + b"\r\n",
    }
    for what, data in cases.items():
        assert_error_or_closed(send_raw(node.client_port, data), what)
    assert_serving(shared_cluster, bystander)


def test_unknown_command_gets_an_error(shared_cluster):
    node = shared_cluster.nodes[2]
    reply = send_raw(node.client_port, resp("NOSUCHCOMMAND", "x"))
    assert reply.startswith(b"-ERR") and b"unknown command" in reply, reply
    # An unknown command does not end the connection: the next one works.
    with socket.create_connection((HOST, node.client_port), timeout=5) as s:
        s.settimeout(5)
        s.sendall(resp("FOO") + resp("PING"))
        got = b""
        d = Deadline(5, "two replies")
        while got.count(b"\r\n") < 2 and not d.expired():
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        lines = got.split(b"\r\n")
        assert lines[0].startswith(b"-ERR"), got
        assert lines[1] == b"+PONG", got
    assert_serving(shared_cluster)


def test_wrong_arity_gets_an_error(shared_cluster):
    node = shared_cluster.nodes[3]
    for args in [("GET",), ("SET", "k"), ("GET", "a", "b"), ("INCRBY", "k"),
                 ("MSET", "a"), ("DEL",), ("BATON.PROMOTE",),
                 ("BATON.ADD", "4")]:
        reply = send_raw(node.client_port, resp(*args))
        assert reply.startswith(b"-ERR"), f"{args}: {reply!r}"
        assert b"wrong number of arguments" in reply or \
            b"syntax" in reply, f"{args}: {reply!r}"
    assert_serving(shared_cluster)


def wait_log(node, needle, since, timeout=5.0):
    d = Deadline(timeout, f"{needle!r} in {node}'s log")
    while not d.expired():
        if needle in node.log_text()[since:]:
            return
        time.sleep(POLL_S)
    d.fail(node.log_text()[since:][-2000:])


def test_garbage_on_the_peer_port_is_refused_and_logged(shared_cluster):
    node = shared_cluster.nodes[1]
    since = len(node.log_text())
    # A length prefix above the frame limit: the node must close.
    with peerwire.connect(node.peer_port) as s:
        s.sendall(b"\xff\xff\xff\x7f" + b"garbage" * 10)
        try:
            assert s.recv(4096) == b"", "expected the node to close"
        except ConnectionResetError:
            pass
    wait_log(node, "exceeds the limit", since)
    # A small frame that is not a protobuf Envelope.
    since = len(node.log_text())
    with peerwire.connect(node.peer_port) as s:
        s.sendall(b"\x08\x00\x00\x00" + b"\xff" * 8)
        try:
            assert s.recv(4096) == b"", "expected the node to close"
        except ConnectionResetError:
            pass
    # The refusal should be in the log too, as for the oversized frame.
    d = Deadline(5, "a log line about the malformed handshake")
    while not d.expired():
        new = node.log_text()[since:].lower()
        if "malformed" in new or "handshake" in new:
            break
        time.sleep(POLL_S)
    else:
        d.fail("the node closed a peer connection whose first frame was not "
               "a handshake without logging why; its log since: "
               f"{node.log_text()[since:][-2000:]!r}")
    assert_serving(shared_cluster)


def test_peer_with_no_common_protocol_is_refused(shared_cluster):
    node = shared_cluster.nodes[2]
    since = len(node.log_text())
    with peerwire.connect(node.peer_port) as s:
        # A future release that speaks only protocols 1000..1001.
        s.sendall(peerwire.handshake_frame("baton", 999, 1000, 1001,
                                           release=(9, 0, 0)))
        reply = peerwire.read_handshake_reply(s)
    assert reply is not None, "closed without a HandshakeReply"
    assert not reply["accepted"], reply
    assert "no common peer protocol" in reply["reason"], reply
    assert "1000..1001" in reply["reason"], reply
    wait_log(node, "no common peer protocol", since)
    assert_serving(shared_cluster)


def test_peer_of_another_cluster_is_refused(shared_cluster):
    node = shared_cluster.nodes[3]
    since = len(node.log_text())
    with peerwire.connect(node.peer_port) as s:
        s.sendall(peerwire.handshake_frame("not-baton", 999, 1, 1))
        reply = peerwire.read_handshake_reply(s)
    assert reply is not None, "closed without a HandshakeReply"
    assert not reply["accepted"], reply
    assert "not-baton" in reply["reason"], reply
    wait_log(node, "refused a peer connection", since)
    assert_serving(shared_cluster)
