//! Signed receipts: an Ed25519 signature over what a choice was — the
//! arithmetic profile, the model file's SHA-256, the request's canonical
//! digest and the final audit digest — so a third party holding the
//! server's public key can tell who served a transcript and that none of
//! those fields was edited; `detllm verify` then re-executes it to check
//! the tokens.
//!
//! The signed message (`message`) is ASCII lines:
//! `detllm-receipt-v1`, the profile, the model SHA-256, the request
//! digest, the audit digest (each hex digest lowercase). The request digest
//! ([`request_digest`]) is SHA-256 over the transcript's prompt ids, the
//! sampling parameters' bits, the seed and `max_tokens` in a fixed
//! little-endian layout, and for a constrained request the constraint's
//! SHA-256, so it depends on nothing but those fields.
//!
//! Key files: the secret key file holds the 32-byte Ed25519 seed as 64 hex
//! digits and a newline (mode 0600); `FILE.pub` holds the public key the
//! same way. Verified by the unit tests below (sign/check round trip; a
//! wrong key, an edited request field and an edited digest each refused
//! with their own [`ReceiptError`]) and by `cli/tests/audit_crash.rs`.

#![forbid(unsafe_code)]

use crate::output::hex;
use crate::transcript::Transcript;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::{Path, PathBuf};

/// The first line of every signed message.
const DOMAIN: &str = "detllm-receipt-v1";

/// Why a key could not be read or a receipt does not check.
#[derive(Debug)]
pub enum ReceiptError {
    /// A key file cannot be read or written.
    KeyFile(PathBuf, String),
    /// A key file does not hold 64 hex digits.
    KeyFormat(PathBuf),
    /// The transcript has no `receipt` object (served without `--signing-key`).
    Unsigned,
    /// The receipt lacks a field or has one of the wrong shape.
    Malformed(&'static str),
    /// The receipt was signed by another key.
    WrongKey { signed_by: String, given: String },
    /// The request fields (prompt, sampling, max_tokens) differ from what was signed.
    EditedRequest,
    /// The model hash, profile or audit digest differ from what was signed.
    EditedDigest,
}

impl fmt::Display for ReceiptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReceiptError::KeyFile(p, e) => write!(f, "key file {}: {e}", p.display()),
            ReceiptError::KeyFormat(p) => {
                write!(f, "key file {}: not 64 hex digits", p.display())
            }
            ReceiptError::Unsigned => f.write_str("the transcript has no receipt (unsigned)"),
            ReceiptError::Malformed(what) => write!(f, "receipt: {what}"),
            ReceiptError::WrongKey { signed_by, given } => write!(
                f,
                "WRONG KEY: the receipt was signed by {signed_by}, not by the given key {given}"
            ),
            ReceiptError::EditedRequest => f.write_str(
                "BAD SIGNATURE: the request fields (prompt ids, sampling, seed, max_tokens, constraint) differ from what was signed",
            ),
            ReceiptError::EditedDigest => f.write_str(
                "BAD SIGNATURE: the model SHA-256, profile or final audit digest differ from what was signed",
            ),
        }
    }
}

impl std::error::Error for ReceiptError {}

/// The request's canonical digest (module docs), hex.
pub fn request_digest(t: &Transcript) -> String {
    let mut h = Sha256::new();
    h.update(b"detllm-request-v1\0");
    h.update((t.prompt_ids.len() as u64).to_le_bytes());
    for id in &t.prompt_ids {
        h.update(id.to_le_bytes());
    }
    let p = &t.params;
    for bits in [
        p.temperature.to_bits(),
        p.top_p.to_bits(),
        p.min_p.to_bits(),
        p.repeat_penalty.to_bits(),
        p.top_k,
    ] {
        h.update(bits.to_le_bytes());
    }
    h.update((p.penalty_last_n as u64).to_le_bytes());
    h.update(p.seed.to_le_bytes());
    h.update((t.max_tokens as u64).to_le_bytes());
    // A constrained request: its constraint's SHA-256 (an unconstrained
    // request's digest is unchanged by this field's existence).
    if let Some(c) = &t.constraint_sha256 {
        h.update(b"constraint\0");
        h.update(c.as_bytes());
    }
    hex(&h.finalize())
}

/// The signed message of a transcript whose request digest is `request`.
fn message(t: &Transcript, request: &str) -> String {
    format!(
        "{DOMAIN}\n{}\n{}\n{request}\n{}\n",
        detllm::PROFILE,
        t.sha256.to_ascii_lowercase(),
        t.final_digest
    )
}

