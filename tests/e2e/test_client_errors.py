"""Every error a client can see is documented, and a rolling upgrade
answers clients only with errors docs/clients.md calls retryable (issue
28, problem 4).

- The server's sources are scanned for every error reply prefix and every
  -TRYAGAIN text: each must be in docs/clients.md ("Errors").
- A node below the release floor (stopped applying for want of a newer
  release) routes its clients' commands to the leader, and while no leader
  is known it waits like any follower: it never answers -STALLED.
- A long rolling run: 3 nodes rolled across releases with --as-release,
  each step leaving the old leader below the floor while leadership is
  handed over several times and the leader is once killed (an election), under a bounded SET/GET load from clients
  pinned to every node. Every reply is read raw off the socket; any error
  not in the documented retryable list fails the test, and so does a GET
  that does not return the value its client's acknowledged SET wrote.
"""

import random
import re
import socket
import threading
import time
from pathlib import Path

import pytest
import redis

from conftest import (HOST, Deadline, POLL_S, release_table, resp,
                      rolling_target)

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "clients.md"
RELEASES = release_table()
LAST = rolling_target()  # the newest an older release rolls to (1.3.0)
FIRST = "1.1.0"  # the path FIRST -> ... -> LAST raises the floor each step
OPS_MAX = 40000  # per client: the load is bounded
TRANSFERS = 10  # hand-overs while a node is below the floor, per step
STEP_S = 40.0  # bound of each wait of the roll
SERVED_PER_TRANSFER = 50  # ops the below-floor node's clients complete


# ---- the documented list ------------------------------------------------------


def doc_section():
    text = DOC.read_text()
    start = text.index("## Errors")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def documented_prefixes():
    """The first column of the prefix table: {"TRYAGAIN": True, ...}."""
    out = {}
    for line in doc_section().splitlines():
        m = re.match(r"\| (`-[A-Z]+`(?:, `-[A-Z]+`)*) \| (yes|no)", line)
        if m:
            for p in re.findall(r"`-([A-Z]+)`", m.group(1)):
                out[p] = m.group(2) == "yes"
    return out


def documented_tryagain():
    """Regexes of every documented -TRYAGAIN text (`...` varies)."""
    pats = []
    for line in doc_section().splitlines():
        if not line.startswith("| `-TRYAGAIN"):
            continue
        first = line.split(" | ")[0]
        for text in re.findall(r"`-(TRYAGAIN [^`]*)`", first):
            parts = [re.escape(p) for p in text.split("...")]
            pats.append(re.compile("^" + ".*".join(parts) + "$"))
    return pats


def retryable(error, pats):
    """Is this raw error line (without '-') documented as retryable?"""
    return any(p.match(error) for p in pats)


def source_files():
    for folder in ("src/server", "src/kv"):
        for f in sorted((REPO / folder).glob("*.[ch]")):
            yield f


def test_docs_list_every_error_prefix_and_tryagain_text():
    prefixes = documented_prefixes()
    assert prefixes.get("TRYAGAIN") is True, prefixes
    assert prefixes.get("STALLED") is False, prefixes
    pats = documented_tryagain()
    assert len(pats) >= 10, pats
    doc = doc_section()
    missing_prefix, missing_text = set(), []
    for f in source_files():
        src = f.read_text()
        # An error reply: resp_error(b, "WORD ..."), or raw "-WORD ..."
        # bytes (the peer protocol's and kv's fixed replies).
        for m in re.finditer(r'resp_error\([^;"]*"([A-Z]{2,})[ "]', src):
            if m.group(1) not in prefixes:
                missing_prefix.add((f.name, m.group(1)))
        for m in re.finditer(r'"-([A-Z]{2,}) ', src):
            if m.group(1) not in prefixes:
                missing_prefix.add((f.name, m.group(1)))
        # Every -TRYAGAIN text: its first literal piece (up to a format
        # directive) is in the table.
        for m in re.finditer(r'"-?TRYAGAIN ([^"%\\]*)', src):
            piece = m.group(1).strip()
            if piece and piece not in doc:
                missing_text.append((f.name, piece))
    assert not missing_prefix, f"not in docs/clients.md: {missing_prefix}"
    assert not missing_text, f"not in docs/clients.md: {missing_text}"


# ---- a raw client -------------------------------------------------------------


