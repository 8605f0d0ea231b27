"""Rolling releases during a harness run (`--roll-releases FROM,TO`, or
`--roll-binaries OLD_DIR,NEW_DIR`).

With --roll-releases every node starts emulating release FROM (`batond
--as-release FROM`); at evenly spaced moments of the run one node after the
other, by increasing id, is stopped with SIGTERM and started again at
release TO on the same data directory, as an operator upgrading by hand
would (docs/upgrading.md).

With --roll-binaries the nodes run real binaries of two releases: every
node starts on OLD_DIR/batond (e.g. a previous release built from git
history by scripts/build-release), and a third of the way into the run the
operator's tool rolls them to NEW_DIR/batond (with --roll-to-release TO,
to NEW_DIR/batond --as-release TO: a release the new binary emulates, when
the old one cannot talk to the new binary's own, as 1.x and 2.0.0):

  NEW_DIR/batonctl roll --to TO --json --restart 'restart_node.py SOCK {id}'

batonctl picks the order (followers first, the leader last after handing
leadership over), runs the restart command per node and waits until the
node reports TO and caught up, then until the machine version rose. The
restart command (tests/jepsen/restart_node.py) asks the harness over a Unix
socket to restart node {id}: SIGTERM, wait for the exit, start
NEW_DIR/batond with the same flags and data, answer once it answers PING.
The harness keeps owning every PID and starts the nodes from its main
thread, which serves the socket while it reads batonctl's --json events;
those events are the roll's timeline (docs/upgrading.md, "batonctl roll").
batonctl must exit 0. Fault episodes that would start from 1 s before the
roll until 1 s after it ended are left out; the faults before and after
still run. FROM and TO are what the two binaries report (`batond
--version`), and each restarted node must report TO.

After each upgrade the roller looks at every live node's INFO (`# Versions`)
and checks the machine-upgrade rule from the outside: the effective machine
version any node reports never exceeds the machine_max of a node of the
cluster (the releases each node runs, as each node itself reports them). A
probe command of machine version 2 (PEXPIRE on a key outside the history's)
must be refused with the gating error while the effective version is 1, and
accepted once it is 2. At the end, with every node at TO, the effective
version must reach the lowest machine_max within a bound.

The timeline (each upgrade, each observation, batonctl's events) goes into
the run's report, with the longest gap a client saw between two
acknowledged writes around each restart: with --roll-releases in a window
around it; with batonctl, in its step (from the step's first event, the
hand-over or the restart, to the next step's; the last one to 100 ms after
`done`), as bench/roll measures it.
"""

import bisect
import json
import os
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

HOST = "127.0.0.1"
UPGRADE_QUIET_S = 1.0  # no fault episode this close to an upgrade
OBSERVE_EVERY_S = 1.0  # versions looked at between upgrades too
SETTLE_S = 20.0  # after the last upgrade: the effective version must rise
GAP_WINDOW_S = (1.0, 10.0)  # write gaps measured in [t - a, t + b]
ROLL_AT_SHARE = 1 / 3  # batonctl roll starts this far into the run
STEP_TIMEOUT_S = 20  # batonctl roll --step-timeout-s
ANSWER_TIMEOUT_S = 5.0  # restart_node.py's request arrives within
LAST_STEP_MARGIN_S = 0.1  # the last step ends this long after `done`
RESTART_HELPER = Path(__file__).resolve().parent / "restart_node.py"
# batonctl roll's exit statuses (docs/upgrading.md, "batonctl roll").
BATONCTL_EXITS = {1: "failed during the roll", 2: "bad usage",
                  3: "a pre-check refused, nothing changed",
                  4: "rolled, but the machine version did not rise in time"}
PROBE_KEY = "roll-probe"
GATING_TEXT = "needs machine version"
# 1.2.0 and older refuse a write that reaches the leader during a
# leadership transfer with this ERR (nothing proposed); 1.3.0 holds it.
OLD_TRANSFER_REFUSAL = \
    "a configuration change or leadership transfer is in progress"


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


def batonctl_beside(batond):
    """The batonctl in the new binary's folder: the operator's tool of the
    release rolled to. ValueError if there is none."""
    batonctl = Path(batond).parent / "batonctl"
    if not batonctl.is_file():
        raise ValueError(f"--roll-binaries: no batonctl beside {batond} "
                         f"(batonctl roll does the roll; build it: make "
                         f"build)")
    return batonctl


