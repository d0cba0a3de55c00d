//! `ioscope serve` against a real Prometheus (Debian's `prometheus` package, which brings
//! promtool): scraped at 1 s while dd writes 64 MiB directly to a loop device, the bytes and the
//! request count Prometheus stored agree with what dd wrote and what /proc/diskstats counted;
//! `promtool check metrics` finds nothing to say about a scrape; every metric the Grafana
//! dashboard queries is in a real scrape; a demo recording backfilled through
//! `replay --openmetrics` and `promtool tsdb create-blocks-from openmetrics` can be queried.
//!
//! Each Prometheus runs as our own child: a temporary config, storage directory and free port
//! (the package's system service, if any, is never used).

use crate::common;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::exporter::{sample_names, value, Exporter};
use serde_json::Value;

const DASHBOARD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/grafana/ioscope-dashboard.json");

/// True when prometheus and promtool are installed (else skipped, or a failure in CI).
fn have_prometheus(test: &str) -> bool {
    let ok = ["prometheus", "promtool"]
        .iter()
        .all(|t| Command::new(t).arg("--version").output().is_ok_and(|o| o.status.success()));
    ok || common::skip(test, "prometheus and promtool are not installed (Debian package prometheus)")
}

struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus scraping `target` every second (None: no scrape, e.g. to query
    /// backfilled blocks), storing in `storage` (default: a temporary directory).
    fn start(target: Option<u16>, storage: Option<&Path>) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let mut config = String::from("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n");
        if let Some(port) = target {
            config.push_str(&format!(
                "scrape_configs:\n  - job_name: ioscope\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
            ));
        }
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(&cfg, config).unwrap();
        let data = storage.map(Path::to_path_buf).unwrap_or_else(|| dir.path().join("data"));
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // Backfilled recordings may be older than the default 15 days.
            .arg("--storage.tsdb.retention.time=100y")
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { child, port, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(p.port, "/-/ready").map(|(s, _)| s) != Some(200) {
            assert!(Instant::now() < deadline, "prometheus not ready within 60 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// An instant query (at `time`, Unix seconds, or now): the result vector.
    fn query(&self, q: &str, time: Option<f64>) -> Vec<Value> {
        let mut path = format!("/api/v1/query?query={}", percent_encode(q));
        if let Some(t) = time {
            path.push_str(&format!("&time={t:.3}"));
        }
        let (status, body) = http_get(self.port, &path).expect("query prometheus");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!((status, v["status"].as_str()), (200, Some("success")), "{q}: {body}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The single value of an instant query.
    fn value(&self, q: &str, time: Option<f64>) -> Option<f64> {
        let r = self.query(q, time);
        assert!(r.len() <= 1, "{q}: more than one series: {r:?}");
        r.first().and_then(|s| s["value"][1].as_str()?.parse().ok())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    // Prometheus answers small bodies whole and large ones chunked.
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some((status, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `promtool check metrics` on an exposition: its complaints (empty when none).
fn promtool_check(text: &str) -> String {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        said
    } else {
        format!("exit {}: {said}", out.status)
    }
}

/// The metric names the dashboard's queries use.
fn dashboard_metrics() -> std::collections::BTreeSet<String> {
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(DASHBOARD).unwrap()).unwrap();
    let mut exprs = Vec::new();
    collect_exprs(&dash, &mut exprs);
    assert!(exprs.len() > 20, "the dashboard has its queries: {}", exprs.len());
    let mut names = std::collections::BTreeSet::new();
    for e in exprs {
        let mut rest = e.as_str();
        while let Some(i) = rest.find("ioscope_") {
            let name: String =
                rest[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            rest = &rest[i + name.len()..];
            names.insert(name);
        }
    }
    names
}

fn collect_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr" | "definition", Value::String(s)) => out.push(s.clone()),
                    _ => collect_exprs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_exprs(x, out)),
        _ => {}
    }
}

#[test]
fn prometheus_scrapes_direct_writes_as_dd_and_diskstats_count_them() {
    let _group = common::live_group(module_path!());
    let test = "prometheus_scrapes_direct_writes_as_dd_and_diskstats_count_them";
    if !common::require_root(test) || !have_prometheus(test) {
        return;
    }
    let lo = common::LoopDevice::new(128);
    let fs = common::LoopDevice::with_fs(64, "ext4");
    let ex = Exporter::start(&["--top-files", "10", "--top-processes", "10", "--cgroups"]);
    assert!(ex.log.contains("eBPF on") || !common::required(), "eBPF must be on: {}", ex.log);
    // One read makes the probes see the device: its histograms are exported from then on.
    common::run(
        "dd",
        &[
            &format!("if={}", lo.path.display()),
            "of=/dev/null",
            "bs=4k",
            "count=1",
            "iflag=direct",
            "status=none",
        ],
    );
    let prom = Prometheus::start(Some(ex.port), None);
    let series = format!("ioscope_disk_written_bytes_total{{device=\"{}\"}}", lo.name);
    let deadline = Instant::now() + Duration::from_secs(30);
    while prom.value(&format!("count_over_time({series}[1m])"), None).unwrap_or(0.0) < 3.0 {
        assert!(Instant::now() < deadline, "Prometheus did not store 3 scrapes of {series} in 30 s");
        std::thread::sleep(Duration::from_millis(250));
    }

    // 64 MiB of direct writes in 1 MiB blocks; /proc/diskstats counts the requests (the oracle
    // for the histograms' counts), dd the bytes.
    let before = lo.diskstats();
    let t_start = now_s();
    common::run(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of={}", lo.path.display()),
            "bs=1M",
            "count=64",
            "oflag=direct",
            "status=none",
        ],
    );
    let after = lo.diskstats();
    let requests = (after[4] - before[4]) as f64;
    // Buffered reads of a file whose cache was dropped: readahead and per-file figures.
    let file = fs.mount_point().join("data");
    common::write_patterned_file(&file, 16);
    common::run("dd", &[&format!("if={}", file.display()), "iflag=nocache", "count=0", "status=none"]);
    common::run("cat", &[file.to_str().unwrap()]);
    // Two more samples and scrapes after the I/O.
    std::thread::sleep(Duration::from_millis(3500));
    let t_end = now_s();

    // The raw counters at the end minus at a time before dd started: no extrapolation (an
    // increase() over a range extrapolates to the range's ends, adding up to 2 scrape intervals'
    // worth of the average rate; src/output/prometheus/README.md explains).
    let back = (t_end - t_start).ceil() + 1.0;
    let delta = |metric: &str| {
        let q = format!("{metric} - {metric} offset {back}s");
        prom.value(&q, Some(t_end)).unwrap_or_else(|| panic!("no value for {q}"))
    };
    let bytes = delta(&series);
    let expected = (64u64 << 20) as f64;
    eprintln!(
        "written bytes in Prometheus: {bytes} (dd wrote {expected}); {requests} write requests in diskstats"
    );
    assert!(
        (bytes - expected).abs() <= expected * 0.05,
        "Prometheus has {bytes} bytes written, dd wrote {expected}"
    );
    let hist =
        |name: &str, extra: &str| delta(&format!("{name}{{device=\"{}\",op=\"write\"{extra}}}", lo.name));
    let device_count = hist("ioscope_disk_request_duration_seconds_count", ",phase=\"device\"");
    let size_count = hist("ioscope_disk_request_size_bytes_count", "");
    let size_sum = hist("ioscope_disk_request_size_bytes_sum", "");
    eprintln!("histogram counts: device latency {device_count}, size {size_count} (sum {size_sum} bytes)");
    for (what, n) in [("device latency", device_count), ("request size", size_count)] {
        assert!(
            (n - requests).abs() <= (requests * 0.02).max(2.0),
            "{what} histogram count grew by {n}, diskstats by {requests}"
        );
    }
    assert!((size_sum - expected).abs() <= expected * 0.05, "size histogram sum {size_sum}");
    let increase = prom.value(&format!("increase({series}[{back}s])"), Some(t_end)).unwrap();
    eprintln!("for comparison, increase({series}[{back}s]) = {increase} (extrapolated)");

    // The scrape itself: promtool's linter, and the dashboard's metrics. Per-file series are the
    // files active in the last interval: a file is written and read back (O_DIRECT both ways, so
    // the read reaches the disk) until a scrape holds them, not left to the machine's own I/O.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let mut missing = Vec::new();
    for attempt in 0..10 {
        let f = dir.path().join(format!("dashboard{attempt}"));
        let script = format!(
            "dd if=/dev/zero of={f} bs=64k count=16 oflag=direct status=none && \
             dd if={f} of=/dev/null bs=64k iflag=direct status=none",
            f = f.display()
        );
        let ok = std::process::Command::new("sh").args(["-c", &script]).status().unwrap();
        assert!(ok.success(), "{script}: {ok}");
        std::thread::sleep(Duration::from_millis(1500));
        let text = ex.scrape();
        let said = promtool_check(&text);
        assert!(said.trim().is_empty(), "promtool check metrics: {said}");
        let scraped = sample_names(&text);
        let mut families = scraped.clone();
        for n in &scraped {
            for suffix in ["_bucket", "_sum", "_count"] {
                if let Some(base) = n.strip_suffix(suffix) {
                    families.insert(base.to_string());
                }
            }
        }
        missing = dashboard_metrics().into_iter().filter(|m| !families.contains(m)).collect();
        if missing.is_empty() {
            break;
        }
    }
    assert!(missing.is_empty(), "dashboard metrics not in a real scrape: {missing:?}");

    // Per cgroup (--cgroups): the cat above read the 16 MiB file (4,096 pages) through the page
    // cache from this test's cgroup, and dd wrote the loop device from it.
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let cgroup = cgroup.lines().find_map(|l| l.strip_prefix("0::")).expect("a cgroup v2 line").to_string();
    let text = ex.scrape();
    let accesses = value(&text, &format!("ioscope_cgroup_page_cache_accesses_total{{cgroup=\"{cgroup}\"}}"));
    assert!(accesses.is_some_and(|a| a >= 4096.0), "{cgroup}: page-cache accesses {accesses:?}");
    let written =
        format!("ioscope_cgroup_disk_written_bytes_total{{cgroup=\"{cgroup}\",device=\"{}\"}}", lo.name);
    let written = value(&text, &written);
    assert!(written.is_some_and(|w| w >= expected * 0.95), "{cgroup}: disk bytes written {written:?}");
}

#[test]
fn a_recording_backfilled_through_openmetrics_can_be_queried() {
    let _group = common::live_group(module_path!());
    let test = "a_recording_backfilled_through_openmetrics_can_be_queried";
    if !have_prometheus(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rec = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo/dirty-threshold-stall.rec");
    let out =
        Command::new(env!("CARGO_BIN_EXE_ioscope")).args(["replay", rec, "--openmetrics"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let om = String::from_utf8(out.stdout).unwrap();
    assert!(om.ends_with("\n# EOF\n"));
    let om_file = dir.path().join("rec.om");
    std::fs::write(&om_file, &om).unwrap();
    let data = dir.path().join("data");
    let made = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&om_file)
        .arg(&data)
        .output()
        .unwrap();
    assert!(made.status.success(), "promtool: {}", String::from_utf8_lossy(&made.stderr));

    // A point of the recording, as written: `ioscope_memory_dirty_bytes VALUE TIMESTAMP`.
    let lines: Vec<&str> = om.lines().filter(|l| l.starts_with("ioscope_memory_dirty_bytes ")).collect();
    assert!(lines.len() > 10, "one point per interval: {}", lines.len());
    let mid: Vec<&str> = lines[lines.len() / 2].split(' ').collect();
    let (value, at): (f64, f64) = (mid[1].parse().unwrap(), mid[2].parse().unwrap());
    let prom = Prometheus::start(None, Some(&data));
    let got = prom.value("ioscope_memory_dirty_bytes", Some(at));
    assert_eq!(got, Some(value), "the backfilled point at {at}");
    // A counter and a threshold from the same recording.
    assert!(prom.value("ioscope_dirty_threshold_bytes", Some(at)).is_some_and(|v| v > 0.0));
    let written = prom.value("ioscope_disk_written_bytes_total{device=\"vda\"}", Some(at));
    let any_written = prom.query("ioscope_disk_written_bytes_total", Some(at));
    assert!(written.is_some() || !any_written.is_empty(), "disk counters are backfilled too");
}
