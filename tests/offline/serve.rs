//! `ioscope serve` as an HTTP server: the answers to good and bad requests, misbehaving clients,
//! signals, a port in use, memory under a burst of scrapes, and eBPF off for a user without
//! privileges. eBPF is left out (--no-bpf) where it does not matter: these are about the server.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::exporter::{sample_names, value, Exporter};

#[test]
fn metrics_in_text_and_openmetrics_by_accept_header() {
    let ex = Exporter::start(&["--no-bpf"]);
    let (status, head, body) = ex.try_get("/metrics", &[]).unwrap();
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/plain; version=0.0.4; charset=utf-8"), "{head}");
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains("# TYPE ioscope_disk_written_bytes_total counter\n"));
    assert!(!text.contains("# EOF"));
    let (status, head, body) = ex
        .try_get(
            "/metrics",
            &["Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"],
        )
        .unwrap();
    assert_eq!(status, 200);
    assert!(head.contains("content-type: application/openmetrics-text; version=1.0.0"), "{head}");
    let om = String::from_utf8(body).unwrap();
    assert!(
        om.contains("# TYPE ioscope_disk_written_bytes counter\n# UNIT ioscope_disk_written_bytes bytes\n")
    );
    assert!(om.ends_with("\n# EOF\n"));
    // The same samples either way.
    assert_eq!(sample_names(&text), sample_names(om.trim_end_matches("# EOF\n")));
    // HEAD: the headers without a body.
    let (status, head, body) =
        ex.raw(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    assert_eq!((status, body.len()), (200, 0), "{head}");
}

#[test]
fn bad_requests_get_4xx_and_the_server_stays_up() {
    let ex = Exporter::start(&["--no-bpf"]);
    assert_eq!(ex.try_get("/nope", &[]).unwrap().0, 404);
    assert_eq!(ex.try_get("/metrics/", &[]).unwrap().0, 404);
    let (status, head, _) = ex
        .raw(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(status, 405);
    assert!(head.to_ascii_lowercase().contains("allow: get, head"), "{head}");
    assert_eq!(ex.raw(b"DELETE / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap().0, 405);
    // Malformed request lines and headers.
    assert_eq!(ex.raw(b"GARBAGE\r\n\r\n").unwrap().0, 400);
    assert_eq!(ex.raw(b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n").unwrap().0, 400);
    assert_eq!(ex.raw(b"GET /metrics HTTP/9.9\r\n\r\n").unwrap().0, 400);
    // A request head over the limit (64 KiB of headers): 431, not an allocation without bound.
    let big = format!("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "a".repeat(64 * 1024));
    let (status, _, _) = ex.raw(big.as_bytes()).unwrap();
    assert_eq!(status, 431);
    assert!(ex.scrape().contains("ioscope_memory_dirty_bytes"));
    let rejected = value(&ex.scrape(), "ioscope_http_rejected_requests_total").unwrap();
    assert!(rejected >= 4.0, "404s and 405s are counted: {rejected}");
}

#[test]
fn clients_that_stall_are_timed_out_and_a_dropped_client_harms_nothing() {
    let ex = Exporter::start(&["--no-bpf"]);
    // Slowloris: half a request head, then nothing. The server hangs up on it after its head
    // time-out (10 s) while serving others meanwhile.
    let started = Instant::now();
    let mut slow = ex.connect();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap();
    let mut silent = ex.connect();
    assert!(ex.scrape().contains("ioscope_memory_cached_bytes"), "served while two clients stall");
    for s in [&mut slow, &mut silent] {
        let mut buf = Vec::new();
        // read_to_end returns once the server closes; the read time-out (30 s) would fail it.
        let r = s.read_to_end(&mut buf);
        assert!(r.is_ok(), "the server must close a stalled connection: {r:?}");
    }
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(9) && waited < Duration::from_secs(25), "closed after {waited:?}");
    // A client that goes away after the first bytes of the response.
    for _ in 0..20 {
        let mut s = ex.connect();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut first = [0u8; 16];
        s.read_exact(&mut first).unwrap();
        drop(s);
    }
    assert!(ex.scrape().contains("ioscope_memory_cached_bytes"));
}

#[test]
fn five_hundred_clients_at_once_all_get_their_metrics() {
    let ex = Exporter::start(&["--no-bpf"]);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(500));
    let port = ex.port;
    let handles: Vec<_> = (0..500)
        .map(|_| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
                s.set_read_timeout(Some(Duration::from_secs(60)))?;
                s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
                let mut buf = Vec::new();
                s.read_to_end(&mut buf)?;
                Ok::<_, std::io::Error>(buf)
            })
        })
        .collect();
    let mut ok = 0;
    for h in handles {
        let buf = h.join().unwrap().expect("each client gets an answer");
        if buf.starts_with(b"HTTP/1.1 200") && buf.ends_with(b"ioscope_http_rejected_requests_total 0\n") {
            ok += 1;
        }
    }
    assert_eq!(ok, 500, "every client gets a whole 200 response");
}

#[test]
fn memory_stays_bounded_under_a_burst_of_a_thousand_scrapes() {
    let ex = Exporter::start(&["--no-bpf", "--top-processes", "50"]);
    // Warm up: the allocator's arenas settle after the first scrapes.
    for _ in 0..20 {
        ex.scrape();
    }
    let before = ex.rss_bytes();
    let port = ex.port;
    let handles: Vec<_> = (0..50)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..20 {
                    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
                    let mut buf = Vec::new();
                    s.read_to_end(&mut buf).unwrap();
                    assert!(buf.starts_with(b"HTTP/1.1 200"));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let after = ex.rss_bytes();
    eprintln!("RSS before the burst {} KiB, after {} KiB", before / 1024, after / 1024);
    assert!(after < before + (16 << 20), "RSS grew from {before} to {after} bytes over 1,000 scrapes");
    assert!(value(&ex.scrape(), "ioscope_scrapes_total").unwrap() >= 1020.0);
}

#[test]
fn sigterm_and_sigint_stop_it_with_exit_code_zero() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let ex = Exporter::start(&["--no-bpf"]);
        let status = ex.stop(signal);
        assert_eq!(status.code(), Some(0), "signal {signal}: {status}");
    }
}

