"""libspattn.so through ctypes: descriptors, the two-phase call, errors.

Every op runs as in C: phase 1 validates and sizes the workspace, phase 2
runs with the workspace and a runner. Tensors are described in place (dtype,
shape, strides in elements, data pointer), so views reach the library without
copies; ctypes releases the GIL for the duration of each call.
"""
import ctypes
import ctypes.util
import os
import threading

import torch

SPA_OK = 0
STATUS_NAMES = {
    161001: "SPA_ERR_NULLPTR",
    161002: "SPA_ERR_INVALID",
    161003: "SPA_ERR_WORKSPACE",
}
_MAX_RANK = 8
_EXECUTOR_WORDS = 3072 // 8

# torch dtype -> spa_dtype (the aclDataType values)
DTYPES = {
    torch.float32: 0,
    torch.float16: 1,
    torch.int32: 3,
    torch.uint8: 4,
    torch.int64: 9,
    torch.float64: 11,  # where the build has the op's float64 path (else refused)
    torch.bool: 12,
    torch.bfloat16: 27,
}
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class SpattnError(RuntimeError):
    """A refusal of the library: status code, op, phase and the rule it broke."""

    def __init__(self, op, phase, status, rule, context="", hint=""):
        self.op, self.phase, self.status = op, phase, status
        self.rule, self.context, self.hint = rule, context, hint
        where = " (in %s)" % context if context else ""
        said = "; %s" % hint if hint else ""
        super().__init__("%s (phase %d) refused with %d %s: %s%s%s"
                         % (op, phase, status, STATUS_NAMES.get(status, "?"), rule, where, said))

    def with_hint(self, hint):
        """The same refusal, with the binding's reading of the arguments
        (which one, its shape, the shape expected) appended."""
        return SpattnError(self.op, self.phase, self.status, self.rule, self.context, hint)


class Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("dims", ctypes.c_int64 * _MAX_RANK), ("strides", ctypes.c_int64 * _MAX_RANK),
                ("data", ctypes.c_void_p)]


class IntArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_uint64)]


class Executor(ctypes.Structure):
    _fields_ = [("words", ctypes.c_uint64 * _EXECUTOR_WORDS)]  # 8-byte aligned like the C union


