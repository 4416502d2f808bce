"""Every image deploy/ and the Dockerfiles name carries its registry host, so no name of ours can
resolve to a Docker Hub namespace someone else may claim (whoever held `modeldrain` there would run
code in every GPU Pod). The product's images are `localhost/modeldrain/...`: what podman and buildah
call a locally built image; a node pulling one contacts only itself. The exceptions are listed below,
each the image of its own publisher.

A name has a registry host when its first path component holds a `.` or a `:` or is `localhost`
(the rule of Docker's reference grammar, distribution/reference's splitDockerDomain); any other name
resolves to Docker Hub.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from modeldrain.lint.manifest_rules import names_a_registry
from tests.conftest import REPO
from tests.deploy.manifests import DEPLOY, PRESTOP_IMAGE_REPO, SIDECAR_IMAGE_REPO

# Docker Hub names allowed without a host: each published there by its own project.
HUB_IMAGES_OF_THEIR_PUBLISHERS = {
    "vllm/vllm-openai": "vLLM's own release image",
    "lmsysorg/sglang": "SGLang's own release image",
    "debian": "a Docker Official Image (library/, only Docker publishes there): the build stages' base",
}

# A reference with a tag or a digest, as it appears in prose or a comment: `name:tag`, `name@sha256:…`.
TAGGED_REFERENCE = re.compile(
    r"(?<![\w./:@-])((?:[\w.-]+(?::\d+)?/)*[\w.-]+(?::\w[\w.-]{0,127}|@sha256:[0-9a-f…]+))(?![\w/:])")
NOT_IMAGES = {"scratch"}  # FROM scratch: the empty image, never pulled


def repository(reference: str) -> str:
    """`localhost:5000/a/b:1@sha256:…` -> `localhost:5000/a/b`."""
    name = reference.split("@", 1)[0]
    last_slash = name.rfind("/")
    tag_colon = name.rfind(":")
    return name[:tag_colon] if tag_colon > last_slash else name


def has_registry_host(reference: str) -> bool:
    first, slash, _ = repository(reference).partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def dockerfiles() -> list[Path]:
    return sorted({*REPO.glob("Dockerfile*"), *REPO.glob("*/*.Dockerfile")})


def yaml_images(node: Any) -> Iterator[str]:
    """Every value of an `image` key, and every `newName` of a kustomize `images:` entry."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("image", "newName") and isinstance(value, str):
                yield value
            else:
                yield from yaml_images(value)
    elif isinstance(node, list):
        for item in node:
            yield from yaml_images(item)


def dockerfile_images(text: str) -> Iterator[str]:
    """The images a Dockerfile's instructions name (FROM, COPY --from), not its own stages."""
    stages: set[str] = set()
    for line in text.splitlines():
        words = line.split()
        if line.lstrip().startswith("#"):
            continue  # comments: comment_references
        if words[:1] == ["FROM"]:
            image = next(w for w in words[1:] if not w.startswith("--"))
            if image not in stages | NOT_IMAGES:
                yield image
            if len(words) >= 4 and words[-2].upper() == "AS":
                stages.add(words[-1])
        for word in words:
            if word.startswith("--from=") and word[len("--from="):] not in stages:
                yield word[len("--from="):]


def comment_references(text: str) -> Iterator[str]:
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            yield from (m for m in TAGGED_REFERENCE.findall(line) if not repository(m).isdigit())


def named_images() -> list[tuple[str, str]]:
    """(file, image) for every image named under deploy/ and in every Dockerfile, comments included."""
    named: list[tuple[str, str]] = []
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(REPO))
        if path.suffix == ".yaml":
            named += [(where, image) for doc in yaml.safe_load_all(text) for image in yaml_images(doc)]
        named += [(where, image) for image in comment_references(text)]
    for path in dockerfiles():
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(REPO))
        named += [(where, image) for image in (*dockerfile_images(text), *comment_references(text))]
    return named


@pytest.mark.parametrize(("reference", "hosted"), [
    ("localhost/modeldrain/prestop:0.1.0", True),
    ("registry.example.com/modeldrain/prestop@sha256:" + "0" * 64, True),
    ("registry:5000/modeldrain/prestop:0.1.0", True),
    ("ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0", True),
    ("modeldrain/prestop:0.1.0", False),        # Docker Hub's modeldrain namespace
    ("modeldrain/drain-sidecar", False),
    ("localhost:0.1.0", False),                 # one component: library/localhost on Docker Hub
    ("vllm/vllm-openai:v0.32.0", False),
])
def test_a_registry_host_is_read_as_dockers_reference_grammar_reads_it(reference, hosted):
    assert has_registry_host(reference) is hosted
    assert names_a_registry(reference) is hosted  # `modeldrain inject --image`'s check


def test_the_scan_finds_every_place_an_image_is_named():
    """The scan is not empty-handed: it sees the product's images in the manifests, the
    components, the baked image's Dockerfile and the Dockerfiles' usage comments."""
    named = named_images()
    places = {(where, repository(image)) for where, image in named}
    assert ("deploy/deployment.yaml", PRESTOP_IMAGE_REPO) in places
    assert ("deploy/kustomize/sidecar-pieces/pieces.yaml", SIDECAR_IMAGE_REPO) in places
    assert ("deploy/engine-image-with-prestop.Dockerfile", PRESTOP_IMAGE_REPO) in places
    assert ("Dockerfile.hook", PRESTOP_IMAGE_REPO) in places  # its usage comment
    assert ("Dockerfile.sidecar", SIDECAR_IMAGE_REPO) in places
    assert ("deploy/deployment.yaml", "vllm/vllm-openai") in places


def test_an_unqualified_product_name_in_a_comment_or_manifest_is_found():
    """What the scan would have said of the names deploy/ used before: Docker Hub's modeldrain."""
    text = ("# baked in: COPY --from=modeldrain/prestop:0.1.0 /prestop /usr/local/bin/prestop\n"
            "FROM modeldrain/prestop:0.1.0 AS prestop\nFROM scratch\nCOPY --from=prestop /prestop /\n")
    assert [*dockerfile_images(text), *comment_references(text)] == [
        "modeldrain/prestop:0.1.0", "modeldrain/prestop:0.1.0"]
    assert list(yaml_images(yaml.safe_load("spec: {containers: [{image: modeldrain/drain-sidecar}]}"))) == [
        "modeldrain/drain-sidecar"]


def test_no_image_resolves_to_a_docker_hub_namespace_the_project_does_not_hold():
    unhosted = [(where, image) for where, image in named_images()
                if not has_registry_host(image) and repository(image) not in HUB_IMAGES_OF_THEIR_PUBLISHERS]
    assert unhosted == []


def test_the_product_images_are_local_names():
    assert PRESTOP_IMAGE_REPO.startswith("localhost/") and SIDECAR_IMAGE_REPO.startswith("localhost/")
