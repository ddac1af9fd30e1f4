#!/usr/bin/env python3
# Serving benchmark: N concurrent streaming clients against `rocmforge serve`, for each N the
# output tokens/s of the whole server, time to first token and inter-token latency (p50, p99).
# Starts the server itself (or measures one already running with --url). Standard library only.
#
#   python3 tools/bench_serve.py [--binary build/cpu/rocmforge] [-m MODEL] [--url http://HOST:PORT]
#        [--concurrency 1,8,32,64] [--rounds 2] [--max-tokens 128] [--json-schema FILE] [--json]
#        [-- extra serve flags]
#
# --json-schema constrains every request to the schema (response_format json_schema): the cost of
# structured output. tools/bench_schema.json asks for at least 1000 records, so that constrained
# requests run to the token limit as free ones do and the batch stays full.
import argparse
import http.client
import json
import math
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

argv = sys.argv[1:]
serve_flags = argv[argv.index('--') + 1:] if '--' in argv else []
parser = argparse.ArgumentParser(description='Serving benchmark for rocmforge serve')
parser.add_argument('--binary', default='build/cpu/rocmforge')
parser.add_argument('-m', '--model')
parser.add_argument('--url')
parser.add_argument('--concurrency', default='1,8,32,64')
parser.add_argument('--rounds', type=int, default=2)  # requests per client at each level
parser.add_argument('--max-tokens', type=int, default=128)
parser.add_argument('--json-schema', type=argparse.FileType())
parser.add_argument('--json', action='store_true')
opts = parser.parse_args(argv[:argv.index('--')] if '--' in argv else argv)
schema = json.load(opts.json_schema) if opts.json_schema else None

# Prompts of 20 to 40 tokens, different enough that the prefix cache does not do the work.
PROMPTS = [
    'And it came to pass in those days, that there went out a decree from Caesar Augustus, that all the world should be',
    'In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness',
    'The LORD is my shepherd; I shall not want. He maketh me to lie down in green pastures: he leadeth me',
    'Blessed are the poor in spirit: for theirs is the kingdom of heaven. Blessed are they that mourn: for they',
    'Now the serpent was more subtil than any beast of the field which the LORD God had made. And he said unto',
    'Then Jesus answered and said unto them, Verily, verily, I say unto you, The Son can do nothing of himself, but',
]


def request(url, method, path, body=None):
    """Opens one connection per request; returns (connection, response)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=600)
    headers = {'Content-Type': 'application/json'} if body is not None else {}
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    return conn, conn.getresponse()


def start_server():
    args = [opts.binary, 'serve', '--port', '0'] + (['-m', opts.model] if opts.model else []) + serve_flags
    child = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    log, port, found = [], [], threading.Event()

    def drain():  # keeps reading stderr so the server never blocks on a full pipe
        for line in iter(child.stderr.readline, b''):
            log.append(line.decode(errors='replace'))
            match = re.search(r'listening on http://[^:]+:(\d+)', log[-1])
            if match and not port:
                port.append(int(match.group(1)))
                found.set()
        found.set()

    threading.Thread(target=drain, daemon=True).start()
    found.wait()
    if not port:
        child.wait()
        raise RuntimeError(f'rocmforge serve exited with {child.returncode}:\n{"".join(log)}')
    url = f'http://127.0.0.1:{port[0]}'
    while True:
        if child.poll() is not None:
            raise RuntimeError(f'rocmforge serve exited with {child.returncode}:\n{"".join(log)}')
        try:
            conn, res = request(url, 'GET', '/health')
            res.read()
            conn.close()
            if res.status == 200:
                return child, url
        except OSError:
            pass
        time.sleep(0.05)


def stream_one(url, model, prompt, seed, max_tokens):
    """One streamed completion: when each token arrived, and how many the server counted."""
    start = time.perf_counter()
    body = {'model': model, 'prompt': prompt, 'max_tokens': max_tokens, 'temperature': 0.8, 'seed': seed,
            'ignore_eos': True, 'stream': True, 'stream_options': {'include_usage': True}}
    if schema is not None:
        body['response_format'] = {'type': 'json_schema', 'json_schema': {'name': 'bench', 'schema': schema}}
    conn, res = request(url, 'POST', '/v1/completions', body)
    try:
        if res.status != 200:
            raise RuntimeError(f'HTTP {res.status}: {res.read().decode(errors="replace")}')
        arrivals, tokens = [], 0
        for line in iter(res.readline, b''):
            line = line.strip()
            if not line.startswith(b'data: ') or line == b'data: [DONE]':
                continue
            chunk = json.loads(line[6:])
            if chunk.get('usage'):
                tokens = chunk['usage']['completion_tokens']
            if chunk.get('choices') and chunk['choices'][0].get('text'):
                arrivals.append(time.perf_counter())
        return start, arrivals, tokens
    finally:
        conn.close()


def percentile(values, p):
    return values[min(len(values) - 1, math.floor(p / 100 * len(values)))] if values else math.nan


def level(url, model, concurrency, rounds, max_tokens):
    def client(index):
        results = []
        for round_ in range(rounds):
            seed = index * 1000 + round_
            results.append(stream_one(url, model, PROMPTS[seed % len(PROMPTS)], seed, max_tokens))
        return results

    ttft, itl, tokens = [], [], 0
    begin = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        all_results = [f.result() for f in [pool.submit(client, i) for i in range(concurrency)]]
    seconds = time.perf_counter() - begin
    for start, arrivals, count in (r for results in all_results for r in results):
        tokens += count
        if arrivals:
            ttft.append((arrivals[0] - start) * 1000)
        itl += [(b - a) * 1000 for a, b in zip(arrivals, arrivals[1:])]
    ttft.sort()
    itl.sort()
    return {'concurrency': concurrency, 'requests': concurrency * rounds, 'output_tokens': tokens, 'seconds': seconds,
            'output_tokens_per_second': tokens / seconds, 'ttft_ms_p50': percentile(ttft, 50),
            'ttft_ms_p99': percentile(ttft, 99), 'itl_ms_p50': percentile(itl, 50), 'itl_ms_p99': percentile(itl, 99)}


def main():
    child, url = (None, opts.url.rstrip('/')) if opts.url else start_server()
    try:
        conn, res = request(url, 'GET', '/v1/models')
        model = json.loads(res.read())['data'][0]['id']
        conn.close()
        level(url, model, 2, 1, 8)  # warm-up
        rows = [level(url, model, int(c), opts.rounds, opts.max_tokens) for c in opts.concurrency.split(',')]
        if opts.json:
            # NaN (a level without text chunks) is written as null, as JSON.stringify does.
            print(json.dumps([{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
                              for r in rows], indent=2))
        else:
            constraint = f'; constrained to {opts.json_schema.name}' if schema is not None else ''
            print(f'model: {model}; {opts.max_tokens} output tokens per request, {opts.rounds} requests per stream{constraint}')
            print('| streams | requests | output tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms |')
            print('|---:|---:|---:|---:|---:|---:|---:|')
            for r in rows:
                print(f"| {r['concurrency']} | {r['requests']} | {r['output_tokens_per_second']:.1f} | "
                      f"{r['ttft_ms_p50']:.1f} | {r['ttft_ms_p99']:.1f} | {r['itl_ms_p50']:.2f} | {r['itl_ms_p99']:.2f} |")
    finally:
        if child:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


if __name__ == '__main__':
    main()
