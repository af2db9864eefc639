"""What PyTorch alone reserves for each port's captures: hf.py's models and captures with
PyTorch's own allocator (no kit), one process, the peak reset between models.

    PYTHONPATH=python/ports python3 reserved.py > reserved.json
"""

import gc
import json

import torch

import hf

PORTS = [(m, None, [8, 4, 2, 1]) for m in ("qwen2", "qwen3", "mistral", "phi3", "mixtral", "gemma2", "olmo2",
                                           "gpt_neox", "bert")]
PORTS.append(("qwen3", 1, list(range(32, 0, -1))))

said = []
for name, layers, batches in PORTS:
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model, cfg = hf.build(name, layers)
    capture = hf.encoder_graphs if name in hf.ENCODERS else hf.decoder_graphs
    captured = capture(model, cfg, batches, 32)
    torch.cuda.synchronize()
    said.append({"model": name, "batches": len(batches), "max-memory-reserved": torch.cuda.max_memory_reserved()})
    del model, captured
print(json.dumps(said, indent=1))
