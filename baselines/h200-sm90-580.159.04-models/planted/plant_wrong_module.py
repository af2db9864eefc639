# Planted recorder defect: an image attached to the wrong module. Module loads are not
# tied to their images, and of two images with the same kernels one is taken silently.
p = 'core/src/record/mod.rs'
s = open(p).read()
for old, new in [
    ('''    if let [image] = images.iter().filter(|i| i.modules.contains(&module.handle)).collect::<Vec<_>>()[..] {
        return Ok(image);
    }
''', ''),
    ('''        (Some(_), Some(_)) => Err(RecordError::Ambiguous { function: function.into() }),''',
     '''        (Some(image), Some(_)) => Ok(image),'''),
]:
    assert old in s, old
    s = s.replace(old, new, 1)
open(p, 'w').write(s)
