"""A differential test of baton against redis-server 7.0, the protocol
and the connection commands (docs/clients.md): inline commands, quoting
and malformed requests byte for byte; PING, ECHO, SELECT, AUTH, HELLO,
CLIENT, CONFIG GET, INFO, COMMAND and TIME over raw RESP2 and RESP3,
compared reply by reply (redisdiff.py) or, where each server has its own
values (ids, addresses, versions, INFO's numbers), by shape and by the
fields both must agree on. The differences baton intends are listed with
the reason docs/clients.md gives.
"""

import re
import selectors
import socket

import pytest

from conftest import HOST, Cluster, resp

pytest.register_assert_rewrite("redisdiff")
from redisdiff import (BIN, SOCKET_TIMEOUT_S, Conn, both,  # noqa: E402
                       check, compare, info_sections, pairs_of,
                       redis_server, require_redis_server)

# The fixtures redis_port, baton_port and pair.
pytest_plugins = ("redisdiff",)


# ---- the protocol itself ----------------------------------------------------

RAW_QUIET_S = 0.3  # how long a raw exchange waits for more bytes


def raw_exchanges(port, requests):
    """The bytes a server sends back to each request, each on its own new
    connection (all at once), until every one is quiet for RAW_QUIET_S
    (plus b"<closed>" for one it closed)."""
    socks = [socket.create_connection((HOST, port), timeout=SOCKET_TIMEOUT_S)
             for _ in requests]
    out = {s: b"" for s in socks}
    sel = selectors.DefaultSelector()
    try:
        for s, data in zip(socks, requests):
            s.sendall(data)
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        for _ in range(10000):
            ready = sel.select(timeout=RAW_QUIET_S)
            if not ready:
                break
            for key, _ in ready:
                chunk = key.fileobj.recv(1 << 16)
                if not chunk:
                    out[key.fileobj] += b"<closed>"
                    sel.unregister(key.fileobj)
                out[key.fileobj] += chunk
    finally:
        sel.close()
        for s in socks:
            s.close()
    return [out[s] for s in socks]


# Inline commands (redis-cli's and telnet's), quoting, and malformed
# requests, byte for byte.
RAW_SAME = [
    b"PING\r\n", b"ping\n", b"ECHO hello\r\n", b"ECHO \"a b\"\r\n",
    b"ECHO 'a b'\r\n", b"ECHO \"\\x41\\n\\t\"\r\n",
    b"ECHO \"unbalanced\r\n", b"\r\n", b"   \r\n",
    b"SET  raw:a   b\r\nGET raw:a\r\n", b"ECHO \"a\"b\r\n",
    b"*1\r\n$4\r\nPING\r\n", b"*0\r\n", b"*-1\r\n", b"*x\r\n",
    b"*1\r\n$x\r\n", b"*1\r\n$-1\r\n", b"*1\r\n+PING\r\n", b"$4\r\nPING\r\n",
    b":1\r\n", b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n",
    b"*3\r\n$3\r\nSET\r\n$5\r\nraw:b\r\n$3\r\n\x00\r\n\r\n"
    b"*2\r\n$3\r\nGET\r\n$5\r\nraw:b\r\n",
]
# Allowed, with docs/kv.md's and docs/batond.md's reasons.
RAW_ALLOWED = [
    (b"*2\r\n$4\r\nECHO\r\n$3\r\nabcd\r\n",
     b"-ERR Protocol error: bulk argument not followed by CRLF\r\n<closed>",
     "docs/kv.md: baton checks the CRLF after a bulk (Redis skips two "
     "bytes unread)"),
    (b"*70000\r\n",
     b"-ERR Protocol error: invalid multibulk length (70000 arguments "
     b"exceed the limit of 65536)\r\n<closed>",
     "docs/kv.md: at most 65536 arguments (Redis waits for them)"),
    (b"*1\r\n$536870913\r\n",
     b"-ERR bulk of 536870913 bytes exceeds --max-bulk-bytes 16711680; "
     b"closing the connection\r\n<closed>",
     "docs/batond.md: --max-bulk-bytes, named in the refusal"),
]


