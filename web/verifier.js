// The page's logic: reads the transcript (JSON.parse) into the verifier's
// job layout (web/verifier/src/job.rs), runs the WebAssembly verifier in a
// Web Worker so the page stays responsive, and shows progress and the
// verdict. No framework, no build step: this file, index.html and the
// generated wasm.js (scripts/build-web.sh) are the whole page.
"use strict";

const PROFILE = "detllm-v1"; // detllm::PROFILE; the verifier's digests are this profile's
const HEADER_BYTES = 112, STEP_BYTES = 36;

// ---------------------------------------------------------------- transcript

/** 64 hex digits -> 32 bytes, or an Error naming `what`. */
function hexBytes(s, what) {
  if (typeof s !== "string" || !/^[0-9a-fA-F]{64}$/.test(s)) throw new Error(`${what} is not 64 hex digits`);
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = parseInt(s.substr(2 * i, 2), 16);
  return out;
}

/** A u32 field, or an Error naming it. */
function u32(x, what) {
  if (!Number.isInteger(x) || x < 0 || x > 0xffffffff) throw new Error(`${what} missing or not a u32`);
  return x;
}

/** `sampling.<name>.bits` as a u32. */
function bits(sampling, name) {
  const b = sampling && sampling[name] && sampling[name].bits;
  if (typeof b !== "string" || !/^0x[0-9a-fA-F]{1,8}$/.test(b)) throw new Error(`sampling.${name}.bits missing or not hex`);
  return parseInt(b.slice(2), 16) >>> 0;
}

/** The seed as a BigInt, read from the text (JSON.parse's numbers hold 53 bits, seeds 64). */
function seedOf(text, parsed) {
  const m = text.match(/"seed"\s*:\s*(\d+)/g);
  if (!m || m.length !== 1) throw new Error("sampling.seed missing");
  const seed = BigInt(m[0].replace(/.*:\s*/, ""));
  if (seed >= 1n << 64n || Number(seed) !== parsed.sampling.seed) throw new Error("sampling.seed is not a u64");
  return seed;
}

/** Reads a transcript (docs/TRANSCRIPT.md) into what the page shows and the job bytes. */
function parseTranscript(text) {
  let t;
  try { t = JSON.parse(text); } catch (e) { throw new Error(`transcript: not JSON: ${e.message}`); }
  if (!t || t.format !== 1) throw new Error("transcript: unknown or missing format version");
  if (t.profile !== PROFILE) throw new Error(`transcript: profile is ${t.profile}, this verifier checks ${PROFILE}`);
  const s = t.sampling || {};
  const steps = Array.isArray(t.steps) ? t.steps : null;
  if (!steps || steps.length === 0) throw new Error("transcript: steps missing");
  if (!Array.isArray(t.prompt_ids) || t.prompt_ids.length === 0) throw new Error("transcript: prompt_ids missing");
  const maxTokens = u32(t.max_tokens, "max_tokens");
  const job = new DataView(new ArrayBuffer(HEADER_BYTES + 4 * t.prompt_ids.length + STEP_BYTES * steps.length));
  const bytes = new Uint8Array(job.buffer);
  bytes.set([0x44, 0x56, 0x4a, 0x31]); // "DVJ1"
  job.setUint32(4, t.prompt_ids.length, true);
  job.setUint32(8, steps.length, true);
  job.setUint32(12, maxTokens, true);
  job.setBigUint64(16, seedOf(text, t), true);
  job.setUint32(24, bits(s, "temperature"), true);
  job.setUint32(28, u32(s.top_k, "sampling.top_k"), true);
  job.setUint32(32, bits(s, "top_p"), true);
  job.setUint32(36, bits(s, "min_p"), true);
  job.setUint32(40, bits(s, "repeat_penalty"), true);
  job.setUint32(44, u32(s.penalty_last_n, "sampling.penalty_last_n"), true);
  bytes.set(hexBytes(t.model && t.model.sha256, "model.sha256"), 48);
  bytes.set(hexBytes(t.final_digest, "final_digest"), 80);
  t.prompt_ids.forEach((id, i) => job.setUint32(HEADER_BYTES + 4 * i, u32(id, `prompt_ids[${i}]`), true));
  let at = HEADER_BYTES + 4 * t.prompt_ids.length;
  steps.forEach((st, i) => {
    job.setUint32(at, u32(st && st.id, `steps[${i}].id`), true);
    bytes.set(hexBytes(st.digest, `steps[${i}].digest`), at + 4);
    at += STEP_BYTES;
  });
  return { t, job: job.buffer };
}

// ---------------------------------------------------------------- worker

