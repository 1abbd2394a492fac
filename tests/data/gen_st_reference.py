"""Writes tests/data/st_reference.safetensors with the reference safetensors writer.

test_safetensors reads it back, so make test checks that dtrain reads what the reference
implementation writes (its own tensor order, its header padding) without needing Python.
Run by hand when the file must change (it should not): the reference package is not a
dependency of the project.
    python3 -m pip install --target /tmp/st safetensors
    PYTHONPATH=/tmp/st /usr/bin/python3 tests/data/gen_st_reference.py
Values are simple functions of the element index, recomputed in the test.
"""
import os

import torch
from safetensors.torch import save_file

here = os.path.dirname(os.path.abspath(__file__))
tensors = {
    # Names as torch.nn.Sequential's state_dict gives them for Flatten, Linear, ReLU, Linear.
    "1.weight": (torch.arange(12, dtype=torch.float32) * 0.25 - 1.0).reshape(3, 4),
    "1.bias": torch.arange(3, dtype=torch.float32) * -0.5,
    "3.weight": torch.arange(6, dtype=torch.float64).reshape(2, 3) / 3.0,
    "steps": torch.tensor([7, -9, 2**40], dtype=torch.int64),
    "mask": torch.arange(5, dtype=torch.uint8) * 60,
    "count": torch.tensor(42, dtype=torch.int32),
}
save_file(tensors, os.path.join(here, "st_reference.safetensors"),
          metadata={"format": "pt", "input_scale": "0.00784313725490196"})
