#!/usr/bin/python3
"""SET latency while a node takes a snapshot (issue 13, "no pause").

Starts a local 3-node batond cluster on 127.0.0.1 (binaries from
$BATON_BUILD, default `build`; the e2e tests' Cluster helper, so the nodes
get a fresh peer secret and free ports; batond's default timing, election
timeout 1000 ms and heartbeat 100 ms), loads --keys keys of --value-bytes
bytes with pipelined MSETs from several connections, then runs
`redis-benchmark -t set -c 50` against the leader twice over the same keys:

  none    no snapshot can fall in the run (checked on every node);
  during  the log is first topped up to just short of the next snapshot
          (--snapshot-entries), so every node takes one about a second into
          the run.

For each phase it prints one line: p50, p99 and max SET latency of
redis-benchmark's 50 clients (closed loop, from --csv) and of an open-loop
setter alongside (one SET every 5 ms, timed from when it was due),
elections (the highest term on any node before and after) and, for
`during`, each node's snapshot: its size and index (the log line
"snapshot at index N (B bytes)"), the time of that line, and the longest
stall of the node's event loop seen by a PING every 10 ms (the snapshot
runs on the loop today, so the stall is its duration).

  /usr/bin/python3 bench/snapshot_pause.py                 # 1M keys x 100 B
  /usr/bin/python3 bench/snapshot_pause.py --keys 200000   # a quick run
  make bench-snapshot [ARGS="--keys 200000"]

redis-benchmark is a closed loop: while the leader is stalled its 50
clients wait rather than send, so a 2 s pause costs only 50 slow requests
and hardly moves p99 of a long run; the open-loop setter's p99 counts
every SET due during the stall, which is what the target (p99 within
10 ms during a snapshot) is about.

Everything runs in a temporary folder, removed at the end; only the PIDs
started here are stopped (SIGTERM, then SIGKILL), and every wait is bounded.
"""

import argparse
import csv
import io
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import redis  # noqa: E402
from conftest import HOST, Cluster, Deadline, build_dir  # noqa: E402

BATOND_ELECTION_TIMEOUT_MS = 1000  # batond's defaults (docs/batond.md)
BATOND_HEARTBEAT_MS = 100
PROBE_INTERVAL_S = 0.010
PROBE_TIMEOUT_S = 10.0
OPEN_LOOP_INTERVAL_S = 0.005  # 200 SETs per second
BENCH_TIMEOUT_S = 600
KEY_FORMAT = "key:{:012d}"  # redis-benchmark -r's keys: the same table
SNAPSHOT_LINE = re.compile(
    r"^(\S+)Z .*snapshot at index (\d+) \((\d+) bytes\)")


def die(msg):
    print(f"snapshot_pause: {msg}", file=sys.stderr)
    sys.exit(1)


def parse_args():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--keys", type=int, default=1_000_000)
    a.add_argument("--value-bytes", type=int, default=100)
    a.add_argument("--clients", type=int, default=50,
                   help="redis-benchmark -c (default 50)")
    a.add_argument("--requests", type=int, default=200_000,
                   help="SETs per phase (redis-benchmark -n)")
    a.add_argument("--load-connections", type=int, default=4)
    a.add_argument("--mset-keys", type=int, default=100,
                   help="keys per MSET while loading")
    a.add_argument("--pipeline", type=int, default=16,
                   help="MSETs in flight per loading connection")
    a.add_argument("--lead-s", type=float, default=1.0,
                   help="about how far into the `during` run the snapshot "
                   "falls")
    a.add_argument("--timeout-s", type=int, default=900,
                   help="give up after this long in all")
    args = a.parse_args()
    for name in ("keys", "value_bytes", "clients", "requests",
                 "load_connections", "mset_keys", "pipeline"):
        if getattr(args, name) < 1:
            a.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def node_info(node):
    return node.info(timeout=PROBE_TIMEOUT_S)


def max_term(cluster):
    return max(int(node_info(m)["term"]) for m in cluster.alive())


def load(leader, args):
    """MSET every key once, from several connections, pipelined."""
    value = b"v" * args.value_bytes
    per_conn = (args.keys + args.load_connections - 1) // args.load_connections
    errors = []

    def loader(first, last):
        try:
            r = redis.Redis(host=HOST, port=leader.client_port,
                            socket_timeout=60)
            pipe = r.pipeline(transaction=False)
            queued = 0
            for start in range(first, last, args.mset_keys):
                kv = {}
                for i in range(start, min(start + args.mset_keys, last)):
                    kv[KEY_FORMAT.format(i)] = value
                pipe.mset(kv)
                queued += 1
                if queued == args.pipeline:
                    pipe.execute()
                    queued = 0
            if queued:
                pipe.execute()
        except Exception as e:  # reported below, the run is void
            errors.append(repr(e))

    threads = []
    for c in range(args.load_connections):
        first = c * per_conn
        last = min(args.keys, first + per_conn)
        if first < last:
            threads.append(threading.Thread(target=loader,
                                            args=(first, last)))
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        die(f"loading failed: {errors[0]}")
    return time.monotonic() - t0


