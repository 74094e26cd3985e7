//! The whole-model determinism cases agree across schedules and KV layouts.
use detllm::selftest::model::{MODEL_SCRATCH_BYTES, sampled, schedule_digests};

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
