"""Where a client's write goes when leadership moves (docs/batond.md,
"Writes while leadership moves"): a write no leader appended is sent on to
the next leader instead of failing; a write with no leader known waits for
one; a node stopping answers the writes it took before it exits.

These tests send writes without any retry: an error reply fails them."""

import re
import signal
import socket
import threading
import time

import redis

from conftest import HOST, Deadline, retry

LOAD_THREADS_PER_NODE = 2
TRANSFERS = 6
WRITE_TIMEOUT_S = 10.0  # a parked write waits at most 2 election timeouts


def routing_stats(cluster):
    """Sum over the live nodes of INFO's writes_parked, writes_rerouted."""
    parked = rerouted = 0
    for m in cluster.alive():
        info = m.client().info()
        parked += int(info["writes_parked"])
        rerouted += int(info["writes_rerouted"])
    return parked, rerouted


class LoadThreads:
    """Threads running self.run(*args) until the `with` block ends."""

    JOIN_S = 3 * WRITE_TIMEOUT_S

    def __init__(self, runs):
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=a,
                                         daemon=True) for a in runs]

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=self.JOIN_S)
        assert not any(t.is_alive() for t in self.threads), \
            f"a thread of {type(self).__name__} did not stop"


def move_leadership_around(cluster, times):
    """Transfer leadership `times` times, each to another node, waiting
    (bounded) until it leads, with the load running 0.2 s in between."""
    time.sleep(0.3)
    for i in range(times):
        old = cluster.leader()
        target = [m for m in cluster.alive() if m is not old][i % 2]
        cluster.batonctl("transfer", target.id, node=old)
        d = Deadline(10, f"node {target.id} to lead")
        while cluster.find_leader() is not target and not d.expired():
            time.sleep(0.02)
        time.sleep(0.2)


class WriteLoad(LoadThreads):
    """Threads writing unique keys through given nodes, one SET at a time,
    with no retry: every reply is recorded, errors included."""

    def __init__(self, nodes, threads_per_node):
        super().__init__([(m, f"n{m.id}t{t}") for m in nodes
                          for t in range(threads_per_node)])
        self.lock = threading.Lock()
        self.acked = {}  # key -> value
        self.errors = []  # (node id, key, error text)

    def run(self, node, name):
        c = node.client(timeout=WRITE_TIMEOUT_S)
        for i in range(100_000):
            if self.stop.is_set():
                return
            key, value = f"{name}-{i}", f"v{i}"
            try:
                ok = c.set(key, value)
            except (redis.ResponseError, redis.ConnectionError,
                    redis.TimeoutError) as e:
                with self.lock:
                    self.errors.append((node.id, key, repr(e)))
                continue
            if ok:
                with self.lock:
                    self.acked[key] = value


def assert_all_readable(node, acked):
    c = node.client()
    keys = sorted(acked)
    for first in range(0, len(keys), 500):
        chunk = keys[first:first + 500]
        got = retry(lambda: c.mget(chunk), what="MGET of acknowledged keys")
        lost = [(k, acked[k], v) for k, v in zip(chunk, got)
                if v != acked[k]]
        assert not lost, f"acknowledged writes lost: {lost[:10]}"


def test_writes_during_leadership_transfers_get_no_error(cluster):
    """Writes through every node while leadership moves back and forth:
    none is refused. Before, those reaching the old leader during the
    hand-over, or a follower between the old leader stepping down and the
    new one's first heartbeat, got -TRYAGAIN."""
    cluster.start(3)
    with WriteLoad(cluster.alive(), LOAD_THREADS_PER_NODE) as load:
        move_leadership_around(cluster, TRANSFERS)
    assert not load.errors, f"writes refused: {load.errors[:10]}"
    assert len(load.acked) > 100, "the load made too few writes to tell"
    assert_all_readable(cluster.leader(), load.acked)
    parked, rerouted = routing_stats(cluster)
    print(f"{len(load.acked)} writes, {TRANSFERS} transfers: "
          f"{parked} parked, {rerouted} sent on")


class OrderedAppends(LoadThreads):
    """One connection per node pipelining `APPEND key ,i` for i = 1, 2, ...
    without waiting for the replies (at most IN_FLIGHT unanswered), in
    small sends, so that leadership may move between two of them. The
    writes of a connection take effect in the order sent, so the key must
    end up ",1,2,...,n", each exactly once, even when some of them were
    sent on to the next leader."""

    IN_FLIGHT = 400
    PER_SEND = 10

    def __init__(self, nodes):
        super().__init__([(m,) for m in nodes])
        self.problems = []
        self.sent = {}  # node id -> appends sent (all answered at the end)

    @staticmethod
    def append(key, i):
        v = f",{i}".encode()
        return b"*3\r\n$6\r\nAPPEND\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
            len(key), key, len(v), v)

    def run(self, node):
        key = f"order-{node.id}".encode()
        sock = socket.create_connection((HOST, node.client_port),
                                        timeout=WRITE_TIMEOUT_S)
        room = threading.Semaphore(self.IN_FLIGHT)
        answered = [0]

        def read_replies():
            buf = b""
            while True:
                try:
                    chunk = sock.recv(65536)
                except OSError as e:
                    self.problems.append(f"node {node.id}: {e!r}")
                    return
                if not chunk:
                    return
                buf += chunk
                *lines, buf = buf.split(b"\r\n")
                for line in lines:
                    if not line.startswith(b":"):
                        self.problems.append(f"node {node.id}: reply "
                                             f"{answered[0] + 1}: {line!r}")
                    answered[0] += 1
                    room.release()

        reader = threading.Thread(target=read_replies, daemon=True)
        reader.start()
        i = 0
        try:
            while not self.stop.is_set() and i < 200_000:
                out = b""
                for _ in range(self.PER_SEND):
                    if not room.acquire(timeout=WRITE_TIMEOUT_S):
                        self.problems.append(f"node {node.id}: no reply "
                                             f"for {WRITE_TIMEOUT_S} s")
                        return
                    i += 1
                    out += self.append(key, i)
                sock.sendall(out)
            self.sent[node.id] = i
            d = Deadline(WRITE_TIMEOUT_S, f"node {node.id}'s replies")
            while answered[0] < i and not self.problems and not d.expired():
                time.sleep(0.01)
            if answered[0] < i:
                self.problems.append(f"node {node.id}: {answered[0]} of "
                                     f"{i} appends answered")
        finally:
            sock.shutdown(socket.SHUT_RDWR)  # the reader sees the end
            reader.join(timeout=5)
            sock.close()