class Runner(ctypes.Structure):
    _fields_ = [("run", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


class Pool(ctypes.Structure):
    _fields_ = [("impl", ctypes.c_void_p)]


def _find_library():
    env = os.environ.get("SPATTN_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "libspattn.so"),
                 os.path.join(here, "..", "..", "build", "host", "lib", "libspattn.so")):
        if os.path.exists(cand):
            return os.path.normpath(cand)
    found = ctypes.util.find_library("spattn")
    if found:
        return found
    raise ImportError("spattn: libspattn.so not found; build it with `make shared` in the "
                      "repository or point SPATTN_LIBRARY at it")


LIBRARY_PATH = _find_library()
lib = ctypes.CDLL(LIBRARY_PATH)  # CDLL: the GIL is released during calls

_P = ctypes.POINTER
_T = _P(Tensor)
_A = _P(IntArray)
_ST = ctypes.c_int32
_I64 = ctypes.c_int64
_WS = [_P(ctypes.c_uint64), _P(Executor)]
_PHASE2 = [ctypes.c_void_p, ctypes.c_uint64, _P(Executor), _P(Runner)]


def _declare(name, restype, argtypes):
    f = getattr(lib, name)
    f.restype, f.argtypes = restype, argtypes
    return f


nsa_compress_ws = _declare("spa_nsa_compress_get_workspace_size", _ST,
                           [_T, _T, _A, ctypes.c_char_p, _I64, _I64, _I64, _T] + _WS)
nsa_compress_grad_ws = _declare("spa_nsa_compress_grad_get_workspace_size", _ST,
                                [_T, _T, _T, _A, _I64, _I64, _I64, ctypes.c_char_p, _T, _T] + _WS)
# Selected, compressed and sliding-window attention plan for the runner's
# threads (the *_for phase 1: 4 blocks a thread, not the build's 64, so the
# workspace is what those threads use; the same bits), the last argument
# before the workspace size being workers().
nsa_select_ws = _declare("spa_nsa_select_get_workspace_size_for", _ST,
                         [_T, _T, _T, _T, _T, _A, _A, ctypes.c_double, _I64, ctypes.c_char_p,
                          _I64, _I64, _I64, _T, _T, _T, ctypes.c_uint32] + _WS)
nsa_select_grad_ws = _declare("spa_nsa_select_grad_get_workspace_size", _ST,
                              [_T, _T, _T, _T, _T, _T, _T, _T, _A, _A, _T, ctypes.c_double,
                               _I64, _I64, _I64, ctypes.c_char_p, _I64, _T, _T, _T] + _WS)
msda_ws = _declare("spa_msda_get_workspace_size", _ST, [_T, _T, _T, _T, _T, _T] + _WS)
msda_grad_ws = _declare("spa_msda_grad_get_workspace_size", _ST,
                        [_T, _T, _T, _T, _T, _T, _T, _T, _T] + _WS)
_executor_run = _declare("spa_executor_run", _ST, _PHASE2)
_executor_reason = _declare("spa_executor_reason", ctypes.c_char_p,
                            [_P(Executor), _P(ctypes.c_char_p)])
_pool_start = _declare("spa_pool_start", ctypes.c_int, [_P(Pool), ctypes.c_uint])
_pool_runner = _declare("spa_pool_runner", Runner, [_P(Pool)])


def describe(t):
    """The spa_tensor of a CPU tensor, strides as they are (no copy)."""
    d = Tensor()
    d.dtype = DTYPES[t.dtype]
    r = t.dim()
    d.rank = r
    if r:
        d.dims[0:r] = t.shape
        d.strides[0:r] = t.stride()
    d.data = t.data_ptr()
    return d


def int_array(values):
    """A host int64 array (spa_int_array) and what keeps its memory alive."""
    buf = (ctypes.c_int64 * max(len(values), 1))(*values)
    return IntArray(ctypes.addressof(buf), len(values)), buf


# ---- threads: one pthread pool per thread count, kept for the process ----
_pools = {}
_pools_lock = threading.Lock()
_pools_pid = os.getpid()


def workers():
    """The threads runner() runs on: what the *_for phase 1 plans for."""
    return max(torch.get_num_threads(), 1)


def runner():
    """The runner for torch.get_num_threads() threads (None: this thread only)."""
    global _pools_pid
    n = torch.get_num_threads()
    if n <= 1:
        return None
    with _pools_lock:
        if _pools_pid != os.getpid():  # a forked child has none of the parent's workers
            _pools.clear()
            _pools_pid = os.getpid()
        entry = _pools.get(n)
        if entry is None:
            pool = Pool()
            if _pool_start(ctypes.byref(pool), n) != 0:
                raise RuntimeError("spattn: could not start %d threads" % n)
            entry = (pool, _pool_runner(ctypes.byref(pool)))
            _pools[n] = entry
    return ctypes.byref(entry[1])


# ---- workspace: from torch's allocator, kept per thread and grown on demand,
# so that repeated calls do not pay for fresh pages every time ----
_local = threading.local()


def workspace(size):
    if size == 0:
        return None
    buf = getattr(_local, "ws", None)
    if buf is None or buf.numel() < size:
        _local.ws = None  # the old one goes before the new one is taken
        buf = torch.empty(size, dtype=torch.uint8)
        _huge_pages(buf)
        _local.ws = buf
    return buf.data_ptr()


def release_workspace():
    """Frees this thread's cached workspace."""
    _local.ws = None


def reuse_freed_memory():
    """Opt-in, process-wide: glibc serves every block from its heap and keeps
    freed memory for reuse (mallopt M_MMAP_MAX 0, M_TRIM_THRESHOLD 2^31-1),
    as jemalloc and tcmalloc do by design. With glibc's default every block
    over 32 MB (a backward's gradient tensors at training shapes) is fresh
    memory from the kernel whose first touch costs a page fault per page, in
    every op, spattn's and torch's alike. Returns False where the C library is
    not glibc or refuses; nothing is changed then."""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_max = -1, -4
    return mallopt(m_mmap_max, 0) == 1 and mallopt(m_trim_threshold, 2**31 - 1) == 1


# Tests set this to fill new outputs with NaN (or 0x55 bytes), proving that
# every element is written by the library.
poison_outputs = False


# Fresh pages cost a fault each on first touch (about 0.7 ms per MB here,
# more than the op itself for the large gradients); large outputs ask for
# transparent huge pages, 512 times fewer faults where the kernel allows them
# (as torch 2.x does for its own large allocations).
_HUGE = 1 << 21
try:
    _madvise = ctypes.CDLL(None, use_errno=True).madvise
    _madvise.argtypes, _madvise.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
except (OSError, AttributeError):
    _madvise = None


def _huge_pages(t):
    nbytes = t.numel() * t.element_size()
    if _madvise is None or nbytes < 2 * _HUGE:
        return
    start = (t.data_ptr() + _HUGE - 1) & ~(_HUGE - 1)
    end = (t.data_ptr() + nbytes) & ~(_HUGE - 1)
    if end > start:
        _madvise(start, end - start, 14)  # MADV_HUGEPAGE; a refusal changes nothing


def new_output(shape, dtype):
    t = torch.empty(shape, dtype=dtype)
    _huge_pages(t)
    if poison_outputs:
        if dtype in FLOAT_DTYPES:
            t.fill_(float("nan"))
        else:
            t.fill_(0x55)
    return t


def call(op, phase1, args):
    """Phase 1 with args, then phase 2 (spa_executor_run) with a workspace and
    the runner; a refusal of either raises SpattnError naming its rule."""
    ex = Executor()
    ws_size = ctypes.c_uint64(0)
    st = phase1(*args, ctypes.byref(ws_size), ctypes.byref(ex))
    if st != SPA_OK:
        _refused(op, 1, st, ex)
    ws = workspace(ws_size.value)
    st = _executor_run(ws, ws_size.value, ctypes.byref(ex), runner())
    if st != SPA_OK:
        _refused(op, 2, st, ex)


def _refused(op, phase, status, ex):
    context = ctypes.c_char_p()
    rule = _executor_reason(ctypes.byref(ex), ctypes.byref(context))
    raise SpattnError(op, phase, status, (rule or b"").decode(), (context.value or b"").decode())


def check_tensor(name, t, rank=None, dtypes=FLOAT_DTYPES):
    """What ctypes cannot pass: a CPU strided tensor of a dtype the library
    knows, of the rank the output shapes are computed from."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("spattn: %s must be a torch.Tensor, got %s" % (name, type(t).__name__))
    if t.device.type != "cpu":
        raise ValueError("spattn: %s is on %s; spattn runs on CPU tensors only" % (name, t.device))
    if t.layout != torch.strided:
        raise ValueError("spattn: %s must be a strided (dense) tensor, not %s" % (name, t.layout))
    if t.dtype not in dtypes:
        raise TypeError("spattn: %s has dtype %s; expected one of %s"
                        % (name, t.dtype, ", ".join(str(d) for d in dtypes)))
    if rank is not None and t.dim() != rank:
        raise ValueError("spattn: %s must have %d dimensions, got shape %s"
                         % (name, rank, tuple(t.shape)))


# ---- the attention ops of the NSA layer; None where the loaded libspattn.so
# predates them (their functions then raise, naming the missing symbol) ----
def _declare_optional(name, restype, argtypes):
    try:
        return _declare(name, restype, argtypes)
    except AttributeError:
        return None


nsa_cattn_ws = _declare_optional(
    "spa_nsa_compress_attention_get_workspace_size_for", _ST,
    [_T, _T, _T, _T, _T, _A, _A, _A, ctypes.c_double, _I64, ctypes.c_char_p, _I64, _I64, _I64,
     _I64, _I64, _T, _T, _T, _T, ctypes.c_uint32] + _WS)
nsa_cattn_grad_ws = _declare_optional(
    "spa_nsa_compress_attention_grad_get_workspace_size", _ST,
    [_T, _T, _T, _T, _T, _T, _T, _T, _A, _A, ctypes.c_double, _I64, ctypes.c_char_p, _I64, _I64,
     _I64, _T, _T, _T] + _WS)
nsa_select_infer_ws = _declare_optional(
    "spa_nsa_select_infer_get_workspace_size", _ST,
    [_T, _T, _T, _T, _T, _A, _A, ctypes.c_double, _I64, _T] + _WS)
nsa_cattn_infer_ws = _declare_optional(
    "spa_nsa_compress_attention_infer_get_workspace_size", _ST,
    [_T, _T, _T, _T, _A, _A, _A, ctypes.c_double, _I64, _I64, _I64, _I64, _I64, _T, _T] + _WS)
dsa_li_ws = _declare_optional(
    "spa_dsa_lightning_indexer_get_workspace_size", _ST,
    [_T, _T, _T, _T, _A, _A, _I64, _I64, _T, _T] + _WS)
dsa_li_grad_ws = _declare_optional(
    "spa_dsa_lightning_indexer_grad_get_workspace_size", _ST,
    [_T, _T, _T, _T, _T, _A, _A, _I64, _T, _T, _T] + _WS)
dsa_sfa_ws = _declare_optional(
    "spa_dsa_sparse_attention_get_workspace_size", _ST,
    [_T, _T, _T, _T, _T, _T, _T, _A, _A, ctypes.c_double, _I64, _I64, _T, _T, _T] + _WS)
dsa_sfa_grad_ws = _declare_optional(
    "spa_dsa_sparse_attention_grad_get_workspace_size", _ST,
    [_T, _T, _T, _T, _T, _T, _A, _A, _T, _T, _T, _T, ctypes.c_double, _I64, _I64, _T, _T, _T, _T,
     _T] + _WS)
nsa_compress_cache_ws = _declare_optional(
    "spa_nsa_compress_with_cache_get_workspace_size", _ST,
    [_T, _T, _T, _T, _A, _I64, _I64, _T] + _WS)
swa_ws = _declare_optional(
    "spa_swa_get_workspace_size_for", _ST,
    [_T, _T, _T, _A, _I64, ctypes.c_double, _I64, ctypes.c_char_p, _I64, _I64, _T, _T, _T,
     ctypes.c_uint32] + _WS)
swa_grad_ws = _declare_optional(
    "spa_swa_grad_get_workspace_size", _ST,
    [_T, _T, _T, _T, _T, _T, _T, _A, _I64, ctypes.c_double, _I64, ctypes.c_char_p, _I64, _I64,
     _T, _T, _T] + _WS)
