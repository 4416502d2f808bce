"""Every timing and size constant of the drain, named once, each with the reason for its value.

The hook and the sidecar import these; nothing restates them. The first four are the
operator's own constants (spec "Drain window"); the rest are ours.
"""

__all__ = [
    "ADMITTED_GRACE_MAX_S", "ADMITTED_GRACE_MIN_S", "BUSY_POLL_INTERVAL_S", "BUSY_READ_ENGINE_SHARE", "DEFAULT_GRACE_S",
    "EXIT_RESERVE_S", "HEALTH_READ_TIMEOUT_S", "IDLE_CONFIRM_GAP_S", "IDLE_READS_REQUIRED", "KV_PRODUCER_HOLD_S",
    "LOAD_BUSY_POLL_INTERVAL_S", "LOAD_COUNTED_CONFIRM_GAP_S", "LWS_GROUP_SIZE_ENV", "LWS_LEADER_ADDRESS_ENV", "LWS_WORKER_INDEX_ENV",
    "MAX_BODY_BYTES", "MAX_TOKEN_FILE_BYTES", "POLL_INTERVAL_S", "READ_TIMEOUT_S", "ROUTE_WAIT_S", "SIDECAR_PORT",
    "SIDECAR_SCHEMA", "SIDECAR_SCHEMAS_READ", "SPLIT_ROLE_EXIT_RESERVE_S",
]

# Every supported router drops a replica on its deletion timestamp, but one may pick it
# in the instant before it learns of the delete; the first 5 s is where that request lands.
ROUTE_WAIT_S = 5.0

# The hook returns at G - 5 at the latest, leaving the engine 5 s after SIGTERM to exit
# before kubelet's SIGKILL at G.
EXIT_RESERVE_S = 5.0

# An SGLang prefill or decode server needs up to ~20 s after SIGTERM even idle (spec: a decoder
# left 26 s and a prefiller 28 s after the delete at G = 30): its watchdog notices SIGTERM within
# 5 s, then waits a fixed 15 s for the split-role scheduler. SGLang keeps serving running work
# after SIGTERM, so returning by G - 20 cuts nothing, while returning later gets it killed at G.
SPLIT_ROLE_EXIT_RESERVE_S = 20.0

# The operator's default terminationGracePeriodSeconds, and the range its admission takes.
DEFAULT_GRACE_S = 30.0
ADMITTED_GRACE_MIN_S = 15.0
ADMITTED_GRACE_MAX_S = 3600.0

# One loopback GET a second: an idle replica leaves ~1 s after the route wait (two idle
# reads), and a busy engine sees one small scrape a second, less than Prometheus' own.
POLL_INTERVAL_S = 1.0

# While work is in flight, reads come this often, so the first idle read follows the last
# request within a quarter second (median lag to the hook's return 1.21 s instead of 1.57 s
# against the emulated engine: bench/RESULTS.md).
BUSY_POLL_INTERVAL_S = 0.25

# ...but never so often that scraping costs the engine more than this share of a core. A read's
# duration is mostly the engine rendering its exposition (5.4 ms of CPU for vLLM's ~47 KB, 61 ms
# for ~500 KB: bench/RESULTS.md), so reads while busy start at least duration / share apart: a
# large exposition is read at the normal interval, a small one four times a second.
BUSY_READ_ENGINE_SHARE = 0.05

# The second of the two idle reads starts at least this long after the first: a request between
# its arrival and its admission to the queue reads as zero for a moment, never for a second.
IDLE_CONFIRM_GAP_S = 1.0
# ...unless the first idle read's zero covers that moment too: vLLM with
# --enable-server-load-tracking and one API server, whose GET /load counts every request from its
# handler's start to its response's end (modeldrain/hook/server_load.py). Then the confirming read
# only has to come after the first one, at the busy read spacing (measured on the real engine:
# docs/engines.md, "The confirming read with /load").
LOAD_COUNTED_CONFIRM_GAP_S = 0.25

