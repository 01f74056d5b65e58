"""Command line: parse arguments, call one library function, print or write. No logic here.

The parser is made from the declarations of :mod:`fitrules.jobs.options` (``parser``); each
command (``commands``) calls a function of :mod:`fitrules.api` and prints the text view of
what it returns; ``io`` reads the grid and takes the outputs; ``app`` runs one command line.
"""

from fitrules.cli.app import main
from fitrules.cli.parser import EXAMPLES, build_parser

__all__ = ["EXAMPLES", "build_parser", "main"]
