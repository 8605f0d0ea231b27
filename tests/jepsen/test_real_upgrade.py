"""Rolling upgrades between real binaries built from git history, under
client load (issue "Real previous binaries"; docs/upgrading.md,
"Releases").

RELEASES (at the repository's root) records each release's commit, and
scripts/build-release builds its batond and batonctl from git history
(cached: $BATON_RELEASES_DIR/VERSION, default $BATON_BUILD/releases/
VERSION). Each roll runs the fault harness with `--roll-binaries OLD,NEW`:
three nodes start on the old binary, the harness's clients run, and a
third into the run NEW's `batonctl roll --to REL --json` rolls them to
NEW's batond, its restart command asking the harness (which owns the
nodes' PIDs) to restart node {id} on the new binary, same flags and data
(tests/jepsen/roll.py).

- test_roll_between_recorded_releases: every two adjacent recorded
  releases (1.2.0 -> 1.3.0), both real, rolled by the newer one's
  batonctl. Each pair must share a peer protocol (a pair that does not
  would be a relay migration).
- test_roll_from_the_previous_release_binaries: the newest recorded
  release the tree's batond rolls to a newer release, rolled to the tree's
  batond by the tree's batonctl. REL is the tree's own release when the
  two share a peer protocol; otherwise the newest release the tree's batond
  emulates that does (`--roll-to-release`): 1.x cannot roll to 2.0.0,
  which speaks peer protocol 4 only, so 1.2.0 rolls to 1.3.0 emulated.
- test_relay_migration_from_the_newest_recorded_release: the newest
  recorded release, 1.3.0, shares no peer protocol with the tree's 2.0.0
  and predates sealed migration messages: its real binaries migrate under
  load to the tree's through baton-relay, the new nodes started with
  --migrate-from-unsealed 1.3.0 (docs/relay.md, "Migrating from 1.3.0").
  With the relay killed and restarted part-way, and without.
- test_a_cluster_before_sealing_migrates_only_when_named: without
  --open-cluster (relay) and --migrate-from-unsealed (new nodes), real
  1.3.0 is refused with a message naming them.

Each roll asserts:

- batonctl roll exits 0, and its events tell an operator's roll: the
  pre-checks passed with 3 members, the plan restarts every node from the
  old release, the leader of the pre-checks last; the restarts follow the
  plan, each node is done at the new release; before the leader's restart
  leadership went to another node (batonctl's hand-over, or the cluster's
  own once most voters run the new release); the machine version and the
  release floor rose to the new release's; the last event is `done`;
- the history is linearizable (baton-lincheck) and no acknowledged write
  is missing from the final reads;
- the nodes first reported the old release, and as batonctl started each
  node had the old release as its floor and the old release's machine_max
  as its machine version; each restarted node reported the new release,
  none of them leading when it got SIGTERM; at the end every node reports
  the new release, the release floor is the new release, and the
  effective machine version is the new release's machine_max;
- each node, restarted on the new binary, recovered from a snapshot the old
  release wrote (the run takes one every 200 entries).

It prints the longest write gap in each node's step of the roll (as
bench/roll measures it) and batonctl's time.

It fails (never skips) when RELEASES, the release or its commit is missing
(a shallow clone: `git fetch --unshallow`), or the old build fails.

Environment as test_jepsen.py (BATON_BUILD, BATON_LINCHECK, JEPSEN_SEED,
JEPSEN_OUT, JEPSEN_CLIENTS, JEPSEN_KEYS); JEPSEN_REAL_ROLL_SECONDS (default
30); BATON_RELEASES_DIR.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

# A passed test's output folder goes (tests/e2e/conftest.py).
remove_what_a_passed_test_wrote = harness.e2e.remove_what_a_passed_test_wrote
import roll  # noqa: E402
from test_jepsen import (env_int, harness_args, require_binaries,  # noqa: E402
                         seed_from_env)

REPO = harness.REPO
BUILD_RELEASE = REPO / "scripts" / "build-release"
ROLL_SECONDS = 30
BUILD_TIMEOUT_S = 900  # the old release's batond and batonctl, -j2


def release_key(text):
    return tuple(int(x) for x in text.split("."))


def recorded_releases(path=REPO / "RELEASES"):
    """{version: commit} of RELEASES; fails the test if it is missing or
    malformed."""
    if not path.is_file():
        pytest.fail(f"{path} not found: it records each release's commit "
                    f"(docs/upgrading.md, \"Releases\")")
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) != 2 or len(words[1]) != 40:
            pytest.fail(f"{path}:{n}: expected 'VERSION COMMIT' (a full "
                        f"40-hex commit id), found {line!r}")
        roll.parse_spec(f"{words[0]},{words[0]}")
        out[words[0]] = words[1]
    if not out:
        pytest.fail(f"{path} records no release")
    return out


def releases_dir():
    env = os.environ.get("BATON_RELEASES_DIR")
    d = Path(env) if env else harness.build_dir() / "releases"
    return d if d.is_absolute() else REPO / d


def machine_max(batond, as_release=None):
    """The machine_max a batond reports in --version ("peer protocol 2-3,
    machine_max 2"), emulating as_release if given."""
    emulate = ["--as-release", as_release] if as_release else []
    text = subprocess.run([str(batond)] + emulate + ["--version"],
                          capture_output=True, text=True, timeout=10).stdout
    found = re.search(r"\bmachine_max (\d+)\b", text)
    if found:
        return int(found.group(1))
    pytest.fail(f"{batond} --version names no machine_max: {text!r}")


def build_release(version, outdir):
    t0 = time.monotonic()
    p = subprocess.run([str(BUILD_RELEASE), version, str(outdir)],
                       capture_output=True, text=True,
                       timeout=BUILD_TIMEOUT_S)
    took = time.monotonic() - t0
    print(f"{BUILD_RELEASE.name} {version}: exit {p.returncode} in "
          f"{took:.1f} s\n{p.stdout}{p.stderr}")
    if p.returncode != 0:
        pytest.fail(f"scripts/build-release {version} failed (exit "
                    f"{p.returncode}):\n{p.stdout}{p.stderr}")
    return outdir


def recorded_pairs():
    """Each two adjacent releases recorded in RELEASES, oldest first ([]
    when RELEASES is missing or malformed: test_releases_are_recorded
    says so)."""
    try:
        found = sorted(recorded_releases(), key=release_key)
    except BaseException:  # pytest.fail's outcome, at collection
        return []
    return list(zip(found, found[1:]))


def test_releases_are_recorded():
    """RELEASES records at least two releases, so that the real binaries of
    one are rolled to the next's (test_roll_between_recorded_releases)."""
    assert len(recorded_releases()) >= 2


@pytest.mark.parametrize("old,new", recorded_pairs())
def test_roll_between_recorded_releases(tmp_path, old, new):
    """Two adjacent recorded releases that share a peer protocol: a cluster
    of the old release's real binaries rolled by the newer release's own
    batonctl to its real batond."""
    require_binaries()
    old_dir = build_release(old, releases_dir() / old)
    new_dir = build_release(new, releases_dir() / new)
    if roll.roll_target(new_dir / "batond", old_dir / "batond") != new:
        pytest.fail(f"releases {old} and {new} share no peer protocol: a "
                    f"roll cannot join them; test the relay migration "
                    f"between them instead (tests/jepsen/test_migration.py)")
    roll_real(tmp_path, old, old_dir, new_dir, new, new)


def test_roll_from_the_previous_release_binaries(tmp_path):
    """The newest recorded release the tree's batond can roll a cluster
    above (its own release, or the newest it emulates that shares a peer
    protocol with it), rolled to the tree's batond by the tree's batonctl:
    the tree reads that release's real data and snapshots."""
    require_binaries()
    build = harness.build_dir()
    own = roll.binary_release(build / "batond")
    older = sorted((v for v in recorded_releases()
                    if release_key(v) < release_key(own)), key=release_key)
    if not older:
        pytest.fail(f"RELEASES records no release older than the tree's "
                    f"{own}: record the previous release's commit there")
    for old in reversed(older):
        old_dir = build_release(old, releases_dir() / old)
        new = roll.roll_target(build / "batond", old_dir / "batond")
        if new is not None and release_key(new) > release_key(old):
            break
    else:
        pytest.fail(f"the tree's batond ({own}) can roll no recorded "
                    f"release to a newer one")
    roll_real(tmp_path, old, old_dir, build, new, own)


def roll_real(tmp_path, old, old_dir, new_dir, new, own):
    """Run the fault harness's --roll-binaries from old_dir's batond to
    new_dir's (emulating `new` when it is not new_dir's own release `own`),
    rolled by new_dir's batonctl, and check what the module's head says."""
    emulate = [] if new == own else ["--roll-to-release", new]
    seed = seed_from_env()
    seconds = env_int("JEPSEN_REAL_ROLL_SECONDS", ROLL_SECONDS)
    args = harness_args(tmp_path, seed, seconds, 3,
                        ["--roll-binaries", f"{old_dir},{new_dir}",
                         "--nemesis", "none"] + emulate,
                        label=f"real-{old}-{new}-")
    res = harness.run(args)
    print(res.message)
    print(res.roll_summary)
    assert res.ok, f"{res.message}\n{res.roll_summary}"
    assert res.verdict == "linearizable"
    assert res.counts["ok"] > 0
    checked, lost = res.lost_writes
    assert not lost, lost
    assert checked > 0, "no acknowledged write whose effect could be checked"
    want_machine = machine_max(new_dir / "batond",
                               None if new == own else new)
    check_batonctl_roll(res, old, new, want_machine)
    # As batonctl started: every node at the old release, its floor and
    # machine version; the roll raised the floor (and the machine version
    # as far as the new release allows).
    old_machine = machine_max(old_dir / "batond")
    assert res.roller.before_roll == {i: (old, old_machine, old)
                                      for i in (1, 2, 3)}, res.roll_summary
    assert want_machine >= old_machine
    timeline = res.roller.timeline
    first = next(e for e in timeline if e["what"] == "versions")
    assert first["nodes"] == " ".join(f"{i}:{old}" for i in (1, 2, 3)), \
        res.roll_summary
    upgrades = [e for e in timeline if e["what"] == "upgrade"]
    assert sorted(e["node"] for e in upgrades) == [1, 2, 3], res.roll_summary
    assert all(e["release"] == new for e in upgrades)
    # batonctl hands leadership over before the leader's restart: no node
    # led (as the harness saw it) when it got SIGTERM.
    assert all(e["leader"] != e["node"] for e in upgrades), \
        res.roll_summary
    assert res.final_versions == {i: (new, want_machine, new)
                                  for i in (1, 2, 3)}, res.roll_summary
    # Each node's restart on the new binary recovered from a snapshot the
    # old release wrote (the harness takes one every 200 entries).
    for i in (1, 2, 3):
        log = (res.out_dir / "logs" / f"node{i}.log").read_text(
            errors="replace")
        starts = log.split("---- start: ")
        assert len(starts) == 3, f"node {i}: expected 2 starts in its log"
        found = re.search(r"recovered term \d+, snapshot (\d+)", starts[2])
        assert found and int(found.group(1)) > 0, (
            f"node {i} on {new} did not report recovering from a snapshot "
            f"of {old} ('recovered term T, snapshot S' with S > 0):\n"
            + starts[2][:2000])
    for node_id, gap in res.roll_gaps_ms.items():
        print(f"node {node_id}: longest write gap in its step of the roll "
              + ("(no writes)" if gap is None else f"{gap:.0f} ms"))
    print(f"batonctl roll: {res.roller.events[-1]['t']:.1f} s")


def check_batonctl_roll(res, old, new, want_machine):
    """batonctl roll's exit status and --json events (docs/upgrading.md,
    "batonctl roll")."""
    roller = res.roller
    why = f"{res.roll_summary}\nbatonctl's events:\n" + "\n".join(
        repr(e) for e in roller.events)
    assert roller.batonctl_code == 0, why
    events = roller.events
    kinds = [e["event"] for e in events]
    assert "failed" not in kinds, why
    assert kinds[-1] == "done", why
    pre = next(e for e in events if e["event"] == "precheck")
    assert pre["ok"] is True and pre["members"] == 3, why
    led = pre["leader"]
    plan = next(e for e in events if e["event"] == "plan")
    assert plan["to"] == new and plan["skipped"] == [], why
    assert sorted(plan["order"]) == [1, 2, 3], why
    assert plan["order"][-1] == led, f"the leader {led} is not last\n{why}"
    restarts = [e for e in events if e["event"] == "restart"]
    assert [e["node"] for e in restarts] == plan["order"], why
    assert all(e["from"] == old for e in restarts), why
    done = [e for e in events if e["event"] == "node_done"]
    assert [e["node"] for e in done] == plan["order"], why
    assert all(e["release"] == new for e in done), why
    # Each node is done before the next restart.
    for a, b in zip(done, restarts[1:]):
        assert events.index(a) < events.index(b), why
    # The leader's step: leadership moved to another node before its
    # restart (batonctl's hand-over, or already moved by the cluster).
    last = events.index(restarts[-1])
    moved = [e for e in events[events.index(done[-2]):last]
             if e["event"] == "transfer" and e.get("from") == led]
    assert moved and all(e.get("to") not in (None, led) for e in moved), \
        f"no hand-over from node {led} before its restart\n{why}"
    machine = [e for e in events if e["event"] == "machine_version"]
    assert machine and machine[-1]["machine_version"] == want_machine \
        and machine[-1]["release_floor"] == new, why


def test_build_release_refuses_what_it_cannot_build(tmp_path):
    """scripts/build-release fails with a message saying what to do: a
    release RELEASES does not record, and a recorded commit missing from a
    shallow clone."""
    p = subprocess.run([str(BUILD_RELEASE), "0.0.1", str(tmp_path / "x")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert "release 0.0.1 is not recorded" in p.stderr, p.stderr
    if shutil.which("git") is None:
        pytest.fail("git not found")
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1",
                    f"file://{REPO}", str(clone)], check=True, timeout=120,
                   capture_output=True)
    releases = recorded_releases()
    shallow_has = {v for v, c in releases.items()
                   if subprocess.run(["git", "-C", str(clone), "cat-file",
                                      "-e", f"{c}^{{commit}}"],
                                     capture_output=True).returncode == 0}
    missing = sorted(set(releases) - shallow_has, key=release_key)
    assert missing, "a depth-1 clone holds every recorded release's commit"
    shutil.copy(REPO / "RELEASES", clone / "RELEASES")
    p = subprocess.run([str(BUILD_RELEASE), missing[-1], str(tmp_path / "y")],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, BATON_REPO=str(clone)))
    assert p.returncode == 1
    assert "shallow clone" in p.stderr and "fetch --unshallow" in p.stderr, \
        p.stderr
    assert not (tmp_path / "y" / "batond").exists()


