// Speed of the browser verifier's WebAssembly module (web/wasm.js, built by
// scripts/build-web.sh) under Node, whose engine (V8) is Chromium's: runs one
// verification of TRANSCRIPT against MODEL, as the page's worker does, and
// prints the verdict, each phase's CPU time (this process's user + system
// time: steadier than wall time on a shared machine) and the decode tokens/s.
//
// Usage: node scripts/bench-web.mjs MODEL TRANSCRIPT [WASM_JS] [--wasm-sha256]
import { readFileSync } from "node:fs";
import vm from "node:vm";

const [model, transcript, wasmJs = "web/wasm.js"] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
if (!transcript) {
  console.error("usage: node scripts/bench-web.mjs MODEL TRANSCRIPT [WASM_JS]");
  process.exit(2);
}
const ctx = { self: {}, TextDecoder, BigInt, Number, JSON, Error, Uint8Array, DataView, ArrayBuffer };
vm.createContext(ctx);
vm.runInContext(readFileSync("web/job.js", "utf8") + "\nself.parseTranscript = parseTranscript;", ctx);
vm.runInContext(readFileSync(wasmJs, "utf8"), ctx);
const { job } = ctx.self.parseTranscript(readFileSync(transcript, "utf8"));
const wasm = Buffer.from(ctx.self.DETLLM_WASM_BASE64, "base64");
const bytes = readFileSync(model);

const now = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; }; // ms of CPU
let mem, t0 = now(), tHash = 0, tPrefill = 0, steps = 0;
const view = (p, n) => new Uint8Array(mem.buffer, p, n);
const hex = (b) => Buffer.from(b).toString("hex");
const env = {
  dv_token: () => {},
  dv_progress: (kind, a) => {
    if (kind === 0) tHash = now();
    if (kind === 1) tPrefill = now();
    if (kind === 2) steps = a + 1;
  },
  dv_verdict: (kind, step, rec, got, p) => {
    const names = ["verified", "wrong model", "diverged", "ended early", "final digest differs"];
    console.log(`${names[kind]}: step ${step} recorded ${rec} recomputed ${got} digest ${hex(view(p, 32))}`);
  },
  dv_error: (p, n) => console.log("error:", new TextDecoder().decode(view(p, n))),
};
const { instance } = await WebAssembly.instantiate(wasm, { env });
const x = instance.exports;
mem = x.memory;
const put = (src) => {
  const p = x.dv_alloc(src.byteLength);
  view(p, src.byteLength).set(new Uint8Array(src.buffer ?? src, src.byteOffset ?? 0, src.byteLength));
  return p;
};
t0 = now();
const m = put(bytes), j = put(new Uint8Array(job));
// As the page: the host's SHA-256 (WebCrypto), unless --wasm-sha256.
const sha = process.argv.includes("--wasm-sha256") ? 0 : put(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)));
x.dv_verify(m, bytes.byteLength, j, job.byteLength, sha);
const end = now();
const decode = (end - tPrefill) / 1000;
console.log(`CPU time: SHA-256 ${((tHash - t0) / 1000).toFixed(2)} s, load+prefill ${((tPrefill - tHash) / 1000).toFixed(2)} s, decode ${steps} steps in ${decode.toFixed(2)} s: ${(steps / decode).toFixed(2)} tokens/s (CPU time)`);
