//! `cargo xtask layers`: fails when a module of src/ imports one of a higher layer, or when modules
//! of one layer import each other in a cycle. [`LAYERS`] is the one place the layering is written
//! down (src/README.md explains it); a new top-level module must be placed in it.
//!
//! It reads every `crate::` path in src/**/*.rs (`use crate::a::b`, `crate::{a, b}` groups, paths
//! written inline) and every `super::` chain that climbs out of its top-level module, outside
//! comments. main.rs is the top of everything and lib.rs only declares the modules: neither is read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{bail, Context, Result};

/// A layer: its name and its top-level modules (src/NAME.rs or src/NAME/). Lowest first: a module
/// may import modules of lower layers, never of higher ones.
pub struct Layer {
    pub name: &'static str,
    pub modules: &'static [&'static str],
}

const fn layer(name: &'static str, modules: &'static [&'static str]) -> Layer {
    Layer { name, modules }
}

pub const LAYERS: &[Layer] = &[
    layer("leaf", &["util", "bounded", "untrusted", "safe_fs"]),
    layer("sample", &["sample"]),
    layer("bpf", &["bpf"]),
    layer("collect", &["collect", "privilege"]),
    layer("model", &["model"]),
    layer("view", &["ui", "output"]),
    layer("record", &["record"]),
    layer("mode", &["app", "headless", "replay", "compare", "bench", "serve"]),
    layer("cli", &["cli"]),
];

/// Files that are not part of any layer: the binary (above everything) and the crate root.
const ROOT_FILES: &[&str] = &["main.rs", "lib.rs"];

/// One import of a top-level module by another.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    pub from: String,
    pub to: String,
    /// src-relative file and 1-based line of the first such import in that file.
    pub file: String,
    pub line: usize,
}

pub fn run() -> Result<()> {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("xtask has no parent directory")?.join("src");
    let files = read_tree(&src)?;
    let problems = check(&files);
    if problems.is_empty() {
        let edges = files.iter().flat_map(|(p, t)| edges_in(p, t)).count();
        println!("layers: ok ({} files, {edges} imports between top-level modules)", files.len());
        return Ok(());
    }
    for p in &problems {
        eprintln!("{p}");
    }
    bail!("{} layer violation(s); the layers are in xtask/src/layers.rs and src/README.md", problems.len())
}

/// (src-relative path, text) of every .rs file under `src`.
pub fn read_tree(src: &Path) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src)?.to_string_lossy().into_owned();
                let text =
                    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
                out.push((rel, text));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.modules.contains(&module))
}

/// Every violation, one line each: upward imports, same-layer cycles, modules not in [`LAYERS`].
pub fn check(files: &[(String, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut modules = BTreeSet::new();
    let mut edges: Vec<Edge> = Vec::new();
    for (path, text) in files {
        if ROOT_FILES.contains(&path.as_str()) {
            continue;
        }
        modules.insert(module_path(path)[0].clone());
        edges.extend(edges_in(path, text));
    }
    for m in &modules {
        if layer_of(m).is_none() {
            problems.push(format!(
                "src/{m}: a top-level module in no layer (add it to LAYERS in xtask/src/layers.rs)"
            ));
        }
    }
    let mut same_layer: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in &edges {
        // A module in no layer is reported above.
        let (Some(from), Some(to)) = (layer_of(&e.from), layer_of(&e.to)) else { continue };
        if to > from {
            problems.push(format!(
                "src/{}:{}: {} (layer {}) imports {} (layer {}, higher)",
                e.file, e.line, e.from, LAYERS[from].name, e.to, LAYERS[to].name
            ));
        } else if to == from {
            same_layer.entry(&e.from).or_default().insert(&e.to);
        }
    }
    for cycle in cycles(&same_layer) {
        let at: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let e = edges.iter().find(|e| e.from == w[0] && e.to == w[1]).expect("edge of the cycle");
                format!("{} → {} (src/{}:{})", e.from, e.to, e.file, e.line)
            })
            .collect();
        problems.push(format!(
            "cycle within layer {}: {}",
            LAYERS[layer_of(cycle[0]).unwrap()].name,
            at.join(", ")
        ));
    }
    problems
}

/// The cycles of a small graph, each once, as node lists whose last node is the first.
fn cycles<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    let mut found: Vec<Vec<&str>> = Vec::new();
    let mut seen_sets: BTreeSet<Vec<&str>> = BTreeSet::new();
    fn walk<'a>(
        graph: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        path: &mut Vec<&'a str>,
        found: &mut Vec<Vec<&'a str>>,
        seen_sets: &mut BTreeSet<Vec<&'a str>>,
    ) {
        let last = *path.last().unwrap();
        for &next in graph.get(last).into_iter().flatten() {
            if next == path[0] {
                let mut set = path.clone();
                set.sort();
                if seen_sets.insert(set) {
                    let mut c = path.clone();
                    c.push(next);
                    found.push(c);
                }
            } else if !path.contains(&next) {
                path.push(next);
                walk(graph, path, found, seen_sets);
                path.pop();
            }
        }
    }
    for &start in graph.keys() {
        walk(graph, &mut vec![start], &mut found, &mut seen_sets);
    }
    found
}

