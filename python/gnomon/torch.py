"""The PyTorch side of the kit.

1. ``record()`` before the program's first kernel (or run the program with
   ``python -m gnomon.torch SCRIPT``): every image the driver loads is kept.
2. ``use_arena(size)`` before the first CUDA allocation: PyTorch's caching allocator
   takes its memory from a fixed virtual range that Gnomon maps. Eager work no graph
   reads may run ``with outside_arena():``, on PyTorch's own pool.
3. Capture as the program does (``torch.cuda.graph(g)``, ``pool=`` a handle of
   PyTorch's own, or ``pool=graph_pool()``): under the arena every capture allocates
   there and every ``CUDAGraph`` keeps its graph. Then ``export(...)``.
"""

import atexit
import contextlib
import itertools
import json
import os
import runpy
import sys
import traceback
from collections.abc import Mapping

from . import _native, parse_size

__all__ = ["record", "use_arena", "join_ranks", "sync_ranks", "peer_address", "graph_pool", "outside_arena",
           "memory_stats", "deterministic", "export", "export_graph_trees", "report", "DEFAULT_BASE", "RANK_STRIDE", "DEFAULT_LAUNCHES",
           "QUIET_LAUNCHES", "MAX_LAUNCHES"]

#: Where the arena starts unless told otherwise: high above what the driver hands out.
DEFAULT_BASE = 0x2000_0000_0000
#: Rank r of a set puts its arena at ``DEFAULT_BASE + r * RANK_STRIDE``, and its windows
#: onto its peers' arenas in the second half of that stride.
RANK_STRIDE = 1 << 40
#: Launches of each template whose outputs an export compares, at least; then on until
#: ``QUIET_LAUNCHES`` in a row gave no output not seen before, at most ``MAX_LAUNCHES``.
DEFAULT_LAUNCHES = 8
QUIET_LAUNCHES = 16
MAX_LAUNCHES = 64
#: The cuBLAS workspace setting that makes its kernels reproducible (cuBLAS's docs,
#: "Results reproducibility"); read when cuBLAS creates its handle.
_CUBLAS_REPRODUCIBLE = ":4096:8"
_bitwise = False
#: The arena's range and PyTorch's pools in it, once ``use_arena`` ran.
_arena = {}
#: Whether ``export`` was entered: a failure after it is no longer the program's alone.
_exporting = False

#: The PyTorch the kit was qualified with (on the H200 runner, CUDA 13.0).
TESTED_TORCH = "2.11"


def _torch():
    """PyTorch, or an error that says what the kit needs: it is an extra of the package
    (``pip install 'gnomon[torch]'``), so that ``gnomon._native`` and the binary install
    without it."""
    try:
        import torch
    except ModuleNotFoundError as missing:
        raise ModuleNotFoundError(
            f"gnomon.torch needs PyTorch with CUDA (the kit was tested with torch {TESTED_TORCH}, CUDA 13.0): "
            "pip install 'gnomon[torch]', or torch for your CUDA from pytorch.org") from missing
    return torch


def _cuda_initialised():
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()


def _cupti_on_path(paths):
    """The CUPTI that ``pip install nvidia-cuda-cupti`` put under one of ``paths`` (this
    interpreter's ``sys.path``, a virtual environment's included), if any."""
    for path in paths:
        candidate = os.path.join(path or ".", "nvidia", "cu13", "lib", "libcupti.so.13")
        if os.path.isfile(candidate):
            return candidate
    return None


def record():
    """Starts the load-time image recorder (CUPTI's module-loaded callback). It must run
    before the first kernel: a module loaded unseen has no image, and export names it."""
    if _native.recording():
        return
    if _cuda_initialised():
        raise RuntimeError("CUDA is already initialised: modules loaded so far were not recorded; "
                           "call gnomon.torch.record() before the program's first CUDA call, "
                           "or run it with python -m gnomon.torch")
    # The recorder looks in the toolkit and the system's Python folders; a CUPTI wheel in
    # this interpreter's own packages (a virtual environment) is named to it first.
    installed = _cupti_on_path(sys.path)
    if installed and "GNOMON_CUPTI" not in os.environ:
        os.environ["GNOMON_CUPTI"] = installed
    _native.start_recording()


