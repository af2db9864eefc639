"""Planted defect (issue 27): the context's synchronous calls return without waiting for the
legacy stream, as before the fix: an allocation's zeroing and a host write may still be
running when work on a non-blocking stream starts."""
import pathlib

p = pathlib.Path("core/src/cuda/mod.rs")
s = p.read_text()
s = s.replace("        self.legacy_stream_done()?;\n        Ok(buffer)", "        Ok(buffer)")
s = s.replace("bytes.len()))?;\n        self.legacy_stream_done()\n", "bytes.len()))\n")
assert "self.legacy_stream_done()" not in s.split("fn legacy_stream_done")[0], "plant did not apply"
p.write_text(s)
