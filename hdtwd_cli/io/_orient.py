"""Strong signs that a matrix is features x samples: refused, never read the wrong way silently.

Read the wrong way, a genes x cells table gives gene-gene distances, a different matrix with
nothing to show for it. Two signs are strong enough to refuse (each needs at least two names, and
nine in ten of them matching):

- **sample names that are gene ids**: Ensembl (``ENSG00000141510``, ``ENSMUSG...``, with or
  without a ``.version``), FlyBase (``FBgn0000008``), WormBase (``WBGene00000001``);
- **feature names that are cell barcodes**: 10x's ``AAACCTGAGAAGGCCT-1`` (A/C/G/T/N, 10 or more,
  an optional ``-N`` suffix and an optional ``sample_`` / ``sample:`` prefix).

Either sign, without the matching sign on the other axis, names ``transpose``: add it when the
file is features x samples, drop it when it was given to a file that already is samples x features.
"""

from __future__ import annotations

import re

from hdtwd_cli.errors import InputError

__all__ = ["check_orientation"]

_GENE_ID = re.compile(r"^(?:ENS[A-Z]*G\d{6,}|FBgn\d{7}|WBGene\d{8})(?:\.\d+)?$")
_BARCODE = re.compile(r"^(?:[A-Za-z0-9]+[_:])?[ACGTN]{10,}(?:-\d+)?$")
#: Share of the names that must match a pattern for the sign to count.
SHARE = 0.9


def _mostly(names: list[str] | None, pattern: re.Pattern[str]) -> bool:
    if not names or len(names) < 2:
        return False
    hits = sum(1 for s in names if pattern.match(s))
    return hits >= SHARE * len(names)


def check_orientation(
    *, sample_names: list[str] | None, feature_names: list[str] | None, transposed: bool, path: str
) -> None:
    """Refuse a matrix whose names say it is features x samples (see the module docstring).

    Parameters
    ----------
    sample_names, feature_names : list of str or None
        The names as read (after ``transpose``); None where the file names none.
    transposed : bool
        Whether the caller asked for ``transpose`` (the message says to add or to drop it).
    path : str
        The file, for the message.

    Raises
    ------
    InputError
        Naming ``transpose``, with an example of each sign found.
    """
    genes_as_samples = _mostly(sample_names, _GENE_ID) and not _mostly(feature_names, _GENE_ID)
    cells_as_features = _mostly(feature_names, _BARCODE) and not _mostly(sample_names, _BARCODE)
    if not (genes_as_samples or cells_as_features):
        return
    signs = []
    if genes_as_samples:
        signs.append(f"like gene ids ({sample_names[0]!r}, ...) for the samples")  # type: ignore[index]
    if cells_as_features:
        signs.append(f"like cell barcodes ({feature_names[0]!r}, ...) for the features")  # type: ignore[index]
    what = "names " + " and ".join(signs)
    if transposed:
        raise InputError(
            f"after {{t}}, {what}: the file is samples x features already; drop {{t}}", path, t="transpose"
        )
    raise InputError(f"{what}: the file looks features x samples; add {{t}}", path, t="transpose")
