"""batond's and batonctl's options (docs/batond.md, "Running a node" and
"Configuration"): --name=value as --name value, one line on stderr and exit
2 for every kind of refusal (naming the option and its range or allowed
values), a node with no state and neither --bootstrap nor --join refused,
the precedence flags > environment > config file, unknown config keys
refused with file:line, --log-format json, batonctl --version.

Every node here is one process on 127.0.0.1 ports from free_ports, started
and stopped by the test (SIGTERM, then SIGKILL), waits bounded."""

import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest
import redis

from conftest import (BATOND, BATONCTL, HOST, POLL_S, READY_TIMEOUT_S, REPO,
                      STOP_GRACE_S, Deadline, _die_with_parent, free_ports,
                      make_secret_file, release_table, require_binary)

RFC3339_MS_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def clean_env(**extra):
    """The environment without any BATON_ option variable, plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("BATON_") or k == "BATON_BUILD"}
    env.update(extra)
    return env


def batond(*args, env=None):
    require_binary(BATOND)
    return subprocess.run([str(BATOND)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=10,
                          env=env or clean_env())


def batonctl(*args):
    require_binary(BATONCTL)
    return subprocess.run([str(BATONCTL)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=10,
                          env=clean_env())



def stop_process(p):
    """SIGTERM, then SIGKILL after the grace period; the exit status."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=STOP_GRACE_S)
    return p.returncode

class Started:
    """batond processes this test started: waited for, then stopped."""

    def __init__(self):
        self.procs = []

    def start(self, args, log_path, env=None, port=None):
        require_binary(BATOND)
        with open(log_path, "ab") as log:
            p = subprocess.Popen([str(BATOND)] + [str(a) for a in args],
                                 stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=log, env=env or clean_env(),
                                 preexec_fn=_die_with_parent)
        self.procs.append(p)
        if port is not None:
            self.wait_ping(p, port, log_path)
        return p

    @staticmethod
    def wait_ping(p, port, log_path, password=None):
        d = Deadline(READY_TIMEOUT_S, f"batond on port {port} to answer")
        last = None
        while not d.expired():
            assert p.poll() is None, (
                f"batond exited {p.returncode}:\n"
                f"{log_path.read_text(errors='replace')[-3000:]}")
            try:
                if redis.Redis(host=HOST, port=port, password=password,
                               socket_timeout=1.0).ping():
                    return
            except redis.AuthenticationError:
                return  # it answers: AUTH is the test's to check
            except redis.ResponseError as e:
                if "NOAUTH" in str(e):
                    return
                last = e
            except (redis.ConnectionError, redis.TimeoutError) as e:
                last = e
            time.sleep(POLL_S)
        d.fail(repr(last))

    @staticmethod
    def stop(p):
        return stop_process(p)

    def stop_all(self):
        for p in self.procs:
            self.stop(p)


@pytest.fixture
def started():
    s = Started()
    try:
        yield s
    finally:
        s.stop_all()


def one_node(tmp_path, name="d"):
    """Flags of a one-node cluster on fresh ports, as (flags, client port)."""
    cport, pport = free_ports(2)
    secret = make_secret_file(tmp_path / f"secret-{cport}")
    flags = {"id": 1, "listen": f"{HOST}:{cport}",
             "peer-listen": f"{HOST}:{pport}", "data": tmp_path / name,
             "bootstrap": f"1={HOST}:{pport}/{HOST}:{cport}",
             "peer-secret-file": secret, "election-timeout-ms": 500,
             "heartbeat-ms": 50}
    return flags, cport


def as_args(flags, equals=False):
    out = []
    for k, v in flags.items():
        out += [f"--{k}={v}"] if equals else [f"--{k}", str(v)]
    return out


def refused(args, *needles, env=None):
    r = batond(*args, env=env)
    assert r.returncode == 2, (args, r)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, (args, r.stderr)
    for n in needles:
        assert n in lines[0], (args, n, lines[0])
    return lines[0]


# ---- --name=value --------------------------------------------------------------


