"""A pre-imported interpreter that forks each documented ``medibench`` command (the docs' test
harness only; medibench itself never uses it).

The docs' shell blocks run about 200 ``medibench`` commands, each a fresh interpreter that spends
2-7 s of CPU importing torch, diffusers and transformers before the command's own work. The
server here (``serve``) imports those libraries once per test worker and then forks one child per
command; the child takes the command's argv, working folder, environment and standard streams
(passed over a Unix socket) and runs ``python -m medibench`` in them, exactly as the command
line would (``runpy``, ``__main__``, ``sys.exit``), then the interpreter's normal exit. Nothing of
medibench is imported before the fork: its registries and module-level state start fresh in
every command, as in a fresh process.

What a fork cannot change is what the pre-imported libraries read from the environment when they
are imported (``HF_HOME``, ``OMP_NUM_THREADS``, ``PYTHONPATH``, ...). The client (``client``,
which the ``medibench`` shim of a chain runs) therefore only forks when every such variable
(:data:`SENSITIVE`) equals the server's: the socket's name is a digest of them, and a command
whose environment differs (a chain with the fake Hub's ``HF_HOME``, a block that sets
``PYTHONPATH``) runs as a fresh ``python -m medibench`` instead, as it does when no server runs or
``MEDIBENCH_DOCS_FORK=0``.
"""

from __future__ import annotations

import array
import hashlib
import json
import os
import socket
import struct
import sys

#: environment variables (prefixes) that a pre-imported library reads at import time
SENSITIVE = (
    "HF_", "HUGGINGFACE", "TRANSFORMERS", "DIFFUSERS", "TORCH", "PYTORCH", "ATEN_", "OMP_",
    "GOMP_", "KMP_", "MKL_", "OPENBLAS", "NPY_", "NUMPY_", "MPL", "OPENCV_", "XDG_", "PYTHON",
    "LD_", "CUDA", "TOKENIZERS", "SAFETENSORS", "LANG", "LC_", "HOME", "TMPDIR", "TEMP", "TMP",
    "NUMBA_", "NILEARN_",
)  # fmt: skip

#: what the server imports before it forks (none of it medibench's)
PRELOAD = (
    "numpy", "pydantic", "scipy.ndimage", "scipy.stats", "scipy.optimize", "scipy.linalg",
    "PIL.Image", "cv2", "skimage.io", "matplotlib.pyplot", "torch", "torch._dynamo",
    "safetensors.torch", "transformers", "diffusers",
    "diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion_instruct_pix2pix",
    "typer", "rich.console", "rich.table", "numba", "nilearn.datasets", "nilearn.image",
)  # fmt: skip


def key(env: dict[str, str]) -> str:
    """A digest of the variables of ``env`` that the pre-imported libraries read."""
    seen = sorted((k, v) for k, v in env.items() if k.startswith(SENSITIVE))
    return hashlib.sha256(json.dumps(seen).encode()).hexdigest()[:16]


#: native threads a fork may leave behind: jemalloc's background purging thread (pyarrow's
#: bundled jemalloc starts one when pandas imports it, through nilearn), which jemalloc's own
#: fork handler turns off in the child (it purges inline there)
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def other_threads() -> list[str]:
    """The names of this process's threads besides the calling one that a fork would lose
    (:data:`FORK_SAFE_THREADS` aside)."""
    import threading

    me, names = str(threading.get_native_id()), []
    for tid in os.listdir("/proc/self/task"):
        if tid == me:
            continue
        with open(f"/proc/self/task/{tid}/comm", encoding="utf-8") as f:
            name = f.read().strip()
        if name not in FORK_SAFE_THREADS:
            names.append(name)
    return names


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def client(args: list[str], module: str = "medibench") -> int:
    """Run ``python -m MODULE ARGS`` in the server for this environment, or as a fresh process."""
    folder = os.environ.get("MEDIBENCH_DOCS_ZYGOTE", "")
    path = os.path.join(folder, key(dict(os.environ)) + ".sock")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if not folder or os.environ.get("MEDIBENCH_DOCS_FORK") == "0":
            raise OSError
        conn.connect(path)
    except OSError:
        conn.close()
        os.execv(sys.executable, [sys.executable, "-m", module, *args])
    request = {"module": module, "argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}
    payload = json.dumps(request).encode()
    conn.sendmsg(
        [struct.pack("!I", len(payload))],
        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))],
    )
    conn.sendall(payload)
    try:
        return struct.unpack("!i", _recv_exact(conn, 4))[0]
    except EOFError:
        print("docs zygote: the command's process ended without an exit status", file=sys.stderr)
        return 1


