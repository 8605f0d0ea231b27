"""The procedures of docs/operations.md, docs/backup.md and docs/install.md,
walked step by step with real processes and batond's DEFAULT timings (a
bug once showed only with them): replacing a failed node whose data is
lost under a new id; a node restarted on a wiped directory under its old
id (refused when it founds or joins by seeds, named by `batonctl health`
when it waits with --join);
shrinking and growing, with `batonctl add` refusing what would never catch
up; a founder started late (refused, and replaced); losing quorum and getting it back, and, when a majority's data is gone,
founding a new cluster from the newest backup; and a node of install.md's
kind (config file, the unit's command line, environment overrides, the
password for batonctl from the environment) added to a running cluster.

Each step asserts its outcome: exit codes of `batonctl health`, members
listed, keys present or (after a restore) absent as the doc says."""

import os
import shlex
import shutil
import subprocess
import time

import pytest
import redis

from conftest import (BATONCTL, HOST, POLL_S, Deadline, Node,
                      _die_with_parent, build_dir, free_ports, is_tryagain,
                      make_secret_file, retry, wait_log)

PASSWORD = "ops-walk-password"
# batond's own timings: 1000 ms election timeout, 100 ms heartbeat.
DEFAULT_TIMINGS = None
SETTLE_S = 20.0  # a default-timing cluster elects, catches up, answers


def start(cluster, n=3, **kw):
    return cluster.start(n, election_timeout_ms=DEFAULT_TIMINGS,
                         password=PASSWORD, **kw)


def health(cluster, node=None):
    return cluster.batonctl("health", node=node, check=False)


def wait_health(cluster, code, needle="", node=None, timeout=SETTLE_S):
    """Wait (bounded) until `batonctl health` exits `code` with `needle` in
    its output; returns the last run."""
    d = Deadline(timeout, f"batonctl health to exit {code} with {needle!r}",
                 max_tries=200)
    r = None
    while not d.expired():
        r = health(cluster, node)
        if r.returncode == code and needle in r.stdout + r.stderr:
            return r
        time.sleep(0.2)
    d.fail(f"last: exit {r.returncode}\n{r.stdout}{r.stderr}")


def member_ids(cluster, node=None):
    lead = node or cluster.leader()
    return sorted(int(m["id"]) for m in lead.members())


def set_keys(node, prefix, n):
    c = node.client()
    for i in range(n):
        retry(lambda i=i: c.set(f"{prefix}{i}", f"v{i}"),
              deadline_s=SETTLE_S, what=f"SET {prefix}{i}")


def assert_keys(node, prefix, n):
    c = node.client()
    got = retry(lambda: c.mget([f"{prefix}{i}" for i in range(n)]),
                deadline_s=SETTLE_S, what=f"MGET {prefix}*")
    assert got == [f"v{i}" for i in range(n)], got


def wipe(node):
    shutil.rmtree(node.data_dir)


# ---- Founding ----------------------------------------------------------------

def three_founders(cluster):
    """Nodes 1-3 of a cluster with a password, not started; with the
    --bootstrap list that names them."""
    cluster.common_args = ["--password", PASSWORD]
    cluster.password = PASSWORD
    ports = free_ports(6)
    nodes = [Node(cluster, i + 1, ports[2 * i], ports[2 * i + 1])
             for i in range(3)]
    for m in nodes:
        cluster.nodes[m.id] = m
    return nodes, ",".join(f"{m.id}={m.peer_addr}/{m.client_addr}"
                           for m in nodes)


