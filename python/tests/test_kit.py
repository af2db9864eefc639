"""The package's tests that need no GPU: the arena's bookkeeping and the buffers it
declares, validation through the Rust core, sizes, and the bundled CLI."""

import ctypes.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gnomon
from gnomon import _native

BASE = 0x2000_0000_0000
GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"


def test_an_allocation_freed_during_a_capture_is_never_handed_out_again():
    a = _native.Allocations(BASE, 4096)
    captured = a.allocate(100, capturing=True)
    eager = a.allocate(100)
    a.free(captured)
    a.free(eager)
    assert a.allocate(100) == eager, "eager memory is reused"
    assert a.blocks() == [(0, 100, "retired"), (512, 100, "live")]


def test_each_allocation_is_declared_once_with_the_callers_role():
    a = _native.Allocations(BASE, 1 << 20)
    weight = a.allocate(4096)
    constant = a.allocate(8)
    logits = a.allocate(256, capturing=True)
    scratch = a.allocate(64, capturing=True)
    a.free(scratch)
    none = (0, 0)
    tensors = [("wte", weight, "weight", [], "torch.float16", none),
               ("lm_head", weight + 512, "weight", [], "torch.float16", none),
               ("logits", logits, "output", ["b1"], "torch.float32", (32, 2))]
    assert a.declare(tensors) == [
        ("weight/wte", 0, 4096, "weight", "stored"),
        ("state/1000", constant - BASE, 8, "input", "stored"),
        ("output/logits", logits - BASE, 256, "output", "stored"),
        ("scratch/1400", scratch - BASE, 64, "scratch", "undefined"),
    ]


def test_pytorchs_blocks_divide_the_arenas_segments():
    import gnomon.torch as gt

    a = _native.Allocations(BASE, 8 << 20)
    tensors, graphs = a.allocate(2 << 20), a.allocate(2 << 20, capturing=True)
    snapshot = [
        {"address": tensors, "segment_pool_id": (0, 1),
         "blocks": [{"size": 4096, "state": "active_allocated"}, {"size": (2 << 20) - 4096, "state": "inactive"}]},
        {"address": graphs, "segment_pool_id": (0, 2),
         "blocks": [{"address": graphs, "size": 1 << 20, "state": "inactive"},
                    {"address": graphs + (1 << 20), "size": 1 << 20, "state": "active_allocated"}]},
        {"address": 0x7F00_0000_0000, "segment_pool_id": (0, 0), "blocks": [{"size": 512, "state": "inactive"}]},
    ]
    blocks = gt._blocks(snapshot, BASE, 8 << 20)
    assert blocks == [(tensors, 4096, True), (tensors + 4096, (2 << 20) - 4096, False),
                      (graphs, 1 << 20, False), (graphs + (1 << 20), 1 << 20, True)]
    divided = a.divided(blocks)
    assert divided.blocks() == [(0, 4096, "live"), (4096, (2 << 20) - 4096, "retired"),
                                (2 << 20, 1 << 20, "retired"), (3 << 20, 1 << 20, "live")]
    assert [b[4] for b in divided.declare([])] == ["stored", "undefined", "undefined", "stored"]
    with pytest.raises(RuntimeError, match=r"lies in no allocation of the arena"):
        a.divided([(BASE + (6 << 20), 512, True)])


def test_storages_a_graph_tree_holds_in_free_blocks_are_live_pieces_of_their_own():
    """Inductor's graph trees free their input copies and outputs in the allocator's books;
    what the caller holds is carved out of the free block as live pieces (a view twice,
    once), the rest stays free; a live block, or a range in no block, changes nothing."""
    import gnomon.torch as gt

    a = _native.Allocations(BASE, 8 << 20)
    graphs = a.allocate(2 << 20, capturing=True)
    snapshot = [{"address": graphs, "segment_pool_id": (0, 2),
                 "blocks": [{"size": 1 << 20, "state": "inactive"}, {"size": 1 << 20, "state": "active_allocated"}]}]
    ids, logits = (graphs + 512, 8), (graphs + 4096, 1024)
    held = [logits, ids, ids, (graphs + (1 << 20), 512), (BASE + (6 << 20), 8)]
    blocks = gt._blocks(snapshot, BASE, 8 << 20, held)
    assert blocks == [(graphs, 512, False), (graphs + 512, 8, True), (graphs + 520, 4096 - 520, False),
                      (graphs + 4096, 1024, True), (graphs + 5120, (1 << 20) - 5120, False),
                      (graphs + (1 << 20), 1 << 20, True)]
    divided = a.divided(blocks)
    named = divided.declare([("ids", graphs + 512, "input", [], "torch.int64", (0, 0)),
                             ("logits", graphs + 4096, "output", [], "torch.float32", (0, 0))])
    assert [(b[0], b[4]) for b in named if b[0].startswith(("input", "output"))] == [
        ("input/ids", "stored"), ("output/logits", "stored")]
    # Overlapping ranges are held as one; a range past its block divides nothing.
    free = (BASE, 100, False)
    assert gt._divided(free, [(BASE + 10, 8), (BASE + 10, 16), (BASE + 20, 20)]) == [
        (BASE, 10, False), (BASE + 10, 30, True), (BASE + 40, 60, False)]
    assert gt._divided(free, [(BASE + 90, 20)]) == [free]


