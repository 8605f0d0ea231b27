"""Bad input on the client and peer ports: an error or a closed connection,
never a crash, and the node keeps serving everyone else."""

import re
import socket
import time

import peerwire
from conftest import (HOST, READY_TIMEOUT_S, REPO, Deadline, Node, POLL_S,
                      free_ports, resp, retry, wait_log)

REPLY_TIMEOUT_S = 5.0


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
    # Both ranges and both releases, in the reply and in the node's log.
    reason = reply["reason"]
    assert "no common peer protocol" in reason, reply
    assert "node 999 (release 9.0.0) speaks 1000..1001" in reason, reply
    assert re.search(rf"node {node.id} \(release \d+\.\d+\.\d+\) "
                     r"speaks \d+\.\.\d+", reason), reply
    wait_log(node, f"refused a peer connection from node 999: {reason}",
             since)
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


def test_peerwire_matches_the_proto():
    """Every field peerwire encodes has that number and wire type in
    proto/peer.proto."""
    text = (REPO / "proto" / "peer.proto").read_text()
    text = re.sub(r"//[^\n]*", "", text)
    schema = {}
    for name, body in re.findall(r"message\s+(\w+)\s*\{(.*?)\n\}", text,
                                 re.S):
        schema[name] = {
            field: (int(number), rep, typ)
            for rep, typ, field, number in re.findall(
                r"(repeated\s+)?(\w+)\s+(\w+)\s*=\s*(\d+)\s*;", body)}
    scalar = {"uint32", "uint64", "sint32", "bool"}
    for message, fields in peerwire.FIELDS.items():
        assert message in schema, f"{message} is not in peer.proto"
        for field, (number, wire) in fields.items():
            assert field in schema[message], f"{message}.{field}"
            want, _, typ = schema[message][field]
            assert number == want, f"{message}.{field}: {number} != {want}"
            assert (wire == peerwire.VARINT) == (typ in scalar), (
                f"{message}.{field} is a {typ}")


def test_bad_frame_after_the_handshake_is_skipped_and_logged(shared_cluster):
    node = shared_cluster.nodes[2]
    since = len(node.log_text())
    secret = shared_cluster.secret_file.read_bytes()
    # Every version of the table: the node picks its highest.
    s, reply = peerwire.open_peer(node.peer_port, 998, secret,
                                  release=(0, 1, 0), machine_max=1,
                                  proto_min=1)
    with s:
        assert reply is not None and reply["accepted"], reply
        assert reply["proven"], reply
        proto = reply["proto"]
        assert proto == min(peerwire.TREE_PROTO_MAX,
                            reply["self"]["proto_max"]), reply
        assert reply["self"]["node_id"] == node.id, reply
        assert reply["self"]["proto_min"] <= proto
        # A snapshot whose version state is not valid (machine version
        # 0): dropped with a reason, the connection and node carry on.
        s.sendall(peerwire.snapshot_frame(
            1, 998, node.id, 10, [1, 2, 3],
            versions=peerwire.version_state(0), proto=proto))
        wait_log(node, "dropped a frame from node 998 that does not decode "
                 f"in protocol {proto}: snapshot version state not valid",
                 since)
        s.settimeout(0.5)
        try:
            assert s.recv(4096) != b"", "the node closed the connection"
        except socket.timeout:
            pass  # still open, nothing to say: as it should be
    assert_serving(shared_cluster)


