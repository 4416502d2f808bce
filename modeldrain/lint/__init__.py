"""modeldrain lint: an engine Pod's manifests checked the way deploy/'s are, before anything runs.

An authoring tool, not on the drain path: the static prestop leaves it out. It reads Pod templates
with modeldrain/lint/pod_templates.py and holds them to modeldrain/lint/manifest_rules.py.
"""

__all__ = []
