# An engine image with the prestop hook baked in, for deploy/pod-prestop-baked.yaml.
# The hook image (Dockerfile.hook) holds only the static executable: it runs in any engine
# image, whatever its glibc, with or without Python or a shell.
#
#   docker build -f deploy/engine-image-with-prestop.Dockerfile \
#     -t registry.example.com/vllm-openai-prestop:v0.32.0 deploy/
FROM localhost/modeldrain/prestop:0.1.0 AS prestop

FROM vllm/vllm-openai:v0.32.0
COPY --from=prestop /prestop /usr/local/bin/prestop
