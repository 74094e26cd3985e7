//! The engine's memory plan and limits, on fixed models and limits chosen to
//! reach every layout case: one decode row, a batch, an output head run in
//! passes (vocabulary larger than the head's share of the scratch), llama and
//! qwen2, paged and contiguous caches.
//!
//! * `Engine::bytes_required` is exactly what `Engine::new` needs: with that
//!   many bytes left after the model the build succeeds at every alignment
//!   tried, with one byte less it is `ArenaExhausted { requested: plan }` and
//!   the arena is untouched.
//! * `Limits` that cannot work are refused with the field's name.
//! * The head in passes gives the logits of the head in one pass.
#![cfg(feature = "std")]

use detllm::gguf::File;
use detllm::kv::{ContiguousCache, KvType, PagedCache};
use detllm::model::synth::{SynthSpec, synth_vec};
use detllm::model::{Arch, Engine, Entry, KvBuild, Limits, Model};
use detllm::quant::GgmlType;
use detllm::{Arena, Error, Serial};

fn specs() -> [SynthSpec; 3] {
    [
        SynthSpec::TINY,
        SynthSpec {
            arch: Arch::Qwen2,
            weight_type: GgmlType::F16,
            embd_type: GgmlType::Q4_0,
            separate_output: true,
            seed: 2,
            ..SynthSpec::TINY
        },
        // A vocabulary larger than `HEAD_MIN_ROWS`, so a multi-row head
        // runs in passes.
        SynthSpec {
            vocab_size: 3000,
            seed: 3,
            ..SynthSpec::TINY
        },
    ]
}

/// Limits of `rows` step tokens and `logit_rows` logit rows.
fn limits(rows: usize, logit_rows: usize) -> Limits {
    Limits {
        max_seqs: 3,
        max_seq_len: 20,
        max_step_tokens: rows,
        max_logit_rows: logit_rows,
        kv_type: KvType::F16,
        page_size: 4,
        n_pages: 15,
    }
}

const SHAPES: [(usize, usize); 4] = [(1, 1), (8, 1), (8, 3), (6, 6)];

/// Builds the model in `buf`, then the engine in what is left (a paged or a
/// contiguous cache). Returns the engine's result, the bytes left for it and
/// the bytes it took.
fn build<'a>(
    file: &File<'a>,
    bytes: &'a [u8],
    buf: &'a mut [u8],
    lim: Limits,
    paged: bool,
) -> (Result<(), Error>, usize, usize) {
    let mut arena = Arena::new(buf);
    let model = Model::from_gguf(file, bytes, &mut arena).expect("model");
    let before = arena.remaining();
    let r = if paged {
        Engine::<PagedCache>::new(model, lim, &mut arena).map(|_| ())
    } else {
        Engine::<ContiguousCache>::new(model, lim, &mut arena).map(|_| ())
    };
    (r, before, before - arena.remaining())
}

fn plan<'a, K: KvBuild<'a>>(model: &Model<'_>, lim: &Limits) -> usize {
    Engine::<K>::bytes_required(model, lim).expect("plan")
}

fn plan_is_exact(paged: bool) {
    for spec in specs() {
        let bytes = synth_vec(&spec).expect("synthetic model");
        let file = File::parse(&bytes).expect("parse");
        let cfg = detllm::model::Config::from_gguf(&file).expect("config");
        let model_plan = Model::bytes_required(&cfg).expect("model plan");
        for (rows, logit_rows) in SHAPES {
            let lim = limits(rows, logit_rows);
            let plan = {
                let mut buf = vec![0u8; model_plan];
                let mut arena = Arena::new(&mut buf);
                let model = Model::from_gguf(&file, &bytes, &mut arena).expect("model");
                if paged {
                    plan::<PagedCache>(&model, &lim)
                } else {
                    plan::<ContiguousCache>(&model, &lim)
                }
            };
            for offset in [0, 1, 3, 8] {
                // The model's own use at this offset, then exactly the plan.
                let mut buf = vec![0u8; model_plan + plan + 16];
                let model_used = {
                    let mut arena = Arena::new(&mut buf[offset..]);
                    Model::from_gguf(&file, &bytes, &mut arena).expect("model");
                    arena.used()
                };
                let end = offset + model_used + plan;
                let (r, left, taken) = build(&file, &bytes, &mut buf[offset..end], lim, paged);
                assert_eq!(left, plan);
                assert!(
                    r.is_ok(),
                    "{spec:?} {lim:?} @{offset}: the plan failed: {r:?}"
                );
                assert!(taken <= plan);
                let (r, left, taken) = build(&file, &bytes, &mut buf[offset..end - 1], lim, paged);
                assert_eq!(left, plan - 1);
                assert!(
                    matches!(r, Err(Error::ArenaExhausted { requested, .. }) if requested == plan),
                    "{spec:?} {lim:?} @{offset}: plan - 1 gave {r:?}"
                );
                assert_eq!(taken, 0, "a refused build touched the arena");
            }
        }
    }
}

