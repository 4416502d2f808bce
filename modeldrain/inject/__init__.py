"""modeldrain inject: modeldrain added to the manifests people already deploy, decided per container.

An authoring tool, not on the drain path: the static prestop leaves it out. It reads manifests with
modeldrain/lint/manifest_files.py's bounds and writes what modeldrain/lint/manifest_rules.py passes.
"""

__all__ = []
