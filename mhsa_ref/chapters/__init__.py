"""The book's chapters: one folder each, named by its number, discovered from this folder.

A chapter ``chNN/`` holds everything the package knows about chapter NN:

    __init__.py         TITLE, PART, SUMMARY (the front page and README are generated from them),
                        REQUIRES (packages its exercises need beyond NumPy, e.g. ("torch",))
    reference.py        the reference solutions in NumPy
    reference_torch.py  the reference solutions in PyTorch (apart, so NumPy never imports torch)
    exercises.py        EXERCISES: the registry entries (cases, properties, misconceptions)
    mistakes.py         wrong PyTorch modules that stand for misconceptions (loaded on first use)

Its notebook is ``solutions/NN_slug.ipynb`` (and, generated, ``book/NN_slug.ipynb``); its tests
are ``tests/chNN/``. CONTRIBUTING.md says how to add one.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from functools import cache
from types import ModuleType

FOLDER = re.compile(r"^ch(\d\d)$")


@dataclass(frozen=True)
class Chapter:
    number: str  # "01"
    title: str  # "Attention from scratch (NumPy)"
    part: str  # the stage of the book it belongs to, e.g. "Build it in NumPy"
    summary: str  # what it is about, in a few words, for the front page's diagram
    requires: tuple[str, ...]  # packages its exercises need beyond NumPy
    module: ModuleType

    @property
    def package(self) -> str:
        return self.module.__name__


@cache
def all_chapters() -> tuple[Chapter, ...]:
    """Every chapter folder, in order."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        match = FOLDER.match(info.name)
        if not (info.ispkg and match):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.append(Chapter(match.group(1), module.TITLE, module.PART, module.SUMMARY,
                             tuple(getattr(module, "REQUIRES", ())), module))
    return tuple(found)


def numbers() -> list[str]:
    return [c.number for c in all_chapters()]


def get(number: str) -> Chapter:
    number = normalize(number)
    return next(c for c in all_chapters() if c.number == number)


def normalize(value: object) -> str:
    """A chapter as given by a person ("1", "01", 1) as its number ("01"); a ValueError naming the
    chapters there are otherwise."""
    text = str(value).strip()
    number = f"{int(text):02d}" if text.isdigit() else text
    if number not in numbers():
        raise ValueError(f"there is no chapter {text!r}; the chapters are {', '.join(numbers())}")
    return number
