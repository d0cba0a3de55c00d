//! The running kernel's own type information (BTF, /sys/kernel/btf/vmlinux): where the fields of
//! its structs are, what its enums' values are and which functions exist, read at run time for the
//! programs that use the kernel's structs directly (BTF tracepoints). Nothing of a kernel's layout
//! is compiled in.
//!
//! One read of the file, one pass over it, shared by everything that needs it: the struct-layout
//! lookups here, and the type ids aya needs to load BTF tracepoints (and fentry programs), which
//! get a reduced [`aya::Btf`] built from the same bytes ([`KernelBtf::aya`]). The general-purpose
//! parsers (aya's, btf-rs) turn all ~127,000 types into owned objects: 0.3–1.2 s and 15–40 MB on
//! this machine, most of ioscope's start-up and peak memory. Here a type is only an offset into
//! the bytes until a lookup reads it.
//!
//! Format: the kernel's Documentation/bpf/btf.rst. A type is a 12-byte header (name offset,
//! info = vlen | kind << 24 | kflag << 31, size or type) followed by kind-specific data.

use std::cell::OnceCell;

use anyhow::{anyhow, bail, Context, Result};

/// Where the running kernel keeps its BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// A kernel's BTF: its bytes, read once, and where each type starts.
pub struct KernelBtf {
    data: Vec<u8>,
    /// Byte range of the type section and of the string section in `data`.
    types: (usize, usize),
    strings: (usize, usize),
    /// Type id → offset of its header in `data` (id 0 is `void` and has none: index 0 unused).
    offsets: Vec<u32>,
    /// The same ids as aya sees them, built on first use: for BTF tracepoints, and with functions.
    aya: OnceCell<aya::Btf>,
    aya_functions: OnceCell<aya::Btf>,
}

/// A function parameter: its name and whether it is a pointer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub pointer: bool,
}

/// A struct member: its byte offset and its size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub offset: u32,
    pub size: u32,
}

// BTF kinds (include/uapi/linux/btf.h).
const INT: u32 = 1;
const PTR: u32 = 2;
const ARRAY: u32 = 3;
const STRUCT: u32 = 4;
const UNION: u32 = 5;
const ENUM: u32 = 6;
const TYPEDEF: u32 = 8;
const VOLATILE: u32 = 9;
const CONST: u32 = 10;
const RESTRICT: u32 = 11;
const FUNC: u32 = 12;
const FUNC_PROTO: u32 = 13;
const VAR: u32 = 14;
const DATASEC: u32 = 15;
const DECL_TAG: u32 = 17;
const TYPE_TAG: u32 = 18;
const ENUM64: u32 = 19;
const MAX_KIND: u32 = 19;

const MAGIC: u16 = 0xeb9f;
const HEADER_LEN: usize = 24;
/// How deep typedef/qualifier chains and anonymous members are followed.
const MAX_DEPTH: usize = 32;

/// One type's header, decoded.
#[derive(Clone, Copy, Debug)]
struct Header {
    name_off: u32,
    kind: u32,
    vlen: usize,
    kflag: bool,
    /// `size` for ints, enums, structs and unions; `type` for pointers, typedefs, qualifiers.
    size_or_type: u32,
    /// Offset of the kind-specific data that follows the header.
    rest: usize,
}

impl KernelBtf {
    pub fn load() -> Result<KernelBtf> {
        KernelBtf::from_file(VMLINUX_BTF)
    }

    pub fn from_file(path: &str) -> Result<KernelBtf> {
        let data = std::fs::read(path).with_context(|| format!("reading {path}"))?;
        KernelBtf::from_bytes(data).with_context(|| format!("reading {path}"))
    }

