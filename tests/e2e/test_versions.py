"""Releases as operators see them: --version and --as-release, INFO
`# Versions`, BATON.NODE / BATON.MEMBERS, `batonctl status`, strict
release, and active join (--join-seeds) across releases.

Mixed clusters are built from this one binary with --as-release (the
releases table: 1.0.0 {protocol 1, machine 1}, 1.1.0 {1-2, 2}, 1.2.0
{2-3, 2}, 1.3.0 {2-3, 2}, 2.0.0 {4, 3}, and the newer ones). A node is
upgraded the way an operator does it: SIGTERM, then a restart on the same
data at the newer release. Where a test means "this binary's own release"
it reads the table (conftest.release_table(), release_profiles()), so a
new release does not change the tests. 2.0.0 speaks no peer protocol of
1.x: a 2.0.0 node and a 1.x node refuse each other at the handshake, and
the mixed clusters here are of releases that can talk.
"""

import json
import re
import subprocess
import time

import pytest
import redis

from conftest import (BATOND, Node, free_ports, release_profiles,
                      release_table, require_binary, retry, rolling_target,
                      wait_through_errors)
from conftest import info_section as e2e_info_section

UPGRADE_TIMEOUT_S = 30.0
RELEASES = release_table()
NEWEST = RELEASES[-1]  # the binary's own release
NEWEST_MIN, NEWEST_MAX, NEWEST_MACHINE = release_profiles()[NEWEST]
# The newest release older ones can be rolled to (1.3.0 while the binary
# is 2.0.0): mixed clusters end there.
ROLLED = rolling_target()
# A joiner's back-off grows to 15-30 s between attempts.
JOIN_TIMEOUT_S = 75.0


def batond(*args):
    require_binary(BATOND)
    return subprocess.run([str(BATOND), *args], capture_output=True,
                          text=True, timeout=10)


def info_section(node, section="Versions"):
    """One INFO section as a dict of strings."""
    out = e2e_info_section(node, section)
    assert out, f"no section {section} in INFO"
    return out


def wait_for(what, fn, timeout=UPGRADE_TIMEOUT_S):
    """Poll fn() until it returns a true value; return it."""
    return wait_through_errors(what, fn, timeout)


def restart_at(node, release):
    """Upgrade (or change) one node: SIGTERM, restart on its data."""
    assert node.terminate() == 0
    args = [a for a in node.args]
    if "--as-release" in args:
        i = args.index("--as-release")
        del args[i:i + 2]
    if release is not None:
        args += ["--as-release", release]
    node.start(args)


def add_node(cluster, args):
    """A new node (not a member) started with `args`; not waited for."""
    node_id = max(cluster.nodes) + 1
    cport, pport = free_ports(2)
    m = Node(cluster, node_id, cport, pport)
    cluster.nodes[node_id] = m
    return m.start(args)


def seeds(cluster, among):
    return ",".join(cluster.node(i).peer_addr for i in among)


def members_by_id(node):
    return {int(m["id"]): m for m in node.members()}


def is_voter(cluster, node_id):
    lead = cluster.leader()
    m = members_by_id(lead).get(node_id)
    return m is not None and m["role"] == "voter"


def machine_version(node):
    return int(info_section(node)["machine_version"])


def wait_machine_version(cluster, v, nodes=None):
    for m in nodes or cluster.alive():
        wait_for(f"{m} at machine version {v}",
                 lambda m=m: machine_version(m) == v)


# ---- the binary ---------------------------------------------------------------