#[test]
fn a_port_in_use_is_one_line_and_exit_code_one() {
    let ex = Exporter::start(&["--no-bpf"]);
    let out = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(["serve", "--no-bpf", "--listen", &format!("127.0.0.1:{}", ex.port)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("cannot listen on 127.0.0.1:{}", ex.port)) && err.contains("in use"),
        "{err}"
    );
}

#[test]
fn a_bad_listen_address_or_top_count_is_a_usage_error() {
    for args in [
        &["serve", "--listen", "localhost"][..],
        &["serve", "--top-files", "100000"],
        &["serve", "--interval", "0"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ioscope")).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// Without privileges eBPF is off; the procfs figures are still served, and the metric and the
/// log say why. Run as `nobody` (needs root to switch); without root the test user is unprivileged
/// already.
#[test]
fn without_privileges_it_serves_procfs_and_says_why_ebpf_is_off() {
    // A copy nobody can run (the build directory may be under a home only root may enter).
    let dir = tempfile::tempdir().unwrap();
    let cmd = if common::is_root() {
        use std::os::unix::fs::PermissionsExt;
        let bin = dir.path().join("ioscope");
        std::fs::copy(env!("CARGO_BIN_EXE_ioscope"), &bin).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--"]);
        c.arg(&bin);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_ioscope"))
    };
    let ex = Exporter::start_with(cmd, &[]);
    let text = ex.scrape();
    assert_eq!(value(&text, "ioscope_bpf_enabled"), Some(0.0));
    let status = text.lines().find(|l| l.starts_with("ioscope_bpf_status_info{")).unwrap();
    assert!(status.contains("reason=\"") && !status.contains("reason=\"\""), "{status}");
    assert!(ex.log.contains("eBPF off ("), "{}", ex.log);
    assert!(value(&text, "ioscope_memory_total_bytes").unwrap() > 0.0);
    assert!(text.contains("ioscope_disk_read_bytes_total{device="));
}

/// The open-file limit of this test process raised to at least `want` (soft, up to the hard
/// limit); false when the hard limit is lower.
fn raise_own_fd_limit(want: u64) -> bool {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid, writable rlimit; then our own limit set within the hard one.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if lim.rlim_max < want {
            return false;
        }
        lim.rlim_cur = lim.rlim_cur.max(want);
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0
    }
}

/// Issue 38 item 7: 2,000 connections that never send a byte, each reopened as soon as the
/// exporter closes it, for 12 s. A well-behaved scrape on a fresh connection is answered at once
/// (it took 9.0–9.3 s when the exporter stopped accepting at its connection limit and the idle
/// ones held their slots until their head time-out), and the exporter's descriptors and memory
/// stay bounded.
#[test]
fn two_thousand_idle_connections_do_not_delay_a_scrape() {
    const IDLE: usize = 2000;
    const THREADS: usize = 4;
    if !raise_own_fd_limit(IDLE as u64 + 1000) {
        common::skip(
            "two_thousand_idle_connections_do_not_delay_a_scrape",
            "the hard open-file limit is too low",
        );
        return;
    }
    let ex = Exporter::start(&["--no-bpf"]);
    let rss_before = ex.rss_bytes();
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let port = ex.port;
    let hostile: Vec<_> = (0..THREADS)
        .map(|_| {
            let (stop, opened) = (stop.clone(), opened.clone());
            std::thread::spawn(move || {
                let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
                let mut conns: Vec<Option<TcpStream>> = (0..IDLE / THREADS).map(|_| None).collect();
                while !stop.load(Ordering::Relaxed) {
                    for slot in conns.iter_mut().filter(|s| s.is_none()) {
                        *slot = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok();
                        if slot.is_some() {
                            opened.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // Wait for the exporter to close some (poll: no busy reads), then reopen them.
                    let mut polled: Vec<libc::pollfd> = conns
                        .iter()
                        .flatten()
                        .map(|s| libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 })
                        .collect();
                    // SAFETY: `polled` is a valid array of pollfd for the sockets `conns` holds.
                    unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, 50) };
                    let closed: std::collections::HashSet<i32> =
                        polled.iter().filter(|p| p.revents != 0).map(|p| p.fd).collect();
                    for slot in conns.iter_mut() {
                        if slot.as_ref().is_some_and(|s| closed.contains(&s.as_raw_fd())) {
                            *slot = None;
                        }
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while opened.load(Ordering::Relaxed) < IDLE {
        assert!(Instant::now() < deadline, "only {} connections opened", opened.load(Ordering::Relaxed));
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut times = Vec::new();
    let mut fds_max = 0;
    let attack_start = Instant::now();
    while attack_start.elapsed() < Duration::from_secs(12) {
        let t = Instant::now();
        let mut s = ex.connect();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        let answered = s.read_to_end(&mut buf).is_ok() && buf.starts_with(b"HTTP/1.1 200");
        times.push(if answered { t.elapsed() } else { Duration::from_secs(5) });
        let fds = std::fs::read_dir(format!("/proc/{}/fd", ex.child.id())).unwrap().count();
        fds_max = fds_max.max(fds);
        std::thread::sleep(Duration::from_millis(500));
    }
    let reopened = opened.load(Ordering::Relaxed);
    let rss_after = ex.rss_bytes();
    stop.store(true, Ordering::Relaxed);
    for h in hostile {
        h.join().unwrap();
    }
    times.sort();
    let median = times[times.len() / 2];
    let worst = *times.last().unwrap();
    eprintln!(
        "{} scrapes beside {IDLE} idle connections ({reopened} opened in all): median {median:?}, worst \
         {worst:?}; ioscope held at most {fds_max} descriptors, RSS {} → {} MiB",
        times.len(),
        rss_before >> 20,
        rss_after >> 20
    );
    // The goal is 100 ms (node_exporter: 8 ms); measured here, debug build, 2,000 idle: median
    // 4–5 ms, worst 8–11 ms.
    assert!(median < Duration::from_millis(100), "median scrape {median:?}: {times:?}");
    assert!(worst < Duration::from_millis(500), "a scrape took {worst:?}: {times:?}");
    assert!(fds_max <= ioscope::serve::MAX_CONNECTIONS + 256, "{fds_max} descriptors: not bounded");
    assert!(rss_after < rss_before + (64 << 20), "RSS {rss_before} → {rss_after}");
    assert!(ex.scrape().contains("ioscope_memory_cached_bytes"));
}
