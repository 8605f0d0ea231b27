"""`batonctl roll --soak`: the health gate (docs/upgrading.md, "batonctl
roll", "Health gates").

A cluster of 3 nodes at the release before the newest one a rolling
upgrade reaches serves a steady, paced load through every node. It is
rolled with --soak: the roll measures every member before the first
restart, then watches each restarted node as long and compares.

- A planted slow release: the restart command starts the new release with
  `batond --test-apply-delay-ms` (a switch for tests only). The gate must
  find the first restarted node clearly worse, stop the roll (exit 1),
  and put that node back on its old release with the same restart command
  ({release}), since the release floor has not moved.
- The same roll without the delay passes the gate at every node.
"""

import json
import subprocess
import tempfile
import threading
import time

import redis

from conftest import BATONCTL, Deadline, POLL_S, require_binary
from test_roll import NEWEST, PREVIOUS, Restarter, releases_now

# Bounds, not durations: a node of the planted slow release answers only
# between its applies, so how soon it answers after its restart depends on
# the backlog the load built; a busy machine (or a sanitizer build) needs
# more than a minute in the worst runs seen.
ROLL_TIMEOUT_S = 360
STEP_TIMEOUT_S = 120
SOAK_S = 2
DELAY_MS = 30  # the planted slow release: at most ~33 entries/s applied
LOAD_PAUSE_S = 0.02  # each loader's pause between two SET+GET
LOAD_OPS_MAX = 100000
SNAPSHOT_ENTRIES = 100  # a restarted node replays little of its log
# ... but a slow follower is sent entries, never the leader's snapshot
# (which would catch it up at once, hiding its slowness).
SNAPSHOT_TRAILING = 1000000
# --max-lag: "caught up" for the roll's own checks; large, so that a slow
# node is judged by the gate, not refused by the wait before it.
MAX_LAG = 1000000
# The gate's latency bound, above what a busy test machine shows, and its
# apply-lag bound: a healthy follower is a few entries behind at most.
P99_MIN_MS = 250
APPLY_LAG = 30
# batonctl's wait for each reply: a slow node busy applying does not
# answer, and each poll of it during a soak costs this much.
CTL_TIMEOUT_MS = 2000


class Loader(threading.Thread):
    """SET then GET of its own keys through one node, paced and bounded,
    counting what failed (not acknowledged)."""

    def __init__(self, node, tag, prefix="gate", pause_s=LOAD_PAUSE_S):
        super().__init__(daemon=True)
        self.node, self.tag = node, tag
        self.prefix, self.pause_s = prefix, pause_s
        self.stop = threading.Event()
        self.ok = self.failed = 0

    def run(self):
        c = None
        n = 0
        while not self.stop.is_set() and n < LOAD_OPS_MAX:
            n += 1
            try:
                if c is None:
                    c = self.node.client(timeout=2.0)
                key = f"{self.prefix}-{self.tag}-{n % 50}"
                c.set(key, str(n))
                c.get(key)
                self.ok += 1
            except (redis.ConnectionError, redis.TimeoutError,
                    redis.ResponseError):
                self.failed += 1
                c = None
            time.sleep(self.pause_s)


def start(cluster):
    cluster.start(3, snapshot_entries=SNAPSHOT_ENTRIES,
                  extra=["--snapshot-trailing", str(SNAPSHOT_TRAILING),
                         "--as-release", PREVIOUS])
    i = cluster.common_args.index("--as-release")
    del cluster.common_args[i:i + 2]
    for m in cluster.nodes.values():
        m.args += ["--as-release", PREVIOUS]


def failed_gate(path):
    """Whether the roll's --json output so far has a gate that failed."""
    for line in path.read_text().splitlines():
        try:
            e = json.loads(line)
        except ValueError:  # a line being written
            continue
        if e.get("event") == "gate" and e.get("ok") is False:
            return True
    return False


