//! The running kernel's own type information (BTF, /sys/kernel/btf/vmlinux): where the fields of
//! its structs are and what its enums' values are, read at run time for the programs that use
//! the kernel's structs directly (BTF tracepoints). Nothing of a kernel's layout is compiled in.

use anyhow::{anyhow, bail, Context, Result};
use btf_rs::{Btf, BtfType, Type};

/// Where the running kernel keeps its BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// A kernel's BTF, parsed once.
pub struct KernelBtf(Btf);

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

impl KernelBtf {
    pub fn load() -> Result<KernelBtf> {
        KernelBtf::from_file(VMLINUX_BTF)
    }

    pub fn from_file(path: &str) -> Result<KernelBtf> {
        Ok(KernelBtf(
            Btf::from_file(path).map_err(|e| anyhow!("{e}")).with_context(|| format!("reading {path}"))?,
        ))
    }

    /// `strukt.member` (a member of an anonymous struct or union inside it is found too). Bit
    /// fields are refused: they cannot be loaded by offset.
    pub fn field(&self, strukt: &str, member: &str) -> Result<Field> {
        let s = self.named_struct(strukt)?;
        self.find_member(&s, member, 0)?.ok_or_else(|| anyhow!("struct {strukt} has no member `{member}`"))
    }

    /// The byte offset of `strukt.member`, which must be `size` bytes (what the program loads).
    pub fn offset_sized(&self, strukt: &str, member: &str, size: u32) -> Result<u32> {
        let f = self.field(strukt, member)?;
        if f.size != size {
            bail!("struct {strukt} member `{member}` is {} bytes, expected {size}", f.size);
        }
        Ok(f.offset)
    }

    /// The parameters of kernel function `name` (a `FUNC` in the BTF: the kernel has it as a
    /// function of its own, not only inlined), in order. Err when the BTF has no such function.
    pub fn function_params(&self, name: &str) -> Result<Vec<Param>> {
        let types = self.0.resolve_types_by_name(name).map_err(|_| anyhow!("not in the kernel's BTF"))?;
        for t in types {
            let Type::Func(f) = t else { continue };
            let Type::FuncProto(proto) = self.0.resolve_chained_type(&f).map_err(|e| anyhow!("{e}"))? else {
                bail!("its BTF type is not a function prototype");
            };
            let mut params = Vec::new();
            for p in &proto.parameters {
                let ty = self.0.resolve_chained_type(p).map_err(|e| anyhow!("{e}"))?;
                params.push(Param { name: self.name(p)?, pointer: matches!(self.strip(ty)?, Type::Ptr(_)) });
            }
            return Ok(params);
        }
        bail!("not a function in the kernel's BTF")
    }

    /// The value of `name` in `enum enum_name`.
    pub fn enum_value(&self, enum_name: &str, name: &str) -> Result<u32> {
        for t in self.types(enum_name)? {
            if let Type::Enum(e) = t {
                for m in &e.members {
                    if self.name(m)? == name {
                        return Ok(m.val());
                    }
                }
            }
        }
        bail!("the kernel's BTF has no {name} in enum {enum_name}")
    }

    fn types(&self, name: &str) -> Result<Vec<Type>> {
        self.0.resolve_types_by_name(name).map_err(|e| anyhow!("the kernel's BTF has no type {name}: {e}"))
    }

    fn named_struct(&self, name: &str) -> Result<btf_rs::Struct> {
        self.types(name)?
            .into_iter()
            .find_map(|t| match t {
                Type::Struct(s) if !s.members.is_empty() => Some(s),
                _ => None,
            })
            .ok_or_else(|| anyhow!("the kernel's BTF has no struct {name}"))
    }

    fn name(&self, t: &dyn BtfType) -> Result<String> {
        self.0.resolve_name(t).map_err(|e| anyhow!("{e}"))
    }

    /// `member` in `s` at byte `base`, looking into anonymous struct/union members.
    fn find_member(&self, s: &btf_rs::Struct, member: &str, base: u32) -> Result<Option<Field>> {
        for m in &s.members {
            let name = self.name(m)?;
            let bit_offset = m.bit_offset();
            if name == member {
                if m.bitfield_size().is_some_and(|b| b != 0) || bit_offset % 8 != 0 {
                    bail!("member `{member}` is a bit field");
                }
                let ty = self.0.resolve_chained_type(m).map_err(|e| anyhow!("{e}"))?;
                return Ok(Some(Field { offset: base + bit_offset / 8, size: self.size_of(ty)? }));
            }
            if name.is_empty() {
                let ty = self.0.resolve_chained_type(m).map_err(|e| anyhow!("{e}"))?;
                if let Type::Struct(inner) | Type::Union(inner) = self.strip(ty)? {
                    if let Some(f) = self.find_member(&inner, member, base + bit_offset / 8)? {
                        return Ok(Some(f));
                    }
                }
            }
        }
        Ok(None)
    }

    /// `t` without typedefs and qualifiers.
    fn strip(&self, mut t: Type) -> Result<Type> {
        for _ in 0..32 {
            t = match t {
                Type::Typedef(ref x) => self.0.resolve_chained_type(x),
                Type::Const(ref x) => self.0.resolve_chained_type(x),
                Type::Volatile(ref x) => self.0.resolve_chained_type(x),
                Type::Restrict(ref x) => self.0.resolve_chained_type(x),
                Type::TypeTag(ref x) => self.0.resolve_chained_type(x),
                _ => return Ok(t),
            }
            .map_err(|e| anyhow!("{e}"))?;
        }
        bail!("type chain too long")
    }

    fn size_of(&self, t: Type) -> Result<u32> {
        Ok(match self.strip(t)? {
            Type::Int(i) => i.size() as u32,
            Type::Ptr(_) => 8,
            Type::Enum(e) => e.size() as u32,
            Type::Enum64(e) => e.size() as u32,
            Type::Struct(s) | Type::Union(s) => s.size() as u32,
            Type::Array(a) => {
                let elem = self.0.resolve_chained_type(&a).map_err(|e| anyhow!("{e}"))?;
                a.len() as u32 * self.size_of(elem)?
            }
            other => bail!("unexpected member type {}", other.name()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The running kernel's BTF, when it has one (every kernel CI runs on does).
    fn kernel() -> Option<KernelBtf> {
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
    }
}
