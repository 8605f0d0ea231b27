"""Data that knows whose it is (issue 13, attack 5): a cluster is born with
a random UUID, every data directory records its node id, cluster name and
UUID, and a node refuses what is not its own:

- a member whose directory was wiped, restarted with its usual --bootstrap
  command line, refuses to found a second cluster (its peers hold the
  cluster's data), and once replaced the cluster keeps every acknowledged
  write through one more failure;
- --id or --cluster-id other than the directory's are refused at start;
- a --bootstrap list naming one id (or address) twice is refused;
- a removed member learns it (whether up or down when removed), says so
  and serves no more; its id cannot be added again.
"""

import re
import shutil
import subprocess
import time

import redis

from conftest import (BATOND, HOST, Node, as_map,
                      free_ports, require_binary, retry, wait_for,
                      wait_log)

UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-" \
          r"[0-9a-f]{12}"
EXIT_TIMEOUT_S = 20.0


def set_ok(node, key, value):
    assert retry(lambda: node.client().set(key, value),
                 what=f"SET {key}") is True


def wait_exit(node, timeout=EXIT_TIMEOUT_S):
    """The node exits by itself: its exit code."""
    try:
        code = node.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{node} did not exit within {timeout} s:\n"
                             f"{node.log_tail()}") from None
    node.exit_codes.append(code)
    return code



def cluster_uuid(node):
    """The node's cluster UUID once applied (BATON.NODE cluster_uuid)."""
    def known():
        try:
            u = node.info()["cluster_uuid"]
        except (redis.ConnectionError, redis.TimeoutError):
            return None
        return u if u != "-" else None
    return wait_for(f"{node} to know its cluster uuid", known)


def start_alone(cluster, node_id, args):
    """A Node of the cluster outside its founders (same common flags)."""
    cport, pport = free_ports(2)
    m = Node(cluster, node_id, cport, pport)
    cluster.nodes[node_id] = m
    return m.start(args, wait=False)


def test_every_node_records_one_cluster_uuid(cluster):
    cluster.start(3)
    uuids = {m.id: cluster_uuid(m) for m in cluster.alive()}
    assert len(set(uuids.values())) == 1, uuids
    uuid = uuids[1]
    assert re.fullmatch(UUID_RE, uuid), uuid
    info = cluster.node(2).client().info("identity")
    assert info["cluster_uuid"] == uuid and info["removed"] == "no"
    for m in cluster.alive():
        data = (m.data_dir / "identity").read_bytes()
        assert data[:8] == b"BATONIDN"
        assert bytes.fromhex(uuid.replace("-", "")) in data


def test_wiped_member_does_not_refound_and_no_write_is_lost(cluster):
    leader = cluster.start(3)
    written = {}
    for i in range(30):
        set_ok(leader, f"k{i}", f"v{i}")
        written[f"k{i}"] = f"v{i}"
    # Every node has recorded the uuid (a follower learns the entry's
    # commit with the leader's next heartbeat): the checks below compare.
    uuids = {m.id: cluster_uuid(m) for m in cluster.alive()}
    assert len(set(uuids.values())) == 1, uuids
    uuid = uuids[3]
    wiped = cluster.node(3)
    wiped.kill9()
    shutil.rmtree(wiped.data_dir)
    # Its usual command line (--bootstrap ...), on an empty directory.
    wiped.start(wait=False)
    assert wait_exit(wiped) == 3  # refused: needs an operator
    log = wiped.log_text()
    assert "refusing to found a new cluster" in log, wiped.log_tail()
    assert f"cluster uuid {uuid}" in log or "holds data" in log, log
    assert "--join" in log and "batonctl remove 3" in log
    # The survivors never heard of a second cluster: they still agree.
    for m in cluster.alive():
        assert m.info()["cluster_uuid"] == uuid
    # Replace it as the refusal says: a new id joins, the old one goes.
    leader = cluster.leader()
    joiner = cluster.new_joiner()
    cluster.batonctl("remove", 3, node=leader)
    cluster.add_and_promote(joiner)
    set_ok(cluster.leader(), "after-replacement", "yes")
    written["after-replacement"] = "yes"
    cluster.wait_applied(joiner, int(cluster.leader().info()["commit"]))
    # One more failure: the leader dies; the other two keep every write.
    old = cluster.leader()
    old.kill9()
    new = cluster.leader(exclude=(old,))
    for key, value in written.items():
        assert retry(lambda: new.client().get(key)) == value, key
    # The wiped node's old command line is still refused: its id is gone.
    wiped.start(wait=False)
    assert wait_exit(wiped) == 3  # refused: needs an operator
    assert "removed from the cluster" in wiped.log_tail(), wiped.log_tail()


