"""Entry point for `langgraph dev`: the companion graph, nothing else."""

from recall.graph import build_graph

graph = build_graph()
