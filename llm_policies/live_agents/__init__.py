"""Seed 002's phase 4: live chat-model sub-agents that ask the orchestrator for decisions."""
