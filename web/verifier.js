// The page's logic: reads the transcript into the verifier's job
// (job.js), runs the WebAssembly verifier in a
// Web Worker so the page stays responsive, and shows progress and the
// verdict. No framework, no build step: this file, job.js, index.html and
// the generated wasm.js (scripts/build-web.sh) are the whole page.
"use strict";

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
      // The browser's own SHA-256 where it has one (several times faster
      // than the module's); the module hashes when it has none.
      const sha = self.crypto && crypto.subtle ? await crypto.subtle.digest("SHA-256", model).catch(() => null) : null;
      const m = place(x, model, "model");
      const j = m && place(x, job, "transcript");
      const s = sha ? place(x, sha, "digest") : 0;
      if (m && j && (s || !sha)) x.dv_verify(m, model.byteLength, j, job.byteLength, s);
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
async function signerLine(t, text) {
  const pinned = $("public-key").value.trim();
  const r = await checkReceipt(t, text, pinned);
  const key = `<span class="mono">${esc(String(r.key || ""))}</span>`;
  switch (r.state) {
    case "unsigned": return "signer: none (the transcript is not signed)";
    case "verified": return pinned
      ? `<span id="signer" data-state="verified">signed by ${key} (the key you gave): signature valid</span>`
      : `<span id="signer" data-state="self">signature valid for the key the receipt names, ${key}; paste the server's key above to pin it</span>`;
    case "wrong-key": return `<span id="signer" data-state="wrong-key" class="bad">WRONG KEY: signed by ${key}, not by the key you gave</span>`;
    case "edited-request": return `<span id="signer" data-state="edited-request" class="bad">BAD SIGNATURE: the request fields (prompt ids, sampling, seed, max_tokens, constraint) differ from what was signed</span>`;
    case "edited-digest": return `<span id="signer" data-state="edited-digest" class="bad">BAD SIGNATURE: the model SHA-256, profile or final digest differ from what was signed</span>`;
    case "unsupported": return `<span id="signer" data-state="unsupported">signer ${key}: this browser has no Ed25519 (WebCrypto); signature not checked</span>`;
    default: return `<span id="signer" data-state="malformed" class="bad">receipt malformed</span>`;
  }
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
  run(t, $("transcript").value, job, wasm, model);
});

/** Runs one verification in a fresh worker (its memory is released with it). */
function run(t, text, job, wasm, model) {
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
      if (m.what === 0) { t0 = m.at; $("status").textContent = m.a ? "model SHA-256 matches; prefilling the prompt…" : "the model's SHA-256 is not the transcript's"; }
      else if (m.what === 1) { tPrefill = m.at; $("status").textContent = `prompt: ${m.a} tokens prefilled in ${((m.at - t0) / 1000).toFixed(2)} s`; }
      else {
        prog.value = m.a + 1;
        const secs = (m.at - tPrefill) / 1000;
        const rate = secs > 0 ? (m.a + 1) / secs : 0;
        $("status").textContent = `step ${m.a + 1} / ${n} · ${rate.toFixed(1)} tokens/s`;
        $("status").dataset.tokensPerSecond = rate.toFixed(2);
      }
    } else if (m.kind === "verdict") verdict(t, text, m, texts);
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

async function verdict(t, text, m, texts) {
  const rec = hex(m.digests.slice(0, 32)), got = hex(m.digests.slice(32));
  const rate = $("status").dataset.tokensPerSecond;
  if (m.verdict === 0) {
    const signer = await signerLine(t, text);
    showVerdict("verified", `<h2>✔ verified</h2><p>All ${m.step} steps reproduced bit for bit.</p>` +
      `<p>digest <span class="mono" id="digest">${rec}</span><br>profile ${esc(PROFILE)}<br>${signer}</p>` +
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
