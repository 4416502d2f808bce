"""`prestop lint` in the static executable: JSON and YAML read alike (PyYAML's pure loader is in the
bundle, for the engine's --config: docs/prestop.md, "prestop lint")."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from modeldrain.hook.exitcodes import ExitCode
from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # the fixture builds the executables


def test_the_bundle_lints_json_and_yaml_alike(bundle, tmp_path):
    documents = [d for d in yaml.safe_load_all((REPO / "deploy" / "deployment.yaml").read_text()) if d]
    as_json = tmp_path / "deployment.json"
    as_json.write_text(json.dumps({"kind": "List", "items": documents}))
    done = subprocess.run([str(bundle), "lint", str(as_json)], capture_output=True, text=True, timeout=60)
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    as_yaml = subprocess.run([str(bundle), "lint", str(REPO / "deploy" / "deployment.yaml")], capture_output=True,
                             text=True, timeout=60)
    assert as_yaml.returncode == ExitCode.OK, as_yaml.stdout + as_yaml.stderr
