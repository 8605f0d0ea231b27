"""Redis client compatibility through real batond processes
(docs/clients.md): redis-py's everyday use (a connection pool, pipelines
with and without a transaction, CLIENT ID/LIST/INFO/KILL, INFO and its
sections, TIME, COMMAND), HELLO 3 and RESP3 replies on the wire, pub/sub
refused with a reason, and redis-cli's --stat, --scan, --latency and
--bigkeys against a 3-node cluster.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest
import redis

from conftest import HOST, POLL_S, REPO, Deadline, retry

REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
CLI_TIMEOUT_S = 20.0  # any redis-cli run that should end by itself
SOCKET_TIMEOUT_S = 5.0


MACHINE_VERSION_TIMEOUT_S = 30.0


def wait_newest_machine_version(cluster):
    """Hashes need the newest machine version, which a new cluster reaches
    shortly after its first leader is elected."""
    d = Deadline(MACHINE_VERSION_TIMEOUT_S, "the newest machine version")
    while not d.expired():
        infos = [m.client().info("versions") for m in cluster.alive()]
        if all(i["machine_version"] == i["machine_max"] for i in infos):
            return
        time.sleep(POLL_S)
    d.fail(str(infos))


@pytest.fixture(scope="module")
def nodes(shared_cluster):
    """(leader, a follower) of the module's cluster."""
    wait_newest_machine_version(shared_cluster)
    leader = shared_cluster.leader()
    follower = next(m for m in shared_cluster.alive() if m is not leader)
    return leader, follower


def require_cli():
    if not os.path.exists(REDIS_CLI):
        pytest.fail(f"{REDIS_CLI} not found: install redis-tools "
                    "(scripts/setup)")


def cli(node, *args, timeout=CLI_TIMEOUT_S):
    """Run redis-cli against node; its stdout."""
    require_cli()
    out = subprocess.run(
        [REDIS_CLI, "-h", HOST, "-p", str(node.client_port), *args],
        capture_output=True, text=True, timeout=timeout, check=True)
    return out.stdout


# ---- RESP3 on the wire ----------------------------------------------------


class Resp3:
    """A raw connection that reads RESP2 and RESP3 replies as Python
    values (maps as dicts, nulls as None), to see the bytes baton sends."""

    def __init__(self, node):
        self.sock = socket.create_connection((HOST, node.client_port),
                                             timeout=SOCKET_TIMEOUT_S)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-"):
            return (kind.decode(), rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"_":
            return None
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind == b"=":  # a verbatim string: "txt:" and the text
            return self._exact(int(rest)).decode()[4:]
        if kind in (b"*", b"~"):  # arrays, and RESP3's sets as lists
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        if kind == b"%":
            n = int(rest)
            return {self.read(): self.read() for _ in range(n)}
        raise AssertionError(f"unexpected reply line {line!r}")

    def raw(self, *args):
        """Send one command; the reply's first line, as sent."""
        self.send(*args)
        return self._line()

    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)

    def call(self, *args):
        self.send(*args)
        return self.read()


def test_hello_3_switches_the_connection_to_resp3(nodes):
    leader, follower = nodes
    retry(lambda: leader.client().hset("compat:h", mapping={"f": "1",
                                                            "g": "2"}))
    for node in (leader, follower):
        c = Resp3(node)
        try:
            hello = c.call("HELLO", "3", "SETNAME", "resp3-client")
            assert isinstance(hello, dict), hello  # a map, not an array
            assert hello["proto"] == 3 and hello["server"] == "redis"
            assert hello["mode"] == "standalone"
            assert hello["version"].startswith("7.")
            assert hello["baton_version"].count(".") == 2
            assert hello["id"] == c.call("CLIENT", "ID")
            # The null of RESP3, for a missing key and in an array.
            assert c.raw("GET", "compat:missing") == b"_"
            assert c.call("MGET", "compat:missing", "compat:h") is not None
            assert c.call("SET", "compat:s", "v") == ("+", "OK")
            assert c.call("GET", "compat:s") == "v"
            # HGETALL is a map (reads on a follower see the leader's write
            # once applied: the read index).
            assert c.raw("HGETALL", "compat:h") == b"%2"
            assert c.read() == "f" and c.read() == "1"
            assert c.read() == "g" and c.read() == "2"
            assert c.call("HGETALL", "compat:nothing") == {}
            assert c.call("CONFIG", "GET", "appendonly") == {
                "appendonly": "yes"}
            info = c.call("CLIENT", "INFO")
            assert " resp=3 " in info and " name=resp3-client " in info
            # Back to RESP2: nulls are $-1 again.
            assert c.call("HELLO", "2")[::2][:3] == ["server", "version",
                                                     "proto"]
            assert c.raw("GET", "compat:missing") == b"$-1"
        finally:
            c.close()


