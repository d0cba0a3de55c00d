//! Snapshots of the page-cache pane and the memory pane's throttling warning, from the hand-built
//! models of tests/fixtures/models/cache_box.rs. Review a changed snapshot by reading it; accept
//! with `INSTA_UPDATE=always cargo test --test ui_cache_snapshots`.

#[path = "fixtures/models/busy_box.rs"]
mod busy_box;
#[path = "fixtures/models/cache_box.rs"]
mod cache_box;

use std::time::Duration;

use ioscope::model::Model;
use ioscope::ui::{self, Pane, UiState};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn state() -> UiState {
    let mut s = UiState::new(Duration::from_secs(1), true);
    for m in busy_box::history_points() {
        s.history.push(&m);
    }
    s
}

fn screen(model: &Model, state: &UiState, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, model, state)).unwrap();
    t.backend().to_string()
}

#[test]
fn cache_focused_80x24() {
    let mut s = state();
    s.panes.focus = Pane::Cache;
    insta::assert_snapshot!(screen(&cache_box::with_cache(), &s, 80, 24));
}

#[test]
fn main_with_cache_160x48() {
    insta::assert_snapshot!(screen(&cache_box::with_cache(), &state(), 160, 48));
}

#[test]
fn cache_zoomed_sorted_by_hit_rate_160x48() {
    let mut s = state();
    s.panes.focus = Pane::Cache;
    s.panes.zoomed = true;
    s.handle_key(crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Char('s')));
    s.handle_key(crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Char('s')));
    insta::assert_snapshot!(screen(&cache_box::with_cache(), &s, 160, 48));
}

#[test]
fn calm_with_cross_check_mismatch_160x48() {
    let mut s = state();
    s.panes.focus = Pane::Cache;
    insta::assert_snapshot!(screen(&cache_box::calm_with_mismatch(), &s, 160, 48));
}

#[test]
fn cache_estimate_without_bpf_80x24() {
    let mut s = state();
    s.panes.focus = Pane::Cache;
    insta::assert_snapshot!(screen(&busy_box::no_psi_no_bpf(), &s, 80, 24));
}

#[test]
fn cache_filtered_80x24() {
    let mut s = state();
    s.panes.focus = Pane::Cache;
    s.filter = "postgres".into();
    s.cache.selection.select_index(1);
    insta::assert_snapshot!(screen(&cache_box::with_cache(), &s, 80, 24));
}