def python(args: list[str]) -> int:
    """``python ARGS``: ``-m medibench...`` through :func:`client`, anything else as is."""
    if len(args) >= 2 and args[0] == "-m" and args[1].split(".")[0] == "medibench":
        return client(args[2:], module=args[1])
    os.execv(sys.executable, [sys.executable, *args])
    return 1


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    msg, anc, _flags, _addr = conn.recvmsg(4, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    (size,) = struct.unpack("!I", msg if len(msg) == 4 else msg + _recv_exact(conn, 4 - len(msg)))
    return json.loads(_recv_exact(conn, size)), list(fds)


def _run_command(conn: socket.socket, request: dict, fds: list[int], added: dict[str, str]) -> None:
    """In the forked child: become the command, run it, and exit as the interpreter would.
    ``added``: the variables the pre-imports set (cv2's ``LD_LIBRARY_PATH``, ...), set again
    over the command's environment as its own imports would have."""
    import atexit
    import random
    import runpy
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.update(added)
    sys.path[0] = os.getcwd()  # as ``python -m`` puts it
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    status = {"code": 1}

    def report() -> None:  # registered first, so it runs after every other exit function
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            conn.sendall(struct.pack("!i", status["code"]))
        except OSError:
            pass

    atexit.register(report)
    sys.argv = [request["module"], *request["argv"]]
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        status["code"] = 0
    except SystemExit as stop:
        code = stop.code
        if code is None:
            status["code"] = 0
        elif isinstance(code, int):
            status["code"] = code
        else:
            print(code, file=sys.stderr)
            status["code"] = 1
    except BaseException:
        import traceback

        traceback.print_exc()
        status["code"] = 1
    raise SystemExit(status["code"])


def serve(folder: str, preload: tuple[str, ...] = PRELOAD) -> None:
    """Import ``preload``, listen on ``FOLDER/<key>.sock`` and fork a child per command (each
    one named on standard output: ``fork PID ARGV``)."""
    import gc
    import importlib
    import signal
    import warnings

    # the test session that started it (it may be gone before this line runs)
    parent = int(os.environ.get("MEDIBENCH_DOCS_ZYGOTE_PARENT") or os.getppid())
    before = dict(os.environ)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in preload:
            importlib.import_module(name)
    added = {k: v for k, v in os.environ.items() if before.get(k) != v}
    leaked = [m for m in sys.modules if m == "medibench" or m.startswith("medibench.")]
    assert not leaked, f"the docs zygote imported medibench modules: {leaked}"
    threads = other_threads()
    assert not threads, f"the docs zygote runs other threads ({threads}): a fork would lose them"
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped without a wait
    # the pre-imports' objects move out of the collector's reach: a child's collections would
    # otherwise walk (and so copy, page by page) the whole inherited heap
    gc.collect()
    gc.freeze()
    path = os.path.join(folder, key(before) + ".sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.rename(path + ".tmp", path)  # clients see a socket only once it listens
    listener.settimeout(2.0)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the test session is gone: so is its server
                return
            continue
        conn.setblocking(True)
        try:
            request, fds = _receive(conn)
        except (EOFError, OSError, ValueError):
            conn.close()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            _run_command(conn, request, fds, added)
        print("fork", pid, json.dumps([request["module"], *request["argv"]]), flush=True)
        for fd in fds:
            os.close(fd)
        conn.close()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], *([tuple(sys.argv[3].split(","))] if len(sys.argv) > 3 else []))
    elif sys.argv[1] == "python":
        sys.exit(python(sys.argv[2:]))
    else:
        sys.exit(client(sys.argv[2:]))
