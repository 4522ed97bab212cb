"""What vgate reads from files at start and on reload: its config and PolicyExceptions, with their schemas."""
