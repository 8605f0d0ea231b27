"""batond --metrics: Prometheus /metrics and HTTP /health and /ready on a
real 3-node cluster (docs/metrics.md), the endpoint's refusals of bad
requests, and the Grafana dashboard's metric names
(docs/grafana-baton.json)."""
import http.client
import json
import math
import re
import socket
import time

import pytest
import redis

from conftest import (BATOND, HOST, LEADER_TIMEOUT_S, POLL_S, REPO, Cluster,
                      Deadline, Node, free_ports, require_binary)

HTTP_TIMEOUT_S = 5.0
# The node gives a client this long to send its request (http.c).
SLOW_CLIENT_DEADLINE_S = 5.0

SAMPLE = re.compile(
    r'^([a-zA-Z_:][a-zA-Z0-9_:]*)'
    r'(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")'
    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*)?\})?'
    r' (-?[0-9.eE+-]+|\+Inf|-Inf|NaN)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def start_with_metrics(root, n=3, default_timings=False, extra=()):
    """A bootstrapped n-node cluster whose nodes serve --metrics (and take
    the flags `extra`); returns (cluster, {node id: metrics port})."""
    require_binary(BATOND)
    c = Cluster(root)
    c.common_args = [] if default_timings else [
        "--election-timeout-ms", "500", "--heartbeat-ms", "50"]
    ports = free_ports(3 * n)
    mports = {}
    for i in range(n):
        c.nodes[i + 1] = Node(c, i + 1, ports[3 * i], ports[3 * i + 1])
        mports[i + 1] = ports[3 * i + 2]
    boot = ",".join(f"{m.id}={m.peer_addr}/{m.client_addr}"
                    for m in c.nodes.values())
    try:
        for m in c.nodes.values():
            m.start(["--bootstrap", boot, "--metrics",
                     f"{HOST}:{mports[m.id]}"] + list(extra), wait=False)
        for m in c.nodes.values():
            m.wait_ready()
        c.leader()
    except BaseException:
        c.stop_all()
        raise
    return c, mports


def get(port, path, method="GET"):
    """(status, body text) of one request."""
    conn = http.client.HTTPConnection(HOST, port, timeout=HTTP_TIMEOUT_S)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        assert r.getheader("Connection") == "close"
        return r.status, r.read().decode()
    finally:
        conn.close()


def parse(text):
    """Strictly parse the text format 0.0.4: {family: {"type", "samples":
    [(name, labels, value)]}}. Fails on any line that is neither a comment
    nor a sample, a sample of a family without TYPE, or a family seen
    twice."""
    families, current, helped = {}, None, set()
    assert text.endswith("\n"), "the exposition ends with a newline"
    for line in text.split("\n")[:-1]:
        if line.startswith("# HELP "):
            parts = line.split(" ", 3)
            assert len(parts) == 4 and parts[3], f"empty HELP: {line!r}"
            assert parts[2] not in families and parts[2] not in helped, \
                f"family {parts[2]} appears twice"
            helped.add(parts[2])
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            assert len(parts) == 4 and parts[3] in TYPES, line
            assert parts[2] not in families, f"TYPE {parts[2]} twice"
            current = parts[2]
            families[current] = {"type": parts[3], "samples": []}
            continue
        assert not line.startswith("#"), f"unknown comment: {line!r}"
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        assert current is not None, f"sample before any TYPE: {line!r}"
        if families[current]["type"] == "histogram":
            assert name in (f"{current}_bucket", f"{current}_sum",
                            f"{current}_count"), line
        else:
            assert name == current, f"{name} outside its family {current}"
        assert name.startswith("baton_"), name
        families[current]["samples"].append(
            (name, dict(LABEL.findall(labels)), float(value)))
    for name, f in families.items():
        assert name in helped, f"family {name} has no HELP"
        assert f["samples"], f"family {name} has a TYPE and no sample"
        if f["type"] == "histogram":
            check_histogram(name, f["samples"])
    return families


