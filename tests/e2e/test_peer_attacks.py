"""Attacks on the peer port (issue 13), each refused: a stranger without the
cluster's peer secret, a forwarded write that skips the client password,
made-up node ids filling the peer table, a huge frame before the
handshake, a node with another secret or none, and a node listening for
peers beyond loopback without a secret.

Every cluster here runs with a generated peer secret (conftest); the
attacker speaks the peer protocol with peerwire."""

import os
import socket
import struct
import subprocess
import time

import redis

import peerwire
from conftest import (BATOND, HOST, POLL_S, READY_TIMEOUT_S, Deadline,
                      free_ports, make_secret_file, require_binary, retry,
                      wait_log)

TERM_MAX = 2**64 - 1


def info_field(node, name):
    info = node.client().info()  # redis-py parses INFO into a dict
    assert name in info, f"no {name} in INFO of {node}"
    return info[name]


def closed(sock, timeout=2.0):
    """Whether the other end closes the connection within timeout (frames
    it sends before are skipped)."""
    sock.settimeout(timeout)
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            if sock.recv(65536) == b"":
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def assert_healthy(cluster, term_before):
    """A leader in a term near the one before (never the attacker's), and
    writes still go through."""
    lead = cluster.leader()
    term = int(lead.info()["term"])
    assert term < term_before + 100, (term_before, term)
    c = lead.client()
    retry(lambda: c.set("after-the-attack", "ok"))
    assert retry(lambda: c.get("after-the-attack")) == "ok"
    return lead


# ---- (a) a stranger without the secret -----------------------------------


def test_stranger_without_the_secret_cannot_raise_the_term(cluster):
    lead = cluster.start(3)
    term = int(lead.info()["term"])
    for node in cluster.nodes.values():
        since = len(node.log_text())
        # No proof offered: refused at the handshake, with the reason.
        s, reply = peerwire.open_peer(node.peer_port, 1000 + node.id)
        with s:
            assert reply is not None and not reply["accepted"], reply
            assert "peer authentication failed" in reply["reason"], reply
            assert reply["cluster"] is None, "a view for a stranger"
            for typ, body in ((peerwire.RAFT_APPEND, peerwire.append()),
                              (peerwire.RAFT_VOTE, peerwire.vote(10**6,
                                                                 TERM_MAX))):
                try:
                    s.sendall(peerwire.raft_frame(typ, TERM_MAX,
                                                  1000 + node.id, node.id,
                                                  body))
                except (BrokenPipeError, ConnectionResetError):
                    pass
        wait_log(node, "peer authentication failed", since)
        # A made-up secret: the node proves itself, ours does not check.
        s, reply = peerwire.open_peer(node.peer_port, 2000 + node.id,
                                      secret=os.urandom(32))
        with s:
            assert reply is not None and reply["accepted"], reply
            assert not reply["proven"], "the node proved a secret it lacks"
            try:
                s.sendall(peerwire.handshake_auth_frame(os.urandom(32)))
                s.sendall(peerwire.raft_frame(
                    peerwire.RAFT_APPEND, TERM_MAX, 2000 + node.id, node.id,
                    peerwire.append()))
            except (BrokenPipeError, ConnectionResetError):
                pass
            assert closed(s), "the node kept an unproven connection open"
    for node in cluster.nodes.values():
        assert int(node.info()["term"]) < TERM_MAX
        assert int(info_field(node, "peer_auth_failed")) >= 2
    after = assert_healthy(cluster, term)
    assert int(after.info()["term"]) < 2**32


def test_a_stranger_learns_no_cluster_uuid(cluster):
    """A dialler that has proved nothing, claiming another cluster's UUID
    or none, is told neither the cluster's UUID (in the refusal's text) nor
    sent it (in the reply's own handshake); the node logs both."""
    lead = cluster.start(3)
    d = Deadline(10, "the leader to know its cluster uuid")
    while lead.info()["cluster_uuid"] in ("", "-"):
        if d.expired():
            d.fail()
        time.sleep(POLL_S)
    uuid = lead.info()["cluster_uuid"]
    raw = bytes.fromhex(uuid.replace("-", ""))
    since = len(lead.log_text())
    for claim, proof in ((os.urandom(16), os.urandom(32)),
                         (os.urandom(16), None), (None, os.urandom(32))):
        s = peerwire.connect(lead.peer_port)
        with s:
            s.sendall(peerwire.handshake_frame(
                "baton", 4321, peerwire.TREE_PROTO_MIN,
                peerwire.TREE_PROTO_MAX, peerwire.TREE_RELEASE,
                peerwire.TREE_MACHINE_MAX, nonce=proof, cluster_uuid=claim))
            reply = peerwire.read_handshake_reply(s)
        assert reply is not None
        assert uuid not in reply["reason"], reply["reason"]
        assert reply["self"]["cluster_uuid"] in (None, b""), reply["self"]
        assert raw not in repr(reply).encode()
    wait_log(lead, f"(uuid {uuid})", since)


# ---- (b) a forward without the client's password -------------------------


