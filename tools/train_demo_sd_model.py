#!/usr/bin/env python3
"""Trains rocmforge's shipped Stable Diffusion demo model, models/sd-demo: a tiny SD-1.x-architecture
pipeline (CLIP text encoder, UNet, VAE; a few million parameters) trained from scratch at 64x64 on
the public-domain clip art that Debian's openclipart-png package ships, with the real CLIP
vocabulary of models/clip. It is a demo of the engine, not a useful image model:
`rocmforge image -p "a red apple"` makes a small, blurry, clip-art-like picture.

Steps:
  1. prepare (this machine, Debian 12; needs Debian's python3-pil and python3-numpy, so run it with
     /usr/bin/python3 where another python3 comes first on PATH):
       /usr/bin/python3 tools/train_demo_sd_model.py prepare
     Fetches openclipart-png (the pictures) and openclipart-svg (the same pictures as SVG, whose RDF
     metadata names each picture's author and keywords) with `apt-get download` into
     .cache/sd-demo/debs/ and unpacks them with `dpkg-deb -x` (no installation). Every PNG, after
     dropping byte-identical copies, the gradient and pattern swatches, and all but MAX_PER_DIR of
     a folder (shapes/stars alone has 1378 near-identical stars), is composited onto white, cropped
     to its drawing, padded to a white square and resized to 64x64 (LANCZOS). Its captions come
     from the file name (author names, numbers and "bw" dropped), the picture's dominant colour, the
     SVG's keywords and the category folders: "a red apple, fruit, food", "a red apple",
     "apple, fruit, food", "apple". Writes .cache/sd-demo/dataset.npz (uint8 images [N, 64, 64, 3]
     and the captions as JSON strings; the one file `train` needs, about 10-20 MB) and
     .cache/sd-demo/captions.json (for reading).
  2. train (GPU machine: torch, transformers 5, safetensors, numpy, pillow, and diffusers' source
     on PYTHONPATH):
       mkdir -p build/diffusers && tar -xJf build/diffusers.tar.xz -C build/diffusers
       PYTHONPATH=build/diffusers/diffusers/src python3 tools/train_demo_sd_model.py train
     First builds every part, runs one training step of each phase, saves a pipeline to a scratch
     folder and samples one step from it through diffusers' StableDiffusionPipeline, so a broken
     setup fails within seconds. Then:
       a. the VAE (AutoencoderKL, 4x downscale: 64 px images, 16x16x4 latents) for --vae-seconds:
          L1 + L2 reconstruction of posterior samples + a small KL term; scaling_factor = 1 / std
          of the dataset's latents, as SD's was chosen;
       b. the whole data set encoded once (and its mirror image) into latent means and stds;
       c. the text encoder (CLIPTextModel) and UNet jointly for --unet-seconds: epsilon
          prediction, SD's DDPM schedule (scaled_linear 0.00085..0.012, 1000 steps), a random
          caption variant per image, 10% empty captions (for classifier-free guidance), random
          horizontal flips, bf16 autocast, AdamW, learning rates on a cosine over the time budget,
          an exponential moving average of the weights (what is saved).
     Saves models/sd-demo with StableDiffusionPipeline.save_pretrained (float16 safetensors, Euler
     scheduler config with the training betas, text encoder tensors under their classic
     text_model.* names, tokenizer/ = models/clip's vocab.json and merges.txt + configs), reloads it
     with StableDiffusionPipeline.from_pretrained to record reference.json (prompts, seeds, the
     outputs' mean colours) and samples.png, and writes the sample grid and the VAE's
     reconstructions to $OUT when it is set.
     --smoke runs a few steps of everything into a scratch folder (not models/sd-demo).
"""
import argparse
import glob
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".cache", "sd-demo")
DATASET = os.path.join(CACHE, "dataset.npz")
CLIP_VOCAB = os.path.join(ROOT, "models", "clip")
SIZE = 64  # training and native resolution
MAX_PER_DIR = 80  # pictures kept from one folder (deterministic choice by content hash)
MAX_PIXELS = 4_000_000  # the 20 bigger PNGs (up to 623 Mpixel) would take most of the time
SKIP_DIRS = ("special/gradients", "special/patterns")  # colour swatches named after fruit ("apple-red")
STOP_WORDS = {"bw", "the", "of", "and", "a", "an", "img", "image", "clipart", "clip", "art", "by", "png", "svg",
              "remix", "version", "new", "old", "simple", "unsorted", "icon", "icons", "theme", "lemon", "flat"}
