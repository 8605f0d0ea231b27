"""Scripted upgrade and downgrade scenarios under client load
(`harness.py --scenario NAME`; docs/jepsen.md, "Upgrade scenarios").

Instead of the random fault schedule, the main thread plays a script: it
restarts nodes at other releases (`--as-release`), kills them, runs
`BATON.DOWNGRADE`, and after each step waits (boundedly) for what the
version rules say must follow, reading every node's INFO (`# Replication`
and `# Versions`). Meanwhile the harness's clients run as in any run, and
at the end the usual liveness check, final reads and baton-lincheck apply:
no acknowledged write may be lost across the steps.

An observer thread reads every node's INFO about ten times a second for
the whole script and checks, throughout, that no node leads below a
release floor: neither below the floor of its own log, nor, in a term after
a majority of the nodes reported a floor, below that floor. It records each
leadership move; the report gives, per move and per operator action, the
longest time between two acknowledged writes around it (the pause a client
could notice).

The scenarios (DESIGN.md, "Leader eligibility", "Release floor", "Future
data", "Downgrade"):

- halon-stages: 3 nodes 1.0.0 -> 1.1.0, followers first: with one node
  upgraded the leader stays on 1.0.0 (floor 1.0.0); with two, leadership
  moves to a 1.1.0 node, the floor becomes 1.1.0 and the 1.0.0 node says
  `leader_eligible:no (rule 1 ...)`; with three, every node is eligible;
- rollback-refused: a 3-node 1.1.0 cluster (floor 1.1.0); one node
  restarted at 1.0.0 keeps running, refuses to apply and to lead, says why
  (INFO and its log) and keeps replicating, while the others serve; started
  at 1.1.0 again it catches up;
- downgrade: 3 nodes at 1.1.0 with data, one key with a TTL: validate
  (refused without FORCE because of the TTL), enable, roll the binaries
  back to 1.0.0 one by one (cancel refused once one is), the downgrade
  ends; every key written before is on every node;
- downgrade-cancel: enable then cancel before any node rolled back: the
  floor and the machine version come back;
- five-nodes-kill: 5 nodes, 3 upgraded to 1.1.0 (the floor rose), then 2
  of those 3 killed (the leader among them): the third upgraded node leads
  and writes go on; no 1.0.0 node ever leads.
"""

import os
import re
import threading
import time

import redis

HOST = "127.0.0.1"
POLL_S = 0.1  # the script's polling
OBSERVE_S = 0.1  # the observer's period
INFO_TIMEOUT_S = 1.0
WAIT_S = 20.0  # default bound of one wait
LEAD_MOVE_S = 15.0  # a move the rules call for happens within this
ADMIN_S = 15.0  # an admin command is retried (no leader, busy) this long
# How long the script looks at a stage (the rule-2 wait of a minority node
# is 3 election timeouts, 1.5 to 3 s with the harness's 500 ms): longer
# with STAGES_HOLD_S, for an opt-in longer look.
HOLD_S = float(os.environ.get("STAGES_HOLD_S") or 2.0)
LOAD_S = 1.5  # plain load before the first step and after the last
GAP_BEFORE_S = 1.0  # write gaps are measured in [t - before, t + after]
GAP_AFTER_S = 2.5
DATA_KEYS = 200  # keys the downgrade scenario writes and compares
GATING_TEXT = "needs machine version"
PROBE_KEY = "stages-probe"  # never created: PEXPIRE on it is a no-op


def release(text):
    """'1.1.0' -> (1, 1, 0); None for 'none', '' or None."""
    if not text or text == "none":
        return None
    try:
        return tuple(int(x) for x in text.split("."))
    except ValueError:
        return None


class View:
    """What one node's INFO said at one moment."""

    FIELDS = ("role", "term", "leader_id", "commit_index", "applied_index",
              "last_index", "stalled_index", "stalled_reason", "release",
              "machine_version", "needs_upgrade", "release_floor",
              "leader_eligible", "election_policy", "downgrade")

    def __init__(self, node_id, fields):
        self.id = node_id
        self.ns = time.monotonic_ns()
        self.f = fields

    def get(self, k):
        return self.f.get(k)

    def num(self, k):
        try:
            return int(self.f.get(k))
        except (TypeError, ValueError):
            return -1

    role = property(lambda self: self.f.get("role"))
    term = property(lambda self: self.num("term"))
    applied = property(lambda self: self.num("applied_index"))
    commit = property(lambda self: self.num("commit_index"))
    last_index = property(lambda self: self.num("last_index"))
    release = property(lambda self: self.f.get("release"))
    floor = property(lambda self: self.f.get("release_floor"))
    eligible = property(lambda self: self.f.get("leader_eligible") or "")
    machine = property(lambda self: self.num("machine_version"))
    downgrade = property(lambda self: self.f.get("downgrade"))
    is_leader = property(lambda self: self.f.get("role") == "leader")

    def brief(self):
        return (f"{self.id}:{self.release}/{self.role}/t{self.term}"
                f"/floor {self.floor}/m{self.machine}"
                f"/eligible {self.eligible or '?'}"
                + (f"/downgrade {self.downgrade}"
                   if self.downgrade not in (None, "none") else ""))


