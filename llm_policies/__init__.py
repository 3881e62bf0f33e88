"""llm_policies package."""
