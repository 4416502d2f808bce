"""What a service mesh's sidecar cuts at delete time, as far as a Pod template shows it: `prestop lint`'s
mesh rules (docs/layouts.md, "A service mesh", says why each one cuts and what to set).

A template shows a mesh by its injection marker (Istio: the `sidecar.istio.io/inject: "true"` label
or annotation, or an `istio.io/rev` label; Linkerd: `linkerd.io/inject: enabled`) or by the
proxy container itself (an already injected manifest). Injection switched on for the whole
namespace is not in the template, and is not seen.

- port: drain-sidecar's port goes through the mesh unless excluded from its capture. kubelet's
  plaintext httpGet preStop is then rejected under Istio's STRICT mTLS (or Linkerd's
  authenticated-only policy) and SIGTERM follows at once; and every call to the sidecar (the
  controller's included) is a client of the mesh's inbound listener, which the sidecar's
  connection count adds (modeldrain/sidecar/mesh.py), so a router-less retirement never sees zero.
- proxy exit: a classic (non-native) proxy container gets SIGTERM with the engine and exits
  after its own short drain (Istio: terminationDrainDuration, 5 s by default) while the engine
  still drains behind it, unless it waits for its connections or runs as a native sidecar.
"""

from __future__ import annotations

from typing import Any, Iterator

from modeldrain.hook.constants import EXIT_RESERVE_S, SIDECAR_PORT
from modeldrain.lint import manifest_files
from modeldrain.lint.pod_templates import PodTemplate

__all__ = ["mesh_findings", "proxy_config_drain"]

ISTIO_INJECT = "sidecar.istio.io/inject"
ISTIO_REVISION = "istio.io/rev"
ISTIO_EXCLUDE_INBOUND = "traffic.sidecar.istio.io/excludeInboundPorts"
ISTIO_INCLUDE_INBOUND = "traffic.sidecar.istio.io/includeInboundPorts"
ISTIO_PROXY_CONFIG = "proxy.istio.io/config"
ISTIO_NATIVE = "sidecar.istio.io/nativeSidecar"
ISTIO_PROXY = "istio-proxy"
ISTIO_DEFAULT_DRAIN_S = 5.0  # terminationDrainDuration's default
LINKERD_INJECT = "linkerd.io/inject"
LINKERD_SKIP_INBOUND = "config.linkerd.io/skip-inbound-ports"
LINKERD_WAIT = "config.alpha.linkerd.io/proxy-wait-before-exit-seconds"
LINKERD_NATIVE = "config.alpha.linkerd.io/proxy-enable-native-sidecar"
LINKERD_PROXY = "linkerd-proxy"


def mesh_findings(template: PodTemplate, hooked: list[dict[str, Any]], callers: list[dict[str, Any]],
                  runs_sidecar: bool) -> Iterator[tuple[str | None, str, str]]:
    """(container, field, message) for each mesh combination that cuts; `hooked`: the containers
    whose preStop runs prestop, `callers`: those calling drain-sidecar's /v1/drain."""
    istio = _istio(template)
    linkerd = _linkerd(template)
    if runs_sidecar and istio and not _port_excluded_istio(template):
        yield None, f"metadata.annotations[{ISTIO_EXCLUDE_INBOUND}]", _port_message("Istio", callers, (
            f"add {SIDECAR_PORT} to {ISTIO_EXCLUDE_INBOUND}"), "STRICT mTLS")
    if runs_sidecar and linkerd and not _listed(template.annotations.get(LINKERD_SKIP_INBOUND), SIDECAR_PORT):
        yield None, f"metadata.annotations[{LINKERD_SKIP_INBOUND}]", _port_message("Linkerd", callers, (
            f"add {SIDECAR_PORT} to {LINKERD_SKIP_INBOUND}"), "an authenticated-only inbound policy")
    if hooked or callers:
        yield from _classic_istio(template)
        yield from _classic_linkerd(template)


def _port_message(mesh: str, callers: list[dict[str, Any]], fix: str, strict: str) -> str:
    cut = (f"kubelet's plaintext httpGet preStop to it is rejected under {strict} and SIGTERM follows at once; "
           if callers else "")
    return (f"drain-sidecar's port {SIDECAR_PORT} goes through {mesh}'s proxy: {cut}every call to the sidecar "
            "(the controller's too) is then a client of the mesh's inbound listener, so a router-less retirement "
            f"never sees its connections at zero; {fix}")


def _containers(template: PodTemplate, name: str) -> list[dict[str, Any]]:
    return [c for c in _dicts(template.spec.get("containers")) if c.get("name") == name]


def _native(template: PodTemplate, name: str) -> bool:
    return any(c.get("name") == name and c.get("restartPolicy") == "Always"
               for c in _dicts(template.spec.get("initContainers")))


