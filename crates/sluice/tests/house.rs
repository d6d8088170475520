//! The shape of the source tree, checked on every run: no source file over 800 lines of code
//! (unit tests and test files aside), every module opening with a `//!` paragraph, and no
//! file-level import circle between sibling modules of a crate (a parent and its children may
//! refer to each other: that is how Rust modules nest; two files that each use the other are
//! one job split badly, or two jobs tangled); `unsafe` only in the named `sys` layers, every crate
//! root denying it elsewhere; and no load flag spelled as a string in the lab.
//!
//! The import scan reads `use` trees and inline `crate::`/`super::`/`self::` paths, resolves each
//! to the deepest module file it names, and looks for strongly connected groups of files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest a source file may be, counting the lines before its unit tests.
const MAX_LINES: usize = 800;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

/// Every crate's `src` directory.
fn crate_sources() -> Vec<PathBuf> {
    let crates = workspace_root().join("crates");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .expect("crates/")
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 8, "expected the workspace's crates under {crates:?}");
    dirs
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").filter_map(|e| e.ok()) {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file holding only unit tests (`foo/tests.rs`, `tests/…`).
fn is_test_file(rel: &Path) -> bool {
    rel.file_stem().is_some_and(|s| s == "tests") || rel.components().any(|c| c.as_os_str() == "tests")
}

/// The text before the file's `#[cfg(test)] mod tests`, with `//` comments removed.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if trimmed == "#[cfg(test)]"
            && lines.peek().is_some_and(|next| next.trim_start().starts_with("mod tests"))
        {
            break;
        }
        let without_comment = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        code.push_str(without_comment);
        code.push('\n');
    }
    code
}

fn lines_before_tests(text: &str) -> usize {
    code_of(text).lines().count()
}

/// A module path (`["rtsp", "session"]`) from a file's path under `src`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let file = parts.pop().expect("file name");
    match file.as_str() {
        "lib.rs" | "main.rs" | "mod.rs" if parts.is_empty() || file == "mod.rs" => parts,
        _ => {
            parts.push(file.trim_end_matches(".rs").to_string());
            parts
        }
    }
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand_use_tree(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = Vec::new();
    expand_into("", &tree, &mut out);
    out
}

fn expand_into(prefix: &str, tree: &str, out: &mut Vec<String>) {
    match tree.find('{') {
        None => {
            let path = tree.split(" as ").next().unwrap_or(tree);
            out.push(format!("{prefix}{path}"));
        }
        Some(open) => {
            let head = &tree[..open];
            let inner = tree[open + 1..].strip_suffix('}').unwrap_or(&tree[open + 1..]);
            let mut depth = 0usize;
            let mut start = 0usize;
            for (i, ch) in inner.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth = depth.saturating_sub(1),
                    ',' if depth == 0 => {
                        expand_into(&format!("{prefix}{head}"), &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            if start < inner.len() {
                expand_into(&format!("{prefix}{head}"), &inner[start..], out);
            }
        }
    }
}

/// Paths starting with `crate`, `super` or `self` that a file's code names.
fn local_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    // `use` trees first (they may be grouped with braces).
    let mut rest = code;
    while let Some(at) = find_keyword(rest, "use ") {
        let after = &rest[at + 4..];
        let end = after.find(';').unwrap_or(after.len());
        paths.extend(expand_use_tree(&after[..end]));
        rest = &after[end..];
    }
    // Inline paths anywhere (`crate::a::b::f()`).
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(pos) = code[from..].find(start) {
            let at = from + pos;
            from = at + start.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| at + e);
            paths.push(code[at..end].to_string());
        }
    }
    paths
}

fn find_keyword(text: &str, keyword: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(pos) = text[from..].find(keyword) {
        let at = from + pos;
        let before_ok = at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        if before_ok {
            return Some(at);
        }
        from = at + keyword.len();
    }
    None
}

/// The deepest module file a path reaches, as a module path.
fn resolve(path: &str, here: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let mut segments = path.split("::").filter(|s| !s.is_empty());
    let mut module: Vec<String> = match segments.next()? {
        "crate" => Vec::new(),
        "self" => here.to_vec(),
        "super" => {
            let mut m = here.to_vec();
            m.pop()?;
            m
        }
        _ => return None,
    };
    for segment in segments {
        if segment == "super" {
            module.pop()?;
            continue;
        }
        let mut child = module.clone();
        child.push(segment.to_string());
        if modules.contains(&child) {
            module = child;
        } else {
            break;
        }
    }
    Some(module)
}