def test_hello_refuses_other_versions_and_bad_options(nodes):
    leader, _ = nodes
    c = Resp3(leader)
    try:
        kind, text = c.call("HELLO", "4")
        assert kind == "-" and text.startswith("NOPROTO "), text
        kind, text = c.call("HELLO", "1")
        assert text.startswith("NOPROTO "), text
        kind, text = c.call("HELLO", "three")
        assert text.startswith("ERR Protocol version"), text
        kind, text = c.call("HELLO", "3", "SETNAME", "has space")
        assert text.startswith("ERR Client names cannot contain spaces")
        kind, text = c.call("HELLO", "3", "BOGUS")
        assert text.startswith("ERR Syntax error in HELLO option"), text
        # Still RESP2 after the refusals.
        assert c.raw("GET", "compat:missing") == b"$-1"
    finally:
        c.close()


def test_redis_cli_resp3_mode(nodes):
    leader, _ = nodes
    retry(lambda: leader.client().hset("compat:cli3", "k", "v"))
    out = cli(leader, "-3", "HGETALL", "compat:cli3")
    assert out.split() == ["k", "v"], out


# ---- redis-py's everyday use ---------------------------------------------


def test_pool_and_pipelines(nodes):
    for node in nodes:
        pool = redis.ConnectionPool(host=HOST, port=node.client_port,
                                    socket_timeout=SOCKET_TIMEOUT_S,
                                    decode_responses=True,
                                    max_connections=4)
        r = redis.Redis(connection_pool=pool)
        try:
            key = f"compat:pool:{node.id}"
            retry(lambda: r.set(key, "0"))
            for _ in range(10):
                retry(lambda: r.incr(key))
            assert r.get(key) == "10"
            p = r.pipeline(transaction=True)
            p.set(f"{key}:t", "a").append(f"{key}:t", "b").get(f"{key}:t")
            assert retry(p.execute) == [True, 2, "ab"]
            p = r.pipeline(transaction=False)
            for i in range(20):
                p.set(f"{key}:{i}", i)
            p.mget([f"{key}:{i}" for i in range(20)])
            replies = retry(p.execute)
            assert replies[:20] == [True] * 20
            assert replies[20] == [str(i) for i in range(20)]
        finally:
            pool.disconnect()


def test_client_id_list_info_setinfo(nodes):
    leader, _ = nodes
    a = leader.client()
    b = leader.client()
    id_a, id_b = a.client_id(), b.client_id()
    assert isinstance(id_a, int) and isinstance(id_b, int)
    assert id_b > id_a  # unique and increasing, as Redis's
    assert a.client_setname("app-a")
    assert a.client_getname() == "app-a"
    with pytest.raises(redis.ResponseError, match="cannot contain spaces"):
        a.client_setname("two words")
    assert a.execute_command("CLIENT", "SETINFO", "LIB-NAME", "mylib")
    assert a.execute_command("CLIENT", "SETINFO", "LIB-VER", "1.2.3")
    with pytest.raises(redis.ResponseError, match="Unrecognized option"):
        a.execute_command("CLIENT", "SETINFO", "COLOR", "blue")
    me = a.client_info()
    assert int(me["id"]) == id_a and me["name"] == "app-a"
    assert me["lib-name"] == "mylib" and me["lib-ver"].strip() == "1.2.3"
    assert me["cmd"] == "client|info" and me["db"] == 0
    assert me["addr"].startswith("127.0.0.1:")
    assert me["laddr"] == leader.client_addr
    ids = [int(c["id"]) for c in a.client_list()]
    assert ids == sorted(ids)  # in id order, as Redis lists them
    listed = {int(c["id"]): c for c in a.client_list()}
    assert id_a in listed and id_b in listed
    assert listed[id_a]["name"] == "app-a"
    only_b = a.client_list(client_id=[str(id_b)])
    assert [int(c["id"]) for c in only_b] == [id_b]
    assert a.client_list(_type="pubsub") == []


def closed_by_server(conn):
    """Does the server close conn (EOF within the socket timeout)?"""
    try:
        while True:
            if not conn.sock.recv(65536):
                return True
    except socket.timeout:
        return False


