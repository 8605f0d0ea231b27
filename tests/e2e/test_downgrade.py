"""Explicit downgrades an operator can trust (docs/upgrading.md, "Explicit
downgrade"):

- a target the procedure could never finish is refused by validate and
  enable, with the reason: one that speaks no peer protocol in common with
  a member (2.0.0 speaks 4 only, 1.3.0 2..3: a node restarted on 1.3.0
  would hear no leader), one unknown to the binary;
- what converting the state machine down loses is counted and worded by
  the machine itself (hashes deleted below machine version 3, TTLs dropped
  below 2), and --force does exactly that;
- cancel is refused while the leader cannot tell that no member runs the
  target: a member that stopped answering may have been restarted on it.

Mixed releases come from --as-release, as in test_versions.py.
"""

import time

import pytest
import redis

from conftest import (ELECTION_TIMEOUT_MS, Deadline, POLL_S, release_profiles,
                      release_table, retry)

RELEASES = release_table()
NEWEST = RELEASES[-1]
NEWEST_MIN, NEWEST_MAX, NEWEST_MACHINE = release_profiles()[NEWEST]
WAIT_S = 30.0


def previous(release):
    return RELEASES[RELEASES.index(release) - 1]


# The leader's own version entries (a new leader's, the floor's rise) are
# "in flight" for a moment after a start: a retryable refusal that says
# nothing of the request, asked again within this bound.
IN_FLIGHT_S = 10.0


def downgrade(node, *args):
    """BATON.DOWNGRADE on `node`: the reply, or the ResponseError (asked
    again while the leader has a version entry or transfer in flight)."""
    deadline = Deadline(IN_FLIGHT_S, "no version entry in flight")
    while True:
        try:
            return node.client().execute_command("BATON.DOWNGRADE", *args)
        except redis.ResponseError as e:
            if "in flight; try again" not in str(e) or deadline.expired():
                return e
        time.sleep(POLL_S)


def as_dict(reply):
    assert isinstance(reply, list), reply
    return {reply[i]: reply[i + 1] for i in range(0, len(reply), 2)}


def info_field(node, name):
    c = node.client(timeout=2.0)
    c.set_response_callback("INFO", lambda r, **kw: r)
    for line in c.execute_command("INFO").splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1]
    return None


def wait_machine(cluster, v):
    for m in cluster.alive():
        d = Deadline(WAIT_S, f"{m} at machine version {v}")
        while info_field(m, "machine_version") != str(v):
            if d.expired():
                d.fail()
            time.sleep(POLL_S)


def test_a_target_sharing_no_peer_protocol_is_refused(cluster):
    """A cluster of the binary's own release (2.0.0,
    protocol 4 only) cannot go back to 1.3.0 (2..3) by restarts. Validate
    and enable say so, name both ranges and the relay, and say nothing of
    TTLs; enable --force changes nothing and the hash stays."""
    target = previous(NEWEST)
    lo, hi, _ = release_profiles()[target]
    if lo <= NEWEST_MAX and NEWEST_MIN <= hi:
        pytest.skip(f"{target} and {NEWEST} share a peer protocol")
    lead = cluster.start(3)
    wait_machine(cluster, NEWEST_MACHINE)
    c = lead.client()
    assert c.hset("h", "f", "1") == 1
    for args in (("validate", target), ("enable", target, "--force")):
        r = cluster.batonctl("downgrade", *args, check=False)
        assert r.returncode == 1, r
        assert f"peer protocol versions {lo}..{hi}" in r.stderr, r.stderr
        assert f"speaks {NEWEST_MIN}..{NEWEST_MAX}" in r.stderr, r.stderr
        assert "relay" in r.stderr, r.stderr
        assert "TTL" not in r.stderr, r.stderr
    e = downgrade(lead, "VALIDATE", target, "FORCE")
    assert isinstance(e, redis.ResponseError), e
    assert str(e).startswith("downgrade validate to"), e  # -ERR, final
    st = as_dict(downgrade(lead, "STATUS"))
    assert st["downgrade"] == "none", st
    assert st["release_floor"] == NEWEST, st
    assert c.hget("h", "f") == "1"
    assert c.type("h") == "hash"


def test_an_unknown_release_is_named_as_such(cluster):
    lead = cluster.start(3, extra=["--as-release", "1.1.0"])
    e = downgrade(lead, "VALIDATE", "1.0.7")
    assert isinstance(e, redis.ResponseError), e
    assert "1.0.7 is not a release this binary knows" in str(e), e


