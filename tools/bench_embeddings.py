#!/usr/bin/env python3
"""Embedding throughput: POST /v1/embeddings on `rocmforge serve` beside transformers' Qwen3Model
on the same GPU, with the same texts and the same random weights (Qwen3-Embedding-0.6B's shape,
bf16; the fixture's tokenizer and pooling files: last token, L2-normalised). Medians of --repeats
runs after a warm-up, tokens per second, and each side's matmul FLOP/s against the card's dense
bf16 peak (--peak-tflops). Run on the GPU machine:

    python3 tools/bench_embeddings.py --binary build/cuda/rocmforge [--batch 1,16,64] [--words 200]
        [--serve-flags '--batch-size 4096']
"""
import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer, Qwen3Config, Qwen3Model

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_process  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests/fixtures/models/qwen3_embedding"
WORDS = ("in the beginning god created the heaven and the earth and the earth was without form and void "
         "and darkness was upon the face of the deep").split()


def build_model(folder):
    config = Qwen3Config.from_pretrained(FIXTURE)
    config.update(dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, max_position_embeddings=32768,
                       layer_types=["full_attention"] * 28))
    torch.manual_seed(0)
    model = Qwen3Model(config).to(torch.bfloat16).eval()
    model.save_pretrained(folder, safe_serialization=True)
    for item in FIXTURE.iterdir():
        if item.name not in ("config.json", "model.safetensors", "reference.json"):
            (shutil.copytree if item.is_dir() else shutil.copy)(item, folder / item.name)
    return model


def texts(batch, words):
    return [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(words)) for i in range(batch)]


def timed(run, repeats):
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def transformers_run(model, tokenizer, inputs):
    def run():
        encoded = tokenizer(inputs, padding=True, return_tensors="pt").to("cuda")
        with torch.no_grad():
            hidden = model(**encoded).last_hidden_state
        last = hidden[:, -1]  # left padding: the last position is every text's last token
        torch.nn.functional.normalize(last.float(), dim=-1).cpu()
        torch.cuda.synchronize()
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="build/cuda/rocmforge")
    parser.add_argument("--batch", default="1,16,64")
    parser.add_argument("--words", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--serve-flags", default="", help="more flags for serve, e.g. '--batch-size 4096'")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak (H100/H200 SXM)")
    opts = parser.parse_args()
    folder = Path(tempfile.mkdtemp()) / "qwen3-embedding-0.6b-random"
    model = build_model(folder).to("cuda")
    tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="left")
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    flops_per_token = 2 * sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n)
    server, base = serve_process.start(opts.binary, folder, ["--device", "cuda", *opts.serve_flags.split()])
    rows = []
    try:
        for batch in (int(b) for b in opts.batch.split(",")):
            inputs = texts(batch, opts.words)
            tokens = sum(len(tokenizer(t)["input_ids"]) for t in inputs)
            ours = timed(lambda: serve_process.post(base, "/v1/embeddings", {"input": inputs}), opts.repeats)
            theirs = timed(transformers_run(model, tokenizer, inputs), opts.repeats)
            rows.append({"batch": batch, "tokens": tokens, "rocmforge_tok_s": tokens / ours,
                         "transformers_tok_s": tokens / theirs})
    finally:
        server.terminate()
        server.wait()
    print(f"{'texts':>6} {'tokens':>7} {'rocmforge tok/s':>16} {'% of peak':>10} {'transformers tok/s':>19} "
          f"{'% of peak':>10} {'ratio':>6}")
    for r in rows:
        share = [100 * r[k] * flops_per_token / (opts.peak_tflops * 1e12) for k in ("rocmforge_tok_s", "transformers_tok_s")]
        print(f"{r['batch']:>6} {r['tokens']:>7} {r['rocmforge_tok_s']:>16,.0f} {share[0]:>9.1f}% "
              f"{r['transformers_tok_s']:>19,.0f} {share[1]:>9.1f}% {r['rocmforge_tok_s'] / r['transformers_tok_s']:>6.2f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
