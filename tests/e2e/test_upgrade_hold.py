"""The burn-in hold (docs/upgrading.md, "Hold and finalize"): with
`--machine-upgrade manual` the release floor and the effective machine
version stay where they are after every node runs the new release, across
leader changes, until `batonctl upgrade finalize`; `batonctl upgrade
status` says what a finalize would change and what blocks it; and while
held, rolling the binaries back is a plain roll (restarts, no downgrade).

Releases are emulated with --as-release: 1.0.0 {protocol 1, machine 1}
and 1.1.0 {1-2, machine 2} talk to each other, so a 1.0.0 cluster rolls
to 1.1.0 by restarts.
"""

import os
import subprocess
import time
from pathlib import Path

import redis

from conftest import (Deadline, POLL_S, build_dir, info_section, retry,
                      rolling_target, wait_through_errors)

OLD, NEW = "1.0.0", "1.1.0"
WAIT_S = 30.0
# Long enough for many info rounds and version ticks (heartbeats of the
# harness's timings): a raise that was going to happen has happened.
SETTLE_S = 3.0


def info_versions(node):
    return info_section(node, "Versions")


def wait_for(what, fn, timeout=WAIT_S):
    return wait_through_errors(what, fn, timeout)


def start_held(cluster, release=OLD, manual=True):
    """3 nodes at `release` (in each node's own args, so that restart_at
    can change it), all with --machine-upgrade manual."""
    extra = ["--as-release", release]
    if manual:
        extra += ["--machine-upgrade", "manual"]
    lead = cluster.start(3, extra=extra)
    i = cluster.common_args.index("--as-release")
    del cluster.common_args[i:i + 2]
    for m in cluster.nodes.values():
        m.args += ["--as-release", release]
    return lead


def restart_at(cluster, node, release):
    """One step of a plain roll: SIGTERM, restart on the same data at
    `release`, wait until it has caught up with the leader's commit."""
    assert node.terminate() == 0
    args = list(node.args)
    i = args.index("--as-release")
    del args[i:i + 2]
    node.start(args + ["--as-release", release])
    wait_for(f"{node} to report {release}",
             lambda: info_versions(node)["release"] == release)
    commit = int(cluster.leader().info()["commit"])
    cluster.wait_applied(node, commit)


def roll(cluster, release):
    for node_id in sorted(cluster.nodes):
        restart_at(cluster, cluster.node(node_id), release)


def versions_everywhere(cluster):
    return {m.id: (info_versions(m)["release_floor"],
                   info_versions(m)["machine_version"])
            for m in cluster.alive()}


def assert_held(cluster, floor, machine):
    want = {m.id: (floor, str(machine)) for m in cluster.alive()}
    assert versions_everywhere(cluster) == want
    for m in cluster.alive():
        v = info_versions(m)
        assert v["upgrade_hold"] == "yes", (m, v)
        assert v["needs_upgrade"] == "no", (m, v)
        assert v["downgrade"] == "none", (m, v)


def status(cluster):
    r = cluster.batonctl("upgrade", "status")
    return r.stdout


def test_hold_keeps_floor_and_machine_until_finalize(cluster):
    start_held(cluster)
    wait_for("the hold in every node's log", lambda: all(
        info_versions(m)["upgrade_hold"] == "yes" for m in cluster.alive()))
    wait_for("the release floor 1.0.0", lambda: all(
        info_versions(m)["release_floor"] == OLD for m in cluster.alive()))
    c = cluster.leader().client()
    for i in range(20):
        retry(lambda i=i: c.set(f"before:{i}", str(i)))

    roll(cluster, NEW)
    # Every node runs 1.1.0 and the leader has heard from all: a finalize
    # would raise both, and nothing blocks it, but nothing rises.
    wait_for("status to show a finalize unblocked", lambda: (
        "blocked by: nothing" in status(cluster)))
    out = status(cluster)
    assert "hold: on" in out, out
    assert f"release floor {OLD} -> {NEW}, machine version 1 -> 2" in out, out
    time.sleep(SETTLE_S)
    assert_held(cluster, OLD, 1)

    # The hold is in the log: a new leader keeps it.
    old_leader = cluster.leader()

    def moved():
        # A transfer may be refused while a version entry is in flight:
        # asked again until leadership moved (bounded by wait_for).
        if cluster.find_leader() in (None, old_leader):
            cluster.batonctl("transfer", check=False)
            time.sleep(0.5)
        return cluster.find_leader() not in (None, old_leader)
    wait_for("another leader", moved)
    time.sleep(SETTLE_S)
    assert_held(cluster, OLD, 1)
    c = cluster.leader().client()
    retry(lambda: c.set("held", "still"))

    # Finalize: both rise at one index, on every node.
    r = cluster.batonctl("upgrade", "finalize")
    assert "upgrade finalized" in r.stdout, r.stdout
    wait_for("floor 1.1.0 and machine version 2 everywhere", lambda: (
        set(versions_everywhere(cluster).values()) == {(NEW, "2")}))
    out = status(cluster)
    assert f"release floor {NEW} -> {NEW}, machine version 2 -> 2 " \
        "(nothing to raise)" in out, out
    # Still held for the next upgrade (every node still runs manual).
    assert all(info_versions(m)["upgrade_hold"] == "yes"
               for m in cluster.alive())
    c = cluster.leader().client()
    for i in range(20):
        assert retry(lambda i=i: c.get(f"before:{i}")) == str(i)