def test_live_blocks_outside_the_arena_are_listed_with_their_pool():
    """What export hands the node check: a graph captured into another pool, or reading a
    tensor made under outside_arena(), points into one of these and is refused by name.
    Free blocks are not listed: a stale word of a kernel's parameters may point at one."""
    import gnomon.torch as gt

    snapshot = [{"address": 0x7F00_0000_0000, "segment_pool_id": (1, 0),
                 "blocks": [{"size": 1024, "state": "inactive"}, {"size": 3072, "state": "active_allocated"}]},
                {"address": 0x7F00_0020_0000, "segment_pool_id": (0, 0), "blocks": [{"size": 512, "state": "inactive"}]},
                {"address": 0x7F00_0040_0000, "segment_pool_id": (0, 0),
                 "blocks": [{"size": 512, "state": "active_pending_free"}]},
                {"address": BASE, "segment_pool_id": (0, 1), "blocks": [{"size": 4096, "state": "active_allocated"}]}]
    assert gt._outside(snapshot, BASE, 8 << 20) == [(0x7F00_0000_0400, 3072, "PyTorch's pool (1, 0)"),
                                                    (0x7F00_0040_0000, 512, "PyTorch's default pool")]
    assert gt._blocks(snapshot, BASE, 8 << 20) == [(BASE, 4096, True)]


def test_refusals_are_specific():
    a = _native.Allocations(BASE, 1024)
    with pytest.raises(RuntimeError, match=r"cannot allocate 2048 bytes in the gnomon arena of 1024 bytes"):
        a.allocate(2048)
    with pytest.raises(RuntimeError, match=r"is not an allocation of the gnomon arena"):
        a.free(BASE + 8)
    with pytest.raises(RuntimeError, match=r"tensor `x` \(0x10\) is not in the gnomon arena"):
        a.declare([("x", 16, "weight", [], "torch.float32", (0, 0))])
    with pytest.raises(RuntimeError, match=r"unknown role `weights`"):
        a.declare([("x", BASE, "weights", [], "torch.float32", (0, 0))])


def test_validation_runs_the_rust_validator(tmp_path):
    account = gnomon.validate(GOLDEN / "v2")
    assert account["format-version"] == 2 and account["templates"] >= 1
    broken = tmp_path / "core"
    shutil.copytree(GOLDEN / "v2", broken)
    shard = next((broken / "shards").iterdir())
    shard.write_bytes(shard.read_bytes()[:-1] + b"\x00")
    with pytest.raises(RuntimeError, match=r"sha|SHA|hash"):
        gnomon.validate(broken)


SIZES = Path(__file__).resolve().parents[2] / "format" / "tests" / "data" / "sizes.tsv"


def test_sizes_parse_as_the_rust_table_says():
    """The table format/tests/sizes.rs holds the Rust parser to: the package reads it the
    same way, and a Python int, bool or float goes through the same parser."""
    rows = [line.rsplit("\t", 1) for line in SIZES.read_text().splitlines() if not line.startswith("#")]
    assert len(rows) >= 20
    for text, expected in rows:
        if expected == "refused":
            with pytest.raises(ValueError, match="not a size"):
                gnomon.parse_size(text)
        else:
            assert gnomon.parse_size(text) == int(expected), text
    assert gnomon.parse_size(4096) == 4096
    for refused in (True, False, -5, 2**64, 1.5):
        with pytest.raises(ValueError, match="not a size"):
            gnomon.parse_size(refused)