def test_frame_whose_checksum_differs_closes_the_link(shared_cluster):
    """Peer protocol 4: a frame whose checksum does not match its header
    and body (damaged on the way) is refused before anything decodes it:
    the node closes that connection, logging the peer and the reason, and
    carries on serving."""
    node = shared_cluster.nodes[2]
    since = len(node.log_text())
    secret = shared_cluster.secret_file.read_bytes()
    s, reply = peerwire.open_peer(node.peer_port, 996, secret)
    with s:
        assert reply is not None and reply["accepted"], reply
        assert reply["proven"], reply
        proto = reply["proto"]
        assert proto >= peerwire.CHECKSUMMED_SINCE, reply
        good = peerwire.raft_frame(peerwire.RAFT_VOTE, 1, 996, node.id,
                                   peerwire.vote(), proto=proto)
        bad = bytearray(good)
        bad[6] ^= 0x01  # a bit of the envelope, after the prefix
        s.sendall(bytes(bad))
        wait_log(node, "closing the connection from node 996: a frame's "
                 "checksum differs from its header and body (peer protocol "
                 f"{proto}); the frame was refused without decoding it",
                 since)
        d = Deadline(5, "the node to close the connection")
        s.settimeout(0.5)
        while not d.expired():
            try:
                if s.recv(65536) == b"":
                    break
            except ConnectionResetError:
                break
            except socket.timeout:
                pass
        else:
            d.fail()
    assert "does not decode" not in node.log_text()[since:]
    assert int(node.client().info()["peer_frames_bad_checksum"]) >= 1
    assert_serving(shared_cluster)


def test_dialler_refuses_a_version_outside_its_range(cluster):
    """A node that dials a peer answering with a protocol version outside
    the node's range refuses the connection: it says why to the peer and
    in its log, naming both ranges and both releases."""
    cport, pport = free_ports(2)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as fake:
        fake.bind((HOST, 0))
        fake.listen(4)
        fake.settimeout(READY_TIMEOUT_S)
        fake_addr = f"{HOST}:{fake.getsockname()[1]}"
        node = Node(cluster, 1, cport, pport)
        cluster.nodes[1] = node
        node.start(["--bootstrap", f"1={node.peer_addr}/{node.client_addr},"
                    f"2={fake_addr}/{HOST}:1"], wait=False)
        conn, _ = fake.accept()
        with conn:
            conn.settimeout(READY_TIMEOUT_S)
            hello = peerwire.read_handshake(conn)
            assert hello is not None and hello["node_id"] == 1, hello
            assert hello["proto_max"] < 7, hello
            ours = peerwire.handshake("baton", 2, 7, 7, release=(9, 0, 0),
                                      peer_addr=fake_addr)
            conn.sendall(peerwire.handshake_reply_frame(True, 7, "", ours))
            reply = peerwire.read_handshake_reply(conn)
    assert reply is not None, "closed without saying why"
    assert not reply["accepted"], reply
    reason = reply["reason"]
    rel = ".".join(str(p) for p in hello["release"])
    assert reason == (
        f"node 2 chose peer protocol version 7, outside the range of node "
        f"1: node 1 (release {rel}) speaks {hello['proto_min']}.."
        f"{hello['proto_max']}, node 2 (release 9.0.0) speaks 7..7"), reason
    wait_log(node, f"refused the connection to node 2: {reason}", 0)


def test_acceptor_logs_the_dialler_refusal(shared_cluster):
    """The other side of the check above: when the dialler refuses the
    version chosen for it, the node that accepted logs its reason and
    closes the connection."""
    node = shared_cluster.nodes[3]
    since = len(node.log_text())
    reason = ("node 3 chose peer protocol version 1, outside the range of "
              "node 997: node 997 (release 9.0.0) speaks 2..2, node 3 "
              "(release 0.1.0) speaks 1..1")
    # Peer authentication offered (a nonce): the node accepts and waits
    # for our proof, and hears our refusal instead.
    s, reply = peerwire.open_peer(node.peer_port, 997, release=(0, 1, 0),
                                  machine_max=1, nonce=bytes(32))
    with s:
        assert reply is not None and reply["accepted"], reply
        ours = peerwire.handshake("baton", 997, 2, 2, release=(9, 0, 0))
        s.sendall(peerwire.handshake_reply_frame(False, 0, reason, ours))
        wait_log(node, f"node 997 refused the connection: {reason}", since)
        # The node closes; it may first send frames of its own (Raft).
        d = Deadline(5, "the node to close the connection")
        while not d.expired():
            try:
                if s.recv(65536) == b"":
                    break
            except ConnectionResetError:
                break
            except socket.timeout:
                pass
        else:
            d.fail()
    assert_serving(shared_cluster)
