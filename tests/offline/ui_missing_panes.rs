//! A pane the kernel cannot feed says what is missing and why (`bpf.panes`, src/model/panes.rs)
//! instead of a "-" or a 0: the page cache's hit rate and the readahead view, as on Debian's 6.1
//! (no `filemap:mm_filemap_get_pages`, no `readahead:*`).

use crate::cache_box;
use crate::common;

use std::time::Duration;

use ioscope::model::{panes, Model};
use ioscope::sample::BpfStatus;
use ioscope::ui::{Body, Pane, UiState};

fn screen(model: &Model, state: &UiState) -> String {
    common::ui::screen(model, state, 160, 48)
}

/// The cache box's model on a kernel without get_pages and readahead tracepoints.
fn on_6_1() -> Model {
    let mut m = cache_box::with_cache();
    let prog = common::ui::program;
    let gone = Some("tracepoint is not available on this kernel");
    let status = BpfStatus {
        enabled: true,
        reason: Some("some eBPF programs are off".into()),
        programs: vec![
            prog("filemap:mm_filemap_get_pages", gone),
            prog("filemap:mm_filemap_add_to_page_cache", None),
            prog("readahead:page_cache_ra_order", gone),
        ]
        .into(),
    };
    m.bpf.enabled = true;
    m.bpf.panes = panes::compute(&status);
    m.readahead = None;
    m
}

#[test]
fn the_hit_rate_names_the_missing_tracepoint() {
    let mut s = UiState::new(Duration::from_secs(1), true);
    s.views.stack.focus = Pane::PageCache;
    let text = screen(&on_6_1(), &s);
    assert!(text.contains("hit n/a, needs filemap:mm_filemap_get_pages (6.12+)"), "{text}");
}

#[test]
fn the_readahead_view_says_why_it_is_empty() {
    let mut s = UiState::new(Duration::from_secs(1), true);
    s.open(Body::Readahead);
    let text = screen(&on_6_1(), &s);
    assert!(
        text.contains("no readahead on this kernel: needs tracepoint readahead:page_cache_ra_order"),
        "{text}"
    );
    assert!(text.contains("(kernel 6.18+)"), "{text}");
}
