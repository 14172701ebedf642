"""The ``rtctl`` command line."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__, bundled_model_path
from .model import ModelError


def _load_model(spec: str, floating_base: str | None):
    from .model.urdf import load_urdf

    path = Path(spec)
    if not path.suffix and not path.exists():
        path = bundled_model_path(spec)
    return load_urdf(path, floating_base)


def _cmd_info(args) -> int:
    model = _load_model(args.model, args.floating_base)
    print(model.describe())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rtctl", description="Real-time robot controller framework.")
    parser.add_argument("--version", action="version", version=f"rtctl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="print a model's tree: bodies, joints, masses, DOF")
    info.add_argument("model", help="URDF file, or the name of a bundled model (arm7, quadruped12, humanoid)")
    info.add_argument("--floating-base", choices=["free_flyer", "euler"], default=None,
                      help="give the root link a floating base (default: fixed to the world)")
    info.set_defaults(func=_cmd_info)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ModelError, FileNotFoundError) as exc:
        print(f"rtctl: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `rtctl info humanoid | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
