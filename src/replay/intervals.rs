//! A recording's Models, one per interval between consecutive samples within a time range, made
//! by one [`Stream`]: what every replay output (and compare) reads.

use std::time::Duration;

use crate::model::{Model, Stream};
use crate::record::Recording;
use crate::sample::Sample;

/// The models between consecutive samples, for the intervals that lie within [from, to] (offsets
/// from the first sample's monotonic clock).
pub fn models<'a>(
    rec: &'a mut Recording,
    from: Option<Duration>,
    to: Option<Duration>,
) -> impl Iterator<Item = anyhow::Result<Model>> + 'a {
    intervals(rec, from, to).map(|r| r.map(|(_, model)| model))
}

/// [`models`], each with the interval's later sample.
pub fn intervals<'a>(
    rec: &'a mut Recording,
    from: Option<Duration>,
    to: Option<Duration>,
) -> impl Iterator<Item = anyhow::Result<(Sample, Model)>> + 'a {
    let mut start_ns: Option<u64> = None;
    // The stream's previous sample and its offset.
    let mut stream = Stream::new();
    let mut prev_offset: Option<Duration> = None;
    let from = from.unwrap_or_default();
    rec.samples().filter_map(move |s| {
        let s = match s {
            Ok(s) => std::sync::Arc::new(s),
            Err(e) => return Some(Err(e)),
        };
        let t0 = *start_ns.get_or_insert(s.mono_ns);
        let offset = Duration::from_nanos(s.mono_ns.saturating_sub(t0));
        let wanted = prev_offset.is_some_and(|p| p >= from) && to.is_none_or(|to| offset <= to);
        prev_offset = Some(offset);
        if wanted {
            let model = stream.advance(s.clone());
            Some(Ok((Sample::clone(&s), model)))
        } else {
            // Outside the range: no Model, the stream only moves on.
            stream.restart(Some(s));
            None
        }
    })
}