def test_pipelined_writes_keep_their_order_across_transfers(cluster):
    cluster.start(3)
    with OrderedAppends(cluster.alive()) as load:
        move_leadership_around(cluster, TRANSFERS)
    assert not load.problems, load.problems[:10]
    c = cluster.leader().client()
    for node_id, n in sorted(load.sent.items()):
        assert n > 1000, f"node {node_id}: only {n} appends"
        got = retry(lambda: c.get(f"order-{node_id}")).split(",")[1:]
        values = [int(x) for x in got]
        out_of_order = [(a, b) for a, b in zip(values, values[1:])
                        if b != a + 1]
        assert not out_of_order, (
            f"node {node_id}: appends out of order or repeated "
            f"(pairs {out_of_order[:10]})")
        assert values == list(range(1, n + 1)), (
            f"node {node_id}: {len(values)} appends applied of {n} "
            f"answered")
    parked, rerouted = routing_stats(cluster)
    print(f"appends per node {load.sent}, {TRANSFERS} transfers: "
          f"{parked} parked, {rerouted} sent on")


def test_write_on_a_follower_waits_for_the_next_leader(cluster):
    """The leader is killed: a write sent to a follower right after waits
    for the election and is acknowledged, rather than refused."""
    leader = cluster.start(3)
    follower = [m for m in cluster.alive() if m is not leader][0]
    c = follower.client(timeout=WRITE_TIMEOUT_S)
    assert retry(lambda: c.set("before", "1"))
    leader.kill9()
    assert c.set("during-election", "2") is True
    assert c.get("during-election") == "2"
    parked, _ = routing_stats(cluster)
    assert parked >= 1, "the write did not wait for a leader (INFO)"


def send_pipelined_sets(sock, prefix, n):
    out = b"".join(
        b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\n1\r\n" % (
            len(f"{prefix}{i}"), f"{prefix}{i}".encode())
        for i in range(n))
    sock.sendall(out)


def read_replies(sock, timeout):
    """Every reply line until the node closes the connection."""
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data.split(b"\r\n")[:-1], "reset"
        if not chunk:
            return data.split(b"\r\n")[:-1], "closed"
        data += chunk


def test_sigterm_answers_the_writes_it_took_then_closes(cluster):
    """SIGTERM to the leader while a client has writes in flight on it:
    each write it read is answered +OK (the hand-over sends those waiting
    in its pipeline on to the new leader) before the connection closes;
    none is answered with an error."""
    leader = cluster.start(3)
    sock = socket.create_connection((HOST, leader.client_port), timeout=5)
    batch = 20000
    try:
        send_pipelined_sets(sock, "warm-", 10)
        time.sleep(0.2)
        # sendall returns once the node has read most of the batch: it is
        # proposing them when the signal comes.
        send_pipelined_sets(sock, "b-", batch)
        leader.proc.send_signal(signal.SIGTERM)
        lines, how = read_replies(sock, timeout=15)
    finally:
        sock.close()
    assert leader.proc.wait(timeout=15) == 0
    leader.exit_codes.append(0)
    bad = [x for x in lines if x != b"+OK"]
    assert not bad, f"replies other than +OK: {bad[:5]}"
    assert len(lines) >= 10, f"only {len(lines)} replies ({how})"
    # The replies came in request order: the first len(lines) writes.
    sent = [f"warm-{i}" for i in range(10)] + [
        f"b-{i}" for i in range(batch)]
    acked = {k: "1" for k in sent[:len(lines)]}
    new = cluster.leader(exclude=(leader,))
    assert_all_readable(new, acked)
    print(f"{len(lines)} of {len(sent)} writes answered before the close "
          f"({how})")


def test_a_lone_node_exits_on_sigterm_without_waiting_for_a_hand_over(
        cluster):
    node = cluster.start(1)
    assert retry(lambda: node.client().set("k", "v"))
    assert node.terminate() == 0
    log = node.log_text()
    assert re.search(r"no hand-over \([^)]*\): exiting as the leader", log), \
        log[-2000:]
