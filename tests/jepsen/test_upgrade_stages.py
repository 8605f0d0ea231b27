"""Upgrade and downgrade scenarios under client load (issue "Rolling
upgrades, part 2"; tests/jepsen/stages.py, docs/jepsen.md "Upgrade
scenarios").

Each test is one harness run with `--scenario NAME`: a script restarts,
kills and downgrades nodes while the harness's clients run, checks after
each step what the version rules require (the leader's release, the
release floor, each node's leader_eligible, the downgrade state), an
observer checks throughout that no node leads below a floor, and the
history must be linearizable (baton-lincheck) with every node serving at
the end. The timeline, the stages and the longest write gap at each
leadership move are printed (pytest -s shows them).

Environment as test_jepsen.py (BATON_BUILD, BATON_LINCHECK, JEPSEN_SEED,
JEPSEN_OUT, JEPSEN_CLIENTS, JEPSEN_KEYS); STAGES_HOLD_S lengthens how
long each stage is watched (default 2 s).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

# A passed test's output folder goes (tests/e2e/conftest.py).
remove_what_a_passed_test_wrote = harness.e2e.remove_what_a_passed_test_wrote
import stages  # noqa: E402
from test_jepsen import (harness_args, require_binaries,  # noqa: E402
                         seed_from_env)


def run_scenario(tmp_path, name):
    require_binaries()
    seed = seed_from_env()
    args = harness_args(tmp_path, seed, 60, stages.SCENARIOS[name].nodes,
                        ["--scenario", name], label=f"{name}-")
    res = harness.run(args)  # prints the timeline as it goes
    assert res.ok, f"{res.message}\n{res.stage_summary}"
    assert res.counts["ok"] > 0
    return res


def moves(res):
    return stages.move_gaps(res.stager, [])


def stage(res, name):
    found = [s for s in res.stager.stages if s["stage"] == name]
    assert found, f"no stage {name!r}:\n{res.stage_summary}"
    return found[-1]


def test_halon_stages_under_load(tmp_path):
    res = run_scenario(tmp_path, "halon-stages")
    one = stage(res, "1 of 3 upgraded")
    assert one["leader_release"] == "1.0.0"
    assert set(one["floors"].values()) == {"1.0.0"}
    two = stage(res, "2 of 3 upgraded")
    assert two["leader_release"] == "1.1.0"
    assert set(two["floors"].values()) == {"1.1.0"}
    assert sum(e.startswith("no (rule 1") for e in two["eligible"].values()) \
        == 1, two
    three = stage(res, "3 of 3 upgraded")
    assert set(three["eligible"].values()) == {"yes"}, three
    # Leadership moved from 1.0.0 to 1.1.0 (by the rule-2 hand-over).
    assert any(m["from_release"] == "1.0.0" and m["to_release"] == "1.1.0"
               for m, _ in moves(res)), res.stage_summary


def test_rollback_after_the_floor_rose_is_refused(tmp_path):
    res = run_scenario(tmp_path, "rollback-refused")
    assert any(c.startswith("rollback refused") for c in res.stager.checks)


def test_downgrade_to_1_0_0_under_load(tmp_path):
    res = run_scenario(tmp_path, "downgrade")
    end = stage(res, "downgrade ended")
    assert set(end["floors"].values()) == {"1.0.0"}
    assert set(end["machine"].values()) == {1}


def test_downgrade_cancel_under_load(tmp_path):
    res = run_scenario(tmp_path, "downgrade-cancel")
    end = stage(res, "downgrade cancelled")
    assert set(end["floors"].values()) == {"1.1.0"}
    assert set(end["machine"].values()) == {2}


def test_five_nodes_two_upgraded_killed(tmp_path):
    res = run_scenario(tmp_path, "five-nodes-kill")
    killed = stage(res, "2 of the 3 upgraded killed")
    assert killed["leader_release"] == "1.1.0"
    # No 1.0.0 node led once the floor had risen (the observer checks
    # every round; here: every leader seen after the stage with 3 upgraded).
    risen = stage(res, "3 of 5 upgraded")["ns"]
    _, _, leaders, violations = res.stager.observer.snapshot()
    assert not violations
    late = [(i, rel) for ns, i, rel, _, _ in leaders if ns >= risen]
    assert late and all(rel == "1.1.0" for _, rel in late), late

