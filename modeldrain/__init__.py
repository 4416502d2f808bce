"""modeldrain: the in-pod half of graceful shutdown for LLM serving replicas.

The one installed namespace. Its two packages live in the checkout's top-level folders
(this folder links to them, so the checkout imports exactly what the wheel installs):

    modeldrain.hook     prestop, the preStop hook, and the core both programs share
    modeldrain.sidecar  drain-sidecar, that core served over HTTP by Pod IP
"""
