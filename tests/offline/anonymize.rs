//! `ioscope anonymize` as a user runs it, on real recordings: no name of the input is left in
//! the output, `replay --json` of both gives the same numbers, bad input writes nothing.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use ioscope::record::Recording;
use serde_json::Value;

use crate::common::ioscope_output as run;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The recordings the tests anonymise: the demos (eBPF on: files, cgroups, sync calls) and the
/// oldest fixture.
const RECORDINGS: &[&str] = &[
    "assets/demo/dirty-threshold-stall.rec",
    "assets/demo/readahead-waste.rec",
    "tests/fixtures/recordings/v1-ioscope-0.1.0.rec",
    "tests/fixtures/recordings/redis-always.rec",
];

/// The hierarchy's first directories and the words the anonymiser keeps on purpose
/// (src/record/README.md, "Anonymised copies").
const KEPT: &[&str] = &[
    "bin",
    "boot",
    "dev",
    "etc",
    "home",
    "lib",
    "lib32",
    "lib64",
    "media",
    "mnt",
    "opt",
    "proc",
    "root",
    "run",
    "sbin",
    "srv",
    "sys",
    "tmp",
    "usr",
    "var",
    "(deleted)",
    "null",
    "zero",
    "shm",
    "record",
];

/// Words of `text` split at what cannot be part of a name in the output's JSON.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || "_.:-@+~".contains(c))).filter(|w| !w.is_empty())
}

fn is_number(w: &str) -> bool {
    w.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%')
        .bytes()
        .all(|b| b.is_ascii_digit() || b == b'.')
}

/// Every name a user chose in `rec`, from the recording's own strings, as whole words of at least
/// four characters (shorter ones are too likely to be a JSON key's or a pseudonym's part).
fn originals(rec: &mut Recording) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    // Kernel device names are kept, under /dev too.
    let devices: HashSet<String> =
        (0..rec.len()).flat_map(|i| rec.sample(i).unwrap().disks.clone()).map(|d| d.name).collect();
    let add = |text: &str, names: &mut BTreeSet<String>| {
        for w in text.split([' ', '/', ',']) {
            // Option names and key= of key=value are kept; their values are not.
            let w = if w.starts_with('-') { w.split_once('=').map_or("", |x| x.1) } else { w };
            let w = w.split_once('=').map_or(w, |x| x.1);
            if w.chars().count() >= 4 && !is_number(w) && !KEPT.contains(&w) && !devices.contains(w) {
                names.insert(w.to_string());
            }
        }
    };
    let h = rec.header.clone();
    add(&h.hostname, &mut names);
    for m in &h.mounts {
        add(&m.target, &mut names);
    }
    // Kernel threads (children of kthreadd, or flagged by the block probes) anywhere in the file.
    let mut kernel: HashSet<String> = HashSet::new();
    for i in 0..rec.len() {
        let s = rec.sample(i).unwrap();
        kernel.extend(s.processes.iter().filter(|p| p.pid == 2 || p.ppid == 2).map(|p| p.comm.to_string()));
        kernel.extend(s.bpf.io_processes.iter().filter(|p| p.kernel_thread).map(|p| p.comm.clone()));
    }
    for i in 0..rec.len() {
        let s = rec.sample(i).unwrap().clone();
        let comm = |c: &str, names: &mut BTreeSet<String>| {
            if !kernel.contains(c) && !ioscope::record::anonymize::is_kworker(c) {
                add(c, names)
            }
        };
        add(&s.host.hostname, &mut names);
        for p in &s.processes {
            comm(&p.comm, &mut names);
            if let Some(c) = &p.cmdline {
                add(c, &mut names);
            }
            if let Some(u) = p.user.as_deref().filter(|u| *u != "root") {
                add(u, &mut names);
            }
        }
        for p in &s.bpf.io_processes {
            comm(&p.comm, &mut names);
            add(&p.cgroup, &mut names);
        }
        for f in &s.bpf.files {
            add(f.path.as_deref().unwrap_or(""), &mut names);
            f.processes.iter().for_each(|p| comm(&p.comm, &mut names));
        }
        if let Some(pc) = &s.bpf.page_cache {
            for p in &pc.processes {
                comm(&p.comm, &mut names);
                add(&p.cgroup, &mut names);
            }
        }
        if let Some(ra) = &s.bpf.readahead {
            for f in &ra.files {
                add(f.path.as_deref().unwrap_or(""), &mut names);
                f.triggers.iter().for_each(|t| comm(&t.comm, &mut names));
            }
        }
        if let Some(sy) = &s.bpf.syncs {
            for c in &sy.calls {
                comm(&c.comm, &mut names);
                add(&c.cgroup, &mut names);
                add(c.file.path.as_deref().unwrap_or(""), &mut names);
            }
        }
        for c in &s.cgroups {
            add(&c.path, &mut names);
        }
    }
    names
}

/// The whole recording as text: the header's JSON and every sample's (what `grep -a` would
/// search, were the samples not compressed).
fn text(rec: &mut Recording) -> String {
    let mut t = serde_json::to_string(&rec.header).unwrap();
    for i in 0..rec.len() {
        t.push_str(&serde_json::to_string(rec.sample(i).unwrap()).unwrap());
    }
    t
}