    /// Indexes the types of a BTF blob (native byte order, as the kernel writes it).
    pub fn from_bytes(data: Vec<u8>) -> Result<KernelBtf> {
        if data.len() < HEADER_LEN || u16::from_ne_bytes([data[0], data[1]]) != MAGIC {
            bail!("not BTF (bad magic)");
        }
        let word = |at: usize| u32::from_ne_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        let hdr_len = word(4);
        let section = |off: usize, len: usize| -> Result<(usize, usize)> {
            let start = hdr_len.checked_add(off).ok_or_else(|| anyhow!("bad header"))?;
            match start.checked_add(len) {
                Some(end) if end <= data.len() => Ok((start, end)),
                _ => bail!("a section runs past the end ({} bytes)", data.len()),
            }
        };
        let types = section(word(8), word(12))?;
        let strings = section(word(16), word(20))?;
        let mut btf = KernelBtf {
            data,
            types,
            strings,
            offsets: vec![0],
            aya: OnceCell::new(),
            aya_functions: OnceCell::new(),
        };
        let mut at = types.0;
        while at < types.1 {
            btf.offsets.push(at as u32);
            let h = btf.header_at(at)?;
            at = h.rest + btf.data_len(&h)?;
        }
        if at != types.1 {
            bail!("the last type runs past the type section");
        }
        Ok(btf)
    }

    /// `strukt.member` (a member of an anonymous struct or union inside it is found too). Bit
    /// fields are refused: they cannot be loaded by offset.
    pub fn field(&self, strukt: &str, member: &str) -> Result<Field> {
        let s = self.named_struct(strukt)?;
        let found = self.find_member(s, member, 0, 0)?;
        found.map(|(f, _)| f).ok_or_else(|| anyhow!("struct {strukt} has no member `{member}`"))
    }

    /// `strukt.a.b…`: a member of a member (a named struct or union inside the struct), as C's
    /// `offsetof(struct dentry, d_u.d_alias)`; anonymous members are looked into at each step.
    pub fn field_path(&self, strukt: &str, path: &[&str]) -> Result<Field> {
        let mut outer = self.named_struct(strukt)?;
        let mut base = 0;
        let mut found = None;
        for (i, member) in path.iter().enumerate() {
            let at = if i == 0 { strukt.to_string() } else { format!("{strukt}.{}", path[..i].join(".")) };
            let (field, ty) = self
                .find_member(outer, member, base, 0)?
                .ok_or_else(|| anyhow!("struct {at} has no member `{member}`"))?;
            if i + 1 < path.len() {
                outer = self.header(self.strip(ty)?)?;
                if !matches!(outer.kind, STRUCT | UNION) {
                    bail!("member `{member}` of struct {at} is not a struct or union");
                }
            }
            base = field.offset;
            found = Some(field);
        }
        found.ok_or_else(|| anyhow!("an empty member path in struct {strukt}"))
    }

    /// Where the current task's pid, tgid, comm and cgroup id lie (see
    /// [`ioscope_common::TaskLayout`]), each field checked for the size the programs load.
    pub fn task_layout(&self) -> Result<ioscope_common::TaskLayout> {
        Ok(ioscope_common::TaskLayout {
            pid: self.offset_sized("task_struct", "pid", 4)?,
            tgid: self.offset_sized("task_struct", "tgid", 4)?,
            comm: self.offset_sized("task_struct", "comm", 16)?,
            cgroups: self.offset_sized("task_struct", "cgroups", 8)?,
            css_set_dfl_cgrp: self.offset_sized("css_set", "dfl_cgrp", 8)?,
            cgroup_kn: self.offset_sized("cgroup", "kn", 8)?,
            kn_id: self.offset_sized("kernfs_node", "id", 8)?,
        })
    }

    /// The byte offset of `strukt.member`, which must be `size` bytes (what the program loads).
    pub fn offset_sized(&self, strukt: &str, member: &str, size: u32) -> Result<u32> {
        let f = self.field(strukt, member)?;
        if f.size != size {
            bail!("struct {strukt} member `{member}` is {} bytes, expected {size}", f.size);
        }
        Ok(f.offset)
    }