def test_a_founder_started_late_is_refused_and_replaced(cluster):
    # operations.md, "Start the founders together": a founder started after
    # the others elected a leader looks like a wiped member and is refused;
    # the way out is the replacement procedure.
    nodes, boot = three_founders(cluster)
    for m in nodes[:2]:
        m.start(["--bootstrap", boot])
    lead = cluster.leader(timeout=SETTLE_S)
    retry(lambda: lead.client().set("early", "1"), deadline_s=SETTLE_S)
    late = nodes[2]
    late.start(["--bootstrap", boot], wait=False)
    assert late.proc.wait(timeout=SETTLE_S) == 3, late.log_tail()
    assert "refusing to found a new cluster" in late.log_text()
    wait_health(cluster, 1, f"member {late.id} down", node=lead)
    assert lead.info()["machine_version"] == "1"  # waits for node 3
    cluster.batonctl("remove", late.id, node=cluster.leader())
    new = cluster.new_joiner()
    cluster.add_and_promote(new)
    wait_health(cluster, 0, "3 members answer", node=lead)
    d = Deadline(SETTLE_S, "the machine version to rise")
    while cluster.leader().info()["machine_version"] == "1":
        if d.expired():
            d.fail(cluster.batonctl("status").stdout)
        time.sleep(0.1)
    assert retry(lambda: new.client().get("early"),
                 deadline_s=SETTLE_S) == "1"


def test_founders_with_different_secrets_are_named_then_fixed(cluster):
    # install.md's trap: a peer secret made on each host. The founders
    # refuse each other; health says why; the same file on each, and a
    # restart, make the cluster.
    nodes, boot = three_founders(cluster)
    for m in nodes:
        m.secret_file = make_secret_file(cluster.root / f"secret{m.id}")
        m.start(["--bootstrap", boot], wait=False)
    for m in nodes:
        m.wait_ready()
    r = wait_health(cluster, 1, "for a wrong peer secret", node=nodes[0])
    assert "no leader" in r.stdout, r.stdout
    for m in nodes:
        m.terminate()
        m.secret_file = cluster.secret_file
        m.restart()
    wait_health(cluster, 0, "3 members answer", node=nodes[0])
    set_keys(cluster.leader(), "s", 3)


# ---- Replacing a failed node ------------------------------------------------

def test_replace_a_failed_node_with_a_new_id(cluster):
    start(cluster)
    set_keys(cluster.leader(), "before", 20)
    victim = cluster.followers()[0]
    victim.kill9()
    wipe(victim)  # its disk is gone
    # Step 1: the rest has a leader; health names the dead member.
    r = wait_health(cluster, 1, f"member {victim.id} down",
                    node=cluster.leader())
    assert "no leader" not in r.stdout, r.stdout
    # Step 2: the replacement, on an empty directory, a new id, --join.
    new = cluster.new_joiner()
    # Step 3, then 4: remove the old id, add and promote the new one.
    cluster.batonctl("remove", victim.id, node=cluster.leader())
    cluster.add_and_promote(new)
    # Step 5.
    r = wait_health(cluster, 0, "3 members answer", node=cluster.leader())
    assert member_ids(cluster) == sorted(
        m.id for m in cluster.nodes.values() if m is not victim)
    assert_keys(new, "before", 20)
    # The old node, restarted on its wiped directory with its usual
    # command line (--bootstrap), must not found a second cluster.
    victim.start(wait=False)
    code = victim.proc.wait(timeout=SETTLE_S)
    assert code == 3, victim.log_tail()
    assert "refusing to found a new cluster" in victim.log_text()
    assert f"batonctl remove {victim.id}" in victim.log_text()
    # Nor can it come back by --join: its id stays refused.
    victim.start(["--join"])
    r = cluster.batonctl("add", victim.id, victim.peer_addr,
                         victim.client_addr, node=cluster.leader(),
                         check=False)
    assert r.returncode == 1, r
    assert f"node {victim.id} was removed from this cluster" in r.stderr
    victim.terminate()
    wait_health(cluster, 0, node=cluster.leader())


def test_a_wiped_member_back_under_its_old_id_is_named_by_health(cluster):
    # The mistake the procedure warns against: the data directory lost, the
    # node restarted on an empty one with --join and its old id. Raft's
    # safety rests on a voter keeping what it acknowledged, so health must
    # not call such a cluster healthy.
    lead = start(cluster)
    set_keys(lead, "k", 5)
    victim = cluster.followers()[0]
    victim.kill9()
    wipe(victim)
    victim.start(["--join"])
    r = wait_health(cluster, 1, f"member {victim.id} lost entries it had "
                    "acknowledged", node=cluster.leader())
    assert f"`batonctl remove {victim.id}`" in r.stdout, r.stdout
    rows = cluster.batonctl("status", node=cluster.leader()).stdout
    assert any(ln.split()[:1] == [str(victim.id)] and "lost-log" in ln
               for ln in rows.splitlines()), rows
    # What the message says to do: stop it, remove it, health is 0 again
    # (two voters, as after any removal).
    victim.terminate()
    cluster.batonctl("remove", victim.id, node=cluster.leader())
    r = wait_health(cluster, 0, "2 members answer", node=cluster.leader())
    assert len(member_ids(cluster)) == 2


