"""``mhsa-grade``: grade a class's notebooks, or build a Gradescope autograder.

    mhsa-grade NOTEBOOK_OR_FOLDER... [--chapter NN] [--root DIR] [--out DIR] [--json PATH|-]
               [--jobs N] [--timeout S] [--memory MB] [--seed N] [--resume]
    mhsa-grade gradescope-bundle CHAPTER -o autograder.zip
    mhsa-grade points-template [CHAPTER...] [-o points.csv]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from . import points, zygote
from .limits import Limits


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["gradescope-bundle"]:
        return _bundle(argv[1:])
    if argv[:1] == ["points-template"]:
        return points.template_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="mhsa-grade", description="Grade notebooks of 'Multi-Head Self-Attention, Step by Step' in a sandbox.",
        epilog="Also: mhsa-grade gradescope-bundle CHAPTER -o autograder.zip")
    parser.add_argument("paths", nargs="+", metavar="NOTEBOOK_OR_FOLDER",
                        help="notebooks, or folders of them (nbgrader's submitted/<student>/<assignment>/ works)")
    parser.add_argument("--out", type=Path, default=Path("grading"),
                        help="folder for results, gradebook, feedback and summary (default: ./grading)")
    parser.add_argument("--json", metavar="PATH|-", help="also write the results JSON here ('-' for stdout)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel workers (default: all cores)")
    parser.add_argument("--timeout", type=float, default=Limits.timeout_s, help="seconds per exercise (default: %(default)s)")
    parser.add_argument("--memory", type=int, default=Limits.memory_mb, help="MB per submission (default: %(default)s)")
    parser.add_argument("--seed", type=int, help="seed of the randomized cases (default: a new one, recorded)")
    parser.add_argument("--resume", action="store_true", help="keep finished results of an interrupted run")
    parser.add_argument("--chapter", help="the assignment's chapter (e.g. 01): every notebook is graded as it, "
                        "whatever its metadata or name says (without it each notebook's metadata or name "
                        "suggests its chapter, and the results say so)")
    parser.add_argument("--root", help="the class folder: students are the folders (or .ipynb files) directly "
                        "under it, or under its submitted/ (nbgrader) (default: each folder argument; file "
                        "arguments share the deepest folder holding them all)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    points.add_options(parser)
    args = parser.parse_args(argv)
    _prestart(args)
    if args.jobs < 1 or args.timeout <= 0 or args.memory < 64:
        parser.error("--jobs must be >= 1, --timeout > 0 and --memory >= 64")
    from .. import chapters
    from .batch import grade_batch

    if args.chapter is not None:
        try:
            args.chapter = chapters.normalize(args.chapter)
        except ValueError as exc:
            parser.error(f"--chapter: {exc}")

    try:
        doc = grade_batch(args.paths, args.out, jobs=args.jobs, seed=args.seed, resume=args.resume,
                          limits=Limits(timeout_s=args.timeout, memory_mb=args.memory),
                          chapter=args.chapter, progress=not args.no_progress, root=args.root,
                          **points.options(args, parser))
    except (FileNotFoundError, ValueError) as exc:
        parser.error(str(exc))
    text = json.dumps(doc, indent=1)
    if args.json == "-":
        print(text)
    elif args.json:
        Path(args.json).write_text(text)
    subs = doc["submissions"]
    for warning in doc.get("override_warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    isolation = sorted({s["isolation"] for s in subs if s.get("isolation")})
    print(f"graded {len(subs)} notebook(s) with seed {doc['seed']} into {args.out}/ "
          f"(isolation: {', '.join(isolation) or 'n/a'})", file=sys.stderr)
    if doc.get("skipped"):
        print(f"skipped {len(doc['skipped'])} path(s) that are not regular notebook files (see summary.md)",
              file=sys.stderr)
    if doc.get("claimed_twice"):
        print(f"{len(doc['claimed_twice'])} student(s) claimed by more than one notebook (see summary.md)",
              file=sys.stderr)
    return 0


def _prestart(args: argparse.Namespace) -> None:
    """One notebook, or one chapter (Gradescope's run): start the sandbox's zygote first, so that
    it starts while NumPy, the registry and the notebook load here."""
    if args.chapter is None and not (len(args.paths) == 1 and args.paths[0].endswith(".ipynb")):
        return
    torch = False
    if args.chapter is not None:
        from .. import chapters

        try:
            torch = "torch" in chapters.get(args.chapter).requires
        except (ValueError, StopIteration):
            return  # reported below
    zygote.prestart(torch)


def _bundle(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="mhsa-grade gradescope-bundle",
                                     description="Write a Gradescope autograder zip for one chapter.")
    parser.add_argument("chapter", help="chapter number, e.g. 01 (or 1)")
    parser.add_argument("-o", "--output", type=Path, default=Path("autograder.zip"))
    args = parser.parse_args(argv)
    from .gradescope import write_bundle

    try:
        write_bundle(args.chapter, args.output)
    except ValueError as exc:
        parser.error(str(exc))
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