def parse_info(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or ":" not in line:
            continue
        k, v = line.split(":", 1)
        out[k.strip()] = v.strip()
    return out


class Reader:
    """INFO of every node, with one client per node (one per thread)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.clients = {}

    def client(self, node):
        c = self.clients.get(node.id)
        if c is None or c.connection_pool.connection_kwargs.get(
                "port") != node.client_port:
            c = redis.Redis(host=HOST, port=node.client_port,
                            socket_timeout=INFO_TIMEOUT_S,
                            socket_connect_timeout=INFO_TIMEOUT_S,
                            decode_responses=True)
            c.set_response_callback("INFO", lambda r, **kw: r)
            self.clients[node.id] = c
        return c

    def view(self, node):
        try:
            text = self.client(node).execute_command("INFO")
        except (redis.ConnectionError, redis.TimeoutError,
                redis.ResponseError, OSError):
            return None
        return View(node.id, parse_info(text))

    def views(self):
        out = {}
        for node_id in sorted(self.cluster.nodes):
            v = self.view(self.cluster.nodes[node_id])
            if v is not None:
                out[node_id] = v
        return out


def leader_of(views):
    """The view of the node that leads in the highest term, or None."""
    best = None
    for v in views.values():
        if v.is_leader and (best is None or v.term > best.term):
            best = v
    return best


def fmt(views):
    return "; ".join(v.brief() for v in views.values()) or "no node answered"


class Observer(threading.Thread):
    """Reads every node's INFO every OBSERVE_S until stopped; records the
    leadership moves and the floor a majority reports, and any leader below
    a floor (a violation). Reads only: it never starts a node (the nodes'
    PR_SET_PDEATHSIG ties them to the main thread)."""

    def __init__(self, cluster, n_nodes):
        super().__init__(name="stages-observer", daemon=True)
        self.reader = Reader(cluster)
        self.n = n_nodes
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.events = []  # dicts: ns, what, ... (leader moves, floors)
        self.moves = []  # dicts: ns, from, from_release, to, to_release, term
        self.leaders = []  # (ns, id, release, term, floor) of every round
        self.violations = []
        self.mark = None  # (floor, term) a majority reported
        self.last_leader = None
        self.rounds = 0
        self.crashed = None

    def run(self):
        try:
            while not self.stop_ev.is_set():
                self.round(self.reader.views())
                self.stop_ev.wait(OBSERVE_S)
        except Exception as e:  # a harness bug: reported, never hidden
            self.crashed = repr(e)

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=10.0)

    def round(self, views):
        with self.lock:
            self.rounds += 1
            self._floors(views)
            lead = leader_of(views)
            for v in views.values():
                if v.is_leader:
                    self._check_leader(v)
            if lead is None:
                return
            self.leaders.append((lead.ns, lead.id, lead.release, lead.term,
                                 lead.floor))
            if self.last_leader is None or self.last_leader[0] != lead.id:
                if self.last_leader is not None:
                    move = {"ns": lead.ns, "from": self.last_leader[0],
                            "from_release": self.last_leader[1],
                            "to": lead.id, "to_release": lead.release,
                            "term": lead.term}
                    self.moves.append(move)
                    self.events.append(dict(move, what="leader move"))
                else:
                    self.events.append({
                        "ns": lead.ns, "what": "leader", "node": lead.id,
                        "release": lead.release, "term": lead.term})
            self.last_leader = (lead.id, lead.release)

    def _floors(self, views):
        counts = {}
        for v in views.values():
            if release(v.floor) is not None:
                counts[v.floor] = counts.get(v.floor, 0) + 1
        for floor, k in counts.items():
            if k > self.n // 2 and (self.mark is None
                                    or self.mark[0] != floor):
                term = max(v.term for v in views.values())
                self.mark = (floor, term)
                self.events.append({"ns": time.monotonic_ns(),
                                    "what": "floor (a majority reports it)",
                                    "floor": floor, "by": k, "term": term})

    def _check_leader(self, v):
        own = release(v.release)
        floor = release(v.floor)
        if own is not None and floor is not None and own < floor:
            self.violations.append(
                f"node {v.id} leads in term {v.term} at release {v.release}, "
                f"below the release floor {v.floor} of its own log")
        if self.mark is not None and v.term > self.mark[1] \
                and own is not None and own < release(self.mark[0]):
            self.violations.append(
                f"node {v.id} leads in term {v.term} at release {v.release}, "
                f"below the floor {self.mark[0]} a majority reported in term "
                f"{self.mark[1]}")

    def snapshot(self):
        with self.lock:
            return (list(self.events), list(self.moves), list(self.leaders),
                    list(self.violations))


# ---- the scenarios ----------------------------------------------------------


class Scenario:
    def __init__(self, name, nodes, start_release, play, what):
        self.name = name
        self.nodes = nodes
        self.release = start_release
        self.play = play
        self.what = what


class Stager:
    """Plays one scenario in the main thread; `failure` is the harness's
    failure class, `check` its per-iteration check (nodes that died by
    themselves, Ctrl-C)."""

    def __init__(self, run, nemesis, failure, check):
        self.run = run
        self.cluster = run.cluster
        self.nemesis = nemesis
        self.failure = failure
        self.check = check
        self.reader = Reader(run.cluster)
        self.observer = None
        self.timeline = []  # dicts: ns, what, ...
        self.actions = []  # dicts: ns, what, node (for the write gaps)
        self.stages = []  # dicts: ns, stage, leader, release, floors
        self.checks = []  # short texts: what was verified, for the report

    # ---- recording ----------------------------------------------------------

    def note(self, what, **detail):
        self.timeline.append(dict({"ns": time.monotonic_ns(), "what": what},
                                  **detail))
        self.nemesis.note(what, **detail)

    def verified(self, text):
        self.checks.append(text)
        self.note("verified", check=text)

    def stage(self, name, views=None):
        """Record the leader and every node's floor and eligibility."""
        views = views or self.reader.views()
        lead = leader_of(views)
        entry = {"ns": time.monotonic_ns(), "stage": name,
                 "leader": lead.id if lead else None,
                 "leader_release": lead.release if lead else None,
                 "term": lead.term if lead else None,
                 "floors": {i: v.floor for i, v in views.items()},
                 "eligible": {i: v.eligible for i, v in views.items()},
                 "machine": {i: v.machine for i, v in views.items()}}
        self.stages.append(entry)
        self.note("stage", stage=name,
                  leader=f"{entry['leader']} ({entry['leader_release']})",
                  nodes=fmt(views))
        return entry

    # ---- waiting ------------------------------------------------------------

    def fail(self, text):
        raise self.failure(f"scenario: {text}")

    def wait(self, what, pred, timeout=WAIT_S):
        """Poll every node's INFO until pred(views) is true; returns the
        views that satisfied it."""
        end = time.monotonic() + timeout
        views = {}
        while True:
            self.check()
            views = self.reader.views()
            try:
                if pred(views):
                    return views
            except (KeyError, TypeError, ValueError, AttributeError):
                pass  # a node (or the leader) missing from the views
            if time.monotonic() > end:
                self.fail(f"timed out after {timeout:g} s waiting for {what}; "
                          f"last seen: {fmt(views)}")
            time.sleep(POLL_S)

    def hold(self, what, pred, seconds=HOLD_S):
        """pred(views) must stay true for `seconds` (polled)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.check()
            views = self.reader.views()
            if not pred(views):
                self.fail(f"{what} did not hold: {fmt(views)}")
            time.sleep(POLL_S)

    def load(self, seconds=LOAD_S):
        """Let the clients run (nodes still checked)."""
        self.hold("load", lambda vs: True, seconds)

    def acked_writes_since(self, ns):
        return sum(1 for op in self.run.recorder.ops()
                   if op.status == "ok" and op.f != "get"
                   and op.complete_ns is not None and op.complete_ns >= ns)

    # ---- acting -------------------------------------------------------------

    def action(self, what, node_id, **detail):
        self.actions.append({"ns": time.monotonic_ns(), "what": what,
                             "node": node_id})
        self.note(what, node=node_id, **detail)

    def restart_at(self, node_id, rel):
        """As an operator: SIGTERM, then the binary of `rel` on the same
        data (it must start and answer PING)."""
        node = self.cluster.node(node_id)
        self.action("restart", node_id, release=rel)
        code = node.terminate()
        if code != 0:
            self.fail(f"node {node_id} exited {code} on SIGTERM")
        node.release = rel
        self.nemesis.restart(node)

    def kill(self, node_id):
        node = self.cluster.node(node_id)
        self.action("kill -9", node_id)
        node.kill9()
        self.nemesis.killed.add(node_id)

    def start_killed(self, node_id, rel):
        node = self.cluster.node(node_id)
        node.release = rel
        self.action("start", node_id, release=rel)
        self.nemesis.restart(node)

    def leader_client(self, timeout=ADMIN_S):
        views = self.wait("a leader", leader_of, timeout)
        return self.cluster.node(leader_of(views).id).client(timeout=5.0)

    def command(self, *args, timeout=ADMIN_S):
        """A command on the leader, retried while there is none or it is
        busy (TRYAGAIN, NOTLEADER, no connection); returns the reply, or
        raises the last redis.ResponseError."""
        end = time.monotonic() + timeout
        last = None
        while True:
            self.check()
            try:
                return self.leader_client(timeout).execute_command(*args)
            except redis.ResponseError as e:
                last = e
                if not str(e).startswith(("TRYAGAIN", "NOTLEADER")):
                    raise
            except (redis.ConnectionError, redis.TimeoutError) as e:
                last = e
            if time.monotonic() > end:
                if isinstance(last, redis.ResponseError):
                    raise last
                self.fail(f"{' '.join(args)}: no answer within {timeout:g} "
                          f"s: {last!r}")
            time.sleep(0.2)

    def downgrade(self, *args):
        reply = self.command("BATON.DOWNGRADE", *args)
        self.note("BATON.DOWNGRADE " + " ".join(args), reply=flat(reply))
        return reply

    def downgrade_refused(self, *args):
        """The command must be refused; returns the error text."""
        try:
            reply = self.command("BATON.DOWNGRADE", *args)
        except redis.ResponseError as e:
            self.note("BATON.DOWNGRADE " + " ".join(args) + " refused",
                      error=str(e))
            return str(e)
        self.fail(f"BATON.DOWNGRADE {' '.join(args)} was accepted "
                  f"({flat(reply)!r}); it must be refused")

    def caught_up(self, node_id, timeout=WAIT_S):
        """node_id applied what the leader had committed when asked."""
        lead = leader_of(self.wait("a leader", leader_of))
        target = lead.commit
        self.wait(f"node {node_id} to apply index {target}",
                  lambda vs: vs[node_id].applied >= target, timeout)

    def probe_v2(self):
        """A machine-version-2 command on the leader: None if accepted,
        else the error text."""
        try:
            self.command("PEXPIRE", PROBE_KEY, "600000")
            return None
        except redis.ResponseError as e:
            return str(e)


def flat(reply):
    if isinstance(reply, (list, tuple)):
        return " ".join(flat(x) for x in reply)
    if isinstance(reply, bytes):
        return reply.decode("latin-1")
    return str(reply)


def all_nodes(views, n, pred):
    return len(views) == n and all(pred(v) for v in views.values())


def followers(views):
    lead = leader_of(views)
    return sorted(i for i in views if lead is None or i != lead.id)


def rule(v, n):
    return v.eligible.startswith(f"no (rule {n}")


# ---- 1. the Halon stages ----------------------------------------------------


def wait_leader_and_floor(s, n, floor, also="", check=lambda v: True):
    """Wait for a leader and, on all n nodes, the floor `floor` (and what
    `check` says, described by `also`); the views."""
    what = f"a leader and the floor {floor} on every node" + (
        f", {also}" if also else "")
    return s.wait(what, lambda vs: leader_of(vs) and all_nodes(
        vs, n, lambda v: v.floor == floor and check(v)))


def halon_stages(s):
    n = 3
    views = wait_leader_and_floor(s, n, "1.0.0", "every node eligible",
                                  lambda v: v.eligible == "yes")
    s.stage("0 of 3 upgraded", views)
    s.load()
    first = leader_of(views).id
    f1, f2 = followers(views)
    # One node upgraded: 1.0.0 is still the majority release.
    s.restart_at(f1, "1.1.0")
    s.wait(f"node {f1} (1.1.0, a minority) to say leader_eligible no "
           f"(rule 2)", lambda vs: rule(vs[f1], 2))
    s.caught_up(f1)
    s.hold("leadership on 1.0.0 and the floor 1.0.0 with one node upgraded",
           lambda vs: (leader_of(vs) is None
                       or leader_of(vs).release == "1.0.0")
           and all(v.floor == "1.0.0" for v in vs.values()))
    st = s.stage("1 of 3 upgraded")
    if st["leader_release"] != "1.0.0":
        s.fail(f"with one node upgraded the leader runs "
               f"{st['leader_release']}, not 1.0.0")
    s.verified("1 upgraded: leader on 1.0.0, floor 1.0.0, the 1.1.0 node "
               "ineligible by rule 2")
    # Two upgraded: 1.1.0 is the majority release; leadership moves and
    # the new leader raises the floor.
    s.restart_at(f2, "1.1.0")
    views = s.wait("leadership on a 1.1.0 node and the floor 1.1.0 on every "
                   "node", lambda vs: leader_of(vs).release == "1.1.0"
                   and all_nodes(vs, n, lambda v: v.floor == "1.1.0"),
                   LEAD_MOVE_S)
    views = s.wait(f"node {first} (1.0.0) to say leader_eligible no (rule 1)",
                   lambda vs: rule(vs[first], 1))
    why = views[first].eligible
    if "1.1.0" not in why or "1.0.0" not in why:
        s.fail(f"node {first}'s leader_eligible does not name both "
               f"releases: {why!r}")
    s.hold("leadership on 1.1.0 with two nodes upgraded",
           lambda vs: leader_of(vs) is None
           or leader_of(vs).release == "1.1.0")
    s.stage("2 of 3 upgraded")
    s.verified(f"2 upgraded: leader on 1.1.0, floor 1.1.0, node {first} "
               f"says {why!r}")
    # The last one: every node may lead; machine version 2.
    s.restart_at(first, "1.1.0")
    views = s.wait("every node eligible and at machine version 2", lambda vs:
                   all_nodes(vs, n, lambda v: v.eligible == "yes"
                             and v.machine == 2 and v.floor == "1.1.0"))
    s.caught_up(first)
    s.stage("3 of 3 upgraded", views)
    s.verified("3 upgraded: every node eligible, floor 1.1.0, machine 2")
    s.load()


# ---- 2. rollback without a downgrade ----------------------------------------


# What a 1.0.0 node started on data after the floor rose logs at ERROR:
# the floor it found in its log, or, when its snapshot already holds
# machine version 2, that version; both say what to do.
REFUSALS = (
    re.compile(r".* error .*future data: the release floor of this log is "
               r"1\.1\.0.*release 1\.0\.0 may neither lead nor apply.*"
               r"restart this node with release 1\.1\.0 or newer, or run an "
               r"explicit downgrade.*"),
    re.compile(r".* error .*needs-upgrade: the effective machine version "
               r"becomes 2 .*release 1\.0\.0 implements machine versions up "
               r"to 1; restart this node with a release that implements "
               r"machine version 2.*"),
)


def refusal_line(node, since):
    """The first ERROR line of the node's log after `since` (characters)
    that names the version it found above its own and what to do, or
    None."""
    text = node.log_text()[since:]
    for pattern in REFUSALS:
        m = pattern.search(text)
        if m:
            return m.group(0)
    return None


def stopped(v, seen):
    """v is stalled below its stall index, with the same applied index as
    at the previous call (seen keeps it)."""
    stall = v.num("stalled_index")
    seen.append(v.applied)
    return stall > 0 and v.applied < stall and len(seen) >= 3 \
        and seen[-1] == seen[-2] == seen[-3]


def rollback_refused(s):
    n = 3
    views = wait_leader_and_floor(s, n, "1.1.0")
    s.stage("3 nodes at 1.1.0", views)
    s.load()
    views = s.wait("a leader", leader_of)
    victim = followers(views)[0]
    node = s.cluster.node(victim)
    log_before = len(node.log_text())
    s.restart_at(victim, "1.0.0")
    t_back = time.monotonic_ns()
    views = s.wait(f"node {victim} (1.0.0) to say leader_eligible no "
                   f"(rule 1) and needs_upgrade yes", lambda vs:
                   rule(vs[victim], 1) and (vs[victim].get("needs_upgrade")
                                            or "").startswith("yes ("))
    why = views[victim].eligible
    if "1.1.0" not in why or "1.0.0" not in why:
        s.fail(f"leader_eligible of node {victim} does not name both "
               f"releases: {why!r}")
    s.wait(f"node {victim}'s log to name the floor 1.1.0 and what to do",
           lambda vs: refusal_line(node, log_before))
    line = refusal_line(node, log_before)
    s.note("refusal", node=victim,
           needs_upgrade=views[victim].get("needs_upgrade"),
           line=line.strip()[:400])
    # It replays what it may (up to the floor's entry) and stops there.
    seen = []
    base = s.wait(f"node {victim} to stop applying before the floor's entry",
                  lambda vs: leader_of(vs) and stopped(vs[victim], seen))
    applied0 = base[victim].applied
    stall0 = base[victim].num("stalled_index")
    last0 = base[victim].last_index
    commit0 = leader_of(base).commit
    s.hold(f"node {victim} never leads and applies nothing past index "
           f"{applied0} (stalled at {stall0})",
           lambda vs: victim not in vs or (
               not vs[victim].is_leader and vs[victim].applied == applied0
               and vs[victim].num("stalled_index") == stall0))
    views = s.reader.views()
    lead = leader_of(views)
    acked = s.acked_writes_since(t_back)
    if lead is None or lead.commit <= commit0 or acked == 0:
        s.fail(f"the cluster did not keep serving while node {victim} ran "
               f"1.0.0: {acked} writes acknowledged, commit {commit0} -> "
               f"{lead.commit if lead else '?'}")
    if views[victim].last_index <= last0:
        s.fail(f"node {victim} stopped replicating: last index {last0} -> "
               f"{views[victim].last_index}")
    # A node that only needs a newer release forwards its clients'
    # commands to the leader (docs/batond.md, "Stalled nodes").
    try:
        c = node.client(timeout=5.0)
        c.set("rollback-probe", "through-the-refused-node")
        got = c.get("rollback-probe")
    except redis.RedisError as e:
        s.fail(f"node {victim} (1.0.0, stalled) did not serve a client: "
               f"{e!r}")
    if got != "through-the-refused-node":
        s.fail(f"a read through node {victim} returned {got!r}")
    s.note("served through the refused node", node=victim)
    s.stage("node back at 1.0.0", views)
    s.verified(f"rollback refused: node {victim} says {why!r}, applied "
               f"stays {applied0}, last index {last0} -> "
               f"{views[victim].last_index}; {acked} writes acknowledged "
               f"meanwhile")
    # The way out: the right binary again, and it catches up untouched.
    s.restart_at(victim, "1.1.0")
    s.wait(f"node {victim} eligible again", lambda vs:
           vs[victim].eligible == "yes"
           and vs[victim].get("stalled_index") in ("0", None))
    s.caught_up(victim)
    s.stage("node back at 1.1.0")
    s.verified(f"node {victim} at 1.1.0 again applies and catches up")
    s.load()


# ---- 3. a full downgrade ----------------------------------------------------


def data_keys():
    return [f"dg-data-{i}" for i in range(DATA_KEYS)]


def write_data(s):
    """DATA_KEYS keys (one MSET, machine version 1) and one key with a
    TTL (SET EX, machine version 2); returns the plain keys' values."""
    expected = {k: f"value-{i}" for i, k in enumerate(data_keys())}
    args = [x for kv in expected.items() for x in kv]
    s.command("MSET", *args)  # idempotent: a retry is harmless
    s.command("SET", "dg-ttl", "with-ttl", "EX", "3600")
    s.note("data written", keys=len(expected) + 1)
    return expected


def compare_data(s, expected):
    """Every key on every node (a linearizable read through each)."""
    keys = list(expected) + ["dg-ttl"]
    want = [expected[k] for k in expected] + ["with-ttl"]
    for node_id in sorted(s.cluster.nodes):
        node = s.cluster.node(node_id)
        end = time.monotonic() + WAIT_S
        while True:
            try:
                got = node.client(timeout=5.0).mget(keys)
                break
            except (redis.ResponseError, redis.ConnectionError,
                    redis.TimeoutError) as e:
                if time.monotonic() > end:
                    s.fail(f"node {node_id} did not serve MGET: {e!r}")
                time.sleep(0.2)
        bad = [(k, w, g) for k, w, g in zip(keys, want, got) if w != g]
        if bad:
            s.fail(f"node {node_id} lost or changed {len(bad)} of "
                   f"{len(keys)} keys, e.g. {bad[:3]}")
    s.verified(f"all {len(keys)} keys written before the downgrade read back "
               f"on every node")


def downgrade(s):
    n = 3
    wait_leader_and_floor(s, n, "1.1.0", "machine version 2",
                          lambda v: v.machine == 2)
    expected = write_data(s)
    s.stage("3 nodes at 1.1.0 with data")
    s.load()
    # Validate: the state machine refuses to drop the TTL unless forced.
    s.downgrade("VALIDATE", "1.0.0", "FORCE")
    err = s.downgrade_refused("VALIDATE", "1.0.0")
    if "TTL" not in err or "FORCE" not in err:
        s.fail(f"VALIDATE without FORCE, with a key holding a TTL, was "
               f"refused without naming the TTL and FORCE: {err!r}")
    s.downgrade_refused("VALIDATE", "0.1.0")  # not one step back
    views, err = enable_to_1_0_0(s, n, "FORCE")
    status = s.downgrade("STATUS")
    if "1.0.0" not in flat(status):
        s.fail(f"STATUS during the downgrade does not name 1.0.0: "
               f"{flat(status)!r}")
    s.verified(f"enabled: floor 1.0.0 and machine 1 everywhere, v2 refused "
               f"({err}), STATUS {flat(status)!r}")
    # Roll the binaries back, followers first, the leader last.
    lead = leader_of(views).id
    order = [i for i in sorted(views) if i != lead] + [lead]
    for k, node_id in enumerate(order):
        # As docs/batond.md says: once its snapshot covers the entry that
        # enabled the downgrade (its log then holds nothing of version 2).
        s.wait(f"node {node_id} ready to restart on 1.0.0", lambda vs:
               node_status(s, node_id).get("ready_to_restart") == "yes")
        s.restart_at(node_id, "1.0.0")
        s.wait(f"node {node_id} (1.0.0) to apply and be eligible",
               lambda vs: vs[node_id].get("stalled_index") in ("0", None)
               and not rule(vs[node_id], 1))
        s.caught_up(node_id)
        if k == 0:
            s.wait(f"the leader to know node {node_id} runs 1.0.0", lambda vs:
                   member_release(s, node_id) == "1.0.0")
            err = s.downgrade_refused("CANCEL", "1.0.0")
            s.verified(f"cancel refused once node {node_id} runs 1.0.0: "
                       f"{err!r}")
        if k == 1:
            # Most voters run 1.0.0 now: leadership follows (rule 2).
            s.wait("leadership on a 1.0.0 node", lambda vs:
                   leader_of(vs).release == "1.0.0", LEAD_MOVE_S)
        s.stage(f"{k + 1} of 3 back at 1.0.0")
        s.load()
    views = s.wait("the downgrade to end (every node 1.0.0, floor 1.0.0, "
                   "machine 1, downgrade none)", lambda vs: all_nodes(
                       vs, n, lambda v: v.release == "1.0.0"
                       and v.floor == "1.0.0" and v.machine == 1
                       and v.downgrade == "none" and v.eligible == "yes"))
    s.stage("downgrade ended", views)
    status = flat(s.downgrade("STATUS"))
    if "none" not in status:
        s.fail(f"STATUS after the downgrade ended: {status!r}")
    r = s.cluster.batonctl("downgrade", "status", "1.0.0",
                           node=s.cluster.node(lead), check=False)
    s.note("batonctl downgrade status", code=r.returncode,
           out=(r.stdout + r.stderr).strip()[:300])
    if r.returncode != 0:
        s.fail(f"batonctl downgrade status exited {r.returncode}: "
               f"{r.stdout}{r.stderr}")
    compare_data(s, expected)
    s.load()


def enable_to_1_0_0(s, n, *force):
    """ENABLE 1.0.0, then wait for its state on all n nodes, watch it, and
    check a machine-version-2 command is refused; (views, that refusal)."""
    s.downgrade("ENABLE", "1.0.0", *force)
    views = s.wait("the floor 1.0.0, machine version 1 and the downgrade on "
                   "every node", lambda vs: all_nodes(
                       vs, n, lambda v: v.floor == "1.0.0" and v.machine == 1
                       and (v.downgrade or "").startswith("1.0.0")))
    s.stage("downgrade enabled", views)
    s.hold("the downgrade state", lambda vs: all(
        v.floor == "1.0.0" and v.machine == 1 for v in vs.values()), LOAD_S)
    err = s.probe_v2()
    if err is None or GATING_TEXT not in err:
        s.fail(f"a machine-version-2 command while the downgrade is "
               f"enabled: {err or 'accepted'}")
    return views, err


def node_status(s, node_id):
    """BATON.DOWNGRADE STATUS of one node, as a dict ({} if no answer)."""
    try:
        reply = s.cluster.node(node_id).client(timeout=2.0).execute_command(
            "BATON.DOWNGRADE", "STATUS")
    except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError):
        return {}
    if not isinstance(reply, list) or len(reply) % 2:
        s.fail(f"BATON.DOWNGRADE STATUS of node {node_id}: {reply!r}")
    return dict(zip(reply[0::2], reply[1::2]))


