"""Migrating from a release before sealed migration messages (docs/relay.md,
"Migrating from 1.3.0"): only when the operator names it, on both the new
nodes (--migrate-from-unsealed RELEASE) and the relay (--open-cluster
NAME), and never with a node that seals.

A stranger registered at the relay stands for a 1.3.0 node on the wire
(its HELLO names release 1.3.0 and carries no proof; its messages are
1.3.0's format 1, the `unsealed` of test_migration_attacks.py). The real
1.3.0 binaries migrate in tests/jepsen/test_real_upgrade.py."""

import struct
import subprocess
import threading
import time

import pytest
import redis

import conftest as e2e
import relaywire as rw
from test_migration_attacks import (AUTHORITY, BEGIN, EXPORT_REQ, FENCED,
                                    FakeServer, Stranger, secret_file,
                                    status, tear_down, unsealed,
                                    wait_status)
from test_relay import Relay
from test_relay_attacks import REFUSED, hello_fields, welcome

HOST = e2e.HOST


def start_relay(tmp_path, *extra):
    if not (e2e.build_dir() / "baton-relay").exists():
        pytest.fail("baton-relay not built")
    return Relay(tmp_path, e2e.free_ports(1)[0], "--activate",
                 *extra).start()


def register(port, cluster, node, address, release):
    """Stranger's registration, with the release given (Stranger's HELLO
    names 1.3.0)."""
    s = Stranger.__new__(Stranger)
    s.conn = rw.Conn(port)
    s.conn.send(rw.frame(rw.HELLO, hello_fields(cluster, node, 0x5EED + node,
                                                release=release,
                                                address=address)))
    w = s.conn.expect(rw.WELCOME)
    assert w["code"] == 0, w
    s.conn.timeout = 0.3
    s.seqs, s.data, s.views = {}, [], []
    s.stop = threading.Event()
    s.thread = threading.Thread(target=s.run, daemon=True)
    s.thread.start()
    # The relay's first VIEW with this node in it (unicast needs the
    # receiver's incarnation from a view).
    d = e2e.Deadline(10, f"a view with {cluster}/{node}")
    while not any(n["cluster"] == cluster and n["node"] == node
                  for v in s.views for n in v["nodes"]):
        if d.expired():
            d.fail(repr(s.views[-1:]))
        time.sleep(0.02)
    return s


def new_node(tmp_path, relay, *extra, password=None):
    new = e2e.Cluster(tmp_path / "new")
    new.common_args = ["--election-timeout-ms", "300", "--heartbeat-ms",
                       "50"]
    if password is not None:
        new.password = password
        new.common_args += ["--password", password]
    cport, pport = e2e.free_ports(2)
    b = e2e.Node(new, 11, cport, pport)
    new.nodes[b.id] = b
    b.start(["--relay", f"{HOST}:{relay.port}", "--relay-cluster", "new",
             "--migrate-from", "old", "--cluster-id", "new",
             "--migration-secret-file", secret_file(tmp_path), "--bootstrap",
             f"{b.id}={b.peer_addr}/{b.client_addr}", *extra])
    return new, b


def first_export_req(s, what):
    d = e2e.Deadline(20, what)
    while not d.expired():
        for f in s.data:
            return f["payload"]
        time.sleep(0.05)
    d.fail("no EXPORT_REQ came")


def test_the_unsealed_mode_is_only_for_a_release_before_sealing(tmp_path):
    """batond refuses --migrate-from-unsealed for a release that seals (a
    sealed peer cannot be talked down to format 1), one without the relay
    client, one it does not know, and on a node that is not a new node."""
    secret = secret_file(tmp_path)
    cport, pport = e2e.free_ports(2)
    base = [str(e2e.BATOND), "--id", "1", "--listen", f"{HOST}:{cport}",
            "--peer-listen", f"{HOST}:{pport}", "--data",
            str(tmp_path / "d"), "--relay", f"{HOST}:1",
            "--migration-secret-file", secret, "--bootstrap",
            f"1={HOST}:{pport}/{HOST}:{cport}"]
    cases = [
        (["--migrate-from", "old", "--migrate-from-unsealed", "2.0.0"],
         "release 2.0.0 seals its migration messages"),
        (["--migrate-from", "old", "--migrate-from-unsealed", "1.2.0"],
         "release 1.2.0 has no relay client"),
        (["--migrate-from", "old", "--migrate-from-unsealed", "7.7.7"],
         "does not contain release '7.7.7'"),
        (["--migrate-to", "new", "--migrate-from-unsealed", "1.3.0"],
         "it needs --migrate-from NAME"),
    ]
    for extra, why in cases:
        p = subprocess.run(base + extra, capture_output=True, text=True,
                           timeout=20)
        assert p.returncode != 0 and why in p.stderr, (extra, p.stderr)
    assert not (tmp_path / "d").exists() or not any(
        (tmp_path / "d").iterdir())


