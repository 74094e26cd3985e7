#!/usr/bin/env node
// Cargo runner for wasm32-wasip1: `node scripts/wasi-runner.mjs FILE.wasm ARGS...`.
// Runs the module under Node's WASI (preview 1) with the host file system
// mounted at `/` (the module's working directory is `/`, so tests open files
// through absolute paths such as env!("CARGO_MANIFEST_DIR")), the caller's
// environment, and exits with the module's exit code. A panic in the module
// aborts (a trap): that is reported and exits with status 101.
import { readFile } from 'node:fs/promises';
import process from 'node:process';

const [file, ...args] = process.argv.slice(2);
if (!file) {
  console.error('usage: wasi-runner.mjs FILE.wasm [ARGS...]');
  process.exit(2);
}
const { WASI } = await import('node:wasi');
const wasi = new WASI({
  version: 'preview1',
  args: [file, ...args],
  env: process.env,
  preopens: { '/': '/' },
  returnOnExit: true,
});
try {
  const module = await WebAssembly.compile(await readFile(file));
  const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
  process.exitCode = wasi.start(instance);
} catch (e) {
  console.error(`wasi-runner: ${file}: ${e}`);
  process.exitCode = 101;
}