    /// A one-bit field `strukt.member` (a direct member, as `task_struct.in_iowait`): the byte
    /// holding it and the bit's mask in that byte (little-endian: bit offsets count from the least
    /// significant bit of the lowest byte on x86-64 and arm64).
    pub fn bit_field(&self, strukt: &str, member: &str) -> Result<(u32, u8)> {
        let s = self.named_struct(strukt)?;
        for i in 0..s.vlen {
            let at = s.rest + i * 12;
            if self.str_at(self.u32_at(at))? != member {
                continue;
            }
            let raw = self.u32_at(at + 8);
            let (bit_offset, bits) = if s.kflag { (raw & 0xff_ffff, raw >> 24) } else { (raw, 1) };
            if bits != 1 {
                bail!("struct {strukt} member `{member}` is not a one-bit field");
            }
            return Ok((bit_offset / 8, 1u8 << (bit_offset % 8)));
        }
        bail!("struct {strukt} has no member `{member}`")
    }

    /// The value of `name` in `enum enum_name`.
    pub fn enum_value(&self, enum_name: &str, name: &str) -> Result<u32> {
        let mut found_enum = false;
        for id in self.ids_named(enum_name, &[ENUM, ENUM64]) {
            found_enum = true;
            let h = self.header(id)?;
            let step = if h.kind == ENUM { 8 } else { 12 };
            for i in 0..h.vlen {
                let at = h.rest + i * step;
                if self.str_at(self.u32_at(at))? == name {
                    return Ok(self.u32_at(at + 4));
                }
            }
        }
        match found_enum {
            true => bail!("the kernel's BTF has no {name} in enum {enum_name}"),
            false => bail!("the kernel's BTF has no type {enum_name} (looking for {name})"),
        }
    }

    /// Whether the kernel has a function `name` that BTF describes (what fentry/fexit programs
    /// attach to; a function inlined everywhere or static without BTF is not there).
    pub fn has_function(&self, name: &str) -> bool {
        self.ids_named(name, &[FUNC]).next().is_some()
    }

    /// The parameters of kernel function `name` (a `FUNC` in the BTF: the kernel has it as a
    /// function of its own, not only inlined), in order. Err when the BTF has no such function.
    pub fn function_params(&self, name: &str) -> Result<Vec<Param>> {
        let id = self.ids_named(name, &[FUNC]).next().ok_or_else(|| anyhow!("not in the kernel's BTF"))?;
        let proto = self.header(self.header(id)?.size_or_type as usize)?;
        if proto.kind != FUNC_PROTO {
            bail!("its BTF type is not a function prototype");
        }
        (0..proto.vlen)
            .map(|i| {
                let at = proto.rest + i * 8;
                let ty = self.u32_at(at + 4) as usize;
                // Type 0 is void (a `...` parameter).
                let pointer = ty != 0 && self.header(self.strip(ty)?)?.kind == PTR;
                Ok(Param { name: self.str_at(self.u32_at(at))?.to_string(), pointer })
            })
            .collect()
    }

    /// How many arguments tracepoint `event` passes its BTF programs (its `TP_PROTO`): the
    /// parameters of the typedef `btf_trace_<event>`'s function prototype, less its first (`void
    /// *__data`).
    pub fn tracepoint_args(&self, event: &str) -> Result<u32> {
        let name = format!("btf_trace_{event}");
        let id = self
            .ids_named(&name, &[TYPEDEF])
            .next()
            .ok_or_else(|| anyhow!("no {name} in the kernel's BTF"))?;
        let ptr = self.header(self.header(id)?.size_or_type as usize)?;
        if ptr.kind != PTR {
            bail!("{name} is not a pointer to a function prototype");
        }
        let proto = self.header(self.strip(ptr.size_or_type as usize)?)?;
        if proto.kind != FUNC_PROTO || proto.vlen == 0 {
            bail!("{name} is not a pointer to a function prototype");
        }
        Ok(proto.vlen as u32 - 1)
    }

