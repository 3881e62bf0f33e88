"""diagym where its users already work: the envs and the diagnosis as other frameworks' tasks.

`inspect_eval` makes them inspect_ai tasks (`inspect eval diagym/stateful_workflow`), found
through the `inspect_ai` entry point in pyproject.toml, and turns their eval logs back into
diagym run logs for `diagym diagnose --inspect-log`. inspect_ai is the optional extra
`diagym[inspect]` and is imported by that module alone, so nothing else here needs it.
"""
