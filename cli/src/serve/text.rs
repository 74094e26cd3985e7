//! A choice's text as tokens arrive: complete UTF-8 only, stop strings
//! found across token boundaries, and in streaming nothing sent that a stop
//! string might still swallow.
//!
//! The text returned ends before the first stop string (OpenAI's rule); the
//! decision depends only on the token pieces, so a choice's text is the same
//! whether it streams or not and whatever else the server runs.

#![forbid(unsafe_code)]

/// The text of one choice so far.
#[derive(Debug, Default)]
pub struct ChoiceText {
    stops: Vec<String>,
    /// Bytes of a character split across pieces, waiting for the rest.
    pending: Vec<u8>,
    /// Decoded text (up to the stop string once one is found).
    text: String,
    /// Bytes of `text` already handed out by [`ChoiceText::push`].
    emitted: usize,
    stopped: bool,
}

impl ChoiceText {
    /// Text that ends at the first of `stops`.
    pub fn new(stops: Vec<String>) -> ChoiceText {
        ChoiceText {
            stops,
            ..ChoiceText::default()
        }
    }

    /// Adds a token's bytes; returns the text that is now final (for a
    /// stream) and whether a stop string ended the choice.
    pub fn push(&mut self, piece: &[u8]) -> (String, bool) {
        if self.stopped {
            return (String::new(), true);
        }
        self.pending.extend_from_slice(piece);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(e) => e.valid_up_to() + e.error_len().unwrap_or(1),
        };
        let done: Vec<u8> = self.pending.drain(..valid).collect();
        let search_from = self.text.len().saturating_sub(self.max_stop_len());
        self.text.push_str(&String::from_utf8_lossy(&done));
        if let Some(at) = self.first_stop(search_from) {
            self.text.truncate(at);
            self.stopped = true;
            return (self.take(at), true);
        }
        let safe = self.text.len() - self.held_back();
        (self.take(safe), false)
    }

    /// The rest of the text when the choice ends without a stop string
    /// (a split character at the end becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        if !self.stopped {
            let rest = String::from_utf8_lossy(&self.pending).into_owned();
            self.text.push_str(&rest);
        }
        self.pending.clear();
        self.take(self.text.len())
    }

    /// All text so far.
    #[cfg(test)]
    pub fn text(&self) -> &str {
        &self.text
    }

    fn take(&mut self, end: usize) -> String {
        let s = self.text.get(self.emitted..end).unwrap_or("").to_string();
        self.emitted = self.emitted.max(end);
        s
    }

    fn max_stop_len(&self) -> usize {
        self.stops.iter().map(String::len).max().unwrap_or(0)
    }

    /// Start of the earliest stop string beginning at or after `from`
    /// (a char boundary at or before the new text).
    fn first_stop(&self, from: usize) -> Option<usize> {
        let from = (0..=from).rev().find(|&i| self.text.is_char_boundary(i))?;
        self.stops
            .iter()
            .filter_map(|s| self.text[from..].find(s.as_str()).map(|i| from + i))
            .min()
    }

    /// Bytes at the end of the text that begin some stop string.
    fn held_back(&self) -> usize {
        let t = self.text.as_bytes();
        let mut held = 0;
        for s in &self.stops {
            let s = s.as_bytes();
            for len in (1..s.len().min(t.len() + 1)).rev() {
                if t.ends_with(&s[..len]) {
                    held = held.max(len);
                    break;
                }
            }
        }
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&[u8]]) -> (Vec<String>, String, bool) {
        let mut c = ChoiceText::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = Vec::new();
        let mut stopped = false;
        for p in pieces {
            let (d, s) = c.push(p);
            out.push(d);
            if s {
                stopped = true;
                break;
            }
        }
        if !stopped {
            out.push(c.finish());
        }
        (out, c.text().to_string(), stopped)
    }

    #[test]
    fn stop_across_pieces_is_cut_and_never_streamed() {
        let (deltas, text, stopped) = run(&["\nUser:"], &[b"Hi", b" there\nUs", b"er: more"]);
        assert!(stopped);
        assert_eq!(text, "Hi there");
        assert_eq!(deltas.concat(), "Hi there");
        assert_eq!(deltas[1], " there"); // "\nUs" held back
    }

    #[test]
    fn held_back_text_is_released_when_it_cannot_stop() {
        let (deltas, text, stopped) = run(&["END"], &[b"a E", b"N", b"x"]);
        assert!(!stopped);
        assert_eq!(text, "a ENx");
        assert_eq!(deltas, vec!["a ", "", "ENx", ""]);
    }

    #[test]
    fn split_utf8_waits_for_its_bytes() {
        let e = "é".as_bytes();
        let (deltas, text, _) = run(&[], &[&e[..1], &e[1..]]);
        assert_eq!(deltas, vec!["", "é", ""]);
        assert_eq!(text, "é");
    }

    #[test]
    fn earliest_stop_wins() {
        let (_, text, stopped) = run(&["cd", "b"], &[b"abcd"]);
        assert!(stopped);
        assert_eq!(text, "a");
    }

    #[test]
    fn streamed_equals_whole() {
        // Any split of the same bytes gives the same text.
        let whole = "one two STOP three".as_bytes();
        for cut in 0..whole.len() {
            let (d, t, s) = run(&["STOP"], &[&whole[..cut], &whole[cut..]]);
            assert!(s);
            assert_eq!(t, "one two ");
            assert_eq!(d.concat(), "one two ");
        }
    }
}
