"""A differential test of baton against redis-server 7.0: the same commands
sent to both over raw RESP (so reply types are compared exactly: simple
string vs bulk, integer vs bulk, null vs empty array, RESP3 maps, sets,
doubles and nulls after HELLO 3), every reply compared.

Two kinds of sequences: hand-written edge cases (wrong arity, WRONGTYPE,
bad and overflowing numbers, GETRANGE/SETRANGE ranges, expiry in the past,
binary and empty keys and values, RENAME to itself, COPY onto a key, SCAN's
options, the connection commands), and seeded random sequences over the
key-value commands of docs/kv.md (the seed is in every failure message).

Some differences are intended; each is listed in ALLOWED (or in the
connection tests) with the reason docs/clients.md or docs/kv.md gives.
Everything else is a bug.

redis-server runs on a port the test picks, on 127.0.0.1, with no
persistence, in the test's tmp dir, and is killed by its PID at the end.
"""

import contextlib
import os
import random
import re
import selectors
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import (HOST, POLL_S, Cluster, Deadline, _die_with_parent,
                      free_ports, resp)

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
SOCKET_TIMEOUT_S = 10.0
START_TIMEOUT_S = 10.0
MACHINE_VERSION_TIMEOUT_S = 30.0
BATCH = 100  # commands pipelined at once
RANDOM_SEEDS = tuple(range(1, 9))
RANDOM_COMMANDS = 2000  # per seed
TTL_SLACK_MS = 5000  # TTLs read a little apart on the two servers


# ---- a raw RESP connection --------------------------------------------------


class Conn:
    """Replies as tagged tuples, so that a bulk "OK" and a simple OK, an
    integer and a bulk number, a null bulk, a null array and RESP3's null
    all differ: ("simple", b), ("error", b), ("int", n), ("bulk", b),
    ("nullbulk",), ("array", (...)), ("nullarray",), ("null",),
    ("map", ((k, v), ...)), ("set", (...)), ("double", b), ("bool", b),
    ("verbatim", b), ("bignum", b), ("push", (...))."""

    def __init__(self, port):
        self.sock = socket.create_connection((HOST, port),
                                             timeout=SOCKET_TIMEOUT_S)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        assert chunk, "the server closed the connection"
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        simple = {b"+": "simple", b"-": "error", b",": "double",
                  b"#": "bool", b"(": "bignum"}
        if kind in simple:
            return (simple[kind], rest)
        if kind == b":":
            return ("int", int(rest))
        if kind == b"_":
            return ("null",)
        if kind in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return ("nullbulk",)
            return ("bulk" if kind == b"$" else "verbatim", self._exact(n))
        if kind in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return ("nullarray",)
            name = {b"*": "array", b"~": "set", b">": "push"}[kind]
            return (name, tuple(self.read() for _ in range(n)))
        if kind == b"%":
            n = int(rest)
            return ("map", tuple((self.read(), self.read())
                                 for _ in range(n)))
        if kind == b"|":  # an attribute: skip it, the reply follows
            for _ in range(2 * int(rest)):
                self.read()
            return self.read()
        raise AssertionError(f"unexpected reply line {line!r}")

    def pipeline(self, commands):
        self.sock.sendall(b"".join(resp(*c) for c in commands))
        return [self.read() for _ in commands]

    def call(self, *args):
        return self.pipeline([args])[0]


# ---- the two servers ----------------------------------------------------------


def require_redis_server():
    if not os.path.exists(REDIS_SERVER):
        pytest.skip(f"{REDIS_SERVER} not found (scripts/setup installs "
                    "redis-server)")
    out = subprocess.run([REDIS_SERVER, "--version"], capture_output=True,
                         text=True, timeout=10).stdout
    if not re.search(r"v=7\.", out):
        pytest.skip(f"the reference must be redis-server 7: {out.strip()}")


@contextlib.contextmanager
def redis_server(d, *extra):
    """A throwaway redis-server 7 on a free port, its files in d: yields
    the port; killed by its PID."""
    port = free_ports(1)[0]
    with open(d / "redis.log", "wb") as log:
        proc = subprocess.Popen(
            [REDIS_SERVER, "--save", "", "--appendonly", "no", "--port",
             str(port), "--bind", HOST, "--dir", str(d), *extra],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            preexec_fn=_die_with_parent)
    try:
        wait = Deadline(START_TIMEOUT_S, "redis-server to answer PING")
        while True:
            try:
                c = Conn(port)
                ok = c.call("PING")[0] in ("simple", "error")  # NOAUTH
                c.close()
                if ok:
                    break
            except OSError:
                pass
            if wait.expired():
                wait.fail((d / "redis.log").read_text(errors="replace"))
            time.sleep(POLL_S)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory):
    require_redis_server()
    with redis_server(tmp_path_factory.mktemp("redis")) as port:
        yield port


@pytest.fixture(scope="module")
def baton_port(tmp_path_factory):
    """The leader of a 3-node cluster at the newest machine version."""
    c = Cluster(tmp_path_factory.mktemp("baton"))
    try:
        leader = c.start(3)
        d = Deadline(MACHINE_VERSION_TIMEOUT_S, "the newest machine version")
        while True:
            v = leader.client().info("versions")
            if v["machine_version"] == v["machine_max"]:
                break
            if d.expired():
                d.fail(str(v))
            time.sleep(POLL_S)
        yield c.leader().client_port
    finally:
        c.stop_all()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def pair(request, redis_port, baton_port):
    """(redis, baton) connections in RESP2 or (after HELLO 3) RESP3, both
    databases emptied first."""
    r, b = Conn(redis_port), Conn(baton_port)
    for c in (r, b):
        if request.param == 3:
            assert c.call("HELLO", "3")[0] == "map"
        assert c.call("FLUSHALL") == ("simple", b"OK")
    try:
        yield r, b
    finally:
        r.close()
        b.close()


# ---- comparing --------------------------------------------------------------


def name_of(cmd):
    return (cmd[0] if isinstance(cmd[0], str) else cmd[0].decode()).lower()


def arg(cmd, i):
    a = cmd[i]
    return a if isinstance(a, bytes) else str(a).encode()


def sorted_items(reply):
    if reply[0] not in ("array", "set"):
        return reply
    return (reply[0], tuple(sorted(reply[1])))


def sorted_pairs(reply):
    """HGETALL's field-value pairs in a canonical order (Redis keeps a small
    hash's insertion order, baton the fields' canonical order; docs/kv.md,
    "Hashes": clients must rely on neither)."""
    if reply[0] == "array":
        items = reply[1]
        return ("array", tuple(sorted(zip(items[0::2], items[1::2]))))
    if reply[0] == "map":
        return ("map", tuple(sorted(reply[1])))
    return reply


def near(a, b, slack):
    return (a[0] == b[0] == "int" and a[1] >= 0 and b[1] >= 0 and
            abs(a[1] - b[1]) <= slack)


def normalize(cmd, reply):
    """Replies whose order is not defined by Redis, made comparable."""
    name = name_of(cmd)
    if name in ("keys", "hkeys", "hvals", "smembers"):
        return sorted_items(reply)
    if name == "hgetall":
        return sorted_pairs(reply)
    return reply


# Intended differences: (command, predicate(cmd, redis, baton), reason).
# Each reason is what docs/kv.md or docs/clients.md says.
def _is_error(reply, prefix=b""):
    return reply[0] == "error" and reply[1].startswith(prefix)


