//! The userspace half of the per-file programs: what turns the keys the kernel counts under
//! (device and inode, sectors, sync calls) into files with paths. [`files`] names a (device, inode)
//! pair, [`block_files`] maps a block request's sectors to the file or filesystem structure
//! ([`extents`]) it belongs to, [`syncs`] names the file a sync call was made on, and [`file_cache`]
//! reads how much of a file is in the page cache; [`mountinfo`] keeps the mount table, read again
//! only when it changed; [`handles`] opens an inode by its file handle to read its path; [`safe_open`] is
//! the one way any of them looks up or opens a path (no link followed, nothing but the regular file
//! the kernel reported). The [`super::BpfCollector`] owns them; they read
//! procfs and the filesystems, and import nothing above `bpf`.

pub mod block_files;
pub mod extents;
pub mod file_cache;
pub mod files;
pub mod handles;
pub mod mountinfo;
pub mod safe_open;
pub mod syncs;
pub mod types;