def test_the_bundled_binary_validates_a_core():
    run = subprocess.run([str(gnomon.binary()), "validate", "--format", "json", str(GOLDEN / "v2")],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[0])["outcome"] == "valid"


def test_recording_or_exporting_without_a_gpu_is_refused_in_words():
    import gnomon.torch as gt
    with pytest.raises(RuntimeError, match="recorder was not started"):
        _native.export("/nonexistent", [], [], [], [], 0, 1 << 30, "0", [], (8, 16, 64), False, True, (0, 0, []))
    assert gt.DEFAULT_BASE == BASE


class _Tensor:
    dtype = "torch.bfloat16"

    def __init__(self, address, shape=(4,), contiguous=True):
        self.address, self.shape, self.contiguous = address, shape, contiguous

    def data_ptr(self):
        return self.address

    def dim(self):
        return len(self.shape)

    def numel(self):
        return eval("*".join(map(str, self.shape)) or "1")

    def is_contiguous(self):
        return self.contiguous


class _Module:
    def named_parameters(self):
        return iter([("wte.weight", _Tensor(0x10)), ("h.0.bias", _Tensor(0x20))])


def test_tensors_are_named_with_their_role_and_templates():
    import gnomon.torch as gt
    bf16 = "torch.bfloat16"
    none = (0, 0)
    assert gt._named(_Module(), "weight") == [("wte.weight", 0x10, "weight", [], bf16, none),
                                              ("h.0.bias", 0x20, "weight", [], bf16, none)]
    # Templates may reuse a name (each step's `k0`): their tensors are named after them.
    per_template = {"b1": {"k0": _Tensor(0x30)}, "b2": {"k0": _Tensor(0x38)}, "shared": _Tensor(0x40)}
    assert gt._named(per_template, "kv-cache") == [("b1/k0", 0x30, "kv-cache", ["b1"], bf16, none),
                                                   ("b2/k0", 0x38, "kv-cache", ["b2"], bf16, none),
                                                   ("shared", 0x40, "kv-cache", [], bf16, none)]


def test_an_output_named_logits_is_rows_over_its_last_dimension():
    import gnomon.torch as gt
    bf16 = "torch.bfloat16"
    outputs = {"b8": {"logits": _Tensor(0x10, (8, 1, 32)), "next-token": _Tensor(0x20, (8,))},
               "b4": {"logits": _Tensor(0x30, (4, 32), contiguous=False)}}
    assert gt._named(outputs, "output") == [("b8/logits", 0x10, "output", ["b8"], bf16, (32, 8)),
                                            ("b8/next-token", 0x20, "output", ["b8"], bf16, (0, 0)),
                                            ("b4/logits", 0x30, "output", ["b4"], bf16, (0, 0))]
    assert gt._named({"logits": _Tensor(0x40, (2, 32))}, "kv-cache")[0][5] == (0, 0), "only outputs are logits"


def test_a_missing_script_is_said_before_the_recorder_starts(tmp_path):
    ran = subprocess.run([sys.executable, "-m", "gnomon.torch", str(tmp_path / "missing.py")],
                         capture_output=True, text=True)
    assert ran.returncode == 2
    assert ran.stderr.strip() == f"python -m gnomon.torch: {tmp_path / 'missing.py'}: no such file"


def test_a_script_runs_as_python_runs_it(tmp_path):
    """What `python -m gnomon.torch SCRIPT ARGS` runs the script with, once the recorder
    started, is what `python SCRIPT ARGS` gives it: its argv, its __file__, its folder
    first on sys.path, so a module beside it imports (from another working directory)."""
    (tmp_path / "beside.py").write_text("WORD = 'beside'\n")
    script = tmp_path / "port.py"
    script.write_text("import sys, beside\n"
                      "print(sys.argv, __file__, sys.path[0], beside.WORD, __name__)\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plain = subprocess.run([sys.executable, str(script), "--out", "x"], capture_output=True, text=True,
                           cwd=elsewhere, check=True)
    kit = subprocess.run([sys.executable, "-c", "import sys, gnomon.torch as gt; gt._run_script(sys.argv[1:])",
                          str(script), "--out", "x"], capture_output=True, text=True, cwd=elsewhere)
    assert kit.returncode == 0, kit.stderr
    assert kit.stdout == plain.stdout
    assert plain.stdout.split()[-2:] == ["beside", "__main__"]


