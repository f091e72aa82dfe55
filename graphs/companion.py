"""Entry point for `langgraph dev`: the companion graph, nothing else."""

from recall.example.graph import build_graph

graph = build_graph()
