"""A conf/test run calls no network: no DNS query and no connection outside loopback.

The run happens in a fresh interpreter whose socket functions are replaced before anything is
imported (MLflow 3 starts its telemetry client at import), with the environment of a user's
shell: none of the CI markers by which MLflow turns its telemetry off by itself, and none of the
telemetry switches, so that only the project's own settings (``icml25.TELEMETRY_OFF``) keep the
libraries quiet. The same run checks the config environment's layout: everything it writes
lies under ``data/test`` (its data tree and MLflow store), nothing in the base tree.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import icml25

PROJECT_ROOT = Path(__file__).resolve().parents[1]

PIPELINE = "sparse_iht"  # a whole paper pipeline in seconds at conf/test

GUARD = r'''
import atexit, json, socket, sys

calls = []
LOOPBACK = ("localhost", "127.0.0.1", "::1", "0.0.0.0", "", None)


def _local(host):
    if isinstance(host, bytes):
        host = host.decode()
    return host in LOOPBACK or str(host).startswith("127.")


def _blocked(kind, host):
    calls.append([kind, str(host)])
    raise OSError(f"network blocked by the test: {kind} {host}")


_getaddrinfo = socket.getaddrinfo
_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def getaddrinfo(host, *args, **kwargs):
    if not _local(host):
        _blocked("getaddrinfo", host)
    return _getaddrinfo(host, *args, **kwargs)


def _check(sock, address):
    if sock.family in (socket.AF_INET, socket.AF_INET6) and not _local(address[0]):
        _blocked("connect", address[0])


def connect(self, address):
    _check(self, address)
    return _connect(self, address)


def connect_ex(self, address):
    _check(self, address)
    return _connect_ex(self, address)


def by_name(name, *args):
    if not _local(name):
        _blocked("gethostbyname", name)
    return "127.0.0.1"


socket.getaddrinfo = getaddrinfo
socket.socket.connect = connect
socket.socket.connect_ex = connect_ex
socket.gethostbyname = by_name
socket.gethostbyname_ex = lambda name: _blocked("gethostbyname_ex", name)
socket.gethostbyaddr = lambda addr: _blocked("gethostbyaddr", addr)
# registered first, so it runs last: after MLflow's and the project's own exit handlers
atexit.register(lambda: open(sys.argv[1], "w").write(json.dumps(calls)))

from pathlib import Path
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

project = Path.cwd()
bootstrap_project(project)
with KedroSession.create(project_path=project, env="test") as session:
    session.run(pipeline_names=[sys.argv[2]])
'''

#: variables by which a library turns its telemetry off on its own in CI or under pytest
CI_MARKERS = ("PYTEST_CURRENT_TEST", "PYTEST_VERSION", "CI", "GITHUB_ACTIONS", "GITLAB_CI",
              "JENKINS_URL", "TRAVIS", "CIRCLECI", "BUILDKITE", "TF_BUILD", "DO_NOT_TRACK",
              "DISABLE_TELEMETRY")


def _user_shell_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in CI_MARKERS and k not in icml25.TELEMETRY_OFF}
    env["OMP_NUM_THREADS"] = "1"
    return env


def test_a_conf_test_run_makes_no_network_call_and_writes_only_its_own_tree(kedro_project):
    # the real conf/test layout (the fixture points conf/test at the root tree)
    for name in ("globals.yml", "mlflow.yml"):
        shutil.copy(PROJECT_ROOT / "conf/test" / name, kedro_project / "conf/test" / name)
    record = kedro_project / "network_calls.json"
    script = kedro_project / "guarded_run.py"
    script.write_text(GUARD)
    done = subprocess.run([sys.executable, str(script), str(record), PIPELINE],
                          cwd=kedro_project, env=_user_shell_env(), capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(record.read_text()) == []

    tree = kedro_project / "data/test"
    assert (tree / f"08_reporting/{PIPELINE}/claims.json").exists()
    assert (tree / f"08_reporting/{PIPELINE}/metrics.json").exists()
    # the base tree (the fixture's empty layer folders) and the base store stay untouched
    assert [p for p in (kedro_project / "data").rglob("*")
            if p.is_file() and tree not in p.parents] == []
    assert not (kedro_project / "mlflow.db").exists()
    assert not (kedro_project / "mlruns").exists()
    assert (tree / "mlruns").is_dir()
    with sqlite3.connect(tree / "mlflow.db") as db:
        experiments = dict(db.execute("select name, experiment_id from experiments"))
        kinds = dict(db.execute(
            "select experiment_id, value from experiment_tags where key = ?",
            ("mlflow.experimentKind",)))
        versions = db.execute("select count(*) from model_versions").fetchone()[0]
    assert PIPELINE in experiments
    assert kinds[experiments[PIPELINE]] == "custom_model_development"
    assert versions == 0  # conf/test registers no model
