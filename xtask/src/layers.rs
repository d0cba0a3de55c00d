//! `cargo xtask layers`: fails when a module of src/ imports one of a higher layer, or when modules
//! of one layer import each other in a cycle. [`LAYERS`] is the one place the layering is written
//! down (src/README.md explains it); a new top-level module must be placed in it.
//!
//! It reads every `crate::` path in src/**/*.rs (`use crate::a::b`, `crate::{a, b}` groups, paths
//! written inline) and every `super::` chain that climbs out of its top-level module, outside
//! comments. main.rs is the top of everything and lib.rs only declares the modules: neither is read.
//!
//! Inside each folder of src/ it also fails on a cycle between the folder's files (a subfolder
//! counts as one file, its mod.rs as the folder's own): [`folder_cycles`]. Every path is resolved
//! to the file it names (`crate::`, `super::` chains, `self::`, and in a mod.rs its children's
//! bare names); a mod.rs's `pub use` re-exports are its facade, not its code, and count for nothing.

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
    let mut problems = check(&files);
    let (cycles, known) = folder_cycles(&files);
    for c in &known {
        println!("known cycle (KNOWN_FOLDER_CYCLES): {c}");
    }
    problems.extend(cycles);
    if problems.is_empty() {
        let edges = files.iter().flat_map(|(p, t)| edges_in(p, t)).count();
        println!(
            "layers: ok ({} files, {edges} imports between top-level modules, no cycle inside a folder \
             but the {} known)",
            files.len(),
            known.len()
        );
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

/// Cycles inside a folder that are known and not fixed yet: (folder, its files in the cycle,
/// sorted). `cargo xtask layers` prints them and passes; any other cycle fails, and so does an
/// entry here that is no longer a cycle (the list only shrinks).
pub const KNOWN_FOLDER_CYCLES: &[(&str, &[&str])] = &[];

/// One import of a file by another file of the same folder.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileEdge {
    folder: String,
    from: String,
    to: String,
    file: String,
    line: usize,
}

/// The cycles between the files of each folder, one line each (a strongly connected set of files
/// and one cycle through it, with the file and line of each import): (new ones, known ones).
pub fn folder_cycles(files: &[(String, String)]) -> (Vec<String>, Vec<String>) {
    folder_cycles_with(files, KNOWN_FOLDER_CYCLES)
}

fn folder_cycles_with(
    files: &[(String, String)],
    known_list: &[(&str, &[&str])],
) -> (Vec<String>, Vec<String>) {
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .filter(|(p, _)| !ROOT_FILES.contains(&p.as_str()))
        .map(|(p, _)| module_path(p))
        .collect();
    let mut edges: Vec<FileEdge> = Vec::new();
    for (path, text) in files {
        if ROOT_FILES.contains(&path.as_str()) {
            continue;
        }
        edges.extend(file_edges(path, text, &modules));
    }
    let folders: BTreeSet<&str> = edges.iter().map(|e| e.folder.as_str()).collect();
    let (mut new, mut known, mut known_seen) = (Vec::new(), Vec::new(), BTreeSet::new());
    for folder in folders {
        let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for e in edges.iter().filter(|e| e.folder == folder) {
            graph.entry(&e.from).or_default().insert(&e.to);
        }
        for scc in strongly_connected(&graph) {
            let cycle = shortest_cycle(&graph, &scc);
            let at: Vec<String> = cycle
                .windows(2)
                .map(|w| {
                    let e = edges
                        .iter()
                        .find(|e| e.folder == folder && e.from == w[0] && e.to == w[1])
                        .expect("edge of the cycle");
                    format!("{} → {} (src/{}:{})", e.from, e.to, e.file, e.line)
                })
                .collect();
            let line = format!("cycle inside src/{folder}/ between {}: {}", scc.join(", "), at.join(", "));
            let is_known = known_list.iter().any(|(f, nodes)| *f == folder && *nodes == scc.as_slice());
            if is_known {
                known_seen.insert((folder.to_string(), scc.clone()));
                known.push(line);
            } else {
                new.push(line);
            }
        }
    }
    for (folder, nodes) in known_list {
        let nodes: Vec<&str> = nodes.to_vec();
        if !known_seen.iter().any(|(f, n)| f == folder && *n == nodes) {
            new.push(format!(
                "KNOWN_FOLDER_CYCLES lists src/{folder}/ {}, no longer a cycle: remove the entry",
                nodes.join(", ")
            ));
        }
    }
    (new, known)
}