    /// The kernel's type ids as aya needs them to load BTF tracepoints (it finds the typedef
    /// `btf_trace_<event>` by name and loads with its id). Reduced: every type keeps its id, the
    /// `btf_trace_` typedefs keep their names, all else is a nameless pointer, and the types after
    /// the last such typedef are left out. aya holds 72 bytes per type: ~45,000 types here (3 MB)
    /// where the whole BTF would be ~127,000 (9 MB) and its full parse 15 MB. (aya's loader itself
    /// needs no kernel BTF: our object has no CO-RE relocations, see the test
    /// `object_needs_no_kernel_btf_to_load`.)
    pub fn aya(&self) -> &aya::Btf {
        self.aya.get_or_init(|| self.reduced_for_aya(false))
    }

    /// [`KernelBtf::aya`] with the functions too (their names, for fentry/fexit programs, which aya
    /// loads by the function's id): all the kernel's types, ~9 MB here, so built only when asked.
    pub fn aya_with_functions(&self) -> &aya::Btf {
        self.aya_functions.get_or_init(|| self.reduced_for_aya(true))
    }

    fn reduced_for_aya(&self, functions: bool) -> aya::Btf {
        let kept = |h: &Header| match h.kind {
            TYPEDEF => self.str_bytes(h.name_off).is_ok_and(|n| n.starts_with(b"btf_trace_")),
            FUNC => functions,
            _ => false,
        };
        let headers =
            || (1..self.offsets.len()).map(|id| self.header_at(self.offsets[id] as usize).expect("indexed"));
        let count = headers().enumerate().filter(|(_, h)| kept(h)).map(|(i, _)| i + 1).last().unwrap_or(0);
        let mut strings = vec![0u8];
        let mut types = Vec::with_capacity(count * 12);
        for h in headers().take(count) {
            let (name_off, info) = if kept(&h) {
                let off = strings.len() as u32;
                strings.extend_from_slice(self.str_bytes(h.name_off).unwrap_or_default());
                strings.push(0);
                // A function keeps its linkage (vlen); the type either points at is not needed.
                (off, (h.kind << 24) | (h.vlen as u32))
            } else {
                (0, PTR << 24)
            };
            for w in [name_off, info, 0] {
                types.extend_from_slice(&w.to_ne_bytes());
            }
        }
        let mut blob = Vec::with_capacity(HEADER_LEN + types.len() + strings.len());
        blob.extend_from_slice(&MAGIC.to_ne_bytes());
        blob.extend_from_slice(&[1, 0]); // version, flags
        for w in [HEADER_LEN as u32, 0, types.len() as u32, types.len() as u32, strings.len() as u32] {
            blob.extend_from_slice(&w.to_ne_bytes());
        }
        blob.extend_from_slice(&types);
        blob.extend_from_slice(&strings);
        aya::Btf::parse(&blob, aya::Endianness::default()).expect("a well-formed reduced BTF")
    }