def test_equals_forms_json_log_and_a_restart_with_neither_flag(tmp_path,
                                                               started):
    """Every flag as --name=value; the log as JSON lines; then a restart on
    the same data with no --bootstrap serves the data."""
    flags, cport = one_node(tmp_path, name='data "quoted" \\ dir')
    log = tmp_path / "node.log"
    p = started.start(as_args(flags, equals=True) + ["--log-format=json"],
                      log, port=cport)
    c = redis.Redis(host=HOST, port=cport, socket_timeout=5,
                    decode_responses=True)
    d = Deadline(READY_TIMEOUT_S, "SET to succeed")
    while not d.expired():
        try:
            assert c.set("k", "v")
            break
        except redis.ResponseError:
            time.sleep(POLL_S)
    assert c.get("k") == "v"
    assert started.stop(p) == 0
    lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
    assert len(lines) >= 3, lines
    for line in lines:
        entry = json.loads(line)  # every line, escaping included
        assert set(entry) >= {"ts", "level", "node", "msg"}, entry
        assert RFC3339_MS_UTC.match(entry["ts"]), entry
        assert entry["level"] in ("debug", "info", "warn", "error"), entry
        assert entry["node"] == 1, entry
    # The data directory's name, quote and backslash included, came
    # through the escaping intact.
    assert any(str(flags["data"]) in json.loads(ln)["msg"] for ln in lines)

    del flags["bootstrap"]
    log2 = tmp_path / "node2.log"
    started.start(as_args(flags), log2, port=cport)
    assert redis.Redis(host=HOST, port=cport, socket_timeout=5,
                       decode_responses=True).get("k") == "v"
    assert "ts=" not in log2.read_text()  # text lines again
    assert " info  node=1 " in log2.read_text()


# ---- refusals ----------------------------------------------------------------


def test_every_kind_of_refusal_is_one_line_naming_the_option(tmp_path):
    flags, _ = one_node(tmp_path)
    base = as_args(flags)
    refused(base + ["--heartbeat-ms", "5000"],
            "--heartbeat-ms 5000: must be below --election-timeout-ms / 2",
            "(500, so at most 249)")
    no_timing = as_args({k: v for k, v in flags.items()
                         if k not in ("heartbeat-ms", "election-timeout-ms")})
    refused(no_timing + ["--heartbeat-ms=5000"], "--heartbeat-ms 5000",
            "1000 by default")
    refused(no_timing + ["--election-timeout-ms", "150"],
            "--election-timeout-ms 150", "above twice --heartbeat-ms")
    refused(base + ["--max-clients", "0"], "--max-clients 0",
            "out of range", "1..1000000")
    refused(base + ["--id=abc"], "--id abc", "not a number", "1..")
    refused(base + ["--snapshot-slice-bytes", "1"], "4096..67108864")
    refused(base + ["--wal-segment-bytes", "4096"], "--wal-segment-bytes",
            "1048576..1073741824")
    refused(base + ["--heartbeat", "5"], "--heartbeat: unknown option",
            "did you mean --heartbeat-ms?")
    refused(base + ["--snapshot-entrys", "5"],
            "did you mean --snapshot-entries?")
    # A beginning of a name is not taken for the name.
    refused(base + ["--heartbeat-m", "5"], "unknown option")
    refused(base + ["--snapshot-entries"],
            "--snapshot-entries needs a value", "N")
    refused(base + ["--data", "--join"], "--data needs a value",
            "found the option --join")
    refused(base + ["--log-format", "xml"], "--log-format xml",
            "must be text or json")
    refused(base + ["--log-level", "loud"], "debug, info, warn or error")
    refused(base + ["--election-policy", "Any"], "version-aware or any")
    refused(base + ["--join=yes"], "switch")
    refused(base + ["stray"], "unexpected argument 'stray'")
    refused(base + ["--peer-secret", "x"], "--peer-secret-file PATH")
    refused(base + ["--password", "p" * 300], "too long",
            "(not shown)")
    assert not (tmp_path / "d").exists(), "nothing may start"


def test_a_secret_file_that_is_no_regular_file_is_refused_at_once(tmp_path):
    """A FIFO given as the peer secret used to block batond in open(2),
    waiting for a writer that never comes (batond() has a 10 s bound)."""
    flags, _ = one_node(tmp_path)
    fifo = tmp_path / "secret-fifo"
    os.mkfifo(fifo, 0o600)
    flags["peer-secret-file"] = fifo
    refused(as_args(flags), str(fifo), "not a regular file")
    flags["peer-secret-file"] = tmp_path
    refused(as_args(flags), "not a regular file")
    assert not (tmp_path / "d").exists(), "nothing may start"


