#!/usr/bin/env node
// Serving benchmark: N concurrent streaming clients against `rocmforge serve`, for each N the
// output tokens/s of the whole server, time to first token and inter-token latency (p50, p99).
// Starts the server itself (or measures one already running with --url).
//
//   node tools/bench_serve.mjs [--binary build/cpu/rocmforge] [-m MODEL] [--url http://HOST:PORT]
//        [--concurrency 1,8,32,64] [--rounds 2] [--max-tokens 128] [--json] [-- extra serve flags]
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';

const { values: opts, positionals: serveFlags } = parseArgs({
  allowPositionals: true,
  options: {
    binary: { type: 'string', default: 'build/cpu/rocmforge' },
    model: { type: 'string', short: 'm' },
    url: { type: 'string' },
    concurrency: { type: 'string', default: '1,8,32,64' },
    rounds: { type: 'string', default: '2' },  // requests per client at each level
    'max-tokens': { type: 'string', default: '128' },
    json: { type: 'boolean', default: false },
  },
});

// Prompts of 20 to 40 tokens, different enough that the prefix cache does not do the work.
const prompts = [
  'And it came to pass in those days, that there went out a decree from Caesar Augustus, that all the world should be',
  'In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness',
  'The LORD is my shepherd; I shall not want. He maketh me to lie down in green pastures: he leadeth me',
  'Blessed are the poor in spirit: for theirs is the kingdom of heaven. Blessed are they that mourn: for they',
  'Now the serpent was more subtil than any beast of the field which the LORD God had made. And he said unto',
  'Then Jesus answered and said unto them, Verily, verily, I say unto you, The Son can do nothing of himself, but',
];

async function startServer() {
  const args = ['serve', '--port', '0', ...(opts.model ? ['-m', opts.model] : []), ...serveFlags];
  const child = spawn(opts.binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      log += chunk;
      const match = log.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (match) resolve(Number(match[1]));
    });
    child.on('exit', (code) => reject(new Error(`rocmforge serve exited with ${code}:\n${log}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  while ((await fetch(`${url}/health`).catch(() => null))?.status !== 200) await new Promise((r) => setTimeout(r, 50));
  return { child, url };
}

// One streamed completion: when each token arrived, and how many the server counted.
async function streamOne(url, model, prompt, seed, maxTokens) {
  const start = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, prompt, max_tokens: maxTokens, temperature: 0.8, seed, ignore_eos: true, stream: true,
      stream_options: { include_usage: true } }),
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const arrivals = [];
  let tokens = 0;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const data = buffer.slice(6, end);
      buffer = buffer.slice(end + 2);
      if (data === '[DONE]') continue;
      const chunk = JSON.parse(data);
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
      if (chunk.choices[0]?.text) arrivals.push(performance.now());
    }
  }
  return { start, arrivals, tokens };
}

const percentile = (sorted, p) => sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN;

async function level(url, model, concurrency, rounds, maxTokens) {
  const ttft = [], itl = [];
  let tokens = 0;
  const begin = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async (_, client) => {
    for (let round = 0; round < rounds; round++) {
      const seed = client * 1000 + round;
      const r = await streamOne(url, model, prompts[seed % prompts.length], seed, maxTokens);
      tokens += r.tokens;
      if (r.arrivals.length) ttft.push(r.arrivals[0] - r.start);
      for (let i = 1; i < r.arrivals.length; i++) itl.push(r.arrivals[i] - r.arrivals[i - 1]);
    }
  }));
  const seconds = (performance.now() - begin) / 1000;
  ttft.sort((a, b) => a - b);
  itl.sort((a, b) => a - b);
  return { concurrency, requests: concurrency * rounds, output_tokens: tokens, seconds,
    output_tokens_per_second: tokens / seconds, ttft_ms_p50: percentile(ttft, 50), ttft_ms_p99: percentile(ttft, 99),
    itl_ms_p50: percentile(itl, 50), itl_ms_p99: percentile(itl, 99) };
}

const server = opts.url ? { url: opts.url } : await startServer();
try {
  const model = (await (await fetch(`${server.url}/v1/models`)).json()).data[0].id;
  await level(server.url, model, 2, 1, 8);  // warm-up
  const rows = [];
  for (const c of opts.concurrency.split(',').map(Number)) {
    rows.push(await level(server.url, model, c, Number(opts.rounds), Number(opts['max-tokens'])));
  }
  if (opts.json) {
    console.log(JSON.stringify(rows, null, 2));
  } else {
    console.log(`model: ${model}; ${opts['max-tokens']} output tokens per request, ${opts.rounds} requests per stream`);
    console.log('| streams | requests | output tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms |');
    console.log('|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of rows) {
      console.log(`| ${r.concurrency} | ${r.requests} | ${r.output_tokens_per_second.toFixed(1)} | ${r.ttft_ms_p50.toFixed(1)} | ` +
        `${r.ttft_ms_p99.toFixed(1)} | ${r.itl_ms_p50.toFixed(2)} | ${r.itl_ms_p99.toFixed(2)} |`);
    }
  }
} finally {
  server.child?.kill('SIGTERM');
}
