"""`batonctl roll`: a rolling upgrade as one command (docs/upgrading.md,
"batonctl roll").

Each test starts 3 nodes emulating the release before the newest one a
rolling upgrade reaches (`batond --as-release`) and rolls them to it: the
tree's own release, or, when no older release can talk to it (2.0.0
speaks peer protocol 4 only), the newest that one can (1.3.0), emulated
too. A roll to a release no member can talk to is refused. The restart
command batonctl runs is tests/e2e/roll_restart.py, which asks this test
process (a Restarter thread watching a folder) to restart the node: the
test keeps owning every PID it started.
"""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

from conftest import (BATOND, BATONCTL, Deadline, POLL_S, release_table,
                      require_binary, rolling_target)
from test_run_cluster import free_base_port, start_script

RELEASES = release_table()
OWN = RELEASES[-1]  # the binary's own: no --as-release
NEWEST = rolling_target()  # the newest an older release rolls to
PREVIOUS = RELEASES[RELEASES.index(NEWEST) - 1]
HELPER = Path(__file__).resolve().parent / "roll_restart.py"
ROLL_TIMEOUT_S = 240  # the whole batonctl roll run
STEP_TIMEOUT_S = 40
WRITES_MAX = 100000  # the background writer's bound


def profile(release):
    """(proto_min, proto_max) of a release, from batond --version."""
    require_binary(BATOND)
    r = subprocess.run([str(BATOND), "--as-release", release, "--version"],
                       capture_output=True, text=True, timeout=10)
    line = [x for x in r.stdout.splitlines() if x.startswith("peer protocol")]
    lo, hi = line[0].split()[2].rstrip(",").split("-")
    return int(lo), int(hi)


def start_at(cluster, release):
    """3 nodes at `release`; later restarts take --as-release from each
    node's own args (restart() below changes them)."""
    lead = cluster.start(3, extra=["--as-release", release])
    i = cluster.common_args.index("--as-release")
    del cluster.common_args[i:i + 2]
    for m in cluster.nodes.values():
        m.args += ["--as-release", release]
    return lead


# batond flags a restart sets anew (a test's per-release extra flags).
RESTART_FLAGS = ("--as-release", "--test-apply-delay-ms")


def restart(node, release, flags=(), wait=True, stop_timeout_s=None,
            kill=False):
    """SIGTERM (SIGKILL with kill=True), then start again on the same data
    at `release`, with `flags` (e.g. a planted slow release's); wait=False
    returns once it is started, before it answers (the roll waits for
    it)."""
    if kill:
        node.kill9()
    else:
        kw = {} if stop_timeout_s is None else {"timeout": stop_timeout_s}
        assert node.terminate(**kw) == 0
    args = list(node.args)
    for name in RESTART_FLAGS:
        if name in args:
            i = args.index(name)
            del args[i:i + 2]
    if release != OWN:
        args += ["--as-release", release]
    node.start(args + list(flags), wait=wait)


class Restarter:
    """Answers roll_restart.py's requests while batonctl runs: restarts the
    node at `release` and records (node id, whether it led just before its
    restart). It runs on the test's main thread: a node dies with the
    thread that started it (conftest's PR_SET_PDEATHSIG)."""

    def __init__(self, cluster, folder, release):
        self.cluster = cluster
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.release = release
        self.restarts = []
        self.errors = []
        # With command(with_release=True) the roll names the release
        # ({release}); extra batond flags per release (a planted slow
        # release) and (node id, release) of every restart.
        self.flags = {}
        self.releases = []
        # Releases started without waiting for PING (a slow one may not
        # answer for a while), and a longer SIGTERM grace (None: the
        # default), for a node busy applying.
        self.no_wait = set()
        self.stop_timeout_s = None
        # SIGKILL rather than SIGTERM for a node running with the planted
        # delay, for a test whose purpose is not the graceful stop: SIGTERM
        # waits for the node to apply its whole backlog at the delay.
        self.kill_slow = False

    def led(self, node):
        try:
            return node.info(timeout=1.0).get("role") == "leader"
        except (redis.ConnectionError, redis.TimeoutError,
                redis.ResponseError):
            return False

    def serve(self):
        for req in sorted(self.folder.glob("*.req")):
            words = req.read_text().split()
            node = self.cluster.node(int(words[0]))
            release = words[1] if len(words) > 1 else self.release
            answer = req.with_suffix(".done")
            req.unlink()
            try:
                self.restarts.append((node.id, self.led(node)))
                self.releases.append((node.id, release))
                restart(node, release, self.flags.get(release, []),
                        wait=release not in self.no_wait,
                        stop_timeout_s=self.stop_timeout_s,
                        kill=self.kill_slow and
                        "--test-apply-delay-ms" in node.args)
                text = f"0 node {node.id} restarted at {release}"
            except Exception as e:  # said to batonctl and the test
                self.errors.append(repr(e))
                text = f"1 restarting node {node.id} failed: {e!r}"
            tmp = answer.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.rename(answer)

    def command(self, with_release=False):
        return f"{sys.executable} {shlex.quote(str(HELPER))} " \
               f"{shlex.quote(str(self.folder))} {{id}}" + \
               (" {release}" if with_release else "")


