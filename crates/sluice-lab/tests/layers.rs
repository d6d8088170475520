//! The lab's modules depend on each other one way: a scan of `src/*.rs` for `crate::MODULE`
//! finds no circle (a module of a directory, `runner/edge_rows.rs`, counts as its parent's), and
//! every module starts with a `//!` paragraph saying what it owns.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module and the modules it names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let relative = path.strip_prefix(&src).expect("under src");
            let top = relative.components().next().expect("a name").as_os_str().to_string_lossy();
            let module = top.trim_end_matches(".rs").to_string();
            let text = std::fs::read_to_string(&path).expect("readable");
            texts.entry(module).or_default().push_str(&text);
        }
    }
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    texts
        .iter()
        .map(|(module, text)| {
            let names = text
                .split("crate::")
                .skip(1)
                .map(|rest| rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect())
                .filter(|name: &String| name != module && modules.contains(name))
                .collect();
            (module.clone(), names)
        })
        .collect()
}

/// A circle through `from`, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().expect("a path has a start");
        for next in graph.get(last).into_iter().flatten() {
            if next == from {
                return Some([path.clone(), vec![next.clone()]].concat());
            }
            if seen.insert(next.clone()) {
                stack.push([path.clone(), vec![next.clone()]].concat());
            }
        }
    }
    None
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let graph = imports();
    assert!(graph.contains_key("results") && graph["report"].contains("results"), "the scan reads the crate");
    for module in graph.keys() {
        assert_eq!(circle(&graph, module), None, "an import circle through {module}");
    }
}

#[test]
fn every_module_says_what_it_owns() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&src).expect("src").flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("readable");
            assert!(text.starts_with("//! "), "{} starts with its //! paragraph", path.display());
            assert!(text.lines().count() <= 800, "{} is at most 800 lines", path.display());
        }
    }
}