/// The `receipt` object for transcript `t`, signed with `key`.
pub fn sign(key: &SigningKey, t: &Transcript) -> Value {
    let request = request_digest(t);
    let sig = key.sign(message(t, &request).as_bytes());
    json!({
        "scheme": "ed25519",
        "message": DOMAIN,
        "public_key": hex(key.verifying_key().as_bytes()),
        "request_digest": request,
        "signature": hex(&sig.to_bytes()),
    })
}

/// `text` (a transcript file) with `receipt` added as its `receipt` field,
/// in the same pretty-printed form.
pub fn with_receipt(text: &str, receipt: Value) -> Option<String> {
    let mut v: Value = serde_json::from_str(text).ok()?;
    v.as_object_mut()?.insert("receipt".into(), receipt);
    serde_json::to_string_pretty(&v).ok().map(|s| s + "\n")
}

/// Checks the receipt in transcript file `text` (parsed as `t`) against `key`.
pub fn check(text: &str, t: &Transcript, key: &VerifyingKey) -> Result<(), ReceiptError> {
    let v: Value = serde_json::from_str(text).map_err(|_| ReceiptError::Malformed("not JSON"))?;
    let r = v.get("receipt").ok_or(ReceiptError::Unsigned)?;
    let s = |k: &'static str| {
        r.get(k)
            .and_then(Value::as_str)
            .ok_or(ReceiptError::Malformed(k))
    };
    let given = hex(key.as_bytes());
    let signed_by = s("public_key")?.to_ascii_lowercase();
    if signed_by != given {
        return Err(ReceiptError::WrongKey { signed_by, given });
    }
    let sig_bytes: [u8; 64] = unhex(s("signature")?)
        .and_then(|b| b.try_into().ok())
        .ok_or(ReceiptError::Malformed("signature is not 128 hex digits"))?;
    let sig = Signature::from_bytes(&sig_bytes);
    let request = request_digest(t);
    if key.verify(message(t, &request).as_bytes(), &sig).is_ok() {
        return Ok(());
    }
    // Which part changed: the request digest the receipt names tells.
    if s("request_digest")?.to_ascii_lowercase() != request {
        Err(ReceiptError::EditedRequest)
    } else {
        Err(ReceiptError::EditedDigest)
    }
}

/// Hex digits to bytes.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// 32 bytes from the hex key file at `path`.
fn read_key_bytes(path: &Path) -> Result<[u8; 32], ReceiptError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ReceiptError::KeyFile(path.to_path_buf(), e.to_string()))?;
    unhex(&text)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| ReceiptError::KeyFormat(path.to_path_buf()))
}

/// The secret key in `path` (written by `detllm keygen`).
pub fn read_signing_key(path: &Path) -> Result<SigningKey, ReceiptError> {
    Ok(SigningKey::from_bytes(&read_key_bytes(path)?))
}

/// The public key in `path` (`FILE.pub` of `detllm keygen`).
pub fn read_public_key(path: &Path) -> Result<VerifyingKey, ReceiptError> {
    VerifyingKey::from_bytes(&read_key_bytes(path)?)
        .map_err(|_| ReceiptError::KeyFormat(path.to_path_buf()))
}

/// Writes a new key pair: the secret seed to `path` (mode 0600, created
/// new: an existing file is not overwritten) and the public key to
/// `path.pub`; returns the public key.
pub fn keygen(path: &Path) -> Result<VerifyingKey, ReceiptError> {
    let err = |p: &Path, e: std::io::Error| ReceiptError::KeyFile(p.to_path_buf(), e.to_string());
    let mut seed = [0u8; 32];
    {
        use std::io::Read;
        let mut rng =
            std::fs::File::open("/dev/urandom").map_err(|e| err(Path::new("/dev/urandom"), e))?;
        rng.read_exact(&mut seed)
            .map_err(|e| err(Path::new("/dev/urandom"), e))?;
    }
    let key = SigningKey::from_bytes(&seed);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    {
        use std::io::Write;
        let mut f = opts.open(path).map_err(|e| err(path, e))?;
        writeln!(f, "{}", hex(&seed)).map_err(|e| err(path, e))?;
        f.sync_all().map_err(|e| err(path, e))?;
    }
    let public = key.verifying_key();
    let pub_path = public_key_path(path);
    std::fs::write(&pub_path, format!("{}\n", hex(public.as_bytes())))
        .map_err(|e| err(&pub_path, e))?;
    Ok(public)
}

