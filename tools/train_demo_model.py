#!/usr/bin/env python3
"""Trains rocmforge's shipped demo model, models/kjv-llama: a ~9.5M-parameter Llama-architecture
model trained from scratch on the King James Bible (public domain), with its own 4096-token
byte-level BPE tokenizer (Llama 3 pre-tokenizer regex). It is a demo of the engine, not a useful
assistant.

Steps:
  1. prepare (this machine, Debian):  python3 tools/train_demo_model.py prepare
     Fetches the Debian packages bible-kjv-text and bible-kjv with `apt-get download` into
     .cache/corpus/, unpacks them there (no installation), dumps every verse with the package's
     `bible` program and writes .cache/corpus/kjv.txt (a "Book N" line per chapter, one verse a
     line, no verse numbers, a blank line between chapters). The last chapters of Revelation
     (<= 30 KB, about 0.7% of the text) are the held-out text: models/kjv-llama/heldout.txt.
  2. train (GPU machine, torch + transformers + tokenizers):
     python3 tools/train_demo_model.py train --corpus .cache/corpus/kjv.txt --out models/kjv-llama
     Trains the tokenizer on the training text (everything before the held-out text, minus the
     last ~40 KB kept as a development set for picking the best checkpoint), trains the model in
     bf16 autocast with AdamW and a cosine schedule, saves a Hugging Face folder in bf16, then
     reloads the saved folder in float32 on the CPU to compute the held-out perplexity and the
     greedy continuations recorded in reference.json, and writes model.q8_0.gguf with
     tools/fixtures/hf_to_gguf.py.

Perplexity (same definition as `rocmforge perplexity --ctx 512`): ids = tokenizer(heldout,
add_special_tokens=True); consecutive non-overlapping chunks of 512 tokens; in each chunk tokens
1..len-1 are scored given the earlier tokens of that chunk; ppl = exp(mean NLL of all scored
tokens).
"""
import argparse
import concurrent.futures
import glob
import json
import math
import multiprocessing
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "fixtures"))

HELDOUT_MAX_BYTES = 30000
DEV_CHARS = 40000
N_CTX = 512
VOCAB = 4096
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
PROMPTS = ["In the beginning", "And the LORD said unto Moses,", "Blessed are the",
           "The kingdom of heaven is like"]
# used in order in place of a prompt above whose greedy path has a near-tie (min margin < MARGIN)
ALT_PROMPTS = ["For God so loved the world,", "The LORD is my shepherd;", "And it came to pass, when",
               "Thus saith the LORD of hosts,", "Now the serpent was", "Let there be"]
MARGIN = 0.01
N_GREEDY = 48
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
MODEL = dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=5, num_attention_heads=6,
             num_key_value_heads=2, head_dim=64, max_position_embeddings=N_CTX, rms_norm_eps=1e-5,
             tie_word_embeddings=True, attention_bias=False, mlp_bias=False)
ROPE = {"rope_type": "default", "rope_theta": 10000.0}


def log(*a):
    print(*a, flush=True)


# ============================================================================== prepare
def prepare(args):
    cache = os.path.join(ROOT, ".cache", "corpus")
    debs = os.path.join(cache, "debs")
    os.makedirs(debs, exist_ok=True)
    if not glob.glob(os.path.join(debs, "bible-kjv_*.deb")) or not glob.glob(os.path.join(debs, "bible-kjv-text_*.deb")):
        subprocess.run(["apt-get", "download", "bible-kjv", "bible-kjv-text"], cwd=debs, check=True)
    root = os.path.join(cache, "root")
    for deb in sorted(glob.glob(os.path.join(debs, "*.deb"))):
        subprocess.run(["dpkg", "-x", deb, root], check=True)
    bible = os.path.join(root, "usr", "bin", "bible")
    out = subprocess.run([bible, "-p", os.path.join(root, "usr", "lib"), "-l100000", "Gen1:1-Rev22:21"],
                         check=True, capture_output=True, text=True).stdout
    chapters = []  # (title, [verses])
    for line in out.splitlines():
        if not line.strip():
            continue
        m = re.match(r"^\s+\d+ (.*)$", line)
        if m:
            chapters[-1][1].append(m.group(1).strip())
        else:
            chapters.append((line.strip(), []))
    texts = [title + "\n" + "\n".join(verses) + "\n" for title, verses in chapters]
    log(f"{len(chapters)} chapters, {sum(len(v) for _, v in chapters)} verses")
    corpus = "\n".join(texts)
    with open(os.path.join(cache, "kjv.txt"), "w", encoding="utf-8") as f:
        f.write(corpus)
    # held-out: the longest tail of whole chapters that fits in HELDOUT_MAX_BYTES
    k = len(texts)
    while k > 0 and len("\n".join(texts[k - 1:]).encode()) <= HELDOUT_MAX_BYTES:
        k -= 1
    heldout = "\n".join(texts[k:])
    assert corpus.endswith(heldout)
    os.makedirs(os.path.join(ROOT, "models", "kjv-llama"), exist_ok=True)
    with open(os.path.join(ROOT, "models", "kjv-llama", "heldout.txt"), "w", encoding="utf-8") as f:
        f.write(heldout)
    log(f"kjv.txt: {len(corpus)} chars; heldout.txt: {chapters[k][0]} .. {chapters[-1][0]}, "
        f"{len(heldout.encode())} bytes ({100 * len(heldout) / len(corpus):.2f}%)")