def check_histogram(name, samples):
    """Per label set: buckets ascending in le and monotone, +Inf last and
    equal to _count, a _sum."""
    series = {}
    for n, labels, v in samples:
        key = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
        s = series.setdefault(key, {"buckets": [], "count": None,
                                    "sum": None})
        if n.endswith("_bucket"):
            le = labels["le"]
            s["buckets"].append((math.inf if le == "+Inf" else float(le), v))
        elif n.endswith("_count"):
            s["count"] = v
        else:
            s["sum"] = v
    for key, s in series.items():
        b = s["buckets"]
        assert b and b[-1][0] == math.inf, f"{name}{key}: no +Inf bucket"
        assert [x for x, _ in b] == sorted(x for x, _ in b), (name, key)
        counts = [v for _, v in b]
        assert counts == sorted(counts), f"{name}{key}: not monotone {b}"
        assert s["count"] == b[-1][1], f"{name}{key}: +Inf != _count"
        assert s["sum"] is not None and s["sum"] >= 0, (name, key)


def value(families, name, **labels):
    """The first sample named `name` (a histogram's _count, _sum or
    _bucket too) with these labels, or None."""
    family = name if name in families else re.sub(
        r"_(bucket|sum|count)$", "", name)
    for n, l, v in families[family]["samples"]:
        if n == name and all(l.get(k) == x for k, x in labels.items()):
            return v
    return None


def scrape(port):
    status, body = get(port, "/metrics")
    assert status == 200, body
    return parse(body)


@pytest.fixture(scope="module")
def metrics_cluster(tmp_path_factory):
    c, mports = start_with_metrics(tmp_path_factory.mktemp("metrics"))
    try:
        yield c, mports
    finally:
        c.stop_all()


def test_every_node_serves_metrics_that_parse_and_move(metrics_cluster):
    c, mports = metrics_cluster
    leader = c.leader()
    before = {i: scrape(p) for i, p in mports.items()}
    roles = [value(f, "baton_role") for f in before.values()]
    assert roles.count(1) == 1, f"exactly one leader: {roles}"
    lf = before[leader.id]
    for f in before.values():
        for fam in ("baton_term", "baton_commit_index", "baton_applied_index",
                    "baton_last_index", "baton_fsync_seconds",
                    "baton_uptime_seconds", "baton_node_version_info",
                    "baton_machine_version", "baton_release_floor_info",
                    "baton_peer_sent_bytes_total",
                    "baton_peer_handshakes_refused_total",
                    "baton_connected_clients", "baton_wal_segments",
                    "baton_wal_size_bytes",
                    "baton_elections_started_total",
                    "baton_leader_changes_total"):
            assert fam in f, fam
        assert value(f, "baton_leader_id") == leader.id
    # The leader knows every member's match, lag and versions.
    for m in c.nodes.values():
        assert value(lf, "baton_member_match_index",
                     member=str(m.id)) is not None
        assert value(lf, "baton_member_lag_entries",
                     member=str(m.id)) is not None
        assert value(lf, "baton_member_version_info", member=str(m.id)) == 1
    sets_before = value(lf, "baton_client_commands_total", cmd="set") or 0
    commit_before = value(lf, "baton_commit_index")
    client = leader.client()
    for i in range(20):
        assert client.set(f"k{i}", "v")
    with pytest.raises(redis.ResponseError):
        client.execute_command("NOSUCHCOMMAND")
    after = scrape(mports[leader.id])
    assert value(after, "baton_client_commands_total",
                 cmd="set") >= sets_before + 20
    assert value(after, "baton_client_command_duration_seconds_count",
                 cmd="set") >= sets_before + 20
    # Unknown names are folded into "other": the label stays bounded.
    assert value(after, "baton_client_commands_total", cmd="other") >= 1
    cmds = {l["cmd"] for _, l, _ in
            after["baton_client_commands_total"]["samples"]}
    assert "nosuchcommand" not in cmds
    assert value(after, "baton_commit_index") >= commit_before + 20
    assert value(after, "baton_proposals_total") >= 20
    assert value(after, "baton_fsync_seconds_count") > 0
    assert value(after, "baton_wal_written_bytes_total") > 0
    # With no snapshot in between, the log on disk grew by what was written.
    if value(after, "baton_snapshots_total") == value(lf,
                                                     "baton_snapshots_total"):
        grew = value(after, "baton_wal_size_bytes") - value(
            lf, "baton_wal_size_bytes")
        wrote = value(after, "baton_wal_written_bytes_total") - value(
            lf, "baton_wal_written_bytes_total")
        assert grew == wrote > 0, (grew, wrote)
    assert value(after, "baton_peer_sent_bytes_total") > 0
    # A follower's commit index follows (bounded wait).
    follower = next(m for m in c.nodes.values() if m is not leader)
    d = Deadline(LEADER_TIMEOUT_S, "a follower's commit index to rise")
    while value(scrape(mports[follower.id]),
                "baton_commit_index") < commit_before + 20:
        if d.expired():
            d.fail()
        time.sleep(POLL_S)


