//! `ioscope serve`: a Prometheus exporter. One sampling thread takes a Sample on each of the
//! sampling clock's deadlines and folds it into a Model (a `model::Stream`, as every mode does);
//! the HTTP server answers `GET /metrics` from the newest of them. A scrape never triggers nor
//! waits for collection: it encodes the latest state (src/output/prometheus) and returns.
//!
//! HTTP is hyper's HTTP/1 server on the current-thread tokio runtime. What a bad client can do is
//! bounded: request heads larger than [`MAX_HEAD_BYTES`] get 431, a head not received within
//! [`HEAD_TIMEOUT`] closes the connection, and a connection lives at most [`CONNECTION_LIFETIME`].
//! At most [`max_connections`] are open at once (4,096, fewer under a low open-file limit), and
//! the accept loop never stops for them: a connection accepted at the limit, or an accept that
//! fails for want of file descriptors, closes the connection that has been quiet the longest
//! (no byte in or out), which is an idle one, never a request being answered. Idle connections
//! held open by a client (1,100 in the probe) so cannot delay a scrape: when the limit made
//! the loop wait for a free slot instead, a scrape waited in the listen backlog until the idle
//! ones' head time-out, 9 s. A connection costs only its socket and a small task until its first
//! byte arrives (hyper's buffers are made then), so the bound can sit above what a client holds
//! open: a client that holds more than it makes the accept loop close one for each it reopens,
//! and a scrape then waits behind those reconnects in the listen backlog.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpSocket;
use tokio::signal::unix::{signal, SignalKind};

use crate::bpf::{BpfCollector, BpfOptions};
use crate::collect::clock::Clock;
use crate::collect::{Sampler, SystemRoot};
use crate::model::{Model, Stream};
use crate::output::prometheus::{self, encode, ExportOptions, Format, SelfStats, Totals};
use crate::sample::Sample;

/// The default address: loopback only (any other address must be asked for). 9977 is in the
/// range Prometheus's exporter port list covers (9100–9999, all of it allocated by now).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9977";
/// A request head (request line and headers) larger than this is refused with 431.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// A client that has not sent a whole request head this long after connecting (or after its
/// previous response, on a kept-alive connection) is disconnected.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections open at once at most (see [`max_connections`]).
pub const MAX_CONNECTIONS: usize = 4096;
/// File descriptors kept for everything but connections (as [`crate::collect::ProcessReader`]
/// keeps: the eBPF maps and programs, the kept /proc files).
const FD_HEADROOM: u64 = 256;
/// Any connection is closed after this long, kept alive or not.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(300);
const LISTEN_BACKLOG: u32 = 1024;

/// `ioscope serve`'s flags.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address and port to listen on (any address other than loopback only when given here).
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: std::net::SocketAddr,
    /// Seconds between samples (fractions allowed, 0.1 to 3600); scrapes read the latest.
    #[arg(short, long, value_name = "SECONDS", default_value = "1", value_parser = crate::util::parse_interval)]
    pub interval: Duration,
    /// Also export the N processes with the most disk I/O (pid and comm labels).
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_series_top)]
    pub top_processes: usize,
    /// Also export the N files with the most disk I/O (device and path labels; needs eBPF).
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_series_top)]
    pub top_files: usize,
    /// Also export disk I/O, page cache, throttling and sync calls per cgroup (cgroups active in
    /// the last 15 minutes; needs eBPF).
    #[arg(long)]
    pub cgroups: bool,
    /// Do not load eBPF programs: the procfs and sysfs figures only.
    #[arg(long)]
    pub no_bpf: bool,
}

impl ServeArgs {
    /// The options `ioscope serve` runs with (clap has checked every value).
    pub fn options(&self) -> ServeOptions {
        ServeOptions {
            listen: self.listen,
            interval: self.interval,
            export: ExportOptions {
                top_processes: self.top_processes,
                top_files: self.top_files,
                cgroups: self.cgroups,
            },
            bpf: !self.no_bpf,
        }
    }
}

/// The most per-process or per-file series sets `serve` exports: each is a label value that
/// Prometheus indexes, and churns as the top list changes.
pub const MAX_TOP: usize = 1000;

fn parse_series_top(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n <= MAX_TOP => Ok(n),
        Ok(_) => Err(format!("at most {MAX_TOP} (each is a set of series in Prometheus)")),
        Err(_) => Err(format!("'{s}' is not a whole number")),
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub interval: Duration,
    pub export: ExportOptions,
    /// False with --no-bpf.
    pub bpf: bool,
}

/// The newest sample, its Model and the running totals: what every scrape reads.
struct Snapshot {
    sample: Arc<Sample>,
    model: Model,
    totals: Totals,
}

#[derive(Default)]
struct Shared {
    latest: Mutex<Option<Arc<Snapshot>>>,
    samples: AtomicU64,
    /// The sampling clock's deadlines skipped so far (a sample took longer than the interval).
    skipped: AtomicU64,
    sample_ns: AtomicU64,
    scrapes: AtomicU64,
    scrape_ns: AtomicU64,
    rejected: AtomicU64,
}

