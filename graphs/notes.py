"""Entry point for `langgraph dev`: the notes graph (LangMem's tools on the server's
RecallStore), nothing else."""

from recall.example.notes_graph import build_notes_graph

graph = build_notes_graph()