def test_every_exported_family_is_documented(metrics_cluster):
    c, mports = metrics_cluster
    docs = (REPO / "docs" / "metrics.md").read_text()
    for name in scrape(mports[c.leader().id]):
        assert re.search(rf"`{name}[`{{]", docs), \
            f"{name} is not in docs/metrics.md"


def test_health_is_ok_on_a_healthy_cluster(metrics_cluster):
    c, mports = metrics_cluster
    for i, port in mports.items():
        d = Deadline(LEADER_TIMEOUT_S, f"node {i} healthy")
        while True:
            status, body = get(port, "/health")
            if status == 200:
                assert body == "ok\n"
                break
            if d.expired():
                d.fail(body)
            time.sleep(POLL_S)
    leader = c.leader()
    status, body = get(mports[leader.id], "/health?max_lag=bad")
    assert status == 400 and "max_lag" in body


def test_health_stays_ok_with_the_default_timings(tmp_path):
    # No timing flags, as an operator starts a node: the leader's view of
    # its members must not call them down between two of its looks.
    c, mports = start_with_metrics(tmp_path / "cluster", default_timings=True)
    try:
        port = mports[c.leader().id]
        d = Deadline(LEADER_TIMEOUT_S, "the leader's /health to say ok")
        while get(port, "/health")[0] != 200:
            if d.expired():
                d.fail(get(port, "/health"))
            time.sleep(POLL_S)
        for _ in range(20):
            assert get(port, "/health") == (200, "ok\n")
            time.sleep(0.05)
    finally:
        c.stop_all()


def raw(port, data, read_timeout=HTTP_TIMEOUT_S):
    """Send bytes, then read until the node closes; returns what came."""
    s = socket.create_connection((HOST, port), timeout=read_timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        got = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
        return got
    finally:
        s.close()


def serves_again(port):
    """The metrics port answers /metrics again (bounded wait): connections
    over the cap are closed until the node has seen the others go."""
    d = Deadline(HTTP_TIMEOUT_S * 2, "the metrics port to serve again")
    while True:
        try:
            status, _ = get(port, "/metrics")
            if status == 200:
                return
        except (OSError, http.client.HTTPException):
            pass
        if d.expired():
            d.fail()
        time.sleep(POLL_S)


def test_bad_requests_are_refused_and_the_node_still_serves(metrics_cluster):
    c, mports = metrics_cluster
    port = mports[1]
    status, body = get(port, "/metrics", method="POST")
    assert status == 405 and "GET" in body
    status, _ = get(port, "/metrics", method="DELETE")
    assert status == 405
    status, _ = get(port, "/nowhere")
    assert status == 404
    big = b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 20480 + b"\r\n\r\n"
    assert raw(port, big).startswith(b"HTTP/1.1 431 ")
    assert raw(port, b"\x00\x01garbage\xff\r\n\r\n").startswith(
        b"HTTP/1.1 400 ")
    assert raw(port, b"GET /metrics HTTP/9.9\r\n\r\n").startswith(
        b"HTTP/1.1 400 ")
    assert raw(port, b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n"
               ).startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\n"
               b"hello").startswith(b"HTTP/1.1 413 ")
    # A slow client: half a request, then nothing. The node closes it
    # after its deadline (the bound here is generous: a busy machine).
    s = socket.create_connection((HOST, port), timeout=30)
    try:
        s.sendall(b"GET /metr")
        s.settimeout(SLOW_CLIENT_DEADLINE_S * 4)
        assert s.recv(100) == b"", "the node closes a slow client"
    finally:
        s.close()
    # Many connections at once: those over the cap are closed, and the
    # node serves again once they are gone.
    socks = []
    try:
        for _ in range(150):
            socks.append(socket.create_connection((HOST, port), timeout=5))
    finally:
        for s in socks:
            s.close()
    serves_again(port)
    assert c.node(1).alive
    assert c.node(1).client().ping()


