"""The one exception type the CLI turns into a one-line error and a non-zero exit."""


class CostModelError(Exception):
    """A user-facing error: bad input, missing or corrupt data, a model that does not fit."""
