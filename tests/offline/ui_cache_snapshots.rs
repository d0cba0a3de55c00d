//! Snapshots of the page-cache pane and the memory pane's throttling warning, from the hand-built
//! models of tests/fixtures/models/cache_box.rs. Review a changed snapshot by reading it; accept
//! with `INSTA_UPDATE=always cargo test --test offline ui_cache_snapshots::`.

use crate::busy_box;
use crate::cache_box;
use crate::common;
use common::ui::screen;

use ioscope::ui::{Pane, UiState};

fn state() -> UiState {
    common::ui::state(&busy_box::history_points())
}

#[test]
fn cache_focused_80x24() {
    let mut s = state();
    s.views.stack.focus = Pane::PageCache;
    insta::assert_snapshot!(screen(&cache_box::with_cache(), &s, 80, 24));
}

#[test]
fn main_with_cache_160x48() {
    insta::assert_snapshot!(screen(&cache_box::with_cache(), &state(), 160, 48));
}

#[test]
fn cache_zoomed_sorted_by_hit_rate_160x48() {
    let mut s = state();
    s.views.stack.focus = Pane::PageCache;
    s.views.stack.zoomed = true;
    s.handle_key(crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Char('s')));
    s.handle_key(crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Char('s')));
    insta::assert_snapshot!(screen(&cache_box::with_cache(), &s, 160, 48));
}

#[test]
fn calm_with_cross_check_mismatch_160x48() {
    let mut s = state();
    s.views.stack.focus = Pane::PageCache;
    insta::assert_snapshot!(screen(&cache_box::calm_with_mismatch(), &s, 160, 48));
}

#[test]
fn cache_estimate_without_bpf_80x24() {
    let mut s = state();
    s.views.stack.focus = Pane::PageCache;
    insta::assert_snapshot!(screen(&busy_box::no_psi_no_bpf(), &s, 80, 24));
}

#[test]
fn cache_filtered_80x24() {
    let mut s = state();
    s.views.stack.focus = Pane::PageCache;
    s.filter = "postgres".into();
    s.views.page_cache.selection.select_index(1);
    insta::assert_snapshot!(screen(&cache_box::with_cache(), &s, 80, 24));
}
