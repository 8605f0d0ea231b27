"""Rolling releases during a harness run (`--roll-releases FROM,TO`, or
`--roll-binaries OLD_DIR,NEW_DIR`).

With --roll-releases every node starts emulating release FROM (`batond
--as-release FROM`); at evenly spaced moments of the run one node after the
other, by increasing id, is stopped with SIGTERM and started again at
release TO on the same data directory, as an operator upgrading by hand
would (docs/upgrading.md).

With --roll-binaries the nodes run real binaries of two releases: every
node starts on OLD_DIR/batond (e.g. a previous release built from git
history by scripts/build-release) and is restarted on NEW_DIR/batond, same
flags, same data directory. The order is an operator's: followers first,
the leader last (at each restart, a node not yet upgraded that does not
lead, the lowest id first; the leader only when no other is left, and its
SIGTERM hands leadership over first). FROM and TO are what the two binaries
report (`batond --version`), and each restarted node must report TO.
Fault episodes of the schedule that would overlap an upgrade are left out,
so each restart is an upgrade and not a crash; the faults before, between
and after still run.

After each upgrade the roller looks at every live node's INFO (`# Versions`)
and checks the machine-upgrade rule from the outside: the effective machine
version any node reports never exceeds the machine_max of a node of the
cluster (the releases each node runs, as each node itself reports them). A
probe command of machine version 2 (PEXPIRE on a key outside the history's)
must be refused with the gating error while the effective version is 1, and
accepted once it is 2. At the end, with every node at TO, the effective
version must reach the lowest machine_max within a bound.

The timeline (each upgrade, each observation) goes into the run's report,
with the longest gap a client saw between two acknowledged writes around
each restart.
"""

import subprocess
import time
from pathlib import Path

import redis

HOST = "127.0.0.1"
UPGRADE_QUIET_S = 1.0  # no fault episode this close to an upgrade
OBSERVE_EVERY_S = 1.0  # versions looked at between upgrades too
SETTLE_S = 20.0  # after the last upgrade: the effective version must rise
GAP_WINDOW_S = (1.0, 10.0)  # write gaps measured in [t - a, t + b]
PROBE_KEY = "roll-probe"
GATING_TEXT = "needs machine version"


def parse_spec(text):
    """'1.0.0,1.1.0' -> ('1.0.0', '1.1.0'); ValueError otherwise."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ValueError("--roll-releases takes FROM,TO (e.g. 1.0.0,1.1.0)")
    for p in parts:
        nums = p.split(".")
        if len(nums) != 3 or not all(n.isdigit() for n in nums):
            raise ValueError(f"not a release: {p!r}")
    return parts[0], parts[1]


def parse_binaries(text):
    """'OLD_DIR,NEW_DIR' -> (old batond, new batond) as Paths; ValueError
    unless each folder holds an executable batond."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ValueError("--roll-binaries takes OLD_DIR,NEW_DIR (folders "
                         "holding a batond each)")
    out = []
    for p in parts:
        batond = Path(p).resolve() / "batond"
        if not batond.is_file():
            raise ValueError(f"--roll-binaries: no batond in {p} (build a "
                             f"recorded release with scripts/build-release "
                             f"VERSION)")
        out.append(batond)
    return out[0], out[1]


def binary_release(batond):
    """The release a batond binary reports: the first line of --version is
    'batond X.Y.Z'. ValueError otherwise."""
    p = subprocess.run([str(batond), "--version"], capture_output=True,
                       text=True, timeout=10)
    words = (p.stdout.splitlines() or [""])[0].split()
    if p.returncode != 0 or len(words) != 2 or words[0] != "batond":
        raise ValueError(f"{batond} --version: exit {p.returncode}, "
                         f"{(p.stdout + p.stderr).strip()[:200]!r}")
    parse_spec(f"{words[1]},{words[1]}")  # a release, or ValueError
    return words[1]


def merge_schedule(schedule, seconds, node_ids, release, targets=None):
    """The fault schedule with one upgrade episode per node (evenly spaced
    over the run; targets: by id, or the given ones, e.g. "next" to let the
    roller choose) and without the fault episodes that would overlap an
    upgrade."""
    n = len(node_ids)
    targets = sorted(node_ids) if targets is None else targets
    times = [seconds * (k + 1) / (n + 1) for k in range(n)]
    kept = []
    for ep in schedule:
        start, end = ep["at"], ep["at"] + ep["duration"]
        if all(end < t - UPGRADE_QUIET_S or start > t + UPGRADE_QUIET_S
               for t in times):
            kept.append(ep)
    for t, node_id in zip(times, targets):
        kept.append({"at": round(t, 3), "duration": 0.5, "faults": [
            {"kind": "upgrade", "target": node_id, "release": release}]})
    kept.sort(key=lambda ep: ep["at"])
    return kept


