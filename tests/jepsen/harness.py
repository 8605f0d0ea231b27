#!/usr/bin/python3
"""A Jepsen-style fault harness for baton (docs/jepsen.md).

One run:

1. starts a 3- or 5-node batond cluster on 127.0.0.1 (free ports) whose
   peer links all go through fault-injecting TCP proxies in this process,
   one per ordered pair of nodes, with peer authentication on (the e2e
   Cluster's generated secret file, mode 0600, in the run's log folder);
2. runs concurrent clients (threads, redis-py connections with socket
   timeouts) doing random GET, SET, APPEND, DEL and INCR on a few keys
   against random nodes, recording every invocation and completion with
   time.monotonic_ns() timestamps;
3. meanwhile a nemesis, on a schedule drawn from the seed, kills (-9) and
   restarts nodes, pauses them (SIGSTOP/SIGCONT) and partitions the peer
   network (isolating the leader among others); half the node starts run
   batond-lose-unsynced, whose kill -9 also loses unsynced writes, as a
   power loss would;
4. heals every fault, then requires the cluster to serve again (liveness):
   a write and linearizable reads succeed on every node within a bound;
5. writes the history in the baton format (docs/history-format.md) and
   runs baton-lincheck on it: the run passes only if it is linearizable.

Usable as a CLI (`harness.py --seconds 60 --seed 7 --out DIR`) and from
pytest (tests/jepsen/test_jepsen.py calls run()). Every run is bounded in
time and in processes, and cleans up what it started (only its own PIDs,
SIGKILL after a grace period, proxies closed, temporary folders removed
unless --keep) on success, failure or Ctrl-C.
"""

import argparse
import asyncio
import datetime
import importlib.util
import itertools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis
from redis.connection import Connection

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import roll  # noqa: E402
import stages  # noqa: E402


