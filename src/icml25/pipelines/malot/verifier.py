"""Verifier backends behind one contract (docs/papers/malot.md).

``check(code) -> {errors, warnings, sorries, pass, complete, verify_time, system_error,
verdict}``; accuracy counts ``complete``. Verdicts are cached by sha256 of the code, so identical
proofs never cost verifier time twice.

- :class:`MiniLeanVerifier`: the sound fragment checker (default here; no Lean toolchain can be
  installed on these machines).
- :class:`LeanReplVerifier`: the real Lean 4 REPL (``lake env repl`` inside a built Lean +
  Mathlib project named by ``lean_project_dir`` or the ``MALOT_LEAN_PROJECT`` environment
  variable): one REPL process per proof from a thread pool of ``workers``, a wall-clock timeout
  and an address-space limit per process, killed by its own PID on timeout.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from icml25.pipelines.malot.minilean import Settings, verify


class MiniLeanVerifier:
    name = "minilean"

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.cache: dict[str, dict[str, Any]] = {}
        self.calls = 0

    def check(self, code: str) -> dict[str, Any]:
        key = hashlib.sha256(code.encode()).hexdigest()
        if key not in self.cache:
            self.calls += 1
            self.cache[key] = verify(code, self.settings)
        return self.cache[key]

    def check_all(self, codes: list[str]) -> list[dict[str, Any]]:
        return [self.check(code) for code in codes]


def lean_project(path: str | None) -> Path | None:
    """The Lean project to use: the parameter, else ``$MALOT_LEAN_PROJECT``; None if neither
    names a directory with a ``lakefile``."""
    candidate = path or os.environ.get("MALOT_LEAN_PROJECT")
    if not candidate:
        return None
    root = Path(candidate).expanduser()
    if not any((root / name).exists() for name in ("lakefile.lean", "lakefile.toml")):
        return None
    return root


class LeanReplVerifier:
    """Checks whole files with the Lean 4 REPL (``{"cmd": code}`` on stdin, JSON on stdout)."""

    name = "lean_repl"

    def __init__(self, project_dir: str | None, timeout_s: float = 64.0, workers: int = 8,
                 memory_mb: int = 8192, lake: str = "lake") -> None:
        root = lean_project(project_dir)
        if root is None:
            raise FileNotFoundError(
                "LeanReplVerifier needs a built Lean 4 + Mathlib project: set "
                "malot.verifier.lean_project_dir or MALOT_LEAN_PROJECT to its directory")
        self.root, self.timeout_s, self.workers = root, timeout_s, workers
        self.memory_bytes, self.lake = memory_mb * 1024 * 1024, lake
        self.cache: dict[str, dict[str, Any]] = {}
        self.calls = 0

    def _limit(self) -> None:  # runs in the child before exec
        resource.setrlimit(resource.RLIMIT_AS, (self.memory_bytes, self.memory_bytes))

    def _run(self, code: str) -> dict[str, Any]:
        started = time.perf_counter()
        result: dict[str, Any] = {"errors": [], "warnings": [], "sorries": [], "pass": False,
                                  "complete": False, "system_error": None, "verdict": "error"}
        proc = subprocess.Popen([self.lake, "env", "repl"], cwd=self.root, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=self._limit)
        try:
            out, err = proc.communicate(json.dumps({"cmd": code}) + "\n\n",
                                        timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()  # our own child, by its PID
            proc.communicate()
            result["system_error"] = f"timeout after {self.timeout_s:g} s"
            result["errors"].append({"line": 1, "col": 0, "category": "timeout",
                                     "message": result["system_error"]})
            result["verdict"] = "timeout"
            result["verify_time"] = time.perf_counter() - started
            return result
        result.update(parse_repl_output(out, err))
        result["verify_time"] = time.perf_counter() - started
        return result

    def check(self, code: str) -> dict[str, Any]:
        key = hashlib.sha256(code.encode()).hexdigest()
        if key not in self.cache:
            self.calls += 1
            self.cache[key] = self._run(code)
        return self.cache[key]

    def check_all(self, codes: list[str]) -> list[dict[str, Any]]:
        todo = list(dict.fromkeys(c for c in codes
                                  if hashlib.sha256(c.encode()).hexdigest() not in self.cache))
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            for code, verdict in zip(todo, pool.map(self._run, todo), strict=True):
                self.calls += 1
                self.cache[hashlib.sha256(code.encode()).hexdigest()] = verdict
        return [self.check(code) for code in codes]


def parse_repl_output(out: str, err: str) -> dict[str, Any]:
    """The contract from the REPL's JSON reply (messages with severity, pos, data; sorries)."""
    try:
        reply = json.loads(out.strip() or "{}")
    except json.JSONDecodeError:
        return {"system_error": (err or out)[-2000:], "verdict": "error", "pass": False,
                "complete": False}
    errors, warnings = [], []
    for msg in reply.get("messages", []):
        entry = {"line": msg.get("pos", {}).get("line", 0),
                 "col": msg.get("pos", {}).get("column", 0), "message": msg.get("data", "")}
        (errors if msg.get("severity") == "error" else warnings).append(entry)
    sorries = reply.get("sorries", [])
    passed = not errors and "message" not in reply
    complete = passed and not sorries and not any(
        "declaration uses 'sorry'" in w["message"] or "failed" in w["message"] for w in warnings)
    return {"errors": errors, "warnings": warnings, "sorries": sorries, "pass": passed,
            "complete": complete,
            "verdict": "complete" if complete else "incomplete" if passed else "error"}


def make_verifier(backend: str, settings: Settings, project_dir: str | None, timeout_s: float,
                  workers: int, memory_mb: int):
    if backend == "lean_repl":
        return LeanReplVerifier(project_dir, timeout_s=timeout_s, workers=workers,
                                memory_mb=memory_mb)
    return MiniLeanVerifier(settings)
