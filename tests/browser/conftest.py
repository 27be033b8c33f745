"""Fixtures of the browser tests: Debian's headless chromium, a static file server, an MLflow
server, all on 127.0.0.1 only.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: commands
on fd 3, replies on fd 4, NUL-terminated JSON), so the tests need nothing beyond the standard
library: they can wait for what a page renders instead of guessing a fixed delay, read the
rendered DOM, and take screenshots.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS_ENV = "ICML25_SCREENSHOTS"

_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-quic", "--disable-extensions", "--hide-scrollbars", "--mute-audio",
    # every host name fails to resolve: the pages may reach 127.0.0.1 and nothing else
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]


class Browser:
    """One headless chromium with one tab, driven over the DevTools protocol on a pipe."""

    def __init__(self, profile: Path, log: Path, width: int = 1400, height: int = 900):
        commands_r, commands_w = os.pipe()
        replies_r, replies_w = os.pipe()
        # move the child's ends above 9 so `3<&N 4>&M` cannot clobber them
        child_r = fcntl.fcntl(commands_r, fcntl.F_DUPFD, 10)
        child_w = fcntl.fcntl(replies_w, fcntl.F_DUPFD, 10)
        os.close(commands_r)
        os.close(replies_w)
        self._log_path = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", f'exec "$0" "$@" 3<&{child_r} 4>&{child_w} {child_r}<&- {child_w}>&-',
             str(CHROMIUM), *_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
             "--remote-debugging-pipe", "about:blank"],
            pass_fds=(child_r, child_w), stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        os.close(child_r)
        os.close(child_w)
        self._commands, self._replies = commands_w, replies_r
        self._buffer, self._last_id = b"", 0
        try:
            page = next(t for t in self.send("Target.getTargets")["targetInfos"]
                        if t["type"] == "page")
            self._session = self.send("Target.attachToTarget",
                                      {"targetId": page["targetId"], "flatten": True})["sessionId"]
            self.command("Page.enable")
            self.set_viewport(width, height)
            # layouts that animate (kedro-viz) settle at once, so screenshots are not mid-move
            self.command("Emulation.setEmulatedMedia", {"features": [
                {"name": "prefers-reduced-motion", "value": "reduce"}]})
        except BaseException:
            self.close()
            raise

    def log_tail(self, n: int = 2000) -> str:
        self._log.flush()
        return self._log_path.read_text(errors="replace")[-n:]

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict:
        """Send one DevTools command and return its result (events are skipped)."""
        self._last_id += 1
        message: dict[str, Any] = {"id": self._last_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._commands, data):]
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"chromium did not answer {method} in {timeout} s")
                if select.select([self._replies], [], [], left)[0]:
                    chunk = os.read(self._replies, 1 << 20)
                    if not chunk:
                        raise RuntimeError(f"chromium exited during {method}:\n{self.log_tail()}")
                    self._buffer += chunk
            raw, _, self._buffer = self._buffer.partition(b"\0")
            reply = json.loads(raw)
            if reply.get("id") == self._last_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def command(self, method: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        """A DevTools command to the tab."""
        return self.send(method, params, self._session, timeout)

    def set_viewport(self, width: int, height: int) -> None:
        self.command("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the tab (promises are awaited)."""
        result = self.command("Runtime.evaluate", {
            "expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:200]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, until: str, timeout: float = 45.0,
             local_storage: dict[str, str] | None = None) -> None:
        """Load ``url`` and wait until the JavaScript expression ``until`` is true, then until
        the DOM stops changing. ``local_storage`` is set before the page's own scripts run."""
        if local_storage:
            source = ";".join(f"localStorage.setItem({json.dumps(k)}, {json.dumps(v)})"
                              for k, v in local_storage.items())
            self.command("Page.addScriptToEvaluateOnNewDocument", {"source": source})
        self.command("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        while True:
            with suppress(RuntimeError):  # the document may be mid-navigation
                if self.evaluate(until):
                    break
            if time.monotonic() > deadline:
                text = ""
                with suppress(RuntimeError):
                    text = self.evaluate("document.body ? document.body.innerText : ''") or ""
                raise TimeoutError(
                    f"{url}: `{until}` still false after {timeout} s; the page shows:\n"
                    f"{text[:3000]}\n--- chromium log ---\n{self.log_tail()}")
            time.sleep(0.2)
        self.settle()

    def settle(self, timeout: float = 10.0) -> None:
        """Wait (at most ``timeout``) until three DOM snapshots 0.25 s apart agree: charts and
        layouts have finished drawing."""
        deadline = time.monotonic() + timeout
        previous, same = None, 0
        while same < 2 and time.monotonic() < deadline:
            time.sleep(0.25)
            dom = self.evaluate("document.documentElement.outerHTML")
            same = same + 1 if dom == previous else 0
            previous = dom

    def text(self, selector: str = "body") -> str:
        """The rendered text (``innerText``) of the first element matching ``selector``."""
        return self.evaluate(
            f"(document.querySelector({json.dumps(selector)}) || {{innerText: ''}}).innerText")

    def texts(self, selector: str) -> list[str]:
        """The ``textContent`` of every element matching ``selector`` (SVG text too)."""
        return self.evaluate(
            f"Array.from(document.querySelectorAll({json.dumps(selector)}), e => e.textContent)")

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        """A PNG of the viewport, or of the whole page's height with ``full_page``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.command("Page.getLayoutMetrics")["cssContentSize"]
            params |= {"captureBeyondViewport": True, "clip": {
                "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}}
        path.write_bytes(base64.b64decode(self.command("Page.captureScreenshot", params)["data"]))
        return path

    def close(self) -> None:
        if self.proc.poll() is None:
            with suppress(Exception):
                self.send("Browser.close", timeout=5)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for fd in (self._commands, self._replies):
            with suppress(OSError):
                os.close(fd)
        self._log.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    """A fresh headless chromium (own profile, log in ``tmp_path/chromium``) for one test."""
    folder = tmp_path / "chromium"
    folder.mkdir()
    chromium = Browser(folder / "profile", folder / "chromium.log")
    yield chromium
    chromium.close()


@pytest.fixture
def save_screenshot(tmp_path: Path, browser: Browser):
    """``save_screenshot(name, full_page=False)`` writes ``tmp_path/name`` and, when the
    environment variable ICML25_SCREENSHOTS names a folder (relative to the repository root
    unless absolute), copies it there too (how the README's screenshots are made)."""
    target = os.environ.get(SCREENSHOTS_ENV)
    copy_to = (REPO_ROOT / target) if target else None

    def _save(name: str, full_page: bool = False) -> Path:
        path = browser.screenshot(tmp_path / name, full_page=full_page)
        assert path.stat().st_size > 10_000, f"{name} is suspiciously small"
        if copy_to is not None:
            copy_to.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy_to / name)
        return path

    return _save


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve_directory(folder: Path) -> Iterator[str]:
    """Serve ``folder`` over HTTP on 127.0.0.1 (a free port) from a thread; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def mlflow_server(db: Path, log: Path, timeout: float = 90.0) -> Iterator[str]:
    """``mlflow server`` on the sqlite store ``db``, on 127.0.0.1 at a free port; yields its URL
    once ``/health`` answers. It runs in its own process group, ended (by its id) afterwards."""
    assert db.is_file(), f"no MLflow store at {db}"
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
           "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
    mlflow = Path(sys.executable).parent / "mlflow"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(mlflow), "server", "--backend-store-uri", f"sqlite:///{db}",
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited ({proc.returncode}):\n"
                                   f"{log.read_text(errors='replace')[-3000:]}")
            with suppress(OSError), urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"mlflow server did not answer in {timeout} s:\n"
                                   f"{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        # the CLI starts uvicorn as a child: end the whole group this test started
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        _end_group(proc)


def _end_group(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """Wait for the group led by ``proc`` (SIGTERM sent) to be gone; SIGKILL what is left."""
    deadline = time.monotonic() + grace
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture
def serve() -> Iterator:
    """``serve(folder)`` serves a folder on 127.0.0.1 for the rest of the test; returns its URL."""
    with ExitStack() as stack:
        yield lambda folder: stack.enter_context(serve_directory(folder))


@pytest.fixture
def start_mlflow(tmp_path: Path) -> Iterator:
    """``start_mlflow(db)`` runs ``mlflow server`` on a sqlite store for the rest of the test;
    returns its URL."""
    with ExitStack() as stack:
        yield lambda db: stack.enter_context(mlflow_server(db, tmp_path / "mlflow-server.log"))