def wait_all_applied(cluster, index, timeout):
    for m in cluster.alive():
        cluster.wait_applied(m, index, timeout=timeout)


class LoopProbe:
    """PINGs one node every PROBE_INTERVAL_S; the longest gap between two
    answers is the longest its event loop was held."""

    def __init__(self, node):
        self.node = node
        self.longest = 0.0
        self.longest_end = None  # wall clock of the answer ending it
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        r = self.node.client(timeout=PROBE_TIMEOUT_S)
        last = time.monotonic()
        while not self.stop.is_set():
            try:
                r.ping()
            except (redis.ConnectionError, redis.TimeoutError):
                pass
            now = time.monotonic()
            if now - last > self.longest:
                self.longest = now - last
                self.longest_end = time.time()
            last = now
            self.stop.wait(PROBE_INTERVAL_S)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=PROBE_TIMEOUT_S + 1)


class OpenLoopSetter:
    """One SET every OPEN_LOOP_INTERVAL_S on its own connection, each
    timed from when it was due rather than when it was sent: a stall then
    counts for every SET that should have gone out during it, as it would
    for clients that do not wait for each other (redis-benchmark's 50
    clients do, and so hide most of a stall)."""

    def __init__(self, node, key, value):
        self.node, self.key, self.value = node, key, value
        self.latencies = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        r = self.node.client(timeout=PROBE_TIMEOUT_S)
        due = time.monotonic()
        while not self.stop.is_set():
            wait = due - time.monotonic()
            if wait > 0:
                self.stop.wait(wait)
            try:
                r.set(self.key, self.value)
                self.latencies.append(time.monotonic() - due)
            except (redis.ConnectionError, redis.TimeoutError,
                    redis.ResponseError):
                self.latencies.append(time.monotonic() - due)
            due += OPEN_LOOP_INTERVAL_S

    def percentile(self, q):
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=PROBE_TIMEOUT_S + 1)


def redis_benchmark(port, args, seconds_hint):
    cmd = ["redis-benchmark", "-h", HOST, "-p", str(port), "-t", "set",
           "-c", str(args.clients), "-n", str(args.requests), "-d",
           str(args.value_bytes), "-r", str(args.keys), "--csv"]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=max(BENCH_TIMEOUT_S, seconds_hint))
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    row = next((x for x in rows if x.get("test") == "SET"), None)
    if r.returncode != 0 or row is None:
        die(f"redis-benchmark failed ({r.returncode}): {r.stderr.strip()}")
    return row


def snapshot_lines(node, after_index):
    found = []
    for line in node.log_text().splitlines():
        m = SNAPSHOT_LINE.match(line)
        if m and int(m.group(2)) > after_index:
            found.append((m.group(1), int(m.group(2)), int(m.group(3))))
    return found


def top_up(leader, target_applied, deadline):
    """Pipelined SETs of one key until the leader's applied index is at
    least target_applied; a command makes at most one entry, so sending
    no more commands than the gap never overshoots."""
    r = leader.client(timeout=60)
    d = Deadline(deadline, f"the log to reach index {target_applied}")
    while True:
        gap = target_applied - int(node_info(leader)["applied"])
        if gap <= 0:
            return
        if d.expired():
            d.fail(f"{gap} entries short")
        pipe = r.pipeline(transaction=False)
        for _ in range(min(gap, 10_000)):
            pipe.set(KEY_FORMAT.format(0), "v")
        pipe.execute()


def phase_line(name, row, setter, elections, extra=""):
    return (f"{name:<7} closed loop: p50 {float(row['p50_latency_ms']):.2f} ms "
            f"p99 {float(row['p99_latency_ms']):.2f} ms "
            f"max {float(row['max_latency_ms']):.1f} ms "
            f"{float(row['rps']):.0f} SET/s | open loop: "
            f"p50 {setter.percentile(0.50):.2f} ms "
            f"p99 {setter.percentile(0.99):.2f} ms "
            f"max {setter.percentile(1.0):.1f} ms | elections {elections}"
            f"{extra}")


def measured_run(leader, args):
    """redis-benchmark with the open-loop setter alongside."""
    with OpenLoopSetter(leader, KEY_FORMAT.format(1),
                        "v" * args.value_bytes) as setter:
        row = redis_benchmark(leader.client_port, args, 0)
    return row, setter


