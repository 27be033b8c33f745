"""A small client for any OpenAI-compatible chat endpoint, and a local stub of one for tests.

Rooms that evaluate language-model agents (functional_tom, vga, malot) talk to a model only
through :class:`ChatClient`: a ``POST {base_url}/chat/completions`` with the standard
``{"model", "messages", ...}`` body, answered by ``choices[0].message.content``. That covers the
OpenAI API, vLLM, llama.cpp's server, Ollama and most gateways. Failures (timeouts, connection
errors, HTTP errors, bodies that are not the expected JSON) are retried a bounded number of times
with exponential back-off, then raised as one :class:`ChatError`, so a caller can count the
failure and go on with the next episode instead of crashing.

Credentials come from Kedro's ``conf/local/credentials.yml`` (never committed), e.g.::

    llm_endpoint:
      base_url: http://localhost:8000/v1
      model: my-model
      api_key: sk-...
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Message = Mapping[str, Any]


class ChatError(RuntimeError):
    """The endpoint gave no usable answer within the allowed attempts."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


def image_part(png_bytes: bytes, mime: str = "image/png") -> dict[str, Any]:
    """An inline image content part (``data:`` URL), as the chat API accepts in ``content`` lists."""
    if not png_bytes:
        raise ValueError("image_part got empty image bytes")
    encoded = base64.b64encode(png_bytes).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{encoded}"}}


def text_part(text: str) -> dict[str, Any]:
    """A text content part, to mix with :func:`image_part` in one user message."""
    return {"type": "text", "text": text}


class ChatClient:
    """Blocking client of one model behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout_s: float = 30.0, max_retries: int = 3, backoff_s: float = 0.5) -> None:
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if not model:
            raise ValueError("model must be a non-empty model name")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if backoff_s < 0:
            raise ValueError(f"backoff_s must be >= 0, got {backoff_s}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.calls = 0
        self.failures = 0

    @classmethod
    def from_credentials(cls, creds: Mapping[str, Any], **kwargs: Any) -> ChatClient:
        """Build from a credentials entry ``{base_url, model, api_key?}``; ``kwargs`` override."""
        missing = [k for k in ("base_url", "model") if not creds.get(k)]
        if missing:
            raise ValueError(f"chat endpoint credentials lack {', '.join(missing)} "
                             "(set them in conf/local/credentials.yml)")
        return cls(str(creds["base_url"]), str(creds["model"]), api_key=creds.get("api_key"),
                   **kwargs)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(f"{self.base_url}/chat/completions",
                                         data=json.dumps(body).encode(), headers=headers,
                                         method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return json.loads(response.read().decode("utf-8"))

    @staticmethod
    def _content(payload: Any) -> str:
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(f"no choices[0].message.content in the answer: {str(payload)[:200]}"
                             ) from exc
        if not isinstance(content, str):
            raise ValueError(f"message content is {type(content).__name__}, not text")
        return content

    def complete(self, messages: Sequence[Message], **options: Any) -> str:
        """The assistant's reply text to ``messages``; ``options`` (temperature, max_tokens, ...)
        go into the request body. Raises :class:`ChatError` after ``1 + max_retries`` attempts."""
        if not messages:
            raise ValueError("complete() needs at least one message")
        body = {"model": self.model, "messages": list(messages), **options}
        last = ""
        attempts = 0
        for attempt in range(self.max_retries + 1):
            attempts = attempt + 1
            self.calls += 1
            try:
                return self._content(self._post(body))
            except (urllib.error.URLError, TimeoutError, ConnectionError, json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if attempt < self.max_retries and self.backoff_s:
                time.sleep(self.backoff_s * 2 ** attempt)
        self.failures += 1
        raise ChatError(f"{self.base_url} gave no usable answer after {attempts} attempts "
                        f"(last: {last})", attempts)


ReplyFn = Callable[[dict[str, Any]], "str | None"]


@contextlib.contextmanager
def stub_server(reply_fn: ReplyFn, delay_s: float = 0.0) -> Iterator[str]:
    """A local OpenAI-compatible endpoint for tests; yields its ``base_url``.

    ``reply_fn(request_json)`` returns the assistant text; returning ``None`` sends a body that
    is not valid JSON (a garbage answer); raising makes the server answer HTTP 500. ``delay_s``
    delays every answer (longer than the client's timeout simulates a hung endpoint). The
    request bodies it received are available through :func:`stub_requests`.
    """
    requests: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # silence the default stderr log
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                body = {}
            requests.append(body)
            if delay_s:
                time.sleep(delay_s)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error": "not found"}')
                return
            try:
                text = reply_fn(body)
            except Exception as exc:  # the stub turns any failure into an HTTP 500
                self._send(500, json.dumps({"error": str(exc)}).encode())
                return
            if text is None:
                self._send(200, b"<html>this is not json")
                return
            answer = {"id": f"stub-{len(requests)}", "object": "chat.completion",
                      "model": body.get("model", ""),
                      "choices": [{"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": text}}]}
            self._send(200, json.dumps(answer).encode())

        def _send(self, code: int, payload: bytes) -> None:
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # client gave up (timeout)
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    _REQUESTS[url] = requests
    try:
        yield url
    finally:
        _REQUESTS.pop(url, None)
        server.shutdown()
        server.server_close()


_REQUESTS: dict[str, list[dict[str, Any]]] = {}


def stub_requests(base_url: str) -> list[dict[str, Any]]:
    """The request bodies a running :func:`stub_server` at ``base_url`` has received so far."""
    return _REQUESTS[base_url]
