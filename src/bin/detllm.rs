//! The `detllm` command (feature `cli`).
fn main() {
    eprintln!("detllm: the command-line interface is not built yet");
    std::process::exit(2);
}
