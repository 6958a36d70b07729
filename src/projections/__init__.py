"""Read models built from events. Each can be dropped and rebuilt from the event store."""
