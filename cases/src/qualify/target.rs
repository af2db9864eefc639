//! What `gnomon qualify` is pointed at: a core directory, or a rank set (a directory of
//! per-rank cores, each recording its rank).

use std::path::{Path, PathBuf};

use gnomon_format::{read_manifest, Manifest, MANIFEST_FILE};

/// One core of a target, with what its manifest says, if it could be read.
pub struct CoreDir {
    pub dir: PathBuf,
    pub manifest: Option<Manifest>,
}

impl CoreDir {
    pub fn read(dir: PathBuf) -> Self {
        let manifest = read_manifest(&dir).ok();
        Self { dir, manifest }
    }

    /// Template names, in the manifest's order; none when the manifest is unreadable (the
    /// validate case then says why).
    pub fn templates(&self) -> Vec<String> {
        self.manifest.iter().flat_map(|m| &m.templates).map(|t| t.name.clone()).collect()
    }
}

pub enum Target {
    Core {
        name: String,
        core: CoreDir,
    },
    /// Ranks 0..N, in order.
    RankSet {
        name: String,
        ranks: Vec<CoreDir>,
    },
}

impl Target {
    /// A core when `path` holds a manifest, else a rank set of the subdirectories that do.
    pub fn find(path: &Path) -> Result<Self, String> {
        let name = id_segment(path)?;
        if path.join(MANIFEST_FILE).exists() {
            return Ok(Self::Core { name, core: CoreDir::read(path.to_owned()) });
        }
        let entries = std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut ranks: Vec<CoreDir> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join(MANIFEST_FILE).exists())
            .map(CoreDir::read)
            .collect();
        if ranks.is_empty() {
            return Err(format!("{}: neither a core (no {MANIFEST_FILE}) nor a rank set of cores", path.display()));
        }
        ranks.sort_by_key(|c| (c.manifest.as_ref().map(|m| m.context.tp_rank), c.dir.clone()));
        for (index, core) in ranks.iter().enumerate() {
            let rank = core.manifest.as_ref().map(|m| m.context.tp_rank);
            if rank != Some(index as u32) {
                let said = rank.map_or("an unreadable manifest".into(), |r| format!("rank {r}"));
                return Err(format!(
                    "rank set {}: {} holds {said} where rank {index} belongs",
                    path.display(),
                    core.dir.display()
                ));
            }
        }
        Ok(Self::RankSet { name, ranks })
    }

    pub fn name(&self) -> &str {
        match self {
            Self::Core { name, .. } | Self::RankSet { name, .. } => name,
        }
    }
}

/// The directory's name as one segment of a case id.
fn id_segment(path: &Path) -> Result<String, String> {
    let canonical = path.canonicalize().map_err(|e| format!("{}: {e}", path.display()))?;
    let name = canonical.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let safe: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '-' }).collect();
    match safe.is_empty() {
        true => Err(format!("{}: a target needs a directory name", path.display())),
        false => Ok(safe),
    }
}
