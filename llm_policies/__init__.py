"""Chat models as policies: harnesses, fixed-budget prompts, text actions, a client, the LLM policy.

harness/ (how a decision becomes messages and a reply an action: json, the seed 003
protocol; chat, a conversation; tools, native tool calls), prompts/ (budget: the RCWT
fixed-budget assembly; workflow and dacs: each env's prompts and conversation turns),
families (per env family: answer fields, action conversion, tools, renderer), text_actions
(answers and tool calls to env actions or failure categories), client/ (transport: any
OpenAI-compatible server over httpx; probe: what a server honours; limits, prices, cache:
shared concurrency, cost and reuse; local_server: llama.cpp with the bundled Gemma 3 270M and
SmolLM2 135M, the [local-llm] extra) and policy (LLMPolicy on the shared runner). Token
accounting (offline cl100k_base) is diagym.envs._core.tokens, since env budgets need it too.
"""
