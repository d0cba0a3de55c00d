//! Insert counters: for a hash map that userspace reads by scanning it (`BPF_MAP_LOOKUP_BATCH`
//! visits every bucket, 16,384 of them for FILE_IO, whether they hold entries or not), a per-CPU
//! array of one u64 that the programs increment *after* each insert into the map.
//!
//! Userspace reads the counter before it scans. A map its last scan left empty (drained, or every
//! entry it found removed) whose counter has not moved since is still empty: the scan is skipped.
//! Counting after the insert is what makes this safe: an entry whose count userspace has seen was
//! in the map before the scan that followed. A map that is only ever updated in place (not
//! inserted into) gains nothing from one.
//!
//! The maps with one: FILE_IO ([`crate::files::FILE_IO_INSERTS_MAP`]), SYNC_INFLIGHT
//! ([`crate::syncs::SYNC_INFLIGHT_INSERTS_MAP`]), RA_FILES
//! ([`crate::readahead::RA_FILES_INSERTS_MAP`]).
