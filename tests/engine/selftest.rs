//! The whole-model determinism cases agree across schedules and KV layouts.
use detllm::selftest::model::{
    MODEL_ARCHS, MODEL_FORMATS, MODEL_SCRATCH_BYTES, format_spec, sampled, schedule_digests,
    spec_schedule_digests,
};

#[test]
fn schedules_and_layouts_agree() {
    let mut scratch = vec![0u8; MODEL_SCRATCH_BYTES];
    let all = schedule_digests(&mut scratch).unwrap();
    for (m, model) in all.iter().enumerate() {
        assert_eq!(
            model[0], model[1],
            "model {m}: batched/paged differs from sequential/contiguous"
        );
        assert_eq!(
            model[0], model[2],
            "model {m}: chunked differs from sequential"
        );
        // Different sequences see different prompts.
        assert_ne!(model[0][0], model[0][1]);
    }
    assert_ne!(all[0][0], all[1][0]);
}

#[test]
fn sampled_run_repeats() {
    let mut scratch = vec![0u8; MODEL_SCRATCH_BYTES];
    let a = sampled(&mut scratch).unwrap();
    scratch.fill(0xAA);
    assert_eq!(a, sampled(&mut scratch).unwrap());
}

/// The architecture and format cases (`model.gemma3` … `model.q6_k`): each
/// model's schedules and KV layouts agree, its sequences differ, and no two
/// models give the same logits.
#[test]
fn arch_and_format_schedules_agree() {
    let mut scratch = vec![0u8; MODEL_SCRATCH_BYTES];
    let specs: Vec<_> = MODEL_ARCHS
        .iter()
        .copied()
        .chain(MODEL_FORMATS.iter().map(|&t| format_spec(t)))
        .collect();
    let mut firsts = Vec::new();
    for spec in &specs {
        let d = spec_schedule_digests(spec, &mut scratch).unwrap();
        let name = format!("{:?}/{:?}", spec.arch, spec.weight_type);
        assert_eq!(d[0], d[1], "{name}: batched/paged differs from sequential");
        assert_eq!(d[0], d[2], "{name}: chunked differs from sequential");
        assert_ne!(d[0][0], d[0][1], "{name}: two prompts, one digest");
        assert!(
            !firsts.contains(&d[0][0]),
            "{name}: same logits as another model"
        );
        firsts.push(d[0][0]);
    }
}

/// The format models compute numbers: every logit of a 7-token prompt is
/// finite and each row is not constant (so their digests hash real
/// arithmetic, not NaN propagation).
#[test]
fn format_models_give_finite_spread_logits() {
    use detllm::gguf::File;
    use detllm::kv::{ContiguousCache, KvType};
    use detllm::model::synth::{synth_sizes, write_synth};
    use detllm::model::{Engine, Entry, Limits, Model};
    for ty in MODEL_FORMATS {
        let spec = format_spec(ty);
        let (s, o) = synth_sizes(&spec).unwrap();
        let (mut tmp, mut bytes) = (vec![0u8; s], vec![0u8; o]);
        let n = write_synth(&spec, &mut tmp, &mut bytes).unwrap();
        bytes.truncate(n);
        let file = File::parse(&bytes).unwrap();
        let mut buf = vec![0u8; 4 << 20];
        let mut arena = detllm::Arena::new(&mut buf);
        let model = Model::from_gguf(&file, &bytes, &mut arena).unwrap();
        let vocab = model.cfg.vocab_size;
        let lim = Limits {
            max_seqs: 1,
            max_seq_len: 8,
            max_step_tokens: 8,
            max_logit_rows: 8,
            kv_type: KvType::F16,
            page_size: 8,
            n_pages: 1,
        };
        let mut eng = Engine::<ContiguousCache>::new(model, lim, &mut arena).unwrap();
        let seq = eng.new_seq().unwrap();
        let tokens = [1u32, 5, 9, 40, 77, 3, 95];
        let entry = Entry {
            seq,
            tokens: &tokens,
            all_logits: true,
        };
        let logits = eng.step(&detllm::Serial, &[entry]).unwrap();
        for row in logits.chunks_exact(vocab) {
            let v: Vec<f32> = row.iter().map(|x| f32::from_bits(x.to_bits())).collect();
            assert!(v.iter().all(|x| x.is_finite()), "{ty:?}: non-finite logit");
            let (lo, hi) = v
                .iter()
                .fold((f32::MAX, f32::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            assert!(hi - lo > 1e-3, "{ty:?}: constant row {lo}..{hi}");
            eprintln!("{ty:?}: logits in [{lo}, {hi}]");
        }
    }
}