def test_a_wiped_member_joining_by_seeds_under_its_old_id_stops(cluster):
    # With --accept-joins a node started with --join-seeds adds itself;
    # the same node back on a wiped directory is told it is a voter
    # already, sees its empty log, and stops instead of rejoining.
    start(cluster, extra=["--accept-joins"])
    seeds = ",".join(m.peer_addr for m in cluster.nodes.values())
    cport, pport = free_ports(2)
    joiner = Node(cluster, 4, cport, pport)
    cluster.nodes[4] = joiner
    joiner.start(["--join-seeds", seeds])
    wait_log(joiner, "added this node as a voter", timeout=SETTLE_S)
    wait_health(cluster, 0, "4 members answer", node=cluster.leader())
    joiner.kill9()
    wipe(joiner)
    joiner.start(wait=False)
    assert joiner.proc.wait(timeout=SETTLE_S) == 3, joiner.log_tail()
    assert "it lost the data it had acknowledged" in joiner.log_text()
    # The way out the message gives: remove it, add a new node.
    cluster.batonctl("remove", 4, node=cluster.leader())
    cport, pport = free_ports(2)
    five = Node(cluster, 5, cport, pport)
    cluster.nodes[5] = five
    five.start(["--join-seeds", seeds])
    wait_health(cluster, 0, "4 members answer", node=cluster.leader())
    assert 5 in member_ids(cluster) and 4 not in member_ids(cluster)


# ---- Growing and shrinking ---------------------------------------------------

def test_shrink_and_grow(cluster):
    lead = start(cluster)
    set_keys(lead, "g", 10)
    # Growing: a learner first, promoted once caught up.
    four = cluster.new_joiner()
    # batonctl add asks the joining node first: swapped addresses and a
    # wrong id are refused by name, and nothing is added.
    r = cluster.batonctl("add", four.id, four.client_addr, four.peer_addr,
                         check=False)
    assert r.returncode == 1 and "is it the peer port?" in r.stderr, r
    r = cluster.batonctl("add", four.id + 1, four.peer_addr,
                         four.client_addr, check=False)
    assert r.returncode == 1, r
    assert f"is node {four.id}, not {four.id + 1}" in r.stderr, r
    assert member_ids(cluster) == [1, 2, 3]
    cluster.add_and_promote(four)
    assert member_ids(cluster) == [1, 2, 3, 4]
    voters = [m for m in cluster.leader().members() if m["role"] == "voter"]
    assert len(voters) == 4
    wait_health(cluster, 0, "4 members answer")
    # Shrinking: remove the leader itself: it hands over first.
    old = cluster.leader()
    cluster.batonctl("remove", old.id, node=old)
    d = Deadline(SETTLE_S, f"{old} to leave the configuration")
    while not d.expired():
        lead = cluster.leader(exclude=(old,))
        if old.id not in member_ids(cluster, lead):
            break
        time.sleep(POLL_S)
    else:
        d.fail()
    wait_log(old, "was removed from the cluster", timeout=SETTLE_S)
    old.terminate()
    r = wait_health(cluster, 0, "3 members answer", node=lead)
    # And one more out, one more in: 3 -> 2 -> 3.
    out = [m for m in cluster.alive() if m is not lead][0]
    cluster.batonctl("remove", out.id, node=lead)
    out.terminate()
    wait_health(cluster, 0, "2 members answer", node=lead)
    five = cluster.new_joiner()
    cluster.add_and_promote(five)
    wait_health(cluster, 0, "3 members answer", node=five)
    assert len(member_ids(cluster)) == 3
    assert_keys(five, "g", 10)


