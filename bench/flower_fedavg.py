#!/usr/bin/env python3
"""Flower's FedAvg on the same clients as a `dtrain train --strategy fedavg` run: the peer of
bench/fedavg.py, run by bench/.venv/bin/python (flwr[simulation] and the newest torch).

What it runs (flwr >= 1.21, whose Message API this uses; the script records the version):
  - a ServerApp whose main() subclasses flwr.serverapp.strategy.FedAvg (the Message-API
    FedAvg: the new model is the average of the clients' models weighted by their
    "num-examples", as McMahan et al.'s FederatedAveraging and dtrain) and calls its start();
  - a ClientApp whose @train trains the same MLP as bench/torch_train.py (torch_train.build:
    Flatten, Linear(784, 128), ReLU, Dropout(0.2), Linear(128, 10), cross-entropy, PyTorch's
    default initialisation) from the round's global model with plain SGD at --lr (no momentum,
    no weight decay), E local epochs over its samples in batches of B (the last one partial,
    as dtrain), reshuffled every epoch by torch's own generator keyed by (seed, round,
    client, epoch); the same conversion of the pixels, (x/255 - 0.5)/0.5;
  - both under flwr.simulation.run_simulation: Flower's Simulation Runtime on its Ray backend,
    one virtual SuperNode per client, --parallel ClientApps at a time (Ray actors of one CPU
    each, torch limited to one thread). run_simulation is marked deprecated in favour of the
    `flwr run` command, which runs the same Simulation Runtime from a packaged app; the
    Python entry point is what a script can drive.

The same partitions, sample for sample: the spec (written by bench/fedavg.py) carries
"client_of", every training sample's client as dtrain's dt_fed_assign gives it; client c's
samples are those with client_of == c, in index order. (Without client_of, from the older
"histogram" alone: client c's samples of class k are the next hist[c][k] of class k in index
order, the same class counts but not the same ids.) Each SuperNode holds one partition (its
"partition-id"); the server asks every node for its partition-id once before round 1 (a
query message, not timed).

The same initial weights: the spec's "init_weights" is dtrain's initial MLP (a safetensors
file, tensors named as the PyTorch Sequential's: 1.weight, 1.bias, 4.weight, 4.bias); the
server loads it into its model before round 1.

The same sampling: the spec carries dtrain's sampled clients of every round (the "clients"
of its epoch records); configure_train sends round t's training messages to exactly the
nodes holding those partitions, instead of FedAvg's random sample.

Measured, from the server's side:
  round_s   wall clock from configure_train (the round's messages built) to the end of
            aggregate_train (the new global model): sending the model, the clients' local
            training in the Ray actors, the replies and the weighted average. Evaluation is
            not in it, as dtrain's epoch_s excludes its evaluation.
            Ray's start, the actors' creation and their loading of the training set happen
            before round 1 (during the partition query); the first round still carries each
            actor's first use of torch's training path, which the median over the rounds
            (bench/fedavg.py) does not see.
  eval_s    the server-side evaluate_fn on the 10,000 test images after the round.
  test_accuracy / test_loss after every round (round 0: the initial model).

Writes one JSON object to --out (the per-round figures, versions and the API used).

Usage: bench/.venv/bin/python bench/flower_fedavg.py --spec SPEC.json --out RESULT.json
       [--parallel N] [--data DIR]
SPEC.json: {"histogram": [[n_c0, ..., n_c9], ...], "client_of": [c_0, ..., c_59999],
            "rounds": [[client, ...], ...], "local_epochs": E, "lr": X, "batch": B, "seed": S,
            "init_weights": "INIT.safetensors"}
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import torch_train  # noqa: E402

# The spec's path reaches the Ray actors through the environment (they inherit the driver's).
SPEC_ENV = "DTRAIN_FEDAVG_SPEC"
DATA_ENV = "DTRAIN_FEDAVG_DATA"
MIN_FLWR = "1.21"
TRAIN_TIMEOUT_S = 3600

try:
    import flwr  # noqa: F401  (its __version__, read through sys.modules)
    from flwr.app import (ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord,
                          RecordDict)
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp
    from flwr.serverapp.strategy import FedAvg
    FLWR_ERROR = None
except ImportError as e:  # an older flwr: say so in the result rather than a traceback
    FLWR_ERROR = "flwr %s: %s (needs flwr[simulation] >= %s, the Message API)" % (
        getattr(sys.modules.get("flwr"), "__version__", "?"), e, MIN_FLWR)
    FedAvg = object


# --- data, as each process (the server, every Ray actor) loads it once ---

_CACHE = {}


def load_split(data_dir, prefix):
    """uint8 images (N, 1, 28, 28) and int64 labels of one IDX pair ("train" or "t10k")."""
    if prefix == "train":
        return torch_train.load(data_dir)
    with gzip.open(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64))


def partitions(labels, histogram):
    """Client c's sample indices: for each class k, the next histogram[c][k] samples of class
    k in index order after clients 0..c-1's. Raises ValueError when the histogram does not
    add up to the training set's class counts."""
    y = labels.numpy()
    classes = len(histogram[0])
    by_class = [np.nonzero(y == k)[0] for k in range(classes)]
    for k in range(classes):
        want = sum(h[k] for h in histogram)
        if want != len(by_class[k]):
            raise ValueError("partition histogram: class %d has %d samples over the clients, "
                             "the training set %d" % (k, want, len(by_class[k])))
    taken = [0] * classes
    parts = []
    for h in histogram:
        mine = []
        for k in range(classes):
            mine.append(by_class[k][taken[k]:taken[k] + h[k]])
            taken[k] += h[k]
        parts.append(torch.from_numpy(np.concatenate(mine).astype(np.int64)))
    return parts


