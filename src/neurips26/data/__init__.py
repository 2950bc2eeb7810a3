"""Shared data helpers: generators and bundled-data loaders used by more than one paper."""
