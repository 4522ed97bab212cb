"""The one error of the admission-chain model."""


class ModelError(Exception):
    """A manifest or CRD file the model cannot default: the message names the file and the reason."""
