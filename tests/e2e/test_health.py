"""batonctl health and batonctl status --watch against real clusters: one
exit status and one reason line for each way a cluster can be unfit to
serve (docs/operations.md, "Monitoring")."""

import json
import os
import signal
import subprocess
import time

import pytest
import redis

from conftest import Deadline, POLL_S, retry

WAIT_S = 20.0


def health(cluster, *args, node=None):
    # A stopped member costs the timeout on every run: keep it short.
    return cluster.batonctl("--timeout-ms", "1000", "health", *args,
                            node=node, check=False)


def wait_health(cluster, want_code, needle, *args, node=None):
    """Poll `batonctl health` until it exits want_code with `needle` in
    its output; return that run."""
    d = Deadline(WAIT_S, f"health to exit {want_code} with {needle!r}")
    r = None
    while not d.expired():
        r = health(cluster, *args, node=node)
        if r.returncode == want_code and needle in r.stdout:
            return r
        time.sleep(POLL_S * 2)
    d.fail(f"last run: exit {r.returncode}\n{r.stdout}{r.stderr}")


def test_healthy_cluster_exits_0_and_says_who_leads(cluster):
    lead = cluster.start(3)
    for asked in cluster.alive():
        r = wait_health(cluster, 0, "healthy:", node=asked)
        assert f"leader node {lead.id} at {lead.client_addr}" in r.stdout
        assert "3 members" in r.stdout, r.stdout
        doc = json.loads(health(cluster, "--json", node=asked).stdout)
        assert doc == {"healthy": True, "leader": lead.id, "members": 3,
                       "reasons": []}, doc


def test_member_down_then_lagging_then_no_leader(cluster):
    lead = cluster.start(3)
    f1, f2 = cluster.followers()
    # A follower that stops (SIGSTOP) does not answer and falls behind.
    os.kill(f1.proc.pid, signal.SIGSTOP)
    try:
        c = lead.client()
        for i in range(200):
            retry(lambda: c.set(f"k{i}", "v"))
        r = wait_health(cluster, 1, f"member {f1.id} lags by", "--max-lag",
                        "50", node=lead)
        assert r.stdout.startswith("unhealthy: 2 problems\n"), r.stdout
        assert f"member {f1.id} down: " in r.stdout, r.stdout
        lag = int(r.stdout.split(f"member {f1.id} lags by ")[1].split()[0])
        assert lag > 50, r.stdout
        doc = json.loads(health(cluster, "--json", "--max-lag=50",
                                node=f2).stdout)
        assert doc["healthy"] is False and doc["leader"] == lead.id, doc
        assert any(x.startswith(f"member {f1.id} down")
                   for x in doc["reasons"]), doc
        # status shows the member down but is not a health check: exit 0.
        s = cluster.batonctl("status", node=lead)
        assert "down" in s.stdout, s.stdout
    finally:
        os.kill(f1.proc.pid, signal.SIGCONT)
    wait_health(cluster, 0, "healthy:", node=lead)
    # Two of three gone: the survivor has no leader to name.
    f1.kill9()
    lead.kill9()
    r = wait_health(cluster, 1, "no leader", node=f2)
    assert f"member {f1.id} down" in r.stdout, r.stdout
    assert f"member {lead.id} down" in r.stdout, r.stdout


def test_a_node_that_has_not_joined_is_not_healthy(cluster):
    cluster.start(3)
    j = cluster.new_joiner()
    r = health(cluster, node=j)
    assert r.returncode == 1, r
    assert "no configuration" in r.stdout, r.stdout
    s = cluster.batonctl("status", node=j)
    assert "has no configuration" in s.stdout, s.stdout


def test_an_unreachable_node_and_bad_usage(cluster):
    cluster.start(3)
    n3 = cluster.node(3)
    n3.kill9()
    r = health(cluster, node=n3)
    assert r.returncode == 1 and f"node {n3.client_addr}" in r.stderr, r
    for bad in (["--max-lag", "lots"], ["--max-lag"], ["--frobnicate"]):
        r = health(cluster, *bad)
        assert r.returncode == 2, r
        assert "health:" in r.stderr, r.stderr


def test_status_watch_looks_again_until_count(cluster):
    cluster.start(3)
    r = cluster.batonctl("status", "--watch", "--interval-ms", "100",
                         "--count", "3")
    looks = [line for line in r.stdout.splitlines() if line.startswith("-- ")]
    assert len(looks) == 3, r.stdout
    assert r.stdout.count("ID  ") == 3, r.stdout
    assert "\033[" not in r.stdout  # not a terminal: no screen clearing
    r = cluster.batonctl("status", "--watch", "--count=2", "--json",
                         "--interval-ms=100")
    docs = [json.loads(line) for line in r.stdout.split("\n[")[0:1]]
    assert docs and len(r.stdout.strip().split("\n]\n")) == 2, r.stdout
    for bad in (["--count", "2"], ["--watch", "--interval-ms", "5"],
                ["--watch", "--count", "0"]):
        r = cluster.batonctl("status", *bad, check=False)
        assert r.returncode == 2, r


def _mount_tmpfs(path, size_mb):
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m",
                        "tmpfs", str(path)], capture_output=True, text=True,
                       timeout=10)
    return r.returncode == 0


def test_a_node_whose_storage_fails_stops_and_shows_down(cluster):
    # Node 3 keeps its data on a small file system that the test fills: its
    # log cannot start a new segment (64 MiB). A node whose storage failed
    # stops (fail-stop: it must not acknowledge what it could not write);
    # health names it down and its log and exit status say why.
    data3 = cluster.root / "node3"
    if os.geteuid() != 0 or not _mount_tmpfs(data3, 80):
        pytest.skip("needs root to mount a small tmpfs")
    try:
        lead = cluster.start(3)
        n3 = cluster.node(3)
        st = os.statvfs(data3)
        with open(data3 / "filler", "wb") as f:
            os.posix_fallocate(f.fileno(), 0,
                               max(st.f_bavail * st.f_frsize - 4096, 0))
        value = b"x" * (1 << 20)
        d = Deadline(60, "node 3 to stop on its storage failure")
        i = 0
        while n3.alive and not d.expired() and i < 200:
            try:
                cluster.leader().client().set(f"big{i % 8}", value)
            except (redis.ConnectionError, redis.TimeoutError,
                    redis.ResponseError):
                pass  # node 3 may have led and stopped: others take over
            i += 1
        assert not n3.alive, f"node 3 still runs after {i} writes of 1 MiB"
        assert n3.proc.wait(timeout=10) == 3  # not restarted
        assert "stopping: this node's storage failed" in n3.log_text()
        r = wait_health(cluster, 1, "member 3 down", node=cluster.node(1))
        assert "unhealthy: 1 problem\n" in r.stdout, r.stdout
    finally:
        cluster.stop_all()
        subprocess.run(["umount", "-l", str(data3)], timeout=10)
