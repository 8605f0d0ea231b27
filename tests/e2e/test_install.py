"""make install (docs/install.md): `cmake --install BUILD --prefix P` into a
temporary prefix (what `make install PREFIX=P` runs), then the files it
put there: binaries that run, man pages man can read, headers and
libbaton_core.a that a program builds against through baton.pc, the
example config, and the systemd unit template, whose ExecStart line starts
a 3-node cluster (each node's config file written here, with ports the test
picks) that serves SET and GET. DESTDIR stages under another root with the
prefix written as given."""

import os
import re
import shlex
import shutil
import signal
import subprocess
import time

import pytest
import redis

from conftest import (HOST, LEADER_TIMEOUT_S, POLL_S, READY_TIMEOUT_S,
                      STOP_GRACE_S, Deadline, _die_with_parent,
                      build_dir, build_sanitizers, free_ports,
                      make_secret_file, release_table)

BINARIES = ["batond", "batonctl", "baton-relay", "baton-lincheck"]
WITH_VERSION = ["batond", "batonctl", "baton-relay"]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("BATON_")}
    env.update(extra)
    return env


def cmake_install(prefix, destdir=None):
    env = clean_env()
    if destdir is not None:
        env["DESTDIR"] = str(destdir)
    r = subprocess.run(["cmake", "--install", str(build_dir()), "--prefix",
                        str(prefix)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    for b in BINARIES[:3]:
        if not (build_dir() / b).exists():
            pytest.fail(f"{build_dir() / b} not found: build first")
    p = tmp_path_factory.mktemp("prefix")
    cmake_install(p)
    return p


def one_file(root, pattern):
    found = sorted(root.glob(pattern))
    assert len(found) == 1, (pattern, found)
    return found[0]


def test_binaries_run_and_print_their_release(prefix):
    newest = release_table()[-1]
    for b in WITH_VERSION:
        r = subprocess.run([str(prefix / "bin" / b), "--version"],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 0, r
        assert r.stdout.startswith(f"{b} {newest}"), r.stdout
    if (build_dir() / "baton-lincheck").exists():
        r = subprocess.run([str(prefix / "bin" / "baton-lincheck"),
                            "--help"], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode == 0 and "usage" in r.stdout, r


def test_man_pages_are_readable(prefix):
    for b in BINARIES:
        if not (build_dir() / b).exists():
            continue
        page = prefix / "share" / "man" / "man1" / f"{b}.1"
        text = page.read_text()
        assert text.startswith(f".TH {b.upper()} 1 "), text[:200]
        assert ".SH NAME" in text and ".SH SYNOPSIS" in text, text[:400]
        if shutil.which("man"):
            r = subprocess.run(["man", "-l", str(page)], capture_output=True,
                               text=True, timeout=30,
                               env=clean_env(MANWIDTH="80", MANPAGER="cat",
                                             PAGER="cat"))
            assert r.returncode == 0, r.stderr
            assert "NAME" in r.stdout and b in r.stdout, r.stdout[:500]
    # Every flag of batond --help is in its page.
    page = (prefix / "share" / "man" / "man1" / "batond.1").read_text()
    for flag in ("--heartbeat-ms", "--log-format", "--config", "--join"):
        assert flag.replace("-", r"\-") in page or flag in page, flag


def test_headers_library_and_pkg_config(prefix, tmp_path):
    assert (prefix / "include" / "baton" / "raft.h").exists()
    assert (prefix / "include" / "baton" / "version.h").exists()
    lib = one_file(prefix, "lib*/**/libbaton_core.a")
    pc = one_file(prefix, "lib*/**/pkgconfig/baton.pc")
    text = pc.read_text()
    assert f"prefix={prefix}\n" in text, text
    assert f"Version: {release_table()[-1]}\n" in text, text
    if not shutil.which("pkg-config"):
        pytest.skip("pkg-config is not installed (scripts/setup adds it)")
    r = subprocess.run(["pkg-config", "--cflags", "--libs", "baton"],
                       capture_output=True, text=True, timeout=10,
                       env=clean_env(PKG_CONFIG_PATH=str(pc.parent)))
    assert r.returncode == 0, r.stderr
    flags = r.stdout.split()
    assert f"-I{prefix}/include" in flags, flags
    assert f"-L{lib.parent}" in flags and "-lbaton_core" in flags, flags
    cc = shutil.which("cc")
    if cc is None:
        return
    # A program built against the installed library alone.
    src = tmp_path / "release.c"
    src.write_text('#include <stdio.h>\n#include "baton/version.h"\n'
                   "int main(void)\n{\n\tchar r[BATON_RELEASE_STR_MAX];\n"
                   '\tputs(baton_release_format(baton_release_current()'
                   "->release, r));\n\treturn 0;\n}\n")
    exe = tmp_path / "release"
    # A sanitized build installs an instrumented library: link it alike.
    sanitizers = build_sanitizers()
    if sanitizers:
        flags.append(f"-fsanitize={sanitizers}")
    r = subprocess.run([cc, "-std=c11", str(src), "-o", str(exe)] + flags,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True,
                       timeout=10)
    assert r.stdout.strip() == release_table()[-1], r


def test_destdir_stages_with_the_prefix_as_given(tmp_path):
    stage = tmp_path / "stage"
    cmake_install("/opt/baton", destdir=stage)
    root = stage / "opt" / "baton"
    assert (root / "bin" / "batond").exists()
    assert "prefix=/opt/baton\n" in one_file(
        root, "lib*/**/pkgconfig/baton.pc").read_text()
    unit = (root / "lib" / "systemd" / "system" / "batond@.service")
    assert "ExecStart=/opt/baton/bin/batond " in unit.read_text()


def exec_start(unit_text):
    lines = [ln for ln in unit_text.splitlines()
             if ln.startswith("ExecStart=")]
    assert len(lines) == 1, lines
    return lines[0][len("ExecStart="):]


def test_unit_template_starts_a_cluster(prefix, tmp_path):
    unit = prefix / "lib" / "systemd" / "system" / "batond@.service"
    text = unit.read_text()
    assert "[Service]" in text and "[Install]" in text, text
    assert (prefix / "share" / "baton" / "batond.conf.example").exists()
    line = exec_start(text)
    assert line.startswith(f"{prefix}/bin/batond "), line
    assert "/etc/baton/%i.conf" in line, line

    ports = free_ports(6)
    ids = [1, 2, 3]
    client = {i: ports[2 * k] for k, i in enumerate(ids)}
    peer = {i: ports[2 * k + 1] for k, i in enumerate(ids)}
    secret = make_secret_file(tmp_path / "peer-secret")
    boot = ",".join(f"{i}={HOST}:{peer[i]}/{HOST}:{client[i]}" for i in ids)
    procs = []
    try:
        for i in ids:
            conf = tmp_path / f"{i}.conf"
            conf.write_text(
                f"# node {i}, as /etc/baton/{i}.conf would be\n"
                f"id {i}\nlisten {HOST}:{client[i]}\n"
                f"peer-listen {HOST}:{peer[i]}\ndata {tmp_path / f'd{i}'}\n"
                f"bootstrap {boot}\npeer-secret-file {secret}\n"
                "election-timeout-ms 500\nheartbeat-ms 50\n"
                "log-format json\n")
            cmd = line.replace("/etc/baton/%i.conf", str(conf))
            cmd = cmd.replace("%i", str(i))
            log = open(tmp_path / f"{i}.log", "wb")
            procs.append(subprocess.Popen(
                shlex.split(cmd), stdin=subprocess.DEVNULL, stdout=log,
                stderr=log, env=clean_env(), preexec_fn=_die_with_parent))
            log.close()
        clients = {i: redis.Redis(host=HOST, port=client[i], socket_timeout=5,
                                  decode_responses=True) for i in ids}
        for i in ids:
            d = Deadline(READY_TIMEOUT_S, f"node {i} to answer PING")
            while not d.expired():
                assert procs[i - 1].poll() is None, \
                    (tmp_path / f"{i}.log").read_text()[-3000:]
                try:
                    if clients[i].ping():
                        break
                except (redis.ConnectionError, redis.TimeoutError):
                    time.sleep(POLL_S)
            else:
                d.fail()
        d = Deadline(LEADER_TIMEOUT_S, "a SET to be applied")
        while True:
            try:
                if clients[1].set("installed", "yes"):
                    break
            except (redis.ResponseError, redis.ConnectionError,
                    redis.TimeoutError) as e:
                if d.expired():
                    d.fail(repr(e))
                time.sleep(POLL_S)
        for i in ids:
            assert clients[i].get("installed") == "yes", i
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=STOP_GRACE_S)
    assert re.search(r'"msg":"batond .* ready', (tmp_path / "1.log")
                     .read_text())
