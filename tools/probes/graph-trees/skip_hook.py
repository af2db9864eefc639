"""Issue 59 item 4 against PyTorch 2.11's own modules (no GPU: Inductor logs a skip only
for CUDA graphs): after the kit's hook, the skip logger each Inductor module calls by its
own global notes the reason, whether the module was imported before the hook or after."""
import sys
import torch
import torch._inductor.cudagraph_trees as trees  # imported before the hook
import gnomon.torch as gt

skips = []
gt._note_skips(sys.modules, skips)
import torch._inductor.output_code as output_code  # imported after it
import torch._inductor.compile_fx as compile_fx

for module in (trees, output_code, compile_fx):
    module.log_cudagraph_skip_and_bump_counter(f"skipping cudagraphs due to probe in {module.__name__}")
print("torch", torch.__version__)
print("noted", len(skips), "of 3:", skips)
gt._arena["skips"] = skips
print(gt._skips_said())