def test_client_kill(nodes):
    leader, _ = nodes
    killer = leader.client()
    victim = Resp3(leader)
    try:
        victim_id = victim.call("CLIENT", "ID")
        assert killer.client_kill_filter(_id=victim_id) == 1
        assert closed_by_server(victim)
    finally:
        victim.close()
    assert victim_id not in {int(c["id"]) for c in killer.client_list()}
    assert killer.client_kill_filter(_id=victim_id) == 0
    # The old form, by address.
    other = Resp3(leader)
    try:
        addr = other.call("CLIENT", "INFO").split(" addr=")[1].split()[0]
        assert killer.client_kill(addr) is True
        assert closed_by_server(other)
    finally:
        other.close()
    with pytest.raises(redis.ResponseError, match="No such client"):
        killer.client_kill(addr)
    # SKIPME yes (the default) spares the caller.
    assert killer.client_kill_filter(_id=killer.client_id()) == 0
    assert killer.ping()


def test_info_sections(nodes):
    leader, follower = nodes
    retry(lambda: leader.client().set("compat:info", "x"))
    for node in (leader, follower):
        c = node.client()
        every = c.info()
        for field in ("redis_version", "baton_version", "connected_clients",
                      "blocked_clients", "used_memory", "used_memory_human",
                      "used_memory_rss", "total_commands_processed",
                      "instantaneous_ops_per_sec",
                      "total_connections_received", "rejected_connections",
                      "keyspace_hits", "keyspace_misses", "evicted_keys",
                      "expired_keys", "term", "applied_index", "release",
                      "snapshots_taken", "cluster_uuid", "storage_ok",
                      "peer_frames_bad_checksum"):
            assert field in every, field
        assert every["used_memory"] > 0 and every["connected_clients"] >= 1
        assert every["db0"]["keys"] >= 1 and "expires" in every["db0"]
        keyspace = c.info("keyspace")
        assert set(keyspace) == {"db0"}, keyspace
        stats = c.info("STATS")  # case-insensitive
        assert "total_commands_processed" in stats
        assert "used_memory" not in stats and "db0" not in stats
        assert set(c.info("everything")) == set(every)
        assert set(c.info("all")) == set(every)
        assert c.info("nosuchsection") == {}
        two = c.execute_command("INFO", "memory", "clients")
        assert "used_memory" in two and "connected_clients" in two
        assert "term" not in two


def test_time(nodes):
    for node in nodes:
        seconds, micros = node.client().time()
        assert 0 <= micros < 1_000_000
        # The node's clock is this machine's.
        assert abs(seconds + micros / 1e6 - time.time()) < 60


def kv_table_names():
    """The names in src/kv's command tables ({"name", arity, KV_...})."""
    names = set()
    for path in (REPO / "src" / "kv").glob("*.c"):
        names |= set(re.findall(r'\{"([a-z_]+)", -?\d+, KV_(?:READ|WRITE)',
                                path.read_text()))
    assert "get" in names and "hgetall" in names, names
    return names


def test_command_table(nodes):
    leader, _ = nodes
    c = leader.client()
    count = c.command_count()
    table = c.command()  # redis-py parses COMMAND's reply into a dict
    assert table["get"]["arity"] == 2 and table["get"]["first_key_pos"] == 1
    c.set_response_callback("COMMAND", lambda r, **kw: r)  # raw replies
    names = c.execute_command("COMMAND", "LIST")
    assert count == len(names) == len(table)
    for name in ("get", "set", "hgetall", "mget", "ping", "hello", "client",
                 "info", "time", "multi"):
        assert name in names, name
    # Every command of kv's table (src/kv), those added later included.
    assert kv_table_names() <= set(names), kv_table_names() - set(names)
    get, nosuch = c.execute_command("COMMAND", "INFO", "GET", "nosuch")
    assert nosuch is None
    assert get[:6] == ["get", 2, ["readonly"], 1, 1, 1], get
    mset = c.execute_command("COMMAND", "INFO", "mset")[0]
    assert mset[1:6] == [-3, ["write", "denyoom"], 1, -1, 2], mset
    docs = c.execute_command("COMMAND", "DOCS", "set")
    assert docs[0] == "set"
    doc = dict(zip(docs[1][::2], docs[1][1::2]))
    assert {"summary", "since", "group", "arguments"} <= set(doc)
    # In RESP3 (redis-cli 7 reads it so for its hints): maps of maps.
    r3 = Resp3(leader)
    try:
        r3.call("HELLO", "3")
        every = r3.call("COMMAND", "DOCS")
        assert isinstance(every, dict) and len(every) == count
        assert every["get"]["arguments"][0]["type"] == "key"
        assert every["mset"]["arguments"][0]["flags"] == [("+", "multiple")]
    finally:
        r3.close()


