"""Seed 002's phase 4 as data: the two conditions, and the scenarios (each agent's task, the
decision types it may ask about, and one rubric per expected decision: topic, answer
keywords, the judge's note).

The hints name the kind of decision, never its answer, so the agent has to form its own
question; only the rubric (read by the scorers, never shown to agents or the orchestrator)
names the expected answer. ra1_n3 mirrors the domains of seed 002's ra1_n3; ra2_n5 adds a
graph-algorithm agent and an RL-survey agent on the same pattern.
"""

from __future__ import annotations

from dataclasses import dataclass

# The orchestrator's window: a focus (the requester's full block, the others' registry
# entries) or flat (every agent's full block).
CONDITIONS = ("dacs", "flat")


@dataclass(frozen=True)
class Rubric:
    topic: str
    keywords: tuple[str, ...]
    judge_context: str


@dataclass(frozen=True)
class AgentSpec:
    agent_id: str
    task: str
    hints: str
    rubrics: tuple[Rubric, ...]


@dataclass(frozen=True)
class LiveScenario:
    scenario_id: str
    agents: tuple[AgentSpec, ...]

    @property
    def n_agents(self) -> int:
        return len(self.agents)

    @property
    def n_rubrics(self) -> int:
        return sum(len(a.rubrics) for a in self.agents)


BST = AgentSpec(
    "a1", "Implement a binary search tree in Python with insert, search and traversal.",
    "- which traversal should be the default\n- what insert does with a duplicate value\n"
    "- recursive or iterative core operations",
    (Rubric("traversal_order", ("inorder", "in-order", "in order", "sorted order"),
            "Inorder traversal visits a BST's keys in sorted order; a correct answer "
            "recommends inorder."),
     Rubric("duplicate_handling", ("ignore", "reject", "skip", "discard"),
            "Keys are unique in the usual BST contract; a correct answer recommends ignoring "
            "or rejecting duplicate inserts (any principled, justified choice is acceptable)."),
     Rubric("implementation_style", ("recursive", "recursion"),
            "Recursion mirrors the tree's structure; a correct answer recommends recursive "
            "operations (a caveat on stack depth is fine).")),
)
SURVEY = AgentSpec(
    "a2", "Survey transformer attention mechanisms and their main variants, 2017-2022.",
    "- which paper is the foundational reference\n- which efficient/long-context attention "
    "variants to cover\n- how to settle conflicting empirical claims",
    (Rubric("primary_source", ("vaswani", "attention is all you need", "2017"),
            "Vaswani et al. 2017, 'Attention Is All You Need'; a correct answer names it."),
     Rubric("sparse_variants", ("longformer", "bigbird", "big bird", "reformer", "sparse"),
            "Longformer, BigBird, Reformer (2020); a correct answer names at least one."),
     Rubric("citation_depth", ("primary", "original", "methodology", "authoritative"),
            "Defer to each method's original paper and compare experimental conditions; a "
            "correct answer advises primary sources or careful methodological comparison.")),
)
CSV = AgentSpec(
    "a3", "Design a CSV cleaning pipeline for mixed-encoding files, nulls and outliers.",
    "- how to handle files mixing UTF-8 and Latin-1\n- how to impute missing numeric values\n"
    "- which outlier rule or threshold to use",
    (Rubric("encoding_strategy", ("detect", "chardet", "utf-8", "utf8", "latin", "coerce"),
            "Detect the encoding per file (chardet) or read as UTF-8 with errors='replace', "
            "or coerce to UTF-8; a correct answer does not assume one encoding."),
     Rubric("null_imputation", ("median", "mean", "mode", "impute"),
            "Median (robust to skew), mean or mode imputation; any with a reason is correct."),
     Rubric("outlier_threshold", ("iqr", "z-score", "zscore", "sigma", "percentile", "clip"),
            "3-sigma z-score, 1.5x IQR or percentile clipping; a correct answer names one.")),
)
GRAPH = AgentSpec(
    "a4", "Implement BFS and DFS on a directed graph in Python, with cycle detection.",
    "- which graph representation to use\n- how to detect a cycle in a directed graph\n"
    "- recursive or explicit-stack DFS",
    (Rubric("representation", ("adjacency list", "adjacency-list", "dict of lists"),
            "An adjacency list suits sparse graphs and BFS/DFS; a correct answer recommends "
            "it."),
     Rubric("cycle_detection", ("colour", "color", "white", "gray", "grey", "recursion stack",
                                "back edge"),
            "Three-colour DFS (a back edge to a gray node) or a recursion-stack set; a "
            "correct answer names one of these."),
     Rubric("dfs_style", ("iterative", "explicit stack", "stack"),
            "An explicit stack avoids Python's recursion limit on deep graphs; a correct "
            "answer recommends iterative DFS.")),
)
RL = AgentSpec(
    "a5", "Survey policy-gradient reinforcement learning methods, REINFORCE to PPO.",
    "- which algorithm is the baseline reference\n- which variance-reduction technique to "
    "present\n- which modern algorithm to recommend as the default",
    (Rubric("baseline_algorithm", ("reinforce", "williams"),
            "REINFORCE (Williams 1992) is the reference policy-gradient method."),
     Rubric("variance_reduction", ("baseline", "advantage", "gae", "critic"),
            "A learned baseline / advantage estimate (GAE, actor-critic); a correct answer "
            "names one."),
     Rubric("default_algorithm", ("ppo", "proximal policy"),
            "PPO is the common default; a correct answer recommends PPO.")),
)

SCENARIOS: dict[str, LiveScenario] = {
    "ra1_n3": LiveScenario("ra1_n3", (BST, SURVEY, CSV)),
    "ra2_n5": LiveScenario("ra2_n5", (BST, SURVEY, CSV, GRAPH, RL)),
}