def test_forward_without_the_password_is_refused(cluster):
    lead = cluster.start(3, password="sesame")
    c = lead.client()
    follower, gone = [m for m in cluster.alive() if m is not lead]
    # The attacker speaks for a member that is down (a member's id: nodes
    # not in the configuration are not heard at all; one that is down:
    # the real one would take its connection back).
    assert gone.terminate() == 0
    # Without the secret nobody gets as far as a Forward.
    s, reply = peerwire.open_peer(lead.peer_port, 999)
    with s:
        assert not reply["accepted"], reply
        try:
            s.sendall(peerwire.forward_frame(1, ["SET", "k", "pwned"]))
        except (BrokenPipeError, ConnectionResetError):
            pass
    # A node holding the secret (a member's id: non-members are not heard
    # at all) still needs its client's password.
    secret = cluster.secret_file.read_bytes()
    s, reply = peerwire.open_peer(lead.peer_port, gone.id, secret)
    with s:
        assert reply["accepted"] and reply["proven"], reply
        s.sendall(peerwire.forward_frame(7, ["SET", "k", "pwned"]))
        got = peerwire.read_forward_reply(s)
        assert got is not None, "no answer to the forward"
        rid, resp, err = got
        assert rid == 7 and err is None, got
        assert resp.startswith(b"-NOAUTH"), resp
        wrong = peerwire.client_auth_proof("not-sesame")
        s.sendall(peerwire.forward_frame(8, ["SET", "k", "pwned"], wrong))
        rid, resp, err = peerwire.read_forward_reply(s)
        assert rid == 8 and resp.startswith(b"-NOAUTH"), resp
        # The right proof is what a follower sends for its clients.
        right = peerwire.client_auth_proof("sesame")
        s.sendall(peerwire.forward_frame(9, ["SET", "k2", "fine"], right))
        rid, resp, err = peerwire.read_forward_reply(s)
        assert rid == 9 and resp == b"+OK\r\n", (resp, err)
    assert retry(lambda: c.get("k")) is None
    assert retry(lambda: c.get("k2")) == "fine"
    wait_log(lead, f"refused a write forwarded by node {gone.id}")
    # A follower's own clients still write through it.
    fc = follower.client()
    retry(lambda: fc.set("via-follower", "yes"))
    assert retry(lambda: c.get("via-follower")) == "yes"


# ---- (c) made-up ids filling the peer table --------------------------------


def test_made_up_ids_do_not_lock_out_a_new_learner(cluster):
    lead = cluster.start(3)
    secret = cluster.secret_file.read_bytes()
    socks = []
    try:
        # 62 strangers without the secret: refused, no slot taken.
        for i in range(62):
            s, reply = peerwire.open_peer(lead.peer_port, 5000 + i)
            assert not reply["accepted"], reply
            socks.append(s)
        # 62 made-up ids with the secret, kept connected: with the two
        # other members they fill the leader's 64 slots.
        for i in range(62):
            s, reply = peerwire.open_peer(lead.peer_port, 6000 + i, secret)
            assert reply["accepted"] and reply["proven"], reply
            socks.append(s)
        # Raft from them is not heard: they are not members.
        s = socks[-1]
        s.sendall(peerwire.raft_frame(peerwire.RAFT_APPEND, TERM_MAX, 6061,
                                      lead.id, peerwire.append()))
        d = Deadline(10, "the dropped message to be counted")
        while not d.expired():
            if int(info_field(lead, "peer_msgs_dropped_not_member")) > 0:
                break
            time.sleep(POLL_S)
        else:
            d.fail()
        assert int(lead.info()["term"]) < TERM_MAX
        wait_log(lead, "not members of this node's configuration")
        # A real learner added now is replicated to.
        joiner = cluster.new_joiner()
        cluster.batonctl("add", joiner.id, joiner.peer_addr,
                         joiner.client_addr, node=lead)
        c = lead.client()
        retry(lambda: c.set("for-the-learner", "hello"))
        commit = int(lead.info()["commit"])
        cluster.wait_applied(joiner, commit)
    finally:
        for s in socks:
            s.close()


# ---- (d) a huge frame before the handshake ----------------------------------


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def test_huge_frame_before_the_handshake_is_refused_at_once(cluster):
    lead = cluster.start(3)
    term = int(lead.info()["term"])
    node = next(m for m in cluster.alive() if m is not lead)
    rss_before = vm_rss_kib(node.proc.pid)
    since = len(node.log_text())
    chunk = b"\0" * (1 << 20)
    for _ in range(16):
        s = peerwire.connect(node.peer_port)
        with s:
            s.sendall(struct.pack("<I", 64 << 20))
            # Closed at once: not after the handshake timeout (10 s).
            assert closed(s, timeout=3.0), "a 64 MiB prefix was accepted"
            # Whatever follows is not buffered.
            try:
                for _ in range(4):
                    s.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError, socket.timeout):
                pass
    wait_log(node, "exceeds the limit", since)
    grown = vm_rss_kib(node.proc.pid) - rss_before
    assert grown < 8 * 1024, f"VmRSS grew by {grown} KiB"
    assert_healthy(cluster, term)