/// Runs the exporter until SIGTERM or SIGINT.
pub fn run(opts: &ServeOptions) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(serve(opts))
}

async fn serve(opts: &ServeOptions) -> anyhow::Result<()> {
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let listener = listen(opts.listen).with_context(|| format!("cannot listen on {}", opts.listen))?;
    let shared = Arc::new(Shared::default());
    let _stop = spawn_sampler(opts, shared.clone())?;
    eprintln!(
        "ioscope serve: listening on http://{}/metrics, sampling every {} s",
        listener.local_addr()?,
        opts.interval.as_secs_f64()
    );
    let connections = Arc::new(Mutex::new(Connections::new(max_connections(crate::util::fd_limit()))));
    let export = opts.export;
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors: the quietest connection gives its own back, then
                // the accept is tried again at once; if none is open, a moment's wait.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    if lock(&connections).close_quietest() {
                        // Its task closes the socket when it runs.
                        tokio::task::yield_now().await;
                    } else {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    continue;
                }
                // The client gave up before the accept (ECONNABORTED) and the like.
                Err(_) => continue,
            },
            _ = sigint.recv() => break,
            _ = sigterm.recv() => break,
        };
        let (id, activity, mut closed, made_room) = lock(&connections).open();
        if made_room {
            // The closed connection's task drops its socket when it runs: let it, before the
            // next accept, so that the descriptors stay within the limit.
            tokio::task::yield_now().await;
        }
        let shared = shared.clone();
        let connections = connections.clone();
        tokio::spawn(async move {
            // Nothing but the socket until the client says something: hyper's buffers and
            // state (boxed, so that a waiting task stays small) are made for a connection that
            // sends a byte within the head time-out.
            let spoke = tokio::select! {
                r = tokio::time::timeout(HEAD_TIMEOUT, stream.readable()) => matches!(r, Ok(Ok(()))),
                _ = &mut closed => false,
            };
            if spoke {
                Box::pin(answer(stream, activity, closed, shared, export)).await;
            }
            lock(&connections).forget(id);
        });
    }
    eprintln!("ioscope serve: stopping");
    Ok(())
}

/// Serves one connection that has sent its first byte, until it ends, its lifetime is over, or
/// it is closed to make room.
async fn answer(
    stream: tokio::net::TcpStream,
    activity: Activity,
    closed: tokio::sync::oneshot::Receiver<()>,
    shared: Arc<Shared>,
    export: ExportOptions,
) {
    let service = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, std::convert::Infallible>(respond(&req, &shared, &export)) }
    });
    let stream = Tracked { inner: stream, activity };
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service);
    // Errors here are the client's (reset, timed out, malformed): nothing to do but close.
    tokio::select! {
        _ = tokio::time::timeout(CONNECTION_LIFETIME, conn) => {}
        // Closed to make room (its sender dropped).
        _ = closed => {}
    }
}

/// How many connections may be open at once under an open-file limit of `fd_limit`: half of
/// what [`FD_HEADROOM`] leaves (the other half is the process reader's), at most
/// [`MAX_CONNECTIONS`], at least 16.
pub fn max_connections(fd_limit: u64) -> usize {
    (fd_limit.saturating_sub(FD_HEADROOM) / 2).clamp(16, MAX_CONNECTIONS as u64) as usize
}

fn lock(c: &Mutex<Connections>) -> std::sync::MutexGuard<'_, Connections> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

/// The open connections: when each last moved a byte, and the sender whose drop closes it.
struct Connections {
    max: usize,
    next: u64,
    open: std::collections::HashMap<u64, (Arc<AtomicU64>, tokio::sync::oneshot::Sender<()>)>,
    /// What [`Tracked`] stamps are measured from.
    epoch: Instant,
}

impl Connections {
    fn new(max: usize) -> Connections {
        Connections { max, next: 0, open: Default::default(), epoch: Instant::now() }
    }

