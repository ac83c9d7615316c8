"""The command line's help (issue 33 item 3, first part): no issue numbers in user-facing text, and
the public names a README snippet imports exist where it imports them."""

from __future__ import annotations

import argparse

from kgrag_plugins.cli import build_parser


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                yield path + (choice.dest,), choice  # the one-line help in the parent's list
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


def test_no_help_text_mentions_an_issue():
    seen, offenders = 0, []
    for path, obj in _parsers(build_parser()):
        texts = [getattr(obj, "help", None), getattr(obj, "description", None)]
        if isinstance(obj, argparse.ArgumentParser):
            texts += [a.help for a in obj._actions]
        for text in filter(None, texts):
            seen += 1
            if "issue" in text.lower():
                offenders.append((" ".join(path), text))
    assert seen > 100 and offenders == []


def test_as_embedder_is_importable_from_models():
    from kgrag_plugins.models import as_embedder
    from kgrag_plugins.models.embed import as_embedder as direct

    assert as_embedder is direct