#[test]
fn plan_is_exact_paged() {
    plan_is_exact(true);
}

#[test]
fn plan_is_exact_contiguous() {
    plan_is_exact(false);
}

#[test]
fn limits_name_the_bad_field() {
    let bytes = synth_vec(&SynthSpec::TINY).expect("synthetic model");
    let file = File::parse(&bytes).expect("parse");
    let mut buf = vec![0u8; 1 << 20];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, &bytes, &mut arena).expect("model");
    let good = limits(4, 2);
    let too_long = u32::MAX as usize + 1;
    let cases = [
        (
            Limits {
                max_seqs: 0,
                ..good
            },
            "max_seqs",
            0,
        ),
        (
            Limits {
                max_seq_len: 0,
                ..good
            },
            "max_seq_len",
            0,
        ),
        (
            Limits {
                max_seq_len: too_long,
                ..good
            },
            "max_seq_len",
            too_long,
        ),
        (
            Limits {
                max_step_tokens: 0,
                ..good
            },
            "max_step_tokens",
            0,
        ),
        (
            Limits {
                max_step_tokens: too_long,
                ..good
            },
            "max_step_tokens",
            too_long,
        ),
        (
            Limits {
                max_logit_rows: 0,
                ..good
            },
            "max_logit_rows",
            0,
        ),
        (
            Limits {
                page_size: 0,
                ..good
            },
            "page_size",
            0,
        ),
    ];
    for (lim, name, value) in cases {
        let r = Engine::<PagedCache>::bytes_required(&model, &lim);
        assert_eq!(r, Err(Error::InvalidLimit { name, value }), "{lim:?}");
    }
    assert!(Engine::<PagedCache>::bytes_required(&model, &good).is_ok());
}

/// Logits of `tokens` fed to a fresh sequence in one step with every row's
/// logits returned, on an engine with `logit_rows` logit rows.
fn all_logits(bytes: &[u8], tokens: &[u32], lim: Limits) -> Vec<u32> {
    let file = File::parse(bytes).expect("parse");
    let mut buf = vec![0u8; 8 << 20];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, bytes, &mut arena).expect("model");
    let mut eng = Engine::<PagedCache>::new(model, lim, &mut arena).expect("engine");
    let seq = eng.new_seq().expect("seq");
    let mut out = Vec::new();
    for chunk in tokens.chunks(lim.max_logit_rows) {
        let entry = Entry {
            seq,
            tokens: chunk,
            all_logits: true,
        };
        let logits = eng.step(&Serial, &[entry]).expect("step");
        out.extend(logits.iter().map(|v| v.to_bits()));
    }
    out
}

#[test]
fn head_in_passes_equals_head_in_one_pass() {
    let spec = specs()[2];
    let bytes = synth_vec(&spec).expect("synthetic model");
    let tokens: Vec<u32> = (0..6).map(|i| (i * 977 + 5) % 3000).collect();
    let in_passes = all_logits(&bytes, &tokens, limits(6, 6));
    let one_row = all_logits(&bytes, &tokens, limits(6, 1));
    assert_eq!(in_passes.len(), 6 * 3000);
    assert!(in_passes == one_row, "the head in passes changed a logit");
}
