"""Writing generated manifests: plain YAML, and files that hold secrets kept private."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    """Plain YAML: a mapping used twice (selector and pod labels) is written out twice, not
    as an anchor and an alias, which some tools read badly."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    """Multi-line text (the ConfigMap's files) as a ``|`` block, readable as it is."""
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _text)


def dump_all(documents: Iterable[Any]) -> str:
    """Documents as one multi-document YAML text, keys in the order they were built."""
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def write(
    files: dict[str, str], out: Path, *, known: Iterable[str] = (), secret: str = ""
) -> list[Path]:
    """Write ``files`` (name -> text) into ``out``.

    ``secret`` names the file that holds secret keys: created mode 0600 before any byte is
    written. A file of ``known`` (what a renderer may write) that this run does not write is
    removed, so that ``kubectl apply -f out`` never applies what an earlier run left there
    (a Secret from before ``--insecure``, say)."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in set(known) - set(files):
        (out / stale).unlink(missing_ok=True)
    written = []
    for name, text in files.items():
        path = out / name
        if name == secret:
            path.touch(mode=0o600)
            path.chmod(0o600)
        path.write_text(text)
        written.append(path)
    return written