def test_data_directory_refuses_another_node_id(cluster):
    cluster.start(3)
    node = cluster.node(1)
    uuid = cluster_uuid(node)
    assert node.terminate() == 0
    other = Node(cluster, 12, node.client_port, node.peer_port)
    other.data_dir = node.data_dir
    other.log_path = cluster.root / "node12-on-node1.log"
    other.start(["--join"], wait=False)
    assert wait_exit(other) == 3
    log = other.log_text()
    assert (f"data directory {node.data_dir} belongs to node 1 of cluster "
            f"'baton' (uuid {uuid}), not node 12: ") in log, log
    # Its own id still starts on it.
    node.start()


def test_data_directory_refuses_another_cluster_id(cluster):
    cluster.start(3)
    node = cluster.node(2)
    uuid = cluster_uuid(node)
    assert node.terminate() == 0
    node.start(node.args + ["--cluster-id", "other"], wait=False)
    assert wait_exit(node) == 3
    assert (f"belongs to node 2 of cluster 'baton' (uuid {uuid}), not to "
            f"cluster 'other': ") in node.log_text(), node.log_tail()


def test_bootstrap_naming_an_id_twice_is_refused(tmp_path):
    require_binary(BATOND)
    c1, p1, c2, p2 = free_ports(4)
    for boot, expect in [
            (f"1={HOST}:{p1}/{HOST}:{c1},1={HOST}:{p2}/{HOST}:{c2}",
             "--bootstrap lists node 1 twice"),
            (f"1={HOST}:{p1}/{HOST}:{c1},2={HOST}:{p1}/{HOST}:{c2}",
             "gives nodes 1 and 2 one peer address")]:
        r = subprocess.run(
            [str(BATOND), "--id", "1", "--listen", f"{HOST}:{c1}",
             "--peer-listen", f"{HOST}:{p1}", "--data",
             str(tmp_path / "d"), "--bootstrap", boot],
            capture_output=True, text=True, timeout=10)
        assert r.returncode == 2, r
        assert expect in r.stderr, r.stderr
        assert not (tmp_path / "d").exists(), "nothing may start"


def removed_error(node):
    try:
        node.client().get("k")
    except redis.ResponseError as e:
        return str(e)
    raise AssertionError(f"{node} still serves reads")


def assert_retired(cluster, node):
    """node says it was removed, serves no client and never stands."""
    info = wait_for(f"{node} to learn it was removed",
                    lambda: (lambda i: i if i["removed"].startswith("yes")
                             else None)(node.info()))
    assert re.search(r" error +node=\d+ removed: this node", node.log_text()), \
        node.log_tail()
    err = removed_error(node)
    assert err.startswith("this node was removed from the cluster"), err
    try:
        node.client().set("k", "v")
        raise AssertionError("a removed node took a write")
    except redis.ResponseError as e:
        assert "removed from the cluster" in str(e)
    # It does not stand for election: its term stays put.
    term = int(info["term"])
    time.sleep(1.5)  # three election timeouts of the tests' clusters
    after = node.info()
    assert int(after["term"]) == term, (info, after)
    assert after["role"] == "removed", after


def test_removed_member_stops_serving_and_cannot_come_back(cluster):
    leader = cluster.start(3)
    set_ok(leader, "before", "1")
    cluster_uuid(leader)
    victim = [m for m in cluster.alive() if m is not leader][0]
    cluster.batonctl("remove", victim.id, node=leader)
    assert_retired(cluster, victim)
    # The cluster goes on without it.
    set_ok(cluster.leader(), "after", "2")
    # Its id may not be added again.
    r = cluster.batonctl("add", victim.id, victim.peer_addr,
                         victim.client_addr, node=cluster.leader(),
                         check=False)
    assert r.returncode != 0
    assert f"node {victim.id} was removed from this cluster" in \
        r.stdout + r.stderr, r
    with_info = as_map(cluster.leader().client().execute_command(
        "BATON.NODE"))
    assert with_info["removed"] == "no"


def test_member_removed_while_down_learns_it_on_restart(cluster):
    leader = cluster.start(3)
    set_ok(leader, "before", "1")
    cluster_uuid(leader)
    victim = [m for m in cluster.alive() if m is not leader][0]
    victim.kill9()
    cluster.batonctl("remove", victim.id, node=cluster.leader())
    set_ok(cluster.leader(), "while-down", "2")
    victim.restart()
    assert_retired(cluster, victim)
    # Told by a member at the handshake: it names who said so.
    assert "says so" in victim.info()["removed"], victim.info()


def test_two_nodes_with_one_id_are_warned_of(cluster):
    # A second process started with a member's --id (a copied config
    # file) makes the two take turns on the leader's peer port, each
    # handshake closing the other's connection. The leader says so.
    lead = cluster.start(3)
    twin_of = cluster.followers()[0]
    cport, pport = free_ports(2)
    twin = Node(cluster, twin_of.id, cport, pport)
    twin.data_dir = cluster.root / "twin-data"
    twin.log_path = cluster.root / "twin.log"
    try:
        twin.start(["--join-seeds", lead.peer_addr], wait=False)
        wait_log(lead, f"do two nodes run with --id {twin_of.id}?",
                 timeout=20)
    finally:
        if twin.alive:
            twin.kill9()