class Writer(threading.Thread):
    """SETs distinct keys through every node in turn, for as long as the
    roll runs (bounded), recording each acknowledged write."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.nodes = list(cluster.nodes.values())
        self.acked = {}
        self.failures = 0
        self.stop = threading.Event()

    def run(self):
        clients = [m.client(timeout=2.0) for m in self.nodes]
        k, n = 0, 0
        while not self.stop.is_set() and n < WRITES_MAX:
            key, value = f"roll-{n}", str(n)
            try:
                clients[k % len(clients)].set(key, value)
                self.acked[key] = value
                n += 1
            except (redis.ConnectionError, redis.TimeoutError,
                    redis.ResponseError):
                self.failures += 1  # not acknowledged: the same key again
                k += 1
                time.sleep(0.02)


def roll(cluster, restarter, *args, command=None, via=None, to=NEWEST,
         timeout=ROLL_TIMEOUT_S):
    """Run batonctl roll to the newest release with the restarter's
    command (or `command`), serving its restart requests meanwhile."""
    require_binary(BATONCTL)
    node = via or cluster.nodes[min(cluster.nodes)]
    cmd = [str(BATONCTL), "-p", str(node.client_port), "roll", "--to",
           to, "--step-timeout-s", str(STEP_TIMEOUT_S),
           "--restart", command or restarter.command(), *args]
    with tempfile.TemporaryFile("w+") as out, \
            tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        d = Deadline(timeout, "batonctl roll to end")
        while proc.poll() is None:
            if d.expired():
                proc.kill()  # our own child
                proc.wait()
                d.fail()
            restarter.serve()
            time.sleep(POLL_S)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, out.read(),
                                           err.read())


def releases_now(cluster):
    return {m.id: m.info()["release"] for m in cluster.nodes.values()}


def check_acked(cluster, acked):
    lead = cluster.leader()
    c = lead.client(timeout=10.0)
    keys = list(acked)
    for i in range(0, len(keys), 500):
        chunk = keys[i:i + 500]
        got = c.mget(chunk)
        lost = [k for k, v in zip(chunk, got) if v != acked[k]]
        assert not lost, f"acknowledged writes lost: {lost[:10]}"


def events(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_roll_under_load_hands_over_and_loses_nothing(cluster, tmp_path):
    lead = start_at(cluster, PREVIOUS)
    first_leader = lead.id
    restarter = Restarter(cluster, tmp_path / "requests", NEWEST)
    writer = Writer(cluster)
    writer.start()
    try:
        time.sleep(0.5)
        r = roll(cluster, restarter, "--json", "--pause", "0.2")
    finally:
        writer.stop.set()
        writer.join(timeout=30)
    out = f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert r.returncode == 0, out
    assert not restarter.errors, restarter.errors
    evs = events(r.stdout)  # every line parses as JSON
    kinds = [e["event"] for e in evs]
    for e in evs:
        assert isinstance(e["t"], (int, float)) and e["message"], e
    assert kinds[0] == "precheck" and evs[0]["ok"] is True, out
    assert kinds.count("restart") == 3 and kinds.count("node_done") == 3, out
    assert kinds[-2:] == ["machine_version", "done"], out
    plan = next(e for e in evs if e["event"] == "plan")
    assert plan["order"][-1] == first_leader, out
    # The leader last, and never restarted while it led: batonctl (or the
    # cluster's own majority-release rule) moved leadership first.
    order = [node_id for node_id, _ in restarter.restarts]
    assert order == plan["order"], (restarter.restarts, out)
    assert not any(led for _, led in restarter.restarts), restarter.restarts
    last_restart = len(kinds) - 1 - kinds[::-1].index("restart")
    assert "transfer" in kinds[:last_restart], out
    assert releases_now(cluster) == {1: NEWEST, 2: NEWEST, 3: NEWEST}
    assert len(writer.acked) > 0
    check_acked(cluster, writer.acked)


def test_dry_run_prints_the_plan_and_changes_nothing(cluster, tmp_path):
    lead = start_at(cluster, PREVIOUS)
    restarter = Restarter(cluster, tmp_path / "requests", NEWEST)
    r = roll(cluster, restarter, "--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    plan = [x for x in r.stdout.splitlines() if "plan: restart" in x]
    assert len(plan) == 1, r.stdout
    followers = [m.id for m in cluster.nodes.values() if m is not lead]
    text = plan[0]
    at = [text.index(f"node {i} (") for i in followers + [lead.id]]
    assert at[-1] > max(at[:-1]), text  # the leader last
    assert f"node {lead.id} ({PREVIOUS}, the leader: hand over first)" \
        in text
    assert r.stdout.count("would run:") == 3, r.stdout
    assert not list((tmp_path / "requests").glob("*")), "a restart ran"
    assert set(releases_now(cluster).values()) == {PREVIOUS}


def test_prechecks_refuse_and_change_nothing(cluster, tmp_path):
    lead = start_at(cluster, PREVIOUS)
    restarter = Restarter(cluster, tmp_path / "requests", NEWEST)
    cmd = restarter.command()
    # A release this batonctl does not know.
    r = cluster.batonctl("roll", "--to", "99.0.0", "--restart", cmd,
                         check=False)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "does not know release 99.0.0: use the batonctl of release " \
        "99.0.0 or newer" in r.stdout
    # Below the floor, and (for a release of another peer protocol) the
    # relay.
    old = next((x for x in RELEASES if profile(x)[1] < profile(NEWEST)[0]),
               None)
    if old is not None:
        r = cluster.batonctl("roll", "--to", old, "--restart", cmd,
                             check=False)
        assert r.returncode == 3, r.stdout + r.stderr
        assert "batonctl downgrade" in r.stdout, r.stdout
        assert "cannot talk" in r.stdout and "relay" in r.stdout, r.stdout
    # A release newer than NEWEST that no member can talk to (2.0.0 and
    # 1.x): the relay, docs/relay.md.
    if OWN != NEWEST:
        r = cluster.batonctl("roll", "--to", OWN, "--restart", cmd,
                             check=False)
        assert r.returncode == 3, r.stdout + r.stderr
        assert f"release {OWN} speaks peer protocol" in r.stdout and \
            "cannot talk" in r.stdout, r.stdout
        assert "upgrade through the relay (docs/relay.md)" in r.stdout, \
            r.stdout
    # One member down: refused, nothing restarted.
    down = next(m for m in cluster.nodes.values() if m is not lead)
    assert down.terminate() == 0
    r = roll(cluster, restarter, via=lead)
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"node {down.id} ({down.client_addr}) does not answer" \
        in r.stdout, r.stdout
    assert "nothing was changed" in r.stderr, r.stderr
    assert not list((tmp_path / "requests").glob("*")), "a restart ran"
    assert {m.info()["release"] for m in cluster.alive()} == {PREVIOUS}


def test_failed_restart_stops_and_a_rerun_completes(cluster, tmp_path):
    start_at(cluster, PREVIOUS)
    restarter = Restarter(cluster, tmp_path / "requests", NEWEST)
    dry = roll(cluster, restarter, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    order = next(e for e in events(dry.stdout)
                 if e["event"] == "plan")["order"]
    bad = order[1]
    failing = (f"if [ {{id}} = {bad} ]; then echo simulated failure; "
               f"exit 7; fi; {restarter.command()}")
    r = roll(cluster, restarter, command=failing)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert f"node {bad} | simulated failure" in r.stdout, out
    assert f"roll stopped at node {bad}" in r.stdout, out
    assert "exited with status 7" in r.stdout, out
    assert "rerun the same batonctl roll command" in r.stdout, out
    assert "to roll back:" in r.stdout, out
    # Stopped at once: only the first node was restarted.
    assert [i for i, _ in restarter.restarts] == [order[0]]
    rel = releases_now(cluster)
    assert rel[order[0]] == NEWEST and rel[bad] == PREVIOUS, rel
    # The rerun skips the node already at the target and completes.
    r = roll(cluster, restarter)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"node {order[0]} already runs {NEWEST}: skipped" in r.stdout, \
        r.stdout
    assert [i for i, _ in restarter.restarts] == order
    assert set(releases_now(cluster).values()) == {NEWEST}
    # Nothing left to do: said so, exit 0.
    r = roll(cluster, restarter)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"every member already runs {NEWEST}" in r.stdout, r.stdout


def test_roll_raises_the_machine_version(cluster, tmp_path):
    """1.0.0 (machine version 1) to 1.1.0 (2): the roll ends once every
    member applies machine version 2, and says so."""
    start_at(cluster, "1.0.0")
    restarter = Restarter(cluster, tmp_path / "requests", "1.1.0")
    r = roll(cluster, restarter, "--json", to="1.1.0")
    assert r.returncode == 0, r.stdout + r.stderr
    ev = [e for e in events(r.stdout) if e["event"] == "machine_version"]
    assert len(ev) == 1 and ev[0]["machine_version"] == 2, r.stdout
    assert ev[0]["release_floor"] == "1.1.0", r.stdout
    lead = cluster.leader()
    assert lead.client().set("k", "v", px=60000)  # a version-2 command


def test_make_run_cluster_rolls_with_run_cluster_restart(tmp_path):
    """RELEASE=<previous> scripts/run-cluster (make run), then the roll
    command it prints, whose restarts go through `run-cluster restart`."""
    require_binary(BATONCTL)
    base = free_base_port()
    p, out = start_script(base, tmp_path, RELEASE=PREVIOUS)
    record = tmp_path / f"baton-cluster-{base}.dir"
    try:
        d = Deadline(30, "run-cluster to print the roll command")
        text = ""
        while not d.expired():
            out.seek(0)
            text = out.read()
            if "Ctrl-C stops" in text or p.poll() is not None:
                break
            time.sleep(0.1)
        else:
            d.fail(text)
        assert p.poll() is None, f"run-cluster exited:\n{text}"
        assert record.exists(), text
        restart = re.search(r"--restart '([^']+)'", text)
        assert restart and "restart {id} --release {release}" in \
            restart.group(1), text
        env = dict(os.environ, TMPDIR=str(tmp_path))
        r = subprocess.run([str(BATONCTL), "-p", str(base), "roll", "--to",
                            NEWEST, "--step-timeout-s", str(STEP_TIMEOUT_S),
                            "--restart", restart.group(1)],
                           capture_output=True, text=True, env=env,
                           timeout=ROLL_TIMEOUT_S)
        assert r.returncode == 0, r.stdout + r.stderr
        for i in range(3):
            c = redis.Redis(host="127.0.0.1", port=base + i,
                            socket_timeout=5, decode_responses=True)
            assert c.info()["release"] == NEWEST
        assert r.stdout.count("restarted at release") == 3, r.stdout
        # Ctrl-C still stops every node, the restarted ones too.
        os.killpg(p.pid, signal.SIGINT)
        assert p.wait(timeout=30) == 130
        assert not record.exists()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)
        out.close()