def use_arena(size, base=DEFAULT_BASE, device=0, shareable=False, graph_trees=False):
    """Maps ``size`` bytes at exactly ``base`` and puts PyTorch's caching allocator on them:
    from here on this thread's tensors, and every graph captured into ``graph_pool()``, lie
    in the arena, while PyTorch's memory statistics, block reuse and shared graph pools work
    as they do without the kit. Returns the size mapped. Refused when the driver does not
    place the range at ``base``. A rank of a tensor-parallel set maps it ``shareable`` and
    then calls ``join_ranks``. Inductor's CUDA graph trees are refused (see
    ``_GRAPH_TREES_REFUSED``) unless ``graph_trees``: then their pool is one of the arena's
    and ``export_graph_trees`` exports them (not yet run on a GPU)."""
    torch = _torch()

    if _cuda_initialised():
        raise RuntimeError("use_arena must come before the first CUDA allocation")
    mapped = _native.use_arena(base, parse_size(size), device, shareable)
    allocator = torch.cuda.memory.CUDAPluggableAllocator(
        _native.__file__, "gnomon_torch_malloc", "gnomon_torch_free").allocator()
    # Two pools: a capture cannot allocate to the pool its thread is routed to, and a
    # graph's freed intermediates must not be handed to eager tensors while it may run.
    _arena.update(base=base, size=mapped, device=device, allocator=allocator, tensors=torch.cuda.MemPool(allocator),
                  graphs=torch.cuda.MemPool(allocator), standing_for={}, private=[])
    _arena["routing"] = torch.cuda.use_mem_pool(_arena["tensors"])
    _arena["routing"].__enter__()
    atexit.register(_leave_arena)
    _capture_into_arena(torch.cuda.graphs.CUDAGraph)
    if graph_trees:
        _graph_trees_in_arena(torch)
    else:
        _refuse_graph_trees(torch)
    return mapped


#: Why a port compiled with CUDA graph trees is refused, and what to do instead.
_GRAPH_TREES_REFUSED = (
    "gnomon.torch: torch.compile with CUDA graphs (mode='reduce-overhead' or 'max-autotune', or "
    "options={'triton.cudagraphs': True}) records CUDA graph trees: Inductor captures each graph into a "
    "memory pool it manages itself, checkpointing the allocator between graphs, and replays it through "
    "its own wrapper, which copies the inputs into tensors only it knows, so no core can name the graphs "
    "and their tensors. Compile without CUDA graphs (the default mode, or "
    "mode='max-autotune-no-cudagraphs') and capture the compiled step yourself, one graph per batch size: "
    "torch.cuda.graph(g, pool=gnomon.torch.graph_pool()), as vLLM and SGLang do "
    "(python/ports/decode.py --mode compiled)")


def _graph_trees(mode, options):
    """Whether ``torch.compile(mode=mode, options=options)`` captures CUDA graph trees:
    the modes whose options turn ``triton.cudagraphs`` on, or options that do."""
    return mode in ("reduce-overhead", "max-autotune") or bool((options or {}).get("triton.cudagraphs"))


def _refuse_graph_trees(torch):
    """Under the arena, ``torch.compile`` with CUDA graph trees is refused when it is
    called, before anything is compiled or captured (see ``_GRAPH_TREES_REFUSED``); a
    tree's capture is refused too, for a program that turned the trees on another way
    (``torch._inductor.config``)."""
    compile_ = torch.compile

    def compile_in_arena(model=None, *args, mode=None, options=None, **kwargs):
        if _graph_trees(mode, options):
            raise RuntimeError(_GRAPH_TREES_REFUSED)
        return compile_(model, *args, mode=mode, options=options, **kwargs)

    torch.compile = compile_in_arena


def _graph_trees_in_arena(torch):
    """Inductor's tree manager takes an arena pool for its own when it is made: the pool
    it captures every tree node into, routes its warm-up allocations to and checkpoints
    between nodes, so all of it lies in the arena and none is swapped behind its back."""
    from torch._inductor import cudagraph_trees

    _arena["trees"] = torch.cuda.MemPool(_arena["allocator"])
    init = cudagraph_trees.CUDAGraphTreeManager.__init__

    def init_in_arena(self, *args, **kwargs):
        handle = torch.cuda.graph_pool_handle
        torch.cuda.graph_pool_handle = lambda: _arena["trees"].id
        try:
            init(self, *args, **kwargs)
        finally:
            torch.cuda.graph_pool_handle = handle

    cudagraph_trees.CUDAGraphTreeManager.__init__ = init_in_arena
    _keep_last_inputs(cudagraph_trees)
    _arena["skips"] = []
    _note_skips(sys.modules, _arena["skips"])


