"""A pure-torch stand-in for `sgl-kernel`, which has no CPU wheel on PyPI.

The real-engine tier serves a dense Llama with `--attention-backend torch_native
--sampling-backend pytorch` on the CPU; on that path SGLang 0.5.23 calls one function of this
package (`sglang/srt/mem_cache/allocation.py`): `assign_req_to_token_pool_cpu`. SGLang's modules
import other symbols at their top (`copy_all_layer_kv_cache_cpu`, for one), so any other name
imports as a function that raises when called, naming itself: a path the stand-in does not cover
fails loudly instead of computing something wrong.
"""

from __future__ import annotations

import torch

# The version SGLang 0.5.23's `sglang.srt.utils` checks when it looks (any value it parses).
__version__ = "0.0.0+modeldrain.stand-in"


def assign_req_to_token_pool_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                 start_offset: torch.Tensor, end_offset: torch.Tensor,
                                 out_cache_loc: torch.Tensor, pool_len: int) -> None:
    """req_to_token[req_pool_indices[i], start[i]:end[i]] = the i-th slice of out_cache_loc.

    What the Triton kernel `assign_req_to_token_pool` does on a GPU: the slices of
    out_cache_loc follow one another in batch order.
    """
    del pool_len  # the row length; the indexing below knows it from the tensor
    taken = 0
    for row, start, end in zip(req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist()):
        length = end - start
        req_to_token[row, start:end] = out_cache_loc[taken:taken + length].to(req_to_token.dtype)
        taken += length


def __getattr__(name: str) -> object:
    if name.startswith("__"):
        raise AttributeError(name)  # import machinery probing dunders: answer as a module would

    def not_provided(*args: object, **kwargs: object) -> None:
        raise NotImplementedError(
            f"sgl_kernel.{name}: not in the modeldrain stand-in (engines/shims/sgl_kernel), which provides "
            f"only assign_req_to_token_pool_cpu for a dense Llama on --attention-backend torch_native")

    not_provided.__name__ = name
    return not_provided
