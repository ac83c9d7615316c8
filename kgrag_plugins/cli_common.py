"""What every ``kgrag`` sub-command shares: the help formatter and the deprecated-spelling check."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default (unless unset, off, or already said in the text)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return text + " (default: %(default)s)"


def subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of ``parser``'s sub-commands (one level)."""
    return [
        sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for sub in dict.fromkeys(action.choices.values())
    ]


def use_formatter(parser: argparse.ArgumentParser, formatter: Any = HelpFormatter) -> None:
    """Give ``parser`` and every sub-command parser below it ``formatter``."""
    parser.formatter_class = formatter
    for sub in subparsers(parser):
        use_formatter(sub, formatter)


def deprecated_index(
    index: Path | None, legacy: Path | None, *, command: str, old_form: str, required: bool = True
) -> Path | None:
    """The index directory of a command whose old spelling ``old_form`` (a positional ``INDEX`` or
    ``--index-dir``) is still accepted: ``--index`` if only it is given, else the old one with a
    deprecation warning. Both given and different, or (``required``) neither: :class:`ValueError`."""
    if legacy is not None:
        log.warning("kgrag %s: %s is deprecated; use --index %s", command, old_form, legacy)
        if index is not None and Path(index).resolve() != Path(legacy).resolve():
            raise ValueError(f"--index {index} and {old_form} {legacy} name different indexes; give --index only")
        return legacy
    if index is None and required:
        raise ValueError("give the index directory: --index DIR")
    return index
