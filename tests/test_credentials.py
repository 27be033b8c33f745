"""One credentials mechanism, Kedro's (issue 34): the committed template names every entry the
catalogs read and holds no value, nodes get their entry from the catalog, no code reads a secret
from the environment, and a malformed credentials file stops a run with one line naming it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from icml25.core.credentials import (
    ENDPOINT_ENTRIES,
    CredentialsError,
    check_credentials,
    credentials_files,
)
from icml25.core.datasets import CredentialsDataset
from icml25.preflight import PreflightError

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "conf/base/credentials.yml"


def _catalog_credentials() -> dict[str, str]:
    """``{entry: dataset}`` for every ``credentials:`` a catalog entry names."""
    found = {}
    for path in sorted((ROOT / "conf").glob("*/catalog*.yml")):
        for name, entry in (yaml.safe_load(path.read_text()) or {}).items():
            while isinstance(entry, dict):
                if isinstance(entry.get("credentials"), str):
                    found[entry["credentials"]] = name
                entry = entry.get("dataset")
    return found


def test_the_template_lists_every_entry_read_and_holds_no_value():
    template = yaml.safe_load(TEMPLATE.read_text())
    read = _catalog_credentials()
    assert set(read) == set(ENDPOINT_ENTRIES) <= set(template)
    for path in sorted((ROOT / "conf").glob("*/mlflow.yml")):
        named = (yaml.safe_load(path.read_text()) or {}).get("server", {}).get("credentials")
        assert named is None or named in template, path
    assert all(value is None for value in template.values())  # never a secret in git
    text = TEMPLATE.read_text()
    for entry in read:  # each entry is documented with its keys
        assert re.search(rf"^#\s+{entry}:\n#\s+base_url: .*\n#\s+model: .*\n#\s+api_key:", text,
                         re.M), entry


def test_credentials_of_other_environments_are_never_committed():
    ignored = {"conf/local/credentials.yml", "conf/paper/credentials.yml",
               "conf/test/credentials.yml"}
    result = subprocess.run(["git", "check-ignore", *sorted(ignored)], cwd=ROOT,
                                          capture_output=True, text=True)
    assert set(result.stdout.split()) == ignored
    tracked = subprocess.run(["git", "ls-files", "conf"], cwd=ROOT,
                                           capture_output=True, text=True).stdout.split()
    assert [p for p in tracked if "credentials" in p] == ["conf/base/credentials.yml"]


def test_no_code_reads_secrets_or_credentials_files_itself():
    pattern = re.compile(r"os\.environ(\.get)?[\[(][^)\]]*(KEY|TOKEN|SECRET|PASSWORD)|"
                         r"getenv\([^)]*(KEY|TOKEN|SECRET)|\[\"credentials\"\]", re.I)
    offenders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "src").rglob("*.py"))
                 if pattern.search(p.read_text())]
    assert not offenders, offenders


def test_credentials_dataset_hands_over_a_copy_and_hides_the_values():
    ds = CredentialsDataset(credentials={"base_url": "http://h", "api_key": "sk-secret"})
    loaded = ds.load()
    assert loaded == {"base_url": "http://h", "api_key": "sk-secret"}
    loaded["api_key"] = "changed"
    assert ds.load()["api_key"] == "sk-secret"
    assert "sk-secret" not in str(ds) and "api_key" in str(ds)
    assert CredentialsDataset(credentials=None).load() == {}
    with pytest.raises(Exception, match="read-only"):
        ds.save({"api_key": "x"})


def _conf(tmp_path: Path, files: dict[str, str]) -> Path:
    conf = tmp_path / "conf"
    (conf / "base").mkdir(parents=True)
    (conf / "local").mkdir()
    for rel, text in files.items():
        (conf / rel).parent.mkdir(parents=True, exist_ok=True)
        (conf / rel).write_text(text)
    return conf


@pytest.mark.parametrize(("text", "message"), [
    ("vga_mllm:\n  api_key: k\n   model: [x\n",
     r"conf/local/credentials\.yml: not valid YAML at line 3, column \d+ \(.*\); see "
     r"conf/base/credentials\.yml"),
    ("- vga_mllm\n- malot_endpoint\n", r"conf/local/credentials\.yml: must map entry names"),
    ("vga_mllm: sk-123\n", r"conf/local/credentials\.yml: vga_mllm must be a mapping"),
    ("malot_endpoint:\n  apikey: k\n", r"conf/local/credentials\.yml: malot_endpoint has "
                                       r"unknown key\(s\) apikey"),
    ("functional_tom_llm:\n  api_key: [1, 2]\n",
     r"conf/local/credentials\.yml: functional_tom_llm\.api_key must be a string"),
])
def test_a_malformed_file_is_refused_naming_it(tmp_path, text, message):
    conf = _conf(tmp_path, {"base/credentials.yml": TEMPLATE.read_text(),
                            "local/credentials.yml": text})
    with pytest.raises(CredentialsError, match=message) as err:
        check_credentials(conf, ["base", "local"], tmp_path)
    assert isinstance(err.value, PreflightError) and "\n" not in str(err.value)


def test_well_formed_files_and_the_files_kedro_reads(tmp_path):
    conf = _conf(tmp_path, {
        "base/credentials.yml": TEMPLATE.read_text(),
        "local/credentials.yml": "vga_mllm:\n  api_key: ${oc.env:SOME_KEY}\nother: {x: 1}\n",
        "local/nested/credentials_more.yml": "malot_endpoint: null\n",
        "local/.hidden/credentials.yml": "- not read\n",
        "local/parameters.yml": "- not credentials\n",
    })
    check_credentials(conf, ["base", "local"])
    assert [p.relative_to(conf).as_posix() for p in credentials_files(conf, ["base", "local"])] \
        == ["base/credentials.yml", "local/credentials.yml", "local/nested/credentials_more.yml"]


@pytest.mark.slow
def test_kedro_hands_the_entry_to_the_catalog_and_refuses_a_bad_file(kedro_project):
    """Through a real KedroSession: conf/local/credentials.yml's entry is what the node's
    dataset loads; a malformed one stops the session before the catalog exists."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    local = kedro_project / "conf/local/credentials.yml"
    local.write_text("vga_mllm:\n  api_key: sk-test\n")
    bootstrap_project(kedro_project)
    with KedroSession.create(project_path=kedro_project) as session:
        catalog = session.load_context().catalog
        assert catalog.load("vga.mllm_endpoint") == {"api_key": "sk-test"}
        assert catalog.load("malot.endpoint") == {}  # the template's null entry
    local.write_text("vga_mllm: [sk-test]\n")
    with KedroSession.create(project_path=kedro_project) as session, \
            pytest.raises(CredentialsError, match=r"conf/local/credentials\.yml: vga_mllm"):
        session.load_context()