def test_the_relay_admits_a_cluster_without_proof_only_when_named(tmp_path):
    """With secrets, a 1.3.0 node's HELLO (no proof) is refused with a
    reason naming --open-cluster; with --open-cluster old it registers,
    and every other cluster still needs its proof."""
    new_secret = e2e.make_secret_file(tmp_path / "relay-new")
    relay = start_relay(tmp_path, "--cluster-secret", f"new={new_secret}")
    try:
        c, w = welcome(relay.port, rw.frame(
            rw.HELLO, hello_fields("old", 1, 11)))
        assert w["code"] == REFUSED, w
        assert "--open-cluster old" in relay.log(), relay.log()
        c.close()
    finally:
        relay.kill()
    relay = start_relay(tmp_path, "--cluster-secret", f"new={new_secret}",
                        "--open-cluster", "old")
    try:
        c, w = welcome(relay.port, rw.frame(
            rw.HELLO, hello_fields("old", 1, 12)))
        assert w["code"] == 0, w
        c.close()
        for cluster in ("new", "other"):
            c, w = welcome(relay.port, rw.frame(
                rw.HELLO, hello_fields(cluster, 2, 13)))
            assert w["code"] == REFUSED, (cluster, w)
            c.close()
        assert "WARNING: --open-cluster old" in relay.log(), relay.log()
    finally:
        relay.kill()
    # Refused flags: a named cluster that has a secret; --open-cluster
    # without any secret (registration would be open to all anyway).
    for extra, why in (
            (["--cluster-secret", f"new={new_secret}", "--open-cluster",
              "new"], "that cluster has a --cluster-secret"),
            (["--open-cluster", "old"], "needs at least one "
                                        "--cluster-secret")):
        p = subprocess.run([str(e2e.build_dir() / "baton-relay"),
                            "--listen", f"{HOST}:{e2e.free_ports(1)[0]}",
                            "--data", str(tmp_path / "rd"), *extra],
                           capture_output=True, text=True, timeout=20)
        assert p.returncode == 2 and why in p.stderr, (extra, p.stderr)


def test_without_the_flag_a_cluster_before_sealing_is_refused_clearly(
        tmp_path):
    """A new node without --migrate-from-unsealed and an old node of 1.3.0:
    it says (migration_not_ready, and its log) which flags would make the
    migration possible, and drops 1.3.0's format-1 messages naming them;
    nothing is imported."""
    relay = start_relay(tmp_path)
    fake = FakeServer()
    s = new = None
    try:
        s = register(relay.port, "old", 1, fake.addr, (1, 3, 0))
        new, b = new_node(tmp_path, relay)
        req = first_export_req(s, "the new node's EXPORT_REQ")
        assert req[0] == 0xBA, "a node without the flag must seal"
        st = wait_status(b, lambda st: "--migrate-from-unsealed 1.3.0" in
                         st.get("migration_not_ready", ""),
                         "migration_not_ready naming the flag")
        assert "--open-cluster old" in st["migration_not_ready"], st
        # What 1.3.0 would send (were it able to read the request).
        s.unicast("new", b.id, unsealed(BEGIN, session=1, index=5))
        e2e.wait_log(b, "unsealed (format 1) BEGIN message from node 1 of "
                        "cluster old: dropped", timeout=10)
        e2e.wait_log(b, "--migrate-from-unsealed RELEASE", timeout=1)
        st = status(b)
        assert st["import_index"] == "0", st
        assert int(st["migration_bad_msgs"]) >= 1, st
        assert st["migration_ready"] == "0", st
        assert "migration_unsealed_from" not in st, st
    finally:
        tear_down([s], fake, [new])
        relay.kill()