def test_a_program_that_fails_after_skipping_cuda_graphs_is_said_to_have_failed_in_pytorch(tmp_path, capsys,
                                                                                        monkeypatch):
    """Where graph trees were let in, a script that fails shows its traceback and then, on
    the last line, that it failed in PyTorch with Inductor's skip reasons, and exits 1;
    a failure once export began and the kit's own refusals go on as they were raised."""
    import gnomon.torch as gt
    from gnomon import graph_trees

    script = tmp_path / "recipe.py"
    script.write_text("raise RuntimeError('accessing tensor output of CUDAGraphs that has been overwritten')\n")
    monkeypatch.setattr(gt, "_arena", {"skips": ["skipping cudagraphs due to mutated inputs"]})
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit, match="1"):
        gt._run_script([str(script)])
    said = capsys.readouterr().err.rstrip().splitlines()
    assert said[0] == "Traceback (most recent call last):"
    assert said[-2] == "RuntimeError: accessing tensor output of CUDAGraphs that has been overwritten"
    assert said[-1] == (f"gnomon.torch: {script} failed in PyTorch before it exported anything, so no core was "
                        "written (RuntimeError: accessing tensor output of CUDAGraphs that has been overwritten); "
                        "Inductor skipped CUDA graphs 1 x skipping cudagraphs due to mutated inputs")
    monkeypatch.setattr(gt, "_exporting", True)
    with pytest.raises(RuntimeError, match="overwritten"):
        gt._run_script([str(script)])
    assert capsys.readouterr().err == "", "a failure once export was entered is not the program's alone"
    monkeypatch.setattr(gt, "_exporting", False)
    script.write_text("from gnomon import graph_trees\nraise graph_trees.Refused('a tree the kit cannot map')\n")
    with pytest.raises(graph_trees.Refused):
        gt._run_script([str(script)])
    assert capsys.readouterr().err == ""


def test_a_cupti_wheel_on_the_interpreters_path_is_found(tmp_path):
    from gnomon.torch import _cupti_on_path
    empty, venv = tmp_path / "empty", tmp_path / "venv" / "site-packages"
    lib = venv / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    empty.mkdir()
    assert _cupti_on_path([str(empty), str(venv)]) is None, "a folder without the library is not it"
    (lib / "libcupti.so.13").write_bytes(b"")
    assert _cupti_on_path([str(empty), str(venv)]) == str(lib / "libcupti.so.13")


@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None, reason="this machine has a CUDA driver")
def test_recording_without_a_driver_says_there_is_no_driver():
    with pytest.raises(RuntimeError, match=r"^no CUDA driver on this machine"):
        _native.start_recording()


def test_a_summary_is_printed_and_kept(tmp_path, capsys):
    import gnomon.torch as gt
    gt.report({"varied": [], "nodes": 40}, tmp_path / "summary.json")
    assert json.loads(capsys.readouterr().out) == {"varied": [], "nodes": 40}
    assert json.loads((tmp_path / "summary.json").read_text()) == {"varied": [], "nodes": 40}


def test_the_arena_says_its_bytes_by_standing():
    a = _native.Allocations(BASE, 4096)
    captured = a.allocate(100, capturing=True)
    a.allocate(600)
    a.free(captured)
    assert json.loads(a.stats()) == {"arena": 4096, "live": 1024, "retired": 512, "free": 2560,
                                     "in-use-end": 1536, "peak-end": 1536}
    with pytest.raises(RuntimeError, match="no gnomon arena is in use"):
        _native.arena_stats()