/// `FILE.pub` beside secret key `FILE`.
pub fn public_key_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{ModelInfo, Run, parse, to_text};
    use detllm::sample::SamplingParams;

    fn transcript_text() -> String {
        let model = ModelInfo {
            file: Some("m.gguf".into()),
            sha256: "ab".repeat(32),
            architecture: "llama".into(),
            vocab_size: 96,
            dim: 64,
            n_layers: 2,
        };
        let params = SamplingParams {
            seed: 9,
            ..SamplingParams::LLAMA_DEFAULTS
        };
        let digests = [[1u8; 32], [2u8; 32]];
        to_text(
            &model,
            &Run {
                params: &params,
                max_tokens: 5,
                prompt: "hi",
                prompt_ids: &[1, 2, 3],
                ids: &[7, 8],
                digests: &digests,
                constraint: None,
            },
        )
    }

    fn signed(key: &SigningKey) -> String {
        let text = transcript_text();
        let t = parse(&text).expect("parses");
        with_receipt(&text, sign(key, &t)).expect("receipt added")
    }

    fn checked(text: &str, key: &VerifyingKey) -> Result<(), ReceiptError> {
        check(text, &parse(text).expect("parses"), key)
    }

    #[test]
    fn a_signed_transcript_checks_and_each_tamper_has_its_own_error() {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let public = key.verifying_key();
        let text = signed(&key);
        checked(&text, &public).expect("verifies");
        assert!(matches!(
            checked(&transcript_text(), &public),
            Err(ReceiptError::Unsigned)
        ));
        let other = SigningKey::from_bytes(&[8u8; 32]).verifying_key();
        assert!(matches!(
            checked(&text, &other),
            Err(ReceiptError::WrongKey { .. })
        ));
        let seed = text.replace("\"seed\": 9", "\"seed\": 10");
        assert_ne!(seed, text);
        assert!(matches!(
            checked(&seed, &public),
            Err(ReceiptError::EditedRequest)
        ));
        let prompt = text.replacen("    3\n", "    4\n", 1);
        assert_ne!(prompt, text);
        assert!(matches!(
            checked(&prompt, &public),
            Err(ReceiptError::EditedRequest)
        ));
        let last = hex(&[2u8; 32]);
        let digest = text.replace(
            &format!("\"final_digest\": \"{last}\""),
            &format!("\"final_digest\": \"{}\"", hex(&[3u8; 32])),
        );
        assert_ne!(digest, text);
        assert!(matches!(
            checked(&digest, &public),
            Err(ReceiptError::EditedDigest)
        ));
        let model = text.replace(&"ab".repeat(32), &"ac".repeat(32));
        assert!(matches!(
            checked(&model, &public),
            Err(ReceiptError::EditedDigest)
        ));
    }

    #[test]
    fn a_constrained_request_signs_its_constraint() {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let public = key.verifying_key();
        let with = |sha: &str| {
            let mut v: serde_json::Value = serde_json::from_str(&transcript_text()).expect("json");
            v["constraint"] = json!({ "kind": "lark", "text": "start: \"a\"", "sha256": sha });
            serde_json::to_string_pretty(&v).expect("text")
        };
        let (a, b) = ("1".repeat(64), "2".repeat(64));
        let text = with(&a);
        let t = parse(&text).expect("parses");
        assert_ne!(
            request_digest(&t),
            request_digest(&parse(&transcript_text()).expect("parses"))
        );
        let signed = with_receipt(&text, sign(&key, &t)).expect("receipt added");
        checked(&signed, &public).expect("verifies");
        let edited = signed.replace(&a, &b);
        assert_ne!(edited, signed);
        assert!(matches!(
            checked(&edited, &public),
            Err(ReceiptError::EditedRequest)
        ));
    }

    #[test]
    fn keygen_writes_a_private_secret_and_its_public_key() {
        let dir = std::env::temp_dir().join(format!("detllm-keygen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("server.key");
        let public = keygen(&path).expect("keygen");
        assert!(keygen(&path).is_err(), "an existing key is not overwritten");
        let secret = read_signing_key(&path).expect("secret");
        assert_eq!(secret.verifying_key(), public);
        assert_eq!(
            read_public_key(&public_key_path(&path)).expect("pub"),
            public
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
