//! Layering by folder (issue 24): the backend-agnostic engine (core/src/engine) names no
//! backend, and no backend folder reaches into another's — a new backend is a new folder that
//! the engine and the other backends never learn of. The backends are read from the folder
//! listing of core/src/backend (and each must have its line in the registry), so a new one is
//! covered without editing this test.

use std::fs;
use std::path::{Path, PathBuf};

/// The one allowed arrow between backend folders: a Redlock *is* N independent Redis masters,
/// so its folder builds on Redis's (the Lua scripts each master runs, reply parsing, the
/// `redis://` URL grammar of each master, and the native connections).
const ALLOWED: [(&str, &str); 1] = [("redlock", "redis")];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The backend folders: every directory under core/src/backend.
fn backends() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(src().join("backend"))
        .expect("core/src/backend is readable")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("a source folder is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `code` contains `path` as a whole path segment (`crate::backend::redis` but not
/// `crate::redistribute`).
fn names(code: &str, path: &str) -> bool {
    code.match_indices(path).any(|(i, _)| {
        let next = code[i + path.len()..].chars().next();
        !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The ways a file names the backend folder `b`; `in_backend_mod`: the file is a backend
/// folder's own mod.rs, whose `super` is core/src/backend.
fn paths_to(b: &str, in_backend_mod: bool) -> Vec<String> {
    let mut paths = vec![
        format!("crate::{b}"),
        format!("crate::backend::{b}"),
        format!("lockgate_core::{b}"),
        format!("super::super::{b}"),
    ];
    if in_backend_mod {
        paths.push(format!("super::{b}"));
    }
    paths
}

/// Every line of the files under `dir` (comments cut off) naming a backend in `targets`.
fn offending(dir: &Path, targets: &[String]) -> Vec<String> {
    let mut files = Vec::new();
    sources(dir, &mut files);
    let mut found = Vec::new();
    for file in &files {
        let in_backend_mod = file.file_name().is_some_and(|n| n == "mod.rs") && file.parent().and_then(Path::parent) == Some(&src().join("backend"));
        let text = fs::read_to_string(file).expect("readable source");
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if targets.iter().any(|b| paths_to(b, in_backend_mod).iter().any(|p| names(code, p))) {
                found.push(format!("{}:{}: {line}", file.display(), i + 1));
            }
        }
    }
    found
}

#[test]
fn the_engine_folder_imports_no_backend() {
    let all = backends();
    assert!(all.len() >= 5, "expected the backend folders, found {all:?}");
    let mut files = Vec::new();
    sources(&src().join("engine"), &mut files);
    assert!(files.len() >= 8, "expected the engine's modules, found {files:?}");
    let mut targets = all.clone();
    targets.push("backend".into());
    let found = offending(&src().join("engine"), &targets);
    assert!(found.is_empty(), "the backend-agnostic engine names a backend:\n{}", found.join("\n"));
}

#[test]
fn no_backend_folder_imports_another() {
    let all = backends();
    let mut found = Vec::new();
    for a in &all {
        let others: Vec<String> =
            all.iter().filter(|b| *b != a && !ALLOWED.contains(&(a.as_str(), b.as_str()))).cloned().collect();
        found.extend(offending(&src().join("backend").join(a), &others));
    }
    assert!(found.is_empty(), "a backend folder names another backend's:\n{}", found.join("\n"));
}

#[test]
fn every_backend_folder_is_registered() {
    let list = fs::read_to_string(src().join("backend/mod.rs")).expect("core/src/backend/mod.rs is readable");
    for b in backends() {
        assert!(list.contains(&format!("&{b}::spec::SPEC")), "backend folder {b} has no line in the registry (core/src/backend/mod.rs)");
        assert!(list.contains(&format!("#[cfg(feature = \"{b}\")]\npub mod {b};")) || b == "redis", "backend folder {b} is not gated by its feature");
    }
}

#[test]
fn the_check_catches_a_backend_import() {
    // The same matching over a sample, so a mistake in the paths cannot make it pass vacuously.
    let sample = ["use crate::backend::redis::reply::Reply;", "use crate::engine::io::OpId;", "use crate::redistribute::X;", "use super::super::etcd::EtcdAddress;"];
    let hits: Vec<&str> = sample
        .into_iter()
        .filter(|l| ["redis", "etcd"].iter().any(|b| paths_to(b, false).iter().any(|p| names(l, p))))
        .collect();
    assert_eq!(hits, ["use crate::backend::redis::reply::Reply;", "use super::super::etcd::EtcdAddress;"]);
}
