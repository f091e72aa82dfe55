"""Memory creation off the hot path: model-written memories, rolling summaries and notes.

Owns what a chat model is asked and how its answers are checked (`extraction`), the
background consolidation of conversations (`consolidate`) and the import of Markdown notes
(`notes`). May import `recall.store` and the floors below it.
"""