/// The object keys of a run of JSON documents.
fn text_keys(text: &str) -> HashSet<String> {
    fn walk(v: &Value, out: &mut HashSet<String>) {
        match v {
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(m) => m.iter().for_each(|(k, x)| {
                out.extend(k.split('.').map(str::to_string));
                walk(x, out)
            }),
            _ => {}
        }
    }
    let mut out = HashSet::new();
    for v in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        walk(&v.unwrap(), &mut out);
    }
    out
}

/// Every number of a JSON document, sorted: the same figures whatever the names (rows sorted by
/// name may come in another order).
fn numbers(line: &str) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Number(n) => out.push(n.to_string()),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(m) => m.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&serde_json::from_str(line).unwrap(), &mut out);
    out.sort();
    out
}

#[test]
fn no_name_is_left_and_every_number_is_the_same() {
    let dir = tempfile::tempdir().unwrap();
    for input in RECORDINGS {
        let input = repo(input);
        let output = dir.path().join(input.file_name().unwrap());
        let (code, _, err) = run(&["anonymize", input.to_str().unwrap(), output.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("names replaced"), "{err}");

        let mut before = Recording::open(&input).unwrap();
        let mut after = Recording::open(&output).unwrap();
        assert_eq!(before.len(), after.len());
        assert_eq!(before.mono_ns(), after.mono_ns());
        let names = originals(&mut before);
        assert!(names.len() > 20, "{}: only {names:?}", input.display());
        let out_text = text(&mut after);
        let mut out_words: HashSet<&str> = words(&out_text).collect();
        // The JSON's keys (a command line may name a setting, e.g. dirty_ratio) are not names.
        let keys = text_keys(&out_text);
        out_words.retain(|w| !keys.contains(*w));
        let left: Vec<&String> = names.iter().filter(|n| out_words.contains(n.as_str())).collect();
        assert!(left.is_empty(), "{}: names left in the copy: {left:?}", input.display());
        // Pseudonyms did replace them (the copy is not merely emptied).
        assert!(out_text.contains("\"comm\":\"proc"), "{}", input.display());

        let (c1, json_before, e1) = run(&["replay", input.to_str().unwrap(), "--json"]);
        let (c2, json_after, e2) = run(&["replay", output.to_str().unwrap(), "--json"]);
        assert_eq!((c1, c2), (0, 0), "{e1}{e2}");
        assert_eq!(json_before.lines().count(), json_after.lines().count());
        assert!(json_before.lines().count() >= 3);
        for (i, (a, b)) in json_before.lines().zip(json_after.lines()).enumerate() {
            assert!(numbers(a) == numbers(b), "{}: interval {i} has other numbers", input.display());
        }
    }
}

#[test]
fn kept_prefixes_stay_and_the_copy_compares_equal() {
    let dir = tempfile::tempdir().unwrap();
    let input = repo("assets/demo/readahead-waste.rec");
    let output = dir.path().join("out.rec");
    let mut before = Recording::open(&input).unwrap();
    let path = (0..before.len())
        .find_map(|i| {
            let s = before.sample(i).unwrap();
            let ra = s.bpf.readahead.iter().flat_map(|r| r.files.iter().map(|f| f.path.clone()));
            s.bpf.files.iter().map(|f| f.path.clone()).chain(ra).flatten().next()
        })
        .expect("the demo has file paths");
    let (code, _, err) =
        run(&["anonymize", input.to_str().unwrap(), output.to_str().unwrap(), "--keep", &path]);
    assert_eq!(code, 0, "{err}");
    let mut after = Recording::open(&output).unwrap();
    assert!(text(&mut after).contains(&serde_json::to_string(&path).unwrap()), "{path} was not kept");
    // Two ranges of the copy compare as the same ranges of the original (the pseudonyms are the
    // copy's own: a copy against the original would pair no process, file or cgroup).
    let ranges = |f: &Path| {
        let f = f.to_str().unwrap();
        let (code, out, err) = run(&["compare", &format!("{f}@..6"), &format!("{f}@6.."), "--json"]);
        assert_eq!(code, 0, "{err}");
        out
    };
    let (a, b) = (ranges(&input), ranges(&output));
    assert!(numbers(&a).len() > 50);
    assert!(numbers(&a) == numbers(&b), "the copy compares to other figures");
}

#[test]
fn bad_input_is_one_line_exit_2_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let not_rec = dir.path().join("notes.txt");
    std::fs::write(&not_rec, "hello\n").unwrap();
    let out = dir.path().join("out.rec");
    let (code, _, err) = run(&["anonymize", not_rec.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    assert!(err.contains("not an ioscope recording"), "{err}");
    assert!(!out.exists());

    let input = repo("tests/fixtures/recordings/v1-ioscope-0.1.0.rec");
    std::fs::write(&out, "mine").unwrap();
    let (code, _, err) = run(&["anonymize", input.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"mine");
    let (code, _, err) = run(&["anonymize", input.to_str().unwrap(), out.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(Recording::open(&out).is_ok());

    let missing = dir.path().join("missing.rec");
    let out2 = dir.path().join("out2.rec");
    let (code, _, err) = run(&["anonymize", missing.to_str().unwrap(), out2.to_str().unwrap()]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    assert!(!out2.exists());
}