class Raw:
    """One RESP connection; replies as (kind, text): '+', '-', '$', ':'."""

    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def call(self, *args):
        self.sock.sendall(resp(*args))
        line = self._line()
        kind, rest = line[:1].decode(), line[1:].decode()
        if kind == "$":
            n = int(rest)
            if n < 0:
                return "$", None
            while len(self.buf) < n + 2:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed")
                self.buf += chunk
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return "$", data.decode()
        return kind, rest


class Load(threading.Thread):
    """SETs fresh keys and GETs earlier ones through one node, for as long
    as the run lasts (bounded); every reply is checked."""

    def __init__(self, name, node, pats, seed):
        super().__init__(daemon=True)
        self.name_ = name
        self.node = node
        self.pats = pats
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.acked = {}
        self.ops = 0  # replies received
        self.bad = []  # (command, reply) not allowed
        self.retried = {}  # documented retryable errors seen, by text
        self.stalled_ops = 0  # ops answered while the node was stalled
        self.stalled = threading.Event()  # set by the test

    def record_error(self, cmd, text):
        if retryable(text, self.pats):
            key = text[:60]
            self.retried[key] = self.retried.get(key, 0) + 1
        else:
            self.bad.append((cmd, text))

    def one(self, conn, n):
        if n % 2 == 0 or not self.acked:
            key, value = f"{self.name_}-{n}", f"v{n}"
            kind, text = conn.call("SET", key, value)
            self.ops += 1
            if kind == "+" and text == "OK":
                self.acked[key] = value
            elif kind == "-":
                self.record_error(("SET", key), text)
            else:
                self.bad.append((("SET", key), f"{kind}{text}"))
        else:
            key = self.rng.choice(list(self.acked))
            kind, text = conn.call("GET", key)
            self.ops += 1
            if kind == "-":
                self.record_error(("GET", key), text)
            elif kind != "$" or text != self.acked[key]:
                self.bad.append((("GET", key), f"{kind}{text!r} instead of "
                                 f"{self.acked[key]!r}"))
        if self.stalled.is_set():
            self.stalled_ops += 1

    def run(self):
        conn, n = None, 0
        while not self.stop.is_set() and n < OPS_MAX:
            try:
                if conn is None:
                    conn = Raw(self.node.client_port)
                self.one(conn, n)
                n += 1
            except OSError:  # the node restarts: its outcome is unknown
                if conn is not None:
                    conn.close()
                conn = None
                n += 1  # a fresh key: the lost one may have been written
                time.sleep(0.05)
        if conn is not None:
            conn.close()


# ---- the cluster --------------------------------------------------------------


def restart(node, release):
    """SIGTERM, then start again on the same data at `release`."""
    assert node.terminate() == 0
    args = list(node.args)
    if "--as-release" in args:
        i = args.index("--as-release")
        del args[i:i + 2]
    node.start(args + ["--as-release", release])


def start_at(cluster, release):
    lead = cluster.start(3, extra=["--as-release", release])
    i = cluster.common_args.index("--as-release")
    del cluster.common_args[i:i + 2]
    for m in cluster.nodes.values():
        m.args += ["--as-release", release]
    return lead


def node_field(node, name):
    try:
        return node.info(timeout=1.0).get(name)
    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
        return None


def wait_until(what, check, timeout=STEP_S):
    d = Deadline(timeout, what)
    while True:
        v = check()
        if v:
            return v
        if d.expired():
            d.fail()
        time.sleep(POLL_S)


def leader_id(cluster):
    m = cluster.find_leader()
    return m.id if m is not None else None


def path():
    return RELEASES[RELEASES.index(FIRST):RELEASES.index(LAST) + 1]


