"""What Onyxia runs, read from the code itself: operators (`operators`) and passes (`passes`), as
`onyxia ops` prints them and as the generated tables of the docs render them (`markdown`).

These are the one source of the docs' operator and pass tables and of the counts quoted in prose:
`tools/docs_tables.py` writes them between markers, and `tests/test_docs_tables.py` fails when a
committed page differs from what this package renders (as `tests/test_settings_doc.py` does for the
settings table).
"""

from onyxia.cli.catalog.operators import Catalog, MissingOp, SupportedOp, operator_catalog
from onyxia.cli.catalog.passes import PassRow, pass_rows

__all__ = ["Catalog", "MissingOp", "PassRow", "SupportedOp", "operator_catalog", "pass_rows"]
