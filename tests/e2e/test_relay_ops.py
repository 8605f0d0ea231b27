"""The relay's operator side (docs/relay-server.md "Activation", "Deactivation
when the old cluster is gone"; docs/relay.md "When the new cluster is ready"):

- `batonctl relay status|activate|deactivate` over the network, activate
  and deactivate proven with the relay's --admin-secret-file, refused
  without it, with a wrong one, replayed, or for another relay process;
- the relay sends DEACTIVATE by itself once a cluster holds write
  authority and no node of another cluster has been registered for
  --auto-deactivate-ms, and not before;
- a new node's /ready answers 503 while INFO says migration_ready:0, and
  200 once it says 1, in a real migration (1.3.0 node to a 2.0.0 node),
  which then ends with the relay deactivating by itself.

The frames the tests craft (ADMIN_REQUEST, NODE_STATE) are written from
docs/relay-protocol.md in relaywire.py, apart from the C code."""

import http.client
import struct
import subprocess
import time

import pytest

from conftest import (HOST, Cluster, Node, build_dir, free_ports,
                      make_secret_file, require_binary, wait_for)
import relaywire as rw
from test_relay import Relay

BATONCTL = build_dir() / "batonctl"
OLD_RELEASE = "1.3.0"


def batonctl_relay(*args, timeout=30):
    return subprocess.run([str(BATONCTL), "relay", *args],
                          capture_output=True, text=True, timeout=timeout)


def status(port, ext=b""):
    c = rw.Conn(port, timeout=5)
    try:
        c.send(rw.frame(rw.STATUS, ext))
        return c.expect(rw.STATUS_REPLY)
    finally:
        c.close()


def register(port, cluster, node, incarnation):
    c = rw.Conn(port, timeout=5)
    c.send(rw.hello(cluster, node, incarnation))
    w = c.expect(rw.WELCOME)
    assert w["code"] == 0, w
    return c


