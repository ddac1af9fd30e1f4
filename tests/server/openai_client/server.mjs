// Starting and stopping `rocmforge serve` for the tests: the real binary (ROCMFORGE_BINARY, which
// ctest sets) on 127.0.0.1 at a free port.
import { spawn } from 'node:child_process';
import { after, before } from 'node:test';
import OpenAI from 'openai';

const binary = process.env.ROCMFORGE_BINARY ?? 'build/cpu/rocmforge';

// Starts `rocmforge serve` on a free port and resolves once /health answers 200.
export async function startServer(extraArgs = []) {
  const child = spawn(binary, ['serve', '--port', '0', '--threads', '2', ...extraArgs], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      log += chunk;
      const match = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (match) resolve(Number(match[1]));
    });
    child.on('exit', (code) => reject(new Error(`rocmforge serve exited with ${code}:\n${log}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    const res = await fetch(`${base}/health`).catch(() => null);
    if (res?.status === 200) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, base };
}

export function stopServer(server) {
  return new Promise((resolve) => {
    server.child.on('exit', resolve);
    server.child.kill('SIGTERM');
  });
}

// A server for the tests of one describe block: started before them, stopped after them. While they
// run, `served.base` is its address and `served.client` an openai client of it.
export function serveDuringTests(extraArgs = []) {
  const served = {};
  before(async () => {
    served.server = await startServer(extraArgs);
    served.base = served.server.base;
    served.client = new OpenAI({ baseURL: `${served.base}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(() => stopServer(served.server));
  return served;
}
