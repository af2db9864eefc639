//! What a module image says of the GPUs it runs on: the SM a cubin's ELF header names, or
//! the `.target` of a PTX text. Validation refuses a module with no code for the core's
//! arch, so a core whose images cannot run on the runner never reaches a launch.

use std::fmt;

use object::{
    elf::{FileHeader64, ELFCLASS64},
    read::elf::FileHeader,
    LittleEndian,
};

use super::ModuleKind;

/// Bytes of a module's beginning that hold what [`arch`] reads: a cubin's ELF header, or
/// the directives before a PTX text's first entry.
pub const HEAD_BYTES: usize = 4096;

/// The arch a module image is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageArch {
    pub sm: u32,
    /// What a PTX target's suffix binds it to (a cubin is always [`Targeting::Portable`]:
    /// its own rule binds it).
    pub targeting: Targeting,
}

/// Whether a PTX target runs beyond its own arch: CUDA's `sm_90` (portable), `sm_90a`
/// (arch-specific) and `sm_100f` (family-specific, CUDA 12.9 and later).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Targeting {
    Portable,
    /// `a`: that arch only.
    Arch,
    /// `f`: its family (its major version) at the same or a later minor.
    Family,
}

impl fmt::Display for ImageArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.targeting {
            Targeting::Portable => write!(f, "sm_{}", self.sm),
            Targeting::Arch => write!(f, "sm_{}a", self.sm),
            Targeting::Family => write!(f, "sm_{}f", self.sm),
        }
    }
}

impl ImageArch {
    /// Whether a module of `kind` for this arch runs on an `sm` device, by [`Self::rule`].
    pub fn runs_on(&self, kind: ModuleKind, sm: u32) -> bool {
        let same_family_later = self.sm / 10 == sm / 10 && self.sm <= sm;
        match (kind, self.targeting) {
            (ModuleKind::Cubin, _) | (ModuleKind::Ptx, Targeting::Family) => same_family_later,
            (ModuleKind::Ptx, Targeting::Arch) => self.sm == sm,
            (ModuleKind::Ptx, Targeting::Portable) => self.sm <= sm,
        }
    }

    /// CUDA's rule for where a module of `kind` for this arch runs, in words.
    pub fn rule(&self, kind: ModuleKind) -> &'static str {
        match (kind, self.targeting) {
            (ModuleKind::Cubin, _) => "a cubin runs on its own major version at the same or a later minor",
            (ModuleKind::Ptx, Targeting::Portable) => "PTX runs on its arch and every later one, compiled at load",
            (ModuleKind::Ptx, Targeting::Arch) => "arch-specific PTX (`a`) runs on that arch only",
            (ModuleKind::Ptx, Targeting::Family) => {
                "family-specific PTX (`f`) runs on its family (its major version) at the same or a later minor"
            }
        }
    }
}

/// The arch `head` (a module's first bytes, up to [`HEAD_BYTES`]) is for, or why it says none.
pub fn arch(kind: ModuleKind, head: &[u8]) -> Result<ImageArch, String> {
    match kind {
        ModuleKind::Cubin => cubin_arch(head),
        ModuleKind::Ptx => ptx_arch(head),
    }
}

/// The SM of a 64-bit ELF cubin's `e_flags`. Its place depends on the CUDA ELF ABI
/// version (`e_ident[8]`), as read on the H200 runner: ABI 7 keeps it in the low byte
/// (Triton 3.6's ptxas wrote `0x005a0d5a` for sm_90); ABI 8 in the second byte (CUDA 13's
/// NVRTC wrote `0x06005a04` for sm_90, `0x06006402` for sm_100).
fn cubin_arch(head: &[u8]) -> Result<ImageArch, String> {
    if !head.starts_with(b"\x7fELF") || head.get(4) != Some(&ELFCLASS64.0) {
        return Err("it is not a 64-bit ELF cubin".into());
    }
    let parsed = FileHeader64::<LittleEndian>::parse(head).and_then(|h| Ok((h, h.endian()?)));
    let (header, endian) = parsed.map_err(|e| match head.len() < 64 {
        true => "its ELF header is cut short".to_owned(),
        false => format!("its ELF header is not a little-endian cubin's: {e}"),
    })?;
    let flags = header.e_flags(endian).0;
    let sm = if header.e_ident().abi_version >= 8 { (flags >> 8) & 0xff } else { flags & 0xff };
    match sm {
        0 => Err(format!("its ELF flags 0x{flags:08x} name no SM")),
        sm => Ok(ImageArch { sm, targeting: Targeting::Portable }),
    }
}

