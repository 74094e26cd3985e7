// The transcript (docs/TRANSCRIPT.md) read with JSON.parse into the
// verifier's job bytes (layout: web/verifier/src/job.rs). Loaded by the page
// before verifier.js, and by scripts/bench-web.mjs under Node.
"use strict";

const PROFILE = "detllm-v1"; // detllm::PROFILE; the verifier's digests are this profile's
const HEADER_BYTES = 112, STEP_BYTES = 36;

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
  // A constrained run's tokens were drawn from masked rows: replayed without
  // the masks it would diverge, so it is refused rather than misreported.
  if (t.constraint) {
    throw new Error(`transcript: sampled under a ${t.constraint.kind} constraint; this page does not ` +
      "re-derive constraint masks: check it with `detllm verify`");
  }
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

// ---- Signed receipts (docs/AUDIT.md): the same message and request digest as
// cli/src/audit/receipt.rs, checked with the browser's own Ed25519 (WebCrypto).

/** Bytes to lowercase hex digits. */
function hexOf(bytes) {
  return Array.from(bytes, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** Hex digits to bytes, or null. */
function unhex(s) {
  if (typeof s !== "string" || s.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(s)) return null;
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.substr(2 * i, 2), 16);
  return out;
}

/** The request's canonical digest (hex): prompt ids, sampling bits, seed, max_tokens, constraint hash. */
async function requestDigest(t, text) {
  const s = t.sampling || {};
  const n = t.prompt_ids.length;
  const tail = t.constraint ? new TextEncoder().encode("constraint\0" + String(t.constraint.sha256).toLowerCase()) : new Uint8Array(0);
  const head = new TextEncoder().encode("detllm-request-v1\0");
  const buf = new Uint8Array(head.length + 8 + 4 * n + 20 + 24 + tail.length);
  const dv = new DataView(buf.buffer);
  buf.set(head, 0);
  let at = head.length;
  dv.setBigUint64(at, BigInt(n), true); at += 8;
  for (const id of t.prompt_ids) { dv.setUint32(at, u32(id, "prompt_ids"), true); at += 4; }
  for (const name of ["temperature", "top_p", "min_p", "repeat_penalty"]) { dv.setUint32(at, bits(s, name), true); at += 4; }
  dv.setUint32(at, u32(s.top_k, "sampling.top_k"), true); at += 4;
  dv.setBigUint64(at, BigInt(u32(s.penalty_last_n, "sampling.penalty_last_n")), true); at += 8;
  dv.setBigUint64(at, seedOf(text, t), true); at += 8;
  dv.setBigUint64(at, BigInt(u32(t.max_tokens, "max_tokens")), true); at += 8;
  buf.set(tail, at);
  return hexOf(new Uint8Array(await crypto.subtle.digest("SHA-256", buf)));
}

/**
 * Checks the transcript's receipt. `pinned`: the public key (hex) the user gave,
 * or "" to check against the key the receipt names (then only self-consistent).
 * Resolves to { state, key }: state is "unsigned", "verified", "wrong-key",
 * "edited-request", "edited-digest", "malformed" or "unsupported" (no Ed25519 here).
 */
async function checkReceipt(t, text, pinned) {
  const r = t.receipt;
  if (!r) return { state: "unsigned" };
  const key = String(r.public_key || "").toLowerCase();
  const sig = unhex(r.signature), keyBytes = unhex(key);
  if (!sig || sig.length !== 64 || !keyBytes || keyBytes.length !== 32) return { state: "malformed", key };
  if (pinned && pinned.toLowerCase() !== key) return { state: "wrong-key", key };
  const request = await requestDigest(t, text);
  const message = `detllm-receipt-v1\n${PROFILE}\n${String(t.model.sha256).toLowerCase()}\n${request}\n${String(t.final_digest).toLowerCase()}\n`;
  let ok;
  try {
    const k = await crypto.subtle.importKey("raw", keyBytes, { name: "Ed25519" }, false, ["verify"]);
    ok = await crypto.subtle.verify({ name: "Ed25519" }, k, sig, new TextEncoder().encode(message));
  } catch (e) {
    return { state: "unsupported", key };
  }
  if (ok) return { state: "verified", key };
  return { state: String(r.request_digest).toLowerCase() !== request ? "edited-request" : "edited-digest", key };
}
