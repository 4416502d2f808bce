"""prestop: the engine container's preStop hook, and the core the sidecar shares.

Everything here is imported by the bundled hook, so every module keeps its imports to
the standard library plus prometheus-client's exposition parser.
"""

# One import path per module: the checkout's folder is also reachable as a top-level `hook`
# (the checkout is on sys.path for the test bed), and a second path to the same file would
# make a second copy of every enum and class. Only the installed name is allowed.
if __name__ != "modeldrain.hook":
    raise ImportError(f"import this package as modeldrain.hook, not {__name__}")

__version__ = "0.1.0"
