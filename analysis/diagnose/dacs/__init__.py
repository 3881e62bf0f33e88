"""The DACSSteering diagnosis, held to the rules the workflow diagnosis keeps
(analysis/diagnose/honesty.py): replay.py plays the battery (or reads a run log), replays
every decision and attributes each wrong answer; fit.py fits the window readers, the copy rate
and the fit test; mixture.py weighs per-episode mixtures of two readers; verdicts.py words the
components; diagnosis.py joins them into the DACS side of the one diagnosis contract
(analysis/diagnose/contract.py)."""
