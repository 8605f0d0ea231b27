"""`batonctl upgrade --to` with `--soak`: each roll step of the upgrade is
gated like `batonctl roll --soak` (docs/upgrading.md, "batonctl upgrade").

A cluster of 3 nodes at the release before the newest one a rolling
upgrade reaches serves a steady, paced load through every node (the
set-up and load of test_roll_gate.py). `batonctl upgrade --to` that
release plans one roll; its restart command starts the new release with
`batond --test-apply-delay-ms` (a planted slow release). The gate must
find the first restarted node clearly worse, put it back on its old
release, and the upgrade must stop at that step (exit 1), saying so and
how to resume. Small soak periods keep the test short.

The upgrade's refusal for a cluster at the migration's start release
whose members lack the old side's flags names the two ways to give them.
"""

import subprocess
import tempfile
import time

from conftest import BATONCTL, Deadline, POLL_S, free_ports, require_binary
from test_roll import NEWEST, OWN, PREVIOUS, Restarter, releases_now, start_at
from test_roll_gate import (APPLY_LAG, DELAY_MS, MAX_LAG, P99_MIN_MS,
                            STEP_TIMEOUT_S, Loader, start)

UPGRADE_TIMEOUT_S = 240
SOAK_S = 3  # the baseline and each node's watch
# Once the gate has judged, the load stops: the slow node's backlog (each
# entry DELAY_MS to apply, all applied before it exits) stops growing, so
# putting it back takes a bounded time.
VERDICT = "clearly worse than before the roll"
# Each loader's pause between two SET+GET: the cluster takes a little more
# than the slow release applies (1000 / DELAY_MS entries/s), so the slow
# node falls behind steadily but not so fast that its catch-up after the
# restart and its drain before exiting take long.
LOAD_PAUSE_S = 0.04


def upgrade_with_load(cluster, restarter, tmp_path):
    require_binary(BATONCTL)
    # test_roll_gate's loader at this test's pace, on keys of its own.
    loaders = [Loader(m, m.id, "upgate", LOAD_PAUSE_S)
               for m in cluster.nodes.values()]
    for t in loaders:
        t.start()
    node = cluster.nodes[min(cluster.nodes)]
    cmd = [str(BATONCTL), "-p", str(node.client_port), "upgrade", "--to",
           NEWEST, "--soak", str(SOAK_S), "--gate-p99-min-ms",
           str(P99_MIN_MS), "--gate-apply-lag", str(APPLY_LAG),
           "--max-lag", str(MAX_LAG), "--wait-s", "30",
           "--step-timeout-s", str(STEP_TIMEOUT_S), "--restart",
           restarter.command(with_release=True)]
    try:
        time.sleep(1.0)  # the load runs before the baseline
        with tempfile.TemporaryFile("w+") as out, \
                tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
            d = Deadline(UPGRADE_TIMEOUT_S, "batonctl upgrade to end")
            while proc.poll() is None:
                if d.expired():
                    proc.kill()  # our own child
                    proc.wait()
                    d.fail()
                restarter.serve()
                if not loaders[0].stop.is_set():
                    out.seek(0)
                    if VERDICT in out.read():
                        for t in loaders:
                            t.stop.set()
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
    (tmp_path / "upgrade.out").write_text(r.stdout + r.stderr)  # to read
    assert sum(t.ok for t in loaders) > 0
    return r


def test_upgrade_stops_at_the_gate_and_restores_the_slow_node(cluster,
                                                              tmp_path):
    start(cluster)
    restarter = Restarter(cluster, tmp_path / "requests", NEWEST)
    restarter.flags = {NEWEST: ["--test-apply-delay-ms", str(DELAY_MS)]}
    restarter.no_wait = {NEWEST}
    # Put back by the restart command: a SIGKILL, as in test_roll_gate.py
    # (the slow node would drain its backlog before exiting on SIGTERM).
    restarter.kill_slow = True
    r = upgrade_with_load(cluster, restarter, tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert f"upgrade step 1 of 1: roll every member to {NEWEST}" in r.stdout
    # The roll step ran gated: a baseline, then the first node watched,
    # found worse and put back on its old release by the same command.
    assert len(restarter.releases) == 2, (restarter.releases, out)
    first = restarter.releases[0][0]
    assert restarter.releases == [(first, NEWEST), (first, PREVIOUS)], out
    assert f"watching node {first} for {SOAK_S:.1f} s (--soak)" in out, out
    assert VERDICT in out, out
    assert f"node {first} runs {PREVIOUS} again" in out, out
    assert f"the health gate failed for node {first} at release {NEWEST}" \
        in out, out
    # The upgrade's own line: where it stopped and how to go on.
    assert f"batonctl: upgrade to {NEWEST} stopped at step 1 of 1 " \
        f"(roll every member to {NEWEST}" in r.stderr, r.stderr
    assert f"the health gate found a node clearly worse at release " \
        f"{NEWEST}" in r.stderr, r.stderr
    assert "run the same command again" in r.stderr, r.stderr
    assert "upgrade done" not in out, out
    # Nothing else was restarted; every member runs the old release, the
    # restored node without the planted delay.
    assert [i for i, _ in restarter.restarts] == [first, first], out
    assert set(releases_now(cluster).values()) == {PREVIOUS}
    assert "--test-apply-delay-ms" not in cluster.node(first).args
    assert not restarter.errors, restarter.errors


def test_upgrade_soak_needs_release_in_the_restart_command():
    require_binary(BATONCTL)
    (port,) = free_ports(1)
    r = subprocess.run([str(BATONCTL), "-p", str(port), "--timeout-ms",
                        "300", "upgrade", "--to", NEWEST, "--soak", "1",
                        "--restart", "restart {id}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "upgrade: with --soak, --restart must name the release with " \
        "{release}" in r.stderr, r.stderr


def test_upgrade_refusal_names_restart_all_and_relay_attach(cluster):
    """At the migration's start release, without --relay and
    --migrate-to: refused before any new node is started, naming every
    such member, `roll --restart-all` and `relay attach`."""
    if OWN == NEWEST:
        return  # no migration in this tree's path: nothing to refuse
    start_at(cluster, NEWEST)
    (new_port,) = free_ports(1)
    r = cluster.batonctl("upgrade", "--to", OWN, "--new",
                         f"11=127.0.0.1:{new_port}", "--start-new",
                         "false {id}", "--stop-old", "false {id}",
                         check=False)
    err = r.stderr
    assert r.returncode == 1, r.stdout + err
    assert "the old cluster is not set up to migrate" in err, err
    for m in cluster.nodes.values():
        assert f"node {m.id} at {m.client_addr} (migration_side none)" \
            in err, err
    assert f"batonctl roll --to {NEWEST} --restart-all --restart COMMAND" \
        in err, err
    assert "relay attach --relay HOST:PORT" in err, err
    assert "Attaching a running old node" in err, err
    assert "by hand" not in err, err
    assert "starting new node" not in r.stdout, r.stdout
