"""`batonctl roll --restart-all`: a rolling restart at the release the
cluster already runs (docs/upgrading.md, "batonctl roll", "A rolling
restart at the same release"), e.g. to give every node a new flag.

Without the flag a roll to the release every member runs restarts
nothing (test_roll.py); with it every member is restarted, one at a
time, followers first and the leader last after a hand-over, with the
checks of every roll; a roll that stops prints a resume command that
skips the nodes already restarted.
"""

import json
import shlex
import subprocess
import tempfile
import time

from conftest import BATONCTL, Deadline, POLL_S, require_binary
from test_roll import NEWEST, Restarter, events, releases_now, start_at

ROLL_TIMEOUT_S = 240
STEP_TIMEOUT_S = 40


def run(restarter, argv):
    """Run batonctl (argv after the binary), serving restart requests."""
    require_binary(BATONCTL)
    cmd = [str(BATONCTL)] + argv
    with tempfile.TemporaryFile("w+") as out, \
            tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        d = Deadline(ROLL_TIMEOUT_S, "batonctl roll to end")
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


def roll_argv(cluster, command, *extra):
    node = cluster.nodes[min(cluster.nodes)]
    return ["-p", str(node.client_port), "roll", "--to", NEWEST,
            "--json", "--restart-all", "--step-timeout-s",
            str(STEP_TIMEOUT_S), "--restart", command, *extra]


def pids(cluster):
    return {m.id: m.proc.pid for m in cluster.nodes.values()}


def test_restart_all_restarts_every_member_at_the_same_release(cluster,
                                                               tmp_path):
    lead = start_at(cluster, NEWEST)
    restarter = Restarter(cluster, tmp_path / "requests", NEWEST)
    before = pids(cluster)
    r = run(restarter, roll_argv(cluster, restarter.command()))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    evs = events(r.stdout)
    plan = next(e for e in evs if e["event"] == "plan")
    assert plan["skipped"] == [] and plan["order"][-1] == lead.id, out
    # Every member restarted once, in the plan's order, none while it
    # led: the roll handed leadership over itself (no release to prefer).
    assert [i for i, _ in restarter.restarts] == plan["order"], out
    assert not any(led for _, led in restarter.restarts), out
    assert any(e["event"] == "transfer" and e.get("to_release") == NEWEST
               for e in evs), out
    after = pids(cluster)
    assert all(after[i] != before[i] for i in before), (before, after)
    assert releases_now(cluster) == {1: NEWEST, 2: NEWEST, 3: NEWEST}
    assert [e["event"] for e in evs][-1] == "done", out


def test_restart_all_resumes_with_the_printed_command(cluster, tmp_path):
    start_at(cluster, NEWEST)
    restarter = Restarter(cluster, tmp_path / "requests", NEWEST)
    dry = run(restarter, roll_argv(cluster, restarter.command(),
                                   "--dry-run"))
    assert dry.returncode == 0, dry.stdout + dry.stderr
    order = next(e for e in events(dry.stdout)
                 if e["event"] == "plan")["order"]
    assert len(order) == 3 and not restarter.restarts
    bad = order[1]
    failing = (f"if [ {{id}} = {bad} ]; then echo simulated failure; "
               f"exit 7; fi; {restarter.command()}")
    r = run(restarter, roll_argv(cluster, failing))
    assert r.returncode == 1, r.stdout + r.stderr
    failed = next(e for e in events(r.stdout) if e["event"] == "failed")
    assert failed["node"] == bad, r.stdout
    resume = shlex.split(failed["resume_command"])
    assert resume[0] == "batonctl", resume
    # The node restarted and seen back (order[0]) is skipped; the one
    # whose restart failed is restarted again, then the last one.
    i = resume.index("--skip")
    assert resume[i + 1] == str(order[0]), resume
    # Run it, with the restart command fixed.
    j = resume.index("--restart")
    resume[j + 1] = restarter.command()
    assert "--restart-all" in resume and "--json" in resume, resume
    done = run(restarter, resume[1:])
    assert done.returncode == 0, done.stdout + done.stderr
    assert [i for i, _ in restarter.restarts] == order
    skipped = next(e for e in events(done.stdout)
                   if e["event"] == "plan")["skipped"]
    assert skipped == [order[0]], done.stdout


def test_skip_goes_with_restart_all(cluster, tmp_path):
    start_at(cluster, NEWEST)
    r = cluster.batonctl("roll", "--to", NEWEST, "--restart", "x {id}",
                         "--skip", "1", check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--skip goes with --restart-all" in r.stderr
    r = cluster.batonctl("roll", "--to", NEWEST, "--restart", "x {id}",
                         "--restart-all", "--skip", "1,,2", check=False)
    assert r.returncode == 2 and "--skip must be node ids" in r.stderr, \
        r.stderr
    # Without --restart-all, nothing to do at the release every member
    # runs.
    r = cluster.batonctl("roll", "--to", NEWEST, "--restart", "x {id}",
                         "--json", check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    plan = next(e for e in events(r.stdout) if e["event"] == "plan")
    assert plan["order"] == [], r.stdout
    assert json.loads(r.stdout.splitlines()[-1])["event"] == "done"
