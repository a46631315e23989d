// What client.test.mjs and tools.test.mjs share: a gemlet serve started from a command line (it
// prints "listening on http://HOST:PORT"; --api-key is added here), and named checks.
import { spawn } from 'node:child_process';

export function serverCommand() {
  const args = process.argv.slice(2);
  const at = args.indexOf('--server-cmd');
  if (at < 0 || !args[at + 1]) {
    console.error('usage: node TEST.mjs --server-cmd "gemlet serve -m MODEL --port 0"');
    process.exit(2);
  }
  return args[at + 1];
}

export async function startServer(serverCmd, apiKey) {
  const child = spawn('/bin/sh', ['-c', `exec ${serverCmd} --api-key ${apiKey}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const baseURL = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('the server did not print its address within 120 s')), 120000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/[^\s]+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.on('exit', (code) => reject(new Error(`the server exited (${code}) before listening:\n${stderr}`)));
  });
  // Stops it with SIGTERM; the exit code (0 expected) and what it wrote to stderr.
  const stop = async () => {
    child.kill('SIGTERM');
    const code = await new Promise((resolve) => child.on('exit', (c) => resolve(c)));
    return { code, stderr };
  };
  return { baseURL, stop };
}

let failures = 0;
export async function check(name, fn) {
  const start = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - start} ms)`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
}
export function assert(cond, message) { if (!cond) throw new Error(message); }
export function fail(message) { failures++; console.log(`FAIL ${message}`); }

export async function finish(server) {
  const { code, stderr } = await server.stop();
  if (code !== 0) fail(`the server exited with ${code} on SIGTERM:\n${stderr}`);
  console.log(failures ? `${failures} check(s) failed` : 'all checks passed');
  process.exit(failures ? 1 : 0);
}