def _keep_last_inputs(cudagraph_trees):
    """Has each tree node keep a host copy of what its latest replay (or its recording)
    started from: the inputs it copied in and its small mutated state, one page-locked
    copy each per replay, ordered on the replay's stream. Inductor's own copies of the inputs
    lie in the node's pool, where the graph's later kernels write (the allocator gave their
    blocks to later tensors during capture), so after a replay they hold other bytes;
    ``export_graph_trees`` puts both back before the snapshot, so that a launch of the core
    is that replay."""
    from . import graph_trees

    copy = cudagraph_trees.CUDAGraphNode._copy_inputs_and_remove_from_src
    expanded = cudagraph_trees.index_expanded_dims
    replays = itertools.count()  # which node replayed last, among nodes of one function and shape

    def copy_and_keep(self, dsts, srcs):
        copy(self, dsts, srcs)
        inputs = {i: expanded(dsts[i], self.expanded_dims[i]) for i in self.non_static_input_idx}
        state = {i: graph_trees.input_tensor(self, i, dsts) for i in self.wrapped_function.mutated_input_idxs
                 if i not in inputs}
        small = {i: t for i, t in state.items()
                 if hasattr(t, "data_ptr") and graph_trees.kept_each_replay(t.shape, t.stride(), t.element_size())}
        self.gnomon_last_inputs = {i: _on_host(t) for i, t in {**inputs, **small}.items() if hasattr(t, "data_ptr")}
        self.gnomon_replayed = next(replays)

    cudagraph_trees.CUDAGraphNode._copy_inputs_and_remove_from_src = copy_and_keep


def _span(tensor):
    """The elements of `tensor`'s storage from its first to its last, as one dense view:
    the bytes a strided or expanded tensor reads, copied in one piece."""
    from .graph_trees import span_elements

    return tensor.as_strided((span_elements(tensor.shape, tensor.stride()),), (1,), tensor.storage_offset())


def _on_host(tensor):
    """A copy of `tensor`'s span in page-locked host memory, made in stream order: a device
    copy would be allocated in the tree's pool, where Inductor counts every live tensor."""
    torch = _torch()
    span = _span(tensor)
    # The device named here: the caller may run under a CUDA default device.
    return torch.empty(span.size(), dtype=span.dtype, device="cpu", pin_memory=True).copy_(span, non_blocking=True)


def _put_back_last_inputs(node, template, restored):
    """Writes what `node`'s latest replay started from (see ``_keep_last_inputs``) back
    into its inputs and small state (``graph_trees.put_back`` says which). State that
    several nodes write is put back as the first (a parent before its children) found it;
    `restored` holds the addresses already written."""
    from torch._inductor.cudagraph_trees import index_expanded_dims

    from . import graph_trees

    kept = getattr(node, "gnomon_last_inputs", {})
    for i in graph_trees.put_back(template, kept):
        tensor = index_expanded_dims(graph_trees.input_tensor(node, i), node.expanded_dims[i])
        if tensor.data_ptr() not in restored:
            _span(tensor).copy_(kept[i], non_blocking=True)
            restored.add(tensor.data_ptr())


#: The function Inductor calls with each reason it compiles a graph without CUDA graphs.
_SKIP_FUNCTION = "log_cudagraph_skip_and_bump_counter"


def _note_skips(modules, skips):
    """Has every Inductor module that says why it skips CUDA graphs (``TORCH_LOGS=cudagraphs``
    prints them) also note the reason in ``skips``: each module that imported the function
    calls it by its own global, so each is patched, and the module that defines it for
    those imported later."""
    from torch._inductor import cudagraph_utils  # noqa: F401  (defines the function)

    def noted(original):
        def note(msg, *args, **kwargs):
            skips.append(str(msg))
            return original(msg, *args, **kwargs)
        note.noted = True
        return note

    for name, module in list(modules.items()):
        original = getattr(module, _SKIP_FUNCTION, None) if name.startswith("torch._inductor") else None
        if original is not None and not getattr(original, "noted", False):
            setattr(module, _SKIP_FUNCTION, noted(original))


