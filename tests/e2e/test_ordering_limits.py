"""Redis's ordering on one connection, and client limits that say what they
are (docs/batond.md, "Consistency" and "Limits").

- Pipelined on one connection, SET then GET returns what the SET wrote, and
  GET then SET returns what was there before, on a follower and on the
  leader alike.
- A bulk or a request above its limit is refused at its header with the
  flag and its value in the error; a 400 MB announced bulk does not grow
  the node's memory; the node keeps serving.
- Slow readers are cut off once all clients' unread replies pass
  --max-total-output-bytes, and the node's peak memory stays bounded.
- --client-idle-timeout-s closes idle clients, so idle connections at
  --max-clients lock nobody out for long; refusals say which limit, and
  repeated warnings are rate-limited with "(N more since)" counts.
"""

import re
import socket
import time

import pytest
import redis

from conftest import (ASAN_QUARANTINE_MIB, HOST, POLL_S, Deadline, retry,
                      resp, sanitized_build, wait_log)

ROUNDS = 200
REPLY_TIMEOUT_S = 10.0
MIB = 1 << 20
DEFAULT_BULK_MAX = 16711680  # 16 MiB - 64 KiB, the documented default


def status_kb(node, field):
    """A field of /proc/PID/status in kB (VmRSS, VmHWM)."""
    text = open(f"/proc/{node.proc.pid}/status").read()
    m = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    assert m, f"no {field} in /proc/{node.proc.pid}/status"
    return int(m.group(1))


def read_line(sock, timeout=REPLY_TIMEOUT_S):
    """The first reply line on sock ("" if it closed first)."""
    sock.settimeout(timeout)
    got = b""
    try:
        while b"\r\n" not in got:
            chunk = sock.recv(4096)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass
    except socket.timeout:
        raise AssertionError(f"no reply within {timeout} s (got {got!r})")
    return got.split(b"\r\n")[0].decode(errors="replace")


def wait_closed(sock, timeout):
    """True once the node closed sock (EOF or reset), within timeout."""
    sock.settimeout(timeout)
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            if not sock.recv(1 << 16):
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
    return False


def assert_serving(node):
    c = node.client()
    retry(lambda: c.set("still", "serving"), what="a SET after the test")
    assert retry(lambda: c.get("still")) == "serving"


# ---- ordering -------------------------------------------------------------


def pipelined_rounds(node, key):
    """ROUNDS times, on one connection: GET, SET new, GET pipelined. The
    first GET must see the previous round's value, the second this one's.
    Returns the rounds that broke the connection's order."""
    c = node.client()
    retry(lambda: c.set(key, "v0"), what="the first SET")
    wrong = []
    for i in range(1, ROUNDS + 1):
        p = c.pipeline(transaction=False)
        p.get(key)
        p.set(key, f"v{i}")
        p.get(key)
        before, ok, after = p.execute()
        assert ok is True, f"round {i}: SET answered {ok!r}"
        if before != f"v{i - 1}" or after != f"v{i}":
            wrong.append((i, before, after))
    return wrong


@pytest.mark.parametrize("role", ["follower", "leader"])
def test_pipelined_read_sees_the_write_before_it(shared_cluster, role):
    lead = shared_cluster.leader()
    node = lead if role == "leader" else shared_cluster.followers()[0]
    wrong = pipelined_rounds(node, f"order-{role}")
    assert not wrong, (
        f"{len(wrong)} of {ROUNDS} rounds on the {role} broke the order of "
        f"one connection (round, GET before SET, GET after SET): "
        f"{wrong[:5]}")


def test_reads_and_writes_pipelined_deep(shared_cluster):
    """Many writes then many reads in one pipeline on a follower: the reads
    see the last write; replies come back in request order."""
    node = shared_cluster.followers()[0]
    c = node.client()
    p = c.pipeline(transaction=False)
    for i in range(50):
        p.set("deep", i)
        p.incr("deep-count")
    for i in range(50):
        p.get("deep")
    p.set("deep", "last")
    p.get("deep")
    got = p.execute()
    assert got[:100:2] == [True] * 50
    counts = got[1:100:2]
    assert counts == list(range(counts[0], counts[0] + 50)), counts
    assert got[100:150] == ["49"] * 50
    assert got[150:] == [True, "last"]


