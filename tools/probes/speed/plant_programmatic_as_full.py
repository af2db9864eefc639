"""Plants a restore defect: the rebuild keeps every programmatic (and launch-order) edge as
a full edge, dropping its type and port data, as a restore that loses them would.
Outputs stay bit for bit; only the speed (and the read-back attributes) can tell.
Run from the repository root, then build: python3 PATH/plant_programmatic_as_full.py"""
import pathlib

path = pathlib.Path("core/src/replay/rebuild.rs")
text = path.read_text()
edits = [
    ("for e in t.edges.iter().filter(|e| e.kind.is_full()) {", "for e in t.edges.iter() {"),
    ("let typed = t.edges.iter().filter(|e| !e.kind.is_full());", "let typed = t.edges.iter().filter(|_| false);"),
]
for old, new in edits:
    assert text.count(old) == 1, f"not found once: {old}"
    text = text.replace(old, new)
path.write_text(text)
print("planted: programmatic edges rebuilt as full edges")
