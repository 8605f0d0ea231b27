"""Standard Redis tools and batonctl against a running cluster."""

import json
import re
import shutil
import subprocess

import pytest

from conftest import HOST, retry

REDIS_CLI = shutil.which("redis-cli")
REDIS_BENCHMARK = shutil.which("redis-benchmark")


def run(cmd, timeout=60):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited {r.returncode}\n"
        f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r.stdout


@pytest.mark.skipif(REDIS_CLI is None, reason="redis-cli not installed")
def test_redis_cli_ping_set_get_on_every_node(shared_cluster):
    for m in shared_cluster.alive():
        cli = [REDIS_CLI, "-h", HOST, "-p", m.client_port]
        assert run(cli + ["ping"]).strip() == "PONG"
        key = f"cli-key-{m.id}"
        out = ""
        # A -TRYAGAIN is printed with exit 0 by redis-cli: retry on it.
        for _ in range(20):
            out = run(cli + ["set", key, f"cli value {m.id}"]).strip()
            if not out.startswith("TRYAGAIN"):
                break
        assert out == "OK", out
        for other in shared_cluster.alive():
            got = run([REDIS_CLI, "-h", HOST, "-p", other.client_port, "get",
                       key]).strip()
            assert got == f"cli value {m.id}", f"{other}: {got!r}"


@pytest.mark.skipif(REDIS_BENCHMARK is None,
                    reason="redis-benchmark not installed")
def test_redis_benchmark_short_run(shared_cluster):
    leader = shared_cluster.leader()
    follower = [m for m in shared_cluster.alive() if m is not leader][0]
    for node, n in ((leader, 2000), (follower, 1000)):
        out = run([REDIS_BENCHMARK, "-h", HOST, "-p", node.client_port, "-t",
                   "set,get", "-n", n, "-q"], timeout=120)
        rates = dict(re.findall(r"^(SET|GET): ([0-9.]+) requests per second",
                                out.replace("\r", "\n"), re.M))
        assert set(rates) == {"SET", "GET"}, out
        assert all(float(v) > 0 for v in rates.values()), out
        assert "error" not in out.lower(), out
    # The benchmark's keys are there.
    c = leader.client()
    assert retry(lambda: c.exists("key:__rand_int__")) == 1


def status_rows(stdout):
    """Rows of `batonctl status` as {id: columns}."""
    rows = {}
    for line in stdout.splitlines():
        cols = line.split()
        if cols and cols[0].isdigit():
            rows[int(cols[0])] = cols
    return rows


def test_batonctl_status_members_and_json_list_every_member(shared_cluster):
    leader = shared_cluster.leader()
    ids = set(shared_cluster.nodes)
    for asked in shared_cluster.alive():
        r = shared_cluster.batonctl("status", node=asked)
        rows = status_rows(r.stdout)
        assert set(rows) == ids, r.stdout
        header = r.stdout.splitlines()[0].split()
        assert header[:3] == ["ID", "ADDR", "ROLE"], header
        for m in shared_cluster.nodes.values():
            assert rows[m.id][1] == m.client_addr, r.stdout
        roles = {i: cols[2] for i, cols in rows.items()}
        assert roles[leader.id] == "leader", r.stdout
        assert sorted(roles.values()) == ["follower", "follower", "leader"]
        # The match column is the leader's view even when a follower was
        # asked, so every row has a lag.
        assert all(cols[-1].isdigit() for cols in rows.values()), r.stdout

        r = shared_cluster.batonctl("status", "--json", node=asked)
        doc = json.loads(r.stdout)
        assert {o["id"] for o in doc} == ids
        for o in doc:
            for field in ("role", "term", "commit", "applied", "match",
                          "release", "proto_min", "proto_max",
                          "machine_max", "lag", "client_addr", "peer_addr"):
                assert field in o, (field, o)
            assert o["error"] is None, o
            assert isinstance(o["term"], int) and o["term"] >= 1, o
            assert isinstance(o["lag"], int), o
            assert o["proto_min"] <= o["proto_max"], o
        by_id = {o["id"]: o for o in doc}
        assert by_id[leader.id]["role"] == "leader"

        r = shared_cluster.batonctl("members", node=asked)
        rows = status_rows(r.stdout)
        assert set(rows) == ids, r.stdout
        for m in shared_cluster.nodes.values():
            assert rows[m.id][1] == "voter", r.stdout
            assert rows[m.id][2] == m.peer_addr, r.stdout
            assert rows[m.id][3] == m.client_addr, r.stdout


def test_batonctl_errors_and_usage(shared_cluster):
    node = shared_cluster.nodes[1]
    r = shared_cluster.batonctl("promote", "notanumber", node=node,
                                check=False)
    assert r.returncode == 2, r
    r = shared_cluster.batonctl("frobnicate", node=node, check=False)
    assert r.returncode == 2, r
    # Promoting a node that is not a member is an error from the leader,
    # named in the message.
    r = shared_cluster.batonctl("promote", 77, node=node, check=False)
    assert r.returncode == 1, r
    assert "node 127.0.0.1:" in r.stderr, r.stderr
