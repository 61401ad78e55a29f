//! Replays the checked-in fuzz corpus on the stable toolchain: every input
//! of `fuzz/corpus/program` runs through the differential check, every
//! input of `fuzz/corpus/lifecycle` through the lifecycle check, exactly as
//! the cargo-fuzz targets run them (no forks: the fuzz targets do not
//! fork).

use forksafe_proptests::lifecycle::{decode_lifecycle, run_lifecycle};
use forksafe_proptests::{decode, run_program, Options};
use std::path::PathBuf;

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?.to_string();
            if name.starts_with('.') || !path.is_file() {
                return None;
            }
            Some((name, std::fs::read(&path).ok()?))
        })
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "empty corpus {}", dir.display());
    inputs
}

#[test]
fn program_corpus() {
    forksafe_proptests::forking::quiet_panic_hook();
    let inputs = corpus("program");
    for (name, bytes) in &inputs {
        let program = decode(bytes);
        if let Err(e) = run_program(&program, &Options::default()) {
            panic!("fuzz/corpus/program/{name}: {e}\n{program}");
        }
    }
    println!("replayed {} program inputs", inputs.len());
}

#[test]
fn lifecycle_corpus() {
    let inputs = corpus("lifecycle");
    for (name, bytes) in &inputs {
        if let Err(e) = run_lifecycle(&decode_lifecycle(bytes)) {
            panic!(
                "fuzz/corpus/lifecycle/{name}: {e}\n{:?}",
                decode_lifecycle(bytes)
            );
        }
    }
    println!("replayed {} lifecycle inputs", inputs.len());
}
