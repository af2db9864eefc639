# Planted defect: the rebuild leaves the priority launch attribute off every rebuilt
# kernel node (applied to core/src/cuda/attributes.rs before building).
import sys
p = sys.argv[1] + '/core/src/cuda/attributes.rs'
s = open(p).read()
old = "    for LaunchValue { id, name, shown, value } in launch_values(a) {\n        sys::cuGraphKernelNodeSetAttribute"
new = "    for LaunchValue { id, name, shown, value } in launch_values(a).into_iter().filter(|v| v.name != \"priority\") {\n        sys::cuGraphKernelNodeSetAttribute"
assert old in s
open(p, 'w').write(s.replace(old, new))
