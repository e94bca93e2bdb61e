"""Steward: Python access to a local-first personal agent's stores.

Everything here is implemented in Rust (``steward._steward``); this package only re-exports it.
"""

from steward._steward import (
    ConflictError,
    CorruptError,
    DeniedError,
    Human,
    InvalidInputError,
    NotFoundError,
    Steward,
    StewardError,
    Subscription,
    UnavailableError,
    demo_maildir,
    version,
)

__all__ = [
    "ConflictError",
    "CorruptError",
    "DeniedError",
    "Human",
    "InvalidInputError",
    "NotFoundError",
    "Steward",
    "StewardError",
    "Subscription",
    "UnavailableError",
    "demo_maildir",
    "version",
]
