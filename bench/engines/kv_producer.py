"""A real vLLM KV producer deleted under load beside its decoder (engines/vllm_pd.py: MooncakeConnector
over mooncake TCP), with prestop or with `sleep 5`: when the hook returned, whether every client's
request completed, and whether the decoder pulled every prompt's KV or computed some itself.

    make engines-pd && .venv/bin/python -m bench.engines.kv_producer [--strategies prestop,sleep-5]

Each strategy starts a fresh pair (both servers side by side: minutes on 2 cores) under
tests/engines/test_kv_producer.py's load: 8 clients sending 4-6 s completions through the pair's
router, the router dropping the producer 3 s after the delete, G = 30.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from bench.engines import command
from bench.paths import PRESTOP_CONSOLE_SCRIPT
from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator, UniformDurations
from engines import tier as tier_module
from engines.servers import completion_body, proc_root_of
from engines.vllm_pd import VllmPdPair

PRESTOP = str(PRESTOP_CONSOLE_SCRIPT)
GRACE_S = 30
ROUTE_LAG_S = 3.0
DURATIONS = UniformDurations(4.0, 6.0)
CONCURRENCY = 8
WARM_LOAD_S = 3.0
SEED = 11
STRATEGIES = ("prestop", "sleep-5")


def one_deletion(addon: tier_module.PdAddOn, strategy: str) -> dict:
    with VllmPdPair(addon) as pair:
        producer = pair.prefill
        load = LoadGenerator(pair.proxy.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=SEED,
                             request_body=completion_body("vllm")).start()
        time.sleep(WARM_LOAD_S)
        assert producer.process is not None
        if strategy == "prestop":
            hook = [PRESTOP, "--grace", str(GRACE_S), "--port", str(producer.port), "--proc-root",
                    proc_root_of(producer), "--quiet"]
            report = delete_pod(producer.process, hook, GRACE_S, load=load, route_drop_after_s=ROUTE_LAG_S)
        else:
            report = delete_pod(producer.process, None, GRACE_S, hook_sleep_s=5.0, load=load,
                                route_drop_after_s=ROUTE_LAG_S)
        kv = pair.decode_kv_tokens()
        failures = pair.proxy.prefill_failures()
        prefills = pair.proxy.prefill_requests()
    assert report.load is not None
    last_done = report.relative(report.load.last_finished_at)
    return {"strategy": strategy, "load": report.load.summary(), "completed": report.completed, "cut": report.cut,
            "rejected": report.rejected, "refused": report.refused, "other": report.load.other,
            "last_request_done_s": None if last_done is None else round(last_done, 3),
            "hook_exit_code": report.hook_exit_code, "sigterm_at_s": round(report.sigterm_at, 3),
            "producer_exit_s": round(report.engine_exited_at, 3), "producer_exit_code": report.engine_exit_code,
            "decoder_prompt_tokens_pulled": kv["pulled"], "decoder_prompt_tokens_computed": kv["computed"],
            "prefill_requests": prefills, "prefill_failures": failures,
            "load_average": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engines.kv_producer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategies", default=",".join(STRATEGIES),
                        help=f"comma-separated, of {', '.join(STRATEGIES)} (default: both)")
    args = parser.parse_args(argv)
    strategies = [s for s in args.strategies.split(",") if s]
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown or not strategies:
        parser.error(f"--strategies: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(STRATEGIES)}")
    addon = command.vllm_pd_addon("python -m bench.engines.kv_producer")
    for strategy in strategies:
        print(json.dumps(one_deletion(addon, strategy)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
