"""Servers on 127.0.0.1 for testing object-store reads and writes: S3 (moto), HTTP, and faults.

:func:`moto_server` starts moto's S3 server in a subprocess and yields the
``storage_options`` of s3fs; :func:`http_server` serves a directory read-only
with byte ranges, as a static web server does; :class:`FaultProxy` stands in
front of either and injects the faults of real networks (5xx responses,
connections dropped mid-body, slow responses) at seeded rates, recording
every request so a test can count the bytes a reader fetched.

Shipped with the package, like :mod:`cytepool.testing`, so tools that write
cubes to object storage can test against the same servers.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar, Final

from cytepool.testing import free_port, wait_for_port

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

__all__ = [
    "DaskProcesses",
    "FaultProxy",
    "Faults",
    "RequestRecord",
    "dask_processes",
    "http_server",
    "moto_server",
]

_RANGE: Final = re.compile(r"bytes=(?P<start>[0-9]*)-(?P<end>[0-9]*)")
_HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}
)
_WRITES: Final = frozenset({"PUT", "POST", "DELETE"})
_SLOW_DOWN: Final = b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
_ACCESS_DENIED: Final = b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"


@contextlib.contextmanager
def moto_server(*, port: int | None = None) -> Iterator[dict[str, Any]]:
    """Run moto's S3 server on 127.0.0.1 in a subprocess; yield s3fs ``storage_options``.

    Parameters
    ----------
    port
        The port; a free one by default.

    Yields
    ------
    dict
        ``{"endpoint_url": "http://127.0.0.1:PORT", "key": "testing", "secret": "testing"}``.
    """
    port = port or free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        wait_for_port(port)
        yield {"endpoint_url": f"http://127.0.0.1:{port}", "key": "testing", "secret": "testing"}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@dataclass(kw_only=True)
class DaskProcesses:
    """A Dask scheduler and workers running as processes of their own (see :func:`dask_processes`)."""

    address: str
    """The scheduler's address, ``tcp://127.0.0.1:PORT``."""
    scheduler: subprocess.Popen[bytes] | None
    """The scheduler process, or None when the caller runs the scheduler elsewhere."""
    workers: list[subprocess.Popen[bytes]]
    """The worker (or nanny) processes, in start order."""
    env: dict[str, str]
    """The environment the processes run in."""

    def start_worker(self, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        """Start one more worker process (a replacement for a killed one) from ``argv``.

        Parameters
        ----------
        argv
            The worker's command line.

        Returns
        -------
        subprocess.Popen
            The process, also appended to :attr:`workers`.
        """
        proc = _spawn(argv, self.env)
        self.workers.append(proc)
        return proc


def _spawn(argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(argv),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(env),
        start_new_session=True,
    )


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Terminate each process group (a nanny and its worker), then kill what is left."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def dask_processes(
    scheduler: Sequence[str] | None,
    workers: Sequence[Sequence[str]],
    *,
    address: str,
    n_workers: int | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> Iterator[DaskProcesses]:
    """Start a Dask scheduler and workers from their command lines, as a cluster's hosts do.

    Each process runs in a session of its own, so a nanny and the worker it
    spawns are stopped together: terminated on exit, then killed.

    Parameters
    ----------
    scheduler
        The scheduler's command line (``dask scheduler --host 127.0.0.1
        --port PORT ...``), or None when the scheduler is already running.
    workers
        One command line per worker process (``dask worker ADDRESS ...``).
    address
        The address the scheduler listens on and the workers join.
    n_workers
        How many workers to wait for (``len(workers)`` by default; more when
        a command line starts several with ``--nworkers``).
    env
        The processes' environment; this process's by default.
    timeout
        Seconds to wait for the scheduler and the workers.

    Yields
    ------
    DaskProcesses
        The running processes.

    Raises
    ------
    TimeoutError
        The workers did not all join within ``timeout``.
    """
    from distributed import Client  # noqa: PLC0415 (servers must import without distributed)

    environment = dict(os.environ if env is None else env)
    running = DaskProcesses(
        address=address,
        scheduler=None if scheduler is None else _spawn(scheduler, environment),
        workers=[],
        env=environment,
    )
    try:
        wait_for_port(int(address.rsplit(":", 1)[1]), timeout=timeout)
        running.workers.extend(_spawn(argv, environment) for argv in workers)
        with Client(address, timeout=f"{timeout}s", set_as_default=False) as client:
            client.wait_for_workers(n_workers or len(workers), timeout=timeout)
        yield running
    finally:
        _stop([*running.workers, *([running.scheduler] if running.scheduler else [])])


class _RangeHandler(SimpleHTTPRequestHandler):
    """``SimpleHTTPRequestHandler`` with single byte ranges (``206``), as web servers answer."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def send_head(self) -> Any:  # noqa: ANN401 (the base class's file object)
        match = _RANGE.fullmatch(self.headers.get("Range", ""))
        path = Path(self.translate_path(self.path))
        if match is None or not path.is_file():
            return super().send_head()
        size = path.stat().st_size
        start = int(match["start"] or 0) if match["start"] else size - int(match["end"])
        end = min(int(match["end"]), size - 1) if match["start"] and match["end"] else size - 1
        if start >= size:
            self.send_error(416)
            return None
        handle = path.open("rb")
        handle.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        return _Slice(handle, end - start + 1)


class _Slice:
    """The first ``n`` bytes of an open file, for ``copyfile``."""

    def __init__(self, handle: BinaryIO, n: int) -> None:
        self._handle, self._left = handle, n

    def read(self, size: int = -1) -> bytes:
        size = self._left if size < 0 else min(size, self._left)
        data: bytes = self._handle.read(size)
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._handle.close()


@contextlib.contextmanager
def http_server(directory: Path) -> Iterator[str]:
    """Serve ``directory`` read-only over HTTP on 127.0.0.1, with byte ranges; yield its URL.

    Directory listings are the HTML index pages fsspec's HTTP filesystem reads.

    Parameters
    ----------
    directory
        The folder to serve.

    Yields
    ------
    str
        ``http://127.0.0.1:PORT``.
    """

    class Handler(_RangeHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(directory), **kwargs)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass(kw_only=True)
class Faults:
    """What a :class:`FaultProxy` does to the requests it forwards, each drawn with a seeded generator.

    Parameters
    ----------
    error_rate
        Fraction of requests answered ``503 Slow Down`` without reaching the server.
    drop_rate
        Fraction of responses whose connection is closed after half the body
        (the full ``Content-Length`` announced).
    delay
        Seconds each response waits before it is sent (a slow network).
    methods
        The methods faults apply to; others pass untouched.
    seed
        The generator's seed.
    """

    error_rate: float = 0.0
    drop_rate: float = 0.0
    delay: float = 0.0
    methods: frozenset[str] = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE"})
    seed: int = 0
    _random: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def draw(self, method: str) -> str | None:
        """``"error"``, ``"drop"`` or None for a request of ``method``."""
        if method not in self.methods:
            return None
        x = self._random.random()
        if x < self.error_rate:
            return "error"
        if x < self.error_rate + self.drop_rate:
            return "drop"
        return None


@dataclass(frozen=True, kw_only=True)
class RequestRecord:
    """One request a :class:`FaultProxy` handled."""

    method: str
    path: str
    range: str | None
    status: int
    body_bytes: int
    fault: str | None
    """``"error"``, ``"drop"``, ``"read-only"`` (a refused write) or None."""


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` that injects :class:`Faults`.

    Point a client at :attr:`url` instead of the server (``endpoint_url`` for
    s3fs, the base URL for HTTP). Every request is recorded in
    :attr:`requests`; :attr:`faults` may be replaced while it runs.

    Parameters
    ----------
    upstream
        The server's URL, ``http://127.0.0.1:PORT``.
    faults
        What to inject; none by default.
    read_only
        Answer every write (``PUT``, ``POST``, ``DELETE``) with S3's ``403
        AccessDenied``, as for a user whose policy allows only reads; the
        upstream never sees it. Reads pass.

    Examples
    --------
    >>> import tempfile, pathlib, fsspec
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (pathlib.Path(d) / "a.txt").write_bytes(b"hello")
    ...     with http_server(pathlib.Path(d)) as url, FaultProxy(url) as proxy:
    ...         fsspec.filesystem("http").cat(f"{proxy.url}/a.txt")
    b'hello'
    """

    def __init__(
        self, upstream: str, *, faults: Faults | None = None, read_only: bool = False
    ) -> None:
        match = re.fullmatch(r"http://(?P<host>[^:/]+):(?P<port>[0-9]+)/?", upstream)
        if match is None:
            msg = f"upstream: expected http://HOST:PORT, found {upstream!r}"
            raise ValueError(msg)
        self.upstream = (match["host"], int(match["port"]))
        self.faults = faults or Faults()
        self.read_only = read_only
        self.requests: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """The proxy's URL."""
        assert self._server is not None, "start the proxy first (with FaultProxy(...) as proxy)"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def bytes_sent(self, *, method: str = "GET", path_contains: str = "") -> int:
        """Body bytes the proxy sent in answers to ``method`` requests whose path holds ``path_contains``."""
        with self._lock:
            return sum(
                r.body_bytes
                for r in self.requests
                if r.method == method and path_contains in r.path
            )

    def _record(self, record: RequestRecord) -> None:
        with self._lock:
            self.requests.append(record)

    def _draw(self, method: str) -> str | None:
        with self._lock:
            return self.faults.draw(method)

    def __enter__(self) -> FaultProxy:
        proxy = self

        class Handler(_ProxyHandler):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


class _ProxyHandler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: ClassVar[FaultProxy]

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        self._forward()

    def do_HEAD(self) -> None:
        self._forward()

    def do_PUT(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def do_DELETE(self) -> None:
        self._forward()

    def _answer(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _forward(self) -> None:
        owner = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        fault = owner._draw(self.command)
        delay = owner.faults.delay
        if delay:
            time.sleep(delay)
        record: dict[str, Any] = {
            "method": self.command,
            "path": self.path,
            "range": self.headers.get("Range"),
        }
        if owner.read_only and self.command in _WRITES:
            owner._record(RequestRecord(**record, status=403, body_bytes=0, fault="read-only"))
            self._answer(403, _ACCESS_DENIED)
            return
        if fault == "error":
            owner._record(RequestRecord(**record, status=503, body_bytes=0, fault=fault))
            self._answer(503, _SLOW_DOWN)
            return
        connection = http.client.HTTPConnection(*owner.upstream, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        sent = data if fault != "drop" else data[: len(data) // 2]
        # recorded before the client hears back, so the log is in the order the server completed them
        owner._record(
            RequestRecord(**record, status=response.status, body_bytes=len(sent), fault=fault)
        )
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                self.send_header(key, value)
        announced = response.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", announced or str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(sent)
        if fault == "drop":
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(2)
