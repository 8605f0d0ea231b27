"""`batonctl upgrade --to NEWEST` takes a 1.0.0 cluster (the tree's batond
emulating it) to the tree's own release in one command, under recorded
client load (docs/upgrading.md, "batonctl upgrade").

The path it must find: roll to 1.1.0 (1.0.0 speaks only peer protocol 1;
1.1.0 is the stepping stone), roll to 1.3.0, then migrate through
baton-relay to a new cluster of the newest release (no 1.x release speaks
its protocol). The test plays the operator's tooling: batonctl runs the
commands it is given (tests/jepsen/upgrade_node.py), which ask this test,
the owner of every node's PID, to restart an old node on a release (the
nodes restarted on 1.3.0 get the migration flags, as an operator's
restart command for that release would add them), start a node of the
new cluster, or stop an old node.

The first run is interrupted: the restart command fails for the second
node it restarts on 1.3.0, and batonctl must stop saying that a rerun
resumes. The same command run again must plan from where the cluster is
(one member at 1.3.0, two at 1.1.0: finish the roll to 1.3.0, then
migrate); it is interrupted again when the second new node fails to
start, and the third run must go on with the migration alone, leaving
the first new node running, and finish. Clients
run GET, SET, APPEND and INCR against every live node of both clusters
the whole time; the history must be linearizable (baton-lincheck) and no
acknowledged write may be missing from the final reads. A marker key,
written (acknowledged) on an old node before the upgrade, in the mixed
cluster and in the middle of the migration, must read back from every new
node at the end.
"""

import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from redis.connection import Connection

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from test_migration import (HOST, KEYS, Load, Relay,  # noqa: E402
                            migration_secret)

# A passed test's output folder goes (tests/e2e/conftest.py).
remove_what_a_passed_test_wrote = harness.e2e.remove_what_a_passed_test_wrote

e2e = harness.e2e
HERE = Path(__file__).resolve().parent
FIRST = "1.0.0"
STEP_TIMEOUT_S = 60
RUN_TIMEOUT_S = 600  # one batonctl run, every step together


def newest_release():
    return e2e.release_table()[-1]


def batonctl(node, *args, timeout=60):
    return subprocess.run([str(e2e.build_dir() / "batonctl"), "-h", HOST,
                           "-p", str(node.client_port), *args],
                          capture_output=True, text=True, timeout=timeout)


def node_release(node):
    return e2e.as_map(node.client(timeout=2.0).execute_command(
        "BATON.NODE"))["release"]


