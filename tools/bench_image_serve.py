#!/usr/bin/env python3
"""Images per minute from `rocmforge serve` with an image model (issue #24's serving figure):
the published SD 1.5 (or SDXL) config with random weights, saved once as a diffusers folder
(fp16 safetensors, tools/bench_sd_diffusers.py's build), served on the GPU, and driven through
POST /v1/images/generations at the model's native size (20 Euler a steps, guidance 7.5) by 1, 4,
... concurrent clients. After one warm-up image, each client count runs --images images in all;
prints images per minute (images over the wall time of the whole run) and the median seconds a
request took, with the server's own steps per second from /metrics.

  PYTHONPATH=<diffusers>/src python3 tools/bench_image_serve.py --binary build/cuda/rocmforge \
      --model sd15 --clients 1,4 --images 16 -- --device cuda

Needs torch with CUDA, transformers and diffusers to make the folder (not to serve it).
"""
import argparse
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from serve_process import post, start


def make_folder(model, folder):
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_sd_diffusers import build  # noqa: E402 (needs torch and diffusers)
    pipe = build(model, Path(__file__).parent.parent / "models" / "clip")
    pipe.save_pretrained(folder, safe_serialization=True)
    del pipe


def metric(base, name):
    with urllib.request.urlopen(base + "/metrics") as r:
        text = r.read().decode()
    found = re.search(rf"^rocmforge_{name} (\S+)$", text, re.M)
    return float(found.group(1)) if found else float("nan")


def run(base, clients, images, size):
    latencies = []
    lock = threading.Lock()
    remaining = [images]

    def client(index):
        while True:
            with lock:
                if remaining[0] == 0:
                    return
                remaining[0] -= 1
                seed = remaining[0]
            start = time.perf_counter()
            body = {"prompt": "a photograph of an astronaut riding a horse", "size": f"{size}x{size}", "seed": seed}
            assert len(post(base, "/v1/images/generations", body)["data"]) == 1
            with lock:
                latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return 60 * images / wall, statistics.median(latencies)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--model", choices=["sd15", "sdxl"], default="sd15")
    parser.add_argument("--folder", type=Path, help="where the random-weight folder is kept (default build/<model>-random)")
    parser.add_argument("--clients", default="1,4")
    parser.add_argument("--images", type=int, default=16, help="images per client count")
    parser.add_argument("--make-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("serve_args", nargs="*", help="after --: more `rocmforge serve` arguments")
    args = parser.parse_args()
    folder = args.folder or Path("build") / f"{args.model}-random"
    if args.make_only:
        return make_folder(args.model, folder)
    if not (folder / "model_index.json").exists():
        # In a process of its own, so that PyTorch's hold on the GPU ends before the server starts.
        subprocess.run([sys.executable, __file__, "--binary", args.binary, "--model", args.model, "--folder", str(folder),
                        "--make-only"], check=True)
    size = 512 if args.model == "sd15" else 1024
    server, base = start(args.binary, folder, args.serve_args)
    try:
        post(base, "/v1/images/generations", {"prompt": "warm-up", "size": f"{size}x{size}", "seed": 0})
        print(f"{'clients':>8} {'images':>7} {'images/min':>11} {'median s/request':>17} {'server it/s':>12}")
        for clients in (int(c) for c in args.clients.split(",")):
            per_minute, latency = run(base, clients, args.images, size)
            print(f"{clients:>8} {args.images:>7} {per_minute:>11.1f} {latency:>17.3f} "
                  f"{metric(base, 'image_steps_per_second'):>12.2f}", flush=True)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
