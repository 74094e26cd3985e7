//! `detllm inspect`: a GGUF file's header, metadata and tensor table.
//!
//! A malformed file is the command's answer, not a failure: one line
//! `detllm: FILE: malformed GGUF: …` on stderr and exit code 1.

#![forbid(unsafe_code)]

use crate::error::CliResult;
use crate::model_file::ModelFile;
use clap::Args;
use detllm::gguf::{File, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct InspectArgs {
    /// The GGUF file.
    pub model: PathBuf,
}

/// Longest string value shown (characters).
const MAX_SHOWN_CHARS: usize = 80;

pub fn run(args: InspectArgs) -> CliResult<ExitCode> {
    let model = ModelFile::open_mapped(&args.model)?;
    let file = match File::parse(model.bytes()) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("detllm: {}: malformed GGUF: {e}", args.model.display());
            return Ok(ExitCode::from(1));
        }
    };
    println!(
        "file: {} ({} bytes)",
        model.path().display(),
        model.bytes().len()
    );
    println!(
        "gguf v{}, {} metadata keys, {} tensors, alignment {}, data at {}",
        file.version(),
        file.n_kv(),
        file.n_tensors(),
        file.alignment(),
        file.data_offset()
    );
    for (key, value) in file.kvs() {
        println!(
            "  {:<45} {}",
            String::from_utf8_lossy(key),
            show_value(&value)
        );
    }
    println!("tensors:");
    for t in file.tensors() {
        let dims: Vec<String> =
            t.ne.iter()
                .take(t.n_dims as usize)
                .map(|d| d.to_string())
                .collect();
        println!(
            "  {:<32} {:<6} [{}] at +{} ({} bytes)",
            t.name_str(),
            format!("{:?}", t.ty),
            dims.join(", "),
            t.offset,
            t.data.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A metadata value on one line: strings quoted and cut to
/// [`MAX_SHOWN_CHARS`], arrays as their element type and length.
fn show_value(value: &Value<'_>) -> String {
    match value {
        Value::Str(s) => {
            let s: String = String::from_utf8_lossy(s)
                .chars()
                .take(MAX_SHOWN_CHARS)
                .collect();
            format!("{s:?}")
        }
        Value::F32(x) => format!("{}", f32::from_bits(x.to_bits())),
        Value::Array(a) => format!("[{:?}; {}]", a.elem_type(), a.len()),
        other => format!("{other:?}"),
    }
}
