//! [`Utf8Stream`]: prints token pieces as they come without splitting a
//! UTF-8 character that spans two tokens.

#![forbid(unsafe_code)]

/// Streams complete UTF-8 from token pieces, holding back a partial character.
///
/// Invalid bytes are printed as U+FFFD as soon as they are known to be
/// invalid; an incomplete character at the end is held until the next piece
/// or [`Utf8Stream::finish`].
#[derive(Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// The text that `piece` completes (possibly empty).
    pub fn push(&mut self, piece: &[u8]) -> String {
        self.pending.extend_from_slice(piece);
        let complete = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(e) => e.valid_up_to() + e.error_len().unwrap_or(1),
        };
        let out: Vec<u8> = self.pending.drain(..complete).collect();
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Whatever is still held back (a partial character prints as U+FFFD).
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}
