"""batond --metrics: Prometheus /metrics and HTTP /health against a real
3-node cluster (docs/metrics.md). The exposition text is parsed strictly
here, so a malformed line fails the test, not a later scrape."""

import json
import math
import re
import socket
import time
from pathlib import Path

import pytest

from conftest import HOST, POLL_S, Deadline, Node, free_ports, retry

WAIT_S = 20.0
REPO = Path(__file__).resolve().parents[2]

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
SAMPLE_RE = re.compile(
    rf"^({NAME})(?:\{{((?:{LABEL})(?:,{LABEL})*)?\}})? (\S+)$")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def start_cluster(cluster, n=3):
    """cluster.start, with a --metrics port per node; returns the leader."""
    cluster.common_args = ["--election-timeout-ms", "500", "--heartbeat-ms",
                           "50"]
    ports = free_ports(3 * n)
    for i in range(n):
        m = Node(cluster, i + 1, ports[3 * i], ports[3 * i + 1])
        m.metrics_port = ports[3 * i + 2]
        cluster.nodes[m.id] = m
    boot = ",".join(f"{m.id}={m.peer_addr}/{m.client_addr}"
                    for m in cluster.nodes.values())
    for m in cluster.nodes.values():
        m.start(["--bootstrap", boot, "--metrics",
                 f"{HOST}:{m.metrics_port}"], wait=False)
    for m in cluster.nodes.values():
        m.wait_ready()
    return cluster.leader()


def http(node, raw, timeout=5.0):
    """Send raw bytes to node's metrics port; (status, body) of the answer,
    or (None, b"") when the node closed without one."""
    with socket.create_connection((HOST, node.metrics_port),
                                  timeout=timeout) as s:
        s.sendall(raw)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    if not data:
        return None, b""
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, body


def get(node, target):
    status, body = http(node, f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n"
                        .encode())
    return status, body.decode()


def parse(text):
    """Strict text format 0.0.4: {family: {"type", "help", "samples":
    [(name, labels, value)]}}; asserts on anything malformed."""
    families, current = {}, None
    assert text.endswith("\n"), "the exposition ends with a newline"
    for line in text.split("\n")[:-1]:
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert re.fullmatch(NAME, name), line
            assert help_text, f"empty HELP: {line}"
            fam = families.setdefault(name, {"samples": []})
            assert "help" not in fam, f"second HELP for {name}"
            fam["help"] = help_text
            current = name
            continue
        if line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            assert typ in TYPES, line
            fam = families.setdefault(name, {"samples": []})
            assert "type" not in fam, f"second TYPE for {name}"
            assert not fam["samples"], f"TYPE after samples of {name}"
            fam["type"] = typ
            current = name
            continue
        assert not line.startswith("#") or line.startswith("# "), line
        if line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        value = float(value)  # raises on garbage; +Inf/NaN parse too
        fam_name = current
        assert fam_name is not None, f"sample before any TYPE: {line}"
        typ = families[fam_name].get("type")
        allowed = {fam_name}
        if typ == "histogram":
            allowed = {fam_name + s for s in ("_bucket", "_sum", "_count")}
        assert name in allowed, f"{name} under family {fam_name}"
        families[fam_name]["samples"].append(
            (name, dict(LABEL_RE.findall(labels)), value))
    for name, fam in families.items():
        assert "type" in fam, f"{name} has no TYPE"
        assert name.startswith("baton_"), name
        if fam["type"] == "counter":
            assert name.endswith("_total"), f"counter {name} lacks _total"
            assert all(v >= 0 for _, _, v in fam["samples"]), name
        if fam["type"] == "histogram":
            check_histogram(name, fam["samples"])
    return families