ALLOWED = [
    ("select", lambda c, r, b: arg(c, 1).isdigit() and arg(c, 1) != b"0"
     and r == ("simple", b"OK") and b == (
         "error", b"ERR DB index is out of range (baton has database 0 "
         b"only)"),
     "docs/clients.md: baton has database 0 only; SELECT of another "
     "database is refused"),
    ("copy", lambda c, r, b: any(arg(c, i).lower() == b"db" for i in
                                 range(3, len(c)))
     and b == ("error", b"ERR DB index is out of range"),
     "docs/kv.md: COPY ... DB n with n other than 0 is refused (baton "
     "has one database; Redis would copy to that database)"),
    ("setrange", lambda c, r, b: _is_error(r, b"WRONGTYPE") and b == (
        "error", b"ERR string exceeds maximum allowed size "
        b"(proto-max-bulk-len)"),
     "docs/kv.md: kv_check refuses before the map is read, so a "
     "SETRANGE past the limit answers that even on a hash"),
    ("incrbyfloat", lambda c, r, b: _is_error(r, b"WRONGTYPE") and b == (
        "error", b"ERR value is not a valid float"),
     "docs/kv.md: kv_check refuses before the map is read, so a bad "
     "increment answers that even on a hash"),
    ("hscan", lambda c, r, b: b"novalues" in (arg(c, i).lower() for i in
                                              range(3, len(c)))
     and r == ("error", b"ERR syntax error"),
     "docs/kv.md: HSCAN takes Redis 7.4's NOVALUES (fields only), which "
     "7.0 refuses"),
]


def _sub(c):
    return arg(c, 1).upper() if len(c) > 1 else b""


def _config_values(reply):
    """CONFIG GET's {name: value} (bytes), from its flat array or its map;
    None for another reply."""
    if reply[0] == "map":
        return {k[1]: v[1] for k, v in reply[1]}
    if reply[0] == "array":
        return {k[1]: v[1] for k, v in zip(reply[1][0::2], reply[1][1::2])}
    return None


CLIENT_NOT_IMPLEMENTED = {b"PAUSE", b"UNPAUSE", b"REPLY", b"TRACKING",
                          b"TRACKINGINFO", b"GETREDIR", b"NO-EVICT",
                          b"NO-TOUCH", b"CACHING", b"UNBLOCK", b"HELP"}
COMMAND_NOT_IMPLEMENTED = {b"GETKEYS", b"GETKEYSANDFLAGS", b"HELP"}

ALLOWED += [
    ("*", lambda c, r, b: _is_error(r) and _is_error(b) and
     b[1].startswith(r[1] + b" (") and b[1].endswith(b")"),
     "docs/clients.md: some refusals add, in parentheses, what baton "
     "takes instead"),
    ("client", lambda c, r, b: _sub(c) == b"SETINFO" and b == (
        "simple", b"OK") and _is_error(r, b"ERR unknown subcommand"),
     "docs/clients.md: CLIENT SETINFO is Redis 7.2's (redis-py sends it)"),
    ("client", lambda c, r, b: _is_error(
        b, b"ERR unknown CLIENT subcommand or wrong number of arguments "
        b"for '") and (_sub(c) in CLIENT_NOT_IMPLEMENTED or
                       _is_error(r, b"ERR unknown subcommand")),
     "docs/clients.md: CLIENT PAUSE, REPLY, TRACKING, NO-EVICT ... are "
     "not implemented; an unknown subcommand's error lists baton's"),
    ("command", lambda c, r, b: _is_error(
        b, b"ERR unknown COMMAND subcommand '") and (
            _sub(c) in COMMAND_NOT_IMPLEMENTED or
            _is_error(r, b"ERR unknown subcommand")),
     "docs/clients.md: COMMAND GETKEYS is not implemented; an unknown "
     "subcommand's error lists baton's"),
    ("command", lambda c, r, b: _sub(c) == b"LIST" and len(c) > 2 and
     b == ("error", b"ERR syntax error (baton's COMMAND LIST takes no "
           b"FILTERBY)"),
     "docs/clients.md: COMMAND LIST takes no FILTERBY"),
    ("config", lambda c, r, b: _sub(c) != b"GET" and b == (
        "error", b"ERR baton supports CONFIG GET only"),
     "docs/clients.md: CONFIG GET only"),
    ("client", lambda c, r, b: _sub(c) in (b"LIST", b"INFO") and
     b[0] == "bulk" and r == ("verbatim", b"txt:" + b[1]),
     "docs/clients.md: in RESP3 CLIENT INFO and CLIENT LIST are bulk "
     "strings, not verbatim strings"),
    ("info", lambda c, r, b: b[0] == "bulk" and r == ("verbatim",
                                                      b"txt:" + b[1]),
     "docs/clients.md: in RESP3 INFO is a bulk string, not a verbatim "
     "string"),
    ("config", lambda c, r, b: _sub(c) == b"GET" and r[0] == b[0] and
     _config_values(r) is not None and
     _config_values(r).keys() == _config_values(b).keys() and all(
         v == _config_values(b)[k] for k, v in _config_values(r).items()
         if k not in (b"databases", b"appendonly")),
     "docs/clients.md: CONFIG GET answers baton's own values (databases "
     "1: one database; appendonly yes: every write is in the log)"),
    ("auth", lambda c, r, b: len(c) == 3 and arg(c, 1) != b"default" and
     r == ("error", b"WRONGPASS invalid username-password pair or user "
           b"is disabled.") and b == ("simple", b"OK"),
     "docs/clients.md: AUTH ignores the user name (one user, default); "
     "without --password any password is taken, as Redis's default user"),
    ("scan", lambda c, r, b: len(c) > 1 and b == (
        "error", b"ERR invalid cursor") and r != b and not arg(c, 1).isdigit(),
     "docs/kv.md: a cursor is a plain decimal (Redis's strtoul also "
     "takes a sign, or an empty text or one starting with a NUL as 0)"),
    ("hscan", lambda c, r, b: len(c) > 2 and b == (
        "error", b"ERR invalid cursor") and r != b and not arg(c, 2).isdigit(),
     "docs/kv.md: a cursor is a plain decimal (as SCAN's)"),
]


def hello_alike(r, b):
    """HELLO's replies: the same fields and values, but for the version
    (baton reports 7.0.0), the connection's id, and baton_version added at
    the end (docs/clients.md)."""
    if r[0] != b[0] or r[0] not in ("map", "array"):
        return False
    rx = list(r[1]) if r[0] == "map" else list(zip(r[1][0::2], r[1][1::2]))
    by = list(b[1]) if b[0] == "map" else list(zip(b[1][0::2], b[1][1::2]))
    if not by or by[-1][0] != ("bulk", b"baton_version"):
        return False
    by = by[:-1]
    return len(rx) == len(by) and all(
        kx == ky and (vx == vy or (kx[1] in (b"version", b"id") and
                                   vx[0] == vy[0]))
        for (kx, vx), (ky, vy) in zip(rx, by))


ALLOWED.append(("hello", lambda c, r, b: hello_alike(r, b),
                "docs/clients.md: HELLO says version 7.0.0 and adds "
                "baton_version; ids are each server's"))


def allowed(cmd, r, b):
    name = name_of(cmd)
    for n, pred, reason in ALLOWED:
        if n in (name, "*") and pred(cmd, r, b):
            return reason
    return None