class FakeTorch:
    """PyTorch's CUDA memory and graph classes as the kit uses them, recording the pools
    made and the ones routed to; ``compile`` says how it was called. A graph's replay
    advances the default generator's offset by its ``draws``, as PyTorch's does by the
    graph's whole-graph increment."""

    def __init__(self):
        import types

        made, entered = self.made, self.entered = [], []

        class Pool:
            def __init__(self, allocator):
                self.allocator, self.id = allocator, (0, len(made) + 1)
                made.append(self)

        class Routing:
            def __init__(self, pool):
                self.pool = pool

            def __enter__(self):
                entered.append(self.pool)

            def __exit__(self, *exc):
                entered.remove(self.pool)

        class Pluggable:
            def __init__(self, library, malloc, free):
                self.entry_points = (malloc, free)

            def allocator(self):
                return self.entry_points

        class Binding:
            """PyTorch's pybind11 ``_CUDAGraph``: ``__new__`` ignores its arguments,
            ``__init__`` takes ``keep_graph``."""

            def __new__(cls, *args, **kwargs):
                return object.__new__(cls)

            def __init__(self, keep_graph=False):
                self.keep_graph, self.pools = keep_graph, []

        class Generator:
            offset, capturing = 20, False

            def initial_seed(self):
                return 5074827910873101

            def get_offset(self):
                if self.capturing:
                    raise RuntimeError("Cannot call CUDAGeneratorImpl::get_offset during CUDA graph capture")
                return self.offset

        generator = self.generator = Generator()

        class Graph(Binding):
            draws = 0

            def __new__(cls, keep_graph=False):
                return super().__new__(cls, keep_graph)

            def replay(self):
                generator.offset += self.draws

            def capture_begin(self, pool=None, capture_error_mode="global"):
                self.pools.append(pool)

        self.Graph = Graph
        self.cuda = types.SimpleNamespace(is_initialized=lambda: False, MemPool=Pool, use_mem_pool=Routing,
                                          graph_pool_handle=lambda: "pytorch's own",
                                          graphs=types.SimpleNamespace(CUDAGraph=Graph),
                                          default_generators=[generator],
                                          memory=types.SimpleNamespace(CUDAPluggableAllocator=Pluggable))

    def compile(self, model=None, **kwargs):
        return ("compiled", model, kwargs)


def arena_over(monkeypatch, torch):
    """``use_arena`` over ``torch`` without a GPU: returns what it registered for exit."""
    import gnomon.torch as gt

    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(gt, "_arena", {})
    monkeypatch.setattr(gt._native, "use_arena", lambda base, size, device, shareable: size)
    at_exit = []
    monkeypatch.setattr(gt.atexit, "register", at_exit.append)
    assert gt.use_arena("1GiB") == 1 << 30
    return at_exit


def test_the_arena_routes_tensors_to_one_pool_and_captures_to_another(monkeypatch):
    """use_arena routes this thread's tensors to one MemPool over the kit's allocator and
    hands captures the other (a capture may not allocate to its thread's own pool, and a
    graph's freed blocks must not go to eager tensors); without an arena, graph_pool is
    PyTorch's own, so a port runs either way."""
    import gnomon.torch as gt

    torch = FakeTorch()
    made, entered, Graph = torch.made, torch.entered, torch.Graph
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(gt, "_arena", {})
    assert gt.graph_pool() == "pytorch's own"
    with gt.outside_arena():  # without an arena, nothing to leave (and no GPU touched)
        assert entered == []
    at_exit = arena_over(monkeypatch, torch)
    tensors, graphs = made
    assert entered == [tensors]
    assert tensors.allocator == graphs.allocator == ("gnomon_torch_malloc", "gnomon_torch_free")
    assert gt.graph_pool() == graphs.id != tensors.id
    # Eager work outside the arena ends the routing for its while, and only for it; the
    # stream's GEMM workspaces, which captured GEMMs read, are made before, in the arena.
    routed_when_made = []
    monkeypatch.setattr(gt, "_make_gemm_workspaces", lambda: routed_when_made.append(list(entered)))
    with gt.outside_arena():
        assert entered == []
    assert entered == [tensors]
    with pytest.raises(ValueError), gt.outside_arena():
        raise ValueError("a failing prefill")
    assert entered == [tensors]
    assert routed_when_made == [[tensors], [tensors]]
    # A serving stack's captures land in the arena unchanged: given no pool, a pool of
    # their own each; given a handle of PyTorch's, one arena pool per handle; given the
    # arena's, that one. Every graph keeps its template for export.
    g = Graph()
    assert g.keep_graph and Graph(keep_graph=False).keep_graph is False
    for pool in (None, None, (1, 0), (1, 0), (2, 0), graphs.id):
        g.capture_begin(pool, capture_error_mode="relaxed")
    private_a, private_b, handle_1, handle_1_again, handle_2, arena = g.pools
    assert len({private_a, private_b, handle_1, handle_2, arena}) == 5 and arena == graphs.id
    assert handle_1 == handle_1_again and all(p.allocator == graphs.allocator for p in made)
    assert len(made) == 2 + 4, "two private pools and one per PyTorch handle"
    # At exit the routing ends before PyTorch destroys the pools (it asserts otherwise).
    for leave in at_exit:
        leave()
    assert entered == []


