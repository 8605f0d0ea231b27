"""scripts/run-cluster (what `make run` calls): it starts three nodes, says
which leads, refuses ports in use, and on Ctrl-C stops its nodes and removes
its folder."""

import os
import random
import re
import signal
import socket
import subprocess
import time
import urllib.request

import redis

from conftest import (BATOND, HOST, REPO, Deadline, build_dir,
                      require_binary, retry)

SCRIPT = REPO / "scripts" / "run-cluster"


def free_base_port():
    """A base port P with P..P+2, P+1000..P+1002 and P+2000..P+2002 (the
    metrics ports) all free."""
    for _ in range(50):
        # Below the kernel's ephemeral ports (32768 and up on Linux), so
        # that no outgoing connection of another test takes one of the
        # nine between this check and the nodes' binds.
        base = random.randrange(10000, 32768 - 2003)
        ports = [base + i for i in (0, 1, 2, 1000, 1001, 1002, 2000, 2001,
                                    2002)]
        try:
            socks = []
            for p in ports:
                s = socket.socket()
                socks.append(s)
                s.bind((HOST, p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free base port found")


def start_script(base, tmp_path, **extra_env):
    env = dict(os.environ, BUILD=str(build_dir()), BASE_PORT=str(base),
               TMPDIR=str(tmp_path), **extra_env)
    out = open(tmp_path / "run-cluster.out", "w+")
    # Its own session, as a terminal would run it: a Ctrl-C goes to its
    # process group, which the script's nodes are not in.
    p = subprocess.Popen([str(SCRIPT)], env=env, stdout=out,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    return p, out


def test_run_cluster_starts_reports_and_cleans_up_on_ctrl_c(tmp_path):
    require_binary(BATOND)
    base = free_base_port()
    p, out = start_script(base, tmp_path)
    try:
        d = Deadline(30, "run-cluster to report a leader")
        text = ""
        while not d.expired():
            out.seek(0)
            text = out.read()
            if "leads" in text or p.poll() is not None:
                break
            time.sleep(0.1)
        else:
            d.fail(text)
        assert p.poll() is None, f"run-cluster exited:\n{text}"
        m = re.search(r"node (\d) leads", text)
        assert m, text
        assert f"redis-cli -p {base}" in text, text
        for port in (base, base + 1, base + 2):
            assert f"{HOST}:{port}" in text
        folder = re.search(r"\(data and logs in (\S+)\)", text).group(1)
        assert os.path.isdir(folder)
        c = redis.Redis(host=HOST, port=base + 2, socket_timeout=5,
                        decode_responses=True)
        assert retry(lambda: c.set("k", "v"))
        assert retry(lambda: c.get("k")) == "v"
        # Every node serves its metrics and health over HTTP.
        for port in (base + 2000, base + 2001, base + 2002):
            assert f"metrics {HOST}:{port}" in text, text
            body = urllib.request.urlopen(
                f"http://{HOST}:{port}/metrics", timeout=5).read().decode()
            assert "\nbaton_commit_index " in body, body[:500]

        # A second cluster on the same ports is refused, clearly.
        p2, out2 = start_script(base, tmp_path)
        assert p2.wait(timeout=20) == 1
        out2.seek(0)
        assert f"port {base} on {HOST} is in use" in out2.read()

        pids = [int(x) for x in re.findall(r"pid (\d+)", text)]
        assert len(pids) == 3, text
        # Ctrl-C: SIGINT to the script's process group.
        os.killpg(p.pid, signal.SIGINT)
        assert p.wait(timeout=20) == 130
        out.seek(0)
        text = out.read()
        assert "stopped; removed" in text, text
        assert not os.path.exists(folder)
        for pid in pids:
            try:
                os.kill(pid, 0)
                raise AssertionError(f"node pid {pid} still running")
            except ProcessLookupError:
                pass
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=20)
        out.close()


def test_run_cluster_refuses_a_bad_base_port(tmp_path):
    require_binary(BATOND)
    p, out = start_script("http", tmp_path)
    assert p.wait(timeout=10) == 1
    out.seek(0)
    assert "BASE_PORT must be a number" in out.read()
    out.close()
