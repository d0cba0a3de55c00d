//! The two header lines: identity and state of the monitor, then pressure stall information (PSI),
//! the first thing to look at when "the machine is slow".

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::model::{Model, PsiView};
use crate::ui::format;
use crate::ui::line_input::LineInput;
use crate::ui::theme::{Level, Theme};

/// Lines the header takes.
pub const HEIGHT: u16 = 2;

/// PSI "some" avg10 from which the figure is highlighted: a few percent of stalled time is already
/// felt by users; a fifth of the time is severe.
const PSI_WARN: f64 = 5.0;
const PSI_CRIT: f64 = 20.0;

/// What the header shows while the live session is being recorded (`R`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordingIndicator {
    pub path: String,
    pub frames: u64,
    pub bytes: u64,
}

/// The session's state the header shows, beside the model.
pub struct Status<'a> {
    pub theme: Theme,
    /// The sampling interval asked for.
    pub interval: std::time::Duration,
    /// Local time zone offset for the clock, seconds east of UTC.
    pub utc_offset_s: i64,
    pub filter: &'a LineInput,
    pub editing_filter: bool,
    pub paused: bool,
    pub recording: Option<&'a RecordingIndicator>,
    /// A one-line notice (e.g. why recording could not start).
    pub message: Option<&'a str>,
}

pub fn render(frame: &mut Frame, area: Rect, model: &Model, status: &Status) {
    let theme = status.theme;
    let [line1, line2] = Layout::vertical([Constraint::Length(1); 2]).areas(area);
    render_identity(frame, line1, model, status, theme);
    render_psi(frame, line2, model, status, theme);
}

/// Shown before the first sample arrives, so the screen is never blank at start.
pub fn render_starting(frame: &mut Frame, area: Rect, theme: Theme) {
    let line = Line::from(vec![
        Span::styled(" ioscope ", theme.title(false)),
        Span::raw(" taking the first sample…"),
    ]);
    frame.render_widget(Paragraph::new(line), area);
}

fn render_identity(frame: &mut Frame, area: Rect, model: &Model, state: &Status, theme: Theme) {
    let h = &model.header;
    let sep = if area.width >= 100 { "  " } else { " " };
    let interval = if model.interval_s > 0.0 {
        format!("every {}", format::interval(state.interval))
    } else {
        format!("every {} (rates pending)", format::interval(state.interval))
    };
    let hostname = match model.unavailable(crate::sample::Unavailable::HOST) {
        Some(why) => format!("host unavailable ({why})"),
        None => h.hostname.clone(),
    };
    let host = Span::raw(format!(" {}{sep}", format::name(&hostname, 24)));
    let kernel = Span::styled(format!("{}{sep}", format::name(&h.kernel, 24)), theme.dim());
    let rest = [
        Span::raw(format!("up {}{sep}", format::uptime(h.uptime_s))),
        Span::raw(format!("{interval}{sep}")),
        Span::raw(format!("{}{sep}", format::clock(h.wall_unix_ms, state.utc_offset_s))),
    ];
    let help = " ? help ";
    let title = Span::styled(" ioscope ", theme.title(false));
    let fixed = title.width() + host.width() + rest.iter().map(|s| s.width()).sum::<usize>() + help.len();
    let bpf_full = bpf_text(model).chars().count();
    // The kernel version is the first thing to go when the eBPF status would not fit beside it.
    let with_kernel = fixed + kernel.width() + bpf_full.min(24) <= area.width as usize;
    let room = (area.width as usize).saturating_sub(fixed + if with_kernel { kernel.width() } else { 0 });
    let mut spans = vec![title, host];
    if with_kernel {
        spans.push(kernel);
    }
    spans.extend(rest);
    spans.push(bpf_span(model, room, theme));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
    frame.render_widget(Paragraph::new(Line::from(Span::styled(help, theme.dim())).right_aligned()), area);
}

fn bpf_text(model: &Model) -> String {
    match (model.bpf.enabled, &model.bpf.reason) {
        (true, None) => "eBPF on".to_string(),
        (true, Some(why)) => format!("eBPF partial: {}", format::text(why)),
        (false, Some(why)) => format!("eBPF off: {}", format::text(why)),
        (false, None) => "eBPF off".to_string(),
    }
}

/// "eBPF on", or "eBPF off: <why>" cut to the room left (the help overlay shows the whole reason).
fn bpf_span(model: &Model, room: usize, theme: Theme) -> Span<'static> {
    let style =
        if model.bpf.enabled && model.bpf.reason.is_none() { theme.good() } else { theme.level(Level::Warn) };
    Span::styled(format::shorten(&bpf_text(model), room.max(8)), style)
}

