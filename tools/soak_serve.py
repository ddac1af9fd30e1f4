#!/usr/bin/env python3
"""A soak of `rocmforge serve` (issue #29): for --minutes, --clients concurrent clients send random
requests (completions and chats, streamed or whole, several choices, JSON-schema output) and
misbehave on purpose (hanging up mid-stream, prompts longer than the context, broken bodies). Then
it checks what a worker left running for weeks must hold: no 5xx and no request unanswered, each
deliberate mistake a 400, the server still healthy, nothing running or waiting and every KV block
free once idle, and its memory flat: the process's RSS and its GPU memory (nvidia-smi, where there
is one) sampled each minute, the last within a bound of the first minute's. Exit 1 when a check
fails. Standard library only.

    python3 tools/soak_serve.py --binary build/cuda/rocmforge [-m MODEL] [--minutes 20] [--clients 48]
        [--seed 1] [-- extra serve flags]
"""
import argparse
import http.client
import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_process  # noqa: E402

argv = sys.argv[1:]
serve_flags = argv[argv.index("--") + 1:] if "--" in argv else []
parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--binary", default="build/cpu/rocmforge")
parser.add_argument("-m", "--model", default="models/kjv-llama")
parser.add_argument("--minutes", type=float, default=20)
parser.add_argument("--clients", type=int, default=48)
parser.add_argument("--seed", type=int, default=1)
opts = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)

WORDS = "and the lord said unto moses in the beginning god created heaven earth light darkness".split()
SCHEMA = {"type": "object", "properties": {"book": {"enum": ["Genesis", "Exodus"]},
                                           "chapter": {"type": "integer", "minimum": 1, "maximum": 50}},
          "required": ["book", "chapter"], "additionalProperties": False}


def prompt(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


# Each kind of request: (path, body, the status it must get, hang up after this many chunks or None).
def make_request(rng):
    kind = rng.choices(["complete", "chat", "hang_up", "choices", "schema", "too_long", "broken"],
                       [30, 20, 15, 10, 10, 8, 7])[0]
    sampling = {"max_tokens": rng.randint(1, 160), "temperature": rng.choice([0, 0.7, 1.2]), "seed": rng.randrange(1 << 30)}
    if kind == "complete":
        return kind, "/v1/completions", {"prompt": prompt(rng, rng.randint(1, 200)), "stream": rng.random() < 0.5, **sampling}, 200, None
    if kind == "chat":
        messages = [{"role": "user", "content": prompt(rng, rng.randint(1, 60))}]
        return kind, "/v1/chat/completions", {"messages": messages, "stream": rng.random() < 0.5, **sampling}, 200, None
    if kind == "hang_up":
        return kind, "/v1/completions", {"prompt": prompt(rng, 20), "stream": True, **sampling, "max_tokens": 400}, 200, rng.randint(1, 8)
    if kind == "choices":
        return kind, "/v1/completions", {"prompt": prompt(rng, 10), "n": rng.randint(2, 4), **sampling}, 200, None
    if kind == "schema":
        body = {"messages": [{"role": "user", "content": "Name a chapter."}], "max_tokens": 200, "seed": sampling["seed"],
                "response_format": {"type": "json_schema", "json_schema": {"name": "verse", "schema": SCHEMA}}}
        return kind, "/v1/chat/completions", body, 200, None
    if kind == "too_long":  # past any context the server takes by default (at most 4096 tokens)
        return kind, "/v1/completions", {"prompt": prompt(rng, 20000), "max_tokens": 4}, 400, None
    return kind, "/v1/completions", '{"prompt": "In the beginning", "max_tokens": ', 400, None


def send(base, path, body, hang_up_after):
    """The status, or for a deliberate hang-up "hung up"; an exception is a request left unanswered."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=600)
    try:
        conn.request("POST", path, body if isinstance(body, str) else json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        if hang_up_after is not None and response.status == 200:
            for _ in range(hang_up_after):
                if not response.readline():
                    break
            return "hung up"
        data = response.read()
        if response.status == 200 and path == "/v1/chat/completions" and "response_format" in body:
            json.loads(json.loads(data)["choices"][0]["message"]["content"])  # the schema's object
        return response.status
    finally:
        conn.close()


def metrics(base):
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line and not line.startswith("#")}


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def gpu_mb(pid):
    """The process's GPU memory by nvidia-smi, or None without one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    used = [float(f.split(",")[1]) for f in out.splitlines() if f.split(",")[0].strip() == str(pid)]
    return used[0] if used else None


def main():
    server, base = serve_process.start(opts.binary, opts.model, serve_flags)
    outcomes, failures, lock = Counter(), [], threading.Lock()
    deadline = time.monotonic() + opts.minutes * 60

    def client(index):
        rng = random.Random(opts.seed * 100003 + index)
        while time.monotonic() < deadline:
            kind, path, body, expected, hang_up_after = make_request(rng)
            try:
                status = send(base, path, body, hang_up_after)
            except Exception as error:  # noqa: BLE001: any of them is a request left unanswered
                status = f"no answer ({type(error).__name__}: {error})"
            ok = status in (expected, "hung up", 429)
            with lock:
                outcomes[(kind, status if ok else "failed")] += 1
                if not ok and len(failures) < 20:
                    failures.append(f"{kind} {path}: {status}, expected {expected}")

    samples = [(0.0, rss_mb(server.pid), gpu_mb(server.pid))]
    threads = [threading.Thread(target=client, args=(i,)) for i in range(opts.clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        time.sleep(1)
        if time.monotonic() - start >= 60 * len(samples):
            samples.append((time.monotonic() - start, rss_mb(server.pid), gpu_mb(server.pid)))
    time.sleep(2)  # idle: hung-up streams end, their blocks come back
    after = metrics(base)
    samples.append((time.monotonic() - start, rss_mb(server.pid), gpu_mb(server.pid)))
    healthy = serve_process.post(base, "/v1/completions", {"prompt": "In the beginning", "max_tokens": 4})
    server.terminate()
    server.wait()

    print(f"{opts.clients} clients for {opts.minutes:g} min against {opts.model}:")
    for (kind, status), count in sorted(outcomes.items(), key=str):
        print(f"  {kind:9} {status!s:8} {count}")
    print("  minute  RSS MB  GPU MiB")
    for seconds, rss, gpu in samples:
        print(f"  {seconds / 60:6.1f}  {rss:6.0f}  {gpu if gpu is not None else '-':>7}")
    first, last = samples[1] if len(samples) > 2 else samples[0], samples[-1]
    checks = {
        "every request answered as expected": not failures,
        "nothing running or waiting after": after["rocmforge_running_sequences"] == 0 and after["rocmforge_queue_depth"] == 0,
        "every KV block free after": after["rocmforge_kv_cache_blocks_used"] == 0,
        "still answering": bool(healthy.get("choices")),
        "RSS within 64 MB of the first minute's": last[1] <= first[1] + 64,
        # The CUDA runtime loads each kernel's module at its first use, so a kernel that only an
        # uncommon batch shape runs adds a few MiB minutes in; a leak grows with the requests.
        "GPU memory within 32 MiB of the first minute's": last[2] is None or first[2] is None or last[2] <= first[2] + 32,
    }
    for line in failures:
        print("  failure:", line)
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