def partitions_of(client_of, clients):
    """Client c's sample indices, ascending: the samples whose client_of is c."""
    owner = np.asarray(client_of, dtype=np.int64)
    return [torch.from_numpy(np.nonzero(owner == c)[0].astype(np.int64)) for c in range(clients)]


def load_safetensors(path):
    """{name: float32 tensor} of a safetensors file of F32 tensors (the standard library's
    reader: the format is an 8-byte header length, a JSON header, the data)."""
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen])
    header.pop("__metadata__", None)
    data, out = blob[8 + hlen:], {}
    for name, e in header.items():
        if e["dtype"] != "F32":
            raise ValueError("%s: tensor %s is %s, not F32" % (path, name, e["dtype"]))
        b, end = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[b:end]), dtype=torch.float32).reshape(e["shape"])
    return out


def read_labels(data_dir):
    """The training set's labels alone (the server checks the spec against them)."""
    with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz")) as f:
        return torch.from_numpy(np.frombuffer(f.read(), dtype=np.uint8, offset=8).astype(np.int64))


def reason(text):
    """The last line of an error's text, shortened (a ClientApp's error carries Ray's whole
    traceback; its last line is the exception's message)."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else "?"
    return last if len(last) <= 400 else last[:400] + "..."


def client_data():
    """(x, y, parts) of the training set, built once per process from the spec."""
    if "train" not in _CACHE:
        path = os.environ.get(SPEC_ENV)
        if not path:
            raise RuntimeError("%s is not set: the ClientApp cannot find its partition" % SPEC_ENV)
        with open(path) as f:
            spec = json.load(f)
        x, y = load_split(os.environ.get(DATA_ENV, spec.get("data", "")), "train")
        parts = (partitions_of(spec["client_of"], len(spec["histogram"])) if "client_of" in spec
                 else partitions(y, spec["histogram"]))
        _CACHE["train"] = (x, y, parts)
    return _CACHE["train"]


def rng_key(*parts):
    """A deterministic 63-bit seed from small integers (Python's hash of ints is fixed)."""
    k = 0
    for p in parts:
        k = (k * 1000003 + int(p) + 1) % (1 << 63)
    return k


# --- the ClientApp ---

def train_client(msg, context):
    """One client's round: E local epochs of plain SGD from the global model."""
    threads = int(os.environ.get("OMP_NUM_THREADS", "1") or 1)
    torch.set_num_threads(threads)
    pid = int(context.node_config["partition-id"])
    cfg = msg.content["config"]
    rnd, epochs, batch = int(cfg["server-round"]), int(cfg["local-epochs"]), int(cfg["batch"])
    lr, seed = float(cfg["lr"]), int(cfg["seed"])
    x, y, parts = client_data()
    idx = parts[pid]
    n = len(idx)
    model, loss_fn = torch_train.build("mlp")
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    torch.manual_seed(rng_key(seed, rnd, pid, 1 << 20))  # dropout masks
    loss_sum, seen = 0.0, 0
    for e in range(epochs):
        gen = torch.Generator().manual_seed(rng_key(seed, rnd, pid, e))
        order = idx[torch.randperm(n, generator=gen)]
        for off in range(0, n, batch):
            xb, yb = torch_train.batch_of(x, y, order[off:off + batch])
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(yb)
            seen += len(yb)
    content = RecordDict({
        "arrays": ArrayRecord(model.state_dict()),
        "metrics": MetricRecord({"train_loss": loss_sum / max(seen, 1), "num-examples": n}),
    })
    return Message(content=content, reply_to=msg)


def query_partition(msg, context):
    """Tells the server which partition this node holds. Loads this process's copy of the
    training set on the way, as a node has its data before training starts (dtrain's
    rounds do not count its loading either)."""
    pid = int(context.node_config["partition-id"])
    client_data()
    return Message(content=RecordDict({"metrics": MetricRecord({"partition-id": pid})}),
                   reply_to=msg)


if FLWR_ERROR is None:
    CLIENT_APP = ClientApp()
    CLIENT_APP.train()(train_client)
    CLIENT_APP.query()(query_partition)


# --- the ServerApp ---

class DtrainSampledFedAvg(FedAvg):
    """Flower's FedAvg with round t's clients taken from dtrain's run instead of sampled at
    random; times each round from configure_train to the end of aggregate_train."""

    def __init__(self, rounds, node_of, **kw):
        super().__init__(**kw)
        self.rounds = rounds
        self.node_of = node_of
        self.t_round = None
        self.round_s = {}

    def configure_train(self, server_round, arrays, config, grid):
        self.t_round = time.monotonic()
        config["server-round"] = server_round
        record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
        return [Message(content=record, message_type=MessageType.TRAIN,
                        dst_node_id=self.node_of[c])
                for c in self.rounds[server_round - 1]]

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        failed = [m for m in replies if m.has_error()]
        if failed:
            raise RuntimeError("round %d: %d of %d clients failed: %s" % (
                server_round, len(failed), len(replies), reason(failed[0].error.reason)))
        out = super().aggregate_train(server_round, replies)
        self.round_s[server_round] = time.monotonic() - self.t_round
        return out


class Server:
    """The ServerApp's main() and what it measured (read after run_simulation returns: the
    ServerApp runs in a thread of this process)."""

    def __init__(self, spec, test, seed):
        self.spec, self.test, self.seed = spec, test, seed
        self.evals = {}
        self.strategy = None
        self.query_s = None
        self.error = None

    def evaluate(self, server_round, arrays):
        t = time.monotonic()
        x, y = self.test
        model, loss_fn = torch_train.build("mlp")
        model.load_state_dict(arrays.to_torch_state_dict())
        model.eval()
        correct, loss_sum = 0, 0.0
        with torch.no_grad():
            for off in range(0, len(y), 1000):
                xb, yb = torch_train.batch_of(x, y, torch.arange(off, min(off + 1000, len(y))))
                out = model(xb)
                loss_sum += loss_fn(out, yb).item() * len(yb)
                correct += int((out.argmax(1) == yb).sum())
        acc, loss = correct / len(y), loss_sum / len(y)
        self.evals[server_round] = {"test_accuracy": acc, "test_loss": loss,
                                    "eval_s": time.monotonic() - t}
        print("flower_fedavg: round %d: test accuracy %.4f%s" % (
            server_round, acc, "  (%.3f s)" % self.strategy.round_s[server_round]
            if server_round in self.strategy.round_s else ""), file=sys.stderr, flush=True)
        return MetricRecord({"accuracy": acc, "loss": loss})

    def main(self, grid, context):
        try:
            self.run(grid)
        except Exception as e:
            self.error = "%s: %s" % (type(e).__name__, reason(e))
            raise

    def run(self, grid):
        clients = len(self.spec["histogram"])
        t = time.monotonic()
        node_ids = list(grid.get_node_ids())
        while len(node_ids) < clients and time.monotonic() - t < 300:
            time.sleep(0.05)
            node_ids = list(grid.get_node_ids())
        if len(node_ids) != clients:
            raise RuntimeError("%d SuperNodes, expected %d" % (len(node_ids), clients))
        replies = grid.send_and_receive(
            [Message(content=RecordDict(), message_type=MessageType.QUERY, dst_node_id=n)
             for n in node_ids], timeout=600)
        node_of = {}
        for r in replies:
            if r.has_error():
                raise RuntimeError("partition query: %s" % reason(r.error.reason))
            node_of[int(r.content["metrics"]["partition-id"])] = r.metadata.src_node_id
        if sorted(node_of) != list(range(clients)):
            raise RuntimeError("partition query: got %d of %d partitions" % (len(node_of), clients))
        self.query_s = time.monotonic() - t
        k = max(len(c) for c in self.spec["rounds"])
        self.strategy = DtrainSampledFedAvg(
            self.spec["rounds"], node_of, fraction_train=k / clients, fraction_evaluate=0.0,
            min_train_nodes=k, min_available_nodes=clients)
        torch.manual_seed(self.seed)
        model, _ = torch_train.build("mlp")
        if self.spec.get("init_weights"):  # dtrain's initial weights: both start alike
            model.load_state_dict(load_safetensors(self.spec["init_weights"]))
        train_config = ConfigRecord({"local-epochs": int(self.spec["local_epochs"]),
                                     "lr": float(self.spec["lr"]),
                                     "batch": int(self.spec["batch"]),
                                     "seed": int(self.spec["seed"])})
        self.strategy.start(grid=grid, initial_arrays=ArrayRecord(model.state_dict()),
                            num_rounds=len(self.spec["rounds"]), timeout=TRAIN_TIMEOUT_S,
                            train_config=train_config, evaluate_fn=self.evaluate)


def main():
    t_start = time.monotonic()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", required=True, help="JSON written by bench/fedavg.py")
    ap.add_argument("--out", required=True, help="where the result (one JSON object) goes")
    ap.add_argument("--parallel", type=int, default=1,
                    help="ClientApps running at once (Ray actors of 1 CPU, 1 torch thread)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    result = {"impl": "flower", "torch_version": torch.__version__,
              "flwr_version": getattr(sys.modules.get("flwr"), "__version__", None)}
    if FLWR_ERROR is not None:
        result["error"] = FLWR_ERROR
        with open(a.out, "w") as f:
            json.dump(result, f)
        print("flower_fedavg: %s" % FLWR_ERROR, file=sys.stderr)
        return 1
    import ray  # noqa: F401  (its version; flwr[simulation] brings it)
    from flwr.simulation import run_simulation

    with open(a.spec) as f:
        spec = json.load(f)
    try:
        partitions(read_labels(a.data), spec["histogram"])
    except ValueError as e:
        result["error"] = str(e)
        with open(a.out, "w") as f:
            json.dump(result, f)
        print("flower_fedavg: %s" % e, file=sys.stderr)
        return 1
    # Every process this starts (Ray's workers) reads the spec and the data from here, and
    # keeps its BLAS and torch to one thread per ClientApp.
    os.environ[SPEC_ENV] = os.path.abspath(a.spec)
    os.environ[DATA_ENV] = a.data
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[k] = "1"
    torch.set_num_threads(1)
    test = load_split(a.data, "t10k")
    server = Server(spec, test, int(spec["seed"]))
    server_app = ServerApp()
    server_app.main()(server.main)
    # By its importable name, so that Ray's workers import this module (and keep its data
    # cache per process) instead of receiving __main__'s functions by value.
    import flower_fedavg
    t_sim = time.monotonic()
    sim_error = None
    try:
        run_simulation(server_app=server_app, client_app=flower_fedavg.CLIENT_APP,
                       num_supernodes=len(spec["histogram"]),
                       backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                       "init_args": {"num_cpus": a.parallel, "num_gpus": 0}})
    except (Exception, SystemExit) as e:  # flwr may end the simulation with sys.exit
        sim_error = "run_simulation: %s: %s" % (type(e).__name__, reason(e))
    t_end = time.monotonic()
    st = server.strategy
    rounds = []
    for t in range(1, len(spec["rounds"]) + 1):
        ev = server.evals.get(t, {})
        rounds.append({"round": t, "clients": spec["rounds"][t - 1],
                       "round_s": st.round_s.get(t) if st else None,
                       "test_accuracy": ev.get("test_accuracy"),
                       "test_loss": ev.get("test_loss"), "eval_s": ev.get("eval_s")})
    result.update({
        "ray_version": ray.__version__,
        "api": "flwr.simulation.run_simulation (Simulation Runtime, Ray backend) with a "
               "ServerApp running a subclass of flwr.serverapp.strategy.FedAvg (Message API) "
               "and a ClientApp",
        "parallel": a.parallel, "clients": len(spec["histogram"]),
        "local_epochs": spec["local_epochs"], "lr": spec["lr"], "batch": spec["batch"],
        "initial_accuracy": server.evals.get(0, {}).get("test_accuracy"),
        "rounds": rounds, "partition_query_s": server.query_s,
        "simulation_s": t_end - t_sim, "process_s": t_end - t_start,
    })
    complete = all(r["round_s"] is not None and r["test_accuracy"] is not None for r in rounds)
    if server.error or sim_error or not complete:
        result["error"] = (server.error or sim_error or "the simulation ended before every "
                           "round was trained and evaluated")
    with open(a.out, "w") as f:
        json.dump(result, f)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
