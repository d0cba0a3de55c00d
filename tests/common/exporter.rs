//! `ioscope serve` run by the tests: started on a free port (the port it prints), spoken to over
//! plain TCP, killed on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Exporter {
    pub child: Child,
    pub port: u16,
    /// What it printed on stderr up to its "listening" line.
    pub log: String,
}

impl Exporter {
    /// Starts `ioscope serve --listen 127.0.0.1:0 ARGS` and waits until /metrics answers 200
    /// (after its first sample).
    pub fn start(args: &[&str]) -> Exporter {
        Exporter::start_with(Command::new(env!("CARGO_BIN_EXE_ioscope")), args)
    }

    /// The same from a prepared command (another user, environment).
    pub fn start_with(mut cmd: Command, args: &[&str]) -> Exporter {
        let mut child = cmd
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ioscope serve");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut log = String::new();
        let port = loop {
            let mut line = String::new();
            assert!(err.read_line(&mut line).unwrap() > 0, "ioscope serve ended early: {log}");
            log.push_str(&line);
            if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
                break rest.split('/').next().unwrap().parse::<u16>().unwrap();
            }
        };
        // The rest of its stderr (what `err` buffered first) is read on a thread of its own.
        let rx = super::line_channel(err);
        let mut ex = Exporter { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok((200, _, _)) = ex.try_get("/metrics", &[]) {
                break;
            }
            assert!(Instant::now() < deadline, "no 200 from /metrics within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        while let Ok(line) = rx.try_recv() {
            ex.log.push_str(&line);
            ex.log.push('\n');
        }
        ex
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to ioscope serve");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    }

    /// Sends a raw request and returns the whole response (status, head, body).
    pub fn raw(&self, request: &[u8]) -> std::io::Result<(u16, String, Vec<u8>)> {
        let mut s = self.connect();
        s.write_all(request)?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf)?;
        parse_response(&buf)
    }

    /// GET `path` with extra headers, on a fresh connection closed after the response.
    pub fn try_get(&self, path: &str, headers: &[&str]) -> std::io::Result<(u16, String, Vec<u8>)> {
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        self.raw(req.as_bytes())
    }

    /// The body of GET /metrics (text format), which must answer 200.
    pub fn scrape(&self) -> String {
        let (status, _, body) = self.try_get("/metrics", &[]).expect("scrape");
        assert_eq!(status, 200);
        String::from_utf8(body).expect("UTF-8 exposition")
    }

    /// The process's resident memory, bytes (VmRSS).
    pub fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        kb * 1024
    }

    /// Sends `signal` and returns the exit status.
    pub fn stop(mut self, signal: i32) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "ioscope serve did not stop within 10 s of signal {signal}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_response(buf: &[u8]) -> std::io::Result<(u16, String, Vec<u8>)> {
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP response");
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(bad)?;
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    Ok((status, head, buf[end + 4..].to_vec()))
}

/// The metric names of a text exposition's samples (`name{...} value` lines).
pub fn sample_names(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// The value of the sample `name{labels}` exactly as written (labels in the exporter's order).
pub fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.split(' ').next()?.parse().ok())
}
