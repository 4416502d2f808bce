"""One of deploy/'s Pods, run as kubelet runs it, with podman.

Start: a Pod sandbox (one network namespace, loopback only), the volumes laid out as kubelet
lays them (an emptyDir with fsGroup's group; downward-API and Secret files behind `..data`
symlinks, root-owned, with defaultMode and fsGroup's group), the init containers in order (a
native sidecar is started, then waited for until ready), then the containers, each container's
postStart hook exec'd at once (a failed one stops the start, as kubelet kills the container).
The securityContext becomes podman's flags: the user and group, fsGroup and supplementalGroups
as supplementary groups, a read-only root (without podman's extra tmpfs on /tmp), no new
privileges, dropped capabilities; a memory limit becomes the container's.

Delete: every preStop hook exec'd at once in its container (a CRI exec: the container's user,
groups and environment), bounded by the grace; then each container stopped with what is left of
the grace (whole seconds, at least 2, as kubelet computes it: SIGTERM, then SIGKILL); native
sidecars last, once every container has exited.

Only what deploy/ uses is known here, and nothing is skipped silently: a field this does not
run fails the start with its name (`Unsupported`), so a manifest cannot pass by being half-run.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from tests.deploy.manifests import NAMESPACE, PodTemplate

from .dns import NxdomainServer
from .netns import call_in_netns, http_get
from .podman import Podman

POD_FIELDS = {"terminationGracePeriodSeconds", "automountServiceAccountToken", "securityContext",
              "initContainers", "containers", "volumes"}
CONTAINER_FIELDS = {"name", "image", "command", "args", "env", "ports", "securityContext", "lifecycle",
                    "volumeMounts", "resources", "readinessProbe", "livenessProbe", "startupProbe",
                    "restartPolicy", "imagePullPolicy"}
SECURITY_FIELDS = {"runAsNonRoot", "runAsUser", "runAsGroup", "readOnlyRootFilesystem",
                   "allowPrivilegeEscalation", "capabilities", "fsGroup", "supplementalGroups"}
VOLUME_KINDS = {"emptyDir", "downwardAPI", "secret"}
FIELD_REFS = {"metadata.name", "metadata.namespace", "metadata.uid"}
_ONE_LABEL = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")

# kubelet's own floor on the grace left for SIGTERM (kuberuntime's minimumGracePeriodInSeconds).
MIN_STOP_GRACE_S = 2
READY_TIMEOUT_S = 30.0
PROBE_INTERVAL_S = 0.2
RUN_TIMEOUT_S = 60.0


class Unsupported(AssertionError):
    """The manifest uses something this runner does not run: extend it, never skip it."""


class PodStartError(AssertionError):
    """The Pod would not start; the message says why, as kubelet's event would."""


@dataclass
class Exec:
    """One exec into a container (a hook), timed on the monotonic clock."""

    container: str
    argv: list[str]
    started_at: float
    ended_at: float
    code: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict[str, Any]]:
        """The JSON lines it wrote to stderr."""
        return [json.loads(line) for line in self.stderr.splitlines() if line.startswith("{")]


@dataclass
class Stop:
    container: str
    grace_s: int  # what was left of the grace when SIGTERM went out
    started_at: float
    ended_at: float
    exit_code: int


@dataclass
class Deletion:
    started_at: float
    hooks: dict[str, Exec] = field(default_factory=dict)
    stops: dict[str, Stop] = field(default_factory=dict)