def _istio(template: PodTemplate) -> bool:
    marked = "true" in (str(template.labels.get(ISTIO_INJECT)).lower(), str(template.annotations.get(ISTIO_INJECT)).lower())
    return marked or ISTIO_REVISION in template.labels or bool(_containers(template, ISTIO_PROXY)) or _native(
        template, ISTIO_PROXY)


def _linkerd(template: PodTemplate) -> bool:
    return (str(template.annotations.get(LINKERD_INJECT)) in ("enabled", "ingress")
            or bool(_containers(template, LINKERD_PROXY)) or _native(template, LINKERD_PROXY))


def _listed(value: object, port: int) -> bool:
    """`port` in a comma-separated list of ports and ranges ("8490", "8000-9000"), as the meshes read it."""
    for item in str(value or "").split(","):
        low, _, high = item.strip().partition("-")
        try:
            if int(low) <= port <= int(high or low):
                return True
        except ValueError:
            continue
    return False


def _port_excluded_istio(template: PodTemplate) -> bool:
    annotations = template.annotations
    if _listed(annotations.get(ISTIO_EXCLUDE_INBOUND), SIDECAR_PORT):
        return True
    included = annotations.get(ISTIO_INCLUDE_INBOUND)
    return included is not None and str(included).strip() != "*" and not _listed(included, SIDECAR_PORT)


def _seconds(value: object) -> float | None:
    """A protobuf Duration as YAML gives it ("60s", "1m"), in seconds; None when it is not one."""
    text = str(value).strip()
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            try:
                return float(text[:-len(unit)]) * units[unit]
            except ValueError:
                return None
    return None


def proxy_config_drain(text: str) -> tuple[bool, str | None]:
    """What proxy.istio.io/config (a ProxyConfig in YAML) says of the proxy's exit: whether
    proxyMetadata sets EXIT_ON_ZERO_ACTIVE_CONNECTIONS to true, and terminationDrainDuration's
    text. Read with the linter's own bounded YAML loader; a config it cannot read says neither."""
    try:
        documents = manifest_files.load_documents(ISTIO_PROXY_CONFIG, text) if text.strip() else []
    except manifest_files.UnreadableManifest:
        return False, None
    config = documents[0] if len(documents) == 1 and isinstance(documents[0], dict) else {}
    metadata = config.get("proxyMetadata")
    exit_on_zero = isinstance(metadata, dict) and str(metadata.get("EXIT_ON_ZERO_ACTIVE_CONNECTIONS", "")).lower() \
        == "true"
    duration = config.get("terminationDrainDuration")
    return exit_on_zero, duration if isinstance(duration, str) else None


def _classic_istio(template: PodTemplate) -> Iterator[tuple[str | None, str, str]]:
    if not _containers(template, ISTIO_PROXY) or _native(template, ISTIO_PROXY):
        return
    if any(c.get("lifecycle", {}).get("preStop") for c in _containers(template, ISTIO_PROXY)
           if isinstance(c.get("lifecycle"), dict)):
        return  # the proxy's own preStop holds it (a wait for the engine's drain)
    exit_on_zero, duration = proxy_config_drain(str(template.annotations.get(ISTIO_PROXY_CONFIG, "")))
    if exit_on_zero:
        return
    drain_s = (_seconds(duration) if duration else None) or ISTIO_DEFAULT_DRAIN_S
    if drain_s >= template.grace_s:
        return
    yield ISTIO_PROXY, "containers", (
        f"a classic (non-native) Istio sidecar gets SIGTERM with the engine and exits after its own drain "
        f"({drain_s:g} s) while the engine still drains for up to terminationGracePeriodSeconds "
        f"({template.grace_s}): what the engine finishes after that cannot reach its client; run it as a native "
        f"sidecar, or set proxyMetadata EXIT_ON_ZERO_ACTIVE_CONNECTIONS: \"true\" in {ISTIO_PROXY_CONFIG}")


def _classic_linkerd(template: PodTemplate) -> Iterator[tuple[str | None, str, str]]:
    if not _containers(template, LINKERD_PROXY) or _native(template, LINKERD_PROXY):
        return
    try:
        wait_s = float(str(template.annotations.get(LINKERD_WAIT, "0")))
    except ValueError:
        wait_s = 0.0
    needed_s = template.grace_s - EXIT_RESERVE_S  # the hook's deadline: the engine drains until then
    if wait_s >= needed_s:
        return
    yield LINKERD_PROXY, "containers", (
        f"a classic (non-native) Linkerd proxy gets SIGTERM with the engine and refuses new requests from then on, "
        f"while routers still send them through the route wait and the engine drains for up to {needed_s:g} s; "
        f"set {LINKERD_NATIVE}: \"true\", or {LINKERD_WAIT} to at least {needed_s:g}")


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