def test_neither_bootstrap_nor_join_on_empty_data_is_refused(tmp_path):
    flags, _ = one_node(tmp_path)
    del flags["bootstrap"]
    line = refused(as_args(flags), "neither --bootstrap nor --join",
                   "--bootstrap ID=PEER/CLIENT", "--join-seeds")
    assert str(flags["data"]) in line
    # An empty directory is no state either.
    (tmp_path / "d").mkdir()
    refused(as_args(flags), "holds no state")


# ---- config file and environment ----------------------------------------------


def write_config(path, flags, extra=""):
    lines = ["# written by test_options.py", ""]
    for k, v in flags.items():
        lines.append(f"{k} {v}")
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def auth_ok(port, password):
    try:
        return redis.Redis(host=HOST, port=port, password=password,
                           socket_timeout=5).ping()
    except redis.AuthenticationError:
        return False
    except redis.ResponseError as e:
        if "WRONGPASS" in str(e) or "invalid password" in str(e):
            return False
        raise


def test_environment_beats_the_file_and_flags_beat_both(tmp_path, started):
    flags, cport = one_node(tmp_path)
    conf = write_config(tmp_path / "node.conf", flags,
                        "password from-file\nheartbeat-ms 600\n")
    # The file's line, then the environment's, then the flag's value is
    # the one refused: each source overrides the one before.
    refused(["--config", conf], f"{conf}:", "heartbeat-ms 600",
            env=clean_env())
    refused(["--config", conf], "BATON_HEARTBEAT_MS=700",
            env=clean_env(BATON_HEARTBEAT_MS="700"))
    refused(["--config", conf, "--heartbeat-ms", "800"],
            "--heartbeat-ms 800", env=clean_env(BATON_HEARTBEAT_MS="700"))
    refused(["--config", conf], "BATON_MAX_CLIENTS=lots", "not a number",
            env=clean_env(BATON_HEARTBEAT_MS="50",
                          BATON_MAX_CLIENTS="lots"))

    # The environment's password wins over the file's; BATON_CONFIG names
    # the file.
    log = tmp_path / "env.log"
    env = clean_env(BATON_CONFIG=str(conf), BATON_HEARTBEAT_MS="50",
                    BATON_PASSWORD="from-env")
    p = started.start([], log, env=env, port=cport)
    assert auth_ok(cport, "from-env")
    assert not auth_ok(cport, "from-file")
    started.stop(p)
    # A flag wins over the environment.
    p = started.start(["--password=from-flag"], tmp_path / "flag.log",
                      env=env, port=cport)
    assert auth_ok(cport, "from-flag")
    assert not auth_ok(cport, "from-env")
    started.stop(p)


def test_unknown_config_key_is_refused_with_file_and_line(tmp_path):
    flags, _ = one_node(tmp_path)
    conf = write_config(tmp_path / "bad.conf", flags, "heartbeet-ms 50\n")
    n = len(conf.read_text().splitlines())
    refused(["--config", conf], f"{conf}:{n}: heartbeet-ms", "unknown key",
            "did you mean heartbeat-ms?")
    conf.write_text("id 1\nconfig /etc/other.conf\n")
    refused(["--config", conf], f"{conf}:2:", "cannot name another")
    conf.write_text("id 1\nheartbeat-ms\n")
    refused(["--config", conf], f"{conf}:2:", "needs a value")
    refused(["--config", tmp_path / "missing.conf"], "cannot read it")


def help_options():
    r = batond("--help")
    assert r.returncode == 0, r
    names = re.findall(r"^  --([a-z][a-z0-9-]*)", r.stdout, re.M)
    assert "heartbeat-ms" in names and "log-format" in names, r.stdout
    return sorted(set(names) - {"help", "version"})


def test_every_option_is_documented_in_the_example_and_docs():
    example = (REPO / "packaging" / "batond.conf.example").read_text()
    docs = (REPO / "docs" / "batond.md").read_text()
    for name in help_options():
        if name != "config":
            assert re.search(rf"^#{re.escape(name)}\b", example, re.M), name
        assert f"`--{name}" in docs, name


# ---- batonctl --------------------------------------------------------------------


