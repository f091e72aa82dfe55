"""Ranking: how candidates become an ordered list, with no I/O.

Owns the retrieval modes (`modes`), keyword query parsing (`keywords`), the calibrated fusion of
vector and keyword evidence (`fusion`, `ranking`) and the optional second stage (`rerank`).
May import the bottom floor only (`recall.config`, `recall.errors`, `recall.memory`).
"""
