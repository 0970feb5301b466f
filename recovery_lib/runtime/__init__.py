"""Running jobs: fault injection hooks (the supervisor builds on them)."""
