"""sparkmq streaming package."""