def node_floor(node, timeout=1.0):
    """(release, machine_version, release_floor) from INFO, or None."""
    try:
        info = node.client(timeout=timeout).info()
        return (str(info["release"]), int(info["machine_version"]),
                str(info["release_floor"]))
    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError,
            KeyError, ValueError):
        return None


def node_versions(node, timeout=1.0):
    """(release, machine_max, machine_version, role, upgrade_waits_for)
    from INFO, or None."""
    try:
        info = node.client(timeout=timeout).info()
    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
        return None
    try:
        return (str(info["release"]), int(info["machine_max"]),
                int(info["machine_version"]), str(info.get("role", "")),
                str(info.get("upgrade_waits_for", "")))
    except (KeyError, ValueError):
        return None


class Roller:
    """Carries out the upgrade episodes and checks what it observes. Its
    failures are raised as the harness's failure class."""

    def __init__(self, run, nemesis, release_from, release_to, failure,
                 binaries=None):
        self.run = run
        self.binaries = binaries  # (old batond, new batond), or None
        self.nemesis = nemesis
        self.release_from = release_from
        self.release_to = release_to
        self.failure = failure
        self.timeline = []  # dicts: ns, what, detail
        self.upgraded = {}  # node id -> monotonic ns of its restart
        self.machine_max = {}  # node id -> last machine_max it reported
        self.highest_seen = 0
        self.last_observed = 0.0  # monotonic s
        self.last_effective = None

    def note(self, what, **detail):
        entry = {"ns": time.monotonic_ns(), "what": what}
        entry.update(detail)
        self.timeline.append(entry)
        self.nemesis.note(what, **detail)

    def next_node(self):
        """Followers first, the leader last: a node not yet upgraded that
        does not lead (lowest id first), else the leader."""
        left = [i for i in sorted(self.run.cluster.nodes)
                if i not in self.upgraded]
        if not left:
            raise self.failure("an upgrade episode with every node upgraded")
        leader = self.run.cluster.quick_leader()
        followers = [i for i in left if leader is None or i != leader.id]
        return followers[0] if followers else left[0]

    def upgrade(self, node_id):
        if node_id == "next":
            node_id = self.next_node()
        node = self.run.cluster.node(node_id)
        self.run.cluster.resume(node)
        leader = self.run.cluster.quick_leader()
        if self.binaries is not None:
            node.batond = self.binaries[1]
        else:
            node.release = self.release_to
        restarted = node.alive
        if node.alive:
            code = node.terminate()
            if code != 0:
                raise self.failure(f"node {node_id} exited {code} on SIGTERM "
                                   f"before its upgrade")
            self.nemesis.restart(node)
        else:
            # Down for a fault: the heal restarts it at the new release.
            self.nemesis.killed.add(node_id)
        self.upgraded[node_id] = time.monotonic_ns()
        detail = {"binary": str(node.batond)} if self.binaries else {}
        self.note("upgrade", node=node_id, release=self.release_to,
                  leader=leader.id if leader is not None else None, **detail)
        if restarted:
            v = node_versions(node, timeout=2.0)
            if v is None or v[0] != self.release_to:
                raise self.failure(
                    f"node {node_id} restarted for release "
                    f"{self.release_to} reports "
                    f"{v[0] if v else 'nothing (INFO failed)'}")
        self.observe()

    def final_versions(self):
        """{node id: (release, machine_version, release_floor)} of every
        node at the end (each asked until it answers, within SETTLE_S)."""
        out = {}
        end = time.monotonic() + SETTLE_S
        for node in self.run.cluster.nodes.values():
            v = node_floor(node, timeout=2.0)
            while v is None and time.monotonic() < end:
                time.sleep(0.25)
                v = node_floor(node, timeout=2.0)
            out[node.id] = v
        self.note("final versions", nodes=" ".join(
            f"{i}:{v[0]}/m{v[1]}/floor {v[2]}" if v else f"{i}:?"
            for i, v in sorted(out.items())))
        return out

    def maybe_observe(self):
        """observe() about once a second during the run; the timeline keeps
        only the observations where the effective version changed."""
        if time.monotonic() - self.last_observed >= OBSERVE_EVERY_S:
            self.observe(quiet=True)

    def observe(self, quiet=False):
        """Every live node's versions; check the machine-upgrade rule and
        the gating of a version-2 command."""
        self.last_observed = time.monotonic()
        seen = {}
        for node in self.run.cluster.alive():
            if node.id in self.run.cluster.paused:
                continue
            v = node_versions(node)
            if v is not None:
                seen[node.id] = v
                self.machine_max[node.id] = v[1]
        if not seen:
            return None
        effective = max(v[2] for v in seen.values())
        self.highest_seen = max(self.highest_seen, effective)
        floor = min(self.machine_max.values())
        waits = [v[4] for v in seen.values() if v[3] == "leader" and v[4]]
        changed = effective != self.last_effective
        self.last_effective = effective
        if changed or not quiet:
            self.note("versions", effective=effective, lowest_machine_max=floor,
                      nodes=" ".join(f"{i}:{v[0]}" for i, v in sorted(
                          seen.items())),
                      **({"leader_waits_for": repr(waits[0])}
                         if waits else {}))
        if len(self.machine_max) == len(self.run.cluster.nodes) \
                and effective > floor:
            raise self.failure(
                f"effective machine version {effective} while a node runs a "
                f"release whose machine_max is {floor} "
                f"({sorted(self.machine_max.items())})")
        self.probe(effective)
        return effective

    def probe(self, effective):
        leader = self.run.cluster.quick_leader()
        if leader is None:
            return
        try:
            reply = leader.client(timeout=2.0).execute_command(
                "PEXPIRE", PROBE_KEY, "600000")
        except redis.ResponseError as e:
            text = str(e)
            if GATING_TEXT in text:
                if effective >= 2:
                    # The node may lag the log by a moment: only a refusal
                    # seen after the version rose everywhere is wrong.
                    self.note("probe refused", effective=effective)
                return
            if text.startswith(("TRYAGAIN", "NOTLEADER", "STALLED")):
                return
            raise self.failure(f"PEXPIRE probe: unexpected error {text!r}")
        except (redis.ConnectionError, redis.TimeoutError):
            return
        if self.highest_seen >= 2 or effective >= 2:
            return
        # The version may have risen since we looked: look again.
        now = [node_versions(m) for m in self.run.cluster.alive()]
        if max((v[2] for v in now if v is not None), default=0) < 2:
            raise self.failure(f"PEXPIRE accepted ({reply!r}) while the "
                               f"effective machine version is {effective}")

    def settle(self):
        """With every node at the new release: the effective version must
        reach the lowest machine_max, and the probe must be accepted."""
        end = time.monotonic() + SETTLE_S
        target = None
        while time.monotonic() < end:
            effective = self.observe(quiet=True)
            target = min(self.machine_max.values()) \
                if self.machine_max else None
            if effective is not None and target is not None \
                    and effective >= target and self.probe_accepted():
                self.note("settled", effective=effective)
                return
            time.sleep(0.25)
        raise self.failure(f"the effective machine version did not reach "
                           f"{target} within {SETTLE_S:g} s of the last "
                           f"upgrade")

    def probe_accepted(self):
        leader = self.run.cluster.quick_leader()
        if leader is None:
            return False
        try:
            leader.client(timeout=2.0).execute_command(
                "PEXPIRE", PROBE_KEY, "600000")
            return True
        except (redis.ResponseError, redis.ConnectionError,
                redis.TimeoutError):
            return False

    def write_gaps(self, ops):
        """For each upgrade: the longest time, in ms, between two
        consecutive acknowledged writes completing from GAP_WINDOW_S[0]
        before it to GAP_WINDOW_S[1] after it (or to just before the next
        upgrade, so that each gap belongs to one restart)."""
        done = sorted(op.complete_ns for op in ops
                      if op.status == "ok" and op.f != "get"
                      and op.complete_ns is not None)
        order = sorted(self.upgraded.items(), key=lambda x: x[1])
        gaps = {}
        for k, (node_id, t) in enumerate(order):
            lo = t - int(GAP_WINDOW_S[0] * 1e9)
            hi = t + int(GAP_WINDOW_S[1] * 1e9)
            if k + 1 < len(order):
                hi = min(hi, order[k + 1][1] - int(GAP_WINDOW_S[0] * 1e9))
            inside = [x for x in done if lo <= x <= hi]
            longest = max((b - a for a, b in zip(inside, inside[1:])),
                          default=None)
            gaps[node_id] = None if longest is None else longest / 1e6
        return gaps

    def summary(self, ops, t0_ns):
        lines = []
        for e in self.timeline:
            detail = " ".join(f"{k}={v}" for k, v in e.items()
                              if k not in ("ns", "what"))
            lines.append(f"t+{(e['ns'] - t0_ns) / 1e9:6.1f}s {e['what']} "
                         f"{detail}")
        for node_id, gap in self.write_gaps(ops).items():
            lines.append(f"node {node_id} upgrade: longest write gap "
                         + ("(no writes)" if gap is None
                            else f"{gap:.0f} ms"))
        return "\n".join(lines)