    /// Ids of the types of one of `kinds` named `name`.
    fn ids_named<'a>(&'a self, name: &'a str, kinds: &'a [u32]) -> impl Iterator<Item = usize> + 'a {
        (1..self.offsets.len()).filter(move |&id| {
            let at = self.offsets[id] as usize;
            let kind = (self.u32_at(at + 4) >> 24) & 0x1f;
            kinds.contains(&kind) && self.str_bytes(self.u32_at(at)).is_ok_and(|n| n == name.as_bytes())
        })
    }

    fn named_struct(&self, name: &str) -> Result<Header> {
        for id in self.ids_named(name, &[STRUCT]) {
            let h = self.header(id)?;
            if h.vlen > 0 {
                return Ok(h);
            }
        }
        bail!("the kernel's BTF has no struct {name}")
    }

    /// `member` in the struct or union `s` at byte `base`, looking into anonymous members: where it
    /// lies and its type's id.
    fn find_member(
        &self,
        s: Header,
        member: &str,
        base: u32,
        depth: usize,
    ) -> Result<Option<(Field, usize)>> {
        if depth > MAX_DEPTH {
            bail!("anonymous members nested too deep");
        }
        for i in 0..s.vlen {
            let at = s.rest + i * 12;
            let name = self.str_at(self.u32_at(at))?;
            let ty = self.u32_at(at + 4) as usize;
            let raw = self.u32_at(at + 8);
            let (bit_offset, bitfield_size) = if s.kflag { (raw & 0xff_ffff, raw >> 24) } else { (raw, 0) };
            if name == member {
                if bitfield_size != 0 || bit_offset % 8 != 0 {
                    bail!("member `{member}` is a bit field");
                }
                return Ok(Some((Field { offset: base + bit_offset / 8, size: self.size_of(ty)? }, ty)));
            }
            if name.is_empty() {
                let inner = self.header(self.strip(ty)?)?;
                if matches!(inner.kind, STRUCT | UNION) {
                    if let Some(f) = self.find_member(inner, member, base + bit_offset / 8, depth + 1)? {
                        return Ok(Some(f));
                    }
                }
            }
        }
        Ok(None)
    }

    /// The id of `id` without typedefs and qualifiers.
    fn strip(&self, mut id: usize) -> Result<usize> {
        for _ in 0..MAX_DEPTH {
            let h = self.header(id)?;
            match h.kind {
                TYPEDEF | VOLATILE | CONST | RESTRICT | TYPE_TAG => id = h.size_or_type as usize,
                _ => return Ok(id),
            }
        }
        bail!("type chain too long")
    }

    fn size_of(&self, id: usize) -> Result<u32> {
        let id = self.strip(id)?;
        let h = self.header(id)?;
        Ok(match h.kind {
            INT | ENUM | ENUM64 | STRUCT | UNION => h.size_or_type,
            PTR => 8,
            ARRAY => {
                let (elem, n) = (self.u32_at(h.rest) as usize, self.u32_at(h.rest + 8));
                n * self.size_of(elem)?
            }
            other => bail!("unexpected member type (BTF kind {other})"),
        })
    }

    fn header(&self, id: usize) -> Result<Header> {
        let at = *self.offsets.get(id).filter(|_| id > 0).ok_or_else(|| anyhow!("no BTF type {id}"))?;
        self.header_at(at as usize)
    }

    fn header_at(&self, at: usize) -> Result<Header> {
        if at + 12 > self.types.1 {
            bail!("a type header runs past the type section");
        }
        let info = self.u32_at(at + 4);
        let kind = (info >> 24) & 0x1f;
        if kind == 0 || kind > MAX_KIND {
            bail!("unknown BTF kind {kind} at byte {at}");
        }
        Ok(Header {
            name_off: self.u32_at(at),
            kind,
            vlen: (info & 0xffff) as usize,
            kflag: info >> 31 != 0,
            size_or_type: self.u32_at(at + 8),
            rest: at + 12,
        })
    }

    /// The length of the data after a type's header.
    fn data_len(&self, h: &Header) -> Result<usize> {
        Ok(match h.kind {
            INT | VAR | DECL_TAG => 4,
            ARRAY => 12,
            STRUCT | UNION | DATASEC | ENUM64 => h.vlen * 12,
            ENUM | FUNC_PROTO => h.vlen * 8,
            _ => 0,
        })
    }

    fn u32_at(&self, at: usize) -> u32 {
        u32::from_ne_bytes(self.data[at..at + 4].try_into().unwrap())
    }

    fn str_bytes(&self, off: u32) -> Result<&[u8]> {
        let start = self.strings.0 + off as usize;
        if start >= self.strings.1 {
            bail!("string offset {off} past the string section");
        }
        let s = &self.data[start..self.strings.1];
        Ok(&s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())])
    }

    fn str_at(&self, off: u32) -> Result<&str> {
        std::str::from_utf8(self.str_bytes(off)?).map_err(|e| anyhow!("BTF string at {off}: {e}"))
    }
}

/// BTF blobs made by hand, for layouts this machine's kernel does not have (a struct of another
/// kernel release). Encoding: the kernel's Documentation/bpf/btf.rst.
#[cfg(test)]
pub mod synthetic {
    use super::{INT, PTR, STRUCT, UNION};

