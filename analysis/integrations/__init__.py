"""diagym where its users already work: the envs and the diagnosis as other frameworks' tasks.

`inspect_eval` makes them inspect_ai tasks (`inspect eval diagym/stateful_workflow`), found
through the `inspect_ai` entry point in pyproject.toml, and turns their eval logs back into
diagym run logs for `diagym diagnose --inspect-log`. `trl_env` is StatefulWorkflow as an
environment for TRL's GRPOTrainer. `episodes` lists the (kwargs, task seeds) every one of them
plays. Each framework is an optional extra (`diagym[inspect]`, `diagym[trl]`) imported by its
own module alone, so nothing else here needs it (docs/INTEGRATIONS.md).
"""
