"""Fixtures for the end-to-end tests: real batond processes on 127.0.0.1.

A `Cluster` starts N nodes on free ports with their data in the test's
tmp_path and their logs in files next to it, waits (boundedly) for a leader,
and always cleans up: SIGTERM, then SIGKILL after a grace period, to the
PIDs it started and to nothing else. When a test fails, the tail of every
node's log is attached to the report.

Binaries come from $BATON_BUILD (default `build`), relative to the repo root.
Every wait here is bounded both in time and in number of tries.

Every cluster runs with peer authentication: a fresh peer secret (32 random
bytes, mode 0600) in its directory, given to each node with
--peer-secret-file (a test may set node.secret_file to another path, or to
None for none).
"""

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

REPO = Path(__file__).resolve().parents[2]

# The disk the suite takes. batond preallocates each log segment (64 MiB
# by default); every batond a test starts, directly or through a tool or
# the fault harness, inherits this smaller size from the environment
# (--wal-segment-bytes), so that hundreds of nodes take megabytes, not
# gigabytes. A test that sets the flag itself still wins.
TEST_WAL_SEGMENT_BYTES = 2 << 20
os.environ.setdefault("BATON_WAL_SEGMENT_BYTES", str(TEST_WAL_SEGMENT_BYTES))


def build_dir():
    b = Path(os.environ.get("BATON_BUILD", "build"))
    return b if b.is_absolute() else REPO / b


BATOND = build_dir() / "batond"


def release_table():
    """The releases of the table in src/core/version.c (the only place a
    version number is written), oldest first, as "x.y.z": the last one is
    the tree's own release. Tests that mean "the newest release" use it
    rather than write a number down."""
    text = (REPO / "src" / "core" / "version.c").read_text()
    found = re.findall(r"\.release = \{(\d+), (\d+), (\d+)\}", text)
    assert found, "no release rows in src/core/version.c"
    return [".".join(row) for row in found]


def release_profiles():
    """{release: (proto_min, proto_max, machine_max)} of every row of the
    table in src/core/version.c, read like release_table()."""
    text = (REPO / "src" / "core" / "version.c").read_text()
    found = re.findall(r"\.release = \{(\d+), (\d+), (\d+)\},\s*"
                       r"\.proto_min = \{(\d+)\},\s*\.proto_max = "
                       r"\{(\d+)\},\s*\.machine_max = \{(\d+)\}", text)
    assert len(found) == len(release_table()), "unreadable release rows"
    return {".".join(row[:3]): tuple(int(x) for x in row[3:])
            for row in found}


def rolling_target():
    """The newest release of the table that an older release shares a
    peer protocol with: the newest a rolling upgrade reaches. The tree's
    own release unless nothing older talks to it (2.0.0 speaks peer
    protocol 4 only, so 1.x clusters roll to 1.3.0 and move to 2.0.0
    through the relay, docs/relay.md)."""
    table = release_profiles()
    rows = release_table()
    for i in range(len(rows) - 1, 0, -1):
        lo, hi, _ = table[rows[i]]
        if any(table[r][0] <= hi and lo <= table[r][1] for r in rows[:i]):
            return rows[i]
    raise AssertionError("no release of the table rolls from an older one")


def build_sanitizers():
    """The build's sanitizers ("address,undefined" under make sanitize), or
    "": a program linked against its libraries must use them too."""
    cache = build_dir() / "CMakeCache.txt"
    try:
        for line in cache.read_text().splitlines():
            if line.startswith("BATON_SANITIZE:"):
                return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ""


def sanitized_build():
    """Whether the binaries were built with sanitizers (make sanitize):
    ASan keeps freed memory in quarantine (256 MiB by default), which
    memory bounds must allow for."""
    return build_sanitizers() != ""


ASAN_QUARANTINE_MIB = 256
BATONCTL = build_dir() / "batonctl"

HOST = "127.0.0.1"
READY_TIMEOUT_S = 10.0  # a started node answers PING
LEADER_TIMEOUT_S = 15.0  # a cluster elects a leader
STOP_GRACE_S = 5.0  # SIGTERM to SIGKILL
RETRY_DEADLINE_S = 10.0  # retry() gives up after this
POLL_S = 0.05
LOG_TAIL_LINES = 40

