"""drain-sidecar: serves the hook's read of this Pod's engine to the operator's controller.

It replaces the controller's `pods/exec` into the engine container: the same gauges, the
same outcome classes (imported from hook/), answered over HTTP by Pod IP.
"""

# One import path per module: the checkout's folder is also reachable as a top-level `sidecar`
# (the checkout is on sys.path for the test bed), and a second path to the same file would
# make a second copy of every enum and class. Only the installed name is allowed.
if __name__ != "modeldrain.sidecar":
    raise ImportError(f"import this package as modeldrain.sidecar, not {__name__}")