/// The strongly connected sets of two or more nodes (Tarjan), each sorted, in node order.
fn strongly_connected<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Walk<'a, 'g> {
        graph: &'g BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(w: &mut Walk<'a, '_>, v: &'a str) {
        let i = w.index.len();
        w.index.insert(v, i);
        w.low.insert(v, i);
        w.stack.push(v);
        for &n in w.graph.get(v).into_iter().flatten() {
            if !w.index.contains_key(n) {
                visit(w, n);
                let l = w.low[v].min(w.low[n]);
                w.low.insert(v, l);
            } else if w.stack.contains(&n) {
                let l = w.low[v].min(w.index[n]);
                w.low.insert(v, l);
            }
        }
        if w.low[v] == w.index[v] {
            let mut scc = Vec::new();
            while let Some(n) = w.stack.pop() {
                scc.push(n);
                if n == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                w.out.push(scc);
            }
        }
    }
    let mut w =
        Walk { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), out: Vec::new() };
    for &v in graph.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.out.sort();
    w.out
}

/// A shortest cycle through the first node of `scc` (breadth first within it), last node = first.
fn shortest_cycle<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>, scc: &[&'a str]) -> Vec<&'a str> {
    let start = scc[0];
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &n in graph.get(v).into_iter().flatten() {
            if n == start {
                let mut path = vec![v];
                while *path.last().unwrap() != start {
                    path.push(parent[path.last().unwrap()]);
                }
                path.reverse();
                path.push(start);
                return path;
            }
            if scc.contains(&n) && !parent.contains_key(n) && n != start {
                parent.insert(n, v);
                queue.push_back(n);
            }
        }
    }
    vec![start, start]
}

/// The imports between files of one folder that one file makes: each path resolved to the file
/// (or subfolder) it names, the first line per target.
fn file_edges(path: &str, text: &str, modules: &BTreeSet<Vec<String>>) -> Vec<FileEdge> {
    let me = module_path(path);
    let is_mod_rs = path.ends_with("mod.rs") && me.len() < path.trim_end_matches(".rs").split('/').count();
    let code: String = text.lines().map(strip_comment).collect::<Vec<_>>().join("\n");
    let inline = inline_modules(&code);
    let depth = |at: usize| inline.iter().filter(|(s, e)| *s < at && at < *e).count();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let before = |at: usize| code[..at].chars().next_back();
    let after_name = |at: usize| before(at).is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut targets: Vec<(Vec<String>, usize)> = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        // `pub(in crate::a)` is a visibility, not an import.
        if after_name(at)
            || code[..at].ends_with('$')
            || code[..at].ends_with("::")
            || code[..at].ends_with("(in ")
        {
            continue;
        }
        for p in paths(&code[at + "crate::".len()..]) {
            targets.push((p, at));
        }
    }
    for (at, _) in code.match_indices("super::") {
        if code[..at].ends_with("::") || after_name(at) {
            continue;
        }
        let mut rest = &code[at..];
        let mut ups: usize = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        let Some(ups) = ups.checked_sub(depth(at)).filter(|u| *u > 0) else { continue };
        let Some(keep) = me.len().checked_sub(ups) else { continue };
        for p in paths(rest) {
            targets.push((me[..keep].iter().cloned().chain(p).collect(), at));
        }
    }
    if is_mod_rs {
        let reexport = |at: usize| {
            let start = code[..at].rfind(['\n', ';']).map_or(0, |i| i + 1);
            code[start..at].trim_start().starts_with("pub use")
        };
        for (at, _) in code.match_indices("self::") {
            if after_name(at) || code[..at].ends_with("::") || depth(at) > 0 || reexport(at) {
                continue;
            }
            for p in paths(&code[at + "self::".len()..]) {
                targets.push((me.iter().cloned().chain(p).collect(), at));
            }
        }
        // A child's bare name: `header::render(..)`, `use theme::Theme;`.
        for child in modules.iter().filter(|m| m.len() == me.len() + 1 && m.starts_with(&me)) {
            let name = format!("{}::", child[me.len()]);
            for (at, _) in code.match_indices(&name) {
                if after_name(at) || code[..at].ends_with("::") || depth(at) > 0 || reexport(at) {
                    continue;
                }
                for p in paths(&code[at..]) {
                    targets.push((me.iter().cloned().chain(p).collect(), at));
                }
            }
        }
    }
    let mut out: Vec<FileEdge> = Vec::new();
    for (target, at) in targets {
        // The file the path names: its longest prefix that is a file's module.
        let Some(to) = (1..=target.len()).rev().map(|n| &target[..n]).find(|p| modules.contains(*p)) else {
            continue;
        };
        // The folder both are in, each seen as the folder's child it belongs to (or its mod.rs).
        let common = me.iter().zip(to).take_while(|(a, b)| a == b).count();
        let node = |m: &[String]| if m.len() == common { "mod".to_string() } else { m[common].clone() };
        if common == 0 || to == me.as_slice() {
            continue; // between top-level modules: the layers check above
        }
        let (from, to_node) = (node(&me), node(to));
        if from == to_node {
            continue;
        }
        let folder = me[..common].join("/");
        if out.iter().any(|e| e.folder == folder && e.from == from && e.to == to_node) {
            continue;
        }
        out.push(FileEdge { folder, from, to: to_node, file: path.to_string(), line: line_of(at) });
    }
    out
}

