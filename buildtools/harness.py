"""`make cpp`: builds the standalone harness (csrc/harness.cpp) over the product's
launcher and device code, with no torch.

    python -m buildtools.harness --out build/cpp/cee_harness [--sass 90 ...] [--no-ptx]

By default the device code is the wheel's (the archs of pyproject.toml); --sass
and --no-ptx build it for other archs (the tests use that for a GPU the binary
has no code for). zig links it for the same glibc floor as the wheel, so the
binary built here runs on any Linux x86_64 GPU machine.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from . import config, declarations, nvrtc, toolchain
from .build_ext import CSRC, include, write_device_code, zig_cxx


def harness_targets(cfg: config.BuildConfig, sass_archs, ptx_arch) -> dict[str, str]:
    """{target: CUDA}: each arch from the CUDA pyproject.toml declares for it (an
    undeclared one from device-cuda), the PTX from device-cuda."""
    targets = {f"sm_{a}": cfg.sass_cuda.get(a, cfg.device_cuda) for a in sass_archs}
    if ptx_arch:
        targets[f"compute_{ptx_arch}"] = cfg.device_cuda
    return targets


def build_harness(out: Path, sass_archs, ptx_arch) -> Path:
    cfg = config.load(dev_spec="")
    generated = out.parent / f"{out.name}.device_code"
    summary = " ".join(f"sm_{a}" for a in sass_archs)
    summary = f"SASS {summary or 'none'}; PTX {f'compute_{ptx_arch}' if ptx_arch else 'none'}"
    targets = harness_targets(cfg, sass_archs, ptx_arch)
    write_device_code(generated, declarations.load(), targets, summary)
    cmd = [
        *zig_cxx(cfg, generated),
        # torch's header-only 16-bit floats (csrc/host_float16.h); nothing of torch is linked
        *include(toolchain.torch_paths()[0], "torch/include"),
        CSRC / "harness.cpp",
        CSRC / "launcher.cpp",
        generated / "device_code.S",
        "-ldl",
        "-lpthread",
        "-o",
        out,
    ]
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run([str(c) for c in cmd], check=True)
    return out


def main(argv: list[str] | None = None) -> None:
    cfg = config.load(dev_spec="")
    parser = argparse.ArgumentParser(prog="python -m buildtools.harness", description=__doc__)
    parser.add_argument("--out", type=Path, default=config.ROOT / "build" / "cpp" / "cee_harness")
    parser.add_argument("--sass", nargs="*", default=list(cfg.sass_archs), help="e.g. 90 120")
    parser.add_argument("--no-ptx", action="store_true", help="leave out the PTX")
    args = parser.parse_args(argv)
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        build_harness(args.out, args.sass, None if args.no_ptx else cfg.ptx_arch)
    except (OSError, config.ConfigError, nvrtc.DeviceCodeError) as exc:
        # an arch NVRTC does not know (CPP_ARGS="--sass 999"), an output path that cannot be
        # made (CPP_OUT): what and why, without the compiler pool's traceback
        raise SystemExit(f"make cpp: {exc}") from None
    except subprocess.CalledProcessError as exc:  # the link: zig has printed why
        raise SystemExit(f"make cpp: the link failed (exit {exc.returncode}), see above") from None
    print(f"built {args.out} (run it on a GPU machine)")


if __name__ == "__main__":
    main()