def full_scan(c, cmd):
    """A whole SCAN or HSCAN (cmd's cursor replaced by each next one) as
    the set of what it returned: cursors are the server's own."""
    name = name_of(cmd)
    at = 2 if name == "hscan" else 1
    cursor, seen = b"0", set()
    for _ in range(10000):
        reply = c.call(*cmd[:at], cursor, *cmd[at + 1:])
        if reply[0] != "array":
            return reply
        (kind, cursor), (_, items) = reply[1]
        assert kind == "bulk", reply
        if name == "hscan" and not any(arg(cmd, i).lower() == b"novalues"
                                       for i in range(3, len(cmd))):
            items = tuple(zip(items[0::2], items[1::2]))
        seen.update(items)
        if cursor == b"0":
            return ("whole scan", tuple(sorted(seen)))
    raise AssertionError(f"{cmd!r} did not end in 10000 calls")


def whole(cmd):
    """A SCAN or HSCAN from cursor 0: compared as a whole iteration."""
    name = name_of(cmd)
    return ((name == "scan" and len(cmd) > 1 and arg(cmd, 1) == b"0") or
            (name == "hscan" and len(cmd) > 2 and arg(cmd, 2) == b"0"))


def dbsize(c):
    """DBSIZE after a whole SCAN: Redis 7.0 counts a key whose time has
    passed (SET ... PXAT 1) until its expiry cycle or a lookup removes it,
    and a SCAN looks every key up; baton deletes such a key at once
    (docs/kv.md, "Expiry"), so its DBSIZE needs no SCAN."""
    full_scan(c, ("SCAN", "0", "COUNT", "1000"))
    return c.call("DBSIZE")


def replies(c, batch):
    """batch's replies from c: plain commands pipelined, whole scans and
    DBSIZE one by one in their place."""
    out, pending = [], []
    in_multi = False  # queued commands are sent as they are
    for cmd in batch + [None]:
        if cmd is not None and name_of(cmd) in ("multi", "exec", "discard"):
            in_multi = name_of(cmd) == "multi"
        plain_dbsize = cmd is not None and len(cmd) == 1 and \
            name_of(cmd) == "dbsize" and not in_multi
        if cmd is None or (whole(cmd) and not in_multi) or plain_dbsize:
            out += c.pipeline(pending) if pending else []
            pending = []
            if plain_dbsize:
                out.append(dbsize(c))
            elif cmd is not None:
                out.append(full_scan(c, cmd))
        else:
            pending.append(cmd)
    return out


def compare(r, b, commands, where):
    """Send commands to both, pipelined in batches; every difference that
    ALLOWED does not explain, as readable lines."""
    diffs = []
    queued = None  # the commands since MULTI, while one is open
    for first in range(0, len(commands), BATCH):
        batch = commands[first:first + BATCH]
        rr = replies(r, batch)
        br = replies(b, batch)
        for i, (cmd, x, y) in enumerate(zip(batch, rr, br)):
            name = name_of(cmd)
            if name == "exec" and queued is not None and \
                    x[0] == y[0] == "array" and len(x[1]) == len(y[1]) == \
                    len(queued):
                ok = all(same(c, xe, ye)
                         for c, xe, ye in zip(queued, x[1], y[1]))
            else:
                ok = same(cmd, x, y)
            if name == "multi" and x == ("simple", b"OK"):
                queued = []
            elif name in ("exec", "discard"):
                queued = None
            elif queued is not None and x == ("simple", b"QUEUED"):
                queued.append(cmd)
            if not ok:
                diffs.append(f"{where} #{first + i}: {cmd!r}\n"
                             f"    redis: {x!r}\n    baton: {y!r}")
    return diffs


def same(cmd, x, y):
    """Are Redis's reply x and baton's y to cmd the same, but for what the
    test allows?"""
    x, y = normalize(cmd, x), normalize(cmd, y)
    if x == y:
        return True
    name = name_of(cmd)
    if name in ("ttl", "pttl", "expiretime", "pexpiretime") and near(
            x, y, TTL_SLACK_MS // (1000 if name in ("ttl", "expiretime")
                                   else 1) + 1):
        return True
    return allowed(cmd, x, y) is not None


def check(pair, commands, where="case"):
    r, b = pair
    diffs = compare(r, b, commands, where)
    assert not diffs, "\n".join([f"{len(diffs)} differences"] + diffs[:60])


# ---- hand-written edge cases ------------------------------------------------

BIG = b"9223372036854775807"
SMALL = b"-9223372036854775808"
BIN = b"\x00\xff\r\n\x01 key"


def test_strings_and_numbers(pair):
    check(pair, [
        ("SET", "s", "v"), ("GET", "s"), ("GET", "nokey"), ("SET", "", ""),
        ("GET", ""), ("STRLEN", ""), ("EXISTS", "", "s", "s", "x"),
        ("SET", BIN, BIN), ("GET", BIN), ("STRLEN", BIN), ("MGET", BIN, "s",
                                                           "nokey"),
        ("SET", "s"), ("GET",), ("GET", "a", "b"), ("MGET",), ("MSET", "a"),
        ("MSET", "a", "1", "b"), ("MSET", "a", "1", "a", "2"), ("GET", "a"),
        ("SET", "s", "v", "NX"), ("SET", "s", "w", "XX"), ("GET", "s"),
        ("SET", "t", "v", "XX"), ("SET", "s", "v", "NX", "XX"),
        ("SET", "s", "v", "BOGUS"), ("SET", "s", "v", "GET"),
        ("SET", "nokey2", "v", "GET"), ("SET", "s", "v2", "NX", "GET"),
        ("SET", "s", "v3", "XX", "GET"), ("SET", "s", "v", "EX"),
        ("SET", "s", "v", "EX", "0"), ("SET", "s", "v", "EX", "-1"),
        ("SET", "s", "v", "EX", "x"), ("SET", "s", "v", "PX", "0"),
        ("SET", "s", "v", "EX", "10", "PX", "100"),
        ("SET", "s", "v", "EX", "10", "KEEPTTL"),
        ("SET", "s", "v", "EX", BIG), ("SET", "s", "v", "PX", BIG),
        ("SET", "s", "v", "EXAT", BIG), ("SET", "s", "v", "PXAT", BIG),
        ("SET", "s", "v", "EX", "1000"), ("TTL", "s"),
        ("SET", "s", "w", "KEEPTTL"), ("TTL", "s"), ("SET", "s", "x"),
        ("TTL", "s"), ("SET", "p", "v", "EXAT", "1"), ("EXISTS", "p"),
        ("SET", "p", "v", "PXAT", "1", "GET"), ("SET", "p", "v", "PXAT", "1"),
        ("GET", "p"), ("SET", "p", "v", "EXAT", "0"),
        ("INCR", "n"), ("INCR", "n"), ("INCRBY", "n", "10"),
        ("DECR", "n"), ("DECRBY", "n", "-5"), ("GET", "n"),
        ("INCRBY", "n", "x"), ("INCRBY", "n", "1.5"), ("INCRBY", "n", ""),
        ("INCRBY", "n", BIG), ("INCRBY", "n", BIG),
        ("SET", "n", BIG), ("INCR", "n"), ("SET", "n", SMALL), ("DECR", "n"),
        ("DECRBY", "n", SMALL), ("DECRBY", "z", SMALL),
        ("INCRBY", "z", "99999999999999999999"),
        ("SET", "n", " 1"), ("INCR", "n"), ("SET", "n", "01"), ("INCR", "n"),
        ("SET", "n", "+1"), ("INCR", "n"), ("SET", "n", "-0"), ("INCR", "n"),
        ("SET", "n", ""), ("INCR", "n"), ("INCR", "s"), ("INCR",),
        ("APPEND", "ap", ""), ("EXISTS", "ap"), ("APPEND", "ap", "ab"),
        ("APPEND", "ap", BIN), ("GET", "ap"), ("STRLEN", "ap"),
        ("APPEND", "ap"), ("STRLEN", "nokey"),
        ("DEL",), ("DEL", "nokey"), ("DEL", "ap", "ap", "s"),
        ("UNLINK", "a", "nokey", "a"), ("UNLINK",), ("DBSIZE",),
        ("DBSIZE", "x"), ("EXISTS",),
    ])


