//! The documentation is checked like code:
//! - every relative link in every README.md of the repository resolves: the file or directory
//!   exists, and a `#anchor` names a heading of the Markdown file it points into (GitHub's slugs);
//! - every JSON key in the key tables of src/model/README.md (tables whose first column is headed
//!   `Key`) exists in a real `ioscope --once --json`, run while this test makes file I/O, and every
//!   key of that output is in a table (itself, or an enclosing key whose row describes it);
//! - the user README stays a user's README (under 400 lines), its test command is the one
//!   `.ci/run` runs, and the generated kernel support table keeps its markers.
//!
//! Self-contained (no shared test helpers). The checkers are also run on made-up input, so a
//! broken link or an invented key is shown to fail.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

// ---------------------------------------------------------------------------------------------
// Markdown: code, headings, links

/// The text with fenced code blocks blanked (lines kept, so line numbers stay right).
fn without_fences(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for line in md.lines() {
        let t = line.trim_start();
        let marker: String = t.chars().take_while(|&c| c == '`' || c == '~').collect();
        match &fence {
            Some(open) => {
                if marker.len() >= open.len() && marker.starts_with(&open[..1]) && t.trim() == marker {
                    fence = None;
                }
                out.push(String::new());
            }
            None if marker.len() >= 3 => {
                fence = Some(marker);
                out.push(String::new());
            }
            None => out.push(line.to_string()),
        }
    }
    out
}

