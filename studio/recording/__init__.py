"""Takes: crash-safe recording of a session, reading, repair, Live Link Face CSV and BVH (no Qt)."""