def roll_with_load(cluster, restarter, tmp_path):
    require_binary(BATONCTL)
    loaders = [Loader(m, m.id) for m in cluster.nodes.values()]
    for t in loaders:
        t.start()
    node = cluster.nodes[min(cluster.nodes)]
    cmd = [str(BATONCTL), "-p", str(node.client_port), "--timeout-ms",
           str(CTL_TIMEOUT_MS), "roll", "--to", NEWEST, "--json", "--soak",
           str(SOAK_S), "--gate-p99-min-ms", str(P99_MIN_MS),
           "--gate-apply-lag", str(APPLY_LAG), "--max-lag", str(MAX_LAG),
           "--step-timeout-s", str(STEP_TIMEOUT_S), "--restart",
           restarter.command(with_release=True)]
    try:
        time.sleep(1.0)  # the load runs before the baseline
        with open(tmp_path / "roll.stdout", "w+") as out, \
                tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
            d = Deadline(ROLL_TIMEOUT_S, "batonctl roll to end")
            while proc.poll() is None:
                if d.expired():
                    proc.kill()  # our own child
                    proc.wait()
                    d.fail()
                # Once a gate has judged a node worse, the load has done
                # its part: stopped, it no longer grows the slow node's
                # backlog (which the restore and the teardown wait for).
                if not loaders[0].stop.is_set() and \
                        failed_gate(tmp_path / "roll.stdout"):
                    for t in loaders:
                        t.stop.set()
                restarter.serve()
                time.sleep(POLL_S)
            out.seek(0)
            err.seek(0)
            r = subprocess.CompletedProcess(cmd, proc.returncode,
                                            out.read(), err.read())
    finally:
        for t in loaders:
            t.stop.set()
        for t in loaders:
            t.join(timeout=30)
    (tmp_path / "roll.out").write_text(r.stdout + r.stderr)  # to read
    assert sum(t.ok for t in loaders) > 0
    return r, [json.loads(x) for x in r.stdout.splitlines() if x.strip()]


