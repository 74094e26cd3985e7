//! [`VocabSource`] over a GGUF file: the `tokenizer.ggml.*` keys.
//!
//! Token texts are borrowed from the `tokenizer.ggml.tokens` array's packed
//! bytes (zero-copy); `token_type` and `scores` are read element by element
//! (O(1) each).

#![forbid(unsafe_code)]

use super::vocab::{VocabSource, keys};
use super::{Tokenizer, TokenizerError};
use crate::gguf::{Array, File};
use crate::{Arena, Error, Result};

/// A GGUF file's vocabulary.
pub struct GgufVocab<'a> {
    file: File<'a>,
    tokens: Array<'a>,
    merges: Option<Array<'a>>,
    types: Option<Array<'a>>,
    scores: Option<Array<'a>>,
}

impl<'a> GgufVocab<'a> {
    /// Find the vocabulary arrays of `file`.
    pub fn new(file: &File<'a>) -> Result<GgufVocab<'a>> {
        let tokens = file
            .get_array(keys::TOKENS)?
            .ok_or(TokenizerError::BadTokenCount { n: 0 })?;
        Ok(GgufVocab {
            file: *file,
            tokens,
            merges: file.get_array(keys::MERGES)?,
            types: file.get_array(keys::TOKEN_TYPE)?,
            scores: file.get_array(keys::SCORES)?,
        })
    }
}

impl<'a> VocabSource<'a> for GgufVocab<'a> {
    fn base(&self) -> &'a [u8] {
        self.tokens.raw()
    }

    fn get_str(&self, key: &str) -> Result<Option<&'a [u8]>> {
        Ok(self.file.get_str(key)?.map(str::as_bytes))
    }

    fn get_u32(&self, key: &str) -> Result<Option<u32>> {
        Ok(self.file.get_u32(key)?)
    }

    fn get_bool(&self, key: &str) -> Result<Option<bool>> {
        Ok(self.file.get_bool(key)?)
    }

    fn n_tokens(&self) -> Result<usize> {
        Ok(self.tokens.len())
    }

    fn for_each_token(&self, f: &mut dyn FnMut(usize, &'a [u8]) -> Result<()>) -> Result<()> {
        for (i, t) in self.tokens.str_iter()?.enumerate() {
            f(i, t)?;
        }
        Ok(())
    }

    fn n_merges(&self) -> Result<Option<usize>> {
        Ok(self.merges.map(|m| m.len()))
    }

    fn for_each_merge(&self, f: &mut dyn FnMut(usize, &'a [u8]) -> Result<()>) -> Result<()> {
        if let Some(m) = self.merges {
            for (i, s) in m.str_iter()?.enumerate() {
                f(i, s)?;
            }
        }
        Ok(())
    }

    fn n_token_types(&self) -> Result<Option<usize>> {
        Ok(self.types.map(|a| a.len()))
    }

    fn token_type(&self, i: usize) -> Result<i32> {
        let missing = Error::MissingMetadata {
            key: crate::error::Name::new("tokenizer.ggml.token_type"),
        };
        let a = self.types.ok_or(missing)?;
        a.get_i32(i)?.ok_or(missing)
    }

    fn n_scores(&self) -> Result<Option<usize>> {
        Ok(self.scores.map(|a| a.len()))
    }

    fn score_bits(&self, i: usize) -> Result<u32> {
        let missing = Error::MissingMetadata {
            key: crate::error::Name::new("tokenizer.ggml.scores"),
        };
        let a = self.scores.ok_or(missing)?;
        Ok(a.get_f32(i)?.ok_or(missing)?.to_bits())
    }
}

impl super::chat::Template {
    /// The chat format of a GGUF model without building its tokenizer: the
    /// same answer as [`Tokenizer::chat_template`] for a vocabulary that
    /// loads (one pass over the token texts).
    pub fn of_gguf(file: &File<'_>) -> Option<super::chat::Template> {
        let tmpl = file.get_str(keys::CHAT_TEMPLATE).ok().flatten();
        let has_start_of_turn = tmpl.is_none()
            && file
                .get_array(keys::TOKENS)
                .ok()
                .flatten()
                .and_then(|a| a.str_iter().ok())
                .is_some_and(|mut it| it.any(|t| t == b"<start_of_turn>"));
        Self::detect(tmpl, has_start_of_turn)
    }
}

impl<'a> Tokenizer<'a> {
    /// Arena bytes [`Tokenizer::from_gguf`] needs for `file`.
    pub fn bytes_required_gguf(file: &File<'a>) -> Result<usize> {
        Self::bytes_required_for(&GgufVocab::new(file)?)
    }

    /// Build the tokenizer of a GGUF model, borrowing token texts from the
    /// file and carving indices from `arena`.
    pub fn from_gguf(file: &File<'a>, arena: &mut Arena<'a>) -> Result<Tokenizer<'a>> {
        Self::build(&GgufVocab::new(file)?, arena)
    }
}
