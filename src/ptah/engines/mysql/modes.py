"""The sql_mode words that leave how the server reads a statement's text as the
confinement check reads it (quotes, backslashes, where a string ends). One list for the
check, which lets a desired file SET only these (:mod:`.confine`), and for the loading and
inspecting sessions, which keep only these of the server's own defaults
(:func:`ptah.engines.mysql.target.read_as_checked`). Kept apart from both so the
runner's connection path does not import the check's tokenizer."""

from __future__ import annotations

SAFE_MODES = frozenset(
    {
        "REAL_AS_FLOAT",
        "PIPES_AS_CONCAT",
        "IGNORE_SPACE",
        "IGNORE_BAD_TABLE_OPTIONS",
        "ONLY_FULL_GROUP_BY",
        "NO_UNSIGNED_SUBTRACTION",
        "NO_DIR_IN_CREATE",
        "NO_KEY_OPTIONS",
        "NO_TABLE_OPTIONS",
        "NO_FIELD_OPTIONS",
        "MYSQL323",
        "MYSQL40",
        "NO_AUTO_VALUE_ON_ZERO",
        "STRICT_TRANS_TABLES",
        "STRICT_ALL_TABLES",
        "NO_ZERO_IN_DATE",
        "NO_ZERO_DATE",
        "ALLOW_INVALID_DATES",
        "ERROR_FOR_DIVISION_BY_ZERO",
        "TRADITIONAL",
        "NO_AUTO_CREATE_USER",
        "HIGH_NOT_PRECEDENCE",
        "NO_ENGINE_SUBSTITUTION",
        "PAD_CHAR_TO_FULL_LENGTH",
        "EMPTY_STRING_IS_NULL",
        "SIMULTANEOUS_ASSIGNMENT",
        "TIME_ROUND_FRACTIONAL",
    }
)
