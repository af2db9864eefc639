"""Planted defect (issue 27): replay leaves the all-reduce's signal flag out of the reset
between launches. Applied to core/src/replay/loaded.rs before building."""
import pathlib

path = pathlib.Path("core/src/replay/loaded.rs")
src = path.read_text()
old = "        for (b, copy) in &self.writable {\n            // SAFETY: as in `keep`, in the other direction."
new = "        for (b, copy) in self.writable.iter().filter(|(b, _)| b.name != \"flag\") {\n            // SAFETY: as in `keep`, in the other direction."
assert old in src
path.write_text(src.replace(old, new, 1))
