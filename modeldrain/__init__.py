"""modeldrain: the in-pod half of graceful shutdown for LLM serving replicas.

    modeldrain.hook     prestop, the preStop hook, and the core both programs share
    modeldrain.sidecar  drain-sidecar, that core served over HTTP by Pod IP
"""
