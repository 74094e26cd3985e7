//! Small formatting helpers shared by the commands' printed output.

#![forbid(unsafe_code)]

/// Lowercase hex of `bytes` (digests, hashes).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `x` rounded to one decimal (the tokens/s figures in JSON output).
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Bytes as MiB for display.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}
