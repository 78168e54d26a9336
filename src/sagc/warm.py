"""A warm interpreter for a local grid's short jobs: ``python -m sagc.warm -m MODULE ...``
runs ``python -m MODULE ...`` in a fork of a server that imported torch, transformers, TRL
and lm-eval once, or fresh when no server can take the job (docs/architecture.md, "Shared
conventions", how a job starts).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import json
import os
import random
import runpy
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback

SOCKET_ENV = "SAGC_WARM_SOCKET"
SWITCH_ENV = "SAGC_WARM"  # "0": every job in a fresh interpreter

#: Variables libraries read at import: a job whose values differ from the server's runs fresh.
IMPORT_TIME_PREFIXES = ("PYTHON", "ATEN_", "MKL_", "ONEDNN_", "DNNL_", "OMP_", "OPENBLAS_", "GOTO_",
                        "VECLIB_", "NUMEXPR_", "KMP_", "HF_", "TRANSFORMERS_", "TORCH", "CUDA", "LD_")  # fmt: skip

#: What Snakemake exports to a job of ``threads`` threads: the server starts as a 1-thread job.
THREAD_ENV = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
              "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")  # fmt: skip

#: What the tiny world's jobs import, down to the modules their first call loads.
TINY_PRELOAD = ("sagc.train.trainer", "sagc.train.run", "sagc.train.wandb_log", "sagc.train.rewards",
                "sagc.evaluate.cli", "sagc.evaluate.runner", "sagc.tiny.cli", "lm_eval.evaluator",
                "lm_eval.models.huggingface", "transformers.generation.utils",
                "transformers.models.qwen2.modeling_qwen2", "transformers.models.llama.modeling_llama",
                "wandb", "wandb.sdk.launch", "psutil")  # fmt: skip

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)

#: The server's environment before its imports (which may set variables a child keeps).
_STARTED_WITH: dict[str, str] = {}


# --- the client -------------------------------------------------------------------------


def run(argv: list[str], *, output: str | None = None) -> int:
    """``python -m argv[0] argv[1:]`` in a fork of the warm server, else in a fresh child
    process; stdout and stderr appended to ``output`` when given."""
    if output is None:
        code = run_warm(argv)
        return _run_fresh(argv) if code is None else code
    with open(output, "ab") as fh:
        code = run_warm(argv, (0, fh.fileno(), fh.fileno()))
        return _run_fresh(argv, stdout=fh, stderr=fh) if code is None else code


def _run_fresh(argv: list[str], **streams) -> int:
    return run_forwarding([sys.executable, "-m", *argv], **streams)


def run_forwarding(argv: list[str], **popen) -> int:
    """Run ``argv`` (``popen``: ``subprocess.Popen``'s keywords) with SIGINT, SIGTERM, SIGHUP
    and SIGUSR1 forwarded to it; its exit status. The child starts with SIGUSR1 ignored:
    SLURM signals every process of the step, and a shell in between would die of it."""
    previous_usr1 = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        proc = subprocess.Popen(argv, **popen)
    except BaseException:
        signal.signal(signal.SIGUSR1, previous_usr1)
        raise

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in _FORWARDED}
    previous[signal.SIGUSR1] = previous_usr1
    try:
        while True:  # a timed wait: the handlers run even when another thread took the signal
            with contextlib.suppress(subprocess.TimeoutExpired):
                return proc.wait(timeout=1.0)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_warm(argv: list[str], stdio: tuple[int, int, int] = (0, 1, 2)) -> int | None:
    """The job's exit status from a fork of the server; None when no server takes it."""
    path = os.environ.get(SOCKET_ENV)
    if not path or os.environ.get(SWITCH_ENV) == "0":
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:  # not started yet (its imports take seconds), or gone
        sock.close()
        print("sagc.warm: a fresh interpreter for this job: no server is listening", file=sys.stderr, flush=True)
        return None
    forwarded: list[int] = []
    child: list[int] = []  # the job's pid, once the server names it

    def forward(signum, _frame):
        forwarded.append(signum)
        if child:
            os.kill(child[0], signum)

    # Forwarding starts before the request: a signal that comes first is sent on with the pid.
    previous = {sig: signal.signal(sig, forward) for sig in _FORWARDED}
    try:
        with sock:
            request = json.dumps({"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ),
                                  "interpreter": _interpreter()}).encode()  # fmt: skip
            with open(os.devnull, "rb") as null:  # a job started without stdin reads /dev/null
                fds = [fd if _is_open(fd) else null.fileno() for fd in stdio]
                socket.send_fds(sock, [struct.pack("!Q", len(request))], fds)
            sock.sendall(request)
            replies = _Lines(sock)
            first = replies.next().split(" ", 1)
            if first[0] != "started":
                reason = first[1] if first[0] == "refused" else "the server went away"
                print(f"sagc.warm: a fresh interpreter for this job: {reason}", file=sys.stderr, flush=True)
                return None
            child.append(int(first[1]))
            for signum in list(forwarded):  # one that lands just now may go twice, never not at all
                os.kill(child[0], signum)
            last = replies.next().split()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if forwarded and not child:  # no job took it: the signal was meant for this process
            os.kill(os.getpid(), forwarded[-1])
    if last[:1] == ["exit"]:
        return int(last[1])
    return 128 + (forwarded[-1] if forwarded else signal.SIGKILL)  # the child died of a signal


class _Lines:
    """The server's reply lines on ``sock``."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer = sock, b""
        # A timed wait: a signal taken by another thread does not interrupt a blocking recv.
        sock.settimeout(1.0)

    def next(self) -> str:
        """The next line ('' when the connection closed first)."""
        while b"\n" not in self.buffer:
            try:
                chunk = self.sock.recv(4096)
            except TimeoutError:
                continue
            if not chunk:
                return ""
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


# --- the server -------------------------------------------------------------------------


def serve(path: str, preload: list[str], parent: int | None = None) -> int:
    """Import ``preload``, then fork a child per connection on the Unix socket ``path``
    until SIGTERM or until ``parent`` (default: the parent process) is gone."""
    parent = parent or os.getppid()
    _STARTED_WITH.update(os.environ)
    for name in preload:
        importlib.import_module(name)
    if threading.active_count() != 1:
        # fork() copies only the calling thread: a Python thread's locks could be held forever
        print(f"sagc.warm: not serving, the imports started {threading.active_count() - 1} "
              "Python thread(s)", file=sys.stderr)  # fmt: skip
        return 1
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the client forwards the terminal's Ctrl-C
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    listener.settimeout(1.0)
    print(f"sagc.warm: serving on {path} (pid {os.getpid()})", file=sys.stderr, flush=True)
    try:
        while not stopping and os.getppid() == parent:
            _reap()
            try:
                conn, _ = listener.accept()
            except (TimeoutError, InterruptedError):
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:  # the child never returns into this loop (nor its finally)
                code = 1
                try:
                    listener.close()
                    code = _child(conn)
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(code)
            conn.close()
    finally:
        listener.close()
        if os.path.exists(path):
            os.unlink(path)
    return 0


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _child(conn: socket.socket) -> int:
    """One job, in the fork: receive it, check it, run it as ``python -m`` would."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    conn.settimeout(None)
    header, fds, _, _ = socket.recv_fds(conn, 8, 3)
    request = json.loads(_recv_exact(conn, struct.unpack("!Q", header)[0]))
    reason = refusal(request)
    if reason:
        conn.sendall(f"refused {reason}\n".encode())
        return 0
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    set_by_imports = {k: v for k, v in os.environ.items() if _STARTED_WITH.get(k) != v}
    os.environ.clear()
    os.environ.update({**request["env"], **set_by_imports})
    tempfile.tempdir = None  # tempfile caches TMPDIR on first use; the job's may differ
    random.seed()
    conn.sendall(f"started {os.getpid()}\n".encode())
    finished = threading.Event()
    # The watchdog inherits a mask blocking the forwarded signals, so they reach the main thread.
    signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)
    threading.Thread(target=_end_with_client, args=(conn, finished), daemon=True).start()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
    code = _run_module(request["argv"])
    _exit_like_an_interpreter()
    finished.set()
    conn.sendall(f"exit {code}\n".encode())
    return code