def test_loss_is_the_machines_and_force_does_what_it_says(cluster):
    """The refusal and the validate map say what the
    machine's conversion loses, kind by kind; --force then does exactly
    that (here: one key keeps its value and loses its TTL; the others are
    untouched)."""
    lead = cluster.start(3, extra=["--as-release", "1.1.0"])
    wait_machine(cluster, 2)
    c = lead.client()
    assert c.set("t", "with-ttl", ex=1000) is True
    assert c.set("s", "plain") is True
    text = ("1 key has a TTL that machine version 1 cannot keep; with "
            "FORCE it becomes persistent")
    e = downgrade(lead, "VALIDATE", "1.0.0")
    assert isinstance(e, redis.ResponseError), e
    assert str(e) == f"downgrade validate to 1.0.0 refused: {text}", e
    m = as_dict(downgrade(lead, "VALIDATE", "1.0.0", "FORCE"))
    assert (m["machine_from"], m["machine_to"], m["keys_lost"], m["loss"],
            m["loss_kinds"], m["valid"]) == ("2", "1", "1", text,
                                             "ttls_dropped:1",
                                             "yes, with FORCE"), m
    r = cluster.batonctl("downgrade", "validate", "1.0.0", "--force",
                         node=lead)
    assert f"with --force: {text}" in r.stdout, r.stdout
    r = cluster.batonctl("downgrade", "enable", "1.0.0", check=False,
                         node=lead)
    assert r.returncode == 1 and text in r.stderr, r
    cluster.batonctl("downgrade", "enable", "1.0.0", "--force", node=lead)
    wait_machine(cluster, 1)
    lead = cluster.leader()
    assert lead.client().get("t") == "with-ttl"
    assert lead.client().get("s") == "plain"
    assert lead.client().dbsize() == 2
    # The TTL went as the text said: nothing left to lose going to 1.
    lead.client().execute_command("BATON.DOWNGRADE", "CANCEL", "1.0.0")
    wait_machine(cluster, 2)
    assert lead.client().ttl("t") == -1
    m = as_dict(retry(lambda: cluster.leader().client().execute_command(
        "BATON.DOWNGRADE", "VALIDATE", "1.0.0")))
    assert (m["keys_lost"], m["loss"], m["loss_kinds"], m["valid"]) == \
        ("0", "none", "none", "yes"), m


def test_cancel_is_refused_while_a_member_is_silent(cluster):
    """docs/upgrading.md: cancel is refused once a member runs the target.
    A member that stopped answering may be running it already (restarted
    on a release that cannot even reach this leader): the leader cannot
    tell, so it refuses, retryably, until the member answers again."""
    lead = cluster.start(3, extra=["--as-release", "1.1.0"])
    wait_machine(cluster, 2)
    cluster.batonctl("downgrade", "enable", "1.0.0", node=lead)
    wait_machine(cluster, 1)
    lead = cluster.leader()
    silent = next(m for m in cluster.alive() if m is not lead)
    silent.kill9()
    # Long enough for two rounds of info requests to every member (one
    # per election timeout) to go unanswered.
    time.sleep(8 * ELECTION_TIMEOUT_MS / 1000)
    lead = cluster.leader()
    e = downgrade(lead, "CANCEL", "1.0.0")
    assert isinstance(e, redis.ResponseError), e
    assert str(e).startswith("TRYAGAIN"), e
    assert f"member {silent.id} has not answered" in str(e), e
    assert "1.0.0 already" in str(e), e
    st = as_dict(downgrade(lead, "STATUS"))
    assert st["target"] == "1.0.0", st
    # Back on the old release, it answers: cancel goes through.
    silent.start()
    d = Deadline(WAIT_S, "cancel to be accepted")
    while True:
        r = downgrade(cluster.leader(), "CANCEL", "1.0.0")
        if r == "OK":
            break
        assert isinstance(r, redis.ResponseError), r
        assert str(r).startswith(("TRYAGAIN", "NOTLEADER")), r
        if d.expired():
            d.fail(str(r))
        time.sleep(POLL_S * 4)
    wait_machine(cluster, 2)


def test_a_strict_release_leader_refuses_a_downgrade(cluster):
    """--strict-release makes the transport refuse peers of another
    release: a node restarted on the target could reach no one, so the
    downgrade could never finish."""
    lead = cluster.start(3, extra=["--as-release", "1.1.0",
                                   "--strict-release"])
    wait_machine(cluster, 2)
    e = downgrade(lead, "VALIDATE", "1.0.0")
    assert isinstance(e, redis.ResponseError), e
    assert "--strict-release" in str(e), e
    r = cluster.batonctl("downgrade", "enable", "1.0.0", "--force",
                         check=False, node=lead)
    assert r.returncode == 1 and "--strict-release" in r.stderr, r
    assert as_dict(downgrade(lead, "STATUS"))["downgrade"] == "none"