def test_pubsub_refused_with_a_reason(nodes):
    leader, _ = nodes
    c = leader.client()
    with pytest.raises(redis.ResponseError, match="pub/sub"):
        c.publish("channel", "message")
    p = c.pubsub()
    try:
        with pytest.raises(redis.ResponseError, match="pub/sub"):
            p.subscribe("channel")
            d = Deadline(5, "the SUBSCRIBE refusal")
            while not d.expired():
                p.get_message(timeout=0.2)
            d.fail("no reply")
    finally:
        p.close()


# ---- redis-cli ------------------------------------------------------------


def test_redis_cli_scan_returns_every_key(nodes):
    leader, follower = nodes
    want = {f"compat:scan:{i}" for i in range(300)}
    r = leader.client()
    retry(lambda: r.mset({k: "v" for k in want}))
    got = cli(follower, "--scan", "--pattern", "compat:scan:*").split()
    assert len(got) == len(set(got))  # no key twice
    assert set(got) == want


def test_redis_cli_bigkeys_finds_the_biggest_string(nodes):
    leader, _ = nodes
    r = leader.client()
    retry(lambda: r.set("compat:big", "x" * 5000))
    retry(lambda: r.set("compat:small", "x" * 10))
    out = cli(leader, "--bigkeys")
    assert "Biggest string found '\"compat:big\"' has 5000 bytes" in out, out


def run_until_lines(args, want_lines, timeout=CLI_TIMEOUT_S):
    """Start redis-cli (unbuffered), read until want_lines lines pass
    `want_lines`'s test or the timeout, then stop it; the lines read."""
    require_cli()
    proc = subprocess.Popen(["stdbuf", "-o0", REDIS_CLI, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines = []
    try:
        d = Deadline(timeout, f"redis-cli {' '.join(args)} output")
        while not d.expired() and not want_lines(lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
    finally:
        proc.kill()
        proc.communicate(timeout=CLI_TIMEOUT_S)
    return lines


def test_redis_cli_stat_numbers_parse(nodes):
    leader, _ = nodes
    args = ["-h", HOST, "-p", str(leader.client_port), "--stat", "-i", "0.1"]

    def data(lines):
        return [ln for ln in lines if ln[:1].isdigit()]

    lines = run_until_lines(args, lambda ls: len(data(ls)) >= 3)
    rows = data(lines)
    assert len(rows) >= 3, lines
    assert "keys" in "\n".join(lines) and "clients" in "\n".join(lines)
    for row in rows:
        # keys mem clients blocked requests (+delta) connections
        cols = row.split()
        keys, mem, clients, blocked = cols[0], cols[1], cols[2], cols[3]
        assert int(keys) >= 1 and int(clients) >= 1 and int(blocked) == 0
        assert mem[-1] in "BKMG" and float(mem.rstrip("BKMG")) > 0
        assert int(cols[4]) > 0 and cols[5].startswith("(+")
        assert int(cols[6]) >= 1


def test_redis_cli_latency(nodes):
    leader, _ = nodes
    require_cli()
    proc = subprocess.Popen(
        [REDIS_CLI, "-h", HOST, "-p", str(leader.client_port), "--latency",
         "-i", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)  # it prints its summary and ends
        out, err = proc.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=CLI_TIMEOUT_S)
    # Not a tty: "min max avg samples".
    fields = out.split()
    assert len(fields) == 4, (out, err)
    lo, hi, avg, samples = int(fields[0]), int(fields[1]), float(
        fields[2]), int(fields[3])
    assert samples >= 1 and lo <= avg <= hi + 1


def test_hello_auth_with_a_password(cluster):
    node = cluster.start(1, password="s3cret")
    c = Resp3(node)
    try:
        kind, text = c.call("HELLO", "3")
        assert kind == "-" and text.startswith("NOAUTH HELLO must be called")
        kind, text = c.call("GET", "k")
        assert text.startswith("NOAUTH"), text
        kind, text = c.call("HELLO", "3", "AUTH", "default", "wrong")
        assert text.startswith("WRONGPASS"), text
        hello = c.call("HELLO", "3", "AUTH", "default", "s3cret", "SETNAME",
                       "authed")
        assert hello["proto"] == 3, hello
        assert c.call("SET", "k", "v") == ("+", "OK")
        assert "name=authed" in c.call("CLIENT", "INFO")
    finally:
        c.close()
    # redis-py's pool authenticates each connection with AUTH.
    pool = redis.ConnectionPool(host=HOST, port=node.client_port,
                                password="s3cret", decode_responses=True,
                                socket_timeout=SOCKET_TIMEOUT_S)
    try:
        r = redis.Redis(connection_pool=pool)
        assert retry(lambda: r.get("k")) == "v"
        assert isinstance(r.client_id(), int)
    finally:
        pool.disconnect()