def test_replays_tell_the_export_how_far_each_graph_advances_the_generator(monkeypatch):
    """Under the arena each replay notes how far it moved the default generator's offset:
    the export gets the seed, the offset the next replay would write, and each graph's
    increment (0 for one that draws nothing, None for one never replayed)."""
    import gnomon.torch as gt

    torch = FakeTorch()
    arena_over(monkeypatch, torch)
    drawing, quiet, unreplayed, capturing = torch.Graph(), torch.Graph(), torch.Graph(), torch.Graph()
    drawing.draws = 8
    for g in (drawing, quiet, drawing):
        g.replay()
    # PyTorch refuses get_offset while a capture is under way: that replay is unmeasured.
    torch.generator.capturing = True
    capturing.replay()
    torch.generator.capturing = False
    graphs = {"noise": drawing, "argmax": quiet, "never": unreplayed, "capturing": capturing}
    assert gt._host_generator(graphs) == (5074827910873101, 36, [("noise", 8), ("argmax", 0), ("never", None),
                                                             ("capturing", None)])


def test_cuda_graph_trees_are_refused_before_anything_is_captured(monkeypatch):
    """Under the arena, torch.compile with CUDA graphs is refused when it is called, saying
    what to do instead; without them it compiles as before. A capture that Inductor's
    graph trees begin some other way is refused too, before it begins."""
    import gnomon.torch as gt

    torch = FakeTorch()
    arena_over(monkeypatch, torch)
    for refused in ({"mode": "reduce-overhead"}, {"mode": "max-autotune"}, {"options": {"triton.cudagraphs": True}}):
        with pytest.raises(RuntimeError, match=r"records CUDA graph trees.*graph_pool\(\)"):
            torch.compile("step", **refused)
    for compiled in ({}, {"mode": "max-autotune-no-cudagraphs"}, {"options": {"triton.cudagraphs": False}}):
        assert torch.compile("step", **compiled) == ("compiled", "step", {"mode": None, "options": None} | compiled)
    g = torch.Graph()
    trees = {"__name__": "torch._inductor.cudagraph_trees"}
    exec("def record(graph):\n    graph.capture_begin(None)", trees)
    with pytest.raises(RuntimeError, match="records CUDA graph trees"):
        trees["record"](g)
    assert g.pools == [], "refused before the capture began"
    g.capture_begin(None)
    assert len(g.pools) == 1, "a capture of the program's own goes on"


def test_the_kit_refuses_to_start_after_cuda(monkeypatch):
    """A graph captured before use_arena (or record) would hold memory and modules the kit
    never saw: both refuse once PyTorch has initialised CUDA."""
    import types

    import gnomon.torch as gt
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True))
    monkeypatch.setitem(sys.modules, "torch", torch)
    with pytest.raises(RuntimeError, match="use_arena must come before the first CUDA allocation"):
        gt.use_arena("1GiB")
    with pytest.raises(RuntimeError, match="CUDA is already initialised"):
        gt.record()


def test_a_rank_sees_its_peers_tensors_through_windows_half_a_stride_up(monkeypatch, tmp_path):
    """join_ranks puts rank r's window onto peer p at its base + half a rank stride + p
    arena sizes (rounded up to a GiB), and peer_address finds a tensor's twin there."""
    import gnomon.torch as gt

    base = gt.DEFAULT_BASE + gt.RANK_STRIDE
    joined = []
    monkeypatch.setattr(gt._native, "join_ranks", lambda *args: joined.append(args))
    monkeypatch.setattr(gt, "_arena", {"base": base, "size": 3 << 29})
    windows = gt.join_ranks(1, 3, tmp_path, limit_s=5)
    half = base + gt.RANK_STRIDE // 2
    assert windows == {0: half, 2: half + 2 * (2 << 30)}
    assert joined == [(1, 3, str(tmp_path), [(0, half), (2, half + (4 << 30))], 5.0)]
    assert gt.peer_address(_Tensor(base + 4096), 2) == half + (4 << 30) + 4096
    with pytest.raises(ValueError, match="is not in the gnomon arena"):
        gt.peer_address(_Tensor(base - 1), 0)
    with pytest.raises(ValueError, match="do not fit in half a rank's stride"):
        gt.join_ranks(0, 1024, tmp_path)


