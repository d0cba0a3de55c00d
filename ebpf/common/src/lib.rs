//! Types shared by ioscope's kernel programs and its userspace. `#![no_std]`, `#[repr(C)]`.
#![no_std]