def test_batonctl_version_and_equals_forms():
    r = batonctl("--version")
    assert r.returncode == 0, r
    assert r.stdout.startswith(f"batonctl {release_table()[-1]}\n"), r.stdout
    (port,) = free_ports(1)
    # --port=N and --timeout-ms=N are taken: the node is simply not there.
    r = batonctl(f"--port={port}", "--timeout-ms=500", f"--host={HOST}",
                 "status")
    assert r.returncode == 1 and f"{HOST}:{port}" in r.stderr, r
    r = batonctl("--port=0", "status")
    assert r.returncode == 2 and "--port 0" in r.stderr \
        and "1..65535" in r.stderr, r
    r = batonctl("--timeout-ms", "x", "status")
    assert r.returncode == 2 and "--timeout-ms x" in r.stderr, r
    r = batonctl("-p", str(port), "--json", "status")
    assert r.returncode == 2 and "after its name" in r.stderr, r
    r = batonctl("-p")
    assert r.returncode == 2 and "-p needs a value" in r.stderr, r
    # A command's own option as --name=value.
    r = batonctl("-p", str(port), "health", "--max-lag=lots")
    assert r.returncode == 2 and "--max-lag" in r.stderr, r


# Every command's valued options: (command, option, the other arguments it
# needs, a value it takes, one it refuses, the range the refusal names). A
# taken value gets past the parser: the node is not there (exit 1), or
# roll's pre-check refuses release 99.0.0 (exit 3), never exit 2.
ROLL_NEEDS = ["--to", "99.0.0", "--restart", "r {id}"]
UPGRADE_NEEDS = ROLL_NEEDS
UPGRADE_GATE_NEEDS = ["--to", "99.0.0", "--soak", "1", "--restart",
                      "r {id} {release}"]
VALUED_OPTIONS = [
    ("status", "interval-ms", ["--watch", "--count", "1"], "100", "5",
     "100 to 3600000"),
    ("status", "count", ["--watch", "--interval-ms", "100"], "1", "0",
     "1 or more"),
    ("health", "max-lag", [], "5", "lots", "0 or more entries"),
    ("migrate", "wait-s", [], "1", "0", "1 to 86400 seconds"),
    ("roll", "pause", ROLL_NEEDS, "0.5", "x", "0 to 3600 seconds"),
    ("roll", "step-timeout-s", ROLL_NEEDS, "5", "0", "1 to 86400 seconds"),
    ("roll", "max-lag", ROLL_NEEDS, "10", "-1", "0 or more entries"),
    ("roll", "to", ["--restart", "r {id}"], "99.0.0", "1.x",
     "a release (major.minor.patch)"),
    # A value may begin with a dash.
    ("roll", "restart", ["--to", "99.0.0"], "-r {id}", "-r", "{id}"),
    ("upgrade", "step-timeout-s", UPGRADE_NEEDS, "5", "0",
     "1 to 86400 seconds"),
    ("upgrade", "to", ["--restart", "r {id}"], "99.0.0", "1.x",
     "a release (major.minor.patch)"),
    ("upgrade", "new", UPGRADE_NEEDS, "11=127.0.0.1:7001,12=[::1]:7002",
     "11=127.0.0.1:7001,11=127.0.0.1:7002", "each node once"),
    ("upgrade", "start-new", UPGRADE_NEEDS, "s {id}", "s", "{id}"),
    ("upgrade", "stop-old", UPGRADE_NEEDS, "s {id}", "s", "{id}"),
    # Passed on to every roll step, checked with roll's bounds first.
    ("upgrade", "soak", UPGRADE_GATE_NEEDS, "1", "x", "0 to 3600 seconds"),
    ("upgrade", "gate-p99-ratio", UPGRADE_GATE_NEEDS, "2", "0",
     "1 to 1000,"),
    ("upgrade", "gate-p99-min-ms", UPGRADE_GATE_NEEDS, "10", "-1",
     "0 to 3600000 ms"),
    ("upgrade", "gate-errors-pct", UPGRADE_GATE_NEEDS, "5", "101",
     "0 to 100 points"),
    ("upgrade", "gate-apply-lag", UPGRADE_GATE_NEEDS, "10", "x", "entries"),
    ("upgrade", "wait-s", UPGRADE_NEEDS, "5", "0", "1 to 86400 seconds"),
    ("upgrade", "max-lag", UPGRADE_NEEDS, "10", "-1", "0 or more entries"),
]