def test_a_flood_of_bad_handshakes_logs_a_few_lines(cluster):
    """Repeated garbage on the peer port is counted, not written out line
    by line: at most one line a second per kind, then "(N more since)"."""
    lead = cluster.start(3)
    term = int(lead.info()["term"])
    node = cluster.node(2)
    since = len(node.log_text())
    needle = "its first frame is not a valid handshake"
    for _ in range(200):
        with peerwire.connect(node.peer_port) as s:
            s.sendall(struct.pack("<I", 3) + b"\xff\xff\xff")
            closed(s, timeout=2.0)
    wait_log(node, needle, since)
    time.sleep(1.1)  # the next window
    with peerwire.connect(node.peer_port) as s:
        s.sendall(struct.pack("<I", 3) + b"\xff\xff\xff")
        closed(s, timeout=2.0)
    wait_log(node, "more since)", since)
    lines = [ln for ln in node.log_text()[since:].splitlines()
             if needle in ln]
    # 201 bad handshakes in a few seconds: one line per second at most.
    assert 2 <= len(lines) <= 10, (len(lines), lines[:3])
    assert_healthy(cluster, term)

# ---- (e) a node with another secret, or none -------------------------------


def test_node_with_another_secret_or_none_is_kept_out(cluster):
    lead = cluster.start(3)
    term = int(lead.info()["term"])
    n3 = cluster.node(3)
    if n3 is lead:
        cluster.batonctl("transfer", node=lead)
        d = Deadline(10, "node 3 to hand leadership over")
        while not d.expired() and n3.info()["role"] == "leader":
            time.sleep(POLL_S)
    others = [m for m in cluster.nodes.values() if m is not n3]
    for secret_file in (make_secret_file(cluster.root / "other-secret"),
                        None):
        assert n3.terminate() == 0
        since = {m.id: len(m.log_text()) for m in cluster.nodes.values()}
        n3.secret_file = secret_file
        n3.start()
        c = cluster.leader(exclude=[n3]).client()
        retry(lambda: c.set("without-node-3", "x"))
        wait_log(n3, "peer authentication failed", since[3])
        for m in others:
            wait_log(m, "peer authentication failed", since[m.id])
        applied = int(cluster.leader(exclude=[n3]).info()["commit"])
        time.sleep(1.0)
        assert int(n3.info()["applied"]) < applied, (
            "a node without the cluster's secret received its log")
        assert int(n3.info()["term"]) < 2**32
    # With the cluster's secret again it catches up.
    assert n3.terminate() == 0
    n3.secret_file = cluster.secret_file
    n3.start()
    commit = int(cluster.leader().info()["commit"])
    cluster.wait_applied(n3, commit)
    assert_healthy(cluster, term)
    secret = cluster.secret_file.read_bytes()
    for m in cluster.nodes.values():
        assert secret.hex() not in m.log_text(), "secret material in a log"


# ---- (f) listening for peers beyond loopback -------------------------------


def start_alone(tmp_path, peer_host, extra):
    cport, pport = free_ports(2)
    peer = f"{peer_host}:{pport}"
    cmd = [str(BATOND), "--id", "1", "--listen", f"{HOST}:{cport}",
           "--peer-listen", peer, "--data", str(tmp_path / f"data{cport}"),
           "--bootstrap", f"1={peer}/{HOST}:{cport}"] + extra
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True), cport


def refused(tmp_path, extra):
    p, _ = start_alone(tmp_path, "0.0.0.0", extra)
    try:
        out, err = p.communicate(timeout=READY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError(f"batond {' '.join(extra)} started")
    assert p.returncode == 2, (p.returncode, err)
    return err


def serves(tmp_path, extra):
    p, cport = start_alone(tmp_path, "0.0.0.0", extra)
    try:
        d = Deadline(READY_TIMEOUT_S, "batond to answer PING")
        while not d.expired():
            assert p.poll() is None, p.communicate()[1]
            try:
                if redis.Redis(host=HOST, port=cport,
                               socket_timeout=1.0).ping():
                    return
            except redis.ConnectionError:
                pass
            time.sleep(POLL_S)
        d.fail()
    finally:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_peers_beyond_loopback_need_a_secret(tmp_path):
    require_binary(BATOND)
    err = refused(tmp_path, [])
    assert "not a loopback address" in err and "--insecure-peers" in err, err
    assert "--peer-secret-file" in err, err
    # A secret file others may read is refused too, and an empty one.
    loose = make_secret_file(tmp_path / "loose")
    os.chmod(loose, 0o644)
    err = refused(tmp_path, ["--peer-secret-file", str(loose)])
    assert "chmod 600" in err, err
    empty = tmp_path / "empty"
    empty.touch(mode=0o600)
    err = refused(tmp_path, ["--peer-secret-file", str(empty)])
    assert "is empty" in err, err
    # The secret itself is never an option.
    err = refused(tmp_path, ["--peer-secret", "hunter2hunter2hunter2"])
    assert "--peer-secret-file" in err, err
    # With a secret, or when told, it runs.
    serves(tmp_path, ["--peer-secret-file",
                      str(make_secret_file(tmp_path / "ok"))])
    serves(tmp_path, ["--insecure-peers"])