def binary_release(batond, as_release=None):
    """The release a batond binary reports (with --as-release, the release
    it emulates): the first line of --version is 'batond X.Y.Z', followed
    by '(emulated by batond A.B.C)' when emulating. ValueError otherwise."""
    emulate = ["--as-release", as_release] if as_release else []
    p = subprocess.run([str(batond)] + emulate + ["--version"],
                       capture_output=True, text=True, timeout=10)
    words = (p.stdout.splitlines() or [""])[0].split()
    if p.returncode != 0 or len(words) < 2 or words[0] != "batond" or \
            (len(words) != 2) != bool(as_release):
        raise ValueError(f"{batond} {' '.join(emulate)} --version: exit "
                         f"{p.returncode}, "
                         f"{(p.stdout + p.stderr).strip()[:200]!r}")
    parse_spec(f"{words[1]},{words[1]}")  # a release, or ValueError
    return words[1]


def release_ranges(batond):
    """{release: (proto_min, proto_max, machine_max)} of every release a
    batond contains (its own and those it emulates), from --version."""
    def profile(as_release):
        emulate = ["--as-release", as_release] if as_release else []
        out = subprocess.run([str(batond)] + emulate + ["--version"],
                             capture_output=True, text=True,
                             timeout=10).stdout
        found = re.search(r"peer protocol (\d+)-(\d+), machine_max (\d+)",
                          out)
        if not found:
            raise ValueError(f"{batond} {' '.join(emulate)} --version "
                             f"names no profile: {out[:200]!r}")
        return tuple(int(x) for x in found.groups())
    own = binary_release(batond)
    out = subprocess.run([str(batond), "--version"], capture_output=True,
                         text=True, timeout=10).stdout
    emul = re.search(r"can emulate \(--as-release\): (.*)$", out, re.M)
    older = re.findall(r"\d+\.\d+\.\d+", emul.group(1)) if emul else []
    table = {own: profile(None)}
    for rel in older:
        table[rel] = profile(rel)
    return table


def roll_target(new_batond, old_batond):
    """The release a cluster of old_batond's nodes can be rolled to with
    new_batond: its own release if the two share a peer protocol, else the
    newest release new_batond emulates that shares one with the old (a 1.x
    cluster cannot roll to 2.0.0, which speaks protocol 4 only: docs/
    relay.md; it rolls to 1.3.0, emulated). None if no release does."""
    old = release_ranges(old_batond)[binary_release(old_batond)]
    table = release_ranges(new_batond)
    talks = [r for r, (lo, hi, _) in table.items()
             if lo <= old[1] and old[0] <= hi]
    return max(talks, key=lambda r: tuple(int(x) for x in r.split("."))) \
        if talks else None


def merge_schedule(schedule, seconds, node_ids, release):
    """The fault schedule with one upgrade episode per node (evenly spaced
    over the run, by increasing id) and without the fault episodes that
    would overlap an upgrade."""
    n = len(node_ids)
    targets = sorted(node_ids)
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


def schedule_batonctl_roll(schedule, seconds, release):
    """The fault schedule with one `roll` episode ROLL_AT_SHARE into the
    run (batonctl roll, which blocks the schedule until it ends) and
    without the fault episodes that would overlap its start; the nemesis
    leaves out those that would start before it ended (Roller.
    during_roll)."""
    at = round(seconds * ROLL_AT_SHARE, 3)
    kept = [ep for ep in schedule
            if ep["at"] + ep["duration"] < at - UPGRADE_QUIET_S
            or ep["at"] > at + UPGRADE_QUIET_S]
    kept.append({"at": at, "duration": 0.0, "faults": [
        {"kind": "roll", "release": release}]})
    kept.sort(key=lambda ep: ep["at"])
    return kept


def longest_gap(acks, lo, hi):
    """The longest interval (ns) between consecutive acknowledgements
    (sorted ns) that overlaps [lo, hi], counted to hi when none comes
    after hi; None without any acknowledgement."""
    if not acks:
        return None
    first = max(bisect.bisect_left(acks, lo) - 1, 0)
    after = bisect.bisect_right(acks, hi)
    seg = acks[first:min(after, len(acks) - 1) + 1]
    longest = max((b - a for a, b in zip(seg, seg[1:])), default=0)
    if after == len(acks):
        longest = max(longest, hi - acks[-1])
    return longest


