//! The built binary, end to end, without root: usage errors, `--once --json`, `--batch`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn ioscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(args)
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .output()
        .expect("run ioscope")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn usage_errors_exit_2_with_one_clear_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["--bogus"], "unexpected argument '--bogus'"),
        (&["--interval", "0"], "must be between 0.1 and 3600 seconds"),
        (&["--interval", "abc"], "'abc' is not a time (use seconds, 250ms, 90s, 5m, 2h or h:mm:ss)"),
        (&["-i", "10ms", "--once"], "must be between 0.1 and 3600 seconds (100ms to 1h)"),
        (&["--intervl", "1"], "unexpected argument '--intervl' found; did you mean '--interval'?"),
        (&["record", "-o", "x.rec", "--duraton", "5"], "did you mean '--duration'?"),
        (&["--interval", "4000", "--once"], "must be between 0.1 and 3600 seconds"),
        (&["-n", "2"], "-n/--count only makes sense with --batch"),
        (&["--json"], "--json needs --once"),
        (&["--once", "--batch"], "cannot be used with"),
        (&["--batch", "-n", "0"], "must be at least 1"),
    ];
    for (args, expected) in cases {
        let out = ioscope(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} printed on stdout");
        assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
        assert!(err.starts_with("ioscope: "), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err:?} lacks {expected:?}");
    }
}

#[test]
fn help_succeeds_on_stdout() {
    let out = ioscope(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in ["--interval", "--no-color", "--no-bpf", "--once", "--batch", "--json", "--count"] {
        assert!(text.contains(flag), "--help lacks {flag}");
    }
}

#[test]
fn interactive_mode_without_a_terminal_says_so() {
    let out = ioscope(&["--no-bpf"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("needs a terminal"), "{}", stderr(&out));
}

fn number(v: &Value, path: &str) -> f64 {
    let mut cur = v;
    for key in path.split('.') {
        cur = cur.get(key).unwrap_or_else(|| panic!("JSON lacks {path} (at {key})"));
    }
    cur.as_f64().unwrap_or_else(|| panic!("{path} is not a number: {cur}"))
}

#[test]
fn once_json_has_the_documented_keys_and_real_values() {
    let t0 = Instant::now();
    let out = ioscope(&["--once", "--json", "--interval", "0.2", "--no-bpf"]);
    let took = t0.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // One document: serde_json refuses trailing garbage.
    let v: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert!(took >= Duration::from_millis(200), "two samples 0.2 s apart took only {took:?}");

    // The interval is measured between the samples' own monotonic stamps: near the nominal 0.2 s
    // (less by however much longer the first, cold, collection took than the second).
    let interval = number(&v, "interval_s");
    assert!((0.1..5.0).contains(&interval), "interval_s = {interval}");

    for key in ["total", "free", "available", "buffers", "cached", "dirty", "writeback"] {
        number(&v, &format!("memory.{key}"));
    }
    assert!(number(&v, "memory.total") > 0.0, "memory.total should be this machine's RAM");
    assert!(number(&v, "memory.available") <= number(&v, "memory.total"));
    let bg = number(&v, "memory.dirty_background_threshold");
    let hard = number(&v, "memory.dirty_threshold");
    assert!(bg > 0.0 && bg <= hard, "thresholds: background {bg}, throttle {hard}");

    let devices = v["devices"].as_array().expect("devices is an array");
    let diskstats = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
    if !diskstats.trim().is_empty() {
        assert!(!devices.is_empty(), "/proc/diskstats lists devices but the JSON has none");
    }
    for d in devices {
        assert!(d["name"].is_string(), "{d}");
        for key in
            ["r_s", "w_s", "rkb_s", "wkb_s", "rareq_sz", "wareq_sz", "r_await", "w_await", "aqu_sz", "util"]
        {
            number(d, key);
        }
        let util = number(d, "util");
        assert!((0.0..=100.0).contains(&util), "{}: util {util}", d["name"]);
    }

    for p in v["processes"].as_array().expect("processes is an array") {
        assert!(p["comm"].is_string(), "{p}");
        assert!(p["pid"].is_u64(), "{p}");
        number(p, "read_bytes_s");
        number(p, "write_bytes_s");
    }

    assert_eq!(v["bpf"]["enabled"], Value::Bool(false), "--no-bpf must leave eBPF off");
    assert!(v["bpf"]["reason"].is_string(), "bpf.reason should say why eBPF is off");
}

#[test]
fn batch_prints_count_text_frames() {
    let out = ioscope(&["--batch", "-n", "2", "--interval", "0.2", "--no-bpf"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let headers: Vec<&str> = text.lines().filter(|l| l.starts_with("ioscope ")).collect();
    assert_eq!(headers.len(), 2, "{text}");
    for h in &headers {
        assert!(h.contains(" interval "), "{h}");
    }
    for section in ["Memory: ", "Dirty: ", "PSI: ", "eBPF: ", "Device ", "PID USER"] {
        assert_eq!(text.matches(section).count(), 2, "{section:?} in {text}");
    }
}

#[test]
fn batch_json_is_one_document_per_line() {
    let out = ioscope(&["--batch", "--json", "-n", "2", "--interval", "0.1", "--no-bpf"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for line in lines {
        let v: Value = serde_json::from_str(line).expect("each line is a JSON document");
        number(&v, "memory.dirty_threshold");
    }
}

#[test]
fn closed_stdout_ends_batch_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(["--batch", "--interval", "0.1", "--no-bpf"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("ioscope "), "{first}");
    // The reader is dropped here: the next frame's write gets EPIPE, which must end ioscope quietly.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
}
