"""``CliError``: a failure the user caused or can fix, printed as one line (``main`` catches it)."""


class CliError(Exception):
    """One line for stderr: what is wrong and, where it helps, what to do instead."""
