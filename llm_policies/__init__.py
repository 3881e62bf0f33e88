"""Chat models as policies: fixed-budget prompts, text actions, a client, the LLM policy.

prompts/ (budget: the RCWT fixed-budget assembly; workflow and dacs: each env's prompt),
families (per env family: answer fields, action conversion, renderer), text_actions (answers
to env actions or failure categories), client/ (transport: any OpenAI-compatible server over
httpx; local_server: llama.cpp with Gemma 3 270M, the [local-llm] extra) and policy
(LLMPolicy on the shared runner). Token accounting (offline cl100k_base) is envs._core.tokens,
since env budgets need it too.
"""