    /// A new connection: its id, its activity stamp, what tells it to close, and whether another
    /// was closed to make room (at the limit, the quietest one is).
    fn open(&mut self) -> (u64, Activity, tokio::sync::oneshot::Receiver<()>, bool) {
        let mut made_room = false;
        while self.open.len() >= self.max && self.close_quietest() {
            made_room = true;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let stamp = Arc::new(AtomicU64::new(0));
        let activity = Activity { stamp: stamp.clone(), epoch: self.epoch };
        activity.touch();
        let id = self.next;
        self.next += 1;
        self.open.insert(id, (stamp, tx));
        (id, activity, rx, made_room)
    }

    /// Closes the connection that moved no byte for the longest; false when none is open.
    fn close_quietest(&mut self) -> bool {
        let quietest = self.open.iter().min_by_key(|(_, (stamp, _))| stamp.load(Ordering::Relaxed));
        let Some(id) = quietest.map(|(id, _)| *id) else { return false };
        self.open.remove(&id);
        true
    }

    fn forget(&mut self, id: u64) {
        self.open.remove(&id);
    }
}

/// When a connection last moved a byte, in ns since [`Connections::epoch`].
struct Activity {
    stamp: Arc<AtomicU64>,
    epoch: Instant,
}

impl Activity {
    fn touch(&self) {
        self.stamp.store(self.epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// A connection's socket that stamps its [`Activity`] on every byte read or written.
struct Tracked {
    inner: tokio::net::TcpStream,
    activity: Activity,
}

impl tokio::io::AsyncRead for Tracked {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, std::task::Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl tokio::io::AsyncWrite for Tracked {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A listening socket with a backlog deep enough for hundreds of simultaneous connects.
fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// The answer to one request: /metrics, a short index at /, 404 and 405 otherwise.
fn respond(req: &Request<Incoming>, shared: &Shared, export: &ExportOptions) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let known = matches!(path, "/" | "/metrics");
    if !known {
        return reject(shared, StatusCode::NOT_FOUND, "not found: the metrics are at /metrics\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = reject(shared, StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD are served\n");
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if path == "/" {
        return text(
            StatusCode::OK,
            "text/html; charset=utf-8",
            "<html><head><title>ioscope</title></head><body><h1>ioscope exporter</h1>\
             <p><a href=\"/metrics\">Metrics</a></p></body></html>\n"
                .into(),
        );
    }
    let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let started = Instant::now();
    let snapshot = shared.latest.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let Some(snap) = snapshot else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain; charset=utf-8",
            "ioscope is taking its first sample; try again in a second\n".into(),
        );
    };
    let stats = SelfStats {
        samples: shared.samples.load(Ordering::Relaxed),
        samples_skipped: shared.skipped.load(Ordering::Relaxed),
        sample_duration_s: shared.sample_ns.load(Ordering::Relaxed) as f64 * 1e-9,
        scrapes: shared.scrapes.load(Ordering::Relaxed),
        scrape_duration_s: shared.scrape_ns.load(Ordering::Relaxed) as f64 * 1e-9,
        rejected_requests: shared.rejected.load(Ordering::Relaxed),
    };
    let families = prometheus::families(&snap.sample, &snap.model, &snap.totals, export, Some(&stats));
    let body = encode::encode(&families, format);
    shared.scrapes.fetch_add(1, Ordering::Relaxed);
    shared.scrape_ns.store(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    text(StatusCode::OK, format.content_type(), body)
}

fn reject(shared: &Shared, status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    shared.rejected.fetch_add(1, Ordering::Relaxed);
    text(status, "text/plain; charset=utf-8", body.into())
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// Starts the sampling thread: it loads eBPF (unless --no-bpf), then samples every interval,
/// on fixed deadlines, publishing each Sample with its Model. It stops when the returned sender
/// is dropped.
fn spawn_sampler(opts: &ServeOptions, shared: Arc<Shared>) -> anyhow::Result<std_mpsc::Sender<()>> {
    let (stop_tx, stop) = std_mpsc::channel::<()>();
    let (bpf, interval, export) = (opts.bpf, opts.interval, opts.export);
    thread::Builder::new()
        .name("ioscope-sampler".into())
        .spawn(move || {
            // Paths of files found by scanning every process's fds and maps (when the kernel's
            // own names have none) are for per-file series only: without --top-files those
            // scans (up to 2 % of a core on a machine creating files) would be wasted.
            let bpf_options = BpfOptions { path_fallbacks: export.top_files > 0, ..BpfOptions::from_env() };
            let collector = if bpf {
                BpfCollector::start_with(&bpf_options)
            } else {
                BpfCollector::disabled("--no-bpf was given")
            };
            match (&collector.status().enabled, &collector.status().reason) {
                (true, None) => eprintln!("ioscope serve: eBPF on"),
                (true, Some(r)) => eprintln!("ioscope serve: eBPF partly on: {r}"),
                (false, r) => eprintln!(
                    "ioscope serve: eBPF off ({}); serving the procfs figures only \
                     (ioscope_bpf_status_info says why)",
                    r.as_deref().unwrap_or("unknown reason")
                ),
            }
            let mut sampler = Sampler::new(SystemRoot::live(), collector);
            if export.top_processes == 0 {
                sampler = sampler.without_processes();
            }
            let mut stream = Stream::new();
            let mut totals = Totals::default();
            let mut clock = Clock::new(Instant::now(), interval);
            loop {
                let t0 = Instant::now();
                let model = stream.advance(sampler.sample());
                let sample = stream.latest().expect("just folded in").clone();
                totals.observe(&model);
                let snap = Arc::new(Snapshot { sample, model, totals: totals.clone() });
                *shared.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(snap);
                shared.sample_ns.store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                shared.samples.fetch_add(1, Ordering::Relaxed);
                // The next deadline still ahead (a slow sample skips deadlines, never bunches).
                let deadline = clock.next(Instant::now());
                shared.skipped.store(clock.skipped(), Ordering::Relaxed);
                match stop.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Err(std_mpsc::RecvTimeoutError::Timeout) => clock.tick(),
                    _ => return,
                }
            }
        })
        .context("starting the sampling thread")?;
    Ok(stop_tx)
}