def test_relay_migration_from_the_newest_recorded_release(tmp_path):
    """The newest recorded release shares no peer protocol with the tree's
    own (1.3.0 and 2.0.0): a cluster of its real binaries migrates to the
    tree's through baton-relay, under load, as a scheduler does it
    (tests/jepsen/test_migration.py): three real 1.3.0 nodes with --relay
    (1.3.0 has no --migrate-to and no migration secret), three of the
    tree's release started one by one with --migrate-from old
    --migrate-from-unsealed 1.3.0 (its format-1 messages, docs/relay.md
    "Migrating from 1.3.0"), an old node killed after each new node is
    ready, the relay killed (-9) and restarted part-way (1.3.0 then drops
    what it had not delivered to the new leader: without the new side's
    session reset, about 1 run in 3 lost acknowledged writes). The
    history is linearizable and no acknowledged write is lost
    (baton-lincheck), the new cluster holds authority, and no node
    dropped a message as malformed. A release that does not build fails
    the run."""
    migrate_from_the_newest_recorded_release(tmp_path, kill_relay=True)


def test_relay_migration_from_the_newest_recorded_release_relay_up(tmp_path):
    """The same with the relay up throughout."""
    migrate_from_the_newest_recorded_release(tmp_path, kill_relay=False)


def newest_older_release_built():
    """This build's release, the newest recorded release older than it,
    and the directory of that one's binaries (built if they were not)."""
    require_binaries()
    own = roll.binary_release(harness.build_dir() / "batond")
    old = max((v for v in recorded_releases()
               if release_key(v) < release_key(own)), key=release_key)
    return own, old, build_release(old, releases_dir() / old)