def next_activation(conn, within_s):
    """ACTIVATE/DEACTIVATE if one comes within the time, else None; VIEWs
    and STATUS_REPLYs are skipped."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        conn.timeout = max(0.05, end - time.monotonic())
        try:
            f = conn.recv()
        except TimeoutError:
            return None
        if f["type"] in ("ACTIVATE", "DEACTIVATE"):
            return f["type"]
    return None


@pytest.fixture
def relay_bin():
    require_binary(build_dir() / "baton-relay")
    require_binary(BATONCTL)


def test_batonctl_relay_activates_only_with_the_admin_secret(tmp_path,
                                                             relay_bin):
    secret = make_secret_file(tmp_path / "admin")
    wrong = make_secret_file(tmp_path / "wrong")
    r = Relay(tmp_path, free_ports(1)[0], "--admin-secret-file",
              str(secret)).start()
    addr = f"{HOST}:{r.port}"
    try:
        node = register(r.port, "old", 1, 11)
        node.expect(rw.VIEW)
        st = batonctl_relay("status", "--relay", addr)
        assert st.returncode == 0, st.stderr
        assert "inactive" in st.stdout and "old" in st.stdout, st.stdout
        # No secret: a usage error; a wrong one: refused, nothing sent.
        none = batonctl_relay("activate", "--relay", addr)
        assert none.returncode == 2 and "--secret-file" in none.stderr
        bad = batonctl_relay("activate", "--relay", addr, "--secret-file",
                             str(wrong))
        assert bad.returncode == 1, bad.stdout + bad.stderr
        assert "authentication failed: wrong proof" in bad.stderr, bad.stderr
        assert next_activation(node, 0.5) is None
        assert status(r.port)["active"] == 0
        ok = batonctl_relay("activate", "--relay", addr, "--secret-file",
                            str(secret))
        assert ok.returncode == 0, ok.stderr
        assert next_activation(node, 5) == "ACTIVATE"
        st = batonctl_relay("status", "--relay", addr)
        assert "active, view" in st.stdout and "inactive" not in st.stdout
        off = batonctl_relay("deactivate", "--relay", addr, "--secret-file",
                             str(secret))
        assert off.returncode == 0, off.stderr
        assert next_activation(node, 5) == "DEACTIVATE"
        assert status(r.port)["active"] == 0
        node.close()
    finally:
        r.kill()


def test_admin_requests_refused_replayed_stale_or_without_secret(
        tmp_path, relay_bin):
    secret = make_secret_file(tmp_path / "admin")
    key = secret.read_bytes()
    r = Relay(tmp_path, free_ports(1)[0], "--admin-secret-file",
              str(secret)).start()
    try:
        inc = status(r.port)["incarnation"]
        req = rw.admin_request(key, rw.ADMIN_ACTIVATE, inc)
        first = status(r.port, req)
        assert rw.admin_result(first) == (0, "active"), first
        assert first["active"] == 1
        # The same request again (a recording of it): refused.
        again = status(r.port, rw.admin_request(
            key, rw.ADMIN_DEACTIVATE, inc, nonce=b"\x01" * 16))
        assert rw.admin_result(again)[0] == 0
        replay = status(r.port, rw.admin_request(
            key, rw.ADMIN_ACTIVATE, inc, nonce=b"\x01" * 16))
        code, text = rw.admin_result(replay)
        assert code == 36 and "already used" in text, text
        assert replay["active"] == 0
        # For another relay process (an earlier incarnation).
        other = status(r.port, rw.admin_request(key, rw.ADMIN_ACTIVATE,
                                                inc - 1))
        code, text = rw.admin_result(other)
        assert code == 36 and "incarnation" in text, text
        # Old: its clock far off.
        stale = status(r.port, rw.admin_request(
            key, rw.ADMIN_ACTIVATE, inc,
            ts_ms=int(time.time() * 1000) - 3_600_000))
        code, text = rw.admin_result(stale)
        assert code == 36 and "clock" in text, text
        # A malformed entry: refused, not a crash.
        short = status(r.port, rw.entry(rw.ADMIN_REQUEST, b"\x01" * 10))
        code, text = rw.admin_result(short)
        assert code == 36 and "must be 65" in text, text
        assert status(r.port)["active"] == 0
    finally:
        r.kill()
    # A relay without --admin-secret-file refuses every request.
    r2 = Relay(tmp_path, free_ports(1)[0]).start()
    try:
        inc = status(r2.port)["incarnation"]
        res = status(r2.port, rw.admin_request(key, rw.ADMIN_ACTIVATE, inc))
        code, text = rw.admin_result(res)
        assert code == 36 and "--admin-secret-file" in text, text
        out = batonctl_relay("activate", "--relay", f"{HOST}:{r2.port}",
                             "--secret-file", str(secret))
        assert out.returncode == 1
        assert "takes no admin requests" in out.stderr, out.stderr
    finally:
        r2.kill()


def node_state(conn, flags):
    conn.send(rw.frame(rw.STATUS, rw.entry(rw.NODE_STATE, bytes([flags]))))


def test_relay_deactivates_by_itself_once_the_old_cluster_is_gone(
        tmp_path, relay_bin):
    r = Relay(tmp_path, free_ports(1)[0], "--activate",
              "--auto-deactivate-ms", "600", "--forget-after-ms",
              "3000").start()
    try:
        old = register(r.port, "old", 1, 21)
        new = register(r.port, "new", 1, 31)
        assert next_activation(new, 2) == "ACTIVATE"
        # The old cluster leaves before any authority: not gone, the
        # migration still needs it when it comes back.
        old.send(rw.leave("restart"))
        assert next_activation(new, 1.5) is None
        old = register(r.port, "old", 1, 22)
        # Authority held while an old node is registered: stays active.
        node_state(new, 1)
        assert next_activation(new, 1.5) is None
        assert status(r.port)["active"] == 1
        # Cut off without LEAVE, the old node is still in the view (it may
        # come back and must then hear AUTHORITY): active until the relay
        # forgets it (--forget-after-ms), then the bound, then DEACTIVATE.
        t0 = time.monotonic()
        old.close()
        assert next_activation(new, 2.0) is None
        assert next_activation(new, 8) == "DEACTIVATE"
        assert time.monotonic() - t0 >= 3.0 + 0.5
        assert status(r.port)["active"] == 0
        log = r.log()
        assert "the old cluster is gone: cluster new holds write " \
               "authority" in log, log
        new.close()
    finally:
        r.kill()


def get_ready(port):
    conn = http.client.HTTPConnection(HOST, port, timeout=3)
    try:
        conn.request("GET", "/ready")
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


def migration_ready(node):
    text = node.client(timeout=2.0).execute_command("BATON.MIGRATION",
                                                    "STATUS")
    fields = dict(line.split(":", 1) for line in text.splitlines()
                  if ":" in line)
    return fields


def test_ready_follows_migration_readiness_and_relay_ends_itself(
        tmp_path, relay_bin):
    """A scheduler probing /ready must not see a new node ready before INFO
    migration_ready:1 (it would then stop an old node too early)."""
    require_binary(build_dir() / "batond")
    admin = make_secret_file(tmp_path / "admin")
    msecret = make_secret_file(tmp_path / "migration")
    r = Relay(tmp_path, free_ports(1)[0], "--admin-secret-file", str(admin),
              "--auto-deactivate-ms", "1000").start()
    relay_addr = f"{HOST}:{r.port}"
    old = Cluster(tmp_path / "old")
    new = Cluster(tmp_path / "new")
    try:
        old.start(1, extra=["--as-release", OLD_RELEASE, "--relay",
                            relay_addr, "--relay-cluster", "old",
                            "--migrate-to", "new",
                            "--migration-secret-file", str(msecret)])
        old.nodes[1].client().set("k", "v")
        cport, pport, mport = free_ports(3)
        b = Node(new, 11, cport, pport)
        new.nodes[b.id] = b
        b.start(["--relay", relay_addr, "--relay-cluster", "new",
                 "--migrate-from", "old", "--cluster-id", "new",
                 "--migration-secret-file", str(msecret),
                 "--metrics", f"{HOST}:{mport}",
                 "--bootstrap", f"{b.id}={b.peer_addr}/{b.client_addr}"])
        wait_for("B1 leads its cluster",
                 lambda: migration_ready(b).get("migration_phase") ==
                 "waiting-for-activation", timeout=20)
        # The relay is inactive: the node is not ready, and /ready says so.
        seen_not_ready = 0
        for _ in range(5):
            before = migration_ready(b)["migration_ready"]
            code, body = get_ready(mport)
            after = migration_ready(b)["migration_ready"]
            if before == after == "0":
                assert code == 503, (code, body)
                assert "migration not ready" in body, body
                seen_not_ready += 1
            time.sleep(0.05)
        assert seen_not_ready >= 3
        act = batonctl_relay("activate", "--relay", relay_addr,
                             "--secret-file", str(admin))
        assert act.returncode == 0, act.stdout + act.stderr
        # Every probe from now: /ready 200 never before migration_ready:1.
        end = time.monotonic() + 30
        while True:
            assert time.monotonic() < end, migration_ready(b)
            code, body = get_ready(mport)
            after = migration_ready(b)["migration_ready"]
            if code == 200:
                assert after == "1", (code, body)
                break
            assert code == 503 and "migration not ready" in body, body
            time.sleep(0.02)
        # Hand-off, then the old node stops: the relay deactivates itself.
        ho = subprocess.run([str(BATONCTL), "-h", HOST, "-p", str(b.client_port),
                             "migrate", "--handoff", "--wait-s", "30"],
                            capture_output=True, text=True, timeout=60)
        assert ho.returncode == 0, ho.stdout + ho.stderr
        assert get_ready(mport)[0] == 200
        time.sleep(1.5)  # authority held, the old node still connected
        assert status(r.port)["active"] == 1
        # A restarted relay knows nothing of authority until the new node
        # says it again after its WELCOME.
        r.kill()
        r.start()

        def both_back():
            nodes = status(r.port)["nodes"]
            return sorted((n["cluster"], n["connected"]) for n in nodes) \
                == [("new", 1), ("old", 1)]
        wait_for("both nodes registered at the restarted relay", both_back,
                 timeout=15)
        assert status(r.port)["active"] == 1
        old.nodes[1].terminate()
        wait_for("the relay to deactivate itself",
                 lambda: status(r.port)["active"] == 0, timeout=15)
        assert "the old cluster is gone: cluster new holds write " \
               "authority" in r.log()
        assert b.client().get("k") == "v"
        # Deactivated, the new node holding authority stays ready.
        assert get_ready(mport)[0] == 200
    finally:
        old.stop_all()
        new.stop_all()
        r.kill()


def test_a_running_node_attached_to_the_relay_without_a_restart(
        tmp_path, relay_bin):
    """An old node started without --relay joins the migration through
    `batonctl relay attach` (BATON.MIGRATION ATTACH): the new node imports
    its data and takes authority; the node's process never restarted."""
    require_binary(build_dir() / "batond")
    msecret = make_secret_file(tmp_path / "migration")
    open_secret = tmp_path / "world-readable"
    open_secret.write_bytes(b"x" * 32)
    open_secret.chmod(0o644)
    r = Relay(tmp_path, free_ports(1)[0], "--activate").start()
    relay_addr = f"{HOST}:{r.port}"
    old = Cluster(tmp_path / "old")
    new = Cluster(tmp_path / "new")
    try:
        old.start(1, extra=["--as-release", OLD_RELEASE])
        a = old.nodes[1]
        pid = a.proc.pid
        a.client().set("k", "before-attach")
        cport, pport = free_ports(2)
        b = Node(new, 11, cport, pport)
        new.nodes[b.id] = b
        b.start(["--relay", relay_addr, "--relay-cluster", "new",
                 "--migrate-from", "old", "--cluster-id", "new",
                 "--migration-secret-file", str(msecret),
                 "--bootstrap", f"{b.id}={b.peer_addr}/{b.client_addr}"])
        time.sleep(1.0)
        assert migration_ready(b)["import_index"] == "0"

        def attach(*extra, secret=msecret):
            return subprocess.run(
                [str(BATONCTL), "-h", HOST, "-p", str(a.client_port),
                 "relay", "attach", "--relay", relay_addr, "--cluster",
                 "old", "--migrate-to", "new", "--migration-secret-file",
                 str(secret), *extra],
                capture_output=True, text=True, timeout=30)
        # A secret file others can read is refused, and nothing changes.
        bad = attach(secret=open_secret)
        assert bad.returncode == 1, bad.stdout + bad.stderr
        assert "attach refused" in bad.stderr, bad.stderr
        assert "migration_side:none" in a.client().execute_command(
            "BATON.MIGRATION", "STATUS")
        rel = subprocess.run(
            [str(BATONCTL), "-h", HOST, "-p", str(a.client_port), "relay",
             "attach", "--relay", relay_addr, "--cluster", "old",
             "--migrate-to", "new", "--migration-secret-file",
             "migration"], capture_output=True, text=True, timeout=30)
        assert rel.returncode == 2 and "absolute" in rel.stderr
        ok = attach()
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "attached to relay" in ok.stdout
        again = attach()
        assert again.returncode == 1
        assert "already takes part in a migration" in again.stderr
        wait_for("B1 to import and be ready",
                 lambda: migration_ready(b)["migration_ready"] == "1",
                 timeout=30)
        a.client().set("k", "after-attach")
        ho = subprocess.run([str(BATONCTL), "-h", HOST, "-p",
                             str(b.client_port), "migrate", "--handoff",
                             "--wait-s", "30"],
                            capture_output=True, text=True, timeout=60)
        assert ho.returncode == 0, ho.stdout + ho.stderr
        assert b.client().get("k") == "after-attach"
        # The old node forwards to the new cluster now; same process.
        assert a.client().get("k") == "after-attach"
        assert a.proc.pid == pid and a.alive
    finally:
        old.stop_all()
        new.stop_all()
        r.kill()


def test_attach_refused_to_a_release_without_the_relay_client(tmp_path,
                                                              relay_bin):
    require_binary(build_dir() / "batond")
    msecret = make_secret_file(tmp_path / "migration")
    old = Cluster(tmp_path / "old")
    try:
        old.start(1, extra=["--as-release", "1.2.0"])
        c = old.nodes[1].client()
        from redis.exceptions import ResponseError
        with pytest.raises(ResponseError) as e:
            c.execute_command("BATON.MIGRATION", "ATTACH", f"{HOST}:1",
                              "old", "new", str(msecret))
        assert "has no relay client" in str(e.value), e.value
        with pytest.raises(ResponseError) as e:
            c.execute_command("BATON.MIGRATION", "ATTACH", f"{HOST}:1",
                              "old")
        assert "usage: BATON.MIGRATION ATTACH" in str(e.value), e.value
        assert "migration_side:none" in c.execute_command(
            "BATON.MIGRATION", "STATUS")
    finally:
        old.stop_all()
