"""The example memory-enabled graph (`companion` in langgraph.json, `recall chat`): START fans
out to `retrieve_memories` and two sibling nodes, which join into a `respond` node (a real chat
model, or a labelled offline stand-in), then `store_memories`. May import `recall.nodes` and
the floors below; only `recall.server`, `recall.cli` and `graphs/` import it.
"""
