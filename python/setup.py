"""pip install --no-build-isolation ./python

Builds libspattn.so with the repository's Makefile (`make shared`: the
library's own flags, -march=native by default) and installs the spattn
package with the library inside it, so that `import spattn` works from
anywhere with no PYTHONPATH. Offline: nothing is downloaded (torch is not
declared as a dependency, so that Debian's python3-torch, which pip does not
see as installed, serves). SPATTN_MAKEFLAGS passes variables to make, e.g.
SPATTN_MAKEFLAGS="HOST_MARCH=x86-64-v3 CC=clang" for a library that runs on
any AVX2 machine. setuptools' own build files go under the repository's
build/python/, not into the source tree.
"""
import os
import shlex
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SETUP_BUILD = os.path.join(ROOT, "build", "python")


def make(*goals):
    flags = shlex.split(os.environ.get("SPATTN_MAKEFLAGS", ""))
    jobs = "-j%d" % max(1, min(os.cpu_count() or 1, 8))
    return subprocess.run(["make", "--no-print-directory", "-C", ROOT, jobs] + flags + list(goals),
                          check=True, stdout=subprocess.PIPE, text=True).stdout


class BuildWithLibrary(build_py):
    """The Python files, then libspattn.so from `make shared` beside them."""

    def run(self):
        super().run()
        if not os.path.exists(os.path.join(ROOT, "Makefile")):
            raise RuntimeError("spattn: setup.py builds libspattn.so with the repository's "
                               "Makefile; run pip on the python/ folder of a spattn checkout")
        print(make("shared"), end="")
        library = make("-s", "shared-path").strip()
        target = os.path.join(self.build_lib, "spattn", "libspattn.so")
        self.mkpath(os.path.dirname(target))
        shutil.copyfile(library, target)


class WithNativeLibrary(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: the package holds a native library


os.makedirs(SETUP_BUILD, exist_ok=True)
setup(
    name="spattn",
    version="0.1.0",
    description="Sparse-attention training operators (NSA, multi-scale deformable attention) "
                "for PyTorch on CPUs",
    packages=["spattn"],
    python_requires=">=3.8",
    cmdclass={"build_py": BuildWithLibrary},
    distclass=WithNativeLibrary,
    options={"build": {"build_base": SETUP_BUILD}, "egg_info": {"egg_base": SETUP_BUILD},
             "bdist_wheel": {"bdist_dir": os.path.join(SETUP_BUILD, "wheel")}},
    zip_safe=False,
)
