"""sparkmq broker_api package."""