# ============================================================================== train
def split_corpus(corpus_path, heldout_path):
    with open(corpus_path, encoding="utf-8") as f:
        corpus = f.read()
    with open(heldout_path, encoding="utf-8") as f:
        heldout = f.read()
    if not corpus.endswith(heldout):
        raise SystemExit("the corpus does not end with the held-out text")
    rest = corpus[:len(corpus) - len(heldout)]
    cut = rest.rfind("\n\n", 0, len(rest) - DEV_CHARS) + 2
    return rest[:cut], rest[cut:], heldout


def build_tokenizer(train_text):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    import hf_to_gguf as H
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(H.LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(SPECIALS), initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[], show_progress=False)
    t.train_from_iterator(train_text.split("\n\n"), trainer)
    m = json.loads(t.to_str())["model"]
    tok = Tokenizer(models.BPE(vocab=m["vocab"], merges=H.parse_merges(m), ignore_merges=True))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    bos = SPECIALS[0]
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                      special_tokens=[(bos, tok.token_to_id(bos))])])
    assert tok.get_vocab_size(with_added_tokens=True) == VOCAB, tok.get_vocab_size(with_added_tokens=True)
    return tok


def save_tokenizer(tok, d, tf_version):
    tok.save(os.path.join(d, "tokenizer.json"))
    added = {str(t["id"]): {"content": t["content"], "lstrip": False, "normalized": False, "rstrip": False,
                            "single_word": False, "special": True}
             for t in json.loads(tok.to_str())["added_tokens"]}
    tc = {"added_tokens_decoder": added, "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
          "clean_up_tokenization_spaces": False, "model_max_length": N_CTX,
          "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": CHAT_TEMPLATE}
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2, ensure_ascii=False)
        f.write("\n")
    gc = {"bos_token_id": tok.token_to_id("<|begin_of_text|>"),
          "eos_token_id": [tok.token_to_id("<|end_of_text|>"), tok.token_to_id("<|eot_id|>")],
          "do_sample": False, "transformers_version": tf_version}
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump(gc, f, indent=2)
        f.write("\n")


def encode_stream(tok, text):
    """BOS + the text's tokens, encoding chapter by chapter (joined by their "\\n\\n")."""
    parts = text.split("\n\n")
    parts = [p + "\n\n" for p in parts[:-1]] + [parts[-1]]
    ids = [tok.token_to_id(SPECIALS[0])]
    for enc in tok.encode_batch(parts, add_special_tokens=False):
        ids.extend(enc.ids)
    return ids


def chunked_ppl(model, ids, n_ctx, device, dtype):
    import torch
    total, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(ids), n_ctx):
            chunk = ids[i:i + n_ctx]
            if len(chunk) < 2:
                continue
            x = torch.tensor([chunk], device=device)
            logits = model(input_ids=x, use_cache=False).logits[0].to(dtype)
            logp = torch.log_softmax(logits[:-1], dim=-1)
            tgt = x[0, 1:]
            total += float(-logp[torch.arange(len(tgt), device=device), tgt].sum())
            n += len(tgt)
    return math.exp(total / n), n


