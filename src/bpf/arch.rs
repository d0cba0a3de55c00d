//! The architecture check before loading: the embedded eBPF object's kprobe programs read their
//! arguments from the kernel's `struct pt_regs`, whose layout is the architecture's (x86-64's `di`
//! at byte 112, arm64's `regs[0]` at 0). An object built for another architecture would load and
//! attach and read the wrong registers: zeros and nonsense, never an error. So ioscope refuses eBPF,
//! saying why, when the object (its `ioscope_arch` section, written by ebpf/probes) names another
//! architecture than ioscope's own, or when the running kernel is of another architecture than
//! ioscope (the binary runs under an emulator such as qemu-user: the kernel's BTF describes
//! `struct pt_regs` of its own architecture, which no emulator rewrites).

use super::kernel_btf::KernelBtf;

/// The section of the eBPF object that names the architecture it was built for (NUL-padded).
pub const SECTION: &str = "ioscope_arch";

/// The architecture ioscope is built for, as Rust names it (`x86_64`, `aarch64`).
pub const OURS: &str = std::env::consts::ARCH;

/// The architecture an eBPF object was built for: its [`SECTION`]'s text; None when the object is
/// not a 64-bit little-endian ELF file or has no such section.
pub fn object_arch(object: &[u8]) -> Option<String> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(object.get(o..o + 2)?.try_into().ok()?) as usize);
    let u32_at = |o: usize| Some(u32::from_le_bytes(object.get(o..o + 4)?.try_into().ok()?) as usize);
    let u64_at = |o: usize| Some(u64::from_le_bytes(object.get(o..o + 8)?.try_into().ok()?) as usize);
    if object.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (shoff, shentsize, shnum, shstrndx) = (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?, u16_at(0x3e)?);
    // A section header: name (u32) at 0, offset (u64) at 0x18, size (u64) at 0x20.
    let header = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    let names = u64_at(header(shstrndx)? + 0x18)?;
    for i in 0..shnum {
        let h = header(i)?;
        let name_at = names.checked_add(u32_at(h)?)?;
        let name = object.get(name_at..)?;
        let name = &name[..name.iter().position(|&b| b == 0)?];
        if name == SECTION.as_bytes() {
            let (offset, size) = (u64_at(h + 0x18)?, u64_at(h + 0x20)?);
            let bytes = object.get(offset..offset.checked_add(size)?)?;
            let text = &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())];
            return Some(String::from_utf8_lossy(text).into_owned());
        }
    }
    None
}

/// The running kernel's architecture, told by the members of its `struct pt_regs`; None when its
/// BTF says neither.
pub fn kernel_arch(btf: &KernelBtf) -> Option<&'static str> {
    if btf.field("pt_regs", "orig_ax").is_ok() {
        Some("x86_64")
    } else if btf.field("pt_regs", "orig_x0").is_ok() {
        Some("aarch64")
    } else {
        None
    }
}

/// Why the object cannot be used here, in one line that says how to fix it; None when it can.
pub fn refusal(object_arch: Option<&str>, kernel_arch: Option<&str>) -> Option<String> {
    if let Some(kernel) = kernel_arch.filter(|k| *k != OURS) {
        return Some(format!(
            "this is ioscope for {OURS}, but the kernel is {kernel} (run under an emulator such as \
             qemu-user?): eBPF needs the native binary, ioscope-{kernel} (`uname -m` outside the \
             emulator names it)"
        ));
    }
    match object_arch {
        Some(object) if object == OURS => None,
        Some(object) => Some(format!(
            "the embedded eBPF object is built for {object}, but this ioscope for {OURS}: its kprobes \
             would read the wrong registers; rebuild with `cargo xtask ebpf` (or use `cargo xtask dist`)"
        )),
        None => Some(format!(
            "the embedded eBPF object names no architecture (no `{SECTION}` section): rebuild it with \
             `cargo xtask ebpf`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asset(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/assets/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    /// Each committed object names the architecture `cargo xtask ebpf` built it for, and the
    /// embedded one is this build's.
    #[test]
    fn objects_name_their_architecture() {
        assert_eq!(object_arch(&asset("ioscope.bpf.o")).as_deref(), Some("x86_64"));
        assert_eq!(object_arch(&asset("ioscope-aarch64.bpf.o")).as_deref(), Some("aarch64"));
        assert_eq!(object_arch(super::super::object::OBJECT).as_deref(), Some(OURS));
        assert_eq!(refusal(object_arch(super::super::object::OBJECT).as_deref(), Some(OURS)), None);
        assert_eq!(object_arch(b"\x7fELF\x02\x01"), None);
        assert_eq!(object_arch(b"not an object"), None);
    }

    #[test]
    fn another_architecture_is_refused_saying_which_and_what_to_do() {
        let other = if OURS == "x86_64" { "aarch64" } else { "x86_64" };
        let emulated = refusal(Some(OURS), Some(other)).unwrap();
        assert!(emulated.contains(&format!("the kernel is {other}")), "{emulated}");
        assert!(
            emulated.contains(&format!("ioscope-{other}")) && emulated.contains("qemu-user"),
            "{emulated}"
        );
        let foreign = refusal(Some(other), Some(OURS)).unwrap();
        assert!(foreign.contains(&format!("built for {other}")) && foreign.contains("cargo xtask ebpf"));
        // A kernel whose BTF says neither: only the object is judged.
        assert_eq!(refusal(Some(OURS), None), None);
        assert!(refusal(None, None).unwrap().contains("names no architecture"));
        for line in [emulated, foreign] {
            assert!(!line.contains('\n'));
        }
    }

    /// This machine's kernel is the architecture ioscope runs on (the test runs natively).
    #[test]
    fn the_kernel_btf_names_this_architecture() {
        let Ok(btf) = KernelBtf::load() else { return };
        assert_eq!(kernel_arch(&btf), Some(OURS));
    }
}
