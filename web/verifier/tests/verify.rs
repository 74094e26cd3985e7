//! The verifier on the committed synthetic transcript
//! (`tests/data/synth-transcript.json`, which `detllm verify` and every
//! cross target reproduce): it verifies with the transcript's final
//! digest; any edited token or digest is reported at its step with the
//! recorded and recomputed values; another model is refused before any
//! step runs; and job bytes round-trip and never panic when malformed.
//! The browser test (`scripts/browser-test.sh`) runs the wasm build of the
//! same code on a real SmolLM2 transcript.

use detllm::F32;
use detllm::model::synth::{SynthSpec, synth_vec};
use detllm::sample::SamplingParams;
use detllm_web::{Job, Observer, Step, Verdict, verify};
use proptest::prelude::*;
use serde_json::Value;
use std::sync::OnceLock;

fn hex32(s: &str) -> [u8; 32] {
    let mut d = [0u8; 32];
    for (i, b) in d.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex");
    }
    d
}

fn bits(v: &Value) -> F32 {
    let s = v["bits"].as_str().expect("bits");
    F32::from_bits(u32::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex"))
}

/// The committed transcript as a job (what the page builds from the JSON).
fn job_of(v: &Value) -> Job {
    let s = &v["sampling"];
    let ids = |a: &Value| -> Vec<u32> {
        let a = a.as_array().expect("array");
        a.iter().map(|x| x.as_u64().expect("id") as u32).collect()
    };
    Job {
        model_sha256: hex32(v["model"]["sha256"].as_str().expect("sha256")),
        params: SamplingParams {
            temperature: bits(&s["temperature"]),
            top_k: s["top_k"].as_u64().expect("top_k") as u32,
            top_p: bits(&s["top_p"]),
            min_p: bits(&s["min_p"]),
            repeat_penalty: bits(&s["repeat_penalty"]),
            penalty_last_n: s["penalty_last_n"].as_u64().expect("n") as usize,
            seed: s["seed"].as_u64().expect("seed"),
        },
        max_tokens: v["max_tokens"].as_u64().expect("max_tokens") as usize,
        prompt_ids: ids(&v["prompt_ids"]),
        steps: v["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|st| Step {
                id: st["id"].as_u64().expect("id") as u32,
                digest: hex32(st["digest"].as_str().expect("digest")),
            })
            .collect(),
        final_digest: hex32(v["final_digest"].as_str().expect("final")),
    }
}

struct Fixture {
    model: Vec<u8>,
    job: Job,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/synth-transcript.json"
        );
        let text = std::fs::read_to_string(path).expect("synth-transcript.json");
        let v: Value = serde_json::from_str(&text).expect("JSON");
        Fixture {
            model: synth_vec(&SynthSpec::TINY).expect("synthetic model"),
            job: job_of(&v),
        }
    })
}

/// Records what the verifier reports.
#[derive(Default)]
struct Log {
    hashed: Option<bool>,
    steps: Vec<u32>,
}

impl Observer for Log {
    fn token_text(&mut self, _: u32, _: &[u8]) {}
    fn hashed(&mut self, ok: bool) {
        self.hashed = Some(ok);
    }
    fn prefilled(&mut self, _: usize) {}
    fn step(&mut self, _: usize, id: u32) {
        self.steps.push(id);
    }
}

fn run(job: &Job) -> (Verdict, Log) {
    let mut log = Log::default();
    let verdict = verify(&fixture().model, job, &mut log).expect("runs");
    (verdict, log)
}

#[test]
fn the_committed_transcript_verifies() {
    let f = fixture();
    let (verdict, log) = run(&f.job);
    let want = Verdict::Verified {
        steps: f.job.steps.len(),
        digest: f.job.final_digest,
    };
    assert_eq!(verdict, want);
    let recorded: Vec<u32> = f.job.steps.iter().map(|s| s.id).collect();
    assert_eq!(log.steps, recorded);
}

#[test]
fn another_model_is_refused_before_any_step() {
    let mut job = fixture().job.clone();
    job.model_sha256[0] ^= 1;
    let (verdict, log) = run(&job);
    assert!(matches!(verdict, Verdict::WrongModel { .. }));
    assert_eq!(log.hashed, Some(false));
    assert!(log.steps.is_empty());
}

#[test]
fn a_wrong_final_digest_is_reported() {
    let mut job = fixture().job.clone();
    job.final_digest[31] ^= 0x80;
    assert!(matches!(run(&job).0, Verdict::FinalDigest { .. }));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// An edited token is reported at its step, recorded vs recomputed.
    #[test]
    fn an_edited_token_is_reported_at_its_step(pick in any::<prop::sample::Index>(), id in 0u32..96) {
        let f = fixture();
        let step = pick.index(f.job.steps.len());
        prop_assume!(f.job.steps[step].id != id);
        let mut job = f.job.clone();
        job.steps[step].id = id;
        match run(&job).0 {
            Verdict::Diverged(d) => {
                prop_assert_eq!(d.step, step);
                prop_assert_eq!(d.recorded, id);
                prop_assert_eq!(d.recomputed, f.job.steps[step].id);
                prop_assert_eq!(d.recomputed_digest, f.job.steps[step].digest);
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }

    /// An edited digest (token kept) is reported at its step.
    #[test]
    fn an_edited_digest_is_reported_at_its_step(pick in any::<prop::sample::Index>(), byte in 0usize..32, flip in 1u8..=255) {
        let f = fixture();
        let step = pick.index(f.job.steps.len());
        let mut job = f.job.clone();
        job.steps[step].digest[byte] ^= flip;
        match run(&job).0 {
            Verdict::Diverged(d) => {
                prop_assert_eq!(d.step, step);
                prop_assert_eq!(d.recorded, d.recomputed);
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }

    /// Job bytes round-trip; any cut or change decodes to a job or an
    /// error, never a panic.
    #[test]
    fn job_bytes_round_trip_and_bad_bytes_are_errors(cut in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(), x in any::<u8>()) {
        let bytes = fixture().job.encode().expect("encodes");
        prop_assert_eq!(&Job::decode(&bytes).expect("decodes"), &fixture().job);
        let n = cut.index(bytes.len());
        prop_assert!(Job::decode(&bytes[..n]).is_err());
        let mut changed = bytes.clone();
        changed[at.index(bytes.len())] ^= x;
        let _ = Job::decode(&changed);
    }
}
