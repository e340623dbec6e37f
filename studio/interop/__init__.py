"""Live links to other programs: trackers in (VMC, Live Link Face) and outputs (VMC, Live Link Face), Qt-free."""