BAD_KEYWORDS = {"hash", "clip art", "clipart", "image", "media", "png", "svg", "public domain", "externalsource",
                "openclipart", "unsorted", "remix", "drawing", "picture", "icon", "symbol", "illustration"}
PROMPTS = ["a red apple", "a yellow banana", "a green tree", "a blue car", "a black cat", "a red heart"]
CAPTION_DROPOUT = 0.1
SD_BETAS = dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear")

# Inside what rocmforge's loader runs (src/models/stable_diffusion/config_json.cpp): SD 1.x block
# types, attention_head_dim = heads per level (head width 32 everywhere; the mid block takes the
# last level's), one transformer per attention, norm groups dividing every width.
UNET = dict(sample_size=SIZE // 4, in_channels=4, out_channels=4, block_out_channels=(64, 96, 96),
            down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
            layers_per_block=1, attention_head_dim=(2, 3, 3), transformer_layers_per_block=1,
            norm_num_groups=32, cross_attention_dim=64, act_fn="silu", use_linear_projection=False)
VAE = dict(in_channels=3, out_channels=3, block_out_channels=(32, 64, 64),
           down_block_types=("DownEncoderBlock2D",) * 3, up_block_types=("UpDecoderBlock2D",) * 3,
           layers_per_block=1, latent_channels=4, norm_num_groups=32, sample_size=SIZE, act_fn="silu",
           force_upcast=False, mid_block_add_attention=True)
# The text encoder's 49408 x hidden token table is most of its bytes: hidden stays small.
TEXT = dict(vocab_size=49408, hidden_size=64, intermediate_size=256, num_hidden_layers=3, num_attention_heads=2,
            max_position_embeddings=77, hidden_act="quick_gelu", layer_norm_eps=1e-5, bos_token_id=49406,
            eos_token_id=49407, pad_token_id=49407, projection_dim=64)


def log(*a):
    print(*a, flush=True)


# ============================================================================== prepare
def unpack(package):
    """apt-get download `package` into .cache/sd-demo/debs/ and unpack it into .cache/sd-demo/root/."""
    debs = os.path.join(CACHE, "debs")
    os.makedirs(debs, exist_ok=True)
    if not glob.glob(os.path.join(debs, f"{package}_*.deb")):
        subprocess.run(["apt-get", "download", package], cwd=debs, check=True)
    deb = sorted(glob.glob(os.path.join(debs, f"{package}_*.deb")))[-1]
    root = os.path.join(CACHE, "root")
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    return os.path.basename(deb)


def words(text):
    """Lower-case words of a file or folder name: split on _ - . spaces and camelCase."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w]


def svg_metadata(path):
    """(author words, keywords) from an openclipart SVG's RDF metadata; empty where it has none."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(400000)
    except OSError:
        return set(), []
    author = set()
    for m in re.finditer(r"<dc:(?:creator|rights)>\s*<cc:Agent>\s*<dc:title>([^<]*)", text):
        author.update(words(m.group(1)))
    keywords = []
    subject = re.search(r"<dc:subject>(.*?)</dc:subject>", text, re.S)
    if subject:
        keywords = [re.sub(r"\s+", " ", k.strip().lower()) for k in re.findall(r"<rdf:li>([^<]*)", subject.group(1))]
    return author, keywords


def is_author_word(w, author):
    # file names end in the author's name, often cut short ("dan_gerh" for Dan Gerhards)
    return any(a.startswith(w) or w.startswith(a) for a in author if len(w) >= 2 and len(a) >= 2)


def colour_name(rgb):
    """The dominant colour of a picture's drawn (non-white) pixels, as a caption word."""
    import numpy as np
    from PIL import Image
    hsv = np.asarray(Image.fromarray(rgb).convert("HSV")).reshape(-1, 3).astype(np.int32)
    drawn = rgb.reshape(-1, 3).min(axis=1) < 230
    hsv = hsv[drawn]
    coloured = hsv[(hsv[:, 1] > 80) & (hsv[:, 2] > 60)]
    if len(coloured) < 0.25 * len(hsv):
        return "black and white" if len(hsv) and np.median(hsv[:, 2]) < 120 else "gray"
    bounds = [(11, "red"), (28, "orange"), (48, "yellow"), (120, "green"), (190, "blue"), (215, "purple"),
              (235, "pink"), (256, "red")]
    counts = {}
    for h in coloured[:, 0]:
        name = next(n for b, n in bounds if h < b)
        counts[name] = counts.get(name, 0) + 1
    best = max(counts, key=counts.get)
    if best in ("orange", "red") and np.median(coloured[:, 2]) < 140:
        return "brown"
    return best


