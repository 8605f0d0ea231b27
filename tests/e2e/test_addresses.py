"""Addresses as users write them (docs/batond.md "Addresses"): IPv6 numbers
in brackets and host names, for listening, peers, joins and batonctl, with
real processes. IPv6 is printed back in brackets everywhere."""

import re
import socket
import subprocess
import time

import pytest
import redis

import conftest
from conftest import BATOND, BATONCTL, Node, Deadline, POLL_S


def have_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


needs_ipv6 = pytest.mark.skipif(not have_ipv6_loopback(),
                                reason="this machine has no ::1")


def free_ports_on(family, host, n):
    """n distinct free TCP ports on host (as conftest.free_ports)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(family, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class AddrNode(Node):
    """A node whose addresses are written `written` (e.g. "[::1]" or
    "localhost") and reached by clients at `reach` (e.g. "::1")."""

    def __init__(self, cluster, node_id, client_port, peer_port, written,
                 reach):
        super().__init__(cluster, node_id, client_port, peer_port)
        self.written = written
        self.reach = reach

    client_addr = property(lambda self: f"{self.written}:{self.client_port}")
    peer_addr = property(lambda self: f"{self.written}:{self.peer_port}")

    def client(self, timeout=5.0, **kw):
        kw.setdefault("password", self.cluster.password)
        return redis.Redis(host=self.reach, port=self.client_port,
                           socket_timeout=timeout,
                           socket_connect_timeout=timeout,
                           decode_responses=True, **kw)


def start_cluster(cluster, written, reach, family, n=3, extra=()):
    """Bootstrap n nodes whose every address is written `written`."""
    conftest.require_binary(BATOND)
    cluster.common_args = ["--election-timeout-ms",
                           str(conftest.ELECTION_TIMEOUT_MS), "--heartbeat-ms",
                           str(conftest.HEARTBEAT_MS)] + list(extra)
    ports = free_ports_on(family, reach, 2 * n)
    for i in range(n):
        cluster.nodes[i + 1] = AddrNode(cluster, i + 1, ports[2 * i],
                                        ports[2 * i + 1], written, reach)
    boot = ",".join(f"{m.id}={m.peer_addr}/{m.client_addr}"
                    for m in cluster.nodes.values())
    for m in cluster.nodes.values():
        m.start(["--bootstrap", boot], wait=False)
    for m in cluster.nodes.values():
        m.wait_ready()
    return cluster.leader()


def read_from_follower(cluster):
    """GET through a node that is not the leader (a linearizable read is
    served through the leader, so it shows the peers reach each other)."""
    lead = cluster.leader()
    conftest.retry(lambda: lead.client().set("k", "v1"), what="SET")
    other = next(m for m in cluster.nodes.values() if m is not lead)
    got = conftest.retry(lambda: other.client().get("k"),
                         what=f"GET on {other}")
    assert got == "v1"


def batonctl(host, node, *args):
    cmd = [str(BATONCTL), "-h", host, "-p", str(node.client_port)]
    if node.cluster.password:
        cmd += ["-a", node.cluster.password]
    return subprocess.run(cmd + list(args), capture_output=True, text=True,
                          timeout=30)


@needs_ipv6
def test_an_ipv6_cluster(cluster):
    """Peers and clients on [::1]: writes go through, every address is
    shown in brackets (BATON.NODE, BATON.MEMBERS, CLIENT LIST, the log,
    batonctl)."""
    start_cluster(cluster, "[::1]", "::1", socket.AF_INET6)
    read_from_follower(cluster)
    m = cluster.node(2)
    me = m.info()
    assert me["peer_addr"] == f"[::1]:{m.peer_port}"
    assert me["client_addr"] == f"[::1]:{m.client_port}"
    members = {int(x["id"]): x for x in m.members()}
    assert sorted(members) == [1, 2, 3]
    for node_id, x in members.items():
        n = cluster.node(node_id)
        assert x["peer_addr"] == f"[::1]:{n.peer_port}", x
        assert x["client_addr"] == f"[::1]:{n.client_port}", x
    listed = m.client().execute_command("CLIENT", "LIST")
    assert re.search(r"addr=\[::1\]:\d+ ", listed), listed
    assert f"listening for clients on [::1]:{m.client_port}" in m.log_text()
    assert f"listening for peers on [::1]:{m.peer_port}" in m.log_text()
    assert int(m.client().info("server")["tcp_port"]) == m.client_port
    for host in ("::1", "[::1]"):
        r = batonctl(host, m, "status")
        assert r.returncode == 0, r.stderr
        assert f"[::1]:{m.client_port}" in r.stdout, r.stdout


def test_a_cluster_of_host_names(cluster):
    """Every address written localhost:PORT (peers, bootstrap, clients), and
    a joiner that finds the cluster through --join-seeds localhost:PORT."""
    start_cluster(cluster, "localhost", "127.0.0.1", socket.AF_INET,
                  extra=["--accept-joins"])
    read_from_follower(cluster)
    members = {int(x["id"]): x for x in cluster.node(1).members()}
    assert members[3]["peer_addr"] == f"localhost:{cluster.node(3).peer_port}"
    cport, pport = free_ports_on(socket.AF_INET, "127.0.0.1", 2)
    j = AddrNode(cluster, 4, cport, pport, "localhost", "127.0.0.1")
    cluster.nodes[4] = j
    seeds = ",".join(cluster.node(i).peer_addr for i in (1, 2, 3))
    j.start(["--join-seeds", seeds])
    d = Deadline(conftest.LEADER_TIMEOUT_S * 2, "node 4 to become a member")
    while not d.expired():
        got = {int(x["id"]): x for x in cluster.leader().members()}
        if 4 in got:
            assert got[4]["peer_addr"] == f"localhost:{pport}", got[4]
            break
        time.sleep(POLL_S)
    else:
        d.fail(j.log_tail())
    r = batonctl("localhost", cluster.node(1), "status")
    assert r.returncode == 0, r.stderr


def test_a_listen_name_that_does_not_resolve_refuses_start(tmp_path):
    """.invalid never resolves (RFC 6761): batond says so and exits."""
    conftest.require_binary(BATOND)
    port = conftest.free_ports(1)[0]
    for flag in ("--listen", "--peer-listen"):
        addrs = {"--listen": f"127.0.0.1:{port}",
                 "--peer-listen": f"127.0.0.1:{port + 1}"}
        addrs[flag] = f"nosuch.invalid:{port}"
        data = tmp_path / flag.strip("-")
        r = subprocess.run(
            [str(BATOND), "--id", "1", "--data", str(data), "--bootstrap",
             f"1=127.0.0.1:{port + 1}/127.0.0.1:{port}"]
            + [x for kv in addrs.items() for x in kv],
            capture_output=True, text=True, timeout=30)
        assert r.returncode != 0, r.stderr
        assert "cannot resolve 'nosuch.invalid'" in r.stderr, r.stderr


@pytest.mark.parametrize("bad,says", [
    ("[::1:7001", "no ']'"),
    ("::1:7001", "without brackets"),
    ("127.0.0.1:70000", "from 1 to 65535"),
])
def test_a_malformed_address_is_refused_with_its_reason(tmp_path, bad, says):
    conftest.require_binary(BATOND)
    port = conftest.free_ports(1)[0]
    r = subprocess.run(
        [str(BATOND), "--id", "1", "--data", str(tmp_path / "d"),
         "--listen", bad, "--peer-listen", f"127.0.0.1:{port}",
         "--join-seeds", f"127.0.0.1:{port}"],
        capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert says in r.stderr, r.stderr


def test_a_peer_name_that_does_not_resolve_is_logged_and_retried(cluster):
    """Node 1 is told node 3 lives at a name that does not resolve: it
    warns once (rate-limited, not at every redial) and keeps retrying,
    while the other two nodes still make a cluster with it."""
    conftest.require_binary(BATOND)
    cluster.common_args = ["--election-timeout-ms",
                           str(conftest.ELECTION_TIMEOUT_MS), "--heartbeat-ms",
                           str(conftest.HEARTBEAT_MS)]
    ports = conftest.free_ports(6)
    for i in range(3):
        cluster.nodes[i + 1] = Node(cluster, i + 1, ports[2 * i],
                                    ports[2 * i + 1])
    good = ",".join(f"{m.id}={m.peer_addr}/{m.client_addr}"
                    for m in cluster.nodes.values())
    n3 = cluster.node(3)
    bad = good.replace(f"3={n3.peer_addr}",
                       f"3=nosuch.invalid:{n3.peer_port}")
    cluster.node(1).start(["--bootstrap", bad, "--log-level", "debug"],
                          wait=False)
    cluster.node(2).start(["--bootstrap", good], wait=False)
    for m in cluster.nodes.values():
        if m.id != 3:
            m.wait_ready()
    cluster.leader()
    warning = (f"cannot resolve the address of node 3 "
               f"(nosuch.invalid:{n3.peer_port})")
    conftest.wait_log(cluster.node(1), warning)
    # Redials go on with back-off (50 ms, doubling up to 2 s), each logged
    # at debug level; a second warning would come only after 30 s.
    dials = f"dial node 3 at nosuch.invalid:{n3.peer_port}: cannot resolve"
    d = Deadline(20, "three redials of node 3")
    while cluster.node(1).log_text().count(dials) < 3:
        if d.expired():
            d.fail(cluster.node(1).log_tail())
        time.sleep(POLL_S)
    assert cluster.node(1).log_text().count(warning) == 1


RELAY = conftest.build_dir() / "baton-relay"


@needs_ipv6
def test_the_relay_on_ipv6_and_a_node_that_names_it(cluster, tmp_path):
    """baton-relay listens on [::1]; a node registers with --relay
    [::1]:PORT, and the relay logs where it came from in brackets. A relay
    --listen name that does not resolve refuses the start."""
    conftest.require_binary(RELAY)
    port = free_ports_on(socket.AF_INET6, "::1", 1)[0]
    r = subprocess.run([str(RELAY), "--listen", f"nosuch.invalid:{port}",
                        "--data", str(tmp_path)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "cannot resolve 'nosuch.invalid'" in r.stderr, r.stderr
    log_path = tmp_path / "relay.log"
    with open(log_path, "ab") as log:
        relay = subprocess.Popen(
            [str(RELAY), "--listen", f"[::1]:{port}", "--data",
             str(tmp_path)], stdout=log, stderr=log,
            preexec_fn=conftest._die_with_parent)
    try:
        cluster.start(1, extra=["--relay", f"[::1]:{port}"])
        d = Deadline(20, "the node to register at the relay")
        while not re.search(r"join baton/1 .* from \[::1\]:\d+",
                            log_path.read_text(errors="replace")):
            if d.expired():
                d.fail(log_path.read_text(errors="replace"))
            time.sleep(POLL_S)
        assert f"listening on [::1]:{port}" in log_path.read_text()
    finally:
        relay.kill()
        relay.wait(timeout=10)
