//! The derived view of the machine: a pure function of (previous sample, current sample, elapsed).
//!
//! Nothing here reads the system: the Model is computed the same way live, on replay, and in tests
//! from fixtures. Its serde form *is* the `--json` output, so field names are a public, documented
//! interface (src/model/README.md, "The document", and the per-pane key tables): rename nothing without a compatibility note.

use serde::Serialize;
use std::time::Duration;

use crate::sample::Sample;

pub mod block;
pub mod block_health;
pub mod bpf;
pub mod cgroup_names;
pub mod cgroups;
pub mod compare;
pub mod counter;
pub mod devices;
pub mod files;
pub mod flatten;
pub mod io_processes;
pub mod iowait;
pub mod memory;
pub mod names;
pub mod page_cache;
pub mod panes;
pub mod processes;
pub mod psi;
pub mod readahead;
pub mod stream;
pub mod syncs;

pub use block_health::BlockHealthModel;
pub use bpf::BpfModel;
pub use devices::{BpfDeviceRates, DeviceModel};
pub use io_processes::IoProcessModel;
pub use memory::{MemoryModel, VmRates};
pub use processes::ProcessModel;
pub use psi::{PsiModel, PsiView};
pub use stream::{Carried, Stream};

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Model {
    /// Seconds between the two samples this model was computed from (0 for the first sample).
    pub interval_s: f64,
    pub header: HeaderModel,
    pub memory: MemoryModel,
    pub psi: PsiModel,
    pub devices: Vec<DeviceModel>,
    /// Every process, by pid. JSON lists only those with I/O in the interval (as the text report
    /// does): a quiet machine's hundreds of zero rows were most of each report.
    #[serde(serialize_with = "processes::serialize_active")]
    pub processes: Vec<ProcessModel>,
    /// Processes without I/O in the interval (left out of JSON's `processes[]`), and how many of
    /// all had an unreadable /proc/PID/io (another user's, without root).
    pub processes_idle: usize,
    pub processes_unreadable: usize,
    pub bpf: BpfModel,
    /// Disk I/O per submitting process and disk, from the block probes (empty without eBPF).
    pub io_processes: Vec<IoProcessModel>,
    /// The page cache from the eBPF probes (system line); null without them.
    pub cache: Option<page_cache::PageCacheModel>,
    /// Per-process page-cache figures for the interval (processes with activity, exited ones too).
    pub cache_processes: Vec<page_cache::PageCacheProcessModel>,
    /// Per-file disk I/O in the interval (src/model/README.md, "Files"), the most disk bytes first.
    pub files: Vec<files::FileModel>,
    /// How much of the block requests the files' `block_*` figures sample; null without the
    /// request ring.
    pub block_files: Option<files::BlockFilesModel>,
    /// Readahead per device and file (None without the readahead probes).
    pub readahead: Option<readahead::ReadaheadModel>,
    /// Disk I/O, page cache and pressure per cgroup v2 (src/model/cgroups.rs); empty without eBPF.
    pub cgroups: Vec<cgroups::CgroupModel>,
    /// Sync calls (fsync and friends) per process, call and file (src/model/syncs.rs); empty
    /// without their probes.
    pub syncs: Vec<syncs::SyncModel>,
    /// I/O wait per process, thread and cgroup, by cause (src/model/iowait.rs); absent without
    /// its probes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iowait: Option<iowait::IowaitModel>,
    /// The parts of the sample that could not be read although the kernel has them (out of file
    /// descriptors): their figures here are empty, not measured (src/model/README.md).
    pub unavailable: Vec<crate::sample::Unavailable>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HeaderModel {
    pub hostname: String,
    pub kernel: String,
    pub uptime_s: f64,
    pub wall_unix_ms: u64,
}

impl Model {
    /// Derives the model. `prev` is None for the very first sample: gauges are shown, rates are 0.
    /// `elapsed` is normally `cur.mono_ns - prev.mono_ns`; a zero elapsed yields zero rates.
    pub fn compute(prev: Option<&Sample>, cur: &Sample, elapsed: Duration) -> Model {
        Model::compute_carrying(prev, cur, elapsed, &mut Carried::default())
    }

    /// [`Model::compute`], reusing parts of the last Model whose inputs did not change (what
    /// `carried` holds; see [`Carried`]). The result is the same as [`Model::compute`]'s.
    pub fn compute_carrying(
        prev: Option<&Sample>,
        cur: &Sample,
        elapsed: Duration,
        carried: &mut Carried,
    ) -> Model {
        let secs = elapsed.as_secs_f64();
        let io_processes = io_processes::compute(prev, cur, secs);
        let cache_processes = page_cache::processes(prev, cur, secs);
        let iowait = iowait::compute(prev, cur, secs);
        let cgroups = cgroups::compute(prev, cur, secs, &io_processes, &cache_processes, iowait.as_ref());
        let processes = processes::compute(prev, cur, secs);
        Model {
            interval_s: if prev.is_some() { secs } else { 0.0 },
            header: HeaderModel {
                hostname: cur.host.hostname.clone(),
                kernel: cur.host.kernel.clone(),
                uptime_s: cur.host.uptime_s,
                wall_unix_ms: cur.wall_unix_ms,
            },
            memory: memory::compute(prev, cur, secs),
            psi: psi::compute(prev, cur, secs),
            devices: devices::compute(prev, cur, secs),
            processes_idle: processes.iter().filter(|p| !p.active()).count(),
            processes_unreadable: processes.iter().filter(|p| !p.io_readable).count(),
            processes,
            bpf: BpfModel {
                enabled: cur.bpf.status.enabled,
                reason: cur.bpf.status.reason.clone(),
                programs: cur.bpf.status.programs.clone(),
                block_health: block_health::compute(prev, cur, secs),
                panes: panes::compute_reusing(&cur.bpf.status, &mut carried.panes),
                maps_bytes: cur.bpf.maps.iter().map(|m| m.bytes).sum(),
                maps: cur.bpf.maps.clone(),
                runs: bpf::runs(prev, cur, secs),
            },
            io_processes,
            cache: page_cache::compute(prev, cur, secs),
            cache_processes,
            files: files::compute(prev, cur, secs),
            block_files: files::block_files(prev, cur),
            readahead: readahead::compute_reusing(prev, cur, secs, &mut carried.readahead),
            cgroups,
            syncs: syncs::compute(prev, cur, secs),
            iowait,
            unavailable: cur.unavailable.clone(),
        }
    }

    /// Why `part` ([`crate::sample::Unavailable`]'s constants) could not be read, if it could not.
    pub fn unavailable(&self, part: &str) -> Option<&str> {
        self.unavailable.iter().find(|u| u.part == part).map(|u| u.reason.as_str())
    }

    /// Why the dirty thresholds could not be computed, if one of their inputs could not be read.
    pub fn dirty_unavailable(&self) -> Option<&str> {
        crate::sample::Unavailable::DIRTY_INPUTS.iter().find_map(|p| self.unavailable(p))
    }

    /// The model between two consecutive samples, with elapsed taken from their monotonic clocks.
    pub fn between(prev: &Sample, cur: &Sample) -> Model {
        let elapsed = Duration::from_nanos(cur.mono_ns.saturating_sub(prev.mono_ns));
        Model::compute(Some(prev), cur, elapsed)
    }
}

/// A Model's eBPF side: what [`files::available`] reads, given the whole Model or only that side.
impl AsRef<BpfModel> for Model {
    fn as_ref(&self) -> &BpfModel {
        &self.bpf
    }
}