class RestartSocket:
    """Where restart_node.py asks the harness for a node's restart."""

    def __init__(self, path, failure):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.bind(self.path)
        except OSError as e:
            self.sock.close()
            raise failure(f"cannot listen for batonctl's restart commands "
                          f"at {self.path}: {e} (a Unix socket's path is "
                          f"at most 107 bytes: set TMPDIR to a short "
                          f"folder)") from None
        self.sock.listen(4)

    def serve_one(self, restart):
        """Accept one request and answer it; `restart(node_id)` restarts
        the node and returns None, or the reason it could not."""
        conn, _ = self.sock.accept()
        with conn:
            conn.settimeout(ANSWER_TIMEOUT_S)
            try:
                data = b""
                while not data.endswith(b"\n") and len(data) < 100:
                    chunk = conn.recv(100)
                    if not chunk:
                        break
                    data += chunk
                words = data.decode(errors="replace").split()
                if len(words) != 2 or words[0] != "restart" \
                        or not words[1].isdigit():
                    reply = f"bad request {data[:80]!r}"
                else:
                    reply = restart(int(words[1])) or "ok"
                conn.sendall(reply.replace("\n", " ").encode() + b"\n")
            except OSError:
                pass  # the helper went away (batonctl's timeout): it says so

    def close(self):
        self.sock.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def node_floor(node, timeout=1.0):
    """(release, machine_version, release_floor) from INFO, or None."""
    try:
        info = node.client(timeout=timeout).info()
        return (str(info["release"]), int(info["machine_version"]),
                str(info["release_floor"]))
    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError,
            KeyError, ValueError):
        return None


