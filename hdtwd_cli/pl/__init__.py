"""Pictures of what hdtwd learns, scanpy's ``pl`` way (``hd.pl.tree(tree)``).

- :func:`tree` -- the learned feature tree as a dendrogram of its heaviest clades;
- :func:`distance_heatmap` -- a distance matrix, samples ordered by their own tree;
- :func:`classify_report` -- the ``classify`` report, accuracy against k per method;
- :func:`save` -- a figure to ``.png``, ``.svg`` or ``.pdf``, atomically, the same bytes each time.
"""

from hdtwd_cli.pl._pictures import classify_report, distance_heatmap, save, tree

__all__ = ["tree", "distance_heatmap", "classify_report", "save"]