def _skips_said():
    """Inductor's reasons for compiling without CUDA graphs in this process, in words."""
    skips = _arena.get("skips") or []
    if not skips:
        return "Inductor logged no reason for skipping CUDA graphs"
    counted = {reason: skips.count(reason) for reason in skips}
    return "Inductor skipped CUDA graphs " + "; ".join(f"{n} x {reason}" for reason, n in counted.items())


def _called_from_graph_trees():
    """Whether Inductor's CUDA graph trees are among the callers of the caller."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__") == "torch._inductor.cudagraph_trees":
            return True
        frame = frame.f_back
    return False


def _capture_into_arena(graph_class):
    """Lets a serving stack's capture code run unchanged under ``use_arena``: a capture
    given no pool, or a pool of PyTorch's own (``torch.cuda.graph_pool_handle()``, which
    vLLM passes), allocates in the arena too. Each such pool is stood in for by an arena
    pool of its own, made at its first capture, so captures that shared a pool share one
    and a capture given none has one to itself, as without the kit. A ``CUDAGraph`` made
    without ``keep_graph`` keeps its graph (it is instantiated at its first replay
    instead of at the capture's end), for export reads it: PyTorch's binding takes
    ``keep_graph`` in ``__init__`` (its ``__new__`` passes it on to a base that ignores it).
    Each replay notes how far it advanced the default CUDA generator's offset (PyTorch
    advances it by the graph's whole-graph increment, 0 where the graph draws nothing):
    what a core must advance its offset by per launch (``_host_generator``)."""
    capture_begin, init, replay = graph_class.capture_begin, graph_class.__init__, graph_class.replay

    def capture_begin_in_arena(self, pool=None, *args, **kwargs):
        if _called_from_graph_trees() and "trees" not in _arena:
            raise RuntimeError(_GRAPH_TREES_REFUSED)
        return capture_begin(self, _arena_pool(pool), *args, **kwargs)

    def keeping_its_graph(self, keep_graph=True):
        init(self, keep_graph)

    def replay_noting_draws(self):
        before = _generator_offset()
        replay(self)
        after = _generator_offset()
        # Unmeasured (None) where either read failed or another thread drew meanwhile.
        measured = before is not None and after is not None and after >= before
        self._gnomon_increment = after - before if measured else None

    graph_class.capture_begin = capture_begin_in_arena
    graph_class.__init__ = keeping_its_graph
    graph_class.replay = replay_noting_draws


def _default_generator():
    """The arena's device's default CUDA generator: the one every capture registers."""
    return _torch().cuda.default_generators[_arena["device"]]


def _generator_offset():
    """The default generator's offset, or None where PyTorch will not say (it refuses
    while a capture is under way)."""
    try:
        return _default_generator().get_offset()
    except RuntimeError:
        return None


def _host_generator(graphs):
    """The default generator's seed, the offset its next replay would write, and how far
    each of ``graphs`` ({name: CUDAGraph}) advanced it per replay (``None``: never
    replayed under the kit), for the export to find the templates that draw."""
    generator = _default_generator()
    increments = [(name, getattr(g, "_gnomon_increment", None)) for name, g in graphs.items()]
    return (generator.initial_seed(), generator.get_offset(), increments)


def _arena_pool(pool):
    """The arena's pool a capture given ``pool`` allocates in (see ``_capture_into_arena``)."""
    torch = _torch()

    ours = [_arena[k].id for k in ("graphs", "trees") if k in _arena]
    if not _arena or (pool is not None and any(tuple(pool) == tuple(p) for p in ours)):
        return pool
    if pool is None:
        _arena["private"].append(torch.cuda.MemPool(_arena["allocator"]))
        return _arena["private"][-1].id
    standing_for = _arena["standing_for"]
    if tuple(pool) not in standing_for:
        standing_for[tuple(pool)] = torch.cuda.MemPool(_arena["allocator"])
    return standing_for[tuple(pool)].id


