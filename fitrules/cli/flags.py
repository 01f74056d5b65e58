"""The flag of each parameter on one command's line, made from its declarations: the words in
which the command line prints the parameters an error names (:func:`fitrules.base.errors.param`)."""

from __future__ import annotations

from fitrules.jobs.options import COMMANDS


def command_flags(cmd: str) -> dict[str, str]:
    """Parameter -> flag for the command ``cmd`` (``"design"``: ``{"splits":
    "--design-splits", ...}``)."""
    out: dict[str, str] = {}
    for decl in COMMANDS:
        if decl.cmd == cmd:
            for o in decl.options:
                flag = o.option_string
                if flag and flag.startswith("--"):
                    out[o.name] = flag
    if "data" in out:  # the table the data options read is the Python functions' `grid`
        out.setdefault("grid", out["data"])
    return out
