#!/usr/bin/env python3
"""diffusers' speed on the shapes `rocmforge bench-image --synthetic sd15|sdxl` measures, for the
side-by-side rows of docs/perf.md (issue #23): the published SD 1.5 and SDXL configs with random
weights, fp16, PyTorch's SDPA attention, eager (no torch.compile), 20 Euler steps with guidance 7.5.
Prints UNet steps per second (the mean step after the first, from the step callback), seconds per
image (the whole pipeline call: text encoders, steps, VAE decode) and the peak GPU memory, as
medians of the repeats, in bench-image's table layout.

  PYTHONPATH=<diffusers>/src python3 tools/bench_sd_diffusers.py --model sd15 -b 1,4 -r 3

Needs torch with CUDA, transformers and diffusers (the pinned source snapshot is enough). The CLIP
vocabulary is models/clip's (the tokenizer's speed does not depend on it).
"""
import argparse
import statistics
import time
from pathlib import Path

import torch
from diffusers import (AutoencoderKL, EulerDiscreteScheduler, StableDiffusionPipeline, StableDiffusionXLPipeline,
                       UNet2DConditionModel)
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer

CLIP_L = dict(vocab_size=49408, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
              intermediate_size=3072, hidden_act="quick_gelu", max_position_embeddings=77)
SCHEDULER = dict(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", steps_offset=1)
VAE = dict(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=[128, 256, 512, 512], layers_per_block=2,
           down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4)
# runwayml/stable-diffusion-v1-5 and stabilityai/stable-diffusion-xl-base-1.0's unet/config.json.
UNETS = {
    "sd15": dict(sample_size=64, block_out_channels=[320, 640, 1280, 1280], attention_head_dim=8, cross_attention_dim=768,
                 down_block_types=["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"],
                 up_block_types=["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3),
    "sdxl": dict(sample_size=128, block_out_channels=[320, 640, 1280], attention_head_dim=[5, 10, 20],
                 cross_attention_dim=2048, transformer_layers_per_block=[1, 2, 10], use_linear_projection=True,
                 addition_embed_type="text_time", addition_time_embed_dim=256,
                 projection_class_embeddings_input_dim=2816,
                 down_block_types=["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
                 up_block_types=["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"]),
}


def build(model, vocab):
    # The networks straight on the GPU in fp16 (random init there is fast); the scheduler and the
    # tokenizer on the host, where diffusers keeps them (its schedulers go through numpy).
    torch.set_default_dtype(torch.float16)
    with torch.device("cuda"):
        nets = dict(unet=UNet2DConditionModel(**UNETS[model]), text_encoder=CLIPTextModel(CLIPTextConfig(**CLIP_L)),
                    vae=AutoencoderKL(**VAE) if model == "sd15" else
                    AutoencoderKL(**VAE, force_upcast=False, scaling_factor=0.13025))  # as sdxl-vae-fp16-fix
        if model == "sdxl":
            bigg = CLIPTextConfig(vocab_size=49408, hidden_size=1280, num_hidden_layers=32, num_attention_heads=20,
                                  intermediate_size=5120, hidden_act="gelu", projection_dim=1280,
                                  max_position_embeddings=77)
            nets["text_encoder_2"] = CLIPTextModelWithProjection(bigg)
    torch.set_default_dtype(torch.float32)
    tokenizer = CLIPTokenizer(vocab_file=str(vocab / "vocab.json"), merges_file=str(vocab / "merges.txt"),
                              model_max_length=77)
    if model == "sd15":
        return StableDiffusionPipeline(**nets, tokenizer=tokenizer, scheduler=EulerDiscreteScheduler(**SCHEDULER),
                                       safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    return StableDiffusionXLPipeline(**nets, tokenizer=tokenizer, tokenizer_2=tokenizer,
                                     scheduler=EulerDiscreteScheduler(**SCHEDULER, timestep_spacing="leading"))


def time_one(pipe, batch, steps, size):
    marks = []
    start = time.perf_counter()

    def on_step(p, i, t, kwargs):
        torch.cuda.synchronize()
        marks.append(time.perf_counter())
        return kwargs

    pipe(prompt=["a photograph of an astronaut riding a horse on the moon"] * batch,
         negative_prompt=["blurry, low quality"] * batch, num_inference_steps=steps, guidance_scale=7.5,
         height=size, width=size, output_type="np", callback_on_step_end=on_step)
    torch.cuda.synchronize()
    total = time.perf_counter() - start
    return total, (marks[-1] - marks[0]) / (len(marks) - 1)


def main():
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("--model", choices=UNETS, default="sd15")
    args.add_argument("-b", "--batch", default="1")
    args.add_argument("--steps", type=int, default=20)
    args.add_argument("-r", "--repeats", type=int, default=3)
    args.add_argument("--clip-vocab", type=Path, default=Path(__file__).resolve().parent.parent / "models" / "clip")
    a = args.parse_args()
    pipe = build(a.model, a.clip_vocab)
    pipe.set_progress_bar_config(disable=True)
    size = UNETS[a.model]["sample_size"] * 8
    print("| model | size | batch | steps | UNet it/s (CFG) | s/image | peak GiB |\n|---|---|---|---|---|---|---|")
    for batch in (int(b) for b in a.batch.split(",")):
        torch.cuda.reset_peak_memory_stats()
        time_one(pipe, batch, a.steps, size)  # warm-up
        runs = [time_one(pipe, batch, a.steps, size) for _ in range(a.repeats)]
        total = statistics.median(r[0] for r in runs)
        step = statistics.median(r[1] for r in runs)
        peak = torch.cuda.max_memory_allocated() / 2**30
        print(f"| diffusers {a.model} | {size}x{size} | {batch} | {a.steps} | {1 / step:.2f} | {total / batch:.3f} "
              f"| {peak:.2f} |", flush=True)


if __name__ == "__main__":
    main()