def test_more_string_commands(pair):
    check(pair, [
        ("GETSET", "g", "1"), ("GETSET", "g", "2"), ("GETSET", "g"),
        ("SET", "g", "v", "EX", "100"), ("GETSET", "g", "w"), ("TTL", "g"),
        ("GETDEL", "g"), ("GETDEL", "g"), ("GETDEL",),
        ("SETNX", "x", "1"), ("SETNX", "x", "2"), ("GET", "x"), ("SETNX", "x"),
        ("SETEX", "e", "100", "v"), ("TTL", "e"), ("SETEX", "e", "0", "v"),
        ("SETEX", "e", "-1", "v"), ("SETEX", "e", "x", "v"),
        ("SETEX", "e", BIG, "v"), ("SETEX", "e", "1.5", "v"),
        ("SETEX", "e", "100"), ("PSETEX", "e", "100000", "v"), ("PTTL", "e"),
        ("PSETEX", "e", "0", "v"), ("PSETEX", "e", BIG, "v"),
        ("PSETEX", "e", "-5", "v"), ("GET", "e"),
        ("MSETNX", "m1", "a", "m2", "b"), ("MSETNX", "m2", "c", "m3", "d"),
        ("MGET", "m1", "m2", "m3"), ("MSETNX", "m1"), ("MSETNX", "m4", "a",
                                                        "m5"),
        ("MSETNX", "m6", "a", "m6", "b"), ("GET", "m6"),
        ("SET", "r", "Hello World"),
        ("GETRANGE", "r", "0", "4"), ("GETRANGE", "r", "-3", "-1"),
        ("GETRANGE", "r", "0", "-1"), ("GETRANGE", "r", "10", "100"),
        ("GETRANGE", "r", "5", "3"), ("GETRANGE", "r", "-100", "-50"),
        ("GETRANGE", "r", "-100", "100"), ("GETRANGE", "r", "100", "200"),
        ("GETRANGE", "r", "-1", "-5"), ("GETRANGE", "r", "0", "0"),
        ("GETRANGE", "r", "-1", "0"), ("GETRANGE", "r", SMALL, BIG),
        ("GETRANGE", "r", BIG, SMALL), ("GETRANGE", "r", "x", "1"),
        ("GETRANGE", "r", "0", "99999999999999999999"),
        ("GETRANGE", "nokey", "0", "-1"), ("GETRANGE", "nokey", "x", "1"),
        ("GETRANGE", "r", "0"), ("SET", "emp", ""),
        ("GETRANGE", "emp", "0", "-1"), ("GETRANGE", "emp", "-1", "-1"),
        ("SETRANGE", "r", "6", "Redis"), ("GET", "r"),
        ("SETRANGE", "r", "20", "x"), ("GET", "r"),
        ("SETRANGE", "sr", "3", BIN), ("GET", "sr"),
        ("SETRANGE", "sr2", "0", ""), ("EXISTS", "sr2"),
        ("SETRANGE", "sr2", "10", ""), ("EXISTS", "sr2"),
        ("SETRANGE", "r", "0", ""), ("SETRANGE", "r", "-1", "x"),
        ("SETRANGE", "r", "x", "x"), ("SETRANGE", "r", BIG, "x"),
        ("SETRANGE", "r", "536870911", "xx"),
        ("SETRANGE", "r", "536870912", ""),
        ("SETRANGE", "r", "536870912", "x"), ("SETRANGE", "r", "1"),
        ("SET", "sx", "v", "EX", "100"), ("SETRANGE", "sx", "1", "w"),
        ("TTL", "sx"),
        ("INCRBYFLOAT", "f", "10.5"), ("INCRBYFLOAT", "f", "0.1"),
        ("INCRBYFLOAT", "f", "-5.0e3"), ("INCRBYFLOAT", "f", "1e400"),
        ("INCRBYFLOAT", "f", "x"), ("INCRBYFLOAT", "f", ""),
        ("INCRBYFLOAT", "f", " 1"), ("INCRBYFLOAT", "f", "nan"),
        ("INCRBYFLOAT", "f", "inf"), ("INCRBYFLOAT", "g2", "inf"),
        ("INCRBYFLOAT", "f", "0x10"), ("INCRBYFLOAT", "f", "1.0000"),
        ("SET", "f2", "2.1"), ("INCRBYFLOAT", "f2", "5000"),
        ("SET", "f3", "abc"), ("INCRBYFLOAT", "f3", "1"),
        ("SET", "f4", "5"), ("INCRBYFLOAT", "f4", "-5"), ("GET", "f4"),
        ("SET", "f5", "-0"), ("INCRBYFLOAT", "f5", "0"),
        ("SET", "f6", "1e3"), ("INCRBYFLOAT", "f6", "1.5e-3"),
        ("SET", "f7", "3.0e1000"), ("INCRBYFLOAT", "f7", "1"),
        ("INCRBYFLOAT", "f"), ("SET", "f8", "10"), ("EXPIRE", "f8", "100"),
        ("INCRBYFLOAT", "f8", "1"), ("TTL", "f8"),
    ])


def test_rename_copy_flushdb(pair):
    check(pair, [
        ("SET", "a", "1", "EX", "100"), ("RENAME", "a", "b"), ("TTL", "b"),
        ("GET", "a"), ("RENAME", "nokey", "c"), ("RENAME", "b", "b"),
        ("RENAMENX", "b", "b"), ("RENAMENX", "nokey", "b"),
        ("SET", "c", "3"), ("RENAMENX", "b", "c"), ("RENAMENX", "b", "d"),
        ("RENAME", "d", "c"), ("GET", "c"), ("TTL", "c"), ("RENAME", "c"),
        ("HSET", "h", "f", "v"), ("RENAME", "h", "h2"), ("TYPE", "h2"),
        ("RENAME", "h2", "c"), ("HGETALL", "c"), ("TYPE", "c"),
        ("SET", "x", "1"), ("COPY", "x", "y"), ("COPY", "x", "y"),
        ("COPY", "x", "y", "REPLACE"), ("COPY", "x", "x"),
        ("COPY", "x", "x", "REPLACE"), ("COPY", "nokey", "y"),
        ("COPY", "nokey", "nokey"), ("COPY", "x", "y", "DB", "0"),
        ("COPY", "x", "z", "DB", "1"), ("COPY", "x", "z", "DB", "x"),
        ("COPY", "x", "z", "DB"), ("COPY", "x", "z", "BOGUS"),
        ("COPY", "x", "z", "REPLACE", "REPLACE"), ("COPY", "x"),
        ("COPY", "c", "hc"), ("HGETALL", "hc"), ("HSET", "hc", "g", "w"),
        ("HGETALL", "c"), ("SET", "t", "v", "PX", "100000"),
        ("COPY", "t", "t2"), ("PTTL", "t2"), ("COPY", "x", "t2", "REPLACE"),
        ("TTL", "t2"), ("COPY", "c", "x", "REPLACE"), ("TYPE", "x"),
        ("DBSIZE",), ("FLUSHDB", "ASYNC"), ("DBSIZE",), ("SET", "a", "1"),
        ("FLUSHDB", "SYNC"), ("FLUSHDB", "BOGUS"), ("FLUSHDB", "a", "b"),
        ("FLUSHALL", "BOGUS"), ("FLUSHDB",), ("FLUSHALL",),
    ])