def _load_e2e_fixtures():
    """tests/e2e/conftest.py as a plain module (not as a pytest plugin):
    its Node (start, kill9, restart, client, info, logs), Cluster
    (stop_all, find_leader, logs_tail), free_ports, require_binary."""
    path = REPO / "tests" / "e2e" / "conftest.py"
    spec = importlib.util.spec_from_file_location("baton_e2e_fixtures", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


e2e = _load_e2e_fixtures()

HOST = e2e.HOST

# ---- limits and timing ------------------------------------------------------

NODES_ALLOWED = (3, 5)
CLIENTS_MAX = 64
KEYS_MAX = 32
SECONDS_MAX = 24 * 3600
OP_TIMEOUT_S = 1.5  # socket timeout of one client operation
CONNECT_TIMEOUT_S = 1.0
THINK_MS_MAX = 40  # a client waits 0..this between operations
LIVENESS_S = 30.0  # after healing: every node serves within this
FINAL_READ_S = 0.05  # the final reads' bound grows by this per read
POWER_LOSS_SHARE = 0.5  # of node starts on batond-lose-unsynced
KEY_OPS = 300  # a key is retired after this many operations
KEY_INFOS = 8  # ... or this many indeterminate ones
PROXY_HELD_MAX = 32  # blackholed connections one proxy holds at most
PROXY_CMD_TIMEOUT_S = 10.0  # a cut or heal of the proxies completes within
CLIENT_JOIN_S = OP_TIMEOUT_S + CONNECT_TIMEOUT_S + 5.0
CHECK_TIMEOUT_S = 300.0  # baton-lincheck --timeout

# Raft timing of the harness's clusters (as the e2e tests: quick failover).
ELECTION_TIMEOUT_MS = e2e.ELECTION_TIMEOUT_MS
HEARTBEAT_MS = e2e.HEARTBEAT_MS

READS = ("get",)

# Error replies after which a write certainly did not take effect: refused
# before it was proposed (or applied as a no-op with this error, the same
# on every node). Anything else from a write is indeterminate.
FAIL_PREFIXES = (
    "TRYAGAIN no leader elected yet",  # not proposed: no leader known
    "TRYAGAIN overloaded",  # not proposed: back-pressure
    "TRYAGAIN a leadership transfer",  # not proposed: hand-over under way
    roll.OLD_TRANSFER_REFUSAL,  # ERR of 1.2.0: not proposed (roll.py)
    "wrong number of arguments",  # ERR: refused by the syntax check
    "value is not an integer",  # ERR: INCR of a non-integer, a no-op
    "increment or decrement would overflow",  # ERR: a no-op
    # A migration (docs/relay.md): refused, or applied as a no-op, by a
    # cluster that does not hold write authority, or not sent to the
    # other cluster at all.
    "TRYAGAIN write authority moved to another cluster",
    "TRYAGAIN this cluster is importing",
    "TRYAGAIN no node of the other cluster",
    "TRYAGAIN could not reach the other cluster",
)


def build_dir(explicit=None):
    b = Path(explicit or os.environ.get("BATON_BUILD", "build"))
    return b if b.is_absolute() else REPO / b


def find_checker(build):
    """baton-lincheck: $BATON_LINCHECK, else the build directory's."""
    env = os.environ.get("BATON_LINCHECK")
    if env:
        return Path(env)
    return build / "baton-lincheck"


# ---- the history ------------------------------------------------------------


class Op:
    """One operation: its invocation and (once known) its completion."""

    __slots__ = ("process", "f", "key", "arg", "invoke_ns", "complete_ns",
                 "status", "result", "node", "error")

    def __init__(self, process, f, key, arg, node):
        self.process = process
        self.f = f
        self.key = key
        self.arg = arg  # SET/APPEND value, INCR delta, else None
        self.node = node  # node id it was sent to
        self.invoke_ns = None
        self.complete_ns = None
        self.status = None  # "ok", "fail", "info"
        self.result = None  # GET value (str or None) or an int
        self.error = None  # the error text, for fail and info


class Recorder:
    """Operations of every client; each client thread appends to its own
    list, so no lock is needed while recording."""

    def __init__(self):
        self.lists = []
        self._lock = threading.Lock()

    def new_list(self):
        lst = []
        with self._lock:
            self.lists.append(lst)
        return lst

    def ops(self):
        with self._lock:
            return [op for lst in self.lists for op in lst]


def count_ops(ops):
    counts = {"ok": 0, "fail": 0, "info": 0}
    for op in ops:
        if op.status in counts:
            counts[op.status] += 1
    return counts


# ---- fault-injecting proxies on the peer links ------------------------------


class _Pair:
    """A proxied connection: the dialler's side and the upstream side."""

    def __init__(self, down):
        self.down = down  # transport accepted from the dialling node
        self.up = None  # transport to the target node
        self.closed = False

    def abort(self):
        if self.closed:
            return
        self.closed = True
        for t in (self.down, self.up):
            if t is not None:
                t.abort()


class LinkProxy:
    """Forwards node `src`'s connections meant for node `dst` to dst's
    real peer port. Cut in mode "reset" or "drop", it resets the
    connections it carries, then resets ("reset") or accepts and blackholes
    ("drop") new ones until healed; in mode "stall" it stops moving bytes
    on every connection, old and new, and delivers them when healed. Runs
    on the ProxyNet's event loop."""

    def __init__(self, src, dst, target_port):
        self.src = src
        self.dst = dst
        self.target_port = target_port
        self.port = None
        self.server = None
        self.cut_mode = None  # None: up; "reset", "drop" or "stall"
        self.thawed = None  # an asyncio.Event, set unless stalled
        self.pairs = set()
        self.held = set()  # blackholed transports
        self.stats = {"connections": 0, "reset": 0, "held": 0}

    async def start(self):
        self.thawed = asyncio.Event()
        self.thawed.set()
        self.server = await asyncio.start_server(self._on_conn, HOST, 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _on_conn(self, reader, writer):
        self.stats["connections"] += 1
        if self.cut_mode == "reset":
            self.stats["reset"] += 1
            writer.transport.abort()
            return
        if self.cut_mode == "drop":
            await self._hold(reader, writer)
            return
        pair = _Pair(writer.transport)
        self.pairs.add(pair)
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(HOST, self.target_port), 2.0)
        except (OSError, asyncio.TimeoutError):
            pair.abort()
            self.pairs.discard(pair)
            return
        if pair.closed:  # cut while connecting
            up_writer.transport.abort()
            self.pairs.discard(pair)
            return
        pair.up = up_writer.transport
        await asyncio.gather(self._pump(reader, up_writer, pair),
                             self._pump(up_reader, writer, pair))
        self.pairs.discard(pair)

    async def _pump(self, reader, writer, pair):
        try:
            while not pair.closed:
                data = await reader.read(65536)
                if not data or pair.closed:
                    break
                if not self.thawed.is_set():  # stalled: hold the bytes
                    await self.thawed.wait()
                    if pair.closed:
                        break
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            pair.abort()

    async def _hold(self, reader, writer):
        """Accept and read into the void: the dialler sees a connection
        that never answers (a partition that drops packets)."""
        if len(self.held) >= PROXY_HELD_MAX:
            self.stats["reset"] += 1
            writer.transport.abort()
            return
        self.stats["held"] += 1
        t = writer.transport
        self.held.add(t)
        try:
            while self.cut_mode == "drop":
                if not await reader.read(65536):
                    break
        except OSError:
            pass
        finally:
            self.held.discard(t)
            t.abort()

    def cut(self, mode):
        self.cut_mode = mode
        if mode == "stall":
            self.thawed.clear()
            return
        self.thawed.set()
        for pair in list(self.pairs):
            pair.abort()
        self.pairs.clear()

    def heal(self):
        self.cut_mode = None
        self.thawed.set()
        for t in list(self.held):
            t.abort()
        self.held.clear()

    async def close(self):
        self.cut("reset")
        self.heal()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


class ProxyNet:
    """One LinkProxy per ordered pair of nodes, on an asyncio loop in its
    own thread. cut()/heal() return once the proxies have acted."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="proxies",
                                       daemon=True)
        self.links = {}  # (src, dst) -> LinkProxy
        self.thread.start()

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        self.loop.close()

    def _call(self, coro):
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout=PROXY_CMD_TIMEOUT_S)

    def add(self, src, dst, target_port):
        link = LinkProxy(src, dst, target_port)
        self._call(link.start())
        self.links[(src, dst)] = link
        return link.port

    async def _apply(self, fn):
        fn()

    def cut(self, pairs, mode):
        """Cut both directions of every unordered pair {a, b}."""
        def fn():
            for a, b in pairs:
                self.links[(a, b)].cut(mode)
                self.links[(b, a)].cut(mode)
        self._call(self._apply(fn))

    def heal_all(self):
        def fn():
            for link in self.links.values():
                link.heal()
        self._call(self._apply(fn))

    def cut_pairs(self):
        return sorted((a, b) for (a, b), l in self.links.items()
                      if l.cut_mode is not None and a < b)

    def close(self):
        if not self.thread.is_alive():
            return
        try:
            async def close_all():
                for link in self.links.values():
                    await link.close()
            self._call(close_all())
        except Exception:  # closing anyway
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=PROXY_CMD_TIMEOUT_S)


# ---- the cluster ------------------------------------------------------------


SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                     "runtime error:", "WARNING: ThreadSanitizer")
NODE_PORT_MIN = 10000  # node ports come from here up to the ephemeral range


def ephemeral_range():
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        lo, hi = (int(x) for x in text.split())
        return lo, hi
    except (OSError, ValueError):
        return None


def node_ports(n):
    """n distinct free ports for the nodes, below the kernel's ephemeral
    range when there is room: a node killed by the nemesis leaves its
    ports free, and an outgoing connection (clients, proxies, nodes dial
    all the time) could otherwise take one as its local port and make the
    restart fail with EADDRINUSE. Falls back to e2e.free_ports."""
    rng = ephemeral_range()
    if rng is None or rng[0] - NODE_PORT_MIN < 1000:
        return e2e.free_ports(n)
    pick = random.SystemRandom()
    ports = []
    for _ in range(100 * n):  # bounded: most tries succeed at once
        if len(ports) == n:
            return ports
        port = pick.randrange(NODE_PORT_MIN, rng[0])
        if port in ports:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
        ports.append(port)
    if len(ports) == n:
        return ports
    return e2e.free_ports(n)


class JepsenNode(e2e.Node):
    """A node that, each time it starts, runs batond or, with the
    cluster's power-loss share, batond-lose-unsynced: a test build whose
    storage holds unsynced file writes in its own memory until they are
    synced, so that a kill -9 of it loses them as a power loss would
    (src/storage/vfs_unsynced.c)."""

    release = None  # --as-release for every start (None: the binary's)
    batond = None  # the binary it runs (None: e2e.BATOND)
    base_args = ()

    def start(self, args=None, wait=True):
        c = self.cluster
        power_loss = (c.lose_unsynced is not None
                      and c.rng.random() < c.power_loss_share)
        self.binary = c.lose_unsynced if power_loss else self.batond
        if args is not None:
            self.base_args = list(args)
        emulate = ["--as-release", self.release] if self.release else []
        return super().start(list(self.base_args) + emulate, wait)

    @property
    def loses_unsynced(self):
        return self.binary is not None and self.binary != self.batond


class JepsenCluster(e2e.Cluster):
    """An e2e Cluster whose peer links go through a ProxyNet: node A's
    --bootstrap list names, for every other founder B, the proxy A->B, and
    for A itself its real peer address."""

    def __init__(self, log_root, data_root, net, seed, lose_unsynced=None,
                 power_loss_share=0.0):
        super().__init__(log_root)
        self.data_root = Path(data_root)
        self.net = net
        self.paused = set()  # ids of SIGSTOPped nodes
        self.rng = random.Random(seed ^ 0xD15C)  # which binary each start
        self.lose_unsynced = lose_unsynced
        self.power_loss_share = power_loss_share

    def start_proxied(self, n, extra=(), release=None, batond=None):
        e2e.require_binary(Path(batond or e2e.BATOND))
        self.common_args = ["--election-timeout-ms", str(ELECTION_TIMEOUT_MS),
                            "--heartbeat-ms", str(HEARTBEAT_MS)] + list(extra)
        self.data_root.mkdir(parents=True, exist_ok=True)
        ports = node_ports(2 * n)
        for i in range(n):
            node = JepsenNode(self, i + 1, ports[2 * i], ports[2 * i + 1])
            node.data_dir = self.data_root / f"node{node.id}"
            node.release = release
            node.batond = batond
            self.nodes[node.id] = node
        ids = sorted(self.nodes)
        proxy_port = {}
        for a in ids:
            for b in ids:
                if a != b:
                    proxy_port[(a, b)] = self.net.add(
                        a, b, self.nodes[b].peer_port)
        for a in ids:
            items = []
            for b in ids:
                peer = (self.nodes[b].peer_addr if a == b else
                        f"{HOST}:{proxy_port[(a, b)]}")
                items.append(f"{b}={peer}/{self.nodes[b].client_addr}")
            self.nodes[a].start(["--bootstrap", ",".join(items)], wait=False)
        for node in self.nodes.values():
            check_interrupted()
            node.wait_ready()
        check_interrupted()
        self.leader()

    def pause(self, node):
        node.proc.send_signal(signal.SIGSTOP)
        self.paused.add(node.id)

    def resume(self, node):
        if node.id in self.paused:
            self.paused.discard(node.id)
            if node.alive:
                node.proc.send_signal(signal.SIGCONT)

    def resume_all(self):
        for node_id in list(self.paused):
            self.resume(self.nodes[node_id])

    def quick_leader(self):
        """The live, unpaused node that leads in the highest term, or None
        (asks each node once, briefly)."""
        among = [m for m in self.alive() if m.id not in self.paused]
        return self.find_leader(among)

    def stop_everything(self):
        """SIGCONT what we paused, then SIGTERM / SIGKILL our own PIDs.
        Returns {node id: exit code} of the nodes that were running."""
        self.resume_all()
        running = [m for m in self.nodes.values() if m.alive]
        self.stop_all()
        return {m.id: m.proc.returncode for m in running}

    def sanitizer_reports(self):
        """Node logs holding a sanitizer's report (ASan/UBSan builds)."""
        found = []
        for m in self.nodes.values():
            text = m.log_text()
            if any(marker in text for marker in SANITIZER_MARKERS):
                found.append(m.id)
        return found


# ---- clients ----------------------------------------------------------------


class KeySpace:
    """The keys the clients use, Jepsen's "independent keys": `active`
    keys at a time; a key is retired after `ops_max` operations or
    `info_max` indeterminate ones and a fresh key takes its place. Each
    key's history is then short, with few indeterminate operations (each
    one can double the checker's search on its key), while the run is
    long. Some reads go to recently retired keys: no write reaches them
    any more, so a value that changes there is a lost or reverted write."""

    RETIRED_READ_P = 0.1  # a read goes to a retired key with this chance
    RETIRED_KEPT = 32  # retired keys that reads still visit

    def __init__(self, active, ops_max, info_max):
        self._lock = threading.Lock()
        self._next = 0
        self.ops_max = ops_max
        self.info_max = info_max
        self.active = [self._fresh() for _ in range(active)]
        self.all = list(self.active)  # every key ever used, in order
        self.retired = []  # the last RETIRED_KEPT retired keys
        self.ops = {}  # key -> operations invoked
        self.infos = {}  # key -> indeterminate operations

    def _fresh(self):
        key = f"k{self._next}"
        self._next += 1
        return key

    def _retire(self, key):
        if key not in self.active:
            return
        i = self.active.index(key)
        self.active[i] = self._fresh()
        self.all.append(self.active[i])
        self.retired.append(key)
        del self.retired[:-self.RETIRED_KEPT]

    def pick(self, rng, read):
        with self._lock:
            if read and self.retired and rng.random() < self.RETIRED_READ_P:
                return rng.choice(self.retired)
            key = rng.choice(self.active)
            self.ops[key] = self.ops.get(key, 0) + 1
            if self.ops[key] >= self.ops_max:
                self._retire(key)
            return key

    def note_info(self, key):
        with self._lock:
            self.infos[key] = self.infos.get(key, 0) + 1
            if self.infos[key] >= self.info_max:
                self._retire(key)

    def every_key(self):
        with self._lock:
            return list(self.all)


class Client(threading.Thread):
    """Random operations against random nodes until told to stop. After
    an indeterminate operation the client continues as a new process (the
    old one's operation stays pending forever, as in Jepsen)."""

    def __init__(self, run, index):
        super().__init__(name=f"client-{index}", daemon=True)
        self.run_ = run
        self.index = index
        self.rng = random.Random(run.seed * 1009 + index)
        self.process = index
        self.conns = {}  # node id -> Connection
        self.ops = run.recorder.new_list()
        self.crashed = None

    def run(self):
        try:
            while not self.run_.stop_clients.is_set():
                self.one_op()
                think = self.rng.uniform(0, self.run_.think_ms_max) / 1000
                if think:
                    self.run_.stop_clients.wait(think)
        except Exception as e:  # a harness bug: reported, never hidden
            self.crashed = repr(e)
        finally:
            for c in self.conns.values():
                c.disconnect()

    def connection(self, node):
        c = self.conns.get(node.id)
        if c is None:
            c = Connection(host=HOST, port=node.client_port,
                           socket_timeout=self.run_.op_timeout_s,
                           socket_connect_timeout=CONNECT_TIMEOUT_S)
            self.conns[node.id] = c
        if c._sock is not None and peer_closed(c):
            c.disconnect()  # the node died or hung up since: reconnect
        if c._sock is None:
            c.connect()  # raises: nothing sent yet
            if self.run_.stale_reads:
                c.send_command("BATON.STALE", "ON")
                c.read_response()
        return c

    def next_op(self, node):
        r = self.run_
        f = self.rng.choices(r.op_names, weights=r.op_weights)[0]
        key = r.keys.pick(self.rng, f in READS)
        arg = None
        if f in ("set", "append"):
            arg = str(next(r.values))
        elif f == "incr":
            arg = 1
        return Op(self.process, f, key, arg, node.id)

    def one_op(self):
        r = self.run_
        node = self.rng.choice(r.node_list)
        try:
            conn = self.connection(node)
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError,
                OSError):
            conn = self.conns.pop(node.id, None)
            if conn is not None:
                conn.disconnect()
            r.stop_clients.wait(0.05)
            return
        op = self.next_op(node)
        perform(conn, op, self.ops)
        if op.status == "info":
            self.process += r.n_clients  # a fresh process id, Jepsen style
            r.keys.note_info(op.key)