def test_gate_catches_a_slow_release_and_restores_the_node(cluster,
                                                          tmp_path):
    start(cluster)
    restarter = Restarter(cluster, tmp_path / "requests", NEWEST)
    restarter.flags = {NEWEST: ["--test-apply-delay-ms", str(DELAY_MS)]}
    # The slow node answers between long applies: the roll waits for it.
    # Its SIGTERM would wait for its whole backlog of applies: what this
    # test checks is the roll's restore, not a graceful stop, so the
    # restore's restart stops it with SIGKILL.
    restarter.no_wait = {NEWEST}
    restarter.kill_slow = True
    r, evs = roll_with_load(cluster, restarter, tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    kinds = [e["event"] for e in evs]
    assert "baseline" in kinds, out
    plan = next(e for e in evs if e["event"] == "plan")["order"]
    first = plan[0]
    gates = [e for e in evs if e["event"] == "gate"]
    assert len(gates) == 1 and gates[0]["node"] == first, out
    assert gates[0]["ok"] is False and gates[0]["reason"], out
    # Put back on its old release with the roll's restart command, after
    # the gate and before the roll stopped.
    assert restarter.releases == [(first, NEWEST), (first, PREVIOUS)], \
        (restarter.releases, out)
    assert kinds.index("gate") < kinds.index("restore") < \
        kinds.index("restored") < kinds.index("failed"), out
    failed = next(e for e in evs if e["event"] == "failed")
    assert "health gate failed" in failed["reason"], out
    assert f"runs {PREVIOUS} again" in failed["reason"], out
    # Nothing else was restarted; every member runs the old release, the
    # restored node without the planted delay.
    assert [i for i, _ in restarter.restarts] == [first, first], out
    assert set(releases_now(cluster).values()) == {PREVIOUS}
    assert "--test-apply-delay-ms" not in cluster.node(first).args
    assert not restarter.errors, restarter.errors


def test_gate_passes_a_release_without_the_delay(cluster, tmp_path):
    start(cluster)
    restarter = Restarter(cluster, tmp_path / "requests", NEWEST)
    r, evs = roll_with_load(cluster, restarter, tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    gates = [e for e in evs if e["event"] == "gate"]
    assert len(gates) == 3 and all(g["ok"] is True for g in gates), out
    # The gate saw the load: every node served commands in its soak.
    assert all(g["commands"] > 0 for g in gates), out
    assert restarter.releases == [(i, NEWEST) for i in
                                  next(e for e in evs
                                       if e["event"] == "plan")["order"]]
    assert releases_now(cluster) == {1: NEWEST, 2: NEWEST, 3: NEWEST}


def test_soak_needs_release_in_the_restart_command(cluster):
    start(cluster)
    r = cluster.batonctl("roll", "--to", NEWEST, "--soak", "1",
                         "--restart", "restart {id}", check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "with --soak, --restart must name the release with {release}" \
        in r.stderr, r.stderr


def test_info_counts_key_value_commands_errors_and_latency(cluster):
    """The figures the gate reads (INFO, docs/clients.md "# Stats"): the
    key-value commands only, their error replies and latency buckets."""
    lead = cluster.start(3)
    c = lead.client()
    before = c.info("stats")
    for i in range(30):
        c.set(f"k{i}", "v")
    try:
        c.execute_command("INCR", "k0")  # "v" is not a number: an error
    except redis.ResponseError:
        pass
    c.ping()
    c.execute_command("BATON.NODE")
    after = c.info("stats")
    assert after["kv_commands_processed"] - \
        before["kv_commands_processed"] == 31, (before, after)
    assert after["kv_error_replies"] - before["kv_error_replies"] == 1
    assert after["total_error_replies"] >= before["total_error_replies"] + 1
    buckets = after["kv_latency_usec"]
    assert buckets["inf"] == after["kv_commands_processed"], buckets
    counts = [v for k, v in buckets.items() if k != "inf"]
    assert counts == sorted(counts), buckets  # cumulative
    assert after["kv_latency_p99_usec"] > 0


class SecondSlowRestarter(Restarter):
    """Restarts the second node the roll asks for (only) at the new
    release with the planted delay."""

    def serve(self):
        # batonctl waits for each restart: one request at a time.
        second = len(self.releases) == 1 and any(self.folder.glob("*.req"))
        self.flags = {NEWEST: ["--test-apply-delay-ms", str(DELAY_MS)]} \
            if second else {}
        self.no_wait = {NEWEST} if second else set()
        super().serve()


def test_gate_after_the_floor_moved_says_the_downgrade(cluster, tmp_path):
    """The second node restarted is the slow one: by the end of its soak
    the majority runs the new release, whose node leads (rule 2) and has
    raised the release floor, so the old release would stop at it. The
    roll restarts nothing, stops and says the downgrade."""
    start(cluster)
    restarter = SecondSlowRestarter(cluster, tmp_path / "requests", NEWEST)
    r, evs = roll_with_load(cluster, restarter, tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    order = next(e for e in evs if e["event"] == "plan")["order"]
    gates = [e for e in evs if e["event"] == "gate"]
    assert [g["ok"] for g in gates] == [True, False], out
    assert gates[1]["node"] == order[1], out
    failed = next(e for e in evs if e["event"] == "failed")
    assert failed["release_floor"] == NEWEST, out
    assert f"the release floor is {NEWEST} now" in failed["reason"], out
    assert f"batonctl downgrade validate {PREVIOUS}" in failed["reason"]
    assert "restore" not in [e["event"] for e in evs], out
    # Nothing restarted after the gate: the two nodes of the plan once.
    assert restarter.releases == [(order[0], NEWEST), (order[1], NEWEST)]
    # Done with the slow node: its SIGTERM at the teardown would wait for
    # its backlog of applies.
    cluster.node(order[1]).kill9()
