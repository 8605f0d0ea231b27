"""`batonctl roll` never costs the cluster its majority (docs/upgrading.md,
"batonctl roll", "Before every restart").

Each test rolls 3 nodes (emulating the release before the newest one a
rolling upgrade reaches, as test_roll.py does) and kills one member with
kill -9, by the PID this test started, at one moment of the roll:

- before a restart: while the roll's restart command for the first node
  runs, the next node of the plan is killed;
- during a pause (--pause): right after the roll says the first node runs
  the new release and caught up (the moment a roll used to restart the
  next node anyway);
- during the hand-over: right after the roll says to which node it hands
  the leadership, that node is killed.

The test starts the killed node again once the roll says it waits for it
(or, for a roll that does not wait, after a while), and asserts orderings
and states, never durations:

- the roll never started a restart while another member was down (its
  `restart` events, stamped with CLOCK_MONOTONIC, against the test's own
  record of kills and restarts on the same clock; and every restart
  request the test served came while every other member ran);
- a leader existed at every sample a monitor took, except in windows the
  test's own kill caused (the killed node led) and the single elections
  of a hand-over (the next leader in the next term);
- the roll completes: every member at the new release.
"""

import json
import shlex
import subprocess
import threading
import time

import pytest
import redis

from conftest import BATONCTL, Deadline, POLL_S, require_binary
from test_roll import (NEWEST, PREVIOUS, Restarter, releases_now, restart,
                       start_at)

ROLL_TIMEOUT_S = 240  # the whole roll, kills and waits included
STEP_TIMEOUT_S = 40
PAUSE_S = 3  # long beside the test's reaction to an event (one poll)
# A roll that does not say it waits for the killed node gets it back
# after this: only then can an older batonctl go on at all.
DOWN_FALLBACK_S = 4.0
MONITOR_SAMPLE_S = 0.02
MONITOR_SAMPLES_MAX = 20000