/// The module path of a src-relative file: `bpf/resolve/files.rs` → [bpf, resolve, files],
/// `bpf/mod.rs` → [bpf], `app.rs` → [app].
fn module_path(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = path.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if parts.len() > 1 && parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The imports of other top-level modules in one file, the first per target module.
pub fn edges_in(path: &str, text: &str) -> Vec<Edge> {
    let modpath = module_path(path);
    let from = modpath[0].clone();
    let mut first: BTreeMap<String, usize> = BTreeMap::new();
    let mut add = |to: &str, line: usize| {
        if to != from && !to.is_empty() && to != "self" {
            first.entry(to.to_string()).or_insert(line);
        }
    };
    // Comments out, line breaks kept: a `crate::{...}` group may span lines.
    let code: String = text.lines().map(strip_comment).collect::<Vec<_>>().join("\n");
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let after_name =
        |at: usize| code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
    for (at, _) in code.match_indices("crate::") {
        if after_name(at) || code[..at].ends_with('$') {
            continue; // `ioscope_crate::`, `$crate::`
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            for item in top_level_items(group) {
                add(ident(item.trim_start()), line_of(at));
            }
        } else {
            add(ident(rest), line_of(at));
        }
    }
    // `super::super::x` climbing out of this file's top-level module.
    for (at, _) in code.match_indices("super::") {
        if code[..at].ends_with("::") || after_name(at) {
            continue; // the second and later `super::` of a chain, or a longer name
        }
        let mut rest = &code[at..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        // In src/a/b.rs, `super::` is `a`; one more is the crate root.
        if ups >= modpath.len() {
            add(ident(rest), line_of(at));
        }
    }
    first
        .into_iter()
        .map(|(to, line)| Edge { from: from.clone(), to, file: path.to_string(), line })
        .collect()
}

/// The line without a `//` comment (a `//` inside a string literal is rare in a path's line).
fn strip_comment(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The comma-separated items of a `{...}` group (its text after the `{`), nested groups kept whole.
fn top_level_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect()
    }

    #[test]
    fn the_source_tree_keeps_its_layers() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("src");
        let tree = read_tree(&src).unwrap();
        assert!(tree.len() > 50, "read {} files under {}", tree.len(), src.display());
        let problems = check(&tree);
        assert!(problems.is_empty(), "layer violations:\n{}", problems.join("\n"));
    }

    #[test]
    fn every_module_of_the_table_exists_once() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("src");
        let mut all: Vec<&str> = LAYERS.iter().flat_map(|l| l.modules.iter().copied()).collect();
        for m in &all {
            assert!(
                src.join(format!("{m}.rs")).exists() || src.join(m).is_dir(),
                "LAYERS names src/{m}, absent"
            );
        }
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a module in two layers");
    }

    #[test]
    fn an_upward_import_fails_in_every_spelling() {
        let ok = files(&[
            ("model/mod.rs", "use crate::sample::Sample;\n"),
            ("ui/mod.rs", "use crate::model::Model;\n"),
        ]);
        assert_eq!(check(&ok), Vec::<String>::new());
        for (path, text) in [
            ("model/files.rs", "use crate::ui::format;\n"),
            ("model/files.rs", "use crate::{sample::Sample, cli::Format};\n"),
            ("model/files.rs", "use crate::{\n    sample::Sample,\n    app::{self, run},\n};\n"),
            ("model/files.rs", "fn f() {\n    crate::app::run();\n}\n"),
            ("model/files.rs", "fn f() -> crate::bench::X { todo!() }\n"),
            ("model/sub/deep.rs", "use super::super::super::record::Recording;\n"),
            ("bpf/mod.rs", "    x: crate::collect::files::FileResolver,\n"),
        ] {
            let problems = check(&files(&[(path, text)]));
            assert_eq!(problems.len(), 1, "{path}: {text:?} gave {problems:?}");
            assert!(problems[0].starts_with(&format!("src/{path}:")), "{problems:?}");
            assert!(problems[0].contains("higher"), "{problems:?}");
        }
    }

    #[test]
    fn comments_and_other_crates_are_not_imports() {
        let text = "//! See [`crate::app`].\n/// Like crate::cli does.\nlet x = 1; // crate::ui\nmacro_rules! m { () => { $crate::ui::x() } }\nuse ioscope_crate::ui;\n";
        assert_eq!(check(&files(&[("model/mod.rs", text)])), Vec::<String>::new());
        // `super::` inside the module stays inside it.
        assert_eq!(check(&files(&[("model/files.rs", "use super::Model;\n")])), Vec::<String>::new());
    }

    #[test]
    fn a_cycle_between_peers_fails_and_a_one_way_edge_does_not() {
        let one_way = files(&[
            ("compare/mod.rs", "use crate::replay::open;\n"),
            ("replay/mod.rs", "use crate::record::R;\n"),
        ]);
        assert_eq!(check(&one_way), Vec::<String>::new());
        let cycle = files(&[
            ("compare/mod.rs", "use crate::replay::open;\n"),
            ("replay/tui.rs", "\nuse crate::compare::Side;\n"),
        ]);
        let problems = check(&cycle);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("cycle within layer mode"), "{problems:?}");
        assert!(problems[0].contains("src/replay/tui.rs:2"), "{problems:?}");
        // A module's files import each other freely (src/sample/ is one module).
        let family = files(&[
            ("sample/mod.rs", "use crate::sample::syncs::S;\n"),
            ("sample/syncs.rs", "use crate::sample::T;\n"),
        ]);
        assert_eq!(check(&family), Vec::<String>::new());
    }

    #[test]
    fn a_module_in_no_layer_fails() {
        let problems = check(&files(&[("gadget.rs", "use crate::model::Model;\n")]));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("src/gadget: a top-level module in no layer"), "{problems:?}");
    }
}