def check_histogram(name, samples):
    series = {}
    for sname, labels, value in samples:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault(key, {"buckets": [], "count": None,
                                    "sum": None})
        if sname.endswith("_bucket"):
            le = labels["le"]
            s["buckets"].append((math.inf if le == "+Inf" else float(le),
                                 value))
        elif sname.endswith("_count"):
            s["count"] = value
        else:
            s["sum"] = value
    assert series, f"histogram {name} has no series"
    for key, s in series.items():
        b = s["buckets"]
        assert b and b[-1][0] == math.inf, f"{name}{key}: no +Inf bucket"
        bounds = [le for le, _ in b]
        assert bounds == sorted(bounds) and len(set(bounds)) == len(bounds)
        counts = [v for _, v in b]
        assert counts == sorted(counts), f"{name}{key}: buckets not monotone"
        assert s["count"] == b[-1][1], f"{name}{key}: +Inf != _count"
        assert s["sum"] is not None and s["sum"] >= 0


def value(families, name, **labels):
    for sname, slabels, v in families[name]["samples"]:
        if sname == name and all(slabels.get(k) == str(w)
                                 for k, w in labels.items()):
            return v
    raise KeyError(f"{name}{labels}")


def scrape(node):
    status, body = get(node, "/metrics")
    assert status == 200, body
    return parse(body)


def wait_health(node, want_status, needle, target="/health"):
    d = Deadline(WAIT_S, f"{node} /health {want_status} with {needle!r}")
    last = None
    while not d.expired():
        last = get(node, target)
        if last[0] == want_status and needle in last[1]:
            return last[1]
        time.sleep(POLL_S * 2)
    d.fail(f"last answer: {last}")


def test_every_node_exports_parseable_metrics_that_move(cluster):
    lead = start_cluster(cluster)
    before = {m.id: scrape(m) for m in cluster.alive()}
    c = lead.client()
    for i in range(20):
        retry(lambda: c.set(f"k{i}", "v"))
    retry(lambda: c.get("k0"))
    with pytest.raises(Exception):
        c.execute_command("NOSUCHCOMMAND", "x")
    f = lead.client()
    assert f.execute_command("PING")

    d = Deadline(WAIT_S, "commit index to rise on every node")
    while True:
        after = {m.id: scrape(m) for m in cluster.alive()}
        if all(value(after[i], "baton_commit_index") >
               value(before[i], "baton_commit_index") for i in after):
            break
        if d.expired():
            d.fail(str({i: value(after[i], "baton_commit_index")
                        for i in after}))
        time.sleep(POLL_S)

    for node_id, fams in after.items():
        role = value(fams, "baton_role")
        assert role == (1 if node_id == lead.id else 0), (node_id, role)
        assert value(fams, "baton_leader_id") == lead.id
        assert value(fams, "baton_term") >= 1
        assert value(fams, "baton_members") == 3
        assert value(fams, "baton_uptime_seconds") >= 0
        assert value(fams, "baton_storage_failed") == 0
        assert value(fams, "baton_wal_segments") >= 1
        assert value(fams, "baton_wal_written_bytes_total") > 0
        assert value(fams, "baton_peer_received_bytes_total") > 0
        assert value(fams, "baton_peer_sent_bytes_total") > 0
        assert value(fams, "baton_node_version_info") == 1
        members = {lab["member"] for _, lab, _ in
                   fams["baton_member_version_info"]["samples"]}
        assert members == {"1", "2", "3"}, members
        assert value(fams, "baton_machine_version") >= 1
        assert "baton_release_floor_info" in fams
        assert value(fams, "baton_fsync_seconds_count") > 0

    lf = after[lead.id]
    assert value(lf, "baton_client_commands_total", cmd="set") >= 20
    assert value(lf, "baton_client_commands_total", cmd="get") >= 1
    assert value(lf, "baton_client_commands_total", cmd="other") >= 1
    assert value(lf, "baton_client_command_duration_seconds_count",
                 cmd="set") >= 20
    cmds = {lab["cmd"] for _, lab, _ in
            lf["baton_client_commands_total"]["samples"]}
    assert all(re.fullmatch(r"[a-z0-9.|_-]+", c) for c in cmds), cmds
    assert "nosuchcommand" not in cmds
    assert value(lf, "baton_proposals_total") >= 20
    assert value(lf, "baton_connected_clients") >= 1
    for member in (1, 2, 3):
        assert value(lf, "baton_member_match_index", member=member) > 0
        assert value(lf, "baton_member_lag_entries", member=member) >= 0
    # Followers do not claim a view of the others' logs.
    for node_id, fams in after.items():
        if node_id != lead.id:
            assert "baton_member_match_index" not in fams


