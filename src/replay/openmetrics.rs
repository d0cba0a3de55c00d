//! `ioscope replay FILE --openmetrics`: the recording as one OpenMetrics exposition with a
//! timestamp on every point, the input `promtool tsdb create-blocks-from openmetrics` takes to
//! backfill a recorded incident into Prometheus. The metrics are `ioscope serve`'s
//! (src/output/prometheus), minus the exporter's own.
//!
//! OpenMetrics wants each family's points together and each series' points in time order, so
//! the points are gathered per family and per series (a histogram's buckets, sum and count
//! together) before anything is written; memory grows with the recording's series × samples.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use crate::output::prometheus::encode::{write_header, write_point, Family, Format};
use crate::output::prometheus::{families, ExportOptions, Totals};
use crate::record::Recording;

/// One family's header and its series, in the order first seen.
struct Gathered {
    header: Family,
    series: Vec<String>,
    index: HashMap<String, usize>,
}

pub fn write<W: Write>(
    mut rec: Recording,
    from: Option<Duration>,
    to: Option<Duration>,
    mut out: W,
) -> anyhow::Result<()> {
    let mut order: Vec<Gathered> = Vec::new();
    let mut by_name: HashMap<&'static str, usize> = HashMap::new();
    let mut totals = Totals::default();
    let opts = ExportOptions::default();
    let mut points = 0usize;
    for interval in super::intervals::intervals(&mut rec, from, to) {
        let (sample, model) = interval?;
        totals.observe(&model);
        for fam in families(&sample, &model, &totals, &opts, None) {
            if fam.points.is_empty() {
                continue;
            }
            let i = *by_name.entry(fam.name).or_insert_with(|| {
                order.push(Gathered {
                    header: Family { points: Vec::new(), ..fam.clone() },
                    series: Vec::new(),
                    index: HashMap::new(),
                });
                order.len() - 1
            });
            let g = &mut order[i];
            for p in &fam.points {
                let key = series_key(p.suffix, &p.labels).to_string();
                let s = match g.index.get(&key) {
                    Some(&s) => s,
                    None => {
                        g.series.push(String::new());
                        g.index.insert(key, g.series.len() - 1);
                        g.series.len() - 1
                    }
                };
                write_point(&mut g.series[s], &fam, p, Format::OpenMetrics, Some(sample.wall_unix_ms));
                points += 1;
            }
        }
    }
    if points == 0 {
        anyhow::bail!("no samples in the chosen time range (a point needs two samples)");
    }
    let mut text = String::new();
    for g in &order {
        text.clear();
        write_header(&mut text, &g.header, Format::OpenMetrics);
        out.write_all(text.as_bytes())?;
        for s in &g.series {
            out.write_all(s.as_bytes())?;
        }
    }
    out.write_all(b"# EOF\n")?;
    out.flush()?;
    Ok(())
}

/// The series a point belongs to: its labels, without `le` for a histogram bucket (a
/// histogram's buckets, sum and count at one time are one OpenMetrics MetricPoint).
fn series_key<'a>(suffix: &str, labels: &'a str) -> &'a str {
    match (suffix, labels.rfind("le=\"")) {
        ("_bucket", Some(i)) => labels[..i].trim_end_matches(','),
        _ => labels,
    }
}

#[cfg(test)]
mod tests {
    use super::series_key;

    #[test]
    fn a_histograms_buckets_sum_and_count_are_one_series() {
        assert_eq!(series_key("_bucket", "device=\"sda\",le=\"0.001\""), "device=\"sda\"");
        assert_eq!(series_key("_bucket", "le=\"+Inf\""), "");
        assert_eq!(series_key("_sum", "device=\"sda\""), "device=\"sda\"");
    }
}