# While work is in flight there, the hook asks /load first and scrapes only when it reads 0
# (modeldrain/hook/reader.py): /load costs vLLM 0.32's API server 0.7 ms of CPU a read against
# 11.6 ms for /metrics, and answered in 3.0 ms (median; 11.7 ms p95) while 8 requests decoded on 2
# cores (docs/engines.md, "The confirming read with /load"). So these reads come this often, under
# the same BUSY_READ_ENGINE_SHARE bound by their own duration: the first idle read follows the last
# request's end within ~0.1 s instead of the 0.5-1 s a loaded scrape's spacing gave.
LOAD_BUSY_POLL_INTERVAL_S = 0.1

# A vLLM KV producer (kv_role kv_producer or kv_both) keeps a finished request's KV blocks for its
# decoder to pull, and no vLLM release (0.8 to 0.33) exports how many it holds: its zero is held
# busy this long after the last read that showed work (modeldrain/hook/kv_producer.py). vLLM's own
# leases on those blocks: VLLM_NIXL_ABORT_REQUEST_TIMEOUT, 480 s by default (0.11 to 0.21; 120 s in
# 0.10), VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT, 480 s (0.13 to 0.33), and NIXL's kv_lease_duration
# since 0.22 (30 s, which the decoder's heartbeats renew while it waits, so no fixed bound): the
# longest fixed one. The deadline bounds it: a producer deleted under any G up to 480 s drains to G - 5.
KV_PRODUCER_HOLD_S = 480.0

# The /health read that tells whether SGLang's SIGTERM will drain (modeldrain/hook/exit_policy.py): SGLang
# 0.5.23's /health generates a token and answers after >= 1 s (measured: never sooner), so the read
# runs beside the route wait, from the hook's start, and must have its answer by the route wait's
# end; this bounds it where the route wait is longer.
HEALTH_READ_TIMEOUT_S = 4.0

# A loopback read that has not finished in 2 s is an engine too busy to answer: count it as
# busy rather than wait longer, so the poll keeps its 1 s cadence within a read or two.
READ_TIMEOUT_S = 2.0

# vLLM serves ~50 KB idle and ~500 KB with many LoRA adapters or DP ranks; 8x the large case
# leaves room to grow while a runaway body cannot make the hook hold tens of MB.
MAX_BODY_BYTES = 4 * 1024 * 1024

# drain-sidecar's port (see modeldrain/sidecar/constants.py for why this one): a worker Pod's hook reads its
# leader's sidecar there.
SIDECAR_PORT = 8490

# The schema drain-sidecar writes (modeldrain/sidecar/work_answer.py lists its versions).
SIDECAR_SCHEMA = "modeldrain.sidecar/v2"
# The window of schemas a reader of this release trusts (docs/controller.md, "Version skew"): the
# hook and the sidecar ship as two images a fleet upgrades at different times. Within a schema a
# release only adds fields, which a reader ignores; a change a reader could misread is a new schema,
# added here one release before any sidecar writes it. A schema outside the window (a newer
# sidecar's) is never read as idle: a field layout a reader was not written for is no answer.
SIDECAR_SCHEMAS_READ = (SIDECAR_SCHEMA,)

# A bearer token file (the sidecar's --token-file, a worker hook's --leader-token-file) holds one
# token; anything bigger is not a token.
MAX_TOKEN_FILE_BYTES = 4096

# LeaderWorkerSet gives every member of a group these (the leader's index is 0).
LWS_WORKER_INDEX_ENV = "LWS_WORKER_INDEX"
LWS_GROUP_SIZE_ENV = "LWS_GROUP_SIZE"
LWS_LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"

# Two consecutive idle reads, each with its whole gauge set: a single unlucky zero (a request between
# its arrival and its admission to the queue) cannot end the drain.
IDLE_READS_REQUIRED = 2
