# The test bed's stand-in for an engine image: the engine emulator as a static executable in
# an image with no Python, no shell and no libc, installed under the real images' commands
# (`vllm serve`, `python3 -m vllm.entrypoints.openai.api_server`, `python3 -m
# sglang.launch_server`). The container tests run deploy/'s manifests with it where they name
# vllm/vllm-openai or lmsysorg/sglang. Never shipped.
#
#   docker build -f emulation/engine.Dockerfile -t localhost/modeldrain-test/engine-emulator .
#
# The container tests build it without a daemon, as `make images` builds the product's.

FROM debian:12-slim AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
COPY build/bundle.sh build/image-root.sh build/stamp.py build/requirements-bundle.txt build/engine-emulator.spec build/
COPY modeldrain/hook/ modeldrain/hook/
COPY emulation/ emulation/
# Where PyPI is not reachable: a package index, and the PEM text of the CA that signs it.
ARG PIP_INDEX_URL=""
ARG PIP_CA_PEM=""
RUN if [ -n "${PIP_INDEX_URL}" ]; then export PIP_INDEX_URL; else unset PIP_INDEX_URL; fi \
    && if [ -n "${PIP_CA_PEM}" ]; then printf '%s\n' "${PIP_CA_PEM}" > /etc/pip-ca.pem \
         && export PIP_CERT=/etc/pip-ca.pem; fi \
    && build/bundle.sh engine-emulator \
    && build/image-root.sh engine-emulator /out \
    && rm -rf /var/lib/apt/lists/*

FROM scratch
COPY --from=build /out/ /
ENV PATH=/usr/local/bin:/usr/bin
USER 65534:65534
# vllm/vllm-openai's own entrypoint: a Pod's `args` follow it (the model first).
ENTRYPOINT ["vllm", "serve"]
