"""batonctl against fake nodes: a small RESP server in this process that
answers the admin commands as docs/batond.md says. It covers what a real
cluster rarely shows on demand: a member that is down, fields batonctl does
not know, -NOTLEADER redirections (followed once only), AUTH, odd strings in
the JSON output. Needs only build/batonctl."""

import json
import socket
import socketserver
import subprocess
import threading

import pytest

from conftest import BATONCTL, HOST, free_ports, require_binary


def bulk(s):
    b = s.encode() if isinstance(s, str) else s
    return b"$%d\r\n%s\r\n" % (len(b), b)


def array(items):
    return b"*%d\r\n" % len(items) + b"".join(items)


def as_map(d):
    out = []
    for k, v in d.items():
        out += [bulk(k), bulk(str(v))]
    return array(out)


class FakeNode:
    """One fake batond: `handlers` maps an upper-case command name to a
    function of the arguments returning raw RESP bytes."""

    def __init__(self, port, password=None):
        self.port = port
        self.password = password
        self.handlers = {}
        self.received = []
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                authed = fake.password is None
                while True:
                    args = read_command(self.rfile)
                    if args is None:
                        return
                    fake.received.append(args)
                    name = args[0].upper()
                    if name == "AUTH":
                        authed = args[1:] == [fake.password]
                        self.wfile.write(b"+OK\r\n" if authed else
                                         b"-ERR invalid password\r\n")
                    elif not authed:
                        self.wfile.write(
                            b"-NOAUTH Authentication required.\r\n")
                    elif name in fake.handlers:
                        self.wfile.write(fake.handlers[name](args[1:]))
                    else:
                        self.wfile.write(b"-ERR unknown command\r\n")
                    self.wfile.flush()

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer((HOST, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def read_command(f):
    line = f.readline()
    if not line:
        return None
    assert line.startswith(b"*"), line
    n = int(line[1:])
    args = []
    for _ in range(n):
        head = f.readline()
        assert head.startswith(b"$"), head
        data = f.read(int(head[1:]) + 2)
        args.append(data[:-2].decode())
    return args


def node_reply(node_id, role, term, last_index, port, release="0.1.0",
               extra=None):
    fields = {"id": node_id, "role": role, "term": term, "leader": 2,
              "commit": last_index, "applied": last_index,
              "last_index": last_index, "snapshot_index": 0,
              "release": release, "proto_min": 1, "proto_max": 2,
              "machine_max": 1, "peer_addr": f"{HOST}:{port + 1000}",
              "client_addr": f"{HOST}:{port}"}
    fields.update(extra or {})
    return as_map(fields)


@pytest.fixture
def fakes():
    """Three members: node 1 (follower), node 2 (leader) answering, node 3
    (a learner) down: nothing listens on its port."""
    require_binary(BATONCTL)
    p1, p2, p3 = free_ports(3)
    n1, n2 = FakeNode(p1), FakeNode(p2)

    def members(matches):
        out = []
        for (i, port, role), match in zip(
                [(1, p1, "voter"), (2, p2, "voter"), (3, p3, "learner")],
                matches):
            out.append(as_map({"id": i, "role": role,
                               "peer_addr": f"{HOST}:{port + 1000}",
                               "client_addr": f"{HOST}:{port}",
                               "match": match, "zone": "future-field"}))
        return array(out)

    n1.handlers["BATON.MEMBERS"] = lambda a: members(["-", "-", "-"])
    n2.handlers["BATON.MEMBERS"] = lambda a: members([100, 120, 90])
    n1.handlers["BATON.NODE"] = lambda a: node_reply(
        1, "follower", 7, 110, p1, release='0.1.0-"odd"\\\n\t\x01',
        extra={"new_field": "ignored"})
    n2.handlers["BATON.NODE"] = lambda a: node_reply(2, "leader", 7, 120, p2)
    notleader = f"-NOTLEADER leader is 2 at {HOST}:{p2}\r\n".encode()
    for cmd in ("BATON.ADD", "BATON.PROMOTE", "BATON.REMOVE",
                "BATON.TRANSFER"):
        n1.handlers[cmd] = lambda a: notleader
        n2.handlers[cmd] = lambda a: b"+OK\r\n"
    try:
        yield n1, n2, p3
    finally:
        n1.close()
        n2.close()


def ctl(port, *args, password=None):
    cmd = [str(BATONCTL), "-h", HOST, "-p", str(port), "--timeout-ms", "2000"]
    if password is not None:
        cmd += ["-a", password]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True,
                          text=True, timeout=30)


def test_status_table_with_a_down_member(fakes):
    n1, n2, p3 = fakes
    r = ctl(n1.port, "status")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = lines[0].split()
    assert header == ["ID", "ADDR", "ROLE", "TERM", "COMMIT", "APPLIED",
                      "MATCH", "RELEASE", "PROTO", "MACHINE_MAX", "MACHINE",
                      "LEAD", "LAG"]
    rows = {int(line.split()[0]): line for line in lines[1:4]}
    # Aligned: every row's ROLE column starts where the header's does.
    col = lines[0].index("ROLE")
    assert all(row[col - 2:col] == "  " for row in lines[1:4]), r.stdout
    assert rows[2].split()[2] == "leader"
    assert rows[1].split()[2] == "follower"
    assert rows[3].split()[2] == "down"
    # The match and lag come from the leader (node 1 reported "-").
    assert rows[1].split()[6] == "100" and rows[1].split()[-1] == "20"
    assert rows[2].split()[-1] == "0"
    assert rows[3].split()[-1] == "30"
    assert rows[2].split()[8] == "1-2"
    assert "leader: node 2" in r.stdout and "1 down" in r.stdout
    assert f"{HOST}:{p3}" in r.stdout


def test_status_json_escapes_and_nulls(fakes):
    n1, n2, p3 = fakes
    r = ctl(n2.port, "status", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    by_id = {o["id"]: o for o in doc}
    assert set(by_id) == {1, 2, 3}
    assert by_id[1]["release"] == '0.1.0-"odd"\\\n\t\x01'
    assert by_id[1]["lag"] == 20 and by_id[1]["match"] == 100
    assert by_id[3]["role"] == "down" and by_id[3]["term"] is None
    assert by_id[3]["membership"] == "learner"
    assert "refused" in by_id[3]["error"].lower()
    assert by_id[2]["role"] == "leader" and by_id[2]["error"] is None
    assert by_id[2]["proto_min"] == 1 and by_id[2]["proto_max"] == 2


def test_members_table(fakes):
    n1, _, p3 = fakes
    r = ctl(n1.port, "members")
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()[1:]]
    assert [row[0] for row in rows] == ["1", "2", "3"]
    assert rows[2][1] == "learner" and rows[2][3] == f"{HOST}:{p3}"


@pytest.mark.parametrize("args,expected", [
    (("add", 4, f"{HOST}:7004", f"{HOST}:6004"),
     ["BATON.ADD", "4", f"{HOST}:7004", f"{HOST}:6004"]),
    (("promote", 4), ["BATON.PROMOTE", "4"]),
    (("remove", 3), ["BATON.REMOVE", "3"]),
    (("transfer",), ["BATON.TRANSFER"]),
    (("transfer", 1), ["BATON.TRANSFER", "1"]),
])
def test_membership_commands_follow_notleader_once(fakes, args, expected):
    n1, n2, _ = fakes
    r = ctl(n1.port, *args)
    assert r.returncode == 0, r.stderr
    assert n2.received[-1] == expected
    assert n1.received[-1] == expected


def test_a_second_notleader_is_an_error(fakes):
    n1, n2, _ = fakes
    n2.handlers["BATON.REMOVE"] = \
        lambda a: f"-NOTLEADER leader is 1 at {HOST}:{n1.port}\r\n".encode()
    r = ctl(n1.port, "remove", 3)
    assert r.returncode == 1
    assert f"{HOST}:{n2.port}" in r.stderr and "NOTLEADER" in r.stderr
    assert len([c for c in n1.received if c[0] == "BATON.REMOVE"]) == 1


def test_error_reply_names_the_node(fakes):
    _, n2, _ = fakes
    n2.handlers["BATON.PROMOTE"] = \
        lambda a: b"-ERR node 4 has not caught up\r\n"
    r = ctl(n2.port, "promote", 4)
    assert r.returncode == 1
    assert f"node {HOST}:{n2.port}" in r.stderr
    assert "has not caught up" in r.stderr


def test_password_is_sent(fakes):
    _, n2, _ = fakes
    n2.password = "s3cret"
    assert ctl(n2.port, "members").returncode == 1
    r = ctl(n2.port, "members", password="s3cret")
    assert r.returncode == 0, r.stderr
    assert ["AUTH", "s3cret"] in n2.received
    r = ctl(n2.port, "members", password="wrong")
    assert r.returncode == 1 and "AUTH" in r.stderr


def test_unreachable_node_and_usage_errors():
    require_binary(BATONCTL)
    (port,) = free_ports(1)
    r = ctl(port, "status")
    assert r.returncode == 1
    assert f"{HOST}:{port}" in r.stderr and "connect" in r.stderr
    for bad in (["promote"], ["promote", "x"], ["add", "1", "nope", "a:1"],
                ["status", "--yaml"], ["nosuch"], []):
        r = ctl(port, *bad)
        assert r.returncode == 2, (bad, r)
        assert "usage" in r.stderr, (bad, r.stderr)
    for helped in (["--help"], ["status", "--help"], ["add", "--help"]):
        r = subprocess.run([str(BATONCTL)] + helped, capture_output=True,
                           text=True, timeout=10)
        assert r.returncode == 0 and "usage" in r.stdout, (helped, r)


def test_unanswering_node_times_out():
    """A node that accepts but never answers: batonctl gives up after
    --timeout-ms instead of hanging."""
    require_binary(BATONCTL)
    with socket.socket() as s:
        s.bind((HOST, 0))
        s.listen(1)
        port = s.getsockname()[1]
        cmd = [str(BATONCTL), "-p", str(port), "--timeout-ms", "300",
               "members"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    assert r.returncode == 1
    assert "timed out" in r.stderr or "temporarily" in r.stderr, r.stderr
