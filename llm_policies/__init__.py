"""Chat models as policies: token accounting, fixed-budget prompts, text actions, a client.

budget (RCWT fixed-budget assembly), render_workflow (the
StatefulWorkflow prompt), text_actions (answers to env actions or failure categories), client
(any OpenAI-compatible server over httpx), policy (LLMPolicy on the shared runner),
local_server (llama.cpp with Gemma 3 270M, the [local-llm] extra). Token accounting
(offline cl100k_base) is envs._core.tokens, since env budgets need it too.
"""