/// Strongly connected groups of more than one file (Tarjan's algorithm).
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<Vec<String>, usize>,
        low: BTreeMap<Vec<String>, usize>,
        stack: Vec<Vec<String>>,
        on_stack: BTreeSet<Vec<String>>,
        next: usize,
        found: Vec<Vec<Vec<String>>>,
    }
    fn visit(s: &mut State<'_>, v: &Vec<String>) {
        s.index.insert(v.clone(), s.next);
        s.low.insert(v.clone(), s.next);
        s.next += 1;
        s.stack.push(v.clone());
        s.on_stack.insert(v.clone());
        let targets: Vec<Vec<String>> = s.edges.get(v).into_iter().flatten().cloned().collect();
        for w in &targets {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v.clone(), low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v.clone(), low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(&w);
                let done = &w == v;
                group.push(w);
                if done {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.found.push(group);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.found
}

fn is_prefix(a: &[String], b: &[String]) -> bool {
    a.len() <= b.len() && a == &b[..a.len()]
}

/// File-level import circles of one crate, each as its files' module paths.
fn crate_circles(src: &Path) -> Vec<Vec<Vec<String>>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut modules = BTreeSet::new();
    let mut code_by_module = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(src).expect("under src");
        if is_test_file(rel) || rel.starts_with("bin") {
            continue;
        }
        let module = module_of(rel);
        let text = std::fs::read_to_string(file).expect("read source");
        modules.insert(module.clone());
        code_by_module.insert(module, code_of(&text));
    }
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, code) in &code_by_module {
        let targets = edges.entry(module.clone()).or_default();
        for path in local_paths(code) {
            let Some(target) = resolve(&path, module, &modules) else {
                continue;
            };
            // A parent and its descendants refer to each other by design.
            if is_prefix(&target, module) || is_prefix(module, &target) {
                continue;
            }
            targets.insert(target);
        }
    }
    circles(&edges)
}

#[test]
fn no_source_file_is_over_800_lines_of_code() {
    let mut long = Vec::new();
    let mut seen = 0;
    for src in crate_sources() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let rel = file.strip_prefix(workspace_root()).expect("in workspace");
            if is_test_file(file.strip_prefix(&src).expect("under src")) {
                continue;
            }
            seen += 1;
            let text = std::fs::read_to_string(&file).expect("read source");
            let lines = lines_before_tests(&text);
            if lines > MAX_LINES {
                long.push(format!("{} ({lines} lines)", rel.display()));
            }
        }
    }
    assert!(seen > 100, "expected the workspace's sources, saw {seen} files");
    assert!(
        long.is_empty(),
        "source files over {MAX_LINES} lines before their unit tests (split them by job):\n{}",
        long.join("\n")
    );
}

#[test]
fn every_module_opens_with_what_it_owns() {
    let mut missing = Vec::new();
    for src in crate_sources() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read source");
            let first = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("#!["));
            if !first.is_some_and(|l| l.starts_with("//!")) {
                let rel = file.strip_prefix(workspace_root()).expect("in workspace");
                missing.push(rel.display().to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules without a `//!` paragraph saying what they own:\n{}",
        missing.join("\n")
    );
}