def member_release(s, node_id):
    lead = leader_of(s.reader.views())
    if lead is None:
        return None
    try:
        for m in s.cluster.node(lead.id).members(timeout=2.0):
            if int(m["id"]) == node_id and m.get("versions") == "live":
                return m.get("release")
    except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError):
        return None
    return None


# ---- 4. cancel --------------------------------------------------------------


def downgrade_cancel(s):
    n = 3
    wait_leader_and_floor(s, n, "1.1.0", "machine version 2",
                          lambda v: v.machine == 2)
    s.stage("3 nodes at 1.1.0")
    s.load()
    if s.probe_v2() is not None:
        s.fail("a machine-version-2 command refused at machine version 2")
    enable_to_1_0_0(s, n)
    s.downgrade("CANCEL", "1.0.0")
    views = s.wait("the floor 1.1.0, machine version 2 and no downgrade on "
                   "every node", lambda vs: all_nodes(
                       vs, n, lambda v: v.floor == "1.1.0" and v.machine == 2
                       and v.downgrade == "none" and v.eligible == "yes"))
    s.stage("downgrade cancelled", views)
    err = s.probe_v2()
    if err is not None:
        s.fail(f"a machine-version-2 command refused after the cancel: {err}")
    s.verified("cancel restored floor 1.1.0 and machine version 2 on every "
               "node; v2 commands refused while enabled, accepted after")
    s.load()


