"""drain-sidecar: serves the hook's read of this Pod's engine to the operator's controller.

It replaces the controller's `pods/exec` into the engine container: the same gauges, the
same outcome classes (imported from modeldrain/hook/), answered over HTTP by Pod IP.
"""

__all__ = []
