"""bench/drains/routerless.py without root: one line saying how to run it, before it starts anything."""

from __future__ import annotations

from bench.drains import routerless


def test_without_root_it_says_to_run_it_with_sudo(monkeypatch, capsys):
    monkeypatch.setattr(routerless.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(routerless, "_one", lambda counting: (_ for _ in ()).throw(AssertionError("started")))
    assert routerless.main([]) == 2
    err = capsys.readouterr().err
    assert err == ("python -m bench.drains.routerless: error: needs root (network namespaces and a veth pair): "
                   "run `sudo .venv/bin/python -m bench.drains.routerless`\n")


def test_a_missing_namespace_tool_is_named(monkeypatch):
    monkeypatch.setattr(routerless.os, "geteuid", lambda: 0)
    monkeypatch.setattr(routerless.shutil, "which", lambda tool: None if tool == "nsenter" else f"/usr/bin/{tool}")
    assert routerless.why_not_here() == "needs nsenter on PATH (network namespaces)"
