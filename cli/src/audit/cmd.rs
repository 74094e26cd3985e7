//! `detllm audit list|show|export|check` (reads a store offline, read-only) and
//! `detllm keygen FILE` (a new Ed25519 key pair for `serve --signing-key`).

#![forbid(unsafe_code)]

use super::receipt;
use super::store::{Store, default_path};
use crate::error::{CliError, CliResult};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// `detllm audit` options.
#[derive(Args)]
pub struct AuditArgs {
    /// The store (default: $XDG_STATE_HOME/detllm/audit.sqlite, else ~/.local/state/detllm/audit.sqlite).
    #[arg(long)]
    pub db: Option<PathBuf>,
    #[command(subcommand)]
    pub what: AuditCommand,
}

/// What `detllm audit` does.
#[derive(Subcommand)]
pub enum AuditCommand {
    /// One line per stored choice, oldest first: id, created (Unix seconds), signed or not, model SHA-256.
    List,
    /// Print one transcript (the file `detllm verify` reads).
    Show {
        /// Its id (the final audit digest).
        id: String,
    },
    /// Every record as JSON Lines: id, created, model_sha256, signature, transcript.
    Export,
    /// SQLite's `PRAGMA integrity_check` and the record count; exit 1 unless it says ok.
    Check,
}

/// `detllm keygen` options.
#[derive(Args)]
pub struct KeygenArgs {
    /// The secret key file (created, mode 0600); the public key goes to FILE.pub.
    pub file: PathBuf,
}

/// Runs `detllm audit`.
pub fn run(args: AuditArgs) -> CliResult<ExitCode> {
    let path = args.db.or_else(default_path).ok_or(CliError::Usage(
        "give --db PATH (no XDG_STATE_HOME or HOME)",
    ))?;
    if !path.exists() {
        return Err(CliError::Audit(format!(
            "audit store {}: no such file",
            path.display()
        )));
    }
    let store = Store::open_read(&path).map_err(|e| CliError::Audit(e.to_string()))?;
    let audit = |e: super::store::StoreError| CliError::Audit(e.to_string());
    let mut out = std::io::stdout().lock();
    match args.what {
        AuditCommand::List => {
            for r in store.all().map_err(audit)? {
                let signed = if r.signature.is_some() {
                    "signed"
                } else {
                    "unsigned"
                };
                writeln!(out, "{}  {}  {signed}  {}", r.id, r.created, r.model_sha256)
                    .map_err(CliError::Io)?;
            }
        }
        AuditCommand::Show { id } => match store.get(&id.to_ascii_lowercase()).map_err(audit)? {
            Some(r) => out
                .write_all(r.transcript.as_bytes())
                .map_err(CliError::Io)?,
            None => {
                return Err(CliError::Audit(format!(
                    "no transcript {id} in {}",
                    path.display()
                )));
            }
        },
        AuditCommand::Check => {
            let verdict = store.integrity_check().map_err(audit)?;
            let n = store.all().map_err(audit)?.len();
            writeln!(out, "integrity_check: {verdict}; {n} records").map_err(CliError::Io)?;
            if verdict != "ok" {
                return Ok(ExitCode::from(1));
            }
        }
        AuditCommand::Export => {
            for r in store.all().map_err(audit)? {
                let transcript: Value =
                    serde_json::from_str(&r.transcript).unwrap_or(Value::String(r.transcript));
                let line = json!({
                    "id": r.id, "created": r.created, "model_sha256": r.model_sha256,
                    "signature": r.signature, "transcript": transcript,
                });
                writeln!(out, "{line}").map_err(CliError::Io)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `detllm keygen`: writes the pair and prints the public key.
pub fn keygen(args: KeygenArgs) -> CliResult<ExitCode> {
    let public = receipt::keygen(&args.file).map_err(|e| CliError::Audit(e.to_string()))?;
    println!("{}", crate::output::hex(public.as_bytes()));
    eprintln!(
        "secret key: {} (mode 0600); public key: {}",
        args.file.display(),
        receipt::public_key_path(&args.file).display()
    );
    Ok(ExitCode::SUCCESS)
}