# ---- 5. five nodes, two of the three upgraded killed ------------------------


def five_nodes_kill(s):
    n = 5
    views = wait_leader_and_floor(s, n, "1.0.0")
    s.stage("5 nodes at 1.0.0", views)
    s.load()
    views = s.wait("a leader", leader_of)
    up = followers(views)[:3]
    for node_id in up:
        s.restart_at(node_id, "1.1.0")
        s.caught_up(node_id)
    old = sorted(i for i in s.cluster.nodes if i not in up)
    views = s.wait("leadership on a 1.1.0 node and the floor 1.1.0 on every "
                   "node", lambda vs: leader_of(vs).release == "1.1.0"
                   and all_nodes(vs, n, lambda v: v.floor == "1.1.0")
                   and all(rule(vs[i], 1) for i in old), LEAD_MOVE_S)
    s.stage("3 of 5 upgraded", views)
    s.load()
    views = s.wait("a 1.1.0 leader", lambda vs:
                   leader_of(vs).release == "1.1.0")
    lead = leader_of(views).id
    victims = [lead] + [i for i in up if i != lead][:1]
    survivor = next(i for i in up if i not in victims)
    t_kill = time.monotonic_ns()
    for node_id in victims:
        s.kill(node_id)
    s.wait(f"node {survivor}, the last upgraded node alive, to lead",
           lambda vs: leader_of(vs).id == survivor, LEAD_MOVE_S)
    s.hold(f"node {survivor} leads and no 1.0.0 node does",
           lambda vs: leader_of(vs) is None or leader_of(vs).id == survivor)
    acked = s.acked_writes_since(t_kill)
    if acked == 0:
        s.fail("no write was acknowledged after the kills")
    s.stage("2 of the 3 upgraded killed")
    s.verified(f"node {survivor} led after nodes {victims} were killed; "
               f"{acked} writes acknowledged since")
    # Finish the upgrade so that every node serves again.
    for node_id in victims:
        s.start_killed(node_id, "1.1.0")
    for node_id in old:
        s.restart_at(node_id, "1.1.0")
    s.wait("every node eligible", lambda vs: all_nodes(
        vs, n, lambda v: v.eligible == "yes"))
    s.stage("5 of 5 upgraded")
    s.load()


