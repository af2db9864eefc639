"""Planted defect (issue 27): each rank maps its own shards at its peer windows instead of
the shards its peer handed over. Applied to core/src/replay/ranks.rs before building."""
import pathlib

path = pathlib.Path("core/src/replay/ranks.rs")
src = path.read_text()
src = src.replace("let note = encode(shared.into_iter());", "let note = encode(shared.clone().into_iter());", 1)
src = src.replace(
    "map_ranges(ctx, &m.peers, &taken)",
    "{ let _ = taken; m.peers.iter().enumerate().map(|(i, r)| map_range(ctx, i, r, &shared, &fds)).collect() }",
    1,
)
assert "let _ = taken" in src and "shared.clone()" in src
path.write_text(src)
