//! The JSON-lines writer of `--batch --json`: the Model's parts that stay the same from one report
//! to the next (the programs' status, the panes' state and the maps' memory: ~11 of a quiet
//! report's ~22 KB, a third of its serialising time at `--interval 0.1`) are serialised once and
//! written again as they are while the same `Arc` (or an equal value) comes back. The output is
//! the same bytes as `serde_json::to_writer(model)`'s (tested below).

use std::io::Write;
use std::sync::Arc;

use serde::ser::{Error as _, SerializeStruct};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::model::{BpfModel, Model};
use crate::sample::{BpfMapMemory, BpfProgramStatus};

/// The last JSON of each part, kept by the writer from one report to the next.
#[derive(Default)]
pub struct JsonLines {
    programs: Memo<BpfProgramStatus>,
    panes: Memo<crate::model::panes::PaneStatus>,
    maps: Memo<BpfMapMemory>,
}

type Memo<T> = Option<(Arc<Vec<T>>, Box<RawValue>)>;

impl JsonLines {
    /// One report: the Model's compact JSON (no newline).
    pub fn write<W: Write>(&mut self, out: W, model: &Model) -> serde_json::Result<()> {
        let programs = remember(&mut self.programs, &model.bpf.programs)?;
        let panes = remember(&mut self.panes, &model.bpf.panes)?;
        let maps = remember(&mut self.maps, &model.bpf.maps)?;
        let bpf = Bpf { bpf: &model.bpf, programs, panes, maps };
        serde_json::to_writer(out, &Doc { m: model, bpf })
    }
}

/// The JSON of `v`: the memo's while it holds the same (or an equal) list, else made and kept.
fn remember<'a, T: Serialize + PartialEq>(
    memo: &'a mut Memo<T>,
    v: &Arc<Vec<T>>,
) -> serde_json::Result<&'a RawValue> {
    let hit = memo.as_ref().is_some_and(|(last, _)| Arc::ptr_eq(last, v) || last == v);
    if !hit {
        let json = RawValue::from_string(serde_json::to_string(&**v)?)?;
        *memo = Some((v.clone(), json));
    }
    match memo {
        Some((_, json)) => Ok(json),
        None => Err(serde_json::Error::custom("the memo was just filled")),
    }
}

/// The Model as its derived `Serialize` writes it, `bpf` with the remembered parts. Field for
/// field the derive's order: the test below fails when a field of the Model is left out here.
struct Doc<'a> {
    m: &'a Model,
    bpf: Bpf<'a>,
}

struct Bpf<'a> {
    bpf: &'a BpfModel,
    programs: &'a RawValue,
    panes: &'a RawValue,
    maps: &'a RawValue,
}

impl Serialize for Doc<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Active<'a>(&'a [crate::model::ProcessModel]);
        impl Serialize for Active<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                crate::model::processes::serialize_active(self.0, s)
            }
        }
        let m = self.m;
        let mut st = s.serialize_struct("Model", 19)?;
        st.serialize_field("interval_s", &m.interval_s)?;
        st.serialize_field("header", &m.header)?;
        st.serialize_field("memory", &m.memory)?;
        st.serialize_field("psi", &m.psi)?;
        st.serialize_field("devices", &m.devices)?;
        st.serialize_field("processes", &Active(&m.processes))?;
        st.serialize_field("processes_idle", &m.processes_idle)?;
        st.serialize_field("processes_unreadable", &m.processes_unreadable)?;
        st.serialize_field("bpf", &self.bpf)?;
        st.serialize_field("io_processes", &m.io_processes)?;
        st.serialize_field("cache", &m.cache)?;
        st.serialize_field("cache_processes", &m.cache_processes)?;
        st.serialize_field("files", &m.files)?;
        st.serialize_field("block_files", &m.block_files)?;
        st.serialize_field("readahead", &m.readahead)?;
        st.serialize_field("cgroups", &m.cgroups)?;
        st.serialize_field("syncs", &m.syncs)?;
        match &m.iowait {
            Some(w) => st.serialize_field("iowait", w)?,
            None => st.skip_field("iowait")?,
        }
        st.serialize_field("unavailable", &m.unavailable)?;
        st.end()
    }
}

impl Serialize for Bpf<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let b = self.bpf;
        let mut st = s.serialize_struct("BpfModel", 8)?;
        st.serialize_field("enabled", &b.enabled)?;
        st.serialize_field("reason", &b.reason)?;
        st.serialize_field("programs", self.programs)?;
        st.serialize_field("block_health", &b.block_health)?;
        st.serialize_field("panes", self.panes)?;
        st.serialize_field("maps_bytes", &b.maps_bytes)?;
        st.serialize_field("maps", self.maps)?;
        st.serialize_field("runs", &b.runs)?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{BpfStatus, Sample};

    fn model(programs: &Arc<Vec<BpfProgramStatus>>) -> Model {
        let status = BpfStatus { enabled: true, reason: None, programs: programs.clone() };
        let sample = Sample {
            bpf: crate::sample::BpfSample {
                status,
                maps: Arc::new(vec![BpfMapMemory {
                    map: "IO_PROCS".into(),
                    bytes: 4096,
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut m = Model::compute(Some(&sample), &sample, std::time::Duration::from_secs(1));
        m.processes = vec![
            crate::model::ProcessModel { pid: 1, read_bytes_s: 5.0, ..Default::default() },
            crate::model::ProcessModel { pid: 2, ..Default::default() },
        ];
        m
    }

    fn lines(w: &mut JsonLines, m: &Model) -> String {
        let mut out = Vec::new();
        w.write(&mut out, m).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The memoised report is byte for byte the plain one (every field of the Model, in its
    /// order), and follows a changed value.
    #[test]
    fn memoised_json_is_the_plain_json() {
        let one = |name: &str, run_cnt| BpfProgramStatus {
            program: name.into(),
            tracepoint: "block:block_io_start".into(),
            attached: true,
            run_cnt,
            ..Default::default()
        };
        let a = Arc::new(vec![one("a", 1), one("b\"quoted\"", 2)]);
        let plain = serde_json::to_string(&model(&a)).unwrap();
        let w = &mut JsonLines::default();
        assert_eq!(lines(w, &model(&a)), plain);
        assert_eq!(lines(w, &model(&a)), plain, "from the memo");
        assert!(plain.contains("\"panes\":[{") && plain.contains("\"IO_PROCS\""), "{plain}");
        assert!(plain.contains("\"processes\":[{\"pid\":1") && !plain.contains("\"pid\":2"), "{plain}");
        // Another Arc, equal: the memo; different: serialised again.
        let b = Arc::new((*a).clone());
        assert_eq!(lines(w, &model(&b)), plain);
        let c = Arc::new(vec![one("a", 5)]);
        let changed = lines(w, &model(&c));
        assert_eq!(changed, serde_json::to_string(&model(&c)).unwrap());
        assert!(changed.contains("\"run_cnt\":5"), "{changed}");
        // Every part the Model has, the optional ones present: `--batch --json` once left the
        // I/O waits out (the Model had them, the hand-listed fields did not).
        let mut full = model(&c);
        full.iowait = Some(Default::default());
        full.readahead = Some(Default::default());
        full.block_files = Some(Default::default());
        full.bpf.runs = vec![crate::model::bpf::ProgramRuns { program: "a".into(), ..Default::default() }];
        let plain = serde_json::to_string(&full).unwrap();
        assert!(plain.contains("\"iowait\":{"), "{plain}");
        assert_eq!(lines(w, &full), plain);
    }
}