def floors_text(floors):
    """{id: node_floor()} as '1:1.3.0/m2/floor 1.3.0 2:...'."""
    return " ".join(f"{i}:{v[0]}/m{v[1]}/floor {v[2]}" if v else f"{i}:?"
                    for i, v in sorted(floors.items()))


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
                 binaries=None, batonctl=None, socket_path=None,
                 out_dir=None, tick=None):
        self.run = run
        self.binaries = binaries  # (old batond, new batond), or None
        # With binaries: the release the new binary runs as (--as-release,
        # --roll-to-release), or None for its own.
        self.emulate_to = None
        # With binaries: batonctl roll does the roll (roll_with_batonctl).
        self.batonctl = batonctl
        self.socket_path = socket_path  # where restart_node.py asks
        self.out_dir = out_dir  # batonctl.stderr goes there
        self.tick = tick or (lambda: None)  # the harness's checks
        self.events = []  # batonctl's --json events, each with its "ns"
        self.batonctl_code = None  # its exit status
        self.batonctl_junk = []  # stdout lines that were not JSON
        self.restart_errors = []  # why a requested restart failed
        self.roll_ended = None  # monotonic s when batonctl exited
        self.before_roll = {}  # node id: node_floor() as batonctl starts
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

    def note(self, what, ns=None, **detail):
        entry = {"ns": ns or time.monotonic_ns(), "what": what}
        entry.update(detail)
        self.timeline.append(entry)
        self.nemesis.note(what, **detail)

    def upgrade(self, node_id):
        """--roll-releases: restart node node_id at the new release (or,
        if a fault has it down, have the heal start it there)."""
        node = self.run.cluster.node(node_id)
        self.run.cluster.resume(node)
        leader = self.run.cluster.quick_leader()
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
        self.note("upgrade", node=node_id, release=self.release_to,
                  leader=leader.id if leader is not None else None)
        if restarted:
            self.check_release(node)
        self.observe()

    def check_release(self, node):
        v = node_versions(node, timeout=2.0)
        if v is None or v[0] != self.release_to:
            raise self.failure(
                f"node {node.id} restarted for release {self.release_to} "
                f"reports {v[0] if v else 'nothing (INFO failed)'}")

    # ---- --roll-binaries: batonctl roll does the roll -----------------------

    def during_roll(self, when):
        """Whether a fault episode starting at `when` (monotonic s) falls
        in the batonctl roll or within UPGRADE_QUIET_S after it (episodes
        after the roll's are reached only once it ended)."""
        return self.roll_ended is not None \
            and when < self.roll_ended + UPGRADE_QUIET_S

    def roll_with_batonctl(self):
        """Run batonctl roll to the new release from this (the main)
        thread, serving its restart commands and reading its --json
        events, until it exits; a failure unless it exits 0 with `done`."""
        live = [m for m in self.run.cluster.nodes.values() if m.alive]
        if not live:
            raise self.failure("batonctl roll: no node is running")
        node = min(live, key=lambda m: m.id)
        restart = (f"{sys.executable} {RESTART_HELPER} {self.socket_path} "
                   f"{{id}}")
        cmd = [str(self.batonctl), "-h", HOST, "-p", str(node.client_port)]
        if node.cluster.password:
            cmd += ["-a", node.cluster.password]
        cmd += ["roll", "--to", self.release_to, "--restart", restart,
                "--json", "--step-timeout-s", str(STEP_TIMEOUT_S)]
        # Each node: a hand-over, its restart, its wait; then the machine
        # version's wait; each bounded by the step timeout.
        bound_s = STEP_TIMEOUT_S * (3 * len(self.run.cluster.nodes) + 1) + 10
        self.before_roll = {m.id: node_floor(m, timeout=2.0) for m in live}
        self.note("before the roll", nodes=floors_text(self.before_roll))
        control = RestartSocket(self.socket_path, self.failure)
        err_path = Path(self.out_dir) / "batonctl.stderr"
        self.note("batonctl roll", to=self.release_to, via=node.id)
        proc = None
        pending = b""
        try:
            with open(err_path, "ab") as err:
                launched = time.monotonic_ns()
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=err)
            deadline = time.monotonic() + bound_s
            while True:
                self.tick()
                if time.monotonic() > deadline:
                    raise self.failure(f"batonctl roll did not end within "
                                       f"{bound_s} s")
                ready, _, _ = select.select([proc.stdout, control.sock], [],
                                            [], 0.1)
                if proc.stdout in ready:
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        self.batonctl_event(line, launched)
                elif control.sock in ready:
                    control.serve_one(self.restart_for_batonctl)
                    self.observe()
                else:
                    self.maybe_observe()
            self.batonctl_event(pending, launched)
            self.batonctl_code = proc.wait(timeout=10)
        finally:
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()  # our own child
                    proc.wait(timeout=5)
                proc.stdout.close()
            control.close()
            self.roll_ended = time.monotonic()
        self.note("batonctl exit", code=self.batonctl_code)
        self.check_batonctl(err_path)

    def batonctl_event(self, line, launched_ns):
        """One line of batonctl's stdout: a JSON event, timed by its `t`
        (seconds since batonctl started)."""
        text = line.decode(errors="replace").strip()
        if not text:
            return
        try:
            e = json.loads(text)
            e["ns"] = launched_ns + int(float(e["t"]) * 1e9)
            str(e["event"])
        except (ValueError, TypeError, KeyError):
            self.batonctl_junk.append(text)
            return
        self.events.append(e)
        # The restart's message names the whole command: its fields say it.
        shown = {k: v for k, v in e.items()
                 if k not in ("t", "ns", "event", "command", "nodes",
                              "resume", "rollback")
                 and not (k == "message" and e["event"] == "restart")}
        self.note(f"batonctl {e['event']}", ns=e["ns"], **shown)

    def restart_for_batonctl(self, node_id):
        """restart_node.py's request: restart node_id on the new binary.
        None once it answers PING, else the reason (also kept)."""
        try:
            node = self.run.cluster.nodes.get(node_id)
            if node is None or not node.alive:
                raise self.failure(f"node {node_id} is not running")
            leader = self.run.cluster.quick_leader()
            node.batond = self.binaries[1]
            # The new binary's own release, or the one it emulates.
            node.release = self.emulate_to
            code = node.terminate()
            if code != 0:
                raise self.failure(f"node {node_id} exited {code} on "
                                   f"SIGTERM")
            self.nemesis.restart(node)  # waits until it answers PING
            self.upgraded[node_id] = time.monotonic_ns()
            self.note("upgrade", node=node_id, release=self.release_to,
                      leader=leader.id if leader is not None else None,
                      binary=str(node.batond))
            self.check_release(node)
        except (self.failure, AssertionError) as e:
            # AssertionError: from the e2e helpers (it did not start).
            reason = f"node {node_id}: {e}"
            self.restart_errors.append(reason)
            return reason
        return None

    def check_batonctl(self, err_path):
        code = self.batonctl_code
        if code != 0:
            failed = [e for e in self.events if e["event"] == "failed"]
            last = failed[-1] if failed else \
                (self.events[-1] if self.events else {})
            try:
                err = err_path.read_text(errors="replace").splitlines()
            except OSError:
                err = []
            raise self.failure(
                f"batonctl roll exited {code} "
                f"({BATONCTL_EXITS.get(code, 'not a documented status')}): "
                f"{last.get('message', 'no event printed')}"
                + "".join(f"; restart request failed: {r}"
                          for r in self.restart_errors)
                + (f"; its stderr ({err_path}) ends:\n" + "\n".join(err[-20:])
                   if err else ""))
        if self.batonctl_junk:
            raise self.failure(f"batonctl roll --json printed lines that are "
                               f"not JSON events: {self.batonctl_junk[:3]}")
        if not self.events or self.events[-1]["event"] != "done":
            raise self.failure(f"batonctl roll exited 0 but its last event "
                               f"is not `done`: "
                               f"{self.events[-1] if self.events else None}")

    def steps(self):
        """batonctl's steps, one per restarted node, back to back:
        [{node, start, end}] (ns): a step starts with its first event (the
        hand-over or the restart) and ends where the next one starts, the
        last LAST_STEP_MARGIN_S after batonctl's last event."""
        steps, cur = [], None
        for e in self.events:
            kind = e["event"]
            if kind in ("transfer", "restart") and cur is None:
                cur = {"node": None, "start": e["ns"]}
            if kind == "restart":
                cur["node"] = e.get("node")
            if kind in ("node_done", "failed") and cur is not None:
                steps.append(cur)
                cur = None
        if cur is not None:
            steps.append(cur)
        last = (self.events[-1]["ns"] + int(LAST_STEP_MARGIN_S * 1e9)
                if self.events else 0)
        for k, step in enumerate(steps):
            step["end"] = steps[k + 1]["start"] if k + 1 < len(steps) \
                else last
        return steps

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
        self.note("final versions", nodes=floors_text(out))
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
            # A 1.2.0 leader refuses writes during a leadership transfer
            # (batonctl roll hands over before the leader's restart).
            if OLD_TRANSFER_REFUSAL in text:
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
        consecutive acknowledged writes. With batonctl, the longest one
        overlapping its step (steps()). Otherwise, completing from
        GAP_WINDOW_S[0] before it to GAP_WINDOW_S[1] after it (or to just
        before the next upgrade, so that each gap belongs to one
        restart)."""
        done = sorted(op.complete_ns for op in ops
                      if op.status == "ok" and op.f != "get"
                      and op.complete_ns is not None)
        gaps = {}
        if self.batonctl is not None:
            for step in self.steps():
                longest = longest_gap(done, step["start"], step["end"])
                gaps[step["node"]] = None if longest is None \
                    else longest / 1e6
            return gaps
        order = sorted(self.upgraded.items(), key=lambda x: x[1])
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
        # batonctl's events are timed by batonctl, the rest when noted.
        for e in sorted(self.timeline, key=lambda e: e["ns"]):
            detail = " ".join(f"{k}={v}" for k, v in e.items()
                              if k not in ("ns", "what"))
            lines.append(f"t+{(e['ns'] - t0_ns) / 1e9:6.1f}s {e['what']} "
                         f"{detail}")
        gaps = self.write_gaps(ops)
        steps = {s["node"]: s for s in self.steps()} \
            if self.batonctl is not None else {}
        for node_id, gap in gaps.items():
            step = steps.get(node_id)
            where = (f" (batonctl's step t+{(step['start'] - t0_ns) / 1e9:.2f}"
                     f"..{(step['end'] - t0_ns) / 1e9:.2f}s)"
                     if step else "")
            lines.append(f"node {node_id} upgrade{where}: longest write gap "
                         + ("(no writes)" if gap is None
                            else f"{gap:.0f} ms"))
        if self.batonctl is not None and self.events:
            lines.append(f"batonctl roll: exit {self.batonctl_code}, "
                         f"{self.events[-1]['t']:.1f} s from its start to "
                         f"its last event ({self.events[-1]['event']})")
        return "\n".join(lines)
