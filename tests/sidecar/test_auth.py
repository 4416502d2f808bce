"""The token file: constant-time bearer check, re-read on rotation, closed when broken."""

import os

import pytest

from .secret_volume import k8s_secret
from sidecar.auth import TokenFile, TokenFileError, read_token


def test_right_wrong_and_missing_tokens(tmp_path):
    path = tmp_path / "token"
    path.write_text("s3cret\n")
    tokens = TokenFile(str(path))
    assert tokens.check("Bearer s3cret").ok
    assert tokens.check("bearer   s3cret ").ok
    assert not tokens.check("Bearer s3cre").ok
    assert not tokens.check("Bearer s3cret2").ok
    assert not tokens.check("Basic s3cret").ok
    assert not tokens.check("Bearer").ok
    assert not tokens.check(None).ok
    assert "missing" in tokens.check(None).reason
    assert "s3cre" not in tokens.check("Bearer s3cre").reason  # never echoes what was sent


def test_rotation_through_the_data_symlink_swap(tmp_path):
    path = k8s_secret(tmp_path, "first", 1)
    changes = []
    tokens = TokenFile(str(path), changes.append)
    assert tokens.check("Bearer first").ok
    k8s_secret(tmp_path, "second", 2)
    assert not tokens.check("Bearer first").ok
    assert tokens.check("Bearer second").ok
    assert len(changes) == 1


def test_same_size_rewrite_in_place_is_seen(tmp_path):
    path = tmp_path / "token"
    path.write_text("aaaa")
    tokens = TokenFile(str(path))
    os.utime(path, ns=(1, 1))
    path.write_text("bbbb")
    assert tokens.check("Bearer bbbb").ok


def test_a_file_that_goes_bad_fails_closed_and_recovers(tmp_path):
    path = tmp_path / "token"
    path.write_text("good")
    changes = []
    tokens = TokenFile(str(path), changes.append)
    path.write_text("   \n")
    verdict = tokens.check("Bearer good")
    assert not verdict.ok and "no valid token" in verdict.reason and str(tmp_path) not in verdict.reason
    assert "empty" in changes[-1]  # the detail goes to the log
    path.unlink()
    assert not tokens.check("Bearer good").ok
    path.write_text("good-again")
    assert tokens.check("Bearer good-again").ok
    assert len(changes) == 3


@pytest.mark.parametrize("content, problem", [
    (b"", "empty"), (b"two words", "spaces"), (b"x" * 5000, "over"), (b"caf\xc3\xa9", "non-ASCII"),
])
def test_unusable_token_files_are_refused_at_start(tmp_path, content, problem):
    path = tmp_path / "token"
    path.write_bytes(content)
    with pytest.raises(TokenFileError, match=problem):
        read_token(str(path))
    with pytest.raises(TokenFileError):
        TokenFile(str(path))


def test_missing_token_file_is_refused_at_start(tmp_path):
    with pytest.raises(TokenFileError, match="cannot read"):
        read_token(str(tmp_path / "nope"))