def test_a_sealed_peer_is_never_spoken_to_unsealed(tmp_path):
    """A new node with --migrate-from-unsealed 1.3.0 and an old node that
    seals (the tree's batond, emulating 1.3.0 with a migration secret):
    the old node drops the format-1 EXPORT_REQ, saying it never speaks
    it, and exports nothing. A node of the old cluster registered as a
    release that seals is not heard in format 1; nor are the types only a
    new leader sends (AUTHORITY, EXPORT_REQ), nor format 1 from the new
    node's own cluster, which stays sealed."""
    relay = start_relay(tmp_path)
    old = e2e.Cluster(tmp_path / "old")
    fake = FakeServer()
    strangers = []
    new = None
    try:
        old.start(1, extra=["--as-release", "1.3.0", "--relay",
                            f"{HOST}:{relay.port}", "--relay-cluster",
                            "old", "--migrate-to", "new",
                            "--migration-secret-file",
                            secret_file(tmp_path)])
        a = old.nodes[1]
        a.client().set("k", "v")
        new, b = new_node(tmp_path, relay, "--migrate-from-unsealed",
                          "1.3.0")
        e2e.wait_log(a, "unsealed (format 1) EXPORT_REQ message from node "
                        "11 of cluster new: dropped", timeout=15)
        e2e.wait_log(b, "WARNING: --migrate-from-unsealed 1.3.0", timeout=1)
        st_a = status(a)
        assert st_a["export_session"] == "0", st_a
        assert int(st_a["migration_bad_msgs"]) >= 1, st_a
        st = status(b)
        assert st["import_index"] == "0", st
        assert "NOT authenticated" in st["migration_unsealed_warning"], st
        # A node of "old" registered as 2.0.0 (a release that seals).
        sealed = register(relay.port, "old", 7, fake.addr, (2, 0, 0))
        strangers.append(sealed)
        sealed.unicast("new", b.id, unsealed(BEGIN, session=1, index=5))
        e2e.wait_log(b, "registered at the relay as release 2.0.0, which "
                        "seals its messages", timeout=10)
        # A node of "old" as 1.3.0 sending what only a new leader sends.
        s13 = register(relay.port, "old", 8, fake.addr, (1, 3, 0))
        strangers.append(s13)
        s13.multicast("new", unsealed(AUTHORITY, index=1, value=8,
                                      data=b"old"))
        s13.multicast("new", unsealed(EXPORT_REQ, data=b"old"))
        e2e.wait_log(b, "an unsealed AUTHORITY from node 8 of cluster old "
                        "refused", timeout=10)
        # A stranger of the new node's own cluster: sealed only.
        own = register(relay.port, "new", 9, fake.addr, (2, 0, 0))
        strangers.append(own)
        own.multicast("new", unsealed(AUTHORITY, index=1, value=9,
                                      data=b"new"))
        e2e.wait_log(b, "unsealed (format 1) AUTHORITY message from node 9 "
                        "of cluster new: dropped", timeout=10)
        st = status(b)
        assert st["import_index"] == "0", st
        assert st["migration_phase"] != "authority", st
        assert int(st["migration_refused"]) >= 2, st
        assert int(st["migration_unsealed_in"]) == 0, st
        assert a.client().get("k") == "v"
        assert status(a)["fenced"] == "0"
    finally:
        tear_down(strangers, fake, [new, old])
        relay.kill()


def test_an_unsealed_fenced_from_another_node_holds_nothing(tmp_path):
    """In the unsealed mode a node registered as the old cluster can say
    anything; a FENCED outside the leader's import session (anyone's)
    does not make the new node hold its clients' commands: they are still
    sent to the old cluster. What the mode exposes is as docs/relay.md
    says: the request is in clear, and the proxy asks no proof, so the
    node registered as the old cluster gets the command and the password
    (why the relay port must be reachable only by the two clusters)."""
    relay = start_relay(tmp_path)
    fake = FakeServer()
    s = new = None
    password = "unsealed-mode-pw"
    try:
        s = register(relay.port, "old", 1, fake.addr, (1, 3, 0))
        new, b = new_node(tmp_path, relay, "--migrate-from-unsealed",
                          "1.3.0", password=password)
        req = first_export_req(s, "the new node's EXPORT_REQ")
        assert req[0] == EXPORT_REQ and req.endswith(b"new"), req[:40]
        session = struct.unpack_from("<Q", req, 1)[0]
        s.unicast("new", b.id, unsealed(FENCED, session=session + 1,
                                        index=5))
        s.multicast("new", unsealed(FENCED, session=session + 1, index=5))
        time.sleep(0.5)
        c = b.client(timeout=10.0)
        t0 = time.monotonic()
        with pytest.raises(redis.ResponseError) as err:
            c.set("k", "v")
        assert "unknown command" in str(err.value), err.value
        assert time.monotonic() - t0 < 2.0, "the command was held"
        st = status(b)
        assert st["migration_held_total"] == "0", st
        assert st["import_index"] == "0", st
        # Sent on (the fake refuses the AUTH, so the SET never follows),
        # with the password: no proof was asked.
        assert b"AUTH" in fake.received and password.encode() in \
            fake.received, fake.received
        assert b"BATON.MIGRATION.PROVE" not in fake.received
    finally:
        tear_down([s], fake, [new])
        relay.kill()
