"""The guardian's window: a read-only web view of the mind, served beside it or alone."""
