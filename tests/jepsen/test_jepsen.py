"""The Jepsen-style fault harness under pytest (docs/jepsen.md).

- test_linearizable_under_faults: one run of the harness, every fault kind,
  checked by baton-lincheck. Short by default (45 s of load, for `make
  test`); JEPSEN_SECONDS=600 makes it long (`make jepsen SECONDS=600`).
- test_teeth_planted_bug: the harness must catch each server built with a
  planted bug (build/batond-bug-stale-reads: reads without the read
  index; build/batond-bug-early-ack: a SET acknowledged before it
  commits), under a schedule of leader isolations: the checker must say
  "not linearizable".

Environment: BATON_BUILD (build directory, default build), BATON_LINCHECK
(the checker, default $BATON_BUILD/baton-lincheck), JEPSEN_SECONDS,
JEPSEN_SEED (default random, printed), JEPSEN_NODES (3 or 5; default drawn
from the seed), JEPSEN_CLIENTS (10), JEPSEN_KEYS (3), JEPSEN_OUT (a folder
for the run's history and logs; default pytest's tmp_path).
"""

import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

# A passed test's output folder goes (tests/e2e/conftest.py).
remove_what_a_passed_test_wrote = harness.e2e.remove_what_a_passed_test_wrote

SHORT_SECONDS = 45
# The teeth test: each attempt is a short run; a violation shows up in the
# first second or two of load, so one attempt nearly always suffices. The
# retries bound the (already tiny) chance of a run that catches nothing.
TEETH_SECONDS = 8
TEETH_ATTEMPTS = 3


def env_int(name, default):
    v = os.environ.get(name)
    return int(v) if v else default


def seed_from_env():
    seed = os.environ.get("JEPSEN_SEED")
    return int(seed) if seed else random.SystemRandom().randrange(1, 2 ** 31)


def harness_args(tmp_path, seed, seconds, nodes, extra=(), label=""):
    out = (Path(os.environ.get("JEPSEN_OUT") or tmp_path)
           / f"{label}seed-{seed}")
    argv = ["--seed", str(seed), "--seconds", str(seconds), "--nodes",
            str(nodes), "--clients", str(env_int("JEPSEN_CLIENTS", 10)),
            "--keys", str(env_int("JEPSEN_KEYS", 3)), "--out", str(out)]
    return harness.parse_args(argv + list(extra))


def require_binaries():
    build = harness.build_dir()
    for path in (build / "batond", harness.find_checker(build)):
        if not path.exists():
            pytest.fail(f"{path} not found: build it first (make build), "
                        f"or set BATON_BUILD / BATON_LINCHECK")


def test_linearizable_under_faults(tmp_path):
    require_binaries()
    seed = seed_from_env()
    seconds = env_int("JEPSEN_SECONDS", SHORT_SECONDS)
    nodes = env_int("JEPSEN_NODES", random.Random(seed).choice((3, 5)))
    args = harness_args(tmp_path, seed, seconds, nodes)
    res = harness.run(args)
    print(res.message)
    assert res.ok, res.message
    assert res.counts["ok"] > 0, f"seed {seed}: no operation succeeded"


# The planted bugs (src/server/server.h) and what each breaks.
PLANTED_BUGS = {
    "stale-reads": "every read served from local state, no read index",
    "early-ack": "the leader acknowledges a SET before it is committed",
}


@pytest.mark.parametrize("bug", sorted(PLANTED_BUGS))
def test_teeth_planted_bug(tmp_path, bug):
    """A server built with a planted bug must be reported: up to
    TEETH_ATTEMPTS short runs (each with its own seed) of
    build/batond-bug-BUG under leader isolations, until the checker finds
    a violation."""
    require_binaries()
    batond = harness.build_dir() / f"batond-bug-{bug}"
    if not batond.exists():
        pytest.fail(f"{batond} not found: build it first (make build)")
    first = seed_from_env()
    verdicts = []
    for attempt in range(TEETH_ATTEMPTS):
        seed = first + attempt
        args = harness_args(tmp_path, seed, TEETH_SECONDS, 3,
                            ["--batond", str(batond), "--nemesis",
                             "isolate-leader", "--read-heavy"],
                            label=f"bug-{bug}-")
        res = harness.run(args)
        verdicts.append(f"seed {seed}: {res.verdict} ({res.failure})")
        if res.verdict == "not-linearizable":
            print(f"caught {bug} on attempt {attempt + 1} (seed {seed}):\n"
                  f"{res.checker_output}")
            return
    pytest.fail(f"the harness did not catch the planted bug {bug} "
                f"({PLANTED_BUGS[bug]}) in {TEETH_ATTEMPTS} runs: "
                + "; ".join(verdicts))


# A rolling upgrade under load (issue "Rolling upgrades, part 1"): three
# nodes at 1.0.0 (machine_max 1) upgraded one by one to 1.1.0 (machine_max
# 2) with SIGTERM and a restart on the same data, while clients run. The
# roller (roll.py) checks from the outside that the effective machine
# version stays 1 until the third node runs 1.1.0, that a version-2
# command is refused before and accepted after, and the history must be
# linearizable (no acknowledged write lost).
ROLL_SECONDS = 30
# With kills between the upgrades: long enough for fault episodes (1-6 s)
# to fit between them.
ROLL_KILL_SECONDS = 40


@pytest.mark.parametrize("nemesis", ["none", "kill"])
def test_rolling_upgrade_under_load(tmp_path, nemesis):
    require_binaries()
    seed = seed_from_env()
    seconds = env_int("JEPSEN_ROLL_SECONDS",
                      ROLL_KILL_SECONDS if nemesis == "kill" else ROLL_SECONDS)
    args = harness_args(tmp_path, seed, seconds, 3,
                        ["--roll-releases", "1.0.0,1.1.0", "--nemesis",
                         nemesis], label=f"roll-{nemesis}-")
    res = harness.run(args)
    print(res.message)
    print(res.roll_summary)
    assert res.ok, res.message
    upgrades = [e for e in res.roller.timeline if e["what"] == "upgrade"]
    assert [e["node"] for e in upgrades] == [1, 2, 3], res.roll_summary
    # Before the third upgrade every observation saw version 1; at the end
    # it is 2 (settle() required it, the probe too).
    third = upgrades[-1]["ns"]
    before = [e for e in res.roller.timeline
              if e["what"] == "versions" and e["ns"] < third]
    assert before and all(e["effective"] == 1 for e in before), \
        res.roll_summary
    settled = [e for e in res.roller.timeline if e["what"] == "settled"]
    assert settled and settled[-1]["effective"] == 2, res.roll_summary
    assert res.counts["ok"] > 0
    if nemesis == "kill":
        assert res.faults.get("kill", 0) + res.faults.get("power-loss", 0) \
            > 0, f"no kill between the upgrades: {res.faults}"
