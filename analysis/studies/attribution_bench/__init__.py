"""The attribution benchmark: fault-injected episodes with exact labels (design), played into a
run log with traces and labels and read back (run), scored against diagym's per-decision
attribution (report)."""