class Operator:
    """What batonctl's commands ask for, done from the main thread (the
    nodes' PR_SET_PDEATHSIG follows the thread that started them)."""

    def __init__(self, tmp_path, old, new, load, relay_addr, secret):
        self.old, self.new, self.load = old, new, load
        self.sock_path = str(tmp_path / "upgrade.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.sock_path)
        self.srv.listen(4)
        self.srv.settimeout(0.2)
        # (release, k): the k-th restart onto that release fails.
        self.fail_restart = None
        self.fail_start = None  # a new node id whose start fails once
        self.restarts_to = {}
        self.requests = []
        self.old_flags = ["--relay", relay_addr, "--relay-cluster", "old",
                          "--migrate-to", "new",
                          "--migration-secret-file", secret]
        self.new_flags = ["--relay", relay_addr, "--relay-cluster", "new",
                          "--migrate-from", "old", "--cluster-id", "new",
                          "--migration-secret-file", secret,
                          "--election-timeout-ms", "300",
                          "--heartbeat-ms", "50"]
        self.boot_args = {}  # old node id -> its --bootstrap args

    def command(self, verb):
        tail = " {release}" if verb == "restart" else ""
        return (f"{sys.executable} {HERE / 'upgrade_node.py'} "
                f"{self.sock_path} {verb} {{id}}{tail}")

    def serve(self, proc, deadline):
        """Answer requests until batonctl exits; returns its output."""
        while proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("batonctl upgrade did not finish in "
                                     f"{RUN_TIMEOUT_S} s")
            try:
                conn, _ = self.srv.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(10)
                line = b""
                while not line.endswith(b"\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    line += chunk
                try:
                    answer = self.handle(line.decode().split())
                except AssertionError as e:
                    answer = f"error: {str(e)[:300]}".replace("\n", " ")
                conn.sendall((answer + "\n").encode())
        return proc.communicate(timeout=30)

    def live(self):
        return list(self.old.alive()) + [n for n in self.new.nodes.values()
                                         if n.alive]

    def handle(self, words):
        self.requests.append(words)
        verb, node_id = words[0], int(words[1])
        if verb == "restart":
            release = words[2]
            self.restarts_to[release] = self.restarts_to.get(release, 0) + 1
            if self.fail_restart == (release, self.restarts_to[release]):
                self.fail_restart = None
                return "error: restart refused by the test (an interruption)"
            node = self.old.nodes[node_id]
            self.load.nodes = [n for n in self.live() if n is not node]
            node.terminate()
            extra = self.old_flags if release == "1.3.0" else []
            node.start(self.boot_args[node_id] + ["--as-release", release]
                       + extra)
        elif verb == "start":
            if self.fail_start == node_id:
                self.fail_start = None
                return "error: start refused by the test (an interruption)"
            node = self.new.nodes[node_id]
            first = min(self.new.nodes)
            boot = (["--accept-joins", "--bootstrap",
                     f"{node.id}={node.peer_addr}/{node.client_addr}"]
                    if node_id == first else
                    ["--join-seeds", self.new.nodes[first].peer_addr])
            node.start(self.new_flags + boot)
        elif verb == "stop":
            node = self.old.nodes[node_id]
            self.load.nodes = [n for n in self.live() if n is not node]
            node.terminate()
        else:
            return f"error: unknown request {words!r}"
        self.load.nodes = self.live()
        return "ok"


def mark(markers, node, phase):
    """An acknowledged SET of a key no client touches, at `phase` of the
    upgrade: each must be read back from the new cluster at the end."""
    key, value = f"marker-{len(markers)}", f"{phase}@node{node.id}"
    assert e2e.retry(lambda: node.client().set(key, value),
                     what=f"the marker of {phase}")
    markers[key] = value


def final_reads(node, load):
    """One read of every key on the new cluster after the clients stopped
    (process ids of harness.FinalClient, which lost_writes counts)."""
    ops = load.rec.new_list()
    for i, key in enumerate(KEYS):
        op = harness.Op(harness.FinalClient.FIRST_PROCESS + i, "get", key,
                        None, node.id)
        c = Connection(host=HOST, port=node.client_port, socket_timeout=5.0)
        harness.perform(c, op, ops)
        c.disconnect()
        assert op.status == "ok", (key, op.error)


def test_upgrade_from_1_0_0_to_the_newest_in_one_command(tmp_path):
    e2e.require_binary(e2e.BATOND)
    checker = harness.find_checker(e2e.build_dir())
    newest = newest_release()
    seed = 5
    relay = Relay(tmp_path, e2e.free_ports(1)[0]).start()
    relay_addr = f"{HOST}:{relay.port}"
    secret = migration_secret(tmp_path)
    old = e2e.Cluster(tmp_path / "old")
    new = e2e.Cluster(tmp_path / "new")
    load = Load(seed)
    op = None
    try:
        old.start(3, extra=["--as-release", FIRST])
        # Restarts give the release themselves (Operator.handle).
        old.common_args = old.common_args[:-2]
        ports = e2e.free_ports(6)
        for k in range(3):
            b = e2e.Node(new, 11 + k, ports[2 * k], ports[2 * k + 1])
            new.nodes[b.id] = b
        op = Operator(tmp_path, old, new, load, relay_addr, secret)
        op.boot_args = {i: list(n.args) for i, n in old.nodes.items()}
        new_arg = ",".join(f"{b.id}={b.client_addr}"
                           for b in new.nodes.values())
        args = ["upgrade", "--to", newest, "--restart", op.command("restart"),
                "--new", new_arg, "--start-new", op.command("start"),
                "--stop-old", op.command("stop"),
                "--step-timeout-s", str(STEP_TIMEOUT_S)]
        any_old = old.nodes[1]

        # The plan, changing nothing.
        dry = batonctl(any_old, *args, "--dry-run")
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert "roll every member to 1.1.0" in dry.stdout, dry.stdout
        assert "roll every member to 1.3.0" in dry.stdout, dry.stdout
        assert f"migrate through the relay to a new cluster of {newest}" \
            in dry.stdout, dry.stdout
        assert "3 step(s)" in dry.stdout, dry.stdout
        assert {node_release(n) for n in old.nodes.values()} == {FIRST}
        assert op.requests == []

        markers = {}
        mark(markers, old.nodes[2], "at 1.0.0")
        load.nodes = list(old.alive())
        load.start()
        time.sleep(1.0)

        # First run: interrupted at the second restart onto 1.3.0, which
        # leaves one member at 1.3.0 and two at 1.1.0.
        op.fail_restart = ("1.3.0", 2)
        proc = subprocess.Popen(
            [str(e2e.build_dir() / "batonctl"), "-h", HOST, "-p",
             str(any_old.client_port), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out1, err1 = op.serve(proc, time.monotonic() + RUN_TIMEOUT_S)
        print(out1, err1)
        assert proc.returncode == 1, out1 + err1
        assert "run the same command again" in err1, err1
        assert sorted(node_release(n) for n in old.nodes.values()) == \
            ["1.1.0", "1.1.0", "1.3.0"], out1 + err1
        mark(markers, old.nodes[3], "mixed 1.1.0 and 1.3.0")

        # The rerun plans from where the cluster is; it is interrupted
        # again, in the migration, when new node 12 fails to start.
        op.fail_start = 12
        proc = subprocess.Popen(
            [str(e2e.build_dir() / "batonctl"), "-h", HOST, "-p",
             str(any_old.client_port), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out2, err2 = op.serve(proc, time.monotonic() + RUN_TIMEOUT_S)
        print(out2, err2)
        assert proc.returncode == 1, out2 + err2
        assert "2 step(s)" in out2 and "roll every member to 1.1.0" \
            not in out2, out2
        assert "step 1: roll every member to 1.3.0" in out2, out2
        assert "new node 11 (" in out2 and "is ready" in out2, out2
        assert "run the same command again" in err2, err2
        assert {node_release(n) for n in old.nodes.values()} == {"1.3.0"}
        assert new.nodes[11].alive and not new.nodes[12].alive
        mark(markers, old.nodes[1], "mid-migration")

        # The third run: only the migration is left; node 11 runs.
        proc = subprocess.Popen(
            [str(e2e.build_dir() / "batonctl"), "-h", HOST, "-p",
             str(any_old.client_port), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out3, err3 = op.serve(proc, time.monotonic() + RUN_TIMEOUT_S)
        print(out3, err3)
        assert proc.returncode == 0, out3 + err3
        assert "1 step(s)" in out3 and "step 1: migrate" in out3, out3
        assert "new node 11 answers: not started again" in out3, out3
        assert "upgrade done" in out3, out3
        time.sleep(1.0)
        load.finish()

        # Where the cluster is: every old node stopped, every new node at
        # the newest release, its cluster holding write authority.
        assert not list(old.alive())
        for b in new.nodes.values():
            assert node_release(b) == newest
        first_new = new.nodes[11]
        final_reads(first_new, load)
        for key, value in markers.items():
            for b in new.nodes.values():
                got = e2e.retry(lambda: b.client().get(key),
                                what=f"reading {key}")
                assert got in (value, value.encode()), (key, value, got, b)
        # Run again, at the stopped old node and at a new node: the
        # migration handed off, nothing is left to do, and no node of the
        # new cluster is ever taken for an old one and stopped.
        n_requests = len(op.requests)
        for via in (any_old, first_new):
            proc = subprocess.Popen(
                [str(e2e.build_dir() / "batonctl"), "-h", HOST, "-p",
                 str(via.client_port), "--timeout-ms", "1000", *args],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out4, err4 = op.serve(proc, time.monotonic() + RUN_TIMEOUT_S)
            assert proc.returncode == 0, out4 + err4
            assert "holds write authority" in out4, out4
        assert len(op.requests) == n_requests, op.requests[n_requests:]
        assert all(b.alive for b in new.nodes.values())
        stops = [w for w in op.requests if w[0] == "stop"]
        starts = [w for w in op.requests if w[0] == "start"]
        assert sorted(int(w[1]) for w in stops) == [1, 2, 3]
        assert [int(w[1]) for w in starts] == [11, 12, 12, 13]

        all_ops = load.rec.ops()
        counts = harness.count_ops(all_ops)
        # The clients' keys are overwritten all the time, so how many of
        # their writes can be checked this way varies (often none); the
        # markers above are checked always, and the checker below sees
        # every write.
        checked, lost = harness.lost_writes(all_ops)
        assert not lost, lost
        p = harness.check_history(all_ops, tmp_path / "history.txt",
                                  checker, seed, 6, len(load.threads),
                                  KEYS, "upgrade")
        print(f"upgrade {FIRST} -> {newest}: ops {counts}, writes "
              f"checked {checked}")
        harness.print_error_counts(all_ops)
        assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
        assert counts["ok"] > 100, counts
    except AssertionError as e:
        harness.raise_with_logs(e, old, new, relay)
    finally:
        load.stop.set()
        load.finish()
        old.stop_all()
        new.stop_all()
        relay.kill()
        if op is not None:
            op.srv.close()


def test_upgrade_refuses_a_migration_without_its_commands(tmp_path):
    """A plan that ends with a relay migration needs --new, --start-new and
    --stop-old, and one with a roll needs --restart; without them nothing
    is changed (exit 2). A plan of rolls alone needs no migration's
    commands: to 1.3.0 from 1.0.0 is two rolls. Upgrading to the
    release the members run does nothing; to an older one is refused."""
    e2e.require_binary(e2e.BATOND)
    old = e2e.Cluster(tmp_path / "old")
    try:
        old.start(3, extra=["--as-release", FIRST])
        node = old.nodes[1]
        r = batonctl(node, "upgrade", "--to", newest_release(),
                     "--restart", "false {id}")
        assert r.returncode == 2, r.stdout + r.stderr
        assert "--start-new" in r.stderr and "nothing was changed" \
            in r.stderr, r.stderr
        r = batonctl(node, "upgrade", "--to", "1.3.0")
        assert r.returncode == 2 and "give --restart" in r.stderr, \
            r.stdout + r.stderr
        r = batonctl(node, "upgrade", "--to", "1.3.0", "--restart",
                     "false {id}", "--dry-run")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "2 step(s)" in r.stdout and "migrate" not in r.stdout, \
            r.stdout
        assert {node_release(n) for n in old.nodes.values()} == {FIRST}
        # Nothing to do, and a downgrade is no upgrade.
        r = batonctl(node, "upgrade", "--to", FIRST, "--restart",
                     "false {id}")
        assert r.returncode == 0 and "already runs" in r.stdout, \
            r.stdout + r.stderr
        older = e2e.release_table()[0]
        r = batonctl(node, "upgrade", "--to", older, "--restart",
                     "false {id}")
        assert r.returncode == 3 and "that is a downgrade" in r.stderr, \
            r.stdout + r.stderr
    finally:
        old.stop_all()


def test_upgrade_from_real_1_3_0_binaries_in_one_command(tmp_path):
    """`batonctl upgrade --to NEWEST` on a cluster of real 1.3.0 binaries
    (RELEASES; started with --relay, all that 1.3.0 has), under load: the
    plan is the migration alone. Its --start-new command must give the new
    nodes --migrate-from-unsealed 1.3.0 (docs/relay.md, "Migrating from
    1.3.0"); a first run whose command does not fails its wait with the
    node's reason naming that flag, and the run with it finishes: every
    old node stopped, the marker written at 1.3.0 on every new node, the
    history linearizable with no acknowledged write lost."""
    import test_migration
    import test_real_upgrade
    e2e.require_binary(e2e.BATOND)
    checker = harness.find_checker(e2e.build_dir())
    newest = newest_release()
    recorded = test_real_upgrade.recorded_releases()
    assert "1.3.0" in recorded, "RELEASES records 1.3.0"
    old_dir = test_real_upgrade.build_release(
        "1.3.0", test_real_upgrade.releases_dir() / "1.3.0")
    seed = 6
    relay = Relay(tmp_path, e2e.free_ports(1)[0]).start()
    relay_addr = f"{HOST}:{relay.port}"
    secret = migration_secret(tmp_path)
    old = e2e.Cluster(tmp_path / "old")
    new = e2e.Cluster(tmp_path / "new")
    load = Load(seed)
    op = None
    try:
        test_migration.start_real_old_cluster(
            old, old_dir / "batond",
            ["--relay", relay_addr, "--relay-cluster", "old"])
        ports = e2e.free_ports(6)
        for k in range(3):
            b = e2e.Node(new, 11 + k, ports[2 * k], ports[2 * k + 1])
            new.nodes[b.id] = b
        op = Operator(tmp_path, old, new, load, relay_addr, secret)
        new_arg = ",".join(f"{b.id}={b.client_addr}"
                           for b in new.nodes.values())

        def args(timeout_s):
            return ["upgrade", "--to", newest, "--new", new_arg,
                    "--start-new", op.command("start"), "--stop-old",
                    op.command("stop"), "--step-timeout-s", str(timeout_s)]

        def run(timeout_s):
            proc = subprocess.Popen(
                [str(e2e.build_dir() / "batonctl"), "-h", HOST, "-p",
                 str(old.nodes[1].client_port), *args(timeout_s)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = op.serve(proc, time.monotonic() + RUN_TIMEOUT_S)
            print(out, err)
            return proc.returncode, out, err

        dry = batonctl(old.nodes[1], *args(STEP_TIMEOUT_S), "--dry-run")
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert "1 step(s)" in dry.stdout and f"migrate through the relay " \
            f"to a new cluster of {newest}" in dry.stdout, dry.stdout
        markers = {}
        mark(markers, old.nodes[2], "at real 1.3.0")
        load.nodes = list(old.alive())
        load.start()
        time.sleep(1.0)

        # Without the flag: the new node never becomes ready, and says why.
        code, out, err = run(5)
        assert code == 1, out + err
        assert "--migrate-from-unsealed 1.3.0" in out + err, out + err
        assert len(list(old.alive())) == 3
        new.nodes[11].terminate()
        load.nodes = op.live()

        # With it (the operator's start command gives it).
        op.new_flags += ["--migrate-from-unsealed", "1.3.0"]
        code, out, err = run(STEP_TIMEOUT_S)
        assert code == 0, out + err
        assert "upgrade done" in out, out
        time.sleep(1.0)
        load.finish()
        assert not list(old.alive())
        for b in new.nodes.values():
            assert node_release(b) == newest
        final_reads(new.nodes[11], load)
        for key, value in markers.items():
            for b in new.nodes.values():
                got = e2e.retry(lambda: b.client().get(key),
                                what=f"reading {key}")
                assert got in (value, value.encode()), (key, value, got, b)
        all_ops = load.rec.ops()
        counts = harness.count_ops(all_ops)
        checked, lost = harness.lost_writes(all_ops)
        assert not lost, lost
        p = harness.check_history(all_ops, tmp_path / "history.txt",
                                  checker, seed, 6, len(load.threads),
                                  KEYS, "upgrade")
        print(f"upgrade real 1.3.0 -> {newest}: ops {counts}")
        assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
        assert counts["ok"] > 100, counts
    except AssertionError as e:
        harness.raise_with_logs(e, old, new, relay)
    finally:
        load.stop.set()
        load.finish()
        old.stop_all()
        new.stop_all()
        relay.kill()
        if op is not None:
            op.srv.close()
