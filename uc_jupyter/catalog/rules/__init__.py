"""The catalog's pure rules, shared by both catalogs and the server: names (``catalog.schema.table``,
``/Volumes/...`` paths), privileges (what each securable kind accepts, what implies what), reserved
names. No I/O, nothing stored."""