def test_expiry(pair):
    check(pair, [
        ("SET", "k", "v"), ("TTL", "k"), ("PTTL", "k"), ("TTL", "nokey"),
        ("PTTL", "nokey"), ("EXPIRETIME", "k"), ("PEXPIRETIME", "nokey"),
        ("EXPIRE", "k", "100"), ("TTL", "k"), ("EXPIRE", "k", "200", "NX"),
        ("EXPIRE", "k", "200", "XX"), ("EXPIRE", "k", "50", "GT"),
        ("EXPIRE", "k", "50", "LT"), ("TTL", "k"),
        ("EXPIRE", "k", "50", "NX", "XX"), ("EXPIRE", "k", "50", "GT", "LT"),
        ("EXPIRE", "k", "50", "BOGUS"), ("EXPIRE", "k", "x"),
        ("EXPIRE", "k", BIG), ("PEXPIRE", "k", BIG), ("EXPIREAT", "k", BIG),
        ("PEXPIREAT", "k", BIG), ("EXPIRE", "k", "1.5"),
        ("PERSIST", "k"), ("PERSIST", "k"), ("PERSIST", "nokey"),
        ("EXPIRE", "nokey", "10"), ("EXPIRE", "k", "10", "XX"),
        ("EXPIRE", "k", "10", "GT"), ("EXPIRE", "k", "10", "LT"),
        ("TTL", "k"), ("PEXPIRE", "k", "100000"), ("PTTL", "k"),
        ("EXPIREAT", "k", "4102444800"), ("EXPIRETIME", "k"),
        ("PEXPIREAT", "k", "4102444800123"), ("PEXPIRETIME", "k"),
        ("EXPIRETIME", "k"), ("TTL", "k"),
        ("EXPIRE", "k", "-1"), ("EXISTS", "k"), ("SET", "k", "v"),
        ("EXPIREAT", "k", "1"), ("GET", "k"), ("SET", "k", "v"),
        ("PEXPIRE", "k", "0"), ("GET", "k"), ("SET", "k", "v"),
        ("PEXPIREAT", "k", "0"), ("GET", "k"), ("EXPIRE", "k"),
        ("SET", "k", "v"), ("GETEX", "k"), ("GETEX", "k", "EX", "100"),
        ("TTL", "k"), ("GETEX", "k", "PERSIST"), ("TTL", "k"),
        ("GETEX", "k", "EX", "0"), ("GETEX", "k", "EX", "-1"),
        ("GETEX", "k", "EX"), ("GETEX", "k", "BOGUS"),
        ("GETEX", "k", "EX", "10", "PX", "10"), ("GETEX", "nokey", "EX", "x"),
        ("GETEX", "k", "PXAT", "1"), ("EXISTS", "k"), ("GETEX",),
        ("TTL",), ("PERSIST",),
    ])


def test_hashes_and_types(pair):
    check(pair, [
        ("HSET", "h", "a", "1", "b", "2"), ("HSET", "h", "a", "3"),
        ("HSET", "h", "c", "4", "c", "5"), ("HSET", "h", "a"),
        ("HSET", "h"), ("HGET", "h", "a"), ("HGET", "h", "zz"),
        ("HGET", "nokey", "a"), ("HMGET", "h", "a", "zz", "c"),
        ("HMGET", "nokey", "a"), ("HEXISTS", "h", "a"),
        ("HEXISTS", "h", "zz"), ("HLEN", "h"), ("HLEN", "nokey"),
        ("HGETALL", "h"), ("HGETALL", "nokey"), ("HKEYS", "h"),
        ("HVALS", "h"), ("HKEYS", "nokey"),
        ("HINCRBY", "h", "n", "5"), ("HINCRBY", "h", "n", "x"),
        ("HINCRBY", "h", "a", "1"), ("HINCRBY", "h", "n", BIG),
        ("HSET", "h", "str", "abc"), ("HINCRBY", "h", "str", "1"),
        ("HINCRBY", "h", "n"), ("HDEL", "h", "a", "zz", "a"),
        ("HDEL", "h"), ("HDEL", "nokey", "a"),
        ("HSET", "h", "", ""), ("HGET", "h", ""), ("HSET", "h", BIN, BIN),
        ("HGET", "h", BIN), ("TYPE", "h"), ("TYPE", "nokey"),
        ("SET", "s", "v"), ("TYPE", "s"), ("TYPE",),
        ("HSET", "s", "f", "v"), ("HGET", "s", "f"), ("HGETALL", "s"),
        ("HLEN", "s"), ("HDEL", "s", "f"), ("HINCRBY", "s", "f", "1"),
        ("HMGET", "s", "f"), ("HKEYS", "s"), ("HEXISTS", "s", "f"),
        ("HSCAN", "s", "0"),
        ("GET", "h"), ("STRLEN", "h"), ("APPEND", "h", "x"),
        ("INCR", "h"), ("DECRBY", "h", "1"), ("GETSET", "h", "x"),
        ("GETDEL", "h"), ("GETRANGE", "h", "0", "1"),
        ("SETRANGE", "h", "0", "x"), ("INCRBYFLOAT", "h", "1"),
        ("GETEX", "h"), ("SET", "h", "x", "GET"), ("MGET", "h", "s"),
        ("SETNX", "h", "x"), ("MSETNX", "h", "x"), ("EXISTS", "h"),
        ("EXPIRE", "h", "100"), ("TTL", "h"), ("HSET", "h", "q", "1"),
        ("TTL", "h"), ("HDEL", "h", "q"), ("TTL", "h"),
        ("HDEL", "h", "c", "n", "str", "", BIN, "b"), ("EXISTS", "h"),
        ("HSET", "h2", "f", "v"), ("SETEX", "h2", "100", "v"),
        ("TYPE", "h2"), ("HSET", "h3", "f", "v"), ("SET", "h3", "v"),
        ("TYPE", "h3"), ("HSET", "h4", "f", "v"), ("MSET", "h4", "v"),
        ("TYPE", "h4"), ("HSET", "h5", "f", "v"), ("SET", "h5", "v", "NX"),
        ("HINCRBY", "hn", "f", "-3"), ("HGETALL", "hn"),
        ("HSCAN", "hn", "0"), ("HSCAN", "hn", "0", "COUNT", "0"),
        ("HSCAN", "hn", "x"), ("HSCAN", "nokey", "0", "BOGUS"),
        ("HSCAN", "hn", "0", "MATCH", "f*"), ("HSCAN", "hn", "0", "MATCH",
                                              "g*"),
        ("HSCAN", "hn", "0", "BOGUS"), ("HSCAN", "hn", "0", "COUNT"),
        ("HSCAN", "hn", "0", "COUNT", "x"), ("HSCAN", "hn"),
    ])