/// The byte ranges of the inline modules (`mod tests { .. }`) of a file's code.
fn inline_modules(code: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + 4..];
        let name = ident(rest.trim_start());
        let after = rest.trim_start()[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0usize;
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((open, open + i));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The module paths a path's text starts with: `a::b::X` → [a, b, X]; `a::{b, c::{d, e}}` →
/// [a, b], [a, c, d], [a, c, e].
fn paths(text: &str) -> Vec<Vec<String>> {
    let mut prefix = Vec::new();
    let mut rest = text;
    loop {
        let name = ident(rest);
        if name.is_empty() {
            if let Some(group) = rest.strip_prefix('{') {
                let mut out = Vec::new();
                for item in top_level_items(group) {
                    for p in paths(item.trim_start()) {
                        out.push(prefix.iter().cloned().chain(p).collect());
                    }
                }
                return out;
            }
            break;
        }
        if name != "self" {
            prefix.push(name.to_string());
        }
        match rest[name.len()..].strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    if prefix.is_empty() {
        Vec::new()
    } else {
        vec![prefix]
    }
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
        let (cycles, _known) = folder_cycles(&tree);
        assert!(cycles.is_empty(), "cycles inside folders:\n{}", cycles.join("\n"));
    }

    #[test]
    fn a_cycle_between_files_of_a_folder_fails_in_every_spelling() {
        let one_way = files(&[
            ("ui/mod.rs", "pub mod a;\npub mod b;\npub use a::A;\nfn draw() { b::render(); }\n"),
            ("ui/a.rs", "use crate::ui::b::B;\nuse super::theme;\n"),
            (
                "ui/b.rs",
                "#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::theme::T;\n    pub(in crate::ui) const X: u8 = 1;\n}\n",
            ),
            ("ui/theme.rs", "mod tests {\n    use super::*;\n}\n"),
        ]);
        assert_eq!(
            folder_cycles_with(&one_way, &[]),
            (vec![], vec![]),
            "a test module's super:: is its own file, a `pub(in crate::ui)` no import"
        );
        for (path, text, between) in [
            ("ui/b.rs", "use crate::ui::a::A;\n", "a, b"),
            ("ui/b.rs", "use crate::{model::Model, ui::{theme, a::{A, X}}};\n", "a, b"),
            ("ui/b.rs", "fn f() {\n    super::a::f();\n}\n", "a, b"),
            // A name of mod.rs (its re-export too) is mod.rs's, which draws with b.
            ("ui/b.rs", "fn f() -> crate::ui::A { todo!() }\n", "b, mod"),
        ] {
            let mut tree = one_way.clone();
            tree.retain(|(p, _)| p != path);
            tree.push((path.to_string(), text.to_string()));
            let (cycles, _) = folder_cycles_with(&tree, &[]);
            assert_eq!(cycles.len(), 1, "{text:?} gave {cycles:?}");
            assert!(cycles[0].starts_with(&format!("cycle inside src/ui/ between {between}:")), "{cycles:?}");
        }
        // A subfolder is one file of its folder.
        let deep = files(&[
            ("bpf/maps.rs", "use crate::bpf::resolve::files::F;\n"),
            ("bpf/resolve/mod.rs", "pub mod files;\n"),
            ("bpf/resolve/files.rs", "use crate::bpf::maps::M;\n"),
        ]);
        let (cycles, _) = folder_cycles_with(&deep, &[]);
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert!(cycles[0].contains("src/bpf/ between maps, resolve"), "{cycles:?}");
        // A known cycle is reported, not failed; a known one that is gone fails.
        let (cycles, known) = folder_cycles_with(&deep, &[("bpf", &["maps", "resolve"])]);
        assert_eq!((cycles.len(), known.len()), (0, 1), "{cycles:?} {known:?}");
        let (cycles, known) = folder_cycles_with(&one_way, &[("ui", &["a", "b"])]);
        assert_eq!(known, Vec::<String>::new());
        assert!(cycles.len() == 1 && cycles[0].contains("no longer a cycle"), "{cycles:?}");
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