def test_the_only_voter_cannot_be_removed_and_a_stray_is_named(cluster):
    # Refused before anything is written: the node stays a member, its id
    # is not on the removed list, and the cluster still grows.
    lead = start(cluster, n=1)
    r = cluster.batonctl("remove", lead.id, check=False)
    assert r.returncode == 1, r
    assert "is the cluster's only voter" in r.stderr, r.stderr
    r = cluster.batonctl("promote", lead.id, check=False)
    assert r.returncode == 1 and "not a learner" in r.stderr, r.stderr
    assert lead.info()["removed"] == "no"
    assert member_ids(cluster) == [lead.id]
    # A joiner with another peer secret passes add's checks (the secret
    # cannot be seen from outside) but never hears the leader: health
    # names it.
    cport, pport = free_ports(2)
    stray = Node(cluster, 2, cport, pport)
    cluster.nodes[2] = stray
    stray.secret_file = make_secret_file(cluster.root / "another-secret")
    stray.start(["--join"])
    cluster.batonctl("add", stray.id, stray.peer_addr, stray.client_addr)
    wait_health(cluster, 1, "member 2 hears no leader", node=lead)
    stray.terminate()
    cluster.batonctl("remove", stray.id)
    two = cluster.new_joiner()
    cluster.add_and_promote(two)
    wait_health(cluster, 0, "2 members answer", node=lead)
    assert "finishing the removal" not in lead.log_text()


# ---- After losing quorum -----------------------------------------------------

def test_quorum_lost_then_the_members_come_back(cluster):
    lead = start(cluster)
    set_keys(lead, "q", 10)
    down = cluster.followers()
    for m in down:
        m.kill9()
    # No majority: the survivor takes no writes (TRYAGAIN, once it has
    # stepped down) and health says there is no leader.
    wait_health(cluster, 1, "no leader", node=lead)
    with pytest.raises(redis.ResponseError) as e:
        lead.client().set("during", "x")
    assert is_tryagain(e.value), e.value
    # BATON.STALE ON reads still serve what it applied.
    stale = lead.client(single_connection_client=True)
    assert stale.execute_command("BATON.STALE", "ON") == "OK"
    assert stale.get("q3") == "v3"
    # Step 1: bring the members back on their own directories.
    for m in down:
        m.restart()
    wait_health(cluster, 0, "3 members answer", node=lead)
    for m in cluster.nodes.values():
        assert_keys(m, "q", 10)


def test_majority_data_lost_found_a_new_cluster_from_a_backup(cluster,
                                                              tmp_path):
    lead = start(cluster)
    old_uuid = lead.info()["cluster_uuid"]
    set_keys(lead, "b", 10)
    backup = tmp_path / "hourly.backup"
    cluster.batonctl("snapshot", "save", backup)
    assert cluster.batonctl("snapshot", "status", backup).returncode == 0
    set_keys(lead, "after", 3)  # written after the newest backup
    survivor = cluster.leader()
    lost = [m for m in cluster.alive() if m is not survivor]
    for m in lost:
        m.kill9()
        wipe(m)
    # The doc's step 2: rescue recent keys from a survivor by hand...
    stale = survivor.client(single_connection_client=True)
    stale.execute_command("BATON.STALE", "ON")
    assert stale.get("after2") == "v2"
    survivor.terminate()
    # ...then found a new cluster from the newest backup (backup.md): one
    # node, empty directory, --bootstrap naming it alone, --restore.
    first = cluster.node(1)
    if first.data_dir.exists():
        wipe(first)
    first.start(["--bootstrap", f"1={first.peer_addr}/{first.client_addr}",
                 "--restore", str(backup)])
    wait_log(first, "restore: done", timeout=SETTLE_S)
    # The others join on empty directories, each with its own id.
    for m in cluster.nodes.values():
        if m is first:
            continue
        if m.data_dir.exists():
            wipe(m)
        m.start(["--join"])
        cluster.add_and_promote(m)
    wait_health(cluster, 0, "3 members answer", node=first)
    assert first.info()["cluster_uuid"] not in ("-", old_uuid)
    for m in cluster.nodes.values():
        assert_keys(m, "b", 10)
    # The writes after the backup are lost, as the doc says.
    assert first.client().get("after0") is None
    # Restarted with --restore still given, node 1 is refused and says to
    # drop it; without it, it starts on its data.
    first.terminate()
    first.start(wait=False)
    assert first.proc.wait(timeout=SETTLE_S) == 3
    assert "drop --restore" in first.log_text()
    first.start([])
    wait_health(cluster, 0, "3 members answer", node=first)


