"""The drain parts: real deletions against the alternatives, and every drain configuration."""
