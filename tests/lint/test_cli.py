"""`prestop lint FILE...` as people run it: exit codes, one line per finding, JSON always, YAML with PyYAML."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from modeldrain.hook.exitcodes import ExitCode

REPO = Path(__file__).resolve().parents[2]
# As the static executable runs it: no PyYAML to import.
WITHOUT_YAML = ("import sys; sys.modules['yaml'] = None; from modeldrain.hook.cli import main; "
                "sys.exit(main(sys.argv[1:]))")


def prestop(*args: str, without_yaml: bool = False) -> subprocess.CompletedProcess:
    argv = ["-c", WITHOUT_YAML] if without_yaml else ["-m", "modeldrain.hook"]
    return subprocess.run([sys.executable, *argv, *args], capture_output=True, text=True, timeout=60)


def deployment_without_grace(tmp_path: Path) -> Path:
    """deploy/deployment.yaml as `kubectl get -o json` gives it (a List), with G = 60 and no --grace."""
    (body,) = [d for d in yaml.safe_load_all((REPO / "deploy" / "deployment.yaml").read_text()) if d]
    spec = body["spec"]["template"]["spec"]
    spec["terminationGracePeriodSeconds"] = 60
    engine = next(c for c in spec["containers"] if c["name"] == "engine")
    engine["lifecycle"]["preStop"]["exec"]["command"] = ["/drain/prestop"]
    path = tmp_path / "got.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [body]}))
    return path


def test_deploys_manifests_pass():
    result = prestop("lint", *sorted(str(p) for p in (REPO / "deploy").glob("*.yaml")))
    assert result.returncode == ExitCode.OK, result.stdout + result.stderr
    assert result.stdout == "" and "0 finding(s)" in result.stderr


def test_a_finding_is_one_line_naming_file_object_container_and_field(tmp_path):
    path = deployment_without_grace(tmp_path)
    result = prestop("lint", str(path), without_yaml=True)  # JSON needs no parser beyond the standard library
    assert result.returncode == ExitCode.NOT_CLEARED == 1, result.stderr
    (line,) = result.stdout.splitlines()
    assert line.startswith(f"{path}[0] items[0]: Deployment llm-vllm: container engine: lifecycle.preStop.exec.command: "
                           "--grace missing: the hook assumes 30 s and terminationGracePeriodSeconds is 60")


def test_multi_document_yaml_is_read_with_pyyaml(tmp_path):
    path = tmp_path / "two.yaml"
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "pod-prestop-baked.yaml").read_text()) if d]
    docs[0]["spec"]["terminationGracePeriodSeconds"] = 90
    path.write_text(yaml.safe_dump_all([{"kind": "Service", "metadata": {"name": "s"}}, docs[0]]))
    result = prestop("lint", str(path))
    assert result.returncode == 1
    assert result.stdout.startswith(f"{path}[1]: Pod ") and "--grace 30 but terminationGracePeriodSeconds is 90" in result.stdout


def test_yaml_without_pyyaml_is_one_line_naming_the_ways_out(tmp_path):
    result = prestop("lint", str(REPO / "deploy" / "deployment.yaml"), without_yaml=True)
    assert result.returncode == ExitCode.USAGE
    (line,) = result.stderr.splitlines()
    assert "YAML needs PyYAML" in line and "-o json" in line and result.stdout == ""


def test_unreadable_and_empty_inputs_are_usage_errors(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "svc.json").write_text(json.dumps({"kind": "Service", "metadata": {"name": "s"}}))
    for args, words in ([str(tmp_path / "missing.json")], "missing.json: cannot read: No such file"), \
                       ([str(tmp_path / "bad.json")], "bad.json: not valid JSON"), \
                       ([str(tmp_path / "svc.json")], "no Pod template in"), \
                       ([], "the following arguments are required: FILE"):
        result = prestop("lint", *args)
        assert result.returncode == ExitCode.USAGE, (args, result)
        assert words in result.stderr and len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_mistyped_subcommand_names_the_one_meant():
    result = prestop("chek", "--port", "8000")
    assert result.returncode == ExitCode.USAGE
    assert result.stderr == "prestop: error: unknown subcommand 'chek'; did you mean 'check'? (see prestop --help)\n"
    assert prestop("lnit").stderr.startswith("prestop: error: unknown subcommand 'lnit'; did you mean 'lint'?")


def test_every_line_names_the_command_it_was_run_as(tmp_path):
    """`modeldrain lint` and `prestop lint` are one linter: each speaks in the name it was run by."""
    (tmp_path / "bad.json").write_text("{not json")
    modeldrain = str(Path(sys.executable).with_name("modeldrain"))
    for argv, name in (([modeldrain], "modeldrain lint"), ([sys.executable, "-m", "modeldrain.hook"], "prestop lint")):
        for files in ([str(REPO / "deploy" / "deployment.yaml")], [str(tmp_path / "bad.json")]):
            result = subprocess.run([*argv, "lint", *files], capture_output=True, text=True, timeout=60)
            (line,) = result.stderr.splitlines()
            assert line.startswith(f"{name}: "), line