    /// Types are numbered from 1 in the order they are added.
    pub struct Builder {
        types: Vec<u8>,
        strings: Vec<u8>,
        next_id: u32,
    }

    /// A struct or union member: name ("" for an anonymous one), type id, byte offset.
    pub type Member<'a> = (&'a str, u32, u32);

    impl Default for Builder {
        fn default() -> Self {
            Builder { types: Vec::new(), strings: vec![0], next_id: 1 }
        }
    }

    impl Builder {
        fn string(&mut self, s: &str) -> u32 {
            if s.is_empty() {
                return 0;
            }
            let at = self.strings.len() as u32;
            self.strings.extend_from_slice(s.as_bytes());
            self.strings.push(0);
            at
        }

        fn header(&mut self, name: &str, kind: u32, vlen: usize, size_or_type: u32) -> u32 {
            let name = self.string(name);
            for w in [name, kind << 24 | vlen as u32, size_or_type] {
                self.types.extend_from_slice(&w.to_ne_bytes());
            }
            self.next_id += 1;
            self.next_id - 1
        }

        /// An unsigned integer of `size` bytes.
        pub fn int(&mut self, name: &str, size: u32) -> u32 {
            let id = self.header(name, INT, 0, size);
            self.types.extend_from_slice(&(size * 8).to_ne_bytes());
            id
        }

        pub fn ptr(&mut self, to: u32) -> u32 {
            self.header("", PTR, 0, to)
        }

        pub fn strukt(&mut self, name: &str, size: u32, members: &[Member]) -> u32 {
            self.composite(STRUCT, name, size, members)
        }

        pub fn union(&mut self, name: &str, size: u32, members: &[Member]) -> u32 {
            self.composite(UNION, name, size, members)
        }

        fn composite(&mut self, kind: u32, name: &str, size: u32, members: &[Member]) -> u32 {
            let id = self.header(name, kind, members.len(), size);
            for (name, ty, offset) in members {
                let name = self.string(name);
                for w in [name, *ty, offset * 8] {
                    self.types.extend_from_slice(&w.to_ne_bytes());
                }
            }
            id
        }

        pub fn finish(self) -> super::KernelBtf {
            let mut data = Vec::new();
            let tlen = self.types.len() as u32;
            data.extend_from_slice(&super::MAGIC.to_ne_bytes());
            data.extend_from_slice(&[1, 0]);
            for w in [super::HEADER_LEN as u32, 0, tlen, tlen, self.strings.len() as u32] {
                data.extend_from_slice(&w.to_ne_bytes());
            }
            data.extend_from_slice(&self.types);
            data.extend_from_slice(&self.strings);
            super::KernelBtf::from_bytes(data).expect("a well-formed synthetic BTF")
        }
    }

    /// `struct dentry` with `d_alias` at byte 176: in the union member `d_u` (`in_d_u`, 5.x and
    /// 6.x kernels), or in an anonymous union (7.x), or absent (`alias` false).
    pub fn dentry(in_d_u: bool, alias: bool) -> super::KernelBtf {
        let mut b = Builder::default();
        let u32_ = b.int("unsigned int", 4);
        let node = b.strukt("hlist_node", 0, &[]);
        let node_ptr = b.ptr(node);
        let node_ptr_ptr = b.ptr(node_ptr);
        let hlist_node = b.strukt("hlist_node", 16, &[("next", node_ptr, 0), ("pprev", node_ptr_ptr, 8)]);
        let head = b.strukt("callback_head", 16, &[("next", node_ptr, 0), ("func", node_ptr, 8)]);
        let members: Vec<Member> = if alias {
            vec![("d_alias", hlist_node, 0), ("d_rcu", head, 0)]
        } else {
            vec![("d_rcu", head, 0)]
        };
        let union = b.union("", 16, &members);
        let name = if in_d_u { "d_u" } else { "" };
        b.strukt("dentry", 192, &[("d_flags", u32_, 0), (name, union, 176)]);
        b.finish()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn finds_a_member_of_a_named_member_or_of_an_anonymous_one() {
        for in_d_u in [true, false] {
            let btf = synthetic::dentry(in_d_u, true);
            let alias = Field { offset: 176, size: 16 };
            assert_eq!(btf.field_path("dentry", &["d_flags"]).unwrap(), Field { offset: 0, size: 4 });
            if in_d_u {
                assert_eq!(btf.field_path("dentry", &["d_u", "d_alias"]).unwrap(), alias);
                assert_eq!(btf.field_path("dentry", &["d_u", "d_rcu"]).unwrap().offset, 176);
                let e = btf.field("dentry", "d_alias").unwrap_err().to_string();
                assert!(e.contains("struct dentry has no member `d_alias`"), "{e}");
                let e = btf.field_path("dentry", &["d_u", "nothing"]).unwrap_err().to_string();
                assert!(e.contains("struct dentry.d_u has no member `nothing`"), "{e}");
                let e = btf.field_path("dentry", &["d_flags", "x"]).unwrap_err().to_string();
                assert!(e.contains("`d_flags` of struct dentry is not a struct or union"), "{e}");
            } else {
                assert_eq!(btf.field("dentry", "d_alias").unwrap(), alias);
                assert_eq!(
                    btf.field_path("dentry", &["d_alias", "pprev"]).unwrap(),
                    Field { offset: 184, size: 8 }
                );
                let e = btf.field_path("dentry", &["d_u", "d_alias"]).unwrap_err().to_string();
                assert!(e.contains("struct dentry has no member `d_u`"), "{e}");
            }
        }
    }

    /// The running kernel's BTF, when it has one (every kernel CI runs on does).
    pub(in crate::bpf) fn kernel() -> Option<KernelBtf> {
        match KernelBtf::load() {
            Ok(btf) => Some(btf),
            Err(e) if std::env::var_os("IOSCOPE_REQUIRE_BPF").is_none() => {
                eprintln!("skipped: no kernel BTF ({e:#})");
                None
            }
            Err(e) => panic!("IOSCOPE_REQUIRE_BPF is set but the kernel's BTF is unreadable: {e:#}"),
        }
    }

    #[test]
    fn finds_functions_and_their_parameters() {
        let Some(btf) = kernel() else { return };
        let params = btf.function_params("vfs_read").unwrap();
        let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["file", "buf", "count", "pos"]);
        assert_eq!(params.iter().map(|p| p.pointer).collect::<Vec<_>>(), [true, true, false, true]);
        let e = btf.function_params("no_such_function_ioscope").unwrap_err().to_string();
        assert!(e.contains("not in the kernel's BTF"), "{e}");
        // A struct is not a function.
        assert!(btf.function_params("task_struct").is_err());
    }

    #[test]
    fn finds_members_with_their_sizes_also_inside_anonymous_unions() {
        let Some(btf) = kernel() else { return };
        assert_eq!(btf.field("request", "__sector").unwrap().size, 8);
        assert_eq!(btf.field("request", "q").unwrap().size, 8, "a pointer");
        // sk_buff's `next` sits in an anonymous struct in an anonymous union, at its very start.
        assert_eq!(btf.field("sk_buff", "next").unwrap(), Field { offset: 0, size: 8 });
        let len = btf.field("sk_buff", "len").unwrap();
        assert!(len.offset > 0 && len.size == 4, "{len:?}");
        assert_eq!(btf.enum_value("req_op", "REQ_OP_WRITE").unwrap(), 1);
        assert_eq!(btf.offset_sized("sk_buff", "next", 8).unwrap(), 0);
        assert_eq!(btf.field("task_struct", "comm").unwrap().size, 16, "an array: char[16]");
        let e = btf.offset_sized("sk_buff", "len", 8).unwrap_err().to_string();
        assert!(e.contains("struct sk_buff member `len` is 4 bytes, expected 8"), "{e}");
    }

    #[test]
    fn names_what_is_missing() {
        let Some(btf) = kernel() else { return };
        let e = btf.field("request", "no_such_member").unwrap_err().to_string();
        assert!(e.contains("struct request has no member `no_such_member`"), "{e}");
        let e = btf.field("no_such_struct_ioscope", "x").unwrap_err().to_string();
        assert!(e.contains("no_such_struct_ioscope"), "{e}");
        let e = btf.enum_value("req_op", "REQ_OP_NONSENSE").unwrap_err().to_string();
        assert!(e.contains("REQ_OP_NONSENSE"), "{e}");
        let Err(e) = KernelBtf::from_file("/nonexistent/btf") else { panic!("a missing file parsed") };
        assert!(format!("{e:#}").contains("/nonexistent/btf"), "{e:#}");
        let Err(e) = KernelBtf::from_bytes(vec![0; 64]) else { panic!("zeros parsed as BTF") };
        assert!(format!("{e:#}").contains("bad magic"), "{e:#}");
    }

    #[test]
    fn knows_which_functions_exist() {
        let Some(btf) = kernel() else { return };
        assert!(btf.has_function("vfs_read"));
        assert!(!btf.has_function("no_such_function_ioscope"));
        assert!(!btf.has_function("task_struct"), "a struct is not a function");
    }

    /// A tracepoint's arguments come from its `btf_trace_` typedef: `block_bio_queue` passes the
    /// bio alone since 5.11, `block_rq_issue` the request, `iomap_dio_rw_begin` four (6.18).
    #[test]
    fn counts_a_tracepoints_arguments() {
        let Some(btf) = kernel() else { return };
        assert_eq!(btf.tracepoint_args("block_bio_queue").unwrap(), 1);
        assert_eq!(btf.tracepoint_args("block_rq_issue").unwrap(), 1);
        assert_eq!(btf.tracepoint_args("iomap_dio_rw_begin").unwrap(), 4);
        assert!(btf.tracepoint_args("no_such_event_ioscope").is_err());
    }

    /// Every type id aya would find in the full BTF, it finds in the reduced one. (Checked against
    /// aya's own parse of the whole file: the oracle for the ids BTF tracepoints load with.)
    #[test]
    fn reduced_btf_gives_aya_the_kernel_type_ids() {
        use aya_obj::btf::BtfKind;
        let Some(btf) = kernel() else { return };
        let full = aya::Btf::from_sys_fs().unwrap();
        let tracepoints = ["btf_trace_block_rq_issue", "btf_trace_block_rq_complete", "btf_trace_iomap_iter"];
        for name in tracepoints {
            let want = full.id_by_type_name_kind(name, BtfKind::Typedef).unwrap();
            assert_eq!(btf.aya().id_by_type_name_kind(name, BtfKind::Typedef).unwrap(), want, "{name}");
            let with_functions = btf.aya_with_functions();
            assert_eq!(with_functions.id_by_type_name_kind(name, BtfKind::Typedef).unwrap(), want, "{name}");
        }
        for name in ["vfs_read", "submit_bio"] {
            let want = full.id_by_type_name_kind(name, BtfKind::Func).unwrap();
            assert_eq!(btf.aya_with_functions().id_by_type_name_kind(name, BtfKind::Func).unwrap(), want);
        }
        assert!(btf.aya().id_by_type_name_kind("vfs_read", BtfKind::Func).is_err(), "functions left out");
        assert!(btf.aya().id_by_type_name_kind("task_struct", BtfKind::Struct).is_err());
    }

    /// The loader is given no kernel BTF: that is only right while the object carries no BTF of its
    /// own to relocate (CO-RE). If a build starts emitting it, the loader needs
    /// `EbpfLoader::btf(Some(..))` with the full kernel BTF.
    #[test]
    fn object_needs_no_kernel_btf_to_load() {
        let object = aya_obj::Object::parse(super::super::object::OBJECT).unwrap();
        assert!(!object.has_btf_relocations(), "the eBPF object has CO-RE relocations now");
    }
}