class Monitor(threading.Thread):
    """Samples every node's role and term (BATON.NODE) in a loop, bounded
    in count: (monotonic time, leader id or None, its term)."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.ports = {m.id: m.client_port for m in cluster.nodes.values()}
        self.password = cluster.password
        self.samples = []
        self.stop = threading.Event()

    def sample(self):
        t = time.monotonic()
        best = (None, -1)
        for node_id, port in self.ports.items():
            c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=0.5,
                            socket_connect_timeout=0.5,
                            password=self.password, decode_responses=True)
            try:
                r = c.execute_command("BATON.NODE")
            except (redis.ConnectionError, redis.TimeoutError,
                    redis.ResponseError):
                continue
            finally:
                c.close()
            info = dict(zip(r[0::2], r[1::2]))
            term = int(info["term"])
            if info.get("role") == "leader" and term > best[1]:
                best = (node_id, term)
        return t, best[0], best[1]

    def run(self):
        while not self.stop.is_set() and \
                len(self.samples) < MONITOR_SAMPLES_MAX:
            self.samples.append(self.sample())
            time.sleep(MONITOR_SAMPLE_S)


class KillingRestarter(Restarter):
    """The test_roll.py restarter, recording for every restart request
    which members were down (killed by this test and not yet started
    again) when it came, and able to kill a member right after serving
    one (the "before a restart" moment)."""

    def __init__(self, cluster, folder, release):
        super().__init__(cluster, folder, release)
        self.down = {}  # node id -> monotonic time of its kill
        self.kills = []  # [node id, killed at, started again at or None]
        self.requests = []  # (monotonic time, node id, ids down then)
        self.after_request = None  # called with the node id once

    def kill(self, node):
        t = time.monotonic()
        node.kill9()  # our own PID
        self.down[node.id] = t
        self.kills.append([node.id, t, None])

    def revive(self, node_id):
        node = self.cluster.node(node_id)
        # Up from the moment it is started: nobody can see it answer
        # before that.
        t = time.monotonic()
        node.start()  # same data, same args; waits until it answers
        del self.down[node_id]
        for k in self.kills:
            if k[0] == node_id and k[2] is None:
                k[2] = t

    def serve(self):
        for req in sorted(self.folder.glob("*.req")):
            node = self.cluster.node(int(req.read_text()))
            self.requests.append((time.monotonic(), node.id,
                                  sorted(self.down)))
            answer = req.with_suffix(".done")
            req.unlink()
            try:
                self.restarts.append((node.id, self.led(node)))
                restart(node, self.release)
                text = f"0 node {node.id} restarted at {self.release}"
            except Exception as e:  # said to batonctl and the test
                self.errors.append(repr(e))
                text = f"1 restarting node {node.id} failed: {e!r}"
            hook, self.after_request = self.after_request, None
            if hook is not None:
                hook(node.id)
            tmp = answer.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.rename(answer)


def run_roll(cluster, restarter, moment):
    """Run the roll, serving its restarts and killing one member at
    `moment`; returns (exit code, events with their arrival time, stderr)."""
    require_binary(BATONCTL)
    node = cluster.nodes[min(cluster.nodes)]
    cmd = [str(BATONCTL), "-p", str(node.client_port), "roll", "--to",
           NEWEST, "--json", "--step-timeout-s", str(STEP_TIMEOUT_S),
           "--pause", str(PAUSE_S), "--restart", restarter.command()]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines = []

    def read():
        for line in proc.stdout:
            lines.append((time.monotonic(), line))

    err = []
    readers = [threading.Thread(target=read, daemon=True),
               threading.Thread(target=lambda: err.append(proc.stderr.read()),
                                daemon=True)]
    for t in readers:
        t.start()
    plan, seen, killed = None, 0, None
    d = Deadline(ROLL_TIMEOUT_S, "batonctl roll to end")
    while proc.poll() is None or seen < len(lines):
        if d.expired():
            proc.kill()  # our own child
            proc.wait()
            d.fail("".join(x for _, x in lines))
        restarter.serve()
        while seen < len(lines):
            ev = json.loads(lines[seen][1])
            seen += 1
            kind = ev["event"]
            if kind == "plan":
                plan = ev["order"]
                if moment == "before_restart":
                    # While node plan[0] restarts, kill plan[1].
                    victim = cluster.node(plan[1])
                    restarter.after_request = \
                        lambda _id, v=victim: restarter.kill(v)
            elif kind == "node_done" and moment == "pause" and \
                    killed is None and ev["node"] == plan[0]:
                killed = cluster.node(plan[0])  # the node just rolled
                restarter.kill(killed)
            elif kind == "transfer" and moment == "handover" and \
                    killed is None and "to_release" in ev:
                killed = cluster.node(ev["to"])
                restarter.kill(killed)
            elif kind == "waiting" and ev.get("member") in restarter.down:
                restarter.revive(ev["member"])
        now = time.monotonic()
        for node_id, t in list(restarter.down.items()):
            if now - t > DOWN_FALLBACK_S:
                restarter.revive(node_id)
        time.sleep(POLL_S)
    for t in readers:
        t.join(timeout=10)
    evs = [(t, json.loads(x)) for t, x in lines if x.strip()]
    return proc.returncode, evs, "".join(err)


def leaderless_windows(samples):
    """Runs of samples without a leader: (leader, term and time of the
    last sample before with one, the first sample's time, the last's,
    leader and term after)."""
    out, before, start = [], None, None
    for t, leader, term in samples:
        if leader is None:
            if start is None:
                start = [t, t]
            start[1] = t
            continue
        if start is not None:
            out.append((before, start[0], start[1], (leader, term)))
            start = None
        before = (leader, term, t)
    if start is not None:
        out.append((before, start[0], start[1], None))
    return out


@pytest.mark.parametrize("moment", ["before_restart", "pause", "handover"])
def test_roll_waits_for_a_killed_member(cluster, tmp_path, moment):
    if moment == "handover":
        # Plain Raft elections: the leader does not hand over by itself
        # once most voters run the new release (docs/upgrading.md, "Who
        # leads during an upgrade"), so the roll's own hand-over comes.
        cluster.start(3, extra=["--as-release", PREVIOUS,
                                "--election-policy", "any"])
        i = cluster.common_args.index("--as-release")
        del cluster.common_args[i:i + 2]
        for m in cluster.nodes.values():
            m.args += ["--as-release", PREVIOUS]
    else:
        start_at(cluster, PREVIOUS)
    restarter = KillingRestarter(cluster, tmp_path / "requests", NEWEST)
    monitor = Monitor(cluster)
    monitor.start()
    try:
        code, evs, err = run_roll(cluster, restarter, moment)
    finally:
        monitor.stop.set()
        monitor.join(timeout=30)
    text = "".join(json.dumps(e) + "\n" for _, e in evs) + err
    kills = restarter.kills
    assert kills, f"the test killed no member at {moment}:\n{text}"
    assert all(k[2] is not None for k in kills), kills
    # Never a restart while another member was down: the roll's own
    # decision (its restart event, on the system's monotonic clock, or
    # when that field is missing, when this test read the line) ...
    for seen, e in evs:
        if e["event"] != "restart":
            continue
        at = e.get("mono", seen)
        for node_id, down_at, up_at in kills:
            assert node_id == e["node"] or not down_at <= at <= up_at, \
                f"node {e['node']} restarted at {at:.3f} while node " \
                f"{node_id} was down ({down_at:.3f}..{up_at:.3f})\n{text}"
    # ... and what this test was asked to do.
    for at, node_id, down in restarter.requests:
        assert [x for x in down if x != node_id] == [], \
            f"asked to restart node {node_id} while {down} down\n{text}"
    # The roll went on once the member was back, and completed.
    assert code == 0, text
    assert not restarter.errors, restarter.errors
    assert releases_now(cluster) == {1: NEWEST, 2: NEWEST, 3: NEWEST}
    kinds = [e["event"] for _, e in evs]
    if moment in ("pause", "handover"):
        # It said what it waited for: the member killed.
        assert any(e["event"] == "waiting" and e["member"] == kills[0][0]
                   for _, e in evs), text
    assert kinds.count("restart") == 3, text
    # A leader throughout, but for windows the test's own kill opened
    # (the last sample with a leader came before the kill: the leader or
    # the node it handed over to was killed) and the one election of a
    # hand-over.
    samples = monitor.samples
    assert samples and samples[0][1] is not None, samples[:3]
    for before, first, last, after in leaderless_windows(samples):
        killed_leader = any(before[2] <= k[1] <= first for k in kills)
        handover = after is not None and after[0] != before[0] and \
            after[1] == before[1] + 1
        assert killed_leader or handover, \
            f"no leader from {first:.3f} to {last:.3f} (before: node " \
            f"{before[0]} term {before[1]}; after: {after}); kills " \
            f"{kills}\n{text}"


def test_wait_is_bounded_and_says_how_to_resume(cluster, tmp_path):
    """A member killed during the pause and not started again: the roll
    waits at most --wait-s, restarts nothing more, exits 1 and prints the
    command that resumes it; that command, run once the member is back,
    completes the roll."""
    start_at(cluster, PREVIOUS)
    restarter = KillingRestarter(cluster, tmp_path / "requests", NEWEST)
    node = cluster.nodes[min(cluster.nodes)]
    cmd = [str(BATONCTL), "-p", str(node.client_port), "roll", "--to",
           NEWEST, "--json", "--pause", str(PAUSE_S), "--wait-s", "2",
           "--step-timeout-s", str(STEP_TIMEOUT_S), "--restart",
           restarter.command()]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(
        target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    d = Deadline(ROLL_TIMEOUT_S, "batonctl roll to end")
    killed = None
    while proc.poll() is None:
        if d.expired():
            proc.kill()  # our own child
            proc.wait()
            d.fail("".join(lines))
        restarter.serve()
        for line in list(lines):
            ev = json.loads(line)
            if ev["event"] == "node_done" and killed is None:
                killed = cluster.node(ev["node"])
                restarter.kill(killed)
        time.sleep(POLL_S)
    reader.join(timeout=10)
    err = proc.stderr.read()
    evs = [json.loads(x) for x in lines if x.strip()]
    text = "".join(lines) + err
    assert proc.returncode == 1, text
    assert killed is not None, text
    assert [e["event"] for e in evs].count("restart") == 1, text
    waiting = [e for e in evs if e["event"] == "waiting"]
    assert waiting and waiting[0]["member"] == killed.id, text
    assert f"node {killed.id} does not answer" in waiting[0]["message"]
    failed = evs[-1]
    assert failed["event"] == "failed" and "--wait-s" in failed["reason"], \
        text
    resume = failed["resume_command"]
    assert resume.startswith("batonctl -h 127.0.0.1 -p "), resume
    assert f"to resume: {failed['resume']}" not in text  # JSON: no text
    # Once the member is back, the printed command completes the roll.
    restarter.revive(killed.id)
    argv = shlex.split(resume)
    proc = subprocess.Popen([str(BATONCTL)] + argv[1:],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    d = Deadline(ROLL_TIMEOUT_S, "the resumed roll to end")
    while proc.poll() is None:
        if d.expired():
            proc.kill()
            proc.wait()
            d.fail()
        restarter.serve()
        time.sleep(POLL_S)
    out = proc.stdout.read()
    assert proc.returncode == 0, out + proc.stderr.read()
    assert releases_now(cluster) == {1: NEWEST, 2: NEWEST, 3: NEWEST}


def test_fewer_than_three_voters_are_refused(cluster, tmp_path):
    """Restarting one of 1 or 2 voters costs the majority: refused before
    anything changes."""
    cluster.start(1, extra=["--as-release", PREVIOUS])
    restarter = KillingRestarter(cluster, tmp_path / "requests", NEWEST)
    r = cluster.batonctl("roll", "--to", NEWEST, "--restart",
                         restarter.command(), check=False)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "the cluster has 1 voter(s): restarting any of them leaves no " \
        "majority" in r.stdout, r.stdout
    assert not list((tmp_path / "requests").glob("*")), "a restart ran"