def test_a_below_floor_node_with_no_leader_waits_and_never_says_stalled(
        cluster):
    """Problem 4 at its simplest: the node left below the floor loses every
    other node. Its clients' commands wait for a leader (the retryable
    -TRYAGAIN once they waited two election timeouts), never -STALLED;
    once a leader is back it serves them again."""
    rel = path()
    assert len(rel) >= 2, rel
    old, new = rel[0], rel[1]
    lead = start_at(cluster, old)
    pats = documented_tryagain()
    others = [m for m in cluster.alive() if m is not lead]
    for m in others:
        restart(m, new)
    wait_until("a node of the new release to lead",
               lambda: leader_id(cluster) in {m.id for m in others})
    wait_until(f"{lead} to stop below the floor",
               lambda: node_field(lead, "stalled_index") not in (None, "0"))
    c = Raw(lead.client_port)
    assert c.call("SET", "k", "1") == ("+", "OK")
    assert c.call("GET", "k") == ("$", "1")
    for m in others:
        m.kill9()
    wait_until(f"{lead} to know no leader",
               lambda: node_field(lead, "leader") == "0")
    for cmd in (("SET", "k", "2"), ("GET", "k")):
        kind, text = c.call(*cmd)
        assert kind == "-", (cmd, kind, text)
        assert not text.startswith("STALLED"), (cmd, text)
        assert retryable(text, pats), (cmd, text)
    for m in others:
        m.restart()
    wait_until(f"{lead} to know a leader",
               lambda: node_field(lead, "leader") not in (None, "0"))
    d = Deadline(STEP_S, "a SET through the below-floor node")
    while True:
        kind, text = c.call("SET", "k", "3")
        if (kind, text) == ("+", "OK"):
            break
        assert kind == "-" and retryable(text, pats), (kind, text)
        if d.expired():
            d.fail(text)
        time.sleep(POLL_S)
    assert c.call("GET", "k") == ("$", "3")
    c.close()


def test_a_rolling_run_answers_only_documented_retryable_errors(cluster):
    rel = path()
    assert len(rel) >= 3, rel
    pats = documented_tryagain()
    start_at(cluster, rel[0])
    nodes = sorted(cluster.nodes.values(), key=lambda m: m.id)
    # Two clients per node: the one left below the floor gets its share.
    loads = [Load(f"c{m.id}{k}", m, pats, seed=10 * m.id + k)
             for m in nodes for k in range(2)]
    for ld in loads:
        ld.start()
    below_floor_served = 0
    try:
        for new in rel[1:]:
            lead = cluster.leader()
            others = [m for m in nodes if m is not lead]
            for m in others:
                restart(m, new)
            wait_until(f"a {new} node to lead",
                       lambda: leader_id(cluster) in {m.id for m in others})
            wait_until(f"{lead} to stop below the {new} floor",
                       lambda: node_field(lead, "stalled_index")
                       not in (None, "0"))
            mine = [ld for ld in loads if ld.node is lead]
            for ld in mine:
                ld.stalled.set()
            # Hand-overs while it is below the floor, its clients busy.
            for i in range(TRANSFERS):
                cur = cluster.leader()
                to = next(m for m in others if m is not cur)
                before = sum(ld.ops for ld in mine)
                cur.client().execute_command("BATON.TRANSFER", to.id)
                wait_until(f"{to} to lead", lambda: leader_id(cluster)
                           == to.id)
                wait_until(f"{lead}'s clients to be answered",
                           lambda: sum(ld.ops for ld in mine)
                           >= before + SERVED_PER_TRANSFER)
            # And an election: the leader killed, the other new node
            # elected with the below-floor node's vote.
            cur = cluster.leader()
            cur.kill9()
            wait_until("the other new node to lead", lambda: leader_id(
                cluster) in {m.id for m in others if m is not cur})
            cur.restart()
            before = sum(ld.ops for ld in mine)
            wait_until(f"{lead}'s clients to be answered",
                       lambda: sum(ld.ops for ld in mine)
                       >= before + SERVED_PER_TRANSFER)
            assert node_field(lead, "stalled_index") not in (None, "0")
            for ld in mine:
                ld.stalled.clear()
            below_floor_served += sum(ld.stalled_ops for ld in mine)
            restart(lead, new)
            wait_until(f"{lead} to catch up", lambda: node_field(
                lead, "stalled_index") == "0")
    finally:
        for ld in loads:
            ld.stop.set()
        for ld in loads:
            ld.join(timeout=30)
    bad = [(ld.name_, b) for ld in loads for b in ld.bad]
    retried = {}
    for ld in loads:
        for k, v in ld.retried.items():
            retried[k] = retried.get(k, 0) + v
    print(f"ops: {sum(ld.ops for ld in loads)}, below the floor: "
          f"{below_floor_served}, retryable errors: {retried}")
    assert not bad, f"replies outside the documented retryable list " \
        f"(retryable ones seen: {retried}): {bad[:10]}"
    assert below_floor_served >= SERVED_PER_TRANSFER, below_floor_served
    assert all(ld.ops > 0 and ld.acked for ld in loads), \
        [(ld.name_, ld.ops) for ld in loads]
