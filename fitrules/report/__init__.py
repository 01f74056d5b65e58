"""Views of results: terminal text, markdown report directories and figures.

Every view renders the same result objects (``Comparison``, ``FitResult``, ``CIResult``),
so numbers cannot disagree between views.
"""
