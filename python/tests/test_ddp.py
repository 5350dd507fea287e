"""DistributedDataParallel over gloo, 2 processes on 127.0.0.1: 3 training
steps of a Deformable-DETR layer give, at every step, the gradients of one
process running the whole batch."""
import os
import socket
import subprocess
import sys
import tempfile
import unittest

import torch

import spattn

STEPS, BATCH, WORLD = 3, 4, 2

# Shared by the workers and the single-process reference (exec'd in both).
SETUP = r"""
import torch, spattn

def model():
    torch.manual_seed(0)
    m = spattn.MSDeformAttn(d_model=16, n_levels=2, n_heads=2, n_points=2).double()
    with torch.no_grad():  # away from the initial fan, so that every term counts
        for p in m.parameters():
            p.add_(0.1 * torch.randn(p.shape, dtype=p.dtype))
    return m

def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    query = torch.randn(%(batch)d, 6, 16, generator=g, dtype=torch.float64)
    ref = torch.rand(%(batch)d, 6, 2, 2, generator=g, dtype=torch.float64)
    flat = torch.randn(%(batch)d, 30, 16, generator=g, dtype=torch.float64)
    target = torch.randn(%(batch)d, 6, 16, generator=g, dtype=torch.float64)
    return query, ref, flat, target

SHAPES, STARTS = torch.tensor([[6, 4], [3, 2]]), torch.tensor([0, 24])

def loss(m, query, ref, flat, target):
    # mean over the samples: DDP's average of the ranks' gradients is then
    # the gradient of the whole batch's mean
    out = m(query, ref, flat, SHAPES, STARTS)
    return ((out - target) ** 2).sum() / query.shape[0]
""" % {"batch": BATCH}

WORKER = SETUP + r"""
import os, sys
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
torch.set_num_threads(1)
rank, world = int(sys.argv[1]), int(sys.argv[2])
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[3], rank=rank,
                        world_size=world)
m = DDP(model())
opt = torch.optim.SGD(m.parameters(), lr=0.05)
grads = []
per = %(batch)d // world
for step in range(%(steps)d):
    opt.zero_grad()
    query, ref, flat, target = (t[rank * per:(rank + 1) * per] for t in batch(step))
    loss(m, query, ref, flat, target).backward()
    grads.append([p.grad.clone() for p in m.module.parameters()])
    opt.step()
torch.save(grads, sys.argv[4])
dist.destroy_process_group()
""" % {"batch": BATCH, "steps": STEPS}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestDDP(unittest.TestCase):
    @unittest.skipUnless(torch.distributed.is_available(), "torch.distributed is not built")
    def test_two_ranks_match_one_process_on_the_whole_batch(self):
        scope = {}
        exec(SETUP, scope)
        m = scope["model"]()
        opt = torch.optim.SGD(m.parameters(), lr=0.05)
        want = []
        for step in range(STEPS):
            opt.zero_grad()
            scope["loss"](m, *scope["batch"](step)).backward()
            want.append([p.grad.clone() for p in m.parameters()])
            opt.step()

        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(spattn.__file__)))
        env["GLOO_SOCKET_IFNAME"] = "lo"  # loopback whatever the host's name resolves to
        with tempfile.TemporaryDirectory() as tmp:
            port = str(free_port())
            outs = [os.path.join(tmp, "rank%d.pt" % r) for r in range(WORLD)]
            workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(r), str(WORLD), port,
                                         outs[r]], env=env, cwd=tmp, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
                       for r in range(WORLD)]
            logs = [w.communicate(timeout=300)[0] for w in workers]
            for w, log in zip(workers, logs):
                self.assertEqual(w.returncode, 0, log)
            ranks = [torch.load(o) for o in outs]
        for step in range(STEPS):
            for r in range(WORLD):
                for got, ref in zip(ranks[r][step], want[step]):
                    self.assertTrue(torch.allclose(got, ref, rtol=1e-10, atol=1e-12),
                                    "step %d rank %d: %g" % (step, r,
                                                             float((got - ref).abs().max())))
        # the steps moved the sampling: the offsets' gradient is not zero
        self.assertGreater(float(want[-1][0].abs().sum()), 0)


if __name__ == "__main__":
    unittest.main()
