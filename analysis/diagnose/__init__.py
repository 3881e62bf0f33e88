"""`diagym diagnose`: why an agent's StatefulWorkflow calls failed, read from its trace (the
public task, its actions and the outcomes) rather than from the simulator's hidden state."""
