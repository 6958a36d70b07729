"""The application service: commands and queries over memories, for any entry point."""
