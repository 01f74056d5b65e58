"""The engine layer: fitting, the guard, intervals, statistics, metrics, the grammar.

Arrays in and out; it imports base and model only."""