def test_while_held_rolling_back_is_a_plain_roll(cluster):
    start_held(cluster)
    wait_for("the release floor 1.0.0", lambda: all(
        info_versions(m)["release_floor"] == OLD for m in cluster.alive()))
    c = cluster.leader().client()
    for i in range(20):
        retry(lambda i=i: c.set(f"old:{i}", str(i)))
    roll(cluster, NEW)
    c = cluster.leader().client()
    for i in range(20):
        retry(lambda i=i: c.set(f"new:{i}", str(i)))
    time.sleep(SETTLE_S)
    assert_held(cluster, OLD, 1)

    # Back to 1.0.0 by restarts alone: no downgrade, nothing held back.
    roll(cluster, OLD)
    lead = cluster.leader()
    c = lead.client()
    retry(lambda: c.set("after", "rollback"))
    commit = int(lead.info()["commit"])
    for m in cluster.alive():
        cluster.wait_applied(m, commit)
        v = info_versions(m)
        assert v["release"] == OLD, (m, v)
        assert v["needs_upgrade"] == "no", (m, v)
        assert v["leader_eligible"].startswith("yes"), (m, v)
    assert_held(cluster, OLD, 1)
    for m in cluster.alive():
        mc = m.client()
        for i in range(20):
            assert mc.get(f"old:{i}") == str(i)
            assert mc.get(f"new:{i}") == str(i)


def test_status_names_what_blocks_and_finalize_refuses(cluster):
    start_held(cluster)
    wait_for("the hold in the log", lambda: all(
        info_versions(m)["upgrade_hold"] == "yes" for m in cluster.alive()))
    # One node of three on 1.1.0: the roll is not over.
    restart_at(cluster, cluster.node(3), NEW)
    wait_for("status to name a 1.0.0 member", lambda: (
        f"release {OLD}, not yet {NEW}" in status(cluster)))
    t0 = time.monotonic()
    r = cluster.batonctl("upgrade", "finalize", check=False)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"not yet {NEW}" in r.stderr, r.stderr
    assert "ERR upgrade finalize refused" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 4.0, "not retried: it will not pass soon"

    time.sleep(1.0)
    assert_held(cluster, OLD, 1)
    r = cluster.batonctl("upgrade", "bogus", check=False)
    assert r.returncode == 2, r.stderr


def test_without_manual_there_is_nothing_to_finalize(cluster):
    start_held(cluster, manual=False)
    wait_for("status to answer", lambda: "hold: off" in status(cluster))
    r = cluster.batonctl("upgrade", "finalize", check=False)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "nothing is held" in r.stderr, r.stderr
    assert all(info_versions(m)["upgrade_hold"] == "no"
               for m in cluster.alive())


def test_batonctl_roll_forward_and_back_while_held_under_load(cluster,
                                                               tmp_path):
    """The operator's way: `batonctl roll --to 1.1.0` under client load,
    which does not wait for a held machine version, then `batonctl roll
    --to 1.0.0` back: a plain roll, no downgrade, no acknowledged write
    lost."""
    # The roll harness of test_roll.py (restarts served by this process).
    from test_roll import Restarter, Writer, check_acked, roll as run_roll
    start_held(cluster)
    wait_for("the release floor 1.0.0", lambda: all(
        info_versions(m)["release_floor"] == OLD for m in cluster.alive()))
    writer = Writer(cluster)
    writer.start()
    try:
        fwd = Restarter(cluster, tmp_path / "fwd", NEW)
        r = run_roll(cluster, fwd, to=NEW)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert "held (the burn-in hold)" in r.stdout, r.stdout
        assert not fwd.errors, fwd.errors
        assert {int(m.id): info_versions(m)["release"]
                for m in cluster.alive()} == {1: NEW, 2: NEW, 3: NEW}
        time.sleep(SETTLE_S)
        assert_held(cluster, OLD, 1)
        back = Restarter(cluster, tmp_path / "back", OLD)
        r = run_roll(cluster, back, to=OLD)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert not back.errors, back.errors
    finally:
        writer.stop.set()
        writer.join(timeout=10)
    assert {int(m.id): info_versions(m)["release"]
            for m in cluster.alive()} == {1: OLD, 2: OLD, 3: OLD}
    assert_held(cluster, OLD, 1)
    assert len(writer.acked) > 0
    check_acked(cluster, writer.acked)


# ---- the previous release's real binary -------------------------------------

REPO = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 900  # scripts/build-release: batond and batonctl, -j2


