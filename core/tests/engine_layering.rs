//! The backend-agnostic layer (core/src/engine) names no backend (issue 14: a new backend is a
//! new folder, and the engine never learns of it).

use std::fs;
use std::path::Path;

const BACKENDS: [&str; 6] = ["crate::redis", "crate::redlock", "super::redis", "super::redlock", "lockgate_core::redis", "lockgate_core::redlock"];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).expect("core/src/engine is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_engine_folder_imports_no_backend() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
    let mut files = Vec::new();
    sources(&dir, &mut files);
    assert!(files.len() >= 8, "expected the engine's modules, found {files:?}");
    let mut offending = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).expect("readable source");
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if BACKENDS.iter().any(|b| code.contains(b)) {
                offending.push(format!("{}:{}: {line}", file.display(), i + 1));
            }
        }
    }
    assert!(offending.is_empty(), "the backend-agnostic engine names a backend:\n{}", offending.join("\n"));
}

#[test]
fn the_check_catches_a_backend_import() {
    // The same test over a sample, so a typo in BACKENDS cannot make it pass vacuously.
    let sample = "use crate::redis::reply::Reply;\nuse crate::engine::io::OpId;";
    let hits: Vec<&str> = sample.lines().filter(|l| BACKENDS.iter().any(|b| l.contains(b))).collect();
    assert_eq!(hits, ["use crate::redis::reply::Reply;"]);
}
