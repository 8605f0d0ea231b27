"""The differential test's tools (test_redis_diff.py,
test_redis_diff_connection.py): a raw RESP connection that tags every
reply with its exact type, a throwaway redis-server 7 and a baton cluster
side by side, and the comparison of their replies with the differences
baton intends (ALLOWED), each with the reason docs/clients.md or
docs/kv.md gives.

redis-server runs on a port the test picks, on 127.0.0.1, with no
persistence, in the test's tmp dir, and is killed by its PID at the end.
"""

import contextlib
import os
import re
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
TTL_SLACK_MS = 5000  # TTLs read a little apart on the two servers

BIG = b"9223372036854775807"
SMALL = b"-9223372036854775808"
BIN = b"\x00\xff\r\n\x01 key"


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


# ---- the two servers --------------------------------------------------------


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
    ("client", lambda c, r, b: _sub(c) == b"SETINFO" and
     _is_error(r, b"ERR unknown subcommand") and (
         b == ("simple", b"OK") or _is_error(b)),
     "docs/clients.md: CLIENT SETINFO is Redis 7.2's (redis-py sends it)"),
    ("client", lambda c, r, b: _sub(c) == b"SETNAME" and len(c) == 3 and
     len(arg(c, 2)) > 127 and r == ("simple", b"OK") and
     _is_error(b, b"ERR client name of "),
     "docs/clients.md: a name is at most 127 bytes"),
    ("client", lambda c, r, b: _sub(c) == b"KILL" and b"maxage" in (
        arg(c, i).lower() for i in range(2, len(c))) and
     r == ("error", b"ERR syntax error"),
     "docs/clients.md: CLIENT KILL's MAXAGE filter is Redis 7.4's"),
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
    ("config", lambda c, r, b: _sub(c) == b"GET" and r[0] == b[0] and
     _config_values(r) is not None and
     _config_values(r).keys() == _config_values(b).keys() and all(
         v == _config_values(b)[k] for k, v in _config_values(r).items()
         if k not in (b"databases", b"appendonly", b"maxmemory")),
     "docs/clients.md: CONFIG GET answers baton's own values (databases "
     "1: one database; appendonly yes: every write is in the log; "
     "maxmemory: the node's bound, by default half its memory)"),
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