def previous_real_release():
    """(version, batond) of the newest release RELEASES records that the
    tree's binary can roll from, built from history by
    scripts/build-release (cached in $BATON_RELEASES_DIR/VERSION, default
    $BATON_BUILD/releases/VERSION, as tests/jepsen/test_real_upgrade.py
    does). Fails, never skips."""
    own = [int(x) for x in rolling_target().split(".")]
    recorded = []
    for line in (REPO / "RELEASES").read_text().splitlines():
        words = line.split()
        if len(words) == 2 and not words[0].startswith("#"):
            recorded.append(words[0])
    older = [v for v in recorded if [int(x) for x in v.split(".")] < own]
    assert older, "RELEASES records no release older than " \
        f"{rolling_target()}"
    version = max(older, key=lambda v: [int(x) for x in v.split(".")])
    outdir = Path(os.environ.get("BATON_RELEASES_DIR",
                                 build_dir() / "releases")) / version
    p = subprocess.run([str(REPO / "scripts" / "build-release"), version,
                        str(outdir)], capture_output=True, text=True,
                       timeout=BUILD_TIMEOUT_S)
    assert p.returncode == 0, f"build-release {version}:\n{p.stderr}"
    return version, outdir / "batond"


def retry_any_release(fn):
    """retry(), also through the older release's refusal during a
    transfer (1.2.0 answers it with -ERR "... in progress", not
    -TRYAGAIN)."""
    d = Deadline(WAIT_S, "a write")
    while True:
        try:
            return retry(fn)
        except redis.ResponseError as e:
            if "in progress" not in str(e) or d.expired():
                raise
            time.sleep(POLL_S)


def restart_on(cluster, node, binary, args):
    """Restart `node` on `binary` (None: the tree's) with its founding
    args plus `args`, on the same data; wait until it caught up."""
    assert node.terminate() == 0
    node.binary = binary
    base = [a for a in node.args if a.startswith("--bootstrap")
            or "=" in a]
    node.start(base + list(args))
    commit = int(cluster.leader().info()["commit"])
    cluster.wait_applied(node, commit)


def test_the_real_previous_release_reads_the_hold_and_rolls_back(
        cluster, monkeypatch):
    """Real binaries of the previous release (RELEASES) in a held cluster:
    a node still on it decodes the version entries that carry the hold
    (an appended tail) and keeps applying; after the roll to the newest
    release it reaches, every node goes back to the real old binary by a
    plain restart, on data the new release wrote (version entries with the
    hold, snapshots with its flag), and serves everything written."""
    import conftest
    old, old_bin = previous_real_release()
    new = rolling_target()
    monkeypatch.setattr(conftest, "BATOND", old_bin)
    cluster.start(3, snapshot_entries=40)
    monkeypatch.undo()
    for m in cluster.nodes.values():
        m.binary = old_bin
    wait_for(f"the release floor {old}", lambda: all(
        info_versions(m)["release_floor"] == old for m in cluster.alive()))
    c = cluster.leader().client()
    for i in range(60):
        retry_any_release(lambda i=i: c.set(f"old:{i}", str(i)))

    held = ["--as-release", new, "--machine-upgrade", "manual"]
    restart_on(cluster, cluster.node(1), None, held)
    restart_on(cluster, cluster.node(2), None, held)
    # Two of three on the new release: one of them leads and records the
    # hold; node 3, still the real old binary, reads it and applies on.
    wait_for("the hold in the log", lambda: all(
        info_versions(m)["upgrade_hold"] == "yes"
        for m in (cluster.node(1), cluster.node(2))))
    c = cluster.leader().client()
    for i in range(60):
        retry_any_release(lambda i=i: c.set(f"mixed:{i}", str(i)))
    commit = int(cluster.leader().info()["commit"])
    cluster.wait_applied(cluster.node(3), commit)
    v3 = info_versions(cluster.node(3))
    assert v3["release"] == old and v3["needs_upgrade"] == "no", v3
    restart_on(cluster, cluster.node(3), None, held)
    c = cluster.leader().client()
    for i in range(120):  # snapshots of the held state on every node
        retry_any_release(lambda i=i: c.set(f"new:{i}", str(i)))
    time.sleep(SETTLE_S)
    for m in cluster.alive():
        v = info_versions(m)
        assert (v["release"], v["release_floor"], v["upgrade_hold"]) == \
            (new, old, "yes"), (m, v)

    # Back to the real old binary, node by node: a plain roll.
    for node_id in sorted(cluster.nodes):
        restart_on(cluster, cluster.node(node_id), old_bin, [])
    lead = cluster.leader()
    retry_any_release(lambda: lead.client().set("after", "rollback"))
    commit = int(lead.info()["commit"])
    for m in cluster.alive():
        cluster.wait_applied(m, commit)
        v = info_versions(m)
        assert v["release"] == old and v["needs_upgrade"] == "no", (m, v)
        mc = m.client()
        for prefix, n in (("old", 60), ("mixed", 60), ("new", 120)):
            got = mc.mget([f"{prefix}:{i}" for i in range(n)])
            assert got == [str(i) for i in range(n)], (m, prefix)
