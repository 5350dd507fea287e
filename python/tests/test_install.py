"""pip install: the package built with the repository's Makefile and
installed with libspattn.so inside it, then imported from elsewhere with no
PYTHONPATH and no SPATTN_LIBRARY."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

import torch

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# found, not imported (setuptools imported after torch trips over distutils)
TOOLS = all(importlib.util.find_spec(m) for m in ("pip", "setuptools", "wheel"))

CHECK = r"""
import os, sys, torch
import spattn
here = os.path.dirname(spattn.__file__)
assert here.startswith(sys.argv[1]), here
assert spattn.LIBRARY_PATH == os.path.join(here, "libspattn.so"), spattn.LIBRARY_PATH
g = torch.Generator().manual_seed(0)
v = torch.randn(1, 30, 2, 8, generator=g, requires_grad=True)
loc, attn = torch.rand(1, 5, 2, 2, 2, 2, generator=g), torch.rand(1, 5, 2, 2, 2, generator=g)
out = spattn.ms_deform_attn(v, [[6, 4], [3, 2]], [0, 24], loc, attn)
out.sum().backward()
assert out.shape == (1, 5, 16) and v.grad.abs().sum() > 0
torch.save((out.detach(), v.grad), sys.argv[2])
print("imported", here)
"""


@unittest.skipUnless(TOOLS, "pip, setuptools and wheel are needed (apt-get install python3-pip)")
class TestInstall(unittest.TestCase):
    def test_pip_install_into_a_venv_and_import_from_elsewhere(self):
        with tempfile.TemporaryDirectory() as tmp:
            venv = os.path.join(tmp, "venv")
            # the system's torch, setuptools, wheel and pip, nothing downloaded
            subprocess.run([sys.executable, "-m", "venv", "--without-pip",
                            "--system-site-packages", venv], check=True, timeout=120)
            python = os.path.join(venv, "bin", "python")
            env = {k: v for k, v in os.environ.items()
                   if k not in ("PYTHONPATH", "SPATTN_LIBRARY")}
            # make's command-line variables (BUILDROOT, HOST_MARCH, ...) reach
            # the build through MAKEFLAGS: the library of this check is reused
            install = subprocess.run(
                [python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                 "--disable-pip-version-check", PYTHON_DIR],
                env=env, capture_output=True, text=True, timeout=1200)
            self.assertEqual(install.returncode, 0, install.stdout + install.stderr)
            site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                   "['purelib'])"], env=env, capture_output=True, text=True,
                                  check=True).stdout.strip()
            elsewhere = os.path.join(tmp, "elsewhere")
            os.mkdir(elsewhere)
            result = os.path.join(tmp, "result.pt")
            run = subprocess.run([python, "-c", CHECK, site, result], cwd=elsewhere, env=env,
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            self.assertIn("imported " + site, run.stdout)
            # the installed library computes what the development one does
            import spattn
            out, grad = torch.load(result)
            g = torch.Generator().manual_seed(0)
            v = torch.randn(1, 30, 2, 8, generator=g, requires_grad=True)
            loc = torch.rand(1, 5, 2, 2, 2, 2, generator=g)
            attn = torch.rand(1, 5, 2, 2, 2, generator=g)
            want = spattn.ms_deform_attn(v, [[6, 4], [3, 2]], [0, 24], loc, attn)
            want.sum().backward()
            self.assertTrue(torch.equal(out, want.detach()))
            self.assertTrue(torch.equal(grad, v.grad))


if __name__ == "__main__":
    unittest.main()
