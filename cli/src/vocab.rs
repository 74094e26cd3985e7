//! The session's tokenizer: the model's own vocabulary, or a one-token
//! stand-in for a model without tokenizer metadata (such as the synthetic
//! test model), so that `verify` can re-run a transcript given as token ids.

#![forbid(unsafe_code)]

use crate::error::CliResult;
use detllm::Arena;
use detllm::gguf::File;
use detllm::tokenizer::{SliceVocab, Tokenizer};

/// The only token of the stand-in vocabulary. It has no BOS, no EOS and no
/// end-of-generation id, so generation from prompt ids runs to the step
/// count, as the library's own runs do. Text prompts cannot be encoded with it.
const NO_VOCAB_TEXT: &[u8] = b"<unk>";

fn no_vocab() -> SliceVocab<'static, 'static> {
    const TOKENS: &[&[u8]] = &[NO_VOCAB_TEXT];
    SliceVocab {
        model: "llama",
        pre: None,
        base: NO_VOCAB_TEXT,
        tokens: TOKENS,
        token_types: None,
        scores: None,
        merges: None,
        bos: None,
        eos: None,
        add_bos: Some(false),
        add_eos: Some(false),
        add_space_prefix: Some(false),
    }
}

fn has_vocab(file: &File<'_>) -> bool {
    file.get("tokenizer.ggml.tokens").is_some()
}

/// Arena bytes of `file`'s tokenizer (or of the stand-in when it has none).
pub fn tokenizer_bytes(file: &File<'_>) -> CliResult<usize> {
    let bytes = if has_vocab(file) {
        Tokenizer::bytes_required_gguf(file)?
    } else {
        Tokenizer::bytes_required_for(&no_vocab())?
    };
    Ok(bytes)
}

/// `file`'s tokenizer, or the one-token stand-in when it has no vocabulary.
pub fn tokenizer<'a>(file: &File<'a>, arena: &mut Arena<'a>) -> CliResult<Tokenizer<'a>> {
    let tokenizer = if has_vocab(file) {
        Tokenizer::from_gguf(file, arena)?
    } else {
        Tokenizer::build(&no_vocab(), arena)?
    };
    Ok(tokenizer)
}
