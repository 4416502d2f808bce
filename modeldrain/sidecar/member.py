"""Which Pod this is, and which member of its replica: what a controller checks before it trusts a read.

Pod IPs are reused, so an answer names its Pod by namespace, name and UID (the downward API's
POD_NAMESPACE, POD_NAME, POD_UID); the controller compares them with the Pod it meant to reach.

Spec "Reading member work": a replica of one Pod answers through itself; a leader-served replica
of several answers through the member carrying rank 0, and is held when that member cannot be
named (no member or several carry index 0, members disagree on the configuration, or the role says
a size the replica does not have). LeaderWorkerSet gives each member LWS_WORKER_INDEX and
LWS_GROUP_SIZE; the configuration is what the replica was created from (for instance the
LeaderWorkerSet template-revision-hash label, through the downward API). Flags override them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from modeldrain.hook.constants import LWS_GROUP_SIZE_ENV, LWS_WORKER_INDEX_ENV
from modeldrain.hook.flags import parse_whole_number
from modeldrain.sidecar.constants import MEMBER_CONFIGURATION_ENV

__all__ = ["Member", "PodIdentity", "resolve_member"]


@dataclass(frozen=True)
class PodIdentity:
    """Which Pod answers; None where the Pod spec does not pass it."""

    namespace: str | None
    name: str | None
    uid: str | None


@dataclass(frozen=True)
class Member:
    worker_index: int
    group_size: int
    source: str  # "flag", "env" or "default" (a single-Pod replica)
    configuration: str | None = None  # what the replica was created from; members of one replica agree

    @property
    def speaks_for_replica(self) -> bool:
        """This member's own view; the controller decides across all members (docs/controller.md)."""
        return self.group_size == 1 or self.worker_index == 0


def resolve_member(worker_index: str | None, group_size: str | None, env: Mapping[str, str],
                   configuration: str | None = None) -> Member:
    """From flags, else the LWS environment, else a single-Pod replica; raises ValueError."""
    config = configuration if configuration is not None else env.get(MEMBER_CONFIGURATION_ENV)
    config = config or None  # an empty label is no configuration
    flag = worker_index is not None or group_size is not None
    index_text = worker_index if worker_index is not None else env.get(LWS_WORKER_INDEX_ENV)
    size_text = group_size if group_size is not None else env.get(LWS_GROUP_SIZE_ENV)
    if index_text is None and size_text is None:
        return Member(0, 1, "default", config)
    source = "flag" if flag else "env"
    index_name = "--worker-index" if worker_index is not None else LWS_WORKER_INDEX_ENV
    size_name = "--group-size" if group_size is not None else LWS_GROUP_SIZE_ENV
    if size_text is None:
        raise ValueError(f"{index_name} is set but the group size is not (--group-size or {LWS_GROUP_SIZE_ENV})")
    size = parse_whole_number(size_text, what=size_name, minimum=1)
    if index_text is None:
        if size != 1:
            raise ValueError(f"{size_name}={size} but the worker index is not set "
                             f"(--worker-index or {LWS_WORKER_INDEX_ENV})")
        index_text = "0"
    index = parse_whole_number(index_text, what=index_name, minimum=0)
    if index >= size:
        raise ValueError(f"worker index {index} is not below group size {size}")
    return Member(index, size, source, config)
