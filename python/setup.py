"""Builds moonkv._moonkv, the C extension over libmoonkv.

Links the static libmoonkv.a of a build directory when there is one
(MOONKV_BUILD, default ../build/rel: `make` first), else the installed
library found by pkg-config (`make install`). No package index is used:
    pip install --no-build-isolation ./python
"""
import os
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("MOONKV_BUILD", os.path.join(HERE, "..", "build", "rel")))
# Only what the extension itself needs; libmoonkv's own dependencies below.
DEPS = ["ev", "hiredis", "cjson", "ibverbs", "rdmacm", "m"]


def library_args():
    """(include dirs, extra objects, libraries, extra link args)."""
    liba = os.path.join(BUILD, "libmoonkv.a")
    if os.path.exists(liba):
        # Keep libmoonkv's symbols private to the extension.
        return [os.path.join(HERE, "..", "src", "client")], [liba], DEPS, ["-Wl,--exclude-libs,ALL", "-pthread"]
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags", "moonkv"], text=True)
        libs = subprocess.check_output(["pkg-config", "--libs", "moonkv"], text=True)
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit(f"moonkv: no {liba} and no installed moonkv (pkg-config): run make first")
    incs = [f[2:] for f in shlex.split(cflags) if f.startswith("-I")]
    return incs, [], [], shlex.split(libs) + ["-pthread"]


incs, objects, libs, link_args = library_args()
setup(
    name="moonkv",
    version="0.1.0",
    description="Python client of moonkv, a distributed write-once KV cache",
    packages=["moonkv", "moonkv.integrations"],
    ext_modules=[
        Extension(
            "moonkv._moonkv",
            sources=["moonkv/_moonkv.c"],
            include_dirs=incs,
            extra_objects=objects,
            libraries=libs,
            extra_compile_args=["-std=gnu11", "-Wall", "-Wextra", "-Werror"],
            extra_link_args=link_args,
            depends=objects,
        )
    ],
)