def command_line(port, cmd, *args):
    return batonctl("-p", port, "--timeout-ms", "300", cmd, *args)


@pytest.mark.parametrize("cmd,opt,needs,good,bad,limits", VALUED_OPTIONS,
                         ids=[f"{c}--{o}" for c, o, *_ in VALUED_OPTIONS])
def test_batonctl_command_options_take_both_forms(cmd, opt, needs, good, bad,
                                                  limits):
    (port,) = free_ports(1)
    for form in ([f"--{opt}", good], [f"--{opt}={good}"]):
        r = command_line(port, cmd, *needs, *form)
        assert r.returncode in (0, 1, 3) and "usage:" not in r.stderr, \
            (form, r)
    for form in ([f"--{opt}", bad], [f"--{opt}={bad}"]):
        r = command_line(port, cmd, *needs, *form)
        assert r.returncode == 2, (form, r)
        assert f"batonctl: {cmd}: --{opt} must be " in r.stderr \
            and limits in r.stderr and f"got '{bad}'" in r.stderr, r.stderr
    r = command_line(port, cmd, *needs, f"--{opt}")
    assert r.returncode == 2, r
    assert f"batonctl: {cmd}: --{opt} needs a value" in r.stderr, r.stderr


@pytest.mark.parametrize("cmd", ["status", "health", "members", "add",
                                 "promote", "remove", "transfer", "downgrade",
                                 "roll", "migrate", "snapshot", "upgrade"])
def test_batonctl_commands_refuse_unknown_options_by_name(cmd):
    (port,) = free_ports(1)
    r = command_line(port, cmd, "--bogus")
    assert r.returncode == 2, r
    assert f"batonctl: {cmd}: unknown option '--bogus'" in r.stderr, r.stderr
    r = command_line(port, cmd, "--bogus=1")
    assert r.returncode == 2, r
    assert f"batonctl: {cmd}: unknown option '--bogus'" in r.stderr, r.stderr


def test_batonctl_flags_and_positional_arguments_in_any_order(tmp_path):
    (port,) = free_ports(1)
    r = command_line(port, "status", "--json=yes")
    assert r.returncode == 2 and "status: --json takes no value" in r.stderr, r
    # FILE before or after --force, and after "--" even if it looks like an
    # option: each gets as far as asking the node.
    for args in (["save", "f", "--force"], ["--force", "save", "f"],
                 ["save", "--", "--force"]):
        r = command_line(port, "snapshot", *args)
        assert r.returncode == 1 and f"{HOST}:{port}" in r.stderr, (args, r)
    r = command_line(port, "snapshot", "status", tmp_path / "f", "--force")
    assert r.returncode == 2 and "takes no --force" in r.stderr, r
    r = command_line(port, "downgrade", "--force", "enable", "1.0.0")
    assert r.returncode == 1 and f"{HOST}:{port}" in r.stderr, r
    r = command_line(port, "transfer", "1", "2")
    assert r.returncode == 2 and "unexpected argument '2'" in r.stderr, r
    r = command_line(port, "roll", "--restart", "--help", "--to", "99.0.0")
    assert r.returncode == 2 and "--restart must be" in r.stderr, r


# ---- baton-relay -------------------------------------------------------------------


def test_relay_takes_equals_forms_and_names_ranges(tmp_path):
    relay = BATOND.parent / "baton-relay"
    require_binary(relay)
    (port,) = free_ports(1)
    r = subprocess.run([str(relay), f"--listen={HOST}:{port}",
                        f"--data={tmp_path}", "--idle-timeout-ms=5"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r
    assert "--idle-timeout-ms 5: must be a whole number in 10..3600000" \
        in r.stderr, r.stderr
    r = subprocess.run([str(relay), "--idle", "50"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 2 and "unknown flag '--idle'" in r.stderr, r
    p = subprocess.Popen([str(relay), f"--listen={HOST}:{port}",
                          f"--data={tmp_path}", "--log-level=warn"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
    try:
        d = Deadline(READY_TIMEOUT_S, f"baton-relay on port {port}")
        while not d.expired():
            assert p.poll() is None, p.communicate()[1]
            try:
                socket.create_connection((HOST, port), timeout=1).close()
                break
            except OSError:
                time.sleep(POLL_S)
        else:
            d.fail()
    finally:
        stop_process(p)
