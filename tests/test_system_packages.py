"""scripts/system_packages.sh: `make test` installs the Debian packages it needs when it can,
and otherwise stops before any test with the exact command to run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts/system_packages.sh"


def _fake_bin(tmp_path: Path, uid: int) -> Path:
    """A PATH folder whose `id` reports ``uid`` and whose `apt-get` only logs its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/apt.log\n')
    (bin_dir / "sudo").write_text("#!/bin/sh\nexit 1\n")  # sudo that asks for a password
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


def _run(tmp_path: Path, uid: int, root: str, *groups: str,
         python: str = sys.executable) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{_fake_bin(tmp_path, uid)}:/usr/bin:/bin",
           "ICML25_SYSTEM_ROOT": root, "PYTHON": python}
    return subprocess.run(["bash", str(SCRIPT), *groups], env=env, capture_output=True,
                          text=True, timeout=60)


def test_nothing_to_do_when_the_packages_are_there(tmp_path):
    root = tmp_path / "root"
    for exe in ("chromium", "espeak-ng", "flite"):
        (root / "usr/bin").mkdir(parents=True, exist_ok=True)
        (root / "usr/bin" / exe).write_text("#!/bin/sh\n")
        (root / "usr/bin" / exe).chmod(0o755)
    done = _run(tmp_path, 1000, str(root))
    assert done.returncode == 0 and not (tmp_path / "apt.log").exists()


def test_without_root_it_stops_with_the_exact_command(tmp_path):
    done = _run(tmp_path, 1000, str(tmp_path / "empty"))
    assert done.returncode == 1
    assert "needs the Debian packages: chromium espeak-ng flite" in done.stderr
    assert "sudo sh -c 'apt-get update && apt-get install -y chromium espeak-ng flite'" in (
        done.stderr)
    assert not (tmp_path / "apt.log").exists()


def test_as_root_it_installs_only_the_missing_ones(tmp_path):
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/chromium").write_text("#!/bin/sh\n")
    (root / "usr/bin/chromium").chmod(0o755)
    done = _run(tmp_path, 0, str(root))
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "apt.log").read_text().splitlines()
    assert log == ["update -qq", "install -y -qq espeak-ng flite"]


def test_a_python_without_venv_support_names_python3_venv(tmp_path):
    no_venv = tmp_path / "python-without-venv"
    no_venv.write_text("#!/bin/sh\nexit 1\n")  # `import ensurepip, venv` fails
    no_venv.chmod(0o755)
    done = _run(tmp_path, 1000, str(tmp_path / "empty"), "venv", python=str(no_venv))
    assert done.returncode == 1
    assert "apt-get install -y python3-venv'" in done.stderr
    assert _run(tmp_path / "ok", 1000, str(tmp_path / "empty"), "venv").returncode == 0


def test_an_unknown_group_is_refused(tmp_path):
    done = _run(tmp_path, 0, str(tmp_path), "tset")
    assert done.returncode == 2 and "unknown group 'tset'" in done.stderr


def test_the_paper_group_names_frugals_corpus_package(tmp_path):
    done = _run(tmp_path, 1000, str(tmp_path / "empty"), "paper")
    assert done.returncode == 1
    assert "apt-get install -y python3.11-doc'" in done.stderr
    root = tmp_path / "root"
    (root / "usr/share/doc/python3.11/html/_sources").mkdir(parents=True)
    assert _run(tmp_path / "ok", 1000, str(root), "paper").returncode == 0
