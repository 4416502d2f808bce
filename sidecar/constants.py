"""The sidecar's own constants, named once, each with the reason for its value.

The drain's constants (read timeout, body cap, grace) live in hook/constants.py and are
imported from there; these are only what serving the controller adds.
"""

from modeldrain.hook.constants import DEFAULT_GRACE_S, SIDECAR_PORT, SIDECAR_SCHEMA

# Every response's `schema`: a client checks it before trusting the field layout. Bump the
# version on any change a client could misread; adding an optional field is not one.
# v2: the Pod named by namespace, name and UID; the engine's own command; the read's monotonic
# start and its idle run; null listed in every nullable enum.
# Named once in the shared core (hook/constants.py), since a worker's hook checks it too.
SCHEMA_VERSION = SIDECAR_SCHEMA

# The Pod's containers share one network namespace, so the port must clash with nothing the
# engine binds: not vLLM's 8000 or SGLang's 30000 (and the ports SGLang derives above it),
# not 8080/9090 (proxies, Prometheus), not 9400 (NVIDIA's DCGM exporter), and below Linux's
# ephemeral range (32768+) where vLLM's and SGLang's randomly chosen internal ports land.
DEFAULT_LISTEN_PORT = SIDECAR_PORT
# The controller reads the sidecar by Pod IP, so it listens on every address, IPv4 and IPv6
# ("" in --listen ":PORT"); the engine read stays on loopback whatever this says.
DEFAULT_LISTEN_HOST = ""

# Lingering after SIGTERM ends when the engine's listener refuses a connection, or after this
# long. The default is the operator's default grace: a classic container gets SIGTERM at the
# delete, while the engine may drain until G, and kubelet kills both at G anyway.
DEFAULT_LINGER_MAX_S = DEFAULT_GRACE_S

# While lingering, one loopback read every half second: the sidecar leaves within ~0.5 s of
# the engine's listener closing, at the cost of two tiny scrapes a second for a few seconds.
LINGER_POLL_INTERVAL_S = 0.5

# Consecutive engine reads start at least this far apart. Coalescing already keeps one read in
# flight, but a storm of callers would still chain scrapes back to back (each ~5-50 ms of the
# engine's API process rendering its exposition). 10 reads a second at most is ten times the
# hook's own rate, and adds at most 0.1 s to an answer; the controller reads about once a second.
MIN_READ_INTERVAL_S = 0.1

# A request for /v1/work waits for at most the read in flight and then its own (each bounded
# by the read timeout) and the spacing between reads, plus this much for thread hand-off on a
# loaded node. Past it the
# answer is a 504, never a stale read.
WORK_WAIT_SLACK_S = 1.0

# --- HTTP bounds ---------------------------------------------------------------------------------

# Only GETs with a short path and a bearer token arrive; 4 KiB per line and per header is
# ample (a Kubernetes service-account token is ~1 KiB) and caps what a client can make us hold.
MAX_REQUEST_LINE_BYTES = 4096
MAX_HEADER_FIELD_BYTES = 4096
MAX_HEADERS = 32

# No route takes a body; anything larger than this is refused before it is read.
MAX_REQUEST_BODY_BYTES = 1024

# One controller and a few peers read a replica; 64 leaves room for a storm of retries while
# a connection flood cannot exhaust file descriptors. Excess connections get a 503 and close.
MAX_CONNECTIONS = 64

# A connection over the cap gets its 503, then this long to close its side before we close
# ours: enough for a client to read the answer, short enough that a flood holds few sockets.
OVERLOADED_DRAIN_S = 0.5

# A connection that has not sent a whole request within this long is closed (aiohttp's
# keep-alive timer also runs before the first request), so slow-header clients are bounded.
# A controller reading once a second keeps its connection alive comfortably.
KEEPALIVE_TIMEOUT_S = 10.0

# At exit, requests still running get this long to finish (aiohttp waits it twice: for the
# handlers, then for the connections). The exit comes after the linger, which already waited for
# the engine; a read still pending then is cut rather than holding the Pod's deletion.
SHUTDOWN_TIMEOUT_S = 1.0

# GET /v1/drain needs no token (docs/sidecar-api.md, "Threat model"), so who may hold a drain call
# is bounded per source address and in all. kubelet calls once per container whose preStop is the
# httpGet (one in every manifest here), from its node's address, and may repeat a call (its
# delivery is at-least-once): 4 per address leaves it room. A stranger past its address's share
# gets 429 at once, and never takes the share of another address, kubelet's included.
MAX_DRAIN_CALLS_PER_SOURCE = 4
# Drain calls hold their connections while they wait, and a connection running a request is
# never evicted at the cap (sidecar/site.py). So drain calls may hold at most this share of
# --max-connections (48 of the default 64): the rest stay for the controller, the probes, and
# the idle connections a newcomer evicts. With the defaults, turning kubelet's call away takes
# 12 source addresses each holding 4 calls at once.
DRAIN_SHARE_OF_CONNECTIONS = 0.75

# A check of the token file (a stat, rarely a read of 4 KiB) takes microseconds; one that has
# not answered in this long is a stuck volume, and /v1/* answers 503 rather than wait on it.
TOKEN_FILE_WAIT_S = 1.0

# The downward API gives these (fieldRef metadata.name, metadata.namespace, metadata.uid): Pod IPs
# are reused, so an answer names the Pod it comes from.
POD_NAME_ENV = "POD_NAME"
POD_NAMESPACE_ENV = "POD_NAMESPACE"
POD_UID_ENV = "POD_UID"
# What the replica was created from (e.g. the LeaderWorkerSet template-revision-hash label): the
# members of one replica must agree on it before the controller trusts its leader's answer.
MEMBER_CONFIGURATION_ENV = "MEMBER_CONFIGURATION"

# Until the engine's own command is found in /proc (a native sidecar starts before its engine),
# look again at most this often: one listing of /proc, well under a millisecond in a Pod.
COMMAND_RESCAN_INTERVAL_S = 1.0

# Every answer's Server header: our name, not the HTTP library's and its version (which only
# tells a scanner what to try).
SERVER_HEADER = "modeldrain-sidecar"