def perform(conn, op, ops):
    """Send op on conn and record it in ops: invoked now, completed with
    the reply (ok), a refusal (fail or info, classify_error) or a
    connection error (a read did nothing: fail; a write may have happened:
    info, and the connection is dropped)."""
    op.invoke_ns = time.monotonic_ns()
    ops.append(op)
    try:
        conn.send_command(*command_args(op))
        reply = conn.read_response()
    except redis.ResponseError as e:
        op.complete_ns = time.monotonic_ns()
        classify_error(op, str(e))
    except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
        op.complete_ns = time.monotonic_ns()
        conn.disconnect()
        op.error = f"{type(e).__name__}: {e}"
        op.status = "fail" if op.f in READS else "info"
    else:
        op.complete_ns = time.monotonic_ns()
        accept_reply(op, reply)


def peer_closed(conn):
    """True if the idle connection has been closed by the node (a killed
    node's sockets read as EOF or reset), so that no operation is sent on
    it only to come back indeterminate. An idle connection has nothing
    else to read: data there would be a protocol error, also closed."""
    try:
        return conn.can_read(timeout=0)
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return True


def command_args(op):
    if op.f == "get":
        return ("GET", op.key)
    if op.f == "set":
        return ("SET", op.key, op.arg)
    if op.f == "append":
        return ("APPEND", op.key, op.arg)
    if op.f == "del":
        return ("DEL", op.key)
    if op.f == "incr":
        return ("INCR", op.key)
    raise ValueError(op.f)


def classify_error(op, text):
    op.error = text
    if op.f in READS:
        op.status = "fail"  # a read has no effect
    elif text.startswith(FAIL_PREFIXES):
        op.status = "fail"
    else:
        op.status = "info"


UNEXPECTED = "unexpected reply"


def accept_reply(op, reply):
    """An OK reply: check its shape. A reply of the wrong shape is
    recorded as info with the reason, and fails the run."""
    op.status = "ok"
    if op.f == "get":
        if reply is not None and not isinstance(reply, bytes):
            op.status, op.error = "info", f"{UNEXPECTED} {reply!r}"
            return
        op.result = None if reply is None else reply.decode("latin-1")
    elif op.f == "set":
        if reply not in (b"OK", "OK"):
            op.status, op.error = "info", f"{UNEXPECTED} {reply!r}"
    else:
        if not isinstance(reply, int):
            op.status, op.error = "info", f"{UNEXPECTED} {reply!r}"
            return
        op.result = reply


# ---- the nemesis ------------------------------------------------------------