def test_version_prints_release_profile_and_emulated_releases():
    r = batond("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"batond {NEWEST}\n"), r.stdout
    assert (f"peer protocol {NEWEST_MIN}-{NEWEST_MAX}, machine_max "
            f"{NEWEST_MACHINE}") in r.stdout, r.stdout
    older = RELEASES[:-1]
    assert ("can emulate (--as-release): " + ", ".join(older[:-1])
            + f" and {older[-1]}") in r.stdout, r.stdout
    r = batond("--as-release", "1.1.0", "--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"batond 1.1.0 (emulated by batond {NEWEST})")
    assert "peer protocol 1-2, machine_max 2" in r.stdout
    r = batond("--version", "--as-release", "1.0.0")
    assert "batond 1.0.0" in r.stdout and "peer protocol 1-1" in r.stdout


def test_unknown_release_and_bad_flags_are_refused():
    r = batond("--as-release", "9.9.9", "--id", "1")
    assert r.returncode == 2
    assert "does not contain release '9.9.9'" in r.stderr
    assert (", ".join(RELEASES[:-1]) + f" and {NEWEST}") in r.stderr
    r = batond("--as-release", "1.x", "--version")
    assert r.returncode == 2 and "'1.x'" in r.stderr
    r = batond("--machine-upgrade", "most", "--id", "1")
    assert r.returncode == 2 and "all, quorum or manual" in r.stderr
    r = batond("--join-seeds", "nowhere", "--id", "1")
    assert r.returncode == 2 and "HOST:PORT" in r.stderr


# ---- what operators see ---------------------------------------------------------


def test_versions_of_a_1_0_0_cluster(cluster):
    lead = cluster.start(3, extra=["--as-release", "1.0.0"])
    for m in cluster.alive():
        v = info_section(m)
        assert v["release"] == "1.0.0"
        assert v["peer_protocol"] == "1-1"
        assert v["machine_max"] == "1"
        assert v["machine_version"] == "1"
        assert v["machine_upgrade"] == "all"
        assert v["upgrade_waits_for"] == ""
        assert v["needs_upgrade"] == "no"
        n = m.info()
        assert (n["release"], n["proto_min"], n["proto_max"],
                n["machine_max"], n["machine_version"],
                n["needs_upgrade"]) == ("1.0.0", "1", "1", "1", "1", "no")
    # The leader learns every member's versions (info replies) and writes
    # them to the log's table.
    rows = wait_for("every member's versions known to the leader", lambda: (
        lambda ms: ms if all(x["versions"] == "live"
                             for x in ms.values()) else None)(
            members_by_id(lead)))
    assert sorted(rows) == [1, 2, 3]
    for row in rows.values():
        assert (row["release"], row["proto_min"], row["proto_max"],
                row["machine_max"]) == ("1.0.0", "1", "1", "1")
    follower = next(m for m in cluster.alive() if m is not lead)
    rows = wait_for("the version table in a follower's log", lambda: (
        lambda ms: ms if all(x["versions"] == "log"
                             for x in ms.values()) else None)(
            members_by_id(follower)))
    assert all(r["release"] == "1.0.0" for r in rows.values())


def test_versions_of_a_newest_release_cluster_and_batonctl(cluster):
    cluster.start(3, extra=["--machine-upgrade", "quorum"])
    # Every member implements the newest machine version: it is raised at
    # once.
    wait_machine_version(cluster, NEWEST_MACHINE)
    for m in cluster.alive():
        v = info_section(m)
        assert (v["release"], v["peer_protocol"], v["machine_max"],
                v["machine_upgrade"], v["upgrade_waits_for"],
                v["needs_upgrade"]) == (NEWEST, f"{NEWEST_MIN}-{NEWEST_MAX}",
                                        str(NEWEST_MACHINE), "quorum", "",
                                        "no")
    rows = json.loads(cluster.batonctl("status", "--json").stdout)
    assert len(rows) == 3
    for r in rows:
        assert r["release"] == NEWEST
        assert (r["proto_min"], r["proto_max"], r["machine_max"]) == \
            (NEWEST_MIN, NEWEST_MAX, NEWEST_MACHINE)
        assert r["machine_version"] == NEWEST_MACHINE
        assert r["machine_upgrade"] == "quorum"
        assert r["upgrade_waits_for"] == ""
        assert r["needs_upgrade"] == "no"
    text = cluster.batonctl("status").stdout
    assert "MACHINE" in text
    assert re.search(rf"machine version: {NEWEST_MACHINE} \(upgrade "
                     r"strategy quorum\); an upgrade waits for: nothing",
                     text), text


def test_a_fresh_cluster_of_the_newest_release_has_hashes(cluster):
    """Release 2.0.0 (peer protocol 4, machine version 3) and later: a
    fresh cluster of the binary's own release says so in INFO, and the
    commands of machine version 3 (hashes, TYPE) work."""
    assert release_profiles()["2.0.0"] == (4, 4, 3)
    assert NEWEST_MACHINE >= 3
    lead = cluster.start(3)
    wait_machine_version(cluster, NEWEST_MACHINE)
    for m in cluster.alive():
        v = info_section(m)
        assert (v["release"], v["peer_protocol"], v["machine_version"]) == \
            (NEWEST, f"{NEWEST_MIN}-{NEWEST_MAX}", str(NEWEST_MACHINE)), v
    c = lead.client()
    assert c.hset("h", mapping={"f1": "v1", "f2": "v2"}) == 2
    assert c.hget("h", "f1") == "v1"
    assert c.hgetall("h") == {"f1": "v1", "f2": "v2"}
    assert c.type("h") == "hash"
    assert c.set("s", "x") is True
    assert c.type("s") == "string"
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        c.hget("s", "f1")
    # A follower serves it too (forwarded over protocol 4, read back).
    f = next(m for m in cluster.alive() if m is not lead)
    fc = f.client()
    assert fc.hset("h", "f3", "v3") == 1
    retry(lambda: lead.client().hget("h", "f3") == "v3" or None)
    assert lead.client().hlen("h") == 3


def test_2_0_0_and_1_x_nodes_refuse_each_other(cluster):
    """A 2.0.0 node and a 1.x node (1.3.0, emulated) named in one
    --bootstrap never form a cluster: each refuses the other at the
    handshake, both say why and where to go (the relay), neither exits."""
    require_binary(BATOND)
    old = ROLLED
    lo, hi, _ = release_profiles()[old]
    ports = free_ports(4)
    a = Node(cluster, 1, ports[0], ports[1])
    b = Node(cluster, 2, ports[2], ports[3])
    cluster.nodes[1], cluster.nodes[2] = a, b
    boot = f"1={a.peer_addr}/{a.client_addr},2={b.peer_addr}/{b.client_addr}"
    a.start(["--bootstrap", boot], wait=False)
    b.start(["--bootstrap", boot, "--as-release", old], wait=False)
    new_says = (f"no common peer protocol (ours {NEWEST_MIN}-{NEWEST_MAX}, "
                f"theirs {lo}-{hi}): upgrade through the relay, "
                f"docs/relay.md")
    old_says = (f"no common peer protocol (ours {lo}-{hi}, theirs "
                f"{NEWEST_MIN}-{NEWEST_MAX}): upgrade through the relay, "
                f"docs/relay.md")
    wait_for("node 1 (2.0.0) to refuse node 2 and say why", lambda:
             f"refused a peer connection from node 2: {new_says}"
             in a.log_text())
    wait_for("node 2 (1.x) to refuse node 1 and say why", lambda:
             f"refused a peer connection from node 1: {old_says}"
             in b.log_text())
    # Each dialler reads the other's refusal, and says it in its words.
    wait_for("node 1 to log node 2's refusal", lambda:
             f"node 2 refused our connection: {old_says}" in a.log_text()
             and f"cannot connect to node 2: {new_says}" in a.log_text())
    assert a.alive and b.alive
    for m in (a, b):
        assert m.info()["role"] != "leader"
        assert info_section(m)["release"] in (NEWEST, old)


def test_mixed_cluster_shows_what_the_upgrade_waits_for(cluster):
    cluster.start(3, extra=["--as-release", "1.0.0"])
    n1, n2, n3 = (cluster.node(i) for i in (1, 2, 3))
    restart_at(n1, "1.1.0")
    restart_at(n2, "1.1.0")
    # Leadership settles on a 1.1.0 node (rule 2 hands it over): while the
    # hand-over runs, node 1 knows no leader and names nothing.
    wait_for("a 1.1.0 node to lead", lambda: info_section(
        cluster.leader())["release"] == "1.1.0")
    # Node 1 (1.1.0) could run machine version 2; node 3 (1.0.0) keeps
    # the cluster at 1, and says so wherever node 1 sits.
    wait_for("node 1 to name node 3 as what the upgrade waits for",
             lambda: info_section(n1)["upgrade_waits_for"]
             == "node 3: machine_max 1")
    assert machine_version(n1) == 1
    rows = {r["id"]: r for r in json.loads(
        cluster.batonctl("status", "--json", node=n1).stdout)}
    assert rows[3]["release"] == "1.0.0" and rows[3]["machine_max"] == 1
    assert rows[1]["release"] == "1.1.0" and rows[1]["machine_max"] == 2
    assert rows[1]["upgrade_waits_for"] == "node 3: machine_max 1"
    assert all(r["machine_version"] == 1 for r in rows.values())
    # The last one upgraded: the version rises on every node.
    restart_at(n3, "1.1.0")
    wait_machine_version(cluster, 2)
    wait_for("nothing left to wait for",
             lambda: info_section(n1)["upgrade_waits_for"] == "")


# ---- strict release ---------------------------------------------------------------


def start_at(cluster, release, extra=()):
    """3 nodes founded at `release`, with --as-release in each node's own
    args so that restart_at() can change it."""
    lead = cluster.start(3, extra=["--as-release", release] + list(extra))
    i = cluster.common_args.index("--as-release")
    del cluster.common_args[i:i + 2]
    for m in cluster.nodes.values():
        m.args += ["--as-release", release]
    return lead


def test_strict_release_refuses_a_mixed_member(cluster):
    # Of releases that can talk: the strict refusal, not the protocol's.
    lead = start_at(cluster, ROLLED, extra=["--strict-release"])
    assert info_section(lead)["strict_release"] == "yes"
    n3 = cluster.node(3)
    if n3 is lead:
        cluster.batonctl("transfer", node=lead)
        lead = cluster.leader(exclude=[n3])
        wait_for("node 3 to follow", lambda: n3.info()["role"] != "leader")
    restart_at(n3, "1.1.0")
    lead = cluster.leader(exclude=[n3])
    c = lead.client()
    retry(lambda: c.set("after", "strict"))
    applied = int(lead.info()["applied"])
    wait_for("node 3 to log the strict refusal",
             lambda: "strict release" in n3.log_text()
             and "1.1.0" in n3.log_text())
    assert ROLLED in n3.log_text()
    time.sleep(1.0)
    assert int(n3.info()["applied"]) < applied, (
        "a member of another release took entries under strict release")
    # A joiner of another release reads the strict mode in the handshake
    # and does not ask.
    j = add_node(cluster, ["--as-release", "1.1.0", "--join-seeds",
                           seeds(cluster, [1, 2])])
    wait_for(f"{j} to log why it may not join", lambda: re.search(
        r"join: not asking to join: .*strict.*1\.1\.0", j.log_text()))
    assert j.id not in members_by_id(cluster.leader(exclude=[n3]))


# ---- a member behind the effective version ---------------------------------------------


def test_quorum_upgrade_leaves_a_member_needing_an_upgrade(cluster):
    # Plain Raft elections: under the version-aware policy the 1.0.0 node
    # would hold on the release floor (rule 1) before it meets machine
    # version 2 (test_upgrade_stages covers that).
    cluster.start(3, extra=["--as-release", "1.0.0", "--machine-upgrade",
                            "quorum", "--election-policy", "any"])
    n1, n2, n3 = (cluster.node(i) for i in (1, 2, 3))
    restart_at(n1, "1.1.0")
    restart_at(n2, "1.1.0")
    # A leader never raises above its own machine_max: let node 1 lead.
    lead = cluster.leader()
    if lead is not n1:
        cluster.batonctl("transfer", 1, node=lead)
    wait_for("node 1 to lead", lambda: n1.info()["role"] == "leader")
    # A quorum (nodes 1 and 2) implements machine version 2: raised, and
    # node 3 (1.0.0) stops applying and says what to do.
    wait_machine_version(cluster, 2, nodes=[n1, n2])
    wait_for("node 3 to need an upgrade", lambda: info_section(n3)[
        "needs_upgrade"] == "yes (machine version 2)")
    assert n3.info()["needs_upgrade"] == "yes (machine version 2)"
    wait_for("node 3 to log what to do", lambda: re.search(
        r"error .*needs-upgrade: the effective machine version becomes 2 "
        r".*release 1\.0\.0 implements machine versions up to 1; restart",
        n3.log_text()))
    rows = {r["id"]: r for r in json.loads(
        cluster.batonctl("status", "--json", node=n1).stdout)}
    assert rows[3]["role"] == "needs-upgrade"
    assert rows[3]["needs_upgrade"] == "yes (machine version 2)"
    text = cluster.batonctl("status", node=n1).stdout
    assert "node 3 (" in text and "needs an upgrade" in text, text
    r = cluster.batonctl("health", node=n1, check=False)
    assert r.returncode == 1, r
    assert "needs-upgrade: member 3 stopped at index " in r.stdout, r.stdout
    # Restarted at a release that implements it: it applies again.
    restart_at(n3, "1.1.0")
    wait_for("node 3 to apply again", lambda: info_section(n3)[
        "needs_upgrade"] == "no")
    wait_machine_version(cluster, 2)
    c = cluster.leader().client()
    retry(lambda: c.set("after", "upgrade"))
    commit = int(cluster.leader().info()["commit"])
    cluster.wait_applied(n3, commit)


# ---- active join -------------------------------------------------------------------


def test_a_cluster_without_accept_joins_refuses_a_joiner(cluster):
    """The joiner may join by the versions, so it asks; the leader refuses
    (its members were not started with --accept-joins) and says why, and
    the joiner logs the leader's reason and keeps trying."""
    cluster.start(3)
    j = add_node(cluster, ["--join-seeds", seeds(cluster, [1, 2, 3])])
    wait_for(f"{j} to log the leader's refusal", lambda: re.search(
        r"does not accept joins", j.log_text()))
    assert "trying again in" in j.log_text()
    lead = cluster.leader()
    wait_for("the leader to log the refusal", lambda: re.search(
        rf"join: refused node {j.id} .*does not accept joins",
        lead.log_text()))
    assert j.id not in members_by_id(lead)


def test_1_0_0_joiner_joins_at_machine_1_and_is_refused_at_2(cluster):
    cluster.start(3, extra=["--as-release", "1.0.0", "--accept-joins"])
    restart_at(cluster.node(1), "1.1.0")
    cluster.leader()
    # Effective machine version 1 and release floor 1.0.0 (a 1.0.0 node
    # leads: rule 2): a 1.0.0 node may join, and does so by itself.
    assert info_section(cluster.leader())["release_floor"] == "1.0.0"
    j = add_node(cluster, ["--as-release", "1.0.0", "--join-seeds",
                           seeds(cluster, [1, 2, 3])])
    wait_for(f"{j} to join as a voter", lambda: is_voter(cluster, j.id),
             timeout=JOIN_TIMEOUT_S)
    wait_for("the joiner to log it", lambda: "join: " in j.log_text()
             and "voter" in j.log_text())
    c = cluster.leader().client()
    retry(lambda: c.set("k", "v"))
    wait_for(f"{j} to hold the write", lambda: int(j.info()["applied"])
             >= int(cluster.leader().info()["commit"]))
    # It holds the cluster at machine version 1: remove it, upgrade
    # nodes 2 and 3, and the version rises.
    assert j.terminate() == 0
    cluster.batonctl("remove", j.id, node=cluster.leader())
    restart_at(cluster.node(2), "1.1.0")
    restart_at(cluster.node(3), "1.1.0")
    wait_machine_version(cluster, 2)
    # Now a 1.0.0 node cannot join (below the floor, and machine version
    # 2): it reads why and keeps waiting.
    late = add_node(cluster, ["--as-release", "1.0.0", "--join-seeds",
                              seeds(cluster, [1, 2, 3])])
    wait_for(f"{late} to log why it may not join", lambda: re.search(
        r"join: not asking to join: .*(release floor|machine)",
        late.log_text()))
    text = late.log_text()
    assert "trying again in" in text
    assert "1.0.0" in text
    time.sleep(2.0)
    assert late.id not in members_by_id(cluster.leader())


def test_1_2_0_joiner_waits_for_a_1_0_0_cluster_then_joins(cluster):
    cluster.start(3, extra=["--as-release", "1.0.0", "--accept-joins"])
    j = add_node(cluster, ["--as-release", "1.2.0", "--join-seeds",
                           seeds(cluster, [1, 2, 3])])
    # No protocol in common (1 vs 2-3): it waits and says why.
    wait_for(f"{j} to log why it waits", lambda: re.search(
        r"join: not asking to join: .*protocol", j.log_text()))
    assert "trying again in" in j.log_text()
    assert j.id not in members_by_id(cluster.leader())
    # The members are upgraded to 1.1.0 (protocol 1-2): it joins by
    # itself, speaking protocol 2.
    for i in (1, 2, 3):
        restart_at(cluster.node(i), "1.1.0")
        cluster.leader()
    wait_for(f"{j} to join as a voter", lambda: is_voter(cluster, j.id),
             timeout=JOIN_TIMEOUT_S)
    assert info_section(j)["release"] == "1.2.0"