def migrate_from_the_newest_recorded_release(tmp_path, kill_relay):
    import test_migration  # the scheduler's migration, as there
    _, old, old_dir = newest_older_release_built()
    assert roll.binary_release(old_dir / "batond") == old
    final = test_migration.replace_old_cluster(
        tmp_path, seed_from_env(), "when-ready",
        old_binary=old_dir / "batond", unsealed_release=old,
        kill_relay=kill_relay)
    print(final)
    # The import and the hand-off went over format 1, and the node says
    # the link was unauthenticated.
    assert int(final["migration_unsealed_in"]) > 0, final
    assert int(final["migration_unsealed_out"]) > 0, final
    assert final["migration_unsealed_release"] == old, final
    assert "NOT authenticated" in final["migration_unsealed_warning"], final
    # Neither side dropped the other's messages as malformed (what made
    # this an expected failure before --migrate-from-unsealed).
    for log in sorted((tmp_path / "old").glob("node*.log")) + sorted(
            (tmp_path / "new").glob("node*.log")):
        text = log.read_text(errors="replace")
        assert "malformed migration message" not in text, \
            f"{log.name}:\n{text[-3000:]}"
    for log in sorted((tmp_path / "new").glob("node*.log")):
        assert "WARNING: --migrate-from-unsealed" in log.read_text(
            errors="replace"), log.name


