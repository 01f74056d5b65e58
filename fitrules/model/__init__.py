"""The model layer: expressions, forms and their registry, grids and loading, splits."""
