"""prestop: the engine container's preStop hook, and the core the sidecar shares.

Everything here is imported by the bundled hook, so every module keeps its imports to
the standard library plus prometheus-client's exposition parser.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