/** The worker's body; it runs from a Blob URL (a file:// page may not load worker scripts). */
function workerMain() {
  let mem = null;
  const view = (ptr, len) => new Uint8Array(mem.buffer, ptr, len);
  const imports = { env: {
    dv_token: (id, ptr, len) => postMessage({ kind: "token", id, bytes: view(ptr, len).slice() }),
    dv_progress: (kind, a, b) => postMessage({ kind: "progress", what: kind, a, b, at: performance.now() }),
    dv_verdict: (kind, step, recorded, recomputed, ptr) =>
      postMessage({ kind: "verdict", verdict: kind, step, recorded, recomputed, digests: view(ptr, 64).slice() }),
    dv_error: (ptr, len) => postMessage({ kind: "error", message: new TextDecoder().decode(view(ptr, len)) }),
  } };
  /** Copies `src` into memory from dv_alloc, or posts why not. */
  function place(exports, src, what) {
    const ptr = exports.dv_alloc(src.byteLength);
    if (ptr === 0) {
      postMessage({ kind: "error", message: `out of memory: the browser would not give ${Math.ceil(src.byteLength / 1048576)} MiB for the ${what}` });
      return 0;
    }
    view(ptr, src.byteLength).set(new Uint8Array(src));
    return ptr;
  }
  onmessage = async (e) => {
    const { wasm, model, job } = e.data;
    try {
      const { instance } = await WebAssembly.instantiate(wasm, imports);
      const x = instance.exports;
      mem = x.memory;
      const m = place(x, model, "model");
      const j = m && place(x, job, "transcript");
      if (m && j) x.dv_verify(m, model.byteLength, j, job.byteLength);
    } catch (err) {
      postMessage({ kind: "error", message: `the verifier stopped: ${err && err.message || err}` });
    }
    postMessage({ kind: "done" });
  };
}

function wasmBytes() {
  if (typeof self.DETLLM_WASM_BASE64 !== "string") {
    throw new Error("the verifier module (wasm.js) is missing: build it with scripts/build-web.sh");
  }
  const s = atob(self.DETLLM_WASM_BASE64);
  const b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
  return b.buffer;
}

// ---------------------------------------------------------------- page

const $ = (id) => document.getElementById(id);
const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
let modelFile = null;

function setModel(file) {
  modelFile = file;
  $("model-info").textContent = `${file.name}, ${(file.size / 1048576).toFixed(1)} MiB`;
}

async function setTranscriptFile(file) {
  $("transcript").value = await file.text();
}

$("model").addEventListener("change", (e) => e.target.files[0] && setModel(e.target.files[0]));
$("transcript-file").addEventListener("change", (e) => e.target.files[0] && setTranscriptFile(e.target.files[0]));
const drop = $("drop");
drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (e) => {
  e.preventDefault();
  drop.classList.remove("over");
  for (const f of e.dataTransfer.files) {
    if (/\.json$/i.test(f.name)) setTranscriptFile(f); else setModel(f);
  }
});

$("fetch").addEventListener("click", async () => {
  const id = $("transcript-id").value.trim();
  if (!/^[A-Za-z0-9_.-]+$/.test(id)) return showError("a transcript id is letters, digits, '-', '_' and '.'");
  const headers = $("api-key").value ? { Authorization: `Bearer ${$("api-key").value}` } : {};
  try {
    const r = await fetch(new URL(`/v1/transcripts/${encodeURIComponent(id)}`, location.href), { headers });
    const text = await r.text();
    if (!r.ok) return showError(`the server answered ${r.status}: ${text}`);
    $("transcript").value = text;
    $("status").textContent = `transcript ${id} fetched`;
  } catch (e) {
    showError(`could not fetch the transcript (${e.message}); open this page from the server that answered, or pick the file`);
  }
});

function showVerdict(cls, html) {
  const v = $("verdict");
  v.className = cls;
  v.innerHTML = html;
}

