"""The warm interpreter (sagc.warm): a job forked from the server behaves as the same job
in a fresh ``python -m`` (argv, working directory, environment, streams, exit status,
signals), and every case the server cannot take runs fresh instead of wrong.

A real server and real clients, as separate processes; the probe module is written to a
temporary folder on the job's PYTHONPATH."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the server forks (Linux only)")

REPO = Path(__file__).resolve().parents[1]

# What the probe reports: enough to tell a fork of the server from a fresh interpreter
# (the server preloads `xml.dom.minidom`, which nothing else here imports).
PROBE = textwrap.dedent(
    """
    import json, os, signal, sys, time
    if sys.argv[1:2] == ["--sleep"]:
        def on_term(signum, frame):
            print("got", signal.Signals(signum).name, flush=True)
            sys.exit(7)
        signal.signal(signal.SIGTERM, on_term)
        print("pid", os.getpid(), flush=True)
        # Short sleeps: Python runs a handler between bytecodes, so a signal landing just
        # before a sleep enters the kernel is acted on when that sleep ends (CI saw 60 s).
        for _ in range(600):
            time.sleep(0.1)
        sys.exit(0)
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "probe": os.environ.get("PROBE"),
                      "forked": "xml.dom.minidom" in sys.modules, "name": __name__}))
    print("to stderr", file=sys.stderr)
    sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
    """
)


@pytest.fixture
def env(tmp_path):
    """The jobs' environment: the probe importable, no inherited server."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "warm_probe.py").write_text(PROBE)
    e = {k: v for k, v in os.environ.items() if not k.startswith("SAGC_WARM")}
    e["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(tmp_path / "mods")])
    return e


class Server:
    def __init__(self, env, path: Path, preload: str = "xml.dom.minidom"):
        self.path = path
        self.proc = subprocess.Popen([sys.executable, "-m", "sagc.warm", "serve", "--socket", str(path),
                                      "--preload", preload], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)  # fmt: skip

    def wait_ready(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not self.path.exists():
            assert self.proc.poll() is None, self.proc.stdout.read()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        return self

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def server(env, tmp_path):
    srv = Server(env, tmp_path / "socket").wait_ready()
    yield srv
    srv.stop()


def client(env, *args, cwd, **extra):
    return subprocess.run([sys.executable, "-m", "sagc.warm", "-m", "warm_probe", *args], cwd=cwd,
                          env={**env, **extra}, capture_output=True, text=True, timeout=60)  # fmt: skip


def report(proc) -> dict:
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_forked_job_sees_what_a_fresh_one_sees(env, server, tmp_path):
    work = tmp_path / "a working dir"
    work.mkdir()
    warm = client(env, "x", "--flag", "two words", cwd=work, SAGC_WARM_SOCKET=str(server.path),
                  PROBE="job's own", PROBE_EXIT="3")  # fmt: skip
    fresh = subprocess.run([sys.executable, "-m", "warm_probe", "x", "--flag", "two words"], cwd=work,
                           env={**env, "PROBE": "job's own", "PROBE_EXIT": "3"}, capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert report(warm)["forked"] and not report(fresh)["forked"]
    assert {**report(warm), "forked": None} == {**report(fresh), "forked": None}
    assert report(warm)["argv"] == ["x", "--flag", "two words"] and report(warm)["name"] == "__main__"
    assert warm.returncode == fresh.returncode == 3
    assert warm.stderr == fresh.stderr == "to stderr\n"


def test_a_job_that_leaves_a_thread_pool_open_ends_as_a_fresh_one(env, server, tmp_path):
    """An idle worker of an executor nobody shut down (vLLM leaves one) ends at exit, as in
    a fresh interpreter, where threading's exit hooks tell it to."""
    (tmp_path / "mods" / "open_pool.py").write_text(
        "import builtins, concurrent.futures\n"
        "pool = concurrent.futures.ThreadPoolExecutor(2)\n"
        "builtins.kept_pool = pool  # still referenced at exit, as a library's own pool is\n"
        "print(pool.submit(sum, [1, 2]).result())\n"
    )
    run = [sys.executable, "-m", "sagc.warm", "-m", "open_pool"]
    warm = subprocess.run(run, env={**env, "SAGC_WARM_SOCKET": str(server.path)}, capture_output=True,
                          text=True, timeout=30)  # fmt: skip
    fresh = subprocess.run(run, env=env, capture_output=True, text=True, timeout=30)
    assert warm.returncode == fresh.returncode == 0 and warm.stdout == fresh.stdout == "3\n"


def test_without_a_server_the_job_runs_fresh(env, tmp_path):
    proc = client(env, "y", cwd=tmp_path)
    assert proc.returncode == 0 and report(proc) == {**report(proc), "forked": False, "argv": ["y"]}
    gone = client(env, "y", cwd=tmp_path, SAGC_WARM_SOCKET=str(tmp_path / "nothing-here"))
    assert gone.returncode == 0 and not report(gone)["forked"]
    assert "no server is listening" in gone.stderr


def test_switched_off_the_job_runs_fresh(env, server, tmp_path):
    proc = client(env, cwd=tmp_path, SAGC_WARM_SOCKET=str(server.path), SAGC_WARM="0")
    assert proc.returncode == 0 and not report(proc)["forked"]


@pytest.mark.parametrize("var", ["OMP_NUM_THREADS", "ATEN_CPU_CAPABILITY", "HF_HUB_OFFLINE", "PYTHONHASHSEED"])
def test_a_job_whose_import_time_environment_differs_runs_fresh(env, server, tmp_path, var):
    """Such variables shape the modules the server already imported: the job gets its own."""
    proc = client(env, cwd=tmp_path, SAGC_WARM_SOCKET=str(server.path), **{var: "7"})
    assert proc.returncode == 0 and not report(proc)["forked"]
    assert f"{var} differs from the server's" in proc.stderr


def test_other_variables_reach_the_forked_job(env, server, tmp_path):
    proc = client(env, cwd=tmp_path, SAGC_WARM_SOCKET=str(server.path), PROBE="set by the job")
    assert report(proc)["forked"] and report(proc)["probe"] == "set by the job"


def test_sigterm_to_the_client_reaches_the_job(env, server, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "sagc.warm", "-m", "warm_probe", "--sleep"], cwd=tmp_path,
                            env={**env, "SAGC_WARM_SOCKET": str(server.path)}, stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    first = proc.stdout.readline().split()
    assert first[0] == "pid" and int(first[1]) != proc.pid  # the job runs in the server's fork
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert out.strip() == "got SIGTERM" and proc.returncode == 7


def test_a_signal_the_kernel_hands_to_another_thread_of_the_client_still_reaches_the_job(env, server, tmp_path):
    """numpy's BLAS threads in the client may take a process-directed SIGTERM; the main
    thread, waiting on the socket, must still forward it. Forced here: the main thread blocks
    SIGTERM, so only the helper thread can take it."""
    script = tmp_path / "client.py"
    script.write_text(
        textwrap.dedent(
            """
        import signal, sys, threading, time
        from sagc import warm
        threading.Thread(target=time.sleep, args=(120,), daemon=True).start()  # SIGTERM unblocked
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])  # ... here: the helper takes it
        sys.exit(warm.run_warm(["warm_probe", "--sleep"]))
        """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                            env={**env, "SAGC_WARM_SOCKET": str(server.path)})  # fmt: skip
    assert proc.stdout.readline().split()[0] == "pid"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert out.strip() == "got SIGTERM" and proc.returncode == 7


def test_run_without_a_server_forwards_sigterm_to_the_fresh_job(env, tmp_path):
    """The pipeline's train script calls ``warm.run``; without a server the job is its
    child process, and a SIGTERM to the script must still reach the job."""
    script = tmp_path / "script.py"
    script.write_text("import sys\nfrom sagc import warm\nsys.exit(warm.run(['warm_probe', '--sleep']))\n")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    assert int(proc.stdout.readline().split()[1]) != proc.pid  # the job is the script's child
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert out.strip() == "got SIGTERM" and proc.returncode == 7


def test_a_client_gone_mid_request_leaves_the_server_serving(env, server, tmp_path):
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(server.path))
    sock.sendall(b"\x00\x00")  # half a header, then gone
    sock.close()
    time.sleep(0.5)
    proc = client(env, "after", cwd=tmp_path, SAGC_WARM_SOCKET=str(server.path))
    assert proc.returncode == 0 and report(proc)["forked"] and server.path.exists()


def test_a_job_whose_client_is_killed_ends(env, server, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "sagc.warm", "-m", "warm_probe", "--sleep"], cwd=tmp_path,
                            env={**env, "SAGC_WARM_SOCKET": str(server.path)}, stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    job = int(proc.stdout.readline().split()[1])
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while _alive(job):
        assert time.monotonic() < deadline, "the job outlived its client"
        time.sleep(0.05)


def test_the_server_ends_with_the_process_that_started_it(env, tmp_path):
    path = tmp_path / "socket"
    starter = subprocess.run(
        [sys.executable, "-c", "import os, subprocess, sys\n"
         "print(subprocess.Popen([*sys.argv[1:], '--parent', str(os.getpid())]).pid)",
         sys.executable, "-m", "sagc.warm", "serve", "--socket", str(path), "--preload", "json"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    server = int(starter.stdout.split()[0])
    deadline = time.monotonic() + 30
    while _alive(server):
        assert time.monotonic() < deadline, "the server outlived the process that started it"
        time.sleep(0.1)
    assert not path.exists()


def test_a_server_whose_imports_start_a_thread_refuses_to_serve(env, tmp_path):
    (tmp_path / "mods" / "starts_a_thread.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    )
    srv = Server(env, tmp_path / "socket", preload="starts_a_thread")
    assert srv.proc.wait(timeout=60) == 1
    assert "Python thread" in srv.proc.stdout.read() and not srv.path.exists()


def test_run_appends_the_job_output_to_a_log(env, server, tmp_path, monkeypatch):
    from sagc import warm

    log = tmp_path / "job.log"
    log.write_text("earlier line\n")
    for key, value in {**env, "SAGC_WARM_SOCKET": str(server.path), "PROBE_EXIT": "5"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    assert warm.run(["warm_probe", "z"], output=str(log)) == 5
    lines = log.read_text().splitlines()
    assert lines[0] == "earlier line" and json.loads(lines[1])["forked"] and "to stderr" in lines


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as ended
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
