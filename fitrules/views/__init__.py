"""Views of results: terminal text, HTML for notebooks, markdown report directories and figures.

Every view renders the same result objects (``Comparison``, ``FittedForm``,
``PairedIntervals``, ``Grid``), so numbers cannot disagree between views.
"""