fn render_psi(frame: &mut Frame, area: Rect, model: &Model, state: &Status, theme: Theme) {
    // A notice takes the room of the wide PSI form (the figures stay, compact).
    let wide = area.width >= 110 && state.message.is_none();
    let mut spans = vec![Span::styled(" PSI ", theme.dim())];
    if let Some(why) = model.unavailable(crate::sample::Unavailable::PSI) {
        spans.push(Span::styled(format!("unavailable ({why}: raise ulimit -n)"), theme.level(Level::Warn)));
    } else if model.psi.io.is_none() && model.psi.memory.is_none() {
        spans.push(Span::styled("n/a (no /proc/pressure: kernel without PSI or booted psi=0)", theme.dim()));
    } else {
        psi_spans(&mut spans, "io", model.psi.io.as_ref(), model.interval_s, wide, theme);
        spans.push(Span::raw("   "));
        psi_spans(
            &mut spans,
            if wide { "memory" } else { "mem" },
            model.psi.memory.as_ref(),
            model.interval_s,
            wide,
            theme,
        );
    }
    let psi = Line::from(spans);
    let psi_width = psi.width();
    frame.render_widget(Paragraph::new(psi), area);

    let mut flags = Vec::new();
    if state.editing_filter {
        flags.push(Span::styled(format!(" filter: {}", state.filter.with_cursor(true)), theme.banner()));
        flags.push(Span::raw(" "));
    } else if !state.filter.is_empty() {
        flags.push(Span::styled(format!(" filter: {} ", format::shorten(state.filter, 16)), theme.banner()));
        flags.push(Span::raw(" "));
    }
    if state.paused {
        flags.push(Span::styled(" PAUSED ", theme.banner()));
        flags.push(Span::raw(" "));
    }
    if let Some(rec) = state.recording {
        let size = format::human_bytes(rec.bytes as f64);
        // The file name only where it does not hide the PSI figures.
        let text = if area.width >= 140 {
            format!(" ● REC {} {} samples {size} ", format::name(&rec.path, 32), rec.frames)
        } else {
            format!(" ● REC {} {size} ", rec.frames)
        };
        flags.push(Span::styled(text, theme.level(Level::Critical)));
        flags.push(Span::raw(" "));
    }
    if let Some(msg) = state.message {
        // Right of the PSI figures, never over them: cut in the middle (a path's end stays) to the
        // room they leave, at least 24 columns.
        let used: usize = flags.iter().map(Span::width).sum();
        let room = (area.width as usize).saturating_sub(psi_width + used + 4).max(24);
        let text = format::shorten_middle(&format::text(msg), room.min(160));
        flags.push(Span::styled(format!(" {text} "), theme.banner()));
        flags.push(Span::raw(" "));
    }
    if !flags.is_empty() {
        frame.render_widget(Paragraph::new(Line::from(flags).right_aligned()), area);
    }
}

/// "io some 42.1% full 38.0% stall 412/389ms" (wide) or "io 42.1/38.0% 412/389ms" (compact): the
/// avg10 percentages, then the stall milliseconds within this interval (some/full).
fn psi_spans(
    spans: &mut Vec<Span<'static>>,
    name: &str,
    view: Option<&PsiView>,
    interval_s: f64,
    wide: bool,
    theme: Theme,
) {
    let Some(v) = view else {
        spans.push(Span::raw(format!("{name} ")));
        spans.push(Span::styled("n/a", theme.dim()));
        return;
    };
    let worst = v.some_avg10.max(v.full_avg10.unwrap_or(0.0));
    let style = theme.level(Level::of(worst, PSI_WARN, PSI_CRIT));
    let pct = |x: f64| format!("{x:.1}%");
    let avgs = match (wide, v.full_avg10) {
        (true, Some(full)) => format!("some {} full {}", pct(v.some_avg10), pct(full)),
        (true, None) => format!("some {}", pct(v.some_avg10)),
        (false, Some(full)) => format!("{:.1}/{}", v.some_avg10, pct(full)),
        (false, None) => pct(v.some_avg10),
    };
    spans.push(Span::raw(format!("{name} ")));
    spans.push(Span::styled(avgs, style));
    // The first model has no interval: stall time per interval is not known yet.
    if interval_s > 0.0 {
        let stall = match v.full_stall_ms {
            Some(full) => format!("{:.0}/{:.0}ms", v.some_stall_ms, full),
            None => format!("{:.0}ms", v.some_stall_ms),
        };
        let stall = if wide { format!(" stall {stall}") } else { format!(" {stall}") };
        spans.push(Span::styled(stall, style));
    }
}
