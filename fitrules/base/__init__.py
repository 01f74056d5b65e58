"""The base layer: errors, limits, outputs and small utilities; it imports nothing of fitrules."""
