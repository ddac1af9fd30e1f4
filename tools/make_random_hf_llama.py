#!/usr/bin/env python3
# A Hugging Face Llama folder with random weights at a published model's shape and a real
# tokenizer: for benchmarks that need a vocabulary of real size (structured output's token masks
# over 128k tokens) on a machine without a model hub. Needs torch and transformers.
#
#   python3 tools/make_random_hf_llama.py --shape llama3-1b --tokenizer DIR --out DIR
#
# DIR of --tokenizer holds tokenizer.json and tokenizer_config.json (say the Llama 3.1 fixture,
# which CMake unpacks into build/<preset>/tests/fixtures/tokenizers/llama3_1).
import argparse
import shutil
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

SHAPES = {
    # Llama 3.2 1B's published configuration.
    'llama3-1b': dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                      num_key_value_heads=8, head_dim=64, vocab_size=128256, rope_theta=500000.0,
                      max_position_embeddings=8192, tie_word_embeddings=True, bos_token_id=128000,
                      eos_token_id=[128001, 128008, 128009]),
}

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument('--shape', choices=sorted(SHAPES), default='llama3-1b')
parser.add_argument('--tokenizer', required=True, type=Path)
parser.add_argument('--out', required=True, type=Path)
parser.add_argument('--seed', type=int, default=0)
opts = parser.parse_args()

torch.manual_seed(opts.seed)
config = LlamaConfig(**SHAPES[opts.shape], torch_dtype='bfloat16')
with torch.device('cuda' if torch.cuda.is_available() else 'cpu'):
    model = LlamaForCausalLM(config).to(torch.bfloat16)
model.save_pretrained(opts.out, safe_serialization=True)
for name in ('tokenizer.json', 'tokenizer_config.json'):
    shutil.copy(opts.tokenizer / name, opts.out / name)
print(f'{opts.out}: {opts.shape}, {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters')
