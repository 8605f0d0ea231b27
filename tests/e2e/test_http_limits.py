"""The --metrics port under slow clients (src/server/http.c,
docs/metrics.md "Limits"): hundreds of half-sent requests held open
against it, from the monitoring system's own address, do not fail its
health checks; a half-sent request is closed after the deadline."""
import http.client
import socket
import time

import pytest

from conftest import HOST, Deadline
from test_metrics import scrape, start_with_metrics, value

SLOW_CLIENTS = 200
CHECKS = 20
CHECK_EVERY_S = 0.3  # 20 checks span 6 s: past one deadline (5 s)
CHECK_TIMEOUT_S = 2.0  # each check answers within this (its timeout)
DEADLINE_S = 5.0  # http.c: HTTP_DEADLINE_MS
HALF_REQUEST = b"GET /health HTTP/1.1\r\nHost: batond\r\nX-Slow: "


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    c, mports = start_with_metrics(tmp_path_factory.mktemp("http"), n=1)
    try:
        yield c, mports[1]
    finally:
        c.stop_all()


def slow_client(port):
    s = socket.create_connection((HOST, port), timeout=5)
    s.sendall(HALF_REQUEST)
    s.setblocking(False)
    return s


def closed_by_node(s):
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def health(port):
    conn = http.client.HTTPConnection(HOST, port, timeout=CHECK_TIMEOUT_S)
    try:
        conn.request("GET", "/health")
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def test_health_checks_get_through_200_slow_half_sent_requests(node):
    c, port = node
    before = scrape(port)
    slow = []
    try:
        for _ in range(SLOW_CLIENTS):
            slow.append(slow_client(port))
        failures = []
        for i in range(CHECKS):
            # The slow side keeps its 200 open: whatever the node closed
            # is opened again, half-sent.
            for k, s in enumerate(slow):
                if closed_by_node(s):
                    s.close()
                    slow[k] = slow_client(port)
            try:
                status, body = health(port)
                if status != 200:
                    failures.append((i, status, body))
            except (OSError, http.client.HTTPException) as e:
                failures.append((i, repr(e)))
            time.sleep(CHECK_EVERY_S)
        # Each check had CHECK_TIMEOUT_S to answer; the loop's own time
        # (reopening what the node closed) is the test's, not the node's.
        assert not failures, failures
        after = scrape(port)
        # Room was made by closing half-sent requests, never by refusing
        # a newcomer; and the port never held more than its cap.
        assert value(after, "baton_http_evicted_total") > value(
            before, "baton_http_evicted_total")
        assert value(after, "baton_http_refused_total") == value(
            before, "baton_http_refused_total")
        assert value(after, "baton_http_connections") <= 64
    finally:
        for s in slow:
            s.close()
    assert c.node(1).client().ping()


def test_a_half_sent_request_is_closed_after_the_deadline(node):
    _, port = node
    before = value(scrape(port), "baton_http_deadline_closed_total")
    s = socket.create_connection((HOST, port), timeout=DEADLINE_S * 4)
    try:
        s.sendall(HALF_REQUEST)
        start = time.monotonic()
        s.sendall(b"a")  # a trickle does not extend the deadline
        assert s.recv(100) == b"", "the node closes a half-sent request"
        took = time.monotonic() - start
    finally:
        s.close()
    assert DEADLINE_S - 0.5 <= took <= DEADLINE_S * 2, took
    d = Deadline(5, "the deadline counter to move")
    while value(scrape(port), "baton_http_deadline_closed_total") <= before:
        if d.expired():
            d.fail()
        time.sleep(0.1)