function esc(s) {
  return s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

function showError(msg) {
  showVerdict("error", `<h2>Could not verify</h2><p>${esc(msg)}</p>`);
}

/** The signer line: a hook for signed transcripts (receipts); shown, not yet checked. */
function signerLine(t) {
  const sig = t.signature || (t.receipt && t.receipt.signature);
  const key = $("public-key").value.trim() || (t.receipt && t.receipt.public_key) || t.public_key;
  if (!sig && !key) return "signer: none (the transcript is not signed)";
  return `signer: ${key ? esc(String(key)) : "unknown key"}; signature present, not checked by this page version`;
}

$("verify").addEventListener("click", async () => {
  let parsed;
  try {
    if (!modelFile) throw new Error("pick the model file first");
    parsed = parseTranscript($("transcript").value);
  } catch (e) { return showError(e.message); }
  const { t, job } = parsed;
  let wasm;
  try { wasm = wasmBytes(); } catch (e) { return showError(e.message); }
  $("verify").disabled = true;
  showVerdict("", "");
  $("status").textContent = "reading the model file…";
  let model;
  try { model = await modelFile.arrayBuffer(); } catch (e) {
    $("verify").disabled = false;
    return showError(`could not read the model file: ${e.message}`);
  }
  run(t, job, wasm, model);
});

/** Runs one verification in a fresh worker (its memory is released with it). */
function run(t, job, wasm, model) {
  const src = `(${workerMain.toString()})()`;
  const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
  const worker = new Worker(url);
  const n = t.steps.length;
  const texts = new Map();
  const prog = $("progress");
  prog.max = n;
  prog.value = 0;
  $("status").textContent = "checking the model's SHA-256…";
  let t0 = 0, tPrefill = 0;
  worker.onmessage = (e) => {
    const m = e.data;
    if (m.kind === "token") texts.set(m.id, new TextDecoder().decode(m.bytes));
    else if (m.kind === "progress") {
      if (m.what === 0) { t0 = m.at; $("status").textContent = m.a ? "model SHA-256 matches; prefilling the prompt…" : ""; }
      else if (m.what === 1) { tPrefill = m.at; $("status").textContent = `prompt: ${m.a} tokens prefilled in ${((m.at - t0) / 1000).toFixed(2)} s`; }
      else {
        prog.value = m.a + 1;
        const secs = (m.at - tPrefill) / 1000;
        const rate = secs > 0 ? (m.a + 1) / secs : 0;
        $("status").textContent = `step ${m.a + 1} / ${n} · ${rate.toFixed(1)} tokens/s`;
        $("status").dataset.tokensPerSecond = rate.toFixed(2);
      }
    } else if (m.kind === "verdict") verdict(t, m, texts);
    else if (m.kind === "error") showError(m.message);
    else if (m.kind === "done") {
      worker.terminate();
      URL.revokeObjectURL(url);
      $("verify").disabled = false;
    }
  };
  worker.onerror = (e) => { showError(`the worker failed: ${e.message}`); $("verify").disabled = false; };
  worker.postMessage({ wasm, model, job }, [wasm, model]);
}

/** Token `id`'s text as the page shows it. */
function tok(texts, id) {
  return `${id} "${esc(texts.get(id) ?? "")}"`;
}

/** The prompt and the generated text up to step `k`, the recorded token struck out beside the recomputed one. */
function context(t, texts, k, recorded, recomputed) {
  const join = (ids) => esc(ids.map((id) => texts.get(id) ?? "").join(""));
  const before = t.steps.slice(0, k).map((s) => s.id);
  return `<div class="context"><span class="prompt">${join(t.prompt_ids)}</span>${join(before)}` +
    `<span class="rec" title="recorded">${join([recorded])}</span><span class="got" title="recomputed">${join([recomputed])}</span></div>`;
}

function verdict(t, m, texts) {
  const rec = hex(m.digests.slice(0, 32)), got = hex(m.digests.slice(32));
  const rate = $("status").dataset.tokensPerSecond;
  if (m.verdict === 0) {
    showVerdict("verified", `<h2>✔ verified</h2><p>All ${m.step} steps reproduced bit for bit.</p>` +
      `<p>digest <span class="mono" id="digest">${rec}</span><br>profile ${esc(PROFILE)}<br>${signerLine(t)}</p>` +
      `<p class="small">${rate} tokens/s re-executed in this browser</p>`);
  } else if (m.verdict === 1) {
    showVerdict("wrong-model", `<h2>✘ wrong model</h2><p>This file's SHA-256 is <span class="mono">${rec}</span>; ` +
      `the transcript was written with <span class="mono">${esc(t.model.sha256)}</span>` +
      `${t.model.file ? ` (${esc(t.model.file)})` : ""}. Nothing was run.</p>`);
  } else if (m.verdict === 2) {
    const same = m.recorded === m.recomputed;
    showVerdict("diverged", `<h2>✘ diverged at step ${m.step}</h2>` +
      `<p>recorded token ${tok(texts, m.recorded)}<br>recomputed token ${tok(texts, m.recomputed)}` +
      `${same ? "<br>(the same token, but the logits it was sampled from differ)" : ""}</p>` +
      context(t, texts, m.step, m.recorded, m.recomputed) +
      `<p class="small">recorded digest <span class="mono">${rec}</span><br>recomputed digest <span class="mono">${got}</span></p>`);
  } else if (m.verdict === 3) {
    showVerdict("diverged", `<h2>✘ diverged after step ${m.step}</h2><p>token ${tok(texts, m.recorded)} ends generation, ` +
      `yet the transcript records more steps.</p>`);
  } else {
    showVerdict("diverged", `<h2>✘ final digest differs</h2><p>Every step matches, but final_digest is not the last step's ` +
      `digest <span class="mono">${got}</span>.</p>`);
  }
}
