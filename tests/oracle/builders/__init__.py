"""Model builders, one module per family, run inside the oracle venv named by ``VENV``.

Each module sets ``VENV`` (and optionally ``FAMILY``) and registers builders with
``@tests.oracle.tfside.model("name")``: ``fn(export_dir) -> [Case, ...]`` writes a SavedModel
and returns the fixed inputs to run through it. Keep models small (variables well under 5 MB)
and seeded; builders are hashed per module, so editing one rebuilds its module's models.
"""