def test_scan_options(pair):
    keys = [f"key:{i}" for i in range(40)] + ["other", "", BIN]
    setup = [("SET", k, "v") for k in keys] + [
        ("HSET", f"hash:{i}", "f", "v") for i in range(10)] + [
        ("HSET", "big", *[x for i in range(300) for x in (f"f{i}", i)])]
    check(pair, setup + [
        ("SCAN", "0"), ("SCAN", "0", "COUNT", "5"), ("SCAN", "0", "COUNT",
                                                       "1000"),
        ("SCAN", "0", "MATCH", "key:1*"), ("SCAN", "0", "MATCH", "*:*",
                                           "COUNT", "3"),
        ("SCAN", "0", "TYPE", "hash"), ("SCAN", "0", "TYPE", "string"),
        ("SCAN", "0", "TYPE", "list"), ("SCAN", "0", "TYPE", "HASH"),
        ("SCAN", "0", "MATCH", "hash:*", "TYPE", "string"),
        ("SCAN", "0", "MATCH", "\x00*"), ("SCAN", "0", "MATCH", "[a-k]*"),
        ("SCAN", "0", "COUNT", "0"), ("SCAN", "0", "COUNT", "-1"),
        ("SCAN", "0", "COUNT", "x"), ("SCAN", "0", "COUNT"),
        ("SCAN", "0", "MATCH"), ("SCAN", "0", "BOGUS", "1"),
        ("SCAN", "x"), ("SCAN", "-1"), ("SCAN", "18446744073709551616"),
        ("SCAN",), ("KEYS", "*"), ("KEYS", "key:?"), ("KEYS", "nomatch*"),
        ("KEYS", "[o]ther"), ("KEYS",), ("KEYS", "a", "b"),
        ("HSCAN", "big", "0"), ("HSCAN", "big", "0", "COUNT", "7"),
        ("HSCAN", "big", "0", "MATCH", "f1*"), ("HSCAN", "big", "0",
                                                "NOVALUES"),
        ("HSCAN", "big", "0", "TYPE", "string"), ("DBSIZE",),
    ])


# ---- seeded random sequences ------------------------------------------------


# Inside MULTI, EXEC's array is compared reply by reply: no SCAN (its
# cursors are each server's), nothing that reads a clock (TTL ...), and
# no connection command (docs/batond.md, "Transactions": baton queues
# key-value commands only; test_transactions covers that difference).
UNQUEUED = {"scan", "hscan", "ttl", "pttl", "expiretime", "pexpiretime",
            "dbsize", "ping", "echo"}


# Commands that take a time: an argument inserted at random could become a
# short expiry, due while the test runs.
TIMED = {"set", "getex", "expire", "pexpire", "expireat", "pexpireat",
         "setex", "psetex"}


def queueable(cmd):
    return name_of(cmd) not in UNQUEUED


