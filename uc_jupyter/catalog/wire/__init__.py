"""Unity Catalog's REST shapes, shared by the REST client (:mod:`uc_jupyter.catalog.rest`) and the
server (:mod:`uc_jupyter.ucserver`): our dataclasses as UC's JSON and back (``shapes``, ``read``),
errors as UC's ``error_code`` answers (``errors``), grants and temporary credentials (``grants``,
``storage``)."""
