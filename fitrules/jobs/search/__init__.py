"""`fitrules search`: choose a form from a grammar's candidates by nested validation.

Choosing among many forms by held-out error, then quoting that same error, flatters the
winner. The search therefore never quotes the error it chose by:

- the **outer protocol** (random splits, ``extrapolate:COL``, ``leave-one-level-out:COL``)
  holds cells out;
- inside each outer training set, **inner** random splits of those cells rank every
  candidate; the **selection rule** picks one form from that ranking alone;
- the **outer error** is the error of whatever was picked, on the outer held-out cells.

The outer errors measure the *procedure* (grammar + rule), not any one form. Run with every
complexity budget (at most k constants), they give a Pareto front of outer error against
constants; the form the procedure picks from all cells at each budget on the front is the
one to carry to ``compare``. The optimism of selection is the winner's inner error (what a
search that reports its own ranking would quote) against its outer error.

Selection rule ``one-se`` (default): the candidate with the lowest median inner log error
is the best; every candidate whose mean paired log-error difference to the best is within
one standard error (corrected for the overlap of random splits, Nadeau and Bengio 2003) is
as good as the data can tell; the one with fewest constants among them is picked (ties: the
lower median). ``best`` picks the lowest median outright. Fits that are degenerate or named
wild by the guard (training fit and design only) count as failures: a candidate that fails
in half the inner splits or more, or whose fit on the outer training cells fails, cannot
be picked there. When no split checks a variable the search reads, or the pick's size is the
largest the nested splits can rank and no outer error chose it, the search abstains instead
of picking
(:mod:`~fitrules.jobs.search.abstention`).

Before the nested fits, each candidate's least-squares training fit on each outer training
set and on all cells is compared with the best of the candidates of no more constants there:
more than :data:`~fitrules.jobs.search.hopeless.HOPELESS_RATIO` times its RMS, and the
candidate's inner splits there (its final splits, for all cells) are not fitted, as if they
had failed; a candidate hopeless everywhere is dropped. A staged search also prescreens:
on each of those sets only the
:data:`~fitrules.jobs.search.hopeless.PRESCREEN_KEEP` lowest training RMS of each kind of
candidate (constants, exponents; read on the grid its fits start from) get the inner fits
there. Each decision reads its set's training cells alone, as a ranking inside it may.

The package, one concept a module, each importing only those listed before it:
``protocol`` (the nested masks and their seeds), ``result`` (:class:`Search` and its views),
``workers`` (where the fits run), ``scoring`` (one form on the nested masks), ``hopeless``
(the training fits that prune), ``staging``
(probes, screen, survivors), ``selection`` (the rule's picks and the front), ``plan`` (the
cost and limits), ``inputs`` (what is searched), ``growth`` (a growing budget), ``tables``
(the result's tables), ``pick_guard`` (the guard on the pick), ``abstention`` (when the runs
cannot rank the forms the question needs: no pick, and the user's forms fitted on all cells)
and ``job``
(:func:`run_search`, which ties them together).
"""

from fitrules.jobs.search.inputs import DEFAULT_REFERENCES, default_variables
from fitrules.jobs.search.job import run_search
from fitrules.jobs.search.plan import Plan
from fitrules.jobs.search.result import Search
from fitrules.jobs.search.staging import survivors

__all__ = ["DEFAULT_REFERENCES", "Plan", "Search", "default_variables", "run_search", "survivors"]
