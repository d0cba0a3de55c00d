//! The block probes' part of the text frame (`--once`, `--batch`), from the hand-built block model.

use crate::block_box;
use crate::busy_box;

use ioscope::output::text::format_frame_at;

#[test]
fn frame_lists_block_figures_the_mismatch_and_the_submitters() {
    let f = format_frame_at(&block_box::busy_with_block(), "2026-11-22 12:34:56");
    let line =
        |start: &str| f.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("{start}: {f}"));
    // vda: 4,700 writes/s of 27 KiB, device p99 and queue from the histograms, depth avg 58.7.
    let vda = line("vda          ");
    let vda_bpf = f.lines().rfind(|l| l.starts_with("vda ")).unwrap();
    // w/s in the TUI's form (4700), not iostat's two decimals.
    assert_eq!(vda.split_whitespace().nth(2), Some("4700"), "{vda}");
    assert!(vda_bpf.contains("27.0K") && vda_bpf.contains("58.7") && vda_bpf.contains("agree"), "{vda_bpf}");
    // loop0: eBPF 19.1 MiB vs diskstats 26.2 MiB.
    let loop0 = f.lines().rfind(|l| l.starts_with("loop0 ")).unwrap();
    assert!(loop0.contains("MISMATCH 27.3% apart"), "{loop0}");
    // Submitters, busiest first: fio, then the dd that exited, the flusher as writeback.
    let subs: Vec<&str> = f.lines().skip_while(|l| !l.contains("SUBMITTER")).skip(1).collect();
    assert!(subs[0].contains("fio") && subs[0].contains("55.4M/s"), "{}", subs[0]);
    assert!(subs.iter().any(|l| l.contains("dd (exited)") && l.contains("loop0")), "{subs:?}");
    assert!(subs.iter().any(|l| l.contains("kworker/u4:1") && l.contains("writeback")), "{subs:?}");
}

#[test]
fn frame_without_block_probes_has_no_block_section() {
    let f = format_frame_at(&busy_box::no_psi_no_bpf(), "2026-11-22 12:34:56");
    assert!(!f.contains("SUBMITTER") && !f.contains("queue_ms"), "{f}");
}
