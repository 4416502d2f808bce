"""Every timing and size constant of the emulation, named once, each with the reason for its value.

Engine behaviour comes from measurements of the real engines (docs/engines.md) and the
operator's spec; kubelet behaviour from kubelet's own source. Nothing else restates these numbers.
"""

# --- vLLM ----------------------------------------------------------------------------------------

# vLLM with the default --shutdown-timeout 0 exits this long after SIGTERM once no client waits on
# it: real vLLM 0.32 beside the emulator (bench/engines/matrix.py), 0.37-1.03 s after SIGTERM,
# median 0.52 s, where the emulator took 2.07-2.24 s (ENGINES.md's earlier ~2 s was one idle
# engine that had served nothing). The emulator's own poll and process exit add ~0.1 s to this.
VLLM_ABORT_EXIT_LAG_S = 0.4
# How often an aborting vLLM looks whether a client still waits on it.
LINGER_POLL_S = 0.05

# vLLM with --shutdown-timeout N spends ~7 s tearing down once its queue is empty or N runs out
# (measured). Overridable with --drain-teardown-s so tests need not wait it out.
VLLM_DRAIN_TEARDOWN_S = 7.0

# ...but a SIGTERM that finds nothing in flight (the hook returned after the last request ended)
# was followed by the exit 3.9-4.6 s later on the real vLLM 0.32 (--shutdown-timeout 20, measured
# twice: ENGINES.md's deletions); the midpoint. --drain-teardown-s, where shorter, bounds it too.
VLLM_IDLE_DRAIN_EXIT_S = 4.25

# vLLM's answer to a request arriving while --shutdown-timeout drains.
VLLM_DRAIN_REJECT_MESSAGE = "cannot schedule new futures after shutdown"

# --- SGLang --------------------------------------------------------------------------------------

# SGLang 0.5.23's sigterm_watchdog (tokenizer_manager) wakes every 5 s from the server's start, not
# from the signal: it first sees the SIGTERM 0-5 s after it, then looks again every 5 s while
# requests remain, and exits when none do, once its schedulers have stopped. The real server left
# 2.4-6.3 s after a SIGTERM that found it idle (bench/engines/matrix.py, 8 deletions), where the
# emulator's fixed first look at 4 s left at 4.1: the phase, then this teardown (unified servers;
# a prefill or decode server's exit wait, --split-role-exit-wait-s, stands for its own).
SGLANG_WATCHDOG_INTERVAL_S = 5.0
SGLANG_EXIT_TEARDOWN_S = 1.4
# A prefill or decode server's first look, fixed: with its exit wait it makes the spec's ~19 s.
SGLANG_SPLIT_ROLE_FIRST_CHECK_S = 4.0

# SGLang 0.5.23's /health sends a one-token generate request and sleeps 1 s before it looks for the
# scheduler's answer (http_server.health_generate): a healthy server answers 200 after ~1 s.
SGLANG_HEALTH_GENERATE_S = 1.0

# SGLang's scheduler adds to its scheduler_process_cpu_seconds_total at most once a second, from its
# loop (0.5.23's _SCHEDULER_TIME_ACCOUNTING_INTERVAL_NS; measured idle: a step every ~1.0 s).
SCHEDULER_HEARTBEAT_INTERVAL_S = 1.0

# The shortest forward pass the `stale` misbehaviour takes: a zero interval would be no pass at all.
STALE_PASS_MIN_S = 0.1

# From SGLang 0.5.14 a prefill or decode server's scheduler ignores the shutdown request, and the
# engine waits a fixed 15 s for it before killing it (spec "Drain window"). Overridable with
# --split-role-exit-wait-s so tests need not wait it out.
SGLANG_SPLIT_ROLE_SCHEDULER_WAIT_S = 15.0

# --- Both engines --------------------------------------------------------------------------------

# Share of a request's life a disaggregated role spends in its own queues, outside the running
# batch. Real shares depend on KV size and network; a fixed split keeps tests deterministic while
# every in-flight request still shows in exactly one gauge at every instant.
PREFILL_BOOTSTRAP_SHARE = 0.2  # prefill: before the slot, waiting for the decoder's handshake
PREFILL_INFLIGHT_SHARE = 0.2  # prefill: after running, KV still being sent to the decoder
DECODE_PREALLOC_SHARE = 0.1  # decode: before the slot, waiting to allocate KV
DECODE_TRANSFER_SHARE = 0.1  # decode: before the slot, receiving KV from the prefiller

# A streaming response sends one chunk this often while it runs: frequent enough that a reader
# sees a live stream, rare enough that a 20 s request is ~80 chunks.
STREAM_CHUNK_INTERVAL_S = 0.25

# Token counts the emulator books per completed request, for the token counters. Arbitrary but
# plausible for a short completion.
PROMPT_TOKENS_PER_REQUEST = 32
GENERATION_TOKENS_PER_REQUEST = 64

# Default scheduler capacity per engine: vLLM's --max-num-seqs on a small CPU box.
DEFAULT_MAX_RUNNING = 16

# A request that names no duration runs this long.
DEFAULT_REQUEST_DURATION_S = 1.0

# vLLM's uvicorn closes an idle keep-alive connection this long after its last response
# (VLLM_HTTP_TIMEOUT_KEEP_ALIVE, default 5; uvicorn's own default, which SGLang keeps, is 5 too).
# aiohttp's default is 3630 s, which would hold a router-less retirement for an hour.
HTTP_KEEP_ALIVE_TIMEOUT_S = 5.0

# aiohttp's graceful close waits this long for handlers still running (hang, drip) at exit; the
# engine has already decided their fate, so there is nothing to wait for.
HANDLER_SHUTDOWN_GRACE_S = 0.5

# --- Misbehaviour defaults -----------------------------------------------------------------------

# drip and slow-headers send one byte per second: slow enough that any sane read timeout fires.
DRIP_INTERVAL_S = 1.0

# restart: how long the listener stays away, like a container restart of a light process.
RESTART_DOWN_S = 2.0

# huge: a body big enough to exceed any sane reader cap (the hook caps at 4 MiB).
HUGE_BODY_MB = 16

# --- Kubelet -------------------------------------------------------------------------------------

# When the preStop hook leaves under 2 s of the grace (or outlives it), kubelet still gives the
# container 2 s between SIGTERM and SIGKILL (minimumGracePeriodInSeconds in kuberuntime).
KUBELET_MIN_STOP_GRACE_S = 2.0

# --- Process handling for tests ------------------------------------------------------------------

# The emulator binds and answers /health in well under a second; 15 s leaves room for a loaded CI
# box with 2 cores.
ENGINE_START_TIMEOUT_S = 15.0

# How often a parent polls for the ready file, /health or a process exit.
POLL_STEP_S = 0.02

# A loopback /health probe during start-up that takes longer than this is retried: past SGLang's
# own ~1 s (SGLANG_HEALTH_GENERATE_S), with room for a loaded machine.
HEALTH_PROBE_TIMEOUT_S = 3.0

# EngineProcess's test requests: loopback answers are instant unless a misbehaviour delays them on
# purpose, and a test that wants to see that passes its own timeout.
TEST_REQUEST_TIMEOUT_S = 5.0

# A teardown first asks the emulator to exit now (SIGINT), then SIGKILLs after this long.
TEARDOWN_TERM_WAIT_S = 3.0

# SGLang's HTTP gauge (emulation/http_active.py); a release before it exports none (--without-http-gauge).
SGLANG_HTTP_ACTIVE = "sglang:http_requests_active"
