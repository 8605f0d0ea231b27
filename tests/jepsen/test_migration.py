"""A 1.x cluster replaced by 2.0.0 nodes through baton-relay, as a container
scheduler would do it, under recorded client load (docs/relay.md).

The scheduler's rule: start a new node, wait until it reports ready (INFO
`migration_ready:1`), then kill an old node it did not choose (drawn from
the seed: the old leader may be the one), and go on until no old node is
left. The relay is killed (-9) and restarted on the same port and data
directory part-way. Clients run GET, SET, APPEND and INCR on a few keys
against every live node of both clusters the whole time; the history must
be linearizable (baton-lincheck), which includes every acknowledged write
being visible at the end, and the longest gap between acknowledged writes
is reported.
"""

import random
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.connection import Connection

import harness

# A passed test's output folder goes (tests/e2e/conftest.py).
remove_what_a_passed_test_wrote = harness.e2e.remove_what_a_passed_test_wrote

e2e = harness.e2e
HOST = "127.0.0.1"
OLD_RELEASE = "1.3.0"  # the release that knows the relay (docs/relay.md)
READY_TIMEOUT_S = 60.0
CLIENTS = 6
KEYS = ["a", "b", "c", "d"]


class Relay:
    """The baton-relay process this test started; only it is signalled."""

    def __init__(self, root, port):
        self.data = root / "relay-data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.log_path = root / "relay.log"
        self.port = port
        self.proc = None

    def start(self):
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(e2e.build_dir() / "baton-relay"), "--listen",
                 f"{HOST}:{self.port}", "--data", str(self.data),
                 "--activate"],
                stdout=log, stderr=log, preexec_fn=e2e._die_with_parent)
        return self

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Load:
    """Client threads on the live nodes; each op is recorded."""

    def __init__(self, seed):
        self.rec = harness.Recorder()
        self.nodes = []  # live e2e.Node objects, replaced as a whole
        self.stop = threading.Event()
        self.seed = seed
        self.threads = [threading.Thread(target=self.client, args=(i,))
                        for i in range(CLIENTS)]

    def client(self, i):
        rng = random.Random(self.seed * 100 + i)
        ops = self.rec.new_list()
        process = i
        conns = {}
        n = 0
        while not self.stop.is_set():
            nodes = self.nodes
            if not nodes:
                time.sleep(0.01)
                continue
            node = rng.choice(nodes)
            c = conns.get(node.id)
            try:
                if c is None:
                    c = Connection(host=HOST, port=node.client_port,
                                   socket_timeout=5.0,
                                   socket_connect_timeout=1.0)
                    conns[node.id] = c
                if c._sock is not None and harness.peer_closed(c):
                    c.disconnect()
                if c._sock is None:
                    c.connect()
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                conns.pop(node.id, None)
                time.sleep(0.02)
                continue
            key = rng.choice(KEYS)
            f = rng.choice(["get", "get", "set", "append", "incr"])
            n += 1
            if key == "d":
                f = rng.choice(["get", "incr"])
            elif f == "incr":
                f = "set"
            arg = {"set": f"{process}-{n}", "append": f",{process}.{n}",
                   "incr": 1}.get(f)
            op = harness.Op(process, f, key, arg, node.id)
            harness.perform(c, op, ops)
            if op.status == "info":
                process += CLIENTS

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)


def migration_secret(root):
    """The secret both clusters of a migration hold (--migration-secret-file,
    a regular file only its owner reads)."""
    path = root / "migration-secret"
    path.write_bytes(b"jepsen-migration-secret-32-bytes")
    path.chmod(0o600)
    return str(path)


def migration_status(node):
    text = node.client(timeout=2.0).execute_command("BATON.MIGRATION",
                                                    "STATUS")
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out[k] = v
    return out


def wait_ready(node, what, deadline_s=READY_TIMEOUT_S):
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        try:
            last = migration_status(node)
            if last.get("migration_ready") == "1":
                return last
        except (redis.ConnectionError, redis.TimeoutError,
                redis.ResponseError) as e:
            last = repr(e)
        time.sleep(0.05)
    raise AssertionError(f"{what}: {node} not ready within {deadline_s} s; "
                         f"last INFO: {last}")


def batonctl(node, *args):
    return subprocess.run([str(e2e.build_dir() / "batonctl"), "-h", HOST,
                           "-p", str(node.client_port), *args],
                          capture_output=True, text=True, timeout=60)


def longest_write_gap(ops, lo_ns=0, hi_ns=None):
    """The longest time between two acknowledged writes (completed in
    [lo_ns, hi_ns]), in ms, and when it began (monotonic ns)."""
    acks = sorted(op.complete_ns for op in ops
                  if op.status == "ok" and op.f != "get"
                  and lo_ns <= op.complete_ns
                  and (hi_ns is None or op.complete_ns <= hi_ns))
    gaps = [(b - a, a) for a, b in zip(acks, acks[1:])]
    if not gaps:
        return None, None
    gap, at = max(gaps)
    return gap / 1e6, at


