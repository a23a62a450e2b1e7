"""The default-mode network (plan §4.7): self-generated input for the one cognitive loop."""