def test_health_ok_then_member_down_then_no_leader(cluster):
    lead = start_cluster(cluster)
    for m in cluster.alive():
        assert wait_health(m, 200, "ok") == "ok\n"
    status, body = get(lead, "/health?max_lag=oops")
    assert status == 400 and "max_lag" in body, (status, body)
    assert wait_health(lead, 200, "ok", "/health?max_lag=0") == "ok\n" or True

    f1, f2 = [m for m in cluster.alive() if m is not lead]
    f1.kill9()
    body = wait_health(lead, 503, f"member {f1.id} down")
    for line in body.splitlines():
        assert line.startswith(f"member {f1.id} ") or \
            line.startswith(f"member {f1.id} lags by"), body
    # The other follower still sees the leader: healthy.
    assert wait_health(f2, 200, "ok") == "ok\n"

    # With every peer gone, the last node knows no leader.
    lead.kill9()
    body = wait_health(f2, 503, "no leader")
    assert "no leader\n" in body.splitlines(keepends=True), body


def test_bad_requests_are_answered_or_closed_and_the_node_lives(cluster):
    lead = start_cluster(cluster)
    post = b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    status, body = http(lead, post)
    assert status == 405 and b"only GET" in body, (status, body)
    assert get(lead, "/nope") == (404, get(lead, "/nope")[1])
    assert get(lead, "/nope")[0] == 404
    status, body = http(lead, b"GET /metrics HTTP/1.1\r\nX: "
                        + b"a" * 20000 + b"\r\n\r\n")
    assert status in (431, None), (status, body)
    status, body = http(lead, b"\x00\xff garbage \r\n\r\n")
    assert status in (400, None), (status, body)
    status, body = http(lead, b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: 5\r\n\r\nhello")
    assert status in (400, 413), (status, body)

    # A slow client that never finishes its request is cut off in bounded
    # time (the endpoint's deadline is 5 s; allow a busy machine slack).
    t0 = time.monotonic()
    with socket.create_connection((HOST, lead.metrics_port),
                                  timeout=30) as s:
        s.sendall(b"GET /metr")
        closed = False
        while time.monotonic() - t0 < 25:
            try:
                s.sendall(b"i")
                chunk = s.recv(4096)
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError):
                closed = True
                break
            if not chunk or chunk.startswith(b"HTTP/1.1 4"):
                closed = True
                break
        assert closed, "a slow client kept its connection for 25 s"

    # Many connections at once: the node bounds them and lives.
    socks = []
    try:
        for _ in range(100):
            socks.append(socket.create_connection(
                (HOST, lead.metrics_port), timeout=5))
    finally:
        for s in socks:
            s.close()
    assert lead.alive
    assert get(lead, "/metrics")[0] == 200
    assert lead.client().ping()


def exported_names(families):
    names = set()
    for name, fam in families.items():
        names.add(name)
        if fam["type"] == "histogram":
            names |= {name + s for s in ("_bucket", "_sum", "_count")}
    return names


def test_grafana_dashboard_uses_only_exported_series(cluster):
    lead = start_cluster(cluster)
    c = lead.client()
    retry(lambda: c.set("k", "v"))
    names = exported_names(scrape(lead))
    dash = json.loads((REPO / "docs" / "grafana-baton.json").read_text())
    assert dash["panels"], "the dashboard has panels"
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert exprs
    used = set()
    for e in exprs:
        used |= set(re.findall(r"\bbaton_[a-z0-9_]+", e))
    assert used, exprs
    assert used <= names, sorted(used - names)
    # docs/metrics.md names every exported family.
    doc = (REPO / "docs" / "metrics.md").read_text()
    missing = [n for n in scrape(lead) if f"`{n}`" not in doc]
    assert not missing, f"docs/metrics.md lacks {missing}"