def test_a_cluster_before_sealing_migrates_only_when_named(tmp_path):
    """Real 1.3.0 binaries without the explicit options are refused with a
    clear message (docs/relay.md, "Migrating from 1.3.0"): a relay with
    registration secrets refuses the 1.3.0 node (it proves nothing) and
    names --open-cluster; once the relay names it, a new node without
    --migrate-from-unsealed imports nothing and says which flag is
    missing; restarted with it, the new node imports the old node's keys
    and serves them."""
    import test_migration
    build = harness.build_dir()
    own, old, old_dir = newest_older_release_built()
    e2e = harness.e2e
    port = e2e.free_ports(1)[0]
    relay_addr = f"{test_migration.HOST}:{port}"
    relay_secret = e2e.make_secret_file(tmp_path / "relay-new")
    secret = test_migration.migration_secret(tmp_path)
    relay_log = tmp_path / "relay.log"
    (tmp_path / "relay-data").mkdir()

    def start_relay(*extra):
        with open(relay_log, "ab") as log:
            p = subprocess.Popen(
                [str(build / "baton-relay"), "--listen", relay_addr,
                 "--data", str(tmp_path / "relay-data"), "--activate",
                 "--cluster-secret", f"new={relay_secret}", *extra],
                stdout=log, stderr=log, preexec_fn=e2e._die_with_parent)
        return p

    old_c = e2e.Cluster(tmp_path / "old")
    new_c = e2e.Cluster(tmp_path / "new")
    relay = start_relay()
    try:
        ports = e2e.free_ports(4)
        a = e2e.Node(old_c, 1, ports[0], ports[1])
        a.binary = old_dir / "batond"
        old_c.nodes[1] = a
        a.start(["--bootstrap", f"1={a.peer_addr}/{a.client_addr}",
                 "--relay", relay_addr, "--relay-cluster", "old"])
        keys = {f"k{i}": f"v{i}" for i in range(20)}
        e2e.retry(lambda: [a.client().set(k, v) for k, v in keys.items()],
                  what="writes on the old node")
        d = e2e.Deadline(20, "the relay's refusal of the 1.3.0 node")
        while "--open-cluster old" not in relay_log.read_text(
                errors="replace"):
            if d.expired():
                d.fail(relay_log.read_text(errors="replace")[-2000:])
            time.sleep(0.1)
        assert "authentication failed: the relay has no secret for " \
               "cluster old" in relay_log.read_text(errors="replace")
        relay.kill()
        relay.wait(timeout=10)
        relay = start_relay("--open-cluster", "old")
        b = e2e.Node(new_c, 11, ports[2], ports[3])
        new_c.nodes[11] = b
        common = ["--relay", relay_addr, "--relay-cluster", "new",
                  "--relay-secret-file", str(relay_secret),
                  "--migrate-from", "old", "--cluster-id", "new",
                  "--migration-secret-file", secret, "--accept-joins",
                  "--bootstrap", f"11={b.peer_addr}/{b.client_addr}"]
        b.start(common)
        d = e2e.Deadline(20, "migration_not_ready naming the flag")
        st = {}
        while "--migrate-from-unsealed 1.3.0" not in st.get(
                "migration_not_ready", ""):
            if d.expired():
                d.fail(repr(st))
            try:
                st = test_migration.migration_status(b)
            except Exception as e:  # not answering yet
                st = {"error": repr(e)}
            time.sleep(0.1)
        time.sleep(2.0)  # nothing comes, however long
        st = test_migration.migration_status(b)
        assert st["import_index"] == "0" and st["migration_ready"] == "0", st
        b.terminate()
        b.start(common + ["--migrate-from-unsealed", old])
        test_migration.wait_ready(b, f"the {own} node importing from real "
                                     f"{old}", deadline_s=20.0)
        for k, v in keys.items():
            assert b.client().get(k) == v, k
    finally:
        old_c.stop_all()
        new_c.stop_all()
        if relay.poll() is None:
            relay.kill()
            relay.wait(timeout=10)