def refusal(request: dict) -> str | None:
    """Why this server cannot run the job as a fresh interpreter would, or None."""
    if request["interpreter"] != _interpreter():
        return f"the job runs {request['interpreter']}, the server {_interpreter()}"
    job, here = request["env"], _STARTED_WITH
    for key in sorted(set(job) | set(here)):
        if key.startswith(IMPORT_TIME_PREFIXES) and job.get(key) != here.get(key):
            return f"{key} differs from the server's"
    return None


def _interpreter() -> list[str]:
    """This interpreter: its binary and its prefix (venvs share the binary)."""
    return [os.path.realpath(sys.executable), sys.prefix]


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the client went away mid-request")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _end_with_client(conn: socket.socket, finished: threading.Event) -> None:
    """A job whose client is gone (killed, or its Snakemake) ends as a killed job would."""
    with contextlib.suppress(OSError):
        conn.recv(1)
    if not finished.is_set():
        os.kill(os.getpid(), signal.SIGTERM)


def _run_module(argv: list[str]) -> int:
    """Run ``argv[0]`` as ``python -m`` would; its exit status as the interpreter reports it."""
    sys.argv = list(argv)
    try:
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
        return 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the interpreter's status for it: killed by SIGINT
        traceback.print_exc()
        return 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
        return 1