def test_protocol_bytes(redis_port, baton_port):
    requests = RAW_SAME + [data for data, _, _ in RAW_ALLOWED]
    xs = raw_exchanges(redis_port, requests)
    ys = raw_exchanges(baton_port, requests)
    assert xs[0] == ys[0] == b"+PONG\r\n", (xs[0], ys[0])
    for data, x, y in zip(RAW_SAME, xs, ys):
        assert x == y, (data, x, y)
    for (data, want, _), x, y in zip(RAW_ALLOWED, xs[len(RAW_SAME):],
                                     ys[len(RAW_SAME):]):
        assert x != want and y == want, (data, x, y)


# ---- connection commands ----------------------------------------------------


def test_connection_commands_replies(pair):
    check(pair, [
        ("PING",), ("PING", "a"), ("PING", ""), ("PING", BIN),
        ("PING", "a", "b"), ("ECHO", BIN), ("ECHO", ""), ("ECHO",),
        ("ECHO", "x", "y"), ("SELECT", "0"), ("SELECT", "1"),
        ("SELECT", "x"), ("SELECT", "-1"), ("SELECT", "16"), ("SELECT",),
        ("SELECT", "0", "1"), ("FOO",), ("FOO", "a", "b\r\nc"),
        ("FOO", "x" * 200, "y"), ("FOO", "a" * 100, "b" * 100, "c"),
        (b"F\x00OO", "a\x00b", "c"), ("fOo", ""),
        ("CLIENT",), ("CLIENT", "FOO"), ("CLIENT", "GETNAME"),
        ("CLIENT", "SETNAME", "a b"), ("CLIENT", "SETNAME", "a\nb"),
        ("CLIENT", "SETNAME", "nm"), ("CLIENT", "GETNAME"),
        ("CLIENT", "SETNAME", ""), ("CLIENT", "GETNAME"),
        ("CLIENT", "SETNAME"), ("CLIENT", "SETNAME", "a", "b"),
        ("CLIENT", "GETNAME", "x"), ("CLIENT", "ID", "x"),
        ("CLIENT", "INFO", "x"), ("CLIENT", "KILL", "1.2.3.4:5"),
        ("CLIENT", "KILL", "ID", "999999"), ("CLIENT", "KILL", "ID", "x"),
        ("CLIENT", "KILL", "ID", "0"), ("CLIENT", "KILL", "BOGUS", "x"),
        ("CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "maybe"),
        ("CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "no"),
        ("CLIENT", "KILL", "LADDR", "1.2.3.4:5"),
        ("CLIENT", "KILL"), ("CLIENT", "KILL", "TYPE", "bogus"),
        ("CLIENT", "KILL", "TYPE", "pubsub"),
        ("CLIENT", "KILL", "TYPE", "master"),
        ("CLIENT", "KILL", "USER", "nobody"),
        ("CLIENT", "KILL", "MAXAGE", "x"), ("CLIENT", "KILL", "ID"),
        ("CLIENT", "KILL", "ID", "1", "TYPE"),
        ("CLIENT", "LIST", "TYPE", "bogus"),
        ("CLIENT", "LIST", "TYPE", "master"),
        ("CLIENT", "LIST", "TYPE", "pubsub"),
        ("CLIENT", "LIST", "ID", "x"), ("CLIENT", "LIST", "ID", "0"),
        ("CLIENT", "LIST", "ID", "99999"), ("CLIENT", "LIST", "BOGUS"),
        ("CLIENT", "LIST", "TYPE"), ("CLIENT", "SETINFO", "LIB-NAME", "x"),
        ("CLIENT", "NO-EVICT", "on"), ("CLIENT", "REPLY", "ON"),
        ("CLIENT", "PAUSE", "0"), ("CLIENT", "SETNAME", "x" * 200),
        ("CLIENT", "SETNAME", ""),
        ("CLIENT", "SETINFO", "LIB-NAME", "y" * 100),
        ("CLIENT", "SETINFO", "LIB-VER", "1 2"),
        ("CLIENT", "SETINFO", "BOGUS", "1"), ("CLIENT", "SETINFO", "LIB-NAME"),
        ("CLIENT", "LIST", "ID", "1", "2", "x"),
        ("CLIENT", "LIST", "TYPE", "normal", "ID", "1"),
        ("CLIENT", "KILL", "ADDR", "1.1.1.1:1", "ID", "5"),
        ("CLIENT", "KILL", "MAXAGE", "-1"),
        ("CLIENT", "KILL", "MAXAGE", "100000"),
        ("CLIENT", "KILL", "SKIPME", "yes"), ("CLIENT", "KILL", "LADDR", "x"),
        ("CLIENT", "KILL", "USER", "default"), ("ECHO", "a" * 1000),
        ("PING", "a", "b", "c"),
        ("HELLO", "4"), ("HELLO", "1"), ("HELLO", "0"), ("HELLO", "x"),
        ("HELLO", "3", "BOGUS"), ("HELLO", "3", "SETNAME", "a b"),
        ("HELLO", "2", "SETNAME"), ("HELLO", "3", "AUTH", "default"),
        ("AUTH", "x"), ("AUTH", "default", "x"), ("AUTH", "a", "b"),
        ("HELLO", "3", "AUTH", "anyname", "x"),
        ("AUTH",), ("AUTH", "a", "b", "c"),
        ("COMMAND", "COUNT", "x"), ("COMMAND", "FOO"),
        ("COMMAND", "INFO", "nosuch"), ("COMMAND", "DOCS", "nosuch"),
        ("COMMAND", "GETKEYS", "get", "a"), ("COMMAND", "LIST", "x"),
        ("COMMAND", "LIST", "FILTERBY", "PATTERN", "get"),
        ("CONFIG", "GET", "nosuch"), ("CONFIG", "GET"), ("CONFIG",),
        ("CONFIG", "SET", "x", "y"), ("CONFIG", "GET", "save"),
        ("CONFIG", "GET", "databases"), ("CONFIG", "GET", "SAVE"),
        ("CONFIG", "GET", "save", "appendonly"), ("CONFIG", "GET", "sav?"),
        ("CONFIG", "GET", "[sd]a*s*"), ("CONFIG", "GET", "save", "save"),
        ("CONFIG", "GET", "nosuch", "databases"), ("INFO", "nosuch"),
        ("TIME", "x"), ("EXEC",), ("DISCARD",), ("WATCH",),
        ("UNWATCH", "x"), ("MULTI", "x"), ("DBSIZE",),
    ])


# HELLO's fields whose values are each server's own: the version it
# reports (Redis's real one; baton's 7.0.0 plus baton_version,
# docs/clients.md) and the connection's id.
HELLO_OWN_VALUES = {b"version", b"id"}


def test_hello_and_client_id(pair):
    r, b = pair
    for proto in ("3", "2", "3"):
        x, y = both(pair, "HELLO", proto)
        assert x[0] == y[0], (x, y)  # a map in RESP3, an array in RESP2
        rx, by = pairs_of(x), pairs_of(y)
        # baton adds one field at the end: baton_version (docs/clients.md)
        assert by[-1][0] == ("bulk", b"baton_version"), by
        assert [k for k, _ in rx] == [k for k, _ in by[:-1]], (rx, by)
        for (k, vx), (_, vy) in zip(rx, by):
            if k[1] in HELLO_OWN_VALUES:
                assert vx[0] == vy[0], (k, vx, vy)
            else:
                assert vx == vy, (k, vx, vy)
        ids = both(pair, "CLIENT", "ID")
        assert ids[0][0] == ids[1][0] == "int", ids
        assert dict(by)[("bulk", b"id")] == ids[1]
    x, y = both(pair, "HELLO")  # no version: the current one
    assert x[0] == y[0] == "map"


def client_fields(line):
    return [f.split(b"=", 1)[0] for f in line.split()]


def test_client_info_list_and_kill(pair, redis_port, baton_port):
    r, b = pair
    x, y = both(pair, "CLIENT", "INFO")
    assert x[0] == y[0] and x[0] in ("bulk", "verbatim"), (x, y)
    if x[0] == "verbatim":  # RESP3: "txt:" and the text
        assert x[1][:4] == y[1][:4] == b"txt:", (x, y)
        x, y = ("bulk", x[1][4:]), ("bulk", y[1][4:])
    fr, fb = client_fields(x[1]), client_fields(y[1])
    # baton's line is Redis 7.2's: 7.0's fields in their order, then
    # lib-name and lib-ver (docs/clients.md).
    assert fb == fr + [b"lib-name", b"lib-ver"], (fr, fb)
    assert x[1].endswith(b"\n") and y[1].endswith(b"\n")
    # A second connection on each: listed, then killed by id.
    others = [Conn(redis_port), Conn(baton_port)]
    try:
        ids = [o.call("CLIENT", "ID")[1] for o in others]
        for c, o, i in zip((r, b), others, ids):
            assert o.call("CLIENT", "SETNAME", "other") == ("simple", b"OK")
            listed = c.call("CLIENT", "LIST")
            text = listed[1][4:] if listed[0] == "verbatim" else listed[1]
            lines = text.splitlines()
            assert len(lines) >= 2 and any(
                f"id={i} ".encode() in ln and b" name=other " in ln
                for ln in lines), text
            one = c.call("CLIENT", "LIST", "ID", str(i))
            one = one[1][4:] if one[0] == "verbatim" else one[1]
            assert one.count(b"\n") == 1 and f"id={i} ".encode() in one
        kills = [c.call("CLIENT", "KILL", "ID", str(i))
                 for c, i in zip((r, b), ids)]
        assert kills[0] == kills[1] == ("int", 1), kills
        for o in others:
            o.sock.sendall(resp("PING"))
            assert o.sock.recv(64) == b"", "a killed connection is closed"
        x, y = both(pair, "CLIENT", "KILL", "ID", str(max(ids) + 1000))
        assert x == y == ("int", 0)
        x, y = both(pair, "CLIENT", "KILL", "ADDR", "127.0.0.1:1")
        assert x == y == ("int", 0)
        # A connection killing itself: skipped unless SKIPME no, then it
        # gets its reply and is closed.
        selves = [Conn(redis_port), Conn(baton_port)]
        others += selves
        for me in selves:
            own = str(me.call("CLIENT", "ID")[1])
            assert me.call("CLIENT", "KILL", "ID", own) == ("int", 0)
            assert me.call("CLIENT", "KILL", "ID", own, "SKIPME",
                           "no") == ("int", 1)
            assert me.sock.recv(64) == b"", "a killed connection is closed"
    finally:
        for o in others:
            o.close()


def test_time(pair):
    x, y = both(pair, "TIME")
    for reply in (x, y):
        assert reply[0] == "array" and len(reply[1]) == 2, reply
        assert all(k == "bulk" and v.isdigit() for k, v in reply[1]), reply
    # Both are this machine's clock.
    assert abs(int(x[1][0][1]) - int(y[1][0][1])) <= 5, (x, y)


# INFO's sections Redis has and baton does not (docs/clients.md, "INFO").
REDIS_ONLY_SECTIONS = {b"cpu", b"modules", b"errorstats", b"cluster",
                       b"commandstats", b"latencystats"}
# And baton's own (docs/clients.md): identity, versions, migration.
BATON_ONLY_SECTIONS = {b"identity", b"versions", b"migration"}
# Fields whose value is of another kind on baton (docs/clients.md):
# role is the Raft role; mem_allocator libc; multiplexing_api libuv.
INFO_OWN_TEXT = {b"role", b"mem_allocator", b"multiplexing_api",
                 b"redis_version", b"maxmemory_policy"}


def is_number(v):
    return re.fullmatch(rb"-?\d+(\.\d+)?", v) is not None


def test_info_sections(pair):
    names = ["server", "clients", "memory", "persistence", "stats",
             "replication", "keyspace"]
    r, b = pair
    for c in (r, b):
        c.call("SET", "info:key", "v")
    for name in names + ["nosuch"]:
        x, y = both(pair, "INFO", name)
        sx, sy = info_sections(x), info_sections(y)
        assert set(sx) == set(sy), (name, set(sx), set(sy))
        for sec in sx:
            # Every field of Redis's that baton has is of the same kind.
            for k in set(sx[sec]) & set(sy[sec]) - INFO_OWN_TEXT:
                assert is_number(sx[sec][k]) == is_number(sy[sec][k]), (
                    sec, k, sx[sec][k], sy[sec][k])
    for names in (["SERVER"], ["server", "CLIENTS"], ["server", "nosuch"],
                  ["server", "server"], ["Keyspace", "stats", "memory"]):
        x, y = both(pair, "INFO", *names)
        assert set(info_sections(x)) == set(info_sections(y)), names
    for name in REDIS_ONLY_SECTIONS:
        x, y = both(pair, "INFO", name.decode())
        assert set(info_sections(x)) == {name} and info_sections(y) == {}
    # What redis-cli --stat and the docs promise, present in both.
    x, y = both(pair, "INFO", "clients", "memory", "stats", "keyspace")
    sx, sy = info_sections(x), info_sections(y)
    assert set(sx) == set(sy) == {b"clients", b"memory", b"stats",
                                  b"keyspace"}
    for sec, fields in {
            b"clients": [b"connected_clients", b"blocked_clients",
                         b"maxclients", b"tracking_clients"],
            b"memory": [b"used_memory", b"used_memory_human",
                        b"used_memory_rss", b"used_memory_peak",
                        b"maxmemory", b"maxmemory_policy"],
            b"stats": [b"total_connections_received",
                       b"total_commands_processed",
                       b"instantaneous_ops_per_sec", b"expired_keys",
                       b"evicted_keys", b"keyspace_hits",
                       b"keyspace_misses", b"rejected_connections"],
            b"keyspace": [b"db0"]}.items():
        for f in fields:
            assert f in sx[sec] and f in sy[sec], (sec, f)
    assert sx[b"keyspace"][b"db0"].startswith(b"keys=1,expires=0,")
    assert sy[b"keyspace"][b"db0"].startswith(b"keys=1,expires=0,")
    # Fields whose values do not depend on the server's load or build.
    x, y = both(pair, "INFO", "everything")
    sx, sy = info_sections(x), info_sections(y)
    for sec, f in [(b"server", b"redis_mode"), (b"server", b"arch_bits"),
                   (b"clients", b"blocked_clients"),
                   (b"clients", b"tracking_clients"),
                   # maxmemory differs: baton's default bound is half
                   # the node's memory (docs/operations.md, "Memory").
                   (b"memory", b"maxmemory_policy"),
                   (b"persistence", b"loading"),
                   (b"stats", b"evicted_keys"),
                   (b"stats", b"pubsub_channels"),
                   (b"stats", b"pubsub_patterns"),
                   (b"replication", b"connected_slaves")]:
        assert sx[sec].get(f) == sy[sec].get(f), (sec, f, sx[sec].get(f),
                                                  sy[sec].get(f))
    for every in ("all", "everything", "default", None):
        x, y = both(pair, *(["INFO"] + ([every] if every else [])))
        sx, sy = set(info_sections(x)), set(info_sections(y))
        # baton's default is every section (docs/clients.md)
        assert sx - REDIS_ONLY_SECTIONS <= sy, (every, sx, sy)
        assert sy - sx <= BATON_ONLY_SECTIONS | {b"keyspace"}, (every, sy)


def test_command_table(pair):
    x, y = both(pair, "COMMAND", "COUNT")
    assert x[0] == y[0] == "int" and 0 < y[1] < x[1], (x, y)
    x, y = both(pair, "COMMAND", "LIST")
    assert x[0] == y[0] == "array"
    redis_names = {v for _, v in x[1]}
    baton_names = [v for _, v in y[1]]
    assert len(baton_names) == both(pair, "COMMAND", "COUNT")[1][1]
    # Every command baton lists is Redis's, but its own BATON.* ones.
    mine = [n for n in baton_names if not n.startswith(b"baton.")]
    assert set(mine) <= redis_names, set(mine) - redis_names
    # Each one's arity and key positions as Redis 7.0 has them; flags
    # and ACL categories are baton's own (docs/clients.md, "COMMAND").
    x, y = both(pair, "COMMAND", "INFO", *mine)
    assert x[0] == y[0] == "array" and len(x[1]) == len(y[1]) == len(mine)
    wrong = []
    for name, rx, by in zip(mine, x[1], y[1]):
        assert rx[0] == by[0] == "array" and len(rx[1]) == len(by[1]) == 10
        assert rx[1][0] == by[1][0], name
        if rx[1][1] != by[1][1]:
            wrong.append((name, "arity", rx[1][1], by[1][1]))
        if rx[1][3:6] != by[1][3:6]:
            wrong.append((name, "keys", rx[1][3:6], by[1][3:6]))
        # Subcommands: baton lists none (docs/clients.md), Redis a
        # container's (CLIENT, COMMAND, CONFIG, PUBSUB) as an array.
        if rx[1][9][0] == "array" and rx[1][9][1]:
            rx = (rx[0], rx[1][:9] + (by[1][9],))
        if [v[0] for v in rx[1]] != [v[0] for v in by[1]]:
            wrong.append((name, "types", [v[0] for v in rx[1]],
                          [v[0] for v in by[1]]))
    assert not wrong, "\n".join(map(repr, wrong))
    # COMMAND DOCS: a map per command with Redis's fields.
    x, y = both(pair, "COMMAND", "DOCS", "get", "set", "nosuch")
    dx, dy = dict(pairs_of(x)), dict(pairs_of(y))
    assert set(dx) == set(dy) == {("bulk", b"get"), ("bulk", b"set")}
    for k in dx:
        fx, fy = dict(pairs_of(dx[k])), dict(pairs_of(dy[k]))
        for f in (b"summary", b"since", b"group", b"complexity",
                  b"arguments"):
            assert ("bulk", f) in fx and ("bulk", f) in fy, (k, f)


# CLIENT LIST/INFO fields whose values both servers must agree on (the
# others are addresses, ids, ages, buffer sizes: each server's own).
CLIENT_SAME_FIELDS = [b"name", b"db", b"flags", b"sub", b"psub", b"ssub",
                      b"multi", b"cmd", b"user", b"redir", b"resp"]


def client_fields_of(watcher, client_id):
    """The CLIENT LIST fields of one connection, as another sees them."""
    reply = watcher.call("CLIENT", "LIST", "ID", str(client_id))
    text = reply[1][4:] if reply[0] == "verbatim" else reply[1]
    return dict(f.split(b"=", 1) for f in text.split())


def test_client_list_values(pair, redis_port, baton_port):
    r, b = pair
    watchers = [Conn(redis_port), Conn(baton_port)]
    ids = [c.call("CLIENT", "ID")[1] for c in (r, b)]
    steps = [[], [("CLIENT", "SETNAME", "app-1")], [("GET", "x")],
             [("MULTI",)], [("SET", "x", "1"), ("GET", "x")], [("EXEC",)],
             [("HELLO", "2")], [("HELLO", "3", "SETNAME", "n3")],
             [("CLIENT", "SETNAME", "")]]
    try:
        for step in steps:
            infos = []
            for c, w, i in zip((r, b), watchers, ids):
                if step:
                    c.pipeline(step)
                infos.append(client_fields_of(w, i))
            x, y = infos
            for f in CLIENT_SAME_FIELDS:
                assert x.get(f) == y.get(f), (step, f, x.get(f), y.get(f))
    finally:
        for w in watchers:
            w.close()


def test_info_keyspace_line(pair):
    r, b = pair
    for c in (r, b):
        c.pipeline([("SET", "ks:a", "1"), ("SET", "ks:b", "2", "EX", "10000"),
                    ("HSET", "ks:h", "f", "v"), ("PEXPIRE", "ks:h", "9999999"),
                    ("SET", "ks:c", "3")])
    x, y = both(pair, "INFO", "keyspace")
    kx = info_sections(x)[b"keyspace"][b"db0"]
    ky = info_sections(y)[b"keyspace"][b"db0"]
    # avg_ttl: Redis samples it, baton does not track it (docs/clients.md)
    assert kx.split(b",")[:2] == ky.split(b",")[:2] == [b"keys=4",
                                                        b"expires=2"]
    assert ky.endswith(b",avg_ttl=0"), ky


PASSWORD = "diff-secret"


def test_authentication(tmp_path):
    """With a password (Redis's requirepass, baton's --password): the
    refusals before AUTH, AUTH and HELLO ... AUTH, byte for byte."""
    require_redis_server()
    (tmp_path / "redis").mkdir()
    cluster = Cluster(tmp_path / "baton")
    try:
        with redis_server(tmp_path / "redis", "--requirepass",
                          PASSWORD) as rport:
            leader = cluster.start(1, password=PASSWORD)
            cases = [
                [("GET", "a"), ("PING",), ("CLIENT", "ID"), ("HELLO",),
                 ("HELLO", "3"), ("MULTI",), ("NOSUCH",), ("ECHO", "x"),
                 ("AUTH", "wrong"), ("AUTH", "default", "wrong"),
                 # A user that does not exist, with the right password.
                 ("AUTH", "anyname", PASSWORD), ("GET", "a"),
                 ("AUTH", PASSWORD), ("GET", "a"), ("AUTH", PASSWORD),
                 ("AUTH", "default", PASSWORD)],
                [("HELLO", "3", "AUTH", "anyname", PASSWORD), ("GET", "a"),
                 ("HELLO", "3", "AUTH", "default", "wrong"),
                 ("HELLO", "3", "AUTH", "default"),
                 ("HELLO", "2", "AUTH", "default", PASSWORD, "SETNAME", "a"),
                 ("CLIENT", "GETNAME"), ("GET", "a")],
                [("QUIT",)],
            ]
            for commands in cases:
                r, b = Conn(rport), Conn(leader.client_port)
                try:
                    diffs = compare(r, b, commands, "auth")
                    assert not diffs, "\n".join(diffs)
                finally:
                    r.close()
                    b.close()
    finally:
        cluster.stop_all()


def test_pubsub_refused(redis_port, baton_port):
    """docs/clients.md: pub/sub is refused with a reason (Redis runs it)."""
    for cmd in (("SUBSCRIBE", "ch"), ("PSUBSCRIBE", "c*"),
                ("SSUBSCRIBE", "ch"), ("UNSUBSCRIBE",), ("PUNSUBSCRIBE",),
                ("PUBLISH", "ch", "m"), ("PUBSUB", "CHANNELS")):
        r, b = Conn(redis_port), Conn(baton_port)
        try:
            x, y = r.call(*cmd), b.call(*cmd)
        finally:
            r.close()
            b.close()
        assert x[0] != "error", (cmd, x)
        assert y == ("error", b"ERR baton does not implement pub/sub ('"
                     + cmd[0].lower().encode() + b"'): it is a replicated "
                     b"key-value store; use a message broker for pub/sub"), (
                         cmd, y)
