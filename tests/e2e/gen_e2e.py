#!/usr/bin/python3
"""Generates the end-to-end references with Debian's PyTorch 1.13.

Samples in file order from Fashion-MNIST's training set scaled as (x/255 - 0.5)/0.5,
batch 64, PyTorch's own initial weights (<model>_init.safetensors, loaded by dtrain through
--init-weights), the loss of every step in <model>_losses.safetensors (F64). Run by
`make refs`; `make test` only reads the files.

  mlp, convnet          the seeds' MLP (20 Adam steps, cross-entropy) and ConvNet (5 Adam
                        steps, NLL of log_softmax), dropout p = 0 (*_nodrop.ini).
  mlp_sgd, convnet_sgd  the same models and initial weights with dropout on and SGD with
                        momentum (*_sgd.ini): Adam's update barely notices a gradient that is
                        too large or too small by a constant factor, SGD's does. PyTorch's
                        dropout RNG cannot be matched, so these runs apply dtrain's own masks
                        (Philox4x32-10, reimplemented below from src/core/rng.c and
                        src/nn/dropout.c); the losses file also holds some of those masks,
                        which test_e2e checks against dtrain's dropout layer.

convnet_init.safetensors also carries, in its metadata, probe values of the weights at
given 4-D indices and the model's log-probabilities for a synthetic input
(tests/unit/test_weights_convnet.c checks dtrain's layouts with them).
"""
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = "/usr/share/datasets/fashion-mnist"
BATCH = 64


def write_safetensors(path, tensors, metadata=None):
    """The safetensors layout: u64 LE header length, JSON header, raw LE data."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        t = t.detach().contiguous()
        dtype = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64",
                 torch.uint8: "U8"}[t.dtype]
        raw = t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def read_safetensors(path):
    """The F32 tensors of a safetensors file, as torch tensors."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        assert e["dtype"] == "F32", (path, name, e["dtype"])
        b, end = e["data_offsets"]
        buf = bytearray(raw[8 + n + b:8 + n + end])
        out[name] = torch.frombuffer(buf, dtype=torch.float32).reshape(e["shape"]).clone()
    return out


def load_images(n):
    with gzip.open(os.path.join(DATA, "train-images-idx3-ubyte.gz")) as f:
        raw = f.read()
    x = np.frombuffer(raw, dtype=np.uint8, offset=16)[: n * 784].reshape(n, 1, 28, 28)
    with gzip.open(os.path.join(DATA, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)[:n]
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.5) / 0.5
    return x, torch.from_numpy(y.astype(np.int64))


# ---- dtrain's dropout masks --------------------------------------------------------------

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)  # Random123's Philox4x32 constants
W0, W1 = 0x9E3779B9, 0xBB67AE85
STREAM_DROPOUT = 2  # DT_RNG_STREAM_DROPOUT (include/dtrain/rng.h)


def philox4x32(seed, c0, c1, c2, c3):
    """Philox4x32-10 (Random123's philox4x32, dtrain's dt_philox) on uint32 arrays of
    counters under the 64-bit key `seed` (low word first); returns the four output words."""
    c = [np.asarray(v, dtype=np.uint64) & np.uint64(0xFFFFFFFF) for v in (c0, c1, c2, c3)]
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    lo32 = np.uint64(0xFFFFFFFF)
    for r in range(10):
        if r > 0:  # the key is bumped before every round but the first
            k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
        p0, p1 = M0 * c[0], M1 * c[2]  # 32 x 32 -> 64 bits: exact in uint64
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & lo32,
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & lo32]
    return c