def square_64(path):
    """The picture composited onto white, cropped to its drawing, padded to a white square and
    resized to SIZE x SIZE; None for huge, blank, and long thin ones (rules, borders)."""
    import numpy as np
    from PIL import Image
    Image.MAX_IMAGE_PIXELS = None
    im = Image.open(path)
    if im.size[0] * im.size[1] > MAX_PIXELS:
        return None
    im.load()
    im = im.convert("RGBA")
    white = Image.new("RGBA", im.size, (255, 255, 255, 255))
    rgb = Image.alpha_composite(white, im).convert("RGB")
    a = np.asarray(rgb)
    ys, xs = np.nonzero(a.min(axis=2) < 245)
    if len(ys) < 16:
        return None
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    h, w = y1 - y0, x1 - x0
    if max(h, w) > 4 * min(h, w):
        return None
    side = int(max(h, w) * 1.08) + 2
    canvas = Image.new("RGB", (side, side), (255, 255, 255))
    canvas.paste(rgb.crop((x0, y0, x1, y1)), ((side - w) // 2, (side - h) // 2))
    return np.asarray(canvas.resize((SIZE, SIZE), Image.LANCZOS, reducing_gap=3.0))


def caption_parts(rel, author, keywords):
    """(name, tags) for the picture at `rel` (path under png/, no extension)."""
    folders, stem = rel.split("/")[:-1], rel.split("/")[-1]
    name = [w for w in words(stem)
            if not any(c.isdigit() for c in w) and len(w) > 1 and w not in STOP_WORDS and not is_author_word(w, author)]
    tags = [" ".join(words(f)) for f in reversed(folders)]
    for k in keywords:
        if re.fullmatch(r"[a-z]+( [a-z]+)?", k) and len(k) <= 18 and k not in BAD_KEYWORDS \
                and not any(is_author_word(w, author) for w in k.split()):
            tags.append(k)
    if not name:
        name = tags[0].split()[-1:] if tags else ["picture"]
    name = " ".join(name[:4])
    seen, out = set(name.split()), []
    for t in tags:
        if t and t not in seen and t != "unsorted":
            seen.add(t)
            out.append(t)
    return name, out[:5]


def captions_for(name, colour, tags):
    """The caption variants `train` draws from: long, short, without colour, the name alone."""
    article = "an" if colour[0] in "aeiou" else "a"
    long = f"{article} {colour} {name}" + "".join(", " + t for t in tags)
    return [long, f"{article} {colour} {name}", ", ".join([name] + tags), name]


def load_picture(job):
    png, rel, svg = job
    arr = square_64(png)
    if arr is None:
        return None
    author, keywords = svg_metadata(svg)
    name, tags = caption_parts(rel, author, keywords)
    colour = colour_name(arr)
    return arr, rel, captions_for(name, colour, tags), colour


def pick_pictures(png_root):
    """Every PNG once (the first of byte-identical copies, deepest folder first), at most
    MAX_PER_DIR from a folder, without the colour swatches."""
    paths = sorted(glob.glob(os.path.join(png_root, "**", "*.png"), recursive=True),
                   key=lambda p: (-p.count("/"), p))
    seen, per_dir, chosen = set(), {}, []
    keyed = []
    for p in paths:
        rel = os.path.relpath(p, png_root)
        if rel.startswith(SKIP_DIRS):
            continue
        with open(p, "rb") as f:
            digest = hashlib.sha1(f.read()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            keyed.append((digest, p, rel))
    for digest, p, rel in sorted(keyed):  # hash order: an arbitrary but fixed sample of big folders
        d = os.path.dirname(rel)
        if per_dir.get(d, 0) < MAX_PER_DIR:
            per_dir[d] = per_dir.get(d, 0) + 1
            chosen.append((p, rel))
    return sorted(chosen, key=lambda x: x[1]), len(paths), len(keyed)


def prepare(args):
    import multiprocessing
    import numpy as np
    debs = [unpack("openclipart-png"), unpack("openclipart-svg")]
    share = os.path.join(CACHE, "root", "usr", "share", "openclipart")
    chosen, n_files, n_unique = pick_pictures(os.path.join(share, "png"))
    log(f"{debs}: {n_files} PNGs, {n_unique} distinct, {len(chosen)} chosen")
    jobs = [(p, rel[:-4], os.path.join(share, "svg", rel[:-4] + ".svg")) for p, rel in chosen]
    with multiprocessing.Pool(os.cpu_count()) as pool:
        results = [r for r in pool.map(load_picture, jobs, chunksize=16) if r is not None]
    images = np.stack([r[0] for r in results])
    captions = [r[2] for r in results]
    meta = [{"file": r[1] + ".png", "colour": r[3], "captions": r[2]} for r in results]
    np.savez_compressed(DATASET, images=images, captions=np.array([json.dumps(c) for c in captions]),
                        files=np.array([m["file"] for m in meta]))
    with open(os.path.join(CACHE, "captions.json"), "w") as f:
        json.dump({"packages": debs, "size": SIZE, "pictures": meta}, f, indent=1)
        f.write("\n")
    report_dataset(images, captions, meta)


def report_dataset(images, captions, meta):
    colours, tags = {}, {}
    for m in meta:
        colours[m["colour"]] = colours.get(m["colour"], 0) + 1
        top = m["file"].split("/")[0]
        tags[top] = tags.get(top, 0) + 1
    log(f"{len(images)} pictures {images.shape[1]}x{images.shape[2]}; {os.path.getsize(DATASET) / 1e6:.1f} MB "
        f"{DATASET}; mean pixel {images.mean():.1f}")
    log("colours: " + ", ".join(f"{k} {v}" for k, v in sorted(colours.items(), key=lambda kv: -kv[1])))
    log("folders: " + ", ".join(f"{k} {v}" for k, v in sorted(tags.items(), key=lambda kv: -kv[1])))
    for i in range(0, len(captions), max(1, len(captions) // 8)):
        log(f"  {meta[i]['file']}: {captions[i]}")
    for prompt in PROMPTS:
        obj = prompt.split()[-1]
        hits = [c[0] for c in captions if obj in c[3].split()]
        exact = [c for c in hits if c.startswith(prompt)]
        log(f"{prompt!r}: {len(hits)} pictures name a {obj}, {len(exact)} captioned {prompt!r}...: {exact[:4]}")
    apples = [c for c in captions if c[1] == "a red apple" or c[0].startswith("a red apple")]
    if not apples:
        raise SystemExit("no picture is captioned 'a red apple'")


# ============================================================================== train
def load_tokenizer():
    """CLIPTokenizer on models/clip's files (transformers 5 takes paths or a vocab dict and merges),
    checked against ids the real CLIP tokenizer gives."""
    from transformers import CLIPTokenizer
    vocab, merges = os.path.join(CLIP_VOCAB, "vocab.json"), os.path.join(CLIP_VOCAB, "merges.txt")

    def from_dict():
        with open(vocab, encoding="utf-8") as f:
            v = json.load(f)
        with open(merges, encoding="utf-8") as f:
            m = [tuple(line.split()) for line in f.read().strip().split("\n")[1:]]
        return CLIPTokenizer(vocab=v, merges=m, pad_token="<|endoftext|>", model_max_length=77)

    errors = []
    for make in (lambda: CLIPTokenizer(vocab, merges, pad_token="<|endoftext|>", model_max_length=77), from_dict):
        try:
            tok = make()
            got = list(tok("a photo of a cat")["input_ids"])
            if got != [49406, 320, 1125, 539, 320, 2368, 49407]:
                raise ValueError(f"'a photo of a cat' -> {got}")
            return tok
        except Exception as e:  # noqa: BLE001 - try the other way, report both
            errors.append(f"{type(e).__name__}: {e}")
    raise SystemExit("could not load the CLIP tokenizer: " + "; ".join(errors))


def write_tokenizer_folder(folder):
    """tokenizer/ as a small, version-independent CLIPTokenizer folder: models/clip's vocabulary
    and the configs (what transformers' save_pretrained writes adds a 3.6 MB tokenizer.json)."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    special = {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
               "unk_token": "<|endoftext|>"}
    config = dict(special, add_prefix_space=False, clean_up_tokenization_spaces=True, do_lower_case=True,
                  errors="replace", model_max_length=77, tokenizer_class="CLIPTokenizer")
    for name, doc in (("tokenizer_config.json", config), ("special_tokens_map.json", special)):
        with open(os.path.join(folder, name), "w") as f:
            json.dump(doc, f, indent=2, sort_keys=True)
            f.write("\n")
    for name in ("vocab.json", "merges.txt"):
        shutil.copyfile(os.path.join(CLIP_VOCAB, name), os.path.join(folder, name))


def classic_text_encoder_names(path):
    """transformers >= 5.6 saves CLIPTextModel without the "text_model." prefix that every published
    SD folder has; both load (rocmforge and transformers), the classic one in more tools."""
    from safetensors.torch import load_file, save_file
    sd = load_file(path)
    if all(k.startswith("text_model.") for k in sd):
        return
    save_file({k if k.startswith("text_model.") else "text_model." + k: v for k, v in sd.items()}, path,
              metadata={"format": "pt"})


class Data:
    """The prepared pictures on the GPU ([-1, 1], NCHW) and their caption variants' token ids."""

    def __init__(self, path, tok, device, limit=None):
        import numpy as np
        import torch
        d = np.load(path)
        images = d["images"][:limit]
        self.captions = [json.loads(c) for c in d["captions"][:limit]]
        self.n = len(images)
        self.images = (torch.from_numpy(images).to(device).permute(0, 3, 1, 2).float() / 127.5 - 1).contiguous()
        flat = [c for caps in self.captions for c in caps]
        self.variants = len(self.captions[0])
        self.ids = self.tokenize(tok, flat).to(device).view(self.n, self.variants, 77)
        self.empty = self.tokenize(tok, [""]).to(device)[0]

    @staticmethod
    def tokenize(tok, texts):
        # exactly as StableDiffusionPipeline.encode_prompt tokenizes
        return tok(texts, padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids

    def batch(self, size, generator):
        import torch
        idx = torch.randint(0, self.n, (size,), device=self.images.device, generator=generator)
        x = self.images[idx]
        flip = torch.rand(size, device=x.device, generator=generator) < 0.5
        return torch.where(flip[:, None, None, None], x.flip(3), x)


def lr_at(progress, peak, warm):
    """Linear warm-up, then a cosine from `peak` to peak / 10 over the phase's time budget."""
    if warm < 1:
        return peak * warm
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


class Phase:
    """A training phase that ends after `seconds` or `max_steps`, whichever comes first."""

    def __init__(self, name, seconds, max_steps, warmup):
        self.name, self.seconds, self.max_steps, self.warmup = name, seconds, max_steps, warmup
        self.start, self.step, self.history, self.ema_loss, self.finished = time.time(), 0, [], None, False

    def running(self):
        return not self.finished

    def lr(self, peak):
        p = max((time.time() - self.start) / self.seconds, self.step / self.max_steps)
        return lr_at(p, peak, self.step / self.warmup)

    def done_step(self, loss, every=100):
        self.step += 1
        # decided once here, so that the last step is always measured and logged
        self.finished = self.step >= self.max_steps or time.time() - self.start >= self.seconds
        if self.step % 10 == 1 or self.finished:
            v = float(loss)
            if not math.isfinite(v):
                raise SystemExit(f"{self.name}: loss {v} at step {self.step}")
            self.ema_loss = v if self.ema_loss is None else 0.8 * self.ema_loss + 0.2 * v
        if self.step % every == 0 or self.finished:
            t = time.time() - self.start
            self.history.append({"step": self.step, "loss": round(self.ema_loss, 5), "seconds": round(t, 1)})
            log(f"{self.name} step {self.step:6d}  loss {self.ema_loss:.5f}  {self.step / t:.1f} steps/s  {t:.0f}s")


def train_vae(vae, data, args, seconds, max_steps):
    import torch
    import torch.nn.functional as F
    opt = torch.optim.AdamW(vae.parameters(), lr=args.vae_lr, weight_decay=0.0, betas=(0.9, 0.99))
    g = torch.Generator(device=data.images.device).manual_seed(args.seed)
    phase = Phase("vae", seconds, max_steps, warmup=100)
    vae.train()
    while phase.running():
        for group in opt.param_groups:
            group["lr"] = phase.lr(args.vae_lr)
        x = data.batch(args.vae_batch, g)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            posterior = vae.encode(x).latent_dist
            mean, logvar = posterior.mean.float(), posterior.logvar.float()
            z = mean + torch.exp(0.5 * logvar) * torch.randn_like(mean)
            rec = vae.decode(z).sample.float()
        # L1 for edges, L2 for colour; the KL term only keeps the latents tame (SD's VAE: 1e-6 on sums)
        kl = 0.5 * (mean.square() + logvar.exp() - 1 - logvar).mean()
        loss = (rec - x).abs().mean() + F.mse_loss(rec, x) + args.kl_weight * kl
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vae.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        phase.done_step(loss, every=200)
    vae.eval()
    return phase


def encode_latents(vae, data):
    """Latent means and stds of every picture and of its mirror image (float32, eval mode) and
    scaling_factor = 1 / std of latents drawn from them, as SD chose its 0.18215."""
    import torch
    means, stds = [], []
    with torch.no_grad():
        for flip in (False, True):
            for i in range(0, data.n, 256):
                x = data.images[i:i + 256]
                post = vae.encode(x.flip(3) if flip else x).latent_dist
                means.append(post.mean.float())
                stds.append(post.std.float())
    mean, std = torch.cat(means), torch.cat(stds)
    sample = mean + std * torch.randn_like(mean)
    scale = 1.0 / float(sample.std())
    log(f"latents {tuple(mean.shape)}: mean {float(sample.mean()):.4f}, std {float(sample.std()):.4f} "
        f"(per channel {[round(float(v), 3) for v in sample.std(dim=(0, 2, 3))]}), scaling_factor {scale:.5f}")
    return mean, std, scale


def train_unet(unet, te, data, latents, args, seconds, max_steps):
    import torch
    import torch.nn.functional as F
    from diffusers import DDPMScheduler
    mean, std, scale = latents
    noise_schedule = DDPMScheduler(**SD_BETAS)
    params = [p for m in (unet, te) for p in m.parameters()]
    opt = torch.optim.AdamW([{"params": list(unet.parameters()), "peak": args.unet_lr},
                             {"params": list(te.parameters()), "peak": args.te_lr}], weight_decay=0.01,
                            betas=(0.9, 0.99))
    ema = [p.detach().clone() for p in params]
    dev = mean.device
    g = torch.Generator(device=dev).manual_seed(args.seed + 1)
    phase = Phase("unet", seconds, max_steps, warmup=200)
    unet.train()
    te.train()
    while phase.running():
        for group in opt.param_groups:
            group["lr"] = phase.lr(group["peak"])
        b = args.unet_batch
        idx = torch.randint(0, len(mean), (b,), device=dev, generator=g)  # first half plain, second mirrored
        lat = (mean[idx] + std[idx] * torch.randn(mean[idx].shape, device=dev, generator=g)) * scale
        variant = torch.randint(0, data.variants, (b,), device=dev, generator=g)
        ids = data.ids[idx % data.n, variant]
        drop = torch.rand(b, device=dev, generator=g) < CAPTION_DROPOUT  # empty prompt: CFG's unconditional
        ids = torch.where(drop[:, None], data.empty[None, :], ids)
        noise = torch.randn(lat.shape, device=dev, generator=g)
        t = torch.randint(0, SD_BETAS["num_train_timesteps"], (b,), device=dev, generator=g)
        noisy = noise_schedule.add_noise(lat, noise, t)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            context = te(input_ids=ids)[0]
            pred = unet(noisy, t, encoder_hidden_states=context).sample
        loss = F.mse_loss(pred.float(), noise)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        # weight average: short runs sample much better from it than from the last step
        decay = min(args.ema, (1 + phase.step) / (10 + phase.step))
        with torch.no_grad():
            torch._foreach_lerp_(ema, [p.detach() for p in params], 1 - decay)
        phase.done_step(loss, every=250)
    with torch.no_grad():
        for p, e in zip(params, ema):
            p.copy_(e)
    unet.eval()
    te.eval()
    return phase


def build_models(seed, device):
    import torch
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel
    torch.manual_seed(seed)
    vae = AutoencoderKL(**VAE).to(device)
    unet = UNet2DConditionModel(**UNET).to(device)
    te = CLIPTextModel(CLIPTextConfig(**TEXT)).to(device)
    return vae, unet, te


def folder_bytes(folder):
    return {os.path.relpath(os.path.join(d, f), folder): os.path.getsize(os.path.join(d, f))
            for d, _, files in os.walk(folder) for f in files}


def export(out, vae, unet, te, tok, scale):
    """StableDiffusionPipeline.save_pretrained of float16 copies, an Euler scheduler config with the
    training betas, the classic text encoder names and the small tokenizer folder."""
    import copy
    import torch
    from diffusers import EulerDiscreteScheduler, StableDiffusionPipeline
    vae.register_to_config(scaling_factor=scale)
    half = [copy.deepcopy(m).to("cpu", torch.float16) for m in (vae, unet, te)]
    scheduler = EulerDiscreteScheduler(**SD_BETAS, prediction_type="epsilon", timestep_spacing="leading",
                                       steps_offset=1)
    pipe = StableDiffusionPipeline(vae=half[0], unet=half[1], text_encoder=half[2], tokenizer=tok,
                                   scheduler=scheduler, safety_checker=None, feature_extractor=None,
                                   requires_safety_checker=False)
    for sub in ("unet", "vae", "text_encoder", "tokenizer", "scheduler"):
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
    pipe.save_pretrained(out, safe_serialization=True)
    write_tokenizer_folder(os.path.join(out, "tokenizer"))
    classic_text_encoder_names(os.path.join(out, "text_encoder", "model.safetensors"))
    sizes = folder_bytes(out)
    weights = [f for f in sizes if f.endswith(".safetensors")]
    want = {"unet/diffusion_pytorch_model.safetensors", "vae/diffusion_pytorch_model.safetensors",
            "text_encoder/model.safetensors"}
    if set(weights) != want:
        raise SystemExit(f"{out}: weights {sorted(weights)}, expected {sorted(want)}")
    total = sum(sizes.values())
    log(f"saved {out}: {total / 1e6:.2f} MB: " + ", ".join(f"{f} {b}" for f, b in sorted(sizes.items())))
    if total > 30e6:
        raise SystemExit(f"{out} is {total / 1e6:.1f} MB, over the 30 MB the repository allows")
    return total


def reference(out, prompts, seeds, steps, guidance=7.5):
    """Reloads the saved folder (float32) with StableDiffusionPipeline and samples every prompt and
    seed alone (noise from torch's CPU generator, as `rocmforge image --rng cpu --sampler euler`)."""
    import numpy as np
    import torch
    from diffusers import StableDiffusionPipeline
    try:
        pipe = StableDiffusionPipeline.from_pretrained(out, dtype=torch.float32)
        tokenizer_from_folder = True
    except Exception as e:  # noqa: BLE001 - the weights still need their reference; say so
        log(f"WARNING: the folder does not load whole ({type(e).__name__}: {e}); retrying with the tokenizer given")
        pipe = StableDiffusionPipeline.from_pretrained(out, dtype=torch.float32, tokenizer=load_tokenizer())
        tokenizer_from_folder = False
    pipe = pipe.to("cuda")
    pipe.set_progress_bar_config(disable=True)
    rows, runs = [], []
    for prompt in prompts:
        row = []
        for seed in seeds:
            g = torch.Generator("cpu").manual_seed(seed)
            img = pipe(prompt, num_inference_steps=steps, guidance_scale=guidance, generator=g, output_type="np",
                       height=SIZE, width=SIZE).images[0]
            u8 = (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)
            drawn = u8.min(axis=2) < 230
            runs.append({"prompt": prompt, "seed": seed, "mean_rgb": [round(float(v), 4) for v in img.mean(axis=(0, 1))],
                         "drawn_fraction": round(float(drawn.mean()), 4),
                         "colour": colour_name(u8) if drawn.any() else "white"})
            row.append(u8)
        rows.append(np.concatenate(row, axis=1))
        log(f"  {prompt!r}: " + ", ".join(f"seed {r['seed']} {r['colour']} {r['mean_rgb']}" for r in runs[-len(seeds):]))
    settings = {"sampler": "euler (the folder's EulerDiscreteScheduler)", "steps": steps, "guidance": guidance,
                "width": SIZE, "height": SIZE, "rng": "cpu", "negative_prompt": "",
                "tokenizer_loaded_from_folder": tokenizer_from_folder}
    return settings, runs, np.concatenate(rows, axis=0)


def save_png(array, path, zoom=1):
    from PIL import Image
    im = Image.fromarray(array)
    if zoom > 1:
        im = im.resize((im.width * zoom, im.height * zoom), Image.NEAREST)
    im.save(path, optimize=True)
    log(f"wrote {path}")


def reconstructions(vae, data, n=16):
    """n pictures over their VAE reconstructions (posterior means), uint8 HWC."""
    import torch
    with torch.no_grad():
        x = data.images[torch.linspace(0, data.n - 1, n).long()]
        rec = vae.decode(vae.encode(x).latent_dist.mean).sample.clamp(-1, 1)
    grid = torch.cat([torch.cat(list(x), dim=2), torch.cat(list(rec), dim=2)], dim=1)
    return ((grid + 1) * 127.5 + 0.5).clamp(0, 255).byte().permute(1, 2, 0).cpu().numpy()


def run_all(args, tok, data, out, budget, ref_prompts, ref_seeds, ref_steps):
    """Fresh models, both phases, export, reference: the real run and, with tiny budgets, the check."""
    vae, unet, te = build_models(args.seed, "cuda")
    vae_phase = train_vae(vae, data, args, *budget["vae"])
    latents = encode_latents(vae, data)
    unet_phase = train_unet(unet, te, data, latents, args, *budget["unet"])
    total = export(out, vae, unet, te, tok, latents[2])
    settings, runs, grid = reference(out, ref_prompts, ref_seeds, ref_steps)
    return dict(vae=vae, unet=unet, te=te, vae_phase=vae_phase, unet_phase=unet_phase, scale=latents[2],
                total=total, settings=settings, runs=runs, grid=grid)


def train(args):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before huggingface_hub is imported: all is local
    import numpy as np
    import torch
    import diffusers
    import transformers
    t_start = time.time()
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "diffusers": diffusers.__version__, "numpy": np.__version__, "python": sys.version.split()[0]}
    log(f"versions: {versions}; device {torch.cuda.get_device_name(0)}")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    tok = load_tokenizer()
    data = Data(args.dataset, tok, "cuda", limit=256 if args.smoke else None)
    log(f"data: {data.n} pictures, {data.variants} captions each, e.g. {data.captions[0]}; {time.time() - t_start:.1f}s")
    out_dir = os.environ.get("OUT")
    if not args.smoke:
        # every code path once with tiny budgets, so a broken setup fails now, not in 7 minutes
        t0 = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            run_all(args, tok, data, tmp, {"vae": (60, 3), "unet": (60, 3)}, PROMPTS[:1], [0], 2)
        log(f"preflight passed in {time.time() - t0:.1f}s")
    out = args.out or tempfile.mkdtemp(prefix="sd-demo-smoke-")
    os.makedirs(out, exist_ok=True)
    if args.smoke:
        r = run_all(args, tok, data, out, {"vae": (60, 20), "unet": (60, 20)}, PROMPTS[:2], [0, 1], 4)
    else:
        r = run_all(args, tok, data, out, {"vae": (args.vae_seconds, 10 ** 9), "unet": (args.unet_seconds, 10 ** 9)},
                    PROMPTS, list(range(args.seeds)), args.steps)
    save_png(r["grid"], os.path.join(out, "samples.png"))
    if out_dir:
        save_png(r["grid"], os.path.join(out_dir, "sd-demo-samples.png"), zoom=4)
        save_png(reconstructions(r["vae"], data), os.path.join(out_dir, "sd-demo-vae-reconstructions.png"), zoom=4)
    write_reference(out, args, r, data, versions, time.time() - t_start)
    log(f"done in {time.time() - t_start:.0f}s: {out}")


def write_reference(out, args, r, data, versions, seconds):
    import torch
    params = {name: sum(p.numel() for p in r[name].parameters()) for name in ("unet", "vae", "te")}
    phases = {}
    for name in ("vae", "unet"):
        phase = r[f"{name}_phase"]
        phases[name] = {"steps": phase.step, "seconds": phase.history[-1]["seconds"], "final_loss": phase.ema_loss,
                        "history": phase.history}
    ref = {
        "what": "diffusers StableDiffusionPipeline outputs of this folder (float32, reloaded from the saved files)",
        "settings": r["settings"], "runs": r["runs"], "samples_png": "samples.png: rows = prompts, columns = seeds",
        "training": {"parameters": {"unet": params["unet"], "vae": params["vae"], "text_encoder": params["te"],
                                    "total": sum(params.values())},
                     "folder_bytes": r["total"], "scaling_factor": r["scale"], "pictures": data.n,
                     "vae": dict(phases["vae"], batch=args.vae_batch, lr=args.vae_lr, kl_weight=args.kl_weight),
                     "unet_and_text_encoder": dict(phases["unet"], batch=args.unet_batch, unet_lr=args.unet_lr,
                                                   te_lr=args.te_lr, ema=args.ema, caption_dropout=CAPTION_DROPOUT),
                     "script_seconds": round(seconds, 1), "smoke": args.smoke,
                     "device": torch.cuda.get_device_name(0), "seed": args.seed},
        "versions": versions,
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    log(f"parameters: {ref['training']['parameters']}; reference.json written")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare")
    t = sub.add_parser("train")
    t.add_argument("--dataset", default=DATASET)
    t.add_argument("--out", help="default: models/sd-demo (--smoke: a new scratch folder)")
    t.add_argument("--smoke", action="store_true", help="a few steps of everything, into a scratch folder")
    t.add_argument("--vae-seconds", type=float, default=90)
    t.add_argument("--unet-seconds", type=float, default=300)
    t.add_argument("--vae-batch", type=int, default=64)
    t.add_argument("--vae-lr", type=float, default=1e-3)
    t.add_argument("--kl-weight", type=float, default=1e-3)
    t.add_argument("--unet-batch", type=int, default=256)
    t.add_argument("--unet-lr", type=float, default=6e-4)
    t.add_argument("--te-lr", type=float, default=3e-4)
    t.add_argument("--ema", type=float, default=0.999)
    t.add_argument("--steps", type=int, default=20, help="sampling steps of the reference images")
    t.add_argument("--seeds", type=int, default=4, help="reference seeds per prompt")
    t.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a)
    else:
        if a.out is None and not a.smoke:
            a.out = os.path.join(ROOT, "models", "sd-demo")
        train(a)


if __name__ == "__main__":
    main()