def test_grafana_dashboard_uses_only_exported_names(metrics_cluster):
    c, mports = metrics_cluster
    exported = set(scrape(mports[c.leader().id]))
    dash = json.loads((REPO / "docs" / "grafana-baton.json").read_text())
    assert dash.get("panels"), "the dashboard has panels"
    exprs = []

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "expr" and isinstance(v, str):
                    exprs.append(v)
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(dash)
    assert exprs, "the dashboard queries something"
    for e in exprs:
        for name in re.findall(r"\bbaton_[a-z0-9_]+", e):
            family = re.sub(r"_(bucket|sum|count)$", "", name)
            assert name in exported or family in exported, \
                f"{name} (in {e!r}) is not exported"


def wait_health(port, want, timeout=LEADER_TIMEOUT_S, path="/health"):
    d = Deadline(timeout, f"{path} to say {want!r}")
    body = ""
    while not d.expired():
        try:
            status, body = get(port, path)
            if status == 503 and want in body:
                return body
        except (OSError, http.client.HTTPException) as e:
            body = repr(e)
        time.sleep(POLL_S)
    d.fail(body)


def test_pipelined_commands_counted_under_their_own_names(metrics_cluster):
    """A node remembers the last command name it counted; a pipeline that
    changes names and letter case must still count each command under its
    own lower-case name, and unknown names under "other"."""
    c, mports = metrics_cluster
    leader = c.leader()
    names = ("set", "get", "incr", "other")

    def counts():
        f = scrape(mports[leader.id])
        return {n: value(f, "baton_client_commands_total", cmd=n) or 0
                for n in names}

    before = counts()
    p = leader.client().pipeline(transaction=False)
    sent = [("SET", "pm", "1"), ("set", "pm", "2"), ("Set", "pm", "3"),
            ("GET", "pm"), ("INCR", "pm-n"), ("NOSUCHCMD",), ("get", "pm"),
            ("SET", "pm", "4"), ("NOSUCHCMD",), ("NOSUCHCMD",), ("iNcR", "pm-n")]
    for args in sent:
        p.execute_command(*args)
    p.execute(raise_on_error=False)
    after = counts()
    got = {n: after[n] - before[n] for n in names}
    assert got == {"set": 4, "get": 2, "incr": 2, "other": 3}, got


def test_health_names_a_down_member_and_a_lost_leader(tmp_path):
    c, mports = start_with_metrics(tmp_path / "cluster")
    try:
        leader = c.leader()
        followers = [m for m in c.nodes.values() if m is not leader]
        followers[0].kill9()
        body = wait_health(mports[leader.id],
                           f"member {followers[0].id} down")
        assert body.endswith("\n")
        # /ready is this node's own state only: the leader still serves,
        # so a load balancer keeps sending it clients.
        assert get(mports[leader.id], "/ready") == (200, "ok\n")
        assert get(mports[followers[1].id], "/ready") == (200, "ok\n")
        # The survivor whose peers are all gone has no leader.
        leader.kill9()
        wait_health(mports[followers[1].id], "no leader")
        wait_health(mports[followers[1].id], "no leader", path="/ready")
    finally:
        c.stop_all()
