"""sparkmq connectors package."""
