"""Which member of its replica a Pod is: flags, then LeaderWorkerSet's environment, then a single Pod."""

import pytest

from modeldrain.sidecar.member import Member, resolve_member


@pytest.mark.parametrize("index, size, env, expected", [
    (None, None, {"LWS_WORKER_INDEX": "0", "LWS_GROUP_SIZE": "4"}, Member(0, 4, "env")),
    (None, None, {"LWS_WORKER_INDEX": "3", "LWS_GROUP_SIZE": "4"}, Member(3, 4, "env")),
    ("1", "2", {"LWS_WORKER_INDEX": "0", "LWS_GROUP_SIZE": "4"}, Member(1, 2, "flag")),
    (None, "1", {}, Member(0, 1, "flag")),
])
def test_member_from_flags_or_lws(index, size, env, expected):
    member = resolve_member(index, size, env)
    assert member == expected
    assert member.speaks_for_replica == (expected.worker_index == 0)


@pytest.mark.parametrize("index, size, env, problem", [
    ("4", "4", {}, "not below"),
    ("0", None, {}, "group size is not"),
    (None, "2", {}, "worker index is not"),
    (None, None, {"LWS_WORKER_INDEX": "x", "LWS_GROUP_SIZE": "2"}, "LWS_WORKER_INDEX must be"),
    (None, "0", {}, "--group-size must be"),
])
def test_bad_member_identity(index, size, env, problem):
    with pytest.raises(ValueError, match=problem):
        resolve_member(index, size, env)


@pytest.mark.parametrize("flag, env, expected", [
    (None, {"MEMBER_CONFIGURATION": "rev-1"}, "rev-1"),
    ("rev-2", {"MEMBER_CONFIGURATION": "rev-1"}, "rev-2"),
    (None, {"MEMBER_CONFIGURATION": ""}, None),  # an empty label is no configuration
    (None, {}, None),
])
def test_configuration_from_flag_or_environment(flag, env, expected):
    assert resolve_member(None, None, env, flag).configuration == expected
    lws = {"LWS_WORKER_INDEX": "1", "LWS_GROUP_SIZE": "2", **env}
    assert resolve_member(None, None, lws, flag) == Member(1, 2, "env", expected)
