"""Shared pieces of the benchmark drivers bench/run.py, bench/ddp.py, bench/gpt.py and the
others (standard library only: they run under Debian's /usr/bin/python3 and never import
torch themselves).

- the peers: dtrain, Debian's PyTorch 1.13 and the newest PyTorch from PyPI (bench/.venv);
- each PyTorch at its best (issue 39): what it has (torch_caps: its BLAS, a fused CPU Adam,
  torch.compile), its columns (Variant, torch_variants: every Adam, torch.compile,
  channels_last), the thread settings tried before a run (thread_settings), and mpirun's
  bindings, which PyTorch's DDP ranks are given too (mpirun_bindings);
- launching one measurement with BENCH_T0 (CLOCK_MONOTONIC seconds just before the
  process starts: both bench_train.c and torch_train.py count their start-up from it)
  and the thread count in every threading library's environment variable;
- the machine's 2-process/1-process parallel ratio (docs/NOTES.md: the 2 vCPUs sometimes
  deliver only about 1.1 CPUs of parallel work for minutes, so every scaling or 2-thread
  figure is printed beside it);
- medians and plain-text tables.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV_PYTHON = os.path.join(HERE, ".venv", "bin", "python")
DEBIAN_PYTHON = "/usr/bin/python3"
# Below this 2-process/1-process ratio the cores are not delivering two CPUs' worth of
# work and 2-thread or 2-rank figures are flagged (below 1.8).
PARALLEL_RATIO_MIN = 1.8
MODELS = {"mlp": "examples/mlp.ini", "convnet": "examples/convnet.ini"}


class Peer:
    """One implementation in the comparison: a label, how to run it, or why it cannot."""

    def __init__(self, key, label, python=None, missing=None):
        self.key = key
        self.label = label
        self.python = python
        self.missing = missing  # None when runnable, else a short reason for the table


def torch_version(python):
    """The torch version `python` imports, or None (a missing torch is not an error)."""
    if not os.path.exists(python):
        return None
    try:
        r = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def fused_adam_ok(python):
    """Whether the torch that `python` imports steps torch.optim.Adam(fused=True) on CPU
    (PyTorch 2.4 and later; Debian's 1.13 has no CPU fused Adam): a peer runs its fused
    variant only where it can."""
    probe = ("import torch; p = torch.zeros(4, requires_grad=True); p.sum().backward(); "
             "torch.optim.Adam([p], lr=1e-3, fused=True).step()")
    try:
        r = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


class AdamVariant:
    """A PyTorch peer (Peer) run with one Adam: "default" (torch.optim.Adam as it comes: on
    CPU its single-tensor loop) or "fused" (fused=True, PyTorch's fastest CPU Adam); its
    own key and label ("..., fused Adam"), and the peer's python and missing."""

    def __init__(self, peer, adam):
        self.peer, self.adam = peer, adam
        self.key = peer.key + ("_fused" if adam == "fused" else "")
        self.label = peer.label + (", fused Adam" if adam == "fused" else "")
        self.python, self.missing = peer.python, peer.missing


def adam_variants(peers, wanted):
    """Each peer with each Adam in `wanted` (["default", "fused"] or one of them); fused
    only where the peer's torch steps it (fused_adam_ok), else a note says so and the peer
    runs its default Adam (so that every installed peer has a row); a peer that is not
    installed gets one row that says so. Returns (variants, notes)."""
    out, notes = [], []
    for p in peers:
        if p.missing:
            out.append(AdamVariant(p, wanted[0]))
            continue
        mine = [v for v in wanted if v != "fused" or fused_adam_ok(p.python)]
        if len(mine) < len(wanted):
            notes.append("%s: no fused Adam on CPU: default Adam only" % p.label)
            if not mine:
                mine = ["default"]
        out += [AdamVariant(p, v) for v in mine]
    return out, notes


def adam_list(ap, text):
    """--torch-adam's value ("default", "fused" or "default,fused") as a list, or the
    parser's error."""
    out = text.split(",")
    if not out or any(v not in ("default", "fused") for v in out) or len(set(out)) < len(out):
        ap.error("--torch-adam takes default, fused or default,fused, not %r" % text)
    return out


def torch_peers():
    """Debian's PyTorch and the newest from PyPI, each marked "not installed" if absent."""
    peers = []
    v = torch_version(DEBIAN_PYTHON)
    peers.append(Peer("torch_debian", "PyTorch %s (Debian)" % (v or "1.13"), DEBIAN_PYTHON,
                      None if v else "not installed"))
    v = torch_version(VENV_PYTHON)
    peers.append(Peer("torch_pypi", "PyTorch %s (PyPI)" % (v or "newest"), VENV_PYTHON,
                      None if v else "not installed"))
    # A machine with its own PyTorch (a lent GPU machine's image, say) names it here; it
    # joins the comparison as a third peer.
    extra = os.environ.get("BENCH_TORCH_PYTHON")
    if extra:
        # A bare name (python3) is looked up on PATH, as a shell would: the peer is then
        # called by its path, which torch_version can check exists.
        extra = shutil.which(extra) or extra
        v = torch_version(extra)
        peers.append(Peer("torch_extra", "PyTorch %s (%s)" % (v or "?", extra), extra,
                          None if v else "not installed"))
    return peers


# The OPENBLAS_CORETYPE every measured process gets (init_blas): dtrain starts itself again
# with the right kernels where OpenBLAS falls back to old ones on a CPU it does not know
# (src/core/blas.c), and Debian's torch, which calls the same OpenBLAS for its linear layers,
# gets the same kernels so that the comparison is between the programs, not the detection.
BLAS_CORETYPE = None


def init_blas(build):
    """Asks sgemm_peak which OPENBLAS_CORETYPE dtrain runs with on this machine."""
    global BLAS_CORETYPE
    r = subprocess.run([os.path.join(build, "sgemm_peak"), "--coretype"], capture_output=True,
                       text=True)
    BLAS_CORETYPE = r.stdout.strip() or None if r.returncode == 0 else None
    return BLAS_CORETYPE


def coretype_note():
    if not BLAS_CORETYPE:
        return ""
    return "; every peer runs with OPENBLAS_CORETYPE=%s" % BLAS_CORETYPE


def thread_env(threads):
    """The environment of one measurement: every threading library limited to `threads`
    (Debian's torch calls OpenBLAS, whose thread count torch.set_num_threads may not
    reach), the OpenBLAS kernels dtrain uses (init_blas), launch time set by launch()."""
    env = dict(os.environ)
    if BLAS_CORETYPE:
        env["OPENBLAS_CORETYPE"] = BLAS_CORETYPE
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env["GLOO_SOCKET_IFNAME"] = "lo"
    return env


def launch(cmd, env, timeout):
    """Runs one measurement; returns its last stdout line parsed as JSON, or raises
    RuntimeError with the command and its stderr."""
    env = dict(env)
    t0 = time.monotonic()
    env["BENCH_T0"] = "%.9f" % t0
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError("%s: timed out after %d s" % (" ".join(cmd), timeout))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError("%s: exit %d\n%s" % (" ".join(cmd), r.returncode,
                                                 (r.stderr or r.stdout)[-2000:]))
    return dict(json.loads(lines[-1]), wall_s=time.monotonic() - t0)


def _spin_pair(cmd, env):
    """Two processes of cmd at once; their spin_calls_per_s summed."""
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    both = 0.0
    for p in procs:
        out, _ = p.communicate(timeout=60)
        if p.returncode != 0:
            raise RuntimeError("%s: exit %d" % (" ".join(cmd), p.returncode))
        both += json.loads(out.strip().splitlines()[-1])["spin_calls_per_s"]
    return both


def parallel_ratio(sgemm_peak, seconds=2.0, warm=1.0):
    """Throughput of the same single-threaded CPU-bound loop (sgemm_peak --spin) run in two
    processes at once, unbound, over one process alone: 2.0 is two full cores. Both cores
    spin for `warm` seconds first, unmeasured: on a lent machine just started the first
    reading was 1.61, and every reading after a 3-second spin 1.8 or more (docs/BENCHMARKS.md,
    "The GPT at 4-16 ranks")."""
    env = thread_env(1)
    if warm > 0:
        _spin_pair([sgemm_peak, "--spin", str(warm)], env)
    cmd = [sgemm_peak, "--spin", str(seconds)]
    one = launch(cmd, env, 60)["spin_calls_per_s"]
    return _spin_pair(cmd, env) / one


# --- PyTorch at its best (issue 39): what each PyTorch has, its variants (the columns), its
# thread settings. bench/run.py, bench/ddp.py and bench/gpt.py share them. ---

# Run in the peer's own Python: its version, which BLAS its matrix products call, whether its
# Adam has a fused CPU kernel (PyTorch 1.13's fused Adam is CUDA only) and torch.compile.
_TORCH_PROBE = r"""
import json, re, sys, torch
show = torch.__config__.show()
info = re.search(r"BLAS_INFO=(\w+)", show)
info = info.group(1) if info else "?"
torch.mm(torch.ones(64, 64), torch.ones(64, 64))  # the BLAS is mapped once it has been called
paths = {ln.split()[-1] for ln in open("/proc/self/maps") if len(ln.split()) >= 6}
mapped = sorted(m for m in paths
                if re.search(r"lib(open)?blas|libmkl|libblis", m) and "numpy" not in m)
if info == "mkl":
    v = re.search(r"Math Kernel Library Version ([0-9.]+)", show)
    blas = "MKL %s (linked into libtorch; BLAS_INFO=mkl)" % (v.group(1) if v else "?")
else:
    ob = [m for m in mapped if "libopenblas" in m]
    if ob:
        v = re.search(r"openblas\w*-r([0-9.]+)\.so", ob[0])
        blas = "OpenBLAS %s (%s; BLAS_INFO=%s)" % (v.group(1) if v else "?",
                                                   ob[0].rsplit("/", 1)[-1], info)
    else:
        blas = "%s (BLAS_INFO=%s)" % (", ".join(mapped) or "?", info)
p = torch.zeros(4, requires_grad=True)
p.grad = torch.ones(4)
fused = None
try:
    torch.optim.Adam([p], lr=1e-3, fused=True).step()
except Exception as e:  # 1.13: "FusedAdam requires all the params to be CUDA, floating point"
    fused = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
print(json.dumps({"version": torch.__version__, "blas": blas, "blas_info": info,
                  "fused_adam": fused, "compile": hasattr(torch, "compile")}))
"""


def torch_caps(peer):
    """What `peer`'s PyTorch has: {"version", "blas" (a short line: "MKL 2024.2 (...)",
    "OpenBLAS 0.3.21 (...)"), "fused_adam" (None where Adam(fused=True) steps on the CPU,
    else why not), "compile" (has torch.compile)}; {"error": ...} where the probe fails."""
    try:
        r = subprocess.run([peer.python, "-c", _TORCH_PROBE], capture_output=True, text=True,
                           timeout=300, env=thread_env(1))
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"error": (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]}
    return json.loads(lines[-1])


ADAM_NAMES = {"fused": "fused Adam", "foreach": "foreach Adam",
              "default": "default Adam (the single-tensor loop on CPU)"}


class Variant:
    """One column: a peer with an optimizer (fused, foreach, default), a mode (eager or
    torch.compile'd) and, for the ConvNet, a memory format (channels_last or PyTorch's
    default). dtrain is one column with none of these."""

    def __init__(self, peer, optim, compiled=False, layout=None):
        self.peer, self.optim, self.compiled, self.layout = peer, optim, compiled, layout
        self.key = peer.key if peer.key == "dtrain" else "%s/%s%s%s" % (
            peer.key, optim, "+compile" if compiled else "",
            "+" + layout if layout else "")
        version = peer.label.split(" (")[0].replace("PyTorch ", "").split("+")[0]
        self.version = version
        self.short = ".".join(version.split(".")[:2])  # "1.13" of "1.13.0a0"
        self.label = "dtrain" if peer.key == "dtrain" else "torch %s %s%s%s" % (
            version, "compile " if compiled else "", layout + " " if layout else "", optim)

    def mode(self, adam="Adam"):
        """How a claim names it: "eager, fused Adam", "torch.compile, foreach AdamW"."""
        if self.peer.key == "dtrain":
            return "dtrain"
        return "%s%s, %s %s" % ("torch.compile" if self.compiled else "eager",
                                " channels_last" if self.layout else "",
                                self.optim, adam)


def torch_variants(peer, caps, optims, compiled=True, layouts=()):
    """The columns of one PyTorch peer: ([Variant], {label: why a column is left out}).

    One eager column per optimizer in `optims`, in order. Where this PyTorch's Adam has no
    fused CPU kernel (caps["fused_adam"] says why), the fused column is left out, with the
    reason, and foreach takes its place if `optims` lacks it. Then, with `compiled`, the
    model under torch.compile (mode default) and, per layout in `layouts`, the eager model
    in that memory format, each with the peer's first optimizer that runs (fused, else
    foreach, else default); a PyTorch without torch.compile gets the reason instead."""
    version = Variant(peer, "x").version
    out, notes = [], {}
    optims = list(optims)
    if caps.get("fused_adam") and "fused" in optims:
        notes["torch %s fused" % version] = ("no fused Adam on the CPU (%s)" %
                                             caps["fused_adam"])
        optims = [o for o in optims if o != "fused"]
        if "foreach" not in optims:
            optims.insert(0, "foreach")
    for o in optims:
        out.append(Variant(peer, o))
    best = next((o for o in ("fused", "foreach", "default") if o in optims), optims[0])
    if compiled:
        if caps.get("compile"):
            out.append(Variant(peer, best, True))
        else:
            notes["torch %s compile" % version] = "torch %s has no torch.compile" % version
    for lay in layouts:
        out.append(Variant(peer, best, layout=lay))
    return out, notes


def thread_settings(threads):
    """A PyTorch's thread settings to try at `threads` (> 1): [(name, torch threads,
    environment)]: OpenMP (torch.set_num_threads, OMP_NUM_THREADS) and the BLAS
    (OPENBLAS_NUM_THREADS, MKL_NUM_THREADS) both at `threads`, the BLAS at 1, OpenMP at 1.
    Debian's PyTorch 1.13 calls OpenBLAS, which runs its own threads beside torch's OpenMP
    ones: with both at 2 on 2 cores it was its slowest (docs/BENCHMARKS.md, "Threads")."""
    every = thread_env(threads)
    if threads == 1:
        return [("OpenMP 1, BLAS 1", 1, every)]
    n = str(threads)
    return [("OpenMP %s, BLAS %s" % (n, n), threads, every),
            ("OpenMP %s, BLAS 1" % n, threads,
             dict(every, OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")),
            ("OpenMP 1, BLAS %s" % n, 1, dict(every, OMP_NUM_THREADS="1"))]


def fastest(cols, field):
    """The key of the fastest of `cols` ({key: summary with cols[key][field] a number or a
    {"median": ...}}), or None where none ran."""
    best = None
    for k, c in cols.items():
        v = c.get(field) if c else None
        v = v["median"] if isinstance(v, dict) else v
        if v is not None and (best is None or v > best[0]):
            best = (v, k)
    return best[1] if best else None


def mpirun_cmd(ranks, launcher=("mpirun", "--oversubscribe")):
    """The launcher's command for `ranks` ranks: its program, -np, then its flags."""
    return list(launcher[:1]) + ["-np", str(ranks)] + list(launcher[1:])


def mpirun_bindings(ranks, launcher=("mpirun", "--oversubscribe")):
    """The CPUs mpirun binds each of `ranks` ranks to, as it binds dtrain's (the same
    launcher and flags): [sorted CPU list per rank]. Open MPI binds each rank to a core
    while there are cores enough and leaves an oversubscribed job unbound (every CPU). Each
    rank writes its own file (the ranks' stdout lines can interleave)."""
    with tempfile.TemporaryDirectory(prefix="dtrain-bind-") as d:
        code = ("import os; open(os.path.join(%r, os.environ.get('OMPI_COMM_WORLD_RANK', '0')), "
                "'w').write(','.join(map(str, sorted(os.sched_getaffinity(0)))))" % d)
        cmd = mpirun_cmd(ranks, launcher) + [DEBIAN_PYTHON, "-c", code]
        r = subprocess.run(cmd, env=thread_env(1), capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError("%s: exit %d\n%s" % (" ".join(cmd), r.returncode,
                                                     r.stderr[-2000:]))
        got = sorted(os.listdir(d), key=lambda n: int(n) if n.isdigit() else -1)
        if got != [str(i) for i in range(ranks)]:
            raise RuntimeError("%s: ranks %s reported, not 0..%d" % (" ".join(cmd), got,
                                                                     ranks - 1))
        out = []
        for i in range(ranks):
            with open(os.path.join(d, str(i))) as f:
                out.append([int(c) for c in f.read().split(",")])
    return out


def bindings_text(binds):
    """"rank 0 on CPU 0, rank 1 on CPU 1", or "unbound" where every rank has every CPU."""
    every = sorted(set(c for b in binds for c in b))
    if all(b == every for b in binds) and len(every) == (os.cpu_count() or len(every)):
        return "unbound"
    return ", ".join("rank %d on CPU %s" % (r, ",".join(map(str, b)))
                     for r, b in enumerate(binds))


def runs_note(n, reps):
    """" (2 runs)" beside a median of fewer runs than the repetitions asked (a run failed)."""
    return "" if n >= reps else " (%d run%s)" % (n, "" if n == 1 else "s")


def dtrain_blas(results):
    """The BLAS kernels dtrain's runs reported (bench_train's "blas"), for the machine line."""
    for r in results:
        if r.get("blas"):
            return r["blas"]
    return "unknown"


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(title, header, rows):
    """A plain-text table: header and rows are lists of strings."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    out = [title]
    out.append("  ".join(str(h).rjust(w) if i else str(h).ljust(w)
                         for i, (h, w) in enumerate(zip(header, widths))))
    out.append("  ".join("-" * w for w in widths))
    for r in rows:
        out.append("  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(out) + "\n"


class Recorder:
    """Appends every measurement to bench/out/<name>-<time>.jsonl as it arrives, so that an
    interrupted run keeps what it measured."""

    def __init__(self, name):
        os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
        self.path = os.path.join(HERE, "out", "%s-%s.jsonl" %
                                 (name, time.strftime("%Y%m%d-%H%M%S")))
        self.f = open(self.path, "w")

    def write(self, obj):
        self.f.write(json.dumps(obj) + "\n")
        self.f.flush()

    def close(self):
        self.f.close()


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --- Drivers of `dtrain train` itself (bench/compress.py, bench/ps.py): a command that prints
# text rather than one JSON object, the --metrics file it writes, the config it reads. ---

def run_text(cmd, env, timeout):
    """Runs `cmd` (from the repository root) to its end; returns (stdout, wall seconds from
    just before the start to the exit), or raises RuntimeError with the command and the end
    of its stderr (stdout where stderr is empty), as launch() does."""
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError("%s: timed out after %d s" % (" ".join(cmd), timeout))
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s" % (" ".join(cmd), r.returncode,
                                                 (r.stderr or r.stdout)[-2000:]))
    return r.stdout, wall


def read_metrics(path):
    """Summary of a `dtrain train --metrics FILE` (one JSON object per line, rank 0's):

    test_accuracy  the last "epoch" record's (None where it has none or it is null);
    train_s        the sum of the epoch records' epoch_s (training only: dtrain times an epoch
                   before its evaluation);
    samples        samples trained, the sum of samples_per_s x epoch_s (dtrain computes
                   samples_per_s as the epoch's samples over epoch_s, so this is exact, and
                   counts a partial last batch or a --max-steps stop as they ran);
    steps          the last epoch record's "steps" (optimizer steps since the start);
    step_s         per epoch, epoch_s over that epoch's steps: its mean step time (the
                   metrics carry no per-step times);
    comm           the "comm" record (written at the end of a run), or None;
    records        every record, as read.
    Raises RuntimeError when the file is missing or has no epoch record."""
    try:
        with open(path) as f:
            records = [json.loads(ln) for ln in f if ln.strip()]
    except (OSError, ValueError) as e:
        raise RuntimeError("metrics %s: %s" % (path, e))
    epochs = [r for r in records if r.get("event") == "epoch" and r.get("epoch_s") is not None]
    if not epochs:
        raise RuntimeError("metrics %s: no epoch record" % path)
    comm = [r for r in records if r.get("event") == "comm"]
    step_s, before = [], 0
    for e in epochs:
        n = e.get("steps", 0) - before
        before = e.get("steps", before)
        if n > 0:
            step_s.append(e["epoch_s"] / n)
    return {
        "test_accuracy": epochs[-1].get("test_accuracy"),
        "train_s": sum(e["epoch_s"] for e in epochs),
        "samples": sum(e.get("samples_per_s", 0.0) * e["epoch_s"] for e in epochs),
        "steps": epochs[-1].get("steps"),
        "step_s": step_s,
        "comm": comm[-1] if comm else None,
        "records": records,
    }


def ini_value(path, section, key, default=None):
    """One value of a dtrain config file ([section] then `key = value`; '#' or ';' start a
    comment; indented lines continue a list and are not read here), as a string, or
    `default` where the file does not set it. Relative paths are from the repository root."""
    current = None
    with open(os.path.join(ROOT, path)) as f:
        for line in f:
            text = line.split("#", 1)[0].split(";", 1)[0].rstrip()
            if not text or text[0] in " \t":
                continue
            if text.startswith("[") and text.endswith("]"):
                current = text[1:-1].strip()
            elif current == section and "=" in text:
                k, v = text.split("=", 1)
                if k.strip() == key:
                    return v.strip()
    return default


def failure_reason(error):
    """The line of a failure's text (RuntimeError from launch or run_text) that says why: a
    Python exception's last line ("RuntimeError: ..."), else the program's own message
    ("dtrain train: unknown option ..."), rather than mpirun's abort banner."""
    lines = [ln.strip() for ln in error.splitlines()[1:] if ln.strip()]
    for ln in reversed(lines):
        head = ln.split(":", 1)[0]
        if ":" in ln and " " not in head and head.endswith(("Error", "Exception")):
            return ln
    dtrain = [ln for ln in lines if ln.startswith(("dtrain", "bench_tp", "bench_train"))]
    for ln in dtrain:
        if "warning" not in ln:
            return ln
    if dtrain:
        return dtrain[0]
    for ln in reversed(lines):
        if not ln.startswith("-") and "mpirun" not in ln and "Process name" not in ln:
            return ln
    return error.splitlines()[0] if error else "?"


# --- The Flower peer (bench/fedavg.py): flwr[simulation] with the newest torch, in bench/.venv
# beside the newest PyTorch (bench/fedavg.sh installs it). ---

def flower_peer(python=VENV_PYTHON):
    """Flower in `python`: a Peer labelled "Flower 1.42.0 (PyTorch 2.x, Ray 2.y)", or marked
    "not installed" where flwr with its Message API (flwr.serverapp.strategy, 1.21 and
    later), Ray or torch does not import (a missing Flower is not an error)."""
    probe = ("import flwr, flwr.serverapp.strategy, flwr.simulation, ray, torch; "
             "print(flwr.__version__, torch.__version__, ray.__version__)")
    if os.path.exists(python):
        try:
            r = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                               timeout=300)
            words = r.stdout.split() if r.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired):
            words = []
        if len(words) == 3:
            return Peer("flower", "Flower %s (PyTorch %s, Ray %s)" % tuple(words), python)
    return Peer("flower", "Flower", python, "not installed")


def build_tools(build_dir, script):
    """The build directory (absolute) and its sgemm_peak, exiting with a message naming
    `script` when dtrain or sgemm_peak is not built there."""
    build = os.path.abspath(build_dir)
    sgemm_peak = os.path.join(build, "sgemm_peak")
    for exe in (os.path.join(build, "dtrain"), sgemm_peak):
        if not os.access(exe, os.X_OK):
            sys.exit("%s: %s missing: build first" % (script, exe))
    return build, sgemm_peak


# --- What a `dtrain train --trace FILE` run communicated (bench/gpt_layouts.py, beside
# `dtrain plan --json`'s rows). ---

# The group a rank's collective runs in, by the grid's coordinates (docs/USER_GUIDE.md: world
# rank = tp_rank + tp (dp_rank + dp pp_rank)): the members of one "tp" group share dp and pp,
# and so on; the world and any other name span every rank that names it.
GROUP_KEYS = {"tp": lambda t, d, p: (d, p), "dp": lambda t, d, p: (t, p),
              "pp": lambda t, d, p: (t, d), "embedding group": lambda t, d, p: (t, d)}


def trace_after_last(path, dp=1, tp=1, pp=1, first_step=2):
    """Per rank, each group's collectives timed from the last member's arrival to the first
    member's completion, summed per step of the trace from `first_step` on: {rank: {group: ms
    per step}}. A collective's traced time holds the wait for its slowest member; what is
    left after the last one arrives is the transfer and the reduction, which the plan's link
    model predicts (with blocking collectives: a run with parallel.overlap=off, or a
    non-blocking call's end is when a progress call saw it done). The k-th collective of a
    group on each member is the same operation (collectives are called in one order by every
    member), which is checked: a group whose members' calls differ in number, name or size
    reads None, as does a trace that dropped events. Sends and receives are left out: the
    trace does not name their peer. The ranks' clocks agree as well as the trace's starting
    barrier released them (microseconds on one machine), which bounds the resolution: a
    collective of a few microseconds can read 0."""
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    dropped = doc.get("otherData", {}).get("dropped_events", 0)
    steps, calls = {}, {}
    for e in events:
        if e.get("cat") == "step" and e["args"]["step"] >= first_step:
            steps.setdefault(e["pid"], set()).add(e["args"]["step"])
        elif e.get("cat") == "comm" and e["name"] not in ("send", "recv"):
            calls.setdefault((e["args"]["group"], e["pid"]), []).append(e)
    insts = {}
    for (g, rank), evs in calls.items():
        evs.sort(key=lambda e: e["ts"])
        t, d, p = rank % tp, (rank // tp) % dp, rank // (tp * dp)
        key = GROUP_KEYS[g](t, d, p) if g in GROUP_KEYS else ()
        insts.setdefault((g, key), {})[rank] = evs
    out = {}
    for (g, _), members in insts.items():
        lists = list(members.values())
        sums = {r: 0.0 for r in members}
        ok = not dropped and len({len(v) for v in lists}) == 1
        for k in range(len(lists[0]) if ok else 0):
            evs = [v[k] for v in lists]
            if len({(e["name"], e["args"]["bytes"]) for e in evs}) != 1:
                ok = False
                break
            if evs[0]["args"].get("step", 0) < first_step:
                continue
            last = max(e["ts"] for e in evs)
            done = min(e["ts"] + e["dur"] for e in evs)
            for r in members:
                sums[r] += max(0.0, done - last) / 1e3 / (len(steps.get(r, ())) or 1)
        for r in members:
            out.setdefault(r, {})[g] = sums[r] if ok else None
    return out


def trace_comm(path, first_step=2):
    """Per rank, the communication of the trace's steps from `first_step` on (step 1 and the
    set-up before it left out): {rank: {group: {"bytes": per step, "ms": per step,
    "calls": per step}}}, the groups as the trace names them ("tp", "pp", "dp", "embedding
    group", ...; "world" is the trainer's own small exchanges). A collective's or receive's
    time includes waiting for the other ranks to arrive."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    steps = {}
    for e in events:
        if e.get("cat") == "step" and e["args"]["step"] >= first_step:
            steps.setdefault(e["pid"], set()).add(e["args"]["step"])
    out = {}
    for e in events:
        if e.get("cat") != "comm" or e["args"].get("step", 0) < first_step:
            continue
        n = len(steps.get(e["pid"], ())) or 1
        g = out.setdefault(e["pid"], {}).setdefault(e["args"]["group"],
                                                    {"bytes": 0.0, "ms": 0.0, "calls": 0.0})
        g["bytes"] += e["args"]["bytes"] / n
        g["ms"] += e["dur"] / 1e3 / n
        g["calls"] += 1.0 / n
    return out