# Timing for the tests' clusters: quicker than batond's defaults (1000/100)
# so that failovers take well under a second or two.
ELECTION_TIMEOUT_MS = 500
HEARTBEAT_MS = 50


def make_secret_file(path):
    """A peer secret file: 32 random bytes, readable by its owner only."""
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(32))
    os.chmod(path, 0o600)
    return path


def require_binary(path):
    if not path.exists():
        pytest.fail(f"{path} not found: build it first (make build), or set "
                    f"BATON_BUILD to the build directory")


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (bound to port 0, then
    released; another process could take one in between, which is rare)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _die_with_parent():
    """In the child before exec: SIGKILL it if the test runner dies, so no
    node outlives a crashed or killed pytest (Linux prctl PR_SET_PDEATHSIG).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
    except Exception:  # not Linux: cleanup still happens in the fixture
        pass


class Deadline:
    """A bound on a loop, in seconds and in iterations."""

    def __init__(self, seconds, what, max_tries=None):
        self.end = time.monotonic() + seconds
        self.seconds = seconds
        self.what = what
        self.tries = 0
        self.max_tries = max_tries or int(seconds / POLL_S) * 4 + 100

    def expired(self):
        self.tries += 1
        return time.monotonic() > self.end or self.tries > self.max_tries

    def fail(self, detail=""):
        raise AssertionError(
            f"timed out after {self.seconds:.1f} s ({self.tries} tries) "
            f"waiting for {self.what}" + (f": {detail}" if detail else ""))


def wait_for(what, check, timeout=15.0):
    """Poll check() (bounded) until it returns a true value; return it."""
    d = Deadline(timeout, what)
    while not d.expired():
        got = check()
        if got:
            return got
        time.sleep(POLL_S)
    d.fail()



def wait_through_errors(what, fn, timeout):
    """Poll fn() (bounded) until it returns a true value; return it. A
    connection error, a timeout or an error reply counts as not yet (a node
    restarting, a leader changing) and is named if time runs out."""
    d = Deadline(timeout, what)
    last = None
    while not d.expired():
        try:
            v = fn()
            if v:
                return v
            last = v
        except (redis.ConnectionError, redis.TimeoutError,
                redis.ResponseError) as e:
            last = e
        time.sleep(POLL_S * 2)
    d.fail(f"last: {last!r}")


def info_section(node, section="Versions"):
    """One section of node's INFO as a dict of strings ({} if there is no
    such section)."""
    c = node.client(timeout=2.0)
    c.set_response_callback("INFO", lambda r, **kw: r)  # the raw text
    out, inside = {}, False
    for line in c.execute_command("INFO").splitlines():
        if line.startswith("#"):
            inside = line[1:].strip() == section
        elif inside and ":" in line:
            k, v = line.split(":", 1)
            out[k] = v
    return out

def wait_log(node, needle, since=0, timeout=10.0, regex=False):
    """Wait (bounded) until node's log, from offset `since`, holds needle
    (a regular expression if regex)."""
    d = Deadline(timeout, f"{needle!r} in {node}'s log")
    while not d.expired():
        text = node.log_text()[since:]
        if (re.search(needle, text) if regex else needle in text):
            return
        time.sleep(POLL_S)
    d.fail(node.log_text()[since:][-2000:])


def resp(*args):
    """A command as a RESP array of bulk strings (raw-socket tests)."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def is_tryagain(e):
    return isinstance(e, redis.ResponseError) and str(e).startswith(
        "TRYAGAIN")


def retry(fn, deadline_s=RETRY_DEADLINE_S, what="a command",
          on_connection_error=True):
    """Call fn() until it does not fail with -TRYAGAIN (or, if allowed, a
    connection error or timeout), for at most deadline_s seconds."""
    d = Deadline(deadline_s, what)
    last = None
    delay = POLL_S
    while not d.expired():
        try:
            return fn()
        except redis.ResponseError as e:
            if not is_tryagain(e):
                raise
            last = e
        except (redis.ConnectionError, redis.TimeoutError) as e:
            if not on_connection_error:
                raise
            last = e
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    d.fail(f"last error: {last!r}")


