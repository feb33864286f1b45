#!/usr/bin/env python3
"""Write NAME.dcp_to_torch_save.pt beside each DCP fixture folder: torch's own
conversion, which tests/sharded_convert_test.sh holds `ckpt convert` to.
Run with PyTorch 2.6 (the root ../shared/tools/torch2-env.sh builds):
    chroot /tmp/torch2 /usr/bin/python3 /tmp/x/gen_dcp_torch_save.py /tmp/x/dcp_*
"""
import os
import sys

from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

for d in sys.argv[1:]:
    d = d.rstrip("/")
    dcp_to_torch_save(d, d + ".dcp_to_torch_save.pt")
    print(d, os.path.getsize(d + ".dcp_to_torch_save.pt"))
