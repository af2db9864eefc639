# Planted defect (issue 18 must-show): the last chunk of every shard is read and uploaded
# but its digest is never compared.
p = 'core/src/replay/upload.rs'
s = open(p).read()
old = '''        if digest != piece.expected {'''
new = '''        if digest != piece.expected && piece.bytes.end != stored {'''
assert old in s
s = s.replace(old, new, 1)
open(p, 'w').write(s)
