"""Emulation of everything around the hook: the engines, the router, the kubelet.

- `python -m emulation.engine`: an emulated vLLM or SGLang server (real HTTP, the real engines'
  /metrics families from emulation/templates/, their SIGTERM behaviour, switchable misbehaviour).
- `emulation.load.LoadGenerator`: a router sending completions, tallying how each one ended.
- `emulation.kubelet.delete_pod`: kubelet's Pod deletion (preStop hook, grace, SIGTERM, SIGKILL).
- `emulation.engine_process.EngineProcess`: the emulator as a child process, for tests and benches.
- `emulation.launch`: argv shaped like the real engines' (`vllm serve ...`), for cmdline detection.
- `python -m emulation.demo`: `make demo`.
"""