class Gen:
    """Commands from one seed, over few keys (so they collide), values that
    are numbers, floats, binary and empty, and expiries that are either far
    ahead or in the past (never due during the test: the two servers' clocks
    are read at different moments)."""

    KEYS = ["k0", "k1", "k2", "k3", "", BIN, "h0", "h1"]
    FIELDS = ["f0", "f1", "f2", "", BIN]
    VALUES = ["", "0", "1", "-1", "10", "3.5", "-2.25", "abc", BIN, BIG,
              SMALL, "1e3", " 1", "007", "x" * 40, "inf", "9.99e307"]
    INTS = ["-1", "0", "1", "5", "100", "-100", BIG, SMALL, "x", "1.5", "",
            "99999999999999999999", "010", "+5", "-0", " 1", "1 ", "1e3",
            "0x10", "9223372036854775808", "-9223372036854775809"]
    FLOATS = ["0.1", "-1.5", "10", "1e2", "x", "", "inf", "-inf", "1e400",
              "0", "5.0e-3"]
    OFFSETS = ["0", "1", "3", "-1", "-3", "-100", "100", "7", BIG, SMALL,
               "x", "+1", "01", "-0", ""]
    SET_OPTS = [[], ["NX"], ["XX"], ["GET"], ["EX", "10000"],
                ["PX", "20000000"], ["EXAT", "4102444800"],
                ["PXAT", "4102444800000"], ["EXAT", "1"], ["PXAT", "1"],
                ["KEEPTTL"], ["EX", "0"], ["NX", "GET"], ["XX", "KEEPTTL"],
                ["EX", "x"], ["EX", "10", "PX", "10"], ["BOGUS"]]

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def pick(self, seq):
        return self.rng.choice(seq)

    def key(self):
        return self.pick(self.KEYS)

    def ttl(self, unit_ms):
        """A relative time: far ahead (hours, and random, so that GT and
        LT never compare two times set a few ms apart from the same
        number), not positive, or bad."""
        far = str(self.rng.randrange(10000, 50000) *
                  (1000 if unit_ms else 1) + self.rng.randrange(1000))
        return self.pick([far, far, "-1", "0", "x", BIG])

    def command(self):
        k, v, p = self.key(), self.pick(self.VALUES), self.pick
        at = self.pick(["4102444800", "1", "0", "-5"])
        table = [
            lambda: ("GET", k), lambda: ("SET", k, v, *p(self.SET_OPTS)),
            lambda: ("SET", k, v, *self.options(self.set_option)),
            lambda: ("GETEX", k, *self.options(self.getex_option)),
            lambda: (lambda w: (w, k, self.expiry_time(w), *self.options(
                         lambda: [p(["NX", "XX", "GT", "LT", "nx",
                                     "BOGUS"])])))(
                p(["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"])),
            lambda: ("SCAN", "0", *self.options(self.scan_option)),
            lambda: ("HSCAN", k, "0", *self.options(self.hscan_option)),
            lambda: ("COPY", k, self.key(), *self.options(
                lambda: p([["REPLACE"], ["DB", p(["0", "1", "x", "-1"])],
                           ["DB"], ["BOGUS"]]))),
            lambda: ("FLUSHALL", p(["ASYNC", "SYNC", "async", "x"])),
            lambda: ("DEL", k, self.key()), lambda: ("UNLINK", k),
            lambda: ("EXISTS", k, self.key(), k),
            lambda: ("INCR", k), lambda: ("DECR", k),
            lambda: ("INCRBY", k, p(self.INTS)),
            lambda: ("DECRBY", k, p(self.INTS)),
            lambda: ("APPEND", k, v), lambda: ("STRLEN", k),
            lambda: ("MGET", k, self.key(), self.key()),
            lambda: ("MSET", k, v, self.key(), p(self.VALUES)),
            lambda: ("GETEX", k, *p([[], ["EX", "10000"], ["PERSIST"],
                                     ["PXAT", "1"], ["EX", "0"]])),
            lambda: ("EXPIRE", k, self.ttl(False),
                     *p([[], [], ["NX"], ["XX"], ["GT"], ["LT"]])),
            lambda: ("PEXPIRE", k, self.ttl(True),
                     *p([[], [], ["NX"], ["XX"], ["GT"], ["LT"]])),
            lambda: (p(["EXPIREAT", "PEXPIREAT"]), k, at),
            lambda: ("PERSIST", k), lambda: (p(["TTL", "PTTL"]), k),
            lambda: (p(["EXPIRETIME", "PEXPIRETIME"]), k),
            lambda: ("TYPE", k),
            lambda: ("HSET", k, p(self.FIELDS), v,
                     *p([[], [p(self.FIELDS), p(self.VALUES)]])),
            lambda: ("HDEL", k, p(self.FIELDS), p(self.FIELDS)),
            lambda: ("HINCRBY", k, p(self.FIELDS), p(self.INTS)),
            lambda: ("HGET", k, p(self.FIELDS)),
            lambda: ("HMGET", k, p(self.FIELDS), p(self.FIELDS)),
            lambda: ("HEXISTS", k, p(self.FIELDS)), lambda: ("HLEN", k),
            lambda: (p(["HGETALL", "HKEYS", "HVALS"]), k),
            lambda: ("HSCAN", k, "0", *p([[], ["COUNT", "2"],
                                          ["MATCH", "f*"], ["NOVALUES"]])),
            lambda: ("GETDEL", k), lambda: ("GETSET", k, v),
            lambda: ("SETNX", k, v),
            lambda: ("SETEX", k, self.ttl(False), v),
            lambda: ("PSETEX", k, self.ttl(True), v),
            lambda: ("MSETNX", k, v, self.key(), v),
            lambda: ("GETRANGE", k, p(self.OFFSETS), p(self.OFFSETS)),
            lambda: ("SETRANGE", k, p(["0", "1", "5", "30", "-1", BIG, "x"]),
                     v),
            lambda: ("INCRBYFLOAT", k, p(self.FLOATS)),
            lambda: (p(["RENAME", "RENAMENX"]), k, self.key()),
            lambda: ("COPY", k, self.key(), *p([[], ["REPLACE"],
                                                ["DB", "0"]])),
            lambda: ("SCAN", "0", *p([[], ["MATCH", "k*"], ["COUNT", "2"],
                                      ["TYPE", "hash"],
                                      ["TYPE", "string"]])),
            lambda: ("KEYS", p(["*", "k?", "h*", "[kh]1"])),
            lambda: ("DBSIZE",),
            lambda: p([("FLUSHDB",), ("FLUSHALL",), ("PING",),
                       ("ECHO", v)]),
        ]
        # FLUSH* rarely, everything else alike.
        i = self.rng.randrange(len(table) * 20)
        return table[i // 20]() if i < (len(table) - 1) * 20 else \
            table[-1]() if self.rng.random() < 0.1 else table[0]()

    def options(self, one):
        """Zero to three options, each from one()."""
        return [w for _ in range(self.rng.randrange(4)) for w in one()]

    def expiry_time(self, word):
        """A time for the option or command word (EX, PXAT, EXPIRE ...),
        in either unit, never due while the test runs: a relative one far
        ahead (random, as ttl: hours as ms, months as s) or not positive;
        an absolute one far ahead or past; or a bad one."""
        p = self.pick
        if word.upper().endswith("AT"):
            good = [p(["4102444800", "4102444800000"]), "1", "0", "-1",
                    self.ttl(True)]
        else:
            good = [self.ttl(True), self.ttl(True), "0", "-1"]
        return p(good + [p(["x", "", BIG, SMALL, "1.5", " 5", "010", "+5",
                            "-0", "1e3", "9223372036854775808"])])

    def set_option(self):
        p = self.pick
        w = p(["EX", "PX", "EXAT", "PXAT", "ex"])
        return p([["NX"], ["XX"], ["GET"], ["KEEPTTL"], ["get"],
                  [w, self.expiry_time(w)], [w], ["BOGUS"]])

    def getex_option(self):
        p = self.pick
        w = p(["EX", "PX", "EXAT", "PXAT"])
        return p([["PERSIST"], ["persist"], ["BOGUS"],
                  [w, self.expiry_time(w)], [w]])

    def scan_option(self):
        p = self.pick
        return p([["MATCH", p(["k*", "*", "h?", "[a-k]*", "", "\\"])],
                  ["COUNT", p(["1", "3", "100", "0", "-1", "x"])],
                  ["TYPE", p(["string", "hash", "HASH", "list", ""])],
                  ["MATCH"], ["COUNT"], ["TYPE"], ["BOGUS", "1"]])

    def hscan_option(self):
        p = self.pick
        return p([["MATCH", p(["f*", "*", "", "f?"])],
                  ["COUNT", p(["1", "3", "0", "x"])], ["NOVALUES"],
                  ["MATCH"], ["COUNT"], ["TYPE", "string"], ["BOGUS"]])

    def mutated(self):
        """A command, now and then in another case, with an argument
        dropped or one added (wrong arity, or an option's value missing)."""
        cmd = list(self.command())
        roll = self.rng.random()
        if roll < 0.03 and len(cmd) > 1:
            del cmd[self.rng.randrange(1, len(cmd))]
        elif roll < 0.06 and name_of(cmd) not in TIMED:
            cmd.insert(self.rng.randrange(1, len(cmd) + 1),
                       self.pick(self.VALUES))
        if self.rng.random() < 0.1:
            cmd[0] = "".join(ch.upper() if self.rng.random() < 0.5 else
                             ch.lower() for ch in cmd[0])
        return tuple(cmd)

    def commands(self, n):
        out = []
        while len(out) < n:
            if self.rng.random() < 0.02:  # a transaction of a few
                body = [self.mutated() for _ in range(self.rng.randrange(4))]
                out += [("MULTI",)] + [c for c in body if queueable(c)] + [
                    self.pick([("EXEC",), ("EXEC",), ("DISCARD",)])]
            else:
                out.append(self.mutated())
        return out


@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_random_sequences(pair, seed):
    check(pair, Gen(seed).commands(RANDOM_COMMANDS), where=f"seed {seed}")



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
        ("CLIENT", "PAUSE", "0"),
        ("HELLO", "4"), ("HELLO", "1"), ("HELLO", "0"), ("HELLO", "x"),
        ("HELLO", "3", "BOGUS"), ("HELLO", "3", "SETNAME", "a b"),
        ("HELLO", "2", "SETNAME"), ("HELLO", "3", "AUTH", "default"),
        ("AUTH", "x"), ("AUTH", "default", "x"), ("AUTH", "a", "b"),
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


def both(pair, *cmd):
    r, b = pair
    return r.call(*cmd), b.call(*cmd)


def pairs_of(reply):
    """A map reply, or RESP2's flat array of names and values, as a list of
    (name, value)."""
    if reply[0] == "map":
        return list(reply[1])
    assert reply[0] == "array" and len(reply[1]) % 2 == 0, reply
    return list(zip(reply[1][0::2], reply[1][1::2]))


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
    if x[0] == "verbatim":  # RESP3: docs/clients.md, a bulk string
        x = ("bulk", x[1][4:])
    assert x[0] == y[0] == "bulk", (x, y)
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


def info_sections(reply):
    """INFO's text as {section name: {field: value}} (bytes)."""
    if reply[0] == "verbatim":
        reply = ("bulk", reply[1][4:])
    assert reply[0] == "bulk", reply
    sections, current = {}, None
    for line in reply[1].splitlines():
        if line.startswith(b"# "):
            current = sections.setdefault(line[2:].strip().lower(), {})
        elif line.strip():
            k, _, v = line.partition(b":")
            current[k] = v.strip()
    return sections


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
                   (b"memory", b"maxmemory"),
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


def test_transactions(pair, redis_port, baton_port):
    check(pair, [
        ("MULTI",), ("SET", "t", "1"), ("INCR", "t"), ("GET", "t"),
        ("INCRBYFLOAT", "t", "0.5"), ("HSET", "t", "f", "v"),
        ("GETRANGE", "t", "0", "-1"), ("EXEC",),
        ("MULTI",), ("MULTI",), ("DISCARD",), ("DISCARD",), ("EXEC",),
        ("MULTI",), ("GET",), ("SET", "t", "2"), ("EXEC",), ("GET", "t"),
        ("MULTI",), ("NOSUCH", "a"), ("EXEC",),
        ("MULTI",), ("WATCH", "t"), ("EXEC",), ("MULTI",), ("EXEC",), ("WATCH",), ("WATCH", "t", "u"),
        ("UNWATCH",), ("MULTI",), ("SCAN", "0", "TYPE", "string"),
        ("KEYS", "*"), ("DBSIZE",), ("EXEC",),
    ])
    # docs/batond.md ("Transactions"): a transaction holds key-value
    # commands only; a connection command inside MULTI is refused, which
    # aborts it (Redis queues it).
    r, b = pair
    x = r.pipeline([("MULTI",), ("PING",), ("EXEC",)])
    y = b.pipeline([("MULTI",), ("PING",), ("EXEC",)])
    assert x[1] == ("simple", b"QUEUED") and x[2][0] == "array", x
    assert y[1] == ("error", b"ERR command 'PING' cannot be queued: a "
                    b"transaction holds key-value commands only"), y
    assert y[2] == ("error", b"EXECABORT Transaction discarded because of "
                    b"previous errors."), y
    # HGETALL inside EXEC: a map in RESP3 there too, after a nested reply.
    txn = [("MULTI",), ("HSET", "th", "f", "v", "g", "w"),
           ("HSCAN", "th", "0"), ("HGETALL", "th"), ("HGETALL", "none"),
           ("hgetall", "th"), ("EXEC",)]
    x, y = r.pipeline(txn)[-1], b.pipeline(txn)[-1]
    assert x[0] == y[0] == "array" and len(x[1]) == len(y[1]) == 5, (x, y)
    assert x[1][0] == y[1][0] == ("int", 2), (x, y)
    for i in (2, 3, 4):
        assert sorted_pairs(x[1][i]) == sorted_pairs(y[1][i]), (i, x, y)
    # A watched key written by another connection: EXEC does not run
    # (RESP2's null array, RESP3's null).
    others = [Conn(redis_port), Conn(baton_port)]
    try:
        replies = []
        for c, o in zip((r, b), others):
            replies.append(c.pipeline([("SET", "w", "1"), ("WATCH", "w")]))
            assert o.call("SET", "w", "2") == ("simple", b"OK")
            replies.append(c.pipeline([("MULTI",), ("INCR", "w"),
                                       ("EXEC",), ("GET", "w")]))
        assert replies[0] == replies[2] and replies[1] == replies[3], replies
    finally:
        for o in others:
            o.close()


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
                 ("AUTH", PASSWORD), ("GET", "a"), ("AUTH", PASSWORD),
                 ("AUTH", "default", PASSWORD)],
                [("HELLO", "3", "AUTH", "default", "wrong"),
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


GLOB_KEYS = ["hello", "hallo", "hxllo", "hllo", "heeeello", "h*llo", "h?llo",
             "h[e]llo", "a\\b", "a]b", "a-b", "a^b", "[", "]", "\\", "*", "?",
             "", "abc", "ABC", "aXc", "a\x00c", "h\nllo", "-", "^"]
GLOB_PATTERNS = ["*", "h?llo", "h*llo", "h[ae]llo", "h[^e]llo", "h[a-b]llo",
                 "h[b-a]llo", "h\\*llo", "h\\?llo", "h[*]llo", "\\[", "[",
                 "[]", "[]]", "[^]", "a[\\]]b", "a[\\\\]b", "a\\", "\\",
                 "*\\", "a[-]b", "a[a-]b", "a[^-]b", "a[", "a[b", "[a-c]bc",
                 "[A-Z]BC", "a?c", "a*", "*c", "**", "?", "??", "", "^",
                 "[\\^]", "a[^]b", "h\\", "h[", "h[e", "*[", "a\x00c",
                 "a?c*", "h[a-ze]llo", "[!a]bc", "[a-", "*l*o"]


GLOB_ALPHABET = "ab*?[]^-\\"


def test_glob_patterns(pair):
    setup = [("SET", k, "v") for k in GLOB_KEYS] + [
        ("HSET", "globhash", *[x for k in GLOB_KEYS for x in (k, "v")])]
    check(pair, setup + [("KEYS", p) for p in GLOB_PATTERNS] + [
        ("SCAN", "0", "MATCH", p, "COUNT", "7") for p in GLOB_PATTERNS] + [
        ("HSCAN", "globhash", "0", "MATCH", p, "COUNT", "1000")
        for p in GLOB_PATTERNS])
    # Random patterns and keys over the bytes that mean something.
    rng = random.Random(7)
    word = lambda n: "".join(rng.choice(GLOB_ALPHABET)  # noqa: E731
                             for _ in range(rng.randrange(n)))
    keys = {word(6) for _ in range(150)}
    check(pair, [("FLUSHALL",)] + [("SET", k, "v") for k in keys] + [
        ("KEYS", word(7)) for _ in range(1500)], where="random globs")


def test_large_values_and_float_texts(pair):
    big = bytes(range(256)) * 4096  # 1 MiB, every byte value
    digits = "1" + "0" * 5118  # 5119 bytes: a float text Redis still reads
    check(pair, [
        ("SET", "big", big), ("STRLEN", "big"), ("GETRANGE", "big", "0", "9"),
        ("GETRANGE", "big", "-10", "-1"), ("GETRANGE", "big", "1000000",
                                           "1000300"),
        ("SETRANGE", "big", "2097152", "end"), ("STRLEN", "big"),
        ("GETRANGE", "big", "1048570", "1048580"), ("APPEND", "big", big),
        ("STRLEN", "big"), ("GETRANGE", "big", "-5", "-1"),
        ("SET", "f", digits), ("INCRBYFLOAT", "f", "1"),
        ("SET", "f", digits + "0"), ("INCRBYFLOAT", "f", "1"),
        ("INCRBYFLOAT", "g", digits), ("INCRBYFLOAT", "g", digits + "0"),
        ("SET", "f", "0." + "0" * 5116 + "1"), ("INCRBYFLOAT", "f", "1"),
        ("SET", "n", "1" * 19), ("INCR", "n"), ("SET", "n", "1" * 20),
        ("INCR", "n"), ("SET", "f", "1e308"), ("INCRBYFLOAT", "f", "1e308"),
        ("INCRBYFLOAT", "f", "1e4932"), ("SET", "f", "1e-4950"),
        ("INCRBYFLOAT", "f", "0"), ("SET", "f", "0x1p3"),
        ("INCRBYFLOAT", "f", "1"), ("INCRBYFLOAT", "f", "1e-20"),
        ("SET", "f", "-inf"), ("INCRBYFLOAT", "f", "1"),
        ("SET", "f", "3"), ("INCRBYFLOAT", "f", "-inf"),
        ("SET", "f", ".5"), ("INCRBYFLOAT", "f", "5."),
        ("SET", "f", "1_000"), ("INCRBYFLOAT", "f", "1"),
        ("SET", "f", "+1"), ("INCRBYFLOAT", "f", "+1"),
        ("SET", "f", "1 "), ("INCRBYFLOAT", "f", "1"),
    ])