def _merged_security(pod_spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    security = {**pod_spec.get("securityContext", {}), **container.get("securityContext", {})}
    unknown = set(security) - SECURITY_FIELDS
    if unknown:
        raise Unsupported(f"securityContext fields {sorted(unknown)}")
    return security


def _bytes(quantity: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 1000, "M": 1000**2, "G": 1000**3}
    match = re.fullmatch(r"(\d+)([KMG]i?|k)?", str(quantity))
    if not match:
        raise Unsupported(f"quantity {quantity!r}")
    return int(match.group(1)) * units.get(match.group(2) or "", 1)


_REFERENCE = re.compile(r"\$(\$)?\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: a defined variable is replaced, $$(VAR) is a literal $(VAR),
    an undefined reference stays as written."""
    def replace(match: re.Match) -> str:
        if match.group(1):
            return f"$({match.group(2)})"
        return env.get(match.group(2), match.group(0))
    return _REFERENCE.sub(replace, text)


def _go_quote(value: str) -> str:
    if not value.isascii() or not value.isprintable():
        raise Unsupported(f"annotation value {value!r} (only printable ASCII is laid out here)")
    return json.dumps(value)  # the same as Go's %q for printable ASCII


class Pod:
    """A Pod from a template: start() it, delete() it; remove() always cleans up."""

    def __init__(self, podman: Podman, template: PodTemplate, workdir: Path, *,
                 secrets: Mapping[str, Mapping[str, str]], name: str | None = None):
        unknown = set(template.spec) - POD_FIELDS
        if unknown:
            raise Unsupported(f"{template.source}: Pod fields {sorted(unknown)}")
        self.podman = podman
        self.template = template
        self.name = name or template.pod_name
        self.uid = str(uuid.uuid4())
        self.workdir = workdir
        self.secrets = secrets
        self.spec = template.spec
        self.grace_s = template.grace_s
        self.volume_paths: dict[str, Path] = {}
        self.started: list[str] = []  # containers started, in order
        self.start_log: list[Exec] = []  # postStart hooks and init containers' runs
        self._netns_path: str | None = None
        self._dns: NxdomainServer | None = None

    # --- names ----------------------------------------------------------------------------------

    def cname(self, container: str) -> str:
        return f"{self.name}--{container}"

    @property
    def netns_path(self) -> str:
        assert self._netns_path is not None, "not started"
        return self._netns_path

    def _containers(self) -> list[tuple[str, dict[str, Any]]]:
        roles = []
        for init in self.spec.get("initContainers", []):
            roles.append(("sidecar" if init.get("restartPolicy") == "Always" else "init", init))
        roles += [("main", c) for c in self.spec["containers"]]
        return roles

    # --- start ----------------------------------------------------------------------------------

    def start(self) -> Pod:
        self.podman.run("pod", "create", "--name", self.name, "--hostname", self.name)
        infra = self.podman.output("pod", "inspect", "--format", "{{.InfraContainerID}}", self.name)
        self.podman.run("start", infra)
        pid = self.podman.output("inspect", "--format", "{{.State.Pid}}", infra)
        self._netns_path = f"/proc/{pid}/ns/net"
        self._dns = NxdomainServer(self._netns_path)  # the cluster's DNS, as these Pods have it
        self._lay_out_volumes()
        for role, container in self._containers():
            if role == "init":
                self._run_to_completion(container)
            else:
                self._start_and_hook(container)
                if role == "sidecar":
                    self._wait_ready(container)
        for role, container in self._containers():
            if role == "main":
                self._wait_ready(container)
        self._check_running()
        return self

    def _run_to_completion(self, container: dict[str, Any]) -> None:
        started_at = time.monotonic()
        done = self.podman.run(*self._run_args(container, detach=False), timeout_s=RUN_TIMEOUT_S, check=False)
        self.start_log.append(Exec(container["name"], [], started_at, time.monotonic(), done.returncode,
                                   done.stdout, done.stderr))
        self.started.append(container["name"])
        if done.returncode != 0:
            raise PodStartError(f"{self.template.source}: init container {container['name']} exited "
                                f"{done.returncode} (Init:Error):\n{done.stdout}{done.stderr}")

    def _start_and_hook(self, container: dict[str, Any]) -> None:
        self.podman.run(*self._run_args(container, detach=True))
        self.started.append(container["name"])
        command = container.get("lifecycle", {}).get("postStart", {}).get("exec", {}).get("command")
        if command:
            hook = self.exec(container["name"], command, timeout_s=RUN_TIMEOUT_S)
            self.start_log.append(hook)
            if hook.code != 0:
                raise PodStartError(f"{self.template.source}: {container['name']}: FailedPostStartHook, "
                                    f"exit {hook.code}: {hook.stdout}{hook.stderr}")

    def _wait_ready(self, container: dict[str, Any]) -> None:
        probe = container.get("readinessProbe")
        if probe is None:
            return
        if set(probe) - {"httpGet", "periodSeconds", "initialDelaySeconds", "timeoutSeconds",
                         "failureThreshold", "successThreshold"} or "httpGet" not in probe:
            raise Unsupported(f"readinessProbe {probe}")
        port = self._port(container, probe["httpGet"]["port"])
        path = probe["httpGet"].get("path", "/")
        deadline_at = time.monotonic() + READY_TIMEOUT_S
        last = "no probe yet"
        while time.monotonic() < deadline_at:
            self._check_running(container["name"])
            try:
                status, _ = call_in_netns(self.netns_path, lambda: http_get(port, path, timeout_s=2))
                if 200 <= status < 400:
                    return
                last = f"HTTP {status}"
            except OSError as exc:
                last = str(exc)
            time.sleep(PROBE_INTERVAL_S)
        raise PodStartError(f"{self.template.source}: {container['name']} not ready in {READY_TIMEOUT_S} s: {last}\n"
                            f"{self.logs(container['name'])}")

    def _check_running(self, only: str | None = None) -> None:
        for name in [only] if only else self.started:
            role = dict((c["name"], r) for r, c in self._containers())[name]
            if role == "init":
                continue
            state = self.podman.output("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}",
                                       self.cname(name))
            if not state.startswith("running"):
                raise PodStartError(f"{self.template.source}: {name} is {state} (CrashLoopBackOff):\n"
                                    f"{self.logs(name)}")

    @staticmethod
    def _port(container: dict[str, Any], port: int | str) -> int:
        if isinstance(port, int):
            return port
        for declared in container.get("ports", []):
            if declared.get("name") == port:
                return int(declared["containerPort"])
        raise PodStartError(f"{container['name']}: no port named {port}")

    # --- what podman is told --------------------------------------------------------------------

    def _env(self, container: dict[str, Any]) -> dict[str, str]:
        env = dict(self.template.injected_env)  # a controller's webhook puts its variables first
        for entry in container.get("env", []):
            if "value" in entry:
                env[entry["name"]] = expand(entry["value"], env)
            else:
                ref = entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
                one = _ONE_LABEL.fullmatch(ref)
                if one:  # a single label or annotation; "" when the Pod has none of that name
                    source = self.template.labels if one.group(1) == "labels" else self.template.annotations
                    env[entry["name"]] = source.get(one.group(2), "")
                elif ref in FIELD_REFS:
                    env[entry["name"]] = {"metadata.name": self.name, "metadata.namespace": NAMESPACE,
                                          "metadata.uid": self.uid}[ref]
                else:
                    raise Unsupported(f"env {entry}")
        return env

    def _run_args(self, container: dict[str, Any], *, detach: bool) -> list[str]:
        unknown = set(container) - CONTAINER_FIELDS
        if unknown:
            raise Unsupported(f"{container['name']}: container fields {sorted(unknown)}")
        security = _merged_security(self.spec, container)
        args = ["run", "--pull", "never", "--pod", self.name, "--name", self.cname(container["name"])]
        if detach:
            args.append("--detach")
        self._check_user(container, security)
        if "runAsUser" in security:
            user = str(security["runAsUser"])
            args += ["--user", f"{user}:{security['runAsGroup']}" if "runAsGroup" in security else user]
        for group in [security["fsGroup"]] if "fsGroup" in security else []:
            args += ["--group-add", str(group)]
        for group in security.get("supplementalGroups", []):
            args += ["--group-add", str(group)]
        if security.get("readOnlyRootFilesystem"):
            args += ["--read-only", "--read-only-tmpfs=false"]  # podman would add a tmpfs on /tmp
        if security.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        capabilities = security.get("capabilities", {})
        args += [a for cap in capabilities.get("drop", []) for a in ("--cap-drop", cap.lower())]
        args += [a for cap in capabilities.get("add", []) for a in ("--cap-add", cap.lower())]
        limits = container.get("resources", {}).get("limits", {})
        if set(limits) - {"memory"}:
            raise Unsupported(f"resource limits {sorted(limits)}")
        if "memory" in limits:
            args += ["--memory", str(_bytes(limits["memory"]))]
        env = self._env(container)
        for key, value in env.items():
            args += ["--env", f"{key}={value}"]
        for mount in container.get("volumeMounts", []):
            if set(mount) - {"name", "mountPath", "readOnly"}:
                raise Unsupported(f"volumeMount {mount}")
            volume = self._volume(mount["name"])
            read_only = mount.get("readOnly", False) or "emptyDir" not in volume
            args += ["--volume", f"{self.volume_paths[mount['name']]}:{mount['mountPath']}" + (":ro" if read_only else "")]
        if "command" in container:
            args += ["--entrypoint", json.dumps([expand(a, env) for a in container["command"]])]
        args.append(container["image"])
        args += [expand(a, env) for a in container.get("args", [])]
        return args

    def _check_user(self, container: dict[str, Any], security: dict[str, Any]) -> None:
        """runAsNonRoot: kubelet refuses to start a container whose user is (or may be) root."""
        if not security.get("runAsNonRoot"):
            return
        user = security.get("runAsUser")
        if user is None:
            image_user = self.podman.output("image", "inspect", "--format", "{{.Config.User}}", container["image"])
            user_part = image_user.split(":")[0]
            if not user_part.isdigit():
                raise PodStartError(f"{container['name']}: image user {image_user!r} is not numeric: "
                                    "kubelet cannot verify runAsNonRoot (CreateContainerConfigError)")
            user = int(user_part)
        if int(user) == 0:
            raise PodStartError(f"{container['name']}: container has runAsNonRoot and image will run as root")

    # --- volumes --------------------------------------------------------------------------------

    def _volume(self, name: str) -> dict[str, Any]:
        for volume in self.spec.get("volumes", []):
            if volume["name"] == name:
                return volume
        raise PodStartError(f"no volume named {name}")

    def _lay_out_volumes(self) -> None:
        fs_group = self.spec.get("securityContext", {}).get("fsGroup")
        for volume in self.spec.get("volumes", []):
            kinds = set(volume) - {"name"}
            if len(kinds) != 1 or not kinds <= VOLUME_KINDS:
                raise Unsupported(f"volume {volume}")
            path = self.workdir / "volumes" / volume["name"]
            path.mkdir(parents=True)
            self.volume_paths[volume["name"]] = path
            if "emptyDir" in volume:
                # kubelet: mode 0777; with fsGroup, that group, group-writable, set-group-ID.
                os.chmod(path, 0o777)
                if fs_group is not None:
                    os.chown(path, 0, fs_group)
                    os.chmod(path, 0o2777)
            elif "downwardAPI" in volume:
                files = {item["path"]: self._field(item) for item in volume["downwardAPI"]["items"]}
                self._write_atomic_volume(path, files, volume["downwardAPI"].get("defaultMode", 0o644), fs_group)
            else:
                secret = volume["secret"]
                if set(secret) - {"secretName", "defaultMode"}:
                    raise Unsupported(f"secret volume {secret}")
                if secret["secretName"] not in self.secrets:
                    raise PodStartError(f"FailedMount: secret {secret['secretName']!r} not found")
                self._write_atomic_volume(path, dict(self.secrets[secret["secretName"]]),
                                          secret.get("defaultMode", 0o644), fs_group)

    def _field(self, item: dict[str, Any]) -> str:
        ref = item.get("fieldRef", {}).get("fieldPath")
        if ref == "metadata.annotations":
            return "\n".join(f"{k}={_go_quote(v)}" for k, v in sorted(self.template.annotations.items()))
        if ref == "metadata.labels":
            return "\n".join(f"{k}={_go_quote(v)}" for k, v in sorted(self.template.labels.items()))
        if ref == "metadata.name":
            return self.name
        raise Unsupported(f"downwardAPI item {item}")

    @staticmethod
    def _write_atomic_volume(path: Path, files: Mapping[str, str], mode: int, fs_group: int | None) -> None:
        """kubelet's atomic writer: the files in a timestamped folder, `..data` pointing at it,
        and each name a symlink through `..data`. Root-owned; fsGroup's group and read bit."""
        stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.000000001", time.gmtime())
        data = path / stamp
        data.mkdir()
        group = fs_group if fs_group is not None else 0
        for name, content in files.items():
            target = data / name
            target.write_text(content)
            os.chown(target, 0, group)
            os.chmod(target, mode | (0o440 if fs_group is not None else 0))
        os.chown(data, 0, group)
        os.chmod(data, 0o755 | (0o2000 if fs_group is not None else 0))
        (path / "..data").symlink_to(stamp)
        for name in files:
            (path / name).symlink_to(f"..data/{name}")
        os.chmod(path, 0o755)

    # --- delete ---------------------------------------------------------------------------------

    def exec(self, container: str, argv: list[str], timeout_s: float) -> Exec:
        """A CRI exec: the container's own user, groups and environment (never podman's --user,
        which would drop the supplementary groups)."""
        started_at = time.monotonic()
        done = self.podman.run("exec", self.cname(container), *argv, timeout_s=timeout_s, check=False)
        return Exec(container, list(argv), started_at, time.monotonic(), done.returncode, done.stdout, done.stderr)

    def http_hook(self, container: dict[str, Any], get: dict[str, Any]) -> Exec:
        """kubelet's httpGet hook: GET the Pod's address, the port resolved on the hook's own
        container, no client timeout but the grace, the status ignored (recorded as `code`)."""
        if set(get) - {"port", "path"}:
            raise Unsupported(f"httpGet hook {get}")
        port, path = self._port(container, get["port"]), get.get("path", "/")
        started_at = time.monotonic()
        try:
            status, body = call_in_netns(self.netns_path, lambda: http_get(port, path, timeout_s=self.grace_s),
                                         timeout_s=self.grace_s + 5)
            code, out, err = status, body.decode(errors="replace"), ""
        except OSError as exc:  # kubelet records FailedPreStopHook and goes on: so does this
            code, out, err = -1, "", f"{type(exc).__name__}: {exc}"
        return Exec(container["name"], ["GET", f":{port}{path}"], started_at, time.monotonic(), code, out, err)

    def delete(self) -> Deletion:
        deletion = Deletion(started_at=time.monotonic())
        mains = [c for role, c in self._containers() if role == "main" and c["name"] in self.started]
        sidecars = [c for role, c in self._containers() if role == "sidecar" and c["name"] in self.started]
        lock = threading.Lock()

        def kill(container: dict[str, Any]) -> None:
            pre_stop = container.get("lifecycle", {}).get("preStop", {})
            if set(pre_stop) - {"exec", "httpGet"}:
                raise Unsupported(f"preStop {pre_stop}")
            hook = None
            if "exec" in pre_stop:
                hook = self.exec(container["name"], pre_stop["exec"]["command"], timeout_s=self.grace_s)
            elif "httpGet" in pre_stop:
                hook = self.http_hook(container, pre_stop["httpGet"])
            if hook is not None:
                with lock:
                    deletion.hooks[container["name"]] = hook
            self._stop(container["name"], deletion, lock)

        with ThreadPoolExecutor(max_workers=max(1, len(mains))) as pool:
            for future in [pool.submit(kill, c) for c in mains]:
                future.result()
        for container in reversed(sidecars):  # native sidecars: after every container, last first
            self._stop(container["name"], deletion, lock)
        return deletion

    def _stop(self, name: str, deletion: Deletion, lock: threading.Lock) -> None:
        elapsed_s = int(time.monotonic() - deletion.started_at)  # kubelet truncates to seconds
        grace_s = max(self.grace_s - elapsed_s, MIN_STOP_GRACE_S)
        started_at = time.monotonic()
        self.podman.run("stop", "--time", str(grace_s), self.cname(name), timeout_s=grace_s + 30)
        code = int(self.podman.output("inspect", "--format", "{{.State.ExitCode}}", self.cname(name)))
        with lock:
            deletion.stops[name] = Stop(name, grace_s, started_at, time.monotonic(), code)

    # --- afterwards -----------------------------------------------------------------------------

    def logs(self, container: str) -> str:
        done = self.podman.run("logs", self.cname(container), check=False)
        return done.stdout + done.stderr

    def remove(self) -> None:
        self.podman.run("pod", "rm", "--force", "--time", "0", self.name, check=False)
        if self._dns is not None:
            self._dns.close()
