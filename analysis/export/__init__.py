"""Run logs written out in formats other tools score (who_and_when: the Who&When failure
attribution dataset's JSON)."""