def check_philox():
    # Random123's known-answer vectors (kat_vectors, philox4x32 10 rounds): dt_philox gives
    # the same words (checked with a small C program calling it).
    kat = [((0, 0, 0, 0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
           ((0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
            (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
           ((0x299F31D0A4093822, 0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for (seed, *ctr), want in kat:
        got = tuple(int(w) for w in philox4x32(seed, *ctr))
        assert got == want, ("philox4x32", hex(seed), [hex(v) for v in got])


def dropout_keep(seed, epoch, positions, layer, n, p):
    """dtrain's keep mask (src/nn/dropout.c) of layer `layer` (its index in the model's
    layer list) for the samples at `positions` of epoch `epoch`'s permutation: element e of
    a sample is kept when u01f(word e%4 of Philox(seed; epoch, pos, stream<<24 | layer,
    e/4)) >= (float)p, u01f(w) = (w >> 8) / 2^24. Returns bool (len(positions), n)."""
    groups = (n + 3) // 4
    pos = np.asarray(positions, dtype=np.uint64)[:, None]
    e4 = np.arange(groups, dtype=np.uint64)[None, :]
    words = philox4x32(seed, np.full_like(e4, epoch & 0xFFFFFFFF), pos + 0 * e4,
                       np.uint64((STREAM_DROPOUT << 24) | layer), e4 + 0 * pos)
    w = np.stack(words, axis=-1).reshape(len(positions), groups * 4)[:, :n]
    # Both sides are exact in double: (w >> 8) / 2^24 has 24 bits, p is the float32 dtrain uses.
    return (w >> np.uint64(8)).astype(np.float64) / 16777216.0 >= float(np.float32(p))


class MaskedDropout(nn.Module):
    """torch.nn.Dropout(p) in training, with dtrain's masks: x * noise, noise = keep *
    (float)(1/(1-p)) as dtrain's forward and backward use it. set_batch picks the masks."""

    def __init__(self, p, layer, seed):
        super().__init__()
        self.p, self.layer, self.seed = p, layer, seed
        self.scale = np.float32(1.0 / (1.0 - p))
        self.keep = None
        self.kept = []  # keep fraction of each batch, checked against 1 - p

    def set_batch(self, epoch, positions, numel):
        self.keep = dropout_keep(self.seed, epoch, positions, self.layer, numel, self.p)
        self.kept.append(self.keep.mean())

    def forward(self, x):
        if not self.training:
            return x
        noise = torch.from_numpy(self.keep.astype(np.float32) * self.scale)
        return x * noise.reshape(x.shape).to(x.dtype)


# ---- models ------------------------------------------------------------------------------

def mlp(p=0.0, seed=0):
    """torch.nn.Sequential(Flatten, Linear(784, 128), ReLU, Dropout(p), Linear(128, 10)):
    the dropout is layer 3 of dtrain's list."""
    drop = MaskedDropout(p, 3, seed) if p > 0 else nn.Dropout(0.0)
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), drop,
                         nn.Linear(128, 10))


class ConvNet(nn.Module):
    """The seeds' ConvNet, with the module names its state_dict uses. Dropout p1 after the
    max-pool (layer 5 of dtrain's list) and p2 after fc1's ReLU (layer 9)."""

    def __init__(self, p1=0.0, p2=0.0, seed=0):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)
        self.drop1 = MaskedDropout(p1, 5, seed) if p1 > 0 else None
        self.drop2 = MaskedDropout(p2, 9, seed) if p2 > 0 else None

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        x = torch.max_pool2d(x, 2)
        if self.drop1 is not None:
            x = self.drop1(x)
        x = torch.relu(self.fc1(torch.flatten(x, 1)))
        if self.drop2 is not None:
            x = self.drop2(x)
        return torch.log_softmax(self.fc2(x), dim=1)


def dropouts(m):
    """(module, elements per sample) of every MaskedDropout in m, in layer order."""
    sizes = {3: 128, 5: 64 * 12 * 12, 9: 128}
    found = [d for d in m.modules() if isinstance(d, MaskedDropout)]
    return [(d, sizes[d.layer]) for d in sorted(found, key=lambda d: d.layer)]


# ---- the runs ----------------------------------------------------------------------------

def train(m, loss_fn, opt, steps, x, y):
    """steps optimizer steps on the samples in file order (positions = indices, epoch 0)."""
    losses = []
    for s in range(steps):
        xb, yb = x[s * BATCH:(s + 1) * BATCH], y[s * BATCH:(s + 1) * BATCH]
        for d, numel in dropouts(m):
            d.set_batch(0, range(s * BATCH, (s + 1) * BATCH), numel)
        opt.zero_grad()
        loss = loss_fn(m(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def init_weights(model, seed):
    """PyTorch's initial weights of model() under torch.manual_seed(seed)."""
    torch.manual_seed(seed)
    return {k: v.clone() for k, v in model().state_dict().items()}


def probe_input():
    """The synthetic (1, 1, 28, 28) input of the layout probe: x[h][w] = ((28h + w) * 37
    mod 101) / 50 - 1 as float32 (every value the same float in C and numpy)."""
    k = (np.arange(784) * 37) % 101
    return torch.from_numpy((k / 50.0 - 1.0).astype(np.float32).reshape(1, 1, 28, 28))


def layout_probes(init):
    """Metadata for tests/unit/test_weights_convnet.c: weights at 4-D (and 2-D) indices whose
    coordinates differ (conv1's C_in is 1: its index is 0), so that reading a tensor with two
    dimensions exchanged picks another value, and the model's log-probabilities for
    probe_input() computed in float64 from these float32 weights (a layout that dtrain's
    kernels read differently from PyTorch's changes them by 2e-2 to 7e-2)."""
    idx = {"conv1.weight": [(31, 0, 2, 1), (5, 0, 1, 2), (20, 0, 2, 1)],
           "conv2.weight": [(37, 5, 2, 0), (2, 31, 0, 1), (63, 17, 1, 2), (40, 2, 1, 0)],
           "conv1.bias": [(17,)], "conv2.bias": [(50,)],
           "fc1.weight": [(127, 9000), (3, 4321)], "fc1.bias": [(100,)],
           "fc2.weight": [(9, 100), (0, 127)], "fc2.bias": [(7,)]}
    items = []
    for name, points in idx.items():
        for i in points:
            v = float(init[name][i])
            items.append("%s[%s]=%.9g" % (name, ",".join(str(j) for j in i), v))
    m = ConvNet().double()
    m.load_state_dict({k: v.double() for k, v in init.items()})
    m.eval()
    with torch.no_grad():
        out = m(probe_input().double())[0]
    return {"probe_weights": ";".join(items),
            "probe_input": "x[0][h][w] = float32(((28*h + w)*37 mod 101)/50 - 1)",
            "probe_output": ",".join("%.17g" % v for v in out.tolist())}


def run(name, model, loss_fn, steps, seed, metadata=None):
    """The Adam runs with dropout off: writes <name>_init and <name>_losses."""
    init = init_weights(model, seed)
    m = model()
    m.load_state_dict(init)
    x, y = load_images(steps * BATCH)
    losses = train(m, loss_fn, torch.optim.Adam(m.parameters(), lr=1e-3), steps, x, y)
    meta = {"format": "pt", "producer": "torch " + torch.__version__}
    meta.update(metadata(init) if metadata else {})
    write_safetensors(os.path.join(HERE, name + "_init.safetensors"), init, meta)
    write_safetensors(os.path.join(HERE, name + "_losses.safetensors"),
                      {"losses": torch.tensor(losses, dtype=torch.float64)},
                      {"steps": str(steps), "batch": str(BATCH)})
    print(name, ["%.6f" % v for v in losses])


def run_sgd(name, init_name, model, loss_fn, steps, seed, lr, momentum):
    """A run of model(seed) with dtrain's dropout masks (train.seed = seed) and SGD: starts from
    <init_name>_init.safetensors (PyTorch's weights, written by the Adam run) and writes
    <name>_losses with the losses, the run's settings, and the masks of every dropout layer
    for a few positions (mask_positions, mask_layer<index>) that test_e2e compares with
    dtrain's."""
    init = read_safetensors(os.path.join(HERE, init_name + "_init.safetensors"))
    x, y = load_images(steps * BATCH)
    runs = {}
    for dtype in (torch.float32, torch.float64):
        m = model(seed)
        m.load_state_dict(init)
        m.to(dtype)
        opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=momentum)
        runs[dtype] = (train(m, loss_fn, opt, steps, x.to(dtype), y), m)
    losses, m = runs[torch.float32]
    # The masks are Bernoulli(1 - p): every batch keeps close to 1 - p of its elements
    # (64 x 128 elements: a standard deviation of 0.5% at p = 0.2; 64 x 9216: 0.05% at 0.25).
    for d, numel in dropouts(m):
        sd = np.sqrt(d.p * (1 - d.p) / (BATCH * numel))
        worst = max(abs(k - (1 - d.p)) for k in d.kept)
        assert worst < 5 * sd, (name, d.layer, d.p, worst, sd)
        print("%s: dropout layer %d p %.2f: keep fraction within %.4f of %.2f (%.1f sd)"
              % (name, d.layer, d.p, worst, 1 - d.p, worst / sd))
    rel = max(abs(a - b) / abs(b) for a, b in zip(losses, runs[torch.float64][0]))
    print("%s: float32 vs float64 PyTorch losses: max rel %.2e" % (name, rel))
    positions = [0, 1, 63, 64, 200, steps * BATCH - 1]
    tensors = {"losses": torch.tensor(losses, dtype=torch.float64),
               "mask_positions": torch.tensor(positions, dtype=torch.int64)}
    for d, numel in dropouts(m):
        keep = dropout_keep(d.seed, 0, positions, d.layer, numel, d.p)
        tensors["mask_layer%d" % d.layer] = torch.from_numpy(keep.astype(np.uint8))
    write_safetensors(os.path.join(HERE, name + "_losses.safetensors"), tensors,
                      {"steps": str(steps), "batch": str(BATCH), "seed": str(seed),
                       "init": init_name + "_init.safetensors", "optim": "sgd",
                       "lr": repr(lr), "momentum": repr(momentum),
                       "float64_max_rel": "%.3g" % rel})
    print(name, ["%.6f" % v for v in losses])


def main():
    torch.set_num_threads(1)
    check_philox()
    run("mlp", mlp, nn.CrossEntropyLoss(), 20, 1)
    run("convnet", ConvNet, nn.NLLLoss(), 5, 2, metadata=layout_probes)
    # The settings must equal tests/e2e/mlp_sgd.ini and convnet_sgd.ini (test_e2e checks
    # the seed and step count against the files' metadata).
    run_sgd("mlp_sgd", "mlp", lambda seed: mlp(0.2, seed), nn.CrossEntropyLoss(), 20, 1,
            lr=0.05, momentum=0.9)
    run_sgd("convnet_sgd", "convnet", lambda seed: ConvNet(0.25, 0.5, seed), nn.NLLLoss(), 5,
            2, lr=0.05, momentum=0.9)
    return 0


if __name__ == "__main__":
    sys.exit(main())