def mset_load(client, n, key_of, value, per_command, in_flight):
    """SET key_of(0..n-1) to value: MSETs of per_command keys, in_flight of
    them pipelined at a time, each pipeline retried on -TRYAGAIN (an MSET
    sets the same values again, so a retry is harmless)."""
    for first in range(0, n, per_command * in_flight):
        last = min(n, first + per_command * in_flight)

        def batch():
            p = client.pipeline(transaction=False)
            for s in range(first, last, per_command):
                p.mset({key_of(k): value
                        for k in range(s, min(last, s + per_command))})
            return p.execute()
        assert all(retry(batch, what=f"the load of keys {first}..{last}"))


def as_map(reply):
    """An admin reply (alternating field names and values) as a dict."""
    assert isinstance(reply, list) and len(reply) % 2 == 0, reply
    return dict(zip(reply[0::2], reply[1::2]))


class Node:
    def __init__(self, cluster, node_id, client_port, peer_port):
        self.cluster = cluster
        self.id = node_id
        self.client_port = client_port
        self.peer_port = peer_port
        self.data_dir = cluster.root / f"node{node_id}"
        self.log_path = cluster.root / f"node{node_id}.log"
        self.args = []
        self.proc = None
        self.exit_codes = []  # of earlier runs, in order
        self.binary = None  # None: BATOND (the fault harness varies it)
        self.secret_file = cluster.secret_file  # None: no peer secret

    client_addr = property(lambda self: f"{HOST}:{self.client_port}")
    peer_addr = property(lambda self: f"{HOST}:{self.peer_port}")

    def __repr__(self):
        return f"<node {self.id} {self.client_addr}>"

    @property
    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self, args=None, wait=True):
        """Start batond; `args` (kept for restarts) come after the common
        ones. Waits until it answers PING unless wait=False."""
        assert not self.alive, f"{self} is already running"
        if args is not None:
            self.args = list(args)
        cmd = [str(self.binary or BATOND), "--id", str(self.id), "--listen",
               self.client_addr, "--peer-listen", self.peer_addr, "--data",
               str(self.data_dir)] + self.cluster.common_args + self.args
        if self.secret_file is not None:
            cmd += ["--peer-secret-file", str(self.secret_file)]
        with open(self.log_path, "ab") as log:
            log.write(f"---- start: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log,
                                         preexec_fn=_die_with_parent)
        self.cluster.started_pids.add(self.proc.pid)
        if wait:
            self.wait_ready()
        return self

    def restart(self):
        """Start again with the same flags and data (after kill9/stop)."""
        return self.start()

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        d = Deadline(timeout, f"{self} to answer PING")
        last = None
        while not d.expired():
            if not self.alive:
                raise AssertionError(
                    f"{self} exited with {self.proc.returncode} while "
                    f"starting:\n{self.log_tail()}")
            try:
                if self.client(timeout=1.0).ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError,
                    redis.ResponseError) as e:
                last = e
            time.sleep(POLL_S)
        d.fail(repr(last))

    def client(self, timeout=5.0, **kw):
        """A new redis-py client of this node (strings decoded)."""
        kw.setdefault("password", self.cluster.password)
        return redis.Redis(host=HOST, port=self.client_port,
                           socket_timeout=timeout,
                           socket_connect_timeout=timeout,
                           decode_responses=True, **kw)

    def info(self, timeout=2.0):
        """BATON.NODE as a dict of strings."""
        return as_map(self.client(timeout=timeout).execute_command(
            "BATON.NODE"))

    def members(self, timeout=2.0):
        """BATON.MEMBERS as a list of dicts."""
        reply = self.client(timeout=timeout).execute_command("BATON.MEMBERS")
        return [as_map(m) for m in reply]

    def kill9(self):
        assert self.alive, f"{self} is not running"
        self.proc.send_signal(signal.SIGKILL)
        self._reap(STOP_GRACE_S)

    def terminate(self, timeout=STOP_GRACE_S):
        """SIGTERM, wait for the exit; returns its exit code (SIGKILL and
        an AssertionError if it does not exit in time)."""
        assert self.alive, f"{self} is not running"
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self._reap(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self._reap(STOP_GRACE_S)
            raise AssertionError(f"{self} did not exit within {timeout} s "
                                 f"of SIGTERM")

    def _reap(self, timeout):
        code = self.proc.wait(timeout=timeout)
        self.exit_codes.append(code)
        return code

    def log_text(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines=LOG_TAIL_LINES):
        return "\n".join(self.log_text().splitlines()[-lines:])


class Cluster:
    def __init__(self, root):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.nodes = {}
        self.started_pids = set()
        self.common_args = []
        self.password = None  # clients and batonctl AUTH with it
        self.secret_file = make_secret_file(self.root / "peer-secret")

    # ---- starting -----------------------------------------------------------

    def start(self, n=3, election_timeout_ms=ELECTION_TIMEOUT_MS,
              heartbeat_ms=HEARTBEAT_MS, snapshot_entries=None, password=None,
              extra=(), wait_leader=True):
        """Bootstrap an n-node cluster; returns its leader (or None if
        wait_leader is false). election_timeout_ms=None leaves both
        timings to batond's defaults."""
        require_binary(BATOND)
        assert not self.nodes, "start() once per cluster"
        self.common_args = [] if election_timeout_ms is None else [
            "--election-timeout-ms", str(election_timeout_ms),
            "--heartbeat-ms", str(heartbeat_ms)]
        if snapshot_entries is not None:
            self.common_args += ["--snapshot-entries", str(snapshot_entries)]
        if password is not None:
            self.common_args += ["--password", password]
            self.password = password
        self.common_args += list(extra)
        ports = free_ports(2 * n)
        for i in range(n):
            node_id = i + 1
            self.nodes[node_id] = Node(self, node_id, ports[2 * i],
                                       ports[2 * i + 1])
        boot = ",".join(f"{m.id}={m.peer_addr}/{m.client_addr}"
                        for m in self.nodes.values())
        try:
            for m in self.nodes.values():
                m.start(["--bootstrap", boot], wait=False)
            for m in self.nodes.values():
                m.wait_ready()
            return self.leader() if wait_leader else None
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.logs_tail()}") from None

    def add_and_promote(self, joiner, timeout=30.0):
        """docs/operations.md, "Growing and shrinking": batonctl add on
        the leader, then promote until the joiner has caught up (promote
        refuses a learner still behind); bounded."""
        self.batonctl("add", joiner.id, joiner.peer_addr, joiner.client_addr,
                      node=self.leader())
        d = Deadline(timeout, f"promotion of {joiner}")
        while True:
            r = self.batonctl("promote", joiner.id, node=self.leader(),
                              check=False)
            if r.returncode == 0:
                return
            if d.expired():
                d.fail(r.stderr)
            time.sleep(0.2)

    def new_joiner(self):
        """Start one more node with --join (not yet a member)."""
        node_id = max(self.nodes) + 1
        cport, pport = free_ports(2)
        m = Node(self, node_id, cport, pport)
        self.nodes[node_id] = m
        return m.start(["--join"])

    # ---- looking at it ------------------------------------------------------

    def node(self, node_id):
        return self.nodes[node_id]

    def alive(self):
        return [m for m in self.nodes.values() if m.alive]

    def find_leader(self, among=None):
        """The live node reporting `leader` in the highest term, or None."""
        best, best_term = None, -1
        for m in among or self.alive():
            try:
                info = m.info(timeout=1.0)
            except (redis.ConnectionError, redis.TimeoutError,
                    redis.ResponseError):
                continue
            if info.get("role") == "leader" and int(info["term"]) > best_term:
                best, best_term = m, int(info["term"])
        return best

    def leader(self, timeout=LEADER_TIMEOUT_S, exclude=()):
        """Wait for a leader among the live nodes (not in `exclude`)."""
        d = Deadline(timeout, "a leader")
        while not d.expired():
            among = [m for m in self.alive() if m not in exclude]
            found = self.find_leader(among)
            if found is not None:
                return found
            time.sleep(POLL_S)
        d.fail(f"live nodes: {self.alive()}")

    def followers(self):
        lead = self.leader()
        return [m for m in self.alive() if m is not lead]

    def wait_applied(self, node, index, timeout=LEADER_TIMEOUT_S):
        """Wait until `node` has applied `index`."""
        d = Deadline(timeout, f"{node} to apply index {index}")
        while not d.expired():
            try:
                if int(node.info()["applied"]) >= index:
                    return
            except (redis.ConnectionError, redis.TimeoutError):
                pass
            time.sleep(POLL_S)
        d.fail()

    # ---- tools --------------------------------------------------------------

    def batonctl(self, *args, node=None, check=True, timeout=30,
                 password=None):
        """Run batonctl against `node` (default: node 1), with the
        cluster's password unless another is given ("" for none)."""
        require_binary(BATONCTL)
        node = node or self.nodes[min(self.nodes)]
        cmd = [str(BATONCTL), "-h", HOST, "-p", str(node.client_port)]
        password = self.password if password is None else password
        if password:
            cmd += ["-a", password]
        cmd += [str(a) for a in args]
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout)
        if check:
            assert r.returncode == 0, (
                f"{' '.join(cmd)} exited {r.returncode}\nstdout:\n{r.stdout}"
                f"\nstderr:\n{r.stderr}")
        return r

    def logs_tail(self):
        parts = []
        for m in self.nodes.values():
            if m.proc is None:
                state = "never started"
            elif m.alive:
                state = f"running, pid {m.proc.pid}"
            else:
                state = f"exited {m.proc.returncode}"
            parts.append(f"==== node {m.id} ({m.client_addr}, {state}): "
                         f"{m.log_path}\n{m.log_tail()}")
        return "\n".join(parts)

    # ---- cleanup ------------------------------------------------------------

    def stop_all(self):
        """SIGTERM every live node we started, SIGKILL after the grace
        period. Only our own PIDs, never by name."""
        live = [m for m in self.nodes.values()
                if m.alive and m.proc.pid in self.started_pids]
        for m in live:
            try:
                m.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + STOP_GRACE_S
        for m in live:
            try:
                m.proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                m.proc.kill()
                m.proc.wait(timeout=STOP_GRACE_S)


