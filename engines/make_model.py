"""Write the real-engine tier's tiny model: a randomly initialised Llama and a byte-level BPE
tokenizer trained here, so nothing is fetched from a model hub.

    python make_model.py OUT_DIR

The weights are random (seeded): the engines serve them at full speed on a CPU and generate
nonsense, which is all a drain needs. Run with the vLLM environment's Python (transformers,
tokenizers and torch are there).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

# The model ENGINES.md measured: small enough that a 2-core CPU runs a decode step in milliseconds.
HIDDEN_SIZE = 128
ATTENTION_HEADS = 4
LAYERS = 2
VOCAB_SIZE = 2048
# Room for the long-prompt measurements (bench/engines/lifecycle.py); the engines are started
# with a --max-model-len at or below it.
MAX_POSITIONS = 4096
SEED = 20260501

SPECIAL_TOKENS = ["<s>", "</s>", "<unk>", "<pad>"]
# Without a chat template /v1/chat/completions refuses the request (transformers >= 4.44).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{{ message['content'] }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

WORDS = ("the replica drains its queue before the pod goes away while the router learns of the delete "
         "and every request in flight finishes on the engine that took it json schema grammar token "
         "prefill decode cache model server kubernetes graceful shutdown").split()


def _corpus(lines: int, rng: random.Random) -> list[str]:
    """Text to train the BPE on: words, numbers and JSON-ish punctuation, deterministic."""
    out = []
    for _ in range(lines):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 16))]
        out.append(" ".join(words) + f' {{"n": {rng.randint(0, 9999)}, "ok": true}}')
    return out


def write_tokenizer(out: Path) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_corpus(4000, random.Random(SEED)), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", pad_token="<pad>", chat_template=CHAT_TEMPLATE,
                                   model_max_length=MAX_POSITIONS)
    fast.save_pretrained(out)
    return fast


def write_model(out: Path, tokenizer: PreTrainedTokenizerFast) -> None:
    torch.manual_seed(SEED)
    config = LlamaConfig(hidden_size=HIDDEN_SIZE, intermediate_size=4 * HIDDEN_SIZE,
                         num_attention_heads=ATTENTION_HEADS, num_key_value_heads=ATTENTION_HEADS,
                         num_hidden_layers=LAYERS, vocab_size=VOCAB_SIZE, max_position_embeddings=MAX_POSITIONS,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, torch_dtype="float32")
    LlamaForCausalLM(config).save_pretrained(out, safe_serialization=True)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: make_model.py OUT_DIR")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    write_model(out, write_tokenizer(out))
    print(f"tiny model written to {out}")


if __name__ == "__main__":
    main()