/// The text with the contents of inline code spans removed (the backticks and newlines stay).
fn without_code_spans(line: &str) -> String {
    let b: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == '`' {
            let n = b[i..].iter().take_while(|&&c| c == '`').count();
            // Find the closing run of exactly n backticks.
            let mut j = i + n;
            let mut close = None;
            while j < b.len() {
                if b[j] == '`' {
                    let m = b[j..].iter().take_while(|&&c| c == '`').count();
                    if m == n {
                        close = Some(j);
                        break;
                    }
                    j += m;
                } else {
                    j += 1;
                }
            }
            match close {
                Some(j) => {
                    out.push_str("``");
                    out.extend(b[i..j].iter().filter(|&&c| c == '\n'));
                    i = j + n;
                }
                None => {
                    out.extend(&b[i..i + n]);
                    i += n;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// The contents of the inline code spans of a line.
fn code_spans(line: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        match after.find('`') {
            Some(end) => {
                spans.push(after[..end].to_string());
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    spans
}

/// GitHub's anchor for a heading: lower case, inline code's backticks and link targets dropped,
/// every character but letters, digits, `_`, `-` and spaces removed, spaces turned into `-`.
fn slug(heading: &str) -> String {
    // [text](target) → text
    let mut text = String::new();
    let mut rest = heading;
    while let Some(i) = rest.find("](") {
        let close = rest[i..].find(')').map(|c| i + c);
        match close {
            Some(c) => {
                text.push_str(&rest[..i]);
                rest = &rest[c + 1..];
            }
            None => break,
        }
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == '_' || c == '-' || c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings, duplicates numbered as GitHub does (`x`, `x-1`).
fn anchors(md: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for line in without_fences(md) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let text = line[hashes..].trim().trim_end_matches('#').trim();
        let base = slug(text);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// The blocks of a Markdown text outside fenced code, with their first line numbers: paragraphs
/// (a code span may go on over a line break, never past a paragraph) and table rows.
fn blocks(md: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (i, line) in without_fences(md).into_iter().enumerate() {
        let row = line.trim_start().starts_with('|');
        if line.trim().is_empty() || row {
            open = false;
            if row {
                out.push((i + 1, line));
            }
        } else if open {
            let last = out.last_mut().unwrap();
            last.1.push('\n');
            last.1.push_str(&line);
        } else {
            out.push((i + 1, line));
            open = true;
        }
    }
    out
}

/// The link targets of a Markdown text, with their line numbers: `[text](target)` and
/// `[label]: target`, outside code.
fn links(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (first, block) in blocks(md) {
        let text = without_code_spans(&block);
        for (n, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(i) = rest.find("](") {
                let target = &rest[i + 2..];
                let end = target.find([')', ' ']).unwrap_or(target.len());
                out.push((first + n, target[..end].trim_matches(['<', '>']).to_string()));
                rest = &target[end..];
            }
            let t = line.trim_start();
            if t.starts_with('[') {
                if let Some(i) = t.find("]: ") {
                    out.push((first + n, t[i + 3..].split_whitespace().next().unwrap_or("").to_string()));
                }
            }
        }
    }
    out
}

/// What is wrong with the relative links of `file` (a Markdown file), read with `read`.
fn broken_links(file: &Path, md: &str, read: &dyn Fn(&Path) -> Option<String>) -> Vec<String> {
    let mut errors = Vec::new();
    let dir = file.parent().unwrap_or(Path::new(""));
    for (line, target) in links(md) {
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let at = format!("{}:{line}: link `{target}`", file.display());
        let dest = if path.is_empty() { file.to_path_buf() } else { dir.join(path) };
        let Some(text) = (if path.is_empty() { Some(md.to_string()) } else { read(&dest) }) else {
            if !dest.exists() {
                errors.push(format!("{at}: {} does not exist", dest.display()));
            } else if anchor.is_some() {
                errors.push(format!("{at}: an anchor into a directory"));
            }
            continue;
        };
        if let Some(anchor) = anchor {
            if dest.extension().is_none_or(|e| e != "md") {
                errors.push(format!("{at}: an anchor into a file that is not Markdown"));
            } else if !anchors(&text).contains(anchor) {
                errors.push(format!("{at}: no heading with anchor #{anchor} in {}", dest.display()));
            }
        }
    }
    errors
}

/// Every README.md of the repository (the build and VCS directories left out).
fn readmes() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                    walk(&p, out);
                }
            } else if name == "README.md" {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new(ROOT), &mut out);
    out.sort();
    out
}

fn read_text(p: &Path) -> Option<String> {
    if p.is_file() {
        Some(fs::read_to_string(p).unwrap_or_default())
    } else {
        None
    }
}

#[test]
fn every_relative_link_in_every_readme_resolves() {
    let files = readmes();
    let names: Vec<String> =
        files.iter().map(|p| p.strip_prefix(ROOT).unwrap().display().to_string()).collect();
    for want in ["README.md", "src/README.md", "src/model/README.md", "ebpf/README.md", "xtask/README.md"] {
        assert!(names.iter().any(|n| n == want), "{want} not found among {names:?}");
    }
    let mut errors = Vec::new();
    let mut checked = 0;
    for f in &files {
        let md = fs::read_to_string(f).unwrap();
        checked += links(&md).len();
        errors.extend(broken_links(f, &md, &read_text));
    }
    assert!(errors.is_empty(), "{} broken links:\n{}", errors.len(), errors.join("\n"));
    assert!(checked > 50, "only {checked} links found: is the link parser broken?");
}

#[test]
fn the_link_check_catches_broken_links_and_anchors() {
    let dir = Path::new(ROOT);
    let file = dir.join("README.md");
    let md = "# Top\n\n## The `x` part: a → b\n\nSee [ok](#the-x-part-a--b), [self](#top), \
              [model](src/model/README.md#page-cache), [dir](src/).\n\
              Bad: [gone](no/such/file.md), [anchor](#no-such-heading), \
              [far](src/model/README.md#no-such-heading).\n\
              ```\n[in code](not/checked.md)\n```\n`[span](not/checked.md)`\n\n\
              A span `over a\n[line](not/checked.md) break` and [after](gone/too.md).\n";
    let errors = broken_links(&file, md, &read_text);
    assert_eq!(errors.len(), 4, "{errors:#?}");
    assert!(errors[0].contains("no/such/file.md") && errors[0].contains("does not exist"));
    assert!(errors[1].contains("#no-such-heading") && errors[1].contains("README.md:6"));
    assert!(errors[2].contains("src/model/README.md"));
    assert!(errors[3].contains("gone/too.md") && errors[3].contains("README.md:13"), "{}", errors[3]);
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(slug("Devices (iostat -x)"), "devices-iostat--x");
    assert_eq!(slug("Sync calls (`syncs[]`, src/model/syncs.rs)"), "sync-calls-syncs-srcmodelsyncsrs");
    assert_eq!(slug("Sample → Model → View"), "sample--model--view");
    assert_eq!(slug("Benchmark mode (`ioscope bench`)"), "benchmark-mode-ioscope-bench");
    let a = anchors("# A\n## A\n```\n# not a heading\n```\n#nospace\n");
    assert_eq!(a.into_iter().collect::<Vec<_>>(), ["a", "a-1"]);
}

// ---------------------------------------------------------------------------------------------
// The user README

fn readme() -> String {
    fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap()
}

#[test]
fn the_user_readme_is_short_and_its_test_command_is_cis() {
    let md = readme();
    let lines = md.lines().count();
    assert!(
        lines < 400,
        "README.md has {lines} lines: it is the user's README (reference goes beside the code)"
    );
    // "Test it (...):" is followed by a fenced block with the one command CI runs.
    let at = md.find("\nTest it").expect("README.md has a \"Test it\" paragraph");
    let block = md[at..].split("```sh\n").nth(1).expect("a sh block after \"Test it\"");
    let command = block.split("\n```").next().unwrap().trim();
    assert!(!command.is_empty() && !command.contains('\n'), "one command expected, got {command:?}");
    let ci = fs::read_to_string(Path::new(ROOT).join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == command),
        "README.md's test command `{command}` is not what .ci/run runs"
    );
    let start = md.find("<!-- kernel-support-table: generated by `cargo xtask support-table` -->");
    let end = md.find("<!-- /kernel-support-table -->");
    assert!(
        matches!((start, end), (Some(s), Some(e)) if s < e),
        "the kernel support table's markers are gone"
    );
}

// ---------------------------------------------------------------------------------------------
// JSON keys

/// `a.{b,c[]}.d` → `a.b.d`, `a.c[].d`.
fn expand(pattern: &str) -> Vec<String> {
    let Some(open) = pattern.find('{') else { return vec![pattern.to_string()] };
    let close = open + pattern[open..].find('}').expect("unclosed {");
    let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
    pattern[open + 1..close]
        .split(',')
        .flat_map(|alt| expand(&format!("{head}{}{tail}", alt.trim())))
        .collect()
}

/// The keys of the `Key` tables of a Markdown text: every code span of the first column,
/// expanded. A first-column span that is not a key path is an error (the table's format).
fn documented_keys(md: &str) -> Result<Vec<String>, String> {
    let mut keys = Vec::new();
    let mut in_key_table = false;
    for (n, line) in without_fences(md).iter().enumerate() {
        let t = line.trim();
        if !t.starts_with('|') {
            in_key_table = false;
            continue;
        }
        let first = t[1..].split(" | ").next().unwrap_or("").trim().trim_end_matches('|').trim();
        if first == "Key" {
            in_key_table = true;
            continue;
        }
        if !in_key_table || first.starts_with("---") {
            continue;
        }
        for span in code_spans(first) {
            let ok = !span.is_empty()
                && span
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.[]{},".contains(c));
            if !ok {
                return Err(format!("line {}: `{span}` in a Key column is not a JSON key path", n + 1));
            }
            keys.extend(expand(&span));
        }
    }
    Ok(keys)
}

#[derive(Debug, PartialEq)]
enum Found {
    Yes,
    /// The path goes through a null or an empty array: nothing to check it against.
    Unknown(String),
    No(String),
}

/// Whether `path` (`a.b[].c`, `a.d[]`) exists in `v`.
fn lookup(v: &Value, path: &str) -> Found {
    let (seg, rest) = match path.split_once('.') {
        Some((s, r)) => (s, Some(r)),
        None => (path, None),
    };
    let (name, array) = match seg.strip_suffix("[]") {
        Some(n) => (n, true),
        None => (seg, false),
    };
    let Some(obj) = v.as_object() else {
        return if v.is_null() {
            Found::Unknown("null".into())
        } else {
            Found::No(format!("{seg}: not an object"))
        };
    };
    let Some(child) = obj.get(name) else { return Found::No(format!("no key `{name}`")) };
    if array {
        let Some(items) = child.as_array() else {
            return if child.is_null() {
                Found::Unknown(format!("{name} is null"))
            } else {
                Found::No(format!("`{name}` is not an array"))
            };
        };
        let Some(rest) = rest else { return Found::Yes };
        if items.is_empty() {
            return Found::Unknown(format!("{name}[] is empty"));
        }
        let results: Vec<Found> = items.iter().map(|i| lookup(i, rest)).collect();
        if results.contains(&Found::Yes) {
            return Found::Yes;
        }
        return results
            .into_iter()
            .find(|r| matches!(r, Found::No(_)))
            .unwrap_or(Found::Unknown(format!("every {name}[] row is null on the way")));
    }
    match rest {
        None => Found::Yes,
        Some(rest) if child.is_null() => Found::Unknown(format!("{name} is null ({rest} not checked)")),
        Some(rest) => lookup(child, rest),
    }
}

/// The leaf keys of a JSON document (`a.b`, `a.c[].d`; an array of plain values is a leaf), each
/// with whether it is a placeholder (null, `[]`, `{}`) that documented keys below it cover.
fn leaves(v: &Value, prefix: &str, out: &mut BTreeSet<(String, bool)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(x, &if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") }, out);
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {
            for x in items {
                leaves(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {
            let placeholder = v.is_null() || v.as_array().is_some_and(Vec::is_empty) || v.is_object();
            out.insert((prefix.to_string(), placeholder));
        }
    }
}

/// The leaf keys of `doc` that no documented key names, itself or by an enclosing key.
fn undocumented(doc: &Value, keys: &[String]) -> Vec<String> {
    let documented: BTreeSet<String> = keys.iter().map(|k| k.replace("[]", "")).collect();
    let mut all = BTreeSet::new();
    leaves(doc, "", &mut all);
    all.into_iter()
        .filter(|(leaf, placeholder)| {
            let plain = leaf.replace("[]", "");
            let parts: Vec<&str> = plain.split('.').collect();
            let named = (1..=parts.len()).any(|n| documented.contains(&parts[..n].join(".")));
            let below = *placeholder && documented.iter().any(|d| d.starts_with(&format!("{plain}.")));
            !(named || below)
        })
        .map(|(leaf, _)| leaf)
        .collect()
}

fn model_readme() -> String {
    fs::read_to_string(Path::new(ROOT).join("src/model/README.md")).unwrap()
}

#[test]
fn the_key_check_catches_made_up_keys() {
    let md = "| Key | Meaning |\n|---|---|\n| `a.{b,c}`, `d[].e` | x |\n| `a.made_up` | y |\n\n\
              | Column | Meaning |\n|---|---|\n| `not.a.key.table` | z |\n";
    let keys = documented_keys(md).unwrap();
    assert_eq!(keys, ["a.b", "a.c", "d[].e", "a.made_up"]);
    let doc: Value = serde_json::json!({"a": {"b": 1, "c": null}, "d": [{"e": 2}], "n": null, "z": []});
    assert_eq!(lookup(&doc, "a.b"), Found::Yes);
    assert_eq!(lookup(&doc, "a.c"), Found::Yes);
    assert_eq!(lookup(&doc, "d[].e"), Found::Yes);
    assert!(matches!(lookup(&doc, "a.made_up"), Found::No(_)));
    assert!(matches!(lookup(&doc, "d[].made_up"), Found::No(_)));
    assert!(matches!(lookup(&doc, "made_up[].x"), Found::No(_)));
    assert!(matches!(lookup(&doc, "n.x"), Found::Unknown(_)));
    assert!(matches!(lookup(&doc, "z[].x"), Found::Unknown(_)));
    assert!(documented_keys("| Key | M |\n|---|---|\n| `Not A Key` | x |\n").is_err());
    // And the other way round: a key the document has but no table names.
    let documented: Vec<String> = ["a.b", "a.c", "d[].e", "n", "z[]"].map(String::from).to_vec();
    assert!(undocumented(&doc, &documented).is_empty(), "{:?}", undocumented(&doc, &documented));
    let doc2 = serde_json::json!({"a": {"b": 1, "new": 2}, "d": [{"e": 2, "f": [1, 2]}], "n": {"m": 1}});
    assert_eq!(undocumented(&doc2, &documented), ["a.new", "d[].f"]);
    // A null or empty object stands for what is documented below it, and only that.
    let doc3 = serde_json::json!({"a": null, "q": null, "d": []});
    assert_eq!(undocumented(&doc3, &documented), ["q"]);
    // The real tables parse and are not empty.
    assert!(documented_keys(&model_readme()).unwrap().len() > 200);
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// File I/O for the probes to see while ioscope samples: a file written and fsync'd (files[],
/// syncs[], io_processes[], cache_processes[]), dropped from the cache and read back cold
/// (readahead), until `stop` exists.
fn make_io(dir: &Path, stop: &Path) {
    let path = dir.join("docs-json-keys.dat");
    let block = vec![0x5au8; 1 << 20];
    let mut buf = vec![0u8; 1 << 20];
    let deadline = Instant::now() + Duration::from_secs(60);
    while !stop.exists() && Instant::now() < deadline {
        let mut f = fs::File::create(&path).unwrap();
        for _ in 0..8 {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
        let mut f = fs::File::open(&path).unwrap();
        // SAFETY: a valid open descriptor; the advice only drops clean cached pages.
        unsafe {
            use std::os::fd::AsRawFd;
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
        while f.read(&mut buf).unwrap() > 0 {}
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = fs::remove_file(&path);
}

#[test]
fn every_documented_json_key_is_in_a_real_once_json() {
    let keys = documented_keys(&model_readme()).unwrap();
    // On a real disk (target/tmp), or where this user may write (a non-root run).
    let name = format!("docs-keys-{}", std::process::id());
    let dir = [PathBuf::from(env!("CARGO_TARGET_TMPDIR")), std::env::temp_dir()]
        .into_iter()
        .map(|d| d.join(&name))
        .find(|d| fs::create_dir_all(d).is_ok())
        .expect("a directory to write in");
    let stop = dir.join("stop");
    let io = {
        let (dir, stop) = (dir.clone(), stop.clone());
        std::thread::spawn(move || make_io(&dir, &stop))
    };
    let out = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(["--once", "--json", "--interval", "2"])
        .stdin(Stdio::null())
        .output()
        .expect("run ioscope");
    fs::write(&stop, b"").unwrap();
    io.join().unwrap();
    let _ = fs::remove_dir_all(&dir);
    assert!(out.status.success(), "ioscope --once --json failed: {}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("--once --json prints JSON");

    let (mut missing, mut unknown) = (Vec::new(), Vec::new());
    for k in &keys {
        match lookup(&doc, k) {
            Found::Yes => {}
            Found::No(why) => missing.push(format!("{k}: {why}")),
            Found::Unknown(why) => unknown.push(format!("{k}: {why}")),
        }
    }
    assert!(
        missing.is_empty(),
        "{} keys documented in src/model/README.md are not in `ioscope --once --json`:\n{}",
        missing.len(),
        missing.join("\n")
    );
    let undocumented = undocumented(&doc, &keys);
    assert!(
        undocumented.is_empty(),
        "{} keys of `ioscope --once --json` are in no key table of src/model/README.md:\n{}",
        undocumented.len(),
        undocumented.join("\n")
    );
    let bpf = doc["bpf"]["enabled"].as_bool() == Some(true);
    eprintln!(
        "{} documented keys: {} found, {} not checkable here (eBPF {}):\n{}",
        keys.len(),
        keys.len() - unknown.len(),
        unknown.len(),
        if bpf { "on" } else { "off" },
        unknown.join("\n")
    );
    // As root with eBPF on, the probes' arrays are filled by the I/O above: nearly every key is
    // checked, and a key whose object never appears is worth a look.
    let require = std::env::var("IOSCOPE_REQUIRE_BPF").is_ok_and(|v| v == "1");
    if require && is_root() {
        assert!(bpf, "IOSCOPE_REQUIRE_BPF=1 as root, yet eBPF is off: {}", doc["bpf"]["reason"]);
    }
}