def join_ranks(rank, world, meet_dir, limit_s=60.0):
    """Makes this process rank ``rank`` of a set of ``world``: meets the other ranks in the
    directory ``meet_dir`` (each waits at most ``limit_s`` seconds), hands them this rank's
    arena (``use_arena(..., shareable=True)``) and maps each of theirs, whole, at a window
    of its own. From here on its kernels may hold addresses in its peers' arenas
    (``peer_address``), ``export`` records the windows and launches with the other ranks,
    and ``gnomon qualify --ranks-on-one-gpu`` replays the set's cores together. Every rank
    must map an arena of one size, and allocate the buffers its peers read in the same
    order (so they lie at the same offsets). Returns {peer: window address}."""
    base, size = _arena["base"], _arena["size"]
    stride = -(-size // (1 << 30)) * (1 << 30)
    windows = {p: base + RANK_STRIDE // 2 + p * stride for p in range(world) if p != rank}
    if stride * world > RANK_STRIDE // 2:
        raise ValueError(f"{world} windows of {stride} bytes do not fit in half a rank's stride of {RANK_STRIDE}")
    _native.join_ranks(rank, world, os.fspath(meet_dir), sorted(windows.items()), float(limit_s))
    _arena["windows"] = windows
    return dict(windows)


def sync_ranks():
    """Waits until every other rank of the set has called it as often: a barrier between
    the ranks' processes, for eager launches of a collective outside a graph."""
    _native.sync_ranks()


def peer_address(tensor, peer):
    """Where this rank sees ``peer``'s copy of ``tensor``: the same offset in its arena,
    through the window ``join_ranks`` mapped."""
    offset = tensor.data_ptr() - _arena["base"]
    if not 0 <= offset < _arena["size"]:
        raise ValueError(f"the tensor at {tensor.data_ptr():#x} is not in the gnomon arena")
    return _arena["windows"][peer] + offset


def _leave_arena():
    """Ends the thread's routing before the interpreter tears the pools down: PyTorch
    asserts that no pool is routed to when a MemPool is destroyed (torch 2.11 aborted a
    compiled GPT-2 port at exit, "captures_underway.empty() INTERNAL ASSERT FAILED")."""
    routing = _arena.pop("routing", None)
    if routing is not None:
        routing.__exit__(None, None, None)


def graph_pool():
    """The pool to capture into: ``torch.cuda.graph(g, pool=graph_pool())`` where a serving
    stack passes ``torch.cuda.graph_pool_handle()``. Every capture given it shares one pool
    in the arena, as vLLM's and SGLang's captures share theirs. Under ``use_arena`` a
    capture given PyTorch's own handle, or none, lands in an arena pool too (one per
    handle, one per capture given none). Without ``use_arena``, a new pool of PyTorch's
    own, so a port runs either way."""
    torch = _torch()

    return _arena["graphs"].id if _arena else torch.cuda.graph_pool_handle()


def memory_stats():
    """The arena's bytes as the kit sees them: PyTorch's segments (``torch.cuda.
    memory_reserved()`` and its kin say how PyTorch uses them). ``live`` and ``free`` are
    what they say; ``retired`` is memory a captured graph may use, never handed out again;
    ``in-use-end`` is how far into the arena segments reach now (what replay of a core
    maps), and ``peak-end`` how far they ever reached (the arena this program needs: compare
    it with ``torch.cuda.max_memory_reserved()`` of a run without the kit)."""
    return json.loads(_native.arena_stats())


def _pytorch_blocks(snapshot):
    """(segment, address, block) for each of PyTorch's blocks in
    ``torch.cuda.memory_snapshot()``, whose blocks follow each other from their segment's
    start."""
    for segment in snapshot:
        address = segment["address"]
        for block in segment["blocks"]:
            yield segment, block.get("address", address), block
            address += block["size"]


def _blocks(snapshot, base, size, held=()):
    """(address, size, live) of each of PyTorch's blocks in the arena; a free block that
    holds ranges of ``held`` ((address, size) of storages the caller knows are alive) is
    divided around them, each range live."""
    blocks = [(address, block["size"], block["state"] != "inactive")
              for segment, address, block in _pytorch_blocks(snapshot)
              if base <= segment["address"] < base + size]
    return [piece for block in blocks for piece in _divided(block, held)]


def _divided(block, held):
    """``block`` (address, size, live), divided into free and live pieces where it is free
    and ``held`` ranges lie in it: ranges that overlap (views of one storage, or storages
    rebuilt from their data pointers) are held as one; a range that runs past the block
    is not the block's to divide."""
    address, size, live = block
    inside = sorted((a, a + n) for a, n in held if address <= a and a + n <= address + size and n > 0)
    if live or not inside:
        return [block]
    merged = [list(inside[0])]
    for start, end in inside[1:]:
        if start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, at = [], address
    for start, end in merged:
        pieces += [(at, start - at, False)] if start > at else []
        pieces.append((start, end - start, True))
        at = end
    return pieces + ([(at, address + size - at, False)] if at < address + size else [])


def _outside(snapshot, base, size):
    """(address, size, pool) of each live block PyTorch holds outside the arena: export
    refuses a graph that points into one, for replay maps no such address. Free blocks are
    left out: a word of a kernel's parameters that points at freed memory is stale bytes of
    the launching thread's stack, not a tensor (PyTorch copies whole structs of which a
    kernel reads a part)."""
    def said(segment):
        pool = tuple(segment.get("segment_pool_id", (0, 0)))
        return "PyTorch's default pool" if pool == (0, 0) else f"PyTorch's pool {pool}"

    return [(address, block["size"], said(segment))
            for segment, address, block in _pytorch_blocks(snapshot)
            if not base <= segment["address"] < base + size and block["state"] != "inactive"]


@contextlib.contextmanager
def outside_arena():
    """Runs eager work whose tensors no graph reads (a prefill, a warm-up) on PyTorch's
    default pool, outside the arena, as the program would run without the kit: the blocks
    it frees are cached there, and a capture run under it too empties that cache first,
    which ``torch.cuda.graph()`` does only while no pool is routed to. Captures still
    allocate in ``graph_pool()``. A graph that reads a tensor made here is refused at
    export, naming the node. Without ``use_arena``, it changes nothing.

    cuBLAS keeps a workspace per stream, made by the stream's first GEMM, which every GEMM
    a graph captures on that stream reads: before it leaves the arena, this makes the
    current stream's workspaces there."""
    torch = _torch()

    routing = _arena.pop("routing", None)
    if routing is None:
        yield
        return
    _make_gemm_workspaces()
    routing.__exit__(None, None, None)
    try:
        yield
    finally:
        _arena["routing"] = torch.cuda.use_mem_pool(_arena["tensors"])
        _arena["routing"].__enter__()


def _make_gemm_workspaces():
    """One GEMM through cuBLAS and one through cuBLASLt (with a bias) on the current stream:
    PyTorch gives each (handle, stream) its workspace at the first such call."""
    torch = _torch()

    a = torch.ones(16, 16, dtype=torch.bfloat16, device="cuda")
    torch.mm(a, a)
    torch.addmm(a[0], a, a)


def deterministic():
    """Asks PyTorch and its libraries for reproducible kernels, and makes ``export`` refuse
    a core whose outputs still vary between launches: for teams that want bitwise
    verdicts. Call it before the first CUDA call (cuBLAS reads its workspace setting when
    it starts)."""
    global _bitwise
    torch = _torch()

    if _cuda_initialised():
        raise RuntimeError("deterministic() must come before the first CUDA call")
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = _CUBLAS_REPRODUCIBLE
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    _bitwise = True


def _named(tensors, role, template=None):
    """(name, address, role, templates, dtype, vocabulary) for each tensor of a mapping or
    a module. A template's own mapping names its tensors after it (``b8/k0``), so templates
    may reuse names. An output named ``logits`` (Hugging Face's name) holds rows over a
    vocabulary, its last dimension: besides its bytes, the tokens its rows choose are
    recorded and judged (``_logits``)."""
    if hasattr(tensors, "named_parameters"):
        tensors = dict(tensors.named_parameters())
    out = []
    for name, t in dict(tensors).items():
        if isinstance(t, Mapping):
            out += _named(t, role, template=name)
        else:
            named = f"{template}/{name}" if template else name
            out.append((named, t.data_ptr(), role, [template] if template else [], str(t.dtype),
                        _logits(name, t, role)))
    return out


def _logits(name, t, role):
    """(vocabulary, rows) of a contiguous output named ``logits`` (its last dimension, and
    every other), (0, 0) for any other tensor."""
    if role != "output" or name != "logits" or t.dim() < 1 or t.numel() == 0 or not t.is_contiguous():
        return (0, 0)
    return (int(t.shape[-1]), int(t.numel() // t.shape[-1]))


def export(graphs, out, weights=(), inputs=(), outputs=(), kv_cache=(), flags=0, shard_cap="1GiB",
           capture=None, launches=DEFAULT_LAUNCHES, bitwise=None, quiet_launches=QUIET_LAUNCHES,
           max_launches=MAX_LAUNCHES, progress=True, held=()):
    """Exports ``graphs`` ({template name: CUDAGraph captured with keep_graph=True}) as a
    core at ``out``.

    ``weights`` (a mapping or a module), ``inputs`` and ``kv_cache`` name tensors by role;
    ``outputs`` maps names to tensors compared after every template, or template names to
    such mappings. Each template is launched here, each time from the core's state, to
    compute its expectations (at least ``launches`` times, then until
    ``quiet_launches`` in a row gave nothing new, at most ``max_launches``): an output some
    launch gave differently is recorded as varying (its envelope in the data's units, its
    other digests, the nodes of the kernel found to cause it), a like output of a template
    that runs that kernel takes its spread, and ``gnomon qualify`` judges them by what the
    launches here gave; ``bitwise=True`` (the default after ``deterministic()``) refuses
    such a core instead. Afterwards the arena holds what the
    last launch left. ``capture`` names
    the seconds the program spent getting here ({"warm-up-s": ..., "capture-s": ...}); the
    core keeps them and ``gnomon qualify`` reports them beside the restore. A stage that
    takes more than two seconds (the snapshot, the launches) says how far it is on stderr:
    a bar on a terminal, a line every five seconds otherwise, nothing with
    ``progress=False``. ``held``: tensors alive in memory PyTorch's allocator counts as
    free (a CUDA graph tree's copies of its inputs and its outputs, which it keeps by
    checkpointing the allocator; ``export_graph_trees`` names them): each storage is a
    buffer of its own. Returns what the export did (nodes, kernel nodes by recorder route
    and library, modules, bytes, seconds)."""
    torch = _torch()

    from . import __version__

    torch.cuda.synchronize()
    global _exporting
    _exporting = True  # what fails from here on is the kit's, or after its export
    named = (_named(weights, "weight") + _named(inputs, "input")
             + _named(outputs, "output") + _named(kv_cache, "kv-cache"))
    handles = [(name, g.raw_cuda_graph()) for name, g in graphs.items()]
    figures = [(name, float(s)) for name, s in (capture or {}).items()]
    bitwise = _bitwise if bitwise is None else bitwise
    snapshot = torch.cuda.memory_snapshot() if _arena else []
    storages = [(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) for t in held]
    blocks = _blocks(snapshot, _arena["base"], _arena["size"], storages) if _arena else []
    outside = _outside(snapshot, _arena["base"], _arena["size"]) if _arena else []
    summary = json.loads(_native.export(os.fspath(out), handles, named, blocks, outside, flags, parse_size(shard_cap),
                                        __version__, figures, (launches, quiet_launches, max_launches), bitwise,
                                        progress, _host_generator(graphs) if _arena else (0, 0, [])))
    others = summary.get("other-gpu-processes") or []
    if others:
        said = ", ".join(f"pid {p['pid']} ({p['name']}) on GPU {p['gpu']}" for p in others)
        print(f"gnomon.torch.export: the GPU is shared with {said}: expectations recorded beside another "
              "process may hold bits a launch alone would not give", file=sys.stderr, flush=True)
    return summary


def export_graph_trees(out, weights=None, **options):
    """Exports what Inductor's CUDA graph trees recorded (``use_arena(..., graph_trees=True)``
    first) as a core at ``out``: each node that replays a template, as
    ``gnomon.graph_trees.plan`` maps it. ``weights`` (a module) names the parameters, and a
    single output whose last dimension is its ``config.vocab_size`` is named ``logits``;
    ``options`` are ``export``'s. Refused, before anything is written, where the tree
    cannot be mapped (``graph_trees.Refused``). Not yet run on a GPU."""
    torch = _torch()
    from torch._inductor import cudagraph_trees

    from . import graph_trees

    manager = cudagraph_trees.get_container(torch.cuda.current_device()).tree_manager
    if manager is None:
        raise graph_trees.Refused("no CUDA graph tree was made: nothing was compiled with mode='reduce-overhead' "
                                  f"(or ran often enough to be recorded) in this process; {_skips_said()}")
    nodes = {}
    pending = [n for roots in manager.roots.values() for n in roots]
    while pending:
        node = pending.pop()
        nodes[node.id.id] = node
        pending += [c for children in node.children.values() for c in children]
    named = (*weights.named_parameters(), *weights.named_buffers()) if weights is not None else ()
    names = {t.data_ptr(): n for n, t in named}
    vocabulary = getattr(getattr(weights, "config", None), "vocab_size", None)
    graphs, roles, restored = {}, {"input": {}, "weight": {}, "state": {}, "output": {}}, set()
    torch.cuda.synchronize()  # the kept copies were made on the streams the tree replayed on
    for template in graph_trees.plan(graph_trees.describe(manager, torch.__version__)):
        node = nodes[template["graph"]]
        _put_back_last_inputs(node, template, restored)
        graphs[template["name"]] = node.graph
        for i in template["inputs"]:
            tensor = graph_trees.input_tensor(node, i["index"])
            name = {"input": f"{template['name']}/{i['placeholder']}",
                    "weight": names.get(tensor.data_ptr(), f"f{node.wrapped_function.id.id}/{i['placeholder']}"),
                    "state": f"f{node.wrapped_function.id.id}/{i['placeholder']}"}[i["role"]]
            roles[i["role"]][name] = tensor
        produced = [_tree_output(node, template, o["index"]) for o in template["outputs"]]
        logits = len(produced) == 1 and vocabulary is not None and produced[0].shape[-1] == vocabulary
        roles["output"][template["name"]] = {("logits" if logits else f"out{o['index']}"): t
                                             for o, t in zip(template["outputs"], produced)}
    # Inductor's input copies and outputs, and state whose owner is gone (transformers drops
    # generate's static cache when it returns), lie in blocks its allocator counts as free.
    held = [*roles["input"].values(), *roles["state"].values(), *(t for o in roles["output"].values() for t in o.values())]
    return export(graphs, out, weights=roles["weight"], inputs=roles["input"], outputs=roles["output"],
                  kv_cache=roles["state"], held=held, **options)


def _tree_output(node, template, index):
    """A tree node's output `index` as Inductor still holds it, or a refusal: it drops its
    cached outputs at a checkpoint."""
    from . import graph_trees

    cached = node.cached_tensor_outputs
    if index >= len(cached) or cached[index] is None:
        raise graph_trees.Refused(f"graph {node.id.id} ({template['name']}): Inductor no longer holds its output "
                                  f"{index}; export right after the step's last run")
    return cached[index]


def report(summary, path=None):
    """Prints an export's summary (or any JSON-able record of a port) and, given ``path``,
    writes it there too: what a CI job keeps beside the core."""
    text = json.dumps(summary, indent=1, default=str)
    print(text, flush=True)
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")


def _refusals():
    """The kit's own refusals: said by themselves."""
    from . import graph_trees

    return (graph_trees.Refused,)


def _main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m gnomon.torch SCRIPT [ARGS...]\n"
              "runs SCRIPT with the kernel-image recorder started before it")
        return 0 if argv else 2
    # Said before the recorder starts: a missing script is the user's first problem, and
    # on a machine without CUDA the recorder's refusal would hide it.
    if not os.path.isfile(argv[0]):
        print(f"python -m gnomon.torch: {argv[0]}: no such file", file=sys.stderr)
        return 2
    record()
    _run_script(argv)
    return 0


def _run_script(argv):
    """Runs ``argv[0]`` as ``python SCRIPT ARGS`` would: ``sys.argv`` its words, its own
    folder first on ``sys.path`` (where ``-m`` put the working directory), so a module
    beside it imports; ``__file__`` and ``__name__`` as runpy sets them."""
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except Exception as e:
        # The program's own failure, before any export: where it compiled with CUDA graph
        # trees, its traceback and then, last on the screen, that it failed in PyTorch and
        # why Inductor skipped graphs, so the user knows where to look.
        if "skips" not in _arena or _exporting or isinstance(e, _refusals()):
            raise
        traceback.print_exc()
        error = (str(e).splitlines() or [""])[0]  # PyTorch's own text goes on with a stack
        print(f"gnomon.torch: {argv[0]} failed in PyTorch before it exported anything, so no core was written "
              f"({type(e).__name__}: {error}); {_skips_said()}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    # `python -m gnomon.torch` runs this file as `__main__`, a copy of the kit beside the
    # `gnomon.torch` the script imports: that one holds the arena, the skip reasons and
    # whether export was entered, so that one runs the script and says how it failed.
    from gnomon import torch as kit
    sys.exit(kit._main(sys.argv[1:]))
