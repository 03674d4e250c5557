// Starts `tessera serve --port 0` for a Node test (loopback only), learns its port from the log, waits until
// /health says ready, and stops it with SIGTERM. Every wait is bounded.
'use strict';

const {spawn, execFileSync} = require('node:child_process');
const path = require('node:path');

const bin = process.env.TESSERA_BIN || path.resolve(__dirname, '../../../build/src/cli/tessera');
const model = process.env.TESSERA_MODEL || path.resolve(__dirname, '../../../models/stories260K.gguf');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startServer(args = [], {timeoutMs = 30000, modelPath = model} = {}) {
  const child = spawn(bin, ['serve', '--port', '0', '-m', modelPath, ...args], {stdio: ['ignore', 'ignore', 'pipe']});
  // The server must not outlive the test process, however it ends.
  process.on('exit', () => { if (child.exitCode === null) child.kill('SIGKILL'); });
  let log = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => { log += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({code, signal})));
  const deadline = Date.now() + timeoutMs;
  let port = 0;
  while (Date.now() < deadline) {
    const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
    if (m && log.includes('tessera serve: ready')) {
      port = Number(m[1]);
      break;
    }
    if (child.exitCode !== null) throw new Error('tessera serve exited early:\n' + log);
    await sleep(20);
  }
  if (!port) {
    child.kill('SIGKILL');
    throw new Error('tessera serve did not become ready:\n' + log);
  }
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    pid: child.pid,
    log: () => log,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
      const {code} = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

// `tessera run ARGS` standard output (the reference the API must equal).
function tesseraRun(args) {
  return execFileSync(bin, ['run', '-m', model, ...args], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'],
    timeout: 60000});
}

module.exports = {startServer, tesseraRun, bin, model};
