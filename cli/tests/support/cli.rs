//! Running the `detllm` binary from the integration tests of its package
//! (`cli/tests/cli.rs`, `cli/tests/transcript_cli.rs`, `cli/tests/serve.rs`).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The `detllm` binary cargo built for this test (a test of `detllm-cli`).
pub fn bin() -> Command {
    match option_env!("CARGO_BIN_EXE_detllm") {
        Some(exe) => Command::new(exe),
        None => panic!("the detllm binary is not built: run the tests of the detllm-cli package"),
    }
}

/// Runs `cmd` (optionally feeding `stdin`) and returns (exit code, stdout,
/// stderr); fails the test if detllm panicked.
pub fn run(cmd: &mut Command, stdin: Option<&[u8]>) -> (i32, String, String) {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().expect("spawn detllm");
    if let Some(bytes) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(bytes)
            .expect("write stdin");
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("run detllm");
    let (out, err) = (
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    );
    assert!(
        !err.contains("panicked") && !out.contains("panicked"),
        "detllm panicked:\n{err}"
    );
    (status.code().unwrap_or(-1), out, err)
}

/// A path in a per-process temporary directory.
pub fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("detllm-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

/// Starts `cmd` (a `detllm serve … --port 0`) with its stderr piped and waits
/// for the line naming its address; (the child, its port). stderr keeps
/// being drained afterwards so the server never blocks on a full pipe.
pub fn spawn_listening(cmd: &mut Command) -> (std::process::Child, u16) {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start detllm serve");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let port = loop {
        let line = lines
            .next()
            .expect("server exited before listening")
            .expect("read stderr");
        if let Some(rest) = line.split("on http://").nth(1) {
            let addr = rest.split_whitespace().next().unwrap_or("");
            break addr.rsplit(':').next().unwrap().parse().expect("port");
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, port)
}