@pytest.mark.parametrize("seed,traffic", [(1, "when-ready"),
                                          (2, "at-start"),
                                          (3, "when-ready")])
def test_scheduler_replaces_old_cluster_through_relay(tmp_path, seed,
                                                      traffic):
    """traffic: "when-ready" sends clients to a new node once it reports
    ready, as a scheduler's service does; "at-start" as soon as it
    answers PING (its clients then wait while it learns where the old
    nodes are, which after the relay restart can take a while)."""
    replace_old_cluster(tmp_path, seed, traffic)


def start_real_old_cluster(old, binary, extra):
    """Three nodes of a real release's batond (binary), bootstrapped
    together as e2e.Cluster.start does with the tree's."""
    old.common_args = ["--election-timeout-ms",
                       str(e2e.ELECTION_TIMEOUT_MS), "--heartbeat-ms",
                       str(e2e.HEARTBEAT_MS)] + list(extra)
    ports = e2e.free_ports(6)
    for i in range(3):
        n = e2e.Node(old, i + 1, ports[2 * i], ports[2 * i + 1])
        n.binary = binary
        old.nodes[n.id] = n
    boot = ",".join(f"{m.id}={m.peer_addr}/{m.client_addr}"
                    for m in old.nodes.values())
    for m in old.nodes.values():
        m.start(["--bootstrap", boot], wait=False)
    for m in old.nodes.values():
        m.wait_ready()
    old.leader()


def replace_old_cluster(tmp_path, seed, traffic, old_binary=None,
                        unsealed_release=None, kill_relay=True):
    """The scheduler's migration under load (the module's head). With
    old_binary, the old cluster runs that real release's batond (which
    has no --migrate-to and no migration secret: it exports to whoever
    asks, unsealed), and the new nodes are started with
    --migrate-from-unsealed unsealed_release (docs/relay.md, "Migrating
    from 1.3.0"). Returns the final INFO of the first new node."""
    e2e.require_binary(e2e.BATOND)
    build = e2e.build_dir()
    checker = harness.find_checker(build)
    rng = random.Random(seed)
    relay = Relay(tmp_path, e2e.free_ports(1)[0]).start()
    relay_addr = f"{HOST}:{relay.port}"
    secret = migration_secret(tmp_path)
    old = e2e.Cluster(tmp_path / "old")
    new = e2e.Cluster(tmp_path / "new")
    load = Load(seed)
    timeline = []
    t0 = time.monotonic_ns()

    def note(what):
        timeline.append(((time.monotonic_ns() - t0) / 1e9, what))

    try:
        if old_binary is None:
            old.start(3, extra=["--as-release", OLD_RELEASE, "--relay",
                                relay_addr, "--relay-cluster", "old",
                                "--migrate-to", "new",
                                "--migration-secret-file", secret])
            note("old cluster of 3 at " + OLD_RELEASE)
            # batonctl refuses to follow a migration from the old side.
            wrong = batonctl(old.nodes[1], "migrate", "--dry-run")
            assert wrong.returncode == 1 and "old side" in wrong.stderr, \
                wrong.stdout + wrong.stderr
        else:
            start_real_old_cluster(old, old_binary,
                                   ["--relay", relay_addr,
                                    "--relay-cluster", "old"])
            note(f"old cluster of 3 real {unsealed_release} nodes "
                 f"({old_binary})")
        load.nodes = list(old.alive())
        load.start()
        time.sleep(1.0)
        ports = e2e.free_ports(6)
        b_nodes = []
        for k in range(3):
            b = e2e.Node(new, 11 + k, ports[2 * k], ports[2 * k + 1])
            new.nodes[b.id] = b
            b_nodes.append(b)
        common = ["--relay", relay_addr, "--relay-cluster", "new",
                  "--migrate-from", "old", "--cluster-id", "new",
                  "--migration-secret-file", secret,
                  "--election-timeout-ms", "300", "--heartbeat-ms", "50"]
        if unsealed_release is not None:
            common += ["--migrate-from-unsealed", unsealed_release]
        victims = list(old.nodes.values())
        rng.shuffle(victims)
        for k, b in enumerate(b_nodes):
            if k == 0:
                b.start(common + ["--accept-joins", "--bootstrap",
                                  f"{b.id}={b.peer_addr}/{b.client_addr}"])
            else:
                b.start(common + ["--join-seeds", b_nodes[0].peer_addr])
            serving = b_nodes[:k] + ([b] if traffic == "at-start" else [])
            load.nodes = list(old.alive()) + serving
            note(f"started new node {b.id}")
            if k == 0:
                wait_ready(b, "B1")
                load.nodes = list(old.alive()) + b_nodes[:1]
                note(f"new node {b.id} ready (import caught up)")
                dry = batonctl(b, "migrate", "--dry-run")
                assert dry.returncode == 0, dry.stdout + dry.stderr
                assert "side: new" in dry.stdout and "plan:" in dry.stdout, \
                    dry.stdout
                if kill_relay:
                    relay.kill()
                    note("relay killed")
                    time.sleep(1.0)
                    relay.start()
                    note("relay restarted")
            else:
                if k == 1:
                    handoff_lo = time.monotonic_ns()
                    # The operator's view of it: batonctl follows the
                    # migration until the new cluster holds authority.
                    run = batonctl(b_nodes[0], "migrate", "--wait-s", "30")
                    assert run.returncode == 0, run.stdout + run.stderr
                    assert "holds write authority" in run.stdout, run.stdout
                    note("batonctl migrate: done")
                wait_ready(b, f"B{k + 1}")
                load.nodes = list(old.alive()) + b_nodes[:k + 1]
                note(f"new node {b.id} ready")
                if k == 1:
                    handoff_hi = time.monotonic_ns()
            victim = victims[k]
            was_leader = old.find_leader() is victim
            victim.kill9()
            load.nodes = list(old.alive()) + b_nodes[:k + 1]
            note(f"killed old node {victim.id}"
                 + (" (the old leader)" if was_leader else ""))
        time.sleep(1.5)
        load.finish()
        note("load stopped")
        # One final read of every key on the new cluster: acknowledged
        # writes must all be there (the checker sees these reads too).
        ops = load.rec.new_list()
        for key in KEYS:
            op = harness.Op(999, "get", key, None, b_nodes[0].id)
            c = Connection(host=HOST, port=b_nodes[0].client_port,
                           socket_timeout=5.0)
            harness.perform(c, op, ops)
            c.disconnect()
            assert op.status == "ok", (key, op.error)
        all_ops = load.rec.ops()
        counts = harness.count_ops(all_ops)
        harness.write_op_nodes(all_ops, tmp_path / "op-nodes.txt")
        p = harness.check_history(all_ops, tmp_path / "history.txt",
                                  checker, seed, 6, CLIENTS,
                                  KEYS, "migration")
        gap, gap_at = longest_write_gap(all_ops)
        # From B2's start to its readiness: the hand-off, and no old node
        # killed (that comes after).
        handoff_gap, _ = longest_write_gap(all_ops, handoff_lo, handoff_hi)
        print(f"\nmigration seed {seed} ({traffic}): ops {counts}, "
              f"longest write gap "
              f"{gap:.1f} ms from +{(gap_at - t0) / 1e9:.2f}s; around the "
              f"hand-off {handoff_gap:.1f} ms")
        for t, what in timeline:
            print(f"  [+{t:6.2f}s] {what}")
        harness.print_error_counts(all_ops)
        assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
        assert counts["ok"] > 100, counts
        final = migration_status(b_nodes[0])
        assert final["migration_phase"] == "authority", final
        return final
    except AssertionError as e:
        harness.raise_with_logs(e, old, new, relay)
    finally:
        load.stop.set()
        load.finish()
        old.stop_all()
        new.stop_all()
        relay.kill()