# Fault kinds; a profile is the set a run draws from.
PROCESS_FAULTS = ("kill", "pause")
PARTITION_FAULTS = ("isolate-leader", "isolate-node", "halves", "bridge")
ALL_FAULTS = PROCESS_FAULTS + PARTITION_FAULTS
PROFILES = {
    "all": ALL_FAULTS,
    "kill": ("kill",),
    "pause": ("pause",),
    "partition": PARTITION_FAULTS,
    "isolate-leader": ("isolate-leader",),
    "none": (),
}
# How a cut link behaves: "reset" closes its connections and resets new
# ones; "drop" closes them and blackholes new ones (accepted, never
# answered); "stall" freezes them (bytes held, delivered late on healing,
# as TCP would after a partition shorter than its retransmission timeout).
PARTITION_MODES = ("reset", "drop", "stall")
EPISODE_S = (1.0, 6.0)  # one episode's faults last this long
QUIET_S = (0.5, 3.0)  # between episodes


def draw_schedule(seed, seconds, profile, nodes):
    """The nemesis schedule from the seed: episodes of one or two faults
    started together, held, then healed, with quiet gaps between. Targets
    are drawn here; "leader" is resolved when the fault starts."""
    rng = random.Random(seed)
    kinds = PROFILES[profile]
    schedule = []
    t = rng.uniform(*QUIET_S)
    while kinds and t < seconds - 1.0:
        duration = min(rng.uniform(*EPISODE_S), seconds - t)
        faults = [draw_fault(rng, rng.choice(kinds), nodes)]
        # Sometimes a process fault during a partition (or the reverse).
        if len(kinds) > 1 and rng.random() < 0.25:
            other = [k for k in kinds
                     if (k in PROCESS_FAULTS) != (faults[0]["kind"]
                                                  in PROCESS_FAULTS)]
            if other:
                faults.append(draw_fault(rng, rng.choice(other), nodes))
        schedule.append({"at": round(t, 3), "duration": round(duration, 3),
                         "faults": faults})
        t += duration + rng.uniform(*QUIET_S)
    return schedule