def test_vga_sends_the_credentials_api_key(monkeypatch):
    """``vga.mllm`` names the endpoint; the key comes from the ``vga_mllm`` entry only."""
    from icml25.pipelines.vga import nodes

    seen = {}

    class Client:
        def __init__(self, base_url, model, api_key=None, **kwargs):
            seen.update(base_url=base_url, model=model, api_key=api_key)

    monkeypatch.setattr(nodes, "ChatClient", Client)
    monkeypatch.setattr(nodes, "_check_images", lambda images: None)
    monkeypatch.setenv("VGA_MLLM_API_KEY", "from-the-environment")
    import icml25.pipelines.vga.mllm as mllm

    monkeypatch.setattr(mllm, "sample_questions", lambda *a, **k: pd.DataFrame())
    monkeypatch.setattr(mllm, "ask", lambda client, questions, **k: pd.DataFrame())
    params = yaml.safe_load((ROOT / "conf/base/parameters_vga.yml").read_text())["vga"]
    params["mllm"].update(enabled=True, base_url="http://h/v1", model="m")
    nodes.mllm_eval(pd.DataFrame(), params, {"api_key": "sk-entry"})
    assert seen == {"base_url": "http://h/v1", "model": "m", "api_key": "sk-entry"}
    nodes.mllm_eval(pd.DataFrame(), params, {})
    assert seen["api_key"] is None
