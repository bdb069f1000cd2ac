"""One Lease per coordination digest of a physical database: the realm."""
