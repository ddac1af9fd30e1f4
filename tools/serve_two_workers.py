#!/usr/bin/env python3
"""A language model and an image model served by two `rocmforge serve` processes on one GPU at once
(issue #24): both start, both answer requests sent to them together, and both stop cleanly.

  python3 tools/serve_two_workers.py --binary build/cuda/rocmforge -- --device cuda

The models are the test fixtures (a tiny Llama 3 and a tiny SD 1.5), so that the check is about the
processes sharing the device, not about speed. Exits non-zero naming what failed.
"""
import argparse
import threading
from pathlib import Path

from serve_process import post, start

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT / "tests/fixtures/models/llama3"
IMAGE = ROOT / "tests/fixtures/sd/models/sd15/diffusers"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("serve_args", nargs="*", help="after --: more `rocmforge serve` arguments for both")
    args = parser.parse_args()
    text, text_base = start(args.binary, TEXT, args.serve_args)
    image, image_base = start(args.binary, IMAGE, args.serve_args)
    statuses, lock = [], threading.Lock()

    def send(base, path, body):
        try:
            post(base, path, body)
            status = 200
        except OSError as e:  # an HTTP error (urllib's HTTPError) or a dead server
            status = repr(e)
        with lock:
            statuses.append((path, status))

    jobs = [(text_base, "/v1/completions", {"prompt": "In the beginning", "max_tokens": 32})] * 8
    jobs += [(image_base, "/sdapi/v1/txt2img", {"prompt": "a red apple", "steps": 4, "width": 256, "height": 256,
                                                 "batch_size": 2})] * 4
    threads = [threading.Thread(target=send, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = []
    for server in (text, image):
        server.terminate()
        codes.append(server.wait(timeout=60))
    failed = [s for s in statuses if s[1] != 200]
    print(f"{len(statuses) - len(failed)} of {len(statuses)} requests answered 200; exit codes {codes}")
    if failed or codes != [0, 0]:
        raise SystemExit(f"failed: {failed}, exit codes {codes}")


if __name__ == "__main__":
    main()