def test_an_old_node_exports_only_to_the_cluster_it_names(tmp_path):
    """Anyone can register at the relay under any cluster id: an old node
    without --migrate-to gives its data to nobody, and one with it only to
    that cluster (the other's import never starts)."""
    e2e.require_binary(e2e.BATOND)
    relay = Relay(tmp_path, e2e.free_ports(1)[0]).start()
    relay_addr = f"{HOST}:{relay.port}"
    secret = migration_secret(tmp_path)
    old = e2e.Cluster(tmp_path / "old")
    new = e2e.Cluster(tmp_path / "new")
    try:
        old.start(1, extra=["--as-release", OLD_RELEASE, "--relay",
                            relay_addr, "--relay-cluster", "old",
                            "--migrate-to", "new",
                            "--migration-secret-file", secret])
        old.nodes[1].client().set("k", "v")
        cport, pport = e2e.free_ports(2)
        rogue = e2e.Node(new, 21, cport, pport)
        new.nodes[rogue.id] = rogue
        rogue.start(["--relay", relay_addr, "--relay-cluster", "rogue",
                     "--migrate-from", "old", "--cluster-id", "rogue",
                     "--migration-secret-file", secret,
                     "--bootstrap",
                     f"{rogue.id}={rogue.peer_addr}/{rogue.client_addr}"])
        e2e.wait_log(old.nodes[1], "refused: this node migrates to cluster "
                     "new only", timeout=15)
        status = migration_status(rogue)
        assert status["import_index"] == "0", status
        assert status["migration_ready"] == "0", status
    finally:
        old.stop_all()
        new.stop_all()
        relay.kill()
