"""Chat-model agents that steer and are steered: an agent's turn (the STEER and DONE markers it
writes, the system prompt that asks for them, a chat without a system role) and the
orchestrator that answers it as a Policy. The study that plays them is
analysis/studies/dacs_live (seed 002's phase 4)."""