def draw_fault(rng, kind, nodes):
    f = {"kind": kind}
    if kind == "pause":
        f["target"] = "leader" if rng.random() < 0.5 else rng.choice(nodes)
    if kind == "kill":
        # The leader, one node, a majority or every node; down for the
        # episode, or restarted at once (a crash-restart).
        x = rng.random()
        shuffled = list(nodes)
        rng.shuffle(shuffled)
        f["target"] = ("leader" if x < 0.4 else shuffled[0] if x < 0.8
                       else sorted(shuffled[:len(nodes) // 2 + 1]) if x < 0.9
                       else sorted(nodes))
        f["restart"] = "end" if rng.random() < 0.7 else "now"
    if kind in PARTITION_FAULTS:
        f["mode"] = rng.choice(PARTITION_MODES)
    if kind == "isolate-node":
        f["target"] = rng.choice(nodes)
    if kind == "halves":
        shuffled = list(nodes)
        rng.shuffle(shuffled)
        f["minority"] = sorted(shuffled[:len(nodes) // 2])
    if kind == "bridge":
        # Two sides that both see one bridge node, but not each other.
        shuffled = list(nodes)
        rng.shuffle(shuffled)
        f["bridge"] = shuffled[0]
        half = (len(nodes) - 1) // 2
        f["sides"] = [sorted(shuffled[1:1 + half]),
                      sorted(shuffled[1 + half:])]
    return f


class Nemesis:
    """Carries out the schedule in the main thread (the nodes it restarts
    are its children: PR_SET_PDEATHSIG ties them to the starting thread).
    Every action is logged with a monotonic_ns timestamp."""

    def __init__(self, run):
        self.run = run
        self.cluster = run.cluster
        self.net = run.net
        self.counts = {}
        self.log = []
        self.killed = set()  # ids down until the episode ends
        self.t0_ns = time.monotonic_ns()
        self.roller = None  # a roll.Roller with --roll-releases/-binaries

    def note(self, what, **detail):
        """Log an action: monotonic ns (the history's clock) and UTC wall
        time (the node logs' clock)."""
        ns = time.monotonic_ns()
        wall = datetime.datetime.now(datetime.timezone.utc)
        entry = {"ns": ns, "wall": wall.strftime("%H:%M:%S.%f")[:-3],
                 "what": what}
        entry.update(detail)
        self.log.append(entry)
        self.run.say(f"t+{(ns - self.t0_ns) / 1e9:6.1f}s nemesis: {what} "
                     + " ".join(f"{k}={v}" for k, v in detail.items()))

    def count(self, kind):
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def target(self, spec):
        if spec == "leader":
            leader = self.cluster.quick_leader()
            if leader is not None:
                return leader
            live = [m for m in self.cluster.alive()]
            return random.Random(self.run.seed + len(self.log)).choice(
                live) if live else None
        return self.cluster.node(spec)

    def leader_id(self):
        leader = self.cluster.quick_leader()
        return leader.id if leader is not None else None

    def start_fault(self, f):
        kind = f["kind"]
        ids = sorted(self.cluster.nodes)
        if kind == "upgrade":
            self.count("upgrade")
            self.roller.upgrade(f["target"])
            return
        if kind == "roll":
            self.count("batonctl roll")
            self.roller.roll_with_batonctl()
            return
        if kind == "kill":
            if isinstance(f["target"], list):
                nodes = [self.cluster.node(i) for i in f["target"]]
            else:
                nodes = [self.target(f["target"])]
            nodes = [m for m in nodes if m is not None and m.alive]
            if not nodes:
                return
            for node in nodes:
                self.cluster.resume(node)
                node.kill9()
                if node.loses_unsynced:
                    self.count("power-loss")
                    self.note("kill -9, unsynced writes lost", node=node.id,
                              target=f["target"])
                else:
                    self.count("kill")
                    self.note("kill -9", node=node.id, target=f["target"])
                self.killed.add(node.id)
            if f["restart"] == "now":
                for node in nodes:
                    self.restart(node)
        elif kind == "pause":
            node = self.target(f["target"])
            if (node is None or not node.alive
                    or node.id in self.cluster.paused):
                return
            self.cluster.pause(node)
            self.count("pause")
            self.note("SIGSTOP", node=node.id, target=f["target"])
        else:
            pairs, detail = self.partition_pairs(f, ids)
            if pairs is None:
                return
            self.net.cut(pairs, f["mode"])
            self.count(kind)
            self.note(f"partition {kind}", mode=f["mode"], **detail)

    def partition_pairs(self, f, ids):
        kind = f["kind"]
        if kind in ("isolate-leader", "isolate-node"):
            lone = (self.leader_id() if kind == "isolate-leader"
                    else f["target"])
            if lone is None:
                lone = f.get("target") or ids[0]
            return ([(min(lone, b), max(lone, b)) for b in ids if b != lone],
                    {"isolated": lone})
        if kind == "halves":
            minority = set(f["minority"])
            majority = [b for b in ids if b not in minority]
            return ([(min(a, b), max(a, b)) for a in minority
                     for b in majority],
                    {"minority": sorted(minority), "majority": majority})
        if kind == "bridge":
            left, right = f["sides"]
            return ([(min(a, b), max(a, b)) for a in left for b in right],
                    {"bridge": f["bridge"], "sides": f["sides"]})
        raise ValueError(kind)

    def restart(self, node):
        node.restart()  # waits until it answers PING
        self.killed.discard(node.id)
        self.note("restart", node=node.id, pid=node.proc.pid,
                  binary=Path(node.binary or e2e.BATOND).name)

    def heal(self):
        """End every fault: SIGCONT, restart the killed, heal the links."""
        for node_id in sorted(self.cluster.paused):
            self.cluster.resume(self.cluster.node(node_id))
            self.note("SIGCONT", node=node_id)
        for node_id in sorted(self.killed):
            self.restart(self.cluster.node(node_id))
        if self.net.cut_pairs():
            self.net.heal_all()
            self.note("heal partitions")

    def run_schedule(self, schedule, t0, stop_at):
        for episode in schedule:
            if self.roller is not None \
                    and self.roller.during_roll(t0 + episode["at"]):
                self.note("fault episode left out: batonctl roll ran then",
                          at=episode["at"])
                continue
            if not self.wait_until(t0 + episode["at"], stop_at):
                break
            for f in episode["faults"]:
                self.start_fault(f)
            self.wait_until(t0 + episode["at"] + episode["duration"], stop_at)
            self.heal()
        self.wait_until(stop_at, stop_at)

    def wait_until(self, when, stop_at):
        """Sleep until `when` (monotonic s), never past stop_at; checks
        that no node died on its own meanwhile. False if past stop_at."""
        while True:
            check_interrupted()
            now = time.monotonic()
            if now >= min(when, stop_at):
                return now < stop_at
            self.check_nodes()
            if self.roller is not None:
                self.roller.maybe_observe()
            time.sleep(min(0.1, min(when, stop_at) - now))

    def check_nodes(self):
        for node in self.cluster.nodes.values():
            if node.proc is not None and node.proc.poll() is not None \
                    and node.id not in self.killed:
                raise HarnessFailure(
                    f"node {node.id} exited by itself with code "
                    f"{node.proc.returncode}")


class HarnessFailure(Exception):
    pass


# Set by the SIGINT/SIGTERM handler. The KeyboardInterrupt it raises can be
# swallowed when it lands in a __del__ (redis-py closes clients there), so
# the harness's loops also check this and raise again.
INTERRUPTED = threading.Event()


def check_interrupted():
    if INTERRUPTED.is_set():
        raise KeyboardInterrupt("interrupted")


# ---- the run ----------------------------------------------------------------


class Result:
    def __init__(self):
        self.ok = False
        self.verdict = None  # "linearizable", "not-linearizable", "unknown"
        self.failure = None  # why the run failed, or None
        self.seed = None
        self.counts = {}
        self.faults = {}
        self.history_path = None
        self.checker_output = ""
        self.message = ""
        self.liveness_s = None
        self.out_dir = None
        self.roller = None  # with --roll-releases or --roll-binaries
        self.roll_summary = ""
        self.roll_gaps_ms = {}
        self.final_versions = {}  # with --roll-binaries: roll.final_versions
        self.lost_writes = None  # with --roll-binaries: lost_writes()
        self.stager = None  # with --scenario (stages.py)
        self.stage_summary = ""


class Run:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.n_nodes = args.nodes
        self.n_clients = args.clients
        self.keys = KeySpace(args.keys, args.key_ops, args.key_infos)
        self.op_timeout_s = args.op_timeout
        self.think_ms_max = args.think_ms
        self.stale_reads = args.stale_reads
        self.values = itertools.count(1)  # unique SET/APPEND values
        weights = dict(get=35, set=20, append=20, incr=15, delete=10)
        if args.read_heavy:
            weights = dict(get=60, set=20, append=10, incr=5, delete=5)
        self.op_names = ["get", "set", "append", "incr", "del"]
        self.op_weights = [weights["get"], weights["set"], weights["append"],
                           weights["incr"], weights["delete"]]
        self.recorder = Recorder()
        self.stop_clients = threading.Event()
        self.quiet = args.quiet
        self.lines = []  # what say() printed
        self.cluster = None
        self.net = None
        self.node_list = []

    def say(self, text, always=False):
        line = f"[jepsen seed={self.seed}] {text}"
        self.lines.append(line)
        if always or not self.quiet:
            print(line, flush=True)


def snapshot_flags(rng):
    """Snapshot settings drawn from the seed: often small enough that
    snapshots are taken, and sent to restarted nodes, during the run."""
    every = rng.choice((200, 1000, 5000, 100000))
    trailing = rng.choice((16, 128, 1024))
    return ["--snapshot-entries", str(every), "--snapshot-trailing",
            str(trailing)]


def run(args):
    """One run; returns a Result (a failed run is a Result, not an
    exception). Ctrl-C cleans up, then raises KeyboardInterrupt."""
    res = Result()
    res.seed = args.seed
    r = Run(args)
    build = build_dir(args.build)
    e2e.BATOND = Path(args.batond) if args.batond else build / "batond"
    checker = Path(args.checker) if args.checker else find_checker(build)
    out = Path(args.out).resolve() if args.out else None
    temp_root = Path(tempfile.mkdtemp(prefix="baton-jepsen-"))
    try:
        run_dir = out if out else temp_root
        run_dir.mkdir(parents=True, exist_ok=True)
        res.out_dir = run_dir
        _run(args, r, res, checker, run_dir, temp_root / "data")
    finally:
        if not args.keep:
            shutil.rmtree(temp_root, ignore_errors=True)
        elif out is None:
            print(f"[jepsen seed={args.seed}] kept {temp_root}", flush=True)
    return res


def _run(args, r, res, checker, run_dir, data_root):
    schedule = draw_schedule(args.seed, args.seconds, args.nemesis,
                             list(range(1, args.nodes + 1)))
    release_from = release_to = None
    scenario = stages.SCENARIOS.get(args.scenario) if args.scenario else None
    if scenario is not None:
        # A script instead of the fault schedule (stages.py).
        schedule = []
        release_from = scenario.release
    if args.roll_releases:
        release_from, release_to = roll.parse_spec(args.roll_releases)
        schedule = roll.merge_schedule(schedule, args.seconds,
                                       list(range(1, args.nodes + 1)),
                                       release_to)
    binaries = batonctl = None
    if args.roll_binaries:
        try:
            binaries = roll.parse_binaries(args.roll_binaries)
            batonctl = roll.batonctl_beside(binaries[1])
            release_from = roll.binary_release(binaries[0])
            release_to = roll.binary_release(binaries[1],
                                             args.roll_to_release)
        except ValueError as e:
            raise HarnessFailure(f"--roll-binaries: {e}") from None
        # batonctl roll picks the order (followers first, the leader
        # last, after a hand-over).
        schedule = roll.schedule_batonctl_roll(schedule, args.seconds,
                                               release_to)
    extra = snapshot_flags(random.Random(args.seed ^ 0x5EED))
    if binaries:
        # Frequent snapshots and a short log: each restarted node loads a
        # snapshot the other release wrote, and a node behind is sent one.
        extra = ["--snapshot-entries", "200", "--snapshot-trailing", "16"]
    r.say(f"seed {args.seed}: {args.nodes} nodes, {args.clients} clients, "
          f"{args.keys} keys, {args.seconds:g} s, nemesis {args.nemesis} "
          f"({len(schedule)} episodes), {' '.join(extra)}"
          + (", STALE READS (BATON.STALE ON)" if args.stale_reads else "")
          + (f", server {args.batond}" if args.batond else "")
          + (f", rolling {release_from} -> {release_to}"
             if release_to else "")
          + (f" (binaries {binaries[0]} -> {binaries[1]}, by "
             f"{batonctl} roll)" if binaries else "")
          + (f", scenario {scenario.name} from {release_from}"
             if scenario else "")
          + (f", {args.power_loss:.0%} of starts lose unsynced writes on "
             f"kill -9" if args.power_loss > 0 else ""))
    (run_dir / "schedule.json").write_text(json.dumps(schedule, indent=1))
    nemesis = None
    clients = []
    logs = ""
    shutdown_failure = None
    t_start = time.monotonic()
    try:
        if not checker.exists():
            raise HarnessFailure(f"{checker} not found: build it first "
                                 f"(make build) or set BATON_LINCHECK")
        lose_unsynced = None
        if args.power_loss > 0:
            lose_unsynced = e2e.BATOND.parent / "batond-lose-unsynced"
            if not lose_unsynced.exists():
                raise HarnessFailure(f"{lose_unsynced} not found: build it "
                                     f"first (make build), or pass "
                                     f"--power-loss 0")
        r.net = ProxyNet()
        r.cluster = JepsenCluster(run_dir / "logs", data_root, r.net,
                                  args.seed, lose_unsynced,
                                  args.power_loss)
        r.cluster.start_proxied(args.nodes, extra,
                                None if binaries else release_from,
                                binaries[0] if binaries else None)
        r.node_list = [r.cluster.node(i) for i in sorted(r.cluster.nodes)]
        r.say("cluster up: " + ", ".join(
            f"node {m.id} client {m.client_addr} peer {m.peer_addr}"
            + (" (loses unsynced writes)" if m.loses_unsynced else "")
            for m in r.node_list))
        nemesis = Nemesis(r)
        if release_to:
            nemesis.roller = roll.Roller(
                r, nemesis, release_from, release_to, HarnessFailure,
                binaries, batonctl,
                # Short: a Unix socket's path is at most 107 bytes.
                data_root.parent / "restart.sock", run_dir,
                lambda: (nemesis.check_nodes(), check_interrupted()))
            res.roller = nemesis.roller
            if binaries:
                nemesis.roller.emulate_to = args.roll_to_release
            nemesis.roller.observe()
        if scenario is not None:
            res.stager = stages.Stager(r, nemesis, HarnessFailure,
                                       lambda: (nemesis.check_nodes(),
                                                check_interrupted()))
        clients = [Client(r, i) for i in range(args.clients)]
        for c in clients:
            c.start()
        t0 = time.monotonic()
        nemesis.t0_ns = time.monotonic_ns()
        if res.stager is not None:
            stages.play(res.stager, scenario)
        else:
            nemesis.run_schedule(schedule, t0, t0 + args.seconds)
        check_interrupted()
        nemesis.heal()
        if nemesis.roller is not None:
            nemesis.roller.settle()
        r.stop_clients.set()
        join_clients(clients)
        res.liveness_s = liveness(r, nemesis)
        if binaries:
            res.final_versions = nemesis.roller.final_versions()
    except (HarnessFailure, AssertionError) as e:
        # AssertionError: from the e2e helpers (a node did not start).
        res.failure = str(e)
    finally:
        r.stop_clients.set()
        try:
            join_clients(clients)
        except HarnessFailure as e:
            res.failure = res.failure or str(e)
        if r.cluster is not None:
            codes = r.cluster.stop_everything()
            logs = r.cluster.logs_tail()
            bad = {i: c for i, c in codes.items() if c != 0}
            if bad:
                # SIGTERM must end a node cleanly (0) within the grace
                # period; -9 means it had to be killed.
                r.say(f"nodes did not exit 0 on SIGTERM: {bad}")
                shutdown_failure = (f"at the end, nodes did not exit 0 on "
                                    f"SIGTERM (id: code): {bad}")
            reports = r.cluster.sanitizer_reports()
            if reports:
                shutdown_failure = (f"sanitizer reports in the logs of "
                                    f"nodes {reports}")
        if r.net is not None:
            r.net.close()
    if shutdown_failure is not None and res.failure is None:
        res.failure = shutdown_failure
    ops = r.recorder.ops()
    res.counts = count_ops(ops)
    odd = [op for op in ops if (op.error or "").startswith(UNEXPECTED)]
    if odd and res.failure is None:
        res.failure = (f"{len(odd)} replies of the wrong shape, e.g. "
                       f"{odd[0].f} {odd[0].key} on node {odd[0].node}: "
                       f"{odd[0].error}")
    res.faults = dict(nemesis.counts) if nemesis is not None else {}
    if nemesis is not None:
        (run_dir / "nemesis.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in nemesis.log))
    if binaries:
        res.lost_writes = lost_writes(ops)
        checked, lost = res.lost_writes
        r.say(f"acknowledged writes whose effect the final reads must "
              f"show: {checked}, lost: {len(lost)}"
              + "".join(f"\n  lost: {x}" for x in lost[:10]))
        if lost and res.failure is None:
            res.failure = (f"{len(lost)} acknowledged writes lost, e.g. "
                           f"{lost[0]}")
    res.history_path = run_dir / "history.txt"
    write_history(ops, res.history_path, r)
    write_op_nodes(ops, run_dir / "ops.tsv")
    if checker.exists() and ops:
        # Safety is checked even when liveness failed.
        why = check(r, res, checker, args.check_timeout)
        if why is not None:
            res.failure = why if res.failure is None else \
                f"{res.failure}; and {why}"
    res.ok = res.failure is None and res.verdict == "linearizable"
    if res.roller is not None:
        res.roll_summary = res.roller.summary(ops, nemesis.t0_ns)
        res.roll_gaps_ms = res.roller.write_gaps(ops)
        (run_dir / "roll.txt").write_text(res.roll_summary + "\n")
        r.say("rolling upgrade timeline:\n" + res.roll_summary)
    if res.stager is not None:
        res.stage_summary = stages.summary(res.stager, ops, nemesis.t0_ns)
        (run_dir / "stages.txt").write_text(res.stage_summary + "\n")
        r.say("scenario timeline:\n" + res.stage_summary)
    res.message = report(r, res, logs, time.monotonic() - t_start)


def join_clients(clients):
    end = time.monotonic() + CLIENT_JOIN_S
    for c in clients:
        c.join(timeout=max(0.0, end - time.monotonic()))
    stuck = [c.name for c in clients if c.is_alive()]
    crashed = [f"{c.name}: {c.crashed}" for c in clients if c.crashed]
    if stuck:
        raise HarnessFailure(f"clients did not stop: {stuck}")
    if crashed:
        raise HarnessFailure(f"clients crashed: {crashed}")


def lost_writes(ops):
    """Acknowledged writes missing from the final reads, counted where it
    is certain: an acknowledged APPEND whose value every final read of its
    key must hold, because no SET, DEL or INCR of the key may have taken
    effect after it (none that did not fail, except those that completed
    before it was invoked); likewise an acknowledged SET whose value every
    final read must equal (no other write of the key may follow it). The
    final reads are the ones after the clients stopped (FinalClient's
    process ids). Returns (writes checked, descriptions of the lost ones).
    The checker (baton-lincheck) catches these too; this says it in
    words."""
    final_process = FinalClient.FIRST_PROCESS
    finals = {}  # key -> final GET results
    by_key = {}
    for op in ops:
        if op.f == "get":
            if op.process >= final_process and op.status == "ok":
                finals.setdefault(op.key, []).append(op.result or "")
        elif op.status != "fail":
            by_key.setdefault(op.key, []).append(op)
    checked, lost = 0, []
    for key, writes in by_key.items():
        if key not in finals:
            continue
        for w in writes:
            if w.status != "ok" or w.f not in ("append", "set"):
                continue
            # INCR too: an appended value may be all digits.
            overwriters = ("set", "del", "incr") if w.f == "append" else \
                ("set", "del", "append", "incr")
            later = [o for o in writes if o is not w and o.f in overwriters
                     and not (o.status == "ok"
                              and o.complete_ns < w.invoke_ns)]
            if later:
                continue
            checked += 1
            for value in finals[key]:
                if (w.arg not in value if w.f == "append"
                        else value != w.arg):
                    lost.append(f"{w.f} {key} {w.arg!r} acknowledged on "
                                f"node {w.node}, final read {value!r}")
                    break
    return checked, lost


def liveness(r, nemesis):
    """With every fault healed: on every node, within LIVENESS_S, a write
    (SET of the node's own key) and a linearizable read of it succeed;
    then every node reads every key the run used (final reads, within a
    bound that grows with their number). All recorded in the history like
    any operation. Returns the seconds the liveness part took."""
    t0 = time.monotonic()
    final = FinalClient(r, nemesis)
    for node in r.node_list:
        final.until_ok(node, "set", f"live{node.id}", f"live-{node.id}",
                       t0 + LIVENESS_S, "liveness")
        final.until_ok(node, "get", f"live{node.id}", None,
                       t0 + LIVENESS_S, "liveness")
    took = time.monotonic() - t0
    r.say(f"liveness: every node served a write and a read {took:.1f} s "
          f"after healing")
    keys = r.keys.every_key()
    t1 = time.monotonic()
    deadline = t1 + LIVENESS_S + FINAL_READ_S * len(keys) * len(r.node_list)
    for node in r.node_list:
        for key in keys:
            final.until_ok(node, "get", key, None, deadline, "final reads")
    final.close()
    r.say(f"final reads: {len(keys)} keys on {len(r.node_list)} nodes in "
          f"{time.monotonic() - t1:.1f} s")
    return took


class FinalClient:
    """Sequential operations for the liveness check and the final reads,
    each retried until it succeeds or a deadline passes."""

    FIRST_PROCESS = 1 << 40  # apart from the clients' ids

    def __init__(self, r, nemesis):
        self.r = r
        self.nemesis = nemesis
        self.ops = r.recorder.new_list()
        self.process = self.FIRST_PROCESS
        self.conns = {}

    def until_ok(self, node, f, key, arg, deadline, what):
        while True:
            if time.monotonic() > deadline:
                last = self.ops[-1].error if self.ops else None
                raise HarnessFailure(
                    f"{what}: node {node.id} did not serve {f} {key} in "
                    f"time after healing; last error: {last}")
            self.nemesis.check_nodes()
            check_interrupted()
            op = self.one(node, f, key, arg)
            if op.status == "ok":
                return
            time.sleep(0.1)

    def one(self, node, f, key, arg):
        conn = self.conns.get(node.id)
        if conn is None:
            conn = Connection(host=HOST, port=node.client_port,
                              socket_timeout=self.r.op_timeout_s * 2,
                              socket_connect_timeout=CONNECT_TIMEOUT_S)
            self.conns[node.id] = conn
        op = Op(self.process, f, key, arg, node.id)
        perform(conn, op, self.ops)
        if op.status == "info":
            self.process += 1
        return op

    def close(self):
        for conn in self.conns.values():
            conn.disconnect()


# ---- writing and checking the history ---------------------------------------


HISTORY_MAGIC = "baton-history"
HISTORY_VERSION = 1


def escape(text):
    """A field's bytes: 0x20-0x7e as themselves except '%', the rest %HH."""
    data = text.encode("latin-1") if isinstance(text, str) else text
    return "".join(chr(b) if 0x20 <= b <= 0x7e and b != 0x25 else f"%{b:02X}"
                   for b in data)


def history_events(op):
    """The baton-format lines of one operation: (time, line) pairs."""
    head = f"{op.process}\tinvoke\t{op.f}\t{escape(op.key)}"
    if op.f in ("set", "append"):
        inv = f"{head}\t={escape(op.arg)}"
    elif op.f == "incr":
        inv = f"{head}\t{op.arg}"
    else:
        inv = head
    events = [(op.invoke_ns, f"{op.invoke_ns}\t{inv}")]
    if op.status is None:
        return events  # still pending: indeterminate
    done = f"{op.complete_ns}\t{op.process}\t{op.status}\t{op.f}\t" \
           f"{escape(op.key)}"
    if op.status == "ok":
        if op.f == "get":
            done += "\t-" if op.result is None else \
                f"\t={escape(op.result)}"
        elif op.f != "set":
            done += f"\t{op.result}"
    elif op.error:
        done += f"\t{escape(op.error[:200])}"
    events.append((op.complete_ns, done))
    return events


def write_history(ops, path, r):
    """The history in the baton format (docs/history-format.md): a header
    line, then one line per invocation and per completion, by time."""
    events = []
    for op in ops:
        events.extend(history_events(op))
    events.sort(key=lambda e: e[0])
    with open(path, "w", encoding="ascii") as out:
        out.write(f"{HISTORY_MAGIC}\t{HISTORY_VERSION}\n")
        out.write(f"# baton jepsen harness: seed {r.seed}, {r.n_nodes} "
                  f"nodes, {r.n_clients} clients, {len(r.keys.all)} keys "
                  f"({r.args.keys} at a time), nemesis {r.args.nemesis}"
                  + (", stale reads" if r.stale_reads else "") + "\n")
        for _, line in events:
            out.write(line + "\n")



def check_history(ops, path, checker, seed, n_nodes, n_clients, keys,
                  nemesis):
    """A hand-run test's history written to path (the header names the
    seed, the nodes, the clients, the keys and the nemesis), then checked
    by the checker binary: returns the finished process."""
    class R:  # what write_history's header names
        pass
    r = R()
    r.seed, r.n_nodes, r.n_clients = seed, n_nodes, n_clients
    r.keys = type("K", (), {"all": keys})()
    r.args = type("A", (), {"keys": len(keys), "nemesis": nemesis})()
    r.stale_reads = False
    write_history(ops, path, r)
    return subprocess.run([str(checker), "--format", "baton",
                           "--timeout-s", "120", str(path)],
                          capture_output=True, text=True, timeout=200)


def print_error_counts(ops, top=8):
    """The commonest errors of the failed and indeterminate operations,
    cut at 70 characters, with how many times each came."""
    errors = {}
    for o in ops:
        if o.status in ("fail", "info"):
            text = (o.error or "")[:70]
            errors[text] = errors.get(text, 0) + 1
    for text, n in sorted(errors.items(), key=lambda e: -e[1])[:top]:
        print(f"  {n:6d} x {text}")


def raise_with_logs(e, old, new, relay):
    """Re-raise assertion e with the tails of both clusters' logs and the
    relay's."""
    logs = old.logs_tail() + "\n" + new.logs_tail()
    relay_log = relay.log_path.read_text(errors="replace")[-3000:]
    raise AssertionError(f"{e}\n{logs}\n==== relay\n{relay_log}") \
        from None

def write_op_nodes(ops, path):
    """Which node served each operation (the history has no room for it):
    one line per operation, by invocation time, to read next to the
    checker's explanation (it names the client and the invocation time)."""
    with open(path, "w", encoding="ascii") as out:
        out.write("invoke_ns\tclient\tnode\top\tkey\tstatus\n")
        for op in sorted(ops, key=lambda o: o.invoke_ns):
            out.write(f"{op.invoke_ns}\t{op.process}\t{op.node}\t{op.f}\t"
                      f"{escape(op.key)}\t{op.status or 'pending'}\n")


def check(r, res, checker, timeout_s):
    """Runs baton-lincheck on the history; sets res.verdict and returns
    why the run fails, or None if the history is linearizable."""
    cmd = [str(checker), "--format", "baton", "--timeout-s",
           f"{timeout_s:g}", str(res.history_path)]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout_s + 60)
    except subprocess.TimeoutExpired:
        res.verdict = "unknown"
        return f"{checker} did not finish within {timeout_s + 60:g} s"
    res.checker_output = (p.stdout + p.stderr).strip()
    took = time.monotonic() - t0
    verdicts = {0: "linearizable", 1: "not-linearizable", 3: "unknown"}
    res.verdict = verdicts.get(p.returncode, "unreadable")
    r.say(f"checker: exit {p.returncode} ({res.verdict}) in {took:.1f} s")
    if p.returncode == 0:
        return None
    if p.returncode == 1:
        return "the history is NOT linearizable"
    if p.returncode == 3:
        return ("the checker could not decide (a limit was reached): "
                "the run proves nothing")
    return (f"the checker could not read the history (exit "
            f"{p.returncode}): a harness bug")


def report(r, res, logs, elapsed_s):
    c = res.counts
    faults = ", ".join(f"{k} {v}" for k, v in sorted(res.faults.items())) \
        or "none"
    summary = (f"seed {res.seed}: operations {sum(c.values())} (ok "
               f"{c.get('ok', 0)}, fail {c.get('fail', 0)}, info "
               f"{c.get('info', 0)}); faults: {faults}; "
               f"{elapsed_s:.0f} s")
    if res.ok:
        r.say(f"PASS {summary}; history {res.history_path}")
        return summary
    parts = [f"FAIL seed {res.seed}: {res.failure}", summary,
             f"history: {res.history_path}",
             f"replay the schedule: {replay_command(r.args)}"]
    if res.checker_output:
        parts.append("checker output:\n" + res.checker_output)
    if logs:
        parts.append("node logs (tails):\n" + logs)
    msg = "\n".join(parts)
    r.say(msg, always=True)
    return msg


def replay_command(args):
    """The command line that runs the same schedule again (timing and
    thread interleavings differ, so the history does too)."""
    parts = ["/usr/bin/python3 tests/jepsen/harness.py", f"--seed {args.seed}",
             f"--seconds {args.seconds:g}", f"--nodes {args.nodes}",
             f"--clients {args.clients}", f"--keys {args.keys}",
             f"--key-ops {args.key_ops}", f"--key-infos {args.key_infos}",
             f"--nemesis {args.nemesis}", f"--op-timeout {args.op_timeout:g}",
             f"--think-ms {args.think_ms:g}",
             f"--power-loss {args.power_loss:g}"]
    if args.roll_releases:
        parts.append(f"--roll-releases {args.roll_releases}")
    if args.roll_binaries:
        parts.append(f"--roll-binaries {args.roll_binaries}")
    if args.roll_to_release:
        parts.append(f"--roll-to-release {args.roll_to_release}")
    if args.scenario:
        parts.append(f"--scenario {args.scenario}")
    if args.read_heavy:
        parts.append("--read-heavy")
    if args.stale_reads:
        parts.append("--stale-reads")
    if args.batond:
        parts.append(f"--batond {args.batond}")
    return " ".join(parts)


# ---- the command line -------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Jepsen-style fault harness for baton (docs/jepsen.md)")
    p.add_argument("--seconds", type=float, default=60.0,
                   help="seconds of load under faults (default 60)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the schedule (default: random, printed)")
    p.add_argument("--nodes", type=int, default=3, choices=NODES_ALLOWED)
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--keys", type=int, default=3,
                   help="keys in use at a time (default 3)")
    p.add_argument("--key-ops", type=int, default=KEY_OPS,
                   help="a key is retired (replaced by a fresh one) after "
                        f"this many operations (default {KEY_OPS})")
    p.add_argument("--key-infos", type=int, default=KEY_INFOS,
                   help="... or this many indeterminate ones (default "
                        f"{KEY_INFOS})")
    p.add_argument("--nemesis", default="all", choices=sorted(PROFILES),
                   help="fault profile (default all)")
    p.add_argument("--out", default=None,
                   help="folder for the history, schedule, nemesis log and "
                        "node logs (kept); default a temporary folder")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary folder and the nodes' data")
    p.add_argument("--build", default=None,
                   help="build directory (default $BATON_BUILD or build)")
    p.add_argument("--batond", default=None,
                   help="the server binary (default BUILD/batond; the teeth "
                        "test passes BUILD/batond-bug-*)")
    p.add_argument("--power-loss", type=float, default=None,
                   help="share of node starts that run batond-lose-unsynced, "
                        "whose kill -9 loses unsynced writes as a power loss "
                        "would (default 0.5; 0 with --batond)")
    p.add_argument("--checker", default=None,
                   help="baton-lincheck (default $BATON_LINCHECK or "
                        "BUILD/baton-lincheck)")
    p.add_argument("--check-timeout", type=float, default=CHECK_TIMEOUT_S)
    p.add_argument("--op-timeout", type=float, default=OP_TIMEOUT_S,
                   help="socket timeout of one operation, s (default 1.5)")
    p.add_argument("--think-ms", type=float, default=THINK_MS_MAX,
                   help="a client waits 0..this many ms between operations")
    p.add_argument("--read-heavy", action="store_true",
                   help="60%% reads instead of 35%%")
    p.add_argument("--stale-reads", action="store_true",
                   help="clients send BATON.STALE ON on every connection "
                        "(the planted stale-read bug: must fail the check)")
    p.add_argument("--roll-releases", default=None, metavar="FROM,TO",
                   help="start every node at release FROM (--as-release) "
                        "and upgrade them one by one to TO during the run "
                        "(tests/jepsen/roll.py)")
    p.add_argument("--roll-binaries", default=None, metavar="OLD_DIR,NEW_DIR",
                   help="start every node on OLD_DIR/batond and, a third "
                        "into the run, roll them to NEW_DIR/batond with "
                        "NEW_DIR/batonctl roll (followers first, the leader "
                        "last), same data; e.g. a release built by "
                        "scripts/build-release and the build directory "
                        "(tests/jepsen/roll.py)")
    p.add_argument("--roll-to-release", default=None, metavar="RELEASE",
                   help="with --roll-binaries: restart the nodes on "
                        "NEW_DIR/batond --as-release RELEASE (a release it "
                        "emulates; e.g. 1.3.0 when OLD_DIR's 1.x cannot "
                        "talk to NEW_DIR's own 2.0.0), and roll to it")
    p.add_argument("--scenario", default=None, choices=sorted(
                       stages.SCENARIOS),
                   help="play a scripted upgrade or downgrade scenario under "
                        "load instead of the fault schedule (tests/jepsen/"
                        "stages.py); it sets --nodes, ignores --seconds and "
                        "--nemesis")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2 ** 31)
    if not 0 < args.seconds <= SECONDS_MAX:
        p.error(f"--seconds must be in (0, {SECONDS_MAX}]")
    if not 1 <= args.clients <= CLIENTS_MAX:
        p.error(f"--clients must be in [1, {CLIENTS_MAX}]")
    if not 1 <= args.keys <= KEYS_MAX:
        p.error(f"--keys must be in [1, {KEYS_MAX}]")
    if args.key_ops < 1 or args.key_infos < 1:
        p.error("--key-ops and --key-infos must be at least 1")
    if args.roll_releases and args.roll_binaries:
        p.error("--roll-releases and --roll-binaries do not go together")
    if args.roll_binaries:
        if args.power_loss:
            p.error("--roll-binaries runs real binaries only: --power-loss "
                    "must be 0 (batond-lose-unsynced is a test build)")
        args.power_loss = 0.0
        try:
            binaries = roll.parse_binaries(args.roll_binaries)
            for b in binaries:
                roll.binary_release(b)
            if args.roll_to_release:
                roll.binary_release(binaries[1], args.roll_to_release)
            roll.batonctl_beside(binaries[1])
        except ValueError as e:
            p.error(str(e))
    elif args.roll_to_release:
        p.error("--roll-to-release goes with --roll-binaries")
    if args.scenario:
        if args.roll_releases or args.roll_binaries:
            p.error("--scenario and --roll-releases or --roll-binaries do "
                    "not go together")
        args.nodes = stages.SCENARIOS[args.scenario].nodes
        args.nemesis = "none"
        if args.power_loss is None:
            args.power_loss = 0.0  # the script's kills are plain kills
    if args.power_loss is None:
        args.power_loss = 0.0 if args.batond else POWER_LOSS_SHARE
    if not 0.0 <= args.power_loss <= 1.0:
        p.error("--power-loss must be in [0, 1]")
    if not 0.05 <= args.op_timeout <= 30:
        p.error("--op-timeout must be in [0.05, 30]")
    if args.roll_releases:
        try:
            roll.parse_spec(args.roll_releases)
        except ValueError as e:
            p.error(str(e))
    return args


def _interrupt(signum, frame):
    INTERRUPTED.set()
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None):
    args = parse_args(argv)
    # Ctrl-C and SIGTERM end the run through its cleanup, even when the
    # shell started us with SIGINT ignored (a background job).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        res = run(args)
    except KeyboardInterrupt:
        print(f"[jepsen seed={args.seed}] interrupted; cleaned up",
              flush=True)
        return 130
    if not res.ok:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