@pytest.fixture
def cluster(tmp_path):
    """An empty Cluster for one test: call cluster.start(...)."""
    c = Cluster(tmp_path / "cluster")
    try:
        yield c
    finally:
        c.stop_all()


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    """One started 3-node cluster for the tests of a module that leave it
    healthy (bad input, tools)."""
    root = tmp_path_factory.mktemp("shared")
    c = Cluster(root)
    try:
        c.start(3)
        yield c
    finally:
        c.stop_all()
        # A failing test's report already holds every node's log tail.
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def remove_what_a_passed_test_wrote(request):
    """pytest keeps the last three runs' temporary folders; a passed
    test's data, logs and backups are removed as soon as it ends (after
    its cluster stopped: this fixture is torn down last), a failed test's
    stay for a look. The fault harness's test modules use it too."""
    failed_before = request.session.testsfailed
    yield
    tmp = request.node.funcargs.get("tmp_path")
    if tmp is not None and request.session.testsfailed == failed_before:
        shutil.rmtree(tmp, ignore_errors=True)


def remove_basetemp_if_passed(session, exitstatus):
    """pytest keeps the temporary folders of its last three runs; a run
    that passed leaves none (what module fixtures wrote included)."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if exitstatus == 0 and factory is not None and \
            getattr(factory, "_basetemp", None) is not None:
        shutil.rmtree(factory.getbasetemp(), ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    # Also the fault harness's (tests/jepsen), when run in one session.
    remove_basetemp_if_passed(session, exitstatus)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure, attach the tail of every node's log to the report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or not rep.failed:
        return
    for name in ("cluster", "shared_cluster"):
        c = item.funcargs.get(name) if hasattr(item, "funcargs") else None
        if isinstance(c, Cluster) and c.nodes:
            rep.sections.append((f"baton node logs ({name})", c.logs_tail()))


def pytest_collection_modifyitems(config, items):
    """BATON_E2E_SHARD=K/N keeps the test files of shard K of N (files in
    name order, dealt round-robin), so that ctest runs the suite as N
    processes side by side (CMakeLists.txt, "e2e-K"). A file stays whole in
    one shard: its module fixtures (a shared cluster) are made once."""
    shard = os.environ.get("BATON_E2E_SHARD")
    if not shard:
        return
    k, n = (int(x) for x in shard.split("/"))
    assert 1 <= k <= n, f"BATON_E2E_SHARD={shard}: K/N with 1 <= K <= N"
    files = sorted({item.fspath.basename for item in items})
    mine = {f for i, f in enumerate(files) if i % n == k - 1}
    kept = [item for item in items if item.fspath.basename in mine]
    dropped = [item for item in items if item.fspath.basename not in mine]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
