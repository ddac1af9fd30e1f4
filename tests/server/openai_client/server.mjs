// Starting and stopping `rocmforge serve` for the tests: the real binary (ROCMFORGE_BINARY, which
// ctest sets) on 127.0.0.1 at a free port.
import { spawn } from 'node:child_process';

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
