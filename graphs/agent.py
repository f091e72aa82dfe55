"""Entry point for `langgraph dev`: the `create_agent` assistant with RecallMiddleware,
nothing else."""

from recall.example.agent import build_agent

graph = build_agent()