def test_joining_ranks_or_meeting_them_without_an_arena_is_refused_in_words(tmp_path):
    with pytest.raises(RuntimeError, match="no gnomon arena is in use"):
        _native.join_ranks(0, 2, str(tmp_path), [(1, BASE + (1 << 39))], 1.0)
    with pytest.raises(RuntimeError, match="this process joined no rank set"):
        _native.sync_ranks()


def test_without_pytorch_the_kit_says_what_it_needs(monkeypatch):
    """gnomon.torch imports without PyTorch (an extra of the package); the first thing that
    needs it names the extra and the version the kit was tested with."""
    import gnomon.torch as gt
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails as if absent
    with pytest.raises(ModuleNotFoundError, match=r"tested with torch 2\.11.*gnomon\[torch\]"):
        gt.use_arena("1GiB")


def test_python_m_gnomon_torch_says_the_failure_with_what_the_script_imported(tmp_path):
    """`python -m gnomon.torch` runs the kit's file as `__main__`, a second copy of its
    module: the failure must be said from the `gnomon.torch` the script imported, whose
    arena holds the skip reasons (on the H100 the `__main__` copy's empty arena said
    nothing, issue 59 item 4); only the first line of PyTorch's error, whose text goes on
    with a stack of its own. The recorder, which needs CUDA, is left out."""
    script = tmp_path / "recipe.py"
    script.write_text("import gnomon.torch as gt\n"
                      "gt._arena['skips'] = ['skipping cudagraphs due to mutated inputs']\n"
                      "raise RuntimeError('accessing tensor output of CUDAGraphs that has been overwritten. '\n"
                      "                   'Stack trace:\\n  File x, line 1')\n")
    start = ("import runpy; from gnomon import _native; _native.start_recording = lambda: None; "
             "runpy.run_module('gnomon.torch', run_name='__main__', alter_sys=True)")
    ran = subprocess.run([sys.executable, "-c", start, str(script)], capture_output=True, text=True)
    assert ran.returncode == 1
    assert ran.stderr.rstrip().splitlines()[-1] == (
        f"gnomon.torch: {script} failed in PyTorch before it exported anything, so no core was written "
        "(RuntimeError: accessing tensor output of CUDAGraphs that has been overwritten. Stack trace:); "
        "Inductor skipped CUDA graphs 1 x skipping cudagraphs due to mutated inputs")


def test_inductors_reasons_for_skipping_cuda_graphs_are_noted_and_said(monkeypatch):
    """Every Inductor module holding the skip function notes each reason and still logs it
    (patched once, however often use_arena runs); a program that then fails is said to
    have failed in PyTorch, with the reasons counted."""
    import types

    import gnomon.torch as gt

    logged = []

    def log(msg):
        logged.append(msg)

    defining = types.SimpleNamespace(log_cudagraph_skip_and_bump_counter=log)
    importing = types.SimpleNamespace(log_cudagraph_skip_and_bump_counter=log)
    modules = {"torch._inductor.cudagraph_utils": defining, "torch._inductor.compile_fx": importing,
               "someone.else": types.SimpleNamespace(log_cudagraph_skip_and_bump_counter=log)}
    monkeypatch.setitem(sys.modules, "torch._inductor", types.SimpleNamespace(cudagraph_utils=defining))
    monkeypatch.setitem(sys.modules, "torch._inductor.cudagraph_utils", defining)
    skips = []
    for _ in range(2):
        gt._note_skips(modules, skips)
    importing.log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to mutated inputs (1 instances)")
    importing.log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to mutated inputs (1 instances)")
    defining.log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to cpu device (arg0_1)")
    modules["someone.else"].log_cudagraph_skip_and_bump_counter("not Inductor's")
    assert logged[:3] == skips and len(skips) == 3
    monkeypatch.setattr(gt, "_arena", {"skips": skips})
    assert gt._skips_said() == ("Inductor skipped CUDA graphs 2 x skipping cudagraphs due to mutated inputs "
                                "(1 instances); 1 x skipping cudagraphs due to cpu device (arg0_1)")
    monkeypatch.setattr(gt, "_arena", {"skips": []})
    assert gt._skips_said() == "Inductor logged no reason for skipping CUDA graphs"