SCENARIOS = {s.name: s for s in (
    Scenario("halon-stages", 3, "1.0.0", halon_stages,
             "3 nodes 1.0.0 -> 1.1.0: the leader and the floor at each stage"),
    Scenario("rollback-refused", 3, "1.1.0", rollback_refused,
             "1.0.0 started on a node after the floor rose: refused, the "
             "cluster serves"),
    Scenario("downgrade", 3, "1.1.0", downgrade,
             "validate, enable, roll back to 1.0.0, every key kept"),
    Scenario("downgrade-cancel", 3, "1.1.0", downgrade_cancel,
             "enable then cancel: floor and machine version restored"),
    Scenario("five-nodes-kill", 5, "1.0.0", five_nodes_kill,
             "5 nodes, 3 upgraded, 2 of them killed: the third leads"),
)}


# ---- running and reporting --------------------------------------------------


def play(stager, scenario):
    """Runs the script with the observer; the observer's violations fail
    the run."""
    stager.observer = Observer(stager.cluster, scenario.nodes)
    stager.observer.start()
    try:
        stager.note("scenario", name=scenario.name, about=scenario.what)
        scenario.play(stager)
    finally:
        stager.observer.stop()
    if stager.observer.crashed:
        raise stager.failure(f"the observer crashed: "
                             f"{stager.observer.crashed}")
    _, _, _, violations = stager.observer.snapshot()
    if violations:
        raise stager.failure("a node led below the release floor: "
                             + "; ".join(sorted(set(violations))[:5]))