def train(args):
    import torch
    import torch.nn.functional as F
    import tokenizers
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
    import hf_to_gguf as H

    t_start = time.time()
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "tokenizers": tokenizers.__version__, "python": sys.version.split()[0]}
    log(f"versions: {versions}")
    out = args.out
    os.makedirs(out, exist_ok=True)
    heldout_path = args.heldout or os.path.join(ROOT, "models", "kjv-llama", "heldout.txt")
    train_text, dev_text, heldout = split_corpus(args.corpus, heldout_path)
    if os.path.abspath(heldout_path) != os.path.abspath(os.path.join(out, "heldout.txt")):
        with open(os.path.join(out, "heldout.txt"), "w", encoding="utf-8") as f:
            f.write(heldout)
    log(f"train {len(train_text)} chars, dev {len(dev_text)}, held-out {len(heldout)}")

    t0 = time.time()
    tok = build_tokenizer(train_text)
    train_ids = encode_stream(tok, train_text)
    dev_ids = encode_stream(tok, dev_text)
    log(f"tokenizer trained and corpus encoded in {time.time() - t0:.1f}s: {len(train_ids)} train tokens "
        f"({len(train_text) / len(train_ids):.2f} chars/token), {len(dev_ids)} dev tokens")

    torch.manual_seed(args.seed)
    dev = "cuda"
    cfg_kw = dict(MODEL, vocab_size=VOCAB, bos_token_id=tok.token_to_id(SPECIALS[0]),
                  eos_token_id=tok.token_to_id(SPECIALS[1]), rope_parameters=dict(ROPE))
    try:
        cfg = LlamaConfig(**cfg_kw)
    except TypeError:
        cfg_kw.pop("rope_parameters")
        cfg = LlamaConfig(rope_theta=ROPE["rope_theta"], **cfg_kw)
    model = LlamaForCausalLM(cfg).to(dev)
    model.tie_weights()
    hooks = []
    if args.dropout > 0:
        # residual dropout (attention and MLP outputs) and embedding dropout during training only;
        # the saved model is a plain LlamaForCausalLM
        def drop(_m, _inp, out):
            if isinstance(out, tuple):
                return (F.dropout(out[0], args.dropout, model.training),) + tuple(out[1:])
            return F.dropout(out, args.dropout, model.training)
        hooks.append(model.model.embed_tokens.register_forward_hook(drop))
        for layer in model.model.layers:
            hooks.append(layer.self_attn.register_forward_hook(drop))
            hooks.append(layer.mlp.register_forward_hook(drop))
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.2f}M parameters")
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    data = torch.tensor(train_ids, dtype=torch.long, device=dev)
    dev_t = torch.tensor(dev_ids, dtype=torch.long, device=dev)
    offs = torch.arange(N_CTX + 1, device=dev)
    g = torch.Generator(device=dev).manual_seed(args.seed)

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        p = (step - args.warmup) / max(1, args.steps - args.warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))

    def dev_loss():
        model.eval()
        total, n = 0.0, 0
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            nchunks = (len(dev_t) - 1) // N_CTX
            x = dev_t[:nchunks * N_CTX + 1]
            inp = x[:-1].view(nchunks, N_CTX)
            tgt = x[1:].view(nchunks, N_CTX)
            logits = model(input_ids=inp, use_cache=False).logits.float()
            loss = F.cross_entropy(logits.view(-1, VOCAB), tgt.reshape(-1), reduction="sum")
            total, n = float(loss), tgt.numel()
        model.train()
        return total / n

    history = []
    best = (float("inf"), -1, None)
    model.train()
    t_train = time.time()
    step = 0
    ema = None
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        ix = torch.randint(0, len(data) - N_CTX - 1, (args.batch,), device=dev, generator=g)
        xb = data[ix[:, None] + offs[None, :]]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=xb[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), xb[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        lv = float(loss.detach()) if (step % 10 == 0 or step == args.steps - 1) else None
        if lv is not None:
            ema = lv if ema is None else 0.7 * ema + 0.3 * lv
        if (step + 1) % args.eval_every == 0 or step == args.steps - 1:
            dl = dev_loss()
            history.append({"step": step + 1, "train_loss": round(ema, 4), "dev_loss": round(dl, 4),
                            "lr": lr_at(step), "seconds": round(time.time() - t_train, 1)})
            log(f"step {step + 1:5d}  train {ema:.4f}  dev {dl:.4f}  lr {lr_at(step):.2e}  {time.time() - t_train:.0f}s")
            if dl < best[0]:
                best = (dl, step + 1, {k: v.detach().clone() for k, v in model.state_dict().items()})
        if time.time() - t_train > args.max_seconds:
            log(f"time budget reached at step {step + 1}")
            break
    train_seconds = time.time() - t_train
    log(f"trained {step + 1} steps in {train_seconds:.0f}s; best dev loss {best[0]:.4f} at step {best[1]}")
    model.load_state_dict(best[2])
    for h in hooks:
        h.remove()

    # save in bf16
    model = model.to(torch.bfloat16).cpu()
    model.save_pretrained(out, max_shard_size=args.max_shard)
    save_tokenizer(tok, out, transformers.__version__)
    log("saved: " + ", ".join(f"{f} {os.path.getsize(os.path.join(out, f))}" for f in sorted(os.listdir(out))))
    del model
    torch.cuda.empty_cache()

    # everything below from the saved folder, in float32 on the CPU
    torch.set_num_threads(min(16, os.cpu_count() or 1))
    hf_tok = AutoTokenizer.from_pretrained(out)
    m32 = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    ids = hf_tok(heldout, add_special_tokens=True)["input_ids"]
    assert ids == tok.encode(heldout).ids, "transformers' tokenizer disagrees with tokenizer.json"
    t0 = time.time()
    ppl32, n_scored = chunked_ppl(m32, ids, N_CTX, "cpu", torch.float32)
    dev_ppl32, _ = chunked_ppl(m32, dev_ids, N_CTX, "cpu", torch.float32)
    m64 = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).to(torch.float64).eval()
    ppl64, _ = chunked_ppl(m64, ids, N_CTX, "cpu", torch.float64)
    del m64
    log(f"held-out: {len(ids)} tokens, {n_scored} scored; perplexity {ppl32:.4f} (float32), {ppl64:.4f} (float64); "
        f"{time.time() - t0:.1f}s")

    def run_greedy(p):
        pids = hf_tok(p, add_special_tokens=True)["input_ids"]
        cur = list(pids)
        margins = []
        with torch.no_grad():
            for _ in range(N_GREEDY):
                lg = m32(input_ids=torch.tensor([cur]), use_cache=False).logits[0, -1]
                top = torch.topk(lg, 2)
                margins.append(float(top.values[0] - top.values[1]))
                cur.append(int(top.indices[0]))
        gids = cur[len(pids):]
        log(f"greedy {p!r} -> {hf_tok.decode(gids)!r} (min margin {min(margins):.4g})")
        return {"prompt": p, "prompt_ids": pids, "greedy_ids": gids, "min_margin": min(margins),
                "text": hf_tok.decode(gids)}

    greedy, skipped = [], []
    alts = list(ALT_PROMPTS)
    for p in PROMPTS:
        g = run_greedy(p)
        while g["min_margin"] < MARGIN and alts:
            skipped.append({"prompt": g["prompt"], "min_margin": g["min_margin"]})
            g = run_greedy(alts.pop(0))
        greedy.append(g)

    # Q8_0 GGUF and its perplexity (from the dequantized weights)
    t0 = time.time()
    with concurrent.futures.ProcessPoolExecutor(min(16, os.cpu_count() or 1),
                                                mp_context=multiprocessing.get_context("spawn")) as pool:
        eff = H.convert(out, os.path.join(out, "model.q8_0.gguf"), "q8_0", name="kjv-llama", pool=pool,
                        log=lambda *a: None)
    from array import array
    sd = dict(m32.named_parameters())
    with torch.no_grad():
        for name, raw in eff.items():
            a = array("f")
            a.frombytes(raw)
            sd[name].copy_(torch.tensor(a.tolist(), dtype=torch.float32).reshape(sd[name].shape))
    ppl_q8, _ = chunked_ppl(m32, ids, N_CTX, "cpu", torch.float32)
    log(f"model.q8_0.gguf written in {time.time() - t0:.1f}s; its held-out perplexity {ppl_q8:.4f}")

    last = history[-1]
    ref = {
        "heldout_file": "heldout.txt", "n_ctx": N_CTX, "add_special_tokens": True,
        "n_tokens": len(ids), "n_scored": n_scored,
        "perplexity": ppl32, "perplexity_float64": ppl64, "perplexity_q8_0_gguf": ppl_q8,
        "greedy": greedy, "greedy_prompts_skipped_for_near_ties": skipped,
        "training": {"parameters": n_params, "steps": step + 1, "best_step": best[1],
                     "batch": args.batch, "seq_len": N_CTX, "lr": args.lr, "warmup": args.warmup,
                     "dropout": args.dropout,
                     "seconds": round(train_seconds, 1), "final_train_loss": last["train_loss"],
                     "final_dev_loss": last["dev_loss"], "best_dev_loss": round(best[0], 4),
                     "dev_perplexity_saved_bf16": dev_ppl32,
                     "train_tokens": len(train_ids), "dev_tokens": len(dev_ids), "history": history,
                     "device": torch.cuda.get_device_name(0), "seed": args.seed},
        "versions": versions,
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    log(f"done in {time.time() - t_start:.0f}s: " +
        ", ".join(f"{f} {os.path.getsize(os.path.join(out, f))}" for f in sorted(os.listdir(out))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare")
    t = sub.add_parser("train")
    t.add_argument("--corpus", default=os.path.join(ROOT, ".cache", "corpus", "kjv.txt"))
    t.add_argument("--heldout", help="default: models/kjv-llama/heldout.txt")
    t.add_argument("--out", default=os.path.join(ROOT, "models", "kjv-llama"))
    t.add_argument("--steps", type=int, default=500)
    t.add_argument("--dropout", type=float, default=0.1)
    t.add_argument("--warmup", type=int, default=50)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--eval-every", type=int, default=50)
    t.add_argument("--max-seconds", type=float, default=170)
    t.add_argument("--max-shard", default="12MB")
    t.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a)
    else:
        train(a)


if __name__ == "__main__":
    main()