#[test]
fn no_file_level_import_circle_between_sibling_modules() {
    let mut found = Vec::new();
    for src in crate_sources() {
        let name = src
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for group in crate_circles(&src) {
            let files: Vec<String> =
                group.iter().map(|m| if m.is_empty() { "lib".to_string() } else { m.join("::") }).collect();
            found.push(format!("{name}: {}", files.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules that import each other (make the dependency point one way):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_import_scan_finds_a_circle_and_ignores_parent_and_child() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("net")).expect("mkdir");
    let write = |rel: &str, text: &str| std::fs::write(src.join(rel), text).expect("write");
    write("lib.rs", "//! root\nmod a;\nmod b;\nmod net;\npub use net::Conn;\n");
    write("a.rs", "//! a\nuse crate::{b::Thing, net::conn::Conn};\n");
    write("b.rs", "//! b\npub fn f() { crate::a::g() }\n");
    write("net/mod.rs", "//! net\npub mod conn;\npub use conn::Conn;\n");
    write("net/conn.rs", "//! conn\nuse super::super::net::Other;\n// use crate::a;\n");
    let groups = crate_circles(src);
    assert_eq!(
        groups,
        vec![vec![vec!["a".to_string()], vec!["b".to_string()]]],
        "a and b use each other; net and net::conn are parent and child"
    );
}

/// The crates whose system calls need `unsafe`, each confining it to its `sys` layer (as mio's
/// `src/sys/`): the layer is `src/sys.rs` or `src/sys/`.
const SYS_LAYERS: &[&str] = &[
    "sluice/src/sys.rs",
    "sluice-cputime/src/sys.rs",
    "sluice-engine/src/sys",
    "sluice-harness/src/sys.rs",
    "sluice-lab/src/sys.rs",
    "sluice-load/src/sys",
    "sluice-server/src/sys.rs",
    "sluice-store/src/sys.rs",
];

/// Where `code` says `unsafe` as a keyword (a block, fn, impl, trait or extern), not inside a
/// word such as `unsafe_code`.
fn says_unsafe(code: &str) -> bool {
    let bytes = code.as_bytes();
    code.match_indices("unsafe").any(|(at, _)| {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + "unsafe".len()).copied();
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        !before.is_some_and(word)
            && !after.is_some_and(word)
            && !code[..at].rsplit('\n').next().is_some_and(|line| line.contains('"'))
    })
}

fn in_sys_layer(rel: &Path) -> bool {
    let mut parts = rel.iter().map(|c| c.to_string_lossy());
    // `crates/<crate>/src/<first>`: the layer is src/sys.rs or src/sys/.
    let first = parts.nth(3);
    first.is_some_and(|f| f == "sys.rs" || f == "sys")
}

#[test]
fn unsafe_appears_only_in_the_sys_layers() {
    let root = workspace_root();
    let mut outside = Vec::new();
    let mut inside = BTreeSet::new();
    let mut undenied = Vec::new();
    for src in crate_sources() {
        let lib = if src.join("lib.rs").exists() { src.join("lib.rs") } else { src.join("main.rs") };
        let head = std::fs::read_to_string(&lib).expect("crate root");
        if !head.contains("#![deny(unsafe_code)]") && !head.contains("#![forbid(unsafe_code)]") {
            undenied.push(lib.strip_prefix(&root).expect("in workspace").display().to_string());
        }
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let rel = file.strip_prefix(&root).expect("in workspace").to_path_buf();
            let text = std::fs::read_to_string(&file).expect("read source");
            let code: String =
                text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
            if !says_unsafe(&code) {
                continue;
            }
            if in_sys_layer(&rel) {
                let layer: PathBuf = rel.iter().skip(1).take(3).collect();
                inside.insert(layer.display().to_string());
            } else {
                outside.push(rel.display().to_string());
            }
        }
    }
    assert!(undenied.is_empty(), "crate roots without #![deny(unsafe_code)]:\n{}", undenied.join("\n"));
    assert!(
        outside.is_empty(),
        "`unsafe` outside a sys layer (move it behind a safe function there):\n{}",
        outside.join("\n")
    );
    let named: BTreeSet<String> = SYS_LAYERS.iter().map(|s| s.to_string()).collect();
    assert_eq!(inside, named, "the sys layers holding `unsafe` are the ones this test names");
}

#[test]
fn the_unsafe_scan_tells_the_keyword_from_words_and_strings() {
    assert!(says_unsafe("fn f() { unsafe { g() } }"));
    assert!(says_unsafe("unsafe impl Send for X {}"));
    assert!(!says_unsafe("#![deny(unsafe_code)]"));
    assert!(!says_unsafe("let s = \"an unsafe thing\";"));
    assert!(in_sys_layer(Path::new("crates/sluice-engine/src/sys/fd.rs")));
    assert!(in_sys_layer(Path::new("crates/sluice-store/src/sys.rs")));
    assert!(!in_sys_layer(Path::new("crates/sluice-engine/src/send.rs")));
}

/// Every `--flag` a `--help` text of the `sluice` binary lists.
fn flags_in_help(args: &[&str]) -> BTreeSet<String> {
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().expect("run sluice");
    assert!(out.status.success(), "sluice {args:?} failed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

/// The lab builds its load runs from the typed options `sluice load` parses: no load flag is
/// spelled in the lab's source as a string (a flag `sluice serve` also has may be, for the
/// servers the lab starts).
#[test]
fn the_lab_has_no_string_copies_of_load_flags() {
    let mut load = flags_in_help(&["load", "http", "--help"]);
    load.extend(flags_in_help(&["load", "rtsp", "--help"]));
    assert!(load.contains("--vus") && load.contains("--clients"), "read the load flags: {load:?}");
    let serve = flags_in_help(&["serve", "--help"]);
    let own: Vec<&String> = load.iter().filter(|f| !serve.contains(*f) && *f != "--help").collect();
    let mut files = Vec::new();
    rust_files(&workspace_root().join("crates/sluice-lab/src"), &mut files);
    let mut copies = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read source");
        let code: String =
            text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
        for flag in &own {
            if spells_flag(&code, flag) {
                copies.push(format!(
                    "{}: {flag}",
                    file.strip_prefix(workspace_root()).expect("in workspace").display()
                ));
            }
        }
    }
    assert!(
        copies.is_empty(),
        "load flags spelled in the lab (build them from sluice_load::args):\n{}",
        copies.join("\n")
    );
}

/// Whether `code` spells `flag` inside a string: after a quote or a space, and ending the word
/// (`"--clients"`, `"... --clients {}"`), not as part of a longer flag.
fn spells_flag(code: &str, flag: &str) -> bool {
    let bytes = code.as_bytes();
    code.match_indices(flag).any(|(at, _)| {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + flag.len()).copied();
        matches!(before, Some(b'"' | b' ' | b'\''))
            && !after.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'-')
    })
}

#[test]
fn the_flag_scan_finds_flags_in_strings_only_whole() {
    assert!(spells_flag("let a = \"--clients\";", "--clients"));
    assert!(spells_flag("format!(\"sluice load rtsp --clients {} --ramp {}\", n, r)", "--clients"));
    assert!(!spells_flag("let a = \"--clients-max\";", "--clients"));
    assert!(!spells_flag("let clients = config.clients;", "--clients"));
}
