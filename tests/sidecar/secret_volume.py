"""A Secret volume laid out as kubelet's atomic writer lays it out, for rotation tests."""

import os


def k8s_secret(directory, token: str, version: int):
    """token -> ..data/token, ..data -> ..<version>; a new version swaps ..data atomically."""
    versioned = directory / f"..{version}"
    versioned.mkdir()
    (versioned / "token").write_text(token + "\n")
    tmp_link = directory / "..data_tmp"
    os.symlink(versioned.name, tmp_link)
    os.replace(tmp_link, directory / "..data")  # the atomic swap
    if not (directory / "token").is_symlink():
        os.symlink("..data/token", directory / "token")
    return directory / "token"