def _exit_like_an_interpreter() -> None:
    """What an interpreter does at exit and ``os._exit`` skips: threading's shutdown (its exit
    hooks end a thread pool a job left open, as vLLM does), the atexit handlers, a flush."""
    threading._shutdown()  # private, as the next line: the interpreter's own exit path
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


# --- the workflow's side ----------------------------------------------------------------

_server: subprocess.Popen | None = None


def start(preload: tuple[str, ...] = TINY_PRELOAD, log: str | None = None) -> None:
    """Start a server for the jobs this process launches (they inherit ``SAGC_WARM_SOCKET``);
    Linux only."""
    global _server
    if _server is not None or os.environ.get(SWITCH_ENV) == "0" or not sys.platform.startswith("linux"):
        return
    path = os.path.join(tempfile.mkdtemp(prefix="sagc-warm-"), "socket")
    if log:
        os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
    with open(log or os.devnull, "ab") as out:
        _server = subprocess.Popen(
            [sys.executable, "-m", "sagc.warm", "serve", "--socket", path, "--preload", ",".join(preload),
             "--parent", str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **dict.fromkeys(THREAD_ENV, "1")},
        )  # fmt: skip
    os.environ[SOCKET_ENV] = path


def stop() -> None:
    """Stop the server started here (running jobs finish in their own forks)."""
    global _server
    if _server is None:
        return
    _server.terminate()
    try:
        _server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _server.kill()
    path = os.environ.pop(SOCKET_ENV, None)
    if path:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    _server = None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) >= 2 and argv[0] == "-m":
        code = run_warm(argv[1:])
        if code is None:
            os.execv(sys.executable, [sys.executable, *argv])
        return code
    if argv[:1] != ["serve"]:
        print("usage: python -m sagc.warm -m MODULE [ARGS...]\n"
              "       python -m sagc.warm serve --socket PATH --preload MOD,MOD [--parent PID]",
              file=sys.stderr)  # fmt: skip
        return 2
    parser = argparse.ArgumentParser(prog="python -m sagc.warm serve")
    parser.add_argument("--socket", required=True, help="the Unix socket to listen on")
    parser.add_argument("--preload", default="", help="modules to import before serving, comma-separated")
    parser.add_argument(
        "--parent",
        type=int,
        help="the process that starts the server (default: its parent); serve while it is the parent",
    )
    ns = parser.parse_args(argv[1:])
    return serve(ns.socket, [m for m in ns.preload.split(",") if m], ns.parent)


if __name__ == "__main__":
    sys.exit(main())
