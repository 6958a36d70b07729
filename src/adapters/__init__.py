"""Infrastructure: PostgreSQL event store and key store, crypto, embedded PostgreSQL."""