/// The arch of a PTX text's `.target` directive (`.target sm_90a, debug`).
fn ptx_arch(head: &[u8]) -> Result<ImageArch, String> {
    let text = String::from_utf8_lossy(head);
    let target = text
        .lines()
        .map(str::trim_start)
        .find_map(|l| l.strip_prefix(".target"))
        .ok_or("its text has no `.target` directive before the first kernel")?;
    let name = target.split([',', ' ', '\t']).find(|t| !t.is_empty()).unwrap_or_default();
    let digits = name.strip_prefix("sm_").ok_or_else(|| format!("its `.target` is `{name}`, not an sm_ arch"))?;
    let (number, suffix) = digits.split_at(digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len()));
    match (number.parse(), suffix) {
        (Ok(sm), "") => Ok(ImageArch { sm, targeting: Targeting::Portable }),
        (Ok(sm), "a") => Ok(ImageArch { sm, targeting: Targeting::Arch }),
        (Ok(sm), "f") => Ok(ImageArch { sm, targeting: Targeting::Family }),
        _ => Err(format!("its `.target` is `{name}`, not an sm_ arch")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(abi: u8, flags: u32) -> Vec<u8> {
        let mut head = vec![0u8; 64];
        head[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
        head[8] = abi;
        head[0x30..0x34].copy_from_slice(&flags.to_le_bytes());
        head
    }

    /// The e_flags read on the runner, by the ABI that wrote them.
    #[test]
    fn cubin_arch_is_read_where_each_abi_keeps_it() {
        let sm = |abi, flags| cubin_arch(&elf(abi, flags)).map(|a| a.sm);
        assert_eq!(sm(7, 0x005a_0d5a), Ok(90));
        assert_eq!(sm(8, 0x0600_5a04), Ok(90));
        assert_eq!(sm(8, 0x0600_5004), Ok(80));
        assert_eq!(sm(8, 0x0600_6402), Ok(100));
        assert_eq!(sm(8, 0x0600_7802), Ok(120));
        assert!(sm(8, 0x0600_0004).is_err());
        assert!(cubin_arch(&elf(8, 0x0600_5a04)[..0x32]).unwrap_err().contains("cut short"));
        assert!(cubin_arch(b"//\n.target sm_90\n").unwrap_err().contains("not a 64-bit ELF"));
        let mut big_endian = elf(8, 0x0600_5a04);
        big_endian[5] = 2;
        assert!(cubin_arch(&big_endian).unwrap_err().contains("not a little-endian cubin's"));
        let mut elf32 = elf(8, 0x0600_5a04);
        elf32[4] = 1;
        assert!(cubin_arch(&elf32).unwrap_err().contains("not a 64-bit ELF"));
        let mut not_elf = elf(8, 0x0600_5a04);
        not_elf[0] = b'#';
        assert!(cubin_arch(&not_elf).unwrap_err().contains("not a 64-bit ELF"));
    }

    #[test]
    fn ptx_target_names_the_arch_and_what_binds_it() {
        let a = |text: &str| ptx_arch(text.as_bytes());
        assert_eq!(a("// c\n.version 8.0\n.target sm_90\n"), Ok(ImageArch { sm: 90, targeting: Targeting::Portable }));
        assert_eq!(a("\t.target sm_90a, debug\n"), Ok(ImageArch { sm: 90, targeting: Targeting::Arch }));
        assert_eq!(a(".target sm_100f\n"), Ok(ImageArch { sm: 100, targeting: Targeting::Family }));
        assert!(a(".version 8.0\n").unwrap_err().contains("no `.target`"));
        assert!(a(".target compute_90\n").unwrap_err().contains("compute_90"));
        assert!(a(".target sm_9x\n").is_err());
        assert!(a(".target sm_90b\n").is_err());
    }

    /// CUDA's rules, one row each: (image, kind, device, runs). Hopper, Blackwell's sm_100
    /// and sm_103, and the SM120 family's sm_120 and sm_121 that this harness's runners are.
    #[test]
    fn which_images_run_on_which_device() {
        use ModuleKind::{Cubin, Ptx};
        use Targeting::{Arch, Family, Portable};
        let rows = [
            (90, Portable, Cubin, 90, true),
            (86, Portable, Cubin, 89, true),
            (120, Portable, Cubin, 121, true),
            (100, Portable, Cubin, 103, true),
            (121, Portable, Cubin, 120, false),
            (80, Portable, Cubin, 90, false),
            (100, Portable, Cubin, 90, false),
            (90, Portable, Cubin, 100, false),
            (80, Portable, Ptx, 90, true),
            (90, Portable, Ptx, 120, true),
            (100, Portable, Ptx, 90, false),
            (90, Arch, Ptx, 90, true),
            (90, Arch, Ptx, 100, false),
            (100, Arch, Ptx, 103, false),
            (120, Arch, Ptx, 121, false),
            (120, Family, Ptx, 120, true),
            (120, Family, Ptx, 121, true),
            (100, Family, Ptx, 103, true),
            (103, Family, Ptx, 100, false),
            (100, Family, Ptx, 120, false),
            (120, Family, Ptx, 100, false),
        ];
        for (image, targeting, kind, device, runs) in rows {
            let arch = ImageArch { sm: image, targeting };
            assert_eq!(arch.runs_on(kind, device), runs, "{kind:?} for {arch} on sm_{device}: {}", arch.rule(kind));
        }
    }
}