# ---- limits at the header -------------------------------------------------


def test_bulk_above_limit_refused_at_header(shared_cluster):
    node = shared_cluster.followers()[0]
    bystander = node.client()
    assert bystander.ping()
    # One byte above the limit: refused at the header, the limit named.
    with socket.create_connection((HOST, node.client_port)) as s:
        s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" %
                  (DEFAULT_BULK_MAX + 1))
        line = read_line(s)
        assert line == (f"-ERR bulk of {DEFAULT_BULK_MAX + 1} bytes exceeds "
                        f"--max-bulk-bytes {DEFAULT_BULK_MAX}; closing the "
                        f"connection"), line
        assert wait_closed(s, 5.0), "the connection stays open"
    # 400 MB announced, a little sent: the node never holds the body.
    rss_before = status_kb(node, "VmRSS")
    body = 400 * 1000 * 1000
    with socket.create_connection((HOST, node.client_port)) as s:
        s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % body +
                  b"x" * (1 << 20))
        line = read_line(s)
        assert line.startswith(f"-ERR bulk of {body} bytes exceeds "
                               f"--max-bulk-bytes {DEFAULT_BULK_MAX}"), line
        grown_kb = status_kb(node, "VmRSS") - rss_before
        assert grown_kb < 64 * 1024, (
            f"VmRSS grew by {grown_kb} kB for a refused bulk")
    assert bystander.ping()
    assert_serving(node)


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """One node with small limits."""
    from conftest import Cluster
    c = Cluster(tmp_path_factory.mktemp("limited"))
    try:
        c.start(1, extra=["--max-request-bytes", str(MIB),
                          "--max-bulk-bytes", str(MIB // 2)])
        yield c
    finally:
        c.stop_all()


def test_request_above_limit_refused_at_header(limited):
    node = limited.leader()
    c = node.client()
    # Within both limits: served.
    assert retry(lambda: c.set("fits", "x" * (MIB // 2))) is True
    # Each bulk within --max-bulk-bytes, all of them not.
    half = b"y" * (MIB // 2)
    with socket.create_connection((HOST, node.client_port)) as s:
        s.sendall(b"*5\r\n$4\r\nMSET\r\n$1\r\na\r\n$%d\r\n%s\r\n$1\r\nb\r\n"
                  b"$%d\r\n" % (len(half), half, len(half)))
        line = read_line(s)
        assert re.fullmatch(
            r"-ERR request of at least \d+ bytes exceeds --max-request-bytes "
            rf"{MIB}; closing the connection", line), line
    with socket.create_connection((HOST, node.client_port)) as s:
        s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (MIB // 2 + 1))
        line = read_line(s)
        assert line.startswith(f"-ERR bulk of {MIB // 2 + 1} bytes exceeds "
                               f"--max-bulk-bytes {MIB // 2}"), line
    assert_serving(node)


# ---- output buffers --------------------------------------------------------

SLOW_READERS = 6
GETS_EACH = 100  # of a 1 MiB value: 100 MiB of replies each


def test_slow_readers_cut_off_at_total_output_cap(cluster):
    total_cap = 32 * MIB
    lead = cluster.start(1, extra=["--max-total-output-bytes",
                                   str(total_cap)])
    c = lead.client()
    retry(lambda: c.set("big", "z" * MIB))
    peak_before = status_kb(lead, "VmHWM")
    readers = []
    try:
        for _ in range(SLOW_READERS):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((HOST, lead.client_port))
            s.sendall(resp("GET", "big") * GETS_EACH)  # never read
            readers.append(s)
        # A slow reader cut off at the total output cap.
        wait_log(lead, r"above --max-total-output-bytes", regex=True)
        # Give the node time to run every GET sent.
        d = Deadline(10.0, "the slow readers' GETs to be run")
        want = SLOW_READERS * GETS_EACH
        while not d.expired():
            info = c.info()
            if int(info.get("total_commands_processed", want)) >= want:
                break
            time.sleep(POLL_S)
        grown_mb = (status_kb(lead, "VmHWM") - peak_before) // 1024
        # Without the cap: ~600 MiB of replies queued (and, under ASan,
        # up to its quarantine of freed memory on top).
        bound_mb = 200 + (ASAN_QUARANTINE_MIB if sanitized_build() else 0)
        assert grown_mb < bound_mb, (
            f"peak memory grew by {grown_mb} MiB with "
            f"{SLOW_READERS * GETS_EACH} MiB of unread replies asked")
        closed = sum(wait_closed(s, 2.0) for s in readers)
        assert closed >= 1, "no slow reader was disconnected"
    finally:
        for s in readers:
            s.close()
    assert c.ping()
    assert int(c.info()["client_output_disconnects"]) >= 1
    assert_serving(lead)


# ---- idle clients and max clients ------------------------------------------


def test_idle_timeout_closes_idle_clients(cluster):
    lead = cluster.start(1, extra=["--client-idle-timeout-s", "1"])
    idle = lead.client(timeout=5.0)
    busy = lead.client(timeout=5.0)
    assert idle.ping() and busy.ping()
    with socket.create_connection((HOST, lead.client_port)) as raw:
        # The busy client keeps talking for 2.5 s: it stays connected.
        end = time.monotonic() + 2.5
        while time.monotonic() < end:
            assert busy.ping()
            time.sleep(0.3)
        assert wait_closed(raw, 5.0), "an idle connection stayed open"
    wait_log(lead, r"closing client .*idle for more than "
             r"--client-idle-timeout-s 1", regex=True)
    # redis-py reconnects: an idle client's next command still works.
    assert idle.ping()
    assert int(busy.info()["client_idle_disconnects"]) >= 1


def test_idle_connections_at_max_clients_lock_nobody_out(cluster):
    max_clients = 200
    lead = cluster.start(1, extra=["--max-clients", str(max_clients),
                                   "--client-idle-timeout-s", "1"])
    socks = []
    try:
        for _ in range(max_clients):
            socks.append(socket.create_connection((HOST, lead.client_port)))
        # Wait for the node to have accepted them all (PING answers are
        # refusals once it has).
        d = Deadline(10.0, "the node to refuse a client at --max-clients")
        refusal = ""
        while not d.expired():
            with socket.create_connection((HOST, lead.client_port)) as s:
                refusal = read_line(s)
            if refusal.startswith("-ERR max number"):
                break
            time.sleep(POLL_S)
        assert refusal == ("-ERR max number of clients reached "
                           f"(--max-clients {max_clients})"), refusal
        # A burst of refusals logs one line, then a count.
        for _ in range(20):
            with socket.create_connection((HOST, lead.client_port)) as s:
                read_line(s)
        time.sleep(1.1)
        # The idle ones are closed after a second or so: served again.
        d = Deadline(5.0, "a new client served once idle ones are closed")
        while True:
            try:
                assert lead.client(timeout=2.0).ping()
                break
            except redis.ResponseError as e:
                assert "max number of clients" in str(e), e
            except redis.ConnectionError:
                # Still full: the refusal arrived (and the node closed the
                # connection) before redis-py sent the PING ("Connection
                # has data"), a race on a busy machine.
                pass
            if d.expired():
                d.fail()
            time.sleep(0.2)
    finally:
        for s in socks:
            s.close()
    text = lead.log_text()
    refused = re.findall(r"refused client .*--max-clients", text)
    assert 1 <= len(refused) <= 6, (
        f"{len(refused)} refusal lines for a burst of 20: not rate-limited")
    assert re.search(r"\((\d+) more since\)", text) or len(refused) == 1, (
        "no '(N more since)' count after a burst")
    info = lead.client().info()
    assert int(info["rejected_connections"]) >= 21
