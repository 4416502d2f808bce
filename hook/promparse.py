"""prometheus-client's two exposition parsers, without the rest of prometheus-client.

`import prometheus_client.parser` first runs the package's __init__, which imports the whole
client — registry, metrics, HTTP servers, ssl, wsgiref — about 60 ms of the hook's start-up,
for nothing the hook uses. The parsers themselves need only metrics_core, samples, validation
and utils. So we load them with the package's __init__ skipped, keep the two functions, and
take every module we loaded back out of sys.modules: a later `import prometheus_client` (the
sidecar's) loads the whole client as usual, untouched by this.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric


def _load() -> tuple[Callable[[str], Iterable[Metric]], Callable[[str], Iterable[Metric]]]:
    if "prometheus_client" in sys.modules:  # already imported in full: nothing to save
        from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
        from prometheus_client.parser import text_string_to_metric_families as text

        return text, openmetrics
    spec = importlib.util.find_spec("prometheus_client")
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("prometheus-client is not installed")
    sys.modules["prometheus_client"] = importlib.util.module_from_spec(spec)  # __init__ not run
    try:
        from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
        from prometheus_client.parser import text_string_to_metric_families as text
    finally:
        for name in [m for m in sys.modules if m == "prometheus_client" or m.startswith("prometheus_client.")]:
            del sys.modules[name]
    return text, openmetrics


parse_text, parse_openmetrics = _load()
