"""Seed 002's phase 4 (`diagym dacs-live`): live chat-model agents steered by a DACS or flat
orchestrator, judged by a chat model beside keywords: design.py (conditions, scenarios),
trial.py (one trial), judge.py (scoring), roles.py (the models), run.py (trials into the run
log), report.py (the table), paired.py (DACS minus flat by decision), figure.py (figure 4)."""