def write_gap_ms(done, t, lo_s=GAP_BEFORE_S, hi_s=GAP_AFTER_S):
    """The longest time between two consecutive acknowledged writes
    completing in [t - lo_s, t + hi_s], in ms (None: fewer than two)."""
    lo, hi = t - int(lo_s * 1e9), t + int(hi_s * 1e9)
    inside = [x for x in done if lo <= x <= hi]
    gaps = [b - a for a, b in zip(inside, inside[1:])]
    return max(gaps) / 1e6 if gaps else None


def gap_text(g):
    return "(no writes)" if g is None else f"{g:.0f} ms"


def summary(stager, ops, t0_ns):
    """The timeline (script, observer), the stages, and the write gaps
    at each leadership move and operator action."""
    events, moves, leaders, violations = stager.observer.snapshot() \
        if stager.observer else ([], [], [], [])
    done = sorted(op.complete_ns for op in ops
                  if op.status == "ok" and op.f != "get"
                  and op.complete_ns is not None)
    lines = []
    for e in sorted(stager.timeline + events, key=lambda e: e["ns"]):
        detail = " ".join(f"{k}={v}" for k, v in e.items()
                          if k not in ("ns", "what"))
        lines.append(f"t+{(e['ns'] - t0_ns) / 1e9:6.1f}s {e['what']} "
                     f"{detail}")
    lines.append("stages (leader, floor per node):")
    for st in stager.stages:
        floors = " ".join(f"{i}:{f}" for i, f in st["floors"].items())
        lines.append(f"  t+{(st['ns'] - t0_ns) / 1e9:6.1f}s {st['stage']}: "
                     f"leader {st['leader']} ({st['leader_release']}, term "
                     f"{st['term']}); floors {floors}")
    for m in moves:
        lines.append(f"leader move t+{(m['ns'] - t0_ns) / 1e9:.1f}s node "
                     f"{m['from']} ({m['from_release']}) -> node {m['to']} "
                     f"({m['to_release']}), term {m['term']}: longest write "
                     f"gap {gap_text(write_gap_ms(done, m['ns']))}")
    acts = stager.actions
    for k, a in enumerate(acts):
        after = 3.0
        if k + 1 < len(acts):
            after = min(after, (acts[k + 1]["ns"] - a["ns"]) / 1e9)
        lines.append(f"{a['what']} node {a['node']} t+"
                     f"{(a['ns'] - t0_ns) / 1e9:.1f}s: longest write gap "
                     f"{gap_text(write_gap_ms(done, a['ns'], 0.2, after))}"
                     f" (to {after:.1f} s after)")
    if done:
        whole = max((b - a for a, b in zip(done, done[1:])), default=0)
        lines.append(f"longest write gap of the whole run: {whole / 1e6:.0f} "
                     f"ms ({len(done)} writes acknowledged)")
    lines.append(f"observer: {len(leaders)} rounds with a leader, "
                 f"{len(violations)} violations")
    return "\n".join(lines)


def move_gaps(stager, ops):
    """[(move, gap ms)] for the test's assertions."""
    _, moves, _, _ = stager.observer.snapshot()
    done = sorted(op.complete_ns for op in ops
                  if op.status == "ok" and op.f != "get"
                  and op.complete_ns is not None)
    return [(m, write_gap_ms(done, m["ns"])) for m in moves]