# ---- install.md: a node from a config file, added to a running cluster -------

def test_a_config_file_node_joins_and_batonctl_takes_the_env_password(
        cluster, tmp_path):
    """install.md: the unit's command line (`batond --config FILE`) with
    one file per node, an environment override as a systemd drop-in would
    set it, `join` in the file of a node added later, and `bootstrap`
    left in a founder's file across a restart."""
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", str(build_dir()), "--prefix",
                        str(prefix)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    unit = (prefix / "lib" / "systemd" / "system" /
            "batond@.service").read_text()
    line = [ln for ln in unit.splitlines() if ln.startswith("ExecStart=")]
    assert len(line) == 1, line
    lead = start(cluster)
    ports = free_ports(2)
    node_id = max(cluster.nodes) + 1
    conf = tmp_path / f"{node_id}.conf"
    conf.write_text(
        f"id {node_id}\nlisten {HOST}:{ports[0]}\n"
        f"peer-listen {HOST}:{ports[1]}\ndata {tmp_path / 'data'}\n"
        f"peer-secret-file {cluster.secret_file}\njoin\n"
        f"password {PASSWORD}\nlog-format text\n")
    os.chmod(conf, 0o600)
    cmd = line[0][len("ExecStart="):].replace(
        "/etc/baton/%i.conf", str(conf))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    # systemctl edit batond@4: Environment=BATON_LOG_FORMAT=json (the
    # environment beats the file).
    env["BATON_LOG_FORMAT"] = "json"

    def run_unit():
        """The unit's command line, as systemd runs it; its output
        appended to joiner.log."""
        with open(tmp_path / "joiner.log", "ab") as log:
            p = subprocess.Popen(shlex.split(cmd), stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=log, env=env,
                                 preexec_fn=_die_with_parent)
        cluster.started_pids.add(p.pid)
        return p

    proc = run_unit()
    try:
        joiner = Node(cluster, node_id, ports[0], ports[1])
        joiner.proc = proc
        joiner.log_path = tmp_path / "joiner.log"
        joiner.wait_ready()
        # batonctl with the password from the environment, not -a.
        ctl_env = dict(env, BATON_PASSWORD=PASSWORD)
        base = [str(BATONCTL), "-h", HOST, "-p", str(lead.client_port)]
        r = subprocess.run(base + ["health"], capture_output=True,
                           text=True, timeout=30, env=env)
        assert r.returncode == 1 and "BATON_PASSWORD" in r.stderr, r
        r = subprocess.run(base + ["add", str(node_id), joiner.peer_addr,
                                   joiner.client_addr],
                           capture_output=True, text=True, timeout=30,
                           env=ctl_env)
        assert r.returncode == 0, r
        d = Deadline(SETTLE_S, "the promotion", max_tries=100)
        while not d.expired():
            r = subprocess.run(base + ["promote", str(node_id)],
                               capture_output=True, text=True, timeout=30,
                               env=ctl_env)
            if r.returncode == 0:
                break
            time.sleep(0.2)
        else:
            d.fail(r.stderr)
        r = subprocess.run(base + ["health"], capture_output=True,
                           text=True, timeout=30, env=ctl_env)
        assert r.returncode == 0 and "4 members answer" in r.stdout, r
        assert '"level":"info"' in joiner.log_text()
        set_keys(lead, "conf", 3)
        assert_keys(joiner, "conf", 3)
        # Restarted through the same command line ("join" still in the
        # file): it starts on its data and is a member at once.
        proc.terminate()
        assert proc.wait(timeout=10) == 0
        proc = run_unit()
        joiner.proc = proc
        joiner.wait_ready()
        assert_keys(joiner, "conf", 3)
        r = wait_health(cluster, 0, "4 members answer")
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