def run(args, root):
    # A command is at most one entry, so with this many entries between
    # snapshots none can fall in the load or the `none` run.
    load_commands = -(-args.keys // args.mset_keys)
    snapshot_entries = load_commands + 2 * args.requests
    cluster = Cluster(root / "cluster")
    try:
        leader = cluster.start(
            3, election_timeout_ms=BATOND_ELECTION_TIMEOUT_MS,
            heartbeat_ms=BATOND_HEARTBEAT_MS,
            snapshot_entries=snapshot_entries)
        print(f"3 nodes in {root}, leader node {leader.id} at "
              f"{leader.client_addr}; --snapshot-entries {snapshot_entries}")
        secs = load(leader, args)
        applied = int(node_info(leader)["applied"])
        wait_all_applied(cluster, applied, timeout=120)
        mb = args.keys * args.value_bytes / 1e6
        print(f"loaded {args.keys} keys x {args.value_bytes} B ({mb:.0f} MB "
              f"of values) in {secs:.1f} s; applied index {applied}")

        # ---- none: no snapshot can be due in this run
        snap_before = {m.id: int(node_info(m)["snapshot_index"])
                       for m in cluster.alive()}
        term0 = max_term(cluster)
        row_none, setter_none = measured_run(leader, args)
        term1 = max_term(cluster)
        snap_after = {m.id: int(node_info(m)["snapshot_index"])
                      for m in cluster.alive()}
        if snap_after != snap_before:
            die(f"a snapshot fell in the `none` run ({snap_before} -> "
                f"{snap_after}): a command made more than one entry?")
        entries_per_s = ((int(node_info(leader)["applied"]) - applied) /
                         (args.requests / float(row_none["rps"])))
        lines = [phase_line("none", row_none, setter_none, term1 - term0)]

        # ---- during: the next snapshot ~lead_s into the run
        applied = int(node_info(leader)["applied"])
        due = max(snap_before.values()) + snapshot_entries
        lead_entries = int(entries_per_s * args.lead_s)
        if applied + lead_entries < due:
            top_up(leader, due - lead_entries, deadline=300)
        applied = int(node_info(leader)["applied"])
        wait_all_applied(cluster, applied, timeout=120)
        term0 = max_term(cluster)
        probes = [LoopProbe(m) for m in cluster.alive()]
        for p in probes:
            p.__enter__()
        try:
            row_during, setter_during = measured_run(leader, args)
            time.sleep(1.0)  # a follower's snapshot may end after the run
        finally:
            for p in probes:
                p.__exit__()
        term1 = max_term(cluster)
        detail = []
        for p in probes:
            snaps = snapshot_lines(p.node, due - 1)
            role = "leader" if p.node is leader else "follower"
            if snaps:
                when, index, size = snaps[0]
                detail.append(f"  node {p.node.id} ({role}): snapshot at "
                              f"index {index} ({size / 1e6:.1f} MB) logged "
                              f"{when[11:]}Z; event loop held "
                              f"{p.longest * 1000:.0f} ms at most")
            else:
                detail.append(f"  node {p.node.id} ({role}): no snapshot in "
                              f"the run; event loop held "
                              f"{p.longest * 1000:.0f} ms at most")
        worst = max(p.longest for p in probes)
        lines.append(phase_line("during", row_during, setter_during,
                                term1 - term0,
                                f"  loop held {worst * 1000:.0f} ms"))
        print()
        print(f"SET, {args.clients} clients, {args.requests} requests per "
              f"phase, {args.value_bytes} B values over {args.keys} keys "
              f"(redis-benchmark --csv):")
        for line in lines:
            print(line)
        for line in detail:
            print(line)
        p99 = max(float(row_during["p99_latency_ms"]),
                  setter_during.percentile(0.99))
        met = p99 <= 10.0 and term1 == term0
        print(f"target (during a snapshot: p99 <= 10 ms, no election): "
              f"{'met' if met else 'NOT met'}")
    finally:
        cluster.stop_all()


def main():
    args = parse_args()
    if shutil.which("redis-benchmark") is None:
        die("redis-benchmark not found (apt-get install redis-tools)")
    batond = build_dir() / "batond"
    if not batond.exists():
        die(f"{batond} not found: build it first, or set BATON_BUILD")

    def on_alarm(signum, frame):
        raise SystemExit(f"snapshot_pause: gave up after {args.timeout_s} s")

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(args.timeout_s)
    root = Path(tempfile.mkdtemp(prefix="baton-snapshot-pause."))
    try:
        run(args, root)
    finally:
        signal.alarm(0)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
